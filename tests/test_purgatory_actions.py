"""Held requests an append unblocks are checked when a request handler finishes a request.

Kafka's ReplicaManager.appendRecords does not answer the followers' held fetches of the
partition it appended to itself: it queues the check (addCompletePurgatoryAction) in an
ActionQueue that a request handler thread runs when it finishes a request (KafkaApis.handle,
KafkaRequestHandler after a callback: tryCompleteActions; KAFKA-8334, Kafka 2.7). An append
made by another thread waits for the next request the broker handles, or for the held
fetches' replica.fetch.wait.max.ms (500 ms). The transaction coordinator writes
CompleteCommit/CompleteAbort from its marker thread (TransactionMarkerChannelManager.
tryAppendToLog) with acks=all, and keeps the transaction pending until it is replicated, so
the next transaction's first produce finds its implicit add answered CONCURRENT_TRANSACTIONS
and its leader asks again 20 ms later (add.partitions.to.txn.retry.backoff.ms): the 20 ms step
of calibration case 4 (docs/calibration.md)."""

from __future__ import annotations

from conformance.cluster import Cluster

from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.protocol import BatchData, Errors, MetadataRequest, ProduceRequest

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


def _after_a_commit() -> tuple[Cluster, str, str, int, int]:
    """Three brokers; ``t-0`` led by one, the transaction coordinated by another. One
    transaction is written (TV2: the leader adds the partition) and committed, and the
    EndTxn answered. Returns the cluster, the transactional id, the coordinator's broker, and
    the producer id and epoch of the next transaction."""
    cl = Cluster(brokers=3, partitions=(T0, T1, T2), version="4.1")
    leader = cl.leaders[T0]
    coordinator = next(b for b in sorted(cl.brokers) if b != leader)
    txn_id = cl.txn_id_led_by(coordinator)
    cl.run(50)  # the coordinators load
    init = cl.init(txn_id)
    pid, epoch = init.producer_id, init.epoch
    written = cl.produce(T0, pid, epoch, 0, transactional=True, txn_id=txn_id)
    assert written.error is Errors.NONE
    ended = cl.end(txn_id, pid, epoch, commit=True, wait_ms=20)
    assert ended.error is Errors.NONE
    return cl, txn_id, coordinator, ended.producer_id, ended.epoch


def _unreplicated(cl: Cluster, txn_id: str, coordinator: str) -> int:
    """Records of the transaction's ``__transaction_state`` partition at its leader above
    the high watermark."""
    part = cl.brokers[coordinator].partitions[internal_partition(txn_id, "transaction")]
    return part.log_end_offset - part.high_watermark


def _next_first_produce(cl: Cluster, txn_id: str, pid: int, epoch: int) -> tuple[float, Errors]:
    """The next transaction's first produce to ``t-0``: how long its answer took, and its
    error."""
    answers: list[tuple[float, object]] = []
    cl.net.register("d", lambda m: answers.append((cl.env.now, m.payload)), client=True)
    batch = BatchData(pid, epoch, 0, ("next",), True)
    start = cl.env.now
    cl.net.send("d", cl.leaders[T0], ProduceRequest(1, -1, [(T0, batch)], transactional_id=txn_id))
    cl.run(300)
    ((at, answer),) = answers
    return at - start, answer.results[0].error  # type: ignore[attr-defined]


def test_complete_commit_written_by_the_marker_thread_waits_for_a_request():
    """The CompleteCommit record is in the coordinator's log, but its followers' held fetches
    are not answered until the broker handles a request, so it stays unreplicated for up to
    replica.fetch.wait.max.ms."""
    cl, txn_id, coordinator, _pid, _epoch = _after_a_commit()
    cl.run(30)  # the markers are written and CompleteCommit appended
    assert _unreplicated(cl, txn_id, coordinator) == 1
    cl.run(300)
    assert _unreplicated(cl, txn_id, coordinator) == 1
    cl.run(500)  # the followers' held fetches expire and read it
    assert _unreplicated(cl, txn_id, coordinator) == 0


def test_any_request_the_coordinator_broker_handles_releases_it():
    cl, txn_id, coordinator, pid, epoch = _after_a_commit()
    cl.run(30)
    assert _unreplicated(cl, txn_id, coordinator) == 1
    cl.call(coordinator, lambda cid: MetadataRequest(cid), wait_ms=10)
    assert _unreplicated(cl, txn_id, coordinator) == 0
    took, error = _next_first_produce(cl, txn_id, pid, epoch)
    assert error is Errors.NONE
    assert took < 20  # the coordinator has completed the commit: no retry


def test_the_next_transactions_first_produce_waits_one_leader_retry():
    """The next transaction's implicit add finds the commit still pending and is answered
    CONCURRENT_TRANSACTIONS; that request releases the followers' fetches, and the leader's
    second ask, 20 ms later, succeeds. The client sees no error, only 20 ms more."""
    cl, txn_id, _coordinator, pid, epoch = _after_a_commit()
    cl.run(50)  # the application's pause between transactions
    took, error = _next_first_produce(cl, txn_id, pid, epoch)
    assert error is Errors.NONE
    assert 20 <= took < 40
