"""An append-only partition log of record batches, transactional ones included.

The log is the ground truth a run ends with. It keeps whole batches, each with the producer
id, epoch and sequence range it was written with, so that a restarted broker can rebuild
:class:`~eosim.simulation.broker.producer_state.ProducerStateManager` from it as Kafka does.

Transactions leave three traces in a log:

* transactional data batches, which open a transaction for their producer at their offset;
* control batches (one COMMIT or ABORT marker record), which close it;
* the aborted-transaction index: (producer id, first offset, marker offset) for every
  aborted transaction, which read_committed consumers need to skip its records.

The last stable offset (LSO) is the first offset of the earliest transaction that is still
open, or whose marker the high watermark has not yet passed (ProducerStateManager's first
unstable offset keeps a completed transaction "unreplicated" until then), or the high
watermark (the log end when none is given) when there is none. read_committed fetches stop
there.

The log's head can go (Kafka's ``UnifiedLog.deleteOldSegments``, ``maybeIncrementLogStartOffset``).
Its first offset, the log start offset, moves up when whole segments are deleted by retention
(``retention.ms``, ``retention.bytes``, :meth:`PartitionLog.delete_old_segments`), when an
administrator deletes records (DeleteRecords), or on a follower when its leader's log start
is ahead. Reads below it are refused (OFFSET_OUT_OF_RANGE), ListOffsets EARLIEST answers it,
and the LSO never lies below it. Batches wholly below it leave :attr:`PartitionLog.batches` at
once; a batch that straddles it stays (a read from the log start returns it whole, as Kafka's
does). The producer state those batches carried is kept (:attr:`PartitionLog.head_state`, what
Kafka's producer snapshots keep): since KAFKA-7190 (Kafka 2.4) a producer outlives its records
and goes only when it expires.

Producer snapshots (``<offset>.snapshot`` files beside Kafka's segments) decide what a restart
or a truncation rebuilds (:meth:`PartitionLog.rebuild_producer_state`). Kafka writes one at every
segment roll (``UnifiedLog.roll``, at the new segment's base offset), at the end of every
rebuild (``UnifiedLog.rebuildProducerState``: a truncation's target, a recovery's log end) and
during a restart's recovery (``LogLoader.recoverSegment``: at the end of each recovered
segment, the active one always among them); it deletes those above a truncation and at or
below the log start (``ProducerStateManager.truncateAndReload``), with their segments, and at a
restart every one but the segments' and the latest (``removeStraySnapshots``). eosim keeps only
their offsets: the roll snapshots are the segments' base offsets, the others
:attr:`PartitionLog.snapshot_offsets`. What a snapshot holds is worked out from the log when it
is loaded (the state at its offset, one batch per producer, less the producers expired by
then), which is what Kafka wrote there: a producer the live state forgot before the snapshot is
expired at the load as well, or wrote again, and then its last batch is the same.

Segments are what retention deletes: a new one starts (rolls) at a batch that would take the
active segment past ``segment.bytes``, or whose timestamp is more than ``segment.ms`` after
the active segment's first batch's (``LogSegment.shouldRoll``). Where segments end depends on
nothing but the batches, so eosim works them out only when something asks (a retention check,
the log start moving), and a log whose retention never runs pays nothing per append. Every
replica rolls at the same batches; Kafka's followers check the roll per fetched chunk, so their
segments can end a few batches apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Literal

from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.config import kafka_default
from eosim.simulation.history import LogRecords
from eosim.simulation.records import (
    CONTROL_BATCH_BYTES,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    AbortedTransaction,
    ControlType,
    LogBatch,
    batch_size,
)

__all__ = [
    "AbortedTransaction",
    "ControlType",
    "LogBatch",
    "LogConfig",
    "PartitionLog",
    "Segment",
]

# Kafka's LogConfig defaults: segment.bytes 1 GiB, segment.ms and retention.ms 7 days.
DEFAULT_SEGMENT_BYTES: int = kafka_default("log.segment.bytes")
DEFAULT_SEGMENT_MS = float(kafka_default("log.roll.ms"))
DEFAULT_RETENTION_MS = float(kafka_default("log.retention.ms"))


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's configs that decide what its log keeps (Kafka's ``LogConfig``)."""

    # retention.ms (None: -1, keep for ever) and retention.bytes (None: -1, no limit).
    retention_ms: float | None = DEFAULT_RETENTION_MS
    retention_bytes: int | None = kafka_default("log.retention.bytes")
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: float = DEFAULT_SEGMENT_MS
    # cleanup.policy: "delete" (True) for data topics; the internal topics are compacted, and
    # a compacted log is not deleted by retention (LogManager.cleanupLogs skips it).
    delete: bool = True


