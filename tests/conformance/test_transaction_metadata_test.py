"""Conformance with Kafka's TransactionMetadataTest (core, kafka.coordinator.transaction).

Kafka tests ``TransactionMetadata``'s prepare/complete pairs one by one; eosim's
``TransactionCoordinator`` performs each pair as one step (write the record, then change the
state), so each case sets up the metadata as Kafka's test constructs it and drives the
coordinator operation that calls that prepare method:

* ``prepareIncrementProducerEpoch`` / ``prepareProducerIdRotation``: ``init_producer_id``;
* ``prepareFenceProducerEpoch``: ``fence_and_abort``;
* ``prepareAddPartitions``: ``add_partitions``; ``prepareAbortOrCommit``: ``end_txn``;
* ``prepareComplete``: ``complete``.

Transaction version 0 in Kafka's tests is eosim's version 1 (preset "3.9"); version 2 is "4.0".
"""

from __future__ import annotations

import pytest
from conformance.coordinators import NEW_PID, coordinator_with

from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_state import (
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from eosim.simulation.protocol import MAX_EPOCH, Errors

S = TransactionState
PID = 23423
TXN = "txnlId"
TP1, TP2 = ("topic1", 0), ("topic2", 0)


def setup(
    state: TransactionState = S.EMPTY,
    epoch: int = 1,
    last: int = -1,
    version: str = "3.9",
    partitions: tuple = (),
    previous: int = -1,
) -> tuple[TransactionCoordinator, TransactionMetadata]:
    return coordinator_with(TXN, PID, state, epoch, last, version, partitions, previous)


def test_initialize_epoch():
    """TransactionMetadataTest.testInitializeEpoch: epoch -1 is bumped to 0."""
    c, meta = setup(epoch=-1)
    r = c.init_producer_id(TXN, 30_000, 100.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, PID, 0)
    assert meta.last_producer_epoch == -1


def test_normal_epoch_bump():
    """TransactionMetadataTest.testNormalEpochBump."""
    c, meta = setup(epoch=735)
    r = c.init_producer_id(TXN, 30_000, 100.0)
    assert (r.producer_id, r.epoch, meta.last_producer_epoch) == (PID, 736, -1)


def test_bump_epoch_not_allowed_if_epochs_exhausted():
    """TransactionMetadataTest.testBumpEpochNotAllowedIfEpochsExhausted: the coordinator reaches
    prepareIncrementProducerEpoch at an exhausted epoch only when the expected epoch is not the
    current one; the IllegalStateException is answered UNKNOWN_SERVER_ERROR."""
    c, meta = setup(epoch=MAX_EPOCH - 1, last=MAX_EPOCH - 2)
    assert meta.epoch_exhausted
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, MAX_EPOCH - 2))
    assert r.error is Errors.UNKNOWN_SERVER_ERROR
    assert (meta.producer_id, meta.epoch) == (PID, MAX_EPOCH - 1)


def test_tolerate_update_time_shift_during_epoch_bump():
    """TransactionMetadataTest.testTolerateUpdateTimeShiftDuringEpochBump: an earlier update time
    is taken as it is."""
    c, meta = setup(epoch=1)
    c.init_producer_id(TXN, 30_000, 99.0, expected=(PID, 1))
    assert (meta.producer_id, meta.epoch, meta.last_producer_epoch) == (PID, 2, 1)
    assert meta.updated_ms == 99.0


def test_tolerate_update_time_reset_during_producer_id_rotation():
    """TransactionMetadataTest.testTolerateUpdateTimeResetDuringProducerIdRotation (the rotation
    with recordLastEpoch: an exhausted epoch named by the caller)."""
    c, meta = setup(epoch=MAX_EPOCH - 1)
    r = c.init_producer_id(TXN, 30_000, 99.0, expected=(PID, MAX_EPOCH - 1))
    assert (r.producer_id, r.epoch) == (NEW_PID, 0)
    assert meta.last_producer_epoch == MAX_EPOCH - 1 and meta.updated_ms == 99.0


