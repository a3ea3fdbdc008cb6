"""The fault kinds, one declaration each, and the protocol a cluster offers for them.

Every kind a scenario's ``faults:`` may name is one :class:`FaultKindSpec` in :data:`KINDS`:
its YAML name, what it requires of its entry and which kind-only keys it takes (read by the
scenario's validation, :class:`eosim.simulation.scenario.Fault`, whose ``kind`` enum and so
the JSON schema, :mod:`eosim.schema`, list :data:`KIND_NAMES`), which nodes it may name, how
it is realised against a :class:`FaultableCluster` (read by both nemeses, the model's
:class:`eosim.simulation.nemesis.Nemesis` and the wall-clock one of :mod:`eosim.real.nemesis`)
and its line of the fault table in docs/model.md.

A run's faults are realised once (:func:`eosim.simulation.nemesis.realize_faults`) into a list of
:class:`FaultEvent`. :func:`start_fault` turns one event into calls on a
:class:`FaultableCluster` and hands back the call that undoes it, so the same schedule is driven
against the model (in simulated time) and a real Kafka (:mod:`eosim.real.runner`, on the wall
clock), as Jepsen's nemesis drives its ``db``.

To add a fault kind:

1. give the :class:`FaultableCluster` protocol the operation it needs, if none fits, and
   implement it on the model's :class:`eosim.simulation.cluster.Cluster` (an operation that
   kills, stops, resumes or restarts a process calls ``Cluster._changing`` first, so that its
   host books the background due under the old state), and on
   :class:`eosim.simulation.nemesis.RunFaults` when applications can suffer it, on
   :class:`eosim.real.cluster.RealCluster` and :class:`eosim.real.runner.RealFaults`, or list
   the kind in ``RealCluster.refuses`` with one line saying why a real cluster cannot;
2. declare it here with :func:`register` (at the end, so that the ``kind`` enum, the schema and
   the sweep's ``faults_<kind>`` columns keep their order): its name, trigger, the nodes it may
   name, its requirement (``needs``), the kind-only keys it takes (``keys``; a new key also
   goes on :class:`eosim.simulation.scenario.Fault` and, if it is part of an event, on
   :class:`FaultEvent`), its realisation (``start`` or ``carry_out``) and its ``effect``;
3. paste its ``effect`` as a row of the fault table in docs/model.md, and add it to the table
   in docs/real-cluster.md;
4. regenerate ``eosim/scenario.schema.json`` (``eosim schema``), and give
   tests/test_fault_kinds.py a valid example of it (run on the model) and an invalid one (its
   error line): that test fails until every registered kind has all of these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from eosim.simulation.probe import POINTS


class FaultableCluster(Protocol):
    """A cluster the nemesis can hurt: the model's or a real one.

    Every node operation takes a node's name (``broker-0``, ``controller``, ``producer-0``) and is
    idempotent: crashing a dead node or resuming a running one does nothing. Network operations
    return a handle that :meth:`heal` takes back.

    The model's :class:`eosim.simulation.cluster.Cluster` and the real
    :class:`eosim.real.cluster.RealCluster` implement it for their brokers, controller and
    network; :class:`eosim.simulation.nemesis.RunFaults` and :class:`eosim.real.runner.RealFaults`
    add the applications of a run, and are what the nemeses drive.
    """

    def crash(self, node: str) -> None: ...

    def power_loss(self, node: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]]) -> Any:
        """Cut every link between two groups (one group: cut it off from everyone else)."""
        ...

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> Any:
        """Slow (``extra_latency`` ms) or drop (``loss``, a probability) the traffic of ``nodes``
        or of the directed ``links``."""
        ...

    def heal(self, handle: Any) -> None: ...

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        """An administrator's DeleteRecords: per partition, (name, error name, new log start)."""
        ...


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """One occurrence of a fault: when it starts and ends (ms), its kind and what it hits."""

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
        if KINDS[self.kind].trigger == "instant":
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


