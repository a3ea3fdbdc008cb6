"""Check a history for delivery anomalies, named as in the shared anomaly reference (Jepsen's).

Every write carries a record value unique within its topic (within its partition for a
history read from Jepsen: `History.value_scope`), so the topic (or partition) and the value
identify what the application produced (`History.record_id`; an application that resends a
value after a restart makes several sends of it). The same value in two topics is two records.
The checker gathers every *observation* of a record at a position (topic, partition, offset):
each record of a final `log` line and each record returned by an `ok` poll. An `ok` send that
carries an offset is a third, weaker source: the broker's claim that the position holds the
record. It does not count as seeing the record, but, as in Jepsen's version order, it is one of
the record's positions.

From these:

* duplicate: a record at two or more positions, observed or acknowledged.
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

from eosim.analysis.anomalies import names
from eosim.analysis.columns import LogTable
from eosim.analysis.delivery_screen import clean_deliveries
from eosim.analysis.history import (
    PARTITION_SCOPE,
    History,
    LogRecord,
    Marker,
    RecordId,
    Send,
    op_counts,
    paused_gc,
)

# The delivery anomalies, declared in eosim.analysis.anomalies.
ANOMALIES = names(check="checker")
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
    saying, and `unknown` (set by `eosim.analysis.checks.check_history`) why it had nothing to
    check."""

    anomalies: dict[str, Anomaly]
    counts: dict[str, int]
    # Sentences on how the history was judged (a run cut short, say); listed only when any.
    notes: list[str] = field(default_factory=list)
    # Why the history gave the checks nothing to judge (the verdict is then unknown, not "no
    # anomalies": eosim.analysis.checks.nothing_to_check), or None.
    unknown: str | None = None

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "counts": dict(self.counts),
            "anomalies": {name: anomaly.to_dict() for name, anomaly in self.anomalies.items()},
        }
        if self.notes:
            result["notes"] = list(self.notes)
        if self.unknown is not None:
            result["unknown"] = self.unknown
        return result


def check(
    history: History, lost: set[RecordId] | None = None, *, screen: bool = True
) -> CheckResult:
    """The delivery checks. `lost`, when given, are the records another judge found lost (a
    Jepsen history's version orders: eosim.analysis.version_order), which `unseen` leaves out
    instead of those this checker finds lost.

    A history `eosim.analysis.delivery_screen.clean_deliveries` finds clean is answered from
    its columns (every count 0); any other goes through the record-by-record checks below,
    which give the counts and examples. ``screen=False`` always takes the record-by-record
    way (tests compare the two)."""
    with paused_gc():
        return _check(history, lost, screen)


def _check(history: History, lost: set[RecordId] | None, screen: bool) -> CheckResult:
    if screen and lost is None and clean_deliveries(history):
        return CheckResult({name: Anomaly(name) for name in ANOMALIES}, op_counts(history))
    seen = _Observations(history)
    anomalies = {name: Anomaly(name) for name in ANOMALIES}
    _duplicates(seen, anomalies["duplicate"])
    _lost_and_unseen(history.sends, seen, anomalies["lost_write"], anomalies["unseen"], lost)
    _lost_transactions(history, seen, anomalies["lost_write"])
    _nonmonotonic_sends(history.sends, seen, anomalies["nonmonotonic_send"])
    _inconsistent_offsets(history, seen, anomalies["inconsistent_offsets"])
    return CheckResult(anomalies, op_counts(history))


# A producer session as the log records it: (producer id, epoch).
WriterKey = tuple[int, "int | None"]


