"""Conformance: the transactional half of the producer's TransactionManager.

Cases from Kafka's ``TransactionManagerTest`` (trunk, late 2024), restated against
:class:`eosim.simulation.producer.transactions.Transactions`: the coordinator requests it queues,
in what order, and the states it goes through as each is answered. :class:`Client` plays
the Sender (it takes the next request and answers it) with the coordinator already known.
"""

from __future__ import annotations

from typing import Any

import pytest
import simpy
from conformance.test_transaction_manager import write

from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import State
from eosim.simulation.producer.transactions import Transactions
from eosim.simulation.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupMetadata,
    EndTxnRequest,
    EndTxnResponse,
    ErrorResponse,
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionResponse,
    TxnOffsetCommitRequest,
)

TP0 = ("foo", 0)
PID, EPOCH = 13131, 1


class Client:
    def __init__(self, version: int = 1) -> None:
        self.env = simpy.Environment()
        self.tm = TransactionManager()
        self.txn = Transactions(self.env, "txn", 60_000, 100, self.tm, version)
        self.tm.txn = self.txn
        for kind, key in (("transaction", "txn"), ("group", "g")):
            self.txn.coordinators[kind, key] = "broker-0"

    def next(self, batches_incomplete: bool = False) -> tuple[Any, Any] | None:
        """The request the Sender would send now, built, or None."""
        request = self.txn.next_request(self.env.now, batches_incomplete)
        if request is None:
            return None
        self.txn.sent(request)
        return request, request.build(1)

    def answer(self, pending: tuple[Any, Any], response: Any) -> None:
        self.txn.on_response(pending[0], response)

    def init(self) -> None:
        self.txn.init_transactions()
        pending = self.next()
        assert isinstance(pending[1], InitProducerIdRequest)
        self.answer(pending, InitProducerIdResponse(1, Errors.NONE, PID, EPOCH))
        assert self.txn.state.state is State.READY

    def begin_and_add(self) -> None:
        assert self.txn.begin() is None
        self.txn.maybe_add_partition(TP0)
        pending = self.next()
        assert isinstance(pending[1], AddPartitionsToTxnRequest)
        self.answer(pending, ErrorResponse(1, Errors.NONE))
        assert self.txn.is_partition_added(TP0)


def test_invalid_producer_epoch_from_produce_aborts_then_bumps():
    """TransactionManagerTest.testInvalidProducerEpochFromProduce: an abortable error, then
    the abort sends EndTxn first and an InitProducerId (the KIP-360 bump) second."""
    c = Client(version=1)
    c.init()
    c.begin_and_add()
    batch = write(c.tm, TP0)  # the Sender hands the failed batch to handleFailedBatch
    c.tm.handle_failed_batch(batch, Errors.INVALID_PRODUCER_EPOCH, "e", True)
    assert c.txn.state.state is State.ABORTABLE_ERROR
    c.txn.abort()
    end = c.next()
    assert isinstance(end[1], EndTxnRequest) and not end[1].commit
    c.answer(end, EndTxnResponse(1, Errors.NONE))
    assert c.txn.state.state is State.INITIALIZING
    bump = c.next()
    assert isinstance(bump[1], InitProducerIdRequest)
    assert (bump[1].producer_id, bump[1].epoch) == (PID, EPOCH)  # KIP-360
    c.answer(bump, InitProducerIdResponse(1, Errors.NONE, PID, EPOCH + 1))
    assert c.txn.state.state is State.READY and c.tm.epoch == EPOCH + 1


def test_first_init_carries_no_producer_id():
    """KIP-360: a new instance's InitProducerId has no producer id and epoch, so the
    coordinator bumps and forgets the previous instance (which it then fences)."""
    c = Client()
    c.txn.init_transactions()
    _, request = c.next()
    assert (request.producer_id, request.epoch) == (-1, -1)


