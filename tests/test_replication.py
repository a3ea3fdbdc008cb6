"""Replicated partitions in a running cluster: acks, the ISR and the high watermark, the
controller's elections, truncation, durability, clients following leadership, and the broker's
one-request-at-a-time connections. Each test drives the model's own Cluster (brokers,
controller, replica fetchers) on a constant-latency network, with a client node "c"."""

from __future__ import annotations

from typing import Any

import pytest
import simpy

from eosim.simulation.broker.broker import BrokerSettings
from eosim.simulation.broker.partition import TopicSettings
from eosim.simulation.broker.replica_manager import ReplicationSettings
from eosim.simulation.cluster import Cluster, ClusterSettings
from eosim.simulation.controller.quorum_controller import ControllerSettings
from eosim.simulation.coordinator.runtime import CoordinatorSettings
from eosim.simulation.metadata import ClientMetadata, ClusterMetadata
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import (
    BatchData,
    Errors,
    MetadataRequest,
    PartitionLeader,
    ProduceRequest,
    ProduceResponse,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS

TP = ("t", 0)
SESSION_MS = 100.0


class Harness:
    """A cluster of ``brokers`` with topic ``t`` (one partition, replication factor ``rf``),
    1 ms between any two nodes, sessions of 100 ms, and a client node "c"."""

    def __init__(
        self,
        brokers: int = 3,
        rf: int = 3,
        min_isr: int = 1,
        unclean: bool = False,
        rules: dict[str, Any] | None = None,
        replication: ReplicationSettings | None = None,
    ) -> None:
        self.env = env = simpy.Environment()
        self.net = Network(
            env,
            NetworkSettings(LatencyModel("constant", value_ms=1.0)),
            RandomStreams(1).stream("n"),
        )
        self.inbox: list[tuple[float, Any]] = []
        self.net.register("c", lambda m: self.inbox.append((env.now, m.payload)), client=True)
        names = tuple(f"broker-{i}" for i in range(brokers))
        self.metadata = ClusterMetadata(names, {"t": 1}, {"t": rf})
        self.cluster = Cluster(
            env,
            self.net,
            self.metadata,
            VERSIONS["4.0"].with_overrides(rules or {}),
            ClusterSettings(
                BrokerSettings(
                    heartbeat_interval_ms=20.0, session_timeout_ms=SESSION_MS, startup_ms=5.0
                ),
                CoordinatorSettings(load_ms=1.0),
                replication
                or ReplicationSettings(
                    replica_lag_time_max_ms=200.0, replica_fetch_wait_max_ms=50.0
                ),
                ControllerSettings(session_timeout_ms=SESSION_MS),
                {"t": TopicSettings(rf, min_isr, unclean)},
            ),
        )
        self._cid = 0
        self._conns: dict[str, Any] = {}

    def replica(self, broker: str):  # type: ignore[no-untyped-def]
        return self.cluster.brokers[broker].partitions[TP]

    def send(self, broker: str, build: Any) -> int:
        self._cid += 1
        conn = self._conns.get(broker)
        if conn is None or conn.closed:
            conn = self.net.connect("c", broker, self._cid)
            self._conns[broker] = conn
        self.net.send("c", broker, build(self._cid), conn)
        return self._cid

    def answer(self, cid: int) -> tuple[float, Any] | None:
        return next(
            ((t, p) for t, p in self.inbox if getattr(p, "correlation_id", None) == cid), None
        )

    def produce(self, broker: str, values: tuple[str, ...], acks: int = -1, seq: int = 0) -> int:
        data = BatchData(7, 0, seq, values)
        return self.send(
            broker, lambda cid: ProduceRequest(cid, acks, [(TP, data)], timeout_ms=500.0)
        )

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)

    def leader(self) -> str | None:
        return self.cluster.leader_of(TP)


def test_acks_all_is_answered_once_the_followers_have_the_batch_and_acks_1_at_once():
    h = Harness()
    h.run(5)
    sent = h.env.now
    one = h.produce("broker-0", ("a",), acks=1)
    h.run(20)
    # acks=1: answered as soon as the leader appended (one hop there, one back).
    t, response = h.answer(one)  # type: ignore[misc]
    assert response.results[0].error is Errors.NONE and t - sent < 2.5
    sent = h.env.now
    every = h.produce("broker-0", ("b",), acks=-1, seq=1)
    h.run(20)
    # acks=all: also the held follower fetch answered, and the followers' next fetches.
    t, response = h.answer(every)  # type: ignore[misc]
    assert response.results[0].error is Errors.NONE and response.results[0].base_offset == 1
    assert t - sent >= 4.0
    for follower in ("broker-1", "broker-2"):
        assert [r["value"] for r in h.replica(follower).log.records()] == ["a", "b"]
    assert h.replica("broker-0").high_watermark == 2


