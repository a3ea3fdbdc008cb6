"""Assemble a run from a scenario and a seed, run it, and hand back what happened.

One run = one SimPy environment holding the network, the brokers, one application and
KafkaProducer per scenario producer, and the nemesis. It ends ``settle`` after every
application has sent and flushed all its records (so that requests still on the wire land),
or at the scenario's ``duration``. Whatever is still open
then is completed ``info``. The result carries the history (with each partition's final
log), counters, and the realised fault schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from simulation.apps.processor import ProcessorApp
from simulation.apps.reader import ReaderApp, drain
from simulation.apps.store import ExternalStore
from simulation.apps.transactional import TransactionalProducerApp
from simulation.broker.broker import Broker, BrokerSettings
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from simulation.config import ProducerConfig
from simulation.consumer.kafka_consumer import KafkaConsumer
from simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorDirectory,
    internal_partition,
)
from simulation.coordinator.group_coordinator import OffsetStore
from simulation.coordinator.runtime import CoordinatorRuntime, CoordinatorSettings
from simulation.coordinator.transaction_log import TransactionLog
from simulation.history import HistoryRecorder
from simulation.metadata import ClusterMetadata
from simulation.nemesis import CrashAtNemesis, FaultEvent, Nemesis, Targets, realize_faults
from simulation.network import LatencyModel, Network, NetworkSettings, TraceEvent
from simulation.probe import Probe
from simulation.producer.kafka_producer import KafkaProducer
from simulation.protocol import Errors, TopicPartition
from simulation.rng import RandomStreams
from simulation.scenario import ConsumerSettings, Scenario
from simulation.workload import ProducerApp


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.events_processed = 0

    def step(self) -> None:
        self.events_processed += 1
        super().step()


@dataclass
class RunResult:
    scenario: str
    seed: int
    sim_time_ms: float
    events: int
    wall_time_s: float
    history: HistoryRecorder
    counts: dict[str, int]
    faults: list[FaultEvent]
    configs: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    trace: list[TraceEvent] | None = None

    @property
    def sim_time_s(self) -> float:
        return self.sim_time_ms / 1000.0


def _horizon(scenario: Scenario) -> float:
    """When the workload is expected to end: the default end of random fault windows."""
    ends = [
        p.workload.start + 1000.0 * p.workload.records / p.workload.rate for p in scenario.producers
    ]
    ends += [
        t.workload.start + 1000.0 * t.workload.transactions / t.workload.rate
        for t in scenario.transactional_producers
    ]
    return min(max(ends, default=scenario.duration), scenario.duration)


def _recovery(scenario: Scenario, configs: dict[str, ProducerConfig]) -> float:
    if scenario.recovery is not None:
        return scenario.recovery
    timeouts = [c.transaction_timeout_ms for c in configs.values() if c.transactional_id]
    if not timeouts:
        return 0.0
    return max(timeouts) + 2 * scenario.cluster.transaction_abort_check_interval


DRAIN_LIMIT_MS = 60_000.0


def run_scenario(scenario: Scenario, seed: int | None = None, *, trace: bool = False) -> RunResult:
    """Run ``scenario`` with ``seed`` (default: the scenario's). ``trace`` records every
    message's journey in ``RunResult.trace`` (for timelines and shrinking; slower)."""
    seed = scenario.seed if seed is None else seed
    started = time.perf_counter()
    env = CountingEnvironment()
    streams = RandomStreams(seed)
    rules = scenario.protocol_rules()
    metadata = ClusterMetadata(tuple(scenario.broker_names()), scenario.topic_partitions())
    probe = Probe()

    n = scenario.network
    latency = LatencyModel(**n.latency.model_dump())
    network = Network(
        env,
        NetworkSettings(
            latency,
            n.request_loss,
            n.response_loss,
            n.loss_model,
            n.dead_connection_reset,
            n.in_flight_after_close,
        ),
        streams.stream("network"),
        streams.stream("network-loss"),
    )
    if trace:
        network.trace = []

    # Every client's configuration was resolved (and checked) when the scenario was validated.
    clients = scenario.clients
    configs = clients.producers
    warnings = clients.warnings
    transactional = bool(scenario.transactional_producers or scenario.processors)

    history = HistoryRecorder(
        {
            "scenario": scenario.name,
            "seed": seed,
            "scenario_sha256": scenario.digest(),
            "configs": {name: c.to_kafka_dict() for name, c in configs.items()},
        }
    )

    c = scenario.cluster
    directory = CoordinatorDirectory(env, metadata.brokers, c.coordinator_failover)
    allocator = ProducerIdBlockAllocator()
    broker_settings = BrokerSettings(request_time_ms=c.request_time_ms)
    brokers: dict[str, Broker] = {}

    def verify_partition(txn_id: str | None, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        node = directory.coordinator(txn_id, "transaction")
        runtime = brokers[node].coordinator if node is not None else None
        if runtime is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if runtime.partition_error(internal_partition(txn_id, "transaction")) is not Errors.NONE:
            return Errors.COORDINATOR_NOT_AVAILABLE
        return runtime.txn.verify_partition(txn_id, pid, epoch, tp)

    def add_partition(txn_id: str | None, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """Transaction version 2: a leader (or group coordinator) adds ``tp`` to the
        producer's transaction (AddPartitionsToTxnManager, operation addPartition)."""
        if txn_id is None:
            return Errors.INVALID_TXN_STATE
        node = directory.coordinator(txn_id, "transaction")
        runtime = brokers[node].coordinator if node is not None else None
        if runtime is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        return runtime.add_partitions(txn_id, pid, epoch, (tp,))

    verifier = verify_partition if rules.transaction_partition_verification else None
    for name in metadata.brokers:
        brokers[name] = Broker(
            env,
            name,
            network,
            metadata.partitions_led_by(name),
            rules,
            allocator,
            broker_settings,
            probe,
            directory,
            verifier,
            add_partition,
        )

    def leader_of(tp: TopicPartition) -> str | None:
        if tp[0] in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return directory.owner(tp)
        return metadata.leader(tp)

    txn_log = TransactionLog()
    offset_store = OffsetStore()
    coordinator_settings = CoordinatorSettings(
        load_ms=c.coordinator_load,
        abort_check_interval_ms=c.transaction_abort_check_interval,
        transactional_id_expiration_ms=c.transactional_id_expiration,
        expiration_check_interval_ms=c.transactional_id_cleanup_interval,
    )
    for name, broker in brokers.items():
        broker.coordinator = CoordinatorRuntime(
            env,
            name,
            network,
            directory,
            txn_log,
            offset_store,
            rules,
            broker.producer_ids.generate_producer_id,
            leader_of,
            coordinator_settings,
            probe,
            lambda txn_id, pid, epoch, t: history.fence(t, txn_id, pid, epoch),
        )
        if rules.transaction_version >= 2:
            broker.coordinator.add_partition = add_partition

    def producer_factory(name: str) -> Callable[[str], KafkaProducer]:
        def make(node: str) -> KafkaProducer:
            return KafkaProducer(
                env,
                node,
                network,
                metadata,
                configs[name],
                streams.stream(f"producer:{node}"),
                rules,
                probe,
                host=name,
            )

        return make

    apps: dict[str, Any] = {}
    for p in scenario.producers:
        make = producer_factory(p.name)
        apps[p.name] = ProducerApp(
            env,
            p.name,
            p.workload,
            lambda make=make, name=p.name: make(name),
            history,
            streams.stream(f"workload:{p.name}"),
        )
    for t in scenario.transactional_producers:
        make = producer_factory(t.name)
        apps[t.name] = TransactionalProducerApp(
            env,
            t.name,
            t.workload,
            lambda make=make, name=t.name: make(name),
            history,
            streams.stream(f"workload:{t.name}"),
            configs[t.name].max_block_ms,
            probe,
        )
    writers = [a.done for a in apps.values()]
    inputs_done = simpy.AllOf(env, writers) if writers else env.event().succeed()
    stores: list[ExternalStore] = []
    for proc in scenario.processors:
        settings = clients.consumers[proc.name]
        store = None
        if proc.output.store is not None:
            store = ExternalStore(proc.name, proc.output.store)
            stores.append(store)

        def make_consumer(
            node: str, settings: ConsumerSettings = settings, host: str = proc.name
        ) -> KafkaConsumer:
            return KafkaConsumer(
                env,
                node,
                network,
                metadata,
                isolation=settings.isolation,
                group=settings.group,
                host=host,
                auto_commit_interval_ms=settings.auto_commit_interval_ms,
                auto_offset_reset=settings.auto_offset_reset,
            )

        apps[proc.name] = ProcessorApp(
            env,
            proc,
            network,
            producer_factory(proc.name) if store is None else _no_producer,
            make_consumer,
            list(settings.partitions),
            history,
            probe,
            inputs_done,
            configs[proc.name].max_block_ms if proc.name in configs else 60_000.0,
            store,
        )

    all_done = simpy.AllOf(env, [a.done for a in apps.values()])
    readers = []
    for r in scenario.consumers:
        settings = clients.consumers[r.name]
        consumer = KafkaConsumer(
            env,
            r.name,
            network,
            metadata,
            isolation=settings.isolation,
            auto_offset_reset=settings.auto_offset_reset,
        )
        consumer.assign(list(settings.partitions))
        readers.append(ReaderApp(env, r.name, consumer, history, r.poll_interval, all_done))

    schedule = realize_faults(scenario.faults, _horizon(scenario), streams.stream("nemesis"))
    targets = Targets()
    for name, b in brokers.items():
        targets.crash[name], targets.restart[name] = b.crash, b.restart
        targets.pause[name], targets.resume[name] = b.pause, b.resume
    for name, a in apps.items():
        targets.crash[name], targets.restart[name] = a.crash, a.restart
        targets.pause[name], targets.resume[name] = a.pause, a.resume
    Nemesis(env, schedule, network, targets, history)
    crash_at = CrashAtNemesis(
        env, scenario.faults, probe, targets, history, streams.stream("nemesis-points")
    )

    limit = env.timeout(scenario.duration)
    env.run(until=simpy.AnyOf(env, [all_done, limit]))
    cut_by_duration = not all_done.triggered
    faults_end = max((e.end for e in schedule), default=0.0)
    if all_done.triggered and faults_end > env.now:
        # The run ends fault-free: wait for the last scheduled fault to heal (a paused
        # zombie resumes, a crashed broker restarts) before settling.
        env.run(until=min(faults_end, scenario.duration))
    if all_done.triggered and scenario.settle > 0:
        # Let requests still on the wire (acks=0, zombies of crashed producers) land.
        env.run(until=env.now + scenario.settle)
    recovery = _recovery(scenario, configs)
    if recovery > 0:
        env.run(until=env.now + recovery)

    pending = sum(
        app.abandon_open_ops("RunEnded: still outstanding when the run's duration ran out")
        for app in apps.values()
    )
    if pending:
        warnings.append(f"the run hit its duration with {pending} operations still outstanding")

    if transactional:
        # The final drain: a fresh read_committed consumer reads every partition to its LSO.
        drainer = KafkaConsumer(env, "drain", network, metadata, isolation="read_committed")
        drainer.assign(metadata.partitions())
        drained = env.process(drain(env, drainer, history, "drain/0"))
        env.run(until=simpy.AnyOf(env, [drained, env.timeout(DRAIN_LIMIT_MS)]))
        if not drained.triggered:
            warnings.append("the final drain did not reach every partition's end")
        drainer.close()
    sim_time = env.now

    for tp in metadata.partitions():
        log = brokers[metadata.leader(tp)].logs[tp]
        history.add_log(tp[0], tp[1], log.records(), log.markers())
    for store in stores:
        history.add_log(store.topic, 0, store.records())
    if transactional:
        for group in sorted(offset_store.committed):
            committed = offset_store.committed[group]
            entries = [
                {"topic": t, "partition": p, "offset": committed[t, p]}
                for t, p in sorted(committed)
            ]
            history.add_end_line({"kind": "offsets", "group": group, "offsets": entries})
        for tp in metadata.partitions():
            log = brokers[metadata.leader(tp)].logs[tp]
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

    if cut_by_duration:
        # The workload had not finished: writers may be mid-transaction at the end.
        history.add_end_line(
            {
                "kind": "end",
                "time": round(sim_time, 6),
                "cut_by_duration": True,
                "duration": scenario.duration,
            }
        )

    counts = {
        k: sum(a.counts[k] for a in apps.values())
        for k in ("sent", "acked", "failed", "indeterminate", "errored")
    }
    stats = {
        "messages_sent": network.messages_sent,
        "messages_lost": network.messages_lost,
        "requests_handled": sum(b.requests_handled for b in brokers.values()),
        "producer_restarts": sum(max(a.incarnation, 0) for a in apps.values()),
    }
    return RunResult(
        scenario=scenario.name,
        seed=seed,
        sim_time_ms=sim_time,
        events=env.events_processed,
        wall_time_s=time.perf_counter() - started,
        history=history,
        counts=counts,
        faults=sorted(schedule + crash_at.fired, key=lambda e: (e.start, e.end, e.kind, e.targets)),
        configs={name: c.to_kafka_dict() for name, c in configs.items()},
        warnings=warnings,
        stats=stats,
        trace=network.trace,
    )


def _no_producer(node: str) -> KafkaProducer:
    raise AssertionError(f"{node}: a sink has no producer")


__all__ = ["CountingEnvironment", "RunResult", "run_scenario"]
