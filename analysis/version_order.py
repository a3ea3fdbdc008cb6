"""Checks for a history without final logs, reasoned as Jepsen's Kafka checker does
(jepsen.tests.kafka): from per-partition *version orders* built out of what clients were told.

A history read from Jepsen (`eosim.analysis.jepsen`) keeps every client op whole
(`History.client_ops`). Here a *key* is a (topic, partition) and a value is identified per key
(the same value written to two keys is two values, as in Jepsen). From the ops:

* ok reads: per key, the values that `ok` poll/txn ops returned.
* must have committed: an `ok` op, or an `info` op one of whose writes an `ok` read returned.
* version order of a key: offset -> the values placed there by the sends (with an offset) of
  ops that must have committed -- an `info` op's reported offsets included -- and by the polls
  of *every* op, `ok`, `info` or `fail` (a consumer must return only safe data, whatever
  becomes of its transaction). Offsets with a value, in order, are the key's dense *indices*;
  each index stands for the value first recorded at its offset.
* writer of a value: the last completed op that sent it to the key.

From these (each count is of Jepsen's error maps):

* inconsistent_offsets: an offset with two or more values.
* duplicate: a value at two or more offsets of one key.
* lost_write: a value of a key that must have committed and whose last index is at or below
  the highest first index of a value an ok read returned, yet no ok read returned it.
* poll_skip / nonmonotonic_poll: a process's poll (or txn) op of any outcome starts more than
  one index past / at or before the last value of the last `ok` op of the process that read
  the key. An ok or info assign/subscribe keeps the last reads of the keys it names only.
* nonmonotonic_send: a process's `ok`/`info` op's first send to a key lands at or before the
  last send of its previous such op to the key (assign/subscribe as above).
* int_poll_skip / int_nonmonotonic_poll / int_nonmonotonic_send: the same within one op, between
  successive values it read / sent on a key. (Jepsen's int-send-skip, writes interleaving
  within a transaction, is normal in Kafka and Jepsen always allows it: not reported.)
* precommitted_read: an op that read a value it sent itself to the same key.
* aborted_read (G1a): an `ok` poll or txn op read a value that a failed op sent to the key.

Two values without a known index are never compared. Every list is in history order.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from eosim.analysis.anomalies import names, version_order_names
from eosim.analysis.checker import MAX_LISTED, Anomaly
from eosim.analysis.history import ClientOp, History

Key = tuple[str, int]

# The names judged here for a history with client ops, in place of the log-based checks
# (`AnomalyKind.from_version_order`), and the within-op ones judged only here; declared in
# eosim.analysis.anomalies.
INTERNAL_ANOMALIES = names(check="version_order")
REPLACED_ANOMALIES = names(from_version_order=True)
DATA_FS = ("send", "poll", "txn")
READ_FS = ("poll", "txn")
ASSIGN_FS = ("assign", "subscribe")


# A value read or sent, with the offset the op reported for it (None: not reported).
Placed = tuple[str, "int | None"]


def _placed(op: ClientOp, kind: str) -> dict[Key, list[Placed]]:
    found: dict[Key, list[Placed]] = {}
    for m in op.mops:
        if m.kind == kind:
            found.setdefault((m.topic, m.partition), []).append((m.value, m.offset))
    return found


def reads(op: ClientOp) -> dict[Key, list[Placed]]:
    """Key -> the (value, offset) pairs the op read from it, in op order (records without an
    offset too)."""
    return _placed(op, "poll")


def writes(op: ClientOp) -> dict[Key, list[Placed]]:
    """Key -> the (value, offset) pairs the op sent to it, in op order."""
    return _placed(op, "send")


@dataclass
class VersionOrder:
    """One key's order: `log` offset -> distinct values in the order first recorded;
    `by_index` the value standing for each dense index; `by_value` a value's index (its last
    one, when it stands for several); `index_at` an offset's index."""

    log: dict[int, list[str]] = field(default_factory=dict)
    by_index: list[str] = field(default_factory=list)
    by_value: dict[str, int] = field(default_factory=dict)
    offset_of: list[int] = field(default_factory=list)
    index_at: dict[int, int] = field(default_factory=dict)

    def seal(self) -> None:
        for offset in sorted(self.log):
            value = self.log[offset][0]
            self.index_at[offset] = len(self.by_index)
            self.by_value[value] = len(self.by_index)
            self.by_index.append(value)
            self.offset_of.append(offset)

    def index(self, placed: Placed) -> int | None:
        """Where a read or send stands: the index of the offset its op reported, when the order
        has that offset; else its value's index (Jepsen always takes the value's, which is
        arbitrary for a value at several offsets)."""
        value, offset = placed
        if offset is not None and offset in self.index_at:
            return self.index_at[offset]
        return self.by_value.get(value)

    def delta(self, before: Placed, after: Placed) -> int:
        """Index of `after` minus index of `before`; 1 (in order) when either is unknown."""
        i, j = self.index(before), self.index(after)
        return 1 if i is None or j is None else j - i

    def between(self, before: Placed, after: Placed) -> list[str]:
        i, j = self.index(before), self.index(after)
        return [] if i is None or j is None else self.by_index[i + 1 : j]


