"""A broker: partition leader for some partitions, serving Produce and InitProducerId.

Requests are handled one at a time in arrival order, which, with FIFO links, keeps Kafka's
guarantee that a connection's requests are processed in the order they were sent. Each
handled request costs ``request_time_ms`` of simulated time.

A crash stops the broker at once: queued requests are dropped and every open connection is
reset (clients are told after one network hop, as a TCP reset would tell them). Logs survive
a process crash (the page cache outlives the process); a power loss keeps only what was
flushed or written back by the operating system at the moment the power went
(:mod:`eosim.simulation.broker.durability`). A restart is a new process
(:mod:`eosim.simulation.broker.lifecycle`): it recovers each partition's log and loads its
ProducerStateManager from the producer snapshot the recovery writes at the log end, which
keeps one batch per producer (so a retry of an earlier batch is then OUT_OF_ORDER_SEQUENCE,
as on Kafka), loses its producer-id block, and accepts no connection until it has registered
again, caught up with the metadata and been unfenced. A pause (GC, SIGSTOP) stops
request handling while requests keep arriving.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from eosim.simulation.broker.lifecycle import BrokerLifecycleManager, LifecycleSettings
from eosim.simulation.broker.log import PartitionLog
from eosim.simulation.broker.log_manager import LogManager, LogManagerSettings
from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator, ProducerIdManager
from eosim.simulation.broker.producer_state import ProducerStateManager, Verdict
from eosim.simulation.broker.replica_manager import ReplicaManager, ReplicationSettings
from eosim.simulation.config import kafka_default
from eosim.simulation.coordinator.directory import CONSUMER_OFFSETS_TOPIC, is_internal
from eosim.simulation.coordinator.runtime import AddPartition, CoordinatorRuntime
from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import (
    EARLIEST_TIMESTAMP,
    AlterPartitionResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    Disconnected,
    Errors,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataDelta,
    MetadataRequest,
    MetadataResponse,
    PartitionLeader,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TcpAccepted,
    TcpConnect,
    TopicPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from eosim.simulation.records import batch_size
from eosim.simulation.request_channel import RequestChannel
from eosim.simulation.rng import RandomStream
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.state_change import DISABLED, StateChangeLog

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
    Errors.CONCURRENT_TRANSACTIONS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NETWORK_EXCEPTION: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_COORDINATOR: Errors.NOT_ENOUGH_REPLICAS,
}


def verification_error(error: Errors) -> Errors:
    """The produce error for a failed verification answered ``error`` by the coordinator."""
    return _VERIFICATION_ERRORS.get(error, error)


# The broker's request.timeout.ms (Kafka's default; not a scenario config): it caps how long a
# leader retries an implicit add (add.partitions.to.txn.retry.backoff.max.ms).
BROKER_REQUEST_TIMEOUT_MS = 30_000.0


def implicit_add_error(error: Errors) -> Errors:
    """The produce error for a failed implicit add (transaction version 2, Produce v12:
    TransactionSupportedOperation ``addPartition``): as for verification, except that
    CONCURRENT_TRANSACTIONS reaches the client as is (KAFKA-18662), which retries it."""
    return error if error is Errors.CONCURRENT_TRANSACTIONS else verification_error(error)


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    request_time_ms: float = 0.25
    # The most records one fetch returns for a partition (whole batches, at least one).
    fetch_max_records: int = 500
    # broker.heartbeat.interval.ms, and broker.session.timeout.ms (which caps the backoff of a
    # refused registration).
    heartbeat_interval_ms: float = float(kafka_default("broker.heartbeat.interval.ms"))
    session_timeout_ms: float = float(kafka_default("broker.session.timeout.ms"))
    # How long a restarted broker process takes to start (cluster.broker_startup).
    startup_ms: float = 2_000.0
    # add.partitions.to.txn.retry.backoff.ms and add.partitions.to.txn.retry.backoff.max.ms
    # (AddPartitionsToTxnConfig): a leader's own retries of an implicit add answered
    # CONCURRENT_TRANSACTIONS (rules.add_partitions_server_retry).
    add_partitions_retry_backoff_ms: float = float(
        kafka_default("add.partitions.to.txn.retry.backoff.ms")
    )
    add_partitions_retry_max_ms: float = float(
        kafka_default("add.partitions.to.txn.retry.backoff.max.ms")
    )

    def lifecycle(self) -> LifecycleSettings:
        return LifecycleSettings(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            session_timeout_ms=self.session_timeout_ms,
            startup_ms=self.startup_ms,
        )


class Broker:
    """One broker: request handling, its replicas (:class:`ReplicaManager`), its coordinators
    and its life with the controller (registration and heartbeats, Kafka's
    ``BrokerLifecycleManager``). Built without a controller (``controller=None``) it leads the
    ``partitions`` it is given alone, for ever: the standalone broker of unit tests."""

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
        verify_partition: PartitionVerifier | None = None,
        add_partition: AddPartition | None = None,
        *,
        replication: ReplicationSettings | None = None,
        topics: dict[str, TopicSettings] | None = None,
        controller: str | None = None,
        lifecycle_rng: RandomStream | None = None,
        isr_rng: RandomStream | None = None,
        heartbeat_rng: RandomStream | None = None,
        log: LogManagerSettings | None = None,
        hostable: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.network = network
        self.rules = rules
        self.settings = settings
        self.producer_ids = ProducerIdManager(allocator)
        self.alive = True
        self.paused = False
        self.requests = RequestChannel(env, self, settings.request_time_ms)
        self._internal: deque[Message] = deque()
        # Connections with a request being handled (or held), and what waits behind it.
        self._muted: set[int] = set()
        self._stalled: dict[int, deque[Message]] = {}
        self._held = False
        self._connections: dict[int, Connection] = {}
        self.requests_handled = 0
        self.probe = probe or Probe()
        self.verify_partition = verify_partition
        # Transaction version 2 (KIP-890 part 2): the leader adds the partition to the
        # producer's transaction itself, on its first transactional produce there.
        self.add_partition = add_partition if rules.transaction_version >= 2 else None
        self.coordinator: CoordinatorRuntime | None = None  # attached by the cluster
        log_settings = log if log is not None else LogManagerSettings()
        self._producer_id_expiration_ms = log_settings.producer_id_expiration_ms
        self.replica_manager = ReplicaManager(
            env,
            name,
            network,
            rules,
            replication if replication is not None else ReplicationSettings(),
            topics if topics is not None else {},
            self._new_state,
            lambda: self.alive and not self.paused,
            self.probe,
            self.respond,
            isr_rng,
            hostable=hostable,
        )
        self.controller = controller
        self.incarnation = 0
        # Whether the machine has power (a crashed process's machine keeps its page cache).
        self.powered = True
        self.state_log: StateChangeLog = DISABLED
        self.lifecycle: BrokerLifecycleManager | None = None
        if controller is not None:
            rm = self.replica_manager
            self.lifecycle = BrokerLifecycleManager(
                env,
                name,
                network,
                controller,
                settings.lifecycle(),
                lifecycle_rng,
                lambda: rm.metadata_offset,
                lambda: self.alive and not self.paused,
                heartbeat_rng,
            )
        for tp in partitions:
            self.replica_manager.lead_alone(tp)
        self.handlers = self._dispatch_table()
        network.register(name, self.receive, client=False)
        env.process(self._handler_loop())
        # The log flusher, retention and producer-id expiry (Kafka's LogManager and UnifiedLog
        # schedulers).
        self.log_manager = LogManager(
            env,
            lambda: self.replica_manager,
            log_settings,
            lambda: self.alive and not self.paused,
        )
        self.log_manager.start()

    def attach_state_log(self, log: StateChangeLog) -> None:
        """Record this broker's state changes (its life, its replicas' roles) in ``log``."""
        self.state_log = log
        self.replica_manager.state_log = log
        if self.lifecycle is not None:
            self.lifecycle.state_log = log

    def _new_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            self.rules.producer_state_cached_batches,
            self.rules.accept_unknown_producer_any_sequence,
            self.rules.producer_expiry_tracks_marker_timestamps,
            self._producer_id_expiration_ms,
            self.rules.producer_state_rebuilt_from_snapshots,
        )

    # -- replicas ---------------------------------------------------------------------------
    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        """Every replica this broker hosts."""
        return self.replica_manager.partitions

    @property
    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return {tp: p.log for tp, p in self.replica_manager.partitions.items()}

    @property
    def producer_state(self) -> dict[TopicPartition, ProducerStateManager]:
        return {tp: p.producer_state for tp, p in self.replica_manager.partitions.items()}

    # -- arrival -----------------------------------------------------------------------
    @property
    def registered(self) -> bool:
        return self.lifecycle is None or self.lifecycle.registered

    @property
    def serving(self) -> bool:
        """Whether the broker accepts connections: alive and, with a controller, RUNNING."""
        return self.alive and (self.lifecycle is None or self.lifecycle.serving)

    def receive(self, msg: Message) -> None:
        kind = type(msg.payload)
        if kind is TcpConnect:
            self._accept(msg)
            return
        if not self.alive or (kind not in _OUTBOUND_ANSWERS and not self.serving):
            # Connection refused (no process, or one that does not listen yet): the client
            # learns after one hop.
            if msg.conn is not None:
                msg.conn.destroy()
                self._notify_reset(msg.conn)
            return
        if kind in _OWN_THREADS:
            # Answers to this broker's own requests and the controller's metadata are handled
            # by threads of their own (fetchers, the lifecycle manager, the metadata loader),
            # not by the request handlers; a paused process handles them when it resumes.
            self._internal.append(msg)
            if not self.paused:
                self._handle_internal()
            return
        conn = msg.conn
        if conn is not None and conn.broker == self.name:
            self._connections[id(conn)] = conn
            key = id(conn)
            if key in self._muted:
                # SocketServer mutes a connection from the moment a request is read until its
                # response is sent: the next request waits, so a connection's requests are
                # handled, and answered, one at a time and in order.
                self._stalled.setdefault(key, deque()).append(msg)
                return
            self._muted.add(key)
        self._enqueue(msg)

    def _accept(self, msg: Message) -> None:
        """The host's kernel answers a client's connect: accepted while a broker listens (its
        process may be paused), refused when none does (crashed, or not serving yet)."""
        conn = msg.conn
        if conn is None:
            return
        if not self.serving:
            conn.destroy()
            self._notify_reset(conn)
            return
        self._connections[id(conn)] = conn
        self.network.send(self.name, msg.src, TcpAccepted(self.name, conn.generation), conn)

    def _enqueue(self, msg: Message) -> None:
        self.requests.put(msg)

    def _unmute(self, conn: Connection | None) -> None:
        if conn is None or conn.broker != self.name:
            return
        key = id(conn)
        stalled = self._stalled.get(key)
        if stalled:
            self._enqueue(stalled.popleft())  # stays muted for this one
            if not stalled:
                del self._stalled[key]
        else:
            self._muted.discard(key)

    def respond(self, msg: Message, response: object) -> None:
        """Send the answer to ``msg`` (handled earlier and held) and read the next request
        of its connection."""
        if not self.alive:
            return
        self.network.send(self.name, msg.src, response, msg.conn, internal=msg.internal)
        self._unmute(msg.conn)

    def _handle_internal(self) -> None:
        while self._internal and self.alive and not self.paused:
            msg = self._internal.popleft()
            self._current = msg
            self.handlers[type(msg.payload)](msg.payload)

    def _handler_loop(self):  # type: ignore[no-untyped-def]
        while True:
            msg = yield from self.requests.take()
            self.requests_handled += 1
            self._current = msg
            self._held = False
            response = self._handle(msg.payload)
            if not self.alive:
                continue
            # KafkaApis.handle ends with ReplicaManager.tryCompleteActions: the checks that
            # appends queued (this request's, and those other threads made since the last
            # request) run now.
            self.replica_manager.complete_actions()
            if response is not None:
                self.network.send(self.name, msg.src, response, msg.conn, internal=msg.internal)
                self._unmute(msg.conn)
            elif not self._held:
                self._unmute(msg.conn)  # no answer at all (acks=0)

    def _reply_later(self) -> Callable[[object], None]:
        """A way to answer the request being handled once it is ready (a held request)."""
        msg = self._current
        incarnation = self.incarnation

        def reply(response: object) -> None:
            if self.alive and self.incarnation == incarnation:
                self.respond(msg, response)

        return reply

    def _handle(self, request: object) -> object | None:
        """Answer ``request`` (None: no answer, or not yet). Broker requests go to the handler
        the dispatch table names for their type; any other to the coordinator runtime's."""
        handler = self.handlers.get(type(request))
        if handler is not None:
            return handler(request)
        return self._to_coordinator(request)

    def hold_current(self) -> Callable[[object], None]:
        """Hold the request being handled (its answer comes later, through the returned
        function; the connection stays muted until then)."""
        self._held = True
        return self._reply_later()

    def _to_coordinator(self, request: object) -> object | None:
        response = self.coordinator.handle(request) if self.coordinator is not None else None
        if response is None and (not self.alive or self._held):
            return None
        if response is None:
            raise TypeError(f"{self.name}: unexpected request {type(request).__name__}")
        return response

    def _dispatch_table(self) -> dict[type, Callable[[Any], object | None]]:
        """Request type -> bound handler, built once. A new broker request gets a method
        ``_handle_<name>(request) -> response | None`` and an entry here; a coordinator
        request is registered in :meth:`CoordinatorRuntime._dispatch_table` instead."""
        rm = self.replica_manager
        return {
            ApiVersionsRequest: lambda r: ApiVersionsResponse(r.correlation_id),
            ProduceRequest: self._handle_produce,
            FetchRequest: self._handle_fetch,
            ListOffsetsRequest: self._handle_list_offsets,
            InitProducerIdRequest: self._handle_init_producer_id,
            WriteTxnMarkersRequest: self._handle_markers,
            WriteTxnMarkersResponse: self._handle_markers_response,
            MetadataRequest: self._handle_metadata,
            ReplicaFetchRequest: self._handle_replica_fetch,
            ReplicaFetchResponse: lambda r: rm.on_replica_fetch_response(
                self._current.src, self._current.conn, r
            ),
            AlterPartitionResponse: rm.on_alter_partition_response,
            MetadataDelta: self._handle_metadata_delta,
            BrokerHeartbeatResponse: self._handle_heartbeat_response,
            BrokerRegistrationResponse: self._handle_registration_response,
            Disconnected: rm.on_disconnected,
        }

    def _handle_replica_fetch(self, request: ReplicaFetchRequest) -> ReplicaFetchResponse | None:
        response = self.replica_manager.handle_replica_fetch(self._current, request)
        if response is None:
            self._held = True  # held until data arrives (DelayedFetch)
        return response

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

    def _handle_metadata(self, request: MetadataRequest) -> MetadataResponse:
        """A client's metadata request, answered from this broker's metadata cache (which
        lags the controller by the time its changes take to arrive)."""
        return MetadataResponse(
            request.correlation_id,
            {
                tp: PartitionLeader(st.leader, st.leader_epoch, st.replicas, st.isr)
                for tp, st in self.replica_manager.metadata.items()
                if not is_internal(tp[0])
            },
        )

    def _needs_add(self, tp: TopicPartition, pid: int, epoch: int) -> bool:
        """Transaction version 2: UnifiedLog.hasOngoingTransaction(producerId, producerEpoch):
        the open transaction must be this epoch's, else the leader adds the partition."""
        part = self.replica_manager.leader_partition(tp)
        if part is None:
            return False
        return pid not in part.log.ongoing or part.producer_state.epoch_of(pid) != epoch

    def _handle_produce(self, request: ProduceRequest) -> ProduceResponse | None:
        msg = self._current
        if self.add_partition is None or request.transactional_id is None:
            return self._produce(request, {}, None, msg.conn)
        # Transaction version 2: the partitions the leader must add to the transaction first
        # (ReplicaManager.appendRecords with addPartition: the append waits for the
        # coordinator's answers).
        adds = [
            (tp, data)
            for tp, data in request.partitions
            if data.transactional and self._needs_add(tp, data.producer_id, data.epoch)
        ]
        if not adds:
            return self._produce(request, {}, None, msg.conn)
        # One entry for the request's partitions (AddPartitionsToTxnManager.addOrVerifyTransaction
        # with the producer id and epoch of the request's transactional batches).
        tps = tuple(tp for tp, _data in adds)
        pid, epoch = adds[0][1].producer_id, adds[0][1].epoch
        txn_id = request.transactional_id
        reply: list[Callable[[object], None]] = []
        now_answer: list[object | None] = []
        started = self.env.now
        incarnation = self.incarnation
        settings = self.settings
        # KAFKA-18654 part 2: the leader retries CONCURRENT_TRANSACTIONS itself, every
        # add.partitions.to.txn.retry.backoff.ms until min(add.partitions.to.txn.retry.backoff.
        # max.ms, request.timeout.ms) has passed since its first ask (the check is made when an
        # answer arrives, as ReplicaManager.maybeRetryOnConcurrentTransactions makes it).
        retry_for = min(settings.add_partitions_retry_max_ms, BROKER_REQUEST_TIMEOUT_MS)

        def ask() -> None:
            if self.alive and self.incarnation == incarnation:
                assert self.add_partition is not None
                self.add_partition(txn_id, pid, epoch, tps, answered)

        def answered(error: Errors) -> None:
            if (
                self.rules.add_partitions_server_retry
                and error is Errors.CONCURRENT_TRANSACTIONS
                and self.env.now - started < retry_for
            ):
                timer = self.env.timeout(settings.add_partitions_retry_backoff_ms)
                timer.callbacks.append(lambda _ev: ask())
                return
            added = dict.fromkeys(tps, error)
            if not reply:
                now_answer.append(self._produce(request, added, None, msg.conn))
                return
            # The append runs as a callback request on a request handler thread
            # (KafkaRequestHandler.wrapAsyncCallback), which then completes the queued actions.
            response = self._produce(request, added, reply[0], msg.conn)
            if self.alive:
                self.replica_manager.complete_actions()
            if response is not None:
                reply[0](response)
            elif request.acks == 0 and self.alive:
                self._unmute(msg.conn)

        ask()
        if now_answer:
            return now_answer[0]  # type: ignore[return-value]
        reply.append(self.hold_current())
        return None

    def _produce(
        self,
        request: ProduceRequest,
        added: dict[TopicPartition, Errors],
        reply: Callable[[object], None] | None,
        conn: Connection | None,
    ) -> ProduceResponse | None:
        """Append a produce request's batches; ``added``: the coordinator's answers for the
        partitions the leader added to the transaction; ``reply``: how to answer a request
        that was held for them; ``conn``: the connection it came on."""
        now = self.env.now
        rm = self.replica_manager
        results: list[PartitionResponse] = []
        waits: list[tuple[TopicPartition, int]] = []
        for tp, data in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                results.append(PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            log = part.log
            state = part.producer_state
            pid = data.producer_id
            if data.transactional:
                if self.add_partition is not None:
                    error = added.get(tp, Errors.NONE)
                    if (
                        error is Errors.NONE
                        and tp not in added
                        and self._needs_add(tp, pid, data.epoch)
                    ):
                        error = Errors.CONCURRENT_TRANSACTIONS  # no longer open: add again
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
            assert part.leader_state is not None
            refused = part.leader_state.append_error(request.acks)
            if refused is not Errors.NONE:
                # Partition.appendRecordsToLeader: too few in sync for acks=all.
                results.append(PartitionResponse(refused, log_start_offset=log.log_start_offset))
                continue
            size = data.size_bytes if data.size_bytes is not None else batch_size(data.values)
            if size > log.config.segment_bytes:
                # UnifiedLog.append: a batch must fit in a segment.
                results.append(PartitionResponse(Errors.RECORD_LIST_TOO_LARGE, log_start_offset=-1))
                continue
            last_seq = data.last_sequence
            check = state.check(pid, data.epoch, data.base_sequence, last_seq)
            if check.verdict is Verdict.APPEND:
                batch = log.append(
                    pid,
                    data.epoch,
                    data.base_sequence,
                    data.values,
                    now,
                    data.transactional,
                    part.leader_epoch,
                    data.timestamp,
                    size,
                )
                state.update(
                    data.producer_id,
                    data.epoch,
                    data.base_sequence,
                    last_seq,
                    batch.base_offset,
                    batch.last_offset,
                    batch.timestamp,
                )
                part.appended(batch, now)
                rm.after_leader_append(part)
                results.append(
                    PartitionResponse(Errors.NONE, batch.base_offset, log.log_start_offset)
                )
                waits.append((tp, batch.last_offset + 1))
            elif check.verdict is Verdict.DUPLICATE:
                assert check.duplicate_of is not None
                first = check.duplicate_of.first_offset
                results.append(PartitionResponse(Errors.NONE, first, log.log_start_offset))
                waits.append((tp, check.duplicate_of.last_offset + 1))
            else:
                # The log start offset travels with the error (ReplicaManager.appendToLocalLog),
                # so a producer told UNKNOWN_PRODUCER_ID can see its records were deleted.
                error = _VERDICT_ERRORS[check.verdict]
                results.append(PartitionResponse(error, log_start_offset=log.log_start_offset))
        if request.acks == 0:
            # KafkaApis.handleProduceRequest: acks=0 gets no answer; if any partition failed,
            # the broker closes the connection so that the client notices and refreshes its
            # metadata (requestChannel.closeConnection).
            if any(r.error is not Errors.NONE for r in results):
                self._close_connection(conn)
            return None
        if request.acks == -1 and waits:
            return self._after_replication(request.correlation_id, request, results, waits, reply)
        return ProduceResponse(request.correlation_id, results)

    def _close_connection(self, conn: Connection | None) -> None:
        """RequestChannel.closeConnection: the broker closes a client's connection. What the
        client sent on it that was not read yet is discarded, later sends on it are refused
        (a reset), and the client learns of the close after one hop."""
        if conn is None or conn.closed or not self.alive:
            return
        key = id(conn)
        self._stalled.pop(key, None)
        self._muted.discard(key)
        self._connections.pop(key, None)
        conn.close_by_server()
        self._notify_reset(conn)

    def _after_replication(
        self,
        correlation_id: int,
        request: ProduceRequest,
        results: list[PartitionResponse],
        waits: list[tuple[TopicPartition, int]],
        reply: Callable[[object], None] | None = None,
    ) -> ProduceResponse | None:
        """acks=all: answer once every appended partition is replicated (DelayedProduce);
        None when the answer is held."""

        def build(errors: dict[TopicPartition, Errors]) -> ProduceResponse:
            final = [
                r if errors.get(tp, Errors.NONE) is Errors.NONE else PartitionResponse(errors[tp])
                for (tp, _data), r in zip(request.partitions, results, strict=True)
            ]
            return ProduceResponse(correlation_id, final)

        return self._hold(waits, request.timeout_ms, build, reply)

    def _hold(
        self,
        waits: list[tuple[TopicPartition, int]],
        timeout_ms: float,
        build: Callable[[dict[TopicPartition, Errors]], Any],
        reply: Callable[[object], None] | None = None,
    ) -> Any:
        """Wait for ``waits`` to be replicated; the response ``build`` makes from their errors
        is returned now if nothing needs waiting, else sent when it is ready (None now).
        ``reply``: how to answer a request already held (else the request being handled)."""
        already_held = reply is not None
        answer = reply if reply is not None else self._reply_later()
        now: list[Any] = []
        held = [False]

        def complete(errors: dict[TopicPartition, Errors]) -> None:
            response = build(errors)
            if held[0]:
                answer(response)
            else:
                now.append(response)

        self.replica_manager.wait_for_replication(waits, timeout_ms, complete)
        if now:
            return now[0]
        held[0] = True
        if not already_held:
            self._held = True
        return None

    def _handle_fetch(self, request: FetchRequest) -> FetchResponse | None:
        """A consumer's fetch, answered now if it finds something to return, else held up to
        its ``max_wait_ms`` (ReplicaManager.fetchMessages, DelayedFetch) until it does."""
        if request.max_wait_ms <= 0 or self._fetch_completable(request):
            return self._read_fetch(request)
        reply = self.hold_current()
        self.replica_manager.hold_read(
            tuple(tp for tp, _offset in request.partitions),
            lambda: self._fetch_completable(request),
            lambda: reply(self._read_fetch(request)),
            request.max_wait_ms,
        )
        return None

    def _fetch_completable(self, request: FetchRequest) -> bool:
        """DelayedFetch.tryComplete with fetch.min.bytes 1: some partition is no longer led
        here (case A) or cannot be read at its offset, or its offset differs from the end
        its isolation level reads to (the last stable offset, else the high watermark):
        below it there is something to return (case G), above it the log was truncated
        under the consumer (case F)."""
        rm = self.replica_manager
        for tp, offset in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                return True
            log = part.log
            if offset > log.log_end_offset or offset < log.log_start_offset:
                return True
            hw = part.high_watermark
            end = log.last_stable_offset(hw) if request.isolation == "read_committed" else hw
            if offset != end:
                return True
        return False

    def _read_fetch(self, request: FetchRequest) -> FetchResponse:
        parts: list[tuple[TopicPartition, FetchPartition]] = []
        rm = self.replica_manager
        for tp, offset in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                parts.append((tp, FetchPartition(Errors.NOT_LEADER_OR_FOLLOWER)))
                continue
            log = part.log
            hw = part.high_watermark
            if offset > log.log_end_offset or offset < log.log_start_offset:
                # Beyond the log's end or before its start a read is refused
                # (LocalLog.read, UnifiedLog.checkLogStartOffset).
                refused = FetchPartition(
                    Errors.OFFSET_OUT_OF_RANGE,
                    last_stable_offset=log.last_stable_offset(hw),
                    log_end_offset=hw,
                )
                parts.append((tp, refused))
                continue
            batches, aborted = log.fetch(
                offset, request.isolation, self.settings.fetch_max_records, hw
            )
            fetched = FetchPartition(Errors.NONE, batches, aborted, log.last_stable_offset(hw), hw)
            parts.append((tp, fetched))
        return FetchResponse(request.correlation_id, parts)

    def _handle_list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        """EARLIEST: the log start offset; LATEST: the end a
        consumer of that isolation level may read to (Partition.fetchOffsetForTimestamp): the
        last stable offset for read_committed, else the high watermark, refused with
        OFFSET_NOT_AVAILABLE while a new leader's high watermark has not yet reached the
        start of its epoch (it may still be below offsets a consumer has already read)."""
        parts: list[tuple[TopicPartition, Errors, int]] = []
        for tp, timestamp in request.partitions:
            part = self.replica_manager.leader_partition(tp)
            if part is None:
                parts.append((tp, Errors.NOT_LEADER_OR_FOLLOWER, -1))
                continue
            state = part.leader_state
            assert state is not None
            if timestamp == EARLIEST_TIMESTAMP:
                parts.append((tp, Errors.NONE, part.log.log_start_offset))
            elif state.epoch_start_offset > state.high_watermark:
                parts.append((tp, Errors.OFFSET_NOT_AVAILABLE, -1))
            elif request.isolation == "read_committed":
                parts.append((tp, Errors.NONE, part.log.last_stable_offset(part.high_watermark)))
            else:
                parts.append((tp, Errors.NONE, part.high_watermark))
        return ListOffsetsResponse(request.correlation_id, parts)

    def _handle_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse | None:
        pid, epoch = request.producer_id, request.epoch
        control = "COMMIT" if request.commit else "ABORT"
        results: list[tuple[TopicPartition, Errors]] = []
        waits: list[tuple[TopicPartition, int]] = []
        rm = self.replica_manager
        offsets: list[TopicPartition] = []
        for tp in request.partitions:
            if tp[0] == CONSUMER_OFFSETS_TOPIC:
                # KafkaApis.handleWriteTxnMarkersRequest: the group coordinator writes the
                # marker to its partition (checked like any other by the producer state) and
                # applies it; a coordinator not ready answers NOT_LEADER_OR_FOLLOWER.
                runtime = self.coordinator
                if runtime is None or runtime.partition_error(tp) is not Errors.NONE:
                    results.append((tp, Errors.NOT_LEADER_OR_FOLLOWER))
                    continue
                offsets.append(tp)
            part = rm.leader_partition(tp)
            if part is None:
                results.append((tp, Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            if tp not in offsets:
                self.probe.hit("leader.before_marker", self.name)
                if not self.alive:
                    return None
            assert part.leader_state is not None
            refused = part.leader_state.append_error(-1)
            if refused is not Errors.NONE:
                # The coordinator's markers are appended with requiredAcks -1 (KafkaApis.
                # handleWriteTxnMarkersRequest), so Partition.appendRecordsToLeader refuses
                # them below min.insync.replicas before anything is appended.
                results.append((tp, refused))
                continue
            # ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch, checkCoordinatorEpoch.
            verdict = part.producer_state.mark(pid, epoch, request.coordinator_epoch, self.env.now)
            if verdict is not Verdict.APPEND:
                results.append((tp, _VERDICT_ERRORS[verdict]))
                continue
            marker = part.log.append_marker(
                pid,
                epoch,
                control,  # type: ignore[arg-type]
                self.env.now,
                request.coordinator_epoch,
                part.leader_epoch,
            )
            part.appended(marker, self.env.now)
            rm.after_leader_append(part)
            if tp not in offsets:
                self.probe.hit("leader.after_marker", self.name)
                if not self.alive:
                    return None
            results.append((tp, Errors.NONE))
            waits.append((tp, marker.last_offset + 1))
        if not waits:
            final = [(tp, _marker_error(tp, error)) for tp, error in results]
            return WriteTxnMarkersResponse(request.correlation_id, pid, final)
        # Markers are written with acks=all (ReplicaManager.appendRecords, requiredAcks -1).

        def build(errors: dict[TopicPartition, Errors]) -> WriteTxnMarkersResponse:
            final = [(tp, errors.get(tp, error)) for tp, error in results]
            for tp, error in final:
                if tp in offsets and error is Errors.NONE and self.coordinator is not None:
                    self.coordinator.marker_written(
                        tp, pid, epoch, request.commit, request.coordinator_epoch
                    )
            final = [(tp, _marker_error(tp, error)) for tp, error in final]
            return WriteTxnMarkersResponse(request.correlation_id, pid, final)

        return self._hold(waits, MARKER_TIMEOUT_MS, build)

    # -- the controller: metadata, registration and heartbeats ------------------------------
    def _handle_metadata_delta(self, delta: MetadataDelta) -> None:
        """Replay the controller's metadata (the broker's metadata publisher). A starting
        broker applies nothing until a snapshot brings it up to date (its first publish); a
        broker that finds a record missing fetches a snapshot rather than skip it."""
        rm = self.replica_manager
        lifecycle = self.lifecycle
        if lifecycle is not None and not delta.snapshot:
            if not lifecycle.published:
                return
            if delta.offset > rm.metadata_offset + 1:
                lifecycle.fetch_metadata()
                return
        rm.apply_metadata(delta.offset, delta.partitions, delta.snapshot, delta.fenced)
        if lifecycle is not None and delta.snapshot:
            lifecycle.snapshot_applied()

    def _handle_registration_response(self, response: BrokerRegistrationResponse) -> None:
        if self.lifecycle is not None:
            self.lifecycle.on_registration_response(response)

    def _handle_heartbeat_response(self, response: BrokerHeartbeatResponse) -> None:
        if self.lifecycle is not None and self.lifecycle.on_heartbeat_response(response):
            self._kick()

    # -- faults ------------------------------------------------------------------------
    def crash(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.state_log.record(self.name, "crash", incarnation=self.incarnation)
        if self.lifecycle is not None:
            self.lifecycle.stopped()
        self.replica_manager.shutdown()
        if self.coordinator is not None:
            self.coordinator.crash()
        self.paused = False
        self.requests.clear()
        self._internal.clear()
        self._muted.clear()
        self._stalled.clear()
        for conn in self._connections.values():
            was_open = not conn.closed
            conn.destroy()
            if was_open:
                self._notify_reset(conn)
        self._connections.clear()

    def power_loss(self) -> None:
        """The machine loses power: the process dies and the page cache with it, so each log
        keeps only what was flushed or written back by now (cut at once: nothing is written
        back while the power is off). A broker already without power loses nothing more."""
        if not self.powered:
            return
        self.powered = False
        cut = self.log_manager.lose_page_cache()
        self.state_log.record(self.name, "power_loss", cut=cut)
        self.crash()

    def _notify_reset(self, conn: Connection) -> None:
        # Sent outside the (now closed) connection, so it is not dropped with it.
        self.network.send(self.name, conn.client, Disconnected(self.name, conn.generation))

    def restart(self) -> None:
        """The machine is up (again) and a new broker process starts: producer state rebuilt
        from the logs, a new producer-id block, and, with a controller, the start-up of
        :class:`BrokerLifecycleManager` (registration, catch-up, unfencing) before it serves."""
        if self.alive:
            return
        self.alive = True
        self.powered = True
        self.incarnation += 1
        self.state_log.record(self.name, "restart", incarnation=self.incarnation)
        self.producer_ids.reset()
        rm = self.replica_manager
        led = sorted(tp for tp, p in rm.partitions.items() if p.leader == self.name)
        self.log_manager.recover()
        if self.lifecycle is None:
            for tp in led:  # a standalone broker leads its partitions again at once
                rm.lead_alone(tp, rm.partitions[tp].leader_epoch)
        else:
            self.lifecycle.started(self.incarnation)
        if self.coordinator is not None:
            self.coordinator.restart()
        self._kick()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.replica_manager.resumed()
        self._handle_internal()
        if self.lifecycle is not None:
            self.lifecycle.resumed()
        self._kick()
        self.replica_manager.wake_fetchers()

    def _kick(self) -> None:
        self.requests.kick()


_OWN_THREADS = frozenset(
    {
        ReplicaFetchResponse,
        AlterPartitionResponse,
        MetadataDelta,
        BrokerHeartbeatResponse,
        BrokerRegistrationResponse,
        Disconnected,
        # The coordinator's TxnMarkerSenderThread (an InterBrokerSendThread) handles the
        # answers to its markers (TransactionMarkerRequestCompletionHandler).
        WriteTxnMarkersResponse,
    }
)
# What reaches a broker on connections it opened itself (to leaders, the controller, the
# partitions its coordinators write markers to): accepted even before the broker listens.
_OUTBOUND_ANSWERS = _OWN_THREADS


def _marker_error(tp: TopicPartition, error: Errors) -> Errors:
    """A ``__consumer_offsets`` marker's append error as the group coordinator reports it:
    the errors a coordinator not ready raises become NOT_LEADER_OR_FOLLOWER
    (KafkaApis.handleWriteTxnMarkersRequest)."""
    if tp[0] == CONSUMER_OFFSETS_TOPIC and error in (
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    ):
        return Errors.NOT_LEADER_OR_FOLLOWER
    return error


# How long a leader holds a marker write for replication: Kafka uses the broker's
# request.timeout.ms (30 s) for WriteTxnMarkers' appends.
MARKER_TIMEOUT_MS = 30_000.0
