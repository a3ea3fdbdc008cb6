"""Shrinking a failing run to a minimal scenario that still fails the same way.

1. Run the scenario with its seed, recording every message, and pick the anomaly.
2. Make the faults explicit. The nemesis's realised schedule becomes scheduled faults, and
   every message lost to random network loss becomes a loss window of +-100 ns on its
   directed link (loss has its own random stream, so every latency draw stays the same).
   Random loss is then switched off. The explicit scenario must still show the anomaly;
   if it does not, shrinking stops with an error rather than shrink something else.
3. Shrink, keeping every step that still shows the anomaly: fewer records; delta debugging
   (ddmin) over the fault list; shorter fault windows; fewer partitions; fewer producers;
   fewer records again.
4. Make the schedule readable: every fault's window is widened outwards to whole
   milliseconds, at least ``MIN_WINDOW_MS`` long, and written as ``250ms``, ``1.5s`` or
   ``2m``. Kafka's clients and brokers keep time in whole milliseconds (every timeout and
   backoff is a ms setting), so a shorter window is no fault one could inject or observe in a
   real cluster; the model's sub-millisecond times come from its latency draws. The rounded
   schedule must still show the anomaly; a window whose rounding loses it keeps its exact
   value, and the shrinker says so.

Every step is deterministic (same input, same output), and every candidate is a complete
scenario validated like a user's, so the result is a standalone YAML file that
``eosim run`` reproduces.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eosim.analysis.checks import ALL_ANOMALIES

POINT_MS = 1e-4  # half-width of the window that stands for one lost message
# The shortest fault window a shrunk scenario states: Kafka's time unit (see the module doc).
MIN_WINDOW_MS = 1.0


class ShrinkError(ValueError):
    """Nothing to shrink, or the run cannot be made explicit (one line, for the user)."""


@dataclass
class ShrinkResult:
    anomaly: str
    scenario: dict[str, Any]
    runs: int
    start_faults: int
    end_faults: int
    start_records: int
    end_records: int
    count: int
    steps: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        return yaml.safe_dump(self.scenario, sort_keys=False, width=100)


class _Oracle:
    """Runs candidate scenarios; remembers answers so no candidate runs twice."""

    def __init__(self, source: str, seed: int, anomaly: str) -> None:
        self.source = source
        self.seed = seed
        self.anomaly = anomaly
        self.runs = 0
        self._memo: dict[str, int] = {}

    def count(self, raw: dict[str, Any]) -> int:
        from eosim.analysis import outcome as checked
        from eosim.simulation.scenario import ScenarioError, validate_scenario

        key = yaml.safe_dump(raw, sort_keys=True)
        if key in self._memo:
            return self._memo[key]
        try:
            scenario = validate_scenario(raw, self.source)
        except ScenarioError:
            self._memo[key] = 0
            return 0
        self.runs += 1
        outcome = checked.run(scenario, self.seed)
        found = outcome.check.anomalies[self.anomaly].count
        self._memo[key] = found
        return found

    def fails(self, raw: dict[str, Any]) -> bool:
        return self.count(raw) > 0


def explicit_faults(outcome: Any) -> list[dict[str, Any]]:
    from eosim.simulation.trace import lost_messages

    faults = [event.to_spec() for event in outcome.run.faults]
    for time, src, dst in lost_messages(outcome.run.trace):
        faults.append(
            {
                "kind": "loss",
                "links": [[src, dst]],
                "at": round(max(time - POINT_MS, 0.0), 6),
                "duration": round(2 * POINT_MS, 6),
                "probability": 1.0,
            }
        )
    faults.sort(key=lambda f: (f["at"], f["kind"]))
    return faults


def ddmin(items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """Zeller's delta debugging: a 1-minimal sublist on which ``fails`` still holds."""
    n = 2
    while len(items) >= 2:
        size = len(items) // n
        chunks = [items[i : i + size] for i in range(0, len(items), size)] if size else []
        reduced = False
        for i, chunk in enumerate(chunks):
            if fails(chunk):
                items, n, reduced = chunk, 2, True
                break
            complement = [x for j, c in enumerate(chunks) if j != i for x in c]
            if fails(complement):
                items, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(n * 2, len(items))
    if len(items) == 1 and fails([]):
        return []
    return items


