"""CoordinatorRuntime: where one broker's transaction and group coordinators live in time and log.

Mirrors Kafka's ``CoordinatorRuntime`` (``coordinator-common``) and, for transactions, the
loading, pending state and log writes of ``TransactionStateManager``. The request paths are
split as Kafka splits them: the transaction requests in
:class:`~eosim.simulation.coordinator.transaction_coordinator_handlers.
TransactionCoordinatorHandlers` (Kafka's ``TransactionCoordinator``), the group requests in
:class:`~eosim.simulation.coordinator.group_coordinator_service.GroupCoordinatorService`; the
protocol decisions in :class:`TransactionCoordinator` and the group shards
(:class:`GroupMetadataManager`), pure logic. The runtime is built with both request paths
(:meth:`CoordinatorRuntime.__init__` takes how to make each) and merges their dispatch
tables; it holds

* **Leadership.** A broker coordinates the keys of the ``__transaction_state`` and
  ``__consumer_offsets`` partitions whose replica it leads (the controller decides, as for
  any partition). When its :class:`ReplicaManager` makes such a replica leader at leader
  epoch E, the runtime loads the partition: COORDINATOR_LOAD_IN_PROGRESS for ``load_ms``,
  then it replays its replica's log to the log end (``loadTransactionsForTxnTopicPartition``
  reads to the log end offset; the group coordinator replays the same way) and coordinates
  with coordinator epoch E. When the replica becomes a follower, or the broker crashes, it
  unloads (NOT_COORDINATOR). Loading has the transaction path re-send the markers of every
  PrepareCommit or PrepareAbort transaction it finds; Ongoing ones are left to the timeout.
* **Writes.** Every state change is a batch appended to the partition's leader replica with
  acks=all (``TransactionLog.EnforcedRequiredAcks``; ``transaction.state.log.min.isr``) and
  applied once it is replicated (``TransactionStateManager.appendTransactionToLog``,
  :meth:`CoordinatorRuntime.write`). While it is in flight the transactional.id is *pending*:
  InitProducerId, AddPartitionsToTxn and EndTxn for it are answered CONCURRENT_TRANSACTIONS
  (``pendingTransitionInProgress``), a partition verification reads the state before the
  write, and nothing else (markers, the answer, a fence in the history) happens. A failed write
  is reverted: NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT and
  UNKNOWN_TOPIC_OR_PARTITION are answered COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
  NOT_COORDINATOR. The model applies a change to the in-memory metadata as it writes it and,
  if the write fails, restores the copy it took when the write started (Kafka's transition
  stays pending and is dropped). What Kafka changes in memory outside a transition stays
  changed as it does there: a fence's epoch, set before its PrepareAbort is written, is in the
  copy, so a failed fence leaves the producer fenced (``hasFailedEpochFence``, KAFKA-9666).
  Offset commits are written the same way to ``__consumer_offsets`` (acks=all,
  ``offsets.commit.timeout.ms``, :meth:`CoordinatorRuntime.append`).
* **Group shards.** The :class:`GroupMetadataManager` of a ``__consumer_offsets`` partition
  is made on first need, with a :class:`SimpyCoordinatorTimer` and member ids from the seeded
  stream ``group-coordinator:<node>``. A shard's handler changes the group at once and returns
  records and an answer; the runtime writes the records with acks=all
  (``offsets.commit.timeout.ms``) and gives the answer once they are replicated (Kafka's
  ``scheduleWriteOperation``, :meth:`CoordinatorRuntime.apply_group_result`). Unloading a
  partition makes its groups Dead and answers their parked joins and syncs NOT_COORDINATOR
  (``onUnloaded``); loading replays the group records and restarts every member's session
  (``onLoaded``). A transaction marker written to ``__consumer_offsets`` settles the
  producer's pending offsets there (``scheduleTransactionCompletion``,
  :meth:`CoordinatorRuntime.marker_written`).
* **Timers and crashes.** Every ``abort_check_interval_ms`` it runs the transaction path's
  timed-out abort, and every ``expiration_check_interval_ms`` its transactional.id expiry; a
  crash drops everything in memory (and the marker channel, which the broker hands the
  markers' answers), and a restart starts the timers again.

Each fencing (an epoch bump that makes an older epoch of a producer id a zombie) is reported
through ``on_fence`` once its write is replicated, so that the history can record it.

To extend: a new coordinator request gets a handler in the request path it belongs to (see
:mod:`transaction_coordinator_handlers` and :mod:`group_coordinator_service`), named in that
path's ``dispatch_table``; what a new path needs of the runtime is a :class:`Protocol` here
(:class:`TransactionRequests`, :class:`GroupRequests`) and a constructor parameter.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol

import simpy

from eosim.simulation.coordinator.coordinator_result import (
    CoordinatorResult,
    append_group_metadata_error,
    coordinator_error,
)
from eosim.simulation.coordinator.coordinator_timer import SimpyCoordinatorTimer
from eosim.simulation.coordinator.directory import (
    TRANSACTION_STATE_TOPIC,
    InternalPartition,
    internal_partition,
)
from eosim.simulation.coordinator.group_config import GroupConfig
from eosim.simulation.coordinator.group_coordinator import (
    GroupCoordinator,
    OffsetStore,
    offsets_partition,
)
from eosim.simulation.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    uuid_member_ids,
)
from eosim.simulation.coordinator.marker_channel import TransactionMarkerChannelManager
from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_log import TransactionLogRecord, latest_records
from eosim.simulation.coordinator.transaction_state import TransactionMetadata
from eosim.simulation.coordinator.transaction_state import TransactionState as S
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Errors,
    TopicPartition,
)
from eosim.simulation.records import LogBatch
from eosim.simulation.rng import RandomStream
from eosim.simulation.rules import ProtocolRules

if TYPE_CHECKING:
    from eosim.simulation.broker.partition import Partition
    from eosim.simulation.broker.replica_manager import ReplicaManager

FenceListener = Callable[[str, int, int, float], None]  # txn id, producer id, new epoch, time
Done = Callable[[Errors], None]
# Transaction version 2: (txn id, producer id, epoch, partitions, on_done) -> adds the
# partitions to the transaction through its coordinator (AddPartitionsToTxnManager: one
# AddPartitionsToTxn entry for the caller's partitions, one answer for them all).
AddPartition = Callable[[str, int, int, tuple[TopicPartition, ...], Done], None]

# A coordinator request handler: the response, or None (held, or the coordinator died while
# handling it).
Handler = Callable[[Any], object | None]


class TransactionRequests(Protocol):
    """What the runtime and the cluster ask of the transaction coordinator's request path
    (:class:`~eosim.simulation.coordinator.transaction_coordinator_handlers.
    TransactionCoordinatorHandlers`)."""

    def dispatch_table(self) -> dict[type, Handler]: ...

    def write_markers(self, meta: TransactionMetadata) -> None: ...

    def abort_timed_out_transactions(self) -> None: ...

    def remove_expired_transactional_ids(self) -> None: ...

    def add_partitions(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: tuple[TopicPartition, ...],
        on_done: Done,
    ) -> None: ...

    def verify_partition(self, txn_id: str, pid: int, epoch: int, tp: TopicPartition) -> Errors: ...


class GroupRequests(Protocol):
    """What the runtime asks of the group coordinator's request path
    (:class:`~eosim.simulation.coordinator.group_coordinator_service.GroupCoordinatorService`)."""

    def dispatch_table(self) -> dict[type, Handler]: ...


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    load_ms: float = 50.0
    abort_check_interval_ms: float = 10_000.0
    transactional_id_expiration_ms: float = 604_800_000.0
    expiration_check_interval_ms: float = 3_600_000.0
    marker_request_timeout_ms: float = 30_000.0
    marker_retry_backoff_ms: float = 100.0
    # How long a transaction log write may wait for replication (request.timeout.ms), and an
    # offset commit (offsets.commit.timeout.ms).
    transaction_write_timeout_ms: float = 30_000.0
    offsets_commit_timeout_ms: float = 5_000.0
    # The classic group settings (group.min/max.session.timeout.ms,
    # group.initial.rebalance.delay.ms).
    groups: GroupConfig = field(default_factory=GroupConfig)


@dataclass(eq=False, slots=True)
class _Write:
    """A transaction log record in flight: the metadata, a copy of it before the change, the
    record, and the coordinator epoch it is written at."""

    meta: TransactionMetadata
    before: TransactionMetadata
    record: TransactionLogRecord


def _restore(meta: TransactionMetadata, before: TransactionMetadata) -> None:
    for f in fields(TransactionMetadata):
        setattr(meta, f.name, getattr(before, f.name))


def _copy(meta: TransactionMetadata) -> TransactionMetadata:
    snap = copy.copy(meta)
    snap.partitions = list(meta.partitions)
    snap.history = list(meta.history)
    return snap


class CoordinatorRuntime:
    """One broker's coordinator runtime (see the module docstring). Built with everything it
    works with: the broker's :class:`ReplicaManager`, ``hold`` (the broker's way to answer
    the request being handled later), ``activate`` (the cluster's), and the two request paths,
    each made from the runtime (``transaction_handlers(runtime)``, ``group_service(runtime)``)."""

    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        replica_manager: ReplicaManager,
        rules: ProtocolRules,
        next_producer_id: Callable[[], int],
        leader_of: Callable[[TopicPartition], str | None],
        settings: CoordinatorSettings,
        probe: Probe,
        on_fence: FenceListener | None = None,
        *,
        hold: Callable[[], Callable[[object], None]],
        activate: Callable[[InternalPartition], None],
        transaction_handlers: Callable[[CoordinatorRuntime], TransactionRequests],
        group_service: Callable[[CoordinatorRuntime], GroupRequests],
        member_id_stream: Callable[[], RandomStream] | None = None,
        add_partition: AddPartition | None = None,
    ) -> None:
        self.env = env
        self.node = node
        self.rm = replica_manager
        self.rules = rules
        self.settings = settings
        self.probe = probe
        self.on_fence = on_fence
        # Transaction version 2: how this broker adds a partition to a transaction whose
        # coordinator may be elsewhere (AddPartitionsToTxnManager); None before version 2.
        self.add_partition = add_partition
        # Makes an internal partition live (its replicas hosted).
        self.activate = activate
        # Holds the request being handled and returns how to answer it later (the broker's).
        self.hold = hold
        self.txn = TransactionCoordinator(None, next_producer_id, rules)
        self.txn.before_write = self._captured_write
        self.groups = GroupCoordinator(OffsetStore())
        self.groups.make_shard = self._make_shard
        # The seeded stream member ids are drawn from (asked for only when a member id is
        # generated; None: a stream seeded 0).
        self.member_id_stream = member_id_stream
        self._member_stream: RandomStream | None = None
        self._timers: dict[int, SimpyCoordinatorTimer] = {}
        self.markers = TransactionMarkerChannelManager(
            env,
            node,
            network,
            leader_of,
            settings.marker_request_timeout_ms,
            settings.marker_retry_backoff_ms,
        )
        self.alive = True
        # partition -> the coordinator epoch it is being loaded at / was loaded at
        self._loading: dict[InternalPartition, int] = {}
        self._loaded: dict[InternalPartition, int] = {}
        # transactional id -> its metadata before the write in flight
        self._pending: dict[str, TransactionMetadata] = {}
        self._captured: list[_Write] = []
        # Bumped by a crash: what a dead process scheduled finds it changed and does nothing.
        self.generation = 0
        # The request paths (built last: they read the state above).
        self.txn_handlers = transaction_handlers(self)
        self.group_service = group_service(self)
        self.handlers = self._dispatch_table()
        self._start_timers()

    # -- lifecycle ---------------------------------------------------------------------
    def _start_timers(self) -> None:
        generation = self.generation
        handlers = self.txn_handlers
        self.env.process(
            self._periodic(
                self.settings.abort_check_interval_ms,
                generation,
                handlers.abort_timed_out_transactions,
            )
        )
        self.env.process(
            self._periodic(
                self.settings.expiration_check_interval_ms,
                generation,
                handlers.remove_expired_transactional_ids,
            )
        )

    def _periodic(self, interval: float, generation: int, action: Callable[[], None]):  # type: ignore[no-untyped-def]
        while True:
            yield self.env.timeout(interval)
            if generation != self.generation:
                return
            action()

    def crash(self) -> None:
        self.alive = False
        self.generation += 1
        self.markers.shutdown()
        self._loaded.clear()
        self._loading.clear()
        self._pending.clear()
        self.txn.transactions.clear()
        self.groups.store = OffsetStore()
        # A crashed broker answers nothing: its shards and timers just go.
        self.groups.drop_shards()
        for timer in self._timers.values():
            timer.cancel_all()
        self._timers.clear()

    def restart(self) -> None:
        self.alive = True
        self._start_timers()
        # Partitions are loaded again when the controller's metadata makes this broker
        # their leader.

    def append_record(self, part: Partition, record: object) -> LogBatch:
        """Append one coordinator record (a transaction log record, an offset commit) to the
        leader replica ``part`` of its internal partition, as a batch carrying it."""
        batch = part.log.append(
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            ("",),
            self.env.now,
            False,
            part.leader_epoch,
        )
        batch.payload = record
        return batch

    def coordinator_epoch(self, partition: InternalPartition) -> int | None:
        """The coordinator epoch ``partition`` is loaded (or loading) at; None if neither."""
        loaded = self._loaded.get(partition)
        return loaded if loaded is not None else self._loading.get(partition)

    def role_changed(
        self, partition: InternalPartition, leader_epoch: int | None, fresh: bool
    ) -> None:
        """The replica of ``partition`` here became leader at ``leader_epoch`` (None: it is no
        longer leader). ``fresh``: the partition was just activated (hosted for the first
        time, empty): it was loaded long ago, with nothing in it."""
        self._unload(partition)
        if leader_epoch is None or not self.alive:
            return
        if fresh:
            self._loaded[partition] = leader_epoch
            return
        self._loading[partition] = leader_epoch
        generation = self.generation
        timer = self.env.timeout(self.settings.load_ms)
        timer.callbacks.append(
            lambda _ev: (
                self._finish_load(partition, leader_epoch)
                if generation == self.generation
                else None
            )
        )

    def _finish_load(self, partition: InternalPartition, epoch: int) -> None:
        if self._loading.get(partition) != epoch:
            return
        del self._loading[partition]
        part = self.rm.leader_partition(partition)
        if part is None or part.leader_epoch != epoch:
            return
        self._loaded[partition] = epoch
        if partition[0] == TRANSACTION_STATE_TOPIC:
            records = (
                b.payload for b in part.log.batches if isinstance(b.payload, TransactionLogRecord)
            )
            for meta in self.txn.load_records(latest_records(records, partition[1]), partition[1]):
                self.txn_handlers.write_markers(meta)
        else:
            self.groups.load(partition[1], part.log.batches)
            shard = self.groups.shards.get(partition[1])
            if shard is not None:
                shard.on_loaded()

    def _unload(self, partition: InternalPartition) -> None:
        self._loading.pop(partition, None)
        if self._loaded.pop(partition, None) is None:
            return
        if partition[0] == TRANSACTION_STATE_TOPIC:
            self.txn.unload(partition[1])
            for txn_id in [
                t for t in self._pending if internal_partition(t, "transaction") == partition
            ]:
                del self._pending[txn_id]
        else:
            self.groups.unload(partition[1])
            for shard in self.groups.drop_shards(partition[1]):
                shard.on_unloaded()
            timer = self._timers.pop(partition[1], None)
            if timer is not None:
                timer.cancel_all()

    def partition_error(self, partition: InternalPartition) -> Errors:
        if not self.alive:
            return Errors.NOT_COORDINATOR
        if partition in self._loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._loaded:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    # -- writing to the internal partitions ----------------------------------------------
    def append(
        self,
        tp: InternalPartition,
        make: Callable[[Partition], LogBatch],
        timeout_ms: float,
        on_done: Done,
        deferred: bool = False,
    ) -> None:
        """Append the batch ``make`` writes to the leader replica of ``tp`` with acks=all;
        ``on_done`` gets the append's error once it is replicated or failed (at once if
        it fails before the append, or needs no wait). ``deferred``: the append is not made
        while handling a request, so the followers' held fetches are not answered until this
        broker next handles one (:meth:`ReplicaManager.after_leader_append`)."""
        part = self.rm.leader_partition(tp)
        if part is None:
            on_done(Errors.NOT_LEADER_OR_FOLLOWER)
            return
        assert part.leader_state is not None
        refused = part.leader_state.append_error(-1)
        if refused is not Errors.NONE:
            on_done(refused)  # Partition.appendRecordsToLeader: too few in sync
            return
        batch = make(part)
        part.appended(batch, self.env.now)
        self.rm.after_leader_append(part, deferred)
        self.rm.wait_for_replication(
            [(tp, batch.last_offset + 1)], timeout_ms, lambda errors: on_done(errors[tp])
        )

    def _captured_write(self, meta: TransactionMetadata, record: TransactionLogRecord) -> None:
        self._captured.append(_Write(meta, _copy(meta), record))

    def decide(self, action: Callable[[], Any]) -> tuple[Any, list[_Write]]:
        """Run a coordinator decision; its result and the writes it made."""
        self._captured = []
        result = action()
        captured, self._captured = self._captured, []
        return result, captured

    def write(
        self,
        write: _Write,
        on_done: Done,
        retry_unavailable: bool = False,
        deferred: bool = False,
    ) -> None:
        """Append ``write``'s record; on success keep the change, else revert it. ``on_done``
        gets the coordinator's error (NONE, or the mapped append error). ``deferred``: a
        write made outside request handling (:meth:`append`): Kafka's marker thread and
        scheduler call TransactionStateManager.appendTransactionToLog, whose
        ReplicaManager.appendRecords queues the check of the followers' held fetches for
        the next request a handler thread finishes."""
        meta = write.meta
        txn_id = meta.transactional_id
        tp = internal_partition(txn_id, "transaction")
        epoch = self._loaded.get(tp)
        generation = self.generation
        self._pending[txn_id] = write.before

        def make(part: Partition) -> LogBatch:
            return self.append_record(part, write.record)

        def done(append_error: Errors) -> None:
            if generation != self.generation:
                return
            if epoch is None or self._loaded.get(tp) != epoch:
                on_done(Errors.NOT_COORDINATOR)  # unloaded meanwhile: nothing to keep
                return
            error = coordinator_error(append_error)
            if error is Errors.NONE:
                self._pending.pop(txn_id, None)
                if meta.state is S.DEAD:
                    self.txn.transactions.pop(txn_id, None)
            else:
                _restore(meta, write.before)
                self.txn.transactions[txn_id] = meta
                if not (retry_unavailable and error is Errors.COORDINATOR_NOT_AVAILABLE):
                    self._pending.pop(txn_id, None)
            on_done(error)

        if epoch is None:
            done(Errors.NOT_LEADER_OR_FOLLOWER)
            return
        self.append(tp, make, self.settings.transaction_write_timeout_ms, done, deferred)

    def answer(self, start: Callable[[Callable[[object], None]], None]) -> object | None:
        """Run ``start(answer)``; its answer now if it came at once, else None with the
        request held until ``answer`` is called."""
        now: list[object] = []
        reply: list[Callable[[object], None]] = []

        def answer(response: object) -> None:
            if reply:
                reply[0](response)
            else:
                now.append(response)

        start(answer)
        if now:
            return now[0]
        reply.append(self.hold())
        return None

    def pending_error(self, txn_id: str) -> Errors:
        return Errors.CONCURRENT_TRANSACTIONS if txn_id in self._pending else Errors.NONE

    def is_pending(self, txn_id: str) -> bool:
        """A write for ``txn_id`` is in flight (``pendingTransitionInProgress``)."""
        return txn_id in self._pending

    def pending_before(self, txn_id: str) -> TransactionMetadata | None:
        """``txn_id``'s metadata before the write in flight; None if none is."""
        return self._pending.get(txn_id)

    def drop_pending(self, txn_id: str) -> None:
        """``txn_id`` is no longer pending (a retried Complete* starts its write again)."""
        self._pending.pop(txn_id, None)

    def loaded_epoch(self, partition: InternalPartition) -> int | None:
        """The coordinator epoch ``partition`` was loaded at; None while it is loading or not
        coordinated here."""
        return self._loaded.get(partition)

    # -- requests ----------------------------------------------------------------------
    def handle(self, request: object) -> object | None:
        """Answer a coordinator request, or None if ``request`` is not one (or the answer
        is held)."""
        handler = self.handlers.get(type(request))
        return handler(request) if handler is not None else None

    def _dispatch_table(self) -> dict[type, Handler]:
        """Request type -> bound handler, built once from the request paths' tables (a new
        coordinator request is registered in its path's ``dispatch_table``); the broker
        passes it every request its own table does not name."""
        table = self.txn_handlers.dispatch_table()
        for request_type, handler in self.group_service.dispatch_table().items():
            if request_type in table:
                raise ValueError(f"{request_type.__name__} is handled by both request paths")
            table[request_type] = handler
        return table

    # -- classic groups ------------------------------------------------------------------
    def _make_shard(self, partition: int) -> GroupMetadataManager:
        """The group shard of ``__consumer_offsets`` partition ``partition``: its timer runs
        expired operations' results through :meth:`apply_group_result`."""
        timer = SimpyCoordinatorTimer(
            self.env, lambda result: self.apply_group_result(partition, result, None)
        )
        self._timers[partition] = timer
        rules = self.rules
        return GroupMetadataManager(
            timer,
            replace(
                self.settings.groups,
                strict_partition_epochs=rules.consumer_partition_epochs,
                starts_at_epoch_1=rules.consumer_group_starts_at_epoch_1,
                commit_assignment_epochs=rules.consumer_commit_assignment_epochs,
                # TxnOffsetCommit v6 needs v5, which a client sends under transaction
                # version 2 only.
                txn_offset_commit_v6=rules.txn_offset_commit_v6 and rules.transaction_version >= 2,
            ),
            uuid_member_ids(self._member_id_bits),
            self._partition_count,
            lambda: self.env.now,
        )

    def _partition_count(self, topic: str) -> int:
        """A topic's partition count as this broker's metadata cache has it (the metadata
        image the server-side assignor reads)."""
        return sum(1 for t, _p in self.rm.metadata if t == topic)

    def _member_id_bits(self) -> int:
        """128 bits from the seeded stream ``group-coordinator:<node>`` (UUID.randomUUID's
        122 random bits, here all seeded)."""
        if self._member_stream is None:
            if self.member_id_stream is not None:
                self._member_stream = self.member_id_stream()
            else:
                from eosim.simulation.rng import RandomStreams

                self._member_stream = RandomStreams(0).stream(f"group-coordinator:{self.node}")
        stream = self._member_stream
        bits = 0
        for _ in range(4):
            bits = (bits << 32) | stream.integer(2**32)
        return bits

    def apply_group_result(
        self,
        partition: int,
        result: CoordinatorResult,
        answer: Callable[[object], None] | None,
        respond: Callable[[Errors, object], object] | None = None,
    ) -> None:
        """Write ``result``'s records (acks=all), then run its ``on_written`` and give its
        response through ``answer`` (``respond(error, response)`` makes the wire answer); with
        no records, at once. A write that fails answers its mapped error."""

        def finish(error: Errors) -> None:
            if result.on_written is not None:
                result.on_written(error)
            if answer is not None and respond is not None:
                answer(respond(error, result.response))

        if not result.records:
            finish(Errors.NONE)
            return
        tp = offsets_partition(result.records[0].group)
        assert tp[1] == partition
        epoch = self._loaded.get(tp)
        generation = self.generation
        records = list(result.records)

        def make(part: Partition) -> LogBatch:
            batch = self.append_record(part, records[0])
            for record in records[1:]:
                batch = self.append_record(part, record)
            return batch

        def written(append_error: Errors) -> None:
            if generation != self.generation:
                return
            if epoch is None or self._loaded.get(tp) != epoch:
                finish(Errors.NOT_COORDINATOR)
                return
            finish(append_group_metadata_error(append_error))

        if epoch is None:
            finish(Errors.NOT_COORDINATOR)
            return
        self.append(tp, make, self.settings.offsets_commit_timeout_ms, written)

    def marker_written(
        self,
        partition: InternalPartition,
        pid: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> None:
        """A marker for ``pid`` was written to ``__consumer_offsets`` partition ``partition``
        and replicated: settle the producer's pending offsets there."""
        if self.partition_error(partition) is Errors.NONE:
            self.groups.apply_marker(partition[1], pid, epoch, commit, coordinator_epoch)
