"""GroupMetadataManager, consumer part: what ConsumerGroupHeartbeat does to a KIP-848
consumer group, and what its timers do.

Kafka 4.1.1's ``GroupMetadataManager.consumerGroupHeartbeat`` (``:2185-2319``),
``consumerGroupLeave`` (``:3926-3956``), ``maybeReconcile`` (``:3482-3523``),
``consumerGroupFenceMembers`` (``:4071-4130``) and the session and rebalance timeouts
(``:4452-4540``). One heartbeat, in order:

1. the group (created by a join, epoch 0; since KAFKA-20268, Kafka 4.3, epoch 1 with an empty
   target assignment, the rule ``consumer_group_starts_at_epoch_1``) and the member (created
   by a join; otherwise its epoch is validated: a greater epoch, or a smaller one that is not
   the previous epoch with owned partitions inside the assignment, is FENCED_MEMBER_EPOCH; an
   unknown member is UNKNOWN_MEMBER_ID);
2. the member's subscription and rebalance timeout; a new member or a changed subscription
   bumps the group epoch;
3. the target assignment, recomputed by the uniform assignor when the group epoch is ahead,
   and since KIP-1263 (Kafka 4.3) only once ``group.consumer.assignment.interval.ms`` has
   passed since the last one (``maybeUpdateTargetAssignment``: no timer, the first heartbeat
   of any member after the interval computes it; meanwhile members reconcile towards the old
   target at the old assignment epoch);
4. the member's reconciliation (:func:`consumer_group.reconcile`); entering
   UNREVOKED_PARTITIONS starts its rebalance timeout (the member's max.poll.interval.ms),
   leaving it cancels the timeout;
5. the session timeout restarts (``group.consumer.session.timeout.ms``), and the answer
   carries the member's epoch, the heartbeat interval and, when it changed (or the request was
   full), the member's assignment.

A leave (epoch -1), an expired session and a missed revocation deadline all *fence* the
member: it is removed at once, its partitions are free, and the group epoch is bumped (the new
target is computed at the next heartbeat of any member).

The group changes in memory at once and the change is written as one record
(:class:`ConsumerGroupRecord`); the answer goes out once it is written. If the write fails,
the group as it was before is restored (Kafka's timeline structures revert to the last
committed offset).

Not modelled: static members (group.instance.id) under this protocol, regular-expression
subscriptions, racks, the ``range`` server assignor, mixed groups (classic members in a
consumer group, and the online upgrade and downgrade), group.consumer.max.size.

To extend: a new error is raised as a :class:`GroupError` where Kafka throws its exception;
a new timer is scheduled on ``self.timer`` with Kafka's key and returns a
:class:`CoordinatorResult`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from eosim.simulation.coordinator.classic_group import ClassicGroup, GroupError
from eosim.simulation.coordinator.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupRecord,
    MemberState,
    reconcile,
    uniform_assign,
)
from eosim.simulation.coordinator.coordinator_result import CoordinatorResult
from eosim.simulation.protocol import ConsumerGroupHeartbeatRequest, Errors, TopicPartition

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from eosim.simulation.coordinator.coordinator_timer import CoordinatorTimer
    from eosim.simulation.coordinator.group_config import GroupConfig


class HeartbeatAnswer(NamedTuple):
    """A ConsumerGroupHeartbeat's answer before it goes on the wire."""

    error: Errors
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None


def session_timeout_key(group_id: str, member_id: str) -> str:
    """``groupSessionTimeoutKey``."""
    return f"session-timeout-{group_id}-{member_id}"


def rebalance_timeout_key(group_id: str, member_id: str) -> str:
    """``groupRebalanceTimeoutKey``."""
    return f"rebalance-timeout-{group_id}-{member_id}"


