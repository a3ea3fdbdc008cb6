"""Conformance with Kafka's TransactionCoordinatorTest (core, kafka.coordinator.transaction).

Kafka's test mocks the TransactionStateManager and hands the coordinator a metadata object;
here the same metadata is put in an eosim ``TransactionCoordinator`` (``coordinator_with``), or,
for the NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS cases, requests go to a small cluster.
Kafka's transaction version 0 is eosim's "3.9" preset, version 2 the "4.0" preset; Kafka's
``requestEpoch`` helper (epoch - 1 under version 2, where every EndTxn bumped it) is kept.
"""

from __future__ import annotations

import pytest
from conformance.cluster import Cluster
from conformance.coordinators import NEW_PID, coordinator_with
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.transaction_log import partition_for
from eosim.simulation.coordinator.transaction_state import TransactionState
from eosim.simulation.protocol import (
    MAX_EPOCH,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    Errors,
    InitProducerIdRequest,
)

S = TransactionState
TXN = "known"
PID = 10
PID2 = 11
EPOCH = 1
TP = ("topic1", 0)
TP0 = ("t", 0)  # a partition of the small cluster
VERSIONS = ["3.9", "4.0"]  # Kafka's @ValueSource(shorts = Array(0, 2))


def request_epoch(version: str) -> int:
    """TransactionCoordinatorTest.requestEpoch."""
    return EPOCH - 1 if version == "4.0" else EPOCH


# -- InitProducerId -------------------------------------------------------------------------------
def test_should_accept_init_pid_and_return_next_pid_when_transactional_id_is_null():
    """TransactionCoordinatorTest.shouldAcceptInitPidAndReturnNextPidWhenTransactionalIdIsNull:
    without a transactional id any broker hands out the next producer id at epoch 0."""
    cl = Cluster(brokers=1, partitions=(TP,))
    answers = [cl.call("broker-0", lambda cid: InitProducerIdRequest(cid)) for _ in range(2)]
    assert [(a.error, a.producer_id, a.epoch) for a in answers] == [
        (Errors.NONE, 0, 0),
        (Errors.NONE, 1, 0),
    ]


def test_should_init_pid_with_epoch_zero_for_new_transactional_id():
    """TransactionCoordinatorTest.shouldInitPidWithEpochZeroForNewTransactionalId."""
    c, _ = coordinator_with("other", PID)
    r = c.init_producer_id(TXN, 1, 0.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, NEW_PID, 0)


def test_should_generate_new_producer_id_if_no_state_and_producer_id_and_epoch_provided():
    """TransactionCoordinatorTest.shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided."""
    c, _ = coordinator_with("other", PID)
    r = c.init_producer_id(TXN, 1, 0.0, expected=(PID, EPOCH))
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, NEW_PID, 0)


def test_should_generate_new_producer_id_if_epochs_exhausted():
    """TransactionCoordinatorTest.shouldGenerateNewProducerIdIfEpochsExhausted."""
    c, _ = coordinator_with(TXN, PID, epoch=MAX_EPOCH - 1, last=MAX_EPOCH - 2, previous=PID)
    r = c.init_producer_id(TXN, 1, 0.0)
    assert r.error is Errors.NONE and r.producer_id != PID and r.epoch == 0


