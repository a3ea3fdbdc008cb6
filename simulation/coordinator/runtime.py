"""CoordinatorRuntime: the transaction and group coordinators hosted by one broker.

The protocol decisions live in :class:`TransactionCoordinator` and :class:`GroupCoordinator`
(pure logic). This module gives them a place in time:

* it answers only for the internal partitions this broker leads (NOT_COORDINATOR otherwise)
  and answers COORDINATOR_LOAD_IN_PROGRESS for ``load_ms`` after it became their leader;
* loading a ``__transaction_state`` partition re-sends the markers of every PrepareCommit
  or PrepareAbort transaction in it; Ongoing ones are left to the timeout;
* after an EndTxn (or a fencing) has persisted Prepare*, it has the marker channel write the
  markers, stamped with the coordinator epoch this broker loaded the partition at, and
  persists Complete* once every partition accepted them; if a leader refuses a marker as
  stale (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) the transaction is left in
  Prepare* until the partition is loaded again, as Kafka's completion handler does;
* every ``abort_check_interval_ms`` it fences and aborts transactions open longer than their
  timeout, and every ``expiration_check_interval_ms`` it removes transactional.ids idle for
  longer than ``transactional_id_expiration_ms``.

Each fencing (an epoch bump that makes an older epoch of a producer id a zombie) is reported
through ``on_fence`` so that the history can record it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from simulation.coordinator.directory import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorDirectory,
    InternalPartition,
    internal_partition,
)
from simulation.coordinator.group_coordinator import (
    GroupCoordinator,
    OffsetStore,
    offsets_partition,
)
from simulation.coordinator.marker_channel import TransactionMarkerChannelManager
from simulation.coordinator.transaction_coordinator import TransactionCoordinator
from simulation.coordinator.transaction_log import TransactionLog
from simulation.coordinator.transaction_state import TransactionMetadata
from simulation.coordinator.transaction_state import TransactionState as S
from simulation.network import Network
from simulation.probe import Probe
from simulation.protocol import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    EndTxnResponse,
    ErrorResponse,
    Errors,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from simulation.rules import ProtocolRules

FenceListener = Callable[[str, int, int, float], None]  # txn id, producer id, new epoch, time


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    load_ms: float = 50.0
    abort_check_interval_ms: float = 10_000.0
    transactional_id_expiration_ms: float = 604_800_000.0
    expiration_check_interval_ms: float = 3_600_000.0
    marker_request_timeout_ms: float = 30_000.0
    marker_retry_backoff_ms: float = 100.0


class CoordinatorRuntime:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        directory: CoordinatorDirectory,
        txn_log: TransactionLog,
        offsets: OffsetStore,
        rules: ProtocolRules,
        next_producer_id: Callable[[], int],
        leader_of: Callable[[TopicPartition], str | None],
        settings: CoordinatorSettings,
        probe: Probe,
        on_fence: FenceListener | None = None,
    ) -> None:
        self.env = env
        self.node = node
        self.directory = directory
        self.rules = rules
        self.settings = settings
        self.probe = probe
        self.on_fence = on_fence
        # Transaction version 2: how this broker adds a partition to a transaction whose
        # coordinator may be elsewhere (AddPartitionsToTxnManager); set by the cluster.
        self.add_partition: Callable[[str, int, int, TopicPartition], Errors] | None = None
        self.txn = TransactionCoordinator(txn_log, next_producer_id, rules)
        self.groups = GroupCoordinator(offsets)
        self.markers = TransactionMarkerChannelManager(
            env,
            node,
            network,
            leader_of,
            settings.marker_request_timeout_ms,
            settings.marker_retry_backoff_ms,
        )
        self.alive = True
        self._loading_until: dict[InternalPartition, float] = {}
        self._loaded: dict[InternalPartition, None] = {}
        self._generation = 0
        directory.register(node, self._become_leader)
        # The coordinator epoch each led partition was loaded at (the markers carry it).
        self._coordinator_epochs: dict[InternalPartition, int] = {}
        for partition in directory.owned_by(node):
            self._loaded[partition] = None  # a fresh cluster has nothing to load
            self._coordinator_epochs[partition] = directory.coordinator_epoch(partition)
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
        self._loading_until.clear()
        self.txn.transactions.clear()

    def restart(self) -> None:
        self.alive = True
        self._start_timers()
        # The directory tells us which partitions to load again (broker_restarted).

    def _become_leader(self, partition: InternalPartition, coordinator_epoch: int) -> None:
        if not self.alive:
            return
        self._coordinator_epochs[partition] = coordinator_epoch
        self._loaded.pop(partition, None)
        self._loading_until[partition] = self.env.now + self.settings.load_ms
        generation = self._generation
        timer = self.env.timeout(self.settings.load_ms)
        timer.callbacks.append(
            lambda _ev: self._finish_load(partition) if generation == self._generation else None
        )

    def _finish_load(self, partition: InternalPartition) -> None:
        self._loading_until.pop(partition, None)
        if not self.directory.is_leader(self.node, partition):
            return
        self._loaded[partition] = None
        if partition[0] == TRANSACTION_STATE_TOPIC:
            for meta in self.txn.load(partition[1]):
                self._write_markers(meta)

    def partition_error(self, partition: InternalPartition) -> Errors:
        if not self.alive or not self.directory.is_leader(self.node, partition):
            if partition[0] == TRANSACTION_STATE_TOPIC and partition in self._loaded:
                # Leadership moved away: forget what we held.
                del self._loaded[partition]
                self.txn.unload(partition[1])
            return Errors.NOT_COORDINATOR
        if partition in self._loading_until:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._loaded:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    # -- requests ----------------------------------------------------------------------
    def handle(self, request: object) -> object | None:
        """Answer a coordinator request, or None if ``request`` is not one."""
        handler = self.handlers.get(type(request))
        return handler(request) if handler is not None else None

    def _dispatch_table(self) -> dict[type, Callable[[Any], object | None]]:
        """Request type -> bound handler, built once. A new coordinator request gets a
        method ``_<name>(request) -> response | None`` (None: the coordinator died while
        handling it) and an entry here; the broker passes it every request its own table
        does not name."""
        return {
            FindCoordinatorRequest: self._find_coordinator,
            InitProducerIdRequest: self._init_producer_id,
            AddPartitionsToTxnRequest: self._add_partitions_to_txn,
            AddOffsetsToTxnRequest: self._add_offsets_to_txn,
            EndTxnRequest: self._end_txn,
            TxnOffsetCommitRequest: self._txn_offset_commit,
            OffsetCommitRequest: self._offset_commit,
            OffsetFetchRequest: self._offset_fetch,
        }

    def _find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        node = self.directory.coordinator(request.key, request.key_type)
        error = Errors.NONE if node is not None else Errors.COORDINATOR_NOT_AVAILABLE
        return FindCoordinatorResponse(request.correlation_id, error, node)

    def _add_partitions_to_txn(self, request: AddPartitionsToTxnRequest) -> ErrorResponse:
        error = self.add_partitions(
            request.transactional_id, request.producer_id, request.epoch, request.partitions
        )
        return ErrorResponse(request.correlation_id, error)

    def _add_offsets_to_txn(self, request: AddOffsetsToTxnRequest) -> ErrorResponse:
        error = self.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.epoch,
            (offsets_partition(request.group),),
        )
        return ErrorResponse(request.correlation_id, error)

    def _txn_offset_commit(self, request: TxnOffsetCommitRequest) -> ErrorResponse:
        error = self.partition_error(offsets_partition(request.group))
        if error is Errors.NONE and self.add_partition is not None:
            # Transaction version 2 (TxnOffsetCommit v5): the group coordinator adds the
            # offsets partition to the transaction itself (no AddOffsetsToTxn).
            error = self.add_partition(
                request.transactional_id,
                request.producer_id,
                request.epoch,
                offsets_partition(request.group),
            )
            error = Errors.INVALID_PRODUCER_EPOCH if error is Errors.PRODUCER_FENCED else error
        if error is Errors.NONE:
            error = self.groups.txn_commit(
                request.group, request.producer_id, request.epoch, request.offsets
            )
        return ErrorResponse(request.correlation_id, error)

    def _offset_commit(self, request: OffsetCommitRequest) -> ErrorResponse:
        error = self.partition_error(offsets_partition(request.group))
        if error is Errors.NONE:
            error = self.groups.commit(request.group, request.offsets)
        return ErrorResponse(request.correlation_id, error)

    def _offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        error = self.partition_error(offsets_partition(request.group))
        offsets: dict[TopicPartition, int] = {}
        if error is Errors.NONE:
            error, offsets = self.groups.fetch(request.group, request.partitions)
        return OffsetFetchResponse(request.correlation_id, error, offsets)

    def _init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResponse:
        txn_id = request.transactional_id
        assert txn_id is not None
        cid = request.correlation_id
        # KafkaApis.handleInitProducerIdRequest: both or neither of producer id and epoch.
        named = (request.producer_id != NO_PRODUCER_ID, request.epoch != NO_PRODUCER_EPOCH)
        if named[0] != named[1]:
            return InitProducerIdResponse(cid, Errors.INVALID_REQUEST)
        expected = (request.producer_id, request.epoch) if named[0] else None
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return InitProducerIdResponse(cid, error)
        before = self.txn.transactions.get(txn_id)
        old = (before.producer_id, before.epoch) if before is not None else None
        result = self.txn.init_producer_id(
            txn_id, request.transaction_timeout_ms, self.env.now, expected
        )
        meta = self.txn.transactions.get(txn_id)
        if meta is not None and old is not None and (meta.producer_id, meta.epoch) != old:
            self._fenced(meta, old)
        if result.abort_markers and meta is not None:
            self._write_markers(meta)
        return InitProducerIdResponse(cid, result.error, result.producer_id, result.epoch)

    def _fenced(self, meta: TransactionMetadata, old: tuple[int, int]) -> None:
        if self.on_fence is None:
            return
        pid, epoch = old
        # Every epoch of ``pid`` up to the old one is fenced from now on (a fence under
        # transaction version 2 bumps twice; the second bump fences nothing more).
        self.on_fence(meta.transactional_id, pid, epoch + 1, self.env.now)

    def add_partitions(
        self, txn_id: str, pid: int, epoch: int, partitions: tuple[TopicPartition, ...]
    ) -> Errors:
        """AddPartitionsToTxn (from a client, or from a leader or group coordinator adding a
        partition for a transaction version 2 client)."""
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return error
        return self.txn.add_partitions(txn_id, pid, epoch, list(partitions), self.env.now)

    def _end_txn(self, request: EndTxnRequest) -> EndTxnResponse | None:
        cid = request.correlation_id
        txn_id = request.transactional_id
        error = self.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return EndTxnResponse(cid, error)
        result = self.txn.end_txn(
            txn_id, request.producer_id, request.epoch, request.commit, self.env.now
        )
        meta = self.txn.transactions.get(txn_id)
        if result.error is not Errors.NONE or meta is None:
            return EndTxnResponse(cid, result.error)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self.probe.hit("coordinator.prepare_persisted", self.node)
            if not self.alive:
                return None
            self._write_markers(meta)
            if not self.alive:
                return None
        return EndTxnResponse(cid, Errors.NONE, result.producer_id, result.epoch)

    # -- markers -----------------------------------------------------------------------
    def _write_markers(self, meta: TransactionMetadata) -> None:
        txn_id = meta.transactional_id
        commit = meta.state is S.PREPARE_COMMIT
        partition = internal_partition(txn_id, "transaction")
        generation = self._generation

        def done() -> None:
            if generation != self._generation or not self.alive:
                return
            current = self.txn.transactions.get(txn_id)
            if current is not meta or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            if self.partition_error(partition) is not Errors.NONE:
                return
            self.txn.complete(txn_id, self.env.now)
            self.probe.hit("coordinator.complete_persisted", self.node)

        self.markers.send_markers(
            txn_id,
            meta.producer_id,
            self.txn.marker_epoch(meta),
            commit,
            self._coordinator_epochs[partition],
            tuple(meta.partitions),
            done,
        )
        self.probe.hit("coordinator.markers_sent", self.node)

    # -- periodic work -----------------------------------------------------------------
    def _abort_timed_out(self) -> None:
        if not self.alive:
            return
        for txn_id in self.txn.expired(self.env.now):
            meta = self.txn.transactions[txn_id]
            if self.partition_error(internal_partition(txn_id, "transaction")) is not Errors.NONE:
                continue
            old = (meta.producer_id, meta.epoch)
            fence = self.txn.fence_and_abort(meta, self.env.now)
            if (meta.producer_id, meta.epoch) != old:
                self._fenced(meta, old)
            if fence.error is not Errors.NONE:
                # The epoch cannot be bumped (32767): Kafka's prepareFenceProducerEpoch (or,
                # under transaction version 2, the abort's bump) throws, which ends this round
                # of TransactionCoordinator.abortTimedOutTransactions; the transaction stays
                # Ongoing and is tried again at the next check.
                return
            self._write_markers(meta)
            if not self.alive:
                return

    def _expire_ids(self) -> None:
        if self.alive:
            self.txn.expire_transactional_ids(
                self.env.now, self.settings.transactional_id_expiration_ms
            )
