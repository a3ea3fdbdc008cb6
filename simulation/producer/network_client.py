"""NetworkClient: the producer's connections to the brokers, its requests in flight, and its
metadata updates, as Kafka's ``NetworkClient`` (with ``ClusterConnectionStates`` and
``DefaultMetadataUpdater``) keeps them for the Sender.

A connection is opened when something waits for its broker (:meth:`NetworkClient.ready`,
:meth:`NetworkClient.least_loaded_node`): the TCP connect must be accepted by the broker's
host within ``socket.connection.setup.timeout.ms`` (doubling to
``socket.connection.setup.timeout.max.ms`` after each that timed out), then an
``ApiVersionsRequest`` goes first and nothing else is sent until it is answered
(``CHECKING_API_VERSIONS``). Only that answer makes the connection ready and resets the
reconnect backoff (``ClusterConnectionStates.ready``). A closed connection waits out the
reconnect backoff (``reconnect.backoff.ms`` to ``reconnect.backoff.max.ms``) before it is
used again. A request in flight for more than ``request.timeout.ms`` closes its connection,
which cancels every request in flight on it (``NetworkClient.cancelInFlightRequests``): the
client tells its owner of each (``on_cancelled``) and then once of the disconnection
(``on_disconnected``). Metadata requests are the client's own: it asks the least loaded
broker when an update is due, and a disconnection while one is due counts as a failed update.

The Sender owns the client and says what to send; the client says which broker can take a
request now, sends it, and hands back the answer with the request it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import simpy

from eosim.simulation.config import ProducerConfig
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.metadata import ClientMetadata
from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.producer.accumulator import ProducerBatch
from eosim.simulation.producer.transactions import TxnRequest
from eosim.simulation.protocol import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    Disconnected,
    Errors,
    MetadataRequest,
    MetadataResponse,
    TcpAccepted,
    TcpConnect,
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


# What `NetworkClient.receive` hands back: the request a message answers and the message's
# payload; (None, None) when the client handled the message itself and its owner should look
# again at what it can send; None when the message changes nothing.
Answer = tuple[InFlightRequest | None, object] | None


class NetworkClient:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        brokers: list[str],
        config: ProducerConfig,
        metadata: ClientMetadata,
        rng: RandomStream,
        on_cancelled: Callable[[InFlightRequest, Errors, float], None],
        on_disconnected: Callable[[], None],
    ) -> None:
        """``on_cancelled(request, error, now)``: a request other than the client's own
        (ApiVersions, Metadata) was cancelled by a disconnection, with the error it fails
        with; ``on_disconnected()``: after a disconnection's cancellations."""
        self.env = env
        self.node = node
        self.network = network
        self.config = config
        self.metadata = metadata
        self.rng = rng
        self.on_cancelled = on_cancelled
        self.on_disconnected = on_disconnected
        # ClusterConnectionStates.reconnectBackoff and connectionSetupTimeout.
        self.reconnect_backoff = ExponentialBackoff(
            config.reconnect_backoff_ms, config.reconnect_backoff_max_ms
        )
        self.setup_timeout = ExponentialBackoff(
            config.socket_connection_setup_timeout_ms,
            config.socket_connection_setup_timeout_max_ms,
        )
        self.connections = {b: NodeConnection(b) for b in brokers}
        self.metadata_in_flight = False
        self._correlation = 0
        self.requests_sent = 0

    # -- sending -----------------------------------------------------------------------
    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def track(self, nc: NodeConnection, request: InFlightRequest) -> None:
        """``request`` is in flight on ``nc`` until answered, timed out or cancelled."""
        nc.in_flight.append(request)

    def deadline(self, now: float) -> float:
        """When a request sent now times out (``request.timeout.ms``)."""
        return now + self.config.request_timeout_ms

    def send(self, nc: NodeConnection, payload: object) -> None:
        """Send ``payload`` on ``nc``'s ready connection."""
        assert nc.conn is not None and nc.state is ConnectionState.READY
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, payload, nc.conn)

    # -- connection states -------------------------------------------------------------
    def can_send_to(self, nc: NodeConnection) -> bool:
        """NetworkClient.canSendRequest: ready, and room for one more request in flight."""
        return nc.state is ConnectionState.READY and len(nc.in_flight) < self.config.max_in_flight

    def can_connect(self, nc: NodeConnection, now: float) -> bool:
        """ClusterConnectionStates.canConnect: disconnected, the reconnect backoff over."""
        return nc.state is ConnectionState.DISCONNECTED and now >= nc.ready_at

    def reconnect_wait(self, nc: NodeConnection, now: float) -> float:
        """How long ``nc`` still backs off before a new connect may start (INF when it is
        not backing off: connected, being set up, or free to connect now)."""
        if nc.state is ConnectionState.DISCONNECTED and nc.ready_at > now:
            return nc.ready_at - now
        return INF

    def ready(self, nc: NodeConnection, now: float) -> bool:
        """NetworkClient.ready: whether a request can go to ``nc``'s broker now; if there
        is no connection and the backoff is over, one is started."""
        if self.can_send_to(nc):
            return True
        if self.can_connect(nc, now):
            self.initiate_connect(nc, now)
        return False

    def initiate_connect(self, nc: NodeConnection, now: float) -> None:
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
        cid = self.next_correlation_id()
        self.track(nc, InFlightRequest(cid, self.deadline(now), [], api_versions=True))
        self.requests_sent += 1
        self.network.send(self.node, nc.broker, ApiVersionsRequest(cid), nc.conn)

    def next_connection_delay(self, now: float) -> float:
        """The delay until the next request or connect times out, or a backoff ends."""
        delay = INF
        for nc in self.connections.values():
            if nc.in_flight:
                # Strictly after the deadline, so a delivery timeout due at the same
                # instant is handled first (see time_out_requests).
                delay = min(delay, nc.in_flight[0].deadline - now + MIN_SLEEP_MS)
            if nc.state is ConnectionState.CONNECTING:
                delay = min(delay, nc.connect_deadline - now + MIN_SLEEP_MS)
            delay = min(delay, self.reconnect_wait(nc, now))
        return delay

    def time_out_requests(self, now: float) -> None:
        """Close every connection whose oldest request, or whose connect, timed out."""
        for nc in self.connections.values():
            # NetworkClient times a request out once *more than* request.timeout.ms has
            # passed (its clock ticks in ms), while a batch expires as soon as
            # delivery.timeout.ms has: when both fall due together, expiry comes first.
            if nc.in_flight and nc.in_flight[0].deadline < now:
                self.disconnect(nc, now, Errors.REQUEST_TIMED_OUT)
            elif nc.state is ConnectionState.CONNECTING and nc.connect_deadline < now:
                # NetworkClient.handleTimedOutConnections.
                self.disconnect(nc, now, Errors.NETWORK_EXCEPTION)

    def disconnect(self, nc: NodeConnection, now: float, error: Errors) -> None:
        """Close ``nc``'s connection and cancel what was in flight on it: the first request
        fails with ``error`` (the one that timed out, say), the rest were cut off."""
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
                self.metadata_in_flight = False
                self.metadata.failed(now)  # DefaultMetadataUpdater.handleFailedRequest
                continue
            self.on_cancelled(request, error if i == 0 else Errors.NETWORK_EXCEPTION, now)
        # DefaultMetadataUpdater.handleServerDisconnect: a disconnection while an update is due
        # (and none in flight) counts as a failed update, so the next one backs off; and since
        # a disconnection may mean stale metadata (a timeout, or a broker closing the
        # connection after an acks=0 produce failed), an update is requested.
        if not self.metadata_in_flight and self.metadata.time_to_update(now) == 0:
            self.metadata.failed(now)
        self.metadata.request_update()
        self.on_disconnected()

    def least_loaded_node(self, now: float) -> NodeConnection | None:
        """NetworkClient.leastLoadedNode as DefaultMetadataUpdater.maybeUpdate uses it: the
        ready connection with the fewest requests in flight, scanning from a random broker.
        With none ready, a connection being set up is waited for; failing that, one is
        started to the broker whose last attempt is oldest. None while waiting."""
        brokers = list(self.connections.values())
        n = len(brokers)
        offset = int(self.rng.random() * n)
        ready: NodeConnection | None = None
        connecting: NodeConnection | None = None
        can_connect: NodeConnection | None = None
        for i in range(n):
            nc = brokers[(offset + i) % n]
            if self.can_send_to(nc):
                if not nc.in_flight:
                    return nc
                if ready is None or len(nc.in_flight) < len(ready.in_flight):
                    ready = nc
            elif nc.state in (ConnectionState.CONNECTING, ConnectionState.CHECKING_API_VERSIONS):
                connecting = nc
            elif self.can_connect(nc, now) and (
                can_connect is None or can_connect.last_attempt > nc.last_attempt
            ):
                can_connect = nc
        if ready is not None:
            return ready
        if connecting is None and can_connect is not None:
            self.initiate_connect(can_connect, now)
        return None

    def backoff_wait(self, now: float) -> float:
        """Every connection is backing off or full: wait for a backoff to end or a response."""
        return min((self.reconnect_wait(nc, now) for nc in self.connections.values()), default=INF)

    # -- metadata ----------------------------------------------------------------------
    def maybe_update_metadata(self, now: float) -> float:
        """DefaultMetadataUpdater.maybeUpdate: when an update is due and none is in flight,
        ask a broker that can take a request now; the delay until the next."""
        if self.metadata_in_flight:
            return INF
        wait = self.metadata.time_to_update(now)
        if wait > 0:
            return wait
        nc = self.least_loaded_node(now)
        if nc is None:
            return self.backoff_wait(now)
        self.metadata_in_flight = True
        cid = self.next_correlation_id()
        self.track(nc, InFlightRequest(cid, self.deadline(now), [], metadata=True))
        self.send(nc, MetadataRequest(cid))
        return INF

    # -- receiving ---------------------------------------------------------------------
    def receive(self, msg: Message, now: float) -> Answer:
        """A message from a broker: a disconnection, an accepted connect, or the answer to a
        request in flight, which leaves flight. ApiVersions and Metadata answers are the
        client's own; any other is handed back with its request (see :data:`Answer`)."""
        payload = msg.payload
        nc = self.connections.get(msg.src)
        if nc is None:
            return None
        if isinstance(payload, Disconnected):
            if nc.conn is not None and nc.generation == payload.generation:
                self.disconnect(nc, now, Errors.NETWORK_EXCEPTION)
                return None, None
            return None
        if msg.conn is not nc.conn:
            return None  # a response on a connection this client has already closed
        if isinstance(payload, TcpAccepted):
            if nc.state is ConnectionState.CONNECTING:
                self._connected(nc, now)
            return None
        request = next(
            (r for r in nc.in_flight if r.correlation_id == payload.correlation_id), None
        )
        if request is None:
            return None
        nc.in_flight.remove(request)
        if request.api_versions:
            if isinstance(payload, ApiVersionsResponse) and payload.error is Errors.NONE:
                # ClusterConnectionStates.ready: the connection is usable, and the
                # reconnect backoff starts again from reconnect.backoff.ms.
                nc.state = ConnectionState.READY
                nc.failures = 0
            else:
                self.disconnect(nc, now, Errors.NETWORK_EXCEPTION)
            return None, None
        if request.metadata:
            self.metadata_in_flight = False
            if isinstance(payload, MetadataResponse):
                self.metadata.update(payload.partitions, now)
            return None, None
        return request, payload

    def abandon(self) -> None:
        """The producer process died: forget every request in flight."""
        for nc in self.connections.values():
            nc.in_flight.clear()
