"""A restarted broker as Kafka starts one (BrokerServer.startup, BrokerLifecycleManager,
ClusterControlManager.registerBroker, KIP-966), and what a power loss keeps.

Each test drives the model's Cluster on the constant-latency harness of test_replication
(sessions of 100 ms, a client node "c")."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from test_replication import SESSION_MS, TP, Harness

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.broker.durability import LogDurability
from eosim.simulation.broker.lifecycle import BrokerState
from eosim.simulation.broker.replica_manager import ReplicationSettings
from eosim.simulation.protocol import CONTROLLER, Disconnected, Errors, ProduceResponse
from eosim.simulation.scenario import parse_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def values(h: Harness, broker: str) -> list[str]:
    return [r["value"] for r in h.replica(broker).log.records()]


# -- power loss: the page cache is lost at the moment of the loss ---------------------------
def _one_broker(writeback_ms: float = 30_000.0) -> Harness:
    replication = ReplicationSettings(
        replica_lag_time_max_ms=200.0, replica_fetch_wait_max_ms=50.0, os_writeback_ms=writeback_ms
    )
    return Harness(rf=1, brokers=1, replication=replication)


def test_an_outage_longer_than_the_writeback_delay_loses_what_was_not_written_back():
    """Nothing is written back while the power is off: a 40 s outage after an append 1 s
    old loses it (computing what survives at the restart kept it, as 41 s had passed)."""
    h = _one_broker()
    h.run(5)
    h.produce("broker-0", ("a",), acks=1)
    h.run(1_000)
    broker = h.cluster.brokers["broker-0"]
    broker.power_loss()
    h.run(40_000)
    broker.restart()
    h.run(SESSION_MS * 3)
    assert values(h, "broker-0") == []


def test_a_short_outage_loses_everything_younger_than_the_writeback_delay_at_the_loss():
    """The append "a" is 35 s old when the power goes (written back), "b" 25 s (not yet): only "a"
    survives a 10 s outage, although "b" is 35 s old when the broker restarts."""
    h = _one_broker()
    h.run(5)
    h.produce("broker-0", ("a",), acks=1)
    h.run(10_000)
    h.produce("broker-0", ("b",), acks=1, seq=1)
    h.run(25_000)
    broker = h.cluster.brokers["broker-0"]
    broker.power_loss()
    h.run(10_000)
    broker.restart()
    h.run(SESSION_MS * 3)
    assert values(h, "broker-0") == ["a"]


def test_durable_end_is_what_was_flushed_or_written_back_by_then():
    d = LogDurability(os_writeback_ms=30_000.0)
    d.appended(10, 0.0)
    d.appended(20, 10_000.0)
    assert d.durable_end(35_000.0) == 10
    assert d.durable_end(45_000.0) == 20


def test_a_crashed_broker_whose_machine_then_loses_power_loses_its_page_cache():
    """The process died but the machine stayed up (its writes in the page cache); the power
    loss that follows takes them."""
    h = _one_broker()
    h.run(5)
    h.produce("broker-0", ("a",), acks=1)
    h.run(10)
    broker = h.cluster.brokers["broker-0"]
    broker.crash()
    h.run(10)
    broker.power_loss()
    broker.restart()
    h.run(SESSION_MS * 3)
    assert values(h, "broker-0") == []


# -- the restart path -----------------------------------------------------------------------
def test_a_restarted_broker_refuses_connections_until_it_is_running():
    """BrokerServer enables its sockets last: a client that connects to a new process before
    it has registered and been unfenced is refused (it sees a reset), afterwards served."""
    h = Harness(rf=1, brokers=1)
    h.run(5)
    broker = h.cluster.brokers["broker-0"]
    broker.crash()
    broker.restart()
    h.run(10)
    assert broker.lifecycle is not None and broker.lifecycle.state is BrokerState.STARTING
    h.inbox.clear()
    refused = h.produce("broker-0", ("early",), acks=1)
    h.run(10)
    assert h.answer(refused) is None
    assert any(isinstance(p, Disconnected) for _t, p in h.inbox)
    h.run(SESSION_MS * 3)
    assert broker.lifecycle.state is BrokerState.RUNNING
    served = h.produce("broker-0", ("late",), acks=1)
    h.run(10)
    answer = h.answer(served)
    assert answer is not None and isinstance(answer[1], ProduceResponse)
    assert answer[1].results[0].error is Errors.NONE
    assert values(h, "broker-0") == ["late"]


SHORT_LOSS = """
name: short-loss
cluster:
  brokers: 3
  topics: [{name: events, partitions: 1, replication_factor: 3,
            config: {min.insync.replicas: 2}}]
