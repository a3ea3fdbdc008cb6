"""The resource model's block of a scenario, ``cluster.resources``: hosts and their cores, what
each kind of work costs, garbage collection and warm-up (docs/model.md, "The resource model").

Without the block the model is unbounded, as it has always been: each broker handles one
request at a time at ``cluster.request_time_ms`` and nothing else takes time (histories are
byte for byte what they were). With it, every broker runs Kafka's threads
(``num.network.threads``, ``num.io.threads``, ``queued.max.requests``,
``num.replica.fetchers``, set under ``cluster.config`` with Kafka's defaults) on the cores of
its host, and each process is a JVM with pauses and a warm-up
(:mod:`eosim.simulation.host`, :mod:`eosim.simulation.broker.request_handler_pool`)::

    cluster:
      resources:
        preset: calibration-host        # a shipped set of values; any key below overrides it
        hosts:                          # where processes run; "*" is every one not placed
          - {name: machine, cores: 2, processes: ["*"]}
        cores: 4                        # the cores of the host of a process no host names
        service:                        # warm CPU ms (and MB allocated) of each kind of work
          produce: {fixed_ms: 0.05, per_record_ms: 0.004, alloc_per_record_mb: 0.002}
          ...
        gc: {young_mb: 136, pause_ms: 4, pause_sigma: 0.5}
        warmup: {factor: 10, seconds: 3}
        background: {broker_ms_per_s: 100, controller_ms_per_s: 20}
        startup: {cpu_ms: 3730, publish_cpu_ms: 3980, threads: 1}   # a broker's start
        scheduler: {wakeup_ms: 0.3}     # a thread woken while every core is busy waits more
        wire: {median_ms: 0.02, sigma: 0.5}   # links' one-way time, unless network.latency is set

Without ``hosts`` (and without a preset that has them) every process is on a host of its own
with ``cores`` cores. Presets live in ``simulation/presets/<name>.yaml``; a preset is a
``resources`` block itself, written by ``python -m eosim.analysis.measure`` from measurements of
a real cluster (docs/calibration.md, "The resource model, fitted").

To add a knob: a field here with its default and its meaning, read where the model builds its
hosts (:meth:`Resources.host_plan`) or its brokers' threads
(:meth:`eosim.simulation.cluster.ClusterSettings.from_scenario`), and a line in docs/model.md.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import resources as package_files
from typing import Any, Literal

import simpy
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from eosim.simulation.broker.request_handler_pool import Cost, ServiceTimes
from eosim.simulation.host import (
    Background,
    GcSettings,
    HostPlan,
    Jvm,
    Spell,
    StartupSettings,
    WarmupSettings,
)
from eosim.simulation.protocol import CONTROLLER, FetchResponse, ProduceRequest, ProduceResponse
from eosim.simulation.rng import RandomStream

EVERY = "*"
# An application's wait for its host shorter than this does not freeze it (an event saved).
FREEZE_MIN_MS = 0.05

# Which of a client's works a load books (Machines.client_load): a produce request it sends,
# a fetch answer it reads before its records reach the application, the application's work
# on those records after its poll, a produce answer its Sender reads; each is the
# ServiceTimes field client_<work>.
ClientWork = Literal["send", "receive", "after_poll", "answer"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CostSpec(_Spec):
    """One kind of work: CPU ms (fixed and per record) and MB allocated (fixed and per
    record)."""

    fixed_ms: float = Field(default=0.0, ge=0.0)
    per_record_ms: float = Field(default=0.0, ge=0.0)
    alloc_mb: float = Field(default=0.0, ge=0.0)
    alloc_per_record_mb: float = Field(default=0.0, ge=0.0)

    def cost(self) -> Cost:
        return Cost(self.fixed_ms, self.per_record_ms, self.alloc_mb, self.alloc_per_record_mb)


class ServiceSpec(_Spec):
    """The costs of a broker's work by kind (see
    :class:`eosim.simulation.broker.request_handler_pool.ServiceTimes`), and of a client's on
    its host: ``client_send`` per produce request it sends (the fixed part: building it and
    reading its answer) and per record its application hands to the producer (the per-record
    part); ``client_receive`` per fetch answer it reads, fixed and per record, before the
    records reach the application; ``client_after_poll`` per fetch answer with records, fixed
    and per record, the application's own work once ``poll()`` has handed the records over
    (the real driver writes their history lines), during which the reader reads nothing more.
    ``client_answer``: the part of ``client_send``'s fixed cost the Sender spends on the
    request's answer (reading it, completing its batches: the acknowledgement follows it),
    booked when the answer arrives rather than with the request (0: all of it with the
    request). ``fetch_complete``: a leader's work completing a held fetch (a follower's parked
    one or a consumer's held read: reading the log for it) once an append or a high
    watermark lets it, on a request handler thread after the work that let it; its answer
    leaves when that work ends (0: at once). A client's other requests and answers (metadata,
    the coordinators') cost nothing."""

    network: CostSpec = Field(default_factory=CostSpec)
    produce: CostSpec = Field(default_factory=CostSpec)
    fetch: CostSpec = Field(default_factory=CostSpec)
    replica_fetch: CostSpec = Field(default_factory=CostSpec)
    replica_append: CostSpec = Field(default_factory=CostSpec)
    other: CostSpec = Field(default_factory=CostSpec)
    transaction: CostSpec = Field(default_factory=CostSpec)
    client_send: CostSpec = Field(default_factory=CostSpec)
    client_receive: CostSpec = Field(default_factory=CostSpec)
    client_after_poll: CostSpec = Field(default_factory=CostSpec)
    client_answer: CostSpec = Field(default_factory=CostSpec)
    fetch_complete: CostSpec = Field(default_factory=CostSpec)

    @model_validator(mode="after")
    def _answer_within_send(self) -> ServiceSpec:
        if self.client_answer.fixed_ms > self.client_send.fixed_ms:
            raise ValueError(
                f"service.client_answer.fixed_ms ({self.client_answer.fixed_ms}) is a part of "
                f"service.client_send.fixed_ms ({self.client_send.fixed_ms}) and cannot exceed it"
            )
        return self

    def times(self) -> ServiceTimes:
        # The same names on both sides: each kind's spec becomes its runtime cost.
        return ServiceTimes(
            **{kind: getattr(self, kind).cost() for kind in type(self).model_fields}
        )


