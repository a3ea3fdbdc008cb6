"""The Kafka cluster of a run: brokers, coordinators and what they share, as one object.

A :class:`Cluster` is assembled once, before any application exists, from the cluster
metadata (brokers, topics, static partition leaders), the protocol rules and its settings:

* the :class:`CoordinatorDirectory` (which broker leads each ``__transaction_state`` and
  ``__consumer_offsets`` partition; the controller's part);
* the cluster-wide producer-id block allocator, the transaction log and the offset store
  (durable storage every coordinator can load, until replication lands);
* one :class:`Broker` per broker name, in the metadata's order, each hosting a
  :class:`CoordinatorRuntime`;
* the broker-to-coordinator calls of KIP-890 (:meth:`verify_partition`, part 1, and
  :meth:`add_partition`, part 2), which a leader makes on a transaction's first produce.

It also names what the nemesis may crash or pause (:meth:`fault_targets`) and writes the
cluster's final state into a history (:meth:`collect_logs`, :meth:`collect_transactions`).

Extending it: a new broker-side component is built in ``__init__`` after the brokers it
needs (creation order is event order, so add it after everything that exists today to keep
histories unchanged), is reached through a method here rather than a closure, joins
:meth:`fault_targets` if it can fail on its own, and writes its end state from a
``collect_*`` method that the runner's collect phase calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from simulation.broker.broker import Broker, BrokerSettings
from simulation.broker.log import PartitionLog
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorDirectory,
    internal_partition,
)
from simulation.coordinator.group_coordinator import OffsetStore
from simulation.coordinator.runtime import CoordinatorRuntime, CoordinatorSettings, FenceListener
from simulation.coordinator.transaction_log import TransactionLog
from simulation.metadata import ClusterMetadata
from simulation.nemesis import FaultTarget
from simulation.network import Network
from simulation.probe import Probe
from simulation.protocol import Errors, TopicPartition
from simulation.rules import ProtocolRules

if TYPE_CHECKING:
    from simulation.history import HistoryRecorder
    from simulation.scenario import Scenario


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """The cluster's timings: request handling, coordinator loading and timers, and how long
    the controller takes to move a dead broker's coordinator partitions."""

    broker: BrokerSettings = field(default_factory=BrokerSettings)
    coordinator: CoordinatorSettings = field(default_factory=CoordinatorSettings)
    coordinator_failover_ms: float = 100.0

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ClusterSettings:
        c = scenario.cluster
        return cls(
            BrokerSettings(request_time_ms=c.request_time_ms),
            CoordinatorSettings(
                load_ms=c.coordinator_load,
                abort_check_interval_ms=c.transaction_abort_check_interval,
                transactional_id_expiration_ms=c.transactional_id_expiration,
                expiration_check_interval_ms=c.transactional_id_cleanup_interval,
            ),
            c.coordinator_failover,
        )


