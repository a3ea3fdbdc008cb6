"""Classic groups set up as Kafka's group-coordinator tests set them up: members as
``ClassicGroupTest`` builds them, and a :class:`GroupContext` in the manner of
``GroupMetadataManagerTestContext`` (a :class:`GroupMetadataManager` on a hand-driven timer,
whose records are "written" at once, successfully unless told otherwise)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eosim.simulation.coordinator.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    JoinAnswer,
    SyncAnswer,
)
from eosim.simulation.coordinator.coordinator_result import (
    CoordinatorResult,
    append_group_metadata_error,
)
from eosim.simulation.coordinator.coordinator_timer import ManualTimer
from eosim.simulation.coordinator.group_config import GroupConfig
from eosim.simulation.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    GroupMetadataRecord,
    heartbeat_key,
)
from eosim.simulation.protocol import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupMember,
    LeaveGroupRequest,
    SyncGroupRequest,
)

S = ClassicGroupState
PROTOCOL_TYPE = "consumer"
# ClassicGroupTest's constants
REBALANCE_TIMEOUT_MS = 60_000
SESSION_TIMEOUT_MS = 10_000


def member(
    member_id: str,
    instance_id: str | None = None,
    protocols: tuple[tuple[str, object], ...] = (("roundrobin", b""),),
    rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id,
        instance_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        PROTOCOL_TYPE,
        protocols,
    )


class Future:
    """A response future: ``done`` once completed; later completions are ignored."""

    def __init__(self) -> None:
        self.value: Any = None
        self.done = False

    def __call__(self, value: object) -> None:
        if not self.done:
            self.done = True
            self.value = value


def group_in(state: ClassicGroupState) -> ClassicGroup:
    """A group moved to ``state`` along legal transitions (Dead through Empty)."""
    group = ClassicGroup("groupId")
    path = {
        S.EMPTY: [],
        S.PREPARING_REBALANCE: [S.PREPARING_REBALANCE],
        S.COMPLETING_REBALANCE: [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE],
        S.STABLE: [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE],
        S.DEAD: [S.DEAD],
    }[state]
    for step in path:
        group.transition_to(step)
    return group


@dataclass
class JoinResult:
    future: Future
    result: CoordinatorResult

    @property
    def done(self) -> bool:
        return self.future.done

    @property
    def answer(self) -> JoinAnswer:
        assert self.future.done, "the join is still parked"
        return self.future.value


@dataclass
class SyncResult:
    future: Future
    result: CoordinatorResult

    @property
    def done(self) -> bool:
        return self.future.done

    @property
    def answer(self) -> SyncAnswer:
        assert self.future.done, "the sync is still parked"
        return self.future.value


@dataclass
class GroupContext:
    """A manager whose records are written at once (``append_error`` makes them fail).
    Requests default to Kafka's test context: JoinGroup v3 (no member id required) unless a
    test asks for more, session and rebalance timeouts of 500 ms."""

    config: GroupConfig = field(default_factory=GroupConfig)
    timer: ManualTimer = field(default_factory=ManualTimer)
    records: list[GroupMetadataRecord] = field(default_factory=list)
    append_error: Errors = Errors.NONE
    manager: GroupMetadataManager = field(init=False)

    def __post_init__(self) -> None:
        self.manager = GroupMetadataManager(self.timer, self.config)

    def write(self, result: CoordinatorResult) -> CoordinatorResult:
        if result.records and self.append_error is Errors.NONE:
            self.records.extend(result.records)
        if result.on_written is not None:
            error = append_group_metadata_error(self.append_error)
            result.on_written(error if result.records else Errors.NONE)
        return result

    def create_group(self, group_id: str = "group-id") -> ClassicGroup:
        """``createClassicGroup``: an Empty group (so a join writes no record for it)."""
        return self.manager.get_or_create(group_id)

    def group(self, group_id: str = "group-id") -> ClassicGroup:
        group = self.manager.group(group_id)
        assert group is not None
        return group

    # -- requests ---------------------------------------------------------------------------
    def join(
        self,
        group_id: str = "group-id",
        member_id: str = "",
        instance_id: str | None = None,
        protocols: tuple[tuple[str, object], ...] = (("range", b""),),
        session_timeout_ms: int = 500,
        rebalance_timeout_ms: int = 500,
        protocol_type: str = PROTOCOL_TYPE,
        version: int = 3,
    ) -> JoinResult:
        future = Future()
        request = JoinGroupRequest(
            0,
            group_id,
            member_id,
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocols,
            protocol_type,
            version=version,
        )
        return JoinResult(future, self.write(self.manager.classic_group_join(request, future)))

    def join_new_dynamic(self, group_id: str = "group-id", **kw: Any) -> JoinResult:
        """A new dynamic member's two joins (KIP-394): MEMBER_ID_REQUIRED, then with the id."""
        first = self.join(group_id, version=4, **kw)
        assert first.answer.error is Errors.MEMBER_ID_REQUIRED
        return self.join(group_id, member_id=first.answer.member_id, version=4, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        group_id: str = "group-id",
        instance_id: str | None = None,
        assignments: tuple[tuple[str, object], ...] = (),
        protocol_name: str | None = None,
        protocol_type: str | None = None,
    ) -> SyncResult:
        future = Future()
        request = SyncGroupRequest(
            0,
            group_id,
            member_id,
            instance_id,
            generation,
            protocol_name,
            protocol_type,
            assignments,
        )
        return SyncResult(future, self.write(self.manager.classic_group_sync(request, future)))

    def heartbeat(
        self,
        member_id: str,
        generation: int,
        group_id: str = "group-id",
        instance_id: str | None = None,
    ) -> Errors:
        request = HeartbeatRequest(0, group_id, member_id, instance_id, generation)
        return self.write(self.manager.classic_group_heartbeat(request)).response

    def leave(
        self, *members: tuple[str, str | None], group_id: str = "group-id"
    ) -> CoordinatorResult:
        """The result; its response is (error, ((member id, instance id, error), ...))."""
        request = LeaveGroupRequest(0, group_id, tuple(LeaveGroupMember(m, i) for m, i in members))
        return self.write(self.manager.classic_group_leave(request))

    def advance(self, ms: float) -> list[str]:
        """Move time; the keys of the timers that expired (their records written)."""
        fired = self.timer.advance(ms)
        for _key, result in fired:
            self.write(result)
        return [key for key, _result in fired]

    def heartbeat_deadline(self, member_id: str, group_id: str = "group-id") -> float:
        return self.timer.deadline(heartbeat_key(group_id, member_id))

    # -- composite set-ups ------------------------------------------------------------------
    def stable_group(
        self, members: int = 1, group_id: str = "group-id", **join_kw: Any
    ) -> list[str]:
        """A Stable group of ``members`` dynamic members at generation 1 (the initial delay
        passed): their ids, the leader first."""
        joins = [self.join_new_dynamic(group_id, **join_kw) for _ in range(members)]
        while not all(j.done for j in joins):
            assert self.timer.timeouts, "no timer left to complete the join"
            self.advance(min(d for d, _s, _op in self.timer.timeouts.values()) - self.timer.now)
        ids = [j.answer.member_id for j in joins]
        leader = joins[0].answer.leader
        assert all(j.answer.error is Errors.NONE for j in joins)
        generation = joins[0].answer.generation
        syncs = [
            self.sync(
                i,
                generation,
                group_id,
                assignments=tuple((m, f"a-{m}") for m in ids) if i == leader else (),
            )
            for i in ids
        ]
        assert all(s.answer.error is Errors.NONE for s in syncs)
        assert self.group(group_id).is_in_state(S.STABLE)
        return sorted(ids, key=lambda i: i != leader)


