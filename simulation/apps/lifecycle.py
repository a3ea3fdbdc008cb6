"""A client application's process: crashed and restarted by the nemesis.

An application is one named process. A crash kills it; a restart starts a new *incarnation*
(``name/0``, ``name/1``, ...), and that is the process id its history operations carry.
Overlapping crashes nest: the application stays down until the last of them ends. Subclasses
say what dies with the process (``_died``) and what a new incarnation starts with
(``_reborn``); their main loop waits for ``_restarted`` after the crash interrupts it.

Every application also keeps the same tally of its operations: ``sent``, then one of
``acked``, ``failed`` or ``indeterminate`` per outcome (``ok``, ``fail``, ``info``).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from simulation.history import HistoryRecorder
from simulation.producer.kafka_producer import KafkaProducer
from simulation.rng import RandomStream

ProducerFactory = Callable[[], KafkaProducer]
# An operation's outcome -> the count it adds to.
OUTCOME_COUNTS = {"ok": "acked", "fail": "failed", "info": "indeterminate"}


def new_counts() -> dict[str, int]:
    return {"sent": 0, "acked": 0, "failed": 0, "indeterminate": 0}


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
        self.alive = True
        self.down_count = 0
        self.done = env.event()
        self._restarted = env.event()
        self.process: simpy.Process | None = None  # the main loop, started by the subclass

    @property
    def process_id(self) -> str:
        return f"{self.name}/{self.incarnation}"

    def crash(self) -> None:
        self.down_count += 1
        if not self.alive:
            return
        self.alive = False
        self._died()
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

    def _died(self) -> None:
        """What dies with the process (its client, its open operations)."""

    def _reborn(self) -> None:
        """What a new incarnation starts with before its main loop resumes."""