producers:
  - name: p
    config: {acks: all}
    workload: {topic: events, records: 1, rate: 1000}
faults:
  - {kind: power_loss, nodes: [broker-0], at: 2107ms, duration: 2ms}
"""


def test_registration_is_retried_with_an_exponential_backoff_capped_at_the_session():
    """BrokerLifecycleManager's resendExponentialBackoff: 100 ms doubling (2% jitter) while
    the controller refuses the new incarnation, which it does until the old session (9 s
    after broker-0's last heartbeat) expires; then it registers, and is unfenced at once."""
    result = run_scenario(parse_scenario(SHORT_LOSS, "short-loss"), 1, trace=True)
    changes = result.state_changes or []
    refused = [c.time for c in changes if c.event == "registration_refused"]
    expired = next(c.time for c in changes if c.event == "session_expired")
    registered = next(c.time for c in changes if c.event == "registered")
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    assert gaps and all(1.9 < b / a < 2.1 for a, b in itertools.pairwise(gaps)), gaps
    assert gaps[0] == pytest.approx(100, rel=0.05)
    assert max(refused) < expired < registered
    assert registered - refused[-1] == pytest.approx(2 * gaps[-1], rel=0.05)


def test_a_single_short_power_loss_of_the_leader_loses_no_acknowledged_write():
    """The new user's case (eosim shrink of an RF 3, acks=all, min.insync.replicas=2 run): a
    2 ms power loss of the leader. Before, the broker came back leading its empty log at
    epoch 0 and the followers truncated the record they held; now the new process serves
    nobody until the controller has fenced its old self and elected a follower."""
    scenario = load_scenario(SCENARIOS / "replication-power-loss-single.yaml")
    for seed in (1, 2, 3):
        result = run_scenario(scenario, seed)
        found = check_history(history_from_records(list(result.history.records())))
        assert found.anomalies["lost_write"].count == 0, seed


# -- KIP-966: the last ISR member back from an unclean shutdown -----------------------------
def _last_replica_standing(version_rules: dict[str, object]) -> Harness:
    """RF 3, min ISR 2: "a" is acknowledged by all three; broker-1 and broker-2 stop (paused,
    so their logs keep "a") and are fenced, leaving broker-0 the last ISR member; broker-0
    loses power (and "a") and comes back; then broker-1 and broker-2 come back."""
    h = Harness(min_isr=2, rules=version_rules)
    h.run(5)
    h.produce("broker-0", ("a",), acks=-1)
    h.run(30)
    assert values(h, "broker-1") == ["a"] and values(h, "broker-2") == ["a"]
    h.cluster.brokers["broker-1"].pause()
    h.cluster.brokers["broker-2"].pause()
    h.run(SESSION_MS + 60)
    assert h.cluster.controller.registrations[TP].leader == "broker-0"
    broker0 = h.cluster.brokers["broker-0"]
    broker0.power_loss()
    broker0.restart()
    h.run(SESSION_MS * 4)
    h.cluster.brokers["broker-1"].resume()
    h.cluster.brokers["broker-2"].resume()
    h.run(SESSION_MS * 4)
    return h


def test_without_eligible_leader_replicas_the_last_isr_member_comes_back_and_loses_data():
    """Kafka 4.0 (ELR off): broker-0 stayed in the ISR as its last member, is elected cleanly
    when it is unfenced, and the others truncate "a" to follow it: an acknowledged write lost
    to one power loss."""
    h = _last_replica_standing({})
    assert h.leader() == "broker-0"
    assert all(values(h, b) == [] for b in ("broker-0", "broker-1", "broker-2"))


def test_with_eligible_leader_replicas_the_unclean_replica_is_not_elected():
    """Kafka 4.1 (ELR on): broker-1 and broker-2 became eligible leader replicas when they
    left the ISR below min ISR; broker-0's unclean shutdown takes it out of the ISR, so the
    partition waits for an eligible replica, which still has "a"."""
    h = _last_replica_standing({"eligible_leader_replicas": True})
    assert h.leader() in ("broker-1", "broker-2")
    assert values(h, h.leader()) == ["a"]  # type: ignore[arg-type]
    assert values(h, "broker-0") == ["a"]


@pytest.mark.parametrize(("version", "lost"), [("4.0", True), ("4.1", False)])
def test_the_kip_966_scenario_loses_writes_only_without_elr(version: str, lost: bool):
    scenario = load_scenario(
        SCENARIOS / "replication-last-replica-standing.yaml", [f"kafka.version={version}"]
    )

    result = run_scenario(scenario, 1)
    found = check_history(history_from_records(list(result.history.records())))
    assert (found.anomalies["lost_write"].count > 0) is lost


# -- truncation: KIP-279's case, which KIP-101 alone gets wrong -----------------------------
def _fast_leader_changes(rule: str) -> Harness:
    """broker-0 leads at epoch 0 and writes "x" that broker-1 never gets; broker-0 dies,
    broker-1 leads at epoch 1 and writes "y"; broker-1 dies and broker-0 comes back and is
    elected (uncleanly) at epoch 2, never having heard of epoch 1; broker-1 returns as its
    follower. Both logs hold "a" at 0 and differ at 1."""
    h = Harness(rf=2, brokers=2, unclean=True, rules={"truncation": rule})
    h.run(5)
    h.produce("broker-0", ("a",), acks=-1)
    h.run(20)
    cut = h.net.start_spike((), loss=1.0, links=[("broker-0", "broker-1")])
    h.produce("broker-0", ("x",), acks=1, seq=1)
    h.run(5)
    h.cluster.brokers["broker-0"].crash()
    h.run(SESSION_MS + 60)
    h.net.stop(cut)
    assert h.leader() == "broker-1"
    h.produce("broker-1", ("y",), acks=1, seq=1)
    h.run(5)
    h.cluster.brokers["broker-1"].crash()
    h.cluster.brokers["broker-0"].restart()
    h.run(SESSION_MS * 3)
    assert h.leader() == "broker-0"
    h.cluster.brokers["broker-1"].restart()
    h.run(SESSION_MS * 4)
    return h


def test_leader_epochs_with_kip_279_truncate_the_follower_to_where_the_logs_agree():
    h = _fast_leader_changes("leader_epoch")
    assert values(h, "broker-0") == values(h, "broker-1") == ["a", "x"]


def test_without_kip_279_the_follower_keeps_a_record_the_leader_never_had():
    """KIP-101 alone: the leader, asked for epoch 1, answers only the offset where its next
    epoch starts (2), so the follower keeps "y" at offset 1 where the leader has "x"; the
    replicas diverge below both high watermarks."""
    h = _fast_leader_changes("leader_epoch_kip101")
    assert values(h, "broker-0") == ["a", "x"]
    assert values(h, "broker-1")[:2] == ["a", "y"]


# -- heartbeats: one at a time, the next an interval after the answer ------------------------
def _heartbeats(h: Harness) -> list[tuple[float, str]]:
    """Record when the controller receives each broker heartbeat."""
    from eosim.simulation.protocol import BrokerHeartbeatRequest

    seen: list[tuple[float, str]] = []
    controller = h.cluster.controller
    handle = controller.handlers[BrokerHeartbeatRequest]

    def recording(src: str, request: BrokerHeartbeatRequest) -> None:
        seen.append((h.env.now, src))
        handle(src, request)

    controller.handlers[BrokerHeartbeatRequest] = recording
    return seen


def _times(seen: list[tuple[float, str]], broker: str) -> list[float]:
    return [t for t, b in seen if b == broker]


def test_the_next_heartbeat_goes_an_interval_after_the_answer_to_the_last():
    """scheduleNextCommunicationAfterSuccess: the clock restarts at each answer, so with 1 ms
    each way the heartbeats arrive more than 20 ms apart (a fixed 20 ms clock before)."""
    h = Harness(rf=1, brokers=1)
    seen = _heartbeats(h)
    h.run(200)
    times = _times(seen, "broker-0")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) >= 5
    assert all(gap >= 20.0 + 2.0 for gap in gaps), gaps


