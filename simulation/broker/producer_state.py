"""ProducerStateManager: the broker's per-partition memory of idempotent producers.

For every producer id it keeps the current epoch and the metadata of the last five batches
appended (first and last sequence, offsets). Every produce request is judged against it:

1. Duplicate first: same epoch and exactly the same sequence range as a cached batch -> nothing
   is appended and the original offset is returned as if the write had just succeeded.
2. An older epoch -> INVALID_PRODUCER_EPOCH.
3. A newer epoch must start at sequence 0 (the cache is cleared), else OUT_OF_ORDER.
4. The same epoch must continue exactly at last sequence + 1 (2147483647 wraps to 0), else
   OUT_OF_ORDER. A duplicate older than the cached batches therefore gets OUT_OF_ORDER.
5. A producer id with no state (new, or expired) is accepted at any sequence (KIP-360).

The class is pure logic with no SimPy in it, so every rule is unit-tested directly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from simulation.protocol import NO_PRODUCER_ID, NO_SEQUENCE, increment_sequence


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    UNKNOWN_PRODUCER_ID = "unknown_producer_id"


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
        if epoch > entry.epoch:
            ok = first_seq == 0
        else:
            ok = entry.last_seq == NO_SEQUENCE or in_sequence(entry.last_seq, first_seq)
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
        """Record an appended batch (after :meth:`check` said APPEND)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        if len(entry.batches) > self.cached_batches:
            entry.batches.popleft()

    def mark(self, producer_id: int, epoch: int) -> bool:
        """A transaction marker of ``epoch`` is appended: a newer epoch replaces the
        producer's (and clears its sequences). False if the marker's epoch is stale."""
        entry = self.producers.get(producer_id)
        if entry is None:
            self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
            return True
        if epoch < entry.epoch:
            return False
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        return True
