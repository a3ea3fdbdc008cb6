"""The Python API behind the CLI: load a scenario, run it, check it, judge expectations.

Running and judging a scenario is :mod:`eosim.analysis.outcome` (re-exported here: ``load``,
``parse``, ``run``, ``Outcome``, ``timelines``); checking a history file and writing one are
defined here. Nothing below this module imports it."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosim.analysis.checks import ALL_ANOMALIES, CheckResult, check_history
from eosim.analysis.expect import ExpectResult, evaluate
from eosim.analysis.history import History, load_history
from eosim.analysis.jepsen import load_any_history
from eosim.analysis.outcome import (
    FAULT_TIME_KEYS,
    Outcome,
    cut_by_duration,
    judgement,
    load,
    parse,
    run,
    timelines,
    with_time_units,
)
from eosim.simulation import RunResult, ScenarioError


def check_file(path: str | os.PathLike[str]) -> tuple[History, CheckResult]:
    """Load a history file and run every check on it (delivery and transactional)."""
    history = load_history(path)
    return history, check_history(history)


class NothingToCheck(ValueError):
    """A history file without a single op, log or replica line."""


# What `eosim check --expect` cannot judge, with the reason (nothing today: `errored` is
# counted from the history's errors, as `eosim run` counts it).
NOT_IN_A_HISTORY: dict[str, str] = {}


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
    "FAULT_TIME_KEYS",
    "Checked",
    "NothingToCheck",
    "Outcome",
    "ScenarioError",
    "check",
    "check_file",
    "cut_by_duration",
    "judgement",
    "load",
    "parse",
    "run",
    "timelines",
    "with_time_units",
    "write_history",
]
