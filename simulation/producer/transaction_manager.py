"""TransactionManager, idempotence part: producer id, epoch and per-partition sequences.

Kafka keeps the idempotent producer's bookkeeping in ``TransactionManager`` even when there
are no transactions, and so does this module; the transactional half is
:mod:`eosim.simulation.producer.transactions`, reached through :attr:`TransactionManager.txn`.

Per partition it tracks the next sequence to assign, the last acknowledged sequence and
offset, and the batches in flight, ordered by sequence. The rules follow Kafka's
``TransactionManager`` method by method:

* :meth:`can_retry` is ``canRetry``: OUT_OF_ORDER_SEQUENCE_NUMBER is retried by any producer
  when the partition has no unresolved sequence and the batch is not the next one (or was
  renumbered); otherwise only the idempotent producer retries it, bumping its epoch when
  nothing is unresolved or the batch directly follows the unresolved one. UNKNOWN_PRODUCER_ID
  is retried when the answer has no log start offset, the batch was renumbered, or the
  producer's acknowledged records lie below the log start (state lost to retention); otherwise
  the idempotent producer bumps and retries and the transactional one fails the batch.
* :meth:`handle_failed_batch` is ``handleFailedBatch``: a transactional producer goes to
  ABORTABLE_ERROR (FATAL_ERROR for PRODUCER_FENCED); then OUT_OF_ORDER / UNKNOWN_PRODUCER_ID
  bump an idempotent producer's epoch, UNKNOWN_PRODUCER_ID resets a transactional producer's
  partition, and otherwise, when the Sender says sequences may be adjusted
  (``attempts < retries``), the idempotent producer bumps its epoch for the partition and the
  transactional one closes the gap the batch leaves.
  That bump renumbers every in-flight batch of the partition, including earlier ones that may
  already be written, which duplicates them: KAFKA-14034, open in Kafka. The rule
  ``failed_batch_marks_sequence_unresolved`` (its proposed fix) marks the sequence unresolved
  instead, so the bump waits until everything in flight has completed.
* :meth:`mark_sequence_unresolved` and :meth:`maybe_resolve_sequences`: a batch that expired
  after a retry leaves its partition unresolved; nothing more is drained to it until every
  in-flight batch has completed; then ``lastAcked + 1 == nextSequence`` resolves it, and
  otherwise the idempotent producer bumps its epoch and the transactional one goes to
  ABORTABLE_ERROR.
* An epoch bump of an idempotent producer is local: epoch + 1 (a new producer id when the
  epoch is exhausted). The partitions that asked for it have their in-flight batches
  renumbered from sequence 0; the others restart at 0 once their old-epoch batches are done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from eosim.simulation.producer.accumulator import ProducerBatch
from eosim.simulation.protocol import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Errors,
    PartitionResponse,
    TopicPartition,
    increment_sequence,
)

NO_OFFSET = -1


class TransactionalHalf(Protocol):
    """What the idempotence bookkeeping needs of the transactional half of the producer.

    :class:`eosim.simulation.producer.transactions.Transactions` is the implementation; it refers
    to this module, never the other way round. Another implementation (a test double, say)
    must provide: ``unknown_mapping_is_fatal`` (whether INVALID_PRODUCER_ID_MAPPING is fatal
    for this client, as for the 4.0 one), ``is_fatal`` (whether the producer is in
    FATAL_ERROR), ``fatal(message)`` (go to FATAL_ERROR) and ``abortable(message)`` (go to
    ABORTABLE_ERROR, as Kafka's ``transitionToAbortableError`` after a failed batch).
    """

    @property
    def unknown_mapping_is_fatal(self) -> bool: ...

    @property
    def is_fatal(self) -> bool: ...

    def fatal(self, message: str) -> None: ...

    def abortable(self, message: str) -> None: ...


@dataclass(slots=True)
class TxnPartitionEntry:
    producer_id: int
    epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_SEQUENCE
    last_acked_offset: int = NO_OFFSET
    in_flight: list[ProducerBatch] = field(default_factory=list)  # sorted by base sequence


class TransactionManager:
    def __init__(self, failed_batch_marks_sequence_unresolved: bool = False) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_PRODUCER_EPOCH
        self.initializing = False
        self.epoch_bump_required = False
        self.epoch_bumps = 0
        # KAFKA-14034's proposed fix instead of Kafka's epoch bump on a failed batch.
        self.failed_batch_marks_sequence_unresolved = failed_batch_marks_sequence_unresolved
        self._partitions: dict[TopicPartition, TxnPartitionEntry] = {}
        # partition -> the sequence that follows the unresolved batches (insertion-ordered)
        self._unresolved: dict[TopicPartition, int] = {}
        self._to_rewrite: dict[TopicPartition, None] = {}
        self.txn: TransactionalHalf | None = None  # set for a transactional producer

    # -- producer id -------------------------------------------------------------------
    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def is_transactional(self) -> bool:
        return self.txn is not None

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
    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int = NO_OFFSET) -> None:
        entry = self._partitions.get(batch.tp)
        if entry is not None:
            last = increment_sequence(batch.base_sequence, batch.record_count - 1)
            if last > entry.last_acked_sequence:
                entry.last_acked_sequence = last
            if base_offset >= 0:
                entry.last_acked_offset = max(
                    entry.last_acked_offset, base_offset + batch.record_count - 1
                )
        self._remove_in_flight(batch)

    def handle_failed_batch(
        self, batch: ProducerBatch, error: Errors | None, message: str, adjust_sequences: bool
    ) -> None:
        """A batch failed for good (Kafka's ``handleFailedBatch``).

        ``error`` is the broker's or the client's error (None for a delivery timeout);
        ``adjust_sequences`` is the Sender's ``attempts < retries``.
        """
        txn = self.txn
        if txn is not None:
            if error is Errors.PRODUCER_FENCED or (
                error is Errors.INVALID_PRODUCER_ID_MAPPING and txn.unknown_mapping_is_fatal
            ):
                txn.fatal(f"{error.exception_name}: {error.name}")
            else:
                txn.abortable(message)
        self._remove_in_flight(batch)
        if txn is not None and txn.is_fatal:
            return
        tp = batch.tp
        if txn is None and error in (
            Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
            Errors.UNKNOWN_PRODUCER_ID,  # UnknownProducerIdException is an OutOfOrder one
        ):
            self.request_epoch_bump(tp)
        elif error is Errors.UNKNOWN_PRODUCER_ID:
            self._partitions.pop(tp, None)
            self._unresolved.pop(tp, None)
        elif adjust_sequences:
            if txn is not None:
                self._adjust_sequences_after(batch)
            elif self.failed_batch_marks_sequence_unresolved:
                self.mark_sequence_unresolved(batch)
            else:
                self.request_epoch_bump(tp)  # KAFKA-14034

    def _adjust_sequences_after(self, failed: ProducerBatch) -> None:
        """The failed batch was definitely not written: close the gap it leaves."""
        entry = self._partitions.get(failed.tp)
        if entry is None:
            return
        n = failed.record_count
        for b in entry.in_flight:
            if b.base_sequence >= failed.base_sequence:
                b.reset_producer_state(b.producer_id, b.epoch, b.base_sequence - n)
        entry.next_sequence = increment_sequence(entry.next_sequence, -n)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        following = increment_sequence(batch.base_sequence, batch.record_count)
        previous = self._unresolved.get(batch.tp)
        self._unresolved[batch.tp] = following if previous is None else max(previous, following)

    def _is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        entry = self._partitions.get(tp)
        last = entry.last_acked_sequence if entry is not None else NO_SEQUENCE
        return sequence - last == 1

    def _last_acked_offset(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return entry.last_acked_offset if entry is not None else NO_OFFSET

    def can_retry(self, batch: ProducerBatch, response: PartitionResponse) -> bool:
        """Kafka's ``TransactionManager.canRetry`` for a batch answered with an error."""
        error = response.error
        tp = batch.tp
        transactional = self.txn is not None
        if error is Errors.UNKNOWN_PRODUCER_ID:
            if response.log_start_offset == NO_OFFSET or batch.sequence_has_been_reset:
                return True
            if self._last_acked_offset(tp) < response.log_start_offset:
                # The producer's records were removed from the log head: its state is gone.
                if transactional:
                    self._start_sequences_at_beginning(tp)
                else:
                    self.request_epoch_bump(tp)
                return True
            if not transactional:
                self.request_epoch_bump(tp)
                return True
        elif error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = self._unresolved.get(tp)
            if unresolved is None and (
                batch.sequence_has_been_reset or not self._is_next_sequence(tp, batch.base_sequence)
            ):
                return True  # an earlier batch is being retried and will fill the gap
            if not transactional:
                if unresolved is None or batch.base_sequence == unresolved:
                    self.request_epoch_bump(tp)  # a real gap
                return True
        return error.retriable

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self.epoch_bump_required = True
        self._to_rewrite[tp] = None

    def maybe_resolve_sequences(self) -> None:
        for tp in list(self._unresolved):
            entry = self._partitions.get(tp)
            if entry is not None and entry.in_flight:
                continue
            del self._unresolved[tp]
            if entry is None or self._is_next_sequence(tp, entry.next_sequence):
                continue  # the expired batch landed after all
            if self.txn is not None:
                self.txn.abortable(
                    "KafkaException: the client has not received acknowledgment for some "
                    "previously sent messages and can no longer retry them; it is safe to "
                    "abort the transaction and continue"
                )
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
