"""Timing measures taken from a history, the same way for the model's runs and a real cluster's.

They are what sets the rates eosim reports, and what ``eosim calibrate`` compares:

* produce latency: invocation to ``ok`` of every acknowledged send (:func:`ack_latencies`),
  and the same for the sends invoked once the run is warm (:func:`warm_ack_latencies`: from
  :data:`WARM_UP_MS` after the first send). A real client is a fresh JVM whose first seconds
  are many times slower (class loading, the JIT, first connections and metadata); the model
  has no warm-up, so only the warm figures compare the two sides' steady state;
* transaction latency: invocation to ``ok`` of every committed transaction
  (:func:`commit_latencies`);
* ack to first read (:func:`read_after_ack_latencies`): from a send's ``ok`` to the completion
  of the first poll of a running consumer (not the final drain) that returned the record. A
  consumer reads only below the high watermark, which moves once the followers have fetched
  the record, so with acks=1 (acknowledged on the leader's append) this is the replication lag
  plus the consumer's own fetch; with acks=all (acknowledged once the high watermark passed
  it) it is about the consumer's fetch alone, and can be negative;
* failover (:func:`failovers`): after each broker fault of a kind that stops a broker (those
  whose :class:`~eosim.simulation.faults.FaultKindSpec` says ``failover``: crash, power loss,
  pause; a ``crash_at`` is recorded as a crash) starts, how long until every partition that was
  being written just before it has an acknowledged write again. A partition the faulty broker
  did not lead answers at once, so the slowest partition measures the time the cluster took to
  give the led ones a new leader and the producer to find it. A partition that never takes an
  acknowledged write again while the workload goes on (sends invoked at least
  :data:`ACTIVE_WINDOW_MS` after the fault) makes the fault one that **never recovered** (its
  time is None); a fault that came so near the end of the workload that this cannot be told is
  left out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from eosim.analysis.columns import NO_PARTITION, SendColumns, send_columns
from eosim.analysis.history import History
from eosim.simulation.faults import KINDS

# A partition counts as being written before a fault when it had an acknowledged write in this
# window (ms) before the fault started.
ACTIVE_WINDOW_MS = 2_000.0
# The fault kinds after which failover is measured (as their fault lines name them).
FAILOVER_FAULTS: tuple[str, ...] = tuple(k.name for k in KINDS.values() if k.failover)
# How long after its first send a run counts as warm (see the module docstring). Kafka 4.1.1 on
# this project's 2-core machine: a fresh producer's median latency is 20-30 times its steady
# one for about 2 s (docs/calibration.md, case 5).
WARM_UP_MS = 5_000.0
# The final read of every partition (the model's and the real drain's process): not a consumer
# of the run, so not counted by read_after_ack_latencies.
DRAIN_PROCESS = "drain/"


def ack_latencies(history: History) -> list[float]:
    """Invocation-to-completion time (ms) of every `ok` send, in invocation order."""
    sends = send_columns(history.sends)
    acked = _acked(sends)
    return (sends.complete_time[acked] - sends.invoke_time[acked]).tolist()


def _acked(sends: SendColumns) -> np.ndarray:
    """The `ok` sends with a completion time."""
    return (sends.outcome == "ok") & ~np.isnan(sends.complete_time)


def warm_ack_latencies(history: History, warm_up_ms: float = WARM_UP_MS) -> list[float]:
    """:func:`ack_latencies` of the sends invoked at least ``warm_up_ms`` after the run's first
    send was."""
    sends = send_columns(history.sends)
    acked = _acked(sends)
    if not acked.any():
        return []
    start = float(sends.invoke_time.min()) + warm_up_ms
    warm = acked & (sends.invoke_time >= start)
    return (sends.complete_time[warm] - sends.invoke_time[warm]).tolist()


def read_after_ack_latencies(history: History) -> list[float]:
    """From each ``ok`` send's completion to the first poll (by a consumer other than the final
    drain) that returned its record, in ms; sends no consumer read are left out."""
    return [lag for _, lag in read_after_ack(history)]


def read_after_ack(history: History) -> list[tuple[float, float]]:
    """(the send's completion, ack to first read) of each ``ok`` send a consumer read, in ms
    (see :func:`read_after_ack_latencies`)."""
    first_read: dict[tuple[str, str], float] = {}
    for poll in history.polls:
        if poll.process.startswith(DRAIN_PROCESS):
            continue
        for record in poll.records:
            key = (record.topic, record.value)
            if key not in first_read or poll.time < first_read[key]:
                first_read[key] = poll.time
    if not first_read:
        return []
    sends = send_columns(history.sends)
    acked = np.flatnonzero(_acked(sends))
    out = []
    for topic, value, completed in zip(
        sends.topic[acked], sends.value[acked], sends.complete_time[acked].tolist(), strict=True
    ):
        read = first_read.get((topic, value))
        if read is not None:
            out.append((completed, read - completed))
    return out


def commit_latencies(history: History) -> list[float]:
    """Invocation-to-completion time (ms) of every committed transaction: each `ok` `txn` op,
    in invocation order, then each transaction of a transactional processor. A processor's
    transaction carries one `process` op per input; those share a process and an invocation
    time, and count once."""
    latencies = [
        t.complete_time - t.invoke_time
        for t in history.txns
        if t.outcome == "ok" and t.complete_time is not None
    ]
    seen: set[tuple[str, float]] = set()
    for step in history.steps:
        if step.outcome != "ok" or step.transactional_id is None or step.complete_time is None:
            continue
        key = (step.process, step.invoke_time)
        if key not in seen:
            seen.add(key)
            latencies.append(step.complete_time - step.invoke_time)
    return latencies


@dataclass(frozen=True, slots=True)
class Failover:
    """One broker fault and how long writes took to resume everywhere after it: ``time_ms``
    None when some partition never took an acknowledged write again while the workload went
    on (see the module docstring)."""

    kind: str
    targets: tuple[str, ...]
    start: float
    time_ms: float | None

    @property
    def recovered(self) -> bool:
        return self.time_ms is not None


def failovers(history: History) -> list[Failover]:
    """One :class:`Failover` per broker fault of a :data:`FAILOVER_FAULTS` kind, in the order
    of the history's fault lines (see the module docstring)."""
    faults = [
        fault
        for fault in history.faults
        if fault.get("phase") == "start"
        and fault.get("fault") in FAILOVER_FAULTS
        and any(str(t).startswith("broker-") for t in fault.get("targets") or [])
    ]
    if not faults:
        return []
    acks: dict[tuple[str, int], list[float]] = defaultdict(list)
    sends = send_columns(history.sends)
    rows = np.flatnonzero(_acked(sends) & (sends.partition != NO_PARTITION))
    for topic, partition, completed in zip(
        sends.topic[rows].tolist(),
        sends.partition[rows].tolist(),
        sends.complete_time[rows].tolist(),
        strict=True,
    ):
        acks[topic, partition].append(completed)
    for times in acks.values():
        times.sort()
    last_invoke = float(sends.invoke_time.max()) if len(sends.invoke_time) else -np.inf
    out: list[Failover] = []
    for fault in faults:
        start = float(fault["time"])
        waits: list[float] = []
        never = False
        for tp in sorted(acks):
            times = acks[tp]
            before = bisect_right(times, start)
            if before == 0 or times[before - 1] < start - ACTIVE_WINDOW_MS:
                continue  # not being written when the fault started
            if before == len(times):
                never = True  # no acknowledged write after it
                continue
            waits.append(times[before] - start)
        kind = str(fault["fault"])
        targets = tuple(str(t) for t in fault.get("targets") or [])
        if never:
            if last_invoke >= start + ACTIVE_WINDOW_MS:
                out.append(Failover(kind, targets, start, None))
            # else: the workload ended too soon after the fault to tell; left out.
        elif waits:
            out.append(Failover(kind, targets, start, max(waits)))
    return out


def failover_times(history: History) -> list[float]:
    """The times (ms) of the :func:`failovers` that recovered."""
    return [f.time_ms for f in failovers(history) if f.time_ms is not None]