def test_should_respond_with_not_coordinator_on_init_pid_when_not_coordinator():
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnInitPidWhenNotCoordinator."""
    cl = Cluster(brokers=2)
    other = next(b for b in cl.brokers if b != cl.coordinator_of(TXN))
    answer = cl.call(other, lambda cid: InitProducerIdRequest(cid, TXN, 60_000))
    assert (answer.error, answer.producer_id, answer.epoch) == (Errors.NOT_COORDINATOR, -1, -1)


def loading_cluster(version: str = "4.0") -> tuple[Cluster, str]:
    """A cluster whose coordinator for TXN has just failed over and is still loading."""
    cl = Cluster(brokers=3, version=version)
    cl.brokers[cl.coordinator_of(TXN)].crash()
    # The session is 100 ms; the controller's fence task runs every 12.5 ms (session / 8), so
    # the failover comes at 112.5 ms, and the new coordinator loads for 10 ms.
    cl.run(113.0)
    return cl, cl.coordinator_of(TXN)


def test_should_respond_with_coordinator_load_in_progress_on_init_pid_when_coordinator_loading():
    """TransactionCoordinatorTest.
    shouldRespondWithCoordinatorLoadInProgressOnInitPidWhenCoordinatorLoading."""
    cl, node = loading_cluster()
    answer = cl.call(node, lambda cid: InitProducerIdRequest(cid, TXN, 60_000), wait_ms=5.0)
    assert answer.error is Errors.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize(
    ("state", "version"),
    [
        (S.EMPTY, "3.9"),
        (S.COMPLETE_ABORT, "3.9"),
        (S.COMPLETE_ABORT, "4.0"),
        (S.COMPLETE_COMMIT, "3.9"),
        (S.COMPLETE_COMMIT, "4.0"),
    ],
)
def test_should_increment_epoch_and_update_metadata_on_handle_init_pid(state, version):
    """TransactionCoordinatorTest.shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhen
    ExistingEmptyTransaction / ExistingCompleteTransaction / ExistingCompleteCommitTransaction:
    the epoch goes up by one and the new timeout is taken."""
    c, meta = coordinator_with(TXN, PID, state, epoch=EPOCH, version=version, timeout_ms=1)
    r = c.init_producer_id(TXN, 10, 5.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, PID, EPOCH + 1)
    assert (meta.timeout_ms, meta.updated_ms, meta.epoch, meta.producer_id) == (
        10,
        5.0,
        EPOCH + 1,
        PID,
    )


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_wait_for_commit_to_complete_on_handle_init_pid(state):
    """TransactionCoordinatorTest.shouldWaitForCommitToCompleteOnHandleInitPidAndExisting
    TransactionInPrepareCommitState / InPrepareAbortState."""
    c, _ = coordinator_with(TXN, 0, state, epoch=0, version="4.0", partitions=(("topic", 1),))
    r = c.init_producer_id(TXN, 10, 5.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)


def test_should_abort_transaction_on_handle_init_pid_when_existing_transaction_in_ongoing_state():
    """TransactionCoordinatorTest.
    shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState: the fence writes
    PrepareAbort at epoch + 1 with no last epoch, and the caller is told
    CONCURRENT_TRANSACTIONS."""
    c, meta = coordinator_with(TXN, PID, S.ONGOING, epoch=EPOCH, last=EPOCH - 1, partitions=(TP,))
    r = c.init_producer_id(TXN, 1, 5.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    record = c.log.records[-1]
    assert (record.state, record.producer_id, record.epoch) == (S.PREPARE_ABORT, PID, EPOCH + 1)
    assert record.partitions == (TP,) and meta.last_producer_epoch == -1


def test_should_use_last_epoch_to_fence_when_epochs_are_exhausted():
    """TransactionCoordinatorTest.shouldUseLastEpochToFenceWhenEpochsAreExhausted."""
    c, meta = coordinator_with(
        TXN, PID, S.ONGOING, epoch=MAX_EPOCH - 1, last=MAX_EPOCH - 2, partitions=(TP,)
    )
    assert meta.epoch_exhausted
    r = c.init_producer_id(TXN, 1, 5.0)
    assert r.error is Errors.CONCURRENT_TRANSACTIONS
    assert (meta.state, meta.producer_id, meta.epoch) == (S.PREPARE_ABORT, PID, MAX_EPOCH)
    assert meta.last_producer_epoch == -1


def test_init_producer_id_with_no_last_producer_data():
    """TransactionCoordinatorTest.testInitProducerIdWithNoLastProducerData."""
    c, _ = coordinator_with(TXN, PID, epoch=EPOCH + 1, last=-1, partitions=())
    r = c.init_producer_id(TXN, 1, 5.0, expected=(PID, EPOCH))
    assert (r.error, r.producer_id, r.epoch) == (Errors.PRODUCER_FENCED, -1, -1)


def test_fence_producer_when_mapping_exists_with_different_producer_id():
    """TransactionCoordinatorTest.testFenceProducerWhenMappingExistsWithDifferentProducerId."""
    c, _ = coordinator_with(TXN, PID + 1, epoch=EPOCH, last=EPOCH - 1, previous=PID)
    r = c.init_producer_id(TXN, 1, 5.0, expected=(PID, EPOCH))
    assert r.error is Errors.PRODUCER_FENCED


def test_init_producer_id_with_current_epoch_provided():
    """TransactionCoordinatorTest.testInitProducerIdWithCurrentEpochProvided: the bump and its
    retry get the same answer."""
    c, _ = coordinator_with(TXN, PID, epoch=10, last=9, previous=PID)
    for _ in range(2):
        r = c.init_producer_id(TXN, 1, 5.0, expected=(PID, 10))
        assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, PID, 11)


def test_init_producer_id_stale_current_epoch_provided():
    """TransactionCoordinatorTest.testInitProducerIdStaleCurrentEpochProvided: a new producer
    bumps 10 to 11, then the old one, naming 10, is fenced."""
    c, _ = coordinator_with(TXN, PID, epoch=10, last=9, previous=PID)
    assert c.init_producer_id(TXN, 1, 5.0).epoch == 11
    r = c.init_producer_id(TXN, 1, 6.0, expected=(PID, 10))
    assert (r.error, r.producer_id, r.epoch) == (Errors.PRODUCER_FENCED, -1, -1)


def test_retry_init_producer_id_after_producer_id_rotation():
    """TransactionCoordinatorTest.testRetryInitProducerIdAfterProducerIdRotation."""
    c, _ = coordinator_with(TXN, PID, epoch=MAX_EPOCH - 1, last=MAX_EPOCH - 2, previous=PID)
    for _ in range(2):
        r = c.init_producer_id(TXN, 1, 5.0, expected=(PID, MAX_EPOCH - 1))
        assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, NEW_PID, 0)


def test_init_producer_id_with_invalid_epoch_after_producer_id_rotation():
    """TransactionCoordinatorTest.testInitProducerIdWithInvalidEpochAfterProducerIdRotation."""
    c, _ = coordinator_with(TXN, PID, epoch=MAX_EPOCH - 1, last=MAX_EPOCH - 2, previous=PID)
    assert c.init_producer_id(TXN, 1, 5.0, expected=(PID, MAX_EPOCH - 1)).producer_id == NEW_PID
    r = c.init_producer_id(TXN, 1, 6.0, expected=(PID, MAX_EPOCH - 2))
    assert r.error is Errors.PRODUCER_FENCED


def test_should_not_bump_epoch_with_pending_transaction():
    """TransactionCoordinatorTest.shouldNotBumpEpochWithPendingTransaction: the transaction is
    Ongoing with its PrepareCommit pending (the write waits for the log's followers); a bump
    naming the current producer and epoch is answered CONCURRENT_TRANSACTIONS and changes
    nothing."""
    cl, txn, pid, epoch, node = pending_end_txn()
    bump = cl.call(node, lambda cid: InitProducerIdRequest(cid, txn, 60_000, pid, epoch), 5.0)
    assert (bump.error, bump.producer_id, bump.epoch) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert cl.brokers[node].coordinator._pending[txn].epoch == epoch
    assert cl.fences == []


def pending_end_txn(timeout_ms: int = 60_000, pending: str = "EndTxn"):  # type: ignore[no-untyped-def]
    """A producer's transaction on ``TP0`` whose EndTxn(commit) (or an AddPartitionsToTxn of
    ``("t", 1)``) is being written: the followers of its ``__transaction_state`` partition are
    down (not yet fenced), so the write waits."""
    cl = Cluster(brokers=3, version="3.9")
    node = cl.leaders[TP0]
    txn = cl.txn_id_led_by(node)
    cl.run(50)
    init = cl.call(node, lambda cid: InitProducerIdRequest(cid, txn, timeout_ms))
    pid, epoch = init.producer_id, init.epoch
    assert cl.add(txn, pid, epoch, TP0) is Errors.NONE
    partition = internal_partition(txn, "transaction")
    for b in cl.metadata.replicas(partition):
        if b != node:
            cl.brokers[b].crash()
    if pending == "EndTxn":
        assert cl.end(txn, pid, epoch, True, wait_ms=5.0) is None  # held: the write waits
    else:
        add = cl.call(node, lambda c: AddPartitionsToTxnRequest(c, txn, pid, epoch, (("t", 1),)), 5)
        assert add is None
    assert txn in cl.brokers[node].coordinator._pending
    return cl, txn, pid, epoch, node


# -- AddPartitionsToTxn and verification -----------------------------------------------------------
def test_should_respond_with_invalid_pid_mapping_on_add_partitions_when_id_not_present():
    """TransactionCoordinatorTest.
    shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent."""
    c, _ = coordinator_with("other", PID)
    assert c.add_partitions(TXN, 0, 1, [TP], 0.0) is Errors.INVALID_PRODUCER_ID_MAPPING


def test_should_respond_with_not_coordinator_on_add_partitions_when_not_coordinator():
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnAddPartitionsWhenNotCoordinator."""
    cl = Cluster(brokers=2)
    other = next(b for b in cl.brokers if b != cl.coordinator_of(TXN))
    answer = cl.call(other, lambda cid: AddPartitionsToTxnRequest(cid, TXN, 0, 1, (TP,)))
    assert answer.error is Errors.NOT_COORDINATOR


