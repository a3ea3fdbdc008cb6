"""The applications of a run, built from a resolved scenario through a registry of kinds.

Each list a scenario can declare applications in (``producers``, ``transactional_producers``,
``processors``, ``consumers``) is an :class:`ApplicationKind` registered here. The runner
never branches on kinds: it asks :class:`Applications` to build every registered kind, in
stage order, with the clients' resolved configurations (:attr:`Scenario.clients`):

* ``SOURCE`` kinds write the run's input; ``inputs_done`` fires when all of them have;
* ``PIPELINE`` kinds start with ``inputs_done`` in hand (a processor stops once its input is
  complete and read); ``all_done`` fires when every source and pipeline application has;
* ``OBSERVER`` kinds (readers) run until ``all_done``; the nemesis does not hit them and
  their operations are not counted.

Building happens in registry order within a stage, and in scenario order within a kind; that
order is the order of the run's events, so histories depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any, Protocol

import simpy

from eosim.simulation.apps.processor import GroupMembers, ProcessorApp
from eosim.simulation.apps.reader import ReaderApp
from eosim.simulation.apps.store import ExternalStore
from eosim.simulation.apps.transactional import TransactionalProducerApp
from eosim.simulation.consumer.kafka_consumer import KafkaConsumer
from eosim.simulation.history import HistoryRecorder
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.nemesis import FaultTarget
from eosim.simulation.network import Network
from eosim.simulation.probe import Probe
from eosim.simulation.producer.kafka_producer import KafkaProducer
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.scenario import (
    ClientConfigs,
    Consumer,
    ConsumerSettings,
    Processor,
    Producer,
    Scenario,
    TransactionalProducer,
)
from eosim.simulation.workload import ProducerApp


class Application(FaultTarget, Protocol):
    """What a run needs of a source or pipeline application.

    Besides the nemesis's four methods: ``done`` (an event that fires once the application
    has finished its work), ``counts`` (its tally: ``sent``, ``acked``, ``failed``,
    ``indeterminate``, ``errored``), ``incarnation`` (restarts so far; below 0 before the
    first start) and ``abandon_open_ops(error)``, which completes every operation still open
    at the end of the run ``info`` with ``error`` and returns how many there were.
    :class:`eosim.simulation.apps.lifecycle.ClientApplication` provides all but the last.
    """

    done: simpy.Event
    counts: dict[str, int]
    incarnation: int

    def abandon_open_ops(self, error: str) -> int: ...


class Stage(IntEnum):
    """When a kind's applications are built, and what they are given (module docstring)."""

    SOURCE = 0
    PIPELINE = 1
    OBSERVER = 2


@dataclass
class BuildContext:
    """What a kind's ``build`` may use: the run's shared objects, the clients' resolved
    configurations, and the stage events (``inputs_done`` exists from the PIPELINE stage on,
    ``all_done`` from the OBSERVER stage on). Stores a kind creates go in ``stores``."""

    env: simpy.Environment
    network: Network
    metadata: ClusterMetadata
    rules: ProtocolRules
    probe: Probe
    history: HistoryRecorder
    streams: RandomStreams
    clients: ClientConfigs
    inputs_done: simpy.Event | None = None
    all_done: simpy.Event | None = None
    stores: list[ExternalStore] = field(default_factory=list)
    # Subscribed processors, by group (their members share one GroupMembers).
    groups: dict[str, GroupMembers] = field(default_factory=dict)

    def producer_factory(self, name: str) -> Callable[..., KafkaProducer]:
        """Makes application ``name``'s KafkaProducer on a given network node (with another
        ``transactional.id`` if one is given: a processor's task producers, EOS v1)."""

        def make(node: str, transactional_id: str | None = None) -> KafkaProducer:
            config = self.clients.producers[name]
            if transactional_id is not None:
                config = replace(config, transactional_id=transactional_id)
            return KafkaProducer(
                self.env,
                node,
                self.network,
                self.metadata,
                config,
                self.streams.stream(f"producer:{node}"),
                self.rules,
                self.probe,
                host=name,
                metadata_rng=self.streams.stream(f"metadata:{node}"),
            )

        return make

    def consumer(
        self, node: str, settings: ConsumerSettings, host: str | None = None
    ) -> KafkaConsumer:
        """A KafkaConsumer on ``node`` with an application's resolved consumer settings."""
        return KafkaConsumer(
            self.env,
            node,
            self.network,
            self.metadata,
            isolation=settings.isolation,
            group=settings.group,
            host=host,
            auto_commit_interval_ms=settings.auto_commit_interval_ms,
            auto_offset_reset=settings.auto_offset_reset,
            metadata_rng=self.streams.stream(f"metadata:{node}"),
            rng=self.streams.stream(f"consumer:{node}"),
        )


