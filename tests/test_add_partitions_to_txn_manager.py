"""A broker's AddPartitionsToTxnManager (KIP-890 part 2, Kafka's
``kafka.server.AddPartitionsToTxnManager``): adds travel as requests, one in flight per
coordinator with what waits batched into the next, entries of one transactional id replaced by
epoch, and network failures answered NETWORK_EXCEPTION."""

from __future__ import annotations

import simpy
from conformance.cluster import Cluster

from eosim.simulation.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from eosim.simulation.network import LatencyModel, Message, Network, NetworkSettings
from eosim.simulation.protocol import (
    AddPartitionsToTxnBrokerRequest,
    AddPartitionsToTxnBrokerResponse,
    BatchData,
    Disconnected,
    Errors,
    ProduceRequest,
)
from eosim.simulation.rng import RandomStreams

T0, T1 = ("t", 0), ("t", 1)


class _Rig:
    """A manager on "leader" and a fake coordinator "coord" that keeps each request and
    answers only when told to; answers reach the manager as a broker's sender thread gets
    them."""

    def __init__(self, timeout_ms: float = 30_000.0) -> None:
        self.env = simpy.Environment()
        self.net = Network(
            self.env,
            NetworkSettings(LatencyModel("constant", value_ms=1.0)),
            RandomStreams(1).stream("n"),
        )
        self.requests: list[Message] = []
        self.net.register("coord", self.requests.append, client=False)
        self.net.register("leader", self._leader, client=False)
        self.coordinator: str | None = "coord"
        self.manager = AddPartitionsToTxnManager(
            self.env, "leader", self.net, lambda _txn: self.coordinator, timeout_ms
        )
        self.answers: list[tuple[str, float, Errors]] = []

    def _leader(self, msg: Message) -> None:
        if isinstance(msg.payload, AddPartitionsToTxnBrokerResponse):
            self.manager.on_response(msg.src, msg.conn, msg.payload)
        elif isinstance(msg.payload, Disconnected):
            self.manager.on_disconnected(msg.payload)

    def add(self, name: str, txn_id: str, epoch: int = 0, *tps: tuple[str, int]) -> None:
        def done(error: Errors) -> None:
            self.answers.append((name, self.env.now, error))

        self.manager.add(txn_id, 7, epoch, tps or (T0,), done)

    def answer(self, index: int, error: Errors = Errors.NONE) -> None:
        msg = self.requests[index]
        request = msg.payload
        results = tuple((e.transactional_id, error) for e in request.transactions)
        self.net.send(
            "coord",
            "leader",
            AddPartitionsToTxnBrokerResponse(request.correlation_id, results),
            msg.conn,
        )

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)


def _txns(msg: Message) -> list[str]:
    request = msg.payload
    assert isinstance(request, AddPartitionsToTxnBrokerRequest)
    return [e.transactional_id for e in request.transactions]


def test_one_request_in_flight_per_coordinator_and_what_waits_goes_in_the_next():
    rig = _Rig()
    rig.add("a", "tx-a")
    rig.run(0.5)
    rig.add("b", "tx-b")
    rig.add("c", "tx-c", 0, T1)
    rig.run(5)
    assert [_txns(m) for m in rig.requests] == [["tx-a"]]  # b and c wait for a's answer
    rig.answer(0)
    rig.run(5)
    assert [_txns(m) for m in rig.requests] == [["tx-a"], ["tx-b", "tx-c"]]
    assert [(n, e) for n, _t, e in rig.answers] == [("a", Errors.NONE)]
    rig.answer(1, Errors.PRODUCER_FENCED)
    rig.run(5)
    # PRODUCER_FENCED reaches the leader's caller as INVALID_PRODUCER_EPOCH (KIP-588).
    assert [(n, e) for n, _t, e in rig.answers[1:]] == [
        ("b", Errors.INVALID_PRODUCER_EPOCH),
        ("c", Errors.INVALID_PRODUCER_EPOCH),
    ]
    assert len({id(m.conn) for m in rig.requests}) == 1  # one connection to the coordinator


