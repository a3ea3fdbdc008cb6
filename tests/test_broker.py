"""Broker: produce handling, crash and restart, pause, producer ids."""

from __future__ import annotations

import pytest
import simpy
from conformance.cluster import Cluster

from eosim.simulation.broker.broker import Broker, BrokerSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator, ProducerIdManager
from eosim.simulation.coordinator.group_coordinator import offsets_partition
from eosim.simulation.network import Connection, LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import (
    BatchData,
    Disconnected,
    Errors,
    InitProducerIdRequest,
    ProduceRequest,
    ProduceResponse,
    TcpAccepted,
    TcpConnect,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS

TP = ("t", 0)


def make(verify_partition=None, settings=None):
    env = simpy.Environment()
    net = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    inbox: list = []
    net.register("c", lambda m: inbox.append(m.payload), client=True)
    broker = Broker(
        env,
        "broker-0",
        net,
        [TP],
        VERSIONS["4.0"],
        ProducerIdBlockAllocator(),
        settings if settings is not None else BrokerSettings(),
        verify_partition=verify_partition,
    )
    return env, net, broker, inbox


def produce(net, seq, values, cid=1, epoch=0, conn=None, transactional=False):
    data = BatchData(7, epoch, seq, tuple(values), transactional)
    net.send("c", "broker-0", ProduceRequest(cid, -1, [(TP, data)]), conn)


def test_after_a_restart_only_the_last_batch_is_a_duplicate():
    """A restarted broker loads each partition's producer state from the snapshot its log
    recovery writes at the log end (LogLoader.recoverSegment, UnifiedLog.rebuildProducerState),
    which holds one batch per producer (ProducerStateManager.writeSnapshot/readSnapshot). A
    retry of the last batch is still a duplicate, answered with its offset; a retry of the one
    before is OUT_OF_ORDER_SEQUENCE_NUMBER (ProducerAppendInfo.checkSequence: 620 against 631
    in calibration case 2 on Kafka 4.1.1), where the live state had recognised it."""
    env, net, broker, inbox = make()
    produce(net, 0, ["a", "b"], 1)
    produce(net, 2, ["c"], 2)
    produce(net, 3, ["d", "e"], 3)
    env.run(until=10)
    produce(net, 2, ["c"], 4)  # before the restart: a duplicate of a cached batch
    env.run(until=20)
    broker.crash()
    broker.restart()
    produce(net, 2, ["c"], 5)  # the second-to-last batch again
    produce(net, 3, ["d", "e"], 6)  # the last batch again
    env.run(until=30)
    answers = [(r.results[0].error, r.results[0].base_offset) for r in inbox]
    assert answers == [
        (Errors.NONE, 0),
        (Errors.NONE, 2),
        (Errors.NONE, 3),
        (Errors.NONE, 2),
        (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
        (Errors.NONE, 3),
    ]
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["a", "b", "c", "d", "e"]


def test_without_snapshots_a_restart_keeps_every_cached_batch():
    """Rule producer_state_rebuilt_from_snapshots false (a what-if, not Kafka): the whole log
    is replayed, so the second-to-last batch is still a duplicate after the restart."""
    env = simpy.Environment()
    net = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    inbox: list = []
    net.register("c", lambda m: inbox.append(m.payload), client=True)
    rules = VERSIONS["4.0"].with_overrides({"producer_state_rebuilt_from_snapshots": False})
    broker = Broker(env, "broker-0", net, [TP], rules, ProducerIdBlockAllocator(), BrokerSettings())
    produce(net, 0, ["a", "b"], 1)
    produce(net, 2, ["c"], 2)
    env.run(until=10)
    broker.crash()
    broker.restart()
    produce(net, 0, ["a", "b"], 3)
    env.run(until=20)
    assert [(r.results[0].error, r.results[0].base_offset) for r in inbox] == [
        (Errors.NONE, 0),
        (Errors.NONE, 2),
        (Errors.NONE, 0),
    ]


def test_out_of_order_and_fenced_epochs_are_rejected():
    env, net, _broker, inbox = make()
    produce(net, 0, ["a"], 1, epoch=1)
    produce(net, 5, ["b"], 2, epoch=1)
    produce(net, 1, ["c"], 3, epoch=0)
    env.run(until=10)
    errors = [r.results[0].error for r in inbox]
    assert errors == [
        Errors.NONE,
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        Errors.INVALID_PRODUCER_EPOCH,
    ]


def test_crash_resets_connections_and_refuses_requests():
    env, net, broker, inbox = make()
    conn = Connection("c", "broker-0", 1)
    produce(net, 0, ["a"], 1, conn=conn)
    env.run(until=10)
    broker.crash()
    env.run(until=20)
    assert conn.closed and isinstance(inbox[-1], Disconnected)
    conn2 = Connection("c", "broker-0", 2)
    produce(net, 1, ["b"], 2, conn=conn2)
    env.run(until=30)
    assert isinstance(inbox[-1], Disconnected) and inbox[-1].generation == 2
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["a"]


def test_a_crashed_brokers_sockets_linger_for_cluster_crash_reset():
    """kill -9 stops the process at once, but the kernel closes its sockets only when it has
    torn the process down (cluster.crash_reset): until then a request sent on an open
    connection is taken and never answered, a connect completes, and at the close every
    connection is reset. With the default (0) the reset is at once (the test above)."""
    env, net, broker, inbox = make(settings=BrokerSettings(crash_reset_ms=(50.0, 50.0)))
    conn = Connection("c", "broker-0", 1)
    produce(net, 0, ["a"], 1, conn=conn)
    env.run(until=10)
    assert len(inbox) == 1
    broker.crash()  # at 10 ms: the sockets close at 60 ms
    produce(net, 1, ["b"], 2, conn=conn)  # arrives at 11 ms: in the dead socket's buffer
    conn2 = Connection("c", "broker-0", 2)
    net.send("c", "broker-0", TcpConnect("c", 2), conn2)
    env.run(until=59)
    assert not conn.closed and not conn2.closed
    assert [type(m) for m in inbox[1:]] == [TcpAccepted]  # the kernel still listens
    env.run(until=70)
    assert conn.closed and conn2.closed
    resets = sorted(m.generation for m in inbox if isinstance(m, Disconnected))
    assert resets == [1, 2]
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["a"]


def test_a_restart_closes_sockets_still_lingering_and_a_power_loss_resets_at_once():
    env, net, broker, inbox = make(settings=BrokerSettings(crash_reset_ms=(500.0, 500.0)))
    conn = Connection("c", "broker-0", 1)
    produce(net, 0, ["a"], 1, conn=conn)
    env.run(until=10)
    broker.crash()
    env.run(until=20)
    broker.restart()  # before the teardown ends: the old sockets are gone with the old process
    env.run(until=30)
    assert conn.closed and [m.generation for m in inbox if isinstance(m, Disconnected)] == [1]
    env.run(until=1000)  # the stale close does not reset the new process's connections
    conn2 = Connection("c", "broker-0", 2)
    produce(net, 1, ["b"], 2, conn=conn2)
    env.run(until=1010)
    assert not conn2.closed and isinstance(inbox[-1], ProduceResponse)
    broker.power_loss()  # modelled as a reset at once (docs/model.md, departure 17)
    env.run(until=1020)
    assert conn2.closed


def test_a_failed_acks_0_produce_closes_its_connection():
    """KafkaApis.handleProduceRequest: an acks=0 produce gets no answer; if a partition
    failed, the broker closes the connection instead, so that the client notices. What the
    client sent behind it is discarded, and a later send on it is answered with a reset."""
    env, net, broker, inbox = make()
    conn = Connection("c", "broker-0", 1)

    def plain(cid, tp, value):
        data = BatchData(-1, -1, -1, (value,), False)  # a plain producer: no id, no sequence
        net.send("c", "broker-0", ProduceRequest(cid, 0, [(tp, data)]), conn)

    plain(1, TP, "a")
    env.run(until=10)
    assert inbox == [] and not conn.closed  # written: no answer, the connection stays
    plain(2, ("t", 1), "b")  # broker-0 does not lead t-1: NOT_LEADER_OR_FOLLOWER
    plain(3, TP, "c")  # behind it on the same connection, not read yet
    env.run(until=20)
    assert conn.closed
    assert [type(m) for m in inbox] == [Disconnected] and inbox[0].generation == 1
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["a"]
    plain(4, TP, "d")  # the client had not noticed: its host answers with a reset
    env.run(until=30)
    assert [type(m) for m in inbox] == [Disconnected, Disconnected]
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["a"]


def test_pause_queues_requests_until_resume():
    env, net, broker, inbox = make()
    broker.pause()
    produce(net, 0, ["a"], 1)
    env.run(until=100)
    assert inbox == []
    broker.resume()
    env.run(until=110)
    assert len(inbox) == 1 and inbox[0].results[0].error is Errors.NONE


def test_producer_ids_come_in_blocks_of_1000():
    allocator = ProducerIdBlockAllocator()
    a, b = ProducerIdManager(allocator), ProducerIdManager(allocator)
    assert [a.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert b.generate_producer_id() == 1000
    a.reset()  # restart: the rest of the block is lost
    assert a.generate_producer_id() == 2000


def test_init_producer_id_hands_out_fresh_ids():
    env, net, _broker, inbox = make()
    net.send("c", "broker-0", InitProducerIdRequest(1))
    net.send("c", "broker-0", InitProducerIdRequest(2))
    env.run(until=10)
    assert [(r.producer_id, r.epoch) for r in inbox] == [(0, 0), (1, 0)]


def test_non_transactional_write_during_open_transaction_is_invalid_txn_state():
    env, net, broker, inbox = make()
    produce(net, 0, ["t1"], 1, transactional=True)
    produce(net, 1, ["plain"], 2)  # same producer, outside its open transaction
    env.run(until=10)
    marker = WriteTxnMarkersRequest(3, 7, 0, True, 0, (TP,))
    net.send("c", "broker-0", marker)
    env.run(until=20)
    produce(net, 1, ["after"], 4)  # the transaction is over: a plain write is fine again
    env.run(until=30)
    produced = [r for r in inbox if isinstance(r, ProduceResponse)]
    assert [r.results[0].error for r in produced] == [
        Errors.NONE,
        Errors.INVALID_TXN_STATE,
        Errors.NONE,
    ]
    assert [e for r in inbox if isinstance(r, WriteTxnMarkersResponse) for _, e in r.results] == [
        Errors.NONE
    ]
    assert [rec["value"] for rec in broker.logs[TP].records()] == ["t1", "after"]
    assert broker.logs[TP].last_stable_offset() == broker.logs[TP].log_end_offset


def test_transactional_write_verified_unless_the_rule_is_off():
    refused: list = []

    def verify(transactional_id, pid, epoch, tp):
        refused.append((transactional_id, pid, epoch, tp))
        return Errors.INVALID_TXN_STATE

    env, net, broker, inbox = make(verify)
    net.send(
        "c",
        "broker-0",
        ProduceRequest(1, -1, [(TP, BatchData(7, 0, 0, ("late",), True))], transactional_id="x"),
    )
    env.run(until=10)
    assert inbox[0].results[0].error is Errors.INVALID_TXN_STATE
    assert refused == [("x", 7, 0, TP)] and broker.logs[TP].log_end_offset == 0
    broker.apis.produce.verify_partition = None  # transaction_partition_verification: false
    produce(net, 0, ["late"], 2, transactional=True)
    env.run(until=20)
    assert inbox[1].results[0].error is Errors.NONE
    assert broker.logs[TP].last_stable_offset() == 0  # an open transaction nobody will end


def markers_answers(inbox) -> list[Errors]:
    return [e for r in inbox if isinstance(r, WriteTxnMarkersResponse) for _, e in r.results]


def test_a_delayed_marker_from_an_older_coordinator_is_fenced_and_leaves_the_next_txn_open():
    """ProducerAppendInfo.checkCoordinatorEpoch: a marker whose coordinator epoch is older than
    the producer's last one is TRANSACTION_COORDINATOR_FENCED; it must not close the next
    transaction (transaction version 1: both transactions share the producer epoch). The
    coordinator epoch is kept through a restart (it is in the log's control batches)."""
    env, net, broker, inbox = make()
    produce(net, 0, ["t1"], 1, transactional=True)
    env.run(until=10)
    # The new coordinator (epoch 1, after a failover) commits the first transaction.
    net.send("c", "broker-0", WriteTxnMarkersRequest(2, 7, 0, True, 1, (TP,)))
    env.run(until=20)
    produce(net, 1, ["t2"], 3, transactional=True)  # the producer's next transaction
    env.run(until=30)
    log = broker.logs[TP]
    open_from = log.last_stable_offset()
    assert open_from == 2 < log.log_end_offset
    # The old coordinator's (epoch 0) COMMIT for the first transaction arrives late.
    net.send("c", "broker-0", WriteTxnMarkersRequest(4, 7, 0, True, 0, (TP,)))
    env.run(until=40)
    assert markers_answers(inbox) == [Errors.NONE, Errors.TRANSACTION_COORDINATOR_FENCED]
    assert log.last_stable_offset() == open_from and len(log.markers()) == 1
    broker.crash()
    broker.restart()
    net.send("c", "broker-0", WriteTxnMarkersRequest(5, 7, 0, True, 0, (TP,)))
    env.run(until=50)
    assert markers_answers(inbox)[-1] is Errors.TRANSACTION_COORDINATOR_FENCED
    net.send("c", "broker-0", WriteTxnMarkersRequest(6, 7, 0, True, 1, (TP,)))
    env.run(until=60)
    assert markers_answers(inbox)[-1] is Errors.NONE
    assert log.last_stable_offset() == log.log_end_offset


def test_after_a_bumping_marker_a_batch_not_at_sequence_zero_is_out_of_order():
    """ProducerAppendInfo.checkSequence, through the broker: an ABORT marker of epoch 1 (a
    transaction version 2 end, or a fence) and then a batch of epoch 1 at sequence 42."""
    env, net, _broker, inbox = make()
    produce(net, 0, ["a"], 1, transactional=True)
    env.run(until=10)
    net.send("c", "broker-0", WriteTxnMarkersRequest(2, 7, 1, False, 0, (TP,)))
    env.run(until=20)
    produce(net, 42, ["late"], 3, epoch=1, transactional=True)
    produce(net, 0, ["first"], 4, epoch=1, transactional=True)
    env.run(until=30)
    produced = [r.results[0].error for r in inbox if isinstance(r, ProduceResponse)]
    assert produced == [Errors.NONE, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, Errors.NONE]


@pytest.mark.parametrize(
    ("coordinator_says", "leader_answers"),
    [
        (Errors.INVALID_PRODUCER_EPOCH, Errors.INVALID_PRODUCER_EPOCH),
        (Errors.TRANSACTION_ABORTABLE, Errors.TRANSACTION_ABORTABLE),
        (Errors.INVALID_PRODUCER_ID_MAPPING, Errors.INVALID_PRODUCER_ID_MAPPING),
        (Errors.CONCURRENT_TRANSACTIONS, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.NOT_COORDINATOR, Errors.NOT_ENOUGH_REPLICAS),
    ],
)
def test_verification_errors_are_mapped_as_kafka_maps_them(coordinator_says, leader_answers):
    """The leader's side (ReplicaManager.handleProduceAppend): the retriable coordinator errors
    -> NOT_ENOUGH_REPLICAS; TRANSACTION_ABORTABLE kept for Produce v11+ clients; the rest as the
    AddPartitionsToTxnManager hands them over (it has already turned PRODUCER_FENCED into
    INVALID_PRODUCER_EPOCH: test_the_manager_maps_producer_fenced)."""
    env, net, broker, inbox = make(lambda *_args: coordinator_says)
    net.send(
        "c",
        "broker-0",
        ProduceRequest(1, -1, [(TP, BatchData(7, 0, 0, ("late",), True))], transactional_id="x"),
    )
    env.run(until=10)
    assert inbox[0].results[0].error is leader_answers
    assert broker.logs[TP].log_end_offset == 0


def test_the_manager_maps_producer_fenced():
    """AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into
    INVALID_PRODUCER_EPOCH for every caller: verification (part 1) and the implicit add."""
    from eosim.simulation.cluster import add_partitions_error

    assert add_partitions_error(Errors.PRODUCER_FENCED) is Errors.INVALID_PRODUCER_EPOCH
    assert add_partitions_error(Errors.CONCURRENT_TRANSACTIONS) is Errors.CONCURRENT_TRANSACTIONS
    cl = Cluster(version="3.9", transaction_partition_verification=True)
    pid = cl.init("tx").producer_id
    assert cl.add("tx", pid, 0, ("t", 0)) is Errors.NONE
    assert cl.verify_partition("tx", pid, 1, ("t", 0)) is Errors.INVALID_PRODUCER_EPOCH


def test_implicit_add_of_a_stale_epoch_through_the_coordinator():
    """End to end, transaction version 2 (KIP-890 part 2): after a commit bumped the epoch, a
    late produce of the old epoch to a new partition is answered INVALID_PRODUCER_EPOCH (the
    coordinator's PRODUCER_FENCED), and one of the current epoch is added to the transaction
    by the leader itself (ReplicaManager.maybeSendPartitionsToTransactionCoordinator)."""
    cl = Cluster(version="4.0")
    r = cl.init("tx")
    pid = r.producer_id
    t0, t1 = ("t", 0), ("t", 1)
    assert cl.add("tx", pid, 0, t0) is Errors.NONE
    end = cl.end("tx", pid, 0, True)
    assert (end.error, end.epoch) == (Errors.NONE, 1)
    cl.run(100)  # markers land, the transaction completes

    def late(epoch):
        batch = BatchData(pid, epoch, 0, ("v",), True)
        return lambda cid: ProduceRequest(cid, -1, [(t1, batch)], transactional_id="tx")

    assert cl.call(cl.leaders[t1], late(0)).results[0].error is Errors.INVALID_PRODUCER_EPOCH
    assert t1 not in cl.meta("tx").partitions
    assert cl.call(cl.leaders[t1], late(1)).results[0].error is Errors.NONE
    assert t1 in cl.meta("tx").partitions and cl.meta("tx").state.name == "ONGOING"


def test_verification_of_a_partition_not_in_the_transaction():
    """Transaction version 1 with KIP-890 part 1 verification: a produce of the current epoch
    to a partition the client never added is TRANSACTION_ABORTABLE (Produce v11+)."""
    cl = Cluster(version="3.9", transaction_partition_verification=True)
    pid = cl.init("tx").producer_id
    t0, t1 = ("t", 0), ("t", 1)
    assert cl.add("tx", pid, 0, t0) is Errors.NONE
    batch = BatchData(pid, 0, 0, ("v",), True)
    answer = cl.call(
        cl.leaders[t1], lambda cid: ProduceRequest(cid, -1, [(t1, batch)], transactional_id="tx")
    )
    assert answer.results[0].error is Errors.TRANSACTION_ABORTABLE


def test_tv2_txn_offset_commit_adds_the_offsets_partition_to_the_transaction():
    """Transaction version 2: TxnOffsetCommit v5 reaches the group coordinator with no
    AddOffsetsToTxn, and the group coordinator adds the group's __consumer_offsets partition
    to the transaction (CoordinatorPartitionWriter.maybeStartTransactionVerification with
    addPartition); a stale epoch is refused."""
    cl = Cluster(version="4.0")
    cl.run(50)  # coordinators load
    pid = cl.init("tx").producer_id
    node = cl.coordinator_of("g", "group")

    def commit(epoch):
        return lambda cid: TxnOffsetCommitRequest(cid, "tx", "g", pid, epoch, ((("t", 0), 7),))

    assert cl.call(node, commit(0)).error is Errors.NONE
    assert offsets_partition("g") in cl.meta("tx").partitions
    assert cl.call(node, commit(5)).error is Errors.INVALID_PRODUCER_EPOCH


def test_a_broker_is_given_its_collaborators_when_it_is_built():
    """What a broker works with is passed to its constructor, not set on it afterwards: where
    its state changes are recorded (its life, its replicas' roles), which partitions it may
    host, and a provider of its coordinator runtime, which the cluster builds after the
    brokers (asked each time: none until there is one)."""
    from eosim.simulation.state_change import StateChangeLog

    env = simpy.Environment()
    net = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    calls: list[str] = []

    class Runtime:
        def crash(self) -> None:
            calls.append("crash")

        def restart(self) -> None:
            calls.append("restart")

    runtimes: dict[str, Runtime] = {}
    log = StateChangeLog(env, enabled=True)
    broker = Broker(
        env,
        "broker-0",
        net,
        [TP],
        VERSIONS["4.0"],
        ProducerIdBlockAllocator(),
        BrokerSettings(),
        coordinator=lambda: runtimes.get("broker-0"),  # type: ignore[arg-type, return-value]
        hostable=lambda tp: tp != ("t", 1),
        state_log=log,
    )
    assert broker.coordinator is None
    assert broker.replica_manager.hostable(TP) and not broker.replica_manager.hostable(("t", 1))
    runtimes["broker-0"] = Runtime()
    broker.crash()
    broker.restart()
    assert calls == ["crash", "restart"]
    events = [(e.node, e.event) for e in log.events]
    assert ("broker-0", "crash") in events and ("broker-0", "restart") in events
    assert broker.replica_manager.state_log is log
