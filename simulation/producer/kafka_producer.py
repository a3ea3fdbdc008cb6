"""KafkaProducer: ``send()`` -> partitioner -> RecordAccumulator, drained by the Sender.

``send()`` never waits on the network. It waits only when ``buffer.memory`` is exhausted:
it blocks for at most ``max.block.ms`` and then fails with a TimeoutException. The record
then never entered the accumulator, so it cannot have been written. Completion is reported
through the record's callback with the offset (``-1`` when unknown, as with ``acks=0``) or
the error. The callback is told the record's value first, so that one callback can serve
every record: an application that made one per send would hold an object for every record
outstanding, and a run may hold nearly all of them outstanding at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import simpy

from eosim.simulation.config import ProducerConfig
from eosim.simulation.host import Spell
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.producer.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    RecordAccumulator,
)
from eosim.simulation.producer.partitioner import Partitioner
from eosim.simulation.producer.sender import Sender
from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transactions import Transactions
from eosim.simulation.protocol import ConsumerGroupMetadata, TopicPartition
from eosim.simulation.rng import RandomStream
from eosim.simulation.rules import ProtocolRules

# (value, partition, offset, error, whether the record may have been written)
Callback = Callable[[str, int, int, str | None, bool], None]
# (key, value) -> an event to wait on if the send must block for memory (KafkaProducer.bind_send)
BoundSend = Callable[..., "simpy.Event | None"]


class KafkaProducer:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        metadata: ClusterMetadata,
        config: ProducerConfig,
        rng: RandomStream,
        rules: ProtocolRules | None = None,
        probe: Probe | None = None,
        host: str | None = None,
        metadata_rng: RandomStream | None = None,
    ) -> None:
        rules = rules or ProtocolRules()
        self.probe = probe or Probe()
        self.env = env
        self.node = node
        self.metadata = metadata
        self.network = network
        self.config = config
        self.accumulator = RecordAccumulator(
            config.batch_size,
            config.linger_ms,
            config.buffer_memory,
            config.delivery_timeout_ms,
            config.enable_idempotence,
        )
        self.transaction_manager = (
            TransactionManager(rules.failed_batch_marks_sequence_unresolved)
            if config.enable_idempotence
            else None
        )
        self.transactions: Transactions | None = None
        if config.transactional_id is not None:
            assert self.transaction_manager is not None
            self.transactions = Transactions(
                env,
                config.transactional_id,
                config.transaction_timeout_ms,
                config.retry_backoff_ms,
                self.transaction_manager,
                rules.transaction_version,
                rules.txn_offset_commit_v6,
            )
            self.transaction_manager.txn = self.transactions
        self.partitioner = Partitioner(rng, config.batch_size, config.partitioner_ignore_keys)
        self.sender = Sender(
            env,
            node,
            network,
            metadata,
            self.accumulator,
            config,
            self.transaction_manager,
            rng,
            self._on_batches_done,
            metadata_rng,
            self.probe,
        )
        network.register(node, self.sender.receive, client=True, host=host)
        # The resource model: the Sender thread at work on a request it sent (its CPU for the
        # request and its answer) until then; and whether the whole process is frozen.
        self._busy = Spell(env, self._sender_stops, self._sender_done)
        self._process_paused = False
        network.sender_busy[node] = self.sender_busy
        if self.transactions is not None:
            self.transactions.wakeup = self.sender.wakeup
        self._memory_waiters: deque[simpy.Event] = deque()
        self._topic_partitions: dict[str, list[TopicPartition]] = {}
        self._flush_waiters: list[simpy.Event] = []
        # KIP-1319 (TxnOffsetCommit v6 names topics by id): the consumed topics whose
        # metadata sendOffsetsToTransaction has waited for.
        self._offset_topics: set[str] = set()

    def send(
        self,
        topic: str,
        key: str | None,
        value: str,
        partition: int | None,
        callback: Callback,
        value_bytes: int,
    ) -> simpy.Event | None:
        """Append a record. Returns an event to wait on if ``send()`` must block for memory."""
        return self.bind_send(topic, partition, callback, value_bytes)(key, value)

    def bind_send(
        self, topic: str, partition: int | None, callback: Callback, value_bytes: int
    ) -> BoundSend:
        """:meth:`send` with its topic, partition, callback and value size fixed: a function
        of the key and the value, for an application that sends many records alike (the
        producer application sends every record of a run through one)."""
        env = self.env
        accumulator = self.accumulator
        append = accumulator.append
        batch_size = accumulator.batch_size
        buffer_memory = accumulator.buffer_memory
        partitions = self.metadata.topics[topic]
        choose = self.partitioner.partition
        transactions = self.transactions
        wakeup = self.sender.wakeup
        waiters = self._memory_waiters
        base_size = value_bytes + RECORD_OVERHEAD
        # The topic-partitions this send can go to, made once (the explicit one, or one per
        # partition for the partitioner to choose from).
        fixed = (topic, partition) if partition is not None else None
        tps = self._topic_partitions.get(topic)
        if tps is None:
            tps = self._topic_partitions[topic] = [(topic, p) for p in range(partitions)]
        # With the resource model, the application thread's work on each record it sends.
        loads = self.network.record_loads
        record_load = loads.get(self.network.host(self.node)) if loads is not None else None

        def bound_send(key: str | None, value: str, waited: bool = False) -> simpy.Event | None:
            size = base_size + len(key) if key else base_size
            # `RecordAccumulator.has_room_for`, spelt out on this path taken once per record.
            need = size + BATCH_OVERHEAD
            if need < batch_size:
                need = batch_size
            if not waited and (waiters or accumulator.used_memory + need > buffer_memory):
                return env.process(
                    self._blocking_send(topic, key, value, partition, callback, value_bytes, size)
                )
            tp = fixed if fixed is not None else tps[choose(topic, key, partitions, size)]
            if transactions is not None:
                transactions.maybe_add_partition(tp)
            if record_load is not None:
                record_load(env.now)
            if append(tp, value, size, callback, env.now):
                wakeup()
            return None

        return bound_send

    def _blocking_send(self, topic, key, value, partition, callback, value_bytes, size):  # type: ignore[no-untyped-def]
        """The send once the accumulator has room for ``size`` bytes, or a TimeoutException
        after ``max.block.ms``. (It binds the send again rather than being handed the bound
        one: a bound send that named itself would be a reference cycle, garbage only the
        collector frees, made by every ``send()``.)"""
        deadline = self.env.now + self.config.max_block_ms
        while not self.accumulator.has_room_for(size):
            left = deadline - self.env.now
            if left <= 0:
                callback(
                    value,
                    partition if partition is not None else -1,
                    -1,
                    "TimeoutException: failed to allocate memory within max.block.ms",
                    False,
                )
                return
            waiter = self.env.event()
            self._memory_waiters.append(waiter)
            yield self.env.any_of([waiter, self.env.timeout(left)])
            if waiter in self._memory_waiters:
                self._memory_waiters.remove(waiter)
        self.bind_send(topic, partition, callback, value_bytes)(key, value, True)

    def _on_batches_done(self) -> None:
        while self._memory_waiters and self.accumulator.has_room_for(0):
            waiter = self._memory_waiters.popleft()
            if not waiter.triggered:
                waiter.succeed()
        if self.accumulator.incomplete == 0 and self._flush_waiters:
            waiters, self._flush_waiters = self._flush_waiters, []
            self.accumulator.flushing = max(self.accumulator.flushing - len(waiters), 0)
            for w in waiters:
                w.succeed()

    def flush(self) -> simpy.Event:
        """An event that fires once every record sent so far has completed."""
        event = self.env.event()
        if self.accumulator.incomplete == 0:
            event.succeed()
            return event
        self.accumulator.flushing += 1
        self._flush_waiters.append(event)
        self.sender.wakeup()
        return event

    # -- transactions ------------------------------------------------------------------
    def _txn(self) -> Transactions:
        if self.transactions is None:
            raise RuntimeError(f"{self.node}: not a transactional producer")
        return self.transactions

    def init_transactions(self) -> simpy.Event:
        return self._txn().init_transactions()

    def begin_transaction(self) -> str | None:
        return self._txn().begin()

    def send_offsets_to_transaction(
        self,
        offsets: tuple[tuple[TopicPartition, int], ...],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> simpy.Event:
        """The event's value is None or the error. Under TxnOffsetCommit v6 (KIP-1319, Kafka
        4.4: rule ``txn_offset_commit_v6``, transaction version 2) the producer first waits,
        at most ``max.block.ms``, for the metadata of consumed topics it has not used yet."""
        txn = self._txn()
        if txn.txn_offset_commit_v6:
            topics = sorted({tp[0] for tp, _offset in offsets} - self._offset_topics)
            if topics:
                return self.env.process(
                    self._send_offsets_after_metadata(topics, offsets, group_metadata)
                )
        return txn.send_offsets_to_transaction(offsets, group_metadata)

    def _send_offsets_after_metadata(  # type: ignore[no-untyped-def]
        self,
        topics: list[str],
        offsets: tuple[tuple[TopicPartition, int], ...],
        group_metadata: ConsumerGroupMetadata | str,
    ):
        """KIP-1319: the producer's metadata must know the consumed ``topics`` (their ids go
        into TxnOffsetCommit v6) before the offsets join the transaction: one metadata round
        trip on a producer's first call for a topic, or a TimeoutException after
        ``max.block.ms`` (the transaction is left as it was)."""
        updated = self.env.event()
        self.sender.await_metadata(lambda: None if updated.triggered else updated.succeed())
        yield self.env.any_of([updated, self.env.timeout(self.config.max_block_ms)])
        if not updated.triggered:
            return (
                f"TimeoutException: Topic {topics[0]} not present in metadata after "
                f"{self.config.max_block_ms} ms."
            )
        self._offset_topics.update(topics)
        return (yield self._txn().send_offsets_to_transaction(offsets, group_metadata))

    def commit_transaction(self) -> simpy.Event:
        """Flush, then end the transaction with a commit. The event's value is None or the
        error; it may never fire if the coordinator stays unreachable (callers time out)."""
        self.probe.hit("producer.before_end_txn", self.node)
        if not self.sender.running:
            return self.env.event()  # the process died here
        result = self._txn().commit()
        self.flush()
        return result

    def abort_transaction(self) -> simpy.Event:
        txn = self._txn()
        # Batches never sent are failed now; sent ones must complete before EndTxn goes out.
        self.sender.abort_undrained_batches(txn.last_error or "TransactionAbortedException")
        result = txn.abort()
        self.sender.wakeup()
        return result

    def pause(self) -> None:
        """The process freezes (a GC pause): the Sender stops, arriving bytes wait."""
        self._process_paused = True
        self.sender.pause()
        self.network.pause_node(self.node)

    def resume(self) -> None:
        """Bytes that arrived meanwhile are read first, then the Sender runs again: as
        NetworkClient.poll returns them before the next send loop. A Sender still at work on
        its requests (:meth:`sender_busy`) goes on once that work ends."""
        self._process_paused = False
        if self._busy.holding:
            return
        self._read_then_send()

    def sender_busy(self, ms: float) -> None:
        """The resource model: the Sender thread spends ``ms`` (waiting for a core, then
        working) on a request it has sent, after the work already queued on it. Meanwhile it
        sends nothing and its answers wait in the socket; the application's thread, another
        thread, goes on appending records."""
        self._busy.hold(ms)

    def _sender_stops(self) -> None:
        self.sender.pause()
        self.network.pause_node(self.node)

    def _sender_done(self) -> None:
        if not self._process_paused and self.sender.running:
            self._read_then_send()

    def _read_then_send(self) -> None:
        """The Sender reads what waited in its socket, then sends again, unless an answer it
        read set it to work (``client_answer``): then it goes on when that work ends."""
        self.network.resume_node(self.node)
        if not self._busy.holding:
            self.sender.resume()

    def crash(self) -> None:
        """The process dies: nothing completes, in-flight requests are on their own. What
        waited in its socket goes with it, and the node is not left paused for the process
        a restart builds on it (a crash while the Sender was busy or the process frozen)."""
        self.sender.abandon()
        self._process_paused = False
        if self.network.sender_busy.get(self.node) == self.sender_busy:
            del self.network.sender_busy[self.node]
        self.network.forget_node(self.node)
