"""One run of a scenario on a real Kafka, as a short list of named phases (like the model's
:func:`eosim.simulation.runner.run_scenario`):

1. **refuse**: a fault kind or application kind the real cluster cannot do stops the run
   before anything starts, with one line per reason (:func:`refusals`);
2. **prepare**: a cluster that fits the scenario (started, or restarted when its broker
   configuration differs), the scenario's topics recreated empty;
3. **schedule**: the fault schedule the model realises for the same seed;
4. **workload**: one driver process per application, started together against a common epoch
   a little in the future, the nemesis playing the schedule on the wall clock, until every
   source application has exited or the scenario's ``duration`` has passed;
5. **heal**: the last scheduled fault ends (a crashed broker restarts) and ``settle`` passes;
6. **drain**: observers stop, and a fresh driver reads every partition of the scenario's topics
   to its end and to its LSO;
7. **collect**: the drivers' histories are merged into one, in time order, with the fault
   lines and the final logs: the same format the model writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosim.real import RealError
from eosim.real import applications as apps
from eosim.real.clients import DriverProcess, merge_histories, read_history_lines, write_spec
from eosim.real.cluster import CONTROLLER, RealCluster, topic_configs
from eosim.real.install import KafkaInstall
from eosim.real.nemesis import WallClockNemesis
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
from eosim.simulation.runner import Progress, RunResult
from eosim.simulation.scenario import Scenario

TARGET = "a real Kafka cluster"
# How long before the common epoch the drivers are started (their JVMs take ~1 s to start).
START_LEAD_MS = 3000.0
# Extra wall time a run may take beyond its scenario's duration before it is cut.
GRACE_S = 60.0
DRAIN_TIMEOUT_S = 120.0


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
        self.fault_lines: list[tuple[float, str, str, list[str], dict[str, Any]]] = []
        self.epoch_ms = 0.0
        self.cut_by_duration = False
        self.schedule: list[FaultEvent] = []
        self.crashed: set[str] = set()
        self.network_faults = any(f.kind in NETWORK_FAULTS for f in scenario.faults)

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
        transactional = self.scenario.transactional_producers or any(
            p.transactional for p in self.scenario.processors
        )
        internal = [TRANSACTION_STATE_TOPIC] if transactional else []
        if any(p.input.subscribe for p in self.scenario.processors):
            # Created up front, as the model's exists from the start: otherwise the group's
            # first FindCoordinator creates its 50 partitions and the members' first join
            # waits seconds for it.
            internal.append(CONSUMER_OFFSETS_TOPIC)
        self.cluster.place_internal(internal)

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
        """Milliseconds since the run's epoch (negative before it)."""
        return time.time() * 1000.0 - self.epoch_ms

    def run_workload(self) -> None:
        self.epoch_ms = time.time() * 1000.0 + START_LEAD_MS
        for plan in self.plans.values():
            self._start_app(plan)
        self.nemesis = WallClockNemesis(
            self.schedule, RealFaults(self), self.clock, self._record_fault
        )
        self.nemesis.start()
        limit = self.scenario.duration
        while self.clock() < limit:
            if all(not self._alive_source(name) for name in self.plans if self.plans[name].source):
                break
            self._report()
            time.sleep(0.2)
        else:
            self.cut_by_duration = True

    def heal(self) -> None:
        faults_end = max((e.end for e in self.schedule), default=0.0)
        if not self.cut_by_duration and faults_end > self.clock():
            wait_s = (min(faults_end, self.scenario.duration) - self.clock()) / 1000.0 + GRACE_S
            if not self.nemesis.finish(max(wait_s, 0.0)):
                self.warnings.append("the fault schedule had not played out when the run ended")
        self.nemesis.abort()
        self.warnings.extend(f"fault not applied: {e}" for e in self.nemesis.errors)
        if self.scenario.settle > 0:
            time.sleep(self.scenario.settle / 1000.0)

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
                if running.process.wait(max(STOPPED_BY_FILE[mode], left_s)) is None:
                    running.process.kill()
            else:
                running.process.terminate()
                if running.process.wait(10.0) is None:
                    running.process.kill()
            self.finished.append(running)

    def drain(self) -> Path:
        """A fresh driver reads every partition of the scenario's topics to its end
        (read_uncommitted: the ``log`` lines) and to its LSO (read_committed)."""
        path = self.workdir / "drain.jsonl"
        spec_path = write_spec(
            self.workdir / "drain.spec.json",
            "drain",
            "drain",
            self.cluster.bootstrap(),
            history=path,
            epoch_ms=int(self.epoch_ms),
            seed=self.seed,
            workload={"topics": [t.name for t in self.scenario.cluster.topics]},
        )
        process = DriverProcess(self.install, spec_path)
        code = process.wait(DRAIN_TIMEOUT_S)
        if code != 0:
            process.kill()
            raise RealRunError(f"the final drain failed ({process.error()})")
        result = process.result() or {}
        if result.get("incomplete"):
            self.warnings.append(f"the final drain did not reach the end of {result['incomplete']}")
        return path

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
            faults=list(self.schedule),
            configs=configs,
            warnings=self.warnings,
            stats={"driver_processes": len(self.finished)},
        )

    # -- applications -----------------------------------------------------------------------
    def _start_app(self, plan: apps.AppPlan) -> None:
        plan.incarnation += 1
        stem = f"{plan.name}.{plan.incarnation}"
        history = self.workdir / f"{stem}.jsonl"
        spec = apps.spec_for(plan, self.cluster.bootstrap(), history, int(self.epoch_ms), self.seed)
        if plan.mode in STOPPED_BY_FILE:
            spec["stop_file"] = str(self.workdir / f"{stem}.stop")
        fixed = ("mode", "name", "bootstrap")
        spec_path = write_spec(
            self.workdir / f"{stem}.spec.json",
            spec["mode"],
            spec["name"],
            spec["bootstrap"],
            **{k: v for k, v in spec.items() if k not in fixed},
        )
        process = DriverProcess(
            self.install,
            spec_path,
            prefix=self.cluster.client_prefix(plan.name) if self.network_faults else (),
        )
        self.running[plan.name] = _Running(plan, process, history)

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
            self.warnings.append(
                f"{name}: the driver exited with {code} ({running.process.error()})"
            )
        return False

    def crash_app(self, name: str) -> None:
        running = self.running.pop(name, None)
        if running is None:
            return
        running.process.kill()
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
    run.realise_schedule()
    try:
        run.run_workload()
        run.heal()
    finally:
        run.stop_applications()
    drained = run.drain()
    return run.collect(drained, time.perf_counter() - started)


__all__ = ["RealRun", "RealRunError", "delayed_nodes", "refusals", "run_real"]
