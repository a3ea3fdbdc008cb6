"""A broker's network side: Kafka's ``SocketServer`` (its ``Acceptor`` and ``Processor``:
accepting connections, reading requests, muting a connection while one of its requests is
handled, sending answers, closing a connection), the ``RequestChannel`` between them
(:mod:`eosim.simulation.request_channel`) and the one ``KafkaRequestHandler`` thread that
takes requests from it one at a time and hands them to :class:`KafkaApis`.

Requests are handled one at a time in arrival order, which, with FIFO links, keeps Kafka's
guarantee that a connection's requests are processed in the order they were sent. Each
handled request costs ``request_time_ms`` of simulated time. A handler may hold the request
it handles (:meth:`SocketServer.hold_current`): its answer is sent later and the connection
stays muted until then. Answers to the broker's own requests and the controller's metadata
are handled by threads of their own (:meth:`KafkaRequestHandler.own_thread`), not through the
request queue.

:class:`SocketServer` holds the connections and the request being handled;
:class:`KafkaRequestHandler` holds the handler loop. The broker (:mod:`eosim.simulation.
broker.broker`) builds both and routes what the network delivers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

import simpy

from eosim.simulation.broker.request_handler_pool import (
    BrokerThreads,
    InterBrokerThreads,
    TimedRequestChannel,
)
from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.protocol import (
    AddPartitionsToTxnBrokerResponse,
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    Disconnected,
    MetadataDelta,
    ReplicaFetchResponse,
    TcpAccepted,
    TcpConnect,
    WriteTxnMarkersResponse,
)
from eosim.simulation.request_channel import CallbackRequest, RequestChannel

if TYPE_CHECKING:
    from eosim.simulation.broker.replica_manager import ReplicaManager


class BrokerProcess(Protocol):
    """What the network side reads of its broker's process: whether it runs (``alive``), is
    stopped (``paused``), listens (``serving``: alive and, with a controller, RUNNING), and
    which process it is (``incarnation``, bumped by each restart)."""

    alive: bool
    paused: bool
    incarnation: int

    @property
    def serving(self) -> bool: ...


class RequestApis(Protocol):
    """What the request handler hands requests to (:class:`eosim.simulation.broker.kafka_apis.
    KafkaApis`): ``handle`` answers a request (None: no answer, or not yet); ``handlers``
    names the handler of each request type, the own threads' answers included;
    ``writes_log`` says whether handling an own thread's answer, which has just arrived, ends
    in a log append on that thread."""

    handlers: dict[type, Callable[[Any], object | None]]

    def handle(self, request: object) -> object | None: ...

    def writes_log(self, answer: object) -> bool: ...


class SocketServer:
    """One broker's connections and the request being handled (see the module docstring).
    :meth:`receive` reads what the network delivers; requests go to :attr:`requests`."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        network: Network,
        process: BrokerProcess,
        request_time_ms: float,
        threads: BrokerThreads | None = None,
    ) -> None:
        self.name = name
        self.network = network
        self.process = process
        # Without the resource model one request at a time at a fixed cost; with it, the
        # broker's threads on its host's cores (request_handler_pool).
        self.requests: RequestChannel | TimedRequestChannel = (
            RequestChannel(env, process, request_time_ms)
            if threads is None
            else TimedRequestChannel(env, process, threads)
        )
        # Connections with a request being handled (or held), and what waits behind it.
        self._muted: set[int] = set()
        self._stalled: dict[int, deque[Message]] = {}
        self._connections: dict[int, Connection] = {}
        # The request being handled, and whether its handler holds it (answers it later).
        self.current: Message
        self.held = False
        self.env = env
        # Between a crash and the kernel closing the dead process's sockets
        # (cluster.crash_reset): the timeout that closes them. Meanwhile the connections stay
        # open and take what is sent unanswered.
        self._linger: simpy.Event | None = None

    # -- arrival -----------------------------------------------------------------------
    def receive(self, msg: Message) -> bool:
        """Read ``msg``; True when it is for one of the broker's own threads (the caller hands
        it to :meth:`KafkaRequestHandler.own_thread`)."""
        kind = type(msg.payload)
        if kind is TcpConnect:
            self._accept(msg)
            return False
        process = self.process
        if self.lingering:
            # The process is dead but its sockets are not closed yet: the kernel takes the
            # bytes into the socket's buffer and nobody reads them. Reset at the close.
            if msg.conn is not None and msg.conn.broker == self.name:
                self._connections[id(msg.conn)] = msg.conn
            return False
        if not process.alive or (kind not in OUTBOUND_ANSWERS and not process.serving):
            # Connection refused (no process, or one that does not listen yet): the client
            # learns after one hop.
            if msg.conn is not None:
                msg.conn.destroy(self.env.now)
                self.notify_reset(msg.conn)
            return False
        if kind in OWN_THREADS:
            # Answers to this broker's own requests and the controller's metadata are handled
            # by threads of their own (fetchers, the lifecycle manager, the metadata loader),
            # not by the request handlers; a paused process handles them when it resumes.
            return True
        conn = msg.conn
        if conn is not None and conn.broker == self.name:
            if conn.dropped_by_server:
                return False  # its side is closed (a send failed): the bytes meet a reset
            self._connections[id(conn)] = conn
            key = id(conn)
            if key in self._muted:
                # SocketServer mutes a connection from the moment a request is read until its
                # response is sent: the next request waits, so a connection's requests are
                # handled, and answered, one at a time and in order.
                self._stalled.setdefault(key, deque()).append(msg)
                return False
            self._muted.add(key)
        self.requests.put(msg)
        return False

    def _accept(self, msg: Message) -> None:
        """The host's kernel answers a client's connect: accepted while a broker listens (its
        process may be paused), refused when none does (crashed, or not serving yet)."""
        conn = msg.conn
        if conn is None:
            return
        if self.lingering:
            # The dead process's listening socket is still open: the kernel completes the
            # handshake, and the connection is reset with the others.
            self._connections[id(conn)] = conn
            self.network.send(self.name, msg.src, TcpAccepted(self.name, conn.generation), conn)
            return
        if not self.process.serving:
            conn.destroy(self.env.now)
            self.notify_reset(conn)
            return
        self._connections[id(conn)] = conn
        self.network.send(self.name, msg.src, TcpAccepted(self.name, conn.generation), conn)

    def unmute(self, conn: Connection | None) -> None:
        if conn is None or conn.broker != self.name:
            return
        key = id(conn)
        stalled = self._stalled.get(key)
        if stalled:
            self.requests.put(stalled.popleft())  # stays muted for this one
            if not stalled:
                del self._stalled[key]
        else:
            self._muted.discard(key)

    # -- answers -------------------------------------------------------------------------
    def respond(self, msg: Message, response: object) -> None:
        """Send the answer to ``msg`` (handled earlier and held) and read the next request
        of its connection."""
        if not self.process.alive:
            return
        self.send_answer(msg, response)
        self.unmute(msg.conn)

    def send_answer(self, msg: Message, response: object) -> None:
        """Send the answer to ``msg`` on its connection; with ``in_flight_after_close:
        until_reset``, a connection whose client closed it and whose reset has come back
        fails the send instead (Kafka's ``Selector``: a closing channel is kept until a send
        fails), and the broker closes its side: the requests on it not handled yet are
        dropped, and those still arriving meet the closed socket."""
        conn = msg.conn
        if conn is not None and conn.broker == self.name and self.network.send_fails(conn):
            self._forget(conn)
            conn.dropped_by_server = True
            return
        self.network.send(self.name, msg.src, response, conn, internal=msg.internal)

    def reply_later(self) -> Callable[[object], None]:
        """A way to answer the request being handled once it is ready (a held request)."""
        msg = self.current
        process = self.process
        incarnation = process.incarnation

        def reply(response: object) -> None:
            if process.alive and process.incarnation == incarnation:
                self.respond(msg, response)

        return reply

    def send_callback(self, run: Callable[[], None]) -> None:
        """RequestChannel.sendCallbackRequest: hand ``run`` to the request handler threads
        (``put_callback``: before the requests that wait; with the resource model, on the
        next free handler thread); a crash drops it with them, a paused process takes it when
        it resumes."""
        self.requests.put_callback(
            Message(self.name, self.name, CallbackRequest(run), None, self.env.now, internal=True)
        )

    def hold_current(self) -> Callable[[object], None]:
        """Hold the request being handled (its answer comes later, through the returned
        function; the connection stays muted until then)."""
        self.held = True
        return self.reply_later()

    def close_connection(self, conn: Connection | None) -> None:
        """RequestChannel.closeConnection: the broker closes a client's connection. What the
        client sent on it that was not read yet is discarded, later sends on it are refused
        (a reset), and the client learns of the close after one hop."""
        if conn is None or conn.closed or not self.process.alive:
            return
        self._forget(conn)
        conn.close_by_server(self.env.now)
        self.notify_reset(conn)

    def _forget(self, conn: Connection) -> None:
        """The broker's side of ``conn`` is closed: what waited on it is discarded."""
        key = id(conn)
        self._stalled.pop(key, None)
        self._muted.discard(key)
        self._connections.pop(key, None)

    def notify_reset(self, conn: Connection) -> None:
        # Sent outside the (now closed) connection, so it is not dropped with it.
        self.network.send(
            self.name, conn.client, Disconnected(self.name, conn.generation, conn.number)
        )

    # -- the process ---------------------------------------------------------------------
    @property
    def lingering(self) -> bool:
        """Whether a dead process's sockets are still open (see :meth:`close_after`)."""
        return self._linger is not None

    def close_after(self, delay_ms: float) -> None:
        """The process died; its sockets close ``delay_ms`` later (the kernel's teardown).
        Queued requests are dropped now: nobody will read them."""
        self._drop_requests()
        linger = self._linger = self.env.timeout(delay_ms)
        # A restart closes them sooner (reset_lingering); this timeout then finds another.
        linger.callbacks.append(lambda ev: self.reset_lingering() if self._linger is ev else None)

    def reset_lingering(self) -> None:
        """Close the dead process's sockets now, if they still linger."""
        if self._linger is not None:
            self._linger = None
            self.reset()

    def _drop_requests(self) -> None:
        self.requests.clear()
        self._muted.clear()
        self._stalled.clear()

    def reset(self) -> None:
        """The process died: queued requests are dropped and every open connection is reset
        (clients are told after one network hop, as a TCP reset would tell them)."""
        self._drop_requests()
        for conn in self._connections.values():
            was_open = not conn.closed
            conn.destroy(self.env.now)
            if was_open:
                self.notify_reset(conn)
        self._connections.clear()

    def kick(self) -> None:
        """Wake the request handler: the process may have become able to handle requests."""
        self.requests.kick()