class ConsumerGroupHeartbeats:
    """The consumer-group handlers of :class:`GroupMetadataManager` (a mixin: it shares the
    shard's timer, config and groups)."""

    timer: CoordinatorTimer
    config: GroupConfig
    groups: dict[str, ClassicGroup]
    consumer_groups: dict[str, ConsumerGroup]
    # topic -> its partition count, as the broker's metadata image has it
    partition_count: Callable[[str], int]
    # the shard's time, in milliseconds
    clock: Callable[[], float]

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------
    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> CoordinatorResult:
        try:
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._consumer_group_leave(request)
            return self._heartbeat(request)
        except GroupError as e:
            return CoordinatorResult(response=HeartbeatAnswer(e.error))

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup:
        """``getOrMaybeCreateConsumerGroup``: an empty classic group of the same id (say, one
        a plain commit created) is replaced; a classic group with members is not a consumer
        group (its online upgrade is not modelled)."""
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = self.groups.get(group_id)
        if classic is not None and classic.members:
            raise GroupError(Errors.GROUP_ID_NOT_FOUND)
        if not create:
            raise GroupError(Errors.GROUP_ID_NOT_FOUND)
        self.groups.pop(group_id, None)
        # KAFKA-20268 (Kafka 4.3): a new group starts at epoch 1 with an empty target
        # assignment (at the same epoch), so its first real assignment is epoch 2.
        epoch = 1 if self.config.starts_at_epoch_1 else 0
        group = ConsumerGroup(
            group_id, epoch, epoch, strict_partition_epochs=self.config.strict_partition_epochs
        )
        self.consumer_groups[group_id] = group
        return group

    def _heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> CoordinatorResult:
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if not request.member_id:
            raise GroupError(Errors.INVALID_REQUEST)
        if joining and (request.subscribed_topics is None or request.rebalance_timeout_ms < 0):
            raise GroupError(Errors.INVALID_REQUEST)
        if request.instance_id is not None:
            raise GroupError(Errors.INVALID_REQUEST)  # static members: not modelled
        new_group = request.group not in self.consumer_groups
        group = self._consumer_group(request.group, joining)
        before = None if new_group else group.copy()
        member = group.members.get(request.member_id)
        is_new = member is None
        if member is None:
            if not joining:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID)
            member = ConsumerGroupMember(request.member_id)
        else:
            _validate_epoch(member, request.member_epoch, request.owned)
        updated = replace(
            member,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms >= 0
                else member.rebalance_timeout_ms
            ),
            subscribed_topics=(
                tuple(sorted(request.subscribed_topics))
                if request.subscribed_topics is not None
                else member.subscribed_topics
            ),
            client_id=request.client_id or member.client_id,
        )
        changed = is_new or updated != member
        bump = (
            is_new
            or group.group_epoch == 0
            or updated.subscribed_topics != member.subscribed_topics
        )
        if changed:
            group.update_member(updated)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch and self._assignment_due(group):
            self._update_target_assignment(group)
            changed = True
        target = group.target.get(updated.member_id, frozenset())
        reconciled = self._maybe_reconcile(group, updated, target, request.owned)
        changed = changed or reconciled is not updated
        self._schedule_session_timeout(group.group_id, updated.member_id)
        full = (
            request.rebalance_timeout_ms >= 0
            and request.subscribed_topics is not None
            and request.owned is not None
        )
        send_assignment = joining or full or reconciled.assigned != member.assigned
        answer = HeartbeatAnswer(
            Errors.NONE,
            reconciled.member_id,
            reconciled.member_epoch,
            self.config.consumer_heartbeat_interval_ms,
            tuple(sorted(reconciled.assigned)) if send_assignment else None,
        )
        if not changed:
            return CoordinatorResult(response=answer)
        return self._written(group, before, answer)

    def _written(
        self, group: ConsumerGroup, before: ConsumerGroup | None, answer: object
    ) -> CoordinatorResult:
        """The group's record, and its restoration if the write fails."""
        group_id = group.group_id

        def on_written(error: Errors) -> None:
            if error is Errors.NONE or self.consumer_groups.get(group_id) is not group:
                return
            if before is None:
                del self.consumer_groups[group_id]
            else:
                self.consumer_groups[group_id] = before

        return CoordinatorResult([group.record()], answer, on_written)

    def _assignment_due(self, group: ConsumerGroup) -> bool:
        """KIP-1263 (``canComputeNextTargetAssignment``): a new target assignment may be
        computed when the interval is 0, the group has none computed yet, or the interval
        has passed since the last one."""
        interval = self.config.consumer_assignment_interval_ms
        last = group.assignment_time_ms
        return interval <= 0 or last is None or self.clock() - last >= interval

    def _update_target_assignment(self, group: ConsumerGroup) -> None:
        """``updateTargetAssignment``: the uniform assignor over the members (in member-id
        order) and the subscribed topics' partitions, sticky to the previous target."""
        members = sorted(group.members)
        topics = group.subscribed_topics()
        counts = {t: self.partition_count(t) for t in topics}
        group.target = uniform_assign(members, topics, counts, group.target)
        group.assignment_epoch = group.group_epoch
        group.assignment_time_ms = self.clock()

    def _maybe_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        target: frozenset[TopicPartition],
        owned: tuple[TopicPartition, ...] | None,
    ) -> ConsumerGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(
            member,
            group.assignment_epoch,
            target,
            group.partition_epochs,
            owned,
            legacy=not self.config.strict_partition_epochs,
        )
        if updated == member:
            return member
        group.update_member(updated)
        key = rebalance_timeout_key(group.group_id, member.member_id)
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_rebalance_timeout(group.group_id, updated)
        else:
            self.timer.cancel(key)
        return updated

    # -- leaving and fencing ----------------------------------------------------------------
    def _consumer_group_leave(self, request: ConsumerGroupHeartbeatRequest) -> CoordinatorResult:
        group = self._consumer_group(request.group, False)
        member = group.member(request.member_id)
        answer = HeartbeatAnswer(Errors.NONE, request.member_id, request.member_epoch)
        return self._fence(group, member, answer)

    def _fence(
        self, group: ConsumerGroup, member: ConsumerGroupMember, answer: object = None
    ) -> CoordinatorResult:
        """``consumerGroupFenceMembers``: remove the member (its partitions are free at
        once), bump the group epoch, cancel its timers."""
        before = group.copy()
        group.remove_member(member.member_id)
        group.group_epoch += 1
        self.timer.cancel(session_timeout_key(group.group_id, member.member_id))
        self.timer.cancel(rebalance_timeout_key(group.group_id, member.member_id))
        return self._written(group, before, answer)

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(
            session_timeout_key(group_id, member_id),
            self.config.consumer_session_timeout_ms,
            lambda: self._fence_operation(group_id, member_id, None),
        )

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        """The member must finish revoking within its rebalance timeout, at its epoch."""
        member_id, epoch = member.member_id, member.member_epoch
        self.timer.schedule(
            rebalance_timeout_key(group_id, member_id),
            member.rebalance_timeout_ms,
            lambda: self._fence_operation(group_id, member_id, epoch),
        )

    def _fence_operation(
        self, group_id: str, member_id: str, epoch: int | None
    ) -> CoordinatorResult:
        """An expired session (``epoch`` None), or a revocation deadline missed at ``epoch``."""
        group = self.consumer_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return CoordinatorResult()
        if epoch is not None and member.member_epoch != epoch:
            return CoordinatorResult()
        return self._fence(group, member)

    # -- offsets ----------------------------------------------------------------------------
    def validate_consumer_group_commit(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        transactional: bool,
        partitions: Iterable[TopicPartition] = (),
    ) -> Errors:
        """``ConsumerGroup.validateOffsetCommit`` of the committed ``partitions`` (their
        assignment epochs since KIP-1251, the config's ``commit_assignment_epochs``); a
        TxnOffsetCommit's STALE_MEMBER_EPOCH is ILLEGAL_GENERATION
        (``OffsetMetadataManager.validateTransactionalOffsetCommit``) up to its version 5,
        STALE_MEMBER_EPOCH from version 6 (KIP-1319, ``txn_offset_commit_v6``)."""
        try:
            group.validate_offset_commit(
                member_id,
                instance_id,
                member_epoch,
                transactional,
                partitions,
                self.config.commit_assignment_epochs,
            )
        except GroupError as e:
            if (
                transactional
                and e.error is Errors.STALE_MEMBER_EPOCH
                and not self.config.txn_offset_commit_v6
            ):
                return Errors.ILLEGAL_GENERATION
            return e.error
        return Errors.NONE

    # -- load -------------------------------------------------------------------------------
    def replay_consumer_group(self, record: ConsumerGroupRecord) -> None:
        self.groups.pop(record.group, None)
        self.consumer_groups[record.group] = ConsumerGroup.replay(
            record, self.config.strict_partition_epochs
        )

    def consumer_groups_loaded(self) -> None:
        """``onLoaded``: every member's session starts now, and a member still revoking gets
        its rebalance timeout again."""
        for group_id in sorted(self.consumer_groups):
            group = self.consumer_groups[group_id]
            for member_id in sorted(group.members):
                member = group.members[member_id]
                self._schedule_session_timeout(group_id, member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group_id, member)


def _validate_epoch(
    member: ConsumerGroupMember, epoch: int, owned: tuple[TopicPartition, ...] | None
) -> None:
    """``throwIfConsumerGroupMemberEpochIsInvalid``: the previous epoch is accepted when the
    member owns no more than its assignment (the answer with the new epoch may be lost)."""
    if epoch > member.member_epoch:
        raise GroupError(Errors.FENCED_MEMBER_EPOCH)
    if epoch < member.member_epoch:
        subset = owned is not None and all(tp in member.assigned for tp in owned)
        if epoch != member.previous_member_epoch or not subset:
            raise GroupError(Errors.FENCED_MEMBER_EPOCH)
