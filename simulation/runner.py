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
from dataclasses import dataclass, field
from typing import Any

import simpy

from simulation.broker.broker import Broker, BrokerSettings
from simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from simulation.config import ProducerConfig, parse_producer_config
from simulation.history import HistoryRecorder
from simulation.metadata import ClusterMetadata
from simulation.nemesis import FaultEvent, Nemesis, Targets, realize_faults
from simulation.network import LatencyModel, Network, NetworkSettings, TraceEvent
from simulation.producer.kafka_producer import KafkaProducer
from simulation.rng import RandomStreams
from simulation.scenario import Scenario
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
    return min(max(ends), scenario.duration)


def run_scenario(scenario: Scenario, seed: int | None = None, *, trace: bool = False) -> RunResult:
    """Run ``scenario`` with ``seed`` (default: the scenario's). ``trace`` records every
    message's journey in ``RunResult.trace`` (for timelines and shrinking; slower)."""
    seed = scenario.seed if seed is None else seed
    started = time.perf_counter()
    env = CountingEnvironment()
    streams = RandomStreams(seed)
    rules = scenario.protocol_rules()
    unsafe = scenario.unsafe.to_unsafe()
    metadata = ClusterMetadata(tuple(scenario.broker_names()), scenario.topic_partitions())

    n = scenario.network
    latency = LatencyModel(**n.latency.model_dump())
    network = Network(
        env,
        NetworkSettings(
            latency, n.request_loss, n.response_loss, n.loss_model, n.dead_connection_reset
        ),
        streams.stream("network"),
        streams.stream("network-loss"),
    )
    if trace:
        network.trace = []
    allocator = ProducerIdBlockAllocator()
    broker_settings = BrokerSettings(request_time_ms=scenario.cluster.request_time_ms)
    brokers = {
        name: Broker(
            env, name, network, metadata.partitions_led_by(name), rules, allocator, broker_settings
        )
        for name in metadata.brokers
    }

    configs: dict[str, ProducerConfig] = {}
    warnings: list[str] = []
    for p in scenario.producers:
        config = parse_producer_config(p.config, rules, unsafe)
        configs[p.name] = config
        warnings.extend(f"{p.name}: {w}" for w in config.warnings)

    history = HistoryRecorder(
        {
            "scenario": scenario.name,
            "seed": seed,
            "scenario_sha256": scenario.digest(),
            "configs": {name: c.to_kafka_dict() for name, c in configs.items()},
        }
    )

    apps: dict[str, ProducerApp] = {}
    for p in scenario.producers:

        def make_producer(name: str = p.name) -> KafkaProducer:
            return KafkaProducer(
                env, name, network, metadata, configs[name], streams.stream(f"producer:{name}")
            )

        apps[p.name] = ProducerApp(
            env, p.name, p.workload, make_producer, history, streams.stream(f"workload:{p.name}")
        )

    schedule = realize_faults(scenario.faults, _horizon(scenario), streams.stream("nemesis"))
    targets = Targets()
    for name, b in brokers.items():
        targets.crash[name], targets.restart[name] = b.crash, b.restart
        targets.pause[name], targets.resume[name] = b.pause, b.resume
    for name, a in apps.items():
        targets.crash[name], targets.restart[name] = a.crash, a.restart
    Nemesis(env, schedule, network, targets, history)

    all_done = simpy.AllOf(env, [a.done for a in apps.values()])
    limit = env.timeout(scenario.duration)
    env.run(until=simpy.AnyOf(env, [all_done, limit]))
    if all_done.triggered and scenario.settle > 0:
        # Let requests still on the wire (acks=0, zombies of crashed producers) land.
        env.run(until=env.now + scenario.settle)
    sim_time = env.now

    pending = sum(
        app.abandon_open_ops("RunEnded: still outstanding when the run's duration ran out")
        for app in apps.values()
    )
    if pending:
        warnings.append(f"the run hit its duration with {pending} sends still outstanding")

    for tp in metadata.partitions():
        broker = brokers[metadata.leader(tp)]
        history.add_log(tp[0], tp[1], broker.logs[tp].records())

    counts = {
        k: sum(a.counts[k] for a in apps.values())
        for k in ("sent", "acked", "failed", "indeterminate")
    }
    stats = {
        "messages_sent": network.messages_sent,
        "messages_lost": network.messages_lost,
        "requests_handled": sum(b.requests_handled for b in brokers.values()),
        "producer_restarts": sum(a.incarnation for a in apps.values()),
    }
    return RunResult(
        scenario=scenario.name,
        seed=seed,
        sim_time_ms=sim_time,
        events=env.events_processed,
        wall_time_s=time.perf_counter() - started,
        history=history,
        counts=counts,
        faults=schedule,
        configs={name: c.to_kafka_dict() for name, c in configs.items()},
        warnings=warnings,
        stats=stats,
        trace=network.trace,
    )


__all__ = ["CountingEnvironment", "RunResult", "run_scenario"]
