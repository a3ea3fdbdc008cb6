"""The network: latency, loss, delay spikes and partitions between named nodes.

Every message travels on a directed link ``src -> dst`` and arrives after a latency drawn from
the scenario's distribution. A link is FIFO, like the TCP connection it stands for: a message
never overtakes an earlier one on the same link.

Loss follows TCP by default (``loss_model: connection``). On a real connection a message is
never lost alone: the connection stops delivering, and the client notices only when
``request.timeout.ms`` expires and it reconnects. So a loss draw *black-holes* the connection:
that message and every later one on the same connection, in both directions, disappear. A
lost request means the broker never saw it. A lost response means the write happened but its
acknowledgement did not arrive, which is the classic source of duplicates.
A black-holed connection is reset by TCP itself after ``dead_connection_reset_ms``.
That matters for ``acks=0``, which has no request timeout to notice a dead connection.
``loss_model: message`` drops single messages independently instead. That is a departure from
TCP, kept for comparison.

A client that gives up on a connection (a request timeout) closes it, but bytes it has already
sent still reach the broker ahead of its FIN, and the broker handles those requests; only the
responses are lost. So a request can be written long after its client stopped waiting for it.
Kafka's broker handles them only until a send fails (``in_flight_after_close: until_reset``,
the default): its ``Selector`` keeps a connection the client closed until then, handling its
requests one at a time; the first answer that reaches the closed socket brings a reset back
(:attr:`Connection.reset_back_at`), and the broker's first answer after the reset arrives is not
sent and closes its side, dropping the requests it had not handled yet
(:meth:`Network.send_fails`). ``deliver`` handles every one (the default until 2026-12-01, an
upper bound on the duplicates), ``drop`` none, idealisations kept for comparison. A broker
crash destroys its side of every connection (at once, or after ``cluster.crash_reset``): what
clients send on one no longer arrives, but what the broker had sent before is on the wire,
ahead of the reset, and still does. A broker that closes a client's connection (after a
failed ``acks=0`` produce) destroys its side the same way, and each later message the client
sends on it is answered with a reset, as TCP answers data sent to a closed socket.

Packet loss (``packet_loss``, a probability per message, 0 by default) is the loss TCP repairs:
a lost message is retransmitted, so it is neither dropped nor does it stall its connection; it
arrives late. Each transmission is lost with ``packet_loss``; the first retransmission goes
``retransmission_timeout_ms`` after the send and each further one waits twice as long as the
one before (RFC 6298's exponential back-off, capped at Linux's ``TCP_RTO_MAX``, 120 s). Later
messages on the same connection wait behind it (head-of-line blocking). A message whose
original transmission and all ``MAX_RETRANSMISSIONS`` retransmissions are lost is TCP giving
up (Linux's ``tcp_retries2``): the connection is dead from then on, as under connection loss,
and its client sees a reset when the last timeout expires.

A client may open a connection with :class:`TcpConnect` (the producer's Sender does, as
Kafka's NetworkClient does). The broker's host answers it, not the broker process: it is
accepted while the broker listens, even while its process is paused (the kernel completes
the handshake; the process reads nothing until it resumes), and refused with a reset when
no process listens. A connect across a cut is held like any message, so the client's
connection setup timeout decides.

A partition cuts chosen groups of nodes apart. Messages sent across the cut are held, as TCP
retransmission would hold them, and delivered when the cut heals unless their connection is
gone by then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import simpy

from eosim.simulation.protocol import Disconnected, TcpConnect
from eosim.simulation.rng import RandomStream

Handler = Callable[["Message"], None]

# Linux's include/net/tcp.h: the retransmission timeout never exceeds TCP_RTO_MAX (120 s), and
# net.ipv4.tcp_retries2 (default 15) retransmissions without an acknowledgement end the
# connection.
TCP_RTO_MAX_MS = 120_000.0
MAX_RETRANSMISSIONS = 15


@dataclass(frozen=True, slots=True)
class LatencyModel:
    distribution: Literal["constant", "uniform", "exponential", "lognormal"] = "lognormal"
    # constant: value; uniform: [low, high]; exponential: mean; lognormal: median, sigma
    value_ms: float = 1.0
    low_ms: float = 0.5
    high_ms: float = 1.5
    mean_ms: float = 1.0
    median_ms: float = 0.25
    sigma: float = 0.9

    def sample(self, rng: RandomStream) -> float:
        d = self.distribution
        if d == "lognormal":
            return rng.lognormal(self.median_ms, self.sigma)
        if d == "constant":
            return self.value_ms
        if d == "uniform":
            return rng.uniform(self.low_ms, self.high_ms)
        return rng.exponential(self.mean_ms)


@dataclass(frozen=True, slots=True)
class NetworkSettings:
    latency: LatencyModel = field(default_factory=LatencyModel)
    request_loss: float = 0.0
    response_loss: float = 0.0
    loss_model: Literal["connection", "message"] = "connection"
    # A black-holed connection is eventually reset by TCP (retransmission timeout or
    # keepalive); until then only the client's request timeout can notice it.
    dead_connection_reset_ms: float = 30_000.0
    # What becomes of requests already sent on a connection the client then closes.
    in_flight_after_close: Literal["deliver", "until_reset", "drop"] = "until_reset"
    # The chance that one transmission of a message is lost and TCP retransmits it, and the
    # first retransmission timeout (Linux: about the round trip plus its 200 ms minimum).
    packet_loss: float = 0.0
    retransmission_timeout_ms: float = 200.0


@dataclass(slots=True, eq=False)
class Connection:
    """One client-to-broker connection. A reconnect creates a new one."""

    client: str
    broker: str
    generation: int
    closed: bool = False
    blackholed: bool = False
    # Closed by the client, whose requests already sent still arrive (see the module doc).
    client_closed: bool = False
    # Unique in the run, unlike ``generation``, which a restarted client counts from 1 again.
    number: int = 0
    # Closed by the broker, whose host answers what the client still sends with a reset.
    refused: bool = False
    # When the broker's side went while the client's was open (None: it did not): what the
    # broker sent before then is on the wire, ahead of the reset, and still arrives.
    server_gone_at: float | None = None
    # ``in_flight_after_close: until_reset``: when the reset that the client's host sent back
    # for the first answer reaching its closed socket arrives at the broker (None: none yet);
    # and whether the broker has closed its side since (a send failed).
    reset_back_at: float | None = None
    dropped_by_server: bool = False

    def close(self) -> None:
        """The client closes the connection."""
        if not self.closed:
            self.closed = True
            self.client_closed = True

    def destroy(self, now: float) -> None:
        """The broker's side is gone at ``now`` (it crashed or refused): nothing the client
        sends arrives any more; what the broker sent before ``now`` still does."""
        if not self.closed:
            self.server_gone_at = now
        self.closed = True
        self.client_closed = False

    def close_by_server(self, now: float) -> None:
        """The broker closed it (``RequestChannel.closeConnection``): nothing more arrives
        but what it sent before, and each later message of the client's on it is answered
        with a reset."""
        self.destroy(now)
        self.refused = True


@dataclass(slots=True)
class Message:
    src: str
    dst: str
    payload: Any
    conn: Connection | None
    sent_at: float
    msg_id: int = 0
    # Broker-to-broker and controller traffic: its own random streams, and no ambient loss.
    internal: bool = False
    # How much later than its latency it arrives, waiting for TCP retransmissions.
    retransmission_delay: float = 0.0


@dataclass(slots=True, eq=False)
class _Window:
    """An active fault on the network: a cut, a delay spike or a loss burst."""

    nodes: frozenset[str]
    groups: tuple[frozenset[str], ...] = ()
    extra_ms: float = 0.0
    loss: float = 0.0
    links: frozenset[tuple[str, str]] = frozenset()

    def touches(self, src: str, dst: str) -> bool:
        if self.links:
            return (src, dst) in self.links
        return not self.nodes or src in self.nodes or dst in self.nodes

    def separates(self, src: str, dst: str) -> bool:
        # Nodes named in no group form one more side of their own: "the rest".
        rest = len(self.groups)
        a = next((i for i, g in enumerate(self.groups) if src in g), rest)
        b = next((i for i, g in enumerate(self.groups) if dst in g), rest)
        return a != b


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One thing that happened to a message (only recorded when tracing is on).

    ``event`` is ``send``, ``deliver``, ``lost`` (a loss draw), ``dropped`` (its connection
    was already dead or closed) or ``held`` (behind a partition).
    """

    time: float
    event: str
    msg_id: int
    src: str
    dst: str
    payload: Any
    generation: int | None
    connection: int | None = None  # the connection's ``number``