def shrink(
    scenario_path: str,
    seed: int,
    anomaly: str | None = None,
    overrides: tuple[str, ...] = (),
    log: Callable[[str], None] = lambda _msg: None,
) -> ShrinkResult:
    from eosim.analysis import outcome as checked
    from eosim.simulation.scenario import apply_override

    if anomaly is not None and anomaly not in ALL_ANOMALIES:
        raise ShrinkError(f"--anomaly {anomaly}: unknown; choose one of {', '.join(ALL_ANOMALIES)}")
    scenario = checked.load(scenario_path, overrides)
    outcome = checked.run(scenario, seed, trace=True)
    found = [n for n, a in outcome.check.anomalies.items() if a.count]
    if anomaly is None:
        if not found:
            raise ShrinkError(f"{scenario_path} with seed {seed} shows no anomaly to shrink")
        anomaly = found[0]
    elif anomaly not in found:
        raise ShrinkError(f"{scenario_path} with seed {seed} shows no {anomaly}")

    raw = yaml.safe_load(Path(scenario_path).read_text(encoding="utf-8"))
    for override in overrides:
        apply_override(raw, override)
    raw["seed"] = seed
    raw.setdefault("network", {})
    raw["network"]["request_loss"] = 0.0
    raw["network"]["response_loss"] = 0.0
    raw["faults"] = explicit_faults(outcome)
    raw["expect"] = {anomaly: ">0"}
    oracle = _Oracle(scenario_path, seed, anomaly)
    start_faults = len(raw["faults"])
    start_records = sum(p["workload"]["records"] for p in raw["producers"])
    if not oracle.fails(raw):
        raise ShrinkError(
            f"the explicit fault schedule ({start_faults} faults) does not reproduce {anomaly}; "
            "this is a bug in eosim, please report it with the scenario and seed"
        )
    steps = [f"explicit schedule of {start_faults} faults reproduces {anomaly}"]
    log(steps[-1])

    raw = _fewer_records(raw, oracle, steps, log)
    faults = ddmin(raw["faults"], lambda fs: oracle.fails(_with(raw, faults=fs)))
    raw = _with(raw, faults=faults)
    steps.append(f"delta debugging kept {len(faults)} of {start_faults} faults")
    log(steps[-1])
    raw = _shorter_windows(raw, oracle, steps, log)
    raw = _fewer_partitions(raw, oracle, steps, log)
    raw = _fewer_producers(raw, oracle, steps, log)
    raw = _fewer_records(raw, oracle, steps, log)
    raw = _readable_windows(raw, oracle, steps, log)

    raw["name"] = f"{raw.get('name', 'scenario')}-shrunk"
    raw["description"] = (
        f"Shrunk by eosim from {scenario_path} with seed {seed} ({oracle.runs} runs): "
        f"{len(raw['faults'])} explicit faults still produce {anomaly}."
    )
    end_records = sum(p["workload"]["records"] for p in raw["producers"])
    count = oracle.count(raw)
    if not count:
        raise ShrinkError(
            f"the shrunk scenario no longer reproduces {anomaly}; "
            "this is a bug in eosim, please report it with the scenario and seed"
        )
    return ShrinkResult(
        anomaly,
        _ordered(raw),
        oracle.runs,
        start_faults,
        len(raw["faults"]),
        start_records,
        end_records,
        count,
        steps,
    )


