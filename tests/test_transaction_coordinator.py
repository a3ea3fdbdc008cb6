"""TransactionCoordinator decisions, the transaction log, and coordinator placement."""

from __future__ import annotations

import itertools

import pytest
import simpy
from conformance.cluster import Cluster

from eosim.simulation.coordinator.group_coordinator import (
    GroupCoordinator,
    OffsetStore,
    offsets_partition,
)
from eosim.simulation.coordinator.marker_channel import TransactionMarkerChannelManager
from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_log import (
    TransactionLog,
    java_string_hash,
    kafka_abs,
    partition_for,
)
from eosim.simulation.coordinator.transaction_state import TransactionState as S
from eosim.simulation.protocol import BatchData, Errors, ProduceRequest
from eosim.simulation.rules import VERSIONS

TP1, TP2 = ("out", 0), ("out", 1)


def coordinator(version: str = "4.0") -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(TransactionLog(), lambda: next(ids), VERSIONS[version])


def begin(c: TransactionCoordinator, txn="tx", now=0.0):
    r = c.init_producer_id(txn, 60_000, now)
    assert r.error is Errors.NONE
    assert c.add_partitions(txn, r.producer_id, r.epoch, [TP1, TP2], now) is Errors.NONE
    return r.producer_id, r.epoch


def test_java_string_hash_and_placement():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("") == 0
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5
    assert 0 <= partition_for("my-transactional-id") < 50


def test_init_creates_then_bumps_the_epoch():
    c = coordinator()
    first = c.init_producer_id("tx", 60_000, 0.0)
    again = c.init_producer_id("tx", 60_000, 1.0)
    assert (first.producer_id, first.epoch) == (1000, 0)
    assert (again.producer_id, again.epoch) == (1000, 1)
    assert c.init_producer_id("tx", 900_001, 2.0).error is Errors.INVALID_TRANSACTION_TIMEOUT


def test_add_partitions_checks_producer_id_and_epoch():
    c = coordinator()
    pid, epoch = begin(c)
    assert c.transactions["tx"].state is S.ONGOING
    assert c.add_partitions("tx", pid + 1, epoch, [TP1], 1.0) is Errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", pid, epoch - 1, [TP1], 1.0) is Errors.PRODUCER_FENCED


@pytest.mark.parametrize(("version", "bumps"), [("3.9", 1), ("4.0", 2)])
def test_init_during_an_open_transaction_fences_and_aborts_it(version, bumps):
    """The fence is epoch + 1 (TransactionMetadata.prepareFenceProducerEpoch); under
    transaction version 2 the abort that follows bumps once more, as every end of a
    transaction does (TransactionCoordinator.endTransaction -> prepareAbortOrCommit)."""
    c = coordinator(version)
    pid, epoch = begin(c)
    r = c.init_producer_id("tx", 60_000, 5.0)
    meta = c.transactions["tx"]
    assert r.error is Errors.CONCURRENT_TRANSACTIONS
    assert set(r.abort_markers) == {TP1, TP2}
    assert meta.state is S.PREPARE_ABORT and meta.epoch == epoch + bumps
    # The zombie (old epoch) is fenced.
    assert c.end_txn("tx", pid, epoch, True, 6.0).error is Errors.PRODUCER_FENCED
    assert c.init_producer_id("tx", 60_000, 6.0).error is Errors.CONCURRENT_TRANSACTIONS
    c.complete("tx", 7.0)
    retry = c.init_producer_id("tx", 60_000, 8.0)
    assert retry.error is Errors.NONE and retry.epoch > epoch + 1


