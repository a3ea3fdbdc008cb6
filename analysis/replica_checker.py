"""Check that the replicas of a partition agree on its committed prefix (`replica_divergence`).

This is the "log matching" invariant of the Kafka replication specification
(Vanlightly/kafka-tlaplus, `LogMatchingProperty`): for every two replicas of a partition, at
every offset below both their high watermarks, the two logs hold the same entry. Above a
replica's high watermark its log may legitimately differ (a follower not yet truncated to a new
leader, a leader's uncommitted tail), so nothing there is judged; a follower whose high
watermark lags the leader's is compared only up to its own.

How it judges, from the `replica` lines (`History.replicas`):

* Each replica's bound is the lower of its `high_watermark` and its `log_end_offset` (Kafka
  keeps a replica's high watermark at or below its log end, `UnifiedLog.updateHighWatermark`;
  the specification asks for both). Two replicas are compared below the lower of their bounds.
* An offset's *entry* on a replica is its data record (value, producer id, epoch, sequence and
  transactional flag), its control marker (type and producer id), or nothing. Entries are
  compared on what both replicas state: a field one replica leaves null is not compared, and
  append times are never compared (each replica appends at its own time). A record on one side
  and a marker or nothing on the other diverges; so does a marker with another type or
  producer. Control records appear only among `markers`, so an offset that is a marker on both
  replicas is no gap. A replica's log starts at its `log_start_offset` (0 when absent; records
  below it were deleted by retention or DeleteRecords, each replica in its own time), so two
  replicas are compared only at and above the higher of their starts; there, an offset below
  the bound that one replica lacks and the other holds is a divergence; one both lack is not.
* Only replicas that can no longer change by replication alone are judged: a replica line
  with ``"settled": false`` (a follower that had not yet fetched from the current leader when
  the run ended, whose next fetch could still truncate it) is left out, so a divergence that
  would heal is not reported. A run normally waits for every replica to settle (its
  converge phase) and says in a warning when one did not.
* Count: one per diverging partition. The example shows the lowest diverging offset of the
  partition, the first pair of replicas (by broker name) diverging there, each replica's
  broker, leadership, leader epoch, high watermark, log end and entry at that offset, and every
  diverging pair with its first diverging offset.

The result is deterministic: partitions, pairs and offsets are visited in sorted order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from eosim.analysis.anomalies import names
from eosim.analysis.checker import MAX_LISTED, Anomaly
from eosim.analysis.columns import LogTable
from eosim.analysis.history import History, LogRecord, Marker, Replica

# Declared in eosim.analysis.anomalies.
REPLICA_ANOMALIES = names(check="replica_checker")

# An offset's entry on one replica: a record, a control marker, or None (absent).
Entry = LogRecord | Marker | None


def check_replicas(history: History) -> dict[str, Anomaly]:
    """Every name in `REPLICA_ANOMALIES`, with count 0 when absent (always, for a history
    without `replica` lines)."""
    anomaly = Anomaly("replica_divergence")
    by_partition: dict[tuple[str, int], list[Replica]] = defaultdict(list)
    for replica in history.replicas:
        if replica.settled:
            by_partition[replica.topic, replica.partition].append(replica)
    for (topic, partition), replicas in sorted(by_partition.items()):
        replicas = sorted(replicas, key=lambda r: r.broker)
        entries = _Entries(replicas)
        pairs: list[tuple[int, int, int]] = []  # (first diverging offset, index a, index b)
        for a in range(len(replicas)):
            for b in range(a + 1, len(replicas)):
                if _identical(replicas[a], replicas[b]):
                    continue
                offset = _first_divergence(replicas[a], entries[a], replicas[b], entries[b])
                if offset is not None:
                    pairs.append((offset, a, b))
        if not pairs:
            continue
        pairs.sort()
        offset, a, b = pairs[0]
        anomaly.add(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "replicas": [_replica_summary(replicas[i], entries[i].get(offset)) for i in (a, b)],
                "diverging_pairs": len(pairs),
                "pairs": [
                    {"brokers": [replicas[i].broker, replicas[j].broker], "offset": first}
                    for first, i, j in pairs[:MAX_LISTED]
                ],
            }
        )
    return {"replica_divergence": anomaly}


class _Entries:
    """Each replica's entries by offset, built for a replica the first time it is asked for."""

    def __init__(self, replicas: list[Replica]) -> None:
        self._replicas = replicas
        self._built: dict[int, dict[int, LogRecord | Marker]] = {}

    def __getitem__(self, index: int) -> dict[int, LogRecord | Marker]:
        if index not in self._built:
            self._built[index] = _entries(self._replicas[index])
        return self._built[index]


