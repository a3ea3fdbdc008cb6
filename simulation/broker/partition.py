"""Partition: one replica of a topic partition on one broker (Kafka's ``kafka.cluster.Partition``).

The leader's half is what this module decides: the in-sync replica set (ISR), the high
watermark (HW), and whether a write with ``acks=all`` may be answered. Followers fetch from
the leader; each fetch updates the leader's view of that follower (``ReplicaState``, as
Kafka's ``Replica.updateFetchStateOrThrow``), which can move the HW and bring the follower
back into the ISR. A follower that stops catching up for ``replica.lag.time.max.ms`` is
dropped from it.

The rules, each from Kafka's ``Partition``:

* HW = the smallest log end offset among the leader and every replica of the maximal ISR (or
  caught up and about to join it); it never moves back (``maybeIncrementLeaderHW``). Since
  KIP-966 (3.7) it does not move at all while the ISR is smaller than ``min.insync.replicas``
  (rule ``hw_advances_under_min_isr``, false in both presets).
* A follower is caught up if its log end equals the leader's, or it was fully caught up
  within the last ``replica.lag.time.max.ms`` (``ReplicaState.isCaughtUp``); the ISR shrinks
  to the caught-up ones (``maybeShrinkIsr``) and a follower whose log end reached the HW and
  the leader epoch's start offset joins it again (``maybeExpandIsr``). Both changes go to the
  controller (AlterPartition) and take effect once it accepts them; until then the maximal
  ISR (current plus joining) counts for the HW and for ``acks=all``.
* ``acks=all``: refused before the append with NOT_ENOUGH_REPLICAS when the ISR is smaller
  than ``min.insync.replicas`` (``appendRecordsToLeader``); once the HW passes the batch it is
  answered, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR has meanwhile shrunk below the
  minimum (``checkEnoughReplicasReachOffset``).

:class:`Partition` is the replica itself: its log, the producer state rebuilt from it, its
leader-epoch cache, what of it is durable, and its role. Pure logic with no SimPy; the
broker's :class:`~eosim.simulation.broker.replica_manager.ReplicaManager` (and the objects of
its request paths: fetchers, purgatories, AlterPartition) owns the clock, the network and the
timers, and calls in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eosim.simulation.broker.durability import LogDurability
from eosim.simulation.broker.leader_epoch_cache import LeaderEpochCache
from eosim.simulation.broker.log import LogConfig, PartitionLog
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.config import TOPIC_KEYS, BrokerConfig, kafka_default
from eosim.simulation.protocol import Errors, TopicPartition
from eosim.simulation.records import LogBatch


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one follower (Kafka's ``ReplicaState``)."""

    log_end_offset: int = 0
    last_fetch_leader_log_end_offset: int = 0
    # Never fetched, never caught up: Kafka starts these at 0 on a wall clock, long ago; the
    # simulated clock starts at 0, so "long ago" is minus infinity here.
    last_fetch_time_ms: float = float("-inf")
    last_caught_up_time_ms: float = float("-inf")

    def reset_for_new_leader(self, now: float, leader_end_offset: int, in_sync: bool) -> None:
        """Replica.resetReplicaState when this broker becomes leader (it was not before): the
        follower's log end and last fetch are unknown until it fetches; a follower in the ISR
        counts as caught up now, any other as never."""
        self.log_end_offset = -1
        self.last_fetch_leader_log_end_offset = -1
        self.last_fetch_time_ms = float("-inf")
        self.last_caught_up_time_ms = now if in_sync else float("-inf")

    def reset_for_new_epoch(self, now: float, leader_end_offset: int, in_sync: bool) -> None:
        """Replica.resetReplicaState when this broker, already leader, starts a new leader
        epoch: what it knew of the follower's log stays; an ISR member counts as having
        fetched and caught up now, any other as never."""
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now if in_sync else float("-inf")
        self.last_caught_up_time_ms = now if in_sync else float("-inf")

    def is_caught_up(self, leader_end_offset: int, now: float, max_lag_ms: float) -> bool:
        return (
            leader_end_offset == self.log_end_offset
            or now - self.last_caught_up_time_ms <= max_lag_ms
        )

    def update_fetch_state(self, fetch_offset: int, now: float, leader_end_offset: int) -> None:
        """Replica.updateFetchStateOrThrow: a fetch at ``fetch_offset`` arrived at ``now``."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = now


@dataclass(slots=True)
class LeaderState:
    """What a partition's leader holds beyond its log: ISR, HW and its followers' states."""

    broker: int
    replicas: tuple[int, ...]
    leader_epoch: int
    isr: frozenset[int]
    epoch_start_offset: int
    min_insync_replicas: int = kafka_default("min.insync.replicas")
    replica_lag_time_max_ms: float = float(kafka_default("replica.lag.time.max.ms"))
    hw_advances_under_min_isr: bool = False
    high_watermark: int = 0
    # An AlterPartition in flight: the ISR it asks for (Kafka's PendingPartitionChange).
    pending_isr: frozenset[int] | None = None
    # Brokers the controller has fenced: not eligible to join the ISR, so the HW does not wait
    # for them to catch up (Partition.isReplicaIsrEligible).
    ineligible: frozenset[int] = frozenset()
    followers: dict[int, ReplicaState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.replicas:
            if r != self.broker:
                self.followers.setdefault(r, ReplicaState())

    # -- ISR ------------------------------------------------------------------------------
    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR as the HW and acks=all see it while a change is in flight: the union."""
        return self.isr if self.pending_isr is None else self.isr | self.pending_isr

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    def out_of_sync_replicas(self, leader_end_offset: int, now: float) -> list[int]:
        """getOutOfSyncReplicas: ISR followers not caught up within the lag time."""
        if self.pending_isr is not None:
            return []
        return sorted(
            r
            for r in self.isr
            if r != self.broker
            and not self.followers[r].is_caught_up(
                leader_end_offset, now, self.replica_lag_time_max_ms
            )
        )

    def isr_to_expand(self, follower: int) -> bool:
        """needsExpandIsr: a follower outside the ISR whose log end reached the HW and the
        current leader epoch's start offset."""
        if self.pending_isr is not None or follower in self.isr or follower in self.ineligible:
            return False
        leo = self.followers[follower].log_end_offset
        return leo >= self.high_watermark and leo >= self.epoch_start_offset

    def propose_isr(self, isr: frozenset[int]) -> None:
        """An AlterPartition is sent with ``isr``; it applies when the controller accepts."""
        self.pending_isr = isr

    def isr_committed(self, isr: frozenset[int] | None) -> None:
        """The controller answered: ``isr`` now stands (None: the change was refused)."""
        if isr is not None:
            self.isr = isr
        self.pending_isr = None

    # -- high watermark --------------------------------------------------------------------
    def maybe_increment_high_watermark(self, leader_end_offset: int, now: float) -> bool:
        """maybeIncrementLeaderHW; True if the HW moved."""
        if self.is_under_min_isr and not self.hw_advances_under_min_isr:
            return False
        new_hw = leader_end_offset
        maximal = self.maximal_isr
        for r in sorted(self.followers):
            state = self.followers[r]
            joining = r not in self.ineligible and state.is_caught_up(
                leader_end_offset, now, self.replica_lag_time_max_ms
            )
            if state.log_end_offset < new_hw and (r in maximal or joining):
                new_hw = state.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def follower_fetched(
        self, follower: int, fetch_offset: int, leader_end_offset: int, now: float
    ) -> bool:
        """A follower's fetch at ``fetch_offset``: update its state, maybe the HW (True if
        it moved). The caller checks :meth:`isr_to_expand` afterwards."""
        self.followers[follower].update_fetch_state(fetch_offset, now, leader_end_offset)
        return self.maybe_increment_high_watermark(leader_end_offset, now)

    # -- acks=all --------------------------------------------------------------------------
    def append_error(self, required_acks: int) -> Errors:
        """appendRecordsToLeader's check before the append."""
        if required_acks == -1 and len(self.isr) < self.effective_min_isr:
            return Errors.NOT_ENOUGH_REPLICAS
        return Errors.NONE

    def replicated(self, required_offset: int) -> Errors | None:
        """checkEnoughReplicasReachOffset for a batch ending before ``required_offset``:
        None while waiting, else the answer for an acks=all produce."""
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) >= self.effective_min_isr:
            return Errors.NONE
        return Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """A topic's replication settings (Kafka's topic configs of the same names)."""

    replication_factor: int = 1
    min_insync_replicas: int = kafka_default("min.insync.replicas")
    unclean_leader_election_enable: bool = kafka_default("unclean.leader.election.enable")
    # What its logs keep (retention.ms, retention.bytes, segment.bytes, segment.ms).
    log: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def of(cls, replication_factor: int, config: BrokerConfig) -> TopicSettings:
        """A topic's settings from its effective configs (its own over the broker's): each
        topic config of :data:`TOPIC_KEYS` goes to the fields its ``read_by`` names, on these
        settings or on their :class:`LogConfig`. A duration (a ``.ms`` key) becomes a float,
        as the model's times are."""
        values: dict[str, dict[str, Any]] = {"TopicSettings": {}, "LogConfig": {}}
        for key in TOPIC_KEYS.values():
            value = getattr(config, key.attr)
            if key.name.endswith(".ms") and value is not None:
                value = float(value)
            for ref in key.read_by:
                holder, name = ref.split(":")[1].split(".")
                values[holder][name] = value
        return cls(
            replication_factor, log=LogConfig(**values["LogConfig"]), **values["TopicSettings"]
        )


