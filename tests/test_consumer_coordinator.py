"""ConsumerCoordinator (the classic group protocol's client side) against a scripted
coordinator: the heartbeat thread's timers and answers, leaving on poll timeout, commits'
generations and errors, the join/sync exchange, and a pause. Kafka 4.1.1's
AbstractCoordinator, ConsumerCoordinator and Heartbeat are the reference."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import simpy

from eosim.simulation.consumer.assignors import RebalanceProtocol, Subscription
from eosim.simulation.consumer.consumer_coordinator import (
    CommitFailedException,
    ConsumerCoordinator,
    FencedInstanceIdException,
    Generation,
    GroupRebalanceConfig,
    MemberState,
    RebalanceInProgressException,
)
from eosim.simulation.protocol import (
    Errors,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)


class ScriptedClient:
    """Records every request; ``answer`` decides each response (None: never answered)."""

    def __init__(self, env: simpy.Environment, answer: Any) -> None:
        self.env = env
        self.answer = answer
        self.sent: list[tuple[float, str, Any]] = []
        self.request_timeout_ms = 30_000.0
        self._cid = 0

    def next_correlation_id(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, broker: str, payload: Any, timeout_ms: float | None = None) -> simpy.Event:
        self.sent.append((self.env.now, broker, payload))
        event = self.env.event()
        response = self.answer(payload)
        if response is not None:
            self.env.timeout(1.0).callbacks.append(lambda _e: event.succeed(response))
        return event

    def of(self, kind: type) -> list[tuple[float, Any]]:
        return [(t, p) for t, _b, p in self.sent if isinstance(p, kind)]


def _consumer(env: simpy.Environment, client: ScriptedClient, assignment=()) -> SimpleNamespace:
    consumer = SimpleNamespace(
        env=env,
        client=client,
        node="c1",
        coordinator="broker-0",
        metadata=SimpleNamespace(brokers=["broker-0"], topics={"in": 4}),
        rng=None,
        auto_commit=False,
        assignment=list(assignment),
    )
    consumer.assign_from_subscribed = lambda parts: setattr(consumer, "assignment", list(parts))
    consumer.restart_auto_commit_timer = lambda: None
    return consumer


def _heartbeat_answer(error: Errors):
    def answer(payload: Any) -> Any:
        if isinstance(payload, HeartbeatRequest):
            return HeartbeatResponse(payload.correlation_id, error)
        return None

    return answer


def _stable(
    answer: Any, *, instance: str | None = None, **config: float
) -> tuple[simpy.Environment, ScriptedClient, ConsumerCoordinator]:
    env = simpy.Environment()
    client = ScriptedClient(env, answer)
    settings = {"session_timeout_ms": 10_000.0, "heartbeat_interval_ms": 1_000.0, **config}
    coordinator = ConsumerCoordinator(
        _consumer(env, client, [("in", 0)]),  # type: ignore[arg-type]
        GroupRebalanceConfig("g", group_instance_id=instance, **settings),  # type: ignore[arg-type]
        ("in",),
    )
    coordinator.state = MemberState.STABLE
    coordinator.generation = Generation(3, "m-1", "range")
    coordinator.rejoin_needed = False
    coordinator._enable_heartbeat()
    return env, client, coordinator


def test_heartbeats_go_out_every_heartbeat_interval_while_stable():
    env, client, _c = _stable(_heartbeat_answer(Errors.NONE))

    def poller(coordinator: ConsumerCoordinator):  # the application keeps polling
        while True:
            coordinator._poll_heartbeat()
            yield env.timeout(500)

    env.process(poller(_c))
    env.run(until=5_500)
    times = [t for t, _p in client.of(HeartbeatRequest)]
    assert times == [0.0, 1_000.0, 2_000.0, 3_000.0, 4_000.0, 5_000.0]
    assert all(p.generation == 3 and p.member_id == "m-1" for _t, p in client.of(HeartbeatRequest))


@pytest.mark.parametrize(
    ("error", "member_kept"),
    [(Errors.ILLEGAL_GENERATION, True), (Errors.UNKNOWN_MEMBER_ID, False)],
)
def test_a_heartbeat_refused_resets_the_generation(error: Errors, member_kept: bool):
    env, _client, c = _stable(_heartbeat_answer(error))
    env.run(until=10)
    assert c.state is MemberState.UNJOINED and c.rejoin_needed
    assert c.generation.generation_id == -1
    assert (c.generation.member_id == "m-1") is member_kept


def test_fenced_instance_id_in_a_heartbeat_is_fatal_at_the_next_poll():
    env, _client, c = _stable(_heartbeat_answer(Errors.FENCED_INSTANCE_ID), instance="i-1")
    env.run(until=10)
    with pytest.raises(FencedInstanceIdException):
        c.poll()


def test_rebalance_in_progress_asks_a_stable_member_to_rejoin_and_keeps_its_session():
    env, _client, c = _stable(_heartbeat_answer(Errors.REBALANCE_IN_PROGRESS))
    env.run(until=10)
    assert c.rejoin_needed and c.state is MemberState.STABLE
    assert c.generation == Generation(3, "m-1", "range")
    assert c.session_deadline == pytest.approx(1.0 + 10_000.0)


def test_an_answer_for_an_older_generation_is_ignored():
    env, client, c = _stable(_heartbeat_answer(Errors.ILLEGAL_GENERATION))
    env.run(until=0.5)  # the heartbeat of generation 3 is in flight
    assert client.of(HeartbeatRequest)[0][1].generation == 3
    c.generation = Generation(4, "m-1", "range")  # a rebalance completed meanwhile
    env.run(until=10)
    assert c.generation == Generation(4, "m-1", "range") and c.state is MemberState.STABLE


def test_no_heartbeat_answer_marks_the_coordinator_unknown_after_the_session_timeout():
    env, client, c = _stable(lambda _p: None)
    c.consumer.metadata.brokers = ["broker-0"]
    env.run(until=10_500)
    # No answer ever: the session timer expires at 10 s and the coordinator is dropped.
    assert c.coordinator is None
    assert next(t for t, _p in client.of(HeartbeatRequest)) == 0.0


@pytest.mark.parametrize(("instance", "leaves"), [(None, True), ("i-1", False)])
def test_poll_timeout_leaves_the_group_only_when_dynamic(instance: str | None, leaves: bool):
    env, client, c = _stable(
        _heartbeat_answer(Errors.NONE), instance=instance, rebalance_timeout_ms=4_000.0
    )
    env.run(until=4_500)  # the application never polls again
    left = client.of(LeaveGroupRequest)
    assert bool(left) is leaves
    if leaves:
        assert left[0][0] == 4_000.0 and left[0][1].members[0].member_id == "m-1"
    # Either way the member resets its generation and member id, and heartbeats stop.
    assert c.state is MemberState.UNJOINED and c.generation.member_id == ""
    assert max(t for t, _p in client.of(HeartbeatRequest)) < 4_000.0


def test_a_pause_freezes_the_heartbeat_thread_and_its_timers():
    env, client, c = _stable(_heartbeat_answer(Errors.NONE))
    env.run(until=1_500)
    c.pause()
    env.run(until=20_000)  # far past the session timeout and the heartbeat interval
    assert max(t for t, _p in client.of(HeartbeatRequest)) == 1_000.0
    assert c.coordinator == "broker-0"  # nothing acted while frozen
    c.resume()
    env.run(until=20_001)
    # On waking, the expired session is acted on first: the coordinator is marked unknown.
    assert c.coordinator is None


def test_commits_carry_the_generation_only_while_stable():
    _env, _client, c = _stable(_heartbeat_answer(Errors.NONE))
    assert c.commit_generation() == Generation(3, "m-1", "range")
    c.state = MemberState.PREPARING_REBALANCE
    assert isinstance(c.commit_generation(), RebalanceInProgressException)
    c.state = MemberState.UNJOINED
    assert isinstance(c.commit_generation(), CommitFailedException)


def test_commit_errors_follow_the_offset_commit_response_handler():
    _env, _client, c = _stable(_heartbeat_answer(Errors.NONE))
    sent = c.generation
    assert isinstance(c.on_commit_error(sent, Errors.ILLEGAL_GENERATION), CommitFailedException)
    assert c.generation == Generation(-1, "m-1", None) and c.rejoin_needed
    c.generation, c.state = sent, MemberState.STABLE
    assert isinstance(c.on_commit_error(sent, Errors.UNKNOWN_MEMBER_ID), CommitFailedException)
    assert c.generation.member_id == ""
    # The member already rejoined (a newer generation, preparing): not its fault.
    c.generation, c.state = Generation(4, "m-1", "range"), MemberState.PREPARING_REBALANCE
    failed = c.on_commit_error(sent, Errors.ILLEGAL_GENERATION)
    assert isinstance(failed, RebalanceInProgressException)
    assert c.generation == Generation(4, "m-1", "range")
    c.state = MemberState.STABLE
    assert isinstance(
        c.on_commit_error(c.generation, Errors.REBALANCE_IN_PROGRESS), RebalanceInProgressException
    )
    assert c.on_commit_error(c.generation, Errors.NONE) is None


def test_join_then_sync_as_leader_assigns_with_the_groups_protocol():
    env = simpy.Environment()

    def answer(p: Any) -> Any:
        if isinstance(p, JoinGroupRequest):
            if not p.member_id:
                return JoinGroupResponse(p.correlation_id, Errors.MEMBER_ID_REQUIRED, "m-1")
            members = (
                JoinGroupMember("m-1", None, p.protocols[0][1]),
                JoinGroupMember("m-2", None, p.protocols[0][1]),
            )
            return JoinGroupResponse(
                p.correlation_id, Errors.NONE, "m-1", 1, "range", "consumer", "m-1", members
            )
        if isinstance(p, SyncGroupRequest):
            mine = dict(p.assignments)["m-1"]
            return SyncGroupResponse(p.correlation_id, Errors.NONE, mine, "range", "consumer")
        if isinstance(p, FindCoordinatorRequest):
            return FindCoordinatorResponse(p.correlation_id, Errors.NONE, "broker-0")
        if isinstance(p, HeartbeatRequest):
            return HeartbeatResponse(p.correlation_id, Errors.NONE)
        return None

    client = ScriptedClient(env, answer)
    consumer = _consumer(env, client)
    c = ConsumerCoordinator(consumer, GroupRebalanceConfig("g"), ("in",))  # type: ignore[arg-type]

    def app():
        while consumer.assignment == []:
            waiting = c.poll()
            yield simpy.AnyOf(env, [*waiting, env.timeout(100)])

    env.process(app())
    env.run(until=100)
    joins = client.of(JoinGroupRequest)
    assert [p.member_id for _t, p in joins] == ["", "m-1"]  # KIP-394: rejoin with the id
    assert joins[0][1].rebalance_timeout_ms == 300_000
    syncs = client.of(SyncGroupRequest)
    assert len(syncs) == 1 and syncs[0][1].generation == 1
    assert dict(syncs[0][1].assignments) == {
        "m-1": (("in", 0), ("in", 1)),
        "m-2": (("in", 2), ("in", 3)),
    }
    assert consumer.assignment == [("in", 0), ("in", 1)]
    assert c.state is MemberState.STABLE and c.generation == Generation(1, "m-1", "range")
    # groupMetadata() (for sendOffsetsToTransaction) is the last join's, kept after a reset:
    # ConsumerCoordinator sets it in onJoinComplete only.
    assert c.joined_generation == Generation(1, "m-1", "range")
    c._reset_state(reset_member_id=True)
    assert c.generation.generation_id == -1 and c.joined_generation.generation_id == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"heartbeat_interval_ms": 45_000.0}, "heartbeat.interval.ms must be below"),
        ({"assignors": ("sticky", "range")}, "'sticky' is not modelled"),
    ],
)
def test_unsupported_settings_are_refused(settings: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        GroupRebalanceConfig("g", **settings)


# -- the COOPERATIVE protocol (cooperative-sticky, KIP-429) --------------------------------


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def on_partitions_revoked(self, partitions: list[Any]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: list[Any]) -> None:
        self.calls.append(("lost", partitions))

    def on_partitions_assigned(self, partitions: list[Any], generation: int) -> None:
        self.calls.append(("assigned", partitions))


def _cooperative(answer: Any, owned: list[Any], **consumer: Any):
    env = simpy.Environment()
    client = ScriptedClient(env, answer)
    member = _consumer(env, client, owned)
    member.metadata.topics = {"in": 2}
    member.positions = {tp: 5 for tp in owned}
    settings = consumer.pop("config", {})
    for key, value in consumer.items():
        setattr(member, key, value)
    listener = Listener()
    config = GroupRebalanceConfig("g", assignors=("cooperative-sticky",), **settings)
    c = ConsumerCoordinator(member, config, ("in",), listener)  # type: ignore[arg-type]
    c.state = MemberState.STABLE
    c.generation = Generation(3, "m-1", "cooperative-sticky")
    c.rejoin_needed = True  # the group is rebalancing: m-2 joined
    return env, client, member, listener, c


def _two_member_group(p: Any) -> Any:
    """m-1 leads; m-2 owns nothing. Every JoinGroup of m-1 completes a generation."""
    other = Subscription(("in",), None, (), -1)
    if isinstance(p, JoinGroupRequest):
        members = (
            JoinGroupMember("m-1", None, p.protocols[0][1]),
            JoinGroupMember("m-2", None, other),
        )
        generation = 4 if p.protocols[0][1].generation == 3 else 5
        return JoinGroupResponse(
            p.correlation_id,
            Errors.NONE,
            "m-1",
            generation,
            "cooperative-sticky",
            "consumer",
            "m-1",
            members,
        )
    if isinstance(p, SyncGroupRequest):
        return SyncGroupResponse(
            p.correlation_id, Errors.NONE, dict(p.assignments)["m-1"], "cooperative-sticky"
        )
    if isinstance(p, HeartbeatRequest):
        return HeartbeatResponse(p.correlation_id, Errors.NONE)
    return None


def _poll_until(env: simpy.Environment, c: ConsumerCoordinator, until: float) -> None:
    def app():
        while True:
            waiting = c.poll()
            yield simpy.AnyOf(env, [*waiting, env.timeout(10)])

    env.process(app())
    env.run(until=until)


def test_cooperative_keeps_partitions_through_the_join_and_revokes_in_a_second_round():
    """The member keeps both partitions while it joins (nothing revoked in onJoinPrepare);
    the first round takes in-1 away without giving it to m-2; the member revokes it and
    rejoins at once, naming what it owns now and its generation; the second round gives
    in-1 to m-2."""
    env, client, member, listener, c = _cooperative(_two_member_group, [("in", 0), ("in", 1)])
    _poll_until(env, c, 100)
    joins = [p for _t, p in client.of(JoinGroupRequest)]
    assert [(j.protocols[0][1].owned_partitions, j.protocols[0][1].generation) for j in joins] == [
        ((("in", 0), ("in", 1)), 3),
        ((("in", 0),), 4),
    ]
    syncs = [dict(p.assignments) for _t, p in client.of(SyncGroupRequest)]
    assert syncs == [
        {"m-1": (("in", 0),), "m-2": ()},
        {"m-1": (("in", 0),), "m-2": (("in", 1),)},
    ]
    assert listener.calls == [
        ("revoked", [("in", 1)]),
        ("assigned", []),
        ("assigned", []),
    ]
    assert member.assignment == [("in", 0)] and c.generation.generation_id == 5
    assert c.is_stable()


def test_eager_still_revokes_everything_before_joining():
    _env, _client, member, listener, c = _cooperative(_two_member_group, [("in", 0), ("in", 1)])
    c.rebalance_protocol = RebalanceProtocol.EAGER
    c.needs_join_prepare = True
    done, _waiting = c._on_join_prepare()
    assert done and listener.calls == [("revoked", [("in", 0), ("in", 1)])]
    assert member.assignment == []


def test_a_generation_reset_mid_join_loses_the_partitions_at_the_next_poll():
    """Kafka's resetStateAndRejoin sets needsJoinPrepare, so a COOPERATIVE member whose
    generation is reset while its JoinGroup is in flight calls its partitions lost before it
    joins again, instead of rejoining with them."""
    _env, _client, member, listener, c = _cooperative(lambda p: None, [("in", 0), ("in", 1)])
    c.poll()
    assert c._join is not None and listener.calls == []
    c.maybe_leave_group()  # the poll timer expired meanwhile
    c.poll()
    assert listener.calls == [("lost", [("in", 0), ("in", 1)])]
    assert member.assignment == []


def _auto_committing(waits: bool):
    commits: list[float] = []

    def commit_async() -> simpy.Event:
        commits.append(env.now)
        answered = env.event()  # answered 50 ms later
        env.timeout(50).callbacks.append(lambda _e: answered.succeed(None))
        return answered

    env, client, _member, _listener, c = _cooperative(
        _two_member_group,
        [("in", 0), ("in", 1)],
        auto_commit=True,
        commit_async=commit_async,
        config={"join_prepare_waits_for_commit": waits},
    )
    return env, client, commits, c


def test_kafka_14024_fixed_waits_for_one_commit_then_joins():
    env, client, commits, c = _auto_committing(waits=True)
    _poll_until(env, c, 45)
    assert commits == [0] and client.of(JoinGroupRequest) == []
    _poll_until(env, c, 100)
    assert commits[0] == 0 and client.of(JoinGroupRequest)[0][0] == 50


def test_kafka_14024_sends_a_commit_on_every_poll_and_never_joins():
    """3.2.0's onJoinPrepare: another asynchronous commit on each poll, never complete at
    once, so the COOPERATIVE member never sends its JoinGroup."""
    env, client, commits, c = _auto_committing(waits=False)
    _poll_until(env, c, 1_000)
    assert len(commits) >= 90 and client.of(JoinGroupRequest) == []