def test_end_txn_rules():
    c = coordinator()
    pid, epoch = begin(c)
    r = c.end_txn("tx", pid, epoch, True, 1.0)
    assert r.error is Errors.NONE and set(r.markers) == {TP1, TP2}
    assert c.end_txn("tx", pid, epoch, True, 2.0).error is Errors.CONCURRENT_TRANSACTIONS
    assert c.end_txn("tx", pid, epoch, False, 2.0).error is Errors.INVALID_TXN_STATE
    c.complete("tx", 3.0)
    assert c.transactions["tx"].state is S.COMPLETE_COMMIT
    # A retry of the same outcome after completion succeeds (the response may have been lost).
    retry = c.end_txn("tx", pid, epoch, True, 4.0)
    assert retry.error is Errors.NONE and retry.markers == ()
    assert c.end_txn("tx", pid, epoch, False, 4.0).error is Errors.INVALID_TXN_STATE


@pytest.mark.parametrize(("version", "stale_end_ends_next"), [("3.9", True), ("4.0", False)])
def test_stale_end_txn_and_transaction_versions(version, stale_end_ends_next):
    c = coordinator(version)
    pid, epoch = begin(c)
    assert c.end_txn("tx", pid, epoch, True, 1.0).error is Errors.NONE
    c.complete("tx", 2.0)
    meta = c.transactions["tx"]
    assert meta.epoch == (epoch + 1 if version == "4.0" else epoch)
    # The next transaction starts with the coordinator's current epoch.
    assert c.add_partitions("tx", pid, meta.epoch, [TP1], 3.0) is Errors.NONE
    # A delayed duplicate of the first transaction's EndTxn(commit) arrives now.
    stale = c.end_txn("tx", pid, epoch, True, 4.0)
    if stale_end_ends_next:  # TV1: it commits the second transaction prematurely
        assert stale.error is Errors.NONE and stale.markers == (TP1,)
        assert meta.state is S.PREPARE_COMMIT
    else:  # TV2: the epoch names the transaction, so the stale request is fenced
        assert stale.error is Errors.PRODUCER_FENCED
        assert meta.state is S.ONGOING


def test_timeouts_and_failover_from_the_log():
    c = coordinator()
    begin(c, "slow", now=0.0)
    pid, epoch = begin(c, "fast", now=50_000.0)
    assert c.expired(70_000.0) == ["slow"]
    assert c.end_txn("fast", pid, epoch, True, 60_000.0).error is Errors.NONE
    successor = TransactionCoordinator(c.log, lambda: 9999, VERSIONS["4.0"])
    successor.load()
    assert successor.transactions["slow"].state is S.ONGOING
    assert successor.transactions["fast"].state is S.PREPARE_COMMIT
    assert set(successor.transactions["fast"].partitions) == {TP1, TP2}


# -- KIP-360: InitProducerId with the caller's producer id and epoch -------------------------
def ended(c: TransactionCoordinator, txn="tx", commit=False, now=1.0):
    """Begin a transaction, end it and complete it; the (producer id, epoch) it ended with."""
    pid, epoch = begin(c, txn, now)
    assert c.end_txn(txn, pid, epoch, commit, now + 1).error is Errors.NONE
    c.complete(txn, now + 2)
    return pid, epoch


@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_a_zombie_bump_after_a_new_instance_is_fenced_and_the_new_epoch_stands(version):
    """TransactionCoordinator.handleInitProducerId -> TransactionMetadata.
    prepareIncrementProducerEpoch: a new instance (no expected epoch) resets the last epoch, so
    the old instance's bump (expected = its old epoch) is PRODUCER_FENCED."""
    c = coordinator(version)
    ended(c)  # instance A aborts
    a = (c.transactions["tx"].producer_id, c.transactions["tx"].epoch)
    b = c.init_producer_id("tx", 60_000, 10.0)  # instance B initialises
    assert b.error is Errors.NONE and b.epoch == a[1] + 1
    assert c.transactions["tx"].last_producer_epoch == -1
    zombie = c.init_producer_id("tx", 60_000, 11.0, expected=a)
    assert zombie.error is Errors.PRODUCER_FENCED
    meta = c.transactions["tx"]
    assert (meta.producer_id, meta.epoch) == (b.producer_id, b.epoch)
    # B's own bump still works and remembers B's epoch as the last one.
    again = c.init_producer_id("tx", 60_000, 12.0, expected=(b.producer_id, b.epoch))
    assert again.error is Errors.NONE and again.epoch == b.epoch + 1