def test_tolerate_time_shift_during_add_partitions():
    """TransactionMetadataTest.testTolerateTimeShiftDuringAddPartitions: from Empty the start
    time is the update time; in Ongoing it stays."""
    c, meta = setup(epoch=1)
    assert c.add_partitions(TXN, PID, 1, [TP1], 99.0) is Errors.NONE
    assert (meta.state, meta.partitions, meta.started_ms, meta.updated_ms) == (
        S.ONGOING,
        [TP1],
        99.0,
        99.0,
    )
    assert (meta.epoch, meta.last_producer_epoch) == (1, -1)
    assert c.add_partitions(TXN, PID, 1, [TP2], 98.0) is Errors.NONE
    assert (meta.partitions, meta.started_ms, meta.updated_ms) == ([TP1, TP2], 99.0, 98.0)


@pytest.mark.parametrize("commit", [True, False])
def test_tolerate_time_shift_during_prepare(commit: bool):
    """TransactionMetadataTest.testTolerateTimeShiftDuringPrepareCommit and
    testTolerateTimeShiftDuringPrepareAbort (transaction version 0: no epoch bump)."""
    c, meta = setup(S.ONGOING, epoch=1, partitions=(TP1,))
    assert c.end_txn(TXN, PID, 1, commit, 99.0).error is Errors.NONE
    assert meta.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert (meta.producer_id, meta.epoch, meta.last_producer_epoch) == (PID, 1, -1)
    assert (meta.started_ms, meta.updated_ms) == (1.0, 99.0)


@pytest.mark.parametrize("version", ["3.9", "4.0"])
@pytest.mark.parametrize("commit", [True, False])
def test_tolerate_time_shift_during_complete(commit: bool, version: str):
    """TransactionMetadataTest.testTolerateTimeShiftDuringCompleteCommit and
    testTolerateTimeShiftDuringCompleteAbort: the last epoch becomes the epoch under
    transaction version 2 and is left alone under 0."""
    state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    c, meta = setup(state, epoch=1, version=version, partitions=(TP1,))
    c.complete(TXN, 99.0)
    assert meta.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    last = 1 if version == "4.0" else -1
    assert (meta.producer_id, meta.epoch, meta.last_producer_epoch) == (PID, 1, last)
    assert meta.updated_ms == 99.0


def test_fence_producer_after_epochs_exhausted():
    """TransactionMetadataTest.testFenceProducerAfterEpochsExhausted: 32766 is fenced to 32767
    with no last epoch, and the abort keeps the producer id."""
    c, meta = setup(S.ONGOING, epoch=MAX_EPOCH - 1, partitions=(TP1,))
    assert meta.epoch_exhausted
    r = c.fence_and_abort(meta, 100.0)
    assert r.error is Errors.NONE and r.markers == (TP1,)
    assert (meta.state, meta.producer_id, meta.epoch) == (S.PREPARE_ABORT, PID, MAX_EPOCH)
    assert meta.last_producer_epoch == -1


def test_fence_producer_not_allowed_if_it_would_overflow():
    """TransactionMetadataTest.testFenceProducerNotAllowedIfItWouldOverflow."""
    c, meta = setup(S.ONGOING, epoch=MAX_EPOCH, partitions=(TP1,))
    assert meta.epoch_exhausted
    assert c.fence_and_abort(meta, 100.0).error is Errors.UNKNOWN_SERVER_ERROR
    assert (meta.state, meta.epoch) == (S.ONGOING, MAX_EPOCH)


def test_rotate_producer_id():
    """TransactionMetadataTest.testRotateProducerId."""
    c, meta = setup(epoch=MAX_EPOCH - 1)
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, MAX_EPOCH - 1))
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, NEW_PID, 0)
    assert (meta.previous_producer_id, meta.last_producer_epoch) == (PID, MAX_EPOCH - 1)


def test_epoch_bump_on_end_txn():
    """TransactionMetadataTest.testEpochBumpOnEndTxn (transaction version 2)."""
    c, meta = setup(S.ONGOING, epoch=10, version="4.0", partitions=(TP1,))
    assert c.end_txn(TXN, PID, 10, True, 99.0).error is Errors.NONE
    assert (meta.producer_id, meta.epoch) == (PID, 11)
    c.complete(TXN, 100.0)
    assert (meta.producer_id, meta.epoch) == (PID, 11)


