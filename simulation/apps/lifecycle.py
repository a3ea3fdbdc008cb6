"""A client application's process: crashed and restarted by the nemesis.

An application is one named process. A crash kills it; a restart starts a new *incarnation*
(``name/0``, ``name/1``, ...), and that is the process id its history operations carry.
Overlapping crashes nest: the application stays down until the last of them ends. Subclasses
say what dies with the process (``_died``) and what a new incarnation starts with
(``_reborn``); their main loop waits for ``_restarted`` after the crash interrupts it.

A ``pause`` freezes the process (a long GC pause, SIGSTOP): its producer's Sender stops and
bytes arriving for it wait in its socket; the main loop waits on :meth:`frozen` between
steps. On ``resume`` the producer reads what arrived, then its Sender runs again.

Every application also keeps the same tally of its operations: ``sent``, then one of
``acked``, ``failed`` or ``indeterminate`` per outcome (``ok``, ``fail``, ``info``), and
``errored`` for every operation the client completed with an exception (a send whose
callback got one, a transaction that failed), whatever its outcome; operations left open by
a dying process are not counted there.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from eosim.simulation.history import HistoryRecorder
from eosim.simulation.producer.kafka_producer import KafkaProducer
from eosim.simulation.rng import RandomStream

ProducerFactory = Callable[[], KafkaProducer]
# An operation's outcome -> the count it adds to.
OUTCOME_COUNTS = {"ok": "acked", "fail": "failed", "info": "indeterminate"}


def new_counts() -> dict[str, int]:
    return {"sent": 0, "acked": 0, "failed": 0, "indeterminate": 0, "errored": 0}


def tally(counts: dict[str, int], type_: str, error: str | None, died: bool = False) -> None:
    """Count one completed operation: its outcome, and ``errored`` if the client raised."""
    counts[OUTCOME_COUNTS[type_]] += 1
    if error is not None and not died:
        counts["errored"] += 1


class ClientApplication:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        make_producer: ProducerFactory,
        history: HistoryRecorder,
        rng: RandomStream,
    ) -> None:
        self.env = env
        self.name = name
        self.make_producer = make_producer
        self.history = history
        self.rng = rng
        self.producer: KafkaProducer | None = None
        self.counts = new_counts()
        self.incarnation = 0
        self._id_incarnation: int | None = None
        self._process_id = ""
        self.alive = True
        self.down_count = 0
        self.done = env.event()
        self.resumed: simpy.Event | None = None  # set while the process is paused
        self._restarted = env.event()
        self.process: simpy.Process | None = None  # the main loop, started by the subclass

    @property
    def process_id(self) -> str:
        """``name/incarnation``; one string per incarnation (every send names its process)."""
        if self._id_incarnation != self.incarnation:
            self._id_incarnation = self.incarnation
            self._process_id = f"{self.name}/{self.incarnation}"
        return self._process_id

    def crash(self) -> None:
        self.down_count += 1
        if not self.alive:
            return
        self.alive = False
        self._died()
        self.resume()  # a paused process that dies never reads what waited in its socket
        if not self.done.triggered and self.process is not None and self.process.is_alive:
            if self.env.active_process is self.process:
                # A crash_at hook run by the application's own process (it passed a probe
                # point itself): SimPy forbids a process to interrupt itself, so the
                # interrupt lands at its next yield, before simulated time moves on.
                self.env.timeout(0).callbacks.append(lambda _e: self._interrupt())
            else:
                self.process.interrupt("crash")

    def _interrupt(self) -> None:
        if not self.alive and self.process is not None and self.process.is_alive:
            self.process.interrupt("crash")

    def restart(self) -> None:
        self.down_count = max(self.down_count - 1, 0)
        if self.alive or self.down_count > 0:
            return
        self.alive = True
        self.incarnation += 1
        if self.done.triggered:
            return
        self._reborn()
        restarted, self._restarted = self._restarted, self.env.event()
        restarted.succeed()

    def pause(self) -> None:
        if self.alive and self.resumed is None:
            self.resumed = self.env.event()
            if self.producer is not None:
                self.producer.pause()

    def resume(self) -> None:
        if self.resumed is not None:
            resumed, self.resumed = self.resumed, None
            if self.producer is not None:
                self.producer.resume()
            resumed.succeed()

    def frozen(self):  # type: ignore[no-untyped-def]
        """``yield from`` between steps: waits while the process is paused."""
        while self.resumed is not None:
            yield self.resumed

    def _died(self) -> None:
        """What dies with the process (its client, its open operations)."""

    def _reborn(self) -> None:
        """What a new incarnation starts with before its main loop resumes."""
