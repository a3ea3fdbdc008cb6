"""The wall-clock nemesis: the model's fault schedule, driven against real processes.

The schedule is the one the model realises for the same scenario and seed
(:func:`eosim.simulation.nemesis.realize_faults` on the run's ``nemesis`` stream), so a model
run and a real run of one seed suffer the same faults at the same offsets from the workload's
start. Each event starts at ``epoch + start`` on the run's clock, is applied through the fault
protocol (:func:`eosim.simulation.faults.start_fault`, or, for an instant kind,
:func:`~eosim.simulation.faults.carry_out`) and undone at ``epoch + end``.

Nothing is recorded until it is confirmed (the real cluster's operations return only once a
fault is in effect or undone, and raise when they cannot tell: :mod:`eosim.real.referee`).
Each ``fault`` line carries the moment it was confirmed (``time``) and the moment the schedule
gave (``scheduled``); a crashed broker's ``stop`` line also carries ``served``, the moment the
restarted broker served again, confirmed by a watcher thread of its own so that the schedule
goes on meanwhile. A fault not applied, not undone, confirmed later than
:data:`eosim.real.referee.LATE_BOUND_MS`, a broker not back within
:data:`~eosim.real.referee.BACK_TIMEOUT_S`, or faults the run ended before playing, make the
run invalid through its :class:`~eosim.real.referee.Referee`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from eosim.real.referee import (
    BACK_TIMEOUT_S,
    FAULT_LATE,
    FAULT_NOT_APPLIED,
    FAULT_NOT_UNDONE,
    FAULTS_SKIPPED,
    LATE_BOUND_MS,
    NOT_BACK,
    Referee,
)
from eosim.simulation.faults import KINDS, FaultableCluster, FaultEvent, carry_out, start_fault

# (time ms since the epoch, phase, kind, targets, detail): how a fault line is recorded. The
# recorder keeps ``detail`` itself: a watcher adds ``served`` to a stop line's detail later.
FaultLine = Callable[[float, str, str, list[str], dict[str, Any]], None]
# What a real target gives for an event whose end restarts processes: a call that blocks until
# they serve again and returns that moment (ms since the epoch), or raises; None: nothing to
# wait for.
AwaitBack = Callable[[FaultEvent], Callable[[], float] | None]


def _label(event: FaultEvent) -> str:
    return f"{event.kind} {list(event.targets)} at {event.start:.0f} ms"


class WallClockNemesis:
    """Runs ``schedule`` in a background thread against ``cluster``.

    ``clock()`` is milliseconds since the run's epoch. :meth:`finish` waits for every fault to
    have ended (a crashed broker restarted and serving, a paused one resumed); :meth:`abort`
    undoes what is still in force at once (a run stopped early must not leave a broker paused)
    and counts the faults the run never reached. :attr:`applied` lists the events confirmed in
    effect, in the order they started.
    """

    def __init__(
        self,
        schedule: Sequence[FaultEvent],
        cluster: FaultableCluster,
        clock: Callable[[], float],
        record: FaultLine,
        referee: Referee | None = None,
        await_back: AwaitBack | None = None,
        late_bound_ms: float = LATE_BOUND_MS,
    ) -> None:
        self.schedule = sorted(schedule, key=lambda e: (e.start, e.end, e.kind, e.targets))
        self.cluster = cluster
        self.clock = clock
        self.record = record
        self.referee = referee if referee is not None else Referee()
        self.await_back = await_back
        self.late_bound_ms = late_bound_ms
        self.applied: list[FaultEvent] = []
        self.lateness_ms: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._active: list[tuple[FaultEvent, Callable[[], None]]] = []
        self._reached: set[int] = set()  # schedule indices whose start moment was played
        self._watchers: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._run, name="eosim-nemesis", daemon=True)

    @property
    def errors(self) -> list[str]:
        """The faults that were not applied or not undone (the referee's reasons)."""
        return [
            r
            for r in self.referee.reasons
            if r.startswith((FAULT_NOT_APPLIED, FAULT_NOT_UNDONE, NOT_BACK))
        ]

    def start(self) -> None:
        self._thread.start()

    def _wait_until(self, at_ms: float) -> bool:
        """Sleep until ``at_ms``; False when stopped first."""
        while (left := at_ms - self.clock()) > 0:
            if left > 1.5:
                # Sleep to a millisecond short of it, then yield until it comes: a sleep's
                # wake-up can be a millisecond late on a loaded machine.
                if self._stop.wait(min((left - 1.0) / 1000.0, 0.05)):
                    return False
            elif self._stop.is_set():
                return False
            else:
                time.sleep(0)
        return not self._stop.is_set()

    def _run(self) -> None:
        # Moments in order: ("start", event) at its start, ("end", event) at its end.
        moments: list[tuple[float, int, int, FaultEvent]] = []
        for i, e in enumerate(self.schedule):
            moments.append((e.start, 0, i, e))
            if KINDS[e.kind].trigger != "instant":
                moments.append((e.end, 1, i, e))
        moments.sort(key=lambda m: (m[0], m[1], m[2]))
        undo: dict[int, Callable[[], None]] = {}
        for at, phase, i, event in moments:
            if not self._wait_until(at):
                return
            if phase == 0:
                self._reached.add(i)
            try:
                if KINDS[event.kind].trigger == "instant":
                    self._carry_out(event, at)
                elif phase == 0:
                    undo[i] = self._start(event, at)
                elif i in undo:
                    with self._lock:
                        self._active = [(e, u) for e, u in self._active if e is not event]
                    self._end(event, undo.pop(i), at)
            except Exception as exc:  # not confirmed: the run is invalid
                rule = FAULT_NOT_APPLIED if phase == 0 else FAULT_NOT_UNDONE
                self.referee.invalid(rule, f"{_label(event)}: {_one_line(exc)}")

    def _late(self, event: FaultEvent, at: float, now: float, what: str) -> None:
        late = now - at
        self.lateness_ms.append(late)
        if late > self.late_bound_ms:
            self.referee.invalid(
                FAULT_LATE,
                f"{_label(event)}: {what} confirmed {late:.0f} ms after its time "
                f"(bound {self.late_bound_ms:.0f} ms)",
            )

    def _start(self, event: FaultEvent, at: float) -> Callable[[], None]:
        end = start_fault(event, self.cluster)
        now = self.clock()
        self._late(event, at, now, "start")
        detail = event.detail() | {"scheduled": round(at, 3)}
        self.record(now, "start", event.kind, list(event.targets), detail)
        with self._lock:
            self._active.append((event, end))
            self.applied.append(event)
        return end

    def _end(self, event: FaultEvent, end: Callable[[], None], at: float) -> None:
        end()
        now = self.clock()
        self._late(event, at, now, "end")
        detail: dict[str, Any] = {"scheduled": round(at, 3)}
        self.record(now, "stop", event.kind, list(event.targets), detail)
        self._watch_back(event, detail)

    def _watch_back(self, event: FaultEvent, detail: dict[str, Any]) -> None:
        """When ``event``'s end restarted processes, wait for them to serve in a thread of
        its own; their ``served`` moment goes into the stop line's ``detail``."""
        waiter = self.await_back(event) if self.await_back is not None else None
        if waiter is None:
            return

        def watch() -> None:
            try:
                detail["served"] = round(waiter(), 3)
            except Exception as exc:
                self.referee.invalid(NOT_BACK, f"{_label(event)}: {_one_line(exc)}")

        thread = threading.Thread(target=watch, name="eosim-back", daemon=True)
        self._watchers.append(thread)
        thread.start()

    def _carry_out(self, event: FaultEvent, at: float) -> None:
        names, detail = carry_out(event, self.cluster)
        now = self.clock()
        self._late(event, at, now, "start")
        self.record(now, "start", event.kind, names, detail | {"scheduled": round(at, 3)})
        self.record(now, "stop", event.kind, names, {})
        with self._lock:
            self.applied.append(event)

    def _join_watchers(self, deadline: float) -> bool:
        for thread in list(self._watchers):
            thread.join(max(deadline - time.monotonic(), 0.0))
        return not any(t.is_alive() for t in self._watchers)

    def finish(self, timeout_s: float) -> bool:
        """Wait for the schedule to play out and every restarted broker to serve; False when
        that did not happen within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return False
        return self._join_watchers(deadline)

    def abort(
        self, until_ms: float | None = None, back_timeout_s: float = BACK_TIMEOUT_S + 5.0
    ) -> None:
        """Stop the schedule and end every fault still in force, now; wait (up to
        ``back_timeout_s``) for restarted brokers to be confirmed back. The events scheduled to
        start before ``until_ms`` (the run's end; default now) that were never reached are
        faults skipped."""
        self._stop.set()
        self._thread.join(5.0)
        with self._lock:
            active, self._active = self._active, []
        for event, end in reversed(active):
            try:
                self._end(event, end, self.clock())
            except Exception as exc:
                self.referee.invalid(FAULT_NOT_UNDONE, f"{_label(event)}: {_one_line(exc)}")
        limit = self.clock() if until_ms is None else until_ms
        skipped = [
            e for i, e in enumerate(self.schedule) if i not in self._reached and e.start < limit
        ]
        if skipped:
            self.referee.invalid(
                FAULTS_SKIPPED,
                f"{len(skipped)} of {len(self.schedule)} scheduled fault(s) never played, the "
                f"first {_label(skipped[0])}",
            )
        if not self._join_watchers(time.monotonic() + back_timeout_s):
            self.referee.invalid(
                NOT_BACK, f"a restarted node not confirmed back within {back_timeout_s:.0f} s"
            )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:400]
