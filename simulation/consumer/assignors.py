"""Client-side partition assignors of the classic group protocol (``ConsumerPartitionAssignor``)
and the rebalance protocol a consumer's list of them selects.

The group's leader runs the assignor named by the group's chosen protocol over every member's
subscription (``ConsumerCoordinator.onLeaderElected``) and sends the result in its SyncGroup.
Kafka 4.1.1's source, ``org/apache/kafka/clients/consumer/``:

* ``RangeAssignor``: per topic, the members subscribed to it in :func:`member_order`; each
  takes a contiguous range of ``partitions / members`` partitions, and the first
  ``partitions % members`` one more. eosim has no racks, so the rack-aware pass (KIP-881) never
  applies.
* ``RoundRobinAssignor``: every subscribed topic's partitions, topics in name order, dealt one
  at a time to the members in :func:`member_order`, skipping members not subscribed to the
  partition's topic.
* ``CooperativeStickyAssignor`` (:func:`cooperative_sticky_assignor`): the sticky assignor's
  constrained builder (``AbstractStickyAssignor.ConstrainedAssignmentBuilder``, for members
  that all subscribe to the same topics): each member keeps what it owned up to its quota
  (the floor or, for the first ``partitions % members`` members that own enough, the ceiling
  of ``partitions / members``); the rest go round robin to the members under quota. A
  partition that moves from one member to another is left out of this round (``adjustAssignment``):
  its owner revokes it and rejoins, and the next round gives it away. Owned partitions are
  read from the members' subscriptions with their generations: of two claims, the higher
  generation's wins; two claims in one generation both lose (``allSubscriptionsEqual``).
* :func:`rebalance_protocol`: ``ConsumerCoordinator``'s constructor keeps the protocols every
  configured assignor supports and takes the most advanced; the default list
  ``[range, cooperative-sticky]`` (``ConsumerConfig``) therefore gives EAGER.

Departures (docs/model.md): Kafka walks the members in the order of a ``HashMap`` of their
(random) member ids; the sticky assignor here walks them in :func:`member_order`. Members
with different subscriptions (the sticky assignors' general builder) are not modelled: a
scenario's group members all subscribe to one input topic.

Extending it: a new assignor is a function ``(partitions_per_topic, subscriptions) ->
assignment`` registered in :data:`ASSIGNORS` under Kafka's name for it, with the protocols it
supports in :data:`SUPPORTED_PROTOCOLS`; it must give every member an entry (an empty list
when it gets nothing) and must not depend on the order of a dict it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from eosim.simulation.protocol import TopicPartition


class RebalanceProtocol(IntEnum):
    """``ConsumerPartitionAssignor.RebalanceProtocol``; a higher id is more advanced."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member sends in its JoinGroup metadata, as far as the assignors read it
    (``ConsumerProtocolSubscription``): its topics, the partitions it owns now and the
    generation it owns them in (-1: none)."""

    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1


Assignment = dict[str, list[TopicPartition]]
Assignor = Callable[[Mapping[str, int], Mapping[str, Subscription]], Assignment]


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """``AbstractPartitionAssignor.MemberInfo.compareTo``: static members first, by
    ``group.instance.id``, then dynamic members by member id."""

    def key(member: str) -> tuple[int, str]:
        instance = subscriptions[member].group_instance_id
        return (0, instance) if instance is not None else (1, member)

    return sorted(subscriptions, key=key)


def range_assignor(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    """``RangeAssignor.assign`` without racks."""
    assignment: Assignment = {member: [] for member in sorted(subscriptions)}
    order = member_order(subscriptions)
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        members = [m for m in order if topic in subscriptions[m].topics]
        if count <= 0 or not members:
            continue
        per_member, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            take = per_member + (1 if i < extra else 0)
            assignment[member].extend((topic, p) for p in range(start, start + take))
            start += take
    return assignment


def round_robin_assignor(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    """``RoundRobinAssignor.assign``."""
    assignment: Assignment = {member: [] for member in sorted(subscriptions)}
    order = member_order(subscriptions)
    if not order:
        return assignment
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    cursor = 0
    for topic in topics:
        for partition in range(partitions_per_topic.get(topic, 0)):
            # CircularIterator: skip members not subscribed to this topic (one is).
            while topic not in subscriptions[order[cursor % len(order)]].topics:
                cursor += 1
            assignment[order[cursor % len(order)]].append((topic, partition))
            cursor += 1
    return assignment


def _owned_partitions(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """``allSubscriptionsEqual``'s bookkeeping: each member's owned partitions that still
    exist, a partition claimed by two members going to the higher generation, and the
    partitions claimed twice in one generation (taken from both)."""
    owned: dict[str, list[TopicPartition]] = {}
    owner: dict[TopicPartition, str] = {}
    doubly: set[TopicPartition] = set()
    for member in member_order(subscriptions):
        subscription = subscriptions[member]
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in subscription.owned_partitions:
            if tp[0] not in partitions_per_topic:
                continue
            other = owner.get(tp)
            if other is None:
                mine.append(tp)
                owner[tp] = member
                continue
            theirs = subscriptions[other].generation
            if subscription.generation == theirs:
                doubly.add(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner[tp] = member
            elif subscription.generation > theirs:
                mine.append(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner[tp] = member
    return owned, doubly


def cooperative_sticky_assignor(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> Assignment:
    """``CooperativeStickyAssignor.assignPartitions`` for members that all subscribe to the
    same topics (``ConstrainedAssignmentBuilder``, no racks), without the partitions that
    change owner in this round. Raises ValueError for different subscriptions."""
    topic_sets = {frozenset(s.topics) for s in subscriptions.values()}
    if len(topic_sets) > 1:
        raise ValueError("cooperative-sticky with different subscriptions is not modelled")
    if not subscriptions:
        return {}
    owned, doubly = _owned_partitions(partitions_per_topic, subscriptions)
    total = sum(max(n, 0) for n in partitions_per_topic.values())
    members = len(owned)
    min_quota, max_quota = total // members, -(-total // members)
    expected_over_min = total % members
    over_min = 0
    assignment: Assignment = {member: [] for member in owned}
    maybe_revoked: dict[TopicPartition, str] = {}
    under_min: list[str] = []
    exactly_min: list[str] = []
    assigned: set[TopicPartition] = set()

    # 1. Each member keeps what it owned, up to its quota (assignOwnedPartitions).
    for member, partitions in owned.items():
        mine = sorted((tp for tp in partitions if tp not in doubly), key=lambda tp: (tp[1], tp[0]))
        if len(mine) < min_quota:
            keep = mine
            under_min.append(member)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
            keep = mine[:max_quota]
        else:
            keep = mine[:min_quota]
            if over_min < expected_over_min:
                exactly_min.append(member)
        assignment[member].extend(keep)
        assigned.update(keep)
        for tp in mine[len(keep) :]:
            maybe_revoked[tp] = member

    # 2. The rest, round robin over the members under quota, then those at the floor
    # (assignRoundRobin).
    unassigned = [
        (topic, p)
        for topic in sorted(partitions_per_topic)
        for p in range(partitions_per_topic[topic])
        if (topic, p) not in assigned
    ]
    under_min.sort()
    exactly_min.sort()
    transferring: dict[TopicPartition, str] = {}
    cursor = 0  # the under-quota iterator: the index of its next member
    for tp in unassigned:
        from_under = cursor < len(under_min)
        if from_under:
            member = under_min[cursor]
        elif not under_min and not exactly_min:
            raise ValueError("cooperative-sticky: no member left to take a partition")
        elif not under_min:
            member = exactly_min.pop(0)
        else:
            cursor, from_under = 0, True
            member = under_min[0]
        assignment[member].append(tp)
        previous = maybe_revoked.get(tp)
        if (previous is not None and previous != member) or tp in doubly:
            transferring[tp] = member
        count = len(assignment[member])
        if count == min_quota and from_under:
            under_min.pop(cursor)
            exactly_min.append(member)
        else:
            if from_under:
                cursor += 1
            if count == max_quota:
                over_min += 1

    # 3. adjustAssignment: a partition changing owner waits for its owner to revoke it.
    for tp, member in transferring.items():
        assignment[member].remove(tp)
    return {member: assignment[member] for member in sorted(assignment)}


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assignor,
    "roundrobin": round_robin_assignor,
    "cooperative-sticky": cooperative_sticky_assignor,
}

# ConsumerPartitionAssignor.supportedProtocols for Kafka's assignors, whether modelled or not.
SUPPORTED_PROTOCOLS: dict[str, tuple[RebalanceProtocol, ...]] = {
    "range": (RebalanceProtocol.EAGER,),
    "roundrobin": (RebalanceProtocol.EAGER,),
    "sticky": (RebalanceProtocol.EAGER,),
    "cooperative-sticky": (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
}

DEFAULT_ASSIGNORS = ("range", "cooperative-sticky")


def rebalance_protocol(assignors: Sequence[str]) -> RebalanceProtocol:
    """The protocol a consumer configured with ``assignors`` uses: the most advanced one they
    all support. Raises ValueError naming the assignors when they share none, or when one is
    unknown."""
    if not assignors:
        raise ValueError("partition.assignment.strategy names no assignor")
    unknown = [a for a in assignors if a not in SUPPORTED_PROTOCOLS]
    if unknown:
        raise ValueError(
            f"unknown assignor {unknown[0]!r} (known: {', '.join(SUPPORTED_PROTOCOLS)})"
        )
    common = set(SUPPORTED_PROTOCOLS[assignors[0]])
    for name in assignors[1:]:
        common &= set(SUPPORTED_PROTOCOLS[name])
    if not common:
        raise ValueError(f"assignors {', '.join(assignors)} have no rebalance protocol in common")
    return max(common)
