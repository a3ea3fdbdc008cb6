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
* :func:`rebalance_protocol`: ``ConsumerCoordinator``'s constructor keeps the protocols every
  configured assignor supports and takes the most advanced; the default list
  ``[range, cooperative-sticky]`` (``ConsumerConfig``) therefore gives EAGER.

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
    """What a member sends in its JoinGroup metadata, as far as the assignors read it."""

    topics: tuple[str, ...]
    group_instance_id: str | None = None


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


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assignor,
    "roundrobin": round_robin_assignor,
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
