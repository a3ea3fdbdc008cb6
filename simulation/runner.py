"""Assemble a run from a scenario and a seed, run it, and hand back what happened.

A run is a short list of phases over one SimPy environment (:func:`run_scenario`):

1. **build**: the network, the history, the :class:`~eosim.simulation.cluster.Cluster` (brokers,
   coordinators and what they share), the applications of every registered kind
   (:mod:`eosim.simulation.applications`) and the nemesis with the realised fault schedule,
   aimed at the cluster's fault operations and the applications
   (:class:`~eosim.simulation.nemesis.RunFaults`);
2. **workload**: run until every application has sent and flushed all its records, or the
   scenario's ``duration``;
3. **heal**: if the workload finished, wait for the last scheduled fault to end (a paused
   zombie resumes, a crashed broker restarts);
4. **settle**: ``settle`` more milliseconds, so that requests still on the wire land;
5. **recover**: fault-free time for timed-out transactions to be aborted;
6. **converge**: wait (up to ``converge_timeout``) until the cluster is at rest: every broker
   serving, every partition led, every replica caught up; then every operation still open is
   completed ``info``;
7. **drain**: when some application writes transactionally or processes, a fresh
   read_committed consumer reads every partition to its LSO;
8. **collect**: the final logs, stores, offsets and LSOs go into the history, and the counts
   and statistics into the :class:`RunResult`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import length_hint
from typing import Any

import simpy

from eosim.simulation.applications import Applications, BuildContext, workload_horizon
from eosim.simulation.apps.reader import drain
from eosim.simulation.cluster import Cluster
from eosim.simulation.collector import run_collection
from eosim.simulation.consumer.kafka_consumer import KafkaConsumer
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.nemesis import (
    CrashAtNemesis,
    FaultEvent,
    Nemesis,
    RunFaults,
    realize_faults,
)
from eosim.simulation.network import LatencyModel, Network, NetworkSettings, TraceEvent
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import CONTROLLER
from eosim.simulation.resources import Machines
from eosim.simulation.rng import RandomStreams
from eosim.simulation.scenario import Scenario
from eosim.simulation.state_change import StateChange, StateChangeLog


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes, at no cost per event.

    SimPy numbers every event it schedules with ``next(self._eid)``; here that counter is an
    iterator over a range, whose remaining length says how many ids were handed out without
    consuming one. Every scheduled event is processed by one ``step`` or is still queued, so
    the events processed are the ids handed out less the queue's length: the count a
    ``step`` override would keep, without a Python call per event. Event ids (and so the
    order of simultaneous events) are SimPy's own: 0, 1, 2 and on."""

    def __init__(self) -> None:
        super().__init__()
        self._eid = iter(range(_EVENT_IDS))
        self._elapsed = 0  # timeouts `elapse` stood in for

    @property
    def events_processed(self) -> int:
        return _EVENT_IDS - length_hint(self._eid) - len(self._queue) + self._elapsed

    def elapse(self, delay: float) -> bool:
        """Let ``delay`` pass for the active process in place of ``yield timeout(delay)``,
        when nothing is due until then; False when something is, and the process must yield
        the timeout.

        Nothing can happen meanwhile: every event that could (a crash's interrupt, a pause,
        a wakeup, the run's end) is already queued, and only the active process runs until
        it yields. So the process reaches the same moment with the same state, and every
        event keeps its place in SimPy's order: the queue's head must be due strictly later
        (an event due at the same moment was scheduled first, and would run first). Time is
        added as SimPy adds it, and the stand-in is counted as the event it replaces, so
        histories and event counts are those of the timeout."""
        at = self._now + delay
        queue = self._queue
        if queue and queue[0][0] <= at:
            return False
        self._now = at
        self._elapsed += 1
        return True


_EVENT_IDS = sys.maxsize