class _Observations:
    """Indexes over a history's observations, built in one pass. Records are identified by
    `History.record_id`: (topic, value), or (topic, partition, value) for a history whose
    values are unique per partition only."""

    def __init__(self, history: History) -> None:
        per_partition = history.value_scope == PARTITION_SCOPE
        self.per_partition = per_partition
        # record -> first position it was observed at, and all positions for records seen at
        # more than one; most are seen once, so this avoids a set per record.
        self.first_seen: dict[RecordId, Position] = {}
        self.seen_at: dict[RecordId, set[Position]] = {}
        # position -> the first value claimed for it (by a log, a poll or an ack); positions
        # claimed for more than one value.
        self.holds: dict[Position, str] = {}
        self.conflicts: set[Position] = set()
        # (topic, partition) -> values in that partition's final log.
        self.logged: dict[tuple[str, int], set[str]] = {}
        # topic -> partitions that have a final log.
        self.logged_partitions: dict[str, set[int]] = defaultdict(set)
        # (topic, partition) -> its final log's start, where records were deleted below it.
        self.log_starts = history.log_starts
        # (topic, partition) -> values returned by polls, and the highest offset polled.
        self.polled: dict[tuple[str, int], set[str]] = defaultdict(set)
        self.max_polled: dict[tuple[str, int], int] = {}
        self.sends_by_id: dict[RecordId, list[Send]] = defaultdict(list)
        # Records sent by more than one process (an application resending after a restart):
        # only for these does it matter which process wrote each of their copies.
        self.shared: set[RecordId] = set()
        # For the copies of shared records: position -> the process that wrote it, or None
        # when nothing says which.
        self.writer_at: dict[Position, str | None] = {}

        # Each send's record, in `history.sends` order.
        self.send_ids: list[RecordId] = [
            (send.topic, send.partition if per_partition else None, send.value)
            for send in history.sends
        ]
        sole_sender: dict[RecordId, str] = {}
        for send, rid in zip(history.sends, self.send_ids, strict=True):
            self.sends_by_id[rid].append(send)
            if sole_sender.setdefault(rid, send.process) != send.process:
                self.shared.add(rid)
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
        per_partition = self.per_partition
        for topic, partition, offset, value in records:
            where = (topic, partition, offset)
            if holds.setdefault(where, value) != value:
                self.conflicts.add(where)
            rid = (topic, partition if per_partition else None, value)
            first = first_seen.setdefault(rid, where)
            if first != where:
                places = seen_at.get(rid)
                if places is None:
                    seen_at[rid] = {first, where}
                else:
                    places.add(where)

    def _attribute(self, history: History, sole_sender: dict[RecordId, str]) -> None:
        """Which process wrote each copy of a shared record. A log record's producer id and
        epoch name the producer session that appended it; a session belongs to a process when
        it appended a record only that process sent, or a record that process's send was
        acknowledged at. The acknowledgement itself also names its record's writer."""
        shared = self.shared
        per_partition = self.per_partition
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
                rid = (topic, partition if per_partition else None, record.value)
                if rid in shared:
                    session_at[topic, partition, record.offset] = key
                else:
                    process = sole_sender.get(rid)
                    if process is not None:
                        own(key, process)
        acked_by: dict[Position, str] = {}
        for rid in sorted(shared, key=_sort_key):
            for send in self.sends_by_id[rid]:
                if send.outcome != "ok" or send.offset is None or send.partition is None:
                    continue
                where = (send.topic, send.partition, send.offset)
                if self.holds.get(where) != send.value or where in self.conflicts:
                    continue
                acked_by.setdefault(where, send.process)
                key = session_at.get(where)
                if key is not None:
                    own(key, send.process)
        for rid in sorted(shared, key=_sort_key):
            for where in self.positions(rid):
                writer = acked_by.get(where)
                if writer is None and where in session_at:
                    writer = owner.get(session_at[where])
                self.writer_at[where] = writer

    def _landed(self, history: History) -> dict[RecordId, set[Position]]:
        """Records at two or more positions, counting acknowledged positions with observed
        ones (Jepsen's version order takes both send and poll offsets)."""
        landed = {rid: set(places) for rid, places in self.seen_at.items()}
        acked_first: dict[RecordId, Position] = {}
        first_seen = self.first_seen
        for send, rid in zip(history.sends, self.send_ids, strict=True):
            if send.outcome != "ok" or send.offset is None or send.partition is None:
                continue
            where = (send.topic, send.partition, send.offset)
            places = landed.get(rid)
            if places is not None:
                places.add(where)
                continue
            first = first_seen.get(rid)
            if first is None:
                first = acked_first.setdefault(rid, where)
            if first != where:
                landed[rid] = {first, where}
        return landed

    def observed(self, rid: RecordId) -> bool:
        return rid in self.first_seen

    def positions(self, rid: RecordId) -> Iterable[Position]:
        places = self.seen_at.get(rid)
        if places is not None:
            return places
        first = self.first_seen.get(rid)
        return () if first is None else (first,)

    def lowest_offset(self, send: Send, rid: RecordId) -> tuple[int, int] | None:
        """(partition, offset) where the send's record first stands in its partition (or,
        when the partition is unknown, anywhere in its topic), else its acknowledged position.
        For a record several processes sent, copies another process is known to have written
        are not this send's."""
        partition = send.partition
        places = self.seen_at.get(rid)
        if places is None and rid not in self.shared:
            first = self.first_seen.get(rid)
            if first is not None and partition in (None, first[1]):
                return first[1], first[2]
        else:
            spots = [
                (where[1], where[2])
                for where in self.positions(rid)
                if partition in (None, where[1])
                and self.writer_at.get(where) in (None, send.process)
            ]
            if spots:
                return min(spots)
        if partition is not None and send.offset is not None:
            return partition, send.offset
        return None


