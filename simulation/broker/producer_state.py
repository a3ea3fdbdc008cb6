"""ProducerStateManager: the broker's per-partition memory of idempotent producers.

For every producer id it keeps the current epoch, the coordinator epoch of the last
transaction marker, and the metadata of the last five batches appended (first and last
sequence, offsets). Every produce request is judged against it, as Kafka's
``UnifiedLog.analyzeAndValidateProducerState`` and ``ProducerAppendInfo`` do:

1. Duplicate first: same epoch and exactly the same sequence range as a cached batch -> nothing
   is appended and the original offset is returned as if the write had just succeeded.
2. An older epoch -> INVALID_PRODUCER_EPOCH.
3. A newer epoch must start at sequence 0 (the cache is cleared), else OUT_OF_ORDER.
4. The same epoch must continue exactly at last sequence + 1 (2147483647 wraps to 0), else
   OUT_OF_ORDER. A duplicate older than the cached batches therefore gets OUT_OF_ORDER. With
   no batch cached at that epoch (a marker bumped the epoch, or a marker is all there is) the
   last sequence is "none", so the batch must start at 0 (``ProducerAppendInfo.checkSequence``
   accepts any sequence only when the producer has no epoch at all).
5. A producer id with no state (new, or expired) is accepted at any sequence (KIP-360).

A transaction marker (``appendEndTxnMarker``) is refused if its producer epoch is older than
the producer's (INVALID_PRODUCER_EPOCH) or its coordinator epoch is older than the last one
seen (TRANSACTION_COORDINATOR_FENCED, ``checkCoordinatorEpoch``). Otherwise it sets the
producer's epoch (a new one clears the cached batches; the same one keeps them) and coordinator
epoch. Since KIP-1228 (Kafka 4.2) a leader judges a transaction-version-2 marker more strictly
(``strict``, rule ``tv2_marker_requires_newer_epoch``): its epoch must be above the producer's,
or equal to it with no transaction of the producer open on the partition (a retry of a marker
already written, KAFKA-19999).

Producer ids expire (``removeExpiredProducers``): a producer whose last write here is at least
``producer.id.expiration.ms`` old and that has no transaction open on the partition is
forgotten, and its next batch is then judged as a new producer's (rule 5). The last write is
the max timestamp of its last data batch or, since KAFKA-9144's fix (Kafka 2.4.1/2.5.0), of its
last transaction marker too. Before the fix (rule ``producer_expiry_tracks_marker_timestamps``
false) the time came from the cached data batches only, and a marker with a new epoch (the
coordinator fencing a timed-out transaction) clears them: the entry had no time at all and
expired at the next check, fencing epoch and coordinator epoch with it.

A restart or a truncation does not keep the live state: Kafka rebuilds it from a producer
snapshot (``ProducerStateManager.readSnapshot``/``writeSnapshot``), which holds one batch per
producer, its last (last sequence, last offset, offset delta, timestamp), with its epoch,
coordinator epoch, last timestamp and open transaction's first offset, and drops at load the
producers expired by then (``loadFromSnapshot``). :meth:`ProducerStateManager.load_snapshot`
does that; :meth:`~eosim.simulation.broker.log.PartitionLog.rebuild_producer_state` says which
snapshot and which batches after it (rule ``producer_state_rebuilt_from_snapshots``).

The class is pure logic with no SimPy in it, so every rule is unit-tested directly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from eosim.simulation.protocol import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    increment_sequence,
)
from eosim.simulation.records import NO_TIMESTAMP, LogBatch

NO_COORDINATOR_EPOCH = -1
# producer.id.expiration.ms: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000.0


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    # The batch's max timestamp (BatchMetadata.timestamp).
    timestamp: float = NO_TIMESTAMP


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    # ProducerStateEntry.lastTimestamp: the max timestamp of the producer's last data batch or
    # transaction marker here.
    last_timestamp: float = NO_TIMESTAMP

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    def maybe_update_epoch(self, epoch: int) -> None:
        """A different epoch replaces the producer's and clears its cached batches."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    UNKNOWN_PRODUCER_ID = "unknown_producer_id"
    COORDINATOR_FENCED = "coordinator_fenced"


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    # For DUPLICATE: the offset the original batch was written at.
    duplicate_of: BatchMetadata | None = None


def in_sequence(last_seq: int, next_first_seq: int) -> bool:
    return next_first_seq == increment_sequence(last_seq, 1)