class Cluster:
    """Brokers, their coordinators and the state they share (see the module docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        network: Network,
        metadata: ClusterMetadata,
        rules: ProtocolRules,
        settings: ClusterSettings | None = None,
        probe: Probe | None = None,
        on_fence: FenceListener | None = None,
    ) -> None:
        settings = settings if settings is not None else ClusterSettings()
        self.env = env
        self.network = network
        self.metadata = metadata
        self.rules = rules
        self.settings = settings
        self.probe = probe if probe is not None else Probe()
        self.directory = CoordinatorDirectory(
            env, metadata.brokers, settings.coordinator_failover_ms
        )
        self.allocator = ProducerIdBlockAllocator()
        verifier = self.verify_partition if rules.transaction_partition_verification else None
        self.brokers: dict[str, Broker] = {}
        for name in metadata.brokers:
            self.brokers[name] = Broker(
                env,
                name,
                network,
                metadata.partitions_led_by(name),
                rules,
                self.allocator,
                settings.broker,
                self.probe,
                self.directory,
                verifier,
                self.add_partition,
            )
        self.txn_log = TransactionLog()
        self.offset_store = OffsetStore()
        for name, broker in self.brokers.items():
            broker.coordinator = CoordinatorRuntime(
                env,
                name,
                network,
                self.directory,
                self.txn_log,
                self.offset_store,
                rules,
                broker.producer_ids.generate_producer_id,
                self.leader_of,
                settings.coordinator,
                self.probe,
                on_fence,
            )
            if rules.transaction_version >= 2:
                broker.coordinator.add_partition = self.add_partition

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        env: simpy.Environment,
        network: Network,
        history: HistoryRecorder,
        probe: Probe,
    ) -> Cluster:
        """The cluster a scenario describes; every fencing is recorded in ``history``."""
        return cls(
            env,
            network,
            ClusterMetadata(tuple(scenario.broker_names()), scenario.topic_partitions()),
            scenario.protocol_rules(),
            ClusterSettings.from_scenario(scenario),
            probe,
            lambda txn_id, pid, epoch, t: history.fence(t, txn_id, pid, epoch),
        )

    # -- lookups ---------------------------------------------------------------------------
    def leader_of(self, tp: TopicPartition) -> str | None:
        """The broker leading ``tp``: an internal partition's current owner, a data
        partition's static leader."""
        if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return self.directory.owner(tp)
        return self.metadata.leader(tp)

    def transaction_runtime(self, txn_id: str) -> CoordinatorRuntime | None:
        """The coordinator runtime of the live broker coordinating ``txn_id``, if any."""
        node = self.directory.coordinator(txn_id, "transaction")
        return self.brokers[node].coordinator if node is not None else None

    def partition_log(self, tp: TopicPartition) -> PartitionLog:
        """The leader's log of data partition ``tp``."""
        return self.brokers[self.metadata.leader(tp)].logs[tp]

    # -- KIP-890: a leader asks the transaction coordinator ------------------------------
    def verify_partition(
        self, txn_id: str | None, pid: int, epoch: int, tp: TopicPartition
    ) -> Errors:
        """Part 1: is ``tp`` in the producer's ongoing transaction (a leader's check before
        a partition's first transactional append)?"""
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        runtime = self.transaction_runtime(txn_id)
        if runtime is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if runtime.partition_error(internal_partition(txn_id, "transaction")) is not Errors.NONE:
            return Errors.COORDINATOR_NOT_AVAILABLE
        return runtime.txn.verify_partition(txn_id, pid, epoch, tp)

    def add_partition(self, txn_id: str | None, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """Transaction version 2: a leader (or group coordinator) adds ``tp`` to the
        producer's transaction (AddPartitionsToTxnManager, operation addPartition)."""
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        runtime = self.transaction_runtime(txn_id)
        if runtime is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        return runtime.add_partitions(txn_id, pid, epoch, (tp,))

    # -- faults and the end of a run -----------------------------------------------------
    def fault_targets(self) -> dict[str, FaultTarget]:
        """What the nemesis may crash, restart, pause and resume: every broker, by name."""
        return dict(self.brokers)

    @property
    def requests_handled(self) -> int:
        return sum(b.requests_handled for b in self.brokers.values())

    def collect_logs(self, history: HistoryRecorder) -> None:
        """Each data partition's final log (records and markers), in partition order."""
        for tp in self.metadata.partitions():
            log = self.partition_log(tp)
            history.add_log(tp[0], tp[1], log.records(), log.markers())

    def collect_transactions(self, history: HistoryRecorder) -> None:
        """The committed offsets of every group, then each partition's LSO, log end and
        open transactions (the history's ``offsets`` and ``lso`` end lines)."""
        committed_by_group = self.offset_store.committed
        for group in sorted(committed_by_group):
            committed = committed_by_group[group]
            entries = [
                {"topic": t, "partition": p, "offset": committed[t, p]}
                for t, p in sorted(committed)
            ]
            history.add_end_line({"kind": "offsets", "group": group, "offsets": entries})
        for tp in self.metadata.partitions():
            log = self.partition_log(tp)
            history.add_end_line(
                {
                    "kind": "lso",
                    "topic": tp[0],
                    "partition": tp[1],
                    "lso": log.last_stable_offset(),
                    "log_end_offset": log.log_end_offset,
                    "open_transactions": [
                        {"producer_id": pid, "first_offset": first}
                        for pid, first in log.ongoing.items()
                    ],
                }
            )


__all__ = ["Cluster", "ClusterSettings"]