def test_not_enough_replicas_before_the_append_when_the_isr_is_too_small():
    h = Harness(min_isr=2)
    h.run(5)
    for b in ("broker-1", "broker-2"):
        h.cluster.brokers[b].crash()
    h.run(SESSION_MS + 50)  # both fenced: the ISR is the leader alone
    assert h.cluster.controller.registrations[TP].isr == ("broker-0",)
    refused = h.produce("broker-0", ("x",), acks=-1)
    accepted = h.produce("broker-0", ("y",), acks=1)
    h.run(5)
    assert h.answer(refused)[1].results[0].error is Errors.NOT_ENOUGH_REPLICAS  # type: ignore[index]
    assert h.answer(accepted)[1].results[0].error is Errors.NONE  # type: ignore[index]
    assert [r["value"] for r in h.replica("broker-0").log.records()] == ["y"]
    # KIP-966: under min.insync.replicas the high watermark does not move.
    assert h.replica("broker-0").high_watermark == 0


@pytest.mark.parametrize(
    ("hw_advances", "error"),
    [(True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND), (False, Errors.REQUEST_TIMED_OUT)],
)
def test_isr_shrinking_below_the_minimum_while_a_write_waits(hw_advances: bool, error: Errors):
    """Before KIP-966 the HW moved with the shrunk ISR and the waiting write was answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND; since, the HW stops and the write times out."""
    h = Harness(min_isr=2, rules={"hw_advances_under_min_isr": hw_advances})
    h.run(5)
    for b in ("broker-1", "broker-2"):
        h.cluster.brokers[b].pause()  # alive, but neither fetching nor heartbeating
    waiting = h.produce("broker-0", ("x",), acks=-1)
    h.run(SESSION_MS + 100)
    assert h.cluster.controller.registrations[TP].isr == ("broker-0",)
    h.run(600)
    assert h.answer(waiting)[1].results[0].error is error  # type: ignore[index]


def test_a_fenced_leader_is_replaced_from_the_isr_at_a_new_epoch_and_clients_follow():
    h = Harness()
    h.run(5)
    h.cluster.brokers["broker-0"].crash()
    h.run(SESSION_MS + 30)
    reg = h.cluster.controller.registrations[TP]
    assert (
        reg.leader == "broker-1" and reg.leader_epoch == 1 and reg.isr == ("broker-1", "broker-2")
    )
    assert h.replica("broker-1").is_leader and h.replica("broker-2").leader == "broker-1"
    asked = h.send("broker-2", lambda cid: MetadataRequest(cid))
    h.run(5)
    cache = ClientMetadata(h.metadata)
    assert cache.leader(TP) == "broker-0"
    cache.update(h.answer(asked)[1].partitions, h.env.now)  # type: ignore[index]
    assert cache.leader(TP) == "broker-1"
    # A stale answer (an older leader epoch) does not overwrite what the client knows.
    cache.update({TP: PartitionLeader("broker-0", 0)}, h.env.now)
    assert cache.leader(TP) == "broker-1"
    # The old leader comes back as a follower and is in the ISR again once caught up.
    h.cluster.brokers["broker-0"].restart()
    h.run(200)
    assert h.replica("broker-0").leader == "broker-1"
    assert set(h.cluster.controller.registrations[TP].isr) == {"broker-0", "broker-1", "broker-2"}


