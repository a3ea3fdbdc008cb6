"""The machine a real cluster runs on, as a record that says whether two measurements are
comparable.

A calibration compares the model, whose resource model was fitted on one machine
(``python -m eosim.analysis.measure``), with Kafka runs made on a machine too. Kafka's costs
scale with the machine's cores and their speed: on 2026-11-30 a broker restarted on an idle
machine served in 4.3-4.6 s where the machine of 2026-11-29 took 2.0-2.55 s, and the same
transactions took twice as long (docs/calibration.md, "One machine for both sides"). So a
measurement and a Kafka side record :func:`fingerprint`, and :func:`differs` says when two
records are not one machine: another processor, another number of cores, or a single core
more than :data:`SPEED_TOLERANCE` faster or slower on the hash probe. The loop probe is
recorded and shown but judges nothing: on one idle machine (2026-11-27 to 11-30) its fastest
of five ranged from 35.2 to 59.5 ms between sessions, where the hash probe kept to 11.4-11.9.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

# The probes, each the fastest of PROBE_TRIES on one core: SHA-256 over PROBE_BYTES (in C,
# the processor's arithmetic) and a Python loop of LOOP_STEPS (branches, memory, the cache).
PROBE_BYTES = 16 * 1024 * 1024
LOOP_STEPS = 200_000
PROBE_TRIES = 5
# Two hash probes further apart than this ratio are two machines (repeated probes on one
# machine differ by up to 30% when it is busy; a loaded machine probes slower, never faster).
SPEED_TOLERANCE = 1.5


def _cpu() -> tuple[str, float | None]:
    """The processor's name and its clock (MHz) as /proc/cpuinfo gives them."""
    name, mhz = "unknown", None
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return name, mhz
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and name == "unknown":
            name = value
        elif key == "cpu MHz" and mhz is None:
            with contextlib.suppress(ValueError):
                mhz = round(float(value))
    return name, mhz


def probe_ms(tries: int = PROBE_TRIES) -> float:
    """Milliseconds one core takes to hash :data:`PROBE_BYTES` (the fastest of ``tries``)."""
    data = bytes(PROBE_BYTES)
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        hashlib.sha256(data).digest()
        best = min(best, (time.perf_counter() - began) * 1000.0)
    return round(best, 2)


def loop_ms(tries: int = PROBE_TRIES) -> float:
    """Milliseconds one core takes for a Python loop of :data:`LOOP_STEPS` (the fastest)."""
    best = float("inf")
    for _ in range(tries):
        began = time.perf_counter()
        table: dict[int, int] = {}
        for i in range(LOOP_STEPS):
            table[i & 1023] = table.get((i * 7) & 1023, 0) + i
        best = min(best, (time.perf_counter() - began) * 1000.0)
    return round(best, 2)


def fingerprint() -> dict[str, Any]:
    """This machine: its processor, clock, cores (those this process may use) and probe."""
    name, mhz = _cpu()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return {
        "cpu": name,
        "mhz": mhz,
        "cores": cores,
        "probe_ms": probe_ms(),
        "loop_ms": loop_ms(),
    }


def differs(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str | None:
    """Why records ``a`` and ``b`` are not one machine, or None (also when either is
    missing: an older measurement recorded none, which says nothing)."""
    if not a or not b:
        return None
    if a.get("cpu") != b.get("cpu"):
        return f"processor {a.get('cpu')!r} against {b.get('cpu')!r}"
    if a.get("cores") != b.get("cores"):
        return f"{a.get('cores')} cores against {b.get('cores')}"
    pa, pb = a.get("probe_ms"), b.get("probe_ms")
    if isinstance(pa, (int, float)) and isinstance(pb, (int, float)) and min(pa, pb) > 0:
        ratio = max(pa, pb) / min(pa, pb)
        if ratio > SPEED_TOLERANCE:
            return f"a core {ratio:.2f} times slower on one (hash probe {pa} against {pb} ms)"
    return None


def describe(record: dict[str, Any] | None) -> str:
    """One line for a report."""
    if not record:
        return "not recorded"
    mhz = f" at {record['mhz']} MHz" if record.get("mhz") else ""
    return (
        f"{record.get('cpu')}{mhz}, {record.get('cores')} cores, "
        f"probes {record.get('probe_ms')} and {record.get('loop_ms')} ms"
    )


__all__ = ["SPEED_TOLERANCE", "describe", "differs", "fingerprint", "loop_ms", "probe_ms"]
