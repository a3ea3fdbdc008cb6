"""A small in-process cluster for coordinator and broker tests: the model's own
:class:`eosim.simulation.cluster.Cluster` (brokers, their coordinators, the marker channel, the
KIP-890 hooks), wired exactly as a run wires it, without applications or faults, plus a
client node "c" that sends requests and waits for the answers."""

from __future__ import annotations

from typing import Any

import simpy

from eosim.simulation.broker.broker import Broker, BrokerSettings
from eosim.simulation.broker.log import LogConfig
from eosim.simulation.broker.log_manager import LogManagerSettings
from eosim.simulation.broker.partition import TopicSettings
from eosim.simulation.cluster import Cluster as ModelCluster
from eosim.simulation.cluster import ClusterSettings
from eosim.simulation.controller.quorum_controller import ControllerSettings
from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.runtime import CoordinatorSettings
from eosim.simulation.coordinator.transaction_state import TransactionMetadata
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import (
    AddPartitionsToTxnRequest,
    BatchData,
    EndTxnRequest,
    Errors,
    FetchPartition,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    PartitionResponse,
    ProduceRequest,
    TopicPartition,
    WriteTxnMarkersRequest,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS

# The controller fences a silent broker after FAILOVER_MS (its coordinators move then); a
# restarted broker leads again within RECOVERY_MS (registration waits for the fencing).
FAILOVER_MS = 100.0
RECOVERY_MS = 200.0


def _metadata(brokers: int, partitions: tuple[TopicPartition, ...]) -> ClusterMetadata:
    """Metadata holding exactly ``partitions`` (each topic's partitions must be 0..n-1)."""
    topics: dict[str, int] = {}
    for topic, p in partitions:
        topics[topic] = max(topics.get(topic, 0), p + 1)
    metadata = ClusterMetadata(tuple(f"broker-{i}" for i in range(brokers)), topics)
    if sorted(metadata.partitions()) != sorted(partitions):
        raise ValueError(f"partitions {partitions} are not 0..n-1 of each topic")
    return metadata


class Cluster(ModelCluster):
    def __init__(
        self,
        brokers: int = 2,
        partitions: tuple[TopicPartition, ...] = (("t", 0), ("t", 1)),
        version: str = "4.0",
        log: LogManagerSettings | None = None,
        topic_logs: dict[str, LogConfig] | None = None,
        **rules: Any,
    ) -> None:
        """``log``: the brokers' log housekeeping settings (Kafka's defaults); ``topic_logs``:
        topic -> its log configs (retention, segments)."""
        env = simpy.Environment()
        self.net = Network(
            env,
            NetworkSettings(LatencyModel("constant", value_ms=1.0)),
            RandomStreams(1).stream("n"),
        )
        self.inbox: list[Any] = []
        self.net.register("c", lambda m: self.inbox.append(m.payload), client=True)
        self.fences: list[tuple[str, int, int, float]] = []
        metadata = _metadata(brokers, partitions)
        self.leaders = {tp: metadata.initial_leader(tp) for tp in partitions}
        super().__init__(
            env,
            self.net,
            metadata,
            VERSIONS[version].with_overrides(rules),
            ClusterSettings(
                BrokerSettings(
                    heartbeat_interval_ms=25.0, session_timeout_ms=FAILOVER_MS, startup_ms=5.0
                ),
                CoordinatorSettings(load_ms=10.0),
                controller=ControllerSettings(session_timeout_ms=FAILOVER_MS),
                topics={
                    topic: TopicSettings(log=config) for topic, config in (topic_logs or {}).items()
                },
                log=log if log is not None else LogManagerSettings(),
            ),
            on_fence=lambda txn_id, pid, epoch, t: self.fences.append((txn_id, pid, epoch, t)),
        )
        self._cid = 0

    # -- requests --------------------------------------------------------------------------
    def coordinator_of(self, txn_id: str, key_type: str = "transaction") -> str:
        """The leader of the key's internal partition (activated first, as a FindCoordinator
        would)."""
        partition = internal_partition(txn_id, key_type)
        self.activate(partition)
        node = self.leader_of(partition)
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
        value: str | None = None,
        timestamp: float | None = None,
    ) -> PartitionResponse:
        """One batch of ``count`` records (each ``value``, or ``v<sequence>``; with the given
        max ``timestamp``, else the leader's clock); the leader's answer for it."""
        values = (value,) * count if value is not None else (f"v{seq + i}" for i in range(count))
        batch = BatchData(pid, epoch, seq, tuple(values), transactional, timestamp)
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

    def fetch(
        self, tp: TopicPartition, offset: int, isolation: str = "read_uncommitted"
    ) -> FetchPartition:
        """A consumer's fetch of ``tp`` at ``offset``; the leader's answer for it."""
        answer = self.call(
            self.leaders[tp], lambda cid: FetchRequest(cid, ((tp, offset),), isolation)
        )
        return answer.partitions[0][1]

    def list_offsets(
        self, tp: TopicPartition, timestamp: int, isolation: str = "read_uncommitted"
    ) -> tuple[Errors, int]:
        """ListOffsets for ``tp`` (EARLIEST_TIMESTAMP or LATEST_TIMESTAMP): (error, offset)."""
        answer = self.call(
            self.leaders[tp], lambda cid: ListOffsetsRequest(cid, ((tp, timestamp),), isolation)
        )
        _tp, error, offset = answer.partitions[0]
        return error, offset

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)

    # -- the transaction log's availability ------------------------------------------------
    def txn_id_led_by(self, node: str) -> str:
        """A transactional id whose ``__transaction_state`` partition ``node`` leads."""
        for i in range(200):
            txn_id = f"tx{i}"
            if self.coordinator_of(txn_id) == node:
                return txn_id
        raise AssertionError(f"no transactional id led by {node}")

    def stop_log_followers(self, txn_id: str) -> list[str]:
        """Crash the followers of ``txn_id``'s ``__transaction_state`` partition (min ISR 2)
        and wait until the controller has fenced them: the partition's ISR is its leader
        alone, and every write to it is refused with NOT_ENOUGH_REPLICAS, which the coordinator
        answers COORDINATOR_NOT_AVAILABLE. Returns the crashed brokers."""
        partition = internal_partition(txn_id, "transaction")
        leader = self.coordinator_of(txn_id)
        followers = [b for b in self.metadata.replicas(partition) if b != leader]
        for b in followers:
            self.brokers[b].crash()
        self.run(FAILOVER_MS + 50)
        assert self.controller.registrations[partition].isr == (leader,)
        return followers

    def restart(self, brokers: list[str]) -> None:
        """Restart ``brokers`` and wait until they are registered, caught up and in sync."""
        for b in brokers:
            self.brokers[b].restart()
        self.run(3_000)