def test_a_restart_is_refused_registration_until_the_old_session_expires():
    """The new process replays the metadata (which still names it leader) but serves nobody
    until it has registered, which waits for the old session to expire."""
    h = Harness(rf=1, brokers=1)
    h.run(5)
    broker = h.cluster.brokers["broker-0"]
    broker.crash()
    broker.restart()
    h.run(10)
    assert not broker.registered and not broker.serving
    # The session expires at 100 ms and the fence task (every 12.5 ms) fences it at 112.5 ms;
    # the next registration, a backoff later, is accepted.
    h.run(SESSION_MS * 2 + 60)
    assert broker.registered and broker.serving and h.replica("broker-0").is_leader
    # Two leader changes: to none when it was fenced, back to it when it was unfenced.
    assert h.cluster.controller.registrations[TP].leader_epoch == 2


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_elects_an_out_of_sync_replica_and_loses_its_suffix(unclean: bool):
    h = Harness(unclean=unclean)
    h.run(5)
    h.cluster.brokers["broker-1"].pause()
    h.cluster.brokers["broker-2"].pause()
    h.run(SESSION_MS + 50)  # fenced: the ISR is broker-0 alone
    h.produce("broker-0", ("only-on-0",), acks=-1)
    h.run(5)
    h.cluster.brokers["broker-1"].resume()
    h.cluster.brokers["broker-2"].resume()
    h.cluster.brokers["broker-0"].crash()
    h.run(SESSION_MS + 60)
    reg = h.cluster.controller.registrations[TP]
    if unclean:
        assert reg.leader == "broker-1" and reg.unclean
        assert h.cluster.partition_log(TP).records() == []
    else:
        assert h.leader() is None  # offline until broker-0 returns
        assert [r["value"] for r in h.cluster.partition_log(TP).records()] == ["only-on-0"]


def _diverged(rule: str) -> Harness:
    """broker-0 leads and appends a record its follower never receives (acks=1), then is fenced;
    broker-1 leads at epoch 1 and takes a different record at the same offset; broker-0
    returns as a follower."""
    h = Harness(rf=2, brokers=2, rules={"truncation": rule})
    h.run(5)
    h.produce("broker-0", ("a",), acks=-1)
    h.run(20)
    cut = h.net.start_spike((), loss=1.0, links=[("broker-0", "broker-1")])  # fetch answers
    h.produce("broker-0", ("lost",), acks=1, seq=1)
    h.run(5)
    h.cluster.brokers["broker-0"].crash()
    h.run(SESSION_MS + 60)
    h.net.stop(cut)
    assert h.leader() == "broker-1"
    h.send("broker-1", lambda cid: ProduceRequest(cid, 1, [(TP, BatchData(8, 0, 0, ("new",)))]))
    h.run(5)
    h.cluster.brokers["broker-0"].restart()
    h.run(300)
    return h


def test_leader_epochs_truncate_a_returning_replica_to_where_the_logs_agree():
    h = _diverged("leader_epoch")
    values = [[r["value"] for r in h.replica(b).log.records()] for b in ("broker-0", "broker-1")]
    assert values == [["a", "new"], ["a", "new"]]


def test_high_watermark_truncation_keeps_what_a_replica_had_below_its_own_hw():
    """Before KIP-101 the returning replica cut back to its HW, which here covers only "a"; in
    this order of events it converges too, through the out-of-range fetch; the divergent
    case needs a follower whose HW is ahead (replication-truncation-hw.yaml)."""
    h = _diverged("high_watermark")
    assert h.replica("broker-0").log.records()[0]["value"] == "a"
    assert [r["value"] for r in h.replica("broker-0").log.records()] == [
        r["value"] for r in h.replica("broker-1").log.records()
    ]


@pytest.mark.parametrize(("flush_every", "kept"), [(None, []), (1, ["a", "b"])])
def test_power_loss_keeps_only_what_was_flushed(flush_every: int | None, kept: list[str]):
    replication = ReplicationSettings(
        replica_lag_time_max_ms=200.0,
        replica_fetch_wait_max_ms=50.0,
        log_flush_interval_messages=flush_every,
    )
    h = Harness(rf=1, brokers=1, replication=replication)
    h.run(5)
    h.produce("broker-0", ("a", "b"), acks=-1)
    h.run(5)
    broker = h.cluster.brokers["broker-0"]
    broker.power_loss()
    broker.restart()
    h.run(SESSION_MS + 60)
    assert [r["value"] for r in h.replica("broker-0").log.records()] == kept
    # A process crash keeps the page cache.
    h.produce("broker-0", ("c",), acks=-1, seq=len(kept))
    h.run(5)
    broker.crash()
    broker.restart()
    h.run(SESSION_MS + 60)
    assert [r["value"] for r in h.replica("broker-0").log.records()] == [*kept, "c"]


def test_a_connection_is_served_one_request_at_a_time_in_order():
    """SocketServer mutes a connection while its request is handled or held: a request
    behind an acks=all write waiting for replication is not even read until that write is
    answered, so answers come back in request order."""
    h = Harness()
    h.run(5)
    held = h.produce("broker-0", ("a",), acks=-1)
    quick = h.produce("broker-0", ("b",), acks=1, seq=1)
    h.run(30)
    order = [p.correlation_id for _t, p in h.inbox if isinstance(p, ProduceResponse)]
    assert order == [held, quick]
    assert [r["value"] for r in h.replica("broker-0").log.records()] == ["a", "b"]