def _sort_key(rid: RecordId) -> tuple[str, int, str]:
    """A record id as a sort key (its partition may be None)."""
    topic, partition, value = rid
    return (topic, -1 if partition is None else partition, value)


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
    found = sorted((sorted(places), _sort_key(rid), rid) for rid, places in seen.landed.items())
    for places, _, rid in found:
        sends = seen.sends_by_id.get(rid, [])
        observed = set(seen.positions(rid))
        anomaly.add(
            {
                "value": rid[2],
                "positions": [position_dict(where) for where in places[:MAX_LISTED]],
                "times_landed": len(places),
                "only_acknowledged": [
                    position_dict(where) for where in places if where not in observed
                ][:MAX_LISTED],
                "sends": [_send_summary(send) for send in sends[:MAX_LISTED]],
            }
        )


def _lost_and_unseen(
    sends: list[Send],
    seen: _Observations,
    lost: Anomaly,
    unseen: Anomaly,
    lost_elsewhere: set[RecordId] | None = None,
) -> None:
    """`sends` must be `History.sends`, whose records `seen.send_ids` lists. An `ok` send
    never observed is unseen unless it is lost: by this checker's judgement, or, when
    `lost_elsewhere` is given, by that set's."""
    first_seen = seen.first_seen
    for send, rid in zip(sends, seen.send_ids, strict=True):
        if send.outcome == "fail":
            continue
        observed = rid in first_seen
        if send.outcome == "info" and not observed:
            continue
        reason = _why_lost(send, rid, seen)
        if reason is not None:
            lost.add({"value": send.value, "topic": send.topic, **_send_summary(send), **reason})
        if send.outcome == "ok" and not observed:
            gone = reason is not None if lost_elsewhere is None else rid in lost_elsewhere
            if not gone:
                unseen.add({"value": send.value, "topic": send.topic, **_send_summary(send)})


def _why_lost(send: Send, rid: RecordId, seen: _Observations) -> dict[str, Any] | None:
    """Evidence that a must-have-committed send is missing where it should be, or None."""
    topic, partition, value = send.topic, send.partition, send.value
    if partition is None:
        logged = seen.logged_partitions.get(topic)
        if not logged or any((topic, p) in seen.log_starts for p in logged):
            return None  # no log, or a log whose deleted head may have held it
        # Present if in one of the topic's logs, or read from a partition that has no log.
        for _, where_partition, _ in seen.positions(rid):
            if where_partition not in logged or value in seen.logged[topic, where_partition]:
                return None
        return {"missing_from": "final logs", "logged_partitions": sorted(logged)}
    log = seen.logged.get((topic, partition))
    if log is not None:
        if value in log or below_log_start(seen.log_starts, topic, partition, send.offset):
            return None
        return {"missing_from": "final log"}
    if send.offset is None or value in seen.polled.get((topic, partition), ()):
        return None
    reached = seen.max_polled.get((topic, partition), -1)
    if reached > send.offset:
        return {"missing_from": "reads", "highest_offset_read": reached}
    return None


