"""One run of a scenario on a real Kafka, as a short list of named phases (like the model's
:func:`eosim.simulation.runner.run_scenario`):

1. **refuse**: a fault kind or application kind the real cluster cannot do stops the run
   before anything starts, with one line per reason (:func:`refusals`);
2. **prepare**: the scenario's topics recreated empty with the model's placement and configs,
   the internal topics its applications use on the model's leaders;
3. **warm up**: a cluster whose brokers were started (or restarted by an earlier run) since the
   last warm-up gets a warm-up load first (the driver's ``warmup`` mode, left out of every
   history: the model's brokers start a run warm), :data:`WARMUP_S` seconds and then more
   until every broker's JIT has settled (:func:`warm_up`; the run is invalid if it has not by
   :data:`WARMUP_MAX_S`);
4. **schedule**: the fault schedule the model realises for the same seed;
   **rehearse**: after a warm-up, when the referee's ``compiling`` rule will judge the run
   (its fault-free start is long enough), the run's own applications run that fault-free start
   on the scenario's topics, their histories discarded, until the brokers compile no more than
   the rule allows over one (:meth:`RealRun.rehearse`); the topics are then recreated empty;
5. **workload**: one driver process per application, started against a common epoch a little
   in the future on the machine's monotonic clock (every process reads the same clock), each
   producing one warmed and ready at its start time; the nemesis plays the schedule, each
   fault confirmed in effect before it is recorded; until every source application has exited
   or the scenario's ``duration`` has passed;
6. **heal**: the last scheduled fault ends (a crashed broker restarts and serves); then, as in
   the model, **settle** (when the workload finished), **recover** (the scenario's recovery
   time: transactions left open are aborted) and **converge** (until every broker serves and
   every partition is led with its whole ISR, or ``converge_timeout``);
7. **drain**: observers stop, and a fresh driver reads every partition of the scenario's topics
   to its end and to its LSO;
8. **collect**: the drivers' histories are merged into one, in time order, with the fault
   lines and the final logs: the same format the model writes. The run's
   :class:`~eosim.real.referee.Referee` says whether it proves anything
   (``RunResult.invalid``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosim.real import RealError
from eosim.real import applications as apps
from eosim.real.clients import DriverProcess, merge_histories, read_history_lines, write_spec
from eosim.real.cluster import CONTROLLER, RealCluster, node_id, topic_configs
from eosim.real.install import KafkaInstall
from eosim.real.nemesis import WallClockNemesis
from eosim.real.referee import (
    BACK_TIMEOUT_S,
    CLOCK,
    COMPILING,
    DELAYER_DIED,
    DRAIN_INCOMPLETE,
    DRIVER_DIED,
    LATE_BOUND_MS,
    NOT_WARM,
    WORKLOAD_LATE,
    Referee,
)
from eosim.simulation.applications import workload_horizon
from eosim.simulation.coordinator.directory import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from eosim.simulation.faults import KINDS, NETWORK_FAULTS, POINT_KINDS
from eosim.simulation.faults import refusals as fault_refusals
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.nemesis import FaultEvent, realize_faults
from eosim.simulation.rng import RandomStreams
from eosim.simulation.runner import CONVERGE_STEP_MS, Progress, RunResult
from eosim.simulation.scenario import Scenario

TARGET = "a real Kafka cluster"
# How long before the common epoch the drivers are started: a JVM takes about 1 s to start
# here, a producing driver's warm-up (WARMUP_RECORDS records) and its first metadata up to
# 2 s more on a loaded machine, then its own instance's warm-up (OWN_WARMUP_MS).
START_LEAD_MS = 10000.0
# Extra wall time a run may take beyond its scenario's duration before it is cut.
GRACE_S = 60.0
DRAIN_TIMEOUT_S = 120.0
# The warm-up load of a cluster whose brokers were (re)started since the last one: its topic
# (one partition led by each broker), its length and its rate. Kafka 4.1.1 here: a restarted
# broker's CPU per second under 3,000 records/s is 3-6 times its warm value for about 35 s of
# load (the JIT's second tier; python -m eosim.analysis.measure, docs/calibration.md).
WARMUP_TOPIC = "eosim-warmup"
WARMUP_S = 30.0
WARMUP_RATE = 2000.0
# ... and it goes on, a slice at a time, until every broker's JIT has settled: its compiler
# threads ran at most JIT_SETTLED_MS_PER_S over the last slice, or WARMUP_MAX_S have passed
# (then the run is invalid, referee rule "not warm"; the slice that crosses it is a whole
# one). Kafka 4.1.1 here under the warm-up load (python benchmarks/real_jit_settle.py;
# docs/real-cluster.md, "A warm cluster"): 200-280 ms/s for the first 40 s after a cluster
# start, under 15 over 20 s from about 110 s; a restarted broker (and the others, as
# leadership moves back) up to 330 ms/s, under 15 from about 150 s; warm brokers 0.4-8 ms/s,
# with blips to 30 in 10 s. Under the transactional warm-up after all three brokers restarted
# (calibration case 4; --transactional --restart broker-0,broker-1,broker-2, 2026-11-30) the
# compilers ran at 100-300 ms/s for 80-100 s, then in bursts of 40-110 ms/s until 240-280 s:
# the bound is twice that.
WARMUP_SLICE_S = 20.0
WARMUP_MAX_S = 600.0
JIT_SETTLED_MS_PER_S = 15.0
# ... and the run's own load must not make the brokers compile much more (referee rule
# "compiling"): over the workload's fault-free start (the epoch to the first fault, judged
# when at least JIT_WINDOW_MIN_S long) no broker's compiler threads may run above
# JIT_WORKLOAD_MS_PER_S. Kafka 4.1.1, calibration case 5 with acks=1, two sweeps of 8 and 10
# runs on one cluster each (python benchmarks/tail_pauses.py run, docs/calibration.md,
# "Kafka's acks=1 tail and the JVMs' pauses"): the first two runs after the cluster start,
# after a warm-up that had settled, compiled 68-120 ms/s a broker over their workload, the
# runs after them 0-25; a shorter window is not judged (a warm broker blips to 30 ms/s over
# 10 s, more over less).
JIT_WORKLOAD_MS_PER_S = 50.0
JIT_WINDOW_MIN_S = 5.0
# ... so, after a warm-up, the run's own load is rehearsed first (RealRun.rehearse): its
# applications, fault-free, over the window the rule will judge, again until the brokers'
# compilers stay within JIT_WORKLOAD_MS_PER_S over one rehearsal or REHEARSALS_MAX have run
# (the run is then judged as it comes). Kafka 4.1.1, calibration case 5 (40 runs, variants
# interleaved, on the Xeon of 2026-12-02, docs/calibration.md): without it the sweep's first
# three runs broke the rule (52-147 ms/s a broker), every later run kept it.
REHEARSALS_MAX = 6
# Records a producing driver writes to the warm-up topic before its epoch (its own JIT), and
# a reading driver reads from it (at most for 2 s; Warmup.reader): without it a reader's
# first second is its JIT's (Kafka 4.1.1, calibration case 5: the acknowledged records a
# cold reader read more than 20 ms late, about 100-400 a run, all came in the run's first
# 1.6 s).
WARMUP_RECORDS = 2000
# ... then a plain or idempotent producer's own instance (the produce mode's) sends to the
# warm-up topic at the run's rate for at most this long, ending Warmup.OWN_GAP_MS before its
# start (Warmup.own): its connections to every broker open and its per-request code
# compiled. Without it a new producer opened its connections at its first batch and its first
# acknowledgements came 46-50 ms after its first sends (Kafka 4.1.1, calibration case 5,
# docs/calibration.md). With 1.5 s of it the records acknowledged in a run's first 500 ms were
# still read up to 24 ms after their acknowledgement at the median (16 of 20 runs above 1 ms,
# the clients' JIT still compiling); with 6 s, at most 0.85 ms (6 runs of 6; the rest of the
# run's median 0.3 ms).
OWN_WARMUP_MS = 6000.0
# A reading driver's own consumer reads the warm-up topic beside its run's until its start, so
# it reads those sends as they come (Warmup.ownPartitions): after a bulk read of
# WARMUP_READ_RECORDS alone, the records acknowledged in a run's first second were read 0.98
# ms after their acknowledgement at the median, 0.14 ms in the rest (calibration case 5,
# docs/calibration.md).
WARMUP_READ_RECORDS = 10000
# The driver modes whose client reads with a warm-up before the epoch.
WARMED_READERS = ("consume",)


# Driver modes that stop when their stop file appears, with how long (s) they may take then
# at least: a processor first works through the rest of its input (until the scenario's
# duration at most), then stops after a quiet poll.
STOPPED_BY_FILE = {"consume": 30.0, "process": 180.0}


class RealRunError(RealError):
    """A real run that could not be carried out; its text is one line for the user."""


def refusals(scenario: Scenario, cluster_refuses: dict[str, str]) -> list[str]:
    """Every reason ``scenario`` cannot run on a real cluster, one line each (empty: it can)."""
    kinds = [f.kind for f in scenario.faults]
    out = fault_refusals(kinds, cluster_refuses, TARGET)
    for kind in POINT_KINDS:
        if kind in kinds:
            what = KINDS[kind].acts_as
            out.append(
                f"{kind} faults cannot run on a real cluster: they {what} a node at a protocol "
                "point inside Kafka's code, which eosim cannot reach in a real JVM"
            )
    out.extend(apps.refused_kinds(scenario))
    return out


@dataclass
class _Running:
    plan: apps.AppPlan
    process: DriverProcess
    history: Path
    # The run's time (ms) just before the process was started (its clock check).
    spawned_ms: float = 0.0
    # Stopped on purpose: crashed by a fault, or killed at the run's end.
    killed: bool = False


class RealFaults:
    """The fault protocol on a real cluster and its clients: brokers and the controller go to
    the :class:`~eosim.real.cluster.RealCluster`, applications to their driver processes."""

    def __init__(self, run: RealRun) -> None:
        self.run = run
        self.cluster = run.cluster

    def _app(self, node: str) -> _Running | None:
        return self.run.running.get(node)

    def crash(self, node: str) -> None:
        if self._app(node) is not None:
            self.run.crash_app(node)
        else:
            self.cluster.crash(node)

    def power_loss(self, node: str) -> None:
        self.cluster.power_loss(node)

    def restart(self, node: str) -> None:
        if node in self.run.plans:
            self.run.restart_app(node)
        else:
            self.cluster.restart(node)

    def pause(self, node: str) -> None:
        if (app := self._app(node)) is not None:
            app.process.pause()
        else:
            self.cluster.pause(node)

    def resume(self, node: str) -> None:
        if (app := self._app(node)) is not None:
            app.process.resume()
        else:
            self.cluster.resume(node)

    def partition(self, groups: Any) -> Any:
        return self.cluster.partition(groups)

    def disturb(self, nodes: Any, links: Any, extra_latency: float, loss: float) -> Any:
        return self.cluster.disturb(nodes, links, extra_latency, loss)

    def heal(self, handle: Any) -> None:
        self.cluster.heal(handle)

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        return self.cluster.delete_records(topic, partition, offset)


class RealRun:
    """One run being assembled and driven on ``cluster``; each public method is a phase of
    :func:`run_real`, in order."""

    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        cluster: RealCluster,
        install: KafkaInstall,
        workdir: Path,
        progress: Progress | None = None,
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.cluster = cluster
        self.install = install
        self.workdir = workdir
        self.progress = progress
        self.plans = {p.name: p for p in apps.plans(scenario)}
        self.running: dict[str, _Running] = {}
        self.finished: list[_Running] = []
        self.warnings: list[str] = []
        self.referee = Referee()
        self.fault_lines: list[tuple[float, str, str, list[str], dict[str, Any]]] = []
        # Time 0 of the run, on the wall clock (ms, for LogAppendTime) and on the machine's
        # monotonic clock (ns, which the drivers and the fault lines read).
        self.epoch_ms = 0.0
        self.epoch_ns = 0
        self.cut_by_duration = False
        self.end_ms = 0.0
        self.schedule: list[FaultEvent] = []
        self.crashed: set[str] = set()
        self.network_faults = any(f.kind in NETWORK_FAULTS for f in scenario.faults)
        # This run warmed the cluster up (its brokers were cold), and what the run adds to
        # its result's stats (the rehearsals).
        self.warmed = False
        self.stats: dict[str, Any] = {}

    # -- phases ------------------------------------------------------------------------------
    def refuse(self) -> None:
        reasons = refusals(self.scenario, self.cluster.refuses)
        if reasons:
            raise RealRunError(
                reasons[0] + (f" (and {len(reasons) - 1} more)" if reasons[1:] else "")
            )

    def prepare(self) -> None:
        """Recreate the scenario's topics with the model's placement and configs, and put the
        internal topics its applications use (``__transaction_state`` for transactions,
        ``__consumer_offsets`` for consumer groups) on the model's leaders."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster.recreate_topics(topic_configs(self.scenario))
        internal = [TRANSACTION_STATE_TOPIC] if self._transactional() else []
        if any(p.input.subscribe for p in self.scenario.processors):
            # Created up front, as the model's exists from the start: otherwise the group's
            # first FindCoordinator creates its 50 partitions and the members' first join
            # waits seconds for it.
            internal.append(CONSUMER_OFFSETS_TOPIC)
        self.cluster.place_internal(internal)

    def warm_up(self) -> None:
        """A warm-up load when any broker was (re)started since the last one (a cluster's
        first run, or brokers an earlier run crashed): JIT and caches warm on every broker's
        produce, fetch and, for a transactional scenario, transaction paths. Nothing of it
        reaches the run's history."""
        if not any(n != CONTROLLER for n in self.cluster.cold_nodes()):
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        warmth = warm_up(self.cluster, self.install, self.workdir, self._transactional(), WARMUP_S)
        self.warmed = True
        if not warmth.settled:
            self.referee.invalid(NOT_WARM, warmth.describe())

    def rehearse(self) -> None:
        """After a warm-up, the run's own load before the run, so that the brokers' JIT has
        compiled what this load needs before the ``compiling`` rule judges it: the warm-up's
        load is not the scenario's, and without this a sweep's first runs after a cluster start
        break the rule (:data:`REHEARSALS_MAX`). The applications run fault-free on the
        scenario's topics over the window the rule judges (:func:`rehearsal_window`), their
        histories discarded, until one rehearsal keeps the rule; then the topics are recreated
        empty. Only for scenarios whose applications keep no state in the cluster beyond
        their topics (no transactions, no consumer group): a transactional id's epoch or a
        group's committed offsets would outlive the recreated topics. The rehearsals' count and
        length go into the run's ``stats``."""
        if not self.warmed or not self.referee.valid:
            return
        window = rehearsal_window(self.scenario, self.schedule)
        if window is None:
            return
        short = self.scenario.model_copy(update={"duration": window})
        began = time.monotonic()
        count = 0
        for count in range(1, REHEARSALS_MAX + 1):
            folder = self.workdir / f"rehearsal-{count}"
            folder.mkdir(parents=True, exist_ok=True)
            rehearsal = RealRun(short, self.seed, self.cluster, self.install, folder)
            try:
                rehearsal.run_workload()
            finally:
                rehearsal.stop_applications()
                if (nemesis := getattr(rehearsal, "nemesis", None)) is not None:
                    nemesis.abort()
            shutil.rmtree(folder, ignore_errors=True)
            other = [r for r in rehearsal.referee.reasons if not r.startswith(COMPILING)]
            if other:
                self.warnings.append(f"the rehearsal of the run's load failed: {other[0]}")
                break
            if rehearsal.referee.valid:
                break
        self.stats["rehearsals"] = count
        self.stats["rehearsal_s"] = round(time.monotonic() - began, 1)
        self.prepare()

    def _transactional(self) -> bool:
        return bool(
            self.scenario.transactional_producers
            or any(p.transactional for p in self.scenario.processors)
        )

    def realise_schedule(self) -> None:
        """The model's fault schedule for this seed; the delayers its delay faults will need
        are started now, so that those faults start on time."""
        streams = RandomStreams(self.seed)
        self.schedule = realize_faults(
            self.scenario.faults, workload_horizon(self.scenario), streams.stream("nemesis")
        )
        every = [CONTROLLER, *self.cluster.broker_names, *self.plans]
        if nodes := delayed_nodes(self.schedule, every):
            self.cluster.prepare_delays(nodes)

    def clock(self) -> float:
        """Milliseconds since the run's epoch (negative before it), on the machine's
        monotonic clock: the one every driver reads (real/driver/History.java)."""
        return (time.monotonic_ns() - self.epoch_ns) / 1e6

    def run_workload(self) -> None:
        self.epoch_ns = time.monotonic_ns() + int(START_LEAD_MS * 1e6)
        self.epoch_ms = time.time() * 1000.0 + START_LEAD_MS
        for plan in self.plans.values():
            self._start_app(plan)
        self.nemesis = WallClockNemesis(
            self.schedule,
            RealFaults(self),
            self.clock,
            self._record_fault,
            self.referee,
            self._await_back,
        )
        self.nemesis.start()
        limit = self.scenario.duration
        # The brokers' JIT over the workload's fault-free start (referee rule "compiling").
        quiet_until = min((e.start for e in self.schedule), default=limit)
        jit_from: tuple[float, JitReadings] | None = None
        jit_to: tuple[float, JitReadings] | None = None
        while (now := self.clock()) < limit:
            if jit_from is None and now >= 0:
                jit_from = (time.monotonic(), jit_readings(self.cluster))
            if jit_from is not None and jit_to is None and now >= quiet_until:
                jit_to = (time.monotonic(), jit_readings(self.cluster))
            if all(not self._alive_source(name) for name in self.plans if self.plans[name].source):
                break
            self._report()
            time.sleep(0.2)
        else:
            self.cut_by_duration = True
        self.end_ms = min(self.clock(), limit)
        if jit_from is not None:
            if jit_to is None:
                jit_to = (time.monotonic(), jit_readings(self.cluster))
            seconds = jit_to[0] - jit_from[0]
            self.referee.extend(COMPILING, compiling(jit_from[1], jit_to[1], seconds))

    def _await_back(self, event: FaultEvent) -> Any:
        """For the end of a crash of brokers or the controller: a call that waits until they
        serve again and returns that moment."""
        if event.kind not in ("crash", "power_loss"):
            return None
        nodes = [n for n in event.targets if n in self.cluster.nodes]
        if not nodes:
            return None

        def served() -> float:
            self.cluster.wait_ready(nodes, BACK_TIMEOUT_S)
            return self.clock()

        return served

    def heal(self) -> None:
        """The schedule plays out (when the workload finished first), then every fault still
        in force ends; the settle, recovery and converge phases follow, as in the model."""
        faults_end = max((e.end for e in self.schedule), default=0.0)
        if not self.cut_by_duration and faults_end > self.clock():
            wait_s = (min(faults_end, self.scenario.duration) - self.clock()) / 1000.0 + GRACE_S
            if not self.nemesis.finish(max(wait_s, 0.0)):
                self.warnings.append("the fault schedule had not played out when the run ended")
        until = self.end_ms if self.cut_by_duration else min(faults_end, self.scenario.duration)
        self.nemesis.abort(until_ms=until)
        self.referee.extend(DELAYER_DIED, self.cluster.delayer_deaths())

    def settle(self) -> None:
        """Let requests still on the wire land (the model's settle: when the workload
        finished)."""
        if not self.cut_by_duration and self.scenario.settle > 0:
            time.sleep(self.scenario.settle / 1000.0)

    def recover(self) -> None:
        """Fault-free time for transactions left open to be aborted (the model's recovery)."""
        if (recovery := self.scenario.recovery_ms()) > 0:
            time.sleep(recovery / 1000.0)

    def converge(self) -> None:
        """Wait (up to ``converge_timeout``) until every broker serves and every partition of
        the scenario's topics is led with its whole ISR, as the model's converge phase; a run
        that does not get there says why in a warning. A run cut by its duration is judged as
        it stands."""
        if self.cut_by_duration:
            return
        topics = [t.name for t in self.scenario.cluster.topics]
        deadline = time.monotonic() + self.scenario.converge_timeout / 1000.0
        while (reasons := self.cluster.unconverged(topics)) and time.monotonic() < deadline:
            time.sleep(CONVERGE_STEP_MS / 1000.0)
        if reasons:
            more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
            self.warnings.append(
                f"the cluster had not come to rest {self.scenario.converge_timeout / 1000:g} s "
                f"after the workload: {'; '.join(reasons[:3])}{more}"
            )

    def stop_applications(self) -> None:
        """Sources that are still running (a run cut by its duration) and observers stop."""
        # Processors first finish the input (each stops after a quiet poll), then readers.
        order = sorted(self.running, key=lambda n: self.running[n].plan.mode != "process")
        for name in order:
            if self.running[name].plan.mode in STOPPED_BY_FILE:
                (self.workdir / f"{name}.{self.running[name].plan.incarnation}.stop").touch()
        for name in order:
            running = self.running.pop(name)
            mode = running.plan.mode
            if mode in STOPPED_BY_FILE:
                # A processor may work on until the scenario's duration.
                left_s = 0.0
                if mode == "process":
                    left_s = (self.scenario.duration - self.clock()) / 1000.0
                wait_s = max(STOPPED_BY_FILE[mode], left_s)
                code = running.process.wait(wait_s)
                if code is None:
                    running.process.kill()
                    running.killed = True
                    self.referee.invalid(
                        DRIVER_DIED, f"{name} did not stop within {wait_s:.0f} s; killed"
                    )
                elif code != 0:
                    self.referee.invalid(
                        DRIVER_DIED, f"{name} exited with {code} ({running.process.error()})"
                    )
            else:
                # A source still running when the run was cut by its duration.
                running.killed = True
                running.process.terminate()
                if running.process.wait(10.0) is None:
                    running.process.kill()
            self.finished.append(running)

    def drain(self) -> Path:
        """A fresh driver reads every partition of the scenario's topics to its end
        (read_uncommitted: the ``log`` lines, each replicated partition's with its leader and
        high watermark) and to its LSO (read_committed). A drain that fails or does not reach
        the end of every partition makes the run invalid: a partition without its ``log``
        line would hide its losses."""
        path = self.workdir / "drain.jsonl"
        spec_path = write_spec(
            self.workdir / "drain.spec.json",
            "drain",
            "drain",
            self.cluster.bootstrap(),
            history=path,
            epoch_ms=self.epoch_ms,
            epoch_monotonic_ns=self.epoch_ns,
            seed=self.seed,
            workload={
                "topics": [t.name for t in self.scenario.cluster.topics],
                "timeout_ms": DRAIN_TIMEOUT_S * 1000 / 2,
            },
            node_names={str(node_id(b)): b for b in self.cluster.broker_names},
        )
        process = DriverProcess(self.install, spec_path)
        code = process.wait(DRAIN_TIMEOUT_S)
        if code != 0:
            process.kill()
            path.unlink(missing_ok=True)
            path.touch()
            self.referee.invalid(DRAIN_INCOMPLETE, f"the drain failed ({process.error() or code})")
            return path
        result = process.result() or {}
        if missing := result.get("incomplete"):
            names = ", ".join(f"{m['topic']}-{m['partition']}" for m in missing)
            self.referee.invalid(DRAIN_INCOMPLETE, f"not read to its end: {names}")
        return path

    def check_drivers(self) -> None:
        """Each driver's clock was the runner's, and each first incarnation of a source
        started its workload on time."""
        for running in self.finished:
            result = running.process.result() or {}
            name = running.plan.name
            clock = result.get("clock_ms")
            if isinstance(clock, int | float) and not (
                running.spawned_ms - 1.0 <= clock <= running.spawned_ms + 120_000.0
            ):
                self.referee.invalid(
                    CLOCK,
                    f"{name}'s clock read {clock:.3f} ms on opening its history, started at "
                    f"{running.spawned_ms:.3f} ms",
                )
            late = result.get("late_ms")
            first = running.history.name.endswith(".0.jsonl")
            if first and isinstance(late, int | float) and late > LATE_BOUND_MS:
                self.referee.invalid(
                    WORKLOAD_LATE, f"{name} began {late:.0f} ms after its start time"
                )

    def collect(self, drain_path: Path, wall_time_s: float) -> RunResult:
        configs = {n: dict(p.config) for n, p in self.plans.items() if p.mode != "consume"}
        history = HistoryRecorder(
            {
                "scenario": self.scenario.name,
                "seed": self.seed,
                "scenario_sha256": self.scenario.digest(),
                "target": "kafka",
                "kafka_version": self.install.version,
                "configs": configs,
            }
        )
        parts = [read_history_lines(running.history) for running in self.finished]
        faults = [
            {"kind": "fault", "time": round(t, 3), "phase": phase, "fault": kind}
            | {"targets": targets, **detail}
            for t, phase, kind, targets, detail in self.fault_lines
        ]
        end_time = self.clock()
        # The drivers' ops and the faults in time order, ids made unique; then the drain's
        # final lines (log, lso).
        for line in merge_histories([*parts, faults, read_history_lines(drain_path)]):
            history.add_line(line)
        if self.cut_by_duration:
            history.add_end_line(
                {
                    "kind": "end",
                    "time": round(end_time, 3),
                    "cut_by_duration": True,
                    "duration": self.scenario.duration,
                }
            )
        lateness = self.nemesis.lateness_ms
        return RunResult(
            scenario=self.scenario.name,
            seed=self.seed,
            sim_time_ms=end_time,
            events=0,
            wall_time_s=wall_time_s,
            history=history,
            counts=_counts(
                lines
                for running, lines in zip(self.finished, parts, strict=True)
                if running.plan.mode != "consume"
            ),
            faults=sorted(self.nemesis.applied, key=lambda e: (e.start, e.end, e.kind, e.targets)),
            configs=configs,
            warnings=self.warnings,
            stats={
                "driver_processes": len(self.finished),
                "faults_scheduled": len(self.schedule),
                "fault_lateness_max_us": round(1000 * max(lateness, default=0.0)),
                **self.stats,
            },
            invalid=self.referee.reasons,
        )

    # -- applications -----------------------------------------------------------------------
    def _start_app(self, plan: apps.AppPlan) -> None:
        plan.incarnation += 1
        stem = f"{plan.name}.{plan.incarnation}"
        history = self.workdir / f"{stem}.jsonl"
        spec = apps.spec_for(plan, self.cluster.bootstrap(), history, self.epoch_ms, self.seed)
        spec["epoch_monotonic_ns"] = self.epoch_ns
        if plan.mode in STOPPED_BY_FILE:
            spec["stop_file"] = str(self.workdir / f"{stem}.stop")
        if plan.incarnation == 0 and (plan.source or plan.mode in WARMED_READERS):
            # Warm the client's code before the epoch (a reader's after its start positions
            # are fixed); a restarted incarnation starts cold, as a restarted process does.
            records = WARMUP_RECORDS if plan.source else WARMUP_READ_RECORDS
            spec["warmup"] = {"topic": WARMUP_TOPIC, "records": records}
            if plan.mode == "produce":
                spec["warmup"]["own_ms"] = OWN_WARMUP_MS
            elif plan.mode == "consume":
                spec["warmup"]["own"] = True  # reads what the producers' own warm-ups write
        fixed = ("mode", "name", "bootstrap")
        spec_path = write_spec(
            self.workdir / f"{stem}.spec.json",
            spec["mode"],
            spec["name"],
            spec["bootstrap"],
            **{k: v for k, v in spec.items() if k not in fixed},
        )
        spawned = self.clock()
        process = DriverProcess(
            self.install,
            spec_path,
            prefix=self.cluster.client_prefix(plan.name) if self.network_faults else (),
            gc_log=self.workdir / f"{stem}.gc.log",
        )
        self.running[plan.name] = _Running(plan, process, history, spawned)

    def _alive_source(self, name: str) -> bool:
        running = self.running.get(name)
        if running is None:
            # Crashed and not yet restarted: the workload is not over.
            return name in self.crashed
        if running.process.running():
            return True
        self.running.pop(name)
        self.finished.append(running)
        code = running.process.returncode
        if code not in (0, None):
            self.referee.invalid(
                DRIVER_DIED, f"{name} exited with {code} ({running.process.error()})"
            )
        return False

    def crash_app(self, name: str) -> None:
        running = self.running.pop(name, None)
        if running is None:
            return
        running.process.kill()
        running.killed = True
        self.finished.append(running)
        self.crashed.add(name)
        apps.note_history(running.plan, read_history_lines(running.history))

    def restart_app(self, name: str) -> None:
        if name not in self.crashed:
            return
        self.crashed.discard(name)
        self._start_app(self.plans[name])

    def _record_fault(
        self, t: float, phase: str, kind: str, targets: list[str], detail: dict[str, Any]
    ) -> None:
        self.fault_lines.append((t, phase, kind, targets, detail))

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(max(self.clock(), 0.0), {})


