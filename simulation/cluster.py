"""The Kafka cluster of a run: brokers, controller, coordinators and what they share.

A :class:`Cluster` is assembled once, before any application exists, from the cluster
metadata (brokers, topics, each partition's replicas), the protocol rules and its settings:

* the :class:`QuorumController` (node ``controller``): broker liveness, leader elections, ISR
  changes, and the metadata every broker replays; it starts with every replica in sync and
  each partition led by its first replica, and every broker starts with that metadata;
* the internal topics ``__transaction_state`` and ``__consumer_offsets`` (50 partitions
  each, replication factors from the broker configs ``transaction.state.log.replication.
  factor`` and ``offsets.topic.replication.factor``, capped at the broker count), registered
  with the controller like any topic; the coordinators are wherever their leaders are;
* the cluster-wide producer-id block allocator;
* one :class:`Broker` per broker name, in the metadata's order, each hosting its replicas
  and a :class:`CoordinatorRuntime`;
* the broker-to-coordinator questions of KIP-890, which a leader asks on a transaction's
  first produce of the coordinator its metadata cache names: part 1's verification, a direct
  call (:meth:`verify_partition`), and part 2's add under transaction version 2, an
  AddPartitionsToTxn request each broker's ``AddPartitionsToTxnManager`` sends to the broker
  :meth:`transaction_coordinator` names.

An internal partition is hosted (its replicas created, fetched) only once it is *active*:
the first FindCoordinator for one of its keys, or a KIP-890 call, activates it, and every
replica broker then hosts it in the role its metadata gives it. Until then it is empty on
every replica, so hosting it late is the same as hosting it all along; it saves a run the
fetching of up to 100 idle partitions (a modelling shortcut, in docs/model.md).

It also offers the nemesis its fault operations, by node name
(:class:`eosim.simulation.faults.FaultableCluster`, as the real cluster of :mod:`eosim.real`
does): :meth:`crash`, :meth:`restart`, :meth:`pause`, :meth:`resume` and :meth:`power_loss` of
a broker or the controller (:meth:`fault_targets` names them), network faults on its network
(:meth:`partition`, :meth:`disturb`, :meth:`heal`) and an administrator's
:meth:`delete_records`; and it writes the cluster's final state into a history
(:meth:`collect_logs`, :meth:`collect_transactions`).

Extending it: a new broker-side component is built in ``__init__`` after the brokers it
needs (creation order is event order, so add it after everything that exists today to keep
histories unchanged), is reached through a method here rather than a closure, joins
:meth:`fault_targets` and :meth:`_process` (which the fault operations route by) if it can
fail on its own, and writes its end state from a ``collect_*`` method that the runner's
collect phase calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

import simpy

from eosim.simulation.broker.add_partitions_to_txn_manager import add_partitions_error
from eosim.simulation.broker.broker import Broker, BrokerSettings, PartitionVerifier
from eosim.simulation.broker.log import LogConfig, PartitionLog
from eosim.simulation.broker.log_manager import LogManagerSettings
from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from eosim.simulation.broker.replica_manager import ReplicationSettings
from eosim.simulation.broker.request_handler_pool import BrokerThreads, ThreadSettings
from eosim.simulation.config import kafka_default
from eosim.simulation.controller.partition_change import NO_LEADER, PartitionRegistration
from eosim.simulation.controller.quorum_controller import (
    CONTROLLER,
    ControllerSettings,
    QuorumController,
)
from eosim.simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalPartition,
    internal_partition,
    is_internal,
)
from eosim.simulation.coordinator.group_config import GroupConfig
from eosim.simulation.coordinator.group_coordinator import GroupCoordinator, OffsetStore
from eosim.simulation.coordinator.group_coordinator_service import GroupCoordinatorService
from eosim.simulation.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorSettings,
    FenceListener,
)
from eosim.simulation.coordinator.transaction_coordinator_handlers import (
    TransactionCoordinatorHandlers,
)
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.nemesis import FaultTarget
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import Errors, TopicPartition
from eosim.simulation.resources import Machines
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.scenario import DurationRange
from eosim.simulation.state_change import StateChangeLog

if TYPE_CHECKING:
    from eosim.simulation.history import HistoryRecorder
    from eosim.simulation.scenario import Scenario


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """The cluster's timings and configs: request handling, coordinators, replication and
    durability, the controller, and each topic's replication settings."""

    broker: BrokerSettings = field(default_factory=BrokerSettings)
    coordinator: CoordinatorSettings = field(default_factory=CoordinatorSettings)
    replication: ReplicationSettings = field(default_factory=ReplicationSettings)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    topics: dict[str, TopicSettings] = field(default_factory=dict)
    # The internal topics: replication factors (capped at the broker count) and min ISR.
    transaction_state_replication_factor: int = kafka_default(
        "transaction.state.log.replication.factor"
    )
    transaction_state_min_isr: int = kafka_default("transaction.state.log.min.isr")
    offsets_replication_factor: int = kafka_default("offsets.topic.replication.factor")
    offsets_min_isr: int = kafka_default("min.insync.replicas")
    # Retention and producer-id expiry (the brokers' LogManagers).
    log: LogManagerSettings = field(default_factory=LogManagerSettings)
    # The brokers' threads (num.network.threads, num.io.threads, queued.max.requests,
    # num.replica.fetchers), read by the resource model only.
    threads: ThreadSettings = field(default_factory=ThreadSettings)

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ClusterSettings:
        c = scenario.cluster
        # The defaults of the scenario's Kafka version (group.consumer.assignment.interval.ms).
        config = c.broker_config(scenario.protocol_rules())
        topics = {
            topic.name: TopicSettings.of(topic.replication_factor, c.topic_config(topic))
            for topic in c.topics
        }
        return cls(
            BrokerSettings(
                request_time_ms=c.request_time_ms,
                heartbeat_interval_ms=float(config.broker_heartbeat_interval_ms),
                session_timeout_ms=float(config.broker_session_timeout_ms),
                startup_ms=c.broker_startup,
                crash_reset_ms=_range_ms(c.crash_reset),
                add_partitions_retry_backoff_ms=float(
                    config.add_partitions_to_txn_retry_backoff_ms
                ),
                add_partitions_retry_max_ms=float(
                    config.add_partitions_to_txn_retry_backoff_max_ms
                ),
            ),
            CoordinatorSettings(
                load_ms=c.coordinator_load,
                abort_check_interval_ms=c.transaction_abort_check_interval,
                transactional_id_expiration_ms=c.transactional_id_expiration,
                expiration_check_interval_ms=c.transactional_id_cleanup_interval,
                groups=GroupConfig(
                    min_session_timeout_ms=config.group_min_session_timeout_ms,
                    max_session_timeout_ms=config.group_max_session_timeout_ms,
                    initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                    consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
                    consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                    consumer_assignment_interval_ms=config.group_consumer_assignment_interval_ms,
                ),
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
            config.transaction_state_log_replication_factor,
            config.transaction_state_log_min_isr,
            config.offsets_topic_replication_factor,
            config.min_insync_replicas,
            LogManagerSettings(
                float(config.log_retention_check_interval_ms),
                float(config.log_initial_task_delay_ms),
                float(config.producer_id_expiration_ms),
                float(config.producer_id_expiration_check_interval_ms),
            ),
            ThreadSettings(
                config.num_network_threads,
                config.num_io_threads,
                config.queued_max_requests,
                config.num_replica_fetchers,
            ),
        )


def _range_ms(value: float | DurationRange) -> tuple[float, float]:
    """A scenario's duration or {min, max} range as (low, high) milliseconds."""
    if isinstance(value, DurationRange):
        return (value.min, value.max)
    return (float(value), float(value))


def _handled_request(runtime: CoordinatorRuntime) -> None:
    """A leader's AddPartitionsToTxn is a request its coordinator's broker handles
    (AddPartitionsToTxnManager sends it): when the handler finishes, the actions appends
    queued on that broker run (KafkaApis.handle, ReplicaManager.tryCompleteActions)."""
    if runtime.alive and runtime.rm.is_running():
        runtime.rm.complete_actions()


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
        streams: RandomStreams | None = None,
        state_log: StateChangeLog | None = None,
        machines: Machines | None = None,
    ) -> None:
        settings = settings if settings is not None else ClusterSettings()
        metadata = metadata.with_internal_topics(
            settings.transaction_state_replication_factor, settings.offsets_replication_factor
        )
        topics = dict(settings.topics)
        n = len(metadata.brokers)
        # Both internal topics are compacted (cleanup.policy=compact): retention leaves them.
        compacted = LogConfig(delete=False)
        topics[TRANSACTION_STATE_TOPIC] = TopicSettings(
            min(settings.transaction_state_replication_factor, n),
            settings.transaction_state_min_isr,
            log=compacted,
        )
        topics[CONSUMER_OFFSETS_TOPIC] = TopicSettings(
            min(settings.offsets_replication_factor, n), settings.offsets_min_isr, log=compacted
        )
        self.env = env
        self.machines = machines
        self.network = network
        self.metadata = metadata
        self.rules = rules
        self.settings = settings
        self.probe = probe if probe is not None else Probe()
        self.state_log = state_log if state_log is not None else StateChangeLog()
        # The internal partitions hosted so far (see the module docstring), in activation order.
        self.active: dict[InternalPartition, None] = {}
        self.allocator = ProducerIdBlockAllocator()
        tv2 = rules.transaction_version >= 2
        self.brokers: dict[str, Broker] = {}
        # Each broker's coordinator runtime, built after the brokers (it needs their replicas).
        self._runtimes: dict[str, CoordinatorRuntime] = {}
        for name in metadata.brokers:
            verifier = (
                self._verifier_for(name) if rules.transaction_partition_verification else None
            )
            self.brokers[name] = Broker(
                env,
                name,
                network,
                [],
                rules,
                self.allocator,
                settings.broker,
                self.probe,
                verifier,
                replication=settings.replication,
                topics=topics,
                controller=CONTROLLER,
                lifecycle_rng=streams.stream(f"lifecycle:{name}") if streams else None,
                isr_rng=streams.stream(f"isr-expiration:{name}") if streams else None,
                heartbeat_rng=streams.stream(f"broker-heartbeat:{name}") if streams else None,
                crash_reset_rng=(
                    streams.stream(f"crash-reset:{name}")
                    if streams and settings.broker.crash_reset_ms[1] > 0.0
                    else None
                ),
                log=settings.log,
                coordinator=partial(self._runtimes.get, name),
                hostable=self._hostable,
                state_log=self.state_log,
                threads=(
                    BrokerThreads(
                        env,
                        machines.jvms[name],
                        machines.service,
                        settings.threads,
                        machines.startup,
                    )
                    if machines is not None
                    else None
                ),
                coordinator_of=partial(self.transaction_coordinator, caller=name) if tv2 else None,
            )
        registrations = {}
        for tp in metadata.all_partitions():
            replicas = metadata.replicas(tp)
            registrations[tp] = PartitionRegistration(replicas, replicas, replicas[0])  # type: ignore[arg-type]
        controller_settings = replace(
            settings.controller, eligible_leader_replicas=rules.eligible_leader_replicas
        )
        self.controller = QuorumController(
            env,
            network,
            metadata.brokers,
            registrations,
            topics,
            controller_settings,
            streams.stream("controller-fence-check") if streams else None,
            self.state_log,
        )
        # Every broker starts with the controller's metadata (replayed before the run starts).
        snapshot = self.controller.snapshot()
        for broker in self.brokers.values():
            broker.replica_manager.apply_metadata(0, snapshot, True)
        for name, broker in self.brokers.items():
            runtime = CoordinatorRuntime(
                env,
                name,
                network,
                broker.replica_manager,
                rules,
                broker.producer_ids.generate_producer_id,
                lambda tp, seen_by=name: self.leader_seen_by(seen_by, tp),
                settings.coordinator,
                self.probe,
                on_fence,
                hold=broker.hold_current,
                activate=self.activate,
                transaction_handlers=TransactionCoordinatorHandlers,
                group_service=GroupCoordinatorService,
                member_id_stream=(
                    (lambda n=name, st=streams: st.stream(f"group-coordinator:{n}"))
                    if streams is not None
                    else None
                ),
                add_partition=(
                    broker.add_partitions_manager.add
                    if broker.add_partitions_manager is not None
                    else None
                ),
            )
            self._runtimes[name] = runtime

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        env: simpy.Environment,
        network: Network,
        history: HistoryRecorder,
        probe: Probe,
        streams: RandomStreams | None = None,
        state_log: StateChangeLog | None = None,
        machines: Machines | None = None,
    ) -> Cluster:
        """The cluster a scenario describes; every fencing is recorded in ``history``, and
        state changes in ``state_log`` (when it is enabled: traced runs). ``machines``: the
        run's hosts and processes, when the scenario has the resource model."""
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
            streams,
            state_log,
            machines,
        )

    # -- lookups ---------------------------------------------------------------------------
    def leader_seen_by(self, broker: str, tp: TopicPartition) -> str | None:
        """The leader of ``tp`` in ``broker``'s metadata cache (None: offline, or unknown)."""
        state = self.brokers[broker].replica_manager.metadata.get(tp)
        return state.leader if state is not None else None

    def leader_of(self, tp: TopicPartition) -> str | None:
        """The leader of ``tp`` as the controller has it (None: offline)."""
        leader = self.controller.registrations[tp].leader
        return None if leader == NO_LEADER else leader  # type: ignore[return-value]

    # -- internal partitions ---------------------------------------------------------------
    def _hostable(self, tp: TopicPartition) -> bool:
        return not is_internal(tp[0]) or tp in self.active

    def activate(self, partition: InternalPartition) -> None:
        """Host ``partition`` on its replicas from now on (see the module docstring): each
        live replica broker takes the role its metadata cache gives it; a broker that is down
        takes it from the metadata it replays when it registers again."""
        if partition in self.active:
            return
        self.active[partition] = None
        for name in self.metadata.replicas(partition):
            broker = self.brokers[name]
            if broker.alive:
                broker.replica_manager.activate(partition)

    def transaction_coordinator(self, txn_id: str, caller: str | None = None) -> str | None:
        """The broker that ``caller``'s metadata cache (or, with no caller, the controller)
        names leader of ``txn_id``'s ``__transaction_state`` partition, activated now if it was
        not (None: none): where ``caller``'s AddPartitionsToTxnManager sends its adds."""
        partition = internal_partition(txn_id, "transaction")
        self.activate(partition)
        return self.leader_seen_by(caller, partition) if caller else self.leader_of(partition)

    def transaction_runtime(
        self, txn_id: str, caller: str | None = None
    ) -> CoordinatorRuntime | None:
        """The coordinator runtime of :meth:`transaction_coordinator`'s broker, if any."""
        node = self.transaction_coordinator(txn_id, caller)
        return self.brokers[node].coordinator if node is not None else None

    def final_replica(self, tp: TopicPartition) -> Partition:
        """The replica whose log is ``tp``'s log at the end: its leader's, or, while it is
        offline, that of the replica the controller would elect when it returns (the first of
        the ISR, else of the eligible leader replicas, else the first replica)."""
        reg = self.controller.registrations[tp]
        name = reg.leader
        if name == NO_LEADER:
            name = (reg.isr or reg.elr or reg.replicas)[0]
        part = self.brokers[name].partitions.get(tp)  # type: ignore[index]
        if part is None:  # an internal partition activated while that broker was down
            hosts = [b for b in reg.replicas if tp in self.brokers[b].partitions]  # type: ignore[index]
            part = self.brokers[hosts[0]].partitions[tp]  # type: ignore[index]
        return part

    def partition_log(self, tp: TopicPartition) -> PartitionLog:
        """The final log of data partition ``tp`` (see :meth:`final_replica`)."""
        return self.final_replica(tp).log

    # -- KIP-890: a leader asks the transaction coordinator ------------------------------
    def _verifier_for(self, caller: str) -> PartitionVerifier:
        def verify(txn_id: str | None, pid: int, epoch: int, tp: TopicPartition) -> Errors:
            return self.verify_partition(txn_id, pid, epoch, tp, caller)

        return verify

    def verify_partition(
        self,
        txn_id: str | None,
        pid: int,
        epoch: int,
        tp: TopicPartition,
        caller: str | None = None,
    ) -> Errors:
        """Part 1: is ``tp`` in the producer's ongoing transaction (a leader's check before
        a partition's first transactional append)? Asked of the coordinator ``caller``'s
        metadata cache names; a coordinator that is down or not (yet) coordinating answers
        its own error (COORDINATOR_NOT_AVAILABLE when none is known)."""
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        runtime = self.transaction_runtime(txn_id, caller)
        if runtime is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = add_partitions_error(runtime.txn_handlers.verify_partition(txn_id, pid, epoch, tp))
        _handled_request(runtime)
        return error

    # -- faults and the end of a run -----------------------------------------------------
    def fault_targets(self) -> dict[str, FaultTarget]:
        """What the nemesis may crash, restart, pause and resume: every broker, by name, and
        the controller."""
        targets: dict[str, FaultTarget] = dict(self.brokers)
        targets[CONTROLLER] = self.controller
        return targets

    def _process(self, node: str) -> FaultTarget:
        return self.controller if node == CONTROLLER else self.brokers[node]

    def process_running(self, node: str) -> bool:
        """Whether broker ``node``'s (or the controller's) process runs: alive, not paused."""
        process = self._process(node)
        return bool(process.alive and not process.paused)  # type: ignore[attr-defined]

    def crash(self, node: str) -> None:
        """The process of broker ``node`` (or of the controller) dies at once."""
        self._changing(node)
        self._process(node).crash()

    def power_loss(self, node: str) -> None:
        """Broker ``node``'s machine loses power: its unflushed writes are lost."""
        self._changing(node)
        self.brokers[node].power_loss()

    def restart(self, node: str) -> None:
        """A new process of ``node`` starts (after a crash or a power loss)."""
        self._changing(node)
        self._process(node).restart()

    def pause(self, node: str) -> None:
        self._changing(node)
        self._process(node).pause()

    def resume(self, node: str) -> None:
        self._changing(node)
        self._process(node).resume()

    def _changing(self, node: str) -> None:
        """``node``'s process is about to die, stop, resume or restart: its host books the
        background due until now first, judged by the process's state before the change."""
        if self.machines is not None:
            self.machines.catch_up(node, self.env.now)

    def partition(self, groups: Sequence[Sequence[str]]) -> object:
        """Cut the network between ``groups`` (one group: from everyone else) until healed."""
        return self.network.start_partition(tuple(tuple(g) for g in groups))

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> object:
        """Slow (``extra_latency`` ms) or else drop (``loss``) the messages of ``nodes`` or of
        the directed ``links`` until healed."""
        if extra_latency:
            return self.network.start_spike(tuple(nodes), extra_ms=extra_latency, links=links)
        return self.network.start_spike(tuple(nodes), loss=loss, links=links)

    def heal(self, handle: object) -> None:
        self.network.stop(handle)

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        """An administrator's DeleteRecords of ``topic`` (one ``partition``, or every one) below
        ``offset`` (-1: each high watermark), sent to each partition's leader as the controller
        has it (``LogManager.delete_records``): per partition, its name, the error and the
        leader's log start after it (-1 when offline: NOT_LEADER_OR_FOLLOWER). The admin client
        does not retry."""
        answers = []
        for tp in self.metadata.partitions():
            if tp[0] != topic or partition not in (None, tp[1]):
                continue
            name = f"{tp[0]}-{tp[1]}"
            leader = self.leader_of(tp)
            broker = self.brokers[leader] if leader is not None else None
            if broker is None or not broker.alive:
                answers.append((name, Errors.NOT_LEADER_OR_FOLLOWER.name, -1))
                continue
            error = broker.log_manager.delete_records(tp, offset)
            part = broker.partitions.get(tp)
            start = part.log.log_start_offset if part is not None else -1
            answers.append((name, error.name, start))
        return answers

    def settled(self, tp: TopicPartition, broker: str) -> bool:
        """Whether ``broker``'s replica of ``tp`` can no longer change by replication alone:
        it leads, or it follows the current leader and its last fetch at that epoch found no
        divergence, or it stopped fetching for good (a failed partition)."""
        part = self.brokers[broker].partitions.get(tp)
        if part is None or not self.brokers[broker].alive:
            return False
        reg = self.controller.registrations[tp]
        if reg.leader == broker:
            return part.is_leader and part.leader_epoch == reg.leader_epoch
        return part.fetch_failed is not None or (
            reg.leader != NO_LEADER
            and part.leader == reg.leader
            and part.leader_epoch == reg.leader_epoch
            and part.fetched_epoch == reg.leader_epoch
        )

    def unconverged(self) -> list[str]:
        """What keeps the cluster from being at rest, in words (empty: at rest): a broker
        that is down, starting or fenced, the controller down, a partition without a leader
        that serves at the controller's epoch, or a replica that has not caught up with its
        leader (a follower that stopped fetching for good never will)."""
        reasons: list[str] = []
        controller = self.controller
        if not controller.alive or controller.paused:
            reasons.append("the controller is down")
        for name, broker in self.brokers.items():
            if not broker.serving:
                reasons.append(f"{name} is not serving")
            elif controller.fenced[name]:
                reasons.append(f"{name} is fenced")
        for tp in self.metadata.partitions():
            reg = controller.registrations[tp]
            if reg.leader == NO_LEADER:
                reasons.append(f"{tp[0]}-{tp[1]} has no leader")
                continue
            leader = self.brokers[reg.leader].partitions.get(tp)  # type: ignore[index]
            if leader is None or not leader.is_leader or leader.leader_epoch != reg.leader_epoch:
                reasons.append(f"{tp[0]}-{tp[1]}: {reg.leader} does not lead it yet")
                continue
            end = leader.log_end_offset
            if leader.high_watermark < end:
                reasons.append(f"{tp[0]}-{tp[1]}: high watermark {leader.high_watermark} < {end}")
            for name in reg.replicas:
                if name == reg.leader:
                    continue
                part = self.brokers[name].partitions.get(tp)  # type: ignore[index]
                if part is None:
                    continue
                if part.fetch_failed is not None:
                    reasons.append(f"{tp[0]}-{tp[1]} on {name} stopped fetching")
                elif not self.settled(tp, name) or part.log_end_offset != end:  # type: ignore[arg-type]
                    reasons.append(f"{tp[0]}-{tp[1]} on {name} at {part.log_end_offset} of {end}")
        return reasons

    def replica_failures(self) -> list[str]:
        """Followers that stopped fetching for good, as warnings."""
        return [
            f"{name}: follower of {tp[0]}-{tp[1]} stopped fetching: {reason}"
            for name, broker in self.brokers.items()
            for tp, reason in broker.replica_manager.replica_fetcher_manager.failures
        ]

    @property
    def requests_handled(self) -> int:
        return sum(b.requests_handled for b in self.brokers.values())

    def collect_logs(self, history: HistoryRecorder) -> None:
        """Each data partition's final log (records and markers), in partition order."""
        for tp in self.metadata.partitions():
            final = self.final_replica(tp)
            log = final.log
            # Only a log whose head was deleted says where it starts (histories of runs that
            # delete nothing stay as they were).
            start = {"log_start_offset": log.log_start_offset} if log.log_start_offset else {}
            if len(self.metadata.replicas(tp)) == 1:
                history.add_log(tp[0], tp[1], log.records(), log.markers(), **start)
                continue
            history.add_log(
                tp[0],
                tp[1],
                log.records(),
                log.markers(),
                leader=self.leader_of(tp),
                high_watermark=final.high_watermark,
                **start,
            )
        for tp in self.metadata.partitions():
            replicas = self.metadata.replicas(tp)
            if len(replicas) == 1:
                continue
            for name in replicas:
                part = self.brokers[name].partitions[tp]
                line = {
                    "kind": "replica",
                    "topic": tp[0],
                    "partition": tp[1],
                    "broker": name,
                    "leader": self.leader_of(tp) == name,
                    "leader_epoch": part.leader_epoch,
                    "high_watermark": part.high_watermark,
                    "log_end_offset": part.log_end_offset,
                    "settled": self.settled(tp, name),
                    "records": part.log.records(),
                    "markers": part.log.markers(),
                }
                if part.log.log_start_offset:
                    line["log_start_offset"] = part.log.log_start_offset
                history.add_end_line(line)

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every group's committed offsets at the end: what the leader of its
        ``__consumer_offsets`` partition has loaded, or, while none has, what a replay of
        the partition's final log gives."""
        committed: dict[str, dict[TopicPartition, int]] = {}
        for tp in sorted(self.active):
            if tp[0] != CONSUMER_OFFSETS_TOPIC:
                continue
            leader = self.leader_of(tp)
            runtime = self.brokers[leader].coordinator if leader is not None else None
            if runtime is not None and runtime.partition_error(tp) is Errors.NONE:
                groups = runtime.groups
            else:
                groups = GroupCoordinator(OffsetStore())
                groups.load(tp[1], self.final_replica(tp).log.batches)
            for group, offsets in groups.store.committed.items():
                if internal_partition(group, "group") == tp:
                    committed[group] = dict(offsets)
        return committed

    def collect_transactions(self, history: HistoryRecorder) -> None:
        """The committed offsets of every group, then each partition's LSO, log end and
        open transactions (the history's ``offsets`` and ``lso`` end lines)."""
        committed_by_group = self.committed_offsets()
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