class ApplicationKind:
    """One list of applications a scenario can declare.

    To add a kind, subclass and provide: ``field`` (the :class:`Scenario` attribute holding
    the specs), ``stage`` (a :class:`Stage`), :meth:`build` (one spec -> the application,
    which must be an :class:`Application` unless the stage is OBSERVER), and, when the kind
    has a workload of known length, :meth:`workload_end` (it bounds random fault windows).
    Set ``final_drain`` when its applications write transactionally or read committed data
    (the run then ends with a read_committed drain and records offsets and LSOs). Then
    :func:`register` an instance. A kind's applications are named by their spec's ``name``.
    """

    field: str = ""
    stage: Stage = Stage.SOURCE
    final_drain: bool = False

    def build(self, ctx: BuildContext, spec: Any) -> Any:
        raise NotImplementedError

    def workload_end(self, spec: Any) -> float | None:
        """When ``spec``'s workload is expected to end (None: not known)."""
        return None


class ProducerKind(ApplicationKind):
    field = "producers"
    stage = Stage.SOURCE

    def build(self, ctx: BuildContext, spec: Producer) -> ProducerApp:
        make = ctx.producer_factory(spec.name)
        return ProducerApp(
            ctx.env,
            spec.name,
            spec.workload,
            lambda: make(spec.name),
            ctx.history,
            ctx.streams.stream(f"workload:{spec.name}"),
        )

    def workload_end(self, spec: Producer) -> float:
        w = spec.workload
        return w.start + 1000.0 * w.records / w.rate


class TransactionalProducerKind(ApplicationKind):
    field = "transactional_producers"
    stage = Stage.SOURCE
    final_drain = True

    def build(self, ctx: BuildContext, spec: TransactionalProducer) -> TransactionalProducerApp:
        make = ctx.producer_factory(spec.name)
        return TransactionalProducerApp(
            ctx.env,
            spec.name,
            spec.workload,
            lambda: make(spec.name),
            ctx.history,
            ctx.streams.stream(f"workload:{spec.name}"),
            ctx.clients.producers[spec.name].max_block_ms,
            ctx.probe,
        )

    def workload_end(self, spec: TransactionalProducer) -> float:
        w = spec.workload
        return w.start + 1000.0 * w.transactions / w.rate


class ProcessorKind(ApplicationKind):
    field = "processors"
    stage = Stage.PIPELINE
    final_drain = True

    def build(self, ctx: BuildContext, spec: Processor) -> ProcessorApp:
        assert ctx.inputs_done is not None
        settings = ctx.clients.consumers[spec.name]
        store = None
        if spec.output.store is not None:
            store = ExternalStore(spec.name, spec.output.store)
            ctx.stores.append(store)
        configs = ctx.clients.producers
        members = None
        if settings.rebalance is not None:
            topic = spec.input.topic
            partitions = [(topic, n) for n in range(ctx.metadata.topics[topic])]
            members = ctx.groups.setdefault(settings.rebalance.group_id, GroupMembers(partitions))
        return ProcessorApp(
            ctx.env,
            spec,
            ctx.network,
            ctx.producer_factory(spec.name) if store is None else _no_producer,
            lambda node: ctx.consumer(node, settings, host=spec.name),
            list(settings.partitions),
            ctx.history,
            ctx.probe,
            ctx.inputs_done,
            configs[spec.name].max_block_ms if spec.name in configs else 60_000.0,
            store,
            members=members,
            rebalance=settings.rebalance,
            rng=ctx.streams.stream(f"processing:{spec.name}"),
        )


