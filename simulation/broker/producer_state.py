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
epoch.

The class is pure logic with no SimPy in it, so every rule is unit-tested directly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from eosim.simulation.protocol import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    increment_sequence,
)
from eosim.simulation.records import LogBatch

NO_COORDINATOR_EPOCH = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH

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

    __slots__ = ("accept_unknown_producer_any_sequence", "cached_batches", "producers")

    def __init__(
        self, cached_batches: int = 5, accept_unknown_producer_any_sequence: bool = True
    ) -> None:
        self.cached_batches = cached_batches
        self.accept_unknown_producer_any_sequence = accept_unknown_producer_any_sequence
        self.producers: dict[int, ProducerStateEntry] = {}

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
    ) -> None:
        """Record an appended batch (after :meth:`check` said APPEND, or replaying the log,
        where nothing is validated)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        entry.maybe_update_epoch(epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        if len(entry.batches) > self.cached_batches:
            entry.batches.popleft()

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> Verdict:
        """May a COMMIT/ABORT marker of ``epoch`` from coordinator epoch ``coordinator_epoch``
        be appended? APPEND, INVALID_PRODUCER_EPOCH or COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return Verdict.APPEND
        if epoch < entry.epoch:
            return Verdict.INVALID_PRODUCER_EPOCH
        if entry.coordinator_epoch > coordinator_epoch:
            return Verdict.COORDINATOR_FENCED
        return Verdict.APPEND

    def update_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Record an appended marker (after :meth:`check_marker`, or replaying the log)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id)
            self.producers[producer_id] = entry
        entry.maybe_update_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch

    def load(self, batches: Iterable[LogBatch]) -> ProducerStateManager:
        """Rebuild the state from a log's batches, oldest first (a restarted broker, or one
        whose log was truncated, does this; Kafka starts from a snapshot instead)."""
        for b in batches:
            if b.control is not None:
                self.update_marker(b.producer_id, b.epoch, b.coordinator_epoch)
                continue
            self.update(
                b.producer_id,
                b.epoch,
                b.base_sequence,
                b.last_sequence,
                b.base_offset,
                b.last_offset,
            )
        return self

    def epoch_of(self, producer_id: int) -> int:
        """The producer's current epoch on this partition (NO_PRODUCER_EPOCH if unknown)."""
        entry = self.producers.get(producer_id)
        return entry.epoch if entry is not None else NO_PRODUCER_EPOCH

    def mark(self, producer_id: int, epoch: int, coordinator_epoch: int) -> Verdict:
        """Check a marker and, if it may be appended, record it."""
        verdict = self.check_marker(producer_id, epoch, coordinator_epoch)
        if verdict is Verdict.APPEND:
            self.update_marker(producer_id, epoch, coordinator_epoch)
        return verdict
