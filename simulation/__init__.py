"""The eosim model: Kafka producers, sender threads and brokers as SimPy processes.

The model knows nothing about checkers: a run produces a history (see
``docs/history-format.md``) and the final partition logs, and ``analysis`` judges them.

Public entry points::

    from eosim.simulation import load_scenario, run_scenario
    result = run_scenario(load_scenario("scenarios/at-least-once.yaml"), seed=7)

They are imported on first use, so that a module that needs only part of the package (the
history recorder's types, say, for reading a history file) does not load the whole model.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eosim.simulation.runner import RunResult, run_scenario
    from eosim.simulation.scenario import Scenario, ScenarioError, load_scenario

_HOMES = {
    "RunResult": "eosim.simulation.runner",
    "run_scenario": "eosim.simulation.runner",
    "Scenario": "eosim.simulation.scenario",
    "ScenarioError": "eosim.simulation.scenario",
    "load_scenario": "eosim.simulation.scenario",
}

__all__ = ["RunResult", "Scenario", "ScenarioError", "load_scenario", "run_scenario"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'eosim.simulation' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