# -- GroupMetadataManagerTestContext's composite helpers ---------------------------------------
def dynamic_member_complete_join(ctx: GroupContext, **join_kw: Any) -> JoinAnswer:
    """``joinClassicGroupAsDynamicMemberAndCompleteJoin``: MEMBER_ID_REQUIRED, the join with
    the id, then the initial delay completes the join phase."""
    second = ctx.join_new_dynamic(**join_kw)
    assert not second.result.records
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    assert second.answer.error is Errors.NONE
    return second.answer


def dynamic_member_complete_rebalance(ctx: GroupContext, group_id: str = "group-id") -> JoinAnswer:
    """``joinClassicGroupAsDynamicMemberAndCompleteRebalance``: one member (rebalance timeout
    10 s, session 5 s) at generation 1, synced and Stable."""
    group = ctx.create_group(group_id)
    leader = dynamic_member_complete_join(
        ctx, group_id=group_id, rebalance_timeout_ms=10_000, session_timeout_ms=5_000
    )
    assert leader.generation == 1 and group.is_in_state(S.COMPLETING_REBALANCE)
    sync = ctx.sync(leader.member_id, leader.generation, group_id)
    assert sync.answer.error is Errors.NONE and group.is_in_state(S.STABLE)
    return leader


def complete_join(ctx: GroupContext, version: int, **join_kw: Any) -> JoinAnswer:
    """``joinClassicGroupAndCompleteJoin`` for a static member (or JoinGroup v3)."""
    joined = ctx.join(version=version, **join_kw)
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    assert joined.answer.error is Errors.NONE
    return joined.answer