def test_a_waiting_entry_of_the_same_transactional_id_is_replaced_by_epoch():
    rig = _Rig()
    rig.add("first", "tx-0")  # in flight
    rig.add("same-epoch", "tx", 3)
    rig.add("retry", "tx", 3)  # a client retrying: the older entry gets NETWORK_EXCEPTION
    rig.add("newer", "tx", 4)  # a newer epoch: the waiting one is fenced
    rig.add("older", "tx", 2)  # an older epoch than the waiting one: fenced itself
    assert [(n, e) for n, _t, e in rig.answers] == [
        ("same-epoch", Errors.NETWORK_EXCEPTION),
        ("retry", Errors.INVALID_PRODUCER_EPOCH),
        ("older", Errors.INVALID_PRODUCER_EPOCH),
    ]
    rig.run(5)
    rig.answer(0)
    rig.run(5)
    (second,) = rig.requests[1:]
    assert [(e.transactional_id, e.epoch) for e in second.payload.transactions] == [("tx", 4)]


def test_no_coordinator_in_the_metadata_cache_is_answered_at_once():
    rig = _Rig()
    rig.coordinator = None
    rig.add("a", "tx")
    assert rig.answers == [("a", 0.0, Errors.COORDINATOR_NOT_AVAILABLE)]
    assert not rig.requests


def test_an_unanswered_request_times_out_and_the_next_opens_a_new_connection():
    rig = _Rig(timeout_ms=100.0)
    rig.add("a", "tx-a")
    rig.run(50)
    rig.add("b", "tx-b")
    rig.run(60)
    assert rig.answers == [("a", 100.0, Errors.NETWORK_EXCEPTION)]
    assert [_txns(m) for m in rig.requests] == [["tx-a"], ["tx-b"]]
    assert rig.requests[0].conn is not rig.requests[1].conn
    rig.answer(0)  # a late answer to the timed-out request is not taken for b's
    rig.run(5)
    assert len(rig.answers) == 1


def test_a_reset_connection_fails_what_is_in_flight_on_it_only():
    rig = _Rig()
    rig.add("a", "tx-a")
    rig.run(5)
    conn = rig.requests[0].conn
    assert conn is not None
    rig.manager.on_disconnected(Disconnected("coord", conn.generation, conn.number + 1000))
    assert rig.answers == []  # another connection's reset (a replica fetcher's)
    rig.manager.on_disconnected(Disconnected("coord", conn.generation, conn.number))
    assert [(n, e) for n, _t, e in rig.answers] == [("a", Errors.NETWORK_EXCEPTION)]


def test_a_crash_drops_what_waits_and_late_timers_do_nothing():
    rig = _Rig(timeout_ms=10.0)
    rig.add("a", "tx-a")
    rig.add("b", "tx-b")
    rig.manager.shutdown()
    rig.run(50)
    assert rig.answers == []


def test_a_leaders_add_is_a_request_the_coordinators_broker_handles():
    """Transaction version 2: the leader's add goes to the coordinator's broker as an
    AddPartitionsToTxn request and comes back before the append: with 1 ms a hop, a
    transaction's first produce to a leader that is not its coordinator is answered at least
    four hops after it is sent (client to leader, leader to coordinator and back, leader to
    client), besides the add's replicated write. (The model's direct call took two.)"""
    cl = Cluster(brokers=3, partitions=(T0, T1), version="4.1")
    cl.run(50)
    txn_id = next(
        t for t in (f"tx-{i}" for i in range(100)) if cl.coordinator_of(t) != cl.leaders[T0]
    )
    coordinator = cl.brokers[cl.coordinator_of(txn_id)]
    seen: list[object] = []
    receive = coordinator.receive

    def spy(msg: Message) -> None:
        seen.append(msg.payload)
        receive(msg)

    cl.net.register(coordinator.name, spy, client=False)
    pid = cl.init(txn_id).producer_id
    answers: list[tuple[float, object]] = []
    cl.net.register("d", lambda m: answers.append((cl.env.now, m.payload)), client=True)
    batch = BatchData(pid, 0, 0, ("v",), True)
    start = cl.env.now
    cl.net.send("d", cl.leaders[T0], ProduceRequest(1, -1, [(T0, batch)], transactional_id=txn_id))
    cl.run(100)
    ((t, answer),) = answers
    assert answer.results[0].error is Errors.NONE  # type: ignore[attr-defined]
    adds = [p for p in seen if isinstance(p, AddPartitionsToTxnBrokerRequest)]
    assert [(e.transactional_id, e.partitions) for a in adds for e in a.transactions] == [
        (txn_id, (T0,))
    ]
    assert t - start >= 4.0
    assert T0 in cl.meta(txn_id).partitions