def ensure_warmup_topic(cluster: RealCluster) -> None:
    """The warm-up topic, one partition per broker, replicated as the internal topics are:
    created once per cluster, and each partition led by its own broker again before every
    warm-up. After an earlier run's crashes a restarted broker leads none of it, so its leader
    paths would stay cold through the warm-up, and the controller's preferred-leader tick
    (every 300 s) would hand it its partitions in the middle of one: the three brokers'
    compilers then ran at 160-340 ms/s again 240 s into a warm-up (Kafka 4.1.1,
    ``python benchmarks/real_jit_settle.py --transactional --restart
    broker-0,broker-1,broker-2``, docs/real-cluster.md, "A warm cluster")."""
    partitions = len(cluster.broker_names)
    rf = min(3, partitions)
    if getattr(cluster, "_warmup_topic", False):
        cluster.lead_preferred(WARMUP_TOPIC, partitions, rf)
        return
    cluster.recreate_topics(
        [
            {
                "name": WARMUP_TOPIC,
                "partitions": partitions,
                "replication_factor": rf,
                "config": {"min.insync.replicas": str(min(2, rf))},
            }
        ]
    )
    cluster._warmup_topic = True  # type: ignore[attr-defined]


# Each broker's (pid, ms its JIT compiler threads have run), None when not running.
JitReadings = dict[str, tuple[int, float] | None]


