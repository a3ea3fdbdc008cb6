"""eosim: a discrete-event fault-injection simulator for Kafka's delivery guarantees.

This package is the thin layer users touch: :mod:`eosim.api` joins the model
(:mod:`simulation`) to the checker (:mod:`analysis`), and :mod:`eosim.cli` puts a command
line over it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosim")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"