class Analysis:
    """The indexes every Jepsen-style check reads, built once from `history.client_ops`."""

    def __init__(self, history: History) -> None:
        self.ops = history.client_ops
        data = [op for op in self.ops if op.f in DATA_FS]
        self.ok_reads: dict[Key, set[str]] = defaultdict(set)
        for op in data:
            if op.type == "ok":
                for key, placed in reads(op).items():
                    self.ok_reads[key].update(value for value, _ in placed)
        self.writer_of: dict[Key, dict[str, ClientOp]] = defaultdict(dict)
        for op in data:
            for key, placed in writes(op).items():
                for value, _ in placed:
                    self.writer_of[key][value] = op
        self.orders: dict[Key, VersionOrder] = defaultdict(VersionOrder)
        for op in data:
            committed = self.must_have_committed(op)
            for m in op.mops:
                if m.offset is None or (m.kind == "send" and not committed):
                    continue
                held = self.orders[m.topic, m.partition].log.setdefault(m.offset, [])
                if m.value not in held:
                    held.append(m.value)
        for order in self.orders.values():
            order.seal()

    def must_have_committed(self, op: ClientOp) -> bool:
        if op.type == "ok":
            return True
        if op.type != "info":
            return False
        return any(
            value in self.ok_reads.get(key, ())
            for key, placed in writes(op).items()
            for value, _ in placed
        )

    def order(self, key: Key) -> VersionOrder:
        return self.orders.get(key) or VersionOrder()


def op_summary(op: ClientOp) -> dict[str, Any]:
    return {"id": op.id, "process": op.process, "type": op.type, "f": op.f, "time": op.time}


def _key(key: Key) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1]}


def check_version_orders(
    history: History, lost: set[tuple[str, int, str]] | None = None
) -> dict[str, Anomaly]:
    """Every name in `REPLACED_ANOMALIES` and `INTERNAL_ANOMALIES`, with count 0 when absent;
    all 0 for a history without client ops. `lost`, when given, receives every lost write as
    (topic, partition, value), for `unseen` to leave out."""
    anomalies = {name: Anomaly(name) for name in version_order_names()}
    if not history.client_ops:
        return anomalies
    a = Analysis(history)
    _inconsistent_offsets(a, anomalies["inconsistent_offsets"])
    _duplicates(a, anomalies["duplicate"])
    _lost_writes(a, anomalies["lost_write"], lost)
    _poll_gaps(a, anomalies["poll_skip"], anomalies["nonmonotonic_poll"])
    _nonmonotonic_sends(a, anomalies["nonmonotonic_send"])
    _internal(a, anomalies)
    _precommitted_reads(a, anomalies["precommitted_read"])
    _aborted_reads(a, anomalies["aborted_read"])
    return anomalies