def jit_readings(cluster: RealCluster) -> JitReadings:
    """Every broker's JIT compiler threads' CPU so far (:meth:`RealCluster.jit_cpu_ms`)."""
    return {b: cluster.jit_cpu_ms(b) for b in cluster.broker_names}


def jit_rates(before: JitReadings, after: JitReadings, seconds: float) -> dict[str, float | None]:
    """Each broker's JIT compiler threads' CPU between two readings ``seconds`` apart, in
    ms/s (None: not running at either reading, or another process at the second)."""
    rates: dict[str, float | None] = {}
    for broker, first in before.items():
        last = after.get(broker)
        same = first is not None and last is not None and first[0] == last[0]
        rates[broker] = (last[1] - first[1]) / seconds if same else None  # type: ignore[index]
    return rates


def rehearsal_window(scenario: Scenario, schedule: Iterable[FaultEvent]) -> float | None:
    """The length (ms) of the run's load a rehearsal plays (:meth:`RealRun.rehearse`): the
    workload's fault-free start, as the ``compiling`` rule judges it (from the epoch to the
    first fault, or the scenario's duration). None when the rule will not judge it (shorter
    than :data:`JIT_WINDOW_MIN_S`) or when the scenario's applications keep state in the
    cluster that recreating its topics does not reset (a transactional id, a consumer group)."""
    window = min((e.start for e in schedule), default=scenario.duration)
    window = min(window, scenario.duration)
    if window < JIT_WINDOW_MIN_S * 1000.0:
        return None
    if scenario.transactional_producers or scenario.processors:
        return None
    return window


