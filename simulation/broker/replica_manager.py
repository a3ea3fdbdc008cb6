"""ReplicaManager: a broker's replicas, their roles, and the requests that read or wait on them.

Kafka's ``ReplicaManager``: it hosts the broker's replicas (:class:`Partition`), applies the
controller's metadata to them, and is the entry point of the request paths that touch them;
the work of each path lives in a module of its own, under the name of Kafka's class:

* **Roles** come from the controller's published registrations (:meth:`apply_metadata`,
  Kafka's ``applyDelta`` with ``makeLeaders`` / ``makeFollowers``): a replica named leader makes
  itself leader at the new epoch; any other becomes a follower of the named leader and joins
  the fetcher for that broker. Under the rule ``truncation: high_watermark`` (before KIP-101) a
  new follower first truncates its log to its own high watermark; under ``leader_epoch`` (the
  default) it keeps its log and the leader tells it where the logs diverged (KIP-101/279, as
  fetch validation since KIP-595).
* **Appends and acks=all** (:meth:`after_leader_append`, :meth:`complete_actions`,
  :meth:`wait_for_replication`): an append may move the HW; the held requests it may unblock
  are checked as the request that made it ends (Kafka's ``ActionQueue``). A produce or marker
  write with acks=all waits in :mod:`~eosim.simulation.broker.delayed_produce`
  (``DelayedProduce``) until the HW passes it.
* **Follower fetches, leader side** (:meth:`handle_replica_fetch`, Kafka's ``fetchMessages``
  with ``Partition.fetchRecords``): the leader checks the follower's leader epoch
  (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), its last fetched epoch against the
  leader-epoch cache (``divergingEpoch``), updates the follower's state, maybe the ISR and the
  HW, and answers at once when it has data; otherwise it parks the fetch in
  :mod:`~eosim.simulation.broker.delayed_fetch` (``DelayedFetch``) until an append or
  ``replica.fetch.wait.max.ms`` (500 ms), which is also how long a follower can lag in hearing
  of a new HW. It stays here, not in :class:`Partition`, because in Kafka ``fetchRecords``
  reaches the purgatories and ``AlterPartitionManager`` in the middle of the read, and eosim's
  :class:`Partition` is pure logic without either. Held consumer fetches wait in the same
  purgatory (:meth:`hold_read`).

The other paths live in their own modules, built here and handed their collaborators:

* the follower side, fetching from leaders and truncating to them:
  :mod:`~eosim.simulation.broker.replica_fetcher` (``ReplicaFetcherManager``,
  ``ReplicaFetcherThread``);
* ISR shrink (the ``isr-expiration`` task) and expand, and AlterPartition:
  :mod:`~eosim.simulation.broker.alter_partition_manager` (``AlterPartitionManager``);
* held requests whose time runs out during a pause:
  :mod:`~eosim.simulation.broker.delayed_operation` (``ExpiredOperationReaper``);
* the logs' flushing, power loss and recovery after a crash:
  :mod:`~eosim.simulation.broker.log_manager` (``LogManager``).

Extending it: a new replica-side behaviour reads or changes :class:`Partition` (pure logic,
unit-tested on its own) and is driven from the module of its request path; anything timed is a
SimPy timer owned by that module's object and dropped by its ``shutdown`` (a crash), which
:meth:`shutdown` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

import simpy

from eosim.simulation.broker.alter_partition_manager import AlterPartitionManager
from eosim.simulation.broker.delayed_fetch import DelayedFetchPurgatory
from eosim.simulation.broker.delayed_operation import ExpiredOperationReaper
from eosim.simulation.broker.delayed_produce import DelayedProducePurgatory
from eosim.simulation.broker.durability import LogDurability
from eosim.simulation.broker.leader_epoch_cache import UNDEFINED_EPOCH
from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.broker.replica_fetcher import ReplicaFetcherManager
from eosim.simulation.config import kafka_default
from eosim.simulation.coordinator.directory import is_internal
from eosim.simulation.network import Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import (
    Errors,
    PartitionState,
    ReplicaFetchData,
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from eosim.simulation.rng import RandomStream
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.state_change import DISABLED, StateChangeLog


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """Broker configs of replication and durability, under Kafka's names in scenarios."""

    replica_fetch_wait_max_ms: float = float(kafka_default("replica.fetch.wait.max.ms"))
    replica_fetch_backoff_ms: float = float(kafka_default("replica.fetch.backoff.ms"))
    replica_lag_time_max_ms: float = float(kafka_default("replica.lag.time.max.ms"))
    replica_socket_timeout_ms: float = float(kafka_default("replica.socket.timeout.ms"))
    # Records a follower fetch returns per partition (replica.fetch.max.bytes, 1 MiB, in
    # records: eosim's records have no size).
    replica_fetch_max_records: int = 10_000
    # How long an AlterPartition may go unanswered before it is sent again.
    controller_request_timeout_ms: float = 30_000.0
    log_flush_interval_messages: int | None = kafka_default("log.flush.interval.messages")
    log_flush_interval_ms: float | None = kafka_default("log.flush.interval.ms")
    log_flush_scheduler_interval_ms: float | None = kafka_default("log.flush.scheduler.interval.ms")
    os_writeback_ms: float = 30_000.0

    def durability(self) -> LogDurability:
        return LogDurability(
            self.log_flush_interval_messages, self.log_flush_interval_ms, self.os_writeback_ms
        )