def below_log_start(
    starts: dict[tuple[str, int], int], topic: str, partition: int, offset: int | None
) -> bool:
    """Whether a write at ``offset`` (None: unknown) of a partition may lie below its final
    log's start, where the log says nothing (the records there were deleted)."""
    start = starts.get((topic, partition), 0)
    return start > 0 and (offset is None or offset < start)


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


def aborted_offsets(records: list[LogRecord], after: dict[int, Marker]) -> set[int]:
    """The offsets of a partition's records known to be aborted: under an ABORT marker of
    their producer (``after``: :func:`first_markers_after`), or marked ``aborted`` where the
    markers are not known (a real run's drain)."""
    if not after and isinstance(records, LogTable):
        return set()  # the model's log, no marker: it marks no record aborted itself
    return {
        r.offset
        for r in records
        if r.aborted or (r.offset in after and after[r.offset].type == "ABORT")
    }


def _lost_transactions(history: History, seen: _Observations, lost: Anomaly) -> None:
    """A transaction that must have committed (`ok`, or `info` with a value a read_committed
    poll returned) whose every write is proven missing: its partition has a final log and no
    record there that an ABORT marker cancelled (or that is marked `aborted`) holds it (for an
    unknown partition: none of the topic's logs does, and no read returned it from a partition
    without a log). A transaction with some writes visible and others missing is a
    torn_transaction instead."""
    if not history.txns:
        return
    committed: dict[tuple[str, int], set[str]] = {}
    for key, records in history.logs.items():
        aborted = aborted_offsets(
            records, first_markers_after(records, history.markers.get(key, []))
        )
        if not aborted:
            committed[key] = seen.logged[key]
            continue
        committed[key] = {r.value for r in records if r.offset not in aborted}
    read_committed: set[RecordId] = set()
    if any(txn.outcome == "info" for txn in history.txns):
        read_committed = {
            history.record_id(record.topic, record.partition, record.value)
            for poll in history.polls
            if poll.isolation == "read_committed"
            for record in poll.records
        }

    def missing(topic: str, partition: int | None, value: str, offset: int | None) -> str | None:
        if partition is not None:
            log = committed.get((topic, partition))
            if log is None or value in log:
                return None
            if below_log_start(seen.log_starts, topic, partition, offset):
                return None  # it may have been deleted with the log's head
            return "final log"
        logged = seen.logged_partitions.get(topic)
        if not logged or any((topic, p) in seen.log_starts for p in logged):
            return None
        for _, where_partition, _ in seen.positions(history.record_id(topic, None, value)):
            if where_partition not in logged or value in committed[topic, where_partition]:
                return None
        return "final logs"

    for txn in history.txns:
        writes = txn.sends
        if txn.outcome == "fail" or not writes:
            continue
        if txn.outcome == "info" and not any(
            history.record_id(w.topic, w.partition, w.value) in read_committed for w in writes
        ):
            continue
        reasons = [missing(w.topic, w.partition, w.value, w.offset) for w in writes]
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


def _nonmonotonic_sends(sends: list[Send], seen: _Observations, anomaly: Anomaly) -> None:
    """`sends` must be `History.sends` (in invocation order; `seen.send_ids` lists their
    records)."""
    # (process, topic, partition) -> (highest offset so far, the send that landed there)
    highest: dict[tuple[str, str, int], tuple[int, Send]] = {}
    for send, rid in zip(sends, seen.send_ids, strict=True):
        landed = seen.lowest_offset(send, rid)
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
