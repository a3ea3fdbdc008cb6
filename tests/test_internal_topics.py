"""The internal topics as replicated partitions: coordinators follow their leaders, write
with acks=all, revert failed writes, load from their replica, and stamp markers with the
partition's leader epoch.

Rules from Kafka's ``TransactionStateManager`` (appendTransactionToLog's error mapping and
pending-state reset; loadTransactionsForTxnTopicPartition; coordinatorEpoch = the partition
leader epoch), ``TransactionCoordinator`` (pendingTransitionInProgress ->
CONCURRENT_TRANSACTIONS), ``KafkaApis.getCoordinator`` (the metadata cache's leader, else
COORDINATOR_NOT_AVAILABLE) and ``ProducerStateManager`` (a marker from an older coordinator
epoch is TRANSACTION_COORDINATOR_FENCED, on __consumer_offsets as on any partition).
"""

from __future__ import annotations

from typing import Any

from conformance.cluster import FAILOVER_MS, Cluster

from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.group_coordinator import offsets_partition
from eosim.simulation.coordinator.transaction_state import TransactionState as S
from eosim.simulation.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    Errors,
    FindCoordinatorRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

T0 = ("t", 0)


def txn_id_not_led_by(cl: Cluster, *brokers: str) -> str:
    """A transactional id whose __transaction_state partition no broker of ``brokers``
    leads."""
    for i in range(100):
        txn_id = f"tx{i}"
        if cl.leader_of(internal_partition(txn_id, "transaction")) not in brokers:
            return txn_id
    raise AssertionError("no such id")


def send(cl: Cluster, node: str, make: Any) -> int:
    cl._cid += 1
    cl.net.send("c", node, make(cl._cid))
    return cl._cid


def answer(cl: Cluster, cid: int) -> Any:
    found = [a for a in cl.inbox if getattr(a, "correlation_id", None) == cid]
    return found[-1] if found else None


def test_a_write_that_cannot_be_replicated_is_reverted_and_retried_later() -> None:
    """min ISR 2 on __transaction_state: with both followers down the AddPartitionsToTxn
    write stays unreplicated; meanwhile the id is pending (CONCURRENT_TRANSACTIONS), then the
    write times out and is answered COORDINATOR_NOT_AVAILABLE with the state reverted; once
    the controller has fenced the followers the append is refused before it is written; a
    retry after they return succeeds."""
    cl = Cluster(brokers=3, version="3.9")
    txn = "tx"
    coordinator = cl.coordinator_of(txn)
    partition = internal_partition(txn, "transaction")
    followers = [b for b in cl.metadata.replicas(partition) if b != coordinator]
    cl.run(50)
    init = cl.init(txn)
    assert init.error is Errors.NONE
    pid, epoch = init.producer_id, init.epoch
    for b in followers:
        cl.brokers[b].crash()
    cid = send(cl, coordinator, lambda c: AddPartitionsToTxnRequest(c, txn, pid, epoch, (T0,)))
    cl.run(20)
    assert answer(cl, cid) is None  # held: the write waits for the followers
    concurrent = cl.end(txn, pid, epoch, commit=True, wait_ms=10)
    assert concurrent.error is Errors.CONCURRENT_TRANSACTIONS
    cl.run(31_000)  # the write's timeout (request.timeout.ms)
    assert answer(cl, cid).error is Errors.COORDINATOR_NOT_AVAILABLE
    meta = cl.meta(txn)
    assert meta.state is S.EMPTY and meta.partitions == []
    # Fenced followers left the ISR: now the append is refused at once.
    assert cl.add(txn, pid, epoch, T0) is Errors.COORDINATOR_NOT_AVAILABLE
    assert cl.meta(txn).state is S.EMPTY
    for b in followers:
        cl.brokers[b].restart()
    cl.run(3_000)  # registered, unfenced, caught up and back in the ISR
    assert cl.add(txn, pid, epoch, T0) is Errors.NONE
    assert cl.meta(txn).state is S.ONGOING and cl.meta(txn).partitions == [T0]


