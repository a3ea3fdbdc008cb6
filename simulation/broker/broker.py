"""A broker: partition leader for some partitions, serving Produce and InitProducerId.

Requests are handled one at a time in arrival order, which, with FIFO links, keeps Kafka's
guarantee that a connection's requests are processed in the order they were sent. Each
handled request costs ``request_time_ms`` of simulated time.

A crash stops the broker at once: queued requests are dropped and every open connection is
reset (clients are told after one network hop, as a TCP reset would tell them). Logs survive
the crash (a process crash keeps the page cache; replication is a later layer). On restart
each partition's ProducerStateManager is rebuilt by replaying the log, which is what Kafka
does after an unclean shutdown when no snapshot is newer than the log, and the producer-id
block is lost. A pause (GC, SIGSTOP) stops request handling while requests keep arriving.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import simpy

from simulation.broker.log import PartitionLog
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator, ProducerIdManager
from simulation.broker.producer_state import ProducerStateManager, Verdict
from simulation.network import Connection, Message, Network
from simulation.protocol import (
    Disconnected,
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from simulation.rules import ProtocolRules

_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: Errors.INVALID_PRODUCER_EPOCH,
    Verdict.UNKNOWN_PRODUCER_ID: Errors.UNKNOWN_PRODUCER_ID,
}


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    request_time_ms: float = 0.1


class Broker:
    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        network: Network,
        partitions: list[TopicPartition],
        rules: ProtocolRules,
        allocator: ProducerIdBlockAllocator,
        settings: BrokerSettings,
    ) -> None:
        self.env = env
        self.name = name
        self.network = network
        self.rules = rules
        self.settings = settings
        self.logs: dict[TopicPartition, PartitionLog] = {tp: PartitionLog(*tp) for tp in partitions}
        self.producer_state: dict[TopicPartition, ProducerStateManager] = {
            tp: self._new_state() for tp in partitions
        }
        self.producer_ids = ProducerIdManager(allocator)
        self.alive = True
        self.paused = False
        self._queue: deque[Message] = deque()
        self._wakeup = env.event()
        self._connections: dict[int, Connection] = {}
        self.requests_handled = 0
        network.register(name, self.receive, client=False)
        env.process(self._handler_loop())

    def _new_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            self.rules.producer_state_cached_batches,
            self.rules.accept_unknown_producer_any_sequence,
        )

    # -- arrival -----------------------------------------------------------------------
    def receive(self, msg: Message) -> None:
        if not self.alive:
            # Connection refused: the client learns after one hop.
            if msg.conn is not None:
                msg.conn.closed = True
                self._notify_reset(msg.conn)
            return
        if msg.conn is not None:
            self._connections[id(msg.conn)] = msg.conn
        self._queue.append(msg)
        if not self._wakeup.triggered:
            self._wakeup.succeed()

    def _handler_loop(self):  # type: ignore[no-untyped-def]
        request_time = self.settings.request_time_ms
        while True:
            if not self._queue or self.paused or not self.alive:
                self._wakeup = self.env.event()
                yield self._wakeup
                continue
            msg = self._queue.popleft()
            if request_time > 0:
                yield self.env.timeout(request_time)
            if not self.alive:
                continue
            self.requests_handled += 1
            response = self._handle(msg.payload)
            if response is not None:
                self.network.send(self.name, msg.src, response, msg.conn)

    def _handle(self, request: object) -> object | None:
        if isinstance(request, ProduceRequest):
            return self._handle_produce(request)
        if isinstance(request, InitProducerIdRequest):
            return InitProducerIdResponse(
                request.correlation_id, Errors.NONE, self.producer_ids.generate_producer_id(), 0
            )
        raise TypeError(f"{self.name}: unexpected request {type(request).__name__}")

    def _handle_produce(self, request: ProduceRequest) -> ProduceResponse | None:
        now = self.env.now
        results: list[PartitionResponse] = []
        for tp, data in request.partitions:
            log = self.logs.get(tp)
            if log is None:
                results.append(PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            state = self.producer_state[tp]
            last_seq = data.last_sequence
            check = state.check(data.producer_id, data.epoch, data.base_sequence, last_seq)
            if check.verdict is Verdict.APPEND:
                batch = log.append(
                    data.producer_id, data.epoch, data.base_sequence, data.values, now
                )
                state.update(
                    data.producer_id,
                    data.epoch,
                    data.base_sequence,
                    last_seq,
                    batch.base_offset,
                    batch.last_offset,
                )
                results.append(PartitionResponse(Errors.NONE, batch.base_offset))
            elif check.verdict is Verdict.DUPLICATE:
                assert check.duplicate_of is not None
                results.append(PartitionResponse(Errors.NONE, check.duplicate_of.first_offset))
            else:
                results.append(PartitionResponse(_VERDICT_ERRORS[check.verdict]))
        if request.acks == 0:
            return None
        return ProduceResponse(request.correlation_id, results)

    # -- faults ------------------------------------------------------------------------
    def crash(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.paused = False
        self._queue.clear()
        for conn in self._connections.values():
            if not conn.closed:
                conn.closed = True
                self._notify_reset(conn)
        self._connections.clear()

    def _notify_reset(self, conn: Connection) -> None:
        # Sent outside the (now closed) connection, so it is not dropped with it.
        self.network.send(self.name, conn.client, Disconnected(self.name, conn.generation))

    def restart(self) -> None:
        if self.alive:
            return
        self.alive = True
        self.producer_ids.reset()
        for tp, log in self.logs.items():
            state = self._new_state()
            for b in log.batches:
                if b.control is not None:
                    continue  # markers carry no sequences (epoch handling comes with txns)
                state.update(
                    b.producer_id,
                    b.epoch,
                    b.base_sequence,
                    b.last_sequence,
                    b.base_offset,
                    b.last_offset,
                )
            self.producer_state[tp] = state
        self._kick()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._kick()

    def _kick(self) -> None:
        if not self._wakeup.triggered:
            self._wakeup.succeed()