def test_a_bump_with_the_current_epoch_is_retried_with_the_same_answer():
    """prepareIncrementProducerEpoch: expected == current -> bump and remember the last epoch;
    expected == last epoch -> the retry of that bump, answered the current epoch unchanged."""
    c = coordinator("3.9")
    pid, _ = ended(c)
    epoch = c.transactions["tx"].epoch
    first = c.init_producer_id("tx", 60_000, 5.0, expected=(pid, epoch))
    assert (first.error, first.producer_id, first.epoch) == (Errors.NONE, pid, epoch + 1)
    records = len(c.log.records)
    retry = c.init_producer_id("tx", 60_000, 6.0, expected=(pid, epoch))
    assert (retry.error, retry.epoch) == (Errors.NONE, epoch + 1)
    meta = c.transactions["tx"]
    assert meta.epoch == epoch + 1 and meta.last_producer_epoch == epoch
    assert len(c.log.records) == records + 1  # the retry is written again, unchanged
    stale = c.init_producer_id("tx", 60_000, 7.0, expected=(pid, epoch - 1))
    assert stale.error is Errors.PRODUCER_FENCED


def test_a_bump_naming_another_producer_id_is_fenced():
    """prepareInitProducerIdTransit.isValidProducerId: neither the current id nor the
    previous one with an exhausted epoch -> PRODUCER_FENCED (not INVALID_PRODUCER_ID_MAPPING)."""
    c = coordinator("3.9")
    pid, _ = ended(c)
    epoch = c.transactions["tx"].epoch
    r = c.init_producer_id("tx", 60_000, 5.0, expected=(pid + 1, epoch))
    assert r.error is Errors.PRODUCER_FENCED


def test_a_retried_bump_that_rotated_the_producer_id_gets_the_new_id():
    """prepareProducerIdRotation: an exhausted epoch with expected == current gets a new id at
    epoch 0 and remembers the old epoch; the retry names the previous id with the exhausted
    epoch and is answered the new id (TransactionCoordinatorTest.
    testRetryInitProducerIdAfterProducerIdRotation)."""
    c = coordinator("3.9")
    pid, _ = ended(c)
    meta = c.transactions["tx"]
    meta.epoch = 32766
    rotated = c.init_producer_id("tx", 60_000, 5.0, expected=(pid, 32766))
    assert rotated.error is Errors.NONE and rotated.producer_id != pid and rotated.epoch == 0
    assert meta.previous_producer_id == pid and meta.last_producer_epoch == 32766
    retry = c.init_producer_id("tx", 60_000, 6.0, expected=(pid, 32766))
    assert (retry.error, retry.producer_id, retry.epoch) == (Errors.NONE, rotated.producer_id, 0)
    fenced = c.init_producer_id("tx", 60_000, 7.0, expected=(pid, 32765))
    assert fenced.error is Errors.PRODUCER_FENCED


def test_the_last_epoch_is_not_in_the_log_so_a_retried_bump_across_failover_is_fenced():
    """TransactionLog.valueToBytes writes no last producer epoch (and leaves PreviousProducerId
    and NextProducerId unset); readTxnRecordValue loads NO_PRODUCER_EPOCH. Kafka's own comment
    in prepareIncrementProducerEpoch: a retry that spans a coordinator change fails."""
    c = coordinator("3.9")
    pid, _ = ended(c)
    epoch = c.transactions["tx"].epoch
    assert c.init_producer_id("tx", 60_000, 5.0, expected=(pid, epoch)).epoch == epoch + 1
    successor = TransactionCoordinator(c.log, lambda: 9999, VERSIONS["3.9"])
    successor.load()
    meta = successor.transactions["tx"]
    assert (meta.epoch, meta.last_producer_epoch, meta.previous_producer_id) == (epoch + 1, -1, -1)
    retry = successor.init_producer_id("tx", 60_000, 6.0, expected=(pid, epoch))
    assert retry.error is Errors.PRODUCER_FENCED


