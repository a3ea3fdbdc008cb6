"""eosim: a discrete-event fault-injection simulator for Kafka's delivery guarantees.

Installed, eosim is one package: the model is :mod:`eosim.simulation` (folder ``simulation/``),
the checker, sweeps and reports are :mod:`eosim.analysis` (folder ``analysis/``), and the layer
users touch is :mod:`eosim.api` with :mod:`eosim.cli` over it. Imports go one way, downwards:
cli, then api, then analysis, then simulation (an import-linter contract in pyproject.toml).
"""

import os
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosim")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

# A source tree put on sys.path (``PYTHONPATH=/path/to/checkout``) has ``simulation/`` and
# ``analysis/`` beside this folder, not inside it; look for the subpackages there too, so that
# the checkout's own model is the one imported, whatever else is installed.
_tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(__path__[0], "simulation")) and os.path.isfile(
    os.path.join(_tree, "simulation", "__init__.py")
):
    __path__.append(_tree)