def compiling(before: JitReadings, after: JitReadings, seconds: float) -> list[str]:
    """Why a run's load made its brokers compile (referee rule "compiling"), from two
    readings ``seconds`` apart: each broker whose compiler threads ran above
    :data:`JIT_WORKLOAD_MS_PER_S`. A window shorter than :data:`JIT_WINDOW_MIN_S` is not
    judged, nor a broker not running at either reading or restarted between them."""
    if seconds < JIT_WINDOW_MIN_S:
        return []
    out = []
    for broker, rate in jit_rates(before, after, seconds).items():
        if rate is not None and rate > JIT_WORKLOAD_MS_PER_S:
            out.append(
                f"{broker}'s JIT compiled {rate:.0f} ms/s over the workload's first "
                f"{seconds:.0f} s (bound {JIT_WORKLOAD_MS_PER_S:.0f} ms/s)"
            )
    return out


@dataclass(frozen=True)
class Warmth:
    """How a warm-up load ended: its length (s), and each broker's JIT compiler threads' CPU
    over its last slice (ms/s; None: not measured, the process changed or ``/proc`` could not
    tell)."""

    seconds: float
    jit_ms_per_s: dict[str, float | None]
    settled: bool
    # The length of its last slice (s), over which ``jit_ms_per_s`` was measured.
    last_slice_s: float

    def describe(self) -> str:
        still = [
            f"{b}'s JIT compiled {r:.0f} ms/s" if r is not None else f"{b}'s JIT not measured"
            for b, r in self.jit_ms_per_s.items()
            if r is None or r > JIT_SETTLED_MS_PER_S
        ]
        return (
            f"after {self.seconds:.0f} s of warm-up load {', '.join(still)} in its last "
            f"{self.last_slice_s:.0f} s (bound {JIT_SETTLED_MS_PER_S:.0f} ms/s)"
        )