def _with(raw: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out.update(changes)
    return out


def _fewer_records(raw, oracle, steps, log):  # type: ignore[no-untyped-def]
    for i in range(len(raw["producers"])):
        records = raw["producers"][i]["workload"]["records"]
        best = records
        low, high = 1, records  # find the smallest count that still fails (bisection)
        while low < high:
            mid = (low + high) // 2
            candidate = copy.deepcopy(raw)
            candidate["producers"][i]["workload"]["records"] = mid
            if oracle.fails(candidate):
                high = best = mid
            else:
                low = mid + 1
        if best < records:
            raw = copy.deepcopy(raw)
            raw["producers"][i]["workload"]["records"] = best
            steps.append(f"{raw['producers'][i]['name']}: {records} -> {best} records")
            log(steps[-1])
    return raw


def _shorter_windows(raw, oracle, steps, log):  # type: ignore[no-untyped-def]
    shortened = 0
    for i, fault in enumerate(raw["faults"]):
        duration = float(fault["duration"])
        while duration / 2 >= MIN_WINDOW_MS:
            candidate = copy.deepcopy(raw)
            candidate["faults"][i]["duration"] = round(duration / 2, 6)
            if not oracle.fails(candidate):
                break
            raw, duration = candidate, duration / 2
            shortened += 1
    if shortened:
        steps.append(f"fault windows halved {shortened} times")
        log(steps[-1])
    return raw


def format_ms(ms: float) -> str:
    """A time in the scenario's readable units: ``250ms``, ``1.5s``, ``2m``. Seconds and
    minutes only when they read back as exactly the same number of milliseconds."""
    if ms >= 60_000 and ms % 60_000 == 0:
        return f"{int(ms // 60_000)}m"
    if ms >= 1000:
        seconds = _trim(ms / 1000, 9)
        if float(seconds) * 1000 == ms:
            return f"{seconds}s"
    return f"{_trim(ms, 6)}ms"


def _trim(x: float, places: int) -> str:
    text = f"{x:.{places}f}".rstrip("0").rstrip(".")
    return text or "0"


def _widened(fault: dict[str, Any]) -> dict[str, Any]:
    """The fault with its window widened outwards to whole milliseconds, at least
    ``MIN_WINDOW_MS`` long: it still covers every instant the exact window covered."""
    at = float(fault["at"])
    start = math.floor(at)
    end = max(math.ceil(at + float(fault["duration"])), start + MIN_WINDOW_MS)
    return fault | {"at": format_ms(start), "duration": format_ms(end - start)}


def _exact(fault: dict[str, Any]) -> dict[str, Any]:
    return fault | {"at": format_ms(float(fault["at"])), "duration": format_ms(fault["duration"])}


def _readable_windows(raw, oracle, steps, log):  # type: ignore[no-untyped-def]
    faults = raw["faults"]
    widened = [_widened(f) for f in faults]
    candidate = _with(raw, faults=widened)
    if oracle.fails(candidate):
        steps.append(f"fault windows written in whole ms, none under {format_ms(MIN_WINDOW_MS)}")
        log(steps[-1])
        return candidate
    # Together they lose the anomaly: widen one window at a time, keeping what still fails.
    current = [_exact(f) for f in faults]
    exact = []
    for i, fault in enumerate(widened):
        trial = [*current[:i], fault, *current[i + 1 :]]
        if oracle.fails(_with(raw, faults=trial)):
            current = trial
        else:
            exact.append(f"{faults[i]['kind']} at {current[i]['at']}")
    steps.append(
        f"fault windows written in whole ms, except {len(exact)} kept exact because widening "
        f"them loses the anomaly: {'; '.join(exact)}"
    )
    log(steps[-1])
    return _with(raw, faults=current)


def _fewer_partitions(raw, oracle, steps, log):  # type: ignore[no-untyped-def]
    for i, topic in enumerate(raw["cluster"]["topics"]):
        n = topic["partitions"]
        for target in sorted({1, n // 2, n - 1} - {n}):
            candidate = copy.deepcopy(raw)
            candidate["cluster"]["topics"][i]["partitions"] = target
            if target >= 1 and oracle.fails(candidate):
                raw = candidate
                steps.append(f"topic {topic['name']}: {n} -> {target} partitions")
                log(steps[-1])
                break
    return raw


def _fewer_producers(raw, oracle, steps, log):  # type: ignore[no-untyped-def]
    for p in [p["name"] for p in raw["producers"]]:
        if len(raw["producers"]) == 1:
            break
        candidate = copy.deepcopy(raw)
        candidate["producers"] = [q for q in candidate["producers"] if q["name"] != p]
        candidate["faults"] = [f for f in candidate["faults"] if not _mentions(f, p)]
        if oracle.fails(candidate):
            raw = candidate
            steps.append(f"removed producer {p}")
            log(steps[-1])
    return raw


def _mentions(fault: dict[str, Any], node: str) -> bool:
    named = list(fault.get("nodes", [])) + [n for g in fault.get("groups", []) for n in g]
    named += [n for link in fault.get("links", []) for n in link]
    return node in named


def _ordered(raw: dict[str, Any]) -> dict[str, Any]:
    order = [
        "name",
        "description",
        "seed",
        "duration",
        "settle",
        "kafka",
        "cluster",
        "network",
        "producers",
        "faults",
        "unsafe",
        "expect",
    ]
    return {k: raw[k] for k in order if k in raw} | {k: v for k, v in raw.items() if k not in order}
