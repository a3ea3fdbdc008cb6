"""Check a history for delivery anomalies, named as in the shared anomaly reference (Jepsen's).

Every write carries a unique record value, so a value identifies what the application produced
(an application that resends a value after a restart makes several sends of it). The checker
gathers every *observation* of a value at a position (topic, partition, offset): each record of
a final `log` line and each record returned by an `ok` poll. An `ok` send that carries an offset
is a third, weaker source: the broker's claim that the position holds the value. It does not
count as seeing the value, but, as in Jepsen's version order, it is one of the value's positions.

From these:

* duplicate: a value at two or more positions, observed or acknowledged.
* lost_write: a write that must have committed (`ok`, or `info` and observed) is missing where
  it should be: from its partition's final log, or -- with reads only -- from every read although
  a read of its partition got past its acknowledged offset. A transaction that must have
  committed and all of whose writes are missing from their final logs is lost too.
* unseen: an `ok` write that is never observed but cannot be called lost.
* nonmonotonic_send: one process's later send to a partition lands below an earlier one; a
  record that another process (known by its producer id and epoch, or its acknowledgement)
  wrote does not place a send.
* inconsistent_offsets: one position associated with different values.

`fail` writes are never lost and `info` writes are lost only once observed. The result is
deterministic: every list is sorted or in history order, and each anomaly keeps at most
`MAX_EXAMPLES` small JSON-ready examples with the evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from eosim.analysis.history import History, LogRecord, Marker, Send, op_counts, paused_gc

ANOMALIES = ("duplicate", "lost_write", "nonmonotonic_send", "inconsistent_offsets", "unseen")
MAX_EXAMPLES = 3
# Caps on lists inside one example, so that a pathological history keeps small examples.
MAX_LISTED = 5

Position = tuple[str, int, int]


@dataclass
class Anomaly:
    name: str
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, example: dict[str, Any]) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "examples": self.examples}


@dataclass
class CheckResult:
    """`anomalies` has every name in `ANOMALIES`, in that order; `counts` summarises the
    applications' operations as `eosim.analysis.history.op_counts` counts them (sent, acked,
    failed, indeterminate, errored); `notes` says how the history was judged when that needs
    saying."""

    anomalies: dict[str, Anomaly]
    counts: dict[str, int]
    # Sentences on how the history was judged (a run cut short, say); listed only when any.
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "counts": dict(self.counts),
            "anomalies": {name: anomaly.to_dict() for name, anomaly in self.anomalies.items()},
        }
        if self.notes:
            result["notes"] = list(self.notes)
        return result


def check(history: History) -> CheckResult:
    with paused_gc():
        return _check(history)


def _check(history: History) -> CheckResult:
    seen = _Observations(history)
    anomalies = {name: Anomaly(name) for name in ANOMALIES}
    _duplicates(seen, anomalies["duplicate"])
    _lost_and_unseen(history.sends, seen, anomalies["lost_write"], anomalies["unseen"])
    _lost_transactions(history, seen, anomalies["lost_write"])
    _nonmonotonic_sends(history.sends, seen, anomalies["nonmonotonic_send"])
    _inconsistent_offsets(history, seen, anomalies["inconsistent_offsets"])
    return CheckResult(anomalies, op_counts(history))


# A producer session as the log records it: (producer id, epoch).
WriterKey = tuple[int, "int | None"]


class _Observations:
    """Indexes over a history's observations, built in one pass."""

    def __init__(self, history: History) -> None:
        # value -> first position it was observed at, and all positions for values seen at more
        # than one; most values are seen once, so this avoids a set per value.
        self.first_seen: dict[str, Position] = {}
        self.seen_at: dict[str, set[Position]] = {}
        # position -> the first value claimed for it (by a log, a poll or an ack); positions
        # claimed for more than one value.
        self.holds: dict[Position, str] = {}
        self.conflicts: set[Position] = set()
        # (topic, partition) -> values in that partition's final log.
        self.logged: dict[tuple[str, int], set[str]] = {}
        # topic -> partitions that have a final log.
        self.logged_partitions: dict[str, set[int]] = defaultdict(set)
        # (topic, partition) -> values returned by polls, and the highest offset polled.
        self.polled: dict[tuple[str, int], set[str]] = defaultdict(set)
        self.max_polled: dict[tuple[str, int], int] = {}
        self.sends_by_value: dict[str, list[Send]] = defaultdict(list)
        # Values sent by more than one process (an application resending after a restart):
        # only for these does it matter which process wrote each record of the value.
        self.shared: set[str] = set()
        # For the records of shared values: position -> the process that wrote it, or None
        # when nothing says which.
        self.writer_at: dict[Position, str | None] = {}

        sole_sender: dict[str, str] = {}
        for send in history.sends:
            self.sends_by_value[send.value].append(send)
            if sole_sender.setdefault(send.value, send.process) != send.process:
                self.shared.add(send.value)
        for (topic, partition), records in history.logs.items():
            self.logged[topic, partition] = {record.value for record in records}
            self.logged_partitions[topic].add(partition)
            self._observe_all([(topic, partition, r.offset, r.value) for r in records])
        for poll in history.polls:
            records = poll.records
            self._observe_all(records)
            for topic, partition, offset, value in records:
                self.polled[topic, partition].add(value)
                if offset > self.max_polled.get((topic, partition), -1):
                    self.max_polled[topic, partition] = offset
        holds = self.holds
        for send in history.sends:
            if send.outcome == "ok" and send.offset is not None and send.partition is not None:
                where = (send.topic, send.partition, send.offset)
                if holds.setdefault(where, send.value) != send.value:
                    self.conflicts.add(where)
        if self.shared:
            self._attribute(history, sole_sender)
        self.landed = self._landed(history)

    def _observe_all(self, records: Iterable[tuple[str, int, int, str]]) -> None:
        holds, first_seen, seen_at = self.holds, self.first_seen, self.seen_at
        for topic, partition, offset, value in records:
            where = (topic, partition, offset)
            if holds.setdefault(where, value) != value:
                self.conflicts.add(where)
            first = first_seen.setdefault(value, where)
            if first != where:
                places = seen_at.get(value)
                if places is None:
                    seen_at[value] = {first, where}
                else:
                    places.add(where)

    def _attribute(self, history: History, sole_sender: dict[str, str]) -> None:
        """Which process wrote each record of a shared value. A record's producer id and epoch
        name the producer session that appended it; a session belongs to a process when it
        appended a value only that process sent, or a record that process's send was
        acknowledged at. The acknowledgement itself also names its record's writer."""
        shared = self.shared
        owner: dict[WriterKey, str | None] = {}

        def own(key: WriterKey, process: str) -> None:
            if owner.setdefault(key, process) != process:
                owner[key] = None  # two processes claim one session: nothing can be said

        session_at: dict[Position, WriterKey] = {}
        for (topic, partition), records in history.logs.items():
            for record in records:
                producer_id = record.producer_id
                if producer_id is None or producer_id < 0:
                    continue  # no producer id: a non-idempotent producer
                key = (producer_id, record.epoch)
                if record.value in shared:
                    session_at[topic, partition, record.offset] = key
                else:
                    process = sole_sender.get(record.value)
                    if process is not None:
                        own(key, process)
        acked_by: dict[Position, str] = {}
        for value in sorted(shared):
            for send in self.sends_by_value[value]:
                if send.outcome != "ok" or send.offset is None or send.partition is None:
                    continue
                where = (send.topic, send.partition, send.offset)
                if self.holds.get(where) != value or where in self.conflicts:
                    continue
                acked_by.setdefault(where, send.process)
                key = session_at.get(where)
                if key is not None:
                    own(key, send.process)
        for value in sorted(shared):
            for where in self.positions(value):
                writer = acked_by.get(where)
                if writer is None and where in session_at:
                    writer = owner.get(session_at[where])
                self.writer_at[where] = writer

    def _landed(self, history: History) -> dict[str, set[Position]]:
        """Values at two or more positions, counting acknowledged positions with observed
        ones (Jepsen's version order takes both send and poll offsets)."""
        landed = {value: set(places) for value, places in self.seen_at.items()}
        acked_first: dict[str, Position] = {}
        first_seen = self.first_seen
        for send in history.sends:
            if send.outcome != "ok" or send.offset is None or send.partition is None:
                continue
            value = send.value
            where = (send.topic, send.partition, send.offset)
            places = landed.get(value)
            if places is not None:
                places.add(where)
                continue
            first = first_seen.get(value)
            if first is None:
                first = acked_first.setdefault(value, where)
            if first != where:
                landed[value] = {first, where}
        return landed

    def observed(self, value: str) -> bool:
        return value in self.first_seen

    def positions(self, value: str) -> Iterable[Position]:
        places = self.seen_at.get(value)
        if places is not None:
            return places
        first = self.first_seen.get(value)
        return () if first is None else (first,)

    def lowest_offset(self, send: Send) -> tuple[int, int] | None:
        """(partition, offset) where the send's value first stands in its partition (or, when
        the partition is unknown, anywhere in its topic), else its acknowledged position. For a
        value several processes sent, records another process is known to have written are
        not this send's."""
        topic, partition = send.topic, send.partition
        places = self.seen_at.get(send.value)
        if places is None and send.value not in self.shared:
            first = self.first_seen.get(send.value)
            if first is not None and first[0] == topic and partition in (None, first[1]):
                return first[1], first[2]
        else:
            spots = [
                (where[1], where[2])
                for where in self.positions(send.value)
                if where[0] == topic
                and partition in (None, where[1])
                and self.writer_at.get(where) in (None, send.process)
            ]
            if spots:
                return min(spots)
        if partition is not None and send.offset is not None:
            return partition, send.offset
        return None


