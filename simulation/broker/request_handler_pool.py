"""A broker's threads on its host's cores: the resource model's request path
(``cluster.resources``; without it a broker takes requests one at a time at a fixed cost,
:class:`eosim.simulation.request_channel.RequestChannel`).

Kafka's request path (``SocketServer``, ``RequestChannel``, ``KafkaRequestHandlerPool``):

1. one of ``num.network.threads`` network threads (``SocketServer.Processor``; a connection
   stays on one, chosen when it is accepted) reads the request: :attr:`ServiceTimes.network`;
2. it waits in the request queue (``queued.max.requests``: when that many wait, the network
   threads stop reading until one is taken);
3. one of ``num.io.threads`` request handler threads handles it: its kind's cost
   (:attr:`ServiceTimes.produce` per record appended, :attr:`ServiceTimes.fetch`,
   :attr:`ServiceTimes.replica_fetch`, :attr:`ServiceTimes.transaction`,
   :attr:`ServiceTimes.other`);

each step holding a thread and a core of the broker's host (:class:`eosim.simulation.host.
Host`), stretched by the broker JVM's pauses (:meth:`eosim.simulation.host.Jvm.finish`). The answer
is written by the network thread at once (its cost is counted with the read). Answers to the
broker's own requests are processed by the threads that sent them (:class:`InterBrokerThreads`):
its replica fetcher threads (``num.replica.fetchers`` per source broker,
``ReplicaFetcherThread``) spend :attr:`ServiceTimes.replica_append` per record, the follower's
append, before the next fetch goes out; two ``InterBrokerSendThread`` threads, the transaction
coordinator's marker sender (``TransactionMarkerChannelManager``) and the leader's
``AddPartitionsToTxnManager``, spend :attr:`ServiceTimes.network` reading each answer, and the
marker sender :attr:`ServiceTimes.transaction` more for the transaction log write that follows
the last marker (CompleteCommit/CompleteAbort, ``TransactionMarkerChannelManager.
tryAppendToLog``), which Kafka appends on that thread, on the answer that completes the
transaction only (the broker says which: ``writes_log``).

Each request's end is computed when it is read (a calendar, :meth:`Host.book`): one
simulation event per request, as without the resource model. :class:`TimedRequestChannel`
hands requests to the broker's handler loop in the order they end.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

import simpy

from eosim.simulation.config import kafka_default
from eosim.simulation.host import Jvm, StartupSettings
from eosim.simulation.network import Message
from eosim.simulation.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBrokerRequest,
    AddPartitionsToTxnBrokerResponse,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from eosim.simulation.request_channel import CallbackRequest


@dataclass(frozen=True, slots=True)
class Cost:
    """Warm CPU milliseconds of one piece of work: a fixed part and a part per record; and what
    it allocates, in MB (a fixed part and a part per record)."""

    fixed_ms: float = 0.0
    per_record_ms: float = 0.0
    alloc_mb: float = 0.0
    alloc_per_record_mb: float = 0.0

    def ms(self, records: int) -> float:
        return self.fixed_ms + self.per_record_ms * records

    def mb(self, records: int) -> float:
        return self.alloc_mb + self.alloc_per_record_mb * records


@dataclass(frozen=True, slots=True)
class ServiceTimes:
    """What each kind of work costs a broker (warm), and an application per request it sends
    (``client_send``: per record a produce carries) and per answer it receives
    (``client_receive``: per record a fetch brings, before the application sees the records;
    ``client_after_poll``: the application's work on them once its poll returned them)."""

    network: Cost = field(default_factory=Cost)
    produce: Cost = field(default_factory=Cost)
    fetch: Cost = field(default_factory=Cost)
    replica_fetch: Cost = field(default_factory=Cost)
    replica_append: Cost = field(default_factory=Cost)
    other: Cost = field(default_factory=Cost)
    transaction: Cost = field(default_factory=Cost)
    client_send: Cost = field(default_factory=Cost)
    client_receive: Cost = field(default_factory=Cost)
    client_after_poll: Cost = field(default_factory=Cost)
    # The part of client_send's fixed cost spent on a produce answer when it arrives.
    client_answer: Cost = field(default_factory=Cost)
    # A leader completing a held fetch (reading the log for it) on a handler thread.
    fetch_complete: Cost = field(default_factory=Cost)


@dataclass(frozen=True, slots=True)
class ThreadSettings:
    """Kafka's broker configs for its threads (their defaults are Kafka's)."""

    network_threads: int = kafka_default("num.network.threads")
    io_threads: int = kafka_default("num.io.threads")
    queued_max_requests: int = kafka_default("queued.max.requests")
    replica_fetchers: int = kafka_default("num.replica.fetchers")


def records_of(payload: object) -> int:
    """The records a request carries (a produce) or an answer brings (a follower's or a
    consumer's fetch)."""
    kind = type(payload)
    if kind is ProduceRequest:
        return sum(len(batch.values) for _tp, batch in payload.partitions)  # type: ignore[attr-defined]
    if kind is ReplicaFetchResponse or kind is FetchResponse:
        return sum(
            len(b.values)
            for _tp, data in payload.partitions  # type: ignore[attr-defined]
            for b in data.batches
        )
    return 0


# What costs a handler thread :attr:`ServiceTimes.transaction`: the transaction coordinator's
# requests, the markers a leader appends, and the append of a transactional produce that waited
# for its partition's add (a callback request: the first handling paid the produce's cost).
TRANSACTIONAL_REQUESTS = frozenset(
    {
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnBrokerRequest,
        AddOffsetsToTxnRequest,
        EndTxnRequest,
        TxnOffsetCommitRequest,
        WriteTxnMarkersRequest,
        CallbackRequest,
    }
)


class BrokerProcess(Protocol):
    alive: bool
    paused: bool
    incarnation: int


class BrokerThreads:
    """One broker's network, request handler and replica fetcher threads, on its
    :class:`Jvm`."""

    def __init__(
        self,
        env: simpy.Environment,
        jvm: Jvm,
        service: ServiceTimes,
        threads: ThreadSettings,
        startup: StartupSettings | None = None,
    ) -> None:
        self.env = env
        self.jvm = jvm
        self.service = service
        self.threads = threads
        self.startup = startup if startup is not None else StartupSettings()
        self._network = [0.0] * threads.network_threads
        self._io = [0.0] * threads.io_threads  # a heap
        # When each of the broker's own threads (a fetcher per source broker, a sender by
        # name) is free again.
        self._own_free: dict[tuple[str, str], float] = {}
        self._processor_of: dict[int, int] = {}
        self._next_processor = itertools.count()
        # For a trace (benchmarks/replication_path.py): when each request's read by its
        # network thread ends, by message id, as Kafka stamps a request's arrival
        # (RequestChannel.Request.startTimeNanos); None: not recorded.
        self.read_ends: dict[int, float] | None = None

    def start_work(self, publish: bool, alive: Callable[[], bool]) -> simpy.Event | None:
        """The CPU of a new process's start on its host (:class:`~eosim.simulation.broker.
        lifecycle.StartupWork`): up to its registration, or (``publish``) its first metadata
        publish; None when the start is not CPU work (``resources.startup.cpu_ms`` 0)."""
        s = self.startup
        if s.cpu_ms <= 0.0:
            return None
        cpu = s.publish_cpu_ms if publish else s.cpu_ms
        return self.jvm.run(self.env, cpu, s.threads, s.slice_ms, alive)

    def reset(self) -> None:
        """A new process: its threads free, its connections gone."""
        self._network = [0.0] * self.threads.network_threads
        self._io = [0.0] * self.threads.io_threads
        self._own_free.clear()
        self._processor_of.clear()

    def _processor(self, msg: Message) -> int:
        """The network thread of ``msg``'s connection (round robin as connections come)."""
        # The connection's number, unique in the run (an object's id may be reused once it
        # is collected, which would make the choice depend on the process's allocations).
        key = msg.conn.number if msg.conn is not None else -1
        index = self._processor_of.get(key)
        if index is None:
            index = self._processor_of[key] = next(self._next_processor) % len(self._network)
        return index

    def cost(self, payload: object) -> tuple[Cost, int]:
        kind = type(payload)
        s = self.service
        if kind is ProduceRequest:
            return s.produce, records_of(payload)
        if kind is FetchRequest:
            return s.fetch, 0
        if kind is ReplicaFetchRequest:
            return s.replica_fetch, 0
        if kind in TRANSACTIONAL_REQUESTS:
            return s.transaction, 0
        return s.other, 0

    def book_request(self, msg: Message, now: float) -> tuple[float, float]:
        """Read ``msg`` on its network thread and handle it on an io thread, from ``now``:
        (when its handling starts, when it ends), before pauses."""
        jvm = self.jvm
        net = self.service.network
        cost, records = self.cost(msg.payload)
        io = self._io
        if type(msg.payload) is CallbackRequest:
            # Handed back by another thread, not read from a socket: a handler thread only.
            start = io[0] if io[0] > now else now
            end = jvm.book(start, cost.ms(records))
            heapq.heapreplace(io, end)
            jvm.allocate(now, cost.mb(records))
            return start, end
        p = self._processor(msg)
        ready = self._network[p] if self._network[p] > now else now
        read_ms, handle_ms = net.fixed_ms, cost.ms(records)
        slow = jvm.slowdown(ready)
        host = jvm.host
        core = host.earliest()
        starts = core if core > ready else ready
        if io[0] <= starts + read_ms * slow:
            # A handler thread is free when the read ends: one piece of work on one core,
            # read then handled (booked as one, so that it is not booked ahead of work that
            # is ready before its second part). Its time in the queue is the scheduler's
            # latency, if any: the handler thread's wake-up.
            late = host.late_ms
            end = jvm.book(ready, read_ms + handle_ms)
            queued = host.late_ms - late
            begin = end - (read_ms + handle_ms) * slow
            self._network[p] = begin + read_ms * slow
            start = self._network[p]
        else:  # every handler thread is busy past the read: it waits for one
            read = jvm.book(ready, read_ms)
            self._network[p] = read
            start = io[0] if io[0] > read else read
            late = host.late_ms
            end = jvm.book(start, handle_ms)
            queued = start - read + host.late_ms - late
        if self.read_ends is not None:
            self.read_ends[msg.msg_id] = self._network[p]
        jvm.requests += 1
        jvm.queued_ms += queued
        heapq.heapreplace(io, end)
        jvm.allocate(now, net.alloc_mb + cost.mb(records))
        return start, end

    def book_completion(self, now: float) -> float:
        """A held fetch completed from ``now`` (``DelayedFetch.onComplete``: the log read for
        it) by the handler thread whose work let it, going on from that work at ``now``: when
        its answer can leave, before pauses; ``now`` when :attr:`ServiceTimes.fetch_complete`
        costs nothing. The thread pays no scheduler's wake-up (ReplicaManager.
        tryCompleteActions runs as the request that appended ends). It is the handler free
        soonest; one whose calendar already holds later work (the bookings are made as
        requests are read) is booked past it, the overlap left as a departure of a few tenths
        of a millisecond."""
        cost = self.service.fetch_complete
        if cost.fixed_ms <= 0.0:
            return now
        end = self.jvm.book(now, cost.fixed_ms, woken=False)
        io = self._io
        if io[0] <= now:
            heapq.heapreplace(io, end)
        self.jvm.allocate(now, cost.alloc_mb)
        return end

    def book_fetcher(self, source: str, msg: Message, now: float) -> tuple[float, float]:
        """A replica fetcher thread of ``source``'s processes the answer ``msg`` from ``now``:
        (start, end), before pauses."""
        cost = self.service.replica_append
        records = records_of(msg.payload)
        booked = self._book_own(("fetcher", source), cost.ms(records), now)
        self.jvm.allocate(now, cost.mb(records))
        return booked

    def book_sender(self, thread: str, cost_ms: float, now: float) -> tuple[float, float]:
        """The broker's ``InterBrokerSendThread`` named ``thread`` processes an answer that
        costs ``cost_ms`` from ``now``: (start, end), before pauses."""
        return self._book_own(("sender", thread), cost_ms, now)

    def _book_own(self, thread: tuple[str, str], cost_ms: float, now: float) -> tuple[float, float]:
        """``cost_ms`` on one of the broker's own threads, after what it already has."""
        free = self._own_free.get(thread, 0.0)
        start = free if free > now else now
        end = self.jvm.book(start, cost_ms)
        self._own_free[thread] = end
        return start, end

    def queue_full(self, waiting: int) -> bool:
        return waiting >= self.threads.queued_max_requests + self.threads.io_threads


class TimedRequestChannel:
    """The request queue of a broker with :class:`BrokerThreads`: the same interface as
    :class:`~eosim.simulation.request_channel.RequestChannel` (``put``, ``kick``, ``clear``,
    ``take``), handing each request over when its threads are done with it."""

    __slots__ = ("_deferred", "_heap", "_seq", "_timer_at", "_wakeup", "env", "node", "threads")

    def __init__(self, env: simpy.Environment, node: BrokerProcess, threads: BrokerThreads) -> None:
        self.env = env
        self.node = node
        self.threads = threads
        # (end, seq, start, duration, msg): booked requests, by when their handling ends.
        self._heap: list[tuple[float, int, float, float, Message]] = []
        # Requests read while the process is stopped (paused): booked when it runs again.
        self._deferred: list[Message] = []
        self._seq = itertools.count()
        self._wakeup = env.event()
        self._timer_at = -1.0

    def put(self, msg: Message) -> None:
        node = self.node
        if node.paused or not node.alive:
            self._deferred.append(msg)
            return
        self._book(msg)
        self.kick()

    def put_callback(self, msg: Message) -> None:
        """A :class:`CallbackRequest`, booked on the next free handler thread as it arrives,
        like a request read now: unlike Kafka's callback queue it does not go ahead of
        requests already booked (docs/model.md, "The resource model")."""
        self.put(msg)

    def _book(self, msg: Message) -> None:
        now = self.env.now
        if self.threads.queue_full(len(self._heap)):
            # queued.max.requests: the network threads read no more until one is taken; the
            # request is read when the earliest queued one ends.
            now = self._heap[0][0]
        start, end = self.threads.book_request(msg, now)
        heapq.heappush(self._heap, (end, next(self._seq), start, end - start, msg))

    def kick(self) -> None:
        """Wake the handler loop (a new request, or the process runs again)."""
        node = self.node
        if self._deferred and node.alive and not node.paused:
            deferred, self._deferred = self._deferred, []
            for msg in deferred:
                self._book(msg)
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def clear(self) -> None:
        """The process died: what was queued or being handled is gone."""
        self._heap.clear()
        self._deferred.clear()
        self.threads.reset()

    def _wake_at(self, at: float) -> None:
        """A timer that kicks the handler loop at ``at`` (one at a time: the earliest)."""
        if self._timer_at == at:
            return
        self._timer_at = at
        timer = self.env.timeout(at - self.env.now)
        timer.callbacks.append(self._timer_fired)

    def _timer_fired(self, _event: object) -> None:
        self._timer_at = -1.0
        self.kick()

    def take(self) -> Generator[simpy.Event, Any, Message]:
        """The next request whose handling has ended, once the process runs; its end pushed
        past the process's pauses (a stopped JVM makes no progress)."""
        jvm = self.threads.jvm
        while True:
            node = self.node
            heap = self._heap
            now = self.env.now
            if heap and node.alive and not node.paused:
                end, seq, start, duration, msg = heap[0]
                if end <= now:
                    finish = jvm.finish(start, duration)
                    if finish > end:
                        heapq.heapreplace(heap, (finish, seq, start, duration, msg))
                        continue
                    heapq.heappop(heap)
                    return msg
                self._wake_at(end)
            self._wakeup = self.env.event()
            yield self._wakeup


OwnHandler = Callable[[Message], None]


# The answers an InterBrokerSendThread of the broker processes, and the thread's name in Kafka.
SENDER_THREADS: dict[type, str] = {
    WriteTxnMarkersResponse: "TxnMarkerSenderThread",
    AddPartitionsToTxnBrokerResponse: "AddPartitionsToTxnSenderThread",
}


class InterBrokerThreads:
    """The threads that process the answers to a broker's own requests, with the resource
    model: an answer to one of its fetches on the fetcher thread of its source (the follower
    side of replication), a coordinator's or a leader's answer on the sender thread that sent
    the request (:data:`SENDER_THREADS`), each booked there and handed to ``handle`` when that
    ends, in order per thread; a process that died or restarted meanwhile drops it, a paused
    one handles it on resume (``on_paused``). A sender thread's answer costs
    :attr:`ServiceTimes.network`, and :attr:`ServiceTimes.transaction` more when ``writes_log``
    says its handling ends in a log append on that thread (asked once, as it arrives).

    To give another of Kafka's background threads its work: an entry in
    :data:`SENDER_THREADS` for the answer it processes (and its answer type in
    ``socket_server.OWN_THREADS``), or a ``book_*`` method on :class:`BrokerThreads` for one
    with a cost of its own, called from :meth:`accept`."""

    def __init__(
        self,
        env: simpy.Environment,
        node: BrokerProcess,
        threads: BrokerThreads,
        handle: OwnHandler,
        on_paused: OwnHandler,
        writes_log: Callable[[Message], bool],
    ) -> None:
        self.env = env
        self.node = node
        self.threads = threads
        self.handle = handle
        self.on_paused = on_paused
        self.writes_log = writes_log

    def accept(self, msg: Message) -> bool:
        """Take ``msg`` if it is work for one of these threads (True: it will be handled
        later)."""
        kind = type(msg.payload)
        threads = self.threads
        if kind is ReplicaFetchResponse:
            start, end = threads.book_fetcher(msg.src, msg, self.env.now)
        else:
            name = SENDER_THREADS.get(kind)
            if name is None:
                return False
            cost = threads.service.network.fixed_ms
            if self.writes_log(msg):
                cost += threads.service.transaction.fixed_ms
            start, end = threads.book_sender(name, cost, self.env.now)
        self._at(start, end - start, end, msg, self.node.incarnation)
        return True

    def _at(
        self, start: float, duration: float, end: float, msg: Message, incarnation: int
    ) -> None:
        timer = self.env.timeout(end - self.env.now)

        def done(_event: object) -> None:
            node = self.node
            if not node.alive or node.incarnation != incarnation:
                return
            finish = self.threads.jvm.finish(start, duration)
            if finish > end:
                self._at(start, duration, finish, msg, incarnation)
            elif node.paused:
                self.on_paused(msg)
            else:
                self.handle(msg)

        timer.callbacks.append(done)


__all__ = [
    "SENDER_THREADS",
    "BrokerThreads",
    "Cost",
    "InterBrokerThreads",
    "ServiceTimes",
    "ThreadSettings",
    "TimedRequestChannel",
    "records_of",
]