def join_with_n_members(
    ctx: GroupContext, group_id: str, n: int, rebalance_timeout_ms: int, session_timeout_ms: int
) -> list[JoinAnswer]:
    """``joinWithNMembers``: n dynamic members (v4) in CompletingRebalance."""
    group = ctx.create_group(group_id)
    kw = {
        "group_id": group_id,
        "rebalance_timeout_ms": rebalance_timeout_ms,
        "session_timeout_ms": session_timeout_ms,
        "version": 4,
    }
    ids = []
    for _ in range(n):
        first = ctx.join(**kw)
        assert first.answer.error is Errors.MEMBER_ID_REQUIRED
        ids.append(first.answer.member_id)
    seconds = [ctx.join(member_id=i, **kw) for i in ids]
    assert not any(s.done for s in seconds)
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    assert not any(s.done for s in seconds)
    ctx.advance(rebalance_timeout_ms)
    assert all(s.answer.error is Errors.NONE for s in seconds)
    assert len(group.members) == n and group.is_in_state(S.COMPLETING_REBALANCE)
    return [s.answer for s in seconds]


@dataclass
class PendingMemberGroup:
    leader_id: str
    follower_id: str
    pending_member_id: str


def setup_group_with_pending_member(ctx: GroupContext, group: ClassicGroup) -> PendingMemberGroup:
    """``setupGroupWithPendingMember``: a Stable group of two at generation 2, rebalancing
    again (PreparingRebalance) with both members rejoined and one pending member."""
    kw = {"group_id": group.group_id, "rebalance_timeout_ms": 10_000, "session_timeout_ms": 5_000}
    leader = dynamic_member_complete_join(ctx, **kw)
    sync = ctx.sync(
        leader.member_id, leader.generation, group.group_id, assignments=((leader.member_id, None),)
    )
    assert sync.answer.error is Errors.NONE
    follower = ctx.join(**kw)
    assert not follower.done
    leader_rejoin = ctx.join(member_id=leader.member_id, **kw)
    assert group.is_in_state(S.COMPLETING_REBALANCE)
    assert leader_rejoin.answer.error is follower.answer.error is Errors.NONE
    generation = leader_rejoin.answer.generation
    follower_id = follower.answer.member_id
    sync = ctx.sync(
        leader.member_id, generation, group.group_id, assignments=((leader.member_id, None),)
    )
    assert sync.answer.error is Errors.NONE and group.is_in_state(S.STABLE)
    assert not ctx.join(member_id=leader.member_id, **kw).done
    assert group.is_in_state(S.PREPARING_REBALANCE)
    pending = ctx.join(**{**kw, "session_timeout_ms": 2_500, "version": 4})
    assert pending.answer.error is Errors.MEMBER_ID_REQUIRED
    assert len(group.pending_members) == 1
    assert not ctx.join(member_id=follower_id, **kw).done
    assert group.is_in_state(S.PREPARING_REBALANCE) and len(group.members) == 2
    return PendingMemberGroup(leader.member_id, follower_id, pending.answer.member_id)


@dataclass
class RebalanceResult:
    generation: int
    leader_id: str
    leader_assignment: object
    follower_id: str
    follower_assignment: object


def static_members_join_and_rebalance(
    ctx: GroupContext,
    group_id: str,
    leader_instance: str,
    follower_instance: str,
    rebalance_timeout_ms: int = 10_000,
    session_timeout_ms: int = 5_000,
) -> RebalanceResult:
    """``staticMembersJoinAndRebalance``: two static members at generation 1, Stable."""
    group = ctx.create_group(group_id)
    kw = {
        "group_id": group_id,
        "protocols": (("range", b""), ("roundrobin", b"")),
        "rebalance_timeout_ms": rebalance_timeout_ms,
        "session_timeout_ms": session_timeout_ms,
    }
    leader = ctx.join(instance_id=leader_instance, **kw)
    follower = ctx.join(instance_id=follower_instance, **kw)
    assert not leader.done and not follower.done
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    assert leader.answer.error is follower.answer.error is Errors.NONE
    assert leader.answer.generation == follower.answer.generation == group.generation == 1
    leader_id, follower_id = leader.answer.member_id, follower.answer.member_id
    assignments = ((leader_id, b"\x01"), (follower_id, b"\x02"))
    leader_sync = ctx.sync(leader_id, 1, group_id, leader_instance, assignments)
    assert leader_sync.answer.error is Errors.NONE and group.is_in_state(S.STABLE)
    follower_sync = ctx.sync(follower_id, 1, group_id, follower_instance)
    assert not follower_sync.result.records and follower_sync.answer.error is Errors.NONE
    return RebalanceResult(
        1, leader_id, leader_sync.answer.assignment, follower_id, follower_sync.answer.assignment
    )
