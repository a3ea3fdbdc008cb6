"""DelayedFetch: fetches a leader holds until there is something to answer.

Mirrors Kafka's ``DelayedFetch`` and the ``DelayedOperationPurgatory[DelayedFetch]`` that
``ReplicaManager.fetchMessages`` parks a fetch in when it cannot answer at once. Two kinds:

* **Held consumer reads** (:meth:`DelayedFetchPurgatory.hold_read`): a consumer fetch waits
  until its condition holds (checked whenever one of its partitions is appended to, its high
  watermark may have moved, or it stops being led here: the purgatory's keys) or its
  ``max_wait_ms`` passed; the broker's callback then reads the log as it is then.
* **Parked follower fetches** (:meth:`DelayedFetchPurgatory.park`): a follower's fetch that
  found no data waits until one of its partitions is appended to (the check is queued by the
  append and run as a request ends: ``ReplicaManager.complete_actions``) or
  ``replica.fetch.wait.max.ms``; it is then read again (``DelayedFetch.onComplete`` ->
  ``ReplicaManager.readFromLog``, here the replica manager's ``read_for_follower``, without
  updating the follower's state a second time) and answered.

A fetch whose time runs out while the broker is paused is completed when it runs again
(:class:`~eosim.simulation.broker.delayed_operation.ExpiredOperationReaper`); a crash drops
every held fetch (:meth:`DelayedFetchPurgatory.shutdown`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import simpy

from eosim.simulation.broker.delayed_operation import ExpiredOperationReaper
from eosim.simulation.network import Message, Network
from eosim.simulation.protocol import (
    ReplicaFetchData,
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)


@dataclass(eq=False, slots=True)
class _ParkedFetch:
    msg: Message
    request: ReplicaFetchRequest
    done: bool = False


@dataclass(eq=False, slots=True)
class _HeldRead:
    """A consumer fetch held for data (Kafka's DelayedFetch of a consumer)."""

    partitions: tuple[TopicPartition, ...]
    completable: Callable[[], bool]
    read: Callable[[], object]
    reply: Callable[[object], None]
    done: bool = False


# How long after a partition is hosted late a fetch sent before may still arrive and be taken
# to carry it (DelayedFetchPurgatory.include): the followers' request timeout
# (replica.socket.timeout.ms, 30 s).
LATE_HOSTING_HORIZON_MS = 30_000.0

# How a leader reads a partition for a follower's fetch: (follower, partition, what it asked,
# now, whether to update the follower's state).
ReadForFollower = Callable[
    [str, TopicPartition, ReplicaFetchPartition, float, bool], ReplicaFetchData
]


class DelayedFetchPurgatory:
    """One broker's held consumer reads and parked follower fetches."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        replica_fetch_wait_max_ms: float,
        read_for_follower: ReadForFollower,
        is_running: Callable[[], bool],
        reaper: ExpiredOperationReaper,
        respond: Callable[[Message, object], None] | None = None,
        complete_work: Callable[[float], float] | None = None,
    ) -> None:
        """``read_for_follower``: the leader's read of a partition for a follower
        (``ReplicaManager._read_for_follower``); ``is_running``: whether the broker is up and
        not paused; ``reaper``: where expiries wait while it is paused; ``respond``: how a
        parked follower fetch is answered (the broker sends it and unmutes the connection;
        None: sent on the request's connection); ``complete_work``: the resource model's
        booking of a completion's work from a moment (a handler thread reading the log for
        it, ``BrokerThreads.book_completion``), giving when its answer leaves (None: at
        once)."""
        self.env = env
        self.broker = broker
        self.network = network
        self.replica_fetch_wait_max_ms = replica_fetch_wait_max_ms
        self.read_for_follower = read_for_follower
        self.is_running = is_running
        self.reaper = reaper
        self.respond = respond
        self.complete_work = complete_work
        # Both lists are replaced, not changed in place, when an entry is answered: read them
        # through this object.
        self.parked: list[_ParkedFetch] = []
        self.held_reads: list[_HeldRead] = []
        self.generation = 0  # bumped by a crash: timers of the old incarnation do nothing
        # Partitions hosted late (include): since when, as what, for which followers.
        self._late: dict[TopicPartition, tuple[float, ReplicaFetchPartition, frozenset[str]]] = {}

    # -- consumer fetches held for data --------------------------------------------
    def hold_read(
        self,
        partitions: tuple[TopicPartition, ...],
        completable: Callable[[], bool],
        read: Callable[[], object],
        reply: Callable[[object], None],
        max_wait_ms: float,
    ) -> None:
        """Hold a consumer fetch of ``partitions`` until ``completable()`` (checked whenever
        one of them is appended to, its high watermark may have moved, or it stops being
        led here: DelayedFetch's purgatory keys) or ``max_wait_ms`` has passed; then
        ``read()`` the log as it is then and ``reply`` with it once the completion's work is
        done (:meth:`_send_after_work`)."""
        held = _HeldRead(partitions, completable, read, reply)
        self.held_reads.append(held)
        generation = self.generation

        def expire(_ev: simpy.Event | None = None) -> None:
            if generation != self.generation or held.done:
                return
            if not self.is_running():
                self.reaper.defer(expire)  # answered when the process runs again
                return
            self._finish_read(held)

        self.env.timeout(max_wait_ms).callbacks.append(expire)

    def check_reads(self, tp: TopicPartition) -> None:
        """Answer the held reads of ``tp`` that can now complete."""
        for held in list(self.held_reads):
            if not held.done and tp in held.partitions and held.completable():
                self._finish_read(held)

    def _finish_read(self, held: _HeldRead) -> None:
        held.done = True
        self.held_reads = [h for h in self.held_reads if not h.done]
        response = held.read()
        self._send_after_work(lambda: held.reply(response))

    def _send_after_work(self, send: Callable[[], None]) -> None:
        """``send`` a completed fetch's answer, read now, once the completion's work
        (``complete_work``) ends: DelayedFetch.onComplete reads the log, then hands the answer
        to the network thread; a crash meanwhile drops it, a pause holds it."""
        complete_work = self.complete_work
        if complete_work is None:
            send()
            return
        now = self.env.now
        end = complete_work(now)
        if end <= now:
            send()
            return
        generation = self.generation

        def sent(_ev: simpy.Event) -> None:
            if generation != self.generation:
                return
            if not self.is_running():
                self.reaper.defer(lambda: self._send_if_alive(generation, send))
                return
            send()

        self.env.timeout(end - now).callbacks.append(sent)

    def _send_if_alive(self, generation: int, send: Callable[[], None]) -> None:
        if generation == self.generation:
            send()

    # -- follower fetches parked for data --------------------------------------------
    def park(self, msg: Message, request: ReplicaFetchRequest) -> None:
        """Hold a follower's fetch that found no data until one of its partitions is
        appended to (:meth:`complete_parked`) or ``replica.fetch.wait.max.ms``."""
        parked = _ParkedFetch(msg, request)
        if self._late:
            # A fetch sent before a late-hosted partition was: it carries it (include); a
            # fetch still on its way that long after is not expected.
            horizon = self.env.now - LATE_HOSTING_HORIZON_MS
            self._late = {tp: late for tp, late in self._late.items() if late[0] >= horizon}
            self._carry_late(parked)
        self.parked.append(parked)
        generation = self.generation

        def timed_out(_ev: simpy.Event) -> None:
            if generation == self.generation and not parked.done:
                self._answer_parked(parked)

        self.env.timeout(self.replica_fetch_wait_max_ms).callbacks.append(timed_out)

    def include(
        self, tp: TopicPartition, fetch: ReplicaFetchPartition, replicas: Collection[str]
    ) -> None:
        """``tp`` is hosted from now on, late (an internal partition nobody used so far). Had
        it been hosted all along it would be in the fetch sessions of ``replicas``: their
        fetches sent before now, parked here or still on their way, carry it as ``fetch``, so
        that an append to it answers them (not ``replica.fetch.wait.max.ms`` later)."""
        self._late[tp] = (self.env.now, fetch, frozenset(replicas))
        for parked in self.parked:
            if not parked.done:
                self._carry_late(parked)

    def _carry_late(self, parked: _ParkedFetch) -> None:
        request = parked.request
        sent = parked.msg.sent_at
        for tp, (since, fetch, replicas) in self._late.items():
            if (
                sent <= since
                and request.replica in replicas
                and all(t != tp for t, _fp in request.partitions)
            ):
                request = replace(request, partitions=(*request.partitions, (tp, fetch)))
        parked.request = request

    def complete_parked(self, tps: set[TopicPartition]) -> None:
        """Answer the parked fetches of any partition in ``tps``."""
        for parked in list(self.parked):
            if not parked.done and any(tp in tps for tp, _fp in parked.request.partitions):
                self._answer_parked(parked)

    def _answer_parked(self, parked: _ParkedFetch) -> None:
        if parked.done:
            return
        if not self.is_running():
            # Paused (a crash drops every held fetch): the fetch is completed, and answered,
            # when the process runs again (DelayedOperation.run, from the frozen reaper).
            self.reaper.defer(lambda: self._answer_parked(parked))
            return
        parked.done = True
        self.parked = [p for p in self.parked if not p.done]
        now = self.env.now
        answers = [
            (tp, self.read_for_follower(parked.request.replica, tp, fp, now, False))
            for tp, fp in parked.request.partitions
        ]
        response = ReplicaFetchResponse(parked.request.correlation_id, answers)
        msg = parked.msg
        if self.respond is not None:
            respond = self.respond
            self._send_after_work(lambda: respond(msg, response))
        else:
            network, broker = self.network, self.broker
            self._send_after_work(
                lambda: network.send(broker, msg.src, response, msg.conn, internal=True)
            )

    def shutdown(self) -> None:
        """The broker crashed: every held fetch is gone, unanswered, and its timer does
        nothing."""
        self.generation += 1
        self.parked = []
        self.held_reads = []