class Partition:
    """One replica of ``tp`` on ``broker`` (Kafka's ``kafka.cluster.Partition`` with its log).

    Its role comes from the controller's published registration: :meth:`make_leader` builds
    a :class:`LeaderState` (ISR, HW, followers), :meth:`make_follower` drops it. A follower's
    high watermark is what its leader last told it, capped by its own log end.
    """

    __slots__ = (
        "broker",
        "durability",
        "epoch_cache",
        "fetch_failed",
        "fetched_epoch",
        "follower_hw",
        "leader",
        "leader_epoch",
        "leader_state",
        "log",
        "partition_epoch",
        "producer_state",
        "replicas",
        "tp",
        "truncating",
    )

    def __init__(
        self,
        tp: TopicPartition,
        broker: str,
        producer_state: ProducerStateManager,
        durability: LogDurability | None = None,
    ) -> None:
        self.tp = tp
        self.broker = broker
        self.log = PartitionLog(*tp)
        self.producer_state = producer_state
        self.epoch_cache = LeaderEpochCache()
        self.durability = durability if durability is not None else LogDurability()
        self.leader: str | None = None
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[str, ...] = ()
        self.leader_state: LeaderState | None = None
        self.follower_hw = 0
        # A follower that must ask its leader where to truncate before fetching (KIP-101
        # without KIP-595's fetch validation).
        self.truncating = False
        # Why this follower stopped fetching for good (AbstractFetcherThread's failed
        # partitions: an answer it could not append), or None.
        self.fetch_failed: str | None = None
        # The leader epoch of this follower's last answered fetch that brought no divergence:
        # from then on its log agrees with the leader's as far as it goes.
        self.fetched_epoch = -1

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def high_watermark(self) -> int:
        state = self.leader_state
        return state.high_watermark if state is not None else self.follower_hw

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        """The leader epoch of the last batch in the log (-1 when empty)."""
        batches = self.log.batches
        return batches[-1].leader_epoch if batches else -1

    # -- roles -------------------------------------------------------------------------
    def make_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[str, ...],
        isr: tuple[str, ...],
        now: float,
        topic: TopicSettings,
        replica_lag_time_max_ms: float,
        hw_advances_under_min_isr: bool,
    ) -> None:
        """Partition.makeLeader: the epoch starts at the log end (the leader-epoch cache gets
        an entry for it), each follower's state is reset (ISR members count as caught up now;
        a broker that was not leader before knows nothing of its followers' logs), and the
        HW starts from what this replica knew as a follower."""
        leo = self.log.log_end_offset
        previous = self.leader_state
        self.leader, self.leader_epoch, self.partition_epoch = (
            self.broker,
            leader_epoch,
            partition_epoch,
        )
        self.replicas = replicas
        self.epoch_cache.assign(leader_epoch, leo)
        self.truncating = False
        self.fetch_failed = None
        state = LeaderState(
            self.broker,  # type: ignore[arg-type]
            replicas,  # type: ignore[arg-type]
            leader_epoch,
            frozenset(isr),  # type: ignore[arg-type]
            leo,
            topic.min_insync_replicas,
            replica_lag_time_max_ms,
            hw_advances_under_min_isr,
            high_watermark=min(self.follower_hw, leo)
            if previous is None
            else previous.high_watermark,
        )
        for r, follower in state.followers.items():
            if previous is not None and r in previous.followers:
                follower.log_end_offset = previous.followers[r].log_end_offset
                follower.reset_for_new_epoch(now, leo, r in state.isr)
            else:
                follower.reset_for_new_leader(now, leo, r in state.isr)
        self.leader_state = state
        state.maybe_increment_high_watermark(leo, now)

    def make_follower(
        self, leader: str | None, leader_epoch: int, partition_epoch: int, replicas: tuple[str, ...]
    ) -> None:
        if self.leader_state is not None:
            self.follower_hw = self.leader_state.high_watermark
        self.leader_state = None
        self.leader, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas = replicas

    # -- the log -----------------------------------------------------------------------
    def appended(self, batch: LogBatch, now: float) -> None:
        """Bookkeeping after ``batch`` was appended, as leader or follower: leader epochs,
        durability and (for a follower) producer state."""
        self.epoch_cache.assign(batch.leader_epoch, batch.base_offset)
        self.durability.appended(self.log.log_end_offset, now)

    def append_as_follower(self, batches: list[LogBatch], leader_hw: int, now: float) -> None:
        """Append what the leader sent, then take the leader's HW capped at this log's end
        (UnifiedLog.updateHighWatermark on every fetch answer: it can fall, say when a new
        leader's HW starts below what this replica had heard)."""
        for batch in batches:
            self.log.append_as_follower(batch)
            self.producer_state.load((batch,))
            self.appended(batch, now)
        self.follower_hw = min(leader_hw, self.log.log_end_offset)

    def truncate_to(
        self, offset: int, fresh_state: ProducerStateManager, now: float | None = None
    ) -> None:
        """Drop the log from ``offset`` on; producer state, leader epochs and durability follow
        (UnifiedLog.truncateTo). ``fresh_state`` is an empty ProducerStateManager to rebuild
        at ``now``, from the latest producer snapshot (UnifiedLog.rebuildProducerState)."""
        if offset >= self.log.log_end_offset:
            return
        self.log.truncate_to(offset)
        end = self.log.log_end_offset
        self.producer_state = self.log.rebuild_producer_state(fresh_state, now)
        self.epoch_cache.truncate_from_end(end)
        self.durability.truncated(end)
        self.follower_hw = min(self.follower_hw, end)
        if self.leader_state is not None:
            self.leader_state.high_watermark = min(self.leader_state.high_watermark, end)

    def recover(self, fresh_state: ProducerStateManager, now: float) -> None:
        """A restart at ``now`` loads this replica (LogLoader.load): its log is recovered, a
        producer snapshot written at its end, and the producer state loaded from it into the
        empty ``fresh_state`` (one batch per producer); the high watermark is at most the log
        end."""
        self.log.recovered()
        self.producer_state = self.log.rebuild_producer_state(fresh_state, now)
        self.follower_hw = min(self.follower_hw, self.log.log_end_offset)

    def increment_log_start_offset(self, offset: int) -> bool:
        """UnifiedLog.maybeIncrementLogStartOffset (the caller keeps ``offset`` at or below the
        high watermark): the log's head goes, and the leader-epoch cache forgets the epochs
        that start below it (``truncateFromStart``). True if the log start moved."""
        if not self.log.increment_log_start_offset(offset, self.producer_state):
            return False
        self.epoch_cache.truncate_from_start(self.log.log_start_offset)
        return True

    def follow_log_start(self, leader_log_start: int) -> None:
        """A follower's fetch answer names the leader's log start: this replica's moves up to
        it, never past its own high watermark (ReplicaFetcherThread.processPartitionData)."""
        offset = min(leader_log_start, self.high_watermark)
        if offset > self.log.log_start_offset:
            self.increment_log_start_offset(offset)

    def truncate_fully_and_start_at(
        self, offset: int, fresh_state: ProducerStateManager, now: float
    ) -> None:
        """UnifiedLog.truncateFullyAndStartAt: an empty log starting at ``offset``, with no
        producer state, no leader epochs, and its high watermark there."""
        self.log.truncate_fully_and_start_at(offset)
        self.producer_state = fresh_state
        self.epoch_cache = LeaderEpochCache()
        self.durability.truncated(offset)
        self.durability.flush(offset, now)
        self.follower_hw = offset
        if self.leader_state is not None:
            self.leader_state.high_watermark = offset