def _entries(replica: Replica) -> dict[int, LogRecord | Marker]:
    entries: dict[int, LogRecord | Marker] = {r.offset: r for r in replica.records}
    for marker in replica.markers:
        entries.setdefault(marker.offset, marker)
    return entries


def _identical(left: Replica, right: Replica) -> bool:
    """Whether two replicas of the model hold exactly the same records and markers over the
    range `_first_divergence` compares: then no entry there can differ. Compared column by
    column (`eosim.analysis.columns.LogTable`), without a `LogRecord` per record; False
    (compare entry by entry) for replicas read from a file."""
    if not (isinstance(left.records, LogTable) and isinstance(right.records, LogTable)):
        return False
    bound = min(_bound(left), _bound(right))
    start = max(left.log_start_offset, right.log_start_offset)
    in_range = [m for m in left.markers if start <= m.offset < bound]
    if in_range != [m for m in right.markers if start <= m.offset < bound]:
        return False
    return left.records.same_records(right.records, start, bound)


def _bound(replica: Replica) -> int:
    return min(replica.high_watermark, replica.log_end_offset)


def _first_divergence(
    left: Replica,
    left_entries: dict[int, LogRecord | Marker],
    right: Replica,
    right_entries: dict[int, LogRecord | Marker],
) -> int | None:
    """The lowest offset below both replicas' bounds, and at or above both their log starts,
    where their entries differ, or None."""
    bound = min(_bound(left), _bound(right))
    start = max(left.log_start_offset, right.log_start_offset)
    offsets = {o for o in left_entries if start <= o < bound}
    offsets |= {o for o in right_entries if start <= o < bound}
    for offset in sorted(offsets):
        if _differ(left_entries.get(offset), right_entries.get(offset)):
            return offset
    return None


def _same(a: Any, b: Any) -> bool:
    """Equal, or not stated (null) on one side."""
    return a is None or b is None or a == b


def _differ(left: Entry, right: Entry) -> bool:
    if type(left) is not type(right):
        return True  # a record against a marker, or either against nothing
    if isinstance(left, LogRecord) and isinstance(right, LogRecord):
        return not (
            left.value == right.value
            and _same(left.producer_id, right.producer_id)
            and _same(left.epoch, right.epoch)
            and _same(left.sequence, right.sequence)
            and _same(left.transactional, right.transactional)
        )
    if isinstance(left, Marker) and isinstance(right, Marker):
        return left.type != right.type or left.producer_id != right.producer_id
    return False


def entry_dict(entry: Entry) -> dict[str, Any] | None:
    """An entry as it appears in examples: a record's value and producer fields, a marker's
    type and producer id, or None for an offset the replica lacks."""
    if isinstance(entry, LogRecord):
        return {
            "record": entry.value,
            "producer_id": entry.producer_id,
            "epoch": entry.epoch,
            "sequence": entry.sequence,
        }
    if isinstance(entry, Marker):
        return {"marker": entry.type, "producer_id": entry.producer_id}
    return None


def _replica_summary(replica: Replica, entry: Entry) -> dict[str, Any]:
    return {
        "broker": replica.broker,
        "leader": replica.leader,
        "leader_epoch": replica.leader_epoch,
        "high_watermark": replica.high_watermark,
        "log_end_offset": replica.log_end_offset,
        "entry": entry_dict(entry),
    }