def warm_up(
    cluster: RealCluster,
    install: KafkaInstall,
    workdir: Path,
    transactional: bool,
    seconds: float,
    settle: bool = True,
) -> Warmth:
    """Run the driver's ``warmup`` load on ``cluster`` for ``seconds`` (with transactions when
    ``transactional``), then, with ``settle``, :data:`WARMUP_SLICE_S` more at a time until every
    broker's JIT has settled (:data:`JIT_SETTLED_MS_PER_S`) or :data:`WARMUP_MAX_S` have passed;
    count its nodes warm either way, and say how it ended."""
    ensure_warmup_topic(cluster)
    elapsed, length = 0.0, seconds
    while True:
        rates = warmup_slice(cluster, install, workdir, transactional, length)
        elapsed += length
        settled = all(r is not None and r <= JIT_SETTLED_MS_PER_S for r in rates.values())
        if not settle or settled or elapsed >= WARMUP_MAX_S:
            break
        # A whole slice even where it crosses WARMUP_MAX_S: the bound is for a slice's length,
        # and a warm broker's compiler blips higher over a shorter one.
        length = WARMUP_SLICE_S
    cluster.mark_warm()
    return Warmth(elapsed, rates, settled, length)


def warmup_slice(
    cluster: RealCluster,
    install: KafkaInstall,
    workdir: Path,
    transactional: bool,
    seconds: float,
) -> dict[str, float | None]:
    """Run the warm-up load for ``seconds``; each broker's JIT compiler threads' CPU over it,
    in ms/s (None: its process changed meanwhile, or ``/proc`` could not tell)."""
    before = jit_readings(cluster)
    began = time.monotonic()
    _warmup_load(cluster, install, workdir, transactional, seconds)
    took = max(time.monotonic() - began, 1e-3)
    return jit_rates(before, jit_readings(cluster), took)