def test_a_heartbeat_without_an_answer_is_followed_by_the_next_after_its_timeout_and_an_interval():
    """No answer: the channel gives up after min(controller.socket.timeout.ms, interval)
    and the next heartbeat goes an interval after that: two intervals after the unanswered
    one (one with a fixed clock). Its answer, if it comes later, is not waited for."""
    h = Harness(rf=1, brokers=1)
    lifecycle = h.cluster.brokers["broker-0"].lifecycle
    assert lifecycle is not None
    sent: list[float] = []
    send = lifecycle._send_heartbeat

    def recording() -> None:
        sent.append(h.env.now)
        send()

    lifecycle._send_heartbeat = recording  # type: ignore[method-assign]
    h.run(100)
    window = h.net.start_partition([["broker-0"], [CONTROLLER]])
    cut = h.env.now
    h.run(35)  # held past its 20 ms timeout, delivered when the cut heals
    h.net.stop(window)
    h.run(100)
    (unanswered,) = [t for t in sent if cut <= t < cut + 22.0]
    following = [t for t in sent if t > unanswered]
    assert following and following[0] - unanswered == pytest.approx(2 * 20.0), sent


def test_a_heartbeat_that_fell_due_while_paused_goes_when_the_process_resumes():
    """A stopped JVM runs its overdue timers when it continues (the fixed clock waited for
    its next tick)."""
    h = Harness(rf=1, brokers=1)
    seen = _heartbeats(h)
    h.run(100)
    broker = h.cluster.brokers["broker-0"]
    broker.pause()
    h.run(57)
    broker.resume()
    resumed = h.env.now
    h.run(10)
    assert any(resumed <= t <= resumed + 2.0 for t in _times(seen, "broker-0")), (resumed, seen)


