"""AddPartitionsToTxnManager: a broker's requests to transaction coordinators (KIP-890).

Under transaction version 2 a partition's leader adds the partition to the producer's
transaction itself, on the transaction's first produce there, and a group coordinator adds the
offsets partition for a TxnOffsetCommit. Both go through this broker-side client, as in Kafka
(``kafka.server.AddPartitionsToTxnManager``, an ``InterBrokerSendThread``):

* :meth:`AddPartitionsToTxnManager.add` finds the transaction's coordinator in the broker's
  own metadata cache (the leader of the transactional id's ``__transaction_state``
  partition); with none, the caller gets COORDINATOR_NOT_AVAILABLE at once;
* the entry waits for that coordinator's next request, one entry per transactional id: a new
  entry for an id already waiting replaces it, and the older one gets NETWORK_EXCEPTION (same
  producer epoch: a client retrying) or INVALID_PRODUCER_EPOCH (an older epoch); an entry
  with an older epoch than the waiting one gets INVALID_PRODUCER_EPOCH itself;
* **one request in flight per coordinator**: everything waiting for a coordinator leaves in
  one AddPartitionsToTxn request (:class:`AddPartitionsToTxnBrokerRequest`) when none is in
  flight to it, so adds that arrive meanwhile are batched into the next one;
* the request travels on a connection of the broker's own, through the coordinator broker's
  request queue and handler threads, and its answer comes back to this broker's sender thread
  (the broker's own threads), which hands each caller its transaction's error
  (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, :func:`add_partitions_error`);
* no answer within the broker's ``request.timeout.ms``, or the connection reset (the
  coordinator's broker died or refused it): every caller of that request gets
  NETWORK_EXCEPTION, and the next request opens a new connection.

A crash of the broker drops the manager's state (the produce requests waiting on it die with
the process). Verification (KIP-890 part 1, ``verifyOnly``) is still answered by a direct call
(docs/model.md, "Departures").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from eosim.simulation.network import Connection, Network
from eosim.simulation.protocol import (
    AddPartitionsToTxnBrokerRequest,
    AddPartitionsToTxnBrokerResponse,
    Disconnected,
    Errors,
    TopicPartition,
    TxnAddEntry,
)

Done = Callable[[Errors], None]
# transactional id -> the coordinator's broker in this broker's metadata cache (None: none)
CoordinatorOf = Callable[[str], str | None]


def add_partitions_error(error: Errors) -> Errors:
    """How AddPartitionsToTxnManager hands a coordinator's answer to the leader or group
    coordinator that asked: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (an abortable
    error for the client, KIP-588); everything else as it is."""
    return Errors.INVALID_PRODUCER_EPOCH if error is Errors.PRODUCER_FENCED else error


@dataclass(slots=True, eq=False)
class _Waiting:
    entry: TxnAddEntry
    on_done: Done


@dataclass(slots=True, eq=False)
class _InFlight:
    correlation_id: int
    conn: Connection
    waiting: tuple[_Waiting, ...]


class AddPartitionsToTxnManager:
    """One broker's AddPartitionsToTxn client (see the module docstring).
    ``request_timeout_ms``: the broker's ``request.timeout.ms``."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        coordinator_of: CoordinatorOf,
        request_timeout_ms: float,
    ) -> None:
        self.env = env
        self.broker = broker
        self.network = network
        self.coordinator_of = coordinator_of
        self.request_timeout_ms = request_timeout_ms
        self.generation = 0  # bumped on crash: late timers of a dead process do nothing
        self._correlation = itertools.count(1)
        self._connection_generation = 0
        # coordinator broker -> transactional id -> what waits for its next request
        self._waiting: dict[str, dict[str, _Waiting]] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._conns: dict[str, Connection] = {}

    def add(
        self,
        txn_id: str | None,
        pid: int,
        epoch: int,
        tps: tuple[TopicPartition, ...],
        on_done: Done,
    ) -> None:
        """Ask ``txn_id``'s coordinator to add ``tps`` (``addOrVerifyTransaction`` with the
        operation ``addPartition``); ``on_done`` gets its answer."""
        if txn_id is None:
            on_done(Errors.INVALID_TXN_STATE)
            return
        node = self.coordinator_of(txn_id)
        if node is None:
            on_done(Errors.COORDINATOR_NOT_AVAILABLE)
            return
        waiting = self._waiting.setdefault(node, {})
        before = waiting.get(txn_id)
        if before is not None:
            if before.entry.epoch > epoch:
                on_done(Errors.INVALID_PRODUCER_EPOCH)  # the incoming entry is fenced
                return
            del waiting[txn_id]
            older = before.entry.epoch < epoch
            before.on_done(Errors.INVALID_PRODUCER_EPOCH if older else Errors.NETWORK_EXCEPTION)
        waiting[txn_id] = _Waiting(TxnAddEntry(txn_id, pid, epoch, tps), on_done)
        self._maybe_send(node)

    def _maybe_send(self, node: str) -> None:
        """InterBrokerSendThread.generateRequests: what waits for ``node`` leaves in one
        request unless one is in flight to it."""
        waiting = self._waiting.get(node)
        if not waiting or node in self._in_flight:
            return
        del self._waiting[node]
        conn = self._conns.get(node)
        if conn is None or conn.closed:
            self._connection_generation += 1
            conn = self._conns[node] = self.network.connect(
                self.broker, node, self._connection_generation
            )
        cid = next(self._correlation)
        sent = tuple(waiting.values())
        self._in_flight[node] = _InFlight(cid, conn, sent)
        request = AddPartitionsToTxnBrokerRequest(cid, tuple(w.entry for w in sent))
        self.network.send(self.broker, node, request, conn, internal=True)
        generation = self.generation
        timer = self.env.timeout(self.request_timeout_ms)
        timer.callbacks.append(
            lambda _ev: self._timed_out(node, cid) if generation == self.generation else None
        )

    def _fail(self, node: str, error: Errors) -> None:
        """The request in flight to ``node`` failed: each of its callers gets ``error``."""
        flight = self._in_flight.pop(node)
        for w in flight.waiting:
            w.on_done(error)
        self._maybe_send(node)

    def _timed_out(self, node: str, cid: int) -> None:
        flight = self._in_flight.get(node)
        if flight is None or flight.correlation_id != cid:
            return
        flight.conn.close()  # NetworkClient disconnects a connection whose request timed out
        self._fail(node, Errors.NETWORK_EXCEPTION)

    def on_response(
        self, src: str, conn: Connection | None, response: AddPartitionsToTxnBrokerResponse
    ) -> None:
        """The coordinator's answer, on this broker's sender thread."""
        flight = self._in_flight.get(src)
        if flight is None or flight.correlation_id != response.correlation_id:
            return
        if conn is not flight.conn:
            return
        del self._in_flight[src]
        errors = dict(response.results)
        for w in flight.waiting:
            w.on_done(add_partitions_error(errors[w.entry.transactional_id]))
        self._maybe_send(src)

    def on_disconnected(self, payload: Disconnected) -> None:
        """The connection to ``payload.node`` was reset: what is in flight on it fails."""
        conn = self._conns.get(payload.node)
        if conn is None or conn.number != payload.connection:
            return  # another connection's (a replica fetcher's, or an older one of its own)
        conn.closed = True
        flight = self._in_flight.get(payload.node)
        if flight is not None and flight.conn is conn:
            self._fail(payload.node, Errors.NETWORK_EXCEPTION)

    def shutdown(self) -> None:
        """The broker crashed: its connections close and nothing waits any more."""
        self.generation += 1
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._waiting.clear()
        self._in_flight.clear()
