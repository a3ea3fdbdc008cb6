"""The Kafka cluster of a run: brokers, controller, coordinators and what they share.

A :class:`Cluster` is assembled once, before any application exists, from the cluster
metadata (brokers, topics, each partition's replicas), the protocol rules and its settings:

* the :class:`QuorumController` (node ``controller``): broker liveness, leader elections, ISR
  changes, and the metadata every broker replays; it starts with every replica in sync and
  each partition led by its first replica, and every broker starts with that metadata;
* the :class:`CoordinatorDirectory` (which broker leads each ``__transaction_state`` and
  ``__consumer_offsets`` partition), whose leaders move when the controller fences a broker;
* the cluster-wide producer-id block allocator, the transaction log and the offset store
  (durable storage every coordinator can load, until replication lands);
* one :class:`Broker` per broker name, in the metadata's order, each hosting its replicas
  and a :class:`CoordinatorRuntime`;
* the broker-to-coordinator calls of KIP-890 (:meth:`verify_partition`, part 1, and
  :meth:`add_partition`, part 2), which a leader makes on a transaction's first produce.

It also names what the nemesis may crash, pause or cut the power of (:meth:`fault_targets`)
and writes the cluster's final state into a history (:meth:`collect_logs`,
:meth:`collect_transactions`).

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
from simulation.broker.partition import Partition, TopicSettings
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from simulation.broker.replica_manager import ReplicationSettings
from simulation.controller.partition_change import NO_LEADER, PartitionRegistration
from simulation.controller.quorum_controller import (
    CONTROLLER,
    ControllerSettings,
    QuorumController,
)
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
    """The cluster's timings and configs: request handling, coordinators, replication and
    durability, the controller, and each topic's replication settings."""

    broker: BrokerSettings = field(default_factory=BrokerSettings)
    coordinator: CoordinatorSettings = field(default_factory=CoordinatorSettings)
    replication: ReplicationSettings = field(default_factory=ReplicationSettings)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    topics: dict[str, TopicSettings] = field(default_factory=dict)

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ClusterSettings:
        c = scenario.cluster
        config = c.broker_config()
        topics = {}
        for topic in c.topics:
            tc = c.topic_config(topic)
            topics[topic.name] = TopicSettings(
                topic.replication_factor,
                tc.min_insync_replicas,
                tc.unclean_leader_election_enable,
            )
        return cls(
            BrokerSettings(
                request_time_ms=c.request_time_ms,
                heartbeat_interval_ms=float(config.broker_heartbeat_interval_ms),
            ),
            CoordinatorSettings(
                load_ms=c.coordinator_load,
                abort_check_interval_ms=c.transaction_abort_check_interval,
                transactional_id_expiration_ms=c.transactional_id_expiration,
                expiration_check_interval_ms=c.transactional_id_cleanup_interval,
            ),
            ReplicationSettings(
                replica_fetch_wait_max_ms=float(config.replica_fetch_wait_max_ms),
                replica_fetch_backoff_ms=float(config.replica_fetch_backoff_ms),
                replica_lag_time_max_ms=float(config.replica_lag_time_max_ms),
                replica_socket_timeout_ms=float(config.replica_socket_timeout_ms),
                log_flush_interval_messages=config.log_flush_interval_messages,
                log_flush_interval_ms=config.log_flush_interval_ms,
                log_flush_scheduler_interval_ms=config.log_flush_scheduler_interval_ms,
                os_writeback_ms=c.os_writeback,
            ),
            ControllerSettings(
                session_timeout_ms=float(config.broker_session_timeout_ms),
                request_time_ms=c.request_time_ms,
            ),
            topics,
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
        # Coordinator partitions move when the controller fences their broker.
        self.directory = CoordinatorDirectory(env, metadata.brokers)
        self.allocator = ProducerIdBlockAllocator()
        verifier = self.verify_partition if rules.transaction_partition_verification else None
        self.brokers: dict[str, Broker] = {}
        for name in metadata.brokers:
            self.brokers[name] = Broker(
                env,
                name,
                network,
                [],
                rules,
                self.allocator,
                settings.broker,
                self.probe,
                self.directory,
                verifier,
                self.add_partition,
                replication=settings.replication,
                topics=settings.topics,
                controller=CONTROLLER,
            )
        registrations = {}
        for tp in metadata.partitions():
            replicas = metadata.replicas(tp)
            registrations[tp] = PartitionRegistration(replicas, replicas, replicas[0])  # type: ignore[arg-type]
        self.controller = QuorumController(
            env, network, metadata.brokers, registrations, settings.topics, settings.controller
        )
        self.controller.listeners.append(self._on_fence)
        # Every broker starts with the controller's metadata (replayed before the run starts).
        snapshot = self.controller.snapshot()
        for broker in self.brokers.values():
            broker.replica_manager.apply_metadata(0, snapshot, True)
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
                lambda tp, seen_by=name: self.leader_seen_by(seen_by, tp),
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
            ClusterMetadata(
                tuple(scenario.broker_names()),
                scenario.topic_partitions(),
                scenario.replication_factors(),
            ),
            scenario.protocol_rules(),
            ClusterSettings.from_scenario(scenario),
            probe,
            lambda txn_id, pid, epoch, t: history.fence(t, txn_id, pid, epoch),
        )

    # -- lookups ---------------------------------------------------------------------------
    def leader_seen_by(self, broker: str, tp: TopicPartition) -> str | None:
        """The leader of ``tp`` as ``broker`` knows it: an internal partition's current
        owner, a data partition's leader in the broker's metadata cache."""
        if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return self.directory.owner(tp)
        state = self.brokers[broker].replica_manager.metadata.get(tp)
        return state.leader if state is not None else None

    def leader_of(self, tp: TopicPartition) -> str | None:
        """The leader of ``tp`` as the controller has it (None: offline)."""
        if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return self.directory.owner(tp)
        leader = self.controller.registrations[tp].leader
        return None if leader == NO_LEADER else leader  # type: ignore[return-value]

    def _on_fence(self, broker: str, fenced: bool) -> None:
        if fenced:
            self.directory.broker_fenced(broker)
        else:
            self.directory.broker_unfenced(broker)

    def transaction_runtime(self, txn_id: str) -> CoordinatorRuntime | None:
        """The coordinator runtime of the live broker coordinating ``txn_id``, if any."""
        node = self.directory.coordinator(txn_id, "transaction")
        return self.brokers[node].coordinator if node is not None else None

    def final_replica(self, tp: TopicPartition) -> Partition:
        """The replica whose log is ``tp``'s log at the end: its leader's, or, while it is
        offline, that of the ISR member the controller would elect when it returns."""
        reg = self.controller.registrations[tp]
        name = reg.leader if reg.leader != NO_LEADER else reg.isr[0]
        return self.brokers[name].partitions[tp]  # type: ignore[index]

    def partition_log(self, tp: TopicPartition) -> PartitionLog:
        """The final log of data partition ``tp`` (see :meth:`final_replica`)."""
        return self.final_replica(tp).log

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
        """What the nemesis may crash, restart, pause and resume: every broker, by name, and
        the controller."""
        targets: dict[str, FaultTarget] = dict(self.brokers)
        targets[CONTROLLER] = self.controller
        return targets

    def power_targets(self) -> dict[str, Broker]:
        """What a power loss can hit: the brokers (their unflushed writes are lost)."""
        return dict(self.brokers)

    @property
    def requests_handled(self) -> int:
        return sum(b.requests_handled for b in self.brokers.values())

    def collect_logs(self, history: HistoryRecorder) -> None:
        """Each data partition's final log (records and markers), in partition order."""
        for tp in self.metadata.partitions():
            final = self.final_replica(tp)
            log = final.log
            if len(self.metadata.replicas(tp)) == 1:
                history.add_log(tp[0], tp[1], log.records(), log.markers())
                continue
            history.add_log(
                tp[0],
                tp[1],
                log.records(),
                log.markers(),
                leader=self.leader_of(tp),
                high_watermark=final.high_watermark,
            )
        for tp in self.metadata.partitions():
            replicas = self.metadata.replicas(tp)
            if len(replicas) == 1:
                continue
            for name in replicas:
                part = self.brokers[name].partitions[tp]
                history.add_end_line(
                    {
                        "kind": "replica",
                        "topic": tp[0],
                        "partition": tp[1],
                        "broker": name,
                        "leader": self.leader_of(tp) == name,
                        "leader_epoch": part.leader_epoch,
                        "high_watermark": part.high_watermark,
                        "log_end_offset": part.log_end_offset,
                        "records": part.log.records(),
                        "markers": part.log.markers(),
                    }
                )

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
