"""Conformance: the producer's TransactionManager against Kafka's TransactionManagerTest.

Each test restates one case of ``clients/.../producer/internals/TransactionManagerTest.java``
(Kafka trunk, late 2024): the same inputs and the same expected outcome, written against
eosim's :class:`TransactionManager`. "Run the sender loop to trigger the epoch bump" is
:func:`run_bump` here (the Sender applies a required bump at the start of its next pass).
"""

from __future__ import annotations

import pytest

from eosim.simulation.producer.accumulator import ProducerBatch
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.protocol import MAX_EPOCH, NO_SEQUENCE, Errors, PartitionResponse

TP0 = ("foo", 0)
TP1 = ("foo", 1)
PID = 13131


class FakeTransactions:
    """The transactional half as TransactionManager sees it: error states only."""

    def __init__(self) -> None:
        self.state = "IN_TRANSACTION"
        self.epoch_bump_required = False
        self.errors: list[str] = []

    @property
    def is_fatal(self) -> bool:
        return self.state == "FATAL_ERROR"

    def fatal(self, message: str) -> None:
        self.state = "FATAL_ERROR"
        self.errors.append(message)

    def abortable(self, message: str, *, bump: bool | None = None) -> None:
        if bump is None:
            bump = self.state not in ("COMMITTING_TRANSACTION", "ABORTING_TRANSACTION")
        self.epoch_bump_required = self.epoch_bump_required or bump
        if self.state != "FATAL_ERROR":
            self.state = "ABORTABLE_ERROR"
            self.errors.append(message)


def idempotent(epoch: int = 1, **kwargs: bool) -> TransactionManager:
    tm = TransactionManager(**kwargs)
    tm.set_producer_id_and_epoch(PID, epoch)
    return tm


def transactional(epoch: int = 1) -> tuple[TransactionManager, FakeTransactions]:
    tm = idempotent(epoch)
    txn = FakeTransactions()
    tm.txn = txn  # type: ignore[assignment]
    return tm, txn


def write(tm: TransactionManager, tp=TP0, records: int = 1) -> ProducerBatch:
    """writeIdempotentBatchWithValue: a drained batch with its sequence, in flight."""
    batch = ProducerBatch(tp, 0.0)
    for i in range(records):
        batch.add(f"v{i}", 10, lambda *_: None)
    tm.assign_sequence(batch)
    return batch


def run_bump(tm: TransactionManager) -> None:
    if tm.epoch_bump_required:
        tm.bump_idempotent_epoch()


def next_sequence(tm: TransactionManager, tp=TP0) -> int:
    return tm._entry(tp).next_sequence


def test_default_sequence_number():
    """TransactionManagerTest.testDefaultSequenceNumber"""
    tm = idempotent()
    assert next_sequence(tm) == 0
    write(tm, records=3)
    assert next_sequence(tm) == 3


def test_bump_epoch_and_reset_sequence_numbers_after_unknown_producer_id():
    """TransactionManagerTest.testBumpEpochAndResetSequenceNumbersAfterUnknownProducerId"""
    tm = idempotent(epoch=1)
    b1, b2, b3, b4, b5 = (write(tm) for _ in range(5))
    assert next_sequence(tm) == 5
    tm.handle_completed_batch(b1, 500)
    assert tm.can_retry(b2, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, 500))
    run_bump(tm)
    assert tm.epoch == 2
    assert (b2.epoch, b2.base_sequence) == (2, 0)
    assert [b.base_sequence for b in (b3, b4, b5)] == [1, 2, 3]


def test_batch_failure_after_producer_reset():
    """TransactionManagerTest.testBatchFailureAfterProducerReset: an exhausted epoch resets
    the producer id; only the partition that asked for it is renumbered."""
    tm = idempotent(epoch=MAX_EPOCH)
    tp0b1, tp1b1 = write(tm, TP0), write(tm, TP1)
    tm.handle_completed_batch(tp0b1)
    tm.handle_completed_batch(tp1b1)
    tp0b2, tp1b2 = write(tm, TP0), write(tm, TP1)
    assert (next_sequence(tm, TP0), next_sequence(tm, TP1)) == (2, 2)
    assert tm.can_retry(tp0b1, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, 400))
    assert not tm.bump_idempotent_epoch()  # exhausted: a new producer id must be fetched
    assert not tm.has_producer_id
    assert next_sequence(tm, TP0) == 1
    assert tm._entry(TP0).in_flight[0] is tp0b2
    assert next_sequence(tm, TP1) == 2
    assert tm._entry(TP1).in_flight[0] is tp1b2


