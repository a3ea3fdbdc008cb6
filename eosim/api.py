"""The Python API behind the CLI: load a scenario, run it, check it, judge expectations."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import timeline
from analysis.checks import CheckResult, check_history
from analysis.expect import ExpectResult, evaluate, unknown_expect_key
from analysis.history import History, history_from_records, load_history
from analysis.timeline import Timeline
from simulation import RunResult, Scenario, ScenarioError, load_scenario, run_scenario
from simulation.scenario import parse_scenario
from simulation.trace import trace_records


def load(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> Scenario:
    """Load and validate a scenario, including the keys of its ``expect:`` block."""
    return _expectable(load_scenario(path, overrides), os.fspath(path))


def parse(text: str, source: str, overrides: Iterable[str] = ()) -> Scenario:
    """:func:`load` for scenario text already read (a sweep's variants)."""
    return _expectable(parse_scenario(text, source, overrides), source)


def _expectable(scenario: Scenario, source: str) -> Scenario:
    for key in scenario.expect:
        problem = unknown_expect_key(key)
        if problem is not None:
            raise ScenarioError(f"{source}: expect.{key}: {problem}")
    return scenario


@dataclass
class Outcome:
    """One checked run; ``check.anomalies`` holds every name in ``ALL_ANOMALIES``."""

    scenario: Scenario
    run: RunResult
    history: History
    check: CheckResult
    expect: ExpectResult
    command: str

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "scenario": r.scenario,
            "seed": r.seed,
            "sim_time_s": round(r.sim_time_s, 6),
            "events": r.events,
            "wall_time_s": round(r.wall_time_s, 4),
            "counts": r.counts,
            "anomalies": {name: a.count for name, a in self.check.anomalies.items()},
            "examples": {name: a.examples for name, a in self.check.anomalies.items() if a.count},
            "expect": self.expect.to_dict(),
            "faults": [f.to_dict() for f in r.faults],
            "warnings": r.warnings,
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
) -> Outcome:
    """Run and check. ``trace`` also records every message, for :func:`timelines`."""
    result = run_scenario(scenario, seed, trace=trace)
    history = history_from_records(result.history.records(), source=scenario.name)
    verdict = check_history(history)
    observed = {name: a.count for name, a in verdict.anomalies.items()} | result.counts
    sets = "".join(f" --set {o}" for o in overrides)
    command = f"eosim run {source} --seed {result.seed}{sets}"
    return Outcome(scenario, result, history, verdict, evaluate(scenario.expect, observed), command)


def timelines(outcome: Outcome) -> list[Timeline]:
    """One timeline per anomaly type found, around its first example (needs ``trace=True``)."""
    if outcome.run.trace is None:
        raise ValueError("timelines need a run made with trace=True")
    trace = trace_records(outcome.run.trace)
    history = list(outcome.run.history.records())
    return [
        timeline.build(name, a.examples[0], trace, history)
        for name, a in outcome.check.anomalies.items()
        if a.count and a.examples
    ]


def check_file(path: str | os.PathLike[str]) -> tuple[History, CheckResult]:
    """Load a history file and run every check on it (delivery and transactional)."""
    history = load_history(path)
    return history, check_history(history)


def write_history(result: RunResult, path: str | os.PathLike[str]) -> None:
    """Write the history atomically: a reader never sees half a file, and a failed write
    leaves any existing file untouched."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            result.history.write(stream)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["Outcome", "ScenarioError", "check_file", "load", "parse", "run", "write_history"]
