"""The Python API behind the CLI: load a scenario, run it, check it, judge expectations."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosim.analysis import timeline
from eosim.analysis.checks import ALL_ANOMALIES, CheckResult, check_history
from eosim.analysis.expect import (
    EXPECTABLE,
    SWEEP_EXPECTABLE,
    Condition,
    ExpectResult,
    evaluate,
    rate_key_problem,
    unknown_expect_key,
)
from eosim.analysis.history import History, history_from_records, load_history
from eosim.analysis.jepsen import load_any_history
from eosim.analysis.timeline import Timeline
from eosim.simulation import RunResult, Scenario, ScenarioError, load_scenario, run_scenario
from eosim.simulation.runner import Progress
from eosim.simulation.scenario import parse_scenario
from eosim.simulation.trace import trace_records


def load(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> Scenario:
    """Load and validate a scenario, including the keys of its ``expect:`` block."""
    return _expectable(load_scenario(path, overrides), os.fspath(path))


def parse(text: str, source: str, overrides: Iterable[str] = ()) -> Scenario:
    """:func:`load` for scenario text already read (a sweep's variants)."""
    return _expectable(parse_scenario(text, source, overrides), source)


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
        "cut_by_duration": cut_by_duration(history),
        "expect": expect.to_dict(),
    }


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
        return "expectations met" if self.expect.met else "EXPECTATIONS NOT MET"

    def to_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "scenario": r.scenario,
            "seed": r.seed,
            "sim_time_s": round(r.sim_time_s, 6),
            "events": r.events,
            "wall_time_s": round(r.wall_time_s, 4),
            **judgement(r.counts, self.check, self.expect, self.history),
            "verdict": self.verdict,
            "faults": [
                {FAULT_TIME_KEYS.get(k, k): v for k, v in f.to_dict().items()} for f in r.faults
            ],
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
    progress: Progress | None = None,
) -> Outcome:
    """Run and check. ``trace`` also records every message, for :func:`timelines`;
    ``progress`` is called as the run goes (:data:`eosim.simulation.runner.Progress`)."""
    result = run_scenario(scenario, seed, trace=trace, progress=progress)
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


class NothingToCheck(ValueError):
    """A history file without a single op, log or replica line."""


# What `eosim check --expect` cannot judge, with the reason.
NOT_IN_A_HISTORY = {
    "errored": "counted by eosim run (operations its clients completed with an exception); "
    "a history does not record it"
}


@dataclass
class Checked:
    """A checked history file. Without an ``expect`` of its own it is judged against "every
    anomaly 0" (``expected`` False), so ``expect.met`` is also the exit code's rule."""

    source: str
    history: History
    check: CheckResult
    expect: ExpectResult
    expected: bool
    sha256: str

    @property
    def verdict(self) -> str:
        if self.expected:
            return "expectations met" if self.expect.met else "EXPECTATIONS NOT MET"
        found = [name for name, a in self.check.anomalies.items() if a.count]
        return f"anomalies found: {', '.join(found)}" if found else "no anomalies"

    def to_dict(self) -> dict[str, Any]:
        return {
            "history": self.source,
            **judgement(self.check.counts, self.check, self.expect, self.history),
            "verdict": self.verdict,
            "history_sha256": self.sha256,
        }


def check(path: str | os.PathLike[str], expect: Mapping[str, int | str] | None = None) -> Checked:
    """Check a history file and judge ``expect`` (default: every anomaly 0) on its anomaly
    counts and its sends' counts. :class:`NothingToCheck` if it has no op, log or replica
    line; ``HistoryError`` if malformed."""
    source = os.fspath(path)
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    history = load_any_history(path)
    if not (history.ops or history.logs or history.replicas):
        empty = Path(path).stat().st_size == 0
        what = "the file is empty" if empty else "no op, log or replica line"
        raise NothingToCheck(f"{source}: nothing to check: {what}")
    for key in expect or {}:
        if key in NOT_IN_A_HISTORY:
            raise ValueError(f"{key}: {NOT_IN_A_HISTORY[key]}")
    result = check_history(history)
    observed = {name: a.count for name, a in result.anomalies.items()} | result.counts
    judged = dict(expect) if expect else dict.fromkeys(ALL_ANOMALIES, 0)
    return Checked(
        source, history, result, evaluate(judged, observed), bool(expect), digest.hexdigest()
    )


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


__all__ = [
    "Checked",
    "NothingToCheck",
    "Outcome",
    "ScenarioError",
    "check",
    "check_file",
    "judgement",
    "load",
    "parse",
    "run",
    "write_history",
]
