"""Cluster metadata: what a run's cluster looks like, and what a client believes of it.

:class:`ClusterMetadata` is the cluster as built: brokers, topics, each partition's replicas.
Replicas are assigned round robin without racks: partition ``p`` of a topic with replication
factor ``r`` lives on brokers ``p, p+1, ..., p+r-1`` (mod the broker count), the first being
its preferred (and initial) leader. Kafka's rack-unaware placement also starts each topic at
a random broker and shifts followers between rounds; eosim's fixed start keeps the initial
leader of partition ``p`` on broker ``p % brokers`` at every replication factor.

:class:`ClientMetadata` is a client's metadata cache (Kafka's ``Metadata``): which broker it
believes leads each partition, at which leader epoch. A client created when the run starts
knows the cluster as built (its bootstrap happens before the clock starts); one created later
(a restarted application, the final drain) knows no leader and asks for metadata first, as a
new Kafka client does. The cache changes only through metadata responses
the client asked a broker for, ignoring any answer older than what it knows (a lower leader
epoch). :meth:`ClientMetadata.request_update` asks for a refresh, which the client's network
layer sends at its next chance (an exponential backoff from ``retry.backoff.ms`` to
``retry.backoff.max.ms`` after the last response or failure, as Kafka 3.7+ does); every
``metadata.max.age.ms`` the cache is refreshed anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eosim.simulation.coordinator.directory import INTERNAL_PARTITIONS, INTERNAL_TOPICS
from eosim.simulation.exponential_backoff import ExponentialBackoff, Jitter

# Re-exported: where the formula lived before it became simulation/exponential_backoff.py.
from eosim.simulation.exponential_backoff import exponential_backoff as exponential_backoff
from eosim.simulation.protocol import PartitionLeader, TopicPartition


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """``topics``: the data topics and their partition counts; ``internal``: the internal
    topics (``__transaction_state``, ``__consumer_offsets``) a cluster built with
    :meth:`with_internal_topics` has, each with ``INTERNAL_PARTITIONS`` partitions.
    ``replication``: replication factors by topic (1 when missing), capped at the broker
    count."""

    brokers: tuple[str, ...]
    topics: dict[str, int]
    replication: dict[str, int] = field(default_factory=dict)
    internal: dict[str, int] = field(default_factory=dict)

    def with_internal_topics(self, transaction_state_rf: int, offsets_rf: int) -> ClusterMetadata:
        """This metadata plus the two internal topics at these replication factors. Kafka
        refuses to create an internal topic with fewer brokers than its replication factor;
        eosim caps the factor at the broker count (a listed departure), so that a one-broker
        scenario keeps its coordinators."""
        factors = dict(zip(INTERNAL_TOPICS, (transaction_state_rf, offsets_rf), strict=True))
        return ClusterMetadata(
            self.brokers,
            self.topics,
            {**self.replication, **factors},
            dict.fromkeys(INTERNAL_TOPICS, INTERNAL_PARTITIONS),
        )

    def replicas(self, tp: TopicPartition) -> tuple[str, ...]:
        """The brokers hosting ``tp``, its preferred leader first."""
        n = len(self.brokers)
        factor = min(self.replication.get(tp[0], 1), n)
        return tuple(self.brokers[(tp[1] + i) % n] for i in range(factor))

    def initial_leader(self, tp: TopicPartition) -> str:
        return self.replicas(tp)[0]

    def partitions(self) -> list[TopicPartition]:
        """The data partitions (what clients see and a history records)."""
        return [(t, p) for t, n in self.topics.items() for p in range(n)]

    def all_partitions(self) -> list[TopicPartition]:
        """The data partitions, then the internal ones."""
        return self.partitions() + [(t, p) for t, n in self.internal.items() for p in range(n)]

    def partitions_hosted_by(self, broker: str) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker in self.replicas(tp)]


class ClientMetadata:
    """A client's view of partition leadership (see the module docstring).

    When a refresh may go out follows Kafka's ``Metadata.timeToNextUpdate`` (KIP-580,
    Kafka 3.7+): a requested update waits ``retry.backoff.ms`` after the last response or
    failure, growing exponentially (up to ``retry.backoff.max.ms``, with 20% jitter) with
    consecutive failed requests, and with consecutive responses that taught nothing new (no
    leader epoch rose: "equivalent" responses, as while a partition waits for an election).
    Every ``metadata.max.age.ms`` the cache is refreshed anyway, which also ends the backoff
    for equivalent responses. The jitter is drawn once per response or failure (Kafka draws
    it each time it computes the delay)."""

    __slots__ = (
        "_factor",
        "attempts",
        "brokers",
        "equivalent_responses",
        "jitter",
        "last_refresh",
        "last_successful_refresh",
        "leaders",
        "max_age_ms",
        "on_update",
        "refresh_backoff",
        "topics",
        "update_requested",
    )

    def __init__(
        self,
        cluster: ClusterMetadata,
        max_age_ms: float = 300_000.0,
        refresh_backoff_ms: float = 100.0,
        now: float = 0.0,
        *,
        refresh_backoff_max_ms: float = 1_000.0,
        jitter: Jitter | None = None,
    ) -> None:
        self.brokers = cluster.brokers
        self.topics = cluster.topics
        self.leaders: dict[TopicPartition, PartitionLeader] = {}
        if now <= 0.0:
            self.leaders = {
                tp: PartitionLeader(cluster.initial_leader(tp), 0, cluster.replicas(tp))
                for tp in cluster.partitions()
            }
        self.max_age_ms = max_age_ms
        # Metadata.refreshBackoff: retry.backoff.ms growing to retry.backoff.max.ms (constant
        # at the max when that is the smaller).
        self.refresh_backoff = ExponentialBackoff(refresh_backoff_ms, refresh_backoff_max_ms)
        self.jitter = jitter
        # Kafka's lastRefreshMs (last response or failure) and lastSuccessfulRefreshMs. A
        # client created mid-run has never asked: its first request goes out at once.
        self.last_refresh = now if now <= 0.0 else float("-inf")
        self.last_successful_refresh = now
        self.attempts = 0
        self.equivalent_responses = 0
        self._factor = 1.0
        self.update_requested = now > 0.0
        # Called once, each, by the next metadata answer (a producer waiting for one).
        self.on_update: list[Callable[[], None]] = []

    def leader(self, tp: TopicPartition) -> str | None:
        known = self.leaders.get(tp)
        return known.leader if known is not None else None

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch the cache holds for ``tp`` (``MetadataSnapshot.leaderEpochFor``)."""
        known = self.leaders.get(tp)
        return known.leader_epoch if known is not None else None

    def partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, n in self.topics.items() for p in range(n)]

    def request_update(self) -> None:
        """Kafka's ``requestUpdate(false)``: every caller eosim models (the Sender, the fetcher,
        a disconnection) keeps the backoff for equivalent responses."""
        self.update_requested = True

    def request_update_for_new_topics(self) -> None:
        """Kafka's ``requestUpdateForNewTopics``: a topic the client did not use before needs
        metadata; the update goes out at once, whatever the backoff (``lastRefreshMs`` 0)."""
        self.update_requested = True
        self.last_refresh = float("-inf")
        self.equivalent_responses = 0

    def _backoff(self, n: int) -> float:
        return self.refresh_backoff.with_factor(n, self._factor)

    def time_to_update(self, now: float) -> float:
        """0 when a metadata request should go out now; else how long until one should
        (``Metadata.timeToNextUpdate``)."""
        expires = self.last_successful_refresh + self.max_age_ms
        if expires <= now:
            self.equivalent_responses = 0  # a periodic refresh is not backed off
        allow = self.last_refresh + self._backoff(max(self.attempts - 1, 0))
        if self.equivalent_responses > 0:
            allow = max(allow, self.last_refresh + self._backoff(self.equivalent_responses - 1))
        due = now if self.update_requested else expires
        return max(due - now, allow - now, 0.0)

    def failed(self, now: float) -> None:
        """The metadata request failed: no answer before its timeout, or its connection
        closed (``Metadata.failedUpdate``)."""
        self.last_refresh = now
        self.attempts += 1
        self.equivalent_responses = 0
        self._draw()

    def update(self, partitions: Mapping[TopicPartition, PartitionLeader], now: float) -> None:
        """A metadata response arrived (``Metadata.update``): an entry with an older leader
        epoch than the cache's is stale and ignored (``updateLatestMetadata``); a response in
        which no leader epoch rose and no partition was new counts as equivalent."""
        self.equivalent_responses += 1
        for tp in sorted(partitions):
            fresh = partitions[tp]
            known = self.leaders.get(tp)
            if known is None or fresh.leader_epoch > known.leader_epoch:
                self.equivalent_responses = 0
            if known is None or fresh.leader_epoch >= known.leader_epoch:
                self.leaders[tp] = fresh
        self.last_refresh = now
        self.last_successful_refresh = now
        self.attempts = 0
        self.update_requested = False
        self._draw()
        if self.on_update:
            waiting, self.on_update = self.on_update, []
            for then in waiting:
                then()

    def _draw(self) -> None:
        if self.jitter is not None:
            self._factor = self.refresh_backoff.draw(self.jitter)
