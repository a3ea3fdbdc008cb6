"""Conformance with Kafka's TransactionStateManagerTest (core, kafka.coordinator.transaction):
timeout validation, timeout candidates, transactional.id expiration and loading. eosim's
``TransactionCoordinator`` holds the state manager's part too."""

from __future__ import annotations

import pytest
from conformance.coordinators import coordinator_with
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_log import partition_for
from eosim.simulation.coordinator.transaction_state import TransactionState
from eosim.simulation.protocol import Errors
from eosim.simulation.rules import VERSIONS

S = TransactionState
EXPIRATION_MS = 604_800_000.0  # transactional.id.expiration.ms default
TP0, TP1 = ("topic1", 0), ("topic1", 1)


@pytest.mark.parametrize(
    ("timeout_ms", "valid"), [(1, True), (-1, False), (0, False), (900_000, True), (900_001, False)]
)
def test_validate_transaction_timeout(timeout_ms: int, valid: bool):
    """TransactionStateManagerTest.testValidateTransactionTimeout (transaction.max.timeout.ms
    900000)."""
    c, _ = coordinator_with("other", 1)
    r = c.init_producer_id("tx", timeout_ms, 0.0)
    assert (r.error is Errors.NONE) is valid
    if not valid:
        assert r.error is Errors.INVALID_TRANSACTION_TIMEOUT


def test_should_only_consider_transactions_in_the_ongoing_state_to_abort():
    """TransactionStateManagerTest.shouldOnlyConsiderTransactionsInTheOngoingStateToAbort."""
    c, _ = coordinator_with("ongoing", 0, S.ONGOING, timeout_ms=1000)
    states = {
        "not-expiring": (S.ONGOING, 10_000),
        "prepare-commit": (S.PREPARE_COMMIT, 1000),
        "prepare-abort": (S.PREPARE_ABORT, 1000),
        "complete-commit": (S.COMPLETE_COMMIT, 1000),
        "complete-abort": (S.COMPLETE_ABORT, 1000),
    }
    for pid, (txn_id, (state, timeout)) in enumerate(states.items(), start=1):
        _, meta = coordinator_with(txn_id, pid, state, timeout_ms=timeout)
        c.transactions[txn_id] = meta
    assert c.expired(1.0 + 2000.0) == ["ongoing"]


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_should_write_txn_markers_for_transaction_in_prepared_state(state):
    """TransactionStateManagerTest.shouldWriteTxnMarkersForTransactionInPreparedCommitState /
    InPreparedAbortState: a loaded Prepare* transaction comes back with its partitions, to have
    its markers written."""
    c, meta = coordinator_with("tx", 1, S.ONGOING, partitions=(TP0, TP1))
    c._persist(meta, state, 5.0)
    successor = TransactionCoordinator(c.log, lambda: 9999, VERSIONS["3.9"])
    pending = successor.load(partition_for("tx"))
    assert [(m.transactional_id, m.state, m.partitions) for m in pending] == [
        ("tx", state, [TP0, TP1])
    ]


@pytest.mark.parametrize(
    ("state", "removed"),
    [
        (S.COMPLETE_COMMIT, True),
        (S.COMPLETE_ABORT, True),
        (S.EMPTY, True),
        (S.ONGOING, False),
        (S.PREPARE_ABORT, False),
        (S.PREPARE_COMMIT, False),
    ],
)
def test_transactional_id_expiration(state: TransactionState, removed: bool):
    """TransactionStateManagerTest.shouldRemoveCompleteCommitExpiredTransactionalIds /
    CompleteAbort / Empty and shouldNotRemoveOngoingTransactionalIds / PrepareAbort /
    PrepareCommit: an id last updated exactly transactional.id.expiration.ms ago expires if its
    state allows it (written as a Dead record, Kafka's tombstone); a fresh one stays."""
    now = 1_000_000_000.0
    c, old = coordinator_with("old", 1, state)
    old.updated_ms = now - EXPIRATION_MS
    _, fresh = coordinator_with("fresh", 2, state)
    fresh.updated_ms = now
    c.transactions["fresh"] = fresh
    expired = c.expire_transactional_ids(now, EXPIRATION_MS)
    assert expired == (["old"] if removed else [])
    assert ("old" in c.transactions) is not removed and "fresh" in c.transactions
    if removed:
        assert (c.log.records[-1].transactional_id, c.log.records[-1].state) == ("old", S.DEAD)


def test_load_and_remove_transactions_for_partition():
    """TransactionStateManagerTest.testLoadAndRemoveTransactionsForPartition and
    testSuccessfulReimmigration: loading a partition brings its transactional ids back,
    unloading forgets them, and loading again restores them."""
    c, meta = coordinator_with("tx", 1, S.ONGOING, partitions=(TP0,))
    c._persist(meta, S.ONGOING, 5.0)
    partition = partition_for("tx")
    successor = TransactionCoordinator(c.log, lambda: 9999, VERSIONS["3.9"])
    assert successor.load(partition) == []
    assert successor.transactions["tx"].state is S.ONGOING
    successor.unload(partition)
    assert "tx" not in successor.transactions
    successor.load(partition)
    assert successor.transactions["tx"].partitions == [TP0]


NOT_MODELLED = {
    "shouldNotRemoveExpiredTransactionalIdsIfLogAppendFails": "log appends never fail",
    "testAppendFailToCoordinatorNotAvailableError": "log appends never fail",
    "testPendingStateNotResetOnRetryAppend": "no pending states: appends are immediate",
    "testLoadTransactionMetadataWithCorruptedLog": "the transaction log cannot be corrupted",
    "testListTransactionsFiltering": "no ListTransactions API",
}


test_not_modelled = not_modelled("TransactionStateManagerTest", NOT_MODELLED)
