"""Sender: the producer's I/O thread, as a SimPy process.

Each pass of the loop (Kafka's ``Sender.runOnce``):

1. times out requests older than ``request.timeout.ms`` (as the end of Kafka's previous
   ``NetworkClient.poll`` does). This *closes the connection*, which fails every request in
   flight on it as a disconnection;
2. resolves sequences, bumps the idempotent epoch and fetches a producer id if there is none;
3. expires batches past ``delivery.timeout.ms``, queued or in flight;
4. drains ready partitions, at most one batch per partition per request, into one
   ProduceRequest per leader, as long as that connection has fewer than
   ``max.in.flight.requests.per.connection`` requests outstanding. Sequences are assigned
   here, at drain. With idempotence a partition is skipped while it has unresolved
   sequences, has stale-epoch batches in flight, or its head batch is a retry that is not
   the first in flight (so retries go out one at a time, in order);
5. sleeps until the next deadline or until woken by an append or a response.

Responses complete batches. Retriable errors re-enqueue the batch after an exponential,
jittered backoff (``retry.backoff.ms`` to ``retry.backoff.max.ms``, Kafka's
``ExponentialBackoff``: jitter first, then the cap) while ``retries`` and
``delivery.timeout.ms`` allow. Everything else fails it. A closed connection waits out the
reconnect backoff (``reconnect.backoff.ms`` to ``reconnect.backoff.max.ms``, the same
formula, ``ClusterConnectionStates``) before it is used again.

Connections are set up as Kafka's ``NetworkClient`` sets them up. A connection is opened when
something is waiting for its broker (``NetworkClient.ready``, ``leastLoadedNode``): the TCP
connect must be accepted by the broker's host within ``socket.connection.setup.timeout.ms``
(doubling to ``socket.connection.setup.timeout.max.ms`` after each that timed out), then an
``ApiVersionsRequest`` goes first and nothing else is sent until it is answered
(``CHECKING_API_VERSIONS``). Only that answer makes the connection ready and resets the
reconnect backoff (``ClusterConnectionStates.ready``). A paused broker's host accepts the
connect, but its process answers nothing: the client's batches wait in the accumulator
instead of being sent into the paused broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import cast

import simpy

from eosim.simulation.config import ProducerConfig
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.metadata import ClientMetadata, ClusterMetadata
from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.producer.accumulator import ProducerBatch, RecordAccumulator
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import State
from eosim.simulation.producer.transactions import END_TXN, Transactions, TxnRequest
from eosim.simulation.protocol import (
    INVALID_METADATA_ERRORS,
    NO_SEQUENCE,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BatchData,
    Disconnected,
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TcpAccepted,
    TcpConnect,
    TopicPartition,
)
from eosim.simulation.rng import RandomStream

INF = float("inf")
# The shortest sleep: a deadline a few ulps away must still move the clock past it, or the
# loop would wake at the same instant forever.
MIN_SLEEP_MS = 1e-6


@dataclass(slots=True)
class InFlightRequest:
    correlation_id: int
    deadline: float
    batches: list[ProducerBatch]
    init_producer_id: bool = False
    txn: TxnRequest | None = None
    metadata: bool = False
    api_versions: bool = False


class ConnectionState(Enum):
    """Kafka's ``ConnectionState`` (without the authentication states)."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CHECKING_API_VERSIONS = "checking_api_versions"
    READY = "ready"


@dataclass(slots=True)
class NodeConnection:
    """The client's view of its connection to one broker (``ClusterConnectionStates``'
    ``NodeConnectionState`` with the connection itself)."""

    broker: str
    generation: int = 0
    conn: Connection | None = None
    state: ConnectionState = ConnectionState.DISCONNECTED
    in_flight: list[InFlightRequest] = field(default_factory=list)
    # A new connection may be started from here on (lastConnectAttemptMs + reconnectBackoffMs).
    ready_at: float = 0.0
    # failedAttempts: connections that closed since one was last ready.
    failures: int = 0
    # lastConnectAttemptMs: the last connect or disconnection (leastLoadedNode prefers the
    # broker tried longest ago).
    last_attempt: float = 0.0
    # While CONNECTING: the connection setup timeout runs out (strictly after this).
    connect_deadline: float = INF
    # failedConnectAttempts: connects that timed out since one was accepted.
    setup_failures: int = 0