def test_commit_with_nothing_added_ends_without_end_txn():
    """TransactionManager.nextRequest with !transactionStarted (and KAFKA-18401 for
    transaction version 2): no EndTxn for a transaction to which nothing was added."""
    for version in (1, 2):
        c = Client(version)
        c.init()
        assert c.txn.begin() is None
        result = c.txn.commit()
        assert c.next() is None  # nothing sent
        assert result.triggered and result.value is None
        assert c.txn.state.state is State.READY


def test_abort_with_nothing_added_ends_without_end_txn():
    """TransactionManagerTest.testRecoveryFromAbortableErrorTransactionNotStarted (the abort
    part): nothing reached a coordinator, so the abort is local."""
    c = Client(version=1)
    c.init()
    assert c.txn.begin() is None
    result = c.txn.abort()
    assert c.next() is None and result.value is None
    assert c.txn.state.state is State.READY


def test_commit_is_not_allowed_after_a_produce_failure():
    """TransactionManagerTest.testDisallowCommitOnProduceFailure"""
    c = Client()
    c.init()
    c.begin_and_add()
    c.txn.abortable("OutOfOrderSequenceException: x")
    result = c.txn.commit()
    assert result.triggered and "KafkaException" in result.value


def test_invalid_producer_epoch_on_end_txn_is_fenced():
    """TransactionManagerTest.testInvalidProducerEpochConvertToProducerFencedInEndTxn"""
    c = Client()
    c.init()
    c.begin_and_add()
    result = c.txn.commit()
    end = c.next()
    c.answer(end, EndTxnResponse(1, Errors.INVALID_PRODUCER_EPOCH))
    assert c.txn.state.state is State.FATAL_ERROR
    assert result.value.startswith("ProducerFencedException")


def test_invalid_producer_epoch_on_add_partitions_is_fenced():
    """TransactionManagerTest.testInvalidProducerEpochConvertToProducerFencedInAddPartitionToTxn"""
    c = Client()
    c.init()
    assert c.txn.begin() is None
    c.txn.maybe_add_partition(TP0)
    pending = c.next()
    c.answer(pending, ErrorResponse(1, Errors.INVALID_PRODUCER_EPOCH))
    assert c.txn.state.state is State.FATAL_ERROR
    assert c.txn.last_error.startswith("ProducerFencedException")


def test_unknown_mapping_on_add_partitions_bumps_and_skips_end_txn():
    """TransactionManagerTest.testBumpTransactionalEpochOnRecoverableAddPartitionRequestError:
    INVALID_PRODUCER_ID_MAPPING is abortable with an epoch bump, and the abort goes straight to
    InitProducerId (beginCompletingTransaction skips EndTxn for an unknown mapping)."""
    c = Client(version=1)
    c.init()
    assert c.txn.begin() is None
    c.txn.maybe_add_partition(TP0)
    pending = c.next()
    c.answer(pending, ErrorResponse(1, Errors.INVALID_PRODUCER_ID_MAPPING))
    assert c.txn.state.state is State.ABORTABLE_ERROR
    c.txn.abort()
    _, request = c.next()
    assert isinstance(request, InitProducerIdRequest)
    assert (request.producer_id, request.epoch) == (PID, EPOCH)


def test_requests_in_an_abortable_error_fail_unsent():
    """TransactionManager.maybeTerminateRequestWithError: a request queued before the error
    (here sendOffsetsToTransaction's AddOffsetsToTxn) fails with the error, unsent."""
    c = Client()
    c.init()
    c.begin_and_add()
    result = c.txn.send_offsets_to_transaction(((TP0, 5),), "g")
    c.txn.abortable("TimeoutException: expired")
    assert c.next() is None
    assert result.triggered and result.value == "TimeoutException: expired"


