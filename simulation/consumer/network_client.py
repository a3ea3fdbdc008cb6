"""ConsumerNetworkClient: one connection per broker, request/response with timeouts.

A request is answered by its response, or by ``None`` when the connection failed or the
request timed out (``request.timeout.ms``); the caller decides whether to retry. A timeout
closes the connection, as Kafka's NetworkClient does, so a black-holed connection is
replaced by a new one.
"""

from __future__ import annotations

from typing import Any

import simpy

from eosim.simulation.network import Connection, Message, Network
from eosim.simulation.protocol import Disconnected


class ConsumerNetworkClient:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        request_timeout_ms: float,
        host: str | None = None,
    ) -> None:
        self.env = env
        self.node = node
        self.network = network
        self.request_timeout_ms = request_timeout_ms
        self.running = True
        self._conns: dict[str, Connection] = {}
        self._generation = 0
        self._correlation = 0
        # correlation id -> (broker, connection, event)
        self._waiting: dict[int, tuple[str, Connection, simpy.Event]] = {}
        network.register(node, self.receive, client=True, host=host)

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send(self, broker: str, payload: Any, timeout_ms: float | None = None) -> simpy.Event:
        """An event whose value is the response, or None on failure or timeout (after
        ``timeout_ms``, by default ``request.timeout.ms``)."""
        event = self.env.event()
        conn = self._conns.get(broker)
        if conn is None or conn.closed:
            self._generation += 1
            conn = self.network.connect(self.node, broker, self._generation)
            self._conns[broker] = conn
        cid = payload.correlation_id
        self._waiting[cid] = (broker, conn, event)
        self.network.send(self.node, broker, payload, conn)
        timer = self.env.timeout(self.request_timeout_ms if timeout_ms is None else timeout_ms)
        timer.callbacks.append(lambda _ev: self._timed_out(cid))
        return event

    def _timed_out(self, cid: int) -> None:
        waiting = self._waiting.pop(cid, None)
        if waiting is None:
            return
        broker, conn, event = waiting
        conn.close()
        if self._conns.get(broker) is conn:
            del self._conns[broker]
        self._fail_connection(conn)
        if not event.triggered:
            event.succeed(None)

    def _fail_connection(self, conn: Connection) -> None:
        for cid, (_b, c, event) in list(self._waiting.items()):
            if c is conn:
                del self._waiting[cid]
                if not event.triggered:
                    event.succeed(None)

    def receive(self, msg: Message) -> None:
        if not self.running:
            return
        payload = msg.payload
        if isinstance(payload, Disconnected):
            conn = self._conns.get(payload.node)
            if conn is not None and conn.generation == payload.generation:
                conn.closed = True
                del self._conns[payload.node]
                self._fail_connection(conn)
            return
        waiting = self._waiting.get(getattr(payload, "correlation_id", -1))
        if waiting is None or waiting[1] is not msg.conn:
            return
        del self._waiting[payload.correlation_id]
        if not waiting[2].triggered:
            waiting[2].succeed(payload)

    def close(self) -> None:
        """The process died: nothing more is delivered to it."""
        self.running = False
        self._waiting.clear()
