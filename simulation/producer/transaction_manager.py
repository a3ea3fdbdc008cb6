"""TransactionManager, idempotence part: producer id, epoch and per-partition sequences.

Kafka keeps the idempotent producer's bookkeeping in ``TransactionManager`` even when there
are no transactions, and so does this module (transactions are a later layer).

Per partition it tracks the next sequence to assign, the last acknowledged sequence and the
batches in flight, ordered by sequence. The rules it implements:

* Sequences are assigned at drain time, and ``nextSequence`` advances by the record count.
* A batch that fails after it may have been written (a delivery timeout after it was sent)
  leaves the partition's sequences *unresolved*. Nothing more is drained to that partition
  until every in-flight batch has completed. Then, if ``lastAcked + 1 == nextSequence``,
  the failed batch did land and the state is consistent. Otherwise the epoch must be
  bumped (KIP-360).
* OUT_OF_ORDER_SEQUENCE_NUMBER is retried when the batch is not the next expected one (an
  earlier batch is being retried) or its sequence was reset. When it *is* the next one, the
  gap is real: an idempotent producer bumps its epoch and retries.
* An epoch bump for an idempotent producer is local to the client: epoch + 1 (a new producer
  id when the epoch is exhausted). The partitions that asked for it have their in-flight
  batches renumbered from sequence 0; the other partitions restart at 0 once their in-flight
  batches of the old epoch are done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulation.producer.accumulator import ProducerBatch
from simulation.protocol import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Errors,
    TopicPartition,
    increment_sequence,
)

if TYPE_CHECKING:
    from simulation.producer.transactions import Transactions


@dataclass(slots=True)
class TxnPartitionEntry:
    producer_id: int
    epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_SEQUENCE
    in_flight: list[ProducerBatch] = field(default_factory=list)  # sorted by base sequence


class TransactionManager:
    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_PRODUCER_EPOCH
        self.initializing = False
        self.epoch_bump_required = False
        self.epoch_bumps = 0
        self._partitions: dict[TopicPartition, TxnPartitionEntry] = {}
        self._unresolved: dict[TopicPartition, None] = {}  # insertion-ordered set
        self._to_rewrite: dict[TopicPartition, None] = {}
        self.txn: Transactions | None = None  # set for a transactional producer

    # -- producer id -------------------------------------------------------------------
    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.initializing = False

    def reset_sequences(self) -> None:
        """A new epoch from the coordinator: every partition starts again at sequence 0."""
        self._partitions.clear()
        self._unresolved.clear()
        self._to_rewrite.clear()
        self.epoch_bump_required = False

    def _entry(self, tp: TopicPartition) -> TxnPartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = TxnPartitionEntry(self.producer_id, self.epoch)
            self._partitions[tp] = entry
        return entry

    # -- drain-time checks -------------------------------------------------------------
    def has_stale_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        entry = self._partitions.get(tp)
        return entry is not None and (entry.producer_id, entry.epoch) != (
            self.producer_id,
            self.epoch,
        )

    def maybe_update_producer_id_and_epoch(self, tp: TopicPartition) -> bool:
        """Move a stale partition to the current epoch once nothing of the old one is in flight.

        Returns False while the partition must still wait.
        """
        entry = self._partitions.get(tp)
        if entry is None or not self.has_stale_producer_id_and_epoch(tp):
            return True
        if entry.in_flight:
            return False
        self._partitions[tp] = TxnPartitionEntry(self.producer_id, self.epoch)
        self._unresolved.pop(tp, None)
        return True

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def assign_sequence(self, batch: ProducerBatch) -> None:
        entry = self._entry(batch.tp)
        batch.set_producer_state(self.producer_id, self.epoch, entry.next_sequence)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        self._insert_in_flight(entry, batch)

    @staticmethod
    def _insert_in_flight(entry: TxnPartitionEntry, batch: ProducerBatch) -> None:
        flight = entry.in_flight
        i = len(flight)
        while i > 0 and flight[i - 1].base_sequence > batch.base_sequence:
            i -= 1
        flight.insert(i, batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        entry = self._partitions.get(batch.tp)
        if entry is not None and batch in entry.in_flight:
            entry.in_flight.remove(batch)

    # -- completions -------------------------------------------------------------------
    def _matches_current(self, batch: ProducerBatch) -> bool:
        entry = self._partitions.get(batch.tp)
        return entry is not None and (batch.producer_id, batch.epoch) == (
            entry.producer_id,
            entry.epoch,
        )

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        if self._matches_current(batch):
            entry = self._partitions[batch.tp]
            last = increment_sequence(batch.base_sequence, batch.record_count - 1)
            if entry.last_acked_sequence == NO_SEQUENCE or last > entry.last_acked_sequence:
                entry.last_acked_sequence = last
        self._remove_in_flight(batch)

    def handle_failed_batch(self, batch: ProducerBatch, *, maybe_written: bool) -> None:
        """A batch failed for good. ``maybe_written``: it was sent and the outcome is unknown."""
        if self._matches_current(batch) and batch.has_sequence:
            if maybe_written:
                self._unresolved[batch.tp] = None
            else:
                self._adjust_sequences_after(batch)
        self._remove_in_flight(batch)

    def _adjust_sequences_after(self, failed: ProducerBatch) -> None:
        """The failed batch was definitely not written: close the gap it leaves."""
        entry = self._partitions[failed.tp]
        n = failed.record_count
        for b in entry.in_flight:
            if b is not failed and b.base_sequence > failed.base_sequence:
                b.reset_producer_state(b.producer_id, b.epoch, b.base_sequence - n)
        entry.next_sequence = increment_sequence(entry.next_sequence, -n)

    def can_retry(self, batch: ProducerBatch, error: Errors) -> bool:
        """Whether an OUT_OF_ORDER_SEQUENCE_NUMBER answer should be retried."""
        if error is not Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return False
        tp = batch.tp
        entry = self._partitions.get(tp)
        is_next = entry is not None and batch.base_sequence == increment_sequence(
            entry.last_acked_sequence, 1
        )
        if not self.has_unresolved_sequence(tp) and (batch.sequence_has_been_reset or not is_next):
            return True
        # A real gap: bump the epoch and start the partition's sequences again.
        self.request_epoch_bump(tp)
        return True

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self.epoch_bump_required = True
        self._to_rewrite[tp] = None

    def maybe_resolve_sequences(self) -> None:
        for tp in list(self._unresolved):
            entry = self._partitions[tp]
            if entry.in_flight:
                continue
            if increment_sequence(entry.last_acked_sequence, 1) == entry.next_sequence:
                del self._unresolved[tp]
            else:
                self.request_epoch_bump(tp)

    def bump_idempotent_epoch(self) -> bool:
        """Apply a required epoch bump. False when a new producer id must be fetched instead."""
        self.epoch_bump_required = False
        self.epoch_bumps += 1
        if self.epoch >= MAX_EPOCH:
            self.producer_id = NO_PRODUCER_ID
            self.epoch = NO_PRODUCER_EPOCH
            exhausted = True
        else:
            self.epoch += 1
            exhausted = False
        for tp in self._to_rewrite:
            self._start_sequences_at_beginning(tp)
            self._unresolved.pop(tp, None)
        self._to_rewrite.clear()
        return not exhausted

    def _start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        entry = self._entry(tp)
        seq = 0
        for b in entry.in_flight:
            b.reset_producer_state(self.producer_id, self.epoch, seq)
            seq = increment_sequence(seq, b.record_count)
        entry.producer_id = self.producer_id
        entry.epoch = self.epoch
        entry.next_sequence = seq
        entry.last_acked_sequence = NO_SEQUENCE