def test_send_offsets_goes_to_both_coordinators_in_order():
    """TransactionManagerTest.testSendOffsetsToTransaction... (transaction version 1):
    AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the group's."""
    c = Client(version=1)
    c.init()
    c.begin_and_add()
    result = c.txn.send_offsets_to_transaction(((TP0, 5),), "g")
    add = c.next()
    assert isinstance(add[1], AddOffsetsToTxnRequest)
    c.answer(add, ErrorResponse(1, Errors.NONE))
    commit = c.next()
    assert isinstance(commit[1], TxnOffsetCommitRequest)
    c.answer(commit, ErrorResponse(1, Errors.NONE))
    assert result.value is None


def test_end_txn_waits_for_incomplete_batches():
    """TransactionManager.nextRequest: EndTxn is not sent while batches are incomplete."""
    c = Client()
    c.init()
    c.begin_and_add()
    c.txn.commit()
    assert c.next(batches_incomplete=True) is None
    _, request = c.next()
    assert isinstance(request, EndTxnRequest) and request.commit


def test_a_request_backing_off_holds_the_queue():
    """Kafka's queue is served strictly by priority; a retried request waits its backoff
    (Sender.maybeSendAndPollTransactionalRequest sleeps) and nothing overtakes it."""
    c = Client()
    c.init()
    c.begin_and_add()
    c.txn.maybe_add_partition(("foo", 1))
    add = c.next()
    c.answer(add, ErrorResponse(1, Errors.CONCURRENT_TRANSACTIONS))  # retried after 100 ms
    c.txn.commit()
    assert c.next() is None  # EndTxn must not overtake the AddPartitionsToTxn retry
    c.env.run(until=150)
    _, request = c.next()
    assert isinstance(request, AddPartitionsToTxnRequest)


def test_the_first_add_of_a_transaction_retries_concurrent_transactions_after_20_ms():
    """TransactionManagerTest.testAddPartitionToTransactionOverridesRetryBackoffForConcurrentTransactions
    (AddPartitionsToTxnHandler.maybeOverrideRetryBackoffMs): nothing in the transaction yet,
    so the previous one is still completing: 20 ms, not retry.backoff.ms (100)."""
    c = Client()
    c.init()
    assert c.txn.begin() is None
    c.txn.maybe_add_partition(TP0)
    add = c.next()
    c.answer(add, ErrorResponse(1, Errors.CONCURRENT_TRANSACTIONS))
    c.env.run(until=19)
    assert c.next() is None
    c.env.run(until=21)
    _, request = c.next()
    assert isinstance(request, AddPartitionsToTxnRequest)


def test_transactional_produce_failures_are_abortable_except_fencing():
    """TransactionManager.maybeTransitionToErrorState via handleFailedBatch."""
    for error, state in (
        (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, State.ABORTABLE_ERROR),
        (Errors.INVALID_PRODUCER_EPOCH, State.ABORTABLE_ERROR),
        (Errors.INVALID_TXN_STATE, State.ABORTABLE_ERROR),
        (Errors.PRODUCER_FENCED, State.FATAL_ERROR),
    ):
        c = Client()
        c.init()
        c.begin_and_add()
        batch = write(c.tm, TP0)
        assert not c.tm.can_retry(batch, PartitionResponse(error))
        c.tm.handle_failed_batch(batch, error, error.name, True)
        assert c.txn.state.state is state, error


# -- transaction version 2 (KIP-890 part 2, the 4.0 client) ---------------------------------


def test_tv2_send_adds_no_partition_request_and_starts_the_transaction():
    """KAFKA-14563 (TransactionManager.maybeAddPartition under TV2): the partition goes
    straight into the transaction, may be drained at once, and no AddPartitionsToTxn is sent;
    the commit then needs an EndTxn."""
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    c.txn.maybe_add_partition(TP0)
    assert c.txn.is_partition_added(TP0) and c.txn.transaction_started
    c.txn.commit()
    _, request = c.next()
    assert isinstance(request, EndTxnRequest) and request.commit