class GcSpec(_Spec):
    """Young collections: one per ``young_mb`` allocated (0: none), each a lognormal pause."""

    young_mb: float = Field(default=0.0, ge=0.0)
    pause_ms: float = Field(default=0.0, ge=0.0)
    pause_sigma: float = Field(default=0.0, ge=0.0, le=5.0)

    def settings(self) -> GcSettings:
        return GcSettings(self.young_mb, self.pause_ms, self.pause_sigma)


class WarmupSpec(_Spec):
    """A fresh process's work costs ``1 + (factor - 1) * exp(-age / seconds)`` times more, and
    it spends ``background_ms_per_s * exp(-age / seconds)`` more CPU per second (its JIT
    compiling)."""

    factor: float = Field(default=1.0, ge=1.0, le=1000.0)
    seconds: float = Field(default=1.0, gt=0.0)
    background_ms_per_s: float = Field(default=0.0, ge=0.0, le=1000.0)

    def settings(self) -> WarmupSettings:
        return WarmupSettings(self.factor, self.seconds)


class StartupSpec(_Spec):
    """A broker's start as CPU work on its host (:class:`~eosim.simulation.host.
    StartupSettings`): ``cpu_ms`` to its registration, ``publish_cpu_ms`` for its first
    metadata publish, on ``threads`` threads in slices of ``slice_ms``. ``cpu_ms`` 0 (the
    default): the start takes ``cluster.broker_startup`` whatever the host is doing."""

    cpu_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    publish_cpu_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    threads: int = Field(default=2, ge=1, le=64)
    slice_ms: float = Field(default=4.0, gt=0.0, le=1000.0)

    def settings(self) -> StartupSettings:
        return StartupSettings(self.cpu_ms, self.publish_cpu_ms, self.threads, self.slice_ms)


