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
    expectation_warnings,
    judgement,
    load,
    parse,
    run,
    timelines,
    unknown_verdict,
    with_time_units,
)
from eosim.simulation import RunResult, ScenarioError


# -- shipped scenarios -----------------------------------------------------------------------
class UnknownScenario(ValueError):
    """Neither a file nor a shipped scenario's name; its text is one line for the user."""


def shipped_scenarios_dir() -> Path | None:
    """Where the scenarios shipped with eosim are: ``eosim/scenarios`` in an installed eosim
    (package data), the source tree's ``scenarios/`` in a checkout; None if neither is."""
    package = Path(__file__).resolve().parent
    installed = package / "scenarios"
    if installed.is_dir():
        return installed
    tree = package.parent
    if (tree / "simulation" / "__init__.py").is_file() and (tree / "scenarios").is_dir():
        return tree / "scenarios"
    return None


def shipped_scenarios() -> dict[str, Path]:
    """Every shipped scenario by name (its file name without ``.yaml``), sorted."""
    directory = shipped_scenarios_dir()
    if directory is None:
        return {}
    return {p.stem: p for p in sorted(directory.glob("*.yaml"), key=lambda p: p.stem)}


def describe_scenario(path: Path) -> str:
    """A scenario's description, first sentence (``eosim scenarios``); empty when it has
    none or cannot be read."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    text = " ".join(str((data or {}).get("description") or "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def find_scenario(text: str) -> str:
    """The scenario file ``text`` names: a path that exists wins; otherwise the name of a
    shipped scenario (``idempotent`` or ``idempotent.yaml``), as its file's path. Anything
    else raises :class:`UnknownScenario` naming the closest shipped scenarios."""
    if Path(text).exists():
        return text
    shipped = shipped_scenarios()
    name = Path(text).name
    stem = name[: -len(Path(name).suffix)] if Path(name).suffix in (".yaml", ".yml") else name
    if text == name and stem in shipped:
        return str(shipped[stem])
    import difflib

    close = difflib.get_close_matches(stem, list(shipped), n=4, cutoff=0.6)
    if text != name and stem in shipped:
        hint = f"the shipped scenario of that name is `eosim run {stem}`"
    elif close:
        hint = f"shipped scenarios with a close name: {', '.join(close)}"
    else:
        hint = "`eosim scenarios` lists the shipped ones"
    raise UnknownScenario(f"{text}: no such file, and no shipped scenario of that name; {hint}")


def copy_scenario(name: str, directory: str | os.PathLike[str] = ".") -> Path:
    """Copy shipped scenario ``name`` into ``directory`` (created if needed) as NAME.yaml;
    never over an existing file. Raises :class:`UnknownScenario` or :class:`FileExistsError`."""
    shipped = shipped_scenarios()
    stem = name[:-5] if name.endswith(".yaml") else name
    if stem not in shipped:
        import difflib

        close = difflib.get_close_matches(stem, list(shipped), n=4, cutoff=0.6)
        hint = f"close names: {', '.join(close)}" if close else "`eosim scenarios` lists them"
        raise UnknownScenario(f"{name}: no shipped scenario of that name; {hint}")
    target = Path(directory) / f"{stem}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:  # exclusive: an existing file is never overwritten
        out.write(shipped[stem].read_bytes())
    return target


def check_file(path: str | os.PathLike[str]) -> tuple[History, CheckResult]:
    """Load a history file and run every check on it (delivery and transactional)."""
    history = load_history(path)
    return history, check_history(history)


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
        if self.check.unknown is not None:
            return unknown_verdict(self.check.unknown)
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
    counts and its sends' counts. A history with nothing to check (an empty file, or no
    write acknowledged and no record read or logged) has ``check.unknown`` set and its
    expectations not met; ``HistoryError`` if malformed."""
    source = os.fspath(path)
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    history = load_any_history(path)
    for key in expect or {}:
        if key in NOT_IN_A_HISTORY:
            raise ValueError(f"{key}: {NOT_IN_A_HISTORY[key]}")
    result = check_history(history)
    if result.unknown is not None and Path(path).stat().st_size == 0:
        result.unknown = "the file is empty"
    observed = {name: a.count for name, a in result.anomalies.items()} | result.counts
    judged = dict(expect) if expect else dict.fromkeys(ALL_ANOMALIES, 0)
    expected = evaluate(judged, observed, result.unknown)
    return Checked(source, history, result, expected, bool(expect), digest.hexdigest())


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


# -- where runs go ----------------------------------------------------------------------------
DEFAULT_KAFKA_VERSION = "4.1.1"


def kafka_install(
    version: str | None = None,
    kafka_home: str | None = None,
    progress: Any = None,
) -> Any:
    """Apache Kafka's jars and eosim's workload driver, fetched with Maven on first use (or
    taken from ``kafka_home`` / ``KAFKA_HOME``); :class:`eosim.real.install.InstallError`, one
    line, when that cannot be done."""
    from eosim.real.install import install

    home = kafka_home or os.environ.get("KAFKA_HOME") or None
    return install(version or DEFAULT_KAFKA_VERSION, kafka_home=home, progress=progress)


def target(
    name: str,
    *,
    kafka_version: str | None = None,
    kafka_home: str | None = None,
    workdir: str | None = None,
) -> Any:
    """The target called ``name``: ``model`` or ``kafka`` (a local cluster of Apache Kafka,
    installed on first use). A kafka target must be closed (use it in a ``with``)."""
    from eosim.real.target import MODEL, KafkaTarget

    if name == "model":
        return MODEL
    if name == "kafka":
        return KafkaTarget(kafka_install(kafka_version, kafka_home), workdir)
    raise ValueError(f"unknown target {name!r}: model or kafka")


__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "FAULT_TIME_KEYS",
    "Checked",
    "Outcome",
    "ScenarioError",
    "UnknownScenario",
    "check",
    "check_file",
    "copy_scenario",
    "cut_by_duration",
    "describe_scenario",
    "expectation_warnings",
    "find_scenario",
    "judgement",
    "kafka_install",
    "load",
    "parse",
    "run",
    "shipped_scenarios",
    "shipped_scenarios_dir",
    "target",
    "timelines",
    "with_time_units",
    "write_history",
]
