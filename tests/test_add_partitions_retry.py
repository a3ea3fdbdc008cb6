"""A leader's own retries of an implicit add answered CONCURRENT_TRANSACTIONS (KAFKA-18654
part 2, apache/kafka PR #18810, Kafka 4.0+: ReplicaManager.appendRecordsWithTransactionVerification
retries every add.partitions.to.txn.retry.backoff.ms until add.partitions.to.txn.retry.backoff.
max.ms has passed), and the one AddPartitionsToTxn entry a produce request's partitions make."""

from __future__ import annotations

from dataclasses import replace

import simpy
from conformance.cluster import Cluster

from eosim.simulation.broker.broker import Broker, BrokerSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from eosim.simulation.cluster import ClusterSettings
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import BatchData, Errors, ProduceRequest
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS
from eosim.simulation.scenario import parse_scenario

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


def _timed_client(cl: Cluster) -> list[tuple[float, object]]:
    """A client node "d" whose answers are kept with the time they arrived."""
    answers: list[tuple[float, object]] = []
    cl.net.register("d", lambda m: answers.append((cl.env.now, m.payload)), client=True)
    return answers


def _two_leaders_at_once(**rules: object) -> list[tuple[float, Errors]]:
    """Two produce requests of one new transaction reach two leaders at the same moment;
    each leader adds its partition itself. (arrival time, error) of each answer."""
    cl = Cluster(brokers=3, partitions=(T0, T1, T2), version="4.1", **rules)
    assert len({cl.leaders[T0], cl.leaders[T1]}) == 2
    cl.run(50)  # coordinators load
    pid = cl.init("tx").producer_id
    answers = _timed_client(cl)
    for cid, tp in ((101, T0), (102, T1)):
        batch = BatchData(pid, 0, 0, (f"v{tp[1]}",), True)
        request = ProduceRequest(cid, -1, [(tp, batch)], transactional_id="tx")
        cl.net.send("d", cl.leaders[tp], request)
    start = cl.env.now
    cl.run(300)
    assert len(answers) == 2
    return sorted((t - start, a.results[0].error) for t, a in answers)  # type: ignore[attr-defined]


def test_concurrent_implicit_adds_the_second_is_retried_by_its_leader():
    """While the coordinator writes the first leader's add (pendingTransitionInProgress), the
    second leader's add is answered CONCURRENT_TRANSACTIONS; under the rule that leader asks
    again after 20 ms and the client never sees the error."""
    (t_first, e_first), (t_second, e_second) = _two_leaders_at_once()
    assert (e_first, e_second) == (Errors.NONE, Errors.NONE)
    assert t_first < 20
    assert 20 <= t_second - t_first < 40


def test_without_the_rule_the_client_gets_concurrent_transactions():
    """Before KAFKA-18654 part 2 the leader hands CONCURRENT_TRANSACTIONS to the client as is
    (KAFKA-18662), at once."""
    answers = _two_leaders_at_once(add_partitions_server_retry=False)
    assert sorted(e.name for _t, e in answers) == ["CONCURRENT_TRANSACTIONS", "NONE"]
    assert max(t for t, _e in answers) < 20


def test_a_request_with_two_partitions_is_added_with_one_write():
    """The partitions of one produce request go to the coordinator in one entry
    (AddPartitionsToTxnManager.addOrVerifyTransaction): one write, no conflict with itself,
    no retry."""
    cl = Cluster(brokers=2, partitions=(T0, T1, T2), version="4.1")
    leader = cl.leaders[T0]
    assert cl.leaders[T2] == leader
    cl.run(50)
    pid = cl.init("tx").producer_id
    answers = _timed_client(cl)
    batches = [(tp, BatchData(pid, 0, 0, (f"v{tp[1]}",), True)) for tp in (T0, T2)]
    cl.net.send("d", leader, ProduceRequest(7, -1, batches, transactional_id="tx"))
    start = cl.env.now
    cl.run(300)
    ((t, answer),) = answers
    assert [r.error for r in answer.results] == [Errors.NONE, Errors.NONE]  # type: ignore[attr-defined]
    assert t - start < 20
    assert sorted(cl.meta("tx").partitions) == [T0, T2]


def _standalone(settings: BrokerSettings, version: str = "4.1", **rules: object):
    """One broker leading T0 whose coordinator always answers CONCURRENT_TRANSACTIONS; the
    times it was asked, and the client's answers with their arrival times."""
    env = simpy.Environment()
    net = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    answers: list[tuple[float, object]] = []
    net.register("c", lambda m: answers.append((env.now, m.payload)), client=True)
    asked: list[float] = []

    def add(_txn_id, _pid, _epoch, tps, on_done):
        assert tps == (T0,)
        asked.append(env.now)
        on_done(Errors.CONCURRENT_TRANSACTIONS)

    broker = Broker(
        env,
        "broker-0",
        net,
        [T0],
        VERSIONS[version].with_overrides(rules),
        ProducerIdBlockAllocator(),
        settings,
        add_partition=add,
    )
    batch = BatchData(7, 0, 0, ("v",), True)
    net.send("c", broker.name, ProduceRequest(1, -1, [(T0, batch)], transactional_id="tx"))
    env.run(until=1_000)
    return asked, answers


def test_the_leader_gives_up_after_the_max_and_answers_concurrent_transactions():
    """Every 20 ms until 100 ms have passed since the first ask: asked at 0, 20, ..., 100;
    the answer after the sixth is handed to the client, still CONCURRENT_TRANSACTIONS."""
    asked, answers = _standalone(BrokerSettings(request_time_ms=0.0))
    first = asked[0]
    assert [round(t - first, 6) for t in asked] == [0, 20, 40, 60, 80, 100]
    ((t, answer),) = answers
    assert answer.results[0].error is Errors.CONCURRENT_TRANSACTIONS  # type: ignore[attr-defined]
    assert round(t - first, 6) == 101  # one hop back


def test_the_two_broker_configs_set_the_backoff_and_the_max():
    """add.partitions.to.txn.retry.backoff.ms / .max.ms, parsed as broker configs."""
    yaml = """
name: x
cluster:
  brokers: 1
  config:
    add.partitions.to.txn.retry.backoff.ms: 30
    add.partitions.to.txn.retry.backoff.max.ms: 50
  topics: [{name: t, partitions: 1, replication_factor: 1}]
producers: [{name: p, workload: {topic: t, records: 1}}]
"""
    settings = ClusterSettings.from_scenario(parse_scenario(yaml)).broker
    assert (settings.add_partitions_retry_backoff_ms, settings.add_partitions_retry_max_ms) == (
        30.0,
        50.0,
    )
    asked, _answers = _standalone(replace(settings, request_time_ms=0.0))
    assert [round(t - asked[0], 6) for t in asked] == [0, 30, 60]


def test_the_rule_follows_the_kafka_versions():
    """In Kafka 4.0.0 and later (PR #18810 was cherry-picked to the 4.0 branch); off in 3.9,
    whose transaction version 1 has no implicit add anyway."""
    assert VERSIONS["4.0"].add_partitions_server_retry
    assert VERSIONS["4.1"].add_partitions_server_retry
    assert not VERSIONS["3.9"].add_partitions_server_retry
