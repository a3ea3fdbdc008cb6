"""ClassicGroup: a consumer group of the classic protocol as its coordinator holds it.

Kafka's ``org.apache.kafka.coordinator.group.classic`` package (trunk of late 2024):
:class:`ClassicGroupState` with its table of valid previous states
(``ClassicGroupState.java:111-117``), :class:`ClassicGroupMember` and :class:`ClassicGroup`.
Pure state, no time and no I/O: :mod:`group_metadata_manager` decides what a request does,
the runtime (:mod:`runtime`) gives it a log and a clock.

A join or sync answer the coordinator parks is the member's ``awaiting_join`` /
``awaiting_sync``: a callable taking the response (Kafka's ``CompletableFuture``), completed
once by :meth:`ClassicGroup.complete_join` / :meth:`ClassicGroup.complete_sync`.

Departure: Kafka keeps ``members`` in a ``HashMap`` and elects leaders and counts protocol
votes in its iteration order; here ``members`` is insertion-ordered (docs/model.md).

To extend: a new group-level check is a method here next to :meth:`ClassicGroup.validate_member`
(named after Kafka's), and a new member field goes on :class:`ClassicGroupMember` and, if it
must survive a coordinator failover, on :class:`MemberMetadata` in :mod:`group_metadata_manager`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from eosim.simulation.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    Errors,
    GroupProtocol,
    JoinGroupMember,
)


class ClassicGroupState(Enum):
    """``ClassicGroupState``: its names are what DescribeGroups shows."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = ClassicGroupState
# ClassicGroupState's static block (ClassicGroupState.java:111-117): target -> the states a
# group may move to it from. DEAD -> DEAD is legal (ClassicGroupTest.testDeadToDeadIllegalTransition
# asserts that the transition succeeds, despite its name).
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(
        {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}
    ),
}


class IllegalStateError(Exception):
    """Kafka's IllegalStateException from the group's own invariants."""


class GroupError(Exception):
    """A request refused with ``error`` (Kafka throws ``error.exception()``)."""

    def __init__(self, error: Errors) -> None:
        super().__init__(error.name)
        self.error = error


Respond = Callable[[object], None]


