"""Conformance with Kafka's TransactionStateManagerTest (core, kafka.coordinator.transaction):
timeout validation, timeout candidates, transactional.id expiration and loading. eosim's
``TransactionCoordinator`` holds the state manager's part too."""

from __future__ import annotations

import pytest
from conformance.cluster import Cluster
from conformance.coordinators import coordinator_with
from conformance.not_modelled import not_modelled

from eosim.simulation.coordinator import runtime as runtime_module
from eosim.simulation.coordinator.coordinator_result import APPEND_ERRORS, coordinator_error
from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_log import partition_for
from eosim.simulation.coordinator.transaction_state import TransactionState
from eosim.simulation.protocol import AddPartitionsToTxnRequest, Errors
from eosim.simulation.rules import VERSIONS

S = TransactionState
EXPIRATION_MS = 604_800_000.0  # transactional.id.expiration.ms default
TP0, TP1 = ("topic1", 0), ("topic1", 1)
T0 = ("t", 0)  # a partition of the small cluster


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


# -- appends to the replicated transaction log that fail ------------------------------------------
def test_should_not_remove_expired_transactional_ids_if_log_append_fails():
    """TransactionStateManagerTest.shouldNotRemoveExpiredTransactionalIdsIfLogAppendFails: the
    expired id's tombstone (a Dead record) is refused (NOT_ENOUGH_REPLICAS: its partition's ISR is
    the leader alone), so the id stays, not pending and usable, as does the id that has not
    expired; once the log is back, the id still has its producer id."""
    cl = Cluster(brokers=3, version="3.9")
    node = cl.leaders[T0]
    expired = cl.txn_id_led_by(node)
    fresh = next(f"fresh{i}" for i in range(200) if cl.coordinator_of(f"fresh{i}") == node)
    cl.run(50)
    init = cl.init(expired)
    pid, epoch = init.producer_id, init.epoch
    assert cl.add(expired, pid, epoch, T0) is Errors.NONE
    assert cl.end(expired, pid, epoch, commit=False).error is Errors.NONE
    cl.run(100)
    assert cl.init(fresh).error is Errors.NONE
    assert cl.meta(expired).state is S.COMPLETE_ABORT
    followers = cl.stop_log_followers(expired)
    runtime = cl.brokers[node].coordinator
    assert runtime is not None
    cl.meta(expired).updated_ms = cl.env.now - EXPIRATION_MS
    cl.meta(fresh).updated_ms = cl.env.now
    runtime.txn_handlers.remove_expired_transactional_ids()
    cl.run(100)
    for txn_id in (expired, fresh):
        assert txn_id in runtime.txn.transactions and txn_id not in runtime._pending
    assert cl.meta(expired).state is S.COMPLETE_ABORT
    cl.restart(followers)
    again = cl.init(expired)
    assert (again.error, again.producer_id) == (Errors.NONE, pid)