def test_should_respond_with_coordinator_load_in_progress_on_add_partitions_when_loading():
    """TransactionCoordinatorTest.
    shouldRespondWithCoordinatorLoadInProgressOnAddPartitionsWhenCoordinatorLoading."""
    cl, node = loading_cluster()
    answer = cl.call(node, lambda cid: AddPartitionsToTxnRequest(cid, TXN, 0, 1, (TP,)), 5.0)
    assert answer.error is Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_verify_partition_handling():
    """TransactionCoordinatorTest.testVerifyPartitionHandling."""
    c, meta = coordinator_with(TXN, 1, S.PREPARE_COMMIT, epoch=0, previous=0, partitions=(TP,))
    assert c.verify_partition(TXN, 0, 0, TP) is Errors.INVALID_PRODUCER_ID_MAPPING
    meta.producer_id = 0
    assert c.verify_partition(TXN, 0, 1, TP) is Errors.PRODUCER_FENCED
    assert c.verify_partition(TXN, 0, 0, TP) is Errors.CONCURRENT_TRANSACTIONS
    meta.state, meta.partitions = S.ONGOING, []
    assert c.verify_partition(TXN, 0, 0, TP) is Errors.TRANSACTION_ABORTABLE


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_respond_with_concurrent_transactions_on_add_partitions(state):
    """TransactionCoordinatorTest.shouldRespondWithConcurrentTransactionsOnAddPartitionsWhen
    StateIsPrepareCommit / shouldRespondWithConcurrentTransactionOnAddPartitionsWhenStateIs
    PrepareAbort."""
    c, _ = coordinator_with(TXN, 0, state, epoch=0, previous=0, version="4.0")
    assert c.add_partitions(TXN, 0, 0, [TP], 0.0) is Errors.CONCURRENT_TRANSACTIONS


