"""The queue between a node's connections and its request handler (Kafka's
``RequestChannel``, between the ``SocketServer`` and the ``KafkaRequestHandler`` threads).

A broker and the controller each own one. Requests are taken one at a time in arrival order,
each after the node's per-request handling time; a paused node takes none until it resumes,
and a crashed one drops what was queued (:meth:`RequestChannel.clear`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any, Protocol

import simpy

from eosim.simulation.network import Message


class Node(Protocol):
    """What the channel needs of its owner: whether it is up to handle a request."""

    alive: bool
    paused: bool


class RequestChannel:
    """Requests read and not yet handled. The owner calls :meth:`put` as requests arrive,
    :meth:`kick` when it may have become able to handle them (restarted, resumed), and runs
    ``msg = yield from channel.take()`` in its handler process."""

    __slots__ = ("_queue", "_wakeup", "env", "node", "request_time_ms")

    def __init__(self, env: simpy.Environment, node: Node, request_time_ms: float) -> None:
        self.env = env
        self.node = node
        self.request_time_ms = request_time_ms
        self._queue: deque[Message] = deque()
        self._wakeup = env.event()

    def put(self, msg: Message) -> None:
        self._queue.append(msg)
        self.kick()

    def kick(self) -> None:
        """Wake the handler if it waits (it looks again at the queue and its node)."""
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def clear(self) -> None:
        """Drop every queued request (the node crashed)."""
        self._queue.clear()

    def take(self) -> Generator[simpy.Event, Any, Message]:
        """The next request, once the node is running and has spent the handling time on it.
        A request whose node crashed during that time is dropped, and the wait goes on."""
        while True:
            if not self._queue or self.node.paused or not self.node.alive:
                self._wakeup = self.env.event()
                yield self._wakeup
                continue
            msg = self._queue.popleft()
            if self.request_time_ms > 0:
                yield self.env.timeout(self.request_time_ms)
            if self.node.alive:
                return msg
