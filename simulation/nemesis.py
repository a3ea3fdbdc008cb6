"""The nemesis: turns the scenario's fault specs into a concrete schedule, then applies it.

Scheduled faults (``at``) happen as written. Random faults (``rate``) are Poisson arrivals in
their window, each with a target and a duration drawn from the run's ``nemesis`` stream.
Periodic faults (``every``) recur at fixed intervals in their window, taking their targets in
turn from ``nodes``; a ``{min, max}`` duration is drawn from the same stream.
Realisation happens once, before the run starts, so a run's faults are an explicit list of
:class:`FaultEvent` that can be printed, replayed and shrunk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import simpy

from eosim.simulation.faults import FaultableCluster, apply_fault
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.rng import RandomStream
from eosim.simulation.scenario import POINT_FAULTS, DurationRange, Fault


@dataclass(frozen=True, slots=True)
class FaultEvent:
    start: float
    end: float
    kind: str
    targets: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    extra_latency: float = 0.0
    probability: float = 0.0
    links: tuple[tuple[str, str], ...] = ()
    # delete_records: the topic, its partition (None: every one) and the offset (-1: the HW).
    topic: str | None = None
    partition: int | None = None
    offset: int = -1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["targets"] = list(self.targets)
        d["groups"] = [list(g) for g in self.groups]
        d["links"] = [list(link) for link in self.links]
        return d

    def detail(self) -> dict[str, Any]:
        """What a ``fault`` start line says of this event beside its kind and targets."""
        detail = {k: v for k, v in self.to_dict().items() if k in ("groups", "links") and v}
        if self.extra_latency:
            detail["extra_latency"] = self.extra_latency
        if self.probability:
            detail["probability"] = self.probability
        return detail

    def to_spec(self) -> dict[str, Any]:
        """This event as an explicitly scheduled fault of a scenario file."""
        spec: dict[str, Any] = {"kind": self.kind, "at": round(self.start, 6)}
        if self.kind == "delete_records":
            spec["topic"] = self.topic
            if self.partition is not None:
                spec["partition"] = self.partition
            spec["offset"] = self.offset
            return spec
        spec["duration"] = round(self.end - self.start, 6)
        if self.targets:
            spec["nodes"] = list(self.targets)
        if self.groups:
            spec["groups"] = [list(g) for g in self.groups]
        if self.links:
            spec["links"] = [list(link) for link in self.links]
        if self.extra_latency:
            spec["extra_latency"] = self.extra_latency
        if self.probability:
            spec["probability"] = self.probability
        return spec


def realize_faults(faults: list[Fault], horizon: float, rng: RandomStream) -> list[FaultEvent]:
    """The concrete fault schedule. ``horizon`` ends random windows that give no ``end``."""
    events: list[FaultEvent] = []
    for spec in faults:
        if spec.kind in POINT_FAULTS:
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
    """Anything the nemesis can hit by name: a broker, an application.

    To make a new component a target, give it these four methods (each idempotent, as a
    second crash of a dead node must be harmless) and list it in the ``fault_targets()`` of
    the object that owns it (:meth:`eosim.simulation.cluster.Cluster.fault_targets`,
    :meth:`eosim.simulation.applications.Applications.fault_targets`).
    """

    def crash(self) -> None: ...

    def restart(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


@dataclass
class Targets:
    """What the nemesis can hit: crash/restart and pause/resume callbacks by node name."""

    crash: dict[str, Callable[[], None]] = field(default_factory=dict)
    restart: dict[str, Callable[[], None]] = field(default_factory=dict)
    pause: dict[str, Callable[[], None]] = field(default_factory=dict)
    resume: dict[str, Callable[[], None]] = field(default_factory=dict)
    # A power loss: a crash that also loses unflushed writes (brokers only); undone by restart.
    power_loss: dict[str, Callable[[], None]] = field(default_factory=dict)
    # DeleteRecords (topic, partition or None for all, offset) -> each partition's answer:
    # (partition name, error name, log start offset after it).
    delete_records: Callable[[str, int | None, int], list[tuple[str, str, int]]] | None = None

    @classmethod
    def of(cls, *groups: Mapping[str, FaultTarget]) -> Targets:
        """The targets of every named node in ``groups``, in order."""
        targets = cls()
        for group in groups:
            for name, node in group.items():
                targets.crash[name], targets.restart[name] = node.crash, node.restart
                targets.pause[name], targets.resume[name] = node.pause, node.resume
        return targets


class Nemesis:
    def __init__(
        self,
        env: simpy.Environment,
        schedule: list[FaultEvent],
        network: Network,
        targets: Targets,
        history: HistoryRecorder,
    ) -> None:
        self.env = env
        self.schedule = schedule
        self.network = network
        self.targets = targets
        self.history = history
        self.cluster = SimulatedFaults(targets, network)
        for event in schedule:
            env.process(self._run(event))

    def _run(self, event: FaultEvent):  # type: ignore[no-untyped-def]
        if event.start > self.env.now:
            yield self.env.timeout(event.start - self.env.now)
        if event.kind == "delete_records":
            self._delete_records(event)
            return
        undo = self._apply(event)
        self.history.fault(self.env.now, "start", event.kind, list(event.targets), event.detail())
        yield self.env.timeout(max(event.end - self.env.now, 0.0))
        undo()
        self.history.fault(self.env.now, "stop", event.kind, list(event.targets), {})

    def _delete_records(self, event: FaultEvent) -> None:
        """An administrator's DeleteRecords, at once: one `fault` line with each partition's
        answer (its error, and its leader's log start after it), started and stopped."""
        names, detail = delete_records(event, self.cluster)
        now = self.env.now
        self.history.fault(now, "start", event.kind, names, detail)
        self.history.fault(now, "stop", event.kind, names, {})

    def _apply(self, event: FaultEvent) -> Callable[[], None]:
        return apply_fault(
            event.kind,
            event.targets,
            event.groups,
            event.links,
            event.extra_latency,
            event.probability,
            self.cluster,
        )


def delete_records(
    event: FaultEvent, cluster: FaultableCluster
) -> tuple[list[str], dict[str, Any]]:
    """Carry out a ``delete_records`` event on ``cluster``: the partitions it named, and what
    its ``fault`` lines say (the offset, each partition's log start after it, the errors)."""
    assert event.topic is not None
    answers = cluster.delete_records(event.topic, event.partition, event.offset)
    names = [name for name, _error, _start in answers]
    detail: dict[str, Any] = {"offset": event.offset}
    detail["log_start_offsets"] = {name: start for name, _error, start in answers}
    errors = {name: error for name, error, _start in answers if error != "NONE"}
    if errors:
        detail["errors"] = errors
    return names, detail


class SimulatedFaults:
    """The model's side of the fault protocol (:class:`eosim.simulation.faults.FaultableCluster`):
    node faults call the targets' callbacks, network faults open and close windows on the
    simulated :class:`~eosim.simulation.network.Network`."""

    def __init__(self, targets: Targets, network: Network) -> None:
        self.targets = targets
        self.network = network

    def crash(self, node: str) -> None:
        self.targets.crash[node]()

    def power_loss(self, node: str) -> None:
        self.targets.power_loss[node]()

    def restart(self, node: str) -> None:
        self.targets.restart[node]()

    def pause(self, node: str) -> None:
        self.targets.pause[node]()

    def resume(self, node: str) -> None:
        self.targets.resume[node]()

    def partition(self, groups: Sequence[Sequence[str]]) -> Any:
        return self.network.start_partition(tuple(tuple(g) for g in groups))

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> Any:
        if extra_latency:
            return self.network.start_spike(tuple(nodes), extra_ms=extra_latency, links=links)
        return self.network.start_spike(tuple(nodes), loss=loss, links=links)

    def heal(self, handle: Any) -> None:
        self.network.stop(handle)

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        assert self.targets.delete_records is not None
        return self.targets.delete_records(topic, partition, offset)


class CrashAtNemesis:
    """``crash_at`` and ``pause_at`` faults: crash (or pause) the node that passes a protocol
    point, then restart (resume) it.

    The fault fires the ``occurrence``-th time its point is passed (by one of ``nodes``, or
    by anyone when ``nodes`` is empty); the node restarts or resumes after ``duration``.
    A hook runs inside the component that passed the point, so a pause takes hold at that
    very step (an application checks for it as it leaves the point). Triggered faults are
    recorded in the history like scheduled ones, as ``crash`` and ``pause``.
    """

    def __init__(
        self,
        env: simpy.Environment,
        faults: list[Fault],
        probe: Probe,
        targets: Targets,
        history: HistoryRecorder,
        rng: RandomStream,
    ) -> None:
        self.env = env
        self.targets = targets
        self.history = history
        self.fired: list[FaultEvent] = []
        for spec in faults:
            if spec.kind not in POINT_FAULTS:
                continue
            d = spec.duration
            downtime = d if isinstance(d, float | int) else rng.uniform(d.min, d.max)
            state = {"seen": 0, "done": False}
            kind = "crash" if spec.kind == "crash_at" else "pause"

            def hook(
                node: str,
                spec: Fault = spec,
                state: dict = state,
                downtime: float = downtime,
                kind: str = kind,
            ) -> None:
                target = self._target(node, kind)
                if state["done"] or target is None or (spec.nodes and target not in spec.nodes):
                    return
                state["seen"] += 1
                if state["seen"] < spec.occurrence:
                    return
                state["done"] = True
                self._fire(kind, target, spec.point or "", float(downtime))

            assert spec.point is not None
            probe.on(spec.point, hook)

    def _target(self, node: str, kind: str) -> str | None:
        able = self.targets.crash if kind == "crash" else self.targets.pause
        if node in able:
            return node
        base = node.split("#", 1)[0]
        return base if base in able else None

    def _fire(self, kind: str, node: str, point: str, downtime: float) -> None:
        now = self.env.now
        self.fired.append(FaultEvent(now, now + downtime, kind, (node,)))
        self.history.fault(now, "start", kind, [node], {"point": point})
        if kind == "crash":
            self.targets.crash[node]()
            undo = self.targets.restart[node]
        else:
            self.targets.pause[node]()
            undo = self.targets.resume[node]

        def restore(_ev: simpy.Event) -> None:
            undo()
            self.history.fault(self.env.now, "stop", kind, [node], {})

        self.env.timeout(downtime).callbacks.append(restore)
