"""Sender and TransactionManager: ordering, retries, sequence bookkeeping."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
import simpy
from conformance.test_transaction_manager import FakeTransactions as _FakeTxn
from support import scenario_with

from eosim.simulation import run_scenario
from eosim.simulation.config import parse_producer_config
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import Connection, Message
from eosim.simulation.producer.accumulator import ProducerBatch, RecordAccumulator
from eosim.simulation.producer.sender import Sender
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    Errors,
    PartitionLeader,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TcpAccepted,
    TcpConnect,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import ProtocolRules


def per_partition_order(result) -> tuple[int, int]:
    """(inversions, duplicates) of the producer's values in every final log.

    Order is judged on each value's first occurrence: a retry that lands twice is a
    duplicate, not a reordering.
    """
    inversions = duplicates = 0
    seen: set[str] = set()
    for log in result.history.logs:
        idx = []
        for rec in log["records"]:
            if rec["value"] in seen:
                duplicates += 1
                continue
            seen.add(rec["value"])
            idx.append(int(rec["value"].rsplit("-", 1)[1]))
        inversions += sum(1 for a, b in pairwise(idx) if b < a)
    return inversions, duplicates


@pytest.mark.parametrize("seed", range(6))
def test_idempotent_sender_keeps_order_and_never_duplicates(seed):
    result = run_scenario(scenario_with(), seed)
    assert result.counts["acked"] == 1500
    assert per_partition_order(result) == (0, 0)
    assert result.stats["messages_lost"] > 0  # the faults did happen


def test_plain_producer_with_five_in_flight_reorders_and_duplicates():
    inversions = duplicates = 0
    for seed in range(6):
        result = run_scenario(scenario_with("producers.0.config.enable.idempotence=false"), seed)
        i, d = per_partition_order(result)
        inversions += i
        duplicates += d
    assert inversions > 0 and duplicates > 0


@pytest.mark.parametrize("seed", range(4))
def test_plain_producer_with_one_in_flight_keeps_order(seed):
    s = scenario_with(
        "producers.0.config.enable.idempotence=false",
        "producers.0.config.max.in.flight.requests.per.connection=1",
    )
    inversions, _ = per_partition_order(run_scenario(s, seed))
    assert inversions == 0


def test_retries_zero_fails_instead_of_retrying():
    s = scenario_with("producers.0.config.enable.idempotence=false", "producers.0.config.retries=0")
    result = run_scenario(s, 1)
    assert result.counts["indeterminate"] > 0
    assert per_partition_order(result)[1] == 0  # never retried, so never duplicated


def _batch(tp=("t", 0), n=1, now=0.0) -> ProducerBatch:
    b = ProducerBatch(tp, now)
    for i in range(n):
        b.add(f"v{i}", 10, lambda *a: None)
    return b


def test_idempotent_reenqueue_goes_in_sequence_order():
    acc = RecordAccumulator(16384, 0, 10**9, 120_000, idempotent=True)
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(1, 0)
    batches = [_batch() for _ in range(3)]
    for b in batches:
        tm.assign_sequence(b)
    fresh = _batch()
    acc.batches[("t", 0)] = __import__("collections").deque([fresh])
    acc.reenqueue(batches[2], 0.0, 0.0)
    acc.reenqueue(batches[0], 0.0, 0.0)
    acc.reenqueue(batches[1], 0.0, 0.0)
    order = [b.base_sequence for b in acc.batches[("t", 0)]]
    assert order == [0, 1, 2, -1]


def test_plain_reenqueue_goes_to_the_head():
    acc = RecordAccumulator(16384, 0, 10**9, 120_000, idempotent=False)
    a, b = _batch(), _batch()
    acc.reenqueue(a, 0.0, 0.0)
    acc.reenqueue(b, 0.0, 0.0)
    assert list(acc.batches[("t", 0)]) == [b, a]


def test_unresolved_sequence_resolves_when_the_batch_landed_after_all():
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(1, 0)
    a, b = _batch(n=2), _batch(n=3)
    tm.assign_sequence(a)
    tm.assign_sequence(b)
    a.in_retry = True
    tm.handle_failed_batch(a, None, "expired", adjust_sequences=False)  # a expired in a retry
    tm.mark_sequence_unresolved(a)
    assert tm.has_unresolved_sequence(("t", 0))
    tm.handle_completed_batch(b)  # the later batch was acknowledged: a must have landed
    tm.maybe_resolve_sequences()
    assert not tm.has_unresolved_sequence(("t", 0))
    assert not tm.epoch_bump_required


def test_unresolved_sequence_with_a_gap_bumps_the_epoch():
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(1, 0)
    a = _batch(n=2)
    tm.assign_sequence(a)
    tm.handle_failed_batch(a, None, "expired", adjust_sequences=False)
    tm.mark_sequence_unresolved(a)
    tm.maybe_resolve_sequences()
    assert tm.epoch_bump_required
    assert tm.bump_idempotent_epoch()
    assert tm.epoch == 1
    assert not tm.has_unresolved_sequence(("t", 0))


def test_out_of_order_for_the_next_sequence_requests_epoch_bump():
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(1, 0)
    a, b = _batch(), _batch()
    tm.assign_sequence(a)
    tm.assign_sequence(b)
    # b is not the next expected sequence: it is retried without a bump.
    assert tm.can_retry(b, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert not tm.epoch_bump_required
    # a is: the gap is real.
    assert tm.can_retry(a, PartitionResponse(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    assert tm.epoch_bump_required
    tm.bump_idempotent_epoch()
    assert (a.epoch, a.base_sequence, b.base_sequence) == (1, 0, 1)
    assert a.sequence_has_been_reset


def test_definitely_unwritten_failure_closes_the_sequence_gap_of_a_transactional_producer():
    tm = TransactionManager()
    tm.txn = _FakeTxn()
    tm.set_producer_id_and_epoch(1, 0)
    a, b = _batch(n=2), _batch(n=3)
    tm.assign_sequence(a)
    tm.assign_sequence(b)
    tm.handle_failed_batch(a, Errors.UNKNOWN_TOPIC_OR_PARTITION, "failed", adjust_sequences=True)
    assert b.base_sequence == 0
    c = _batch()
    tm.assign_sequence(c)
    assert c.base_sequence == 3


class RecordingNetwork:
    """A network that records what the Sender sends and delivers nothing, except that once
    ``client`` is set, brokers accept its connections and answer its ApiVersionsRequests in
    the same instant."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.sent: list[tuple[float, str, object, Connection | None]] = []
        self.client: Sender | None = None

    def connect(self, client: str, broker: str, generation: int) -> Connection:
        return Connection(client, broker, generation)

    def send(self, src, dst, payload, conn=None, **_kw) -> None:
        self.sent.append((self.env.now, dst, payload, conn))
        if isinstance(payload, TcpConnect):
            self._answer(dst, src, TcpAccepted(dst, payload.generation), conn)
        elif isinstance(payload, ApiVersionsRequest):
            self._answer(dst, src, ApiVersionsResponse(payload.correlation_id), conn)

    def _answer(self, src: str, dst: str, payload: object, conn: Connection | None) -> None:
        client = self.client
        if client is None:
            return
        event = self.env.timeout(0)
        event.callbacks.append(lambda _e: client.receive(Message(src, dst, payload, conn, 0.0)))

    def produces(self) -> list[tuple[float, str, ProduceRequest, Connection | None]]:
        return [s for s in self.sent if isinstance(s[2], ProduceRequest)]  # type: ignore[misc]


