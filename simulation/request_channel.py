"""The queue between a node's connections and its request handler (Kafka's
``RequestChannel``, between the ``SocketServer`` and the ``KafkaRequestHandler`` threads).

A broker and the controller each own one. Requests are taken one at a time in arrival order,
each after the node's per-request handling time; a paused node takes none until it resumes,
and a crashed one drops what was queued (:meth:`RequestChannel.clear`). Work another thread
hands back to the request handlers (a :class:`CallbackRequest`, Kafka's
``RequestChannel.CallbackRequest``) is taken before the requests that wait, as Kafka's
``RequestChannel.receiveRequest`` polls its callback queue first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

import simpy

from eosim.simulation.network import Message


class Node(Protocol):
    """What the channel needs of its owner: whether it is up to handle a request."""

    alive: bool
    paused: bool


@dataclass(frozen=True, slots=True)
class CallbackRequest:
    """Work that another thread hands back to a request handler thread (Kafka's
    ``RequestChannel.CallbackRequest``, queued by ``KafkaRequestHandler.wrapAsyncCallback``):
    ``run`` is called when a handler takes it, and the handler then completes the actions
    appends queued (``ReplicaManager.tryCompleteActions``), as after any request. The
    transactional produce of transaction version 2 appends this way once the coordinator has
    added its partitions."""

    run: Callable[[], None]


class RequestChannel:
    """Requests read and not yet handled. The owner calls :meth:`put` as requests arrive,
    :meth:`kick` when it may have become able to handle them (restarted, resumed), and runs
    ``msg = yield from channel.take()`` in its handler process."""

    __slots__ = ("_callbacks", "_queue", "_wakeup", "env", "node", "request_time_ms")

    def __init__(self, env: simpy.Environment, node: Node, request_time_ms: float) -> None:
        self.env = env
        self.node = node
        self.request_time_ms = request_time_ms
        self._queue: deque[Message] = deque()
        self._callbacks: deque[Message] = deque()
        self._wakeup = env.event()

    def put(self, msg: Message) -> None:
        self._queue.append(msg)
        self.kick()

    def put_callback(self, msg: Message) -> None:
        """Queue a :class:`CallbackRequest`: taken before the requests that wait."""
        self._callbacks.append(msg)
        self.kick()

    def kick(self) -> None:
        """Wake the handler if it waits (it looks again at the queue and its node)."""
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def clear(self) -> None:
        """Drop every queued request (the node crashed)."""
        self._queue.clear()
        self._callbacks.clear()

    def take(self) -> Generator[simpy.Event, Any, Message]:
        """The next request, once the node is running and has spent the handling time on it.
        A request whose node crashed during that time is dropped, and the wait goes on."""
        while True:
            if not (self._callbacks or self._queue) or self.node.paused or not self.node.alive:
                self._wakeup = self.env.event()
                yield self._wakeup
                continue
            msg = (self._callbacks or self._queue).popleft()
            if self.request_time_ms > 0:
                yield self.env.timeout(self.request_time_ms)
            if self.node.alive:
                return msg