def _warmup_load(
    cluster: RealCluster,
    install: KafkaInstall,
    workdir: Path,
    transactional: bool,
    seconds: float,
) -> None:
    spec = write_spec(
        workdir / "warmup.spec.json",
        "warmup",
        "warmup",
        cluster.bootstrap(),
        workload={
            "topic": WARMUP_TOPIC,
            "seconds": seconds,
            "rate": WARMUP_RATE,
            "transactional": transactional,
        },
    )
    process = DriverProcess(install, spec)
    code = process.wait(seconds + 120.0)
    if code != 0:
        process.kill()
        raise RealRunError(f"the warm-up load failed ({process.error() or code})")


def delayed_nodes(schedule: Iterable[FaultEvent], every: list[str]) -> list[str]:
    """The nodes whose packets the delay faults of ``schedule`` hold (each needs a delayer):
    its links' sources if it names links, else its nodes, else ``every`` node (the model's
    delay window)."""
    out: list[str] = []
    for event in schedule:
        if event.kind != "delay":
            continue
        nodes = [src for src, _ in event.links] or list(event.targets) or every
        out.extend(n for n in nodes if n not in out)
    return out


def _counts(histories: Iterable[list[dict[str, Any]]]) -> dict[str, int]:
    """The applications' tally (``sent``, ``acked``, ``failed``, ``indeterminate``) of their
    ``send``, ``txn`` and ``process`` operations, from their drivers' history lines."""
    counts = {"sent": 0, "acked": 0, "failed": 0, "indeterminate": 0, "errored": 0}
    kind = {"invoke": "sent", "ok": "acked", "fail": "failed", "info": "indeterminate"}
    for lines in histories:
        for line in lines:
            if line.get("kind") == "op" and line.get("f") in ("send", "txn", "process"):
                counts[kind[line["type"]]] += 1
    return counts