class Network:
    """Links between nodes. ``rng`` draws latencies, ``loss_rng`` draws losses. Keeping them
    apart means that removing losses (as the shrinker does) leaves every latency unchanged."""

    def __init__(
        self,
        env: simpy.Environment,
        settings: NetworkSettings,
        rng: RandomStream,
        loss_rng: RandomStream | None = None,
        internal_rng: RandomStream | None = None,
        internal_loss_rng: RandomStream | None = None,
        packet_loss_rng: RandomStream | None = None,
        internal_packet_loss_rng: RandomStream | None = None,
    ) -> None:
        self.env = env
        self.settings = settings
        self.rng = rng
        self.loss_rng = loss_rng or rng
        # Cluster-internal messages (replication, heartbeats, metadata) draw from streams of
        # their own, so that adding replication leaves every client message's draws as they
        # were.
        self.internal_rng = internal_rng or rng
        self.internal_loss_rng = internal_loss_rng or self.loss_rng
        # Packet-loss draws have streams of their own, so turning packet loss on leaves every
        # other draw (latencies, connection losses) where it was.
        self.packet_loss_rng = packet_loss_rng or self.loss_rng
        self.internal_packet_loss_rng = internal_packet_loss_rng or self.packet_loss_rng
        self.trace: list[TraceEvent] | None = None
        # The resource model: what a message costs its sender, and what an answer costs the
        # client it reaches, by application (a node's host; None: nobody pays anything, the
        # unbounded model).
        self.loads: dict[str, Callable[[float, Any], float]] | None = None
        self.receive_loads: dict[str, Callable[[float, Any], float]] | None = None
        # What an answer costs the client's application after it has been handed over (its
        # work on the records a poll returned), booked once the handler has the message.
        self.after_poll_loads: dict[str, Callable[[float, Any], float]] | None = None
        # What an answer costs a producer's Sender as it arrives (the time returned keeps the
        # Sender busy, through sender_busy, and the answer unread meanwhile).
        self.answer_loads: dict[str, Callable[[float, Any], float]] | None = None
        # What each record a client's application hands its producer costs its host (the
        # resource model; read by the producer once, when it binds its send).
        self.record_loads: dict[str, Callable[[float], None]] | None = None
        # Each producer's Sender, told how long a request it sent keeps it busy (by node).
        self.sender_busy: dict[str, Callable[[float], None]] = {}
        self._handlers: dict[str, Handler] = {}
        self._host: dict[str, str] = {}
        self._paused: dict[str, list[Message]] = {}
        # Held messages whose cost the resource model already charged (their msg_id).
        self._read_held: set[int] = set()
        self._is_client: dict[str, bool] = {}
        self._last_arrival: dict[tuple[str, str], float] = {}
        # With packet loss: when the last message on each direction of each connection (a
        # link, for messages without one) arrives, so later ones wait behind a retransmission.
        self._in_order: dict[object, float] = {}
        self._held: dict[tuple[str, str], deque[Message]] = {}
        self._cuts: list[_Window] = []
        self._spikes: list[_Window] = []
        self.messages_sent = 0
        self.messages_lost = 0
        self.retransmissions = 0
        self.connections_opened = 0

    # -- topology ----------------------------------------------------------------------
    def register(
        self, node: str, handler: Handler, *, client: bool, host: str | None = None
    ) -> None:
        """Attach ``node``. ``host`` names the machine it runs on when that differs (an
        application's consumer runs beside its producer): faults aimed at the host hit it."""
        self._handlers[node] = handler
        self._is_client[node] = client
        if host is not None and host != node:
            self._host[node] = host

    def host(self, node: str) -> str:
        return self._host.get(node, node)

    def connect(self, client: str, broker: str, generation: int) -> Connection:
        self.connections_opened += 1
        return Connection(client, broker, generation, number=self.connections_opened)

    # -- sending -----------------------------------------------------------------------
    def send(
        self,
        src: str,
        dst: str,
        payload: Any,
        conn: Connection | None = None,
        *,
        request: bool | None = None,
        internal: bool = False,
    ) -> None:
        """Send ``payload``. ``request`` says which loss probability applies; by default a
        client's messages are requests and a broker's are responses. ``internal`` marks
        cluster-internal traffic (replication, the controller's): it is not subject to the
        scenario's ambient ``request_loss``/``response_loss``, which describe client
        connections, only to faults (cuts, delay and loss windows, crashes)."""
        self.messages_sent += 1
        if self.loads is not None and (load := self.loads.get(self.host(src))) is not None:
            # The sender's CPU (the resource model), which keeps its Sender thread busy.
            busy = load(self.env.now, payload)
            if busy > 0.0 and (hook := self.sender_busy.get(src)) is not None:
                hook(busy)
        msg = Message(src, dst, payload, conn, self.env.now, self.messages_sent, internal)
        trace = self.trace
        if trace is not None:
            self._record("send", msg)
        if conn is not None and (conn.closed or conn.blackholed):
            self.messages_lost += 1
            if trace is not None:
                self._record("dropped", msg)
            self._reset_back(msg, hops=2)  # if it goes out to a socket its client closed
            if conn.refused and src == conn.client and not conn.blackholed:
                # The client wrote to a socket its broker closed: TCP answers with a reset.
                self.send(dst, src, Disconnected(dst, conn.generation, conn.number))
            return
        if self._lost(src, dst, request, internal):
            self.messages_lost += 1
            if trace is not None:
                self._record("lost", msg)
            if conn is not None and self.settings.loss_model == "connection":
                self._blackhole(conn)
            return
        if self.settings.packet_loss > 0.0 and not self._retransmitted(msg):
            return
        if self._cuts and any(c.separates(self.host(src), self.host(dst)) for c in self._cuts):
            if trace is not None:
                self._record("held", msg)
            self._held.setdefault((src, dst), deque()).append(msg)
            return
        self._schedule(msg)

    def _record(self, event: str, msg: Message) -> None:
        assert self.trace is not None
        conn = msg.conn
        self.trace.append(
            TraceEvent(
                self.env.now,
                event,
                msg.msg_id,
                msg.src,
                msg.dst,
                msg.payload,
                None if conn is None else conn.generation,
                None if conn is None else conn.number,
            )
        )

    def _lost(
        self, src: str, dst: str, request: bool | None = None, internal: bool = False
    ) -> bool:
        s = self.settings
        if internal:
            p = 0.0
        else:
            if request is None:
                request = self._is_client.get(src, False)
            p = s.request_loss if request else s.response_loss
        for w in self._spikes:
            if w.loss and w.touches(self.host(src), self.host(dst)):
                p = 1.0 - (1.0 - p) * (1.0 - w.loss)
        if p <= 0.0:
            return False
        rng = self.internal_loss_rng if internal else self.loss_rng
        return rng.random() < p

    def _retransmitted(self, msg: Message) -> bool:
        """Draw how often TCP must retransmit ``msg`` and set its delay; False if TCP gives up
        on its connection (every transmission lost): the message and connection are dead."""
        s = self.settings
        rng = self.internal_packet_loss_rng if msg.internal else self.packet_loss_rng
        rto = s.retransmission_timeout_ms
        delay = 0.0
        for _ in range(MAX_RETRANSMISSIONS + 1):
            if rng.random() >= s.packet_loss:
                msg.retransmission_delay = delay
                return True
            delay += min(rto, TCP_RTO_MAX_MS)
            rto *= 2.0
            self.retransmissions += 1
        self.retransmissions -= 1  # the last loss is not followed by a retransmission
        self.messages_lost += 1
        if self.trace is not None:
            self._record("lost", msg)
        if msg.conn is not None:
            self._blackhole(msg.conn, delay)
        return False

    def _blackhole(self, conn: Connection, reset_after: float | None = None) -> None:
        conn.blackholed = True
        if reset_after is None:
            reset_after = self.settings.dead_connection_reset_ms
        ev = self.env.timeout(reset_after)
        ev.callbacks.append(lambda _ev: self._reset(conn))

    def _reset(self, conn: Connection) -> None:
        """TCP gives up on a dead connection: the client sees a reset."""
        if conn.closed:
            return
        conn.closed = True
        handler = self._handlers.get(conn.client)
        if handler is not None:
            msg = Message(
                conn.broker,
                conn.client,
                Disconnected(conn.broker, conn.generation, conn.number),
                None,
                self.env.now,
            )
            handler(msg)

    def _schedule(self, msg: Message) -> None:
        delay = self.settings.latency.sample(self.internal_rng if msg.internal else self.rng)
        for w in self._spikes:
            if w.extra_ms and w.touches(self.host(msg.src), self.host(msg.dst)):
                delay += w.extra_ms
        link = (msg.src, msg.dst)
        now = self.env.now
        arrival = max(now + delay, self._last_arrival.get(link, 0.0))
        self._last_arrival[link] = arrival
        if self.settings.packet_loss > 0.0:
            # A retransmission holds back what follows it on its own connection only.
            key = link if msg.conn is None else (msg.conn, msg.src)
            arrival = max(arrival + msg.retransmission_delay, self._in_order.get(key, 0.0))
            self._in_order[key] = arrival
        ev = self.env.timeout(arrival - now)
        ev.callbacks.append(lambda _ev, m=msg: self._deliver(m))

    def _deliver(self, msg: Message) -> None:
        conn = msg.conn
        if conn is not None and (conn.blackholed or (conn.closed and not self._outlives(msg))):
            self._reset_back(msg)
            self.messages_lost += 1
            if self.trace is not None:
                self._record("dropped", msg)
            return
        if self.trace is not None:
            self._record("deliver", msg)
        if msg.dst in self._paused and not isinstance(msg.payload, TcpConnect):
            # A frozen process reads nothing, but its host's kernel still accepts connections.
            self._paused[msg.dst].append(msg)
            return
        if self._reads_cost():
            self._read(msg)
            return
        self._hand_over(msg)

    def _reads_cost(self) -> bool:
        """Whether reading a message costs its process anything (the resource model's client
        loads); without them a message is handed over as it arrives."""
        return (
            self.receive_loads is not None
            or self.after_poll_loads is not None
            or self.answer_loads is not None
        )

    def _read(self, msg: Message) -> None:
        """The resource model: what ``msg`` costs the process it reaches (its CPU, and the
        collections it may set off) is spent before the process sees it. A cost that
        freezes the process holds the message until the freeze ends; so does one that keeps
        a producer's Sender busy (``answer_loads``)."""
        host = self.host(msg.dst)
        if self.receive_loads is not None and (load := self.receive_loads.get(host)) is not None:
            load(self.env.now, msg.payload)
        if (
            self.answer_loads is not None
            and (hook := self.sender_busy.get(msg.dst)) is not None
            and (load := self.answer_loads.get(host)) is not None
        ):
            busy = load(self.env.now, msg.payload)
            if busy > 0.0:
                hook(busy)
        if msg.dst in self._paused:
            self._paused[msg.dst].append(msg)
            self._read_held.add(msg.msg_id)
            return
        self._hand_over_read(msg)

    def _hand_over_read(self, msg: Message) -> None:
        """Hand a read message over, then book the application's work on it after its
        poll returned (``after_poll_loads``): a cost that freezes the process holds what
        arrives next, the message itself is already the application's."""
        self._hand_over(msg)
        if (
            self.after_poll_loads is not None
            and (load := self.after_poll_loads.get(self.host(msg.dst))) is not None
        ):
            load(self.env.now, msg.payload)

    def _hand_over(self, msg: Message) -> None:
        handler = self._handlers.get(msg.dst)
        if handler is None:
            return
        handler(msg)

    def _outlives(self, msg: Message) -> bool:
        """A request sent before its client closed the connection still arrives; so does
        what a broker sent before its side went (a crash, a refusal, a close): the bytes
        are on the wire ahead of the reset or the close."""
        conn = msg.conn
        assert conn is not None
        if msg.src == conn.broker:
            gone = conn.server_gone_at
            return gone is not None and msg.sent_at <= gone
        return (
            conn.client_closed
            and msg.src == conn.client
            and self.settings.in_flight_after_close != "drop"
        )

    def send_fails(self, conn: Connection) -> bool:
        """``in_flight_after_close: until_reset``: whether a broker's send on ``conn`` fails
        now, because its client closed it and the reset its host sent back has arrived."""
        at = conn.reset_back_at
        return at is not None and conn.client_closed and self.env.now >= at

    def _reset_back(self, msg: Message, hops: int = 1) -> None:
        """With ``until_reset``, a broker's ``msg`` that is not delivered because its client
        closed the connection still reaches that socket ``hops - 1`` hops from now (unless
        the connection is black-holed): the client's host answers with a reset, which
        reaches the broker one hop after that (the first such answer's only)."""
        conn = msg.conn
        assert conn is not None
        if (
            conn.reset_back_at is None
            and conn.client_closed
            and not conn.blackholed
            and msg.src == conn.broker
            and self.settings.in_flight_after_close == "until_reset"
        ):
            delay = sum(self.settings.latency.sample(self.internal_rng) for _ in range(hops))
            conn.reset_back_at = self.env.now + delay

    def forget_node(self, node: str) -> None:
        """The node's process died: what waited for it in its socket is gone with it, and
        the node is no longer paused (a process a restart builds on it reads from then)."""
        for msg in self._paused.pop(node, []):
            self._read_held.discard(msg.msg_id)

    def pause_node(self, node: str) -> None:
        """The node's process is frozen (a GC pause): what arrives waits in its socket."""
        self._paused.setdefault(node, [])

    def resume_node(self, node: str) -> None:
        """The node's process runs again and reads what waited for it, in arrival order.
        With the resource model each message's cost is spent as it is read (once: a message
        held by its own cost is not charged again), and a cost that freezes the process
        again holds the rest."""
        held = self._paused.pop(node, [])
        if not self._reads_cost():
            for msg in held:
                self._hand_over(msg)
            return
        for i, msg in enumerate(held):
            if node in self._paused:  # frozen again by what it just read
                self._paused[node].extend(held[i:])
                return
            if msg.msg_id in self._read_held:
                self._read_held.discard(msg.msg_id)
                self._hand_over_read(msg)
            else:
                self._read(msg)

    # -- faults ------------------------------------------------------------------------
    def start_partition(self, groups: Iterable[Iterable[str]]) -> object:
        cut = _Window(frozenset(), groups=tuple(frozenset(g) for g in groups))
        self._cuts.append(cut)
        return cut

    def start_spike(
        self,
        nodes: Iterable[str],
        extra_ms: float = 0.0,
        loss: float = 0.0,
        links: Iterable[tuple[str, str]] = (),
    ) -> object:
        """Extra latency and/or loss on links touching ``nodes`` (or exactly ``links``)."""
        spike = _Window(frozenset(nodes), extra_ms=extra_ms, loss=loss, links=frozenset(links))
        self._spikes.append(spike)
        return spike

    def stop(self, window: object) -> None:
        if window in self._cuts:
            self._cuts.remove(window)  # type: ignore[arg-type]
            self._release_held()
        elif window in self._spikes:
            self._spikes.remove(window)  # type: ignore[arg-type]

    def _release_held(self) -> None:
        for link in list(self._held):
            queue = self._held[link]
            src, dst = link
            if any(c.separates(self.host(src), self.host(dst)) for c in self._cuts):
                continue
            del self._held[link]
            for msg in queue:
                self._schedule(msg)
