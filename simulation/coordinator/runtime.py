"""CoordinatorRuntime: the transaction and group coordinators hosted by one broker.

The protocol decisions live in :class:`TransactionCoordinator` and :class:`GroupCoordinator`
(pure logic). This module gives them a place in time and a log:

* **Leadership.** A broker coordinates the keys of the ``__transaction_state`` and
  ``__consumer_offsets`` partitions whose replica it leads (the controller decides, as for
  any partition). When its :class:`ReplicaManager` makes such a replica leader at leader
  epoch E, the runtime loads the partition: COORDINATOR_LOAD_IN_PROGRESS for ``load_ms``,
  then it replays its replica's log to the log end (``loadTransactionsForTxnTopicPartition``
  reads to the log end offset; the group coordinator replays the same way) and coordinates
  with coordinator epoch E. When the replica becomes a follower, or the broker crashes, it
  unloads (NOT_COORDINATOR). Loading re-sends the markers of every PrepareCommit or
  PrepareAbort transaction it finds; Ongoing ones are left to the timeout.
* **Writes.** Every state change is a batch appended to the partition's leader replica with
  acks=all (``TransactionLog.EnforcedRequiredAcks``; ``transaction.state.log.min.isr``) and
  applied once it is replicated (``TransactionStateManager.appendTransactionToLog``). While
  it is in flight the transactional.id is *pending*: InitProducerId, AddPartitionsToTxn and
  EndTxn for it are answered CONCURRENT_TRANSACTIONS (``pendingTransitionInProgress``), a
  partition verification reads the state before the write, and nothing else (markers, the
  answer, a fence in the history) happens. A failed write is reverted: NOT_ENOUGH_REPLICAS,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT and UNKNOWN_TOPIC_OR_PARTITION are
  answered COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER NOT_COORDINATOR. The model
  applies a change to the in-memory metadata as it writes it and, if the write fails, restores
  the copy it took when the write started (Kafka's transition stays pending and is dropped).
  What Kafka changes in memory outside a transition stays changed as it does there: a fence's
  epoch, set before its PrepareAbort is written, is in the copy, so a failed fence leaves the
  producer fenced (``hasFailedEpochFence``, KAFKA-9666). Offset commits are written the
  same way to ``__consumer_offsets`` (acks=all, ``offsets.commit.timeout.ms``).
* **Markers.** After Prepare* is replicated the marker channel writes the markers, stamped
  with the coordinator epoch; Complete* is written once every partition accepted them. A
  Complete* write that fails with COORDINATOR_NOT_AVAILABLE is tried again after
  ``marker_retry_backoff_ms`` with the id still pending (``TransactionMarkerChannelManager.
  tryAppendToLog``); after NOT_COORDINATOR it is left to the next leader's load. If a leader
  refuses a marker as stale (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) the
  transaction is left in Prepare* until the partition is loaded again.
* every ``abort_check_interval_ms`` it fences and aborts transactions open longer than their
  timeout, and every ``expiration_check_interval_ms`` it removes transactional.ids idle for
  longer than ``transactional_id_expiration_ms`` (each a write as above).

* **Classic groups.** JoinGroup, SyncGroup, Heartbeat and LeaveGroup go to the
  :class:`GroupMetadataManager` of the group's ``__consumer_offsets`` partition (a shard, made
  on first need, with a :class:`SimpyCoordinatorTimer` and member ids from the seeded stream
  ``group-coordinator:<node>``). A handler changes the group at once and returns records and an
  answer; the records are written with acks=all (``offsets.commit.timeout.ms``) and the answer
  given once they are replicated (Kafka's ``CoordinatorRuntime`` write operation); a parked
  join or sync is answered when the group gets there. Unloading a partition makes its groups
  Dead and answers their parked joins and syncs NOT_COORDINATOR (``onUnloaded``); loading
  replays the group records and restarts every member's session (``onLoaded``). OffsetCommit
  and TxnOffsetCommit are validated against the group before they are written, in Kafka's
  order (``OffsetMetadataManager``); an accepted commit restarts its member's session.

Each fencing (an epoch bump that makes an older epoch of a producer id a zombie) is reported
through ``on_fence`` once its write is replicated, so that the history can record it.

To extend: a new coordinator request gets a handler ``_<name>`` and an entry in
:meth:`CoordinatorRuntime._dispatch_table`; a group request's handler runs its shard's method
through :meth:`CoordinatorRuntime._group_result`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import simpy

from eosim.simulation.coordinator.classic_group import JoinAnswer, SyncAnswer
from eosim.simulation.coordinator.consumer_group_heartbeat import HeartbeatAnswer
from eosim.simulation.coordinator.coordinator_result import (
    CoordinatorResult,
    append_group_metadata_error,
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
    OffsetCommitRecord,
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
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    EndTxnRequest,
    EndTxnResponse,
    ErrorResponse,
    Errors,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
    TxnOffsetCommitRequest,
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

# TransactionStateManager.appendTransactionToLog (and the group coordinator's
# handleOperationException): a log append error as the coordinator answers it.
APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
}


def coordinator_error(append_error: Errors) -> Errors:
    return APPEND_ERRORS.get(append_error, append_error)


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
    ) -> None:
        self.env = env
        self.node = node
        self.rm = replica_manager
        self.rules = rules
        self.settings = settings
        self.probe = probe
        self.on_fence = on_fence
        # Transaction version 2: how this broker adds a partition to a transaction whose
        # coordinator may be elsewhere (AddPartitionsToTxnManager); set by the cluster.
        self.add_partition: AddPartition | None = None
        # Makes an internal partition live (its replicas hosted); set by the cluster.
        self.activate: Callable[[InternalPartition], None] | None = None
        # Holds the request being handled and returns how to answer it later; set by the
        # broker.
        self.hold: Callable[[], Callable[[object], None]] | None = None
        self.txn = TransactionCoordinator(None, next_producer_id, rules)
        self.txn.before_write = self._captured_write
        self.groups = GroupCoordinator(OffsetStore())
        self.groups.make_shard = self._make_shard
        # The seeded stream member ids are drawn from (set by the cluster; asked for only
        # when a member id is generated).
        self.member_id_stream: Callable[[], RandomStream] | None = None
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
        self._generation = 0
        self.handlers = self._dispatch_table()
        self._start_timers()

    # -- lifecycle ---------------------------------------------------------------------
    def _start_timers(self) -> None:
        generation = self._generation
        self.env.process(
            self._periodic(self.settings.abort_check_interval_ms, generation, self._abort_timed_out)
        )
        self.env.process(
            self._periodic(self.settings.expiration_check_interval_ms, generation, self._expire_ids)
        )

    def _periodic(self, interval: float, generation: int, action: Callable[[], None]):  # type: ignore[no-untyped-def]
        while True:
            yield self.env.timeout(interval)
            if generation != self._generation:
                return
            action()

    def crash(self) -> None:
        self.alive = False
        self._generation += 1
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

    def _append_record(self, part: Partition, record: object) -> LogBatch:
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
        generation = self._generation
        timer = self.env.timeout(self.settings.load_ms)
        timer.callbacks.append(
            lambda _ev: (
                self._finish_load(partition, leader_epoch)
                if generation == self._generation
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
                self._write_markers(meta)
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
    def _append(
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

    def _run(self, action: Callable[[], Any]) -> tuple[Any, list[_Write]]:
        """Run a coordinator decision; its result and the writes it made."""
        self._captured = []
        result = action()
        captured, self._captured = self._captured, []
        return result, captured

    def _write(
        self,
        write: _Write,
        on_done: Done,
        retry_unavailable: bool = False,
        deferred: bool = False,
    ) -> None:
        """Append ``write``'s record; on success keep the change, else revert it. ``on_done``
        gets the coordinator's error (NONE, or the mapped append error). ``deferred``: a
        write made outside request handling (:meth:`_append`): Kafka's marker thread and
        scheduler call TransactionStateManager.appendTransactionToLog, whose
        ReplicaManager.appendRecords queues the check of the followers' held fetches for
        the next request a handler thread finishes."""
        meta = write.meta
        txn_id = meta.transactional_id
        tp = internal_partition(txn_id, "transaction")
        epoch = self._loaded.get(tp)
        generation = self._generation
        self._pending[txn_id] = write.before

        def make(part: Partition) -> LogBatch:
            return self._append_record(part, write.record)

        def done(append_error: Errors) -> None:
            if generation != self._generation:
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
        self._append(tp, make, self.settings.transaction_write_timeout_ms, done, deferred)

    def _answer(self, start: Callable[[Callable[[object], None]], None]) -> object | None:
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
        assert self.hold is not None, "a held coordinator answer needs a broker"
        reply.append(self.hold())
        return None

    def _pending_error(self, txn_id: str) -> Errors:
        return Errors.CONCURRENT_TRANSACTIONS if txn_id in self._pending else Errors.NONE

    # -- requests ----------------------------------------------------------------------
    def handle(self, request: object) -> object | None:
        """Answer a coordinator request, or None if ``request`` is not one (or the answer
        is held)."""
        handler = self.handlers.get(type(request))
        return handler(request) if handler is not None else None

    def _dispatch_table(self) -> dict[type, Callable[[Any], object | None]]:
        """Request type -> bound handler, built once. A new coordinator request gets a
        method ``_<name>(request) -> response | None`` (None: held, or the coordinator died
        while handling it) and an entry here; the broker passes it every request its own
        table does not name."""
        return {
            FindCoordinatorRequest: self._find_coordinator,
            InitProducerIdRequest: self._init_producer_id,
            AddPartitionsToTxnRequest: self._add_partitions_to_txn,
            AddOffsetsToTxnRequest: self._add_offsets_to_txn,
            EndTxnRequest: self._end_txn,
            TxnOffsetCommitRequest: self._txn_offset_commit,
            OffsetCommitRequest: self._offset_commit,
            OffsetFetchRequest: self._offset_fetch,
            JoinGroupRequest: self._join_group,
            SyncGroupRequest: self._sync_group,
            HeartbeatRequest: self._heartbeat,
            LeaveGroupRequest: self._leave_group,
            ConsumerGroupHeartbeatRequest: self._consumer_group_heartbeat,
        }

    # -- classic groups ------------------------------------------------------------------
    def _make_shard(self, partition: int) -> GroupMetadataManager:
        """The group shard of ``__consumer_offsets`` partition ``partition``: its timer runs
        expired operations' results through :meth:`_apply_group_result`."""
        timer = SimpyCoordinatorTimer(
            self.env, lambda result: self._apply_group_result(partition, result, None)
        )
        self._timers[partition] = timer
        return GroupMetadataManager(
            timer,
            replace(
                self.settings.groups, strict_partition_epochs=self.rules.consumer_partition_epochs
            ),
            uuid_member_ids(self._member_id_bits),
            self._partition_count,
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

    def _apply_group_result(
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
        generation = self._generation
        records = list(result.records)

        def make(part: Partition) -> LogBatch:
            batch = self._append_record(part, records[0])
            for record in records[1:]:
                batch = self._append_record(part, record)
            return batch

        def written(append_error: Errors) -> None:
            if generation != self._generation:
                return
            if epoch is None or self._loaded.get(tp) != epoch:
                finish(Errors.NOT_COORDINATOR)
                return
            finish(append_group_metadata_error(append_error))

        if epoch is None:
            finish(Errors.NOT_COORDINATOR)
            return
        self._append(tp, make, self.settings.offsets_commit_timeout_ms, written)

    def _group_shard(self, group: str) -> tuple[Errors, int]:
        """``GroupCoordinatorService``'s checks before a group request reaches its shard: an
        empty group id is INVALID_GROUP_ID, then the partition must be loaded here."""
        partition = offsets_partition(group)
        if not group:
            return Errors.INVALID_GROUP_ID, partition[1]
        return self.partition_error(partition), partition[1]

    def _join_group(self, request: JoinGroupRequest) -> object | None:
        """``GroupCoordinatorService.joinGroup`` -> ``classicGroupJoin``; the answer is
        parked until the join phase completes."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        groups = self.settings.groups
        if error is not Errors.INVALID_GROUP_ID and not (
            groups.min_session_timeout_ms
            <= request.session_timeout_ms
            <= groups.max_session_timeout_ms
        ):
            # GroupCoordinatorService.joinGroup (GroupCoordinatorService.java:391-405): the
            # group id, then the session timeout, then the shard.
            error = Errors.INVALID_SESSION_TIMEOUT
        if error is not Errors.NONE:
            return JoinGroupResponse(cid, error, request.member_id)

        def start(answer: Callable[[object], None]) -> None:
            def respond(a: object) -> None:
                assert isinstance(a, JoinAnswer)
                answer(
                    JoinGroupResponse(
                        cid,
                        a.error,
                        a.member_id,
                        a.generation,
                        a.protocol_name,
                        a.protocol_type,
                        a.leader,
                        a.members,
                        a.skip_assignment,
                    )
                )

            result = self.groups.shard(partition).classic_group_join(request, _once(respond))
            self._apply_group_result(partition, result, None)

        return self._answer(start)

    def _sync_group(self, request: SyncGroupRequest) -> object | None:
        """``GroupCoordinatorService.syncGroup`` -> ``classicGroupSync``."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return SyncGroupResponse(cid, error)

        def start(answer: Callable[[object], None]) -> None:
            def respond(a: object) -> None:
                assert isinstance(a, SyncAnswer)
                answer(
                    SyncGroupResponse(cid, a.error, a.assignment, a.protocol_name, a.protocol_type)
                )

            result = self.groups.shard(partition).classic_group_sync(request, _once(respond))
            self._apply_group_result(partition, result, None)

        return self._answer(start)

    def _heartbeat(self, request: HeartbeatRequest) -> object | None:
        """``GroupCoordinatorService.heartbeat`` -> ``classicGroupHeartbeat``."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return HeartbeatResponse(cid, error)

        def respond(error: Errors, response: object) -> object:
            assert isinstance(response, Errors)
            return HeartbeatResponse(cid, error if error is not Errors.NONE else response)

        return self._answer(
            lambda answer: self._apply_group_result(
                partition,
                self.groups.shard(partition).classic_group_heartbeat(request),
                answer,
                respond,
            )
        )

    def _leave_group(self, request: LeaveGroupRequest) -> object | None:
        """``GroupCoordinatorService.leaveGroup`` -> ``classicGroupLeave``; answered once the
        records the leave caused (if any) are written."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return LeaveGroupResponse(cid, error)

        def respond(error: Errors, response: object) -> object:
            top, members = response  # type: ignore[misc]
            if error is not Errors.NONE:
                return LeaveGroupResponse(cid, error)
            return LeaveGroupResponse(cid, top, members)

        return self._answer(
            lambda answer: self._apply_group_result(
                partition,
                self.groups.shard(partition).classic_group_leave(request),
                answer,
                respond,
            )
        )

    def _consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> object | None:
        """``GroupCoordinatorService.consumerGroupHeartbeat`` -> ``consumerGroupHeartbeat``;
        answered once the records it wrote (if any) are replicated."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return ConsumerGroupHeartbeatResponse(cid, error)

        def respond(error: Errors, answer: object) -> object:
            assert isinstance(answer, HeartbeatAnswer)
            if error is not Errors.NONE:
                return ConsumerGroupHeartbeatResponse(cid, error)
            return ConsumerGroupHeartbeatResponse(cid, *answer)

        return self._answer(
            lambda answer: self._apply_group_result(
                partition,
                self.groups.shard(partition).consumer_group_heartbeat(request),
                answer,
                respond,
            )
        )

    def _find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """KafkaApis.getCoordinator: the leader of the key's internal partition as this
        broker's metadata cache has it; COORDINATOR_NOT_AVAILABLE while it has none."""
        partition = internal_partition(request.key, request.key_type)
        if self.activate is not None:
            self.activate(partition)
        state = self.rm.metadata.get(partition)
        node = state.leader if state is not None else None
        error = Errors.NONE if node is not None else Errors.COORDINATOR_NOT_AVAILABLE
        return FindCoordinatorResponse(request.correlation_id, error, node)

    def _add_partitions_to_txn(self, request: AddPartitionsToTxnRequest) -> object | None:
        return self._add_to_txn(request, request.partitions)

    def _add_offsets_to_txn(self, request: AddOffsetsToTxnRequest) -> object | None:
        """AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition, as Kafka does."""
        return self._add_to_txn(request, (offsets_partition(request.group),))

    def _add_to_txn(
        self,
        request: AddPartitionsToTxnRequest | AddOffsetsToTxnRequest,
        partitions: tuple[TopicPartition, ...],
    ) -> object | None:
        cid = request.correlation_id
        return self._answer(
            lambda answer: self.add_partitions(
                request.transactional_id,
                request.producer_id,
                request.epoch,
                partitions,
                lambda error: answer(ErrorResponse(cid, error)),
            )
        )

    def add_partitions(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: tuple[TopicPartition, ...],
        on_done: Done,
    ) -> None:
        """AddPartitionsToTxn (from a client, or from a leader or group coordinator adding a
        partition for a transaction version 2 client); ``on_done`` gets the answer once the
        change is written (at once if nothing is written)."""
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        before = self._pending.get(txn_id)
        if error is Errors.NONE and before is not None:
            # TransactionCoordinator.handleAddPartitionsToTransaction: producer id, epoch,
            # then pendingTransitionInProgress.
            error = self.txn._check_producer(before, pid, epoch)
            if error is Errors.NONE:
                error = Errors.CONCURRENT_TRANSACTIONS
        if error is not Errors.NONE:
            on_done(error)
            return
        error, writes = self._run(
            lambda: self.txn.add_partitions(txn_id, pid, epoch, list(partitions), self.env.now)
        )
        if not writes:
            on_done(error)
            return
        self._write(writes[0], on_done)

    def verify_partition(self, txn_id: str, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """KIP-890 part 1 against what is persisted (the state before a write in flight)."""
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return error
        if txn_id in self._pending:
            return self.txn.verify_against(self._pending[txn_id], pid, epoch, tp)
        return self.txn.verify_partition(txn_id, pid, epoch, tp)

    def _txn_offset_commit(self, request: TxnOffsetCommitRequest) -> object | None:
        cid = request.correlation_id
        partition = offsets_partition(request.group)

        def start(answer: Callable[[object], None]) -> None:
            def write(error: Errors) -> None:
                if error is Errors.NONE:
                    # OffsetMetadataManager.validateTransactionalOffsetCommit (:348-379),
                    # after the transaction verification, before the producer epoch check of
                    # the append.
                    error = self.groups.validate_offset_commit(
                        request.group,
                        request.member_id,
                        request.instance_id,
                        request.generation,
                        True,
                        self.rules.offset_commit_checks_generation,
                    )
                if error is Errors.NONE:
                    error = self.groups.check_txn_commit(request.producer_id, request.epoch)
                if error is not Errors.NONE:
                    answer(ErrorResponse(cid, error))
                    return

                def make(part: Partition) -> LogBatch:
                    batch = part.log.append(
                        request.producer_id,
                        request.epoch,
                        NO_SEQUENCE,
                        ("",),
                        self.env.now,
                        True,
                        part.leader_epoch,
                    )
                    batch.payload = OffsetCommitRecord(request.group, request.offsets)
                    part.producer_state.load((batch,))
                    return batch

                def written(append_error: Errors) -> None:
                    error = coordinator_error(append_error)
                    if error is Errors.NONE and self.partition_error(partition) is Errors.NONE:
                        self.groups.apply_txn_commit(
                            request.group, request.producer_id, request.epoch, request.offsets
                        )
                    answer(ErrorResponse(cid, error))

                self._append(partition, make, self.settings.offsets_commit_timeout_ms, written)

            error = self.partition_error(partition)
            if error is Errors.NONE and self.add_partition is not None:
                # Transaction version 2 (TxnOffsetCommit v5): the group coordinator adds the
                # offsets partition to the transaction itself (no AddOffsetsToTxn).
                def added(error: Errors) -> None:
                    # (PRODUCER_FENCED arrives as INVALID_PRODUCER_EPOCH: the cluster's
                    # add_partition maps it, as AddPartitionsToTxnManager does.)
                    if error is Errors.NONE:
                        error = self.partition_error(partition)
                    write(error)

                self.add_partition(
                    request.transactional_id,
                    request.producer_id,
                    request.epoch,
                    (partition,),
                    added,
                )
                return
            write(error)

        return self._answer(start)

    def _offset_commit(self, request: OffsetCommitRequest) -> object | None:
        """``OffsetMetadataManager.commitOffset``: validated against the group before the
        write (``validateOffsetCommit``, ``OffsetMetadataManager.java:302-346``); an accepted
        commit restarts its member's session (``:456-465``)."""
        cid = request.correlation_id
        partition = offsets_partition(request.group)
        error = self.partition_error(partition)
        if error is Errors.NONE:
            error = self.groups.validate_offset_commit(
                request.group,
                request.member_id,
                request.instance_id,
                request.generation,
                False,
                self.rules.offset_commit_checks_generation,
            )
            if error is Errors.NONE:
                shard = self.groups.shards.get(partition[1])
                if shard is not None:
                    shard.commit_keeps_session(request.group, request.member_id)
        if error is not Errors.NONE:
            return ErrorResponse(cid, error)

        def make(part: Partition) -> LogBatch:
            return self._append_record(part, OffsetCommitRecord(request.group, request.offsets))

        def start(answer: Callable[[object], None]) -> None:
            def written(append_error: Errors) -> None:
                error = coordinator_error(append_error)
                if error is Errors.NONE and self.partition_error(partition) is Errors.NONE:
                    self.groups.commit(request.group, request.offsets)
                answer(ErrorResponse(cid, error))

            self._append(partition, make, self.settings.offsets_commit_timeout_ms, written)

        return self._answer(start)

    def _offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        error = self.partition_error(offsets_partition(request.group))
        offsets: dict[TopicPartition, int] = {}
        if error is Errors.NONE:
            error, offsets = self.groups.fetch(request.group, request.partitions)
        return OffsetFetchResponse(request.correlation_id, error, offsets)

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

    def _init_producer_id(self, request: InitProducerIdRequest) -> object | None:
        txn_id = request.transactional_id
        assert txn_id is not None
        cid = request.correlation_id
        # KafkaApis.handleInitProducerIdRequest: both or neither of producer id and epoch.
        named = (request.producer_id != NO_PRODUCER_ID, request.epoch != NO_PRODUCER_EPOCH)
        if named[0] != named[1]:
            return InitProducerIdResponse(cid, Errors.INVALID_REQUEST)
        expected = (request.producer_id, request.epoch) if named[0] else None
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is Errors.NONE:
            error = self._pending_error(txn_id)
        if error is not Errors.NONE:
            return InitProducerIdResponse(cid, error)
        before = self.txn.transactions.get(txn_id)
        old = (before.producer_id, before.epoch) if before is not None else None
        result, writes = self._run(
            lambda: self.txn.init_producer_id(
                txn_id, request.transaction_timeout_ms, self.env.now, expected
            )
        )
        if not writes:
            return InitProducerIdResponse(cid, result.error, result.producer_id, result.epoch)
        meta = writes[0].meta

        def start(answer: Callable[[object], None]) -> None:
            def written(error: Errors) -> None:
                if error is not Errors.NONE:
                    if result.fenced_epoch is not None:
                        self.txn.fence_failed(meta)
                    answer(InitProducerIdResponse(cid, error))
                    return
                if result.fenced_epoch is not None:
                    self._fenced(meta, meta.producer_id, result.fenced_epoch)
                elif old is not None and (meta.producer_id, meta.epoch) != old:
                    self._fenced(meta, old[0], old[1] + 1)
                if result.abort_markers:
                    self._write_markers(meta)
                answer(InitProducerIdResponse(cid, result.error, result.producer_id, result.epoch))

            self._write(writes[0], written)

        return self._answer(start)

    def _fenced(self, meta: TransactionMetadata, pid: int, epoch: int) -> None:
        """Every epoch of ``pid`` below ``epoch`` is fenced from now on (a fence under
        transaction version 2 bumps twice; the second bump fences nothing more)."""
        if self.on_fence is not None:
            self.on_fence(meta.transactional_id, pid, epoch, self.env.now)

    def _end_txn(self, request: EndTxnRequest) -> object | None:
        cid = request.correlation_id
        txn_id = request.transactional_id
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is Errors.NONE:
            error = self._pending_error(txn_id)
        if error is not Errors.NONE:
            return EndTxnResponse(cid, error)
        result, writes = self._run(
            lambda: self.txn.end_txn(
                txn_id, request.producer_id, request.epoch, request.commit, self.env.now
            )
        )
        if result.error is not Errors.NONE or not writes:
            return EndTxnResponse(cid, result.error, result.producer_id, result.epoch)
        meta = writes[0].meta
        generation = self._generation

        def start(answer: Callable[[object], None]) -> None:
            def written(error: Errors) -> None:
                if error is not Errors.NONE:
                    answer(EndTxnResponse(cid, error))
                    return
                self.probe.hit("coordinator.prepare_persisted", self.node)
                if generation != self._generation:
                    return  # crashed at the probe point: no answer
                self._write_markers(meta)
                if generation != self._generation:
                    return
                answer(EndTxnResponse(cid, Errors.NONE, result.producer_id, result.epoch))

            self._write(writes[0], written)

        return self._answer(start)

    # -- markers -----------------------------------------------------------------------
    def _write_markers(self, meta: TransactionMetadata) -> None:
        txn_id = meta.transactional_id
        commit = meta.state is S.PREPARE_COMMIT
        partition = internal_partition(txn_id, "transaction")
        generation = self._generation
        coordinator_epoch = self._loaded[partition]

        def done() -> None:
            if generation != self._generation or not self.alive:
                return
            current = self.txn.transactions.get(txn_id)
            if current is not meta or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            if self._loaded.get(partition) != coordinator_epoch:
                return  # the next leader completes it when it loads
            self._complete(meta, coordinator_epoch)

        self.markers.send_markers(
            txn_id,
            meta.producer_id,
            self.txn.marker_epoch(meta),
            commit,
            coordinator_epoch,
            tuple(meta.partitions),
            done,
        )
        self.probe.hit("coordinator.markers_sent", self.node)

    def _complete(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Write Complete* (TransactionMarkerChannelManager.tryAppendToLog): tried again
        while the log is not available, left to the next leader when leadership moved."""
        txn_id = meta.transactional_id
        partition = internal_partition(txn_id, "transaction")
        generation = self._generation
        _result, writes = self._run(lambda: self.txn.complete(txn_id, self.env.now))

        def written(error: Errors) -> None:
            if error is Errors.NONE:
                self.probe.hit("coordinator.complete_persisted", self.node)
            elif error is Errors.COORDINATOR_NOT_AVAILABLE:
                timer = self.env.timeout(self.settings.marker_retry_backoff_ms)
                timer.callbacks.append(lambda _ev: retry())

        def retry() -> None:
            if generation != self._generation or self._loaded.get(partition) != coordinator_epoch:
                return
            self._pending.pop(txn_id, None)
            if self.txn.transactions.get(txn_id) is meta and meta.state in (
                S.PREPARE_COMMIT,
                S.PREPARE_ABORT,
            ):
                self._complete(meta, coordinator_epoch)

        # TransactionMarkerChannelManager.tryAppendToLog runs on the TxnMarkerSenderThread.
        self._write(writes[0], written, retry_unavailable=True, deferred=True)

    # -- periodic work -----------------------------------------------------------------
    def _abort_timed_out(self) -> None:
        if not self.alive:
            return
        for txn_id in self.txn.expired(self.env.now):
            if txn_id in self._pending:
                continue  # abortTimedOutTransactions skips a pending transition
            meta = self.txn.transactions[txn_id]
            if self.partition_error(internal_partition(txn_id, "transaction")) is not Errors.NONE:
                continue
            fence, writes = self._run(
                lambda meta=meta: self.txn.fence_and_abort(meta, self.env.now)
            )
            if fence.error is not Errors.NONE:
                # The epoch cannot be bumped (32767): Kafka's prepareFenceProducerEpoch (or,
                # under transaction version 2, the abort's bump) throws, which ends this round
                # of TransactionCoordinator.abortTimedOutTransactions; the transaction stays
                # Ongoing and is tried again at the next check.
                return

            def written(
                error: Errors,
                meta: TransactionMetadata = meta,
                fenced: int | None = fence.fenced_epoch,
            ) -> None:
                if error is not Errors.NONE:
                    # The fenced epoch stays in memory; the next round fences at it again.
                    self.txn.fence_failed(meta)
                    return
                assert fenced is not None
                self._fenced(meta, meta.producer_id, fenced)
                self._write_markers(meta)

            # abortTimedOutTransactions runs on the coordinator's scheduler thread.
            self._write(writes[0], written, deferred=True)
            if not self.alive:
                return

    def _expire_ids(self) -> None:
        if not self.alive:
            return
        candidates = {t: m for t, m in self.txn.transactions.items() if t not in self._pending}
        everything = self.txn.transactions
        self.txn.transactions = candidates
        try:
            _expired, writes = self._run(
                lambda: self.txn.expire_transactional_ids(
                    self.env.now, self.settings.transactional_id_expiration_ms
                )
            )
        finally:
            for txn_id in list(everything):
                if txn_id not in self._pending and txn_id not in candidates:
                    del everything[txn_id]
            self.txn.transactions = everything
        for write in writes:
            # removeExpiredTransactionalIds runs on the scheduler thread.
            self._write(write, lambda _error: None, deferred=True)


def _once(respond: Callable[[object], None]) -> Callable[[object], None]:
    """A parked answer is given once (a later completion, as of a completed future, is
    ignored)."""
    done = [False]

    def once(response: object) -> None:
        if not done[0]:
            done[0] = True
            respond(response)

    return once