class ProducerStateManager:
    """Producer state of one partition: ``check`` a batch, then ``update`` once appended."""

    __slots__ = (
        "accept_unknown_producer_any_sequence",
        "cached_batches",
        "expiration_ms",
        "from_snapshots",
        "marker_timestamps",
        "producers",
    )

    def __init__(
        self,
        cached_batches: int = 5,
        accept_unknown_producer_any_sequence: bool = True,
        marker_timestamps: bool = True,
        expiration_ms: float = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        from_snapshots: bool = True,
    ) -> None:
        self.cached_batches = cached_batches
        self.accept_unknown_producer_any_sequence = accept_unknown_producer_any_sequence
        # KAFKA-9144's fix: a marker's timestamp counts as the producer's last write.
        self.marker_timestamps = marker_timestamps
        # producer.id.expiration.ms (ProducerStateManagerConfig): a snapshot's load drops the
        # producers idle for that long.
        self.expiration_ms = expiration_ms
        # Rule producer_state_rebuilt_from_snapshots: a restart or a truncation rebuilds this
        # state from a producer snapshot (one batch per producer) and the batches after it;
        # False replays the whole log (every cached batch kept).
        self.from_snapshots = from_snapshots
        self.producers: dict[int, ProducerStateEntry] = {}

    def empty_like(self) -> ProducerStateManager:
        """A new, empty state with this one's configuration."""
        return ProducerStateManager(
            self.cached_batches,
            self.accept_unknown_producer_any_sequence,
            self.marker_timestamps,
            self.expiration_ms,
            self.from_snapshots,
        )

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Check:
        if producer_id == NO_PRODUCER_ID:
            return Check(Verdict.APPEND)
        entry = self.producers.get(producer_id)
        if entry is None:
            if first_seq == 0 or self.accept_unknown_producer_any_sequence:
                return Check(Verdict.APPEND)
            return Check(Verdict.UNKNOWN_PRODUCER_ID)
        if epoch == entry.epoch:
            for cached in entry.batches:
                if cached.first_seq == first_seq and cached.last_seq == last_seq:
                    return Check(Verdict.DUPLICATE, cached)
        if epoch < entry.epoch:
            return Check(Verdict.INVALID_PRODUCER_EPOCH)
        if entry.epoch == NO_PRODUCER_EPOCH:
            ok = True  # no epoch at all: any sequence
        elif epoch != entry.epoch:
            ok = first_seq == 0
        else:
            # No cached batch at this epoch: the last sequence is NO_SEQUENCE, so only 0 follows.
            ok = in_sequence(entry.last_seq, first_seq)
        return Check(Verdict.APPEND if ok else Verdict.OUT_OF_ORDER_SEQUENCE)

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: float = NO_TIMESTAMP,
    ) -> None:
        """Record an appended batch of max timestamp ``timestamp`` (after :meth:`check` said
        APPEND, or replaying the log, where nothing is validated)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        entry.maybe_update_epoch(epoch)
        entry.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp)
        )
        if len(entry.batches) > self.cached_batches:
            entry.batches.popleft()
        entry.last_timestamp = timestamp  # ProducerStateEntry.addBatch

    def check_marker(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        strict: bool = False,
        transaction_open: bool = False,
    ) -> Verdict:
        """May a COMMIT/ABORT marker of ``epoch`` from coordinator epoch ``coordinator_epoch``
        be appended? APPEND, INVALID_PRODUCER_EPOCH or COORDINATOR_FENCED. ``strict``: the
        leader's check of a transaction-version-2 marker since KIP-1228
        (``ProducerAppendInfo.checkProducerEpoch``): the epoch must be above the producer's,
        or equal to it while the producer has no transaction open here
        (``transaction_open``), which is a retry of a marker already written."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return Verdict.APPEND
        if epoch < entry.epoch:
            return Verdict.INVALID_PRODUCER_EPOCH
        if strict and epoch == entry.epoch and transaction_open:
            return Verdict.INVALID_PRODUCER_EPOCH
        if entry.coordinator_epoch > coordinator_epoch:
            return Verdict.COORDINATOR_FENCED
        return Verdict.APPEND

    def update_marker(
        self, producer_id: int, epoch: int, coordinator_epoch: int, timestamp: float = NO_TIMESTAMP
    ) -> None:
        """Record an appended marker written at ``timestamp`` (after :meth:`check_marker`, or
        replaying the log)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id)
            self.producers[producer_id] = entry
        entry.maybe_update_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        if self.marker_timestamps:
            entry.last_timestamp = timestamp  # appendEndTxnMarker, since KAFKA-9144

    def load(self, batches: Iterable[LogBatch]) -> ProducerStateManager:
        """Replay a log's batches, oldest first, nothing validated (a follower's appends, and
        the batches after a snapshot when a restart or a truncation rebuilds the state)."""
        for b in batches:
            if b.control is not None:
                self.update_marker(b.producer_id, b.epoch, b.coordinator_epoch, b.timestamp)
                continue
            self.update(
                b.producer_id,
                b.epoch,
                b.base_sequence,
                b.last_sequence,
                b.base_offset,
                b.last_offset,
                b.timestamp,
            )
        return self

    def restore(self, snapshot: ProducerStateManager) -> ProducerStateManager:
        """Start from ``snapshot``'s entries, whole (copies); returns self, to :meth:`load`
        the rest. (Kafka's snapshots keep less: :meth:`load_snapshot`.)"""
        for pid, entry in snapshot.producers.items():
            self.producers[pid] = replace(entry, batches=deque(entry.batches))
        return self

    def load_snapshot(
        self,
        state: ProducerStateManager,
        now: float | None = None,
        ongoing: Container[int] = (),
    ) -> ProducerStateManager:
        """Load what a producer snapshot of ``state`` holds; returns self, to :meth:`load` the
        batches after it. A snapshot keeps, per producer, its epoch, coordinator epoch, last
        timestamp and only its last batch (``ProducerStateManager.writeSnapshot`` writes
        ``lastSeq``, ``lastDataOffset``, ``lastOffsetDelta``; ``readSnapshot`` makes an entry of
        that one batch), so a retry of any earlier batch is no longer recognised. At ``now``
        the producers expired by then are left out (``loadFromSnapshot`` filters
        ``isProducerExpired``; ``ongoing``: the producer ids with a transaction open at the
        snapshot, which never expire)."""
        for pid, entry in state.producers.items():
            if now is not None and self.is_expired(entry, now, self.expiration_ms, ongoing):
                continue
            last = deque(entry.batches) if not entry.batches else deque((entry.batches[-1],))
            self.producers[pid] = replace(entry, batches=last)
        return self

    def epoch_of(self, producer_id: int) -> int:
        """The producer's current epoch on this partition (NO_PRODUCER_EPOCH if unknown)."""
        entry = self.producers.get(producer_id)
        return entry.epoch if entry is not None else NO_PRODUCER_EPOCH

    def mark(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        timestamp: float = NO_TIMESTAMP,
        strict: bool = False,
        transaction_open: bool = False,
    ) -> Verdict:
        """Check a marker and, if it may be appended, record it (written at ``timestamp``;
        ``strict`` and ``transaction_open``: :meth:`check_marker`)."""
        verdict = self.check_marker(producer_id, epoch, coordinator_epoch, strict, transaction_open)
        if verdict is Verdict.APPEND:
            self.update_marker(producer_id, epoch, coordinator_epoch, timestamp)
        return verdict

    # -- expiration ----------------------------------------------------------------------
    def last_timestamp(self, entry: ProducerStateEntry) -> float:
        """When the producer last wrote here, as expiration sees it: ``lastTimestamp``; before
        KAFKA-9144's fix, the timestamp of its last cached data batch (none: no time)."""
        if self.marker_timestamps:
            return entry.last_timestamp
        return entry.batches[-1].timestamp if entry.batches else NO_TIMESTAMP

    def is_expired(
        self,
        entry: ProducerStateEntry,
        now: float,
        expiration_ms: float,
        ongoing: Container[int] = (),
    ) -> bool:
        """ProducerStateManager.isProducerExpired: no transaction open (``ongoing``: the
        producer ids with one) and ``producer.id.expiration.ms`` since its last write."""
        return (
            entry.producer_id not in ongoing and now - self.last_timestamp(entry) >= expiration_ms
        )

    def remove_expired_producers(
        self, now: float, expiration_ms: float, ongoing: Container[int] = ()
    ) -> list[int]:
        """ProducerStateManager.removeExpiredProducers: forget every expired producer; the ids
        removed, in the order they were first seen."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if self.is_expired(entry, now, expiration_ms, ongoing)
        ]
        for pid in expired:
            del self.producers[pid]
        return expired
