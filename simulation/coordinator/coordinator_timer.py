"""CoordinatorTimer: keyed timers of a coordinator shard.

Kafka's ``CoordinatorTimer`` (``coordinator-common/.../runtime/CoordinatorTimer.java``,
implemented by ``CoordinatorRuntime.EventBasedCoordinatorTimer``): ``schedule(key, delay,
operation)`` runs ``operation`` after ``delay`` unless it was cancelled; scheduling a key that
is already scheduled replaces it (the older one never runs); ``cancel(key)`` drops it. The
operation returns a :class:`CoordinatorResult` whose records the runtime writes, as it writes a
request's.

:class:`CoordinatorTimer` is the interface the pure :class:`GroupMetadataManager` sees.
:class:`SimpyCoordinatorTimer` runs it on the simulation clock, bound to one loaded shard: when
the shard unloads (leadership moves, or the broker crashes) :meth:`SimpyCoordinatorTimer.
cancel_all` drops every timer, as Kafka's runtime does when it unloads a coordinator.
:class:`ManualTimer` is for tests that drive time by hand.

The broker's :class:`BrokerLifecycleManager` (its "communication" event) and the
:class:`QuorumController` (its ``maybeFenceStaleBroker`` task) use :class:`SimpyCoordinatorTimer`
too: Kafka's ``KafkaEventQueue.scheduleDeferred`` replaces a deferred event of the same name
the same way.

To extend: a new timed rule schedules an operation with a key naming it (Kafka's key format,
e.g. ``heartbeat-<group>-<member>``) from the manager; nothing here changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import simpy

# An operation returns what its owner writes (a GroupMetadataManager's CoordinatorResult); the
# timer does not look inside.
TimerOperation = Callable[[], Any]


class CoordinatorTimer(Protocol):
    def schedule(self, key: str, delay_ms: float, operation: TimerOperation) -> None: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


class SimpyCoordinatorTimer:
    """Timers on ``env``'s clock; ``run`` gets each expired operation's result (the runtime
    writes its records)."""

    def __init__(self, env: simpy.Environment, run: Callable[[Any], None]) -> None:
        self.env = env
        self._run = run
        # key -> token of its current schedule (a later schedule or a cancel replaces it)
        self._tokens: dict[str, object] = {}
        self._active = True

    def schedule(self, key: str, delay_ms: float, operation: TimerOperation) -> None:
        token = object()
        self._tokens[key] = token
        timeout = self.env.timeout(max(0.0, delay_ms))
        timeout.callbacks.append(lambda _ev: self._fire(key, token, operation))

    def _fire(self, key: str, token: object, operation: TimerOperation) -> None:
        if not self._active or self._tokens.get(key) is not token:
            return
        del self._tokens[key]
        self._run(operation())

    def cancel(self, key: str) -> None:
        self._tokens.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._tokens

    def cancel_all(self) -> None:
        self._active = False
        self._tokens.clear()


class ManualTimer:
    """Kafka's ``MockCoordinatorTimer`` (coordinator-common tests): :meth:`advance` moves the
    clock to its end first, then runs the operations that expired, earliest deadline first
    (ties in scheduling order), so an operation that schedules again does so from the new
    time, as in Kafka's tests. Returns (key, result) of each."""

    def __init__(self) -> None:
        self.now = 0.0
        self._seq = 0
        # key -> (deadline, sequence, operation)
        self.timeouts: dict[str, tuple[float, int, TimerOperation]] = {}

    def schedule(self, key: str, delay_ms: float, operation: TimerOperation) -> None:
        self._seq += 1
        self.timeouts[key] = (self.now + delay_ms, self._seq, operation)

    def cancel(self, key: str) -> None:
        self.timeouts.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.timeouts

    def deadline(self, key: str) -> float:
        return self.timeouts[key][0]

    def advance(self, ms: float) -> list[tuple[str, Any]]:
        self.now += ms
        fired: list[tuple[str, Any]] = []
        while True:
            due = [(d, s, k) for k, (d, s, _op) in self.timeouts.items() if d <= self.now]
            if not due:
                return fired
            _deadline, _seq, key = min(due)
            _d, _s, operation = self.timeouts.pop(key)
            fired.append((key, operation()))
