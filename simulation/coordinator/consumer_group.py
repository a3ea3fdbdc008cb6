"""ConsumerGroup: a KIP-848 consumer group as its coordinator holds it (``group.protocol=
consumer``), with its members, its target assignment and its partition epochs.

Kafka 4.1.1's ``modern/consumer/ConsumerGroup``, ``ConsumerGroupMember``,
``CurrentAssignmentBuilder`` and ``assignor/UniformHomogeneousAssignmentBuilder``
(``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/``):

* **Three epochs.** The *group epoch* moves when membership or a subscription changes; the
  *assignment epoch* catches up with it when the server-side assignor has computed the target
  assignment for that epoch; each member's *member epoch* catches up with the assignment epoch
  through its own reconciliation, one heartbeat at a time.
* **Member states** (:class:`MemberState`): STABLE; UNREVOKED_PARTITIONS (the member must
  first give up partitions and stays at its epoch until its heartbeat no longer owns them);
  UNRELEASED_PARTITIONS (at the new epoch, waiting for partitions another member still
  holds).
* **Partition epochs.** ``partition_epochs[tp]`` is the epoch of the member that holds ``tp``
  (assigned, or pending revocation). A partition is handed to a new owner only when it has
  none, so two live members never own one partition at once. KAFKA-16147 (3.7) lost that
  bookkeeping when a member's pending revocation was re-assigned to it; the fix's strict
  checks are here (an inconsistent update raises :class:`IllegalStateError`).
* **Group state** (``ConsumerGroup.updateGroupState``): EMPTY without members, ASSIGNING while
  the group epoch is ahead of the assignment epoch, RECONCILING while some member is not at
  the assignment epoch in STABLE, else STABLE.
* **Assignment epochs** (KIP-1251, Kafka 4.3): each partition a member holds remembers the
  member epoch at which the member got it (``assignment_epochs``), which a commit at an older
  member epoch is checked against when the rule ``consumer_commit_assignment_epochs`` is on.

Departures (docs/model.md): topics are known by name (Kafka assigns by topic id); members are
visited in member-id order by the assignor (Kafka's ``memberIds()`` is a hash set); racks,
regular-expression subscriptions and the ``range`` server assignor are not modelled.

To extend: a new member field is a field of :class:`ConsumerGroupMember` (frozen: a change is
a new member through :func:`dataclasses.replace`), written by :meth:`ConsumerGroup.record` and
read back by :meth:`ConsumerGroup.replay`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from eosim.simulation.coordinator.classic_group import GroupError, IllegalStateError
from eosim.simulation.protocol import Errors, TopicPartition

# ConsumerGroupHeartbeatRequest: the epochs a member sends to join, to leave, and to leave
# for a while as a static member.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Partitions = frozenset[TopicPartition]
NO_PARTITIONS: Partitions = frozenset()


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(Enum):
    """``modern/MemberState``."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """``ConsumerGroupMember``: who the member is, what it subscribes to, and where its
    reconciliation stands."""

    member_id: str
    instance_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    rebalance_timeout_ms: int = 300_000
    subscribed_topics: tuple[str, ...] = ()
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS
    client_id: str = ""
    # KIP-1251: (partition, the member epoch at which the member got it) of every partition
    # assigned or pending revocation, in partition order (Kafka's assignedPartitions and
    # partitionsPendingRevocation with their epochs).
    assignment_epochs: tuple[tuple[TopicPartition, int], ...] = ()

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def assignment_epoch(self, tp: TopicPartition) -> int | None:
        """The member epoch at which the member got ``tp``, while it holds it (assigned or
        pending revocation); None otherwise."""
        if tp not in self.assigned and tp not in self.pending_revocation:
            return None
        return next((epoch for held, epoch in self.assignment_epochs if held == tp), None)

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """``Builder.updateMemberEpoch``: the previous epoch is the one left, also when the
        epoch does not change (every reconciliation step calls it)."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """What a change to a consumer group writes to ``__consumer_offsets``. Kafka writes one
    record per changed piece (ConsumerGroupMetadata for the epoch, ConsumerGroupMemberMetadata,
    ConsumerGroupTargetAssignmentMember/Metadata, ConsumerGroupCurrentMemberAssignment) in
    one batch; here the batch is one record holding the group as it then is, which replays
    to the same state. ``members`` empty and ``deleted`` set is the group's tombstone."""

    group: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ConsumerGroupMember, ...]
    target: tuple[tuple[str, tuple[TopicPartition, ...]], ...]
    # KIP-1263: when the target assignment was last computed (Kafka's AssignmentTimestamp of
    # the target assignment metadata record), None if never.
    assignment_time_ms: float | None = None


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    # member id -> its partitions in the target assignment
    target: dict[str, Partitions] = field(default_factory=dict)
    partition_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    # KAFKA-16147: False keeps 3.7's bookkeeping (the rule consumer_partition_epochs).
    strict_partition_epochs: bool = True
    dead: bool = False
    # When the target assignment was last computed (KIP-1263's interval runs from it); None:
    # never.
    assignment_time_ms: float | None = None

    # -- state --------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def member(self, member_id: str) -> ConsumerGroupMember:
        """``getOrMaybeCreateMember(memberId, false)``: UNKNOWN_MEMBER_ID if absent."""
        found = self.members.get(member_id)
        if found is None:
            raise GroupError(Errors.UNKNOWN_MEMBER_ID)
        return found

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def current_partition_epoch(self, tp: TopicPartition) -> int:
        return self.partition_epochs.get(tp, -1)

    def subscribed_topics(self) -> tuple[str, ...]:
        return tuple(sorted({t for m in self.members.values() for t in m.subscribed_topics}))

    # -- members and partition epochs (ConsumerGroup.updateMember / removeMember) --------
    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self._update_partition_epochs(old, new)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            expected = old.member_epoch if self.strict_partition_epochs else None
            self._remove_epochs(old.assigned, expected)
            self._remove_epochs(old.pending_revocation, expected)
        self.target.pop(member_id, None)

    def _update_partition_epochs(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember
    ) -> None:
        if self.strict_partition_epochs:
            # KAFKA-16147's fix: drop everything the old member held at its epoch, then add.
            if old is not None:
                self._remove_epochs(old.assigned, old.member_epoch)
                self._remove_epochs(old.pending_revocation, old.member_epoch)
            self._add_epochs(new.assigned, new.member_epoch)
            self._add_epochs(new.pending_revocation, new.member_epoch)
            return
        # 3.7: each set is updated only when it changed, the assigned set first, so a
        # partition moving from pending revocation back to assigned loses its epoch.
        if old is None:
            self._add_epochs(new.assigned, new.member_epoch)
            self._add_epochs(new.pending_revocation, new.member_epoch)
            return
        if old.assigned != new.assigned:
            self._remove_epochs(old.assigned, None)
            self._add_epochs(new.assigned, new.member_epoch)
        if old.pending_revocation != new.pending_revocation:
            self._remove_epochs(old.pending_revocation, None)
            self._add_epochs(new.pending_revocation, new.member_epoch)

    def _remove_epochs(self, partitions: Partitions, expected: int | None) -> None:
        for tp in sorted(partitions):
            previous = self.partition_epochs.pop(tp, None)
            if expected is not None and previous != expected:
                raise IllegalStateError(
                    f"cannot remove epoch {expected} from {tp[0]}-{tp[1]}: "
                    f"it is owned at epoch {previous}"
                )

    def _add_epochs(self, partitions: Partitions, epoch: int) -> None:
        for tp in sorted(partitions):
            previous = self.partition_epochs.get(tp)
            if self.strict_partition_epochs and previous is not None:
                raise IllegalStateError(
                    f"cannot set the epoch of {tp[0]}-{tp[1]} to {epoch}: "
                    f"it is still owned at epoch {previous}"
                )
            self.partition_epochs[tp] = epoch

    # -- offsets --------------------------------------------------------------------------
    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        transactional: bool,
        partitions: Iterable[TopicPartition] = (),
        assignment_epochs: bool = False,
    ) -> None:
        """``ConsumerGroup.validateOffsetCommit`` (``ConsumerGroup.java:646-672``): a commit
        without an epoch is accepted only while the group has no member; a transactional one
        naming nobody is accepted; otherwise the member must exist and the epoch must equal
        its current one (STALE_MEMBER_EPOCH; there is no check of which partitions it owns).

        ``assignment_epochs`` (KIP-1251, Kafka 4.3, the rule
        ``consumer_commit_assignment_epochs``): an older epoch is accepted if the member still
        holds every partition of the commit (``partitions``), assigned or pending revocation,
        at an assignment epoch not above it (``createAssignmentEpochValidator``); a newer
        one is still STALE_MEMBER_EPOCH."""
        if member_epoch < 0 and not self.members:
            return
        if transactional and member_epoch < 0 and not member_id and instance_id is None:
            return
        member = self.member(member_id)
        if member_epoch == member.member_epoch:
            return
        if not assignment_epochs or member_epoch > member.member_epoch:
            raise GroupError(Errors.STALE_MEMBER_EPOCH)
        for tp in partitions:
            epoch = member.assignment_epoch(tp)
            if epoch is None or member_epoch < epoch:
                raise GroupError(Errors.STALE_MEMBER_EPOCH)

    # -- records ---------------------------------------------------------------------------
    def record(self) -> ConsumerGroupRecord:
        return ConsumerGroupRecord(
            self.group_id,
            self.group_epoch,
            self.assignment_epoch,
            tuple(self.members[m] for m in sorted(self.members)),
            tuple((m, tuple(sorted(self.target[m]))) for m in sorted(self.target)),
            self.assignment_time_ms,
        )

    @classmethod
    def replay(cls, record: ConsumerGroupRecord, strict: bool = True) -> ConsumerGroup:
        group = cls(
            record.group,
            record.group_epoch,
            record.assignment_epoch,
            strict_partition_epochs=strict,
            assignment_time_ms=record.assignment_time_ms,
        )
        for member in record.members:
            group.update_member(member)
        group.target = {m: frozenset(parts) for m, parts in record.target}
        return group

    def copy(self) -> ConsumerGroup:
        """A copy to restore if the write of a change fails (members are immutable)."""
        return ConsumerGroup(
            self.group_id,
            self.group_epoch,
            self.assignment_epoch,
            dict(self.members),
            dict(self.target),
            dict(self.partition_epochs),
            self.strict_partition_epochs,
            self.dead,
            self.assignment_time_ms,
        )