def test_epoch_bump_on_end_txn_overflow():
    """TransactionMetadataTest.testEpochBumpOnEndTxnOverflow (transaction version 2)."""
    c, meta = setup(S.ONGOING, epoch=MAX_EPOCH - 1, version="4.0", partitions=(TP1,))
    assert meta.epoch_exhausted
    assert c.end_txn(TXN, PID, MAX_EPOCH - 1, True, 99.0).error is Errors.NONE
    assert (meta.producer_id, meta.epoch, meta.next_producer_id) == (PID, MAX_EPOCH, NEW_PID)
    c.complete(TXN, 100.0)
    assert (meta.producer_id, meta.epoch) == (NEW_PID, 0)


@pytest.mark.parametrize(
    ("state", "version"),
    [
        (S.ONGOING, "3.9"),
        (S.PREPARE_ABORT, "3.9"),
        (S.PREPARE_ABORT, "4.0"),
        (S.PREPARE_COMMIT, "3.9"),
        (S.PREPARE_COMMIT, "4.0"),
    ],
)
def test_rotate_producer_id_with_a_pending_transaction(state: TransactionState, version: str):
    """TransactionMetadataTest.testRotateProducerIdInOngoingState / InPrepareAbortState /
    InPrepareCommitState: no rotation while a transaction is pending. Through the coordinator,
    InitProducerId fences an Ongoing transaction and answers Prepare* CONCURRENT_TRANSACTIONS;
    the producer id never changes."""
    c, meta = setup(state, epoch=MAX_EPOCH - 1, version=version, partitions=(TP1,))
    r = c.init_producer_id(TXN, 30_000, 100.0)
    assert r.error is Errors.CONCURRENT_TRANSACTIONS
    assert meta.producer_id == PID


def test_attempted_epoch_bump_with_newly_created_metadata():
    """TransactionMetadataTest.testAttemptedEpochBumpWithNewlyCreatedMetadata."""
    c, meta = setup(epoch=-1)
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, 735))
    assert (r.producer_id, r.epoch, meta.last_producer_epoch) == (PID, 0, -1)


def test_epoch_bump_with_current_epoch_provided():
    """TransactionMetadataTest.testEpochBumpWithCurrentEpochProvided."""
    c, meta = setup(epoch=735)
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, 735))
    assert (r.producer_id, r.epoch, meta.last_producer_epoch) == (PID, 736, 735)


def test_attempted_epoch_bump_with_last_epoch():
    """TransactionMetadataTest.testAttemptedEpochBumpWithLastEpoch."""
    c, meta = setup(epoch=735, last=734)
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, 734))
    assert (r.producer_id, r.epoch, meta.last_producer_epoch) == (PID, 735, 734)


def test_attempted_epoch_bump_with_fenced_epoch():
    """TransactionMetadataTest.testAttemptedEpochBumpWithFencedEpoch."""
    c, meta = setup(epoch=735, last=734, previous=PID)
    r = c.init_producer_id(TXN, 30_000, 100.0, expected=(PID, 733))
    assert r.error is Errors.PRODUCER_FENCED
    assert (meta.epoch, meta.last_producer_epoch) == (735, 734)


def test_epoch_exhaustion_threshold():
    """TransactionMetadata.isEpochExhausted (used throughout TransactionMetadataTest): a client
    never gets 32767, so exhaustion starts at 32766."""
    assert not is_epoch_exhausted(MAX_EPOCH - 2)
    assert is_epoch_exhausted(MAX_EPOCH - 1) and is_epoch_exhausted(MAX_EPOCH)


def test_transaction_state_id_and_name_mapping():
    """TransactionMetadataTest.testTransactionStateIdAndNameMapping and
    testAllTransactionStatesAreMapped: the eight states and their names."""
    assert [s.value for s in TransactionState] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]


VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


@pytest.mark.parametrize("target", list(TransactionState), ids=lambda s: s.value)
def test_valid_previous_states(target: TransactionState):
    """TransactionMetadata's validPreviousStates, the table every transition in
    TransactionMetadataTest goes through (prepareTransitionTo throws for any other)."""
    assert {s for s in TransactionState if s.can_transition_to(target)} == VALID_PREVIOUS[target]
