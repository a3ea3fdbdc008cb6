"""The producer application: sends unique values at a rate, and survives crashes.

Every record's value is unique in the run (``<producer>-<n>``), so the checker can follow
each one. Each send is an operation in the history: invoked when the application calls
``send()``, completed ``ok`` with its offset, ``fail`` when the client knows it was never
written (it never left the client), or ``info`` when it might have been written (the batch
was sent and then timed out or failed).

A crash kills the process: the producer, its sender thread and the records it held are gone,
and every operation still open completes ``info``. The restarted application is a new
process (``name/1``, ``name/2``, ...) with a new KafkaProducer, and so a new producer id:
idempotence protects one producer session only. With ``on_restart: resend_unacked`` it sends
again every value it never saw acknowledged, as an application that replays its source from
the last acknowledged position does. That is how duplicates cross sessions.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from eosim.simulation.apps.lifecycle import (
    OUTCOME_COUNTS,
    ClientApplication,
    ProducerFactory,
    tally,
)
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.rng import RandomStream
from eosim.simulation.scenario import Workload


class ProducerApp(ClientApplication):
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        workload: Workload,
        make_producer: ProducerFactory,
        history: HistoryRecorder,
        rng: RandomStream,
    ) -> None:
        super().__init__(env, name, make_producer, history, rng)
        self.workload = workload
        self.next_index = 0
        # value -> the id of its send, still open in the current incarnation
        self.open_ops: dict[str, int] = {}
        self.open_keys: dict[str, str] = {}  # value -> key, for the open sends that have one
        self.to_resend: list[tuple[str, str | None]] = []  # (value, key) to send again
        self._completion = _Completion(self, self.incarnation)
        self._interval = 1000.0 / workload.rate
        # The run's environment lets a wait that nothing can interrupt pass without an event;
        # a plain SimPy environment has no such shortcut.
        self._elapse: Callable[[float], bool] = getattr(env, "elapse", _never)
        self._gap_due = False  # a blocked send has returned: its gap is still to wait
        self.process = env.process(self._run())

    # -- main loop ---------------------------------------------------------------------
    def _run(self):  # type: ignore[no-untyped-def]
        w = self.workload
        if w.start > 0:
            yield self.env.timeout(w.start)
        self.producer = self.make_producer()
        while True:
            try:
                while self.to_resend or self.next_index < w.records:
                    if self.resumed is not None:
                        yield from self.frozen()
                    if self._gap_due:
                        self._gap_due = False
                        gap = self._gap()
                        if not self._elapse(gap):
                            yield self.env.timeout(gap)
                        continue
                    wait = self._send_burst()
                    if wait is not None:
                        yield wait
                yield self.producer.flush()
                self.done.succeed()
                return
            except simpy.Interrupt:
                self._gap_due = False
                yield self._restarted

    def _gap(self) -> float:
        interval = self._interval
        return interval if self.workload.arrival == "constant" else self.rng.exponential(interval)

    def _send_burst(self) -> simpy.Event | None:
        """Send records one after another while the gaps between them can pass without an
        event (``CountingEnvironment.elapse``): the main loop's steps, run back to back in
        one call with what they use held in locals, since a run sends every record through
        here. Returns what the main loop must wait for next: a blocked send (the gap after
        it is then due, ``_gap_due``), the timeout of a gap that could not just pass, or
        None when the main loop has something to check first (a pause, the end)."""
        w = self.workload
        open_ops = self.open_ops
        open_keys = self.open_keys
        to_resend = self.to_resend
        counts = self.counts
        producer = self.producer
        assert producer is not None
        completion = self._completion
        env = self.env
        elapse = self._elapse
        rng = self.rng
        constant = w.arrival == "constant"
        interval = self._interval
        topic, partition, keys = w.topic, w.partition, w.keys
        invoke = self.history.send_invoker(self.process_id, topic, partition)
        send = producer.bind_send(topic, partition, completion, w.value_bytes)
        prefix, records = f"{self.name}-", w.records
        index = self.next_index
        while True:
            if to_resend:
                value, key = to_resend.pop(0)
            else:
                value = f"{prefix}{index}"
                key = None if keys is None else f"k{rng.integer(keys)}"
                index += 1
                self.next_index = index
            open_ops[value] = invoke(env.now, key, value)
            if key is not None:
                open_keys[value] = key
            counts["sent"] += 1  # read by progress reports, which elapse may make
            blocked = send(key, value)
            if blocked is not None:
                self._gap_due = True
                return blocked
            gap = interval if constant else rng.exponential(interval)
            if not elapse(gap):
                return env.timeout(gap)
            if self.resumed is not None or not (to_resend or index < records):
                return None

    # -- faults ------------------------------------------------------------------------
    def _died(self) -> None:
        if self.producer is not None:
            self.producer.crash()
        self.abandon_open_ops(
            "ProcessCrashed: the producer process died with the send outstanding",
            resend=self.workload.on_restart == "resend_unacked",
        )

    def abandon_open_ops(self, error: str, resend: bool = False) -> int:
        """Complete every open operation ``info`` (its outcome is unknown); returns how many."""
        w = self.workload
        keys = self.open_keys
        for value, op_id in self.open_ops.items():
            self.history.complete_send(op_id, "info", self.env.now, w.partition, None, error)
            self.counts["indeterminate"] += 1
            if resend:
                self.to_resend.append((value, keys.get(value)))
        n = len(self.open_ops)
        self.open_ops.clear()
        keys.clear()
        return n

    def _reborn(self) -> None:
        self._completion = _Completion(self, self.incarnation)
        self.producer = self.make_producer()


class _Completion:
    """The producer's callback for every send of one incarnation of the application: it
    completes the send of the value it is told, if that send is still open. One object per
    incarnation rather than one per send, since a run may hold every record it sends
    outstanding at once (docs/performance.md, "Memory")."""

    __slots__ = ("app", "incarnation")

    def __init__(self, app: ProducerApp, incarnation: int) -> None:
        self.app = app
        self.incarnation = incarnation

    def __call__(
        self, value: str, partition: int, offset: int, error: str | None, maybe_written: bool
    ) -> None:
        app = self.app
        if self.incarnation != app.incarnation:
            return
        op_id = app.open_ops.pop(value, None)
        if op_id is None:
            return
        if app.open_keys:
            app.open_keys.pop(value, None)
        if error is None:
            type_ = "ok"
            app.counts["acked"] += 1  # as `tally` counts it, spelt out on this per-record path
        else:
            type_ = "info" if maybe_written else "fail"
            tally(app.counts, type_, error)
        app.history.complete_send(
            op_id,
            type_,
            app.env.now,
            partition if partition >= 0 else None,
            offset if error is None else None,
            error,
        )

    def succeeded(self, values: list[str], partition: int, base_offset: int) -> None:
        """``__call__`` for every record of a batch that succeeded, in record order, as one
        step: the records' offsets are ``base_offset`` on (-1 throughout when it is -1, as
        ``acks=0`` tells them)."""
        app = self.app
        if self.incarnation != app.incarnation:
            return
        op_ids = self._close(values)
        if base_offset >= 0:
            offsets = list(range(base_offset, base_offset + len(values)))
        else:
            offsets = [-1] * len(values)
        if None in op_ids:  # some sends were completed already: leave them out
            kept = [i for i, op_id in enumerate(op_ids) if op_id is not None]
            op_ids = [op_ids[i] for i in kept]
            offsets = [offsets[i] for i in kept]
        app.counts["acked"] += len(op_ids)
        app.history.complete_sends(op_ids, "ok", app.env.now, partition, offsets)

    def failed(self, values: list[str], partition: int, error: str, maybe_written: bool) -> None:
        """``__call__`` for every record of a batch that failed with ``error``, in record
        order, as one step."""
        app = self.app
        if self.incarnation != app.incarnation:
            return
        op_ids = [op_id for op_id in self._close(values) if op_id is not None]
        type_ = "info" if maybe_written else "fail"
        counts = app.counts
        counts[OUTCOME_COUNTS[type_]] += len(op_ids)  # as `tally` counts each
        counts["errored"] += len(op_ids)
        app.history.complete_sends(op_ids, type_, app.env.now, partition, None, error)

    def _close(self, values: list[str]) -> list[int | None]:
        """Close the sends of ``values``: the op id of each, None for one no longer open."""
        app = self.app
        pop = app.open_ops.pop
        op_ids = [pop(value, None) for value in values]
        if app.open_keys:
            keys = app.open_keys
            for value in values:
                keys.pop(value, None)
        return op_ids


def _never(_delay: float) -> bool:
    return False