def test_should_respond_with_producer_fenced_on_add_partitions_when_epochs_are_different():
    """TransactionCoordinatorTest.shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent:
    the epoch is checked before the state."""
    c, _ = coordinator_with(TXN, 0, S.PREPARE_COMMIT, epoch=10, last=9, version="4.0")
    assert c.add_partitions(TXN, 0, 0, [TP], 0.0) is Errors.PRODUCER_FENCED


@pytest.mark.parametrize(
    ("state", "version"),
    [(S.EMPTY, "3.9"), (S.ONGOING, "3.9")]
    + [(s, v) for s in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) for v in VERSIONS],
)
def test_validate_successful_add_partitions(state, version):
    """TransactionCoordinatorTest.shouldAppendNewMetadataToLogOnAddPartitionsWhenPartitionsAdded,
    shouldRespondWithSuccessOnAddPartitionsWhenStateIsOngoing / IsCompleteCommit /
    IsCompleteAbort: an Ongoing record with the partition is written."""
    c, meta = coordinator_with(TXN, PID, state, epoch=EPOCH, last=EPOCH - 1, version=version)
    assert c.add_partitions(TXN, PID, EPOCH, [TP], 5.0) is Errors.NONE
    record = c.log.records[-1]
    assert (record.state, record.producer_id, record.epoch) == (S.ONGOING, PID, EPOCH)
    assert TP in record.partitions and meta.state is S.ONGOING


