"""ExpiredOperationReaper: completes the held requests whose time ran out while a broker was paused.

Mirrors the expiration reaper of Kafka's ``DelayedOperationPurgatory``
(``DelayedOperation.scala``: ``ExpiredOperationReaper`` driving ``SystemTimer.advanceClock``).
A held request (:class:`~eosim.simulation.broker.delayed_produce.DelayedProducePurgatory`,
:class:`~eosim.simulation.broker.delayed_fetch.DelayedFetchPurgatory`) is expired by a SimPy
timer; when that timer fires while the broker's process is paused, the reaper is frozen with
the rest of the process, so the expiry waits here and runs, in the order the timers fired,
when the process runs again (``DelayedOperation.run`` -> ``forceComplete``).

Kafka has one reaper per purgatory; eosim's purgatories of one broker share one, so overdue
produce waits, held consumer reads and parked follower fetches complete in the one order their
timers fired (as they did when all three lived in ``ReplicaManager``).

To add a purgatory: give it this broker's reaper in its constructor and, in its expiry, hand
the completion to :meth:`defer` when the broker is not running.
"""

from __future__ import annotations

from collections.abc import Callable


class ExpiredOperationReaper:
    """The overdue completions of one broker's held requests, run when it resumes."""

    def __init__(self) -> None:
        # Held requests whose time ran out while the process was paused, in that order.
        self._frozen: list[Callable[[], None]] = []

    def defer(self, complete: Callable[[], None]) -> None:
        """``complete`` ran out of time while the process is paused: run it on resume."""
        self._frozen.append(complete)

    def resumed(self) -> None:
        """The paused process runs again: complete the held requests whose time ran out
        meanwhile, in the order it did (Kafka's ``SystemTimerReaper`` thread was frozen too; it
        expires every overdue operation at its next tick)."""
        frozen, self._frozen = self._frozen, []
        for complete in frozen:
            complete()

    def clear(self) -> None:
        """The broker crashed: nothing held survives."""
        self._frozen = []