def test_a_retry_to_a_new_leader_skips_the_backoff():
    """SenderTest.testProducerBatchRetriesWhenPartitionLeaderChanges (KAFKA-15415, Kafka
    3.7+): a batch answered NOT_LEADER_OR_FOLLOWER goes to the new leader as soon as the
    metadata names one, without waiting out retry.backoff.ms; a retry to the same leader
    waits its backoff."""
    env = simpy.Environment()
    cfg = parse_producer_config(
        {"enable.idempotence": False, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000},
        ProtocolRules(),
    )
    acc = RecordAccumulator(cfg.batch_size, 0, cfg.buffer_memory, cfg.delivery_timeout_ms, False)
    network = RecordingNetwork(env)
    cluster = ClusterMetadata(("b0", "b1"), {"t": 1}, {"t": 2})
    results: list[tuple] = []
    sender = Sender(
        env,
        "p",
        network,
        cluster,
        acc,
        cfg,
        None,  # type: ignore[arg-type]
        RandomStreams(1).stream("s"),
        lambda: None,
    )
    network.client = sender
    tp = ("t", 0)

    def answer(error: Errors, offset: int = -1) -> None:
        _t, broker, request, conn = network.produces()[-1]
        response = ProduceResponse(request.correlation_id, [PartitionResponse(error, offset)])
        sender.receive(Message(broker, "p", response, conn, env.now))

    acc.append(tp, "v", 10, lambda *r: results.append(r), 0.0)
    sender.wakeup()
    env.run(until=1)
    assert [(t, b) for t, b, *_ in network.produces()] == [(0, "b0")]
    answer(Errors.NOT_LEADER_OR_FOLLOWER)
    env.run(until=2)
    assert len(network.produces()) == 1  # backing off

    # The new leader (epoch 1) becomes known: the batch goes to it at once.
    sender.metadata.update({tp: PartitionLeader("b1", 1, ("b0", "b1"))}, env.now)
    sender.wakeup()
    env.run(until=3)
    assert [(t, b) for t, b, *_ in network.produces()] == [(0, "b0"), (2, "b1")]

    # Refused again by the same leader: this retry waits its backoff (200 ms +-20%).
    answer(Errors.NOT_LEADER_OR_FOLLOWER)
    env.run(until=150)
    assert len(network.produces()) == 2
    env.run(until=300)
    (t, broker, *_rest) = network.produces()[-1]
    assert broker == "b1" and 3 + 160 <= t <= 3 + 240
    answer(Errors.NONE, 999)
    # (value, partition, offset, error, maybe written)
    assert results == [("v", 0, 999, None, True)]