def test_a_new_transactional_id_with_an_expected_producer_gets_a_fresh_id():
    """TransactionCoordinatorTest.shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided:
    just-created metadata (epoch -1) accepts any expected producer and starts at epoch 0."""
    c = coordinator()
    r = c.init_producer_id("tx", 60_000, 0.0, expected=(77, 3))
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, 1000, 0)


# -- transaction version 2: epoch exhaustion at EndTxn ----------------------------------------
def test_tv2_end_txn_at_an_exhausted_epoch_keeps_the_old_id_until_complete():
    """TransactionCoordinator.endTransaction (TV2) + TransactionMetadata.prepareAbortOrCommit
    and prepareComplete: at epoch 32766 the transaction is prepared under the old producer id
    at 32767 (the markers close its transaction) and the new id takes over at Complete*. A
    retried EndTxn is CONCURRENT_TRANSACTIONS while Prepare*, then success with the new id
    (TransactionCoordinatorTest.shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow)."""
    c = coordinator("4.0")
    pid, _ = begin(c)
    meta = c.transactions["tx"]
    meta.epoch = 32766
    r = c.end_txn("tx", pid, 32766, True, 1.0)
    assert (r.error, r.producer_id, r.epoch) == (Errors.NONE, pid, 32767)
    assert set(r.markers) == {TP1, TP2}
    assert (meta.state, meta.producer_id, meta.epoch) == (S.PREPARE_COMMIT, pid, 32767)
    assert c.marker_epoch(meta) == 32767
    new_pid = meta.next_producer_id
    assert new_pid not in (-1, pid)
    assert c.end_txn("tx", pid, 32766, True, 2.0).error is Errors.CONCURRENT_TRANSACTIONS
    c.complete("tx", 3.0)
    assert (meta.state, meta.producer_id, meta.epoch) == (S.COMPLETE_COMMIT, new_pid, 0)
    assert meta.previous_producer_id == pid and meta.next_producer_id == -1
    retry = c.end_txn("tx", pid, 32766, True, 4.0)
    assert (retry.error, retry.producer_id, retry.epoch) == (Errors.NONE, new_pid, 0)
    assert c.end_txn("tx", pid, 32766, False, 5.0).error is Errors.INVALID_TXN_STATE
    # The next transaction runs under the new id.
    assert c.add_partitions("tx", new_pid, 0, [TP1], 6.0) is Errors.NONE


def test_tv2_end_txn_with_the_current_epoch_in_prepare_is_fenced():
    """TransactionCoordinatorTest.shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry:
    under TV2 the same epoch in Prepare*/Complete* is the next EndTxn, not a retry."""
    c = coordinator("4.0")
    pid, epoch = begin(c)
    c.end_txn("tx", pid, epoch, True, 1.0)
    bumped = c.transactions["tx"].epoch
    assert c.end_txn("tx", pid, bumped, True, 2.0).error is Errors.PRODUCER_FENCED
    c.complete("tx", 3.0)
    assert c.end_txn("tx", pid, bumped, True, 4.0).error is Errors.PRODUCER_FENCED


@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_a_zombie_end_txn_after_a_timeout_fence_is_fenced(version):
    """The abort of a fenced transaction is not the client's: its EndTxn with the old epoch is
    PRODUCER_FENCED in Prepare* and in Complete* (under TV2 the fence bumps twice, so the old
    epoch + 1 is not the current epoch)."""
    c = coordinator(version)
    pid, epoch = begin(c)
    assert c.fence_and_abort(c.transactions["tx"], 5.0).error is Errors.NONE
    assert c.end_txn("tx", pid, epoch, False, 6.0).error is Errors.PRODUCER_FENCED
    c.complete("tx", 7.0)
    assert c.end_txn("tx", pid, epoch, False, 8.0).error is Errors.PRODUCER_FENCED


