"""ReplicaManager: a broker's replicas, their roles, replication and acks=all waits.

Kafka's ``ReplicaManager`` with the parts of ``Partition``, ``DelayedProduce``,
``DelayedFetch``, ``ReplicaFetcherThread`` and ``AlterPartitionManager`` that decide delivery:

* **Roles** come from the controller's published registrations (:meth:`apply_metadata`,
  Kafka's ``applyDelta``): a replica named leader makes itself leader at the new epoch; any
  other becomes a follower of the named leader and joins the fetcher for that broker. Under
  the rule ``truncation: high_watermark`` (before KIP-101) a new follower first truncates its
  log to its own high watermark; under ``leader_epoch`` (the default) it keeps its log and the
  leader tells it where the logs diverged (KIP-101/279, as fetch validation since KIP-595).
* **Follower fetches** (:meth:`handle_replica_fetch`): the leader checks the follower's leader
  epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), its last fetched epoch against the
  leader-epoch cache (``divergingEpoch``), updates the follower's state, maybe the ISR and the
  HW, and answers at once when it has data; otherwise it holds the fetch until an append or
  ``replica.fetch.wait.max.ms`` (500 ms), which is also how long a follower can lag in hearing
  of a new HW.
* **acks=all** (:meth:`wait_for_replication`): a produce or marker write is answered once the
  HW passes it (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
  ``min.insync.replicas`` meanwhile), with NOT_LEADER_OR_FOLLOWER if leadership moves away,
  or REQUEST_TIMED_OUT after the request's timeout.
* **ISR changes**: every ``replica.lag.time.max.ms / 2`` a leader drops followers that have
  not caught up within ``replica.lag.time.max.ms``; a follower whose log reaches the HW joins
  again. Each change is an AlterPartition to the controller, which takes effect when accepted.

Extending it: a new replica-side behaviour reads or changes :class:`Partition` (pure logic,
unit-tested on its own) and is driven from here; anything timed is a SimPy timer owned by this
object and dropped by :meth:`shutdown` (a crash).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from eosim.simulation.broker.durability import LogDurability
from eosim.simulation.broker.leader_epoch_cache import UNDEFINED_EPOCH, truncation_state
from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.config import kafka_default
from eosim.simulation.coordinator.directory import is_internal
from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    Disconnected,
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

# Partition.handleAlterPartitionError: the controller says the change was not applied ...
_ALTER_NOT_APPLIED = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})
# ... or the leader's state is out of date and only new metadata can settle it.
_ALTER_AWAIT_METADATA = frozenset(
    {
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NEW_LEADER_ELECTED,
    }
)


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


@dataclass(eq=False, slots=True)
class _Wait:
    """One partition of a request waiting for replication (DelayedProduce's status)."""

    tp: TopicPartition
    required_offset: int
    error: Errors | None = None  # None while waiting


@dataclass(eq=False, slots=True)
class DelayedWrite:
    """An acks=all request (produce or markers) parked until every partition is answered."""

    waits: list[_Wait]
    on_complete: Callable[[dict[TopicPartition, Errors]], None]
    done: bool = False


@dataclass(eq=False, slots=True)
class _ParkedFetch:
    msg: Message
    request: ReplicaFetchRequest
    done: bool = False


@dataclass(eq=False, slots=True)
class _HeldRead:
    """A consumer fetch held for data (Kafka's DelayedFetch of a consumer)."""

    partitions: tuple[TopicPartition, ...]
    completable: Callable[[], bool]
    answer: Callable[[], None]
    done: bool = False


@dataclass(eq=False)
class ReplicaFetcher:
    """The fetcher of one follower broker from one leader broker (ReplicaFetcherThread)."""

    source: str
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    delayed_until: dict[TopicPartition, float] = field(default_factory=dict)
    conn: Connection | None = None
    generation: int = 0
    in_flight: int | None = None  # correlation id
    wakeup: simpy.Event | None = None
    process: Any = None


class ReplicaManager:
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
    ) -> None:
        self.env = env
        # Draws the phase of the ISR expiration task (see _isr_expiration); None: no phase.
        self.isr_rng = isr_rng
        self.broker = broker
        self.network = network
        self.rules = rules
        self.settings = settings
        self.topics = topics
        self.new_state = new_state
        self.is_running = is_running  # alive and not paused
        self.probe = probe if probe is not None else Probe()
        self.state_log = state_log
        # The high watermark last written to the state-change log, per led partition.
        self._logged_hw: dict[TopicPartition, int] = {}
        # Followers that stopped fetching for good: (partition, why), in order.
        self.failures: list[tuple[TopicPartition, str]] = []
        # How a held follower fetch is answered (the broker sends it and unmutes the
        # connection).
        self.respond = respond
        self.partitions: dict[TopicPartition, Partition] = {}
        # The metadata this broker has replayed (its MetadataCache): every data partition.
        self.metadata: dict[TopicPartition, PartitionState] = {}
        self.metadata_offset = -1
        self.fenced: frozenset[str] = frozenset()
        self._delayed: dict[TopicPartition, list[DelayedWrite]] = {}
        self._parked: list[_ParkedFetch] = []
        # Partitions appended to whose held requests are still to be checked (Kafka's
        # ActionQueue of ReplicaManager), in the order of the appends.
        self._actions: dict[TopicPartition, None] = {}
        self._held_reads: list[_HeldRead] = []
        # Held requests whose time ran out while the process was paused, in that order: the
        # purgatory's reaper is frozen with the rest of the process and completes them when it
        # runs again (:meth:`resumed`).
        self._frozen: list[Callable[[], None]] = []
        self._fetchers: dict[str, ReplicaFetcher] = {}
        self._alter_in_flight: dict[TopicPartition, tuple[int, float]] = {}
        self._correlation = 0
        self.generation = 0  # bumped by a crash: timers of the old incarnation do nothing
        self._isr_task_started = False
        # Whether a partition is hosted when the metadata names this broker a replica: every
        # data partition, an internal one once it is active (the cluster says which).
        self.hostable: Callable[[TopicPartition], bool] = (
            hostable if hostable is not None else lambda tp: True
        )
        # Told when a replica of an internal partition becomes leader (its leader epoch) or
        # stops being leader (None), and whether it was just activated (the coordinator
        # runtime's load and unload).
        self.on_internal_role: Callable[[TopicPartition, int | None, bool], None] | None = None
        self._activating = False

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
        self._stop_fetching(part.tp)
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
        self._alter_in_flight.pop(part.tp, None)
        if self.state_log.enabled:
            self.state_log.record(
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
            self._start_isr_task()
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
            self._alter_in_flight.pop(part.tp, None)
            leader_state.isr_committed(isr)  # type: ignore[arg-type]
        part.partition_epoch = max(part.partition_epoch, state.partition_epoch)
        self._maybe_advance(part)

    def _make_follower(self, part: Partition, state: PartitionState) -> None:
        was_leader = part.is_leader
        part.make_follower(state.leader, state.leader_epoch, state.partition_epoch, state.replicas)
        part.fetch_failed = None
        self._alter_in_flight.pop(part.tp, None)
        self._logged_hw.pop(part.tp, None)
        self.state_log.record(
            self.broker,
            "became_follower",
            part.tp,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            log_end_offset=part.log_end_offset,
        )
        if was_leader:
            self._fail_waits(part.tp, Errors.NOT_LEADER_OR_FOLLOWER)
            # ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader: held consumer
            # fetches of it are answered (NOT_LEADER_OR_FOLLOWER).
            self._check_reads(part.tp)
            if self.on_internal_role is not None and is_internal(part.tp[0]):
                self.on_internal_role(part.tp, None, False)
        if self.rules.truncation == "high_watermark":
            # Before KIP-101: a new follower cuts its log back to its own high watermark.
            self._truncate(part, part.high_watermark, "high watermark (before KIP-101)")
        part.truncating = self.rules.truncation == "leader_epoch_kip101"
        self._stop_fetching(part.tp)
        if state.leader is not None:
            self._fetcher(state.leader).partitions[part.tp] = None
            self._wake_fetcher(state.leader)

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
            if self._parked:
                self._complete_parked({tp})

    def wait_for_replication(
        self,
        waits: list[tuple[TopicPartition, int]],
        timeout_ms: float,
        on_complete: Callable[[dict[TopicPartition, Errors]], None],
    ) -> None:
        """Answer through ``on_complete`` once every ``(partition, end offset)`` is
        replicated, refused, or ``timeout_ms`` passed (DelayedProduce)."""
        delayed = DelayedWrite([_Wait(tp, offset) for tp, offset in waits], on_complete)
        for wait in delayed.waits:
            self._check_wait(wait)
        if self._try_complete(delayed):
            return
        for wait in delayed.waits:
            if wait.error is None:
                self._delayed.setdefault(wait.tp, []).append(delayed)
        generation = self.generation

        def expire(_ev: simpy.Event | None = None) -> None:
            if generation != self.generation or delayed.done:
                return
            if not self.is_running():
                # Paused: expired when the process runs again (DelayedOperation.run, from
                # the frozen reaper).
                self._frozen.append(expire)
                return
            for wait in delayed.waits:
                if wait.error is None:
                    wait.error = Errors.REQUEST_TIMED_OUT
            self._try_complete(delayed)

        self.env.timeout(timeout_ms).callbacks.append(expire)

    def _check_wait(self, wait: _Wait) -> None:
        if wait.error is not None:
            return
        part = self.leader_partition(wait.tp)
        if part is None:
            wait.error = Errors.NOT_LEADER_OR_FOLLOWER
            return
        assert part.leader_state is not None
        answer = part.leader_state.replicated(wait.required_offset)
        if answer is not None:
            wait.error = answer

    def _try_complete(self, delayed: DelayedWrite) -> bool:
        if delayed.done or any(w.error is None for w in delayed.waits):
            return delayed.done
        delayed.done = True
        delayed.on_complete({w.tp: w.error for w in delayed.waits})  # type: ignore[misc]
        return True

    def _high_watermark_moved(self, part: Partition) -> None:
        if self._held_reads:
            self._check_reads(part.tp)
        waiting = self._delayed.get(part.tp)
        if not waiting:
            return
        for delayed in list(waiting):
            for wait in delayed.waits:
                if wait.tp == part.tp:
                    self._check_wait(wait)
            self._try_complete(delayed)
        self._delayed[part.tp] = [d for d in waiting if not d.done]

    # -- leader: consumer fetches held for data --------------------------------------------
    def hold_read(
        self,
        partitions: tuple[TopicPartition, ...],
        completable: Callable[[], bool],
        answer: Callable[[], None],
        max_wait_ms: float,
    ) -> None:
        """Hold a consumer fetch of ``partitions`` until ``completable()`` (checked whenever
        one of them is appended to, its high watermark may have moved, or it stops being
        led here: DelayedFetch's purgatory keys) or ``max_wait_ms`` has passed; then
        ``answer()`` (which reads the log as it is then)."""
        held = _HeldRead(partitions, completable, answer)
        self._held_reads.append(held)
        generation = self.generation

        def expire(_ev: simpy.Event | None = None) -> None:
            if generation != self.generation or held.done:
                return
            if not self.is_running():
                self._frozen.append(expire)  # answered when the process runs again
                return
            self._finish_read(held)

        self.env.timeout(max_wait_ms).callbacks.append(expire)

    def _check_reads(self, tp: TopicPartition) -> None:
        for held in list(self._held_reads):
            if not held.done and tp in held.partitions and held.completable():
                self._finish_read(held)

    def _finish_read(self, held: _HeldRead) -> None:
        held.done = True
        self._held_reads = [h for h in self._held_reads if not h.done]
        held.answer()

    def _fail_waits(self, tp: TopicPartition, error: Errors) -> None:
        for delayed in self._delayed.pop(tp, []):
            for wait in delayed.waits:
                if wait.tp == tp and wait.error is None:
                    wait.error = error
            self._try_complete(delayed)

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
        if self.state_log.enabled and self._logged_hw.get(part.tp) != part.high_watermark:
            self._logged_hw[part.tp] = part.high_watermark
            self.state_log.record(
                self.broker, "high_watermark", part.tp, high_watermark=part.high_watermark
            )

    def _truncate(self, part: Partition, offset: int, reason: str) -> None:
        """Cut ``part``'s log back to ``offset`` (whole batches), saying why in the
        state-change log when that drops anything."""
        before = part.log_end_offset
        part.truncate_to(max(offset, 0), self.new_state(), self.env.now)
        if part.log_end_offset < before:
            self.state_log.record(
                self.broker,
                "truncated",
                part.tp,
                log_end_offset=before,
                to=part.log_end_offset,
                reason=reason,
            )

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
        parked = _ParkedFetch(msg, request)
        self._parked.append(parked)
        generation = self.generation

        def timed_out(_ev: simpy.Event) -> None:
            if generation == self.generation and not parked.done:
                self._answer_parked(parked)

        self.env.timeout(self.settings.replica_fetch_wait_max_ms).callbacks.append(timed_out)
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
        if update:
            state.follower_fetched(replica, fp.fetch_offset, leo, now)  # type: ignore[arg-type]
            if state.isr_to_expand(replica):  # type: ignore[arg-type]
                self._alter_isr(part, state.isr | {replica})  # type: ignore[operator]
            self._log_hw(part)
            self._high_watermark_moved(part)
        batches, _aborted = log.fetch(
            fp.fetch_offset, "replica", self.settings.replica_fetch_max_records
        )
        return ReplicaFetchData(
            Errors.NONE,
            batches,
            state.high_watermark,
            leo,
            fetch_offset=fp.fetch_offset,
            log_start_offset=log.log_start_offset,
        )

    def _complete_parked(self, tps: set[TopicPartition]) -> None:
        for parked in list(self._parked):
            if not parked.done and any(tp in tps for tp, _fp in parked.request.partitions):
                self._answer_parked(parked)

    def _answer_parked(self, parked: _ParkedFetch) -> None:
        if parked.done:
            return
        if not self.is_running():
            # Paused (a crash drops every held fetch): the fetch is completed, and answered,
            # when the process runs again (DelayedOperation.run, from the frozen reaper).
            self._frozen.append(lambda: self._answer_parked(parked))
            return
        parked.done = True
        self._parked = [p for p in self._parked if not p.done]
        now = self.env.now
        answers = [
            (tp, self._read_for_follower(parked.request.replica, tp, fp, now, update=False))
            for tp, fp in parked.request.partitions
        ]
        response = ReplicaFetchResponse(parked.request.correlation_id, answers)
        if self.respond is not None:
            self.respond(parked.msg, response)
        else:
            self.network.send(self.broker, parked.msg.src, response, parked.msg.conn, internal=True)

    # -- leader: ISR changes (AlterPartition) ------------------------------------------------
    def _start_isr_task(self) -> None:
        if self._isr_task_started:
            return
        self._isr_task_started = True
        self.env.process(self._isr_expiration())

    def _isr_expiration(self):  # type: ignore[no-untyped-def]
        """Kafka's ``isr-expiration`` task (ReplicaManager.startup schedules maybeShrinkIsr
        every ``replica.lag.time.max.ms / 2`` from the broker's start), so a follower that
        stopped fetching leaves the ISR between 1 and 1.5 times ``replica.lag.time.max.ms``
        after its last catch-up, depending on where the task's period happens to fall. The
        broker's start is not part of a scenario (a real cluster started long before the run,
        or restarted a startup time before it leads again), so the task's phase is drawn,
        uniform over one period, each time the task starts."""
        interval = self.settings.replica_lag_time_max_ms / 2
        generation = self.generation
        phase = interval * self.isr_rng.random() if self.isr_rng is not None else 0.0
        first = True
        while generation == self.generation:
            yield self.env.timeout(phase if first and phase > 0.0 else interval)
            first = False
            if generation != self.generation:
                return
            if not self.is_running():
                continue
            now = self.env.now
            for tp in sorted(self.partitions):
                part = self.partitions[tp]
                state = part.leader_state
                if state is None:
                    continue
                out = state.out_of_sync_replicas(part.log_end_offset, now)
                if out:
                    self._alter_isr(part, state.isr - set(out))  # type: ignore[arg-type]
                else:
                    self._resend_stale_alter(part)

    def _alter_isr(self, part: Partition, isr: frozenset[Any]) -> None:
        state = part.leader_state
        assert state is not None
        if state.pending_isr is not None:
            return
        state.propose_isr(isr)
        self._send_alter(part)

    def _send_alter(self, part: Partition) -> None:
        state = part.leader_state
        assert state is not None and state.pending_isr is not None
        ordered = tuple(r for r in part.replicas if r in state.pending_isr)
        self._correlation += 1
        self._alter_in_flight[part.tp] = (self._correlation, self.env.now)
        request = AlterPartitionRequest(
            self._correlation,
            self.broker,
            part.tp,
            part.leader_epoch,
            part.partition_epoch,
            ordered,
        )
        self.network.send(self.broker, CONTROLLER, request, internal=True)

    def _resend_stale_alter(self, part: Partition) -> None:
        sent = self._alter_in_flight.get(part.tp)
        if (
            sent is not None
            and self.env.now - sent[1] >= self.settings.controller_request_timeout_ms
        ):
            self._send_alter(part)

    def on_alter_partition_response(self, response: AlterPartitionResponse) -> None:
        """The controller's answer (Partition.handleAlterPartitionError for errors): accepted
        applies the ISR; OPERATION_NOT_ATTEMPTED and INELIGIBLE_REPLICA (the controller says
        the change was not applied) return to the committed ISR; FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION and
        NEW_LEADER_ELECTED leave the change pending until new metadata replaces it; anything
        else is retried."""
        sent = self._alter_in_flight.get(response.tp)
        if sent is None or sent[0] != response.correlation_id:
            return
        part = self.partitions.get(response.tp)
        if part is None or part.leader_state is None:
            del self._alter_in_flight[response.tp]
            return
        error = response.error
        if error is Errors.NONE:
            del self._alter_in_flight[response.tp]
            if response.leader_epoch == part.leader_epoch:
                part.partition_epoch = response.partition_epoch
                part.leader_state.isr_committed(frozenset(response.isr))
            else:
                part.leader_state.isr_committed(None)
        elif error in _ALTER_NOT_APPLIED:
            del self._alter_in_flight[response.tp]
            part.leader_state.isr_committed(None)
        elif error in _ALTER_AWAIT_METADATA:
            # Stays pending (the in-flight entry too, so it is not sent again): the next
            # metadata for this partition settles it.
            self._alter_in_flight[response.tp] = (sent[0], float("inf"))
            return
        else:
            self._send_alter(part)  # retried
            return
        self._maybe_advance(part)

    # -- follower: fetching from leaders ------------------------------------------------------
    def _fetcher(self, source: str) -> ReplicaFetcher:
        fetcher = self._fetchers.get(source)
        if fetcher is None:
            fetcher = ReplicaFetcher(source)
            self._fetchers[source] = fetcher
            fetcher.process = self.env.process(self._fetch_loop(fetcher, self.generation))
        return fetcher

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.partitions.pop(tp, None)
            fetcher.delayed_until.pop(tp, None)

    def _wake_fetcher(self, source: str) -> None:
        """Have an idle fetcher fetch now. A fetcher with a request in flight is left alone:
        its answer wakes it, and the next request takes the new partitions (waking it early
        would look like an unanswered request to the loop, and back every partition off)."""
        fetcher = self._fetchers.get(source)
        if (
            fetcher is not None
            and fetcher.in_flight is None
            and fetcher.wakeup is not None
            and not fetcher.wakeup.triggered
        ):
            fetcher.wakeup.succeed()

    def resumed(self) -> None:
        """The paused process runs again: complete the held requests whose time ran out
        meanwhile, in the order it did (Kafka's ``SystemTimerReaper`` thread was frozen too; it
        expires every overdue operation at its next tick)."""
        frozen, self._frozen = self._frozen, []
        for complete in frozen:
            complete()

    def wake_fetchers(self) -> None:
        for source in sorted(self._fetchers):
            self._wake_fetcher(source)

    def _fetch_loop(self, fetcher: ReplicaFetcher, generation: int):  # type: ignore[no-untyped-def]
        env = self.env
        settings = self.settings
        while generation == self.generation:
            now = env.now
            ready = [
                tp
                for tp in fetcher.partitions
                if fetcher.delayed_until.get(tp, 0.0) <= now
                and tp in self.partitions
                and self.partitions[tp].fetch_failed is None
            ]
            if not ready or not self.is_running():
                waits = [t - now for t in fetcher.delayed_until.values() if t > now]
                fetcher.wakeup = env.event()
                if waits and self.is_running():
                    yield env.any_of([fetcher.wakeup, env.timeout(min(waits))])
                else:
                    yield fetcher.wakeup
                continue
            parts = []
            for tp in ready:
                part = self.partitions[tp]
                query = part.epoch_cache.latest_epoch if part.truncating else None
                parts.append(
                    (
                        tp,
                        ReplicaFetchPartition(
                            part.log_end_offset,
                            part.last_fetched_epoch,
                            part.leader_epoch,
                            query,
                        ),
                    )
                )
            self._correlation += 1
            cid = self._correlation
            if fetcher.conn is None or fetcher.conn.closed:
                fetcher.generation += 1
                fetcher.conn = self.network.connect(self.broker, fetcher.source, fetcher.generation)
            fetcher.in_flight = cid
            request = ReplicaFetchRequest(cid, self.broker, tuple(parts))
            fetcher.wakeup = env.event()
            self.network.send(self.broker, fetcher.source, request, fetcher.conn, internal=True)
            timeout = env.timeout(
                settings.replica_socket_timeout_ms + settings.replica_fetch_wait_max_ms
            )
            yield env.any_of([fetcher.wakeup, timeout])
            if generation != self.generation:
                return
            if fetcher.in_flight == cid:
                # No answer (timeout or a reset connection): back off, reconnect.
                fetcher.in_flight = None
                if fetcher.conn is not None:
                    fetcher.conn.close()
                    fetcher.conn = None
                backoff = env.now + settings.replica_fetch_backoff_ms
                for tp in ready:
                    fetcher.delayed_until[tp] = backoff

    def on_replica_fetch_response(
        self, src: str, msg_conn: Connection | None, response: ReplicaFetchResponse
    ) -> None:
        fetcher = self._fetchers.get(src)
        if (
            fetcher is None
            or fetcher.in_flight != response.correlation_id
            or msg_conn is not fetcher.conn
        ):
            return
        fetcher.in_flight = None
        now = self.env.now
        for tp, data in response.partitions:
            if tp not in fetcher.partitions:
                continue  # no longer following this leader
            part = self.partitions[tp]
            if part.fetch_failed is not None:
                continue
            if data.fetch_offset >= 0 and data.fetch_offset != part.log_end_offset:
                # The log moved since the fetch was sent (AbstractFetcherThread processes an
                # answer only for the offset it still fetches from).
                continue
            if data.error is Errors.NONE and data.epoch_end_offset is not None:
                if not part.truncating:
                    continue
                epoch, end = data.epoch_end_offset
                self._truncate_to_leader(part, epoch, end, "OffsetsForLeaderEpoch")
            elif data.error is Errors.NONE and data.diverging_epoch is not None:
                epoch, end = data.diverging_epoch
                self._truncate_to_leader(part, epoch, end, "diverging epoch")
            elif data.error is Errors.NONE:
                if part.truncating:
                    continue
                if data.batches and data.batches[0].base_offset != part.log_end_offset:
                    self._fail_fetch(
                        part,
                        f"the leader answered a fetch at {part.log_end_offset} with a batch "
                        f"from offset {data.batches[0].base_offset} (mid-batch: the logs "
                        "diverged where the follower cannot tell)",
                    )
                    continue
                part.append_as_follower(data.batches, data.high_watermark, now)
                part.fetched_epoch = part.leader_epoch
                part.follow_log_start(data.log_start_offset)
            elif data.error is Errors.OFFSET_OUT_OF_RANGE:
                if data.log_end_offset < part.log_end_offset:
                    # AbstractFetcherThread.fetchOffsetAndTruncate: the leader's log is
                    # shorter (an unclean election): cut back to it.
                    self._truncate(part, data.log_end_offset, "offset out of range")
                elif data.log_start_offset > part.log_end_offset:
                    # Everything this replica has was deleted on the leader: start again at
                    # its log start (AbstractFetcherThread.fetchOffsetAndTruncate).
                    part.truncate_fully_and_start_at(data.log_start_offset, self.new_state(), now)
            else:
                fetcher.delayed_until[tp] = now + self.settings.replica_fetch_backoff_ms
        if fetcher.wakeup is not None and not fetcher.wakeup.triggered:
            fetcher.wakeup.succeed()

    def _truncate_to_leader(self, part: Partition, epoch: int, end: int, why: str) -> None:
        """Truncate on the leader's (epoch, end offset) by :func:`truncation_state`; done
        when it says so, else the next fetch asks again."""
        decision = truncation_state(
            part.epoch_cache, part.log_end_offset, part.high_watermark, epoch, end
        )
        self._truncate(part, decision.offset, f"{why} ({epoch}, {end})")
        part.truncating = not decision.complete and part.truncating

    def _fail_fetch(self, part: Partition, reason: str) -> None:
        """The follower cannot append what its leader sent: the partition stops fetching
        until its leadership changes (AbstractFetcherThread.markPartitionFailed), loudly."""
        part.fetch_failed = reason
        self.failures.append((part.tp, reason))
        self.state_log.record(self.broker, "fetch_failed", part.tp, reason=reason)

    def on_disconnected(self, payload: Disconnected) -> None:
        fetcher = self._fetchers.get(payload.node)
        if fetcher is None or fetcher.conn is None or fetcher.generation != payload.generation:
            return
        fetcher.conn.closed = True
        if (
            fetcher.in_flight is not None
            and fetcher.wakeup is not None
            and not fetcher.wakeup.triggered
        ):
            fetcher.wakeup.succeed()  # the loop sees the request unanswered and backs off

    # -- faults --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """The broker crashed: fetchers, held fetches, waits and timers are gone. Logs stay
        (a process crash keeps the page cache)."""
        self.generation += 1
        for fetcher in self._fetchers.values():
            if fetcher.conn is not None:
                fetcher.conn.close()
            if fetcher.wakeup is not None and not fetcher.wakeup.triggered:
                fetcher.wakeup.succeed()
        self._fetchers = {}
        self._parked = []
        self._frozen = []
        self._delayed = {}
        self._actions = {}
        self._held_reads = []
        self._alter_in_flight = {}
        self._isr_task_started = False
        for part in self.partitions.values():
            if part.leader_state is not None:
                # Not serving until the controller's metadata says so again; the replica
                # remembers whom it last knew as leader.
                part.make_follower(
                    part.leader, part.leader_epoch, part.partition_epoch, part.replicas
                )

    def lose_page_cache(self) -> dict[str, list[int]]:
        """The machine lost power: each replica's log is cut back, now, to what was flushed or
        written back by the operating system (what a restart will find on disk). Returns the
        cuts, ``"topic-partition" -> [old log end, new log end]``, of the logs that lost
        records."""
        now = self.env.now
        cut: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            part = self.partitions[tp]
            before = part.log_end_offset
            # Deleted segments stay deleted: the log restarts no lower than its start
            # (LogLoader opens an empty segment at the checkpointed log start).
            durable = max(part.durability.durable_end(now), part.log.log_start_offset)
            if durable < before:
                part.truncate_to(durable, self.new_state(), now)
                if part.log_end_offset < before:
                    cut[f"{tp[0]}-{tp[1]}"] = [before, part.log_end_offset]
            part.durability.flush(part.log_end_offset, now)
        return cut

    def recover(self) -> None:
        """Restart after a crash (always an unclean shutdown): each replica's log is recovered
        and its producer state loaded from the snapshot written at its end, one batch per
        producer (:meth:`Partition.recover`); its high watermark is at most its log end."""
        now = self.env.now
        for tp in sorted(self.partitions):
            self.partitions[tp].recover(self.new_state(), now)

    def flush_task(self) -> None:
        """The log flusher (log.flush.scheduler.interval.ms: never by default)."""
        interval = self.settings.log_flush_scheduler_interval_ms
        if interval is None:
            return

        def loop():  # type: ignore[no-untyped-def]
            while True:
                yield self.env.timeout(interval)
                if not self.is_running():
                    continue
                now = self.env.now
                for tp in sorted(self.partitions):
                    part = self.partitions[tp]
                    part.durability.tick(part.log_end_offset, now)

        self.env.process(loop())
