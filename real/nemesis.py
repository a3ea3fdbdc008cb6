"""The wall-clock nemesis: the model's fault schedule, driven against real processes.

The schedule is the one the model realises for the same scenario and seed
(:func:`eosim.simulation.nemesis.realize_faults` on the run's ``nemesis`` stream), so a model
run and a real run of one seed suffer the same faults at the same offsets from the workload's
start. Each event starts at ``epoch + start`` on the wall clock, is applied through the fault
protocol (:func:`eosim.simulation.faults.start_fault`, or, for an instant kind,
:func:`~eosim.simulation.faults.carry_out`) and undone at ``epoch + end``; both
moments go into the history as ``fault`` lines, as the model writes them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from eosim.simulation.faults import KINDS, FaultableCluster, FaultEvent, carry_out, start_fault

# (time ms since the epoch, phase, kind, targets, detail): how a fault line is recorded.
FaultLine = Callable[[float, str, str, list[str], dict[str, Any]], None]


class WallClockNemesis:
    """Runs ``schedule`` in a background thread against ``cluster``.

    ``clock()`` is milliseconds since the run's epoch. :meth:`finish` waits for every fault to
    have ended (a crashed broker restarted, a paused one resumed); :meth:`abort` undoes what is
    still in force at once (a run stopped early must not leave a broker paused).
    """

    def __init__(
        self,
        schedule: Sequence[FaultEvent],
        cluster: FaultableCluster,
        clock: Callable[[], float],
        record: FaultLine,
    ) -> None:
        self.schedule = sorted(schedule, key=lambda e: (e.start, e.end, e.kind, e.targets))
        self.cluster = cluster
        self.clock = clock
        self.record = record
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._active: list[tuple[FaultEvent, Callable[[], None]]] = []
        self._thread = threading.Thread(target=self._run, name="eosim-nemesis", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _wait_until(self, at_ms: float) -> bool:
        """Sleep until ``at_ms``; False when stopped first."""
        while (left := at_ms - self.clock()) > 0:
            if self._stop.wait(min(left / 1000.0, 0.05)):
                return False
        return not self._stop.is_set()

    def _run(self) -> None:
        # Moments in order: ("start", event) at its start, ("end", event) at its end.
        moments: list[tuple[float, int, int, FaultEvent]] = []
        for i, e in enumerate(self.schedule):
            if KINDS[e.kind].trigger == "instant":
                moments.append((e.start, 0, i, e))
                continue
            moments.append((e.start, 0, i, e))
            moments.append((e.end, 1, i, e))
        moments.sort(key=lambda m: (m[0], m[1], m[2]))
        undo: dict[int, Callable[[], None]] = {}
        for at, phase, i, event in moments:
            if not self._wait_until(at):
                return
            try:
                if KINDS[event.kind].trigger == "instant":
                    self._carry_out(event)
                elif phase == 0:
                    undo[i] = self._start(event)
                elif i in undo:
                    with self._lock:
                        self._active = [(e, u) for e, u in self._active if e is not event]
                    undo.pop(i)()
                    self.record(self.clock(), "stop", event.kind, list(event.targets), {})
            except Exception as exc:  # a fault that could not be applied is a run error
                self.errors.append(f"{event.kind} {list(event.targets)}: {exc}")

    def _start(self, event: FaultEvent) -> Callable[[], None]:
        end = start_fault(event, self.cluster)
        self.record(self.clock(), "start", event.kind, list(event.targets), event.detail())
        with self._lock:
            self._active.append((event, end))
        return end

    def _carry_out(self, event: FaultEvent) -> None:
        names, detail = carry_out(event, self.cluster)
        now = self.clock()
        self.record(now, "start", event.kind, names, detail)
        self.record(now, "stop", event.kind, names, {})

    def finish(self, timeout_s: float) -> bool:
        """Wait for the schedule to play out; False when it did not within ``timeout_s``."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def abort(self) -> None:
        """Stop the schedule and end every fault still in force, now."""
        self._stop.set()
        self._thread.join(5.0)
        with self._lock:
            active, self._active = self._active, []
        for event, end in reversed(active):
            try:
                end()
                self.record(self.clock(), "stop", event.kind, list(event.targets), {})
            except Exception as exc:
                self.errors.append(f"ending {event.kind} {list(event.targets)}: {exc}")
