"""eosim: a discrete-event fault-injection simulator for Kafka's delivery guarantees.

Installed, eosim is one package: the model is :mod:`eosim.simulation` (folder ``simulation/``),
the checker, sweeps and reports are :mod:`eosim.analysis` (folder ``analysis/``), and the layer
users touch is :mod:`eosim.api` with :mod:`eosim.cli` over it. Imports go one way, downwards:
cli, then api, then analysis, then simulation (an import-linter contract in pyproject.toml).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosim")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"