def test_should_respond_with_errors_none_on_add_partition_when_partitions_the_same():
    """TransactionCoordinatorTest.shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAnd
    PartitionsTheSame, taken through Kafka's shortcut for an Ongoing transaction that already
    holds the partitions: success with nothing written."""
    c, _ = coordinator_with(TXN, 0, S.ONGOING, epoch=0, partitions=(TP,))
    assert c.add_partitions(TXN, 0, 0, [TP], 5.0) is Errors.NONE
    assert c.log.records == []


def test_should_respond_with_errors_none_on_add_partition_when_ongoing_verify_only():
    """TransactionCoordinatorTest.
    shouldRespondWithErrorsNoneOnAddPartitionWhenOngoingVerifyOnlyAndPartitionsTheSame."""
    c, _ = coordinator_with(TXN, 0, S.ONGOING, epoch=0, partitions=(TP,))
    assert c.verify_partition(TXN, 0, 0, TP) is Errors.NONE


def test_should_respond_with_invalid_txn_state_when_verify_only_and_partition_not_present():
    """TransactionCoordinatorTest.shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent
    (the per-partition error is TRANSACTION_ABORTABLE; the leader passes it on to Produce v11+
    clients)."""
    c, _ = coordinator_with(TXN, 0, S.EMPTY, epoch=0, partitions=(TP,))
    assert c.verify_partition(TXN, 0, 0, ("topic2", 0)) is Errors.TRANSACTION_ABORTABLE
    assert c.verify_partition(TXN, 0, 0, TP) is Errors.NONE


# -- EndTxn ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_txn_id_doesnt_exist(version):
    """TransactionCoordinatorTest.shouldReplyWithInvalidPidMappingOnEndTxnWhenTxnIdDoesntExist."""
    c, _ = coordinator_with("other", PID, version=version)
    assert c.end_txn(TXN, 0, 0, True, 0.0).error is Errors.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("version", VERSIONS)
def test_should_reply_with_invalid_pid_mapping_on_end_txn_when_pid_doesnt_match(version):
    """TransactionCoordinatorTest.shouldReplyWithInvalidPidMappingOnEndTxnWhenPidDosentMatchMapped."""
    c, _ = coordinator_with(TXN, 10, S.ONGOING, epoch=0, previous=10, version=version)
    assert c.end_txn(TXN, 0, 0, True, 0.0).error is Errors.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("version", VERSIONS)
def test_should_reply_with_producer_fenced_on_end_txn_when_epoch_is_not_same(version):
    """TransactionCoordinatorTest.shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction."""
    c, _ = coordinator_with(TXN, PID, S.ONGOING, epoch=EPOCH, last=EPOCH - 1, version=version)
    assert c.end_txn(TXN, PID, 0, True, 0.0).error is Errors.PRODUCER_FENCED


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("state", "commit", "expected"),
    [
        (S.COMPLETE_COMMIT, True, Errors.NONE),
        (S.COMPLETE_ABORT, False, Errors.NONE),
        (S.COMPLETE_ABORT, True, Errors.INVALID_TXN_STATE),
        (S.COMPLETE_COMMIT, False, Errors.INVALID_TXN_STATE),
        (S.PREPARE_COMMIT, True, Errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, True, Errors.INVALID_TXN_STATE),
    ],
)
def test_end_txn_in_a_finished_or_finishing_state(version, state, commit, expected):
    """TransactionCoordinatorTest.shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit,
    ...CompleteAbortAndResultIsAbort, shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIs
    CompleteAbortAndResultIsNotAbort, ...CompleteCommitAndResultIsNotCommit,
    shouldReturnConcurrentTransactionsOnEndTxnRequestWhenStatusIsPrepareCommit,
    shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort."""
    c, _ = coordinator_with(TXN, PID, state, epoch=EPOCH, last=EPOCH - 1, version=version)
    r = c.end_txn(TXN, PID, request_epoch(version), commit, 5.0)
    assert r.error is expected
    if expected is Errors.NONE:
        assert (r.producer_id, r.epoch, r.markers) == (PID, EPOCH, ())