def test_a_follower_fetch_held_by_a_leader_that_pauses_is_answered_when_it_resumes():
    """DelayedFetch: a fetch held when its leader pauses expires during the pause, and the
    purgatory's reaper (frozen with the rest of the process) completes it, answering the
    follower, when the process runs again (DelayedOperation.run -> forceComplete ->
    DelayedFetch.onComplete -> the response callback). Dropped instead, the follower would hear
    nothing until replica.socket.timeout.ms (30 s) and the leader could not acknowledge an
    acks=all write meanwhile."""
    h = Harness()
    h.run(5)
    leader = h.cluster.brokers["broker-0"]
    assert h.replica("broker-0").is_leader
    leader.pause()  # both followers' fetches are held for lack of data
    h.run(65)  # longer than replica.fetch.wait.max.ms (50), shorter than the session (100)
    leader.resume()
    assert h.leader() == "broker-0"
    sent = h.env.now
    write = h.produce("broker-0", ("a",), acks=-1)
    h.run(50)
    answer = h.answer(write)
    assert answer is not None, "the write waited for followers that no longer fetch"
    t, response = answer
    assert response.results[0].error is Errors.NONE and t - sent < 20
    for follower in ("broker-1", "broker-2"):
        assert [r["value"] for r in h.replica(follower).log.records()] == ["a"]


def test_an_acks_all_write_held_by_a_leader_that_pauses_is_answered_only_when_it_resumes():
    """DelayedProduce: a write whose timeout runs out while its leader is paused is expired by
    the purgatory's reaper, a thread of the frozen process, so its REQUEST_TIMED_OUT leaves
    when the process runs again, not while it is stopped."""
    h = Harness()
    h.run(5)
    leader = h.cluster.brokers["broker-0"]
    data = BatchData(7, 0, 0, ("a",))
    write = h.send("broker-0", lambda cid: ProduceRequest(cid, -1, [(TP, data)], timeout_ms=30.0))
    h.run(2)  # appended and held; the followers' fetches that would move the HW are on the way
    leader.pause()
    h.run(60)  # the write's 30 ms run out; shorter than the session (100)
    assert h.answer(write) is None, "a paused broker answered"
    leader.resume()
    resumed = h.env.now
    h.run(10)
    answer = h.answer(write)
    assert answer is not None and answer[0] > resumed


@pytest.mark.parametrize(("min_isr", "refused"), [(1, False), (2, True)])
def test_an_isolated_leader_refuses_acks_all_writes_only_under_min_isr_2(
    min_isr: int, refused: bool
):
    """replication-min-isr-{1,2}.yaml: once the ISR is the leader alone, min.insync.replicas=2
    answers NOT_ENOUGH_REPLICAS (what makes its power loss harmless), 1 does not."""
    from pathlib import Path

    from eosim.simulation import load_scenario, run_scenario

    path = Path(__file__).resolve().parents[1] / "scenarios" / f"replication-min-isr-{min_isr}.yaml"
    result = run_scenario(load_scenario(path), 1, trace=True)
    assert result.trace is not None
    errors = {
        r.error
        for e in result.trace
        if e.event == "deliver" and isinstance(e.payload, ProduceResponse)
        for r in e.payload.results
    }
    assert (Errors.NOT_ENOUGH_REPLICAS in errors) is refused


def test_without_a_controller_nobody_is_fenced_and_it_returns_without_fencing_everyone():
    """A crashed controller elects nobody: a leader that dies meanwhile stays the leader in
    the metadata (its partition is unavailable) until the controller is back and fences it;
    the live brokers, unheard for longer than the session timeout while it was down, keep
    their sessions (a newly active controller starts them afresh)."""
    h = Harness()
    h.run(5)
    h.cluster.controller.crash()
    h.cluster.brokers["broker-0"].crash()
    h.run(3 * SESSION_MS)
    assert h.leader() == "broker-0" and not any(h.cluster.controller.fenced.values())
    h.cluster.controller.restart()
    h.run(SESSION_MS + 30)
    fenced = h.cluster.controller.fenced
    assert fenced == {"broker-0": True, "broker-1": False, "broker-2": False}
    assert h.leader() == "broker-1"