def test_batch_completed_after_producer_reset():
    """TransactionManagerTest.testBatchCompletedAfterProducerReset"""
    tm = idempotent(epoch=MAX_EPOCH)
    b1 = write(tm, TP0)
    write(tm, TP1)
    b2 = write(tm, TP0)
    tm.request_epoch_bump(TP1)
    tm.bump_idempotent_epoch()
    tm.set_producer_id_and_epoch(PID + 1, 0)
    tm.handle_completed_batch(b1, 500)
    assert next_sequence(tm, TP0) == 2
    assert tm._entry(TP0).last_acked_sequence == 0
    assert tm._entry(TP0).in_flight[0] is b2
    assert b2.epoch == MAX_EPOCH
    tm.handle_completed_batch(b2, 501)
    assert tm.maybe_update_producer_id_and_epoch(TP0)
    assert next_sequence(tm, TP0) == 0
    assert tm._entry(TP0).last_acked_sequence == NO_SEQUENCE
    assert tm.first_in_flight_sequence(TP0) == NO_SEQUENCE


def test_bump_epoch_after_timeout_without_pending_inflight_requests():
    """TransactionManagerTest.testBumpEpochAfterTimeoutWithoutPendingInflightRequests"""
    tm = idempotent(epoch=5)
    run_bump(tm)
    assert tm.epoch == 5
    b1 = write(tm)
    tm.handle_completed_batch(b1, 500)
    # Marking a completed batch unresolved with nothing in flight resolves at once.
    tm.mark_sequence_unresolved(b1)
    tm.maybe_resolve_sequences()
    assert tm.epoch == 5 and not tm.has_unresolved_sequence(TP0)
    b2 = write(tm)
    tm.mark_sequence_unresolved(b2)
    tm.handle_failed_batch(b2, None, "TimeoutException", adjust_sequences=False)
    assert tm.has_unresolved_sequence(TP0)
    tm.maybe_resolve_sequences()
    assert not tm.has_unresolved_sequence(TP0)
    run_bump(tm)
    assert tm.epoch == 6


def test_no_producer_id_reset_after_last_in_flight_batch_succeeds():
    """TransactionManagerTest.testNoProducerIdResetAfterLastInFlightBatchSucceeds"""
    tm = idempotent(epoch=5)
    b1, b2, b3 = write(tm), write(tm), write(tm)
    tm.mark_sequence_unresolved(b1)
    tm.handle_failed_batch(b1, None, "TimeoutException", adjust_sequences=False)
    tm.maybe_resolve_sequences()
    run_bump(tm)
    assert tm.epoch == 5 and tm.has_unresolved_sequence(TP0)
    tm.handle_failed_batch(b2, None, "TimeoutException", adjust_sequences=False)
    tm.maybe_resolve_sequences()
    run_bump(tm)
    assert tm.epoch == 5 and tm.has_unresolved_sequence(TP0)
    tm.handle_completed_batch(b3, 500)
    tm.maybe_resolve_sequences()
    assert tm.epoch == 5 and not tm.has_unresolved_sequence(TP0)
    assert next_sequence(tm) == 3


def test_epoch_bump_after_last_inflight_batch_fails():
    """TransactionManagerTest.testEpochBumpAfterLastInflightBatchFails"""
    tm = idempotent(epoch=1)
    b1, b2, b3 = write(tm), write(tm), write(tm)
    tm.mark_sequence_unresolved(b1)
    tm.handle_failed_batch(b1, None, "TimeoutException", adjust_sequences=False)
    tm.handle_completed_batch(b2, 500)
    tm.maybe_resolve_sequences()
    run_bump(tm)
    assert tm.epoch == 1 and tm.has_unresolved_sequence(TP0)
    tm.handle_failed_batch(b3, None, "TimeoutException", adjust_sequences=False)
    tm.maybe_resolve_sequences()
    run_bump(tm)
    assert tm.epoch == 2
    assert not tm.has_unresolved_sequence(TP0)
    assert next_sequence(tm) == 0


