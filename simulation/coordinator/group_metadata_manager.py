"""GroupMetadataManager, classic part: what JoinGroup, SyncGroup, Heartbeat and LeaveGroup do
to a classic group, and what its timers do.

Kafka's ``GroupMetadataManager`` (``group-coordinator/.../GroupMetadataManager.java``, trunk of
late 2024), one per ``__consumer_offsets`` partition (a coordinator shard). Each handler is a
function of the groups and the request that changes the in-memory groups at once (classic
groups are not timeline structures in Kafka either) and returns a :class:`CoordinatorResult`:
the records to write to ``__consumer_offsets``, the answer if it is immediate, and what to do
once the records are written or failed. A parked JoinGroup or SyncGroup answer is completed
later through the ``respond`` callable it was handed (Kafka's response future). The runtime
(:mod:`runtime`) writes the records with acks=all and delivers answers; timers come through a
:class:`CoordinatorTimer` with Kafka's keys (``heartbeat-<group>-<member>``, ``join-<group>``,
``sync-<group>``).

Written records: the GroupMetadata record (:class:`GroupMetadataRecord`) at the leader's
SyncGroup (with the assignment), at a static member's replacement in Stable, when a generation
ends with no member (Empty), and when a join creates a group (empty). Replaying them on load
gives Stable (members) or Empty (none) at the written generation
(``GroupMetadataManager.replay``, ``:3924-3980``), and :meth:`GroupMetadataManager.on_loaded`
reschedules every member's session (``onLoaded``, ``:3807-3840``).

Not modelled: ``group.max.size`` (GROUP_MAX_SIZE_REACHED), group expiry and tombstones,
KIP-848 groups (phase 4), conversion between classic and consumer groups, join reasons.

To extend: a new request is a method ``classic_group_<name>(request, ...)`` returning a
:class:`CoordinatorResult`, plus a runtime handler; a new timed rule schedules an operation on
``self.timer`` with its Kafka key and returns its records from the operation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eosim.simulation.coordinator.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    GroupError,
    IllegalStateError,
    JoinAnswer,
    Respond,
    SyncAnswer,
)
from eosim.simulation.coordinator.consumer_group import ConsumerGroup
from eosim.simulation.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeats
from eosim.simulation.coordinator.coordinator_result import (
    CoordinatorResult,
)
from eosim.simulation.coordinator.coordinator_result import empty_result as _empty
from eosim.simulation.coordinator.coordinator_timer import CoordinatorTimer
from eosim.simulation.coordinator.group_config import GroupConfig
from eosim.simulation.protocol import (
    UNKNOWN_MEMBER_ID,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    TopicPartition,
)

S = ClassicGroupState


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """A member as ``GroupMetadataValue.MemberMetadata`` stores it: the chosen protocol's
    subscription and the assignment."""

    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: object
    assignment: object


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """``GroupMetadataKey``/``GroupMetadataValue`` in ``__consumer_offsets``
    (``GroupCoordinatorRecordHelpers.newGroupMetadataRecord``)."""

    group: str
    protocol_type: str | None
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()


def heartbeat_key(group_id: str, member_id: str) -> str:
    """``classicGroupHeartbeatKey``."""
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    """``classicGroupJoinKey``."""
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    """``classicGroupSyncKey``."""
    return f"sync-{group_id}"


MemberIdGenerator = Callable[[str, str | None], str]


def uuid_member_ids(draw_bits: Callable[[], int]) -> MemberIdGenerator:
    """``ClassicGroup.generateMemberId`` (``ClassicGroup.java:775-778``): the instance id (or
    else the client id), "-", and a random UUID, here from ``draw_bits()`` (128 seeded bits)
    so that a run's member ids are the same in every process."""

    def generate(client_id: str, instance_id: str | None) -> str:
        prefix = instance_id if instance_id is not None else client_id
        return f"{prefix}-{uuid.UUID(int=draw_bits(), version=4)}"

    return generate