def _label(send: Send) -> str:
    return f"send {send.id} by {send.process}" if send.id is not None else f"send by {send.process}"


def _send_summary(send: Send) -> dict[str, Any]:
    return {
        "id": send.id,
        "process": send.process,
        "outcome": send.outcome,
        "partition": send.partition,
        "offset": send.offset,
        "invoke_time": send.invoke_time,
        "complete_time": send.complete_time,
    }


def position_dict(where: Position) -> dict[str, Any]:
    """A position as it appears in anomaly examples."""
    return {"topic": where[0], "partition": where[1], "offset": where[2]}


def _duplicates(seen: _Observations, anomaly: Anomaly) -> None:
    found = sorted((sorted(places), value) for value, places in seen.landed.items())
    for places, value in found:
        sends = seen.sends_by_value.get(value, [])
        observed = set(seen.positions(value))
        anomaly.add(
            {
                "value": value,
                "positions": [position_dict(where) for where in places[:MAX_LISTED]],
                "times_landed": len(places),
                "only_acknowledged": [
                    position_dict(where) for where in places if where not in observed
                ][:MAX_LISTED],
                "sends": [_send_summary(send) for send in sends[:MAX_LISTED]],
            }
        )


def _lost_and_unseen(
    sends: Iterable[Send], seen: _Observations, lost: Anomaly, unseen: Anomaly
) -> None:
    for send in sends:
        if send.outcome == "fail":
            continue
        observed = seen.observed(send.value)
        if send.outcome == "info" and not observed:
            continue
        reason = _why_lost(send, seen)
        if reason is not None:
            lost.add({"value": send.value, "topic": send.topic, **_send_summary(send), **reason})
        elif send.outcome == "ok" and not observed:
            unseen.add({"value": send.value, "topic": send.topic, **_send_summary(send)})