# -- fencing at the largest epoch -----------------------------------------------------------------
@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_fencing_at_epoch_32767_is_refused(version):
    """TransactionMetadata.prepareFenceProducerEpoch throws at Short.MaxValue; KafkaApis answers
    the InitProducerId UNKNOWN_SERVER_ERROR and nothing is written."""
    c = coordinator(version)
    begin(c)
    meta = c.transactions["tx"]
    meta.epoch = 32767
    records = len(c.log.records)
    r = c.init_producer_id("tx", 60_000, 5.0)
    assert r.error is Errors.UNKNOWN_SERVER_ERROR
    assert (meta.state, meta.epoch, len(c.log.records)) == (S.ONGOING, 32767, records)


def test_tv1_fence_at_epoch_32766_uses_the_last_epoch():
    """TransactionCoordinatorTest.shouldUseLastEpochToFenceWhenEpochsAreExhausted: the fence
    takes 32766 to 32767 and the retry after the abort gets a new producer id."""
    c = coordinator("3.9")
    pid, _ = begin(c)
    c.transactions["tx"].epoch = 32766
    r = c.init_producer_id("tx", 60_000, 5.0)
    assert r.error is Errors.CONCURRENT_TRANSACTIONS
    assert (c.transactions["tx"].state, c.transactions["tx"].epoch) == (S.PREPARE_ABORT, 32767)
    c.complete("tx", 6.0)
    retry = c.init_producer_id("tx", 60_000, 7.0)
    assert retry.error is Errors.NONE and retry.producer_id != pid and retry.epoch == 0


def test_tv2_fence_at_epoch_32766_overflows_the_abort_bump_and_writes_nothing():
    """Under TV2 the fence (32767) is followed by the abort's bump, which would pass 32767:
    prepareTransitionTo throws after endTransaction set the fenced epoch in memory. Nothing
    is written; the transaction stays Ongoing at 32767 and every later fence is refused."""
    c = coordinator("4.0")
    pid, _ = begin(c)
    meta = c.transactions["tx"]
    meta.epoch = 32766
    records = len(c.log.records)
    r = c.fence_and_abort(meta, 5.0)
    assert r.error is Errors.UNKNOWN_SERVER_ERROR
    assert (meta.state, meta.epoch, len(c.log.records)) == (S.ONGOING, 32767, records)
    assert c.init_producer_id("tx", 60_000, 6.0).error is Errors.UNKNOWN_SERVER_ERROR
    # The producer at 32766 is fenced by the in-memory epoch.
    assert c.add_partitions("tx", pid, 32766, [TP1], 7.0) is Errors.PRODUCER_FENCED


# -- KIP-890 part 1 verification ------------------------------------------------------------------
def test_verification_answers_as_kafka_does():
    """TransactionCoordinator.handleVerifyPartitionsInTransaction
    (TransactionCoordinatorTest.testVerifyPartitionHandling and
    shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent)."""
    c = coordinator()
    assert c.verify_partition("none", 1, 0, TP1) is Errors.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = begin(c)
    c.transactions["tx"].partitions = [TP1]
    assert c.verify_partition("tx", pid, epoch, TP1) is Errors.NONE
    assert c.verify_partition("tx", pid, epoch, TP2) is Errors.TRANSACTION_ABORTABLE
    assert c.verify_partition("tx", pid + 1, epoch, TP1) is Errors.INVALID_PRODUCER_ID_MAPPING
    assert c.verify_partition("tx", pid, epoch - 1, TP1) is Errors.PRODUCER_FENCED
    c.end_txn("tx", pid, epoch, True, 1.0)
    bumped = c.transactions["tx"].epoch
    assert c.verify_partition("tx", pid, bumped, TP1) is Errors.CONCURRENT_TRANSACTIONS
    assert c.verify_partition("tx", pid, epoch, TP1) is Errors.PRODUCER_FENCED