class ReplicaManager:
    """One broker's replicas and the entry points of the request paths that touch them (see
    the module's docstring); built by its :class:`~eosim.simulation.broker.broker.Broker`."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        rules: ProtocolRules,
        settings: ReplicationSettings,
        topics: dict[str, TopicSettings],
        new_state: Callable[[], ProducerStateManager],
        is_running: Callable[[], bool],
        probe: Probe | None = None,
        respond: Callable[[Message, object], None] | None = None,
        isr_rng: RandomStream | None = None,
        *,
        hostable: Callable[[TopicPartition], bool] | None = None,
        state_log: StateChangeLog = DISABLED,
        on_internal_role: Callable[[TopicPartition, int | None, bool], None] | None = None,
        complete_work: Callable[[float], float] | None = None,
    ) -> None:
        """``respond``: how a held follower fetch is answered (the broker sends it and unmutes
        the connection); ``isr_rng``: draws the phase of the ISR expiration task; ``hostable``:
        whether a partition is hosted when the metadata names this broker a replica (the
        cluster's: every data partition, an internal one once it is active; None: every
        partition); ``state_log``: where replica state changes are recorded;
        ``on_internal_role``: told of the internal partitions' roles (below);
        ``complete_work``: the resource model's work completing a held fetch
        (:class:`DelayedFetchPurgatory`)."""
        self.env = env
        self.broker = broker
        self.network = network
        self.rules = rules
        self.settings = settings
        self.topics = topics
        self.new_state = new_state
        self.is_running = is_running  # alive and not paused
        self.probe = probe if probe is not None else Probe()
        self._state_log = state_log
        # The high watermark last written to the state-change log, per led partition.
        self._logged_hw: dict[TopicPartition, int] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        # The metadata this broker has replayed (its MetadataCache): every data partition.
        self.metadata: dict[TopicPartition, PartitionState] = {}
        self.metadata_offset = -1
        self.fenced: frozenset[str] = frozenset()
        # Partitions appended to whose held requests are still to be checked (Kafka's
        # ActionQueue of ReplicaManager), in the order of the appends.
        self._actions: dict[TopicPartition, None] = {}
        self.generation = 0  # bumped by a crash: timers of the old incarnation do nothing
        # Whether a partition is hosted when the metadata names this broker a replica.
        self.hostable: Callable[[TopicPartition], bool] = (
            hostable if hostable is not None else lambda tp: True
        )
        # Told when a replica of an internal partition becomes leader (its leader epoch) or
        # stops being leader (None), and whether it was just activated (the coordinator
        # runtime's load and unload).
        self.on_internal_role = on_internal_role
        self._activating = False
        # The correlation ids of this broker's own requests: one sequence for its fetches
        # and its AlterPartitions.
        next_correlation = count(1).__next__
        # The request paths' own objects (Kafka's ReplicaManager fields of the same names).
        self.reaper = ExpiredOperationReaper()
        self.delayed_produce_purgatory = DelayedProducePurgatory(
            env, self.leader_partition, is_running, self.reaper
        )
        self.delayed_fetch_purgatory = DelayedFetchPurgatory(
            env,
            broker,
            network,
            settings.replica_fetch_wait_max_ms,
            self._read_for_follower,
            is_running,
            self.reaper,
            respond,
            complete_work,
        )
        self.replica_fetcher_manager = ReplicaFetcherManager(
            env,
            broker,
            network,
            settings.replica_fetch_wait_max_ms,
            settings.replica_fetch_backoff_ms,
            settings.replica_socket_timeout_ms,
            self.partitions,
            new_state,
            is_running,
            next_correlation,
            state_log=state_log,
        )
        self.alter_partition_manager = AlterPartitionManager(
            env,
            broker,
            network,
            settings.replica_lag_time_max_ms,
            settings.controller_request_timeout_ms,
            self.partitions,
            is_running,
            next_correlation,
            self._maybe_advance,
            isr_rng,
        )

    @property
    def state_log(self) -> StateChangeLog:
        """Where this broker's replica state changes are recorded."""
        return self._state_log

    # -- hosting -----------------------------------------------------------------------
    def host(self, tp: TopicPartition) -> Partition:
        """The replica of ``tp`` on this broker, created empty if it is new."""
        part = self.partitions.get(tp)
        if part is None:
            part = Partition(tp, self.broker, self.new_state(), self.settings.durability())
            part.log.config = self.topic(tp).log
            self.partitions[tp] = part
        return part

    def topic(self, tp: TopicPartition) -> TopicSettings:
        return self.topics.get(tp[0], TopicSettings())

    def leader_partition(self, tp: TopicPartition) -> Partition | None:
        part = self.partitions.get(tp)
        return part if part is not None and part.is_leader else None

    def lead_alone(self, tp: TopicPartition, leader_epoch: int = 0) -> None:
        """Lead ``tp`` with no other replica (a broker used without a controller)."""
        part = self.host(tp)
        self._make_leader(
            part, PartitionState((self.broker,), (self.broker,), self.broker, leader_epoch, 0)
        )

    # -- metadata ------------------------------------------------------------------------
    def apply_metadata(
        self,
        offset: int,
        changes: dict[TopicPartition, PartitionState],
        snapshot: bool,
        fenced: frozenset[str] = frozenset(),
    ) -> None:
        """Replay the controller's published changes (ReplicaManager.applyDelta)."""
        if offset <= self.metadata_offset and not snapshot:
            return
        self.metadata_offset = max(offset, self.metadata_offset)
        if fenced != self.fenced:
            self.fenced = fenced
            for tp in sorted(self.partitions):
                state = self.partitions[tp].leader_state
                if state is not None:
                    state.ineligible = fenced  # type: ignore[assignment]
                    self._maybe_advance(self.partitions[tp])
        if snapshot:
            self.metadata = {}
        generation = self.generation
        for tp in sorted(changes):
            state = changes[tp]
            self.metadata[tp] = state
            if self.broker not in state.replicas or not self.hostable(tp):
                continue
            self._apply_role(tp, state, snapshot)
            if generation != self.generation:
                return  # the broker crashed at a probe point: the rest is not applied

    def activate(self, tp: TopicPartition) -> None:
        """Host ``tp`` (an internal partition nobody used so far) in the role this broker's
        metadata gives it: an empty replica, as if it had been hosted all along."""
        state = self.metadata.get(tp)
        if state is None or self.broker not in state.replicas or tp in self.partitions:
            return
        self._activating = True
        try:
            self._apply_role(tp, state, True)
        finally:
            self._activating = False
        part = self.partitions.get(tp)
        if part is not None and part.is_leader and part.leader_state is not None:
            # Hosted all along, it would be in the fetch sessions of its followers, whose
            # fetches parked here an append to it would answer at once (not after
            # replica.fetch.wait.max.ms): they carry it from now on, empty, as those
            # followers' replicas are.
            self.delayed_fetch_purgatory.include(
                tp,
                ReplicaFetchPartition(0, -1, part.leader_epoch),
                part.leader_state.followers,
            )

    def _apply_role(self, tp: TopicPartition, state: PartitionState, snapshot: bool) -> None:
        part = self.host(tp)
        if state.leader == self.broker:
            if not part.is_leader or part.leader_epoch != state.leader_epoch:
                self._make_leader(part, state)
                self.probe.hit("replica.became_leader", self.broker)
            else:
                self._leader_isr_update(part, state)
        elif (
            part.is_leader
            or part.leader != state.leader
            or part.leader_epoch != state.leader_epoch
            or snapshot
        ):
            self._make_follower(part, state)
            self.probe.hit("replica.became_follower", self.broker)
        else:
            part.partition_epoch = state.partition_epoch

    def _make_leader(self, part: Partition, state: PartitionState) -> None:
        self.replica_fetcher_manager.remove_partition(part.tp)
        part.make_leader(
            state.leader_epoch,
            state.partition_epoch,
            state.replicas,
            state.isr,
            self.env.now,
            self.topic(part.tp),
            self.settings.replica_lag_time_max_ms,
            self.rules.hw_advances_under_min_isr,
        )
        assert part.leader_state is not None
        part.leader_state.ineligible = self.fenced  # type: ignore[assignment]
        self.alter_partition_manager.clear(part.tp)
        if self._state_log.enabled:
            self._state_log.record(
                self.broker,
                "became_leader",
                part.tp,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                log_end_offset=part.log_end_offset,
                high_watermark=part.high_watermark,
            )
            self._logged_hw[part.tp] = part.high_watermark
        if len(state.replicas) > 1:
            self.alter_partition_manager.start_isr_expiration()
        self._high_watermark_moved(part)
        if self.on_internal_role is not None and is_internal(part.tp[0]):
            self.on_internal_role(part.tp, state.leader_epoch, self._activating)

    def _leader_isr_update(self, part: Partition, state: PartitionState) -> None:
        """New metadata for a partition this broker leads at the same epoch: a newer partition
        epoch, or an ISR other than the one it has, replaces its ISR and ends any pending
        AlterPartition (Partition.makeLeader's updateAssignmentAndIsr)."""
        leader_state = part.leader_state
        assert leader_state is not None
        isr = frozenset(state.isr)
        if state.partition_epoch > part.partition_epoch or isr != leader_state.isr:
            self.alter_partition_manager.clear(part.tp)
            leader_state.isr_committed(isr)  # type: ignore[arg-type]
        part.partition_epoch = max(part.partition_epoch, state.partition_epoch)
        self._maybe_advance(part)

    def _make_follower(self, part: Partition, state: PartitionState) -> None:
        was_leader = part.is_leader
        part.make_follower(state.leader, state.leader_epoch, state.partition_epoch, state.replicas)
        part.fetch_failed = None
        self.alter_partition_manager.clear(part.tp)
        self._logged_hw.pop(part.tp, None)
        self._state_log.record(
            self.broker,
            "became_follower",
            part.tp,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            log_end_offset=part.log_end_offset,
        )
        if was_leader:
            self.delayed_produce_purgatory.fail_waits(part.tp, Errors.NOT_LEADER_OR_FOLLOWER)
            # ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader: held consumer
            # fetches of it are answered (NOT_LEADER_OR_FOLLOWER).
            self.delayed_fetch_purgatory.check_reads(part.tp)
            if self.on_internal_role is not None and is_internal(part.tp[0]):
                self.on_internal_role(part.tp, None, False)
        if self.rules.truncation == "high_watermark":
            # Before KIP-101: a new follower cuts its log back to its own high watermark.
            self.replica_fetcher_manager.truncate(
                part, part.high_watermark, "high watermark (before KIP-101)"
            )
        part.truncating = self.rules.truncation == "leader_epoch_kip101"
        fetchers = self.replica_fetcher_manager
        fetchers.remove_partition(part.tp)
        if state.leader is not None:
            fetchers.add_partition(state.leader, part.tp)

    # -- leader: appends and acks=all -----------------------------------------------------
    def after_leader_append(self, part: Partition, deferred: bool = False) -> None:
        """The leader appended to ``part``: the HW may move (no followers), and the held
        requests the append may unblock (follower fetches of ``part``, acks=all waits on it)
        are checked. Kafka checks them in an action it queues (ReplicaManager.
        addCompletePurgatoryAction) and runs when a request handler thread finishes a
        request (KafkaApis.handle, KafkaRequestHandler after a callback: ReplicaManager.
        tryCompleteActions): an append made while handling a request (``deferred`` False)
        has them checked as that request ends, which is now; one made by another thread
        (``deferred``: the transaction coordinator's writes from its marker thread and its
        scheduler) waits in :meth:`complete_actions` for the next request this broker
        handles, or for the held fetches' own ``replica.fetch.wait.max.ms``."""
        state = part.leader_state
        if state is not None and state.maybe_increment_high_watermark(
            part.log_end_offset, self.env.now
        ):
            self._log_hw(part)  # Partition.appendRecordsToLeader: maybeIncrementLeaderHW
        self._actions[part.tp] = None
        if not deferred:
            self.complete_actions()

    def complete_actions(self) -> None:
        """Run the queued checks (ReplicaManager.tryCompleteActions): for each partition
        appended to, in order, its acks=all waits and its held follower fetches."""
        while self._actions:
            tp = next(iter(self._actions))
            del self._actions[tp]
            part = self.leader_partition(tp)
            if part is None:
                continue  # no longer leader: its waits and fetches were answered then
            self._high_watermark_moved(part)
            fetches = self.delayed_fetch_purgatory
            if fetches.parked:
                fetches.complete_parked({tp})

    def wait_for_replication(
        self,
        waits: list[tuple[TopicPartition, int]],
        timeout_ms: float,
        on_complete: Callable[[dict[TopicPartition, Errors]], None],
    ) -> None:
        """Answer through ``on_complete`` once every ``(partition, end offset)`` is
        replicated, refused, or ``timeout_ms`` passed (ReplicaManager.appendRecords parks a
        DelayedProduce: :class:`DelayedProducePurgatory`)."""
        self.delayed_produce_purgatory.wait_for_replication(waits, timeout_ms, on_complete)

    def _high_watermark_moved(self, part: Partition) -> None:
        """``part``'s HW (or ISR) may have moved: complete what waits on it
        (Partition.tryCompleteDelayedRequests)."""
        fetches = self.delayed_fetch_purgatory
        if fetches.held_reads:
            fetches.check_reads(part.tp)
        self.delayed_produce_purgatory.check_and_complete(part.tp)

    def _maybe_advance(self, part: Partition) -> None:
        state = part.leader_state
        if state is None:
            return
        if state.maybe_increment_high_watermark(part.log_end_offset, self.env.now):
            self._log_hw(part)
        # Waits can complete without the HW moving too (an ISR change that makes a
        # wait answerable, say); checking them is cheap.
        self._high_watermark_moved(part)

    def _log_hw(self, part: Partition) -> None:
        if self._state_log.enabled and self._logged_hw.get(part.tp) != part.high_watermark:
            self._logged_hw[part.tp] = part.high_watermark
            self._state_log.record(
                self.broker, "high_watermark", part.tp, high_watermark=part.high_watermark
            )

    # -- leader: consumer fetches held for data --------------------------------------------
    def hold_read(
        self,
        partitions: tuple[TopicPartition, ...],
        completable: Callable[[], bool],
        read: Callable[[], object],
        reply: Callable[[object], None],
        max_wait_ms: float,
    ) -> None:
        """Hold a consumer fetch of ``partitions`` until ``completable()`` or ``max_wait_ms``,
        then ``reply`` with what ``read()`` finds (ReplicaManager.fetchMessages parks a
        DelayedFetch: :class:`DelayedFetchPurgatory`)."""
        self.delayed_fetch_purgatory.hold_read(partitions, completable, read, reply, max_wait_ms)

    # -- leader: follower fetches -----------------------------------------------------------
    def handle_replica_fetch(
        self, msg: Message, request: ReplicaFetchRequest
    ) -> ReplicaFetchResponse | None:
        """A follower's fetch: answered now, or held until data arrives (None)."""
        now = self.env.now
        has_data = False
        answers: list[tuple[TopicPartition, ReplicaFetchData]] = []
        for tp, fp in request.partitions:
            data = self._read_for_follower(request.replica, tp, fp, now, update=True)
            answers.append((tp, data))
            if data.error is not Errors.NONE or data.batches or data.diverging_epoch is not None:
                has_data = True
        if has_data:
            return ReplicaFetchResponse(request.correlation_id, answers)
        self.delayed_fetch_purgatory.park(msg, request)
        return None

    def _read_for_follower(
        self,
        replica: str,
        tp: TopicPartition,
        fp: ReplicaFetchPartition,
        now: float,
        update: bool,
    ) -> ReplicaFetchData:
        part = self.partitions.get(tp)
        if part is None or not part.is_leader:
            return ReplicaFetchData(Errors.NOT_LEADER_OR_FOLLOWER)
        if fp.current_leader_epoch < part.leader_epoch:
            return ReplicaFetchData(Errors.FENCED_LEADER_EPOCH)
        if fp.current_leader_epoch > part.leader_epoch:
            return ReplicaFetchData(Errors.UNKNOWN_LEADER_EPOCH)
        state = part.leader_state
        assert state is not None
        if replica not in state.followers:
            return ReplicaFetchData(Errors.NOT_LEADER_OR_FOLLOWER)
        log = part.log
        leo = log.log_end_offset
        if fp.epoch_query is not None:
            # OffsetsForLeaderEpoch (KIP-101): the end of the follower's epoch here; before
            # KIP-279 the answer carries no epoch.
            epoch, end = part.epoch_cache.end_offset_for(fp.epoch_query, leo)
            if self.rules.truncation == "leader_epoch_kip101":
                epoch = UNDEFINED_EPOCH
            return ReplicaFetchData(
                Errors.NONE,
                high_watermark=state.high_watermark,
                log_end_offset=leo,
                fetch_offset=fp.fetch_offset,
                epoch_end_offset=(epoch, end),
            )
        if self.rules.truncation == "leader_epoch" and fp.last_fetched_epoch >= 0:
            # Partition.fetchRecords: validate the follower's last fetched epoch (KIP-595).
            epoch, end = part.epoch_cache.end_offset_for(fp.last_fetched_epoch, leo)
            if epoch == UNDEFINED_EPOCH or end < 0:
                return ReplicaFetchData(
                    Errors.OFFSET_OUT_OF_RANGE,
                    high_watermark=state.high_watermark,
                    log_end_offset=leo,
                    fetch_offset=fp.fetch_offset,
                )
            if end < fp.fetch_offset or epoch < fp.last_fetched_epoch:
                return ReplicaFetchData(
                    Errors.NONE,
                    high_watermark=state.high_watermark,
                    log_end_offset=leo,
                    diverging_epoch=(epoch, end),
                    fetch_offset=fp.fetch_offset,
                )
        if fp.fetch_offset > leo or fp.fetch_offset < log.log_start_offset:
            return ReplicaFetchData(
                Errors.OFFSET_OUT_OF_RANGE,
                high_watermark=state.high_watermark,
                log_end_offset=leo,
                fetch_offset=fp.fetch_offset,
                log_start_offset=log.log_start_offset,
            )
        # Partition.readRecords takes the high watermark before the read, and fetchRecords
        # updates the follower's state (which may move it) after: the answer carries the HW
        # as it was before this fetch, so a follower learns of the advance its own fetch made
        # one fetch later (from a held fetch, answered by a fresh read, at once).
        high_watermark = state.high_watermark
        batches, _aborted = log.fetch(
            fp.fetch_offset, "replica", self.settings.replica_fetch_max_records
        )
        if update:
            state.follower_fetched(replica, fp.fetch_offset, leo, now)  # type: ignore[arg-type]
            if state.isr_to_expand(replica):  # type: ignore[arg-type]
                self.alter_partition_manager.alter_isr(part, state.isr | {replica})  # type: ignore[operator]
            self._log_hw(part)
            self._high_watermark_moved(part)
        return ReplicaFetchData(
            Errors.NONE,
            batches,
            high_watermark,
            leo,
            fetch_offset=fp.fetch_offset,
            log_start_offset=log.log_start_offset,
        )

    # -- faults --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """The broker crashed: fetchers, held fetches, waits and timers are gone. Logs stay
        (a process crash keeps the page cache)."""
        self.generation += 1
        self.replica_fetcher_manager.shutdown()
        self.delayed_fetch_purgatory.shutdown()
        self.reaper.clear()
        self.delayed_produce_purgatory.shutdown()
        self._actions = {}
        self.alter_partition_manager.shutdown()
        for part in self.partitions.values():
            if part.leader_state is not None:
                # Not serving until the controller's metadata says so again; the replica
                # remembers whom it last knew as leader.
                part.make_follower(
                    part.leader, part.leader_epoch, part.partition_epoch, part.replicas
                )

    def resumed(self) -> None:
        """The paused process runs again: the held requests whose time ran out meanwhile are
        completed (:class:`ExpiredOperationReaper`)."""
        self.reaper.resumed()

    def wake_fetchers(self) -> None:
        """Have every idle fetcher fetch now (the process runs again)."""
        self.replica_fetcher_manager.wake_fetchers()