class GroupMetadataManager(ConsumerGroupHeartbeats):
    """The groups of one ``__consumer_offsets`` partition: classic groups here, consumer
    groups (KIP-848) in :class:`ConsumerGroupHeartbeats`."""

    def __init__(
        self,
        timer: CoordinatorTimer,
        config: GroupConfig | None = None,
        member_ids: MemberIdGenerator | None = None,
        partition_count: Callable[[str], int] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.timer = timer
        # The shard's time (Kafka's ``time``), read by the consumer groups' assignment
        # interval; by default a ManualTimer's ``now`` (tests), else 0.
        self.clock = clock if clock is not None else _clock_of(timer)
        self.config = config if config is not None else GroupConfig()
        self._member_ids = member_ids if member_ids is not None else _counting_member_ids()
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.partition_count = partition_count if partition_count is not None else _no_topics
        # Observers of membership changes (reason, group, member): for histories and tests.
        self.on_member_removed: Callable[[str, ClassicGroup, ClassicGroupMember], None] | None = (
            None
        )

    # -- groups -------------------------------------------------------------------------------
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ClassicGroup:
        """``getOrMaybeCreateClassicGroup(groupId, true)``: a new group is Empty at
        generation 0."""
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id)
            self.groups[group_id] = group
        return group

    # -- JoinGroup ----------------------------------------------------------------------------
    def classic_group_join(self, request: JoinGroupRequest, respond: Respond) -> CoordinatorResult:
        """``classicGroupJoinToClassicGroup`` (``GroupMetadataManager.java:4026-4105``; the
        group id and session timeout are checked before, by the runtime, as
        ``GroupCoordinatorService.joinGroup`` does): a join with no member id creates the group
        if needed; a join naming an unknown group is UNKNOWN_MEMBER_ID; a newly created group
        is written (empty) if the join wrote nothing else."""
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        if request.group in self.consumer_groups:
            # A classic member joining a consumer group (a mixed group): not modelled.
            respond(JoinAnswer(Errors.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return _empty()
        is_new_group = request.group not in self.groups
        if is_new_group and not unknown:
            respond(JoinAnswer(Errors.UNKNOWN_MEMBER_ID, request.member_id))
            return _empty()
        group = self.get_or_create(request.group)
        if unknown:
            result = self._join_new_member(request, group, respond)
        else:
            result = self._join_existing_member(request, group, respond)
        if is_new_group and not result.records:
            # Commit the new group to the log (newEmptyGroupMetadataRecord); if that fails the
            # group is reverted and the join answered with the error.
            def written(error: Errors) -> None:
                if error is not Errors.NONE:
                    if self.groups.get(request.group) is group and not group.members:
                        del self.groups[request.group]
                    respond(JoinAnswer(error, request.member_id))

            return CoordinatorResult([_group_record(group, empty=True)], None, written)
        return result

    def _join_new_member(
        self, request: JoinGroupRequest, group: ClassicGroup, respond: Respond
    ) -> CoordinatorResult:
        """``classicGroupJoinNewMember`` (``:4140-4196``)."""
        if group.is_in_state(S.DEAD):
            respond(JoinAnswer(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return _empty()
        if not group.supports_protocols(request.protocol_type, _names(request)):
            respond(JoinAnswer(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return _empty()
        new_member_id = self._member_ids(request.client_id, request.instance_id)
        if request.instance_id is not None:
            # classicGroupJoinNewStaticMember (:4198-4242)
            existing = group.static_member_id(request.instance_id)
            if existing is not None:
                return self._update_static_member(request, group, existing, new_member_id, respond)
            return self._add_member(request, group, new_member_id, respond)
        # classicGroupJoinNewDynamicMember (:4244-4292), KIP-394: from JoinGroup v4 the
        # coordinator hands out the id and expects the member back within its session timeout.
        if request.version < 4:
            return self._add_member(request, group, new_member_id, respond)
        group.add_pending_member(new_member_id)
        self.timer.schedule(
            heartbeat_key(group.group_id, new_member_id),
            request.session_timeout_ms,
            lambda: self._expire_heartbeat(group.group_id, new_member_id),
        )
        respond(JoinAnswer(Errors.MEMBER_ID_REQUIRED, new_member_id))
        return _empty()

    def _join_existing_member(
        self, request: JoinGroupRequest, group: ClassicGroup, respond: Respond
    ) -> CoordinatorResult:
        """``classicGroupJoinExistingMember`` (``:4294-4440``)."""
        member_id = request.member_id
        if group.is_in_state(S.DEAD):
            respond(JoinAnswer(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
            return _empty()
        if not group.supports_protocols(request.protocol_type, _names(request)):
            respond(JoinAnswer(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return _empty()
        if group.is_pending_member(member_id):
            if request.instance_id is not None:
                raise IllegalStateError(
                    f"Received unexpected JoinGroup with groupInstanceId={request.instance_id} "
                    f"for pending member with memberId={member_id}"
                )
            return self._add_member(request, group, member_id, respond)
        try:
            group.validate_member(member_id, request.instance_id)
        except GroupError as e:
            respond(JoinAnswer(e.error, member_id))
            return _empty()
        member = group.member(member_id)
        if group.is_in_state(S.PREPARING_REBALANCE):
            return self._update_member(request, group, member, respond)
        if group.is_in_state(S.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # The member lost its JoinGroup answer: the current generation again.
                respond(self._join_answer(group, member_id, with_members=True))
                return _empty()
            return self._update_member(request, group, member, respond)
        if group.is_in_state(S.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                return self._update_member(request, group, member, respond)
            respond(self._join_answer(group, member_id, with_members=False))
            return _empty()
        # Empty: the member should reset its generation and rejoin.
        respond(JoinAnswer(Errors.UNKNOWN_MEMBER_ID, member_id))
        return _empty()

    def _join_answer(self, group: ClassicGroup, member_id: str, with_members: bool) -> JoinAnswer:
        return JoinAnswer(
            Errors.NONE,
            member_id,
            group.generation,
            group.protocol_name,
            group.protocol_type,
            group.leader,
            group.current_members() if with_members and group.is_leader(member_id) else (),
        )

    def _update_member(
        self,
        request: JoinGroupRequest,
        group: ClassicGroup,
        member: ClassicGroupMember,
        respond: Respond,
    ) -> CoordinatorResult:
        """``updateMemberThenRebalanceOrCompleteJoin`` (``:4688-4715``)."""
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            respond,
        )
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _add_member(
        self, request: JoinGroupRequest, group: ClassicGroup, member_id: str, respond: Respond
    ) -> CoordinatorResult:
        """``addMemberThenRebalanceOrCompleteJoin`` (``:4717-4764``): a new member has the
        new-member join timeout (5 min) as its session until its first generation."""
        member = ClassicGroupMember(
            member_id,
            request.instance_id,
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            request.protocol_type,
            tuple(request.protocols),
            is_new=True,
        )
        if group.is_in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member, respond)
        self._reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(
        self,
        request: JoinGroupRequest,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        respond: Respond,
    ) -> CoordinatorResult:
        """``updateStaticMemberThenRebalanceOrCompleteJoin`` (``:5098-5210``): the rejoining
        instance replaces its old member id (whose parked answers get FENCED_INSTANCE_ID). In
        Stable with an unchanged protocol choice it keeps the assignment without a rebalance
        (the group is written, and reverted if the write fails); in CompletingRebalance it
        forces a rebalance; in PreparingRebalance it joins the rebalance under way."""
        current_leader = group.leader
        instance_id = request.instance_id
        assert instance_id is not None
        new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._reschedule_heartbeat(group, new_member)
        old_rebalance = new_member.rebalance_timeout_ms
        old_session = new_member.session_timeout_ms
        old_protocols = new_member.protocols
        group.update_member(
            new_member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            respond,
        )
        if group.is_in_state(S.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def written(error: Errors) -> None:
                    if error is not Errors.NONE:
                        group.update_member(
                            new_member, old_protocols, old_rebalance, old_session, None
                        )
                        old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                        self._reschedule_heartbeat(group, old)
                        respond(
                            JoinAnswer(
                                error,
                                UNKNOWN_MEMBER_ID,
                                group.generation,
                                group.protocol_name,
                                group.protocol_type,
                                current_leader,
                            )
                        )
                        return
                    if request.version < 9:
                        group.complete_join(
                            new_member,
                            JoinAnswer(
                                Errors.NONE,
                                new_member_id,
                                group.generation,
                                group.protocol_name,
                                group.protocol_type,
                                current_leader,
                            ),
                        )
                        return
                    # JoinGroup v9+ (supportsSkippingAssignment): a static leader is told to
                    # skip the assignment and gets the member list.
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(
                        new_member,
                        JoinAnswer(
                            Errors.NONE,
                            new_member_id,
                            group.generation,
                            group.protocol_name,
                            group.protocol_type,
                            group.leader,
                            group.current_members() if is_leader else (),
                            skip_assignment=is_leader,
                        ),
                    )

                return CoordinatorResult([_group_record(group, assignment)], None, written)
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in_state(S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(group)
        if group.is_in_state(S.EMPTY) or group.is_in_state(S.DEAD):
            raise IllegalStateError(
                f"Group {group.group_id} was not supposed to be in the state "
                f"{group.state.value} when the unknown static member {instance_id} rejoins."
            )
        return self._maybe_complete_join_phase(group)

    # -- rebalancing --------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        """``maybePrepareRebalanceOrCompleteJoin`` (``:4766-4785``)."""
        if group.can_rebalance():
            return self._prepare_rebalance(group)
        return self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> CoordinatorResult:
        """``maybeCompleteJoinPhase`` (``:4107-4127``): in PreparingRebalance, once everyone
        joined, except during the initial delay (the timer completes that one)."""
        if not group.is_in_state(S.PREPARING_REBALANCE):
            return _empty()
        if group.previous_state is S.EMPTY:
            return _empty()
        if not group.has_all_members_joined():
            return _empty()
        return self._complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup) -> CoordinatorResult:
        return self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> CoordinatorResult:
        """``prepareRebalance`` (``:4787-4820``): parked syncs get REBALANCE_IN_PROGRESS; from
        Empty the join phase waits ``group.initial.rebalance.delay.ms`` (extended while new
        members arrive, up to the rebalance timeout); otherwise it ends when every member
        rejoined or at the rebalance timeout."""
        if group.is_in_state(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, Errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in_state(S.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group_id = group.group_id
            self.timer.schedule(
                join_key(group_id),
                delay,
                lambda: self._try_complete_initial_rebalance(group_id, delay, remaining),
            )
        group.transition_to(S.PREPARING_REBALANCE)
        return _empty() if initial else self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> CoordinatorResult:
        """``maybeCompleteJoinElseSchedule`` (``:4829-4848``)."""
        if group.has_all_members_joined():
            return self._complete_join(group)
        group_id = group.group_id
        self.timer.schedule(
            join_key(group_id),
            group.rebalance_timeout_ms(),
            lambda: self._complete_join_id(group_id),
        )
        return _empty()

    def _try_complete_initial_rebalance(
        self, group_id: str, delay_ms: int, remaining_ms: int
    ) -> CoordinatorResult:
        """``tryCompleteInitialRebalanceElseSchedule`` (``:4856-4890``)."""
        group = self.groups.get(group_id)
        if group is None:
            return _empty()
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(
                join_key(group_id),
                new_delay,
                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining),
            )
            return _empty()
        return self._complete_join(group)

    def _complete_join_id(self, group_id: str) -> CoordinatorResult:
        group = self.groups.get(group_id)
        return self._complete_join(group) if group is not None else _empty()

    def _complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        """``completeClassicGroupJoin`` (``:4466-4557``): dynamic members that did not rejoin
        are removed (static ones are kept); if no member that joined can lead, the join timer
        is re-armed without a new generation; otherwise the generation goes up and every
        parked join is answered (the leader with the member list), each member's session
        restarts and the group awaits the syncs until the rebalance timeout. A generation
        with no member is Empty and is written."""
        self.timer.cancel(join_key(group.group_id))
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            group.remove(failed.member_id)
            self.timer.cancel(heartbeat_key(group.group_id, failed.member_id))
            self._removed("join_timeout", group, failed)
        if group.is_in_state(S.DEAD):
            return _empty()
        if not group.maybe_elect_new_joined_leader() and group.members:
            group_id = group.group_id
            self.timer.schedule(
                join_key(group_id),
                group.rebalance_timeout_ms(),
                lambda: self._complete_join_id(group_id),
            )
            return _empty()
        group.init_next_generation()
        if group.is_in_state(S.EMPTY):
            return CoordinatorResult([_group_record(group, {})], None, lambda _error: None)
        for member in list(group.members.values()):
            answer = self._join_answer(group, member.member_id, with_members=True)
            group.complete_join(member, answer)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)
        return _empty()

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        """``schedulePendingSync`` (``:4565-4572``)."""
        group_id, generation = group.group_id, group.generation
        self.timer.schedule(
            sync_key(group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync.clear()
        self.timer.cancel(sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> CoordinatorResult:
        """``expirePendingSync`` (``:5014-5049``): members of the generation that never sent
        their SyncGroup are removed and the group rebalances."""
        group = self.groups.get(group_id)
        if group is None or generation != group.generation:
            return _empty()
        if (
            group.state in (S.COMPLETING_REBALANCE, S.STABLE)
            and not group.has_received_sync_from_all_members()
        ):
            for member_id in list(group.pending_sync):
                member = group.members.get(member_id)
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group_id, member_id))
                if member is not None:
                    self._removed("sync_timeout", group, member)
            return self._prepare_rebalance(group)
        return _empty()

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        """``resetAndPropagateAssignmentWithError``."""
        if not group.is_in_state(S.COMPLETING_REBALANCE):
            raise IllegalStateError(f"Group {group.group_id} must be in CompletingRebalance")
        for member in group.members.values():
            member.assignment = None
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(
        self, group: ClassicGroup, assignment: dict[str, object]
    ) -> None:
        """``setAndPropagateAssignment``."""
        if not group.is_in_state(S.COMPLETING_REBALANCE):
            raise IllegalStateError("The group must be in CompletingRebalance state")
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id)
        self._propagate_assignment(group, Errors.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        """``propagateAssignment``: every parked sync is answered; each answered member's
        session restarts."""
        ok = error is Errors.NONE
        for member in list(group.members.values()):
            answer = SyncAnswer(
                error,
                member.assignment,
                group.protocol_name if ok else None,
                group.protocol_type if ok else None,
            )
            if group.complete_sync(member, answer):
                self._reschedule_heartbeat(group, member)

    # -- sessions -----------------------------------------------------------------------------
    def _reschedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None
    ) -> None:
        """``rescheduleClassicGroupMemberHeartbeat`` (``:4966-4997``)."""
        group_id, member_id = group.group_id, member.member_id
        self.timer.schedule(
            heartbeat_key(group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._reschedule_heartbeat(group, member)

    def _expire_heartbeat(self, group_id: str, member_id: str) -> CoordinatorResult:
        """``expireClassicGroupMemberHeartbeat`` (``:4583-4625``): a pending member goes; a
        member is removed unless it satisfied its heartbeat (awaiting a join or sync)."""
        group = self.groups.get(group_id)
        if group is None or group.is_in_state(S.DEAD):
            return _empty()
        if group.is_pending_member(member_id):
            group.remove(member_id)
            if group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                return self._complete_join(group)
            return _empty()
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return _empty()
        reason = "new_member_timeout" if member.is_new else "session_timeout"
        return self._remove_member_and_update(group, member, reason)

    def _remove_member_and_update(
        self, group: ClassicGroup, member: ClassicGroupMember, reason: str
    ) -> CoordinatorResult:
        """``removeMemberAndUpdateClassicGroup`` (``:4633-4652``)."""
        group.complete_join(member, JoinAnswer(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._removed(reason, group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        return _empty()

    def _removed(self, reason: str, group: ClassicGroup, member: ClassicGroupMember) -> None:
        if self.on_member_removed is not None:
            self.on_member_removed(reason, group, member)

    # -- SyncGroup ----------------------------------------------------------------------------
    def classic_group_sync(self, request: SyncGroupRequest, respond: Respond) -> CoordinatorResult:
        """``classicGroupSync`` / ``classicGroupSyncToClassicGroup`` (``:5222-5345``): in
        CompletingRebalance the sync is parked; the leader's assignment is written and, once
        written, every parked sync is answered and the group is Stable. In Stable the member
        gets its assignment; in PreparingRebalance REBALANCE_IN_PROGRESS."""
        group = self.groups.get(request.group)
        if group is None or group.is_in_state(S.EMPTY):
            respond(SyncAnswer(Errors.UNKNOWN_MEMBER_ID))
            return _empty()
        error = self._validate_sync(group, request)
        if error is not Errors.NONE:
            respond(SyncAnswer(error))
            return _empty()
        member_id = request.member_id
        if group.is_in_state(S.PREPARING_REBALANCE):
            respond(SyncAnswer(Errors.REBALANCE_IN_PROGRESS))
            return _empty()
        if group.is_in_state(S.COMPLETING_REBALANCE):
            group.member(member_id).awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if not group.is_leader(member_id):
                return _empty()
            assignment = dict(request.assignments)
            for m in group.members.values():
                assignment.setdefault(m.member_id, None)
            generation = request.generation

            def written(error: Errors) -> None:
                current = group.is_in_state(S.COMPLETING_REBALANCE) and (
                    generation == group.generation
                )
                if not current:
                    return
                if error is not Errors.NONE:
                    self._reset_and_propagate_assignment(group, error)
                    # Kafka drops this result's records (GroupMetadataManager.java:5318).
                    self._maybe_prepare_rebalance_or_complete_join(group)
                    return
                self._set_and_propagate_assignment(group, assignment)
                group.transition_to(S.STABLE)

            return CoordinatorResult([_group_record(group, assignment)], None, written)
        if group.is_in_state(S.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.member(member_id)
            respond(
                SyncAnswer(Errors.NONE, member.assignment, group.protocol_name, group.protocol_type)
            )
            return _empty()
        raise IllegalStateError(f"Reached unexpected condition for Dead group {group.group_id}")

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> Errors:
        """``validateSyncGroup`` (``:5438-5465``)."""
        if group.is_in_state(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(request.member_id, request.instance_id)
        except GroupError as e:
            return e.error
        if request.generation != group.generation:
            return Errors.ILLEGAL_GENERATION
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        """``removePendingSyncMember`` (``:5470-5493``)."""
        group.remove_pending_sync_member(member_id)
        if group.state in (S.DEAD, S.EMPTY, S.PREPARING_REBALANCE) or (
            group.has_received_sync_from_all_members()
        ):
            self.timer.cancel(sync_key(group.group_id))

    # -- Heartbeat ----------------------------------------------------------------------------
    def classic_group_heartbeat(self, request: HeartbeatRequest) -> CoordinatorResult:
        """``classicGroupHeartbeatToClassicGroup`` after ``validateClassicGroupHeartbeat``
        (``:5534-5605``): the response is an :class:`Errors`. Empty: UNKNOWN_MEMBER_ID;
        PreparingRebalance: the session restarts, REBALANCE_IN_PROGRESS (the member must
        rejoin); CompletingRebalance and Stable: the session restarts."""
        group = self.groups.get(request.group)
        if group is None:
            return CoordinatorResult(response=Errors.UNKNOWN_MEMBER_ID)
        if group.is_in_state(S.DEAD):
            return CoordinatorResult(response=Errors.COORDINATOR_NOT_AVAILABLE)
        try:
            group.validate_member(request.member_id, request.instance_id)
        except GroupError as e:
            return CoordinatorResult(response=e.error)
        if request.generation != group.generation:
            return CoordinatorResult(response=Errors.ILLEGAL_GENERATION)
        if group.is_in_state(S.EMPTY):
            return CoordinatorResult(response=Errors.UNKNOWN_MEMBER_ID)
        self._reschedule_heartbeat(group, group.member(request.member_id))
        if group.is_in_state(S.PREPARING_REBALANCE):
            return CoordinatorResult(response=Errors.REBALANCE_IN_PROGRESS)
        return CoordinatorResult(response=Errors.NONE)

    # -- LeaveGroup ---------------------------------------------------------------------------
    def classic_group_leave(self, request: LeaveGroupRequest) -> CoordinatorResult:
        """``classicGroupLeaveToClassicGroup`` (``:5806-5917``): the response is (error,
        ((member id, instance id, error), ...)). A static member may leave by instance id
        alone; a pending member just goes; then the group rebalances (or completes its join
        phase) if any member left."""
        group = self.groups.get(request.group)
        if group is None:
            return CoordinatorResult(response=(Errors.UNKNOWN_MEMBER_ID, ()))
        if group.is_in_state(S.DEAD):
            return CoordinatorResult(response=(Errors.COORDINATOR_NOT_AVAILABLE, ()))
        answers: list[tuple[str, str | None, Errors]] = []
        for leaving in request.members:
            member_id, instance_id = leaving.member_id, leaving.instance_id
            if member_id == UNKNOWN_MEMBER_ID:
                if instance_id is not None and group.has_static_member(instance_id):
                    current = group.static_member_id(instance_id)
                    assert current is not None
                    self._remove_current_member(group, current)
                    answers.append((member_id, instance_id, Errors.NONE))
                else:
                    answers.append((member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(heartbeat_key(group.group_id, member_id))
                answers.append((member_id, instance_id, Errors.NONE))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except GroupError as e:
                    answers.append((member_id, instance_id, e.error))
                    continue
                self._remove_current_member(group, member_id)
                answers.append((member_id, instance_id, Errors.NONE))
        result = _empty()
        if any(error is Errors.NONE for _m, _i, error in answers):
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                result = self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in_state(S.PREPARING_REBALANCE):
                result = self._maybe_complete_join_phase(group)
        return CoordinatorResult(result.records, (Errors.NONE, tuple(answers)), result.on_written)

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        """``removeCurrentMemberFromClassicGroup`` (``:5919-5935``)."""
        member = group.member(member_id)
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        group.complete_join(member, JoinAnswer(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        group.remove(member_id)
        self._removed("leave", group, member)

    # -- offset commits -----------------------------------------------------------------------
    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        transactional: bool,
        checks_generation: bool = True,
        partitions: Iterable[TopicPartition] = (),
    ) -> Errors:
        """``OffsetMetadataManager.validateOffsetCommit`` / ``validateTransactionalOffsetCommit``
        (``OffsetMetadataManager.java:302-379``): an unknown group is created (Empty) for a
        commit without a generation; with one, an OffsetCommit is GROUP_ID_NOT_FOUND (version
        9, the one a 4.x client sends; ILLEGAL_GENERATION before) and a TxnOffsetCommit
        ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from version 6, KIP-1319). Then the group's own
        check (:meth:`ClassicGroup.validate_offset_commit`; a consumer group's checks
        ``partitions``, the committed ones, since KIP-1251)."""
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if not checks_generation:
                return Errors.NONE
            return self.validate_consumer_group_commit(
                consumer_group, member_id, instance_id, generation, transactional, partitions
            )
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0 and checks_generation:
                if transactional and not self.config.txn_offset_commit_v6:
                    return Errors.ILLEGAL_GENERATION
                return Errors.GROUP_ID_NOT_FOUND
            group = self.get_or_create(group_id)
        try:
            group.validate_offset_commit(
                member_id, instance_id, generation, transactional, checks_generation
            )
        except GroupError as e:
            return e.error
        return Errors.NONE

    def commit_keeps_session(self, group_id: str, member_id: str) -> None:
        """``OffsetMetadataManager.commitOffset`` (``:456-465``): an accepted commit restarts
        its member's session while the group is Stable or PreparingRebalance."""
        group = self.groups.get(group_id)
        if group is None or group.state not in (S.STABLE, S.PREPARING_REBALANCE):
            return
        member = group.members.get(member_id)
        if member is not None:
            self._reschedule_heartbeat(group, member)

    # -- load and unload ----------------------------------------------------------------------
    def replay(self, record: GroupMetadataRecord) -> None:
        """``GroupMetadataManager.replay(GroupMetadataKey, GroupMetadataValue)``
        (``:3924-3980``): the group as written: Stable with its members, or Empty."""
        members = [
            ClassicGroupMember(
                m.member_id,
                m.instance_id,
                m.session_timeout_ms,
                m.rebalance_timeout_ms,
                record.protocol_type or "",
                ((record.protocol or "", m.subscription),),
                m.assignment,
            )
            for m in record.members
        ]
        group = ClassicGroup(
            record.group,
            state=S.STABLE if members else S.EMPTY,
            generation=record.generation,
            protocol_type=record.protocol_type or None,
            protocol_name=record.protocol,
            leader=record.leader,
        )
        for member in members:
            group.add(member)
        group.leader = record.leader
        self.groups[record.group] = group

    def on_loaded(self) -> None:
        """``onLoaded`` (``:3807-3840``): every loaded member's session starts now."""
        for group in self.groups.values():
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
        self.consumer_groups_loaded()

    def on_unloaded(self) -> None:
        """``onUnloaded`` (``:3862-3905``): every group is Dead; parked joins (from
        PreparingRebalance) and syncs (from CompletingRebalance or Stable) get
        NOT_COORDINATOR."""
        for group in self.groups.values():
            group.transition_to(S.DEAD)
            if group.previous_state is S.PREPARING_REBALANCE:
                group.complete_all_joins(Errors.NOT_COORDINATOR)
            elif group.previous_state in (S.COMPLETING_REBALANCE, S.STABLE):
                group.complete_all_syncs(Errors.NOT_COORDINATOR)


def _no_topics(_topic: str) -> int:
    return 0


def _clock_of(timer: CoordinatorTimer) -> Callable[[], float]:
    """The time of a timer that keeps one (a ManualTimer's ``now``), else always 0."""
    return lambda: float(getattr(timer, "now", 0.0))


def _names(request: JoinGroupRequest) -> tuple[str, ...]:
    return tuple(name for name, _ in request.protocols)


def _inconsistent(requested: str | None, group_value: str | None) -> bool:
    """``isProtocolInconsistent``: a value the request names that differs from the group's."""
    return requested is not None and group_value is not None and requested != group_value


def _group_record(
    group: ClassicGroup, assignment: dict[str, object] | None = None, empty: bool = False
) -> GroupMetadataRecord:
    """``newGroupMetadataRecord`` (``newEmptyGroupMetadataRecord`` with ``empty``)."""
    if empty:
        return GroupMetadataRecord(
            group.group_id, group.protocol_type, group.generation, None, None
        )
    assignment = assignment if assignment is not None else {}
    protocol = group.protocol_name
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.instance_id,
            m.session_timeout_ms,
            m.rebalance_timeout_ms,
            m.metadata(protocol) if protocol is not None else None,
            assignment.get(m.member_id),
        )
        for m in group.members.values()
    )
    return GroupMetadataRecord(
        group.group_id, group.protocol_type, group.generation, protocol, group.leader, members
    )


def _counting_member_ids() -> MemberIdGenerator:
    """Member ids for tests that need no UUIDs: ``<prefix>-<n>``."""
    counter = [0]

    def generate(client_id: str, instance_id: str | None) -> str:
        counter[0] += 1
        prefix = instance_id if instance_id is not None else client_id
        return f"{prefix}-{counter[0]}"

    return generate