class FaultSpec(Protocol):
    """A fault entry of a scenario as validation sees it
    (:class:`eosim.simulation.scenario.Fault`)."""

    kind: str
    nodes: list[str]
    groups: list[list[str]] | None
    links: list[tuple[str, str]]
    at: float | None
    rate: float | None
    every: float | None
    duration: Any
    extra_latency: float
    probability: float
    point: str | None
    topic: str | None
    partition: int | None
    offset: int


# What a fault's ``nodes`` can be: a broker, the controller, a producer, transactional
# producer or processor (an application), or a consumer (a reader: the nemesis's node faults
# do not reach it, but it is a node of the network).
Role = Literal["broker", "controller", "application", "reader"]
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "broker": ("brokers",),
    "controller": ("the controller",),
    "application": ("producers", "processors"),
    "reader": ("consumers",),
}
EVERY_NODE: tuple[Role, ...] = ("broker", "controller", "application", "reader")
# What a node fault can crash or pause: a process the run restarts or resumes (a reader only
# observes, and is not one).
PROCESSES: tuple[Role, ...] = ("broker", "controller", "application")

# When an occurrence happens: at its time, lasting its duration ("timed"); at its time, at once
# ("instant"); or when a node passes a protocol point (simulation/probe.py), lasting its
# duration ("point").
Trigger = Literal["timed", "instant", "point"]
# Starts a timed fault on a cluster; returns the call that ends it.
Start = Callable[[FaultableCluster, FaultEvent], Callable[[], None]]
# Carries out an instant fault: the names its ``fault`` lines give as targets, and their detail.
CarryOut = Callable[[FaultableCluster, FaultEvent], tuple[list[str], dict[str, Any]]]
# The kind-only keys of a fault entry: another kind that sets one is refused.
KIND_KEYS = ("groups", "links", "point", "topic", "partition", "offset")


def _no_need(spec: FaultSpec) -> str | None:
    return None


@dataclass(frozen=True)
class FaultKindSpec:
    """One fault kind (see the module docstring for how to add one).

    ``needs`` says what an entry of this kind lacks (None: nothing), checked once its timing is
    valid; ``keys`` are the kind-only keys (:data:`KIND_KEYS`) it takes; ``targets`` the roles
    of the nodes its ``nodes`` may name. A timed kind has ``start``, an instant one
    ``carry_out``; a point kind ``acts_as`` the timed node kind it performs when its point is
    passed (and is recorded as). ``network``: realised on the network (healed by ``heal``).
    ``failover``: it stops a broker, and the time writes take to resume after it is measured
    (:func:`eosim.analysis.timings.failovers`). ``effect`` is its row of docs/model.md's fault
    table.
    """

    name: str
    trigger: Trigger
    effect: str
    targets: tuple[Role, ...] = EVERY_NODE
    needs: Callable[[FaultSpec], str | None] = _no_need
    keys: frozenset[str] = frozenset()
    start: Start | None = None
    carry_out: CarryOut | None = None
    acts_as: str | None = None
    network: bool = False
    failover: bool = False

    def __post_init__(self) -> None:
        assert self.keys <= set(KIND_KEYS), f"{self.name}: unknown keys {self.keys}"
        assert (self.start is not None) == (self.trigger == "timed"), self.name
        assert (self.carry_out is not None) == (self.trigger == "instant"), self.name
        assert (self.acts_as is not None) == (self.trigger == "point"), self.name


KINDS: dict[str, FaultKindSpec] = {}