class BackgroundSpec(_Spec):
    """CPU a process spends whatever it is asked (its timers, the JIT compiling), in ms per
    second, booked as bursts of ``burst_ms`` on one core at random (Poisson) moments: how long
    that work holds a core at a time (measured: ``eosim.analysis.measure.
    background_slice_ms``, the brokers' other threads' CPU per time on a core)."""

    broker_ms_per_s: float = Field(default=0.0, ge=0.0, le=1000.0)
    controller_ms_per_s: float = Field(default=0.0, ge=0.0, le=1000.0)
    # Each application's (producers, consumers, readers): its threads off the records' path
    # (measured: the driver's history writer, its JIT and VM threads). No JIT part: the real
    # side warms its clients before a run.
    client_ms_per_s: float = Field(default=0.0, ge=0.0, le=1000.0)
    burst_ms: float = Field(default=1.0, gt=0.0, le=1000.0)


class SchedulerSpec(_Spec):
    """The operating system's scheduler: ``wakeup_ms``, the latency of a thread woken for
    work while every core of its host is busy, on top of waiting for the first core to free
    (:meth:`eosim.simulation.host.Host.book`); 0: none."""

    wakeup_ms: float = Field(default=0.0, ge=0.0, le=1000.0)


class WireSpec(_Spec):
    """The wire between two processes under the resource model: a message's one-way time on
    it, lognormal with median ``median_ms`` and ``sigma``, the processes' own work on it
    booked on their hosts apart. Links take it instead of ``network.latency`` (whose default
    counts what the processes spend as well, fitted without the resource model) unless the
    scenario sets ``network.latency`` itself (measured: ``benchmarks/netns_rtt.py``, half a
    round trip)."""

    median_ms: float = Field(ge=0.0, le=10_000.0)
    sigma: float = Field(default=0.0, ge=0.0, le=5.0)


class HostSpec(_Spec):
    name: str = Field(min_length=1)
    cores: int = Field(ge=1, le=4096)
    # Process names (controller, broker-0, an application's name), or "*": every process no
    # other host names.
    processes: list[str] = Field(default_factory=list)


class Resources(_Spec):
    """``cluster.resources`` (see the module docstring)."""

    preset: str | None = None
    hosts: list[HostSpec] = Field(default_factory=list)
    cores: int = Field(default=4, ge=1, le=4096)
    service: ServiceSpec = Field(default_factory=ServiceSpec)
    # The brokers' JVMs' young collections, and the applications' (allocating per request
    # and per record they send, service.client; a pause freezes the application).
    gc: GcSpec = Field(default_factory=GcSpec)
    client_gc: GcSpec = Field(default_factory=GcSpec)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    background: BackgroundSpec = Field(default_factory=BackgroundSpec)
    startup: StartupSpec = Field(default_factory=StartupSpec)
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    # None: the links keep the scenario's network.latency.
    wire: WireSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        name = data["preset"]
        preset = load_preset(name)
        return {**_merge(preset, {k: v for k, v in data.items() if k != "preset"}), "preset": name}

    @model_validator(mode="after")
    def _hosts_once(self) -> Resources:
        seen: dict[str, str] = {}
        names = [h.name for h in self.hosts]
        for host in self.hosts:
            if names.count(host.name) > 1:
                raise ValueError(f"host {host.name!r} is defined twice")
            for process in host.processes:
                if process in seen:
                    raise ValueError(
                        f"{process!r} is placed on two hosts ({seen[process]} and {host.name})"
                    )
                seen[process] = host.name
        return self

    def host_plan(self, processes: list[str]) -> HostPlan:
        """Where each of ``processes`` runs: the host naming it, else the ``"*"`` host, else a
        host of its own (named after it) with :attr:`cores` cores."""
        cores: dict[str, int] = {h.name: h.cores for h in self.hosts}
        placement: dict[str, str] = {}
        every = next((h.name for h in self.hosts if EVERY in h.processes), None)
        for process in processes:
            host = next((h.name for h in self.hosts if process in h.processes), None)
            if host is None:
                host = every
            if host is None:
                host = f"host-{process}"
                cores[host] = self.cores
            placement[process] = host
        return HostPlan(cores, placement, self.scheduler.wakeup_ms)