def test_tv2_send_offsets_goes_straight_to_the_group_coordinator():
    """KAFKA-14563: under TV2 sendOffsetsToTransaction sends TxnOffsetCommit (v5) with no
    AddOffsetsToTxn; the group coordinator adds its partition to the transaction."""
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    result = c.txn.send_offsets_to_transaction(((TP0, 5),), "g")
    assert c.txn.transaction_started
    pending = c.next()
    assert isinstance(pending[1], TxnOffsetCommitRequest)
    c.answer(pending, ErrorResponse(1, Errors.NONE))
    assert result.value is None


def test_tv2_abort_after_an_abortable_error_relies_on_end_txn_for_the_bump():
    """KAFKA-17898: under TV2 the client does not bump its epoch with InitProducerId after
    an abortable error; EndTxn bumps it and the client adopts the returned id and epoch."""
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    c.txn.maybe_add_partition(TP0)
    batch = write(c.tm, TP0)
    c.tm.handle_failed_batch(batch, Errors.INVALID_PRODUCER_EPOCH, "e", True)
    assert c.txn.state.state is State.ABORTABLE_ERROR
    c.txn.abort()
    end = c.next()
    assert isinstance(end[1], EndTxnRequest) and not end[1].commit
    c.answer(end, EndTxnResponse(1, Errors.NONE, PID, EPOCH + 1))
    assert c.next() is None  # no InitProducerId
    assert c.txn.state.state is State.READY and c.tm.epoch == EPOCH + 1


def test_tv2_unknown_mapping_on_a_produce_is_fatal():
    """The 4.0 client: INVALID_PRODUCER_ID_MAPPING on a produce is fatal (under transaction
    version 1 it is abortable)."""
    for version, state in ((2, State.FATAL_ERROR), (1, State.ABORTABLE_ERROR)):
        c = Client(version)
        c.init()
        c.begin_and_add() if version == 1 else c.txn.begin()
        batch = write(c.tm, TP0)
        c.tm.handle_failed_batch(batch, Errors.INVALID_PRODUCER_ID_MAPPING, "m", True)
        assert c.txn.state.state is state, version


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (Errors.UNKNOWN_MEMBER_ID, "CommitFailedException: Transaction offset Commit failed"),
        (Errors.ILLEGAL_GENERATION, "CommitFailedException: Transaction offset Commit failed"),
        (Errors.FENCED_INSTANCE_ID, "FencedInstanceIdException"),
        (Errors.TRANSACTION_ABORTABLE, "TransactionAbortableException"),
    ],
)
def test_a_refused_group_member_makes_the_transaction_abortable(error: Errors, text: str):
    """TransactionManager.TxnOffsetCommitHandler (KIP-447): the group coordinator's refusal of
    the consumer's member or generation is an abortable error (CommitFailedException for an
    unknown member or an old generation), not a fatal one; the request carries the group
    metadata it was given."""
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    meta = ConsumerGroupMetadata("g", 3, "member-1", "instance-1")
    result = c.txn.send_offsets_to_transaction(((TP0, 5),), meta)
    pending = c.next()
    request = pending[1]
    assert isinstance(request, TxnOffsetCommitRequest)
    assert (request.group, request.generation, request.member_id, request.instance_id) == (
        "g",
        3,
        "member-1",
        "instance-1",
    )
    c.answer(pending, ErrorResponse(1, error))
    assert result.value.startswith(text)
    assert c.txn.state.state is State.ABORTABLE_ERROR


def test_a_fenced_producer_at_txn_offset_commit_stays_fatal():
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    result = c.txn.send_offsets_to_transaction(((TP0, 5),), ConsumerGroupMetadata("g", 3, "m"))
    pending = c.next()
    c.answer(pending, ErrorResponse(1, Errors.PRODUCER_FENCED))
    assert result.value.startswith("ProducerFencedException")
    assert c.txn.state.state is State.FATAL_ERROR


def test_a_group_id_alone_names_no_member_nor_generation():
    c = Client(version=2)
    c.init()
    assert c.txn.begin() is None
    c.txn.send_offsets_to_transaction(((TP0, 5),), "g")
    request = c.next()[1]
    assert (request.generation, request.member_id, request.instance_id) == (-1, "", None)