# -- reconciliation (CurrentAssignmentBuilder) ---------------------------------------------
def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    partition_epoch: dict[TopicPartition, int],
    owned: tuple[TopicPartition, ...] | None,
    legacy: bool = False,
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.build`` (4.1.1): the member's next step towards the target
    assignment of ``target_epoch``, given the partitions it says it owns (None: not said).

    ``legacy`` is 3.7's builder for a member still revoking when a new target arrives
    (``transitionToNewTargetAssignmentState``, KAFKA-16147's trigger): the partitions pending
    revocation that the new target gives back are taken back at once, where 4.1.1 waits for
    the revocation to finish first."""
    if legacy and member.state is MemberState.UNREVOKED_PARTITIONS:
        held = member.assigned | member.pending_revocation
        if member.pending_revocation & target and not (held - target):
            member = replace(member, assigned=held, pending_revocation=NO_PARTITIONS)
            return _next_assignment(
                member, member.member_epoch, target_epoch, target, partition_epoch, owned
            )
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(
                member, member.member_epoch, target_epoch, target, partition_epoch, owned
            )
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned
        )
    return _next_assignment(
        member, member.member_epoch, target_epoch, target, partition_epoch, owned
    )


def _owns_any(owned: tuple[TopicPartition, ...] | None, partitions: Partitions) -> bool:
    """``ownsRevokedPartitions``: an unknown owned set counts as owning them."""
    if owned is None:
        return True
    return any(tp in partitions for tp in owned)


def _next_assignment(
    member: ConsumerGroupMember,
    epoch: int,
    target_epoch: int,
    target: Partitions,
    partition_epoch: dict[TopicPartition, int],
    owned: tuple[TopicPartition, ...] | None,
) -> ConsumerGroupMember:
    """``computeNextAssignment``: keep what the target keeps; revoke the rest first; take new
    partitions only once nobody else holds them."""
    kept = member.assigned & target
    revoking = member.assigned - kept
    wanted = target - kept
    free = frozenset(tp for tp in wanted if partition_epoch.get(tp, -1) == -1)
    unreleased = wanted != free
    if revoking and _owns_any(owned, revoking):
        return replace(
            member.with_epoch(epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
            assignment_epochs=_assignment_epochs(member, member.assigned, NO_PARTITIONS, 0),
        )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(
        member.with_epoch(target_epoch),
        state=state,
        assigned=kept | free,
        pending_revocation=NO_PARTITIONS,
        assignment_epochs=_assignment_epochs(member, kept, free, target_epoch),
    )


def _assignment_epochs(
    member: ConsumerGroupMember, kept: Partitions, new: Partitions, epoch: int
) -> tuple[tuple[TopicPartition, int], ...]:
    """KIP-1251's epochs after a step: the partitions ``kept`` (assigned, or now pending
    revocation) keep theirs, the ``new`` ones are the target epoch's (``epoch``;
    ``computeNextAssignment``)."""
    epochs = {tp: e for tp, e in member.assignment_epochs if tp in kept}
    epochs.update(dict.fromkeys(new, epoch))
    return tuple(sorted(epochs.items()))


# -- the server-side assignor (UniformHomogeneousAssignmentBuilder) -------------------------
def uniform_assign(
    members: list[str],
    topics: tuple[str, ...],
    partition_counts: dict[str, int],
    previous: dict[str, Partitions],
) -> dict[str, Partitions]:
    """``UniformHomogeneousAssignmentBuilder.build``: every member subscribes to ``topics``;
    each keeps what it had (the previous target) up to its quota, members visited in order
    take the extra partitions unless later ones must, and the partitions left go, in order,
    to the members below their quota."""
    if not members or not topics:
        return {m: NO_PARTITIONS for m in members}
    all_partitions = [(t, p) for t in topics for p in range(partition_counts.get(t, 0))]
    total = len(all_partitions)
    minimum, extra = divmod(total, len(members))
    held = {tp for m in members for tp in previous.get(m, NO_PARTITIONS)}
    unassigned = [tp for tp in all_partitions if tp not in held]
    result: dict[str, set[TopicPartition]] = {}
    unfilled: list[tuple[str, int]] = []
    for index, member in enumerate(members):
        quota = minimum
        has_extra = False
        if extra > 0:
            quota += 1
            has_extra = True
        keep: set[TopicPartition] = set()
        mine = sorted(tp for tp in previous.get(member, NO_PARTITIONS) if tp[0] in topics)
        for tp in mine:
            if quota > 0:
                keep.add(tp)
                quota -= 1
            else:
                unassigned.append(tp)
        if quota > 0 and has_extra and len(members) - index > extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member, quota))
        if has_extra:
            extra -= 1
        result[member] = keep
    i = 0
    for member, quota in unfilled:
        for _ in range(quota):
            if i >= len(unassigned):
                break
            result[member].add(unassigned[i])
            i += 1
    if i < len(unassigned):
        raise IllegalStateError("partitions were left unassigned")
    return {m: frozenset(parts) for m, parts in result.items()}