@dataclass(slots=True)
class Segment:
    """A segment's bookkeeping (Kafka's ``LogSegment``): where it starts, its bytes, the max
    timestamp of its first batch (``rollingBasedTimestamp``) and its largest timestamp."""

    base_offset: int
    size: int = 0
    first_timestamp: float = NO_TIMESTAMP
    largest_timestamp: float = NO_TIMESTAMP


class PartitionLog:
    """One replica's log of one topic partition."""

    __slots__ = (
        "_segmented_end",
        "aborted",
        "batches",
        "completed",
        "config",
        "head_state",
        "log_end_offset",
        "log_start_offset",
        "ongoing",
        "partition",
        "segments",
        "snapshot_offsets",
        "topic",
    )

    def __init__(self, topic: str, partition: int, config: LogConfig | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config if config is not None else LogConfig()
        self.batches: list[LogBatch] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        # producer id -> first offset of its open transaction (insertion-ordered)
        self.ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTransaction] = []
        # (first offset, marker offset) of completed transactions whose marker the high
        # watermark may not have passed yet, in marker order (ProducerStateManager's
        # unreplicatedTxns).
        self.completed: deque[tuple[int, int]] = deque()
        # The producer state of the batches below the log start (None: none left yet).
        self.head_state: ProducerStateManager | None = None
        # The segments worked out so far, oldest first (the last is the active one), and the
        # offset up to which the batches have been placed in them.
        self.segments: list[Segment] = [Segment(0)]
        self._segmented_end = 0
        # The offsets of the producer snapshots written by truncations and recoveries, in
        # order (those of segment rolls are the segments' base offsets).
        self.snapshot_offsets: list[int] = []

    def append(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        values: tuple[str, ...],
        now: float,
        transactional: bool = False,
        leader_epoch: int = 0,
        timestamp: float | None = None,
        size_bytes: int | None = None,
    ) -> LogBatch:
        """Append a data batch at ``now``; ``timestamp`` is its max timestamp (the producer's
        CreateTime; default ``now``) and ``size_bytes`` its size (default: estimated from the
        values)."""
        batch = LogBatch(
            self.log_end_offset,
            producer_id,
            epoch,
            base_sequence,
            values,
            now,
            transactional,
            leader_epoch=leader_epoch,
            timestamp=now if timestamp is None else timestamp,
            size_bytes=batch_size(values) if size_bytes is None else size_bytes,
        )
        if transactional and producer_id not in self.ongoing:
            self.ongoing[producer_id] = batch.base_offset
        self.batches.append(batch)
        self.log_end_offset += len(values)
        return batch

    def append_marker(
        self,
        producer_id: int,
        epoch: int,
        control: ControlType,
        now: float,
        coordinator_epoch: int = -1,
        leader_epoch: int = 0,
    ) -> LogBatch:
        """Write a COMMIT or ABORT marker for the producer's open transaction, if any."""
        marker = LogBatch(
            self.log_end_offset,
            producer_id,
            epoch,
            NO_SEQUENCE,
            ("",),
            now,
            True,
            control,
            coordinator_epoch,
            leader_epoch,
            timestamp=now,
            size_bytes=CONTROL_BATCH_BYTES,
        )
        self._append_control(marker)
        return marker

    def _append_control(self, marker: LogBatch) -> None:
        first = self.ongoing.pop(marker.producer_id, None)
        if first is not None:
            self.completed.append((first, marker.base_offset))
            if marker.control == "ABORT":
                self.aborted.append(
                    AbortedTransaction(marker.producer_id, first, marker.base_offset)
                )
        self.batches.append(marker)
        self.log_end_offset = marker.last_offset + 1

    def append_as_follower(self, batch: LogBatch) -> None:
        """Append a batch fetched from the leader, as it is (same offsets, producer fields and
        leader epoch: UnifiedLog.appendAsFollower). Batches are never changed once written, so
        the follower shares the leader's object."""
        if batch.base_offset != self.log_end_offset:
            raise ValueError(
                f"{self.topic}-{self.partition}: batch at {batch.base_offset} does not follow "
                f"the log end {self.log_end_offset}"
            )
        if batch.control is not None:
            self._append_control(batch)
            return
        if batch.transactional and batch.producer_id not in self.ongoing:
            self.ongoing[batch.producer_id] = batch.base_offset
        self.batches.append(batch)
        self.log_end_offset = batch.last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on (UnifiedLog.truncateTo), as a replica that
        becomes a follower, or a broker after a power loss, does. Whole batches go: one that
        holds ``offset`` goes entirely, so the log end may end up below ``offset``. Open
        transactions and the aborted-transaction index are rebuilt from what is left (a
        transaction whose marker was cut off is open again). Below the log start nothing is
        left: the log starts again, empty, at ``offset`` (truncateFullyAndStartAt)."""
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = self._first_batch_at(offset)
        if keep == len(self.batches):
            return
        cut = self.batches[keep:]
        self.batches = self.batches[:keep]
        if self.batches:
            self.log_end_offset = self.batches[-1].last_offset + 1
        else:
            # Nothing left at or above the log start: the log ends where the first cut batch
            # began (which may be below the log start, in a batch that straddled it).
            self.log_end_offset = cut[0].base_offset
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        # Transactions that began below the log start and are still open stay open.
        start = self.log_start_offset
        self.ongoing = {pid: first for pid, first in self.ongoing.items() if first < start}
        self.aborted = []
        self.completed = deque((f, m) for f, m in self.completed if m < self.log_end_offset)
        # The snapshots above the new end go (with their segments, and truncateAndReload).
        self.snapshot_offsets = [o for o in self.snapshot_offsets if o <= self.log_end_offset]
        for b in self.batches:
            if b.control is None:
                if b.transactional and b.producer_id not in self.ongoing:
                    self.ongoing[b.producer_id] = b.base_offset
                continue
            first = self.ongoing.pop(b.producer_id, None)
            if b.control == "ABORT" and first is not None:
                self.aborted.append(AbortedTransaction(b.producer_id, first, b.base_offset))
        self._segments_truncated(cut)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it again, empty, at ``offset`` (UnifiedLog.
        truncateFullyAndStartAt): a follower whose log ends below its leader's log start, or a
        truncation below this log's start. The producer state goes with it."""
        self.batches = []
        self.log_start_offset = self.log_end_offset = offset
        self.ongoing = {}
        self.aborted = []
        self.completed = deque()
        self.head_state = None
        self.segments = [Segment(offset)]
        self._segmented_end = offset
        self.snapshot_offsets = []  # ProducerStateManager.truncateFullyAndStartAt

    # -- producer snapshots -----------------------------------------------------------------
    def latest_snapshot(self, offset: int) -> int | None:
        """The offset of the latest producer snapshot above the log start and at or below
        ``offset`` (a segment's base or one of :attr:`snapshot_offsets`), None if there is
        none: the one ``ProducerStateManager.truncateAndReload`` loads, since it deletes
        those above ``offset`` and those at or below the log start."""
        self._segment_batches()
        start = self.log_start_offset
        found: int | None = None
        for o in self.snapshot_offsets:
            if start < o <= offset and (found is None or o > found):
                found = o
        for seg in reversed(self.segments):
            if seg.base_offset <= start:
                break
            if seg.base_offset <= offset:
                found = seg.base_offset if found is None else max(found, seg.base_offset)
                break
        return found

    def recovered(self) -> None:
        """A restart's log recovery (``LogLoader.load``): every segment from the recovery
        point on, the active one always, is recovered and a producer snapshot written at its
        end (``recoverSegment``), so the latest is at the log end; then
        ``removeStraySnapshots`` deletes every snapshot that is not at a segment's base offset
        but the latest. A broker's crash is always an unclean shutdown in eosim; after a clean
        one Kafka's snapshot at the log end (``UnifiedLog.close``) gives the same."""
        end = self.log_end_offset
        self.snapshot_offsets = [end] if end > self.log_start_offset else []

    def rebuild_producer_state(
        self, fresh: ProducerStateManager, now: float | None = None
    ) -> ProducerStateManager:
        """The producer state of this log at its end, rebuilt into the empty ``fresh`` at
        ``now`` after a truncation or a restart (``UnifiedLog.rebuildProducerState``):
        ``truncateAndReload`` loads the latest snapshot at or below the end
        (:meth:`latest_snapshot`) and the batches after it are replayed; then a snapshot is
        written at the end. A snapshot holds one batch per producer and drops the producers
        expired by ``now`` (:meth:`ProducerStateManager.load_snapshot`), so after a restart
        only each producer's last batch is recognised as a duplicate. With no snapshot, the
        log is replayed from its start, after the deleted head's state (which Kafka keeps only
        in snapshots: loaded as one). Rule ``producer_state_rebuilt_from_snapshots`` false
        (``fresh.from_snapshots``): the deleted head's state and every batch, whole."""
        if not fresh.from_snapshots:
            if self.head_state is not None:
                fresh.restore(self.head_state)
            return fresh.load(self.batches)
        start, end = self.log_start_offset, self.log_end_offset
        snapshot = self.latest_snapshot(end)
        # The state the snapshot was written from: the deleted head's and every batch below it
        # (all of them below a snapshot at the log end), with the transactions open there.
        at = self._first_batch_at(snapshot) if snapshot is not None else 0
        state = fresh.empty_like()
        if self.head_state is not None:
            state.restore(self.head_state)
        ongoing = {pid for pid, first in self.ongoing.items() if first < start}
        for b in self.batches[:at]:
            if b.control is not None:
                ongoing.discard(b.producer_id)
            elif b.transactional:
                ongoing.add(b.producer_id)
        state.load(self.batches[:at])
        fresh.load_snapshot(state, now, ongoing)
        fresh.load(self.batches[at:])
        # rebuildProducerState ends with a snapshot at the end (takeSnapshot: unless there is
        # one there already); truncateAndReload deleted those above it and at or below the
        # log start.
        self.snapshot_offsets = [o for o in self.snapshot_offsets if start < o <= end]
        if end > start and (not self.snapshot_offsets or self.snapshot_offsets[-1] < end):
            self.snapshot_offsets.append(end)
        return fresh

    # -- the log start ------------------------------------------------------------------
    def increment_log_start_offset(self, offset: int, state: ProducerStateManager) -> bool:
        """Move the log start up to ``offset`` (UnifiedLog.maybeIncrementLogStartOffset; the
        caller has checked it is not above the high watermark); True if it moved. Batches
        wholly below it go; the producer state they carried stays in :attr:`head_state`
        (``state``, the replica's live producer state, says how to keep it). Aborted
        transactions that ended below it go (their index goes with their segment)."""
        if offset <= self.log_start_offset:
            return False
        self._segment_batches()  # the segments keep the sizes of the batches about to go
        keep = self._first_batch_at(offset)
        if keep:
            gone = self.batches[:keep]
            self.batches = self.batches[keep:]
            if self.head_state is None:
                self.head_state = state.empty_like()
            self.head_state.load(gone)
        self.log_start_offset = offset
        if self.aborted and self.aborted[0].last_offset < offset:
            self.aborted = [a for a in self.aborted if a.last_offset >= offset]
        return True

    # -- segments and retention ------------------------------------------------------------
    def _segment_batches(self) -> None:
        """Place the batches appended since the last call in segments, rolling a new one where
        Kafka's append would have (``LogSegment.shouldRoll``: the batch does not fit in
        ``segment.bytes``, or its timestamp is more than ``segment.ms`` after the segment's
        first batch's). An empty active segment is never rolled (``LocalLog.roll`` replaces
        it)."""
        if self._segmented_end >= self.log_end_offset:
            return
        limit, roll_ms = self.config.segment_bytes, self.config.segment_ms
        segments = self.segments
        active = segments[-1]
        for b in self.batches[self._first_batch_at(self._segmented_end) :]:
            if b.base_offset < self._segmented_end:
                continue  # placed already (a batch that straddles the mark cannot occur)
            if active.size > 0 and (
                active.size > limit - b.size_bytes or b.timestamp - active.first_timestamp > roll_ms
            ):
                active = Segment(b.base_offset)
                segments.append(active)
            if active.size == 0:
                active.first_timestamp = b.timestamp
            active.size += b.size_bytes
            if b.timestamp > active.largest_timestamp:
                active.largest_timestamp = b.timestamp
        self._segmented_end = self.log_end_offset

    def _segments_truncated(self, cut: list[LogBatch]) -> None:
        """The batches ``cut`` were truncated off the end: segments that began after the new
        end go, and the last one left loses their bytes (LocalLog.truncateTo)."""
        end = self.log_end_offset
        if self._segmented_end <= end:
            return
        counted = [b for b in cut if b.base_offset < self._segmented_end]
        boundary = self._segmented_end  # where the segments that go began
        while len(self.segments) > 1 and self.segments[-1].base_offset > end:
            boundary = self.segments.pop().base_offset
        last = self.segments[-1]
        last.size -= sum(
            b.size_bytes for b in counted if last.base_offset <= b.base_offset < boundary
        )
        left = [b.timestamp for b in self.batches if b.base_offset >= last.base_offset]
        if left:
            last.largest_timestamp = max(left)
        elif last.size <= 0:
            last.size = 0
            last.first_timestamp = last.largest_timestamp = NO_TIMESTAMP
        self._segmented_end = end

    def roll(self) -> None:
        """UnifiedLog.roll: the next batch starts a new segment (unless the active one is
        empty, which it would replace)."""
        self._segment_batches()
        if self.segments[-1].size > 0:
            self.segments.append(Segment(self.log_end_offset))

    @property
    def number_of_segments(self) -> int:
        """UnifiedLog.numberOfSegments."""
        self._segment_batches()
        return len(self.segments)

    @property
    def size(self) -> int:
        """The log's size in bytes (UnifiedLog.size: every segment's)."""
        self._segment_batches()
        return sum(s.size for s in self.segments)

    def delete_old_segments(
        self, now: float, high_watermark: int, state: ProducerStateManager
    ) -> int:
        """UnifiedLog.deleteOldSegments at ``now``: delete the segments wholly below the log
        start, then (``cleanup.policy=delete``) those that take the log past
        ``retention.bytes``, then those whose largest timestamp is more than ``retention.ms``
        old. Oldest first and only while the predicate holds; never past the high watermark
        (a segment goes only when the next one starts at or below it: ``deletableSegments``),
        never an empty active segment. The active segment itself can go: a new, empty one is
        rolled first. The number of segments deleted. Where nothing can be deleted (no
        DeleteRecords moved the start, no size limit, no segment old enough) nothing is worked
        out, so a log with Kafka's defaults costs a few comparisons."""
        config = self.config
        first = self.segments[0]
        # The first segment's largest timestamp is at least its first batch's, and deletion
        # by age stops at the first segment young enough.
        oldest = first.largest_timestamp
        if first.size == 0 and self.batches:
            oldest = self.batches[0].timestamp
        if not (
            self.log_start_offset > first.base_offset
            or (config.delete and config.retention_bytes is not None)
            or (
                config.delete
                and config.retention_ms is not None
                and now - oldest > config.retention_ms
            )
        ):
            return 0
        self._segment_batches()
        start = self.log_start_offset

        def below_start(_seg: Segment, nxt: Segment | None) -> bool:
            return nxt is not None and nxt.base_offset <= start

        deleted = self._delete_segments(below_start, high_watermark, state)
        if not config.delete:
            return deleted
        if config.retention_bytes is not None:
            excess = [sum(s.size for s in self.segments) - config.retention_bytes]
            if excess[0] >= 0:

                def over_size(seg: Segment, _nxt: Segment | None) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(over_size, high_watermark, state)
        retention_ms = config.retention_ms
        if retention_ms is not None:

            def too_old(seg: Segment, _nxt: Segment | None) -> bool:
                return now - seg.largest_timestamp > retention_ms

            deleted += self._delete_segments(too_old, high_watermark, state)
        return deleted

    def _delete_segments(
        self,
        predicate: Callable[[Segment, Segment | None], bool],
        high_watermark: int,
        state: ProducerStateManager,
    ) -> int:
        """UnifiedLog.deletableSegments then deleteSegments; the number deleted."""
        segments = self.segments
        count = 0
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if high_watermark < upper or not predicate(seg, nxt):
                break
            if nxt is None and seg.size == 0:
                break  # the empty active segment stays
            count += 1
        if count == 0:
            return 0
        if count == len(segments):
            # Every segment goes: roll an empty one at the log end first, so there is one.
            segments.append(Segment(self.log_end_offset))
        new_start = segments[count].base_offset
        del segments[:count]
        self.increment_log_start_offset(new_start, state)
        return count

    def last_stable_offset(self, high_watermark: int | None = None) -> int:
        """UnifiedLog.lastStableOffset: the first unstable offset (an open transaction's first
        offset, or that of a completed one whose marker is at or above the high watermark) if
        it is below the high watermark, else the high watermark (the log end without one);
        never below the log start (UnifiedLog.maybeIncrementFirstUnstableOffset)."""
        completed = self.completed
        if high_watermark is None:
            bound = self.log_end_offset
        else:
            bound = high_watermark
            while completed and completed[0][1] < bound:
                completed.popleft()  # ProducerStateManager.onHighWatermarkUpdated
        if not self.ongoing and not completed:
            return bound
        unstable = [f for f, m in completed if m >= bound]
        lso = min([bound, *self.ongoing.values(), *unstable])
        if lso < self.log_start_offset:
            return min(bound, self.log_start_offset)
        return lso

    def fetch(
        self,
        offset: int,
        isolation: Literal["read_committed", "read_uncommitted"] | str,
        max_records: int | None = None,
        high_watermark: int | None = None,
    ) -> tuple[list[LogBatch], list[AbortedTransaction]]:
        """Batches at or after ``offset`` up to the isolation level's bound (whole batches,
        at least one, about ``max_records`` records), and (for read_committed) the aborted
        transactions that overlap them. Consumers read to the high watermark (read_committed:
        to the last stable offset, which never passes it); a follower (``"replica"``) reads
        to the log end."""
        if isolation == "read_committed":
            bound = self.last_stable_offset(high_watermark)
        elif high_watermark is None or isolation == "replica":
            bound = self.log_end_offset
        else:
            bound = high_watermark
        i = self._first_batch_at(offset)
        batches: list[LogBatch] = []
        taken = 0
        for b in self.batches[i:]:
            if b.base_offset >= bound or (
                max_records is not None and batches and taken >= max_records
            ):
                break
            batches.append(b)
            taken += len(b.values)
        if isolation != "read_committed" or not batches:
            return batches, []
        last = batches[-1].last_offset
        aborted = [a for a in self.aborted if a.first_offset <= last and a.last_offset >= offset]
        return batches, aborted

    def _first_batch_at(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= ``offset`` (binary search)."""
        lo, hi = 0, len(self.batches)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.batches[mid].last_offset < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def records(self) -> LogRecords:
        """Every data record in offset order, as written to a history's ``log`` line.

        Control records are left out; their offsets show as gaps. So are the records of a
        batch that straddles the log start that lie below it."""
        out = LogRecords()
        start = self.log_start_offset
        for b in self.batches:
            if b.control is not None:
                continue
            first = max(start - b.base_offset, 0)  # the records below the log start, if any
            n = len(b.values)
            if first >= n:
                continue
            if b.base_sequence == NO_SEQUENCE:
                sequences: Iterable[int] = repeat(NO_SEQUENCE, n - first)
            else:
                sequences = range(b.base_sequence + first, b.base_sequence + n)
            out.extend(
                range(b.base_offset + first, b.base_offset + n),
                b.values[first:] if first else b.values,
                b.producer_id,
                b.epoch,
                sequences,
                b.append_time if b.transactional else None,
            )
        return out

    def markers(self) -> list[dict[str, object]]:
        """The control records, as a history ``log`` line's ``markers``."""
        return [
            {
                "offset": b.base_offset,
                "producer_id": b.producer_id,
                "type": b.control,
                "time": round(b.append_time, 6),
            }
            for b in self.batches
            if b.control is not None and b.base_offset >= self.log_start_offset
        ]