# A run's progress, for whoever drives it: the simulated time (ms) and the applications' tally
# so far (``sent``, ``acked``, ``failed``, ``indeterminate``, ``errored``).
Progress = Callable[[float, dict[str, int]], None]
PROGRESS_EVERY = 20_000  # events between two progress calls


class ReportingEnvironment(CountingEnvironment):
    """A :class:`CountingEnvironment` that calls ``report`` every ``every`` events. It adds no
    event and draws nothing: a run reports its progress without changing its course."""

    def __init__(self, report: Callable[[], None], every: int = PROGRESS_EVERY) -> None:
        super().__init__()
        self._report = report
        self._every = every
        self._steps = 0

    def step(self) -> None:
        super().step()
        self._steps += 1
        if self._steps % self._every == 0:
            self._report()

    def elapse(self, delay: float) -> bool:
        if not super().elapse(delay):
            return False
        self._steps += 1
        if self._steps % self._every == 0:
            self._report()
        return True


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
    # Why the run proves nothing, one reason each (a real run whose fault was not verifiably
    # applied, whose drain did not finish...: eosim.real.referee); empty for a model run.
    invalid: list[str] = field(default_factory=list)
    # Broker and partition state changes (traced runs only).
    state_changes: list[StateChange] | None = None

    @property
    def sim_time_s(self) -> float:
        return self.sim_time_ms / 1000.0


DRAIN_LIMIT_MS = 60_000.0
# How often the converge phase looks at the cluster.
CONVERGE_STEP_MS = 100.0


def run_scenario(
    scenario: Scenario,
    seed: int | None = None,
    *,
    trace: bool = False,
    progress: Progress | None = None,
) -> RunResult:
    """Run ``scenario`` with ``seed`` (default: the scenario's). ``trace`` records every
    message's journey in ``RunResult.trace`` (for timelines and shrinking; slower);
    ``progress`` is called every :data:`PROGRESS_EVERY` events (see :data:`Progress`)."""
    with run_collection():
        return _run(scenario, scenario.seed if seed is None else seed, trace, progress)


def _run(scenario: Scenario, seed: int, trace: bool, progress: Progress | None) -> RunResult:
    """The phases of :func:`run_scenario`; the model is garbage once this returns."""
    started = time.perf_counter()
    return finish(Run(scenario, seed, trace, progress), started)  # build, then the rest


def finish(run: Run, started: float) -> RunResult:
    """Every phase of :func:`run_scenario` after the build, in order, on ``run`` (built at
    ``started``, ``time.perf_counter()``): for a caller that looks into the built run first
    (benchmarks/replication_path.py records its brokers' reads)."""
    run.run_workload()
    run.heal()
    run.settle()
    run.recover()
    run.converge()
    run.abandon_open_operations()
    run.drain()
    return run.collect(time.perf_counter() - started)


def build_machines(scenario: Scenario, streams: RandomStreams) -> Machines | None:
    """The run's hosts and processes when the scenario has the resource model
    (``cluster.resources``); None without it."""
    resources = scenario.cluster.resources
    if resources is None:
        return None
    processes = [CONTROLLER, *scenario.broker_names(), *scenario.application_names()]
    return Machines(resources, processes, streams.stream)


def link_latency(scenario: Scenario) -> LatencyModel:
    """A message's time on a link: the resource model's wire (``cluster.resources.wire``)
    unless the scenario sets ``network.latency`` itself, else ``network.latency``."""
    n = scenario.network
    resources = scenario.cluster.resources
    if resources is not None and resources.wire is not None and "latency" not in n.model_fields_set:
        wire = resources.wire
        return LatencyModel("lognormal", median_ms=wire.median_ms, sigma=wire.sigma)
    return LatencyModel(**n.latency.model_dump())