def _why_lost(send: Send, seen: _Observations) -> dict[str, Any] | None:
    """Evidence that a must-have-committed send is missing where it should be, or None."""
    topic, partition, value = send.topic, send.partition, send.value
    if partition is None:
        logged = seen.logged_partitions.get(topic)
        if not logged:
            return None
        # Present if in one of the topic's logs, or read from a partition that has no log.
        for where_topic, where_partition, _ in seen.positions(value):
            if where_topic == topic and (
                where_partition not in logged or value in seen.logged[topic, where_partition]
            ):
                return None
        return {"missing_from": "final logs", "logged_partitions": sorted(logged)}
    log = seen.logged.get((topic, partition))
    if log is not None:
        return None if value in log else {"missing_from": "final log"}
    if send.offset is None or value in seen.polled.get((topic, partition), ()):
        return None
    reached = seen.max_polled.get((topic, partition), -1)
    if reached > send.offset:
        return {"missing_from": "reads", "highest_offset_read": reached}
    return None


def first_markers_after(records: list[LogRecord], markers: list[Marker]) -> dict[int, Marker]:
    """For a partition's records and control markers (both in offset order): record offset ->
    the first marker of the record's producer id after it, for records that have one. One
    backwards pass over both lists."""
    found: dict[int, Marker] = {}
    if not markers:
        return found
    following: dict[int, Marker] = {}
    index = len(markers) - 1
    for record in reversed(records):
        while index >= 0 and markers[index].offset > record.offset:
            following[markers[index].producer_id] = markers[index]
            index -= 1
        if record.producer_id is not None:
            marker = following.get(record.producer_id)
            if marker is not None:
                found[record.offset] = marker
    return found