def run_real(
    scenario: Scenario,
    seed: int | None,
    cluster: RealCluster,
    install: KafkaInstall,
    workdir: Path,
    progress: Progress | None = None,
) -> RunResult:
    """Run ``scenario`` once on ``cluster`` (already started); its history, in eosim's format."""
    started = time.perf_counter()
    run = RealRun(
        scenario, scenario.seed if seed is None else seed, cluster, install, workdir, progress
    )
    run.refuse()
    run.prepare()
    run.warm_up()
    run.realise_schedule()
    run.rehearse()
    try:
        run.run_workload()
        run.heal()
        run.settle()
        run.recover()
        run.converge()
    finally:
        run.stop_applications()
    drained = run.drain()
    run.check_drivers()
    return run.collect(drained, time.perf_counter() - started)


__all__ = [
    "JIT_WINDOW_MIN_S",
    "JIT_WORKLOAD_MS_PER_S",
    "OWN_WARMUP_MS",
    "REHEARSALS_MAX",
    "START_LEAD_MS",
    "WARMUP_TOPIC",
    "JitReadings",
    "RealRun",
    "RealRunError",
    "Warmth",
    "compiling",
    "delayed_nodes",
    "ensure_warmup_topic",
    "jit_rates",
    "jit_readings",
    "refusals",
    "rehearsal_window",
    "run_real",
    "warm_up",
    "warmup_slice",
]
