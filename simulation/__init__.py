"""The eosim model: Kafka producers, sender threads and brokers as SimPy processes.

The model knows nothing about checkers: a run produces a history (see
``docs/history-format.md``) and the final partition logs, and ``analysis`` judges them.

Public entry points::

    from eosim.simulation import load_scenario, run_scenario
    result = run_scenario(load_scenario("scenarios/at-least-once.yaml"), seed=7)
"""

from eosim.simulation.runner import RunResult, run_scenario
from eosim.simulation.scenario import Scenario, ScenarioError, load_scenario

__all__ = ["RunResult", "Scenario", "ScenarioError", "load_scenario", "run_scenario"]
