"""GroupMembership: what a subscribed consumer's group membership is to its KafkaConsumer and
its application, one implementation per ``group.protocol``.

* :class:`~eosim.simulation.consumer.consumer_coordinator.ConsumerCoordinator`: the classic
  protocol (JoinGroup, SyncGroup, Heartbeat; the heartbeat thread).
* :class:`~eosim.simulation.consumer.consumer_membership_manager.ConsumerMembershipManager`:
  the consumer protocol (KIP-848, ConsumerGroupHeartbeat; the network thread).

Both run a background thread (a SimPy process) that sleeps in :meth:`_sleep` until its next
timer or a :meth:`_notify`, freeze with their process (:meth:`pause`), and find the
coordinator with one :class:`CoordinatorLookup`.

To add a protocol: subclass this, set ``protocol`` (the ``group.protocol`` value), implement
``on_poll_start`` (once per ``poll()``), ``poll`` (every pass of ``poll()``'s loop: returns
the events that may bring progress), ``is_stable``, ``auto_commits_in_poll``,
``generation`` and ``joined_generation`` (what commits and ``groupMetadata()`` name),
``commit_generation``, ``on_commit_error`` and ``close``; then choose it in
``KafkaConsumer.subscribe`` by the config's ``group_protocol``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

import simpy

from eosim.simulation.consumer.coordinator_lookup import CoordinatorLookup
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.protocol import TopicPartition

Process = Generator[simpy.Event, Any, Any]


class RebalanceListener(Protocol):
    """``ConsumerRebalanceListener``: called from within ``poll()`` (and close)."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition], generation: int) -> None: ...

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...


class SubscribedConsumer(Protocol):
    """What a membership uses of its consumer (Kafka's SubscriptionState, network client and
    commit paths): :class:`eosim.simulation.consumer.kafka_consumer.KafkaConsumer` provides
    it."""

    env: simpy.Environment
    client: Any
    node: str
    coordinator: str | None
    metadata: Any
    rng: Any
    assignment: list[TopicPartition]
    positions: dict[TopicPartition, int]
    auto_commit_interval_ms: float | None

    @property
    def auto_commit(self) -> bool: ...

    def mark_pending_revocation(self, partitions: list[TopicPartition] | None = None) -> None: ...

    def commit_async(self) -> simpy.Process: ...

    def commit_sync_before_rebalance(self, timeout_ms: float) -> Process: ...

    def assign_from_subscribed(self, partitions: list[TopicPartition]) -> None: ...

    def restart_auto_commit_timer(self) -> None: ...


class GroupMembership:
    protocol = ""

    def __init__(
        self,
        consumer: SubscribedConsumer,
        config: Any,
        topics: tuple[str, ...],
        listener: RebalanceListener | None,
    ) -> None:
        self.consumer = consumer
        self.env: simpy.Environment = consumer.env
        self.client = consumer.client
        self.config = config
        self.topics = tuple(sorted(topics))
        self.listener = listener
        self.closed = False
        self.backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._lookup = CoordinatorLookup(
            consumer, config.group_id, self.backoff, self._coordinator_found
        )
        self._wake = self.env.event()
        self.resumed: simpy.Event | None = None

    # -- the coordinator ----------------------------------------------------------------
    def lookup_coordinator(self) -> simpy.Event:
        """One FindCoordinator in flight at a time (:class:`CoordinatorLookup`)."""
        return self._lookup.lookup()

    def _coordinator_found(self) -> None:
        self._notify()

    # -- the background thread ------------------------------------------------------------
    def _notify(self) -> None:
        """Wake the background thread (``AbstractCoordinator.this.notify()``)."""
        if not self._wake.triggered:
            self._wake.succeed()

    def _sleep(self, until: float | None) -> Process:
        """Wait for a notify, or until ``until``."""
        if self._wake.triggered:
            self._wake = self.env.event()
            return
        events: list[simpy.Event] = [self._wake]
        if until is not None:
            events.append(self.env.timeout(max(until - self.env.now, 0.0)))
        yield simpy.AnyOf(self.env, events)
        if self._wake.triggered:
            self._wake = self.env.event()

    # -- a paused process (SIGSTOP, a long GC) freezes the thread too ---------------------
    def pause(self) -> None:
        if self.resumed is None:
            self.resumed = self.env.event()

    def resume(self) -> None:
        if self.resumed is not None:
            resumed, self.resumed = self.resumed, None
            resumed.succeed()