def test_the_initial_brokers_heartbeat_at_phases_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Brokers started at unknown moments before the run: each one's first heartbeat falls at
    a phase drawn from its own stream (all at the interval's end before), and a seed gives the
    same phases in any process."""
    from eosim.simulation.cluster import Cluster
    from eosim.simulation.protocol import BrokerHeartbeatRequest

    seen: list[tuple[float, str]] = []
    original = Cluster.__init__

    def spying(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        handle = self.controller.handlers[BrokerHeartbeatRequest]
        env = self.controller.env

        def recording(src, request):  # type: ignore[no-untyped-def]
            seen.append((env.now, src))
            handle(src, request)

        self.controller.handlers[BrokerHeartbeatRequest] = recording

    monkeypatch.setattr(Cluster, "__init__", spying)
    no_faults = SHORT_LOSS.split("faults:")[0].replace("records: 1,", "records: 5000,")

    def first_heartbeats(seed: int) -> tuple[float, ...]:
        seen.clear()
        run_scenario(parse_scenario(no_faults, "phases"), seed)
        return tuple(min(t for t, b in seen if b == f"broker-{i}") for i in range(3))

    one = first_heartbeats(1)
    assert all(0.0 <= t < 2_000.0 + 5.0 for t in one), one
    assert first_heartbeats(1) == one
    # Spread over the interval, not a latency apart at its end.
    spreads = [max(f) - min(f) for f in map(first_heartbeats, range(1, 6))]
    assert min(spreads) > 100.0, spreads


# -- fencing: the controller's periodic maybeFenceStaleBroker task ---------------------------
def _fenced_at(h: Harness, broker: str) -> list[float]:
    """Record when the controller fences ``broker``."""
    times: list[float] = []
    controller = h.cluster.controller
    fence = controller._fence

    def recording(name: str) -> None:
        if name == broker:
            times.append(h.env.now)
        fence(name)

    controller._fence = recording  # type: ignore[method-assign]
    return times


def test_a_silent_broker_is_fenced_by_the_next_run_of_the_periodic_check():
    """maybeFenceStaleBroker runs every session timeout / 8 (12.5 ms for the harness's 100 ms
    sessions; no stream: the first run a period after the start): a broker whose session
    expired is fenced at the first run after, not at the moment it expired (as before)."""
    h = Harness(rf=1, brokers=2)
    seen = _heartbeats(h)
    fenced = _fenced_at(h, "broker-1")
    h.run(103)
    h.cluster.brokers["broker-1"].crash()
    h.run(300)
    last = max(_times(seen, "broker-1"))
    (at,) = fenced
    period = SESSION_MS / 8
    assert last + SESSION_MS < at <= last + SESSION_MS + period, (last, at)
    assert at / period == pytest.approx(round(at / period)), at  # on the task's schedule


def test_brokers_expired_together_are_fenced_one_per_run_of_the_check():
    """The task fences one broker per run and runs again 10 ms later when it did."""
    h = Harness(rf=1, brokers=3)
    first = _fenced_at(h, "broker-1")
    second = _fenced_at(h, "broker-2")
    h.run(103)
    h.cluster.brokers["broker-1"].crash()
    h.cluster.brokers["broker-2"].crash()
    h.run(300)
    assert len(first) == len(second) == 1
    assert abs(second[0] - first[0]) == pytest.approx(10.0), (first, second)


# -- a killed broker's sockets (cluster.crash_reset) ----------------------------------------
def _reordered_after_a_leader_kill(crash_reset: str, seed: int) -> int:
    """Calibration case 1 cut to one kill and 12,000 records, acks=1: how many records the
    plain producer wrote out of order."""
    scenario = load_scenario(
        SCENARIOS / "calibration" / "acks-leader-kill.yaml",
        [
            "producers.0.config.acks=1",
            "producers.0.workload.records=12000",
            "faults=[{kind: crash, nodes: [broker-0], at: 2s, duration: 12s}]",
            "expect={}",
            f"cluster.crash_reset={crash_reset}",
        ],
    )
    result = run_scenario(scenario, seed)
    found = check_history(history_from_records(list(result.history.records())))
    return found.anomalies["nonmonotonic_send"].count


def test_a_producer_keeps_sending_into_a_killed_brokers_lingering_sockets():
    """With the sockets of a killed leader open for 40-60 ms (the kernel's teardown) the
    producer sends into them up to max.in.flight.requests.per.connection, and the reset fails
    those requests together: their batches go back in reverse, so the plain producer reorders
    after every kill, as Kafka's does in calibration case 1 (docs/model.md, departure 17).
    Reset at once, only what was in flight at the kill is reordered."""
    at_once = [_reordered_after_a_leader_kill("0", seed) for seed in (1, 2, 3)]
    lingering = [
        _reordered_after_a_leader_kill("{min: 40ms, max: 60ms}", seed) for seed in (1, 2, 3)
    ]
    assert all(n > 0 for n in lingering), lingering
    assert all(late > now for late, now in zip(lingering, at_once, strict=True)), (
        at_once,
        lingering,
    )