class KafkaRequestHandler:
    """The broker's request handler thread: takes requests from the socket server's queue one
    at a time, hands each to ``apis`` and sends the answer (or leaves the request held); and
    the broker's own threads, which handle answers to its own requests as they arrive."""

    def __init__(
        self,
        env: simpy.Environment,
        process: BrokerProcess,
        server: SocketServer,
        apis: RequestApis,
        replica_manager: ReplicaManager,
        threads: BrokerThreads | None = None,
    ) -> None:
        self.process = process
        self.server = server
        self.apis = apis
        self.replica_manager = replica_manager
        self.requests_handled = 0
        self._own: deque[Message] = deque()
        # With the resource model, answers to the broker's own requests are processed by the
        # threads that sent them (replica fetchers, InterBrokerSendThreads), at a cost, before
        # they are handled; one processed while the process was paused waits in _processed for
        # its resume.
        self._processed: deque[Message] = deque()
        self.inter_broker = (
            None
            if threads is None
            else InterBrokerThreads(
                env,
                process,
                threads,
                self._handle_own,
                self._processed.append,
                lambda msg: apis.writes_log(msg.payload),
            )
        )
        env.process(self._run())

    def _run(self) -> Generator[simpy.Event, Any, None]:
        server = self.server
        requests = server.requests
        process = self.process
        rm = self.replica_manager
        while True:
            msg = yield from requests.take()
            self.requests_handled += 1
            server.current = msg
            server.held = False
            response = self.apis.handle(msg.payload)
            if not process.alive:
                continue
            # KafkaApis.handle ends with ReplicaManager.tryCompleteActions: the checks that
            # appends queued (this request's, and those other threads made since the last
            # request) run now.
            rm.complete_actions()
            if response is not None:
                server.send_answer(msg, response)
                server.unmute(msg.conn)
            elif not server.held:
                server.unmute(msg.conn)  # no answer at all (acks=0)

    def own_thread(self, msg: Message) -> None:
        """An answer to one of the broker's own requests, or the controller's metadata: handled
        now, or when the paused process resumes (with the resource model, an answer first goes
        to the thread that sent the request: :class:`InterBrokerThreads`)."""
        threads = self.inter_broker
        if threads is not None and not self.process.paused and threads.accept(msg):
            return
        self._own.append(msg)
        if not self.process.paused:
            self.handle_own_threads()

    def handle_own_threads(self) -> None:
        """Handle what the broker's own threads have waiting (they stop with the process)."""
        process = self.process
        threads = self.inter_broker
        while self._processed and process.alive and not process.paused:
            self._handle_own(self._processed.popleft())
        while self._own and process.alive and not process.paused:
            msg = self._own.popleft()
            if threads is not None and threads.accept(msg):
                continue
            self._handle_own(msg)

    def _handle_own(self, msg: Message) -> None:
        self.server.current = msg
        self.apis.handlers[type(msg.payload)](msg.payload)

    def clear(self) -> None:
        """The process died: what its own threads had waiting is gone."""
        self._own.clear()
        self._processed.clear()


OWN_THREADS = frozenset(
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
        # AddPartitionsToTxnManager's sender thread (an InterBrokerSendThread) handles the
        # coordinators' answers to the broker's AddPartitionsToTxn.
        AddPartitionsToTxnBrokerResponse,
    }
)
# What reaches a broker on connections it opened itself (to leaders, the controller, the
# partitions its coordinators write markers to): accepted even before the broker listens.
OUTBOUND_ANSWERS = OWN_THREADS