def test_out_of_order_handled_failure_bumps_idempotent_epoch():
    """TransactionManagerTest.testNoFailedBatchHandlingWhenTxnManagerIsInFatalError (first
    half): a batch failed with OutOfOrderSequenceException bumps an idempotent producer."""
    tm = idempotent(epoch=5)
    b1 = write(tm)
    tm.handle_failed_batch(b1, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, "OOO", adjust_sequences=False)
    run_bump(tm)
    assert tm.epoch == 6


@pytest.mark.skip(
    reason="eosim's idempotent (non-transactional) producer has no fatal state: "
    "none of the errors that put one there in Kafka (authorization, "
    "unsupported version) is modelled"
)
def test_no_failed_batch_handling_when_txn_manager_is_in_fatal_error():
    """TransactionManagerTest.testNoFailedBatchHandlingWhenTxnManagerIsInFatalError"""


def test_out_of_order_is_retried_by_every_producer_when_the_batch_is_not_the_next():
    """TransactionManager.canRetry: OUT_OF_ORDER for a batch that is not the next one (an
    earlier batch will fill the gap) is retried, by a transactional producer too, and bumps
    nothing (TransactionManagerTest.testHealthyPartitionRetriesDuringEpochBump relies on it)."""
    for tm in (idempotent(), transactional()[0]):
        write(tm)
        b2 = write(tm)
        assert tm.can_retry(b2, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
        assert not tm.epoch_bump_required


def test_out_of_order_for_the_next_batch_bumps_idempotent_and_fails_transactional():
    """TransactionManager.canRetry: a real gap (the batch is the next one). The idempotent
    producer bumps and retries; the transactional one lets the batch fail (then aborts)."""
    tm = idempotent()
    b1 = write(tm)
    assert tm.can_retry(b1, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert tm.epoch_bump_required
    tm, _ = transactional()
    b1 = write(tm)
    assert not tm.can_retry(b1, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))


def test_out_of_order_with_an_unresolved_sequence_bumps_only_for_the_following_batch():
    """TransactionManager.canRetry: with an unresolved sequence, the idempotent producer
    retries; it bumps only for the batch that directly follows the unresolved one."""
    tm = idempotent()
    b1, b2, b3 = write(tm), write(tm), write(tm)
    tm.mark_sequence_unresolved(b1)
    tm.handle_failed_batch(b1, None, "TimeoutException", adjust_sequences=False)
    assert tm.can_retry(b3, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert not tm.epoch_bump_required
    assert tm.can_retry(b2, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert tm.epoch_bump_required


def test_unknown_producer_id_is_retried_after_a_local_epoch_bump():
    """TransactionManager.canRetry: an idempotent producer whose acknowledged records are
    still in the log retries UNKNOWN_PRODUCER_ID after bumping its epoch; a transactional
    one fails the batch."""
    tm = idempotent()
    b1, b2 = write(tm), write(tm)
    tm.handle_completed_batch(b1, 10)
    assert tm.can_retry(b2, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, 0))
    run_bump(tm)
    assert (tm.epoch, b2.epoch, b2.base_sequence) == (2, 2, 0)
    tm, _ = transactional()
    b1, b2 = write(tm), write(tm)
    tm.handle_completed_batch(b1, 10)
    assert not tm.can_retry(b2, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, 0))


def test_unknown_producer_id_below_log_start_restarts_transactional_sequences():
    """TransactionManager.canRetry: the records were removed from the log head (the
    producer's last acknowledged offset is below the log start offset): a transactional
    producer restarts the partition's in-flight sequences at 0 and retries."""
    tm, txn = transactional()
    b1, b2 = write(tm), write(tm)
    tm.handle_completed_batch(b1, 10)
    assert tm.can_retry(b2, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, 500))
    assert b2.base_sequence == 0 and b2.sequence_has_been_reset
    assert txn.state == "IN_TRANSACTION"


def test_unknown_producer_id_without_log_start_offset_is_retried():
    """TransactionManager.canRetry: no log start offset in the answer -> retry as it is."""
    tm, _ = transactional()
    b1 = write(tm)
    assert tm.can_retry(b1, PartitionResponse(Errors.UNKNOWN_PRODUCER_ID, -1, -1))


