"""The nemesis: turns the scenario's fault specs into a concrete schedule, then applies it.

Scheduled faults (``at``) happen as written. Random faults (``rate``) are Poisson arrivals in
their window, each with a target and a duration drawn from the run's ``nemesis`` stream.
Periodic faults (``every``) recur at fixed intervals in their window, taking their targets in
turn from ``nodes``; a ``{min, max}`` duration is drawn from the same stream.
Realisation happens once, before the run starts, so a run's faults are an explicit list of
:class:`FaultEvent` that can be printed, replayed and shrunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import simpy

from eosim.simulation.faults import (
    KINDS,
    FaultableCluster,
    FaultEvent,
    carry_out,
    start_fault,
)
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.probe import Probe
from eosim.simulation.rng import RandomStream
from eosim.simulation.scenario import DurationRange, Fault


def realize_faults(faults: list[Fault], horizon: float, rng: RandomStream) -> list[FaultEvent]:
    """The concrete fault schedule. ``horizon`` ends random windows that give no ``end``."""
    events: list[FaultEvent] = []
    for spec in faults:
        if KINDS[spec.kind].trigger == "point":
            continue  # triggered by a protocol point, see CrashAtNemesis
        if spec.at is not None:
            events.append(_event(spec, spec.at, tuple(spec.nodes), rng))
            continue
        end = spec.end if spec.end is not None else horizon
        if spec.every is not None:
            events.extend(_periodic(spec, end, rng))
            continue
        assert spec.rate is not None
        t = spec.start
        mean_gap = 1000.0 / spec.rate
        while True:
            t += rng.exponential(mean_gap)
            if t >= end:
                break
            targets = (rng.choice(spec.nodes),) if spec.nodes else ()
            events.append(_event(spec, t, targets, rng))
    events.sort(key=lambda e: (e.start, e.end, e.kind, e.targets))
    return events


def _periodic(spec: Fault, end: float, rng: RandomStream) -> list[FaultEvent]:
    """Occurrences at ``start + k * every`` (k = 1, 2, ...) before ``end``, the k-th aimed at
    the k-th node of ``nodes``, cycling (none named: the fault's node-less form every time).
    Like a ``rate`` window, the clock starts at ``start`` and the first occurrence comes one
    period later."""
    assert spec.every is not None and spec.every > 0
    events: list[FaultEvent] = []
    k = 1
    while (t := spec.start + k * spec.every) < end:
        targets = (spec.nodes[(k - 1) % len(spec.nodes)],) if spec.nodes else ()
        events.append(_event(spec, t, targets, rng))
        k += 1
    return events


def _event(spec: Fault, start: float, targets: tuple[str, ...], rng: RandomStream) -> FaultEvent:
    d = spec.duration
    if d is None:  # delete_records: instantaneous
        length = 0.0
    else:
        length = rng.uniform(d.min, d.max) if isinstance(d, DurationRange) else float(d)
    groups = tuple(tuple(g) for g in spec.groups or ())
    links = tuple((a, b) for a, b in spec.links)
    return FaultEvent(
        start,
        start + length,
        spec.kind,
        targets,
        groups,
        spec.extra_latency,
        spec.probability,
        links,
        spec.topic,
        spec.partition,
        spec.offset,
    )


class FaultTarget(Protocol):
    """A process the nemesis can hit by name: a broker, the controller, an application.

    To make a new component a target, give it these four methods (each idempotent, as a
    second crash of a dead node must be harmless), list it in the ``fault_targets()`` of the
    object that owns it (:meth:`eosim.simulation.cluster.Cluster.fault_targets`,
    :meth:`eosim.simulation.applications.Applications.fault_targets`) and route its name in
    that owner's fault operations (:class:`eosim.simulation.cluster.Cluster`'s, or
    :class:`RunFaults` for the applications).
    """

    def crash(self) -> None: ...

    def restart(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class RunFaults:
    """The model's side of the fault protocol (:class:`eosim.simulation.faults.FaultableCluster`)
    for a whole run, as :class:`eosim.real.runner.RealFaults` is a real run's: an application's
    node operations go to that application, every other operation to ``cluster`` (the
    :class:`~eosim.simulation.cluster.Cluster`'s fault operations: brokers, the controller, the
    network, DeleteRecords). ``cluster_nodes`` names the cluster's processes, in order."""

    def __init__(
        self,
        cluster: FaultableCluster,
        cluster_nodes: Sequence[str],
        applications: Mapping[str, FaultTarget],
    ) -> None:
        self.cluster = cluster
        self.applications = dict(applications)
        # Every process a node fault can hit, the cluster's then the applications' (an
        # ordered set).
        self.nodes: dict[str, None] = dict.fromkeys([*cluster_nodes, *self.applications])

    def crash(self, node: str) -> None:
        if (app := self.applications.get(node)) is not None:
            app.crash()
        else:
            self.cluster.crash(node)

    def power_loss(self, node: str) -> None:
        self.cluster.power_loss(node)

    def restart(self, node: str) -> None:
        if (app := self.applications.get(node)) is not None:
            app.restart()
        else:
            self.cluster.restart(node)

    def pause(self, node: str) -> None:
        if (app := self.applications.get(node)) is not None:
            app.pause()
        else:
            self.cluster.pause(node)

    def resume(self, node: str) -> None:
        if (app := self.applications.get(node)) is not None:
            app.resume()
        else:
            self.cluster.resume(node)

    def partition(self, groups: Sequence[Sequence[str]]) -> Any:
        return self.cluster.partition(groups)

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> Any:
        return self.cluster.disturb(nodes, links, extra_latency, loss)

    def heal(self, handle: Any) -> None:
        self.cluster.heal(handle)

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        return self.cluster.delete_records(topic, partition, offset)