def test_should_return_invalid_txn_request_on_end_txn_v2_if_not_end_txn_v2_retry():
    """TransactionCoordinatorTest.shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry: under
    version 2 the same epoch in PrepareCommit or CompleteCommit is the next EndTxn, fenced."""
    for state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT):
        c, _ = coordinator_with(TXN, PID, state, epoch=EPOCH, version="4.0")
        assert c.end_txn(TXN, PID, EPOCH, True, 5.0).error is Errors.PRODUCER_FENCED


def test_should_return_ok_on_end_txn_v2_if_end_txn_v2_retry_epoch_overflow():
    """TransactionCoordinatorTest.shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow."""
    c, _ = coordinator_with(
        TXN,
        PID,
        S.PREPARE_COMMIT,
        epoch=MAX_EPOCH,
        last=MAX_EPOCH - 1,
        previous=PID,
        next_pid=PID2,
        version="4.0",
    )
    assert c.end_txn(TXN, PID, MAX_EPOCH - 1, True, 5.0).error is Errors.CONCURRENT_TRANSACTIONS
    c, _ = coordinator_with(TXN, PID2, S.COMPLETE_COMMIT, epoch=0, previous=PID, version="4.0")
    r = c.end_txn(TXN, PID, MAX_EPOCH - 1, True, 6.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, PID2, 0)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("commit", [True, False])
def test_should_append_prepare_to_log_on_end_txn_when_status_is_ongoing(version, commit):
    """TransactionCoordinatorTest.shouldAppendPrepareCommitToLogOnEndTxnWhenStatusIsOngoingAnd
    ResultIsCommit / shouldAppendPrepareAbortToLogOnEndTxnWhenStatusIsOngoingAndResultIsAbort."""
    c, _ = coordinator_with(TXN, PID, S.ONGOING, epoch=EPOCH, version=version, partitions=(TP,))
    r = c.end_txn(TXN, PID, EPOCH, commit, 5.0)
    assert r.error is Errors.NONE and r.markers == (TP,)
    record = c.log.records[-1]
    assert record.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert record.epoch == (EPOCH + 1 if version == "4.0" else EPOCH)


@pytest.mark.parametrize("version", VERSIONS)
def test_should_respond_with_not_coordinator_on_end_txn_when_is_not_coordinator(version):
    """TransactionCoordinatorTest.shouldRespondWithNotCoordinatorOnEndTxnWhenIsNotCoordinatorForId."""
    cl = Cluster(brokers=2, version=version)
    other = next(b for b in cl.brokers if b != cl.coordinator_of(TXN))
    answer = cl.call(other, lambda cid: EndTxnRequest(cid, TXN, 0, 0, True))
    assert answer.error is Errors.NOT_COORDINATOR


@pytest.mark.parametrize("version", VERSIONS)
def test_should_respond_with_coordinator_load_in_progress_on_end_txn(version):
    """TransactionCoordinatorTest.
    shouldRespondWithCoordinatorLoadInProgressOnEndTxnWhenCoordinatorIsLoading."""
    cl, _node = loading_cluster(version)
    assert cl.end(TXN, 0, 0, True, wait_ms=5.0).error is Errors.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("server", "larger"), [(1, True), (2, False)])
def test_should_return_invalid_epoch_on_end_txn(version, server, larger):
    """TransactionCoordinatorTest.shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger /
    shouldReturnInvalidEpochOnEndTxnWhenEpochIsSmaller (verifyEndTxnEpoch: CompleteCommit)."""
    c, _ = coordinator_with(TXN, PID, S.COMPLETE_COMMIT, epoch=server, last=1, version=version)
    epoch = server + 1 if larger else request_epoch(version)
    assert c.end_txn(TXN, PID, epoch, True, 5.0).error is Errors.PRODUCER_FENCED


