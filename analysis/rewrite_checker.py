"""Check that what a consumer read at an offset stays there (`offset_rewrite`).

This is the "consistent reads" invariant of the Kafka replication specification
(Vanlightly/kafka-tlaplus, `ConsistentReadProperty`): once a consumer has read a record at a
position (topic, partition, offset), the partition keeps that record there. Consumers read
only below the leader's high watermark, and a record below it is on every in-sync replica, so
with clean leader elections a read is never undone. Two things break it: an unclean leader
election of a replica that lacks the record, and, before KIP-101 (leader epochs), a follower
that truncates its log to its own high watermark, which can lag the leader's, when it restarts
and is then elected. A consumer has read "a" at offset 5 from the old leader; the new leader's
log ends at 5 after its truncation, and it appends "b" at 5.

How it judges:

* A *read* is a record returned by an `ok` poll, at the poll's completion `time`.
* A *later observation* of the position is a record another `ok` poll (of any process, at any
  isolation level) returned there, when that poll was invoked after the read's poll completed
  (real-time order, as in Jepsen: polls that overlap in time are not ordered), or the
  partition's final `log` line (taken after every poll), which shows a record or a control
  marker there.
* A position is rewritten when some read of it is followed by a later observation of another
  value there (or of a control marker). Counted once per position; the example shows the
  earliest such read and the earliest later observation that contradicts it, with the final
  log's `leader` and `high_watermark` when that line gives them.

What it does not judge: a position that the final log no longer holds (truncated and never
rewritten) is no rewrite: nothing later shows another value there. The read value may then be
missing from the log, which `lost_write` judges. Reads that disagree but overlap in time, and
acknowledgements that disagree with reads, are left to `inconsistent_offsets`
(eosim.analysis.checker), which flags every position that any two sources associate with
different values, unordered.
Every `offset_rewrite` position is therefore also an `inconsistent_offsets` one, unless the
later observation is a control marker (markers are not values, so `inconsistent_offsets` does
not see them).

The result is deterministic: positions are visited in sorted order, reads in completion order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from eosim.analysis.anomalies import names
from eosim.analysis.checker import Anomaly, Position, position_dict
from eosim.analysis.history import History, Marker, Poll

# Declared in eosim.analysis.anomalies.
REWRITE_ANOMALIES = names(check="rewrite_checker")

# One read: the poll that returned it (its index in `History.polls`) and the value.
_Read = tuple[int, Poll, str]


def check_rewrites(history: History) -> dict[str, Anomaly]:
    """Every name in `REWRITE_ANOMALIES`, with count 0 when absent."""
    anomaly = Anomaly("offset_rewrite")
    finals = _FinalLogs(history)
    # First pass, cheap: the first value read at each position, and the positions read with
    # more than one value or holding another entry in the final log. Only those can have been
    # rewritten, and only their reads are gathered.
    first: dict[Position, str] = {}
    suspects: set[Position] = set()
    for poll in history.polls:
        for topic, partition, offset, value in poll.records:
            where = (topic, partition, offset)
            if first.setdefault(where, value) != value:
                suspects.add(where)
    for where, value in first.items():
        final = finals.at(where)
        if final is not None and final != value:
            suspects.add(where)
    if not suspects:
        return {"offset_rewrite": anomaly}
    reads: dict[Position, list[_Read]] = defaultdict(list)
    for index, poll in enumerate(history.polls):
        for topic, partition, offset, value in poll.records:
            where = (topic, partition, offset)
            if where in suspects:
                reads[where].append((index, poll, value))
    for where in sorted(suspects):
        found = _first_rewrite(reads[where], finals.at(where))
        if found is None:
            continue
        read, later = found
        _, poll, value = read
        anomaly.add(
            {
                **position_dict(where),
                "read": _read_dict(poll, value),
                "later": later if isinstance(later, dict) else _later_final(history, where, later),
                "reads": len(reads[where]),
            }
        )
    return {"offset_rewrite": anomaly}


class _FinalLogs:
    """What the final `log` lines hold at a position, built per partition on demand."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.built: dict[tuple[str, int], dict[int, str | Marker]] = {}

    def at(self, where: Position) -> str | Marker | None:
        key = (where[0], where[1])
        held = self.built.get(key)
        if held is None:
            held = {r.offset: r.value for r in self.history.logs.get(key, [])}
            for marker in self.history.markers.get(key, []):
                held.setdefault(marker.offset, marker)
            self.built[key] = held
        return held.get(where[2])


def _first_rewrite(
    reads: list[_Read], final: str | Marker | None
) -> tuple[_Read, dict[str, Any] | str | Marker] | None:
    """The earliest read (in completion order) that a later observation contradicts, with the
    earliest such observation: a later poll's read (as an example dict) or the final log's
    entry."""
    for read in reads:
        index, poll, value = read
        for other_index, other, other_value in reads:
            if other_index == index or other_value == value:
                continue
            if other.invoke_time is not None and other.invoke_time > poll.time:
                return read, {"source": "poll", **_read_dict(other, other_value)}
        if final is not None and final != value:
            return read, final
    return None


def _read_dict(poll: Poll, value: str) -> dict[str, Any]:
    return {
        "value": value,
        "process": poll.process,
        "invoke_time": poll.invoke_time,
        "time": poll.time,
        "isolation": poll.isolation,
    }


def _later_final(history: History, where: Position, entry: str | Marker) -> dict[str, Any]:
    later: dict[str, Any] = {"source": "final log"}
    if isinstance(entry, Marker):
        later.update(marker=entry.type, producer_id=entry.producer_id)
    else:
        later["value"] = entry
    key = (where[0], where[1])
    if key in history.leaders:
        later["leader"] = history.leaders[key]
    if key in history.high_watermarks:
        later["high_watermark"] = history.high_watermarks[key]
    return later
