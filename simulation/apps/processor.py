"""ProcessorApp: consume-transform-produce, with or without transactions, or a sink.

Each *instance* of the application (``name/0``, ``name/1``, ...) reads its input partitions
from the group's committed offsets, transforms each input record ``v`` into the output
``v>name`` and writes it to the output topic (or to an :class:`ExternalStore`). One ``process``
operation per input record records what happened:

* **transactional**: begin; send the outputs; sendOffsetsToTransaction; commit. ``ok`` when
  the commit returned, ``fail`` after an abort, ``info`` when the outcome is unknown (commit
  timeout, fenced, crash). After a fatal error the instance is replaced by a new one with the
  same transactional.id.
* **not transactional**: send the outputs and flush, and commit the offsets, in the order
  ``commit`` says (``after_output``: at-least-once; ``before_output``: at-most-once), or leave
  the commits to the consumer (``auto``: every ``auto_commit_interval`` from within poll, and
  on close; at-least-once, since a batch is flushed before the next poll).

An instance starts from its group's committed offsets; a partition with none starts where
``input.auto.offset.reset`` says (``latest`` by default: inputs written before the reset are
never processed). With ``none`` the consumer's poll raises NoOffsetForPartitionException (or
OffsetOutOfRangeException for a position beyond the log end): the instance records that
``poll`` as ``fail`` with the exception and the application stops for good, as an
application whose poll loop lets the exception out would (restarting it would meet the same
exception until an operator set the group's offsets).

A crash (``crash`` fault, or ``crash_at`` a ``processor.*`` point) kills the instance; the
restart starts a new one. A ``pause`` freezes the instance; it carries on when the pause ends
(a zombie, if its group gave its partitions to another member meanwhile).

With ``input.subscribe`` the processors of a group are its members instead (the classic
protocol, :mod:`eosim.simulation.consumer.consumer_coordinator`): the group's leader assigns
the partitions, each instance is the rebalance listener of its consumer and writes the group's
story (``group`` lines), ``processing`` spends time per record between the poll and the output,
and :class:`GroupMembers` ends the work when every member is idle in one stable generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from eosim.simulation.apps.lifecycle import new_counts, tally
from eosim.simulation.apps.reader import record_failed_poll
from eosim.simulation.apps.store import ExternalStore
from eosim.simulation.apps.transactional import wait
from eosim.simulation.consumer.consumer_coordinator import (
    GroupRebalanceConfig,
)
from eosim.simulation.consumer.kafka_consumer import (
    CommitAttempt,
    ConsumerException,
    ConsumerRecord,
    KafkaConsumer,
)
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.producer.kafka_producer import KafkaProducer
from eosim.simulation.protocol import ConsumerGroupMetadata, TopicPartition
from eosim.simulation.rng import RandomStream
from eosim.simulation.scenario import Processor


class _Dead(Exception):
    """The instance was killed or fenced: stop at once."""


class _Instance:
    def __init__(self, app: ProcessorApp, incarnation: int) -> None:
        self.app = app
        self.env = app.env
        self.incarnation = incarnation
        self.process_id = f"{app.name}/{incarnation}"
        node = f"{app.name}#{incarnation}"
        self.alive = True
        self.resumed: simpy.Event | None = None
        self.node = node
        # EOS v1 (transactional_id_per: partition): no instance producer, one per task.
        self.producer: KafkaProducer | None = (
            app.make_producer(node) if app.needs_producer and not app.per_partition else None
        )
        self.tasks: dict[TopicPartition, KafkaProducer] = {}
        self.consumer = app.make_consumer(f"{node}.consumer", self)
        self.nodes = [node, self.consumer.node]  # what a pause freezes on the network
        self.open_ops: dict[int, dict[str, Any]] = {}
        # Subscribed: caught up with the input since its last poll with records; how many
        # times each input was processed.
        self.idle = False
        self._attempts: dict[tuple[TopicPartition, int], int] = {}
        # Transactions begun, numbering the ``transaction`` of each step: the steps of one
        # transaction read their inputs and write their outputs as one unit.
        self._transactions = 0
        self.process = self.env.process(self._run())

    # -- lifecycle ---------------------------------------------------------------------
    def kill(self, error: str) -> None:
        if not self.alive:
            return
        self.alive = False
        for producer in self._producers():
            producer.crash()
        self.consumer.close(leave=False)
        for n in self.nodes:
            self.app.network.resume_node(n)
        self._complete_all("info", error)
        if self.process.is_alive and self.env.active_process is not self.process:
            self.process.interrupt("killed")

    def pause(self) -> None:
        if self.alive and self.resumed is None:
            self.resumed = self.env.event()
            for producer in self._producers():
                producer.sender.pause()
            self.consumer.pause()
            for n in self.nodes:
                self.app.network.pause_node(n)

    def resume(self) -> None:
        if self.resumed is not None:
            resumed, self.resumed = self.resumed, None
            for producer in self._producers():
                producer.sender.resume()
            for n in self.nodes:
                self.app.network.resume_node(n)
            self.consumer.resume()
            resumed.succeed()

    def _producers(self) -> list[KafkaProducer]:
        own = [self.producer] if self.producer is not None else []
        return own + [self.tasks[tp] for tp in sorted(self.tasks)]

    def _close_tasks(self, keep: set[TopicPartition]) -> None:
        """EOS v1: the producers of tasks this instance no longer has are closed (no
        transaction is open between polls)."""
        for tp in sorted(self.tasks):
            if tp not in keep:
                self.tasks.pop(tp).crash()

    def _task_producer(self, tp: TopicPartition):  # type: ignore[no-untyped-def]
        """EOS v1: the task's producer, transactional.id ``<group>-<topic>-<partition>``
        (Kafka Streams' ``<application.id>-<taskId>``: every member of the group gives a task
        the same one), made and initialised on first use; its initTransactions fences the
        task's previous owner."""
        producer = self.tasks.get(tp)
        if producer is not None:
            return producer
        topic, partition = tp
        node = f"{self.node}.{topic}-{partition}"
        producer = self.app.make_producer(node, f"{self.app.group}-{topic}-{partition}")
        self.tasks[tp] = producer
        self.nodes.append(node)
        if self.resumed is not None:
            producer.sender.pause()
        error = yield from wait(self.env, producer.init_transactions(), self.app.max_block_ms)
        yield from self._step()
        if error is not None:
            self.kill(f"initTransactions failed: {error}")
            self.app.replace(self)
            raise _Dead
        return producer

    def _init_tasks(self, partitions: list[TopicPartition]):  # type: ignore[no-untyped-def]
        try:
            for tp in partitions:
                if tp in self.consumer.assignment:
                    yield from self._task_producer(tp)
        except _Dead:
            return

    def _step(self, point: str | None = None):  # type: ignore[no-untyped-def]
        """Between steps: a paused instance waits; a dead one stops."""
        if point is not None:
            self.app.probe.hit(point, self.app.name)
        while self.resumed is not None:
            yield self.resumed
        if not self.alive:
            raise _Dead

    # -- the group (a subscribed consumer's ConsumerRebalanceListener) ------------------
    def _group_event(self, event: str, detail: dict[str, Any]) -> None:
        coordinator = self.consumer.group_coordinator
        if coordinator is not None:
            detail = {"member": coordinator.generation.member_id, **detail}
        self.app.history.group_event(self.env.now, self.process_id, self.app.group, event, detail)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._group_event("revoked", {"partitions": _listed(partitions)})

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._group_event("lost", {"partitions": _listed(partitions)})
        self._close_tasks(set(self.consumer.assignment) - set(partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition], generation: int) -> None:
        self.idle = False
        self._close_tasks(set(self.consumer.assignment))
        new = [tp for tp in sorted(self.consumer.assignment) if tp not in self.tasks]
        if self.app.per_partition and new:
            # Kafka Streams creates a task's producer, and initTransactions it (fencing the
            # task's previous owner), inside onPartitionsAssigned, before the poll reads the
            # committed offsets: what keeps EOS v1 exactly-once without group fencing.
            self.consumer.hold(self.env.process(self._init_tasks(new)))
        detail = {self._epoch_key(): generation, "partitions": _listed(self.consumer.assignment)}
        self._group_event("assigned", detail)

    def _epoch_key(self) -> str:
        """A classic group's lines carry its generation; a consumer group's (KIP-848) the
        member's epoch, which is the member's own and not ordered across members."""
        group = self.consumer.group_coordinator
        return "epoch" if group is not None and group.protocol == "consumer" else "generation"

    def on_commit(self, attempt: CommitAttempt) -> None:
        """A subscribed consumer's commit (the application's or auto-commit's) ended: its
        story goes in the history, with the member and generation it named."""
        detail: dict[str, Any] = {
            "member": attempt.member_id,  # the member it named, not the member now
            self._epoch_key(): attempt.generation,
            "invoked": attempt.invoked,
            "offsets": [
                {"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(attempt.offsets)
            ],
        }
        if attempt.asynchronous:
            detail["async"] = True
        if attempt.error is not None:
            detail["error"] = attempt.error
        self._group_event("commit", detail)

    # -- operations --------------------------------------------------------------------
    def _complete_all(self, type_: str, error: str | None) -> None:
        """The instance died or the run ended: its open operations complete ``type_``."""
        for op_id in list(self.open_ops):
            self._complete(op_id, type_, error, died=True)

    def _complete(self, op_id: int, type_: str, error: str | None, died: bool = False) -> None:
        if self.open_ops.pop(op_id, None) is None:
            return
        tally(self.app.counts, type_, error, died)
        self.app.history.complete(
            op_id, type_, "process", self.process_id, self.env.now, None, error
        )

    # -- main loop ---------------------------------------------------------------------
    def _run(self):  # type: ignore[no-untyped-def]
        app = self.app
        try:
            if app.spec.transactional and not app.per_partition:
                assert self.producer is not None
                error = yield from wait(
                    self.env, self.producer.init_transactions(), app.max_block_ms
                )
                yield from self._step()
                if error is not None:
                    self.kill(f"initTransactions failed: {error}")
                    app.replace(self)
                    return
            if not self.consumer.subscribed:
                committed = yield from self.consumer.committed()
                yield from self._step()
                for tp in self.consumer.assignment:
                    if tp in committed:
                        self.consumer.seek(tp, committed[tp])
                    # else: the consumer's poll resets it (auto.offset.reset)
            while True:
                records = yield from self._poll()
                yield from self._step("processor.after_poll")
                if not records:
                    # Caught up with a poll that began after the last input was written.
                    inputs_end = app.inputs_done_at
                    if inputs_end is not None and self.consumer.caught_up(since=inputs_end):
                        if app.members is not None:
                            self.idle = True
                            if app.members.idle(self):
                                return
                        else:
                            if self.consumer.auto_commit:
                                yield from self.consumer.commit()  # close() commits, too
                            app.finished(self)
                            return
                    yield self.env.timeout(app.spec.poll_interval)
                    yield from self._step()
                    continue
                self.idle = False
                batch = self._take(records)
                yield from self._process(len(batch))
                if app.spec.transactional:
                    yield from self._transaction(batch)
                else:
                    yield from self._at_least_or_most_once(batch)
        except (simpy.Interrupt, _Dead):
            return

    def close_and_finish(self, caller: _Instance):  # type: ignore[no-untyped-def]
        """The group's work is done: commit (auto-commit's close does), leave, finish."""
        if self is not caller and self.process.is_alive:
            self.process.interrupt("finished")
        if self.consumer.auto_commit:
            yield from self.consumer.commit()
        self.consumer.close()
        self.app.finished(self)

    def _process(self, records: int):  # type: ignore[no-untyped-def]
        """The application's own work on a batch: ``processing`` per record."""
        spec = self.app.spec.processing
        if isinstance(spec, (float, int)):
            took = spec * records
        else:
            took = sum(self.app.rng.uniform(spec.min, spec.max) for _ in range(records))
        if took > 0:
            yield self.env.timeout(took)
            yield from self._step()

    def _poll(self):  # type: ignore[no-untyped-def]
        """The consumer's poll; an exception it raises ends the application."""
        try:
            return (yield from self.consumer.poll())
        except ConsumerException as exc:
            record_failed_poll(self.app.history, self.process_id, self.env.now, exc.describe())
            self.app.stop(self, exc.describe())
            raise _Dead from None

    def _take(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        batch = records[: self.app.spec.batch]
        rest = records[self.app.spec.batch :]
        for tp, offset, _value in reversed(rest):
            self.consumer.seek(tp, offset)  # ends at each partition's first untaken record
        return batch

    def _output(self, tp: TopicPartition, offset: int, value: str) -> str:
        """The latest attempt's output for an input (:meth:`_invoke` counts the attempts). A
        subscribed member may be given back an input it already processed (its commit
        failed, the group rebalanced): its second attempt's output is
        ``value>name/incarnation+1``, so every attempt is told apart."""
        output = self.app.output_value(value, self.process_id)
        repeats = self._attempts.get((tp, offset), 1) - 1
        return f"{output}+{repeats}" if repeats else output

    def _invoke(self, batch: list[ConsumerRecord], txn_id: str | None) -> list[int]:
        ids = []
        if txn_id is not None:
            self._transactions += 1
        for tp, offset, value in batch:
            if self.consumer.subscribed:
                self._attempts[(tp, offset)] = self._attempts.get((tp, offset), 0) + 1
            output = self._output(tp, offset, value)
            topic, partition = tp
            body = {
                "input": {"topic": topic, "partition": partition, "offset": offset, "value": value},
                "outputs": [output],
                "output_topic": self.app.output_topic,
                "transactional_id": txn_id,
            }
            if txn_id is not None:
                body["transaction"] = self._transactions
            op_id = self.app.history.invoke("process", self.process_id, self.env.now, body)
            self.open_ops[op_id] = body
            self.app.counts["sent"] += 1
            ids.append(op_id)
        return ids

    @staticmethod
    def _next_offsets(batch: list[ConsumerRecord]) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp, offset, _value in batch:
            out[tp] = max(out.get(tp, 0), offset + 1)
        return out

    def _rewind(self, batch: list[ConsumerRecord]) -> None:
        first: dict[TopicPartition, int] = {}
        for tp, offset, _value in batch:
            first.setdefault(tp, offset)
        assigned = set(self.consumer.assignment)
        for tp, offset in first.items():
            if tp in assigned:  # a partition the group took away is someone else's now
                self.consumer.seek(tp, offset)

    def _transaction(self, batch: list[ConsumerRecord]):  # type: ignore[no-untyped-def]
        """One transaction for the batch (EOS v2), or, with a transactional.id per
        partition (EOS v1), one per input partition of the batch with that task's producer."""
        if not self.app.per_partition:
            assert self.producer is not None
            group = self.consumer.group_metadata()
            yield from self._transaction_with(self.producer, batch, group)
            return
        by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
        for record in batch:
            by_partition.setdefault(record[0], []).append(record)
        for tp, records in by_partition.items():
            if tp not in self.consumer.assignment:
                continue  # given up meanwhile: its records are the next owner's
            producer = yield from self._task_producer(tp)
            # The pre-KIP-447 sendOffsetsToTransaction(offsets, groupId): no member, no
            # generation, so the coordinator checks nothing of the group.
            yield from self._transaction_with(producer, records, self.app.group)

    def _transaction_with(  # type: ignore[no-untyped-def]
        self,
        producer: KafkaProducer,
        batch: list[ConsumerRecord],
        group: ConsumerGroupMetadata | str,
    ):
        app = self.app
        assert producer.transactions is not None
        ids = self._invoke(batch, producer.config.transactional_id)
        error = producer.begin_transaction()
        if error is None:
            for tp, offset, value in batch:
                blocked = producer.send(
                    app.out_topic,
                    None,
                    self._output(tp, offset, value),
                    None,
                    _ignore,
                    100,
                )
                if blocked is not None:
                    yield blocked
            yield from self._step("processor.after_send")
            offsets = tuple(self._next_offsets(batch).items())
            # KIP-447: the consumer's group metadata, so that the group coordinator refuses
            # the offsets (and the transaction aborts) of a member it no longer has.
            error = yield from wait(
                self.env, producer.send_offsets_to_transaction(offsets, group), app.max_block_ms
            )
            yield from self._step("processor.after_send_offsets")
        committing = error is None
        if committing:
            error = yield from wait(self.env, producer.commit_transaction(), app.max_block_ms)
            yield from self._step()
            if error is None:
                for op_id in ids:
                    self._complete(op_id, "ok", None)
                producer.probe.hit("producer.after_commit", app.name)
                yield from self._step()
                return
        # A commit that timed out may still complete (its EndTxn can be in flight): it must
        # not be aborted, so the instance gives up. Any other non-fatal error (including a
        # failed sendOffsetsToTransaction) is aborted and the batch is processed again.
        if producer.transactions.is_fatal or (
            committing and error.startswith(("TimeoutException", "IllegalState"))
        ):
            self.kill(error)
            app.replace(self)
            raise _Dead
        abort_error = yield from wait(self.env, producer.abort_transaction(), app.max_block_ms)
        yield from self._step()
        if abort_error is not None:
            self.kill(f"{error}; abort failed: {abort_error}")
            app.replace(self)
            raise _Dead
        for op_id in ids:
            self._complete(op_id, "fail", error)
        self._rewind(batch)

    def _at_least_or_most_once(self, batch: list[ConsumerRecord]):  # type: ignore[no-untyped-def]
        app = self.app
        ids = self._invoke(batch, None)
        offsets = self._next_offsets(batch)
        if app.spec.commit == "before_output":
            yield from self.consumer.commit(offsets)
            yield from self._step("processor.after_send_offsets")
        failed: list[str] = []
        if app.store is not None:
            for (topic, partition), offset, value in batch:
                output = self._output((topic, partition), offset, value)
                app.store.write(value, f"{topic}-{partition}", offset, output)
        else:
            producer = self.producer
            assert producer is not None
            for tp, offset, value in batch:

                def done(_v: str, _p: int, _o: int, err: str | None, _mw: bool) -> None:
                    if err is not None:
                        failed.append(err)

                output = self._output(tp, offset, value)
                blocked = producer.send(app.out_topic, None, output, None, done, 100)
                if blocked is not None:
                    yield blocked
            yield producer.flush()
        yield from self._step("processor.after_send")
        if app.spec.commit == "after_output":
            yield from self.consumer.commit(offsets)
            yield from self._step("processor.after_send_offsets")
        for op_id in ids:
            if failed:
                self._complete(op_id, "info", failed[0])
            else:
                self._complete(op_id, "ok", None)


def _ignore(_v: str, _p: int, _o: int, _e: str | None, _mw: bool) -> None:
    pass


def _listed(partitions: list[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in sorted(partitions)]


class GroupMembers:
    """The subscribed processors of one group. Their work is done when every member has
    started and every running one is idle (caught up since the input ended) and not paused,
    all in one stable generation whose assignments cover the input's partitions; then each
    closes its consumer (with auto-commit, a synchronous commit first; then LeaveGroup) and
    finishes."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        self.apps: list[ProcessorApp] = []

    def idle(self, caller: _Instance) -> bool:
        """``caller`` is idle; True when that ends the group's work."""
        generations: set[int] = set()
        covered: list[TopicPartition] = []
        running: list[_Instance] = []
        for app in self.apps:
            if not app.started:
                return False  # a member still to join (``start``)
            instance = app.current
            if app.done.triggered or instance is None:
                continue
            group = instance.consumer.group_coordinator
            if not instance.idle or instance.resumed is not None or group is None:
                return False
            if not group.is_stable():
                return False
            generations.add(group.generation.generation_id)
            covered.extend(instance.consumer.assignment)
            running.append(instance)
        if len(generations) > 1 or sorted(covered) != self.partitions:
            return False
        for instance in running:
            instance.env.process(instance.close_and_finish(caller))
        return True


class ProcessorApp:
    def __init__(
        self,
        env: simpy.Environment,
        spec: Processor,
        network: Network,
        make_producer: Callable[[str, str | None], KafkaProducer],
        make_consumer: Callable[[str], KafkaConsumer],
        partitions: list[TopicPartition],
        history: HistoryRecorder,
        probe: Probe,
        inputs_done: simpy.Event,
        max_block_ms: float,
        store: ExternalStore | None,
        *,
        members: GroupMembers | None = None,
        rebalance: GroupRebalanceConfig | None = None,
        rng: RandomStream | None = None,
    ) -> None:
        self.env = env
        # subscribe(): the group's members (shared by its processors) and the settings.
        self.rebalance = rebalance
        self.members = members
        if members is not None:
            members.apps.append(self)
        self.rng = rng
        self.spec = spec
        self.name = spec.name
        self.network = network
        self.history = history
        self.probe = probe
        self.inputs_done = inputs_done
        self.max_block_ms = max_block_ms
        self.store = store
        self.partitions = partitions
        self.group = spec.input.group or spec.name
        self.out_topic = spec.output.topic or ""
        self.needs_producer = store is None
        self._make_producer = make_producer
        # EOS v1: a transactional.id per input partition, ``<group>-<topic>-<n>``.
        self.per_partition = spec.transactional_id_per == "partition"
        self._make_consumer = make_consumer
        self.counts = new_counts()
        self.incarnation = -1
        self.instances: list[_Instance] = []
        self.current: _Instance | None = None
        self.down_count = 0
        self.done = env.event()
        self.inputs_done_at: float | None = None
        inputs_done.callbacks.append(lambda _ev: setattr(self, "inputs_done_at", env.now))
        if inputs_done.triggered:
            self.inputs_done_at = env.now
        # A processor may start late (``start``: a member joining its group, scaling out).
        self.started = spec.start <= 0
        if self.started:
            self._start()
        else:
            env.timeout(spec.start).callbacks.append(self._first_start)

    def make_producer(self, node: str, transactional_id: str | None = None) -> KafkaProducer:
        """The producer of an instance (or, with ``transactional_id``, of one of its tasks)."""
        return self._make_producer(node, transactional_id)

    def make_consumer(self, node: str, listener: _Instance) -> KafkaConsumer:
        consumer = self._make_consumer(node)
        if self.rebalance is not None:
            consumer.subscribe([self.spec.input.topic], self.rebalance, listener)
            consumer.commit_observer = listener.on_commit
        else:
            consumer.assign(list(self.partitions))
        return consumer

    @property
    def output_topic(self) -> str:
        """Where the outputs go: the output topic, or the external store's changelog topic."""
        return self.store.topic if self.store is not None else self.out_topic

    @staticmethod
    def output_value(value: str, process_id: str) -> str:
        """The output of one attempt at an input: unique per instance, so that the checker
        can tell which attempt's output became visible."""
        return f"{value}>{process_id}"

    def _start(self) -> None:
        self.incarnation += 1
        instance = _Instance(self, self.incarnation)
        self.instances.append(instance)
        self.current = instance

    def _first_start(self, _event: simpy.Event) -> None:
        self.started = True
        if self.down_count == 0 and not self.done.triggered:
            self._start()

    def replace(self, instance: _Instance) -> None:
        """A fatal error ended the current instance: start a new one."""
        if instance is self.current and not self.done.triggered:
            self._start()

    def finished(self, instance: _Instance) -> None:
        instance.alive = False
        if instance is self.current and not self.done.triggered:
            self.done.succeed()

    def stop(self, instance: _Instance, error: str) -> None:
        """An exception escaped the instance's poll loop: the application exits."""
        instance.kill(error)
        if instance is self.current and not self.done.triggered:
            self.current = None
            self.done.succeed()

    # -- faults ------------------------------------------------------------------------
    def crash(self) -> None:
        self.down_count += 1
        if self.current is not None:
            self.current.kill("ProcessCrashed: the processor died in the step")
            self.current = None

    def restart(self) -> None:
        self.down_count = max(self.down_count - 1, 0)
        idle = self.down_count == 0 and self.current is None
        if self.started and idle and not self.done.triggered:
            self._start()

    def pause(self) -> None:
        instance = self.current
        if instance is None:
            return
        instance.pause()

    def resume(self) -> None:
        for instance in self.instances:
            instance.resume()

    def abandon_open_ops(self, error: str) -> int:
        n = 0
        for instance in self.instances:
            n += len(instance.open_ops)
            instance._complete_all("info", error)
        return n