@pytest.mark.parametrize(
    ("append_error", "rules"),
    [
        (Errors.NOT_ENOUGH_REPLICAS, {}),
        (Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, {"hw_advances_under_min_isr": True}),
        (Errors.REQUEST_TIMED_OUT, {}),
    ],
)
def test_append_fail_to_coordinator_not_available_error(monkeypatch, append_error, rules):
    """TransactionStateManagerTest.testAppendFailToCoordinatorNotAvailableError: an
    AddPartitionsToTxn write refused or failed by the transaction log's partition is answered
    COORDINATOR_NOT_AVAILABLE, the metadata is what it was and the id is not pending.
    NOT_ENOUGH_REPLICAS: the ISR is already the leader alone; NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    the ISR shrinks while the write waits and the HW moves with it (before KIP-966);
    REQUEST_TIMED_OUT: it shrinks and the HW stops (KIP-966), so the write times out (30 s).
    (UNKNOWN_TOPIC_OR_PARTITION, the test's fourth error, maps the same way,
    ``test_append_errors_map_as_kafka_maps_them``; eosim's leaders never answer it for a
    partition they host.)"""
    seen: list[Errors] = []

    def recording(error: Errors) -> Errors:
        seen.append(error)
        return APPEND_ERRORS.get(error, error)

    monkeypatch.setattr(runtime_module, "coordinator_error", recording)
    cl = Cluster(brokers=3, version="3.9", **rules)
    txn = cl.txn_id_led_by(cl.leaders[T0])
    node = cl.coordinator_of(txn)
    cl.run(50)
    init = cl.init(txn)
    pid, epoch = init.producer_id, init.epoch
    if append_error is Errors.NOT_ENOUGH_REPLICAS:
        cl.stop_log_followers(txn)
        answer = cl.add(txn, pid, epoch, T0)
    else:
        partition = internal_partition(txn, "transaction")
        for b in cl.metadata.replicas(partition):
            if b != node:
                cl.brokers[b].crash()  # the write waits for them; then the ISR shrinks
        answer = cl.call(
            node, lambda cid: AddPartitionsToTxnRequest(cid, txn, pid, epoch, (T0,)), 31_000
        ).error
    assert answer is Errors.COORDINATOR_NOT_AVAILABLE
    assert seen[-1] is append_error
    meta = cl.meta(txn)
    assert (meta.state, meta.partitions, meta.epoch) == (S.EMPTY, [], epoch)
    assert txn not in cl.brokers[node].coordinator._pending


def test_append_errors_map_as_kafka_maps_them():
    """TransactionStateManager.appendTransactionToLog's mapping of log append errors."""
    assert coordinator_error(Errors.UNKNOWN_TOPIC_OR_PARTITION) is Errors.COORDINATOR_NOT_AVAILABLE
    assert coordinator_error(Errors.NOT_ENOUGH_REPLICAS) is Errors.COORDINATOR_NOT_AVAILABLE
    assert (
        coordinator_error(Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        is Errors.COORDINATOR_NOT_AVAILABLE
    )
    assert coordinator_error(Errors.REQUEST_TIMED_OUT) is Errors.COORDINATOR_NOT_AVAILABLE
    assert coordinator_error(Errors.NOT_LEADER_OR_FOLLOWER) is Errors.NOT_COORDINATOR


def test_pending_state_not_reset_on_retry_append():
    """TransactionStateManagerTest.testPendingStateNotResetOnRetryAppend: the Complete* write of
    the marker channel is appended with retryOnError (COORDINATOR_NOT_AVAILABLE), so while the
    log refuses it the id stays pending (its metadata unchanged: PrepareCommit) and the write
    is tried again until it succeeds."""
    cl = Cluster(brokers=3, version="3.9")
    node = cl.leaders[T0]
    txn = cl.txn_id_led_by(node)
    cl.run(50)
    init = cl.init(txn)
    pid, epoch = init.producer_id, init.epoch
    assert cl.add(txn, pid, epoch, T0) is Errors.NONE
    runtime = cl.brokers[node].coordinator
    assert runtime is not None
    partition = internal_partition(txn, "transaction")
    followers = [b for b in cl.metadata.replicas(partition) if b != node]
    stopped: list[str] = []

    def stop(at: str) -> None:
        if at == node and not stopped:
            stopped.extend(followers)
            for b in followers:
                cl.brokers[b].crash()

    cl.probe.on("coordinator.prepare_persisted", stop)
    assert cl.end(txn, pid, epoch, commit=True).error is Errors.NONE
    cl.run(40_000)  # the Complete* write times out (30 s), then is refused at once, again
    assert stopped == followers
    assert cl.meta(txn).state is S.PREPARE_COMMIT and txn in runtime._pending
    assert cl.init(txn).error is Errors.CONCURRENT_TRANSACTIONS
    cl.restart(followers)
    assert cl.meta(txn).state is S.COMPLETE_COMMIT and txn not in runtime._pending


NOT_MODELLED = {
    "testLoadTransactionMetadataWithCorruptedLog": "the transaction log cannot be corrupted",
    "testListTransactionsFiltering": "no ListTransactions API",
}


test_not_modelled = not_modelled("TransactionStateManagerTest", NOT_MODELLED)
