"""KafkaProducer: ``send()`` -> partitioner -> RecordAccumulator, drained by the Sender.

``send()`` never waits on the network. It waits only when ``buffer.memory`` is exhausted:
it blocks for at most ``max.block.ms`` and then fails with a TimeoutException. The record
then never entered the accumulator, so it cannot have been written. Completion is reported
through the record's callback with the offset (``-1`` when unknown, as with ``acks=0``) or
the error.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import simpy

from simulation.config import ProducerConfig
from simulation.metadata import ClusterMetadata
from simulation.network import Network
from simulation.producer.accumulator import RECORD_OVERHEAD, RecordAccumulator, RecordEntry
from simulation.producer.partitioner import Partitioner
from simulation.producer.sender import Sender
from simulation.producer.transaction_manager import TransactionManager
from simulation.rng import RandomStream

# (partition, offset, error, whether the record may have been written)
Callback = Callable[[int, int, str | None, bool], None]


class KafkaProducer:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        metadata: ClusterMetadata,
        config: ProducerConfig,
        rng: RandomStream,
    ) -> None:
        self.env = env
        self.node = node
        self.metadata = metadata
        self.config = config
        self.accumulator = RecordAccumulator(
            config.batch_size,
            config.linger_ms,
            config.buffer_memory,
            config.delivery_timeout_ms,
            config.enable_idempotence,
        )
        self.transaction_manager = TransactionManager() if config.enable_idempotence else None
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
        )
        network.register(node, self.sender.receive, client=True)
        self._memory_waiters: deque[simpy.Event] = deque()
        self._flush_waiters: list[simpy.Event] = []

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
        size = value_bytes + (len(key) if key else 0) + RECORD_OVERHEAD
        if not self.accumulator.has_room_for(size) or self._memory_waiters:
            return self.env.process(
                self._blocking_send(topic, key, value, partition, callback, size)
            )
        self._append(topic, key, value, partition, callback, size)
        return None

    def _append(
        self,
        topic: str,
        key: str | None,
        value: str,
        partition: int | None,
        callback: Callback,
        size: int,
    ) -> None:
        n = self.metadata.topics[topic]
        if partition is None:
            partition = self.partitioner.partition(topic, key, n, size)
        p = partition

        def on_complete(offset: int, error: str | None, maybe_written: bool) -> None:
            callback(p, offset, error, maybe_written)

        if self.accumulator.append(
            (topic, p), RecordEntry(value, key, size, on_complete), self.env.now
        ):
            self.sender.wakeup()

    def _blocking_send(self, topic, key, value, partition, callback, size):  # type: ignore[no-untyped-def]
        deadline = self.env.now + self.config.max_block_ms
        while not self.accumulator.has_room_for(size):
            left = deadline - self.env.now
            if left <= 0:
                callback(
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
        self._append(topic, key, value, partition, callback, size)

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

    def crash(self) -> None:
        """The process dies: nothing completes, in-flight requests are on their own."""
        self.sender.abandon()
