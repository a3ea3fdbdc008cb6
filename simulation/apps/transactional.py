"""TransactionalProducerApp: a Jepsen-style transactional writer.

Each transaction writes ``size`` new unique values and then commits, or aborts with
``abort_probability``. Its ``txn`` operation is completed with Jepsen's outcome rules:

* ``ok`` when commitTransaction returned, ``fail`` when an abortTransaction succeeded (the
  application chose to abort, or the commit failed with an abortable error such as a batch
  that expired after ``delivery.timeout.ms``);
* ``info`` when the outcome is unknown: the commit timed out (``max.block.ms``) and could not
  be aborted, the producer was fenced or hit another fatal error, or the process crashed.
  The application then restarts as a new process with the **same** transactional.id, whose
  initTransactions fences the old one and settles its open transaction.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from eosim.simulation.apps.lifecycle import ClientApplication, ProducerFactory, tally
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.probe import Probe
from eosim.simulation.rng import RandomStream
from eosim.simulation.scenario import TxnWorkload


def wait(env: simpy.Environment, event: simpy.Event, timeout_ms: float) -> Generator[Any, Any, Any]:
    """Wait for ``event`` at most ``timeout_ms``; the value, or a TimeoutException text."""
    timer = env.timeout(timeout_ms)
    yield env.any_of([event, timer])
    if event.triggered:
        return event.value
    return f"TimeoutException: timed out after {timeout_ms:g} ms"


class TransactionalProducerApp(ClientApplication):
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        workload: TxnWorkload,
        make_producer: ProducerFactory,
        history: HistoryRecorder,
        rng: RandomStream,
        max_block_ms: float,
        probe: Probe,
    ) -> None:
        super().__init__(env, name, make_producer, history, rng)
        self.probe = probe
        self.workload = workload
        self.max_block_ms = max_block_ms
        self.next_txn = 0
        self.next_value = 0
        self.open_op: tuple[int, dict[str, Any]] | None = None
        self.process = env.process(self._run())

    def _run(self):  # type: ignore[no-untyped-def]
        w = self.workload
        if w.start > 0:
            yield self.env.timeout(w.start)
        interval = 1000.0 / w.rate
        while True:
            try:
                self.producer = self.make_producer()
                error = yield from wait(
                    self.env, self.producer.init_transactions(), self.max_block_ms
                )
                if error is not None:
                    self._restart_process()
                    continue
                while self.next_txn < w.transactions:
                    yield from self.frozen()
                    restart = yield from self._transaction()
                    if restart:
                        self._restart_process()
                        break
                    yield self.env.timeout(interval)
                else:
                    self.done.succeed()
                    return
            except simpy.Interrupt:
                yield self._restarted

    def _transaction(self):  # type: ignore[no-untyped-def]
        """One transaction; True if the producer must be replaced afterwards."""
        w = self.workload
        producer = self.producer
        assert producer is not None
        self.next_txn += 1
        values = [f"{self.name}-{self.next_value + i}" for i in range(w.size)]
        self.next_value += w.size
        keys = [None if w.keys is None else f"k{self.rng.integer(w.keys)}" for _ in values]
        sends = [
            {"topic": w.topic, "partition": None, "key": k, "value": v}
            for k, v in zip(keys, values, strict=True)
        ]
        body = {
            "transactional_id": producer.config.transactional_id,
            "producer_id": producer.transaction_manager.producer_id,  # type: ignore[union-attr]
            "epoch": producer.transaction_manager.epoch,  # type: ignore[union-attr]
            "sends": sends,
        }
        op_id = self.history.invoke("txn", self.process_id, self.env.now, body)
        self.open_op = (op_id, body)
        self.counts["sent"] += 1
        error = producer.begin_transaction()
        acked: dict[str, tuple[int, int]] = {}

        def done(value: str, p: int, offset: int, err: str | None, _mw: bool) -> None:
            if err is None:
                acked[value] = (p, offset)

        if error is None:
            for key, value in zip(keys, values, strict=True):
                blocked = producer.send(w.topic, key, value, None, done, w.value_bytes)
                if blocked is not None:
                    yield blocked
            if self.rng.random() < w.abort_probability:
                # Written first, then aborted: the records reach the log and need markers.
                yield from wait(self.env, producer.flush(), self.max_block_ms)
                error = yield from wait(self.env, producer.abort_transaction(), self.max_block_ms)
                self._complete(
                    "fail",
                    "AbortedByApplication: abortTransaction" if error is None else error,
                    None,
                )
                return error is not None
            error = yield from wait(self.env, producer.commit_transaction(), self.max_block_ms)
            if error is None:
                committed = [
                    {"topic": w.topic, "partition": acked[v][0], "value": v, "offset": acked[v][1]}
                    for v in values
                    if v in acked
                ]
                self._complete("ok", None, {"sends": committed})
                self.probe.hit("producer.after_commit", self.name)
                return False
        txn = producer.transactions
        assert txn is not None
        if txn.is_fatal:
            self._complete("info", error, None)
            return True
        # Try to abort. Once an abort succeeds the transaction definitely did not commit. A
        # commit that timed out while its EndTxn may be in flight cannot be aborted (the
        # producer refuses), so its outcome stays unknown.
        abort_error = yield from wait(self.env, producer.abort_transaction(), self.max_block_ms)
        if abort_error is None:
            self._complete("fail", error, None)
            return False
        self._complete("info", f"{error}; abort failed: {abort_error}", None)
        return True

    def _complete(
        self, type_: str, error: str | None, value: dict[str, Any] | None, died: bool = False
    ) -> None:
        if self.open_op is None:
            return
        op_id, _body = self.open_op
        self.open_op = None
        tally(self.counts, type_, error, died)
        self.history.complete(op_id, type_, "txn", self.process_id, self.env.now, value, error)

    def _restart_process(self) -> None:
        """Replace the producer with a new process using the same transactional.id."""
        if self.producer is not None:
            self.producer.crash()
        self.incarnation += 1

    # -- faults ------------------------------------------------------------------------
    def _died(self) -> None:
        if self.producer is not None:
            self.producer.crash()
        self._complete(
            "info", "ProcessCrashed: the process died in the transaction", None, died=True
        )

    def abandon_open_ops(self, error: str) -> int:
        if self.open_op is None:
            return 0
        self._complete("info", error, None, died=True)
        return 1