def register(kind: FaultKindSpec) -> FaultKindSpec:
    """Declare ``kind`` (at the end of :data:`KINDS`)."""
    if kind.name in KINDS:
        raise ValueError(f"fault kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    return kind


# -- realisations ---------------------------------------------------------------------------
def _node_fault(do: str, undo: str) -> Start:
    """A fault that calls ``cluster.<do>(node)`` on each target, ended by ``<undo>``. If
    ``<do>`` fails on a target (a real cluster could not confirm it), the targets done so far
    and that one are undone (each operation is idempotent) before the error goes on: a fault
    is in force on all its targets or on none."""

    def start(cluster: FaultableCluster, event: FaultEvent) -> Callable[[], None]:
        act, end = getattr(cluster, do), getattr(cluster, undo)
        done: list[str] = []
        for node in event.targets:
            done.append(node)
            try:
                act(node)
            except BaseException:
                for hit in reversed(done):
                    with contextlib.suppress(Exception):
                        end(hit)
                raise
        nodes = tuple(event.targets)

        def end_node_fault() -> None:
            for node in nodes:
                end(node)

        return end_node_fault

    return start


def _partition(cluster: FaultableCluster, event: FaultEvent) -> Callable[[], None]:
    handle = cluster.partition(event.groups or (tuple(event.targets),))
    return lambda: cluster.heal(handle)


def _delay(cluster: FaultableCluster, event: FaultEvent) -> Callable[[], None]:
    handle = cluster.disturb(event.targets, event.links, event.extra_latency, 0.0)
    return lambda: cluster.heal(handle)


def _loss(cluster: FaultableCluster, event: FaultEvent) -> Callable[[], None]:
    handle = cluster.disturb(event.targets, event.links, 0.0, event.probability)
    return lambda: cluster.heal(handle)


def _delete_records(
    cluster: FaultableCluster, event: FaultEvent
) -> tuple[list[str], dict[str, Any]]:
    """The partitions a DeleteRecords named, and what its ``fault`` lines say (the offset,
    each partition's log start after it, the errors)."""
    assert event.topic is not None
    answers = cluster.delete_records(event.topic, event.partition, event.offset)
    names = [name for name, _error, _start in answers]
    detail: dict[str, Any] = {"offset": event.offset}
    detail["log_start_offsets"] = {name: start for name, _error, start in answers}
    errors = {name: error for name, error, _start in answers if error != "NONE"}
    if errors:
        detail["errors"] = errors
    return names, detail


def _needs_nodes(spec: FaultSpec) -> str | None:
    return None if spec.nodes else f"a {spec.kind} fault needs 'nodes'"


# -- the kinds, in the order of the ``kind`` enum -------------------------------------------

register(
    FaultKindSpec(
        "crash",
        "timed",
        "a broker: the process dies at once (kill -9), queued requests dropped, open "
        "connections reset `cluster.crash_reset` later (default at once; until then the dead "
        "process's sockets take what is sent and answer nothing, and a connect completes, "
        "departure 17); after `duration` a new process starts with the logs (a process "
        "crash keeps the page cache) and goes through a broker's start-up (below: registration, "
        "catch-up, unfencing) before it accepts a connection. The controller (`nodes: "
        "[controller]`): stops fencing, electing and publishing until it restarts. A producer: "
        "the application process dies and restarts after `duration`",
        targets=PROCESSES,
        needs=_needs_nodes,
        start=_node_fault("crash", "restart"),
        failover=True,
    )
)
register(
    FaultKindSpec(
        "pause",
        "timed",
        "a broker stops handling requests, fetching and heartbeating (GC, SIGSTOP); requests "
        "keep arriving and queue; a held follower fetch or `acks=all` write whose time runs out "
        "meanwhile is answered when it resumes (see Replication); paused longer than "
        "`broker.session.timeout.ms`, it is fenced. A paused controller judges nobody and gives "
        "every broker a fresh session when it resumes. An application freezes: its main loop and "
        "its producer's Sender stop, and what arrives for it waits in its socket; on resume it "
        "reads that first (as `NetworkClient.poll` returns it) and then its Sender runs again, "
        "so timeouts that fell due meanwhile are handled late, as after a long GC pause",
        targets=PROCESSES,
        needs=_needs_nodes,
        start=_node_fault("pause", "resume"),
        failover=True,
    )
)
register(
    FaultKindSpec(
        "partition",
        "timed",
        "`groups` are cut apart from each other and from the rest (the nodes named in no group "
        "form one more side); `nodes` alone cuts those nodes off from the rest. Messages across "
        "the cut are held and delivered when it heals, unless their connection was closed "
        "meanwhile. `groups` belongs to partition faults only (any other kind with `groups` is "
        "refused)",
        needs=lambda spec: (
            None
            if spec.nodes or spec.groups
            else "a partition fault needs 'nodes' (to isolate) or 'groups'"
        ),
        keys=frozenset({"groups"}),
        start=_partition,
        network=True,
    )
)
register(
    FaultKindSpec(
        "delay",
        "timed",
        "`extra_latency` on every link touching `nodes` (all links if empty), or exactly on the "
        "directed `links: [[src, dst], ...]`",
        needs=lambda spec: (
            None if spec.extra_latency > 0 else "a delay fault needs a positive 'extra_latency'"
        ),
        keys=frozenset({"links"}),
        start=_delay,
        network=True,
    )
)
register(
    FaultKindSpec(
        "loss",
        "timed",
        "extra loss `probability` on links touching `nodes` (all links if empty), or exactly on "
        "the directed `links`",
        needs=lambda spec: (
            None if spec.probability > 0 else "a loss fault needs a positive 'probability'"
        ),
        keys=frozenset({"links"}),
        start=_loss,
        network=True,
    )
)
register(
    FaultKindSpec(
        "crash_at",
        "point",
        "a crash of the node that passes `point` (its `occurrence`-th passing, by one of "
        "`nodes` or by anyone), restarted after `duration`; recorded as a `crash` (see "
        "Protocol points, below)",
        targets=PROCESSES,
        keys=frozenset({"point"}),
        acts_as="crash",
    )
)
register(
    FaultKindSpec(
        "power_loss",
        "timed",
        "brokers only: the machine loses power. The process dies and the page cache with it: at "
        "that moment each replica's log is cut back to what was flushed (Kafka's `log.flush.*` "
        "settings, never by default) or already written back by the operating system (appends "
        "older than `cluster.os_writeback`, 30 s); nothing is written back while the power is "
        "off. After `duration` the machine is up and a new process starts as after a crash. A "
        "broker whose process had already crashed loses its page cache too",
        targets=("broker",),
        needs=_needs_nodes,
        start=_node_fault("power_loss", "restart"),
        failover=True,
    )
)
register(
    FaultKindSpec(
        "delete_records",
        "instant",
        "an administrator's DeleteRecords, instantaneous (no `duration`): every partition of "
        "`topic` (or its `partition`) loses its records below `offset` (default -1: its high "
        "watermark) at the leader the controller names (`ReplicaManager.deleteRecords`; above "
        "the high watermark: OFFSET_OUT_OF_RANGE; offline or not leading: "
        "NOT_LEADER_OR_FOLLOWER; not retried); the followers follow with their next fetches "
        "(see Retention, below). Its `fault` line names the partitions, the `offset`, each "
        "leader's `log_start_offsets` after it and any `errors`",
        targets=(),
        keys=frozenset({"topic", "partition", "offset"}),
        carry_out=_delete_records,
    )
)
register(
    FaultKindSpec(
        "pause_at",
        "point",
        "a pause of the node that passes `point`, resumed after `duration`; recorded as a "
        "`pause` (see Protocol points, below)",
        targets=PROCESSES,
        keys=frozenset({"point"}),
        acts_as="pause",
    )
)

# The kinds' names, in declaration order (the ``kind`` enum of a scenario's faults).
KIND_NAMES: tuple[str, ...] = tuple(KINDS)
# Faults triggered by a protocol point rather than by time.
POINT_KINDS: tuple[str, ...] = tuple(k.name for k in KINDS.values() if k.trigger == "point")
# Network kinds, undone by heal.
NETWORK_FAULTS: tuple[str, ...] = tuple(k.name for k in KINDS.values() if k.network)


def _kinds_taking(key: str) -> str:
    """``'partition'``, ``'delay and loss'``: the kinds that take a kind-only ``key``."""
    names = [k.name for k in KINDS.values() if key in k.keys]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def describe_roles(roles: Sequence[str]) -> str:
    """``brokers``, ``brokers, the controller, producers and processors``."""
    names = [name for r in roles for name in ROLE_NAMES[r]]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def shape_error(spec: FaultSpec) -> str | None:
    """What is wrong with the shape of one fault entry (None: nothing), as
    :class:`eosim.simulation.scenario.Fault` reports it: its timing for its kind's trigger, the
    kind's own requirement, and kind-only keys on another kind. Names and topics are checked
    against the scenario elsewhere."""
    kind = KINDS[spec.kind]
    if kind.trigger == "instant":
        if spec.topic is None:
            return f"a {kind.name} fault needs a 'topic'"
        if spec.duration is not None:
            return f"a {kind.name} fault is instantaneous: it takes no 'duration'"
        if spec.nodes or spec.groups or spec.links or spec.point is not None:
            return f"a {kind.name} fault names a 'topic' (and 'partition'), not nodes or links"
    else:
        if spec.duration is None:
            return f"a {kind.name} fault needs a 'duration'"
        for key in ("topic", "partition"):
            if getattr(spec, key) is not None:
                return f"'{key}' applies to {_kinds_taking(key)} faults only"
        if spec.offset != -1:
            return f"'offset' applies to {_kinds_taking('offset')} faults only"
    if kind.trigger == "point":
        if spec.point not in POINTS:
            return f"a {kind.name} fault needs a 'point', one of: {', '.join(POINTS)}"
        if spec.at is not None or spec.rate is not None or spec.every is not None:
            return f"a {kind.name} fault is triggered by its 'point', not 'at'/'rate'/'every'"
        return None
    if spec.point is not None:
        return f"'point' applies to {_kinds_taking('point')} faults only"
    if [spec.at, spec.rate, spec.every].count(None) != 2:
        return "give exactly one of 'at' (scheduled), 'rate' (random) or 'every' (periodic)"
    if (problem := kind.needs(spec)) is not None:
        return problem
    if spec.groups is not None and "groups" not in kind.keys:
        return f"'groups' applies to {_kinds_taking('groups')} faults only"
    if spec.links and "links" not in kind.keys:
        return f"'links' applies to {_kinds_taking('links')} faults only"
    return None


def target_error(kind: str, node: str, role: str) -> str | None:
    """Why ``node`` (of ``role``) cannot be among the ``nodes`` of a ``kind`` fault, if so."""
    targets = KINDS[kind].targets
    if role in targets:
        return None
    return f"{kind} applies to {describe_roles(targets)} only, not {node!r}"


# -- realising an event ---------------------------------------------------------------------
def start_fault(event: FaultEvent, cluster: FaultableCluster) -> Callable[[], None]:
    """Start a timed fault ``event`` on ``cluster``; the call that ends it."""
    start = KINDS[event.kind].start
    if start is None:
        raise ValueError(f"{event.kind} is not a fault that starts and ends (it is not timed)")
    return start(cluster, event)


def carry_out(event: FaultEvent, cluster: FaultableCluster) -> tuple[list[str], dict[str, Any]]:
    """Carry out an instant fault ``event`` on ``cluster``: the names its ``fault`` lines give
    as targets, and their detail."""
    act = KINDS[event.kind].carry_out
    if act is None:
        raise ValueError(f"{event.kind} is not an instant fault")
    return act(cluster, event)


def apply_fault(
    kind: str,
    targets: Sequence[str],
    groups: Sequence[Sequence[str]],
    links: Sequence[tuple[str, str]],
    extra_latency: float,
    probability: float,
    cluster: FaultableCluster,
) -> Callable[[], None]:
    """Start one fault on ``cluster``; the call that ends it (:func:`start_fault` of an event
    made of these fields)."""
    event = FaultEvent(
        0.0,
        0.0,
        kind,
        tuple(targets),
        tuple(tuple(g) for g in groups),
        extra_latency,
        probability,
        tuple(links),
    )
    return start_fault(event, cluster)


def refusals(kinds: Sequence[str], refuses: Mapping[str, str], target: str) -> list[str]:
    """One line per fault kind in ``kinds`` that ``target`` cannot do, saying why."""
    seen: list[str] = []
    for kind in kinds:
        if kind in refuses and kind not in seen:
            seen.append(kind)
    return [f"{kind} faults cannot run on {target}: {refuses[kind]}" for kind in seen]
