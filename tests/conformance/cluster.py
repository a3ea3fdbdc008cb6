"""A small in-process cluster for coordinator and broker tests: brokers, their transaction
coordinators, the marker channel and a client node "c" that sends requests and waits for the
answers. Wired as ``simulation.runner`` wires a run, without applications or faults."""

from __future__ import annotations

from typing import Any

import simpy

from simulation.broker.broker import Broker, BrokerSettings
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorDirectory,
    internal_partition,
)
from simulation.coordinator.group_coordinator import OffsetStore
from simulation.coordinator.runtime import CoordinatorRuntime, CoordinatorSettings
from simulation.coordinator.transaction_log import TransactionLog
from simulation.coordinator.transaction_state import TransactionMetadata
from simulation.network import LatencyModel, Network, NetworkSettings
from simulation.protocol import (
    AddPartitionsToTxnRequest,
    BatchData,
    EndTxnRequest,
    Errors,
    InitProducerIdRequest,
    PartitionResponse,
    ProduceRequest,
    TopicPartition,
    WriteTxnMarkersRequest,
)
from simulation.rng import RandomStreams
from simulation.rules import VERSIONS


class Cluster:
    def __init__(
        self,
        brokers: int = 2,
        partitions: tuple[TopicPartition, ...] = (("t", 0), ("t", 1)),
        version: str = "4.0",
        **rules: Any,
    ) -> None:
        self.env = simpy.Environment()
        self.rules = VERSIONS[version].with_overrides(rules)
        self.net = Network(
            self.env,
            NetworkSettings(LatencyModel("constant", value_ms=1.0)),
            RandomStreams(1).stream("n"),
        )
        names = tuple(f"broker-{i}" for i in range(brokers))
        self.directory = CoordinatorDirectory(self.env, names, failover_ms=100.0)
        self.leaders = {tp: names[tp[1] % brokers] for tp in partitions}
        self.inbox: list[Any] = []
        self.net.register("c", lambda m: self.inbox.append(m.payload), client=True)
        self.fences: list[tuple[str, int, int, float]] = []
        allocator = ProducerIdBlockAllocator()
        self.txn_log = TransactionLog()
        offsets = OffsetStore()
        self.brokers: dict[str, Broker] = {}
        for name in names:
            led = [tp for tp, leader in self.leaders.items() if leader == name]
            broker = Broker(
                self.env,
                name,
                self.net,
                led,
                self.rules,
                allocator,
                BrokerSettings(),
                directory=self.directory,
                verify_partition=self._verify
                if self.rules.transaction_partition_verification
                else None,
                add_partition=self._add_partition,
            )
            self.brokers[name] = broker
        for name, broker in self.brokers.items():
            broker.coordinator = CoordinatorRuntime(
                self.env,
                name,
                self.net,
                self.directory,
                self.txn_log,
                offsets,
                self.rules,
                broker.producer_ids.generate_producer_id,
                self._leader_of,
                CoordinatorSettings(load_ms=10.0),
                broker.probe,
                lambda txn_id, pid, epoch, t: self.fences.append((txn_id, pid, epoch, t)),
            )
            if self.rules.transaction_version >= 2:
                broker.coordinator.add_partition = self._add_partition
        self._cid = 0

    def _leader_of(self, tp: TopicPartition) -> str | None:
        if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return self.directory.owner(tp)
        return self.leaders[tp]

    def _verify(self, txn_id: str | None, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        assert txn_id is not None
        node = self.directory.coordinator(txn_id, "transaction")
        if node is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        runtime = self.brokers[node].coordinator
        assert runtime is not None
        error = runtime.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return error
        return runtime.txn.verify_partition(txn_id, pid, epoch, tp)

    def _add_partition(
        self, txn_id: str | None, pid: int, epoch: int, tp: TopicPartition
    ) -> Errors:
        """Transaction version 2: a leader or group coordinator adds ``tp`` itself."""
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        node = self.directory.coordinator(txn_id, "transaction")
        if node is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        runtime = self.brokers[node].coordinator
        assert runtime is not None
        return runtime.add_partitions(txn_id, pid, epoch, (tp,))

    # -- requests --------------------------------------------------------------------------
    def coordinator_of(self, txn_id: str) -> str:
        node = self.directory.coordinator(txn_id, "transaction")
        assert node is not None
        return node

    def meta(self, txn_id: str) -> TransactionMetadata:
        runtime = self.brokers[self.coordinator_of(txn_id)].coordinator
        assert runtime is not None
        return runtime.txn.transactions[txn_id]

    def call(self, node: str, make: Any, wait_ms: float = 50.0) -> Any:
        """Send the request ``make(correlation_id)`` to ``node``; the answer (None if none)."""
        self._cid += 1
        cid = self._cid
        self.net.send("c", node, make(cid))
        self.env.run(until=self.env.now + wait_ms)
        answers = [a for a in self.inbox if getattr(a, "correlation_id", None) == cid]
        return answers[-1] if answers else None

    def init(self, txn_id: str, expected: tuple[int, int] | None = None) -> Any:
        pid, epoch = expected if expected is not None else (-1, -1)
        return self.call(
            self.coordinator_of(txn_id),
            lambda cid: InitProducerIdRequest(cid, txn_id, 60_000, pid, epoch),
        )

    def add(self, txn_id: str, pid: int, epoch: int, *tps: TopicPartition) -> Errors:
        answer = self.call(
            self.coordinator_of(txn_id),
            lambda cid: AddPartitionsToTxnRequest(cid, txn_id, pid, epoch, tps),
        )
        return answer.error

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, wait_ms: float = 50.0) -> Any:
        return self.call(
            self.coordinator_of(txn_id),
            lambda cid: EndTxnRequest(cid, txn_id, pid, epoch, commit),
            wait_ms,
        )

    # -- a partition leader ----------------------------------------------------------------
    def leader(self, tp: TopicPartition) -> Broker:
        return self.brokers[self.leaders[tp]]

    def produce(
        self,
        tp: TopicPartition,
        pid: int,
        epoch: int,
        seq: int,
        count: int = 1,
        transactional: bool = False,
        txn_id: str | None = None,
    ) -> PartitionResponse:
        """One batch of ``count`` records; the leader's answer for it."""
        batch = BatchData(
            pid, epoch, seq, tuple(f"v{seq + i}" for i in range(count)), transactional
        )
        answer = self.call(
            self.leaders[tp],
            lambda cid: ProduceRequest(cid, -1, [(tp, batch)], transactional_id=txn_id),
        )
        return answer.results[0]

    def marker(
        self, tp: TopicPartition, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> Errors:
        answer = self.call(
            self.leaders[tp],
            lambda cid: WriteTxnMarkersRequest(cid, pid, epoch, commit, coordinator_epoch, (tp,)),
        )
        return answer.results[0][1]

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)