def build_network(
    scenario: Scenario, env: simpy.Environment, streams: RandomStreams, trace: bool
) -> Network:
    n = scenario.network
    network = Network(
        env,
        NetworkSettings(
            link_latency(scenario),
            n.request_loss,
            n.response_loss,
            n.loss_model,
            n.dead_connection_reset,
            n.in_flight_after_close,
            n.packet_loss,
            n.retransmission_timeout,
        ),
        streams.stream("network"),
        streams.stream("network-loss"),
        streams.stream("network-internal"),
        streams.stream("network-internal-loss"),
        streams.stream("network-packet-loss"),
        streams.stream("network-internal-packet-loss"),
    )
    if trace:
        network.trace = []
    return network


class Run:
    """One run being assembled and driven; each public method is a phase of
    :func:`run_scenario`, to be called in that order."""

    def __init__(
        self, scenario: Scenario, seed: int, trace: bool, progress: Progress | None = None
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.env = env = (
            CountingEnvironment()
            if progress is None
            else ReportingEnvironment(
                lambda: progress(self.env.now, self.apps.counts()), PROGRESS_EVERY
            )
        )
        self.streams = streams = RandomStreams(seed)
        self.probe = probe = Probe()
        self.network = network = build_network(scenario, env, streams, trace)
        # Every client's configuration was resolved (and checked) when the scenario was
        # validated.
        self.clients = clients = scenario.clients
        self.warnings = clients.warnings
        self.history = history = HistoryRecorder(
            {
                "scenario": scenario.name,
                "seed": seed,
                "scenario_sha256": scenario.digest(),
                "configs": {name: c.to_kafka_dict() for name, c in clients.producers.items()},
            }
        )
        self.state_log = StateChangeLog(env, enabled=trace)
        self.machines = machines = build_machines(scenario, streams)
        self.cluster = cluster = Cluster.from_scenario(
            scenario, env, network, history, probe, streams, self.state_log, machines
        )
        context = BuildContext(
            env, network, cluster.metadata, cluster.rules, probe, history, streams, clients
        )
        self.apps = Applications(scenario, context)
        app_targets = self.apps.fault_targets()
        if machines is not None:
            observers = self.apps.observer_targets()
            app_targets = machines.freeze_on_gc(env, app_targets, observers)
            clients = [*app_targets, *observers]
            (
                network.loads,
                network.receive_loads,
                network.after_poll_loads,
                network.answer_loads,
            ) = (
                {
                    name: load
                    for name in clients
                    if (load := machines.client_load(name, work)) is not None
                }
                or None
                for work in ("send", "receive", "after_poll", "answer")
            )
            network.record_loads = {
                name: record
                for name in app_targets
                if (record := machines.client_record_load(name)) is not None
            } or None
            machines.start_background(env, cluster.process_running, streams.stream)
        self.schedule = realize_faults(
            scenario.faults, workload_horizon(scenario), streams.stream("nemesis")
        )
        # What the nemeses hit: the cluster's fault operations, and the applications.
        self.faults = RunFaults(cluster, list(cluster.fault_targets()), app_targets)
        Nemesis(env, self.schedule, self.faults, history)
        self.crash_at = CrashAtNemesis(
            env, scenario.faults, probe, self.faults, history, streams.stream("nemesis-points")
        )
        self.cut_by_duration = False

    @property
    def finished(self) -> bool:
        """Whether every application finished its work."""
        return self.apps.all_done.triggered

    def run_workload(self) -> None:
        limit = self.env.timeout(self.scenario.duration)
        self.env.run(until=simpy.AnyOf(self.env, [self.apps.all_done, limit]))
        self.cut_by_duration = not self.finished

    def heal(self) -> None:
        """A run that ends fault-free waits for the last scheduled fault to heal."""
        faults_end = max((e.end for e in self.schedule), default=0.0)
        if self.finished and faults_end > self.env.now:
            self.env.run(until=min(faults_end, self.scenario.duration))

    def settle(self) -> None:
        """Let requests still on the wire (acks=0, zombies of crashed producers) land."""
        if self.finished and self.scenario.settle > 0:
            self.env.run(until=self.env.now + self.scenario.settle)

    def recover(self) -> None:
        recovery = self.scenario.recovery_ms()
        if recovery > 0:
            self.env.run(until=self.env.now + recovery)

    def converge(self) -> None:
        """Let the cluster come to rest before its state is judged: every broker serving,
        every partition led at the controller's epoch, every replica caught up with its
        leader. Checked every :data:`CONVERGE_STEP_MS` for at most the scenario's
        ``converge_timeout``; a run that does not get there says why in a warning (its
        replicas are then judged only where they can no longer change). A run cut by its
        duration is judged as it stands."""
        if self.cut_by_duration:
            return
        limit = self.env.now + self.scenario.converge_timeout
        while (reasons := self.cluster.unconverged()) and self.env.now < limit:
            self.env.run(until=min(self.env.now + CONVERGE_STEP_MS, limit))
        if reasons:
            more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
            shown = "; ".join(reasons[:3]) + more
            self.warnings.append(
                f"the cluster had not come to rest {self.scenario.converge_timeout / 1000:g} s "
                f"after the workload: {shown}"
            )

    def abandon_open_operations(self) -> None:
        pending = self.apps.abandon_open_ops(
            "RunEnded: still outstanding when the run's duration ran out"
        )
        if pending:
            self.warnings.append(
                f"the run hit its duration with {pending} operations still outstanding"
            )

    def drain(self) -> None:
        """The final drain: a fresh read_committed consumer reads every partition to its
        LSO (only when some application writes transactionally or processes)."""
        if not self.apps.final_drain:
            return
        env, metadata = self.env, self.cluster.metadata
        drainer = KafkaConsumer(
            env,
            "drain",
            self.network,
            metadata,
            isolation="read_committed",
            metadata_rng=self.streams.stream("metadata:drain"),
            rng=self.streams.stream("consumer:drain"),
        )
        drainer.assign(metadata.partitions())
        drained = env.process(drain(env, drainer, self.history, "drain/0"))
        env.run(until=simpy.AnyOf(env, [drained, env.timeout(DRAIN_LIMIT_MS)]))
        if not drained.triggered:
            self.warnings.append("the final drain did not reach every partition's end")
        drainer.close()

    def collect(self, wall_time_s: float) -> RunResult:
        """Write the final state into the history; the run's result."""
        env, history, scenario = self.env, self.history, self.scenario
        sim_time = env.now
        self.cluster.collect_logs(history)
        self.apps.collect(history)
        if self.apps.final_drain:
            self.cluster.collect_transactions(history)
        if self.cut_by_duration:
            # The workload had not finished: writers may be mid-transaction at the end.
            history.add_end_line(
                {
                    "kind": "end",
                    "time": round(sim_time, 6),
                    "cut_by_duration": True,
                    "duration": scenario.duration,
                }
            )
        self.warnings.extend(self.cluster.replica_failures())
        stats = {
            "messages_sent": self.network.messages_sent,
            "messages_lost": self.network.messages_lost,
            "requests_handled": self.cluster.requests_handled,
            "producer_restarts": self.apps.restarts,
        }
        faults = sorted(
            self.schedule + self.crash_at.fired, key=lambda e: (e.start, e.end, e.kind, e.targets)
        )
        return RunResult(
            scenario=scenario.name,
            seed=self.seed,
            sim_time_ms=sim_time,
            events=env.events_processed,
            wall_time_s=wall_time_s,
            history=history,
            counts=self.apps.counts(),
            faults=faults,
            configs={name: c.to_kafka_dict() for name, c in self.clients.producers.items()},
            warnings=self.warnings,
            stats=stats,
            trace=self.network.trace,
            state_changes=self.state_log.events if self.state_log.enabled else None,
        )


__all__ = [
    "PROGRESS_EVERY",
    "CountingEnvironment",
    "Progress",
    "ReportingEnvironment",
    "Run",
    "RunResult",
    "run_scenario",
]