class Nemesis:
    """Drives a realised schedule against ``cluster`` in simulated time, writing each
    fault's ``start`` and ``stop`` lines into ``history``."""

    def __init__(
        self,
        env: simpy.Environment,
        schedule: list[FaultEvent],
        cluster: FaultableCluster,
        history: HistoryRecorder,
    ) -> None:
        self.env = env
        self.schedule = schedule
        self.cluster = cluster
        self.history = history
        for event in schedule:
            env.process(self._run(event))

    def _run(self, event: FaultEvent):  # type: ignore[no-untyped-def]
        if event.start > self.env.now:
            yield self.env.timeout(event.start - self.env.now)
        if KINDS[event.kind].trigger == "instant":
            self._carry_out(event)
            return
        undo = start_fault(event, self.cluster)
        self.history.fault(self.env.now, "start", event.kind, list(event.targets), event.detail())
        yield self.env.timeout(max(event.end - self.env.now, 0.0))
        undo()
        self.history.fault(self.env.now, "stop", event.kind, list(event.targets), {})

    def _carry_out(self, event: FaultEvent) -> None:
        """An instant fault (an administrator's DeleteRecords), at once: one `fault` line with
        what it did, started and stopped."""
        names, detail = carry_out(event, self.cluster)
        now = self.env.now
        self.history.fault(now, "start", event.kind, names, detail)
        self.history.fault(now, "stop", event.kind, names, {})


class CrashAtNemesis:
    """Point-triggered faults (``crash_at``, ``pause_at``): crash (or pause) the node that
    passes a protocol point, then restart (resume) it.

    The fault fires the ``occurrence``-th time its point is passed (by one of ``nodes``, or
    by anyone when ``nodes`` is empty); the node restarts or resumes after ``duration``.
    A hook runs inside the component that passed the point, so a pause takes hold at that
    very step (an application checks for it as it leaves the point). Triggered faults are
    recorded in the history like scheduled ones, as the timed kind they act as (``crash``,
    ``pause``).
    """

    def __init__(
        self,
        env: simpy.Environment,
        faults: list[Fault],
        probe: Probe,
        cluster: RunFaults,
        history: HistoryRecorder,
        rng: RandomStream,
    ) -> None:
        self.env = env
        self.cluster = cluster
        self.history = history
        self.fired: list[FaultEvent] = []
        for spec in faults:
            acts_as = KINDS[spec.kind].acts_as
            if acts_as is None:
                continue
            d = spec.duration
            downtime = d if isinstance(d, float | int) else rng.uniform(d.min, d.max)
            state = {"seen": 0, "done": False}

            def hook(
                node: str,
                spec: Fault = spec,
                state: dict = state,
                downtime: float = downtime,
                kind: str = acts_as,
            ) -> None:
                target = self._target(node)
                if state["done"] or target is None or (spec.nodes and target not in spec.nodes):
                    return
                state["seen"] += 1
                if state["seen"] < spec.occurrence:
                    return
                state["done"] = True
                self._fire(kind, target, spec.point or "", float(downtime))

            assert spec.point is not None
            probe.on(spec.point, hook)

    def _target(self, node: str) -> str | None:
        """The process ``node`` (``producer-0``, or one incarnation ``producer-0#2``) names."""
        able = self.cluster.nodes
        if node in able:
            return node
        base = node.split("#", 1)[0]
        return base if base in able else None

    def _fire(self, kind: str, node: str, point: str, downtime: float) -> None:
        now = self.env.now
        event = FaultEvent(now, now + downtime, kind, (node,))
        self.fired.append(event)
        self.history.fault(now, "start", kind, [node], {"point": point})
        undo = start_fault(event, self.cluster)

        def restore(_ev: simpy.Event) -> None:
            undo()
            self.history.fault(self.env.now, "stop", kind, [node], {})

        self.env.timeout(downtime).callbacks.append(restore)