# -- coordinator housekeeping --------------------------------------------------------------------
def test_should_remove_transactions_for_partition_on_emigration():
    """TransactionCoordinatorTest.shouldRemoveTransactionsForPartitionOnEmigration."""
    c, _ = coordinator_with(TXN, PID)
    c.unload(partition_for(TXN))
    assert TXN not in c.transactions


def test_should_abort_expired_transactions_in_ongoing_state_and_bump_epoch():
    """TransactionCoordinatorTest.shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch (the
    timeout abort uses transaction version 0 there: one bump)."""
    c, _ = coordinator_with(TXN, PID, S.ONGOING, epoch=EPOCH, partitions=(TP,), timeout_ms=1)
    now = 1.0 + 10_000.0
    assert c.expired(now) == [TXN]
    assert c.fence_and_abort(c.transactions[TXN], now).markers == (TP,)
    record = c.log.records[-1]
    assert (record.state, record.producer_id, record.epoch) == (S.PREPARE_ABORT, PID, EPOCH + 1)
    assert record.partitions == (TP,) and c.transactions[TXN].last_producer_epoch == -1


@pytest.mark.parametrize("pending", ["EndTxn", "AddPartitionsToTxn"])
def test_should_not_abort_expired_transactions_that_have_a_pending_state_transition(pending):
    """TransactionCoordinatorTest.shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition:
    a transaction past its timeout whose PrepareCommit (Kafka's case; or a further Ongoing) is
    still being written is skipped by the timeout check (abortTimedOutTransactions): no fence,
    no bump."""
    cl, txn, _pid, epoch, node = pending_end_txn(timeout_ms=1_000, pending=pending)
    cl.run(10_000)  # one abort check; the write waits until its 30 s timeout
    runtime = cl.brokers[node].coordinator
    assert txn in runtime._pending and runtime._pending[txn].epoch == epoch
    assert cl.meta(txn).epoch == epoch and cl.fences == []


# -- a fence whose transaction log write fails --------------------------------------------------
def ongoing_with_unavailable_log(version: str, timeout_ms: int = 60_000):  # type: ignore[no-untyped-def]
    """A producer's open transaction on ``TP0`` (led by its coordinator), then the followers of
    its ``__transaction_state`` partition down: every write to the log now fails."""
    cl = Cluster(brokers=3, version=version)
    txn = cl.txn_id_led_by(cl.leaders[TP0])
    cl.run(50)
    init = cl.call(cl.coordinator_of(txn), lambda cid: InitProducerIdRequest(cid, txn, timeout_ms))
    pid, epoch = init.producer_id, init.epoch
    assert cl.add(txn, pid, epoch, TP0) is Errors.NONE
    produced = cl.produce(TP0, pid, epoch, 0, transactional=True, txn_id=txn)
    assert produced.error is Errors.NONE
    return cl, txn, pid, epoch, cl.stop_log_followers(txn)


@pytest.mark.parametrize("version", VERSIONS)
def test_should_not_repeatedly_bump_epoch_due_to_init_pid_during_ongoing_txn_if_append_to_log_fails(
    version,
):
    """TransactionCoordinatorTest.shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppend
    ToLogFails: the fence (epoch + 1) stays in memory when its PrepareAbort write fails, with
    ``hasFailedEpochFence`` set, and a retried InitProducerId fences at that epoch without bumping
    it again; once the log takes the write, the transaction is aborted and the flag cleared.
    Meanwhile, and after the log has recovered, the fenced producer is PRODUCER_FENCED."""
    cl, txn, pid, epoch, followers = ongoing_with_unavailable_log(version)
    for _ in range(2):
        assert cl.init(txn).error is Errors.COORDINATOR_NOT_AVAILABLE
        meta = cl.meta(txn)
        assert (meta.state, meta.epoch, meta.has_failed_epoch_fence) == (S.ONGOING, epoch + 1, True)
        assert meta.partitions == [TP0]
    assert cl.end(txn, pid, epoch, True).error is Errors.PRODUCER_FENCED
    cl.restart(followers)
    assert cl.end(txn, pid, epoch, True).error is Errors.PRODUCER_FENCED
    assert cl.init(txn).error is Errors.CONCURRENT_TRANSACTIONS
    cl.run(500)
    meta = cl.meta(txn)
    aborted_at = epoch + 2 if version == "4.0" else epoch + 1
    assert (meta.state, meta.epoch, meta.has_failed_epoch_fence) == (
        S.COMPLETE_ABORT,
        aborted_at,
        False,
    )
    marker = cl.leader(TP0).partitions[TP0].log.batches[-1]
    assert (marker.control, marker.epoch) == ("ABORT", aborted_at)
    assert [f[2] for f in cl.fences] == [epoch + 1]