class Machines:
    """A run's hosts and its processes on them: one :class:`~eosim.simulation.host.Jvm` per
    process of ``processes`` (the controller, the brokers, the applications), each drawing its
    pauses from its own stream (``streams(name)``)."""

    def __init__(
        self,
        resources: Resources,
        processes: list[str],
        stream: Callable[[str], RandomStream],
    ) -> None:
        plan = resources.host_plan(processes)
        self.resources = resources
        self.hosts = plan.hosts()
        self.placement = plan.placement
        gc, client_gc = resources.gc.settings(), resources.client_gc.settings()
        warmup = resources.warmup.settings()
        server = {CONTROLLER} | {p for p in processes if p.startswith("broker-")}
        self.jvms = {
            p: Jvm(
                p,
                self.hosts[plan.placement[p]],
                gc if p in server else client_gc,
                warmup,
                stream(f"gc:{p}"),
            )
            for p in processes
        }
        self.service = resources.service.times()
        self.startup = resources.startup.settings()
        self.freezers: dict[str, GcFreezer] = {}

    def start_background(
        self,
        env: simpy.Environment,
        running: Callable[[str], bool],
        stream: Callable[[str], RandomStream],
    ) -> None:
        """Give each broker's and the controller's host its background CPU
        (:class:`~eosim.simulation.host.Background`) while ``running(name)`` says the process
        runs: bursts of ``background.burst_ms`` at Poisson moments at the process's rate (and,
        after a restart, its JIT's extra rate); each process draws its steady moments from a
        stream of its own (``background:<name>``) and its JIT's from another
        (``background-jit:<name>``). Its host books them lazily: whoever changes what
        ``running`` says calls :meth:`catch_up` first (the cluster's fault operations do).
        Each application gets ``background.client_ms_per_s`` the same way, without a JIT
        part, for the whole run: the model does not stop it while the application is crashed
        or paused (docs/model.md, "The resource model")."""
        bg = self.resources.background
        warmup = self.resources.warmup
        rates = {p: bg.broker_ms_per_s for p in self.jvms if p.startswith("broker-")}
        if CONTROLLER in self.jvms:
            rates[CONTROLLER] = bg.controller_ms_per_s
        jit = warmup.background_ms_per_s
        for process, base in rates.items():
            if base <= 0 and jit <= 0:
                continue
            self._add_background(env, process, base, jit, partial(running, process), stream)
        if bg.client_ms_per_s > 0:
            for process in self.jvms:
                if process not in rates:
                    self._add_background(env, process, bg.client_ms_per_s, 0.0, _always, stream)

    def _add_background(
        self,
        env: simpy.Environment,
        process: str,
        base: float,
        jit: float,
        running: Callable[[], bool],
        stream: Callable[[str], RandomStream],
    ) -> None:
        jvm = self.jvms[process]
        source = Background(
            jvm,
            base,
            jit,
            self.resources.warmup.seconds,
            self.resources.background.burst_ms,
            running,
            stream(f"background:{process}"),
            stream(f"background-jit:{process}"),
        )
        jvm.host.add_background(env, source)

    def catch_up(self, process: str, now: float) -> None:
        """Book the background due by ``now`` on ``process``'s host, and have its sources
        re-read the process after: call it before the process's state changes (it dies,
        stops, resumes or restarts; :meth:`Host.before_change`)."""
        jvm = self.jvms.get(process)
        if jvm is not None:
            jvm.host.before_change(now)

    def freeze_on_gc(
        self,
        env: simpy.Environment,
        targets: dict[str, Any],
        observers: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The applications' fault targets, each wrapped so that its JVM's collections and
        its waits for a core freeze it (:class:`GcFreezer`); unchanged when applications
        neither collect nor cost CPU. ``observers`` (the readers, which the nemesis does not
        hit) are frozen the same way but not returned."""
        s = self.service
        costs = (s.client_send, s.client_receive, s.client_after_poll)
        collects = self.resources.client_gc.young_mb > 0
        if not collects and all(c.fixed_ms == 0.0 and c.per_record_ms == 0.0 for c in costs):
            return targets
        self.freezers = {name: GcFreezer(env, app) for name, app in targets.items()}
        wrapped = dict(self.freezers)
        for name, app in (observers or {}).items():
            self.freezers[name] = GcFreezer(env, app)
        return wrapped

    def client_load(
        self, process: str, work: ClientWork = "send"
    ) -> Callable[[float, object], float] | None:
        """What a produce request ``process`` sends (``send``; or, with ``receive``, a fetch
        answer it reads) costs its host and allocates in its JVM, or None when it costs
        nothing; other
        messages cost nothing. The load returns how long the thread that did the work was
        busy with it (waiting for a core, then working; 0 below :data:`FREEZE_MIN_MS`).

        A request is the producer's Sender thread's work (building it and reading its
        answer): the network keeps that Sender busy for the time returned
        (``KafkaProducer.sender_busy``) while the application's thread goes on. An answer is
        read by the application's thread (a consumer's poll), which is frozen meanwhile
        through :meth:`freeze_on_gc`; it and what arrives meanwhile are read once the freeze
        ends (the network holds them). ``after_poll`` is the application's work on the
        records of a fetch answer once its poll has handed them over (``client_after_poll``;
        an answer without records costs nothing): the network books it after handing the
        answer over, and the freeze holds what arrives next, not the answer. ``answer`` is
        the Sender's work on a produce answer (``client_answer``, a part of ``client_send``'s
        fixed cost, which ``send`` then books without it): the network keeps the Sender
        busy, and the answer unread, for the time returned. A collection the allocation sets
        off freezes the whole process."""
        cost = getattr(self.service, f"client_{work}")
        after_poll = work == "after_poll"
        reads = work in ("receive", "after_poll")
        kind: type = (
            FetchResponse if reads else ProduceResponse if work == "answer" else ProduceRequest
        )
        if work == "send":
            # A record's own work is done by the application's thread when it hands the
            # record to its producer (client_record_load), not by the Sender with the request
            # that carries it: here only the request's fixed part, less what its answer costs
            # when it comes (client_answer).
            answer_ms = self.service.client_answer.fixed_ms
            cost = Cost(fixed_ms=cost.fixed_ms - answer_ms, alloc_mb=cost.alloc_mb)
        elif work == "answer":
            cost = Cost(fixed_ms=cost.fixed_ms, alloc_mb=cost.alloc_mb)
        jvm = self.jvms.get(process)
        if jvm is None:
            return None
        cpu = cost.fixed_ms > 0.0 or cost.per_record_ms > 0.0
        allocates = jvm.gc.young_mb > 0 and (cost.alloc_mb > 0.0 or cost.alloc_per_record_mb > 0.0)
        if not cpu and not allocates:
            return None
        from eosim.simulation.broker.request_handler_pool import records_of

        freezers = self.freezers

        def load(now: float, payload: object) -> float:
            if type(payload) is not kind:
                return 0.0
            records = records_of(payload)
            if after_poll and records == 0:
                return 0.0
            freezer = freezers.get(process)
            busy = 0.0
            if cpu:
                busy = jvm.book(now, cost.ms(records)) - now
                if busy <= FREEZE_MIN_MS:
                    busy = 0.0
                elif reads and freezer is not None:
                    freezer.collect(busy)
            pause = jvm.allocate(now, cost.mb(records)) if allocates else 0.0
            if freezer is not None and pause > 0:
                freezer.collect(pause)
            return busy

        return load

    def client_record_load(self, process: str) -> Callable[[float], None] | None:
        """What one record an application hands to its producer (``send()``) costs its host
        and allocates in its JVM (``client_send``'s per-record parts), or None when nothing.
        The work is the application thread's (building, serialising and appending the record,
        and the real driver's history line): it takes core time from the host's other
        processes but does not freeze the producer's Sender, which is another thread; a
        collection it triggers stops the whole process (:meth:`freeze_on_gc`)."""
        cost = self.service.client_send
        jvm = self.jvms.get(process)
        if jvm is None:
            return None
        ms = cost.per_record_ms
        mb = cost.alloc_per_record_mb if jvm.gc.young_mb > 0 else 0.0
        if ms == 0.0 and mb == 0.0:
            return None
        freezers = self.freezers

        def paused(pause: float) -> None:
            if (freezer := freezers.get(process)) is not None:
                freezer.collect(pause)

        return jvm.record_booker(ms, mb, paused)


class GcFreezer:
    """An application as the nemesis sees it, frozen as well by its JVM's collections: a
    collection pauses it (as a ``pause`` fault would, and as a stop-the-world collection
    does: its main loop and its producer's Sender stop) and resumes it after the pause, unless
    a ``pause`` fault holds it then; a fault's resume does not end a collection in force."""

    def __init__(self, env: simpy.Environment, app: Any) -> None:
        self.env = env
        self.app = app
        self.fault_paused = False
        self.collection = Spell(env, app.pause, self._collected)

    # -- the fault protocol (FaultTarget) ------------------------------------------------------
    def crash(self) -> None:
        self.fault_paused = False
        self.app.crash()

    def restart(self) -> None:
        self.app.restart()

    def pause(self) -> None:
        self.fault_paused = True
        self.app.pause()

    def resume(self) -> None:
        self.fault_paused = False
        if not self.collection.holding:
            self.app.resume()

    # -- collections -----------------------------------------------------------------------
    def collect(self, pause_ms: float) -> None:
        self.collection.hold(pause_ms)

    def _collected(self) -> None:
        if not self.fault_paused:
            self.app.resume()


def _always() -> bool:
    return True


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def preset_names() -> list[str]:
    """The shipped presets' names (``simulation/presets/<name>.yaml``)."""
    folder = package_files.files("eosim.simulation") / "presets"
    if not folder.is_dir():
        return []
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _preset_file(name: str) -> dict[str, Any]:
    if not isinstance(name, str) or name not in preset_names():
        raise ValueError(
            f"unknown resources preset {name!r} (shipped: {', '.join(preset_names()) or 'none'})"
        )
    path = package_files.files("eosim.simulation") / "presets" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    block = data.get("resources", data) if isinstance(data, dict) else None
    if not isinstance(block, dict):
        raise ValueError(f"resources preset {name!r}: not a mapping")
    return data


def _preset_chain(name: str) -> list[dict[str, Any]]:
    """The preset files from ``name`` to the one it (and each next) names as its ``preset``:
    a preset may be another with some keys changed (``calibration-host`` is the machine the
    calibration runs on now, by that machine's preset)."""
    chain: list[dict[str, Any]] = []
    seen: list[str] = []
    while name is not None:
        if name in seen:
            raise ValueError(f"resources preset {seen[0]!r}: presets name each other in a circle")
        seen.append(name)
        data = _preset_file(name)
        chain.append(data)
        name = data.get("resources", data).get("preset")
    return chain


def load_preset(name: str) -> dict[str, Any]:
    """The ``resources`` block of the shipped preset ``name``, merged over the preset it names
    (if any)."""
    block: dict[str, Any] = {}
    for data in reversed(_preset_chain(name)):
        own = data.get("resources", data)
        block = _merge(block, {k: v for k, v in own.items() if k != "preset"})
    return block


def preset_machine(name: str) -> dict[str, Any] | None:
    """The machine the shipped preset ``name`` was measured on (its ``machine`` block, next
    to ``resources``, written by ``eosim.analysis.measure``; or that of the preset it names),
    or None if it records none."""
    if name not in preset_names():
        return None
    for data in _preset_chain(name):
        machine = data.get("machine")
        if isinstance(machine, dict):
            return machine
    return None


__all__ = [
    "CostSpec",
    "GcSpec",
    "HostSpec",
    "Machines",
    "Resources",
    "SchedulerSpec",
    "ServiceSpec",
    "WarmupSpec",
    "load_preset",
    "preset_machine",
    "preset_names",
]