def _inconsistent_offsets(a: Analysis, anomaly: Anomaly) -> None:
    for key in sorted(a.orders):
        order = a.orders[key]
        for index, offset in enumerate(order.offset_of):
            values = order.log[offset]
            if len(values) > 1:
                anomaly.add(
                    {**_key(key), "offset": offset, "index": index, "values": values[:MAX_LISTED]}
                )


def _duplicates(a: Analysis, anomaly: Anomaly) -> None:
    for key in sorted(a.orders):
        order = a.orders[key]
        at: dict[str, list[int]] = {}
        for offset in order.offset_of:
            for value in order.log[offset]:
                at.setdefault(value, []).append(offset)
        for value, offsets in at.items():
            if len(offsets) > 1:
                positions = [{**_key(key), "offset": o} for o in offsets[:MAX_LISTED]]
                anomaly.add({"value": value, "positions": positions, "times_landed": len(offsets)})


def _lost_writes(a: Analysis, anomaly: Anomaly, lost: set[tuple[str, int, str]] | None) -> None:
    for key in sorted(a.ok_reads):
        order = a.orders.get(key)
        if order is None:
            continue
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for index, offset in enumerate(order.offset_of):
            for value in order.log[offset]:
                first.setdefault(value, index)
                last[value] = index
        read = a.ok_reads[key]
        bound = max((first[v] for v in read if v in first), default=-1)
        must_read = sorted((i, v) for v, i in last.items() if i <= bound)
        max_read: dict[str, Any] | None = None
        for _, value in must_read:
            writer = a.writer_of.get(key, {}).get(value)
            if value in read or writer is None or not a.must_have_committed(writer):
                continue
            if max_read is None:
                max_read = _max_read(a, key, order, last, bound)
            if lost is not None:
                lost.add((key[0], key[1], value))
            anomaly.add(
                {
                    "value": value,
                    **_key(key),
                    "outcome": writer.type,
                    "process": writer.process,
                    "offset": order.offset_of[first[value]],
                    "index": first[value],
                    "max_read_index": bound,
                    "missing_from": "reads",
                    "writer": op_summary(writer),
                    "max_read": max_read,
                }
            )


def _max_read(
    a: Analysis, key: Key, order: VersionOrder, last: dict[str, int], bound: int
) -> dict[str, Any] | None:
    """The read proving how far a key was read, as Jepsen's lost-write-cases shows it
    (`:max-read`): the first completed op, of any outcome, that read the first value whose last
    index is the bound (None if no op did)."""
    at_bound = [v for v in order.log[order.offset_of[bound]] if last.get(v) == bound]
    if not at_bound:  # every value there appears again further on: Jepsen finds none either
        return None
    value = at_bound[0]
    for op in a.ops:
        if any(v == value for v, _ in reads(op).get(key, ())):
            return op_summary(op)
    return None


def _pair(kind: str, key: Key, before: Placed, after: Placed, delta: int) -> dict[str, Any]:
    return {
        "kind": kind,
        **_key(key),
        "values": [before[0], after[0]],
        "offsets": [before[1], after[1]],
        "delta": delta,
    }