# -- the runtime: requests, markers and the coordinator epoch ---------------------------------
def test_init_producer_id_request_carries_the_expected_producer():
    """KafkaApis.handleInitProducerIdRequest: producer id and epoch both set (a KIP-360 bump),
    both unset (a new instance), or INVALID_REQUEST."""
    cl = Cluster(version="3.9")
    first = cl.init("tx")
    assert (first.error, first.epoch) == (Errors.NONE, 0)
    bumped = cl.init("tx", (first.producer_id, 0))
    assert (bumped.error, bumped.producer_id, bumped.epoch) == (Errors.NONE, first.producer_id, 1)
    new_instance = cl.init("tx")
    assert new_instance.epoch == 2
    zombie = cl.init("tx", (first.producer_id, 1))
    assert zombie.error is Errors.PRODUCER_FENCED
    half = cl.init("tx", (first.producer_id, -1))
    assert half.error is Errors.INVALID_REQUEST
    assert cl.meta("tx").epoch == 2


def test_a_refused_marker_leaves_the_transaction_in_prepare():
    """TransactionMarkerRequestCompletionHandler: INVALID_PRODUCER_EPOCH from a leader cancels
    the transaction's pending completion (removeMarkersForTxn); the other partition's marker
    is still written, but CompleteCommit is never written and the coordinator keeps answering
    CONCURRENT_TRANSACTIONS."""
    cl = Cluster(version="3.9")
    r = cl.init("tx")
    pid = r.producer_id
    t0, t1 = ("t", 0), ("t", 1)
    assert cl.add("tx", pid, 0, t0, t1) is Errors.NONE
    # A newer epoch of this producer id already wrote to t0 (its leader refuses epoch 0).
    cl.brokers[cl.leaders[t0]].producer_state[t0].update(pid, 5, 0, 0, 0, 0)
    assert cl.end("tx", pid, 0, True, wait_ms=2_000.0).error is Errors.NONE
    meta = cl.meta("tx")
    assert meta.state is S.PREPARE_COMMIT
    assert [m["type"] for m in cl.brokers[cl.leaders[t1]].logs[t1].markers()] == ["COMMIT"]
    assert cl.brokers[cl.leaders[t0]].logs[t0].markers() == []
    assert cl.init("tx").error is Errors.CONCURRENT_TRANSACTIONS


def test_the_marker_channel_cancels_on_a_fencing_answer_and_retries_the_rest():
    """TransactionMarkerRequestCompletionHandler.onComplete per error: NONE done, retriable
    re-sent, INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED cancel the completion."""
    env = simpy.Environment()
    sent: list = []

    class Net:
        def send(self, src, dst, payload, conn=None, **_kw):
            sent.append((dst, payload))

    channel = TransactionMarkerChannelManager(env, "b0", Net(), lambda tp: "b1", 30_000, 100)
    done: list[str] = []
    channel.send_markers("tx", 7, 1, True, 0, (TP1, TP2), lambda: done.append("tx"))
    cid = sent[-1][1].correlation_id
    channel.on_response(cid, [(TP1, Errors.NOT_LEADER_OR_FOLLOWER), (TP2, Errors.NONE)])
    env.run(until=200)
    retried = sent[-1][1]
    assert retried.partitions == (TP1,)
    channel.on_response(retried.correlation_id, [(TP1, Errors.NONE)])
    assert done == ["tx"]
    for fencing in (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED):
        done.clear()
        channel.send_markers("tx2", 7, 1, True, 0, (TP1, TP2), lambda: done.append("tx2"))
        request = sent[-1][1]
        channel.on_response(request.correlation_id, [(TP1, fencing), (TP2, Errors.NONE)])
        env.run(until=env.now + 31_000)
        assert done == [] and sent[-1][1] is request  # nothing re-sent, never completed


def test_markers_carry_the_coordinator_epoch_the_partition_was_loaded_at():
    """The coordinator epoch goes up by one each time a broker becomes the coordinator of a
    __transaction_state partition (TransactionCoordinator.onElection); markers carry it."""
    cl = Cluster(brokers=3, version="3.9")
    r = cl.init("tx")
    pid = r.producer_id
    assert cl.add("tx", pid, 0, ("t", 0)) is Errors.NONE
    owner = cl.coordinator_of("tx")
    cl.brokers[owner].crash()
    cl.run(500)  # failover (100 ms) and load (10 ms)
    successor = cl.coordinator_of("tx")
    assert successor != owner
    assert cl.end("tx", pid, 0, True).error is Errors.NONE
    leader = cl.brokers[cl.leaders[("t", 0)]]
    assert leader.logs[("t", 0)].batches[-1].coordinator_epoch == 1
    assert leader.producer_state[("t", 0)].producers[pid].coordinator_epoch == 1