def test_invalid_producer_epoch_from_produce_is_abortable():
    """TransactionManagerTest.testInvalidProducerEpochFromProduce (KIP-588): abortable, with
    an epoch bump; only ProducerFencedException is fatal."""
    tm, txn = transactional()
    b1 = write(tm)
    assert not tm.can_retry(b1, PartitionResponse(Errors.INVALID_PRODUCER_EPOCH))
    tm.handle_failed_batch(b1, Errors.INVALID_PRODUCER_EPOCH, "Invalid", adjust_sequences=True)
    assert txn.state == "ABORTABLE_ERROR" and txn.epoch_bump_required
    tm, txn = transactional()
    b1 = write(tm)
    tm.handle_failed_batch(b1, Errors.PRODUCER_FENCED, "Fenced", adjust_sequences=True)
    assert txn.state == "FATAL_ERROR"


def test_transactional_failed_batch_closes_its_sequence_gap():
    """TransactionManagerTest.testAbortTransactionAndReuseSequenceNumberOnError: a batch the
    broker refused (adjust sequences) frees its sequences for the batches after it."""
    tm, txn = transactional()
    b1, b2 = write(tm, records=2), write(tm, records=3)
    tm.handle_failed_batch(b1, Errors.UNKNOWN_TOPIC_OR_PARTITION, "x", adjust_sequences=True)
    assert b2.base_sequence == 0
    assert next_sequence(tm) == 3
    assert txn.state == "ABORTABLE_ERROR"


def test_transactional_unknown_producer_id_resets_the_partition():
    """TransactionManagerTest.testAbortTransactionAndResetSequenceNumberOnUnknownProducerId"""
    tm, txn = transactional()
    b1 = write(tm)
    write(tm)
    tm.handle_failed_batch(b1, Errors.UNKNOWN_PRODUCER_ID, "x", adjust_sequences=True)
    assert txn.state == "ABORTABLE_ERROR"
    assert next_sequence(tm) == 0


def test_transactional_unresolved_sequence_becomes_an_abortable_error_with_a_bump():
    """TransactionManager.maybeResolveSequences for a transactional producer:
    TransactionManagerTest.testBumpTransactionalEpochOnTimeout."""
    tm, txn = transactional()
    b1 = write(tm)
    tm.mark_sequence_unresolved(b1)
    tm.handle_failed_batch(b1, None, "TimeoutException", adjust_sequences=False)
    tm.maybe_resolve_sequences()
    assert txn.state == "ABORTABLE_ERROR" and txn.epoch_bump_required
    assert not tm.epoch_bump_required  # a transactional producer never bumps locally


@pytest.mark.parametrize("fixed", [False, True])
def test_kafka_14034_failed_batch_renumbers_earlier_in_flight_batches(fixed):
    """KAFKA-14034 (open): an idempotent producer whose batch fails for good while it still
    has retries (a retriable error answered after the delivery timeout) bumps its epoch and
    renumbers every in-flight batch of the partition, including an earlier one that may
    already be written; its retry then lands as a new batch. The proposed fix
    (``failed_batch_marks_sequence_unresolved``) waits for the in-flight batches instead."""
    tm = idempotent(epoch=1, failed_batch_marks_sequence_unresolved=fixed)
    b1, b2 = write(tm), write(tm)  # b1's response was lost: it is being retried
    tm.handle_failed_batch(b2, Errors.NOT_LEADER_OR_FOLLOWER, "late", adjust_sequences=True)
    tm.maybe_resolve_sequences()
    run_bump(tm)
    if not fixed:
        assert (b1.epoch, b1.base_sequence, b1.sequence_has_been_reset) == (2, 0, True)
        return
    assert (b1.epoch, b1.base_sequence, b1.sequence_has_been_reset) == (1, 0, False)
    assert tm.has_unresolved_sequence(TP0)
    tm.handle_completed_batch(b1, 7)  # b1's retry is answered as the duplicate it is
    tm.maybe_resolve_sequences()
    run_bump(tm)
    assert tm.epoch == 2 and next_sequence(tm) == 0