class Sender:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        metadata: ClusterMetadata,
        accumulator: RecordAccumulator,
        config: ProducerConfig,
        transaction_manager: TransactionManager | None,
        rng: RandomStream,
        on_batches_done: Callable[[], None],
        metadata_rng: RandomStream | None = None,
    ) -> None:
        self.env = env
        self.node = node
        self.network = network
        # The producer's metadata cache: partition leaders as this client believes them.
        self.metadata = ClientMetadata(
            metadata,
            config.metadata_max_age_ms,
            config.retry_backoff_ms,
            env.now,
            refresh_backoff_max_ms=config.retry_backoff_max_ms,
            jitter=metadata_rng,
        )
        self._metadata_in_flight = False
        self.accumulator = accumulator
        self.config = config
        self.tm = transaction_manager
        self.rng = rng
        # RecordAccumulator.retryBackoff and ClusterConnectionStates.reconnectBackoff.
        self.retry_backoff = ExponentialBackoff(
            config.retry_backoff_ms, config.retry_backoff_max_ms
        )
        self.reconnect_backoff = ExponentialBackoff(
            config.reconnect_backoff_ms, config.reconnect_backoff_max_ms
        )
        self.setup_timeout = ExponentialBackoff(
            config.socket_connection_setup_timeout_ms,
            config.socket_connection_setup_timeout_max_ms,
        )
        self.on_batches_done = on_batches_done
        self.running = True
        self._connections = {b: NodeConnection(b) for b in metadata.brokers}
        self._correlation = 0
        self._wakeup = env.event()
        self._timer_at = INF
        self.requests_sent = 0
        self.retries = 0
        self.probe: Probe | None = None
        self.paused: simpy.Event | None = None  # set while the process is frozen
        self.process = env.process(self._loop())

    # -- loop --------------------------------------------------------------------------
    def wakeup(self) -> None:
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def _loop(self):  # type: ignore[no-untyped-def]
        env = self.env
        while self.running:
            if self.paused is not None:
                yield self.paused
                continue
            delay = self._run_once(env.now)
            if not self.running:
                return
            if delay < INF:
                at = env.now + max(delay, MIN_SLEEP_MS)
                if at < self._timer_at:
                    self._timer_at = at
                    timer = env.timeout(at - env.now)
                    timer.callbacks.append(self._on_timer)
            yield self._wakeup
            self._wakeup = env.event()

    def _on_timer(self, _event: simpy.Event) -> None:
        self._timer_at = INF
        self.wakeup()

    def stop(self) -> None:
        self.running = False
        self.wakeup()

    def _run_once(self, now: float) -> float:
        # Requests that timed out are failed first: in Kafka that is the end of the previous
        # NetworkClient.poll, before runOnce resolves sequences and bumps the epoch.
        delay = self._time_out_requests(now)
        tm = self.tm
        txn = self.txn
        if tm is not None:
            tm.maybe_resolve_sequences()
        if txn is not None:
            if txn.state.state in (
                State.ABORTABLE_ERROR,
                State.ABORTING_TRANSACTION,
                State.FATAL_ERROR,
            ):
                self.abort_undrained_batches(txn.last_error or "TransactionAbortedException")
        elif tm is not None:
            if tm.epoch_bump_required:
                tm.bump_idempotent_epoch()
            if not tm.has_producer_id and not tm.initializing:
                delay = min(delay, self._send_init_producer_id(now))
        delay = min(delay, self._expire_batches(now))
        if txn is not None:
            delay = min(delay, self._maybe_send_txn_request(now))
        delay = min(delay, self._maybe_update_metadata(now))
        if tm is not None and not tm.has_producer_id:
            # Nothing can be drained yet, but the InitProducerId request may still time out.
            return min(delay, self._next_connection_delay(now))
        ready, ready_delay = self.accumulator.ready(now, self._sendable, self.metadata.leader_epoch)
        delay = min(delay, ready_delay)
        if ready:
            self._drain_and_send(ready, now)
            # Sender.sendProducerData polls with a zero timeout after sending to ready nodes,
            # so the loop drains again at once: the next batch of a partition goes out in the
            # next request, until max.in.flight.requests.per.connection stops it.
            delay = 0.0
        return min(delay, self._next_connection_delay(now))

    # -- connections -------------------------------------------------------------------
    def _can_send_to(self, nc: NodeConnection, now: float) -> bool:
        """NetworkClient.canSendRequest: ready, and room for one more request in flight."""
        return nc.state is ConnectionState.READY and len(nc.in_flight) < self.config.max_in_flight

    def _can_connect(self, nc: NodeConnection, now: float) -> bool:
        """ClusterConnectionStates.canConnect: disconnected, the reconnect backoff over."""
        return nc.state is ConnectionState.DISCONNECTED and now >= nc.ready_at

    def _reconnect_wait(self, nc: NodeConnection, now: float) -> float:
        """How long ``nc`` still backs off before a new connect may start (INF when it is
        not backing off: connected, being set up, or free to connect now)."""
        if nc.state is ConnectionState.DISCONNECTED and nc.ready_at > now:
            return nc.ready_at - now
        return INF

    def _ready(self, nc: NodeConnection, now: float) -> bool:
        """NetworkClient.ready: whether a request can go to ``nc``'s broker now; if there
        is no connection and the backoff is over, one is started."""
        if self._can_send_to(nc, now):
            return True
        if self._can_connect(nc, now):
            self._initiate_connect(nc, now)
        return False

    def _initiate_connect(self, nc: NodeConnection, now: float) -> None:
        """NetworkClient.initiateConnect: the TCP connect goes out; its setup timeout is
        drawn now (Kafka draws it at the previous disconnection; the same distribution)."""
        nc.generation += 1
        nc.conn = self.network.connect(self.node, nc.broker, nc.generation)
        nc.state = ConnectionState.CONNECTING
        nc.last_attempt = now
        nc.connect_deadline = now + self.setup_timeout.backoff(nc.setup_failures, self.rng)
        self.network.send(self.node, nc.broker, TcpConnect(nc.broker, nc.generation), nc.conn)

    def _connected(self, nc: NodeConnection, now: float) -> None:
        """The host accepted the connect (NetworkClient.handleConnections): the
        ApiVersionsRequest goes first, and nothing else until it is answered."""
        assert nc.conn is not None
        nc.state = ConnectionState.CHECKING_API_VERSIONS
        nc.connect_deadline = INF
        nc.setup_failures = 0  # checkingApiVersions resets the connection setup timeout
        self._correlation += 1
        nc.in_flight.append(
            InFlightRequest(
                self._correlation,
                now + self.config.request_timeout_ms,
                [],
                api_versions=True,
            )
        )
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, ApiVersionsRequest(self._correlation), nc.conn)

    def _connection(self, nc: NodeConnection) -> Connection:
        assert nc.conn is not None and nc.state is ConnectionState.READY
        return nc.conn

    def _next_connection_delay(self, now: float) -> float:
        delay = INF
        for nc in self._connections.values():
            if nc.in_flight:
                # Strictly after the deadline, so a delivery timeout due at the same
                # instant is handled first (see _time_out_requests).
                delay = min(delay, nc.in_flight[0].deadline - now + MIN_SLEEP_MS)
            if nc.state is ConnectionState.CONNECTING:
                delay = min(delay, nc.connect_deadline - now + MIN_SLEEP_MS)
            delay = min(delay, self._reconnect_wait(nc, now))
        return delay

    def _time_out_requests(self, now: float) -> float:
        for nc in self._connections.values():
            # NetworkClient times a request out once *more than* request.timeout.ms has
            # passed (its clock ticks in ms), while a batch expires as soon as
            # delivery.timeout.ms has: when both fall due together, expiry comes first.
            if nc.in_flight and nc.in_flight[0].deadline < now:
                self._disconnect(nc, now, Errors.REQUEST_TIMED_OUT)
            elif nc.state is ConnectionState.CONNECTING and nc.connect_deadline < now:
                # NetworkClient.handleTimedOutConnections.
                self._disconnect(nc, now, Errors.NETWORK_EXCEPTION)
        return INF

    def _disconnect(self, nc: NodeConnection, now: float, error: Errors) -> None:
        if nc.conn is not None:
            nc.conn.close()
            nc.conn = None
        # ClusterConnectionStates.disconnected: backoff(failedAttempts), then one more failure;
        # a connect that never completed counts towards a longer setup timeout.
        nc.ready_at = now + self.reconnect_backoff.backoff(nc.failures, self.rng)
        nc.failures += 1
        nc.last_attempt = now
        if nc.state is ConnectionState.CONNECTING:
            nc.setup_failures += 1
        else:
            nc.setup_failures = 0
        nc.state = ConnectionState.DISCONNECTED
        nc.connect_deadline = INF
        # NetworkClient.cancelInFlightRequests: what was in flight fails. An acks=0 produce is
        # never in flight: its batches completed when it was sent.
        requests, nc.in_flight = nc.in_flight, []
        for i, request in enumerate(requests):
            if request.api_versions:
                continue
            if request.metadata:
                self._metadata_in_flight = False
                self.metadata.failed(now)  # DefaultMetadataUpdater.handleFailedRequest
                continue
            if request.txn is not None:
                assert self.txn is not None
                self.txn.on_disconnect(request.txn)
                continue
            if request.init_producer_id:
                if self.tm is not None:
                    self.tm.initializing = False
                continue
            # Only the request that timed out gets the timeout error; the rest were cut off.
            # Either way nobody knows whether the broker appended the batches.
            err = error if i == 0 else Errors.NETWORK_EXCEPTION
            for batch in request.batches:
                batch.fate_unknown = True
                self._complete_batch(batch, PartitionResponse(err, log_start_offset=-1), now)
        # DefaultMetadataUpdater.handleServerDisconnect: a disconnection while an update is due
        # (and none in flight) counts as a failed update, so the next one backs off; and since
        # a disconnection may mean stale metadata (a timeout, or a broker closing the
        # connection after an acks=0 produce failed), an update is requested.
        if not self._metadata_in_flight and self.metadata.time_to_update(now) == 0:
            self.metadata.failed(now)
        self.metadata.request_update()
        self.on_batches_done()

    # -- InitProducerId ----------------------------------------------------------------
    def _least_loaded_node(self, now: float) -> NodeConnection | None:
        """NetworkClient.leastLoadedNode as DefaultMetadataUpdater.maybeUpdate uses it: the
        ready connection with the fewest requests in flight, scanning from a random broker.
        With none ready, a connection being set up is waited for; failing that, one is
        started to the broker whose last attempt is oldest. None while waiting."""
        brokers = list(self._connections.values())
        n = len(brokers)
        offset = int(self.rng.random() * n)
        ready: NodeConnection | None = None
        connecting: NodeConnection | None = None
        can_connect: NodeConnection | None = None
        for i in range(n):
            nc = brokers[(offset + i) % n]
            if self._can_send_to(nc, now):
                if not nc.in_flight:
                    return nc
                if ready is None or len(nc.in_flight) < len(ready.in_flight):
                    ready = nc
            elif nc.state in (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS):
                connecting = nc
            elif self._can_connect(nc, now) and (
                can_connect is None or can_connect.last_attempt > nc.last_attempt
            ):
                can_connect = nc
        if ready is not None:
            return ready
        if connecting is None and can_connect is not None:
            self._initiate_connect(can_connect, now)
        return None

    def _backoff_wait(self, now: float) -> float:
        """Every connection is backing off or full: wait for a backoff to end or a response."""
        return min(
            (self._reconnect_wait(nc, now) for nc in self._connections.values()), default=INF
        )

    def _send_init_producer_id(self, now: float) -> float:
        nc = self._least_loaded_node(now)
        if nc is None:
            return self._backoff_wait(now)
        assert self.tm is not None
        self.tm.initializing = True
        self._correlation += 1
        request = InitProducerIdRequest(self._correlation, self.config.transactional_id)
        nc.in_flight.append(
            InFlightRequest(self._correlation, now + self.config.request_timeout_ms, [], True)
        )
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, request, self._connection(nc))
        return INF

    # -- metadata ----------------------------------------------------------------------
    def _maybe_update_metadata(self, now: float) -> float:
        """NetworkClient.DefaultMetadataUpdater.maybeUpdate: when an update is due and none
        is in flight, ask a broker that can take a request now; the delay until the next."""
        if self._metadata_in_flight:
            return INF
        wait = self.metadata.time_to_update(now)
        if wait > 0:
            return wait
        nc = self._least_loaded_node(now)
        if nc is None:
            return self._backoff_wait(now)
        self._metadata_in_flight = True
        self._correlation += 1
        nc.in_flight.append(
            InFlightRequest(
                self._correlation, now + self.config.request_timeout_ms, [], metadata=True
            )
        )
        self.requests_sent += 1
        self.network.send(
            self.node, nc.broker, MetadataRequest(self._correlation), self._connection(nc)
        )
        return INF

    # -- drain -------------------------------------------------------------------------
    def _sendable(self, tp: TopicPartition) -> bool:
        leader = self.metadata.leader(tp)
        if leader is None:
            self.metadata.request_update()  # Sender: a partition with no known leader
            return False
        nc = self._connections[leader]
        if not self._ready(nc, self.env.now):
            return False
        tm = self.tm
        if tm is None:
            return True
        txn = self.txn
        if txn is not None and not txn.is_partition_added(tp):
            return False
        head = self.accumulator.head(tp)
        assert head is not None
        if not head.has_sequence:
            if tm.has_stale_producer_id_and_epoch(tp) and not tm.maybe_update_producer_id_and_epoch(
                tp
            ):
                return False
            if tm.has_unresolved_sequence(tp):
                return False
        first = tm.first_in_flight_sequence(tp)
        return not (first != NO_SEQUENCE and head.has_sequence and head.base_sequence != first)

    def _drain_and_send(self, ready: list[TopicPartition], now: float) -> None:
        by_leader: dict[str, list[TopicPartition]] = {}
        for tp in ready:
            by_leader.setdefault(self.metadata.leader(tp), []).append(tp)
        for broker, tps in by_leader.items():
            batches: list[ProducerBatch] = []
            size = 0
            for tp in tps:
                head = self.accumulator.head(tp)
                assert head is not None
                if batches and size + head.size > self.config.max_request_size:
                    break
                batch = self.accumulator.pop_head(tp)
                if self.tm is not None and not batch.has_sequence:
                    self.tm.assign_sequence(batch)
                size += batch.size
                batches.append(batch)
            self._send_produce(self._connections[broker], batches, now)

    def _send_produce(self, nc: NodeConnection, batches: list[ProducerBatch], now: float) -> None:
        self._correlation += 1
        partitions = []
        for b in batches:
            b.attempts += 1
            b.in_flight = True
            # Draining closes the batch (ProducerBatch.close), which clears "reopened": only
            # answers to attempts sent before a renumbering see the sequence as reset.
            b.sequence_has_been_reset = False
            if b.attempts > 1:
                self.retries += 1
            values = tuple(r.value for r in b.records)
            # The batch's timestamp: CreateTime, taken here as the batch's creation (Kafka
            # stamps each record at send(); the batch's max timestamp is its last record's).
            data = BatchData(
                b.producer_id,
                b.epoch,
                b.base_sequence,
                values,
                self._txn_id is not None,
                b.created_ms,
                b.size,
            )
            partitions.append((b.tp, data))
        acks = self.config.acks
        request = ProduceRequest(
            self._correlation,
            acks,
            partitions,
            batches,
            self._txn_id,
            self.config.request_timeout_ms,
        )
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, request, self._connection(nc))
        if acks == 0:
            # Nothing will answer: the batches count as sent and done (offset unknown).
            for b in batches:
                self._complete_batch(b, PartitionResponse(Errors.NONE, -1), now)
            self.on_batches_done()
            return
        deadline = now + self.config.request_timeout_ms
        nc.in_flight.append(InFlightRequest(self._correlation, deadline, batches))

    # -- responses ---------------------------------------------------------------------
    def receive(self, msg: Message) -> None:
        if not self.running:
            return
        payload = msg.payload
        nc = self._connections.get(msg.src)
        if nc is None:
            return
        if isinstance(payload, Disconnected):
            if nc.conn is not None and nc.generation == payload.generation:
                self._disconnect(nc, self.env.now, Errors.NETWORK_EXCEPTION)
                self.wakeup()
            return
        if msg.conn is not nc.conn:
            return  # a response on a connection this client has already closed
        if isinstance(payload, TcpAccepted):
            if nc.state is ConnectionState.CONNECTING:
                self._connected(nc, self.env.now)
            return
        request = next(
            (r for r in nc.in_flight if r.correlation_id == payload.correlation_id), None
        )
        if request is None:
            return
        nc.in_flight.remove(request)
        now = self.env.now
        if request.api_versions:
            if isinstance(payload, ApiVersionsResponse) and payload.error is Errors.NONE:
                # ClusterConnectionStates.ready: the connection is usable, and the
                # reconnect backoff starts again from reconnect.backoff.ms.
                nc.state = ConnectionState.READY
                nc.failures = 0
            else:
                self._disconnect(nc, now, Errors.NETWORK_EXCEPTION)
        elif request.metadata:
            self._metadata_in_flight = False
            if isinstance(payload, MetadataResponse):
                self.metadata.update(payload.partitions, now)
        elif request.txn is not None:
            assert self.txn is not None
            self.txn.on_response(request.txn, payload)
        elif isinstance(payload, InitProducerIdResponse):
            if self.tm is not None and payload.error is Errors.NONE:
                self.tm.set_producer_id_and_epoch(payload.producer_id, payload.epoch)
            elif self.tm is not None:
                self.tm.initializing = False
        elif isinstance(payload, ProduceResponse):
            for batch, result in zip(request.batches, payload.results, strict=True):
                self._complete_batch(batch, result, now)
            self.on_batches_done()
        self.wakeup()

    def _complete_batch(
        self, batch: ProducerBatch, response: PartitionResponse, now: float
    ) -> None:
        """Sender.completeBatch: success, a retry, or a failure that may adjust sequences."""
        batch.in_flight = False
        error = response.error
        tm = self.tm
        if error in INVALID_METADATA_ERRORS:
            self.metadata.request_update()
        if error is Errors.NONE:
            if tm is not None:
                tm.handle_completed_batch(batch, response.base_offset)
            if batch.complete(response.base_offset):
                self.accumulator.deallocate(batch)
            return
        if self._can_retry(batch, response, now):
            backoff = self._retry_backoff(batch)
            self.accumulator.reenqueue(batch, now, backoff)
            return
        # Sequences are adjusted only while the batch has retries left: once they are
        # exhausted nobody knows whether its sequence was taken (Kafka's attempts < retries;
        # eosim counts sends, Kafka counts retries).
        adjust = batch.attempts - 1 < self.config.retries
        self._fail_batch(batch, f"{error.exception_name}: {error.name}", error, adjust)

    def _fail_batch(
        self,
        batch: ProducerBatch,
        message: str,
        error: Errors | None = None,
        adjust_sequences: bool = False,
    ) -> None:
        """Sender.failBatch: complete the batch with the error, then let the transaction
        manager react (only if this completed it; an expired batch is already done)."""
        if batch.fail(message):
            if self.tm is not None:
                self.tm.handle_failed_batch(batch, error, message, adjust_sequences)
            self.accumulator.deallocate(batch)

    def _can_retry(self, batch: ProducerBatch, response: PartitionResponse, now: float) -> bool:
        if now - batch.created_ms >= self.config.delivery_timeout_ms:
            return False
        if batch.attempts - 1 >= self.config.retries or batch.done:
            return False
        if self.tm is None:
            return response.error.retriable
        return self.tm.can_retry(batch, response)

    def _retry_backoff(self, batch: ProducerBatch) -> float:
        """RecordAccumulator: ``retryBackoff.backoff(attempts - 1)``, Kafka counting the
        batch's retries where eosim counts its sends. The jitter is drawn once, at re-enqueue
        (Kafka draws it each time it checks the batch)."""
        return self.retry_backoff.backoff(max(batch.attempts - 1, 0), self.rng)

    # -- delivery timeout --------------------------------------------------------------
    def _expire_batches(self, now: float) -> float:
        """Fail batches past ``delivery.timeout.ms``, queued or in flight, without adjusting
        sequences; one that had been retried leaves its partition's sequence unresolved."""
        limit = self.config.delivery_timeout_ms
        message = "TimeoutException: record expired after delivery.timeout.ms"
        expired = self.accumulator.expired_batches(now)
        delay = self.accumulator.next_expiry_delay(now)
        for nc in self._connections.values():
            for request in nc.in_flight:
                for batch in request.batches:
                    if batch.done:
                        continue
                    left = batch.created_ms + limit - now
                    if left <= 0:
                        batch.fate_unknown = True  # its request is still outstanding
                        expired.append(batch)
                    else:
                        delay = min(delay, left)
        for batch in expired:
            self._fail_batch(batch, message)
            if self.tm is not None and batch.in_retry:
                self.tm.mark_sequence_unresolved(batch)
        if expired:
            self.on_batches_done()
        return delay

    # -- transactions ------------------------------------------------------------------
    @property
    def txn(self) -> Transactions | None:
        """The producer's transactional half. The TransactionManager holds it as the
        TransactionalHalf its bookkeeping needs; the Sender drives all of it."""
        tm = self.tm
        return cast("Transactions | None", tm.txn) if tm is not None else None

    @property
    def _txn_id(self) -> str | None:
        txn = self.txn
        return txn.transactional_id if txn is not None else None

    def _maybe_send_txn_request(self, now: float) -> float:
        txn = self.txn
        assert txn is not None
        request = txn.next_request(now, self.accumulator.incomplete > 0)
        if request is None:
            return txn.next_wakeup(now)
        node = txn.coordinator_node(request)
        if node is None:
            # FindCoordinator goes to any broker that can take it.
            ready = self._least_loaded_node(now)
            if ready is None:
                return self._backoff_wait(now)
            nc = ready
        else:
            nc = self._connections[node]
            if not self._ready(nc, now):
                return self._reconnect_wait(nc, now)
        txn.sent(request)
        self._correlation += 1
        payload = request.build(self._correlation)
        nc.in_flight.append(
            InFlightRequest(
                self._correlation, now + self.config.request_timeout_ms, [], txn=request
            )
        )
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, payload, self._connection(nc))
        if request.priority == END_TXN and self.probe is not None:
            self.probe.hit("producer.after_end_txn_sent", self.node)
        return INF

    def abort_undrained_batches(self, message: str) -> None:
        batches = self.accumulator.abort_undrained()
        for batch in batches:
            # RecordAccumulator.abortUndrainedBatches: no transaction-manager reaction.
            if batch.fail(message):
                self.accumulator.deallocate(batch)
        if batches:
            self.on_batches_done()

    def pause(self) -> None:
        if self.paused is None:
            self.paused = self.env.event()

    def resume(self) -> None:
        if self.paused is not None:
            paused, self.paused = self.paused, None
            paused.succeed()
            self.wakeup()

    def abandon(self) -> None:
        """The producer process died: stop without completing anything."""
        self.running = False
        for nc in self._connections.values():
            nc.in_flight.clear()