def test_the_timeout_round_stops_at_a_transaction_that_cannot_be_fenced():
    """abortTimedOutTransactions: prepareFenceProducerEpoch throws at epoch 32767, which ends
    the round; the transaction stays Ongoing."""
    cl = Cluster(version="3.9")
    r = cl.init("tx")
    assert cl.add("tx", r.producer_id, 0, ("t", 0)) is Errors.NONE
    cl.meta("tx").epoch = 32767
    cl.run(75_000)  # past the 60 s timeout and several abort checks
    meta = cl.meta("tx")
    assert (meta.state, meta.epoch) == (S.ONGOING, 32767)
    assert cl.fences == []


def test_offsets_markers_check_the_coordinator_epoch_too():
    """A marker to __consumer_offsets is a control batch appended like any other
    (ProducerAppendInfo.appendEndTxnMarker): an older coordinator epoch is fenced and does not
    commit the pending offsets of the producer's next transaction."""
    g = GroupCoordinator(OffsetStore())
    tp = ("in", 0)
    part = offsets_partition("grp")[1]
    g.txn_commit("grp", 1, 0, ((tp, 5),))
    assert g.complete_txn(part, 1, 0, True, coordinator_epoch=1) is Errors.NONE
    g.txn_commit("grp", 1, 0, ((tp, 9),))  # the next transaction's offsets
    late = g.complete_txn(part, 1, 0, True, coordinator_epoch=0)
    assert late is Errors.TRANSACTION_COORDINATOR_FENCED
    assert g.fetch("grp", (tp,)) == (Errors.UNSTABLE_OFFSET_COMMIT, {})
    assert g.fetch("grp", (tp,), require_stable=False) == (Errors.NONE, {tp: 5})


def test_tv2_markers_at_an_exhausted_epoch_close_the_old_producer_ids_transaction():
    """End to end (TransactionCoordinator.endTransaction under TV2): the markers of a
    transaction that exhausted the epoch carry the old producer id at 32767, so the
    transaction closes and the last stable offset moves on; the new id starts at epoch 0."""
    cl = Cluster(version="4.0")
    pid = cl.init("tx").producer_id
    tp = ("t", 0)
    cl.meta("tx").epoch = 32766
    assert cl.add("tx", pid, 32766, tp) is Errors.NONE
    batch = BatchData(pid, 32766, 0, ("v",), True)
    produced = cl.call(
        cl.leaders[tp], lambda cid: ProduceRequest(cid, -1, [(tp, batch)], transactional_id="tx")
    )
    assert produced.results[0].error is Errors.NONE
    log = cl.brokers[cl.leaders[tp]].logs[tp]
    assert log.last_stable_offset() == 0
    end = cl.end("tx", pid, 32766, True)
    assert (end.error, end.producer_id, end.epoch) == (Errors.NONE, pid, 32767)
    assert log.markers()[0]["producer_id"] == pid
    assert log.last_stable_offset() == log.log_end_offset
    meta = cl.meta("tx")
    assert meta.state is S.COMPLETE_COMMIT and meta.producer_id != pid and meta.epoch == 0
    # The marker thread's CompleteCommit is not replicated until the coordinator's broker
    # handles a request (tests/test_purgatory_actions.py): the first retry finds the commit
    # pending, and releases it; the client's next retry is answered.
    retry = cl.end("tx", pid, 32766, True)
    assert retry.error is Errors.CONCURRENT_TRANSACTIONS
    retry = cl.end("tx", pid, 32766, True)
    assert (retry.error, retry.producer_id, retry.epoch) == (Errors.NONE, meta.producer_id, 0)
