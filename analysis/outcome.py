"""One checked run of a scenario: the model's entry point, then every check, then the scenario's
``expect:`` judged on the counts.

This is how everything above the model runs a scenario: sweeps (:mod:`eosim.analysis.sweep`),
shrinking, replay and the report's timelines call :func:`run` here, and :mod:`eosim.api` re-exports
it for users. It depends on the model (:func:`eosim.simulation.run_scenario`) and on the checks
beside it, never on the command line or the API above.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eosim.analysis import timeline
from eosim.analysis.checks import CheckResult, check_history
from eosim.analysis.expect import (
    EXPECTABLE,
    SWEEP_EXPECTABLE,
    Condition,
    ExpectResult,
    always_holding,
    evaluate,
    rate_key_problem,
    unknown_expect_key,
)
from eosim.analysis.history import History, history_from_recorder
from eosim.analysis.timeline import Timeline
from eosim.real.target import MODEL, Target
from eosim.simulation import RunResult, Scenario, ScenarioError, load_scenario
from eosim.simulation.limits import bearing
from eosim.simulation.runner import Progress
from eosim.simulation.scenario import parse_scenario
from eosim.simulation.trace import state_change_records, trace_records


def load(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> Scenario:
    """Load and validate a scenario, including the keys of its ``expect:`` block."""
    return _expectable(load_scenario(path, overrides), os.fspath(path))


def parse(text: str, source: str, overrides: Iterable[str] = ()) -> Scenario:
    """:func:`load` for scenario text already read (a sweep's variants)."""
    return _expectable(parse_scenario(text, source, overrides), source)


def expectation_warnings(scenario: Scenario) -> list[str]:
    """A warning for each expectation of the scenario that can never fail (``'>=0'``: see
    :attr:`eosim.simulation.conditions.Condition.always_holds`), in ``expect:`` and
    ``expect_sweep:``; ``eosim validate`` and ``eosim run`` print them."""
    return [
        *always_holding(scenario.expect, "expect"),
        *always_holding(scenario.expect_sweep, "expect_sweep"),
    ]


def _expectable(scenario: Scenario, source: str) -> Scenario:
    blocks = (
        ("expect", scenario.expect, EXPECTABLE),
        ("expect_sweep", scenario.expect_sweep, SWEEP_EXPECTABLE),
    )
    for block, expect, valid in blocks:
        for key, value in expect.items():
            problem = unknown_expect_key(key, valid) or rate_key_problem(
                key, Condition.parse(value)
            )
            if problem is not None:
                raise ScenarioError(f"{source}: {block}.{key}: {problem}")
    return scenario


# Every time in the JSON of `eosim run` and `eosim check` names its unit in its key: the run's
# simulated and wall times in seconds (`sim_time_s`, `wall_time_s`, as in a sweep's rows), and
# the times taken from the history, which are milliseconds there, with `_ms` (`start_ms` of a
# fault, `time_ms` and `invoke_time_ms` of an example).
FAULT_TIME_KEYS = {"start": "start_ms", "end": "end_ms", "extra_latency": "extra_latency_ms"}


def with_time_units(value: Any) -> Any:
    """``value`` (an anomaly's examples) with every history time key (``time`` or ending in
    ``_time``, milliseconds in the history) renamed to end in ``_ms``."""
    if isinstance(value, dict):
        return {
            (f"{k}_ms" if k == "time" or k.endswith("_time") else k): with_time_units(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [with_time_units(v) for v in value]
    return value


def judgement(
    counts: Mapping[str, int], check: CheckResult, expect: ExpectResult, history: History
) -> dict[str, Any]:
    """The fields `eosim run --json` and `eosim check --json` share, under the same names."""
    return {
        "counts": dict(counts),
        "anomalies": {name: a.count for name, a in check.anomalies.items()},
        "examples": {
            name: with_time_units(a.examples) for name, a in check.anomalies.items() if a.count
        },
        "notes": list(check.notes),
        "unknown": check.unknown,
        "cut_by_duration": cut_by_duration(history),
        "expect": expect.to_dict(),
    }


def unknown_verdict(reason: str) -> str:
    """The verdict of a run or history that had nothing to check: neither "no anomalies" nor
    "expectations met"."""
    return f"UNKNOWN: nothing to check ({reason})"


def cut_by_duration(history: History) -> bool:
    """Whether the run stopped at its scenario's duration before its workload finished."""
    return history.end is not None and history.end.cut_by_duration


@dataclass
class Outcome:
    """One checked run; ``check.anomalies`` holds every name in ``ALL_ANOMALIES``."""

    scenario: Scenario
    run: RunResult
    history: History
    check: CheckResult
    expect: ExpectResult
    command: str

    @property
    def verdict(self) -> str:
        if self.run.invalid:
            n = len(self.run.invalid)
            return f"INVALID: the run did not prove what it claims ({n} reason(s) above)"
        if self.check.unknown is not None:
            return unknown_verdict(self.check.unknown)
        return "expectations met" if self.expect.met else "EXPECTATIONS NOT MET"

    @property
    def warnings(self) -> list[str]:
        """The scenario's configuration warnings (``Scenario.warnings``: the clients' and the
        scenario's own, as ``eosim validate`` prints them), then the run's, without repeats."""
        return list(dict.fromkeys([*self.scenario.warnings(), *self.run.warnings]))

    @property
    def limits(self) -> list[str]:
        """The model's known biases that bear on this scenario
        (:func:`eosim.simulation.limits.bearing`); none for a real cluster's run."""
        if self.run.history.meta.get("target") is not None:
            return []
        return bearing(self.scenario)

    @property
    def counts(self) -> dict[str, int]:
        """The run's operations counted from its history, as ``eosim check`` counts a history
        file (:func:`eosim.analysis.history.op_counts`)."""
        return self.check.counts

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "scenario": r.scenario,
            "seed": r.seed,
            "sim_time_s": round(r.sim_time_s, 6),
            "events": r.events,
            "wall_time_s": round(r.wall_time_s, 4),
            **judgement(self.counts, self.check, self.expect, self.history),
            "verdict": self.verdict,
            "faults": [
                {FAULT_TIME_KEYS.get(k, k): v for k, v in f.to_dict().items()} for f in r.faults
            ],
            "warnings": self.warnings,
            "invalid": list(r.invalid),
            "limits": self.limits,
            "stats": r.stats,
            "history_sha256": r.history.digest(),
            "replay": self.command,
        }


def run(
    scenario: Scenario,
    seed: int | None = None,
    *,
    source: str = "SCENARIO",
    overrides: Iterable[str] = (),
    trace: bool = False,
    progress: Progress | None = None,
    target: Target | None = None,
) -> Outcome:
    """Run and check. ``trace`` also records every message, for :func:`timelines`;
    ``progress`` is called as the run goes (:data:`eosim.simulation.runner.Progress`).
    ``target`` is where the scenario runs (:mod:`eosim.real.target`; default: the model)."""
    where = target if target is not None else MODEL
    result = where.run(
        scenario, scenario.seed if seed is None else seed, trace=trace, progress=progress
    )
    result.warnings[:0] = expectation_warnings(scenario)
    history = history_from_recorder(result.history, source=scenario.name)
    verdict = check_history(history)
    observed = {name: a.count for name, a in verdict.anomalies.items()} | verdict.counts
    command = replay_command(source, result.seed, overrides, where.name)
    expect = evaluate(scenario.expect, observed, verdict.unknown)
    return Outcome(scenario, result, history, verdict, expect, command)


def replay_command(
    source: str, seed: int, overrides: Iterable[str] = (), target: str = "model"
) -> str:
    """The command that replays one run, quoted for a POSIX shell (a value such as ``>0`` or
    ``[{kind: crash}]`` must not become a redirect or a glob when pasted). A real cluster's
    run is run again with the same seed's faults; it is not replayed exactly."""
    sets = "".join(f" --set {shlex.quote(o)}" for o in overrides)
    where = "" if target == "model" else f" --target {target}"
    return f"eosim run {shlex.quote(source)} --seed {seed}{sets}{where}"


def timelines(outcome: Outcome) -> list[Timeline]:
    """One timeline per anomaly type found, around its first example (needs ``trace=True``);
    a lost write's tells what happened to its partition, from the run's state changes."""
    if outcome.run.trace is None:
        raise ValueError("timelines need a run made with trace=True")
    trace = trace_records(outcome.run.trace)
    history = list(outcome.run.history.records())
    changes = outcome.run.state_changes
    states = state_change_records(changes) if changes is not None else None
    return [
        timeline.build(name, a.examples[0], trace, history, states)
        for name, a in outcome.check.anomalies.items()
        if a.count and a.examples
    ]