def test_a_new_leader_loads_a_prepared_transaction_and_marks_it_with_its_epoch() -> None:
    """The coordinator dies right after PrepareCommit is replicated; the controller elects a
    new leader of the __transaction_state partition, which loads PrepareCommit from its own
    replica and writes the markers (to a data partition and to __consumer_offsets) with the
    partition's new leader epoch as coordinator epoch. A marker of the old coordinator epoch
    is then refused on both: TRANSACTION_COORDINATOR_FENCED."""
    cl = Cluster(brokers=3, version="3.9")
    txn = txn_id_not_led_by(cl, cl.leaders[T0])
    group = "g"
    old = cl.coordinator_of(txn)
    group_node = cl.coordinator_of(group, "group")
    cl.run(50)
    init = cl.init(txn)
    pid, epoch = init.producer_id, init.epoch
    assert cl.add(txn, pid, epoch, T0) is Errors.NONE
    assert cl.produce(T0, pid, epoch, 0, transactional=True, txn_id=txn).error is Errors.NONE
    offsets = offsets_partition(group)
    add_offsets = cl.call(old, lambda c: AddOffsetsToTxnRequest(c, txn, pid, epoch, group))
    assert add_offsets.error is Errors.NONE
    commit = cl.call(
        group_node, lambda c: TxnOffsetCommitRequest(c, txn, group, pid, epoch, ((T0, 1),))
    )
    assert commit.error is Errors.NONE
    crashed: list[str] = []

    def crash(node: str) -> None:
        if not crashed:
            crashed.append(node)
            cl.brokers[node].crash()

    cl.probe.on("coordinator.prepare_persisted", crash)
    assert cl.end(txn, pid, epoch, commit=True) is None  # died before answering
    assert crashed == [old]
    cl.run(FAILOVER_MS + 500)
    partition = internal_partition(txn, "transaction")
    new = cl.leader_of(partition)
    assert new not in (None, old)
    leader_epoch = cl.controller.registrations[partition].leader_epoch
    runtime = cl.brokers[new].coordinator
    assert runtime.coordinator_epoch(partition) == leader_epoch >= 1
    assert runtime.txn.transactions[txn].state is S.COMPLETE_COMMIT
    marker = cl.leader(T0).partitions[T0].log.batches[-1]
    assert marker.control == "COMMIT" and marker.coordinator_epoch == leader_epoch
    # The offsets partition took the marker too (its coordinator may have moved as well).
    offsets_leader = cl.leader_of(offsets)
    offsets_log = cl.brokers[offsets_leader].partitions[offsets].log
    assert offsets_log.batches[-1].control == "COMMIT"
    fetched = cl.call(offsets_leader, lambda c: OffsetFetchRequest(c, group, (T0,)))
    assert fetched.offsets == {T0: 1}
    # The old coordinator's epoch is stale everywhere now.
    stale = leader_epoch - 1
    assert cl.marker(T0, pid, epoch, True, stale) is Errors.TRANSACTION_COORDINATOR_FENCED
    answer_ = cl.call(
        offsets_leader,
        lambda c: WriteTxnMarkersRequest(c, pid, epoch, True, stale, (offsets,)),
    )
    assert answer_.results == [(offsets, Errors.TRANSACTION_COORDINATOR_FENCED)]


def test_committed_offsets_are_replicated_and_loaded_by_the_next_leader() -> None:
    """An OffsetCommit is answered once every in-sync replica of the group's
    __consumer_offsets partition has the record; the partition's next leader loads it."""
    cl = Cluster(brokers=3)
    group = "g"
    node = cl.coordinator_of(group, "group")
    partition = offsets_partition(group)
    cl.run(50)
    cid = send(cl, node, lambda c: OffsetCommitRequest(c, group, ((T0, 5),)))
    while answer(cl, cid) is None:
        cl.run(0.5)
    assert answer(cl, cid).error is Errors.NONE
    for b in cl.metadata.replicas(partition):
        records = [x.payload for x in cl.brokers[b].partitions[partition].log.batches]
        assert [(r.group, r.offsets) for r in records] == [(group, ((T0, 5),))]
    cl.brokers[node].crash()
    cl.run(FAILOVER_MS + 500)
    new = cl.leader_of(partition)
    assert new not in (None, node)
    fetched = cl.call(new, lambda c: OffsetFetchRequest(c, group, (T0,)))
    assert fetched.error is Errors.NONE and fetched.offsets == {T0: 5}


def test_find_coordinator_answers_the_metadata_cache_leader_or_not_available() -> None:
    """FindCoordinator is answered from the receiving broker's metadata cache: the
    partition's leader, a new one after an election, and COORDINATOR_NOT_AVAILABLE while the
    partition has no leader (every replica down)."""
    cl = Cluster(brokers=4)
    txn = "tx"
    partition = internal_partition(txn, "transaction")
    replicas = cl.metadata.replicas(partition)
    outsider = next(b for b in cl.metadata.brokers if b not in replicas)

    def find() -> Any:
        return cl.call(outsider, lambda c: FindCoordinatorRequest(c, txn, "transaction"))

    first = find()
    assert (first.error, first.node) == (Errors.NONE, replicas[0])
    cl.brokers[replicas[0]].crash()
    assert find().node == replicas[0]  # not fenced yet: the cache still names it
    cl.run(FAILOVER_MS + 100)
    assert find().node == replicas[1]
    for b in replicas[1:]:
        cl.brokers[b].crash()
    cl.run(FAILOVER_MS + 100)
    offline = find()
    assert (offline.error, offline.node) == (Errors.COORDINATOR_NOT_AVAILABLE, None)


def test_coordinator_failover_takes_detection_election_and_load() -> None:
    """No fixed delay: the coordinator is back once the controller fenced the crashed leader
    (broker.session.timeout.ms), published the election, and the new leader loaded the
    partition (load_ms); its coordinator epoch is the new leader epoch."""
    cl = Cluster(brokers=3, version="3.9")
    txn = "tx"
    partition = internal_partition(txn, "transaction")
    old = cl.coordinator_of(txn)
    cl.run(50)
    assert cl.init(txn).error is Errors.NONE
    crashed_at = cl.env.now
    cl.brokers[old].crash()
    successor = cl.metadata.replicas(partition)[1]
    back = None
    while back is None and cl.env.now < crashed_at + 2_000:
        cid = send(cl, successor, lambda c: EndTxnRequest(c, txn, 0, 0, True))
        cl.run(1)  # asked every millisecond; answered (or not) within 2.1 ms
        cl.env.run(until=cl.env.now + 2.5)
        got = answer(cl, cid)
        if got is not None and got.error not in (
            Errors.NOT_COORDINATOR,
            Errors.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            back = cl.env.now - 2.5  # when it was asked
    assert back is not None
    load_ms = cl.settings.coordinator.load_ms
    # Detection is the session timeout after the last heartbeat (every 25 ms here).
    assert crashed_at + FAILOVER_MS - 25 + load_ms <= back <= crashed_at + FAILOVER_MS + 40
    runtime = cl.brokers[successor].coordinator
    assert (
        runtime.coordinator_epoch(partition)
        == cl.controller.registrations[partition].leader_epoch
        == 1
    )
