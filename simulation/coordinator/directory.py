"""Which broker leads each partition of ``__transaction_state`` and ``__consumer_offsets``.

A transactional.id is coordinated by the leader of ``__transaction_state`` partition
``abs(hash(id)) % 50``, and a consumer group by the leader of ``__consumer_offsets`` partition
``abs(hash(group)) % 50``. Partition ``p`` starts on broker ``p % brokers``.

Both logs are still modelled as durable storage that any broker can load (they are not yet
replicated partitions: a listed departure in docs/model.md). Leadership of an internal
partition moves when the controller fences its leader (its session timed out): it goes to
the next live broker in ring order, which then loads the partition; so a coordinator's
failover takes as long as the controller's detection. A broker that is unfenced again loads
the partitions nobody took over; it does not take the others back (Kafka's preferred-leader
election runs minutes later).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from simulation.coordinator.transaction_log import TRANSACTION_STATE_PARTITIONS, partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
InternalPartition = tuple[str, int]
# Called on the new leader with the partition and its new coordinator epoch.
LeadershipListener = Callable[[InternalPartition, int], None]


def internal_partition(key: str, key_type: str) -> InternalPartition:
    topic = TRANSACTION_STATE_TOPIC if key_type == "transaction" else CONSUMER_OFFSETS_TOPIC
    return topic, partition_for(key, TRANSACTION_STATE_PARTITIONS)


class CoordinatorDirectory:
    def __init__(self, env: simpy.Environment, brokers: tuple[str, ...]):
        self.env = env
        self.brokers = brokers
        self.alive = dict.fromkeys(brokers, True)
        self._owner: dict[InternalPartition, str] = {}
        self._epoch: dict[InternalPartition, int] = {}
        for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            for p in range(TRANSACTION_STATE_PARTITIONS):
                self._owner[topic, p] = brokers[p % len(brokers)]
                self._epoch[topic, p] = 0
        self._listeners: dict[str, LeadershipListener] = {}

    def register(self, broker: str, on_become_leader: LeadershipListener) -> None:
        self._listeners[broker] = on_become_leader

    def owner(self, partition: InternalPartition) -> str:
        return self._owner[partition]

    def coordinator_epoch(self, partition: InternalPartition) -> int:
        return self._epoch[partition]

    def coordinator(self, key: str, key_type: str) -> str | None:
        """The live broker coordinating ``key``, or None while it is down."""
        owner = self.owner(internal_partition(key, key_type))
        return owner if self.alive[owner] else None

    def is_leader(self, broker: str, partition: InternalPartition) -> bool:
        return self.owner(partition) == broker and self.alive[broker]

    def owned_by(self, broker: str) -> list[InternalPartition]:
        return [p for p, owner in self._owner.items() if owner == broker]

    # -- broker lifecycle --------------------------------------------------------------
    def broker_crashed(self, broker: str) -> None:
        """Its coordinators stop at once; its partitions move when it is fenced."""
        self.alive[broker] = False

    def broker_fenced(self, broker: str) -> None:
        self.alive[broker] = False
        self._fail_over(broker)

    def broker_unfenced(self, broker: str) -> None:
        self.alive[broker] = True
        # Partitions nobody took over in the meantime are loaded again by their old leader.
        for partition in self.owned_by(broker):
            self._epoch[partition] += 1
            self._notify(broker, partition)

    def _fail_over(self, broker: str) -> None:
        if self.alive[broker]:
            return
        successor = self._next_alive(broker)
        if successor is None:
            return
        for partition in self.owned_by(broker):
            self._owner[partition] = successor
            self._epoch[partition] += 1
            self._notify(successor, partition)

    def _next_alive(self, broker: str) -> str | None:
        i = self.brokers.index(broker)
        for k in range(1, len(self.brokers)):
            candidate = self.brokers[(i + k) % len(self.brokers)]
            if self.alive[candidate]:
                return candidate
        return None

    def _notify(self, broker: str, partition: InternalPartition) -> None:
        listener = self._listeners.get(broker)
        if listener is not None:
            listener(partition, self._epoch[partition])