def _lost_transactions(history: History, seen: _Observations, lost: Anomaly) -> None:
    """A transaction that must have committed (`ok`, or `info` with a value a read_committed
    poll returned) whose every write is proven missing: its partition has a final log and no
    record there that an ABORT marker cancelled holds it (for an unknown partition: none of
    the topic's logs does, and no read returned it from a partition without a log). A
    transaction with some writes visible and others missing is a torn_transaction instead."""
    if not history.txns:
        return
    committed: dict[tuple[str, int], set[str]] = {}
    for key, records in history.logs.items():
        after = first_markers_after(records, history.markers.get(key, []))
        if not after:
            committed[key] = seen.logged[key]
            continue
        committed[key] = {
            r.value for r in records if r.offset not in after or after[r.offset].type != "ABORT"
        }
    read_committed: set[str] = set()
    if any(txn.outcome == "info" for txn in history.txns):
        read_committed = {
            record.value
            for poll in history.polls
            if poll.isolation == "read_committed"
            for record in poll.records
        }

    def missing(topic: str, partition: int | None, value: str) -> str | None:
        if partition is not None:
            log = committed.get((topic, partition))
            return "final log" if log is not None and value not in log else None
        logged = seen.logged_partitions.get(topic)
        if not logged:
            return None
        for where_topic, where_partition, _ in seen.positions(value):
            if where_topic == topic and (
                where_partition not in logged or value in committed[topic, where_partition]
            ):
                return None
        return "final logs"

    for txn in history.txns:
        writes = txn.sends
        if txn.outcome == "fail" or not writes:
            continue
        if txn.outcome == "info" and not any(w.value in read_committed for w in writes):
            continue
        reasons = [missing(w.topic, w.partition, w.value) for w in writes]
        if not all(reasons):
            continue
        first = writes[0]
        lost.add(
            {
                "value": first.value,
                "topic": first.topic,
                "id": txn.id,
                "process": txn.process,
                "outcome": txn.outcome,
                "partition": first.partition,
                "offset": first.offset,
                "invoke_time": txn.invoke_time,
                "complete_time": txn.complete_time,
                "missing_from": reasons[0],
                "transaction": {
                    "id": txn.id,
                    "transactional_id": txn.transactional_id,
                    "producer_id": txn.producer_id,
                    "epoch": txn.epoch,
                    "values": [w.value for w in writes[:MAX_LISTED]],
                    "writes": len(writes),
                },
            }
        )


def _nonmonotonic_sends(sends: Iterable[Send], seen: _Observations, anomaly: Anomaly) -> None:
    """`sends` must be in invocation order, as `History.sends` is."""
    # (process, topic, partition) -> (highest offset so far, the send that landed there)
    highest: dict[tuple[str, str, int], tuple[int, Send]] = {}
    for send in sends:
        landed = seen.lowest_offset(send)
        if landed is None:
            continue
        partition, offset = landed
        group = (send.process, send.topic, partition)
        previous = highest.get(group)
        if previous is None or offset > previous[0]:
            highest[group] = (offset, send)
        elif offset < previous[0]:
            earlier = previous[1]
            anomaly.add(
                {
                    "process": send.process,
                    "topic": send.topic,
                    "partition": partition,
                    "value": send.value,
                    "offset": offset,
                    "invoke_time": send.invoke_time,
                    "earlier_value": earlier.value,
                    "earlier_offset": previous[0],
                    "earlier_invoke_time": earlier.invoke_time,
                }
            )


def _inconsistent_offsets(history: History, seen: _Observations, anomaly: Anomaly) -> None:
    if not seen.conflicts:
        return
    claims = _claims(history, seen.conflicts)
    for where in sorted(seen.conflicts):
        values = [
            {
                "value": value,
                "sources": list(dict.fromkeys(sources))[:MAX_LISTED],
                "times": len(sources),
            }
            for value, sources in sorted(claims[where].items())
        ]
        anomaly.add({**position_dict(where), "values": values[:MAX_LISTED]})


def _claims(history: History, wanted: set[Position]) -> dict[Position, dict[str, list[str]]]:
    """For the wanted positions: value -> the sources that put it there, in history order."""
    claims: dict[Position, dict[str, list[str]]] = {where: {} for where in wanted}

    def claim(where: Position, value: str, source: str) -> None:
        if where in claims:
            claims[where].setdefault(value, []).append(source)

    for (topic, partition), records in history.logs.items():
        for record in records:
            claim((topic, partition, record.offset), record.value, "log")
    for poll in history.polls:
        for topic, partition, offset, value in poll.records:
            claim((topic, partition, offset), value, f"poll by {poll.process} at {poll.time!r}")
    for send in history.sends:
        if send.outcome == "ok" and send.offset is not None and send.partition is not None:
            claim((send.topic, send.partition, send.offset), send.value, f"ack of {_label(send)}")
    return claims