def _poll_gaps(a: Analysis, skip: Anomaly, nonmonotonic: Anomaly) -> None:
    last_reads: dict[str, dict[Key, ClientOp]] = defaultdict(dict)
    for op in a.ops:
        mine = last_reads[op.process]
        if op.f in ASSIGN_FS:
            if op.type in ("ok", "info"):
                last_reads[op.process] = {k: o for k, o in mine.items() if k in op.keys}
            continue
        if op.f not in READ_FS:
            continue
        read = reads(op)
        for key, values in read.items():
            previous = mine.get(key)
            if previous is None:
                continue
            earlier = reads(previous).get(key)
            if not earlier:  # the last poll of the key read nothing: no position to compare
                continue
            order = a.order(key)
            before, after = earlier[-1], values[0]
            delta = order.delta(before, after)
            ops = [op_summary(previous), op_summary(op)]
            if delta > 1:
                skipped = order.between(before, after)
                example = _pair("poll", key, before, after, delta)
                skip.add({**example, "skipped": skipped[:MAX_LISTED], "ops": ops})
            elif delta < 1:
                nonmonotonic.add({**_pair("poll", key, before, after, delta), "ops": ops})
        if op.type == "ok":  # Jepsen: every key the result names, even without a record
            for key in [*read, *(k for k in op.polled_keys if k not in read)]:
                mine[key] = op


def _nonmonotonic_sends(a: Analysis, anomaly: Anomaly) -> None:
    last_sends: dict[str, dict[Key, ClientOp]] = defaultdict(dict)
    for op in a.ops:
        if op.type not in ("ok", "info"):
            continue
        mine = last_sends[op.process]
        if op.f in ASSIGN_FS:
            last_sends[op.process] = {k: o for k, o in mine.items() if k in op.keys}
            continue
        if op.f not in DATA_FS:
            continue
        sent = writes(op)
        for key, values in sent.items():
            previous = mine.get(key)
            if previous is not None:
                before, after = writes(previous)[key][-1], values[0]
                delta = a.order(key).delta(before, after)
                if delta < 1:
                    ops = [op_summary(previous), op_summary(op)]
                    anomaly.add({**_pair("send", key, before, after, delta), "ops": ops})
            mine[key] = op


def _internal(a: Analysis, anomalies: dict[str, Anomaly]) -> None:
    for op in a.ops:
        for kind, values_by_key in (("poll", reads(op)), ("send", writes(op))):
            for key, values in values_by_key.items():
                order = a.order(key)
                for before, after in itertools.pairwise(values):
                    delta = order.delta(before, after)
                    example = {**_pair(kind, key, before, after, delta), "op": op_summary(op)}
                    if delta < 1:
                        anomalies[f"int_nonmonotonic_{kind}"].add(example)
                    elif delta > 1 and kind == "poll":
                        skipped = order.between(before, after)
                        anomalies["int_poll_skip"].add({**example, "skipped": skipped[:MAX_LISTED]})


def _precommitted_reads(a: Analysis, anomaly: Anomaly) -> None:
    for op in a.ops:
        read = reads(op)
        for key, placed in writes(op).items():
            sent = {value for value, _ in placed}
            own = [value for value, _ in read.get(key, ()) if value in sent]
            if own:
                anomaly.add({"value": own[0], **_key(key), "op": op_summary(op)})
                break


def _aborted_reads(a: Analysis, anomaly: Anomaly) -> None:
    """Jepsen's G1a: an `ok` poll or txn op read, from a key, a value that a failed op sent to
    that key."""
    failed: dict[Key, set[str]] = defaultdict(set)
    for op in a.ops:
        if op.type == "fail":
            for key, placed in writes(op).items():
                failed[key].update(value for value, _ in placed)
    if not failed:
        return
    for op in a.ops:
        if op.type != "ok" or op.f not in READ_FS:
            continue
        for m in op.mops:
            if m.kind == "poll" and m.value in failed.get((m.topic, m.partition), ()):
                writer = a.writer_of[m.topic, m.partition][m.value]
                anomaly.add(
                    {
                        "value": m.value,
                        "topic": m.topic,
                        "partition": m.partition,
                        "offset": m.offset,
                        "process": op.process,
                        "reader": op_summary(op),
                        "writer": op_summary(writer),
                    }
                )


__all__ = [
    "INTERNAL_ANOMALIES",
    "REPLACED_ANOMALIES",
    "Analysis",
    "VersionOrder",
    "check_version_orders",
    "op_summary",
    "reads",
    "writes",
]