def test_a_disconnection_while_an_update_is_due_counts_as_a_failed_update():
    """DefaultMetadataUpdater.handleServerDisconnect: with no metadata request in flight and
    an update due, a disconnection is a failed update (the next one backs off), and it
    requests an update."""
    env = simpy.Environment()
    cfg = parse_producer_config({"enable.idempotence": False}, ProtocolRules())
    acc = RecordAccumulator(cfg.batch_size, 0, cfg.buffer_memory, cfg.delivery_timeout_ms, False)
    sender = Sender(
        env,
        "p",
        RecordingNetwork(env),
        ClusterMetadata(("b0",), {"t": 1}),
        acc,
        cfg,
        None,  # type: ignore[arg-type]
        RandomStreams(1).stream("s"),
        lambda: None,
    )
    nc = sender.client.connections["b0"]
    sender.client.initiate_connect(nc, 50.0)
    sender.client.disconnect(nc, 50.0, Errors.NETWORK_EXCEPTION)  # no update due yet
    assert sender.metadata.attempts == 0 and sender.metadata.update_requested
    sender.client.initiate_connect(nc, 500.0)
    sender.client.disconnect(nc, 500.0, Errors.NETWORK_EXCEPTION)  # due since 100 ms, not sent
    assert sender.metadata.attempts == 1
    assert sender.metadata.time_to_update(500.0) > 0  # backing off from the failure


def test_an_acks_0_producer_follows_a_new_leader_once_the_old_one_closes_its_connection():
    """Issue 17, point 3 (scenarios/at-most-once-failover.yaml): broker-0 leads events-0 while
    cut off from the controller, which elects broker-1. After the heal broker-0 refuses the
    producer's acks=0 writes; closing the connection makes the producer refresh its metadata,
    so nothing written after the heal is lost (without the close it wrote into nothing until
    metadata.max.age.ms)."""
    from eosim.analysis.history import history_from_records
    from eosim.simulation.scenario import load_scenario

    path = Path(__file__).resolve().parent.parent / "scenarios" / "at-most-once-failover.yaml"
    result = run_scenario(load_scenario(path, ["producers.0.workload.records=8000"]), 1)
    history = history_from_records(result.history.records())
    logged = {rec["value"] for log in result.history.logs for rec in log["records"]}
    lost = [s for s in history.sends if s.outcome == "ok" and s.value not in logged]
    heal = 13_000.0
    assert any(s.invoke_time < heal for s in lost)  # the cut itself loses writes
    assert [s.value for s in lost if s.invoke_time >= heal + 50] == []
