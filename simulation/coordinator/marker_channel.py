"""TransactionMarkerChannelManager: writes COMMIT/ABORT markers to the partitions' leaders.

For a transaction the coordinator has moved to PrepareCommit or PrepareAbort, one
WriteTxnMarkers request goes to the leader of each partition group. The answers are handled
as Kafka's ``TransactionMarkerRequestCompletionHandler`` does:

* NONE: the partition is done;
* a retriable error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT; Kafka's KAFKA_STORAGE_ERROR too, which
  eosim's brokers never answer): the partition is sent again, to its leader then, after
  ``retry_backoff_ms``. Markers are appended with acks=all, so a leader whose ISR is below
  min.insync.replicas refuses them (NOT_ENOUGH_REPLICAS), and one whose ISR shrinks while
  they wait answers NOT_ENOUGH_REPLICAS_AFTER_APPEND or, once its HW stops (KIP-966),
  REQUEST_TIMED_OUT: the transaction stays in Prepare* until the partition takes them;
* INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED (a newer producer epoch or a newer
  coordinator has written there): the transaction's pending completion is cancelled
  (``removeMarkersForTxn``). Nothing of that answer is retried and ``on_done`` is never
  called, so the coordinator keeps the transaction in Prepare* until the partition is
  loaded again. Requests already out for other partitions still finish (and retry) as usual;
* any other error is a simulator bug and raises.

A request with no answer is sent again after ``request_timeout_ms`` (the request or its
answer was lost, or the leader is down). When the last partition has accepted and the
completion was not cancelled, ``on_done`` is called and the coordinator persists
CompleteCommit/CompleteAbort.

Inter-broker messages travel without a connection: each is lost or delayed on its own (a
listed departure). A crash of the coordinator drops the channel; the next coordinator
re-sends the markers of every Prepare* transaction it loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from eosim.simulation.network import Network
from eosim.simulation.protocol import Errors, TopicPartition, WriteTxnMarkersRequest

LeaderOf = Callable[[TopicPartition], str | None]


@dataclass(eq=False)
class _PendingMarkers:
    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int
    remaining: dict[TopicPartition, None]
    on_done: Callable[[], None]
    in_flight: dict[int, tuple[TopicPartition, ...]] = field(default_factory=dict)
    done: bool = False
    cancelled: bool = False
    # What the answers that have arrived (``arrives``), handled or not yet, leave to accept:
    # the thread that handles them in order knows ahead which one completes the transaction.
    unconfirmed: dict[TopicPartition, None] = field(default_factory=dict)
    foreseen: bool = False  # the answer that completes (or cancels) it has arrived


RETRIABLE_MARKER_ERRORS = frozenset(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    }
)
# The producer's or the coordinator's epoch has moved on: the transaction can be ignored.
CANCELLING_MARKER_ERRORS = frozenset(
    {Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED}
)


class UnexpectedMarkerError(RuntimeError):
    """An answer to WriteTxnMarkers that Kafka's completion handler treats as fatal."""


class TransactionMarkerChannelManager:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        leader_of: LeaderOf,
        request_timeout_ms: float,
        retry_backoff_ms: float,
    ) -> None:
        self.env = env
        self.node = node
        self.network = network
        self.leader_of = leader_of
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.generation = 0  # bumped on crash: late timers and answers of a dead channel
        self._correlation = 0
        self._requests: dict[int, _PendingMarkers] = {}
        # Requests whose answer has arrived and waits for the sender thread (``arrives``):
        # Kafka's thread never times out a request it has read the answer of.
        self._arrived: set[int] = set()

    def send_markers(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: tuple[TopicPartition, ...],
        on_done: Callable[[], None],
    ) -> None:
        pending = _PendingMarkers(
            transactional_id,
            producer_id,
            epoch,
            commit,
            coordinator_epoch,
            dict.fromkeys(partitions),
            on_done,
            unconfirmed=dict.fromkeys(partitions),
        )
        if not pending.remaining:
            on_done()
            return
        self._send(pending, tuple(pending.remaining))

    def _send(self, pending: _PendingMarkers, partitions: tuple[TopicPartition, ...]) -> None:
        by_leader: dict[str, list[TopicPartition]] = {}
        unavailable: list[TopicPartition] = []
        for tp in partitions:
            if tp not in pending.remaining:
                continue
            leader = self.leader_of(tp)
            if leader is None:
                unavailable.append(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            self._correlation += 1
            cid = self._correlation
            request = WriteTxnMarkersRequest(
                cid,
                pending.producer_id,
                pending.epoch,
                pending.commit,
                pending.coordinator_epoch,
                tuple(tps),
            )
            self._requests[cid] = pending
            pending.in_flight[cid] = tuple(tps)
            self.network.send(self.node, leader, request, request=True)
            self._later(self.request_timeout_ms, lambda c=cid: self._timed_out(c))
        if unavailable:
            self._later(self.retry_backoff_ms, lambda: self._send(pending, tuple(unavailable)))

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        generation = self.generation
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _ev: action() if generation == self.generation else None)

    def _timed_out(self, cid: int) -> None:
        if cid in self._arrived:
            return
        pending = self._requests.pop(cid, None)
        if pending is None:
            return
        self._send(pending, pending.in_flight.pop(cid))

    def arrives(self, cid: int, results: list[tuple[TopicPartition, Errors]]) -> bool:
        """The answer to request ``cid`` has arrived and waits for the marker sender thread,
        which handles answers in the order they arrive: True when it is the one whose
        handling completes its transaction (:meth:`on_response` then calls ``on_done``, and
        Kafka appends CompleteCommit/CompleteAbort on that thread), counting the answers that
        arrived before it. False for a late answer, one that leaves a partition to accept, a
        transaction cancelled by an answer before it, and any answer after the completing
        one. Changes nothing :meth:`on_response` reads."""
        pending = self._requests.get(cid)
        if pending is None:
            return False
        self._arrived.add(cid)
        if pending.foreseen:
            return False
        for tp, error in results:
            if error is Errors.NONE:
                pending.unconfirmed.pop(tp, None)
            elif error in CANCELLING_MARKER_ERRORS:
                pending.foreseen = True  # cancelled: no answer completes it
                return False
        if pending.unconfirmed:
            return False
        pending.foreseen = True
        return True

    def on_response(self, cid: int, results: list[tuple[TopicPartition, Errors]]) -> None:
        self._arrived.discard(cid)
        pending = self._requests.pop(cid, None)
        if pending is None:
            return  # a late answer to a request that already timed out, or a dead channel
        pending.in_flight.pop(cid, None)
        retry: list[TopicPartition] = []
        abort_sending = False
        for tp, error in results:
            if error is Errors.NONE:
                pending.remaining.pop(tp, None)
            elif error in RETRIABLE_MARKER_ERRORS:
                retry.append(tp)
            elif error in CANCELLING_MARKER_ERRORS:
                pending.cancelled = True
                abort_sending = True
            else:
                raise UnexpectedMarkerError(
                    f"{pending.transactional_id}: WriteTxnMarkers for {tp} answered {error.name}"
                )
        if abort_sending:
            return
        retry = [tp for tp in retry if tp in pending.remaining]  # not already accepted
        if retry:
            self._later(self.retry_backoff_ms, lambda: self._send(pending, tuple(retry)))
        elif not pending.remaining and not pending.done and not pending.cancelled:
            pending.done = True
            pending.on_done()

    def shutdown(self) -> None:
        self.generation += 1
        self._requests.clear()
        self._arrived.clear()