@pytest.mark.parametrize("version", VERSIONS)
def test_should_not_bump_epoch_when_aborting_expired_transaction_if_append_to_log_fails(version):
    """TransactionCoordinatorTest.shouldNotBumpEpochWhenAbortingExpiredTransactionIfAppendToLog
    Fails: the timeout abort's fence stays in memory (epoch + 1, ``hasFailedEpochFence``) when
    its write fails; the next rounds fence at that epoch again instead of bumping, and the
    producer stays fenced, also once the log has recovered and the abort is written."""
    cl, txn, pid, epoch, followers = ongoing_with_unavailable_log(version, timeout_ms=1_000)
    cl.run(10_000)  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    meta = cl.meta(txn)
    assert (meta.state, meta.epoch, meta.has_failed_epoch_fence) == (S.ONGOING, epoch + 1, True)
    cl.run(10_000)  # the next round fails too, at the same epoch
    assert (meta.state, meta.epoch) == (S.ONGOING, epoch + 1)
    assert cl.add(txn, pid, epoch, TP0) is Errors.PRODUCER_FENCED
    cl.restart(followers)
    assert cl.end(txn, pid, epoch, True).error is Errors.PRODUCER_FENCED
    cl.run(10_000)  # the next round writes the abort
    meta = cl.meta(txn)
    aborted_at = epoch + 2 if version == "4.0" else epoch + 1
    assert (meta.state, meta.epoch, meta.has_failed_epoch_fence) == (
        S.COMPLETE_ABORT,
        aborted_at,
        False,
    )
    assert cl.end(txn, pid, epoch, True).error is Errors.PRODUCER_FENCED
    assert [f[2] for f in cl.fences] == [epoch + 1]


NOT_MODELLED = {
    "shouldReturnInvalidRequestWhenTransactionalIdIsEmpty": "ids come from scenario names",
    "shouldRespondWithInvalidRequestAddPartitionsToTransactionWhenTransactionalIdIsEmpty": "ditto",
    "shouldRespondWithInvalidRequestAddPartitionsToTransactionWhenTransactionalIdIsNull": "ditto",
    "shouldRespondWithInvalidRequestOnEndTxnWhenTransactionalIdIsNull": "ditto",
    "shouldRespondWithInvalidRequestOnEndTxnWhenTransactionalIdIsEmpty": "ditto",
    "shouldReturnWhenTransactionVersionDowngraded": "one transaction version per run",
    "shouldReturnCorrectlyWhenTransactionVersionUpgraded": "one transaction version per run",
    "shouldFailToAbortTransactionOnHandleInitPidWhenProducerEpochIsSmaller": "the fence and the "
    "abort are one step: no other request can come between them",
    "shouldNotAcceptSmallerEpochDuringTransactionExpiration": "the fence and the abort are one "
    "step: no other request can come between them",
    "testDescribeTransactions": "no DescribeTransactions API",
    "testDescribeTransactionsWithEmptyTransactionalId": "no DescribeTransactions API",
    "testDescribeTransactionsWithExpiringTransactionalId": "no DescribeTransactions API",
    "testDescribeTransactionsWhileCoordinatorLoading": "no DescribeTransactions API",
}


test_not_modelled = not_modelled("TransactionCoordinatorTest", NOT_MODELLED)