@dataclass(eq=False)
class ClassicGroupMember:
    """``ClassicGroupMember``. ``protocols`` is the member's list in order of preference;
    ``assignment`` what the leader gave it (None: none yet)."""

    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[GroupProtocol, ...]
    assignment: object = None
    is_new: bool = False
    awaiting_join: Respond | None = None
    awaiting_sync: Respond | None = None

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def has_satisfied_heartbeat(self) -> bool:
        """``ClassicGroupMember.hasSatisfiedHeartbeat`` (ClassicGroupMember.java:208-216): a new
        member can expire while it awaits its join; an existing one awaiting a join or sync
        answer is alive by definition."""
        if self.is_new:
            return False
        return self.is_awaiting_join() or self.is_awaiting_sync()

    def matches(self, protocols: tuple[GroupProtocol, ...]) -> bool:
        """``ClassicGroupMember.matches``: the same protocols, order and metadata."""
        return tuple(protocols) == tuple(self.protocols)

    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def metadata(self, protocol: str) -> object:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """``ClassicGroupMember.vote``: its first protocol among ``candidates``."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError("Member does not support any of the candidate protocols")


@dataclass(eq=False)
class ClassicGroup:
    """``ClassicGroup``: state, generation, protocol, leader and members of one group."""

    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    previous_state: ClassicGroupState | None = None
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    # instance id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    # insertion-ordered sets
    pending_members: dict[str, None] = field(default_factory=dict)
    pending_sync: dict[str, None] = field(default_factory=dict)
    new_member_added: bool = False
    supported_protocols: dict[str, int] = field(default_factory=dict)
    num_awaiting_join: int = 0

    # -- state -------------------------------------------------------------------------------
    def is_in_state(self, state: ClassicGroupState) -> bool:
        return self.state is state

    def transition_to(self, target: ClassicGroupState) -> None:
        """``ClassicGroup.transitionTo`` / ``assertValidTransition`` (ClassicGroup.java:1002,
        1473): refused unless the current state is one of the target's valid previous ones."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateError(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} states before moving "
                f"to {target.value} state. Instead it is in {self.state.value} state."
            )
        self.previous_state = self.state
        self.state = target

    def can_rebalance(self) -> bool:
        """``ClassicGroup.canRebalance``: PREPARING_REBALANCE may be entered from here."""
        return self.state in VALID_PREVIOUS_STATES[ClassicGroupState.PREPARING_REBALANCE]

    def is_simple_group(self) -> bool:
        """No member ever joined (a group that only stores offsets, ``isSimpleGroup``)."""
        return self.protocol_type is None

    # -- members -----------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        member = self.members.get(member_id)
        if member is None:
            raise IllegalStateError(f"Member {member_id} not found in group {self.group_id}")
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def add(self, member: ClassicGroupMember, respond: Respond | None = None) -> None:
        """``ClassicGroup.add`` (ClassicGroup.java:429-465)."""
        if member.instance_id is not None:
            if member.instance_id in self.static_members:
                raise IllegalStateError(
                    f"Static member with groupInstanceId={member.instance_id} cannot be added "
                    f"to group {self.group_id} since it is already a member."
                )
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise IllegalStateError("The group and member's protocol type must be the same.")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise IllegalStateError("None of the member's protocols can be supported.")
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = respond
        if member.is_awaiting_join():
            self.num_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        """``ClassicGroup.remove`` (ClassicGroup.java:471-496): a removed leader's successor is
        the first remaining member."""
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.is_awaiting_join():
                self.num_awaiting_join -= 1
            if removed.instance_id is not None:
                self.static_members.pop(removed.instance_id, None)
        if self.is_leader(member_id):
            self.leader = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: tuple[GroupProtocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: Respond | None,
    ) -> None:
        """``ClassicGroup.updateMember`` (ClassicGroup.java:1207-1226)."""
        self._count_protocols(member, -1)
        member.protocols = tuple(protocols)
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if respond is not None and not member.is_awaiting_join():
            self.num_awaiting_join += 1
        elif respond is None and member.is_awaiting_join():
            self.num_awaiting_join -= 1
        member.awaiting_join = respond

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """``ClassicGroup.replaceStaticMember`` (ClassicGroup.java:543-597): the old member's
        parked join and sync answers get FENCED_INSTANCE_ID; the new member takes its place
        (and its leadership)."""
        removed = self.members.pop(old_member_id, None)
        if removed is None:
            raise ValueError(f"Cannot replace non-existing member id {old_member_id}")
        self.complete_join(removed, _join_error(old_member_id, Errors.FENCED_INSTANCE_ID))
        self.complete_sync(removed, _sync_error(Errors.FENCED_INSTANCE_ID))
        new = ClassicGroupMember(
            new_member_id,
            removed.instance_id,
            removed.session_timeout_ms,
            removed.rebalance_timeout_ms,
            removed.protocol_type,
            removed.protocols,
            removed.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> bool:
        if self.has_member(member_id):
            raise IllegalStateError(
                f"Attempt to add pending member {member_id} which is already a stable member "
                "of the group."
            )
        added = member_id not in self.pending_members
        self.pending_members[member_id] = None
        return added

    def add_pending_sync_member(self, member_id: str) -> bool:
        if not self.has_member(member_id):
            raise IllegalStateError(f"Attempt to add pending sync member {member_id}")
        added = member_id not in self.pending_sync
        self.pending_sync[member_id] = None
        return added

    def remove_pending_sync_member(self, member_id: str) -> bool:
        if not self.has_member(member_id):
            raise IllegalStateError(f"Attempt to remove pending sync member {member_id}")
        return self.pending_sync.pop(member_id, False) is None

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join()]

    def has_all_members_joined(self) -> bool:
        """``ClassicGroup.hasAllMembersJoined``: every member parked a join, none pending."""
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        """``ClassicGroup.rebalanceTimeoutMs`` (ClassicGroup.java:760-766): the largest
        member's (a consumer's is its max.poll.interval.ms)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """``ClassicGroup.maybeElectNewJoinedLeader`` (ClassicGroup.java:503-531): keep a leader
        that rejoined, else take the first member that did; False if none did (or no leader)."""
        if self.leader is None:
            return False
        if self.member(self.leader).is_awaiting_join():
            return True
        for member in self.members.values():
            if member.is_awaiting_join():
                self.leader = member.member_id
                return True
        return False

    # -- validation ---------------------------------------------------------------------------
    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """``ClassicGroup.validateMember`` (ClassicGroup.java:791-811): a static member's
        instance id must map to ``member_id`` (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID if
        it maps to nothing); the member must exist."""
        if instance_id is not None:
            existing = self.static_member_id(instance_id)
            if existing is None:
                raise GroupError(Errors.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise GroupError(Errors.FENCED_INSTANCE_ID)
        if not self.has_member(member_id):
            raise GroupError(Errors.UNKNOWN_MEMBER_ID)

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        transactional: bool,
        checks_generation: bool = True,
    ) -> None:
        """``ClassicGroup.validateOffsetCommit`` (ClassicGroup.java:823-862), raising
        :class:`GroupError`:

        * a Dead group: COORDINATOR_NOT_AVAILABLE;
        * generation < 0 while Empty: accepted (a consumer without group management);
        * a request naming a member or generation: the member must be valid and the
          generation the group's (ILLEGAL_GENERATION), in any state: an old generation's
          commit is accepted during PreparingRebalance while that generation is current;
        * no member nor generation: a plain commit only while Empty (UNKNOWN_MEMBER_ID),
          a transactional one in any state (EOS before KIP-447);
        * a plain commit during CompletingRebalance: REBALANCE_IN_PROGRESS.

        ``checks_generation=False`` is the what-if rule ``offset_commit_checks_generation``
        off: the member and generation checks are skipped (Kafka before KIP-447 for
        TxnOffsetCommit; never Kafka for OffsetCommit)."""
        if self.is_in_state(ClassicGroupState.DEAD):
            raise GroupError(Errors.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and self.is_in_state(ClassicGroupState.EMPTY):
            return
        if not checks_generation:
            return
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation != self.generation:
                raise GroupError(Errors.ILLEGAL_GENERATION)
        elif not transactional and not self.is_in_state(ClassicGroupState.EMPTY):
            raise GroupError(Errors.UNKNOWN_MEMBER_ID)
        if not transactional and self.is_in_state(ClassicGroupState.COMPLETING_REBALANCE):
            raise GroupError(Errors.REBALANCE_IN_PROGRESS)

    # -- protocols -----------------------------------------------------------------------------
    def _count_protocols(self, member: ClassicGroupMember, delta: int) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def candidate_protocols(self) -> set[str]:
        return {n for n, c in self.supported_protocols.items() if c == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: tuple[str, ...]) -> bool:
        """``ClassicGroup.supportsProtocols`` (ClassicGroup.java:1121-1132): an Empty group
        takes any non-empty type and list; otherwise the type must match and one of the
        protocols be supported by every member."""
        if self.is_in_state(ClassicGroupState.EMPTY):
            return protocol_type != "" and len(names) > 0
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(n, 0) == len(self.members) for n in names
        )

    def select_protocol(self) -> str:
        """``ClassicGroup.selectProtocol`` (ClassicGroup.java:1017-1043): each member votes for
        its first protocol that every member supports; the most votes wins. Ties go to the
        protocol first voted for (Kafka: its HashMap's order; a departure)."""
        if not self.members:
            raise IllegalStateError("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=lambda n: votes[n])

    # -- generations ---------------------------------------------------------------------------
    def init_next_generation(self) -> None:
        """``ClassicGroup.initNextGeneration`` (ClassicGroup.java:1301-1313): the generation
        goes up; with members the group picks a protocol and awaits the leader's assignment,
        without it is Empty."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY)
        self.pending_sync.clear()

    def current_members(self) -> tuple[JoinGroupMember, ...]:
        """``currentClassicGroupMembers``: what the leader's JoinGroup answer lists."""
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    # -- parked answers ------------------------------------------------------------------------
    def complete_join(self, member: ClassicGroupMember, response: object) -> bool:
        """``ClassicGroup.completeJoinFuture``."""
        if member.awaiting_join is None:
            return False
        respond, member.awaiting_join = member.awaiting_join, None
        self.num_awaiting_join -= 1
        respond(response)
        return True

    def complete_all_joins(self, error: Errors) -> None:
        for member_id, member in list(self.members.items()):
            self.complete_join(member, _join_error(member_id, error))

    def complete_sync(self, member: ClassicGroupMember, response: object) -> bool:
        """``ClassicGroup.completeSyncFuture``."""
        if member.awaiting_sync is None:
            return False
        respond, member.awaiting_sync = member.awaiting_sync, None
        respond(response)
        return True

    def complete_all_syncs(self, error: Errors) -> None:
        for member in list(self.members.values()):
            self.complete_sync(member, _sync_error(error))


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    """A JoinGroup answer before it has a correlation id (the runtime adds it)."""

    error: Errors
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = NO_GENERATION
    protocol_name: str | None = None
    protocol_type: str | None = None
    leader: str | None = None
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    """A SyncGroup answer before it has a correlation id."""

    error: Errors
    assignment: object = None
    protocol_name: str | None = None
    protocol_type: str | None = None


def _join_error(member_id: str, error: Errors) -> JoinAnswer:
    return JoinAnswer(error, member_id)


def _sync_error(error: Errors) -> SyncAnswer:
    return SyncAnswer(error)