class ReaderKind(ApplicationKind):
    field = "consumers"
    stage = Stage.OBSERVER

    def build(self, ctx: BuildContext, spec: Consumer) -> ReaderApp:
        assert ctx.all_done is not None
        settings = ctx.clients.consumers[spec.name]
        consumer = KafkaConsumer(
            ctx.env,
            spec.name,
            ctx.network,
            ctx.metadata,
            isolation=settings.isolation,
            auto_offset_reset=settings.auto_offset_reset,
            metadata_rng=ctx.streams.stream(f"metadata:{spec.name}"),
            rng=ctx.streams.stream(f"consumer:{spec.name}"),
        )
        consumer.assign(list(settings.partitions))
        return ReaderApp(
            ctx.env, spec.name, consumer, ctx.history, spec.poll_interval, ctx.all_done
        )


def _no_producer(node: str) -> KafkaProducer:
    raise AssertionError(f"{node}: a sink has no producer")


KINDS: list[ApplicationKind] = []


def register(kind: ApplicationKind) -> ApplicationKind:
    """Add ``kind`` to the registry (after the kinds already there in its stage)."""
    if any(k.field == kind.field for k in KINDS):
        raise ValueError(f"an application kind for {kind.field!r} is already registered")
    KINDS.append(kind)
    return kind


for _kind in (ProducerKind(), TransactionalProducerKind(), ProcessorKind(), ReaderKind()):
    register(_kind)


def _specs(scenario: Scenario, kind: ApplicationKind) -> Sequence[Any]:
    return getattr(scenario, kind.field)


def workload_horizon(scenario: Scenario) -> float:
    """When the workload is expected to end: the default end of random fault windows."""
    ends = [
        end
        for kind in KINDS
        for spec in _specs(scenario, kind)
        if (end := kind.workload_end(spec)) is not None
    ]
    return min(max(ends, default=scenario.duration), scenario.duration)


class Applications:
    """Every application of a run (see the module docstring for the build order).

    ``apps`` holds the source and pipeline applications by name (the nemesis's targets,
    whose operations are counted), ``observers`` the rest, ``stores`` the external stores
    sink processors write to.
    """

    def __init__(self, scenario: Scenario, ctx: BuildContext) -> None:
        env = ctx.env
        self.apps: dict[str, Application] = {}
        self.observers: list[Any] = []
        self.final_drain = False
        kinds = sorted(KINDS, key=lambda k: k.stage)  # stable: registry order within a stage
        for stage in Stage:
            if stage is Stage.PIPELINE:
                writers = [a.done for a in self.apps.values()]
                ctx.inputs_done = simpy.AllOf(env, writers) if writers else env.event().succeed()
            elif stage is Stage.OBSERVER:
                ctx.all_done = simpy.AllOf(env, [a.done for a in self.apps.values()])
            for kind in (k for k in kinds if k.stage is stage):
                specs = _specs(scenario, kind)
                self.final_drain = self.final_drain or (kind.final_drain and bool(specs))
                for spec in specs:
                    app = kind.build(ctx, spec)
                    if stage is Stage.OBSERVER:
                        self.observers.append(app)
                    else:
                        self.apps[spec.name] = app
        assert ctx.all_done is not None
        self.all_done: simpy.Event = ctx.all_done
        self.stores = ctx.stores

    def fault_targets(self) -> dict[str, FaultTarget]:
        """The applications the nemesis may crash, restart, pause and resume, by name."""
        return dict(self.apps)

    def observer_targets(self) -> dict[str, Any]:
        """The readers by name: the nemesis does not hit them, but their JVMs' collections
        and waits for a core freeze them (the resource model)."""
        return {app.name: app for app in self.observers if isinstance(app, ReaderApp)}

    def abandon_open_ops(self, error: str) -> int:
        """Complete every operation still open ``info``; how many there were."""
        return sum(app.abandon_open_ops(error) for app in self.apps.values())

    def counts(self) -> dict[str, int]:
        keys = ("sent", "acked", "failed", "indeterminate", "errored")
        return {k: sum(a.counts[k] for a in self.apps.values()) for k in keys}

    @property
    def restarts(self) -> int:
        return sum(max(a.incarnation, 0) for a in self.apps.values())

    def collect(self, history: HistoryRecorder) -> None:
        """The external stores' final contents, as ``log`` lines."""
        for store in self.stores:
            history.add_log(store.topic, 0, store.records())


__all__ = [
    "KINDS",
    "Application",
    "ApplicationKind",
    "Applications",
    "BuildContext",
    "Stage",
    "register",
    "workload_horizon",
]
