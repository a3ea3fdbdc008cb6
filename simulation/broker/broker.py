"""A broker: partition leader for some partitions, serving Produce and InitProducerId.

Requests are handled one at a time in arrival order, which, with FIFO links, keeps Kafka's
guarantee that a connection's requests are processed in the order they were sent. Each
handled request costs ``request_time_ms`` of simulated time.

A crash stops the broker at once: queued requests are dropped and every open connection is
reset (clients are told after one network hop, as a TCP reset would tell them). Logs survive
the crash (a process crash keeps the page cache; replication is a later layer). On restart
each partition's ProducerStateManager is rebuilt by replaying the log, which is what Kafka
does after an unclean shutdown when no snapshot is newer than the log, and the producer-id
block is lost. A pause (GC, SIGSTOP) stops request handling while requests keep arriving.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from simulation.broker.log import PartitionLog
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator, ProducerIdManager
from simulation.broker.producer_state import ProducerStateManager, Verdict
from simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorDirectory,
)
from simulation.coordinator.runtime import CoordinatorRuntime
from simulation.network import Connection, Message, Network
from simulation.probe import Probe
from simulation.protocol import (
    EARLIEST_TIMESTAMP,
    Disconnected,
    Errors,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from simulation.rules import ProtocolRules

# KIP-890 part 1: (transactional id, producer id, epoch, partition) -> error or NONE
PartitionVerifier = Callable[[str | None, int, int, TopicPartition], Errors]

_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: Errors.INVALID_PRODUCER_EPOCH,
    Verdict.UNKNOWN_PRODUCER_ID: Errors.UNKNOWN_PRODUCER_ID,
    Verdict.COORDINATOR_FENCED: Errors.TRANSACTION_COORDINATOR_FENCED,
}

# How a leader answers a produce whose verification (KIP-890 part 1) failed: Kafka's
# AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH,
# and ReplicaManager.handleProduceAppend turns the retriable coordinator errors into
# NOT_ENOUGH_REPLICAS (which every client retries). TRANSACTION_ABORTABLE (a partition not in
# the transaction) reaches clients that send Produce v11+ (Kafka 3.8+) as is.
_VERIFICATION_ERRORS = {
    Errors.PRODUCER_FENCED: Errors.INVALID_PRODUCER_EPOCH,
    Errors.CONCURRENT_TRANSACTIONS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NETWORK_EXCEPTION: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_COORDINATOR: Errors.NOT_ENOUGH_REPLICAS,
}


def verification_error(error: Errors) -> Errors:
    """The produce error for a failed verification answered ``error`` by the coordinator."""
    return _VERIFICATION_ERRORS.get(error, error)


def implicit_add_error(error: Errors) -> Errors:
    """The produce error for a failed implicit add (transaction version 2, Produce v12:
    TransactionSupportedOperation ``addPartition``): as for verification, except that
    CONCURRENT_TRANSACTIONS reaches the client as is (KAFKA-18662), which retries it."""
    return error if error is Errors.CONCURRENT_TRANSACTIONS else verification_error(error)


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    request_time_ms: float = 0.1
    # The most records one fetch returns for a partition (whole batches, at least one).
    fetch_max_records: int = 500


class Broker:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        network: Network,
        partitions: list[TopicPartition],
        rules: ProtocolRules,
        allocator: ProducerIdBlockAllocator,
        settings: BrokerSettings,
        probe: Probe | None = None,
        directory: CoordinatorDirectory | None = None,
        verify_partition: PartitionVerifier | None = None,
        add_partition: PartitionVerifier | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.network = network
        self.rules = rules
        self.settings = settings
        self.logs: dict[TopicPartition, PartitionLog] = {tp: PartitionLog(*tp) for tp in partitions}
        self.producer_state: dict[TopicPartition, ProducerStateManager] = {
            tp: self._new_state() for tp in partitions
        }
        self.producer_ids = ProducerIdManager(allocator)
        self.alive = True
        self.paused = False
        self._queue: deque[Message] = deque()
        self._wakeup = env.event()
        self._connections: dict[int, Connection] = {}
        self.requests_handled = 0
        self.probe = probe or Probe()
        self.directory = directory
        self.verify_partition = verify_partition
        # Transaction version 2 (KIP-890 part 2): the leader adds the partition to the
        # producer's transaction itself, on its first transactional produce there.
        self.add_partition = add_partition if rules.transaction_version >= 2 else None
        self.coordinator: CoordinatorRuntime | None = None  # attached by the cluster
        self.handlers = self._dispatch_table()
        network.register(name, self.receive, client=False)
        env.process(self._handler_loop())

    def _new_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            self.rules.producer_state_cached_batches,
            self.rules.accept_unknown_producer_any_sequence,
        )

    # -- arrival -----------------------------------------------------------------------
    def receive(self, msg: Message) -> None:
        if not self.alive:
            # Connection refused: the client learns after one hop.
            if msg.conn is not None:
                msg.conn.destroy()
                self._notify_reset(msg.conn)
            return
        if msg.conn is not None:
            self._connections[id(msg.conn)] = msg.conn
        self._queue.append(msg)
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def _handler_loop(self):  # type: ignore[no-untyped-def]
        request_time = self.settings.request_time_ms
        while True:
            if not self._queue or self.paused or not self.alive:
                self._wakeup = self.env.event()
                yield self._wakeup
                continue
            msg = self._queue.popleft()
            if request_time > 0:
                yield self.env.timeout(request_time)
            if not self.alive:
                continue
            self.requests_handled += 1
            response = self._handle(msg.payload)
            if response is not None and self.alive:
                self.network.send(self.name, msg.src, response, msg.conn)

    def _handle(self, request: object) -> object | None:
        """Answer ``request`` (None: no answer). Broker requests go to the handler the
        dispatch table names for their type; any other to the coordinator runtime's table."""
        handler = self.handlers.get(type(request))
        if handler is not None:
            return handler(request)
        return self._to_coordinator(request)

    def _to_coordinator(self, request: object) -> object | None:
        response = self.coordinator.handle(request) if self.coordinator is not None else None
        if response is None and not self.alive:
            return None
        if response is None:
            raise TypeError(f"{self.name}: unexpected request {type(request).__name__}")
        return response

    def _dispatch_table(self) -> dict[type, Callable[[Any], object | None]]:
        """Request type -> bound handler, built once. A new broker request gets a method
        ``_handle_<name>(request) -> response | None`` and an entry here; a coordinator
        request is registered in :meth:`CoordinatorRuntime._dispatch_table` instead."""
        return {
            ProduceRequest: self._handle_produce,
            FetchRequest: self._handle_fetch,
            ListOffsetsRequest: self._handle_list_offsets,
            InitProducerIdRequest: self._handle_init_producer_id,
            WriteTxnMarkersRequest: self._handle_markers,
            WriteTxnMarkersResponse: self._handle_markers_response,
        }

    def _handle_init_producer_id(self, request: InitProducerIdRequest) -> object | None:
        """An idempotent producer's id comes from any broker; a transactional one's from its
        transaction coordinator."""
        if request.transactional_id is not None:
            return self._to_coordinator(request)
        return InitProducerIdResponse(
            request.correlation_id, Errors.NONE, self.producer_ids.generate_producer_id(), 0
        )

    def _handle_markers_response(self, response: WriteTxnMarkersResponse) -> None:
        """A leader's answer to markers this broker's coordinator sent."""
        if self.coordinator is not None:
            self.coordinator.markers.on_response(response.correlation_id, response.results)

    def _handle_produce(self, request: ProduceRequest) -> ProduceResponse | None:
        now = self.env.now
        results: list[PartitionResponse] = []
        for tp, data in request.partitions:
            log = self.logs.get(tp)
            if log is None:
                results.append(PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            state = self.producer_state[tp]
            pid = data.producer_id
            if data.transactional:
                if self.add_partition is not None:
                    # UnifiedLog.hasOngoingTransaction(producerId, producerEpoch): the open
                    # transaction must be this epoch's, else the leader adds the partition.
                    if pid not in log.ongoing or state.epoch_of(pid) != data.epoch:
                        error = self.add_partition(request.transactional_id, pid, data.epoch, tp)
                        if error is not Errors.NONE:
                            results.append(PartitionResponse(implicit_add_error(error)))
                            continue
                elif pid not in log.ongoing and self.verify_partition is not None:
                    error = self.verify_partition(request.transactional_id, pid, data.epoch, tp)
                    if error is not Errors.NONE:
                        results.append(PartitionResponse(verification_error(error)))
                        continue
            elif pid in log.ongoing:
                # A non-transactional write while the producer's transaction is open.
                results.append(PartitionResponse(Errors.INVALID_TXN_STATE))
                continue
            last_seq = data.last_sequence
            check = state.check(pid, data.epoch, data.base_sequence, last_seq)
            if check.verdict is Verdict.APPEND:
                batch = log.append(
                    pid, data.epoch, data.base_sequence, data.values, now, data.transactional
                )
                state.update(
                    data.producer_id,
                    data.epoch,
                    data.base_sequence,
                    last_seq,
                    batch.base_offset,
                    batch.last_offset,
                )
                results.append(PartitionResponse(Errors.NONE, batch.base_offset))
            elif check.verdict is Verdict.DUPLICATE:
                assert check.duplicate_of is not None
                results.append(PartitionResponse(Errors.NONE, check.duplicate_of.first_offset))
            else:
                results.append(PartitionResponse(_VERDICT_ERRORS[check.verdict]))
        if request.acks == 0:
            return None
        return ProduceResponse(request.correlation_id, results)

    def _handle_fetch(self, request: FetchRequest) -> FetchResponse:
        parts: list[tuple[TopicPartition, FetchPartition]] = []
        for tp, offset in request.partitions:
            log = self.logs.get(tp)
            if log is None:
                parts.append((tp, FetchPartition(Errors.NOT_LEADER_OR_FOLLOWER)))
                continue
            if offset > log.log_end_offset or offset < 0:
                # The log starts at 0 (nothing is ever deleted here); beyond its end (or
                # before its start) a read is refused, as in Kafka's LocalLog.read.
                refused = FetchPartition(
                    Errors.OFFSET_OUT_OF_RANGE,
                    last_stable_offset=log.last_stable_offset(),
                    log_end_offset=log.log_end_offset,
                )
                parts.append((tp, refused))
                continue
            batches, aborted = log.fetch(offset, request.isolation, self.settings.fetch_max_records)
            fetched = FetchPartition(
                Errors.NONE, batches, aborted, log.last_stable_offset(), log.log_end_offset
            )
            parts.append((tp, fetched))
        return FetchResponse(request.correlation_id, parts)

    def _handle_list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        """EARLIEST: the log start offset (always 0: nothing is deleted); LATEST: the end a
        consumer of that isolation level may read to (Partition.fetchOffsetForTimestamp): the
        last stable offset for read_committed, else the high watermark, which is the log end
        here (no replication)."""
        parts: list[tuple[TopicPartition, Errors, int]] = []
        for tp, timestamp in request.partitions:
            log = self.logs.get(tp)
            if log is None:
                parts.append((tp, Errors.NOT_LEADER_OR_FOLLOWER, -1))
            elif timestamp == EARLIEST_TIMESTAMP:
                parts.append((tp, Errors.NONE, 0))
            elif request.isolation == "read_committed":
                parts.append((tp, Errors.NONE, log.last_stable_offset()))
            else:
                parts.append((tp, Errors.NONE, log.log_end_offset))
        return ListOffsetsResponse(request.correlation_id, parts)

    def _handle_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse | None:
        pid, epoch = request.producer_id, request.epoch
        control = "COMMIT" if request.commit else "ABORT"
        results: list[tuple[TopicPartition, Errors]] = []
        for tp in request.partitions:
            if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
                runtime = self.coordinator
                error = Errors.NOT_LEADER_OR_FOLLOWER
                if runtime is not None and runtime.partition_error(tp) is Errors.NONE:
                    error = runtime.groups.complete_txn(
                        tp[1], pid, epoch, request.commit, request.coordinator_epoch
                    )
                results.append((tp, error))
                continue
            log = self.logs.get(tp)
            if log is None:
                results.append((tp, Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            self.probe.hit("leader.before_marker", self.name)
            if not self.alive:
                return None
            # ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch, checkCoordinatorEpoch.
            verdict = self.producer_state[tp].mark(pid, epoch, request.coordinator_epoch)
            if verdict is not Verdict.APPEND:
                results.append((tp, _VERDICT_ERRORS[verdict]))
                continue
            log.append_marker(
                pid,
                epoch,
                control,  # type: ignore[arg-type]
                self.env.now,
                request.coordinator_epoch,
            )
            self.probe.hit("leader.after_marker", self.name)
            if not self.alive:
                return None
            results.append((tp, Errors.NONE))
        return WriteTxnMarkersResponse(request.correlation_id, pid, results)

    # -- faults ------------------------------------------------------------------------
    def crash(self) -> None:
        if not self.alive:
            return
        self.alive = False
        if self.coordinator is not None:
            self.coordinator.crash()
        if self.directory is not None:
            self.directory.broker_crashed(self.name)
        self.paused = False
        self._queue.clear()
        for conn in self._connections.values():
            was_open = not conn.closed
            conn.destroy()
            if was_open:
                self._notify_reset(conn)
        self._connections.clear()

    def _notify_reset(self, conn: Connection) -> None:
        # Sent outside the (now closed) connection, so it is not dropped with it.
        self.network.send(self.name, conn.client, Disconnected(self.name, conn.generation))

    def restart(self) -> None:
        if self.alive:
            return
        self.alive = True
        self.producer_ids.reset()
        for tp, log in self.logs.items():
            self.producer_state[tp] = self._new_state().load(log.batches)
        if self.coordinator is not None:
            self.coordinator.restart()
        if self.directory is not None:
            self.directory.broker_restarted(self.name)
        self._kick()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._kick()

    def _kick(self) -> None:
        if not self._wakeup.triggered:
            self._wakeup.succeed()
