"""A local Apache Kafka (KRaft) cluster, one JVM per node, with the nemesis's fault operations.

:class:`RealCluster` lays out the model's topology on this machine: one dedicated KRaft
controller ``controller`` (``node.id`` 100, ``process.roles=controller``, the only voter) and
``N`` brokers ``broker-0`` .. ``broker-{N-1}`` (``node.id`` i+1, ``process.roles=broker``). It
writes each node's ``server.properties`` from a scenario's ``cluster.config``, formats the
storage with Kafka's ``kafka.tools.StorageTool`` (one cluster id), starts the JVMs and waits
until every broker serves: it asks each broker for its metadata (a Metadata request, v7, over
the wire) until the broker lists itself among the live brokers, which Kafka's
``KRaftMetadataCache`` does only once the controller has unfenced it.

It implements :class:`eosim.simulation.faults.FaultableCluster`: ``crash`` is ``kill -9`` (the
log dirs stay), ``restart`` starts the same node id on the same dirs, ``pause``/``resume`` are
SIGSTOP/SIGCONT, and the network kinds go to :mod:`eosim.real.netns` when this machine allows
network namespaces. What it cannot do is listed in ``refuses``.

Topics are (re)created through a :class:`TopicAdmin`. Kafka 4.x's broker jar has no topic tool
(``kafka.admin`` holds only ``ConfigCommand``; ``TopicCommand`` moved to ``kafka-tools``), so
there is no default: the owner injects one, e.g. the workload driver's admin mode through
:class:`ActionTopicAdmin`.

Every node's files are under ``work_dir/<node>/``: ``server.properties``, ``data/`` (its log
dir), ``server.log`` (the JVM's stdout and stderr, Kafka's log when an SLF4J binding is on the
classpath) and ``pid``.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from eosim.real import RealError
from eosim.real.clients import compiler_cpu_ms, wait_running, wait_stopped
from eosim.real.install import gc_log_flag
from eosim.simulation.config import BROKER_KEYS, TOPIC_KEYS
from eosim.simulation.coordinator.directory import INTERNAL_PARTITIONS
from eosim.simulation.metadata import ClusterMetadata as ModelMetadata

CONTROLLER = "controller"
CONTROLLER_ID = 100
BROKER_PORT = 9092
CONTROLLER_PORT = 9093

# Broker configs that are also topic configs, broker name -> topic name: the pairs of
# simulation/config.py's BROKER_KEYS and TOPIC_KEYS that set the same attribute (Kafka's
# ServerLogConfigs / LogConfig: log.retention.ms is the default of retention.ms, ...).
TOPIC_LEVEL: dict[str, str] = {
    broker: topic
    for broker, bspec in BROKER_KEYS.items()
    for topic, tspec in TOPIC_KEYS.items()
    if bspec.attr == tspec.attr
}


class ClusterError(RealError):
    """A node that would not format, start or stop; the message is one line (plus a log tail)."""


# ---------------------------------------------------------------------------------------------
# Configuration


def _prop(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def internal_replication_factor(brokers: int) -> int:
    """The replication factor of the internal topics on ``brokers`` brokers: Kafka's 3, or
    fewer where fewer brokers are (what :func:`broker_defaults` configures)."""
    return min(3, brokers)


def broker_defaults(brokers: int) -> dict[str, str]:
    """What a small test cluster needs beside Kafka's defaults: internal topics that fit on
    ``brokers`` brokers, no auto-created topics. Groups keep Kafka's (and the model's)
    ``group.initial.rebalance.delay.ms`` of 3 s unless the scenario sets another."""
    return {
        "offsets.topic.replication.factor": str(internal_replication_factor(brokers)),
        "transaction.state.log.replication.factor": str(internal_replication_factor(brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
    }


def split_config(config: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A scenario's ``cluster.config`` as (broker-only configs, topic-level configs under their
    topic names). ``None`` (Kafka's "never", e.g. ``log.flush.interval.ms``) is left unset."""
    broker: dict[str, str] = {}
    topic: dict[str, str] = {}
    for key, value in config.items():
        if value is None:
            continue
        if key in TOPIC_LEVEL:
            topic[TOPIC_LEVEL[key]] = _prop(value)
        else:
            broker[key] = _prop(value)
    return broker, topic


def node_properties(
    node: str,
    brokers: int,
    config: Mapping[str, Any],
    address: Callable[[str], str],
    ports: Mapping[str, int],
    log_dir: Path,
) -> dict[str, str]:
    """One node's ``server.properties``: identity, listeners, the quorum, then the small
    cluster's defaults and the scenario's broker configs (the scenario wins).

    The controller gets the scenario's configs as well: in KRaft it is the controller that
    fences brokers (``broker.session.timeout.ms``), elects leaders (unclean election) and keeps
    the ISR, from its own static configs where a topic does not override them.
    """
    controller = f"{address(CONTROLLER)}:{ports[CONTROLLER]}"
    props: dict[str, str] = {}
    if node == CONTROLLER:
        props.update(
            {
                "process.roles": "controller",
                "node.id": str(CONTROLLER_ID),
                "listeners": f"CONTROLLER://{controller}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            }
        )
    else:
        host = f"{address(node)}:{ports[node]}"
        props.update(
            {
                "process.roles": "broker",
                "node.id": str(node_id(node)),
                "listeners": f"PLAINTEXT://{host}",
                "advertised.listeners": f"PLAINTEXT://{host}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        )
    props["controller.listener.names"] = "CONTROLLER"
    props["controller.quorum.voters"] = f"{CONTROLLER_ID}@{controller}"
    props["log.dirs"] = str(log_dir)
    props.update(broker_defaults(brokers))
    props.update({key: _prop(value) for key, value in config.items() if value is not None})
    return props


def node_id(node: str) -> int:
    """``controller`` is 100, ``broker-i`` is i + 1 (the model's names)."""
    if node == CONTROLLER:
        return CONTROLLER_ID
    if node.startswith("broker-") and node[7:].isdigit():
        return int(node[7:]) + 1
    raise ValueError(f"{node!r} is not a node of a RealCluster (controller, broker-0, ...)")


def topic_spec(topic: Any, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A scenario :class:`~eosim.simulation.scenario.Topic` (or such a dict) as the admin's topic
    dict, its configs as strings; ``extra`` (topic-level configs from the cluster block) first,
    so the topic's own configs win."""
    if isinstance(topic, Mapping):
        name, parts = topic["name"], topic["partitions"]
        rf, own = topic.get("replication_factor", 1), topic.get("config", {})
    else:
        name, parts, rf, own = topic.name, topic.partitions, topic.replication_factor, topic.config
    config = dict(extra or {})
    config.update({k: _prop(v) for k, v in own.items() if v is not None})
    return {"name": name, "partitions": parts, "replication_factor": rf, "config": config}


def topic_configs(scenario: Any) -> list[dict[str, Any]]:
    """The scenario's topics as the admin creates them on a shared cluster: every broker config
    of ``cluster.config`` that is also a topic config (``min.insync.replicas``,
    ``unclean.leader.election.enable``, ``log.retention.ms`` as ``retention.ms``, ...) moved onto
    each topic, so a running cluster started with other values serves the scenario.

    Departure: Kafka's internal topics (``__consumer_offsets``) keep the running cluster's
    broker-level values; :meth:`RealCluster.compatible` with ``strict=True`` asks for a cluster
    started with the scenario's own values when that matters.
    """
    _, moved = split_config(scenario.cluster.config)
    return [topic_spec(t, moved) for t in scenario.cluster.topics]


def check_topic_configs(
    specs: Sequence[Mapping[str, Any]], reported: Mapping[str, Mapping[str, str]]
) -> None:
    """Raise :class:`ClusterError` unless Kafka reports every config asked for on each topic
    with the value asked for (a config silently dropped on the way would make the real run a
    different scenario)."""
    for spec in specs:
        have = reported.get(spec["name"], {})
        for key, value in spec.get("config", {}).items():
            if have.get(key) != value:
                raise ClusterError(
                    f"topic {spec['name']}: {key} is {have.get(key)!r} on Kafka, not {value!r} "
                    "as the scenario asks"
                )


# ---------------------------------------------------------------------------------------------
# Topic administration


class TopicAdmin(Protocol):
    """Creates topics: deletes any with the same names first, creates them with their
    ``config`` and, when a topic dict has one, its replica ``assignment`` (node ids per
    partition, the preferred leader first), and waits until the new ones have leaders. It may
    return what it created: ``{"configs": {topic: {name: value}}}``, the configs Kafka reports
    set on each topic, which :meth:`RealCluster.recreate_topics` then checks."""

    def recreate_topics(
        self, bootstrap: str, topics: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | None: ...


class ActionTopicAdmin:
    """A :class:`TopicAdmin` over a callable ``action(bootstrap, action_dict) -> dict``, such as
    the workload driver's admin mode (``functools.partial(eosim.real.clients.admin, install)``)
    with ``{"action": "recreate_topics", "topics": [...]}``; it also places the internal topics
    (``place_internal``)."""

    def __init__(self, action: Callable[[str, dict[str, Any]], dict[str, Any]]) -> None:
        self.action = action

    def _act(
        self, bootstrap: str, name: str, key: str, items: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | None:
        return self.action(bootstrap, {"name": name, key: [dict(i) for i in items]})

    def recreate_topics(
        self, bootstrap: str, topics: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | None:
        return self._act(bootstrap, "recreate_topics", "topics", topics)

    def place_internal(
        self, bootstrap: str, topics: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | None:
        return self._act(bootstrap, "place_internal", "topics", topics)

    def delete_records(
        self, bootstrap: str, records: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | None:
        return self._act(bootstrap, "delete_records", "records", records)


def model_assignment(
    broker_names: Sequence[str], topic: str, partitions: int, replication_factor: int
) -> list[list[int]]:
    """The model's replica placement of ``topic`` (:class:`eosim.simulation.metadata.
    ClusterMetadata`: partition ``p`` on brokers ``p, p+1, ...``, the first its preferred
    leader) as Kafka node ids, so that a real run's fault schedule (kill ``broker-0``) hits the
    broker that leads the same partitions in the model. Kafka's own placement starts at a
    random broker, so without it a real run's leaders differ from the model's."""
    meta = ModelMetadata(tuple(broker_names), {topic: partitions}, {topic: replication_factor})
    return [[node_id(b) for b in meta.replicas((topic, p))] for p in range(partitions)]


# ---------------------------------------------------------------------------------------------
# Metadata over the wire (MetadataRequest v7, non-flexible): readiness, leaders and ISRs without
# a JVM.


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    error: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    controller: int
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def ints(self) -> tuple[int, ...]:
        n = self.take(">i")
        return tuple(self.take(">i") for _ in range(max(n, 0)))


def fetch_metadata(
    host: str, port: int, topics: Sequence[str] | None = None, timeout: float = 2.0
) -> ClusterMetadata:
    """One Metadata request (v7) to ``host:port``: the live brokers, the active controller and
    the partitions of ``topics`` (None: every topic). Raises OSError when the broker does not
    answer."""
    client = b"eosim-cluster"
    body = struct.pack(">hhih", 3, 7, 1, len(client)) + client
    if topics is None:
        body += struct.pack(">i", -1)
    else:
        body += struct.pack(">i", len(topics))
        for name in topics:
            raw = name.encode()
            body += struct.pack(">h", len(raw)) + raw
    body += b"\x00"  # allow_auto_topic_creation = false
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        reader = _Reader(_recv(sock, size))
    reader.take(">i")  # correlation id
    reader.take(">i")  # throttle time
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(reader.take(">i")):
        nid = reader.take(">i")
        bhost = reader.string() or ""
        bport = reader.take(">i")
        reader.string()  # rack
        brokers[nid] = (bhost, bport)
    reader.string()  # cluster id
    controller = reader.take(">i")
    partitions: dict[tuple[str, int], PartitionState] = {}
    for _ in range(reader.take(">i")):
        reader.take(">h")  # topic error
        name = reader.string() or ""
        reader.take(">?")  # is_internal
        for _ in range(reader.take(">i")):
            error = reader.take(">h")
            index = reader.take(">i")
            leader = reader.take(">i")
            epoch = reader.take(">i")
            replicas, isr = reader.ints(), reader.ints()
            reader.ints()  # offline replicas
            partitions[(name, index)] = PartitionState(
                name, index, error, leader, epoch, replicas, isr
            )
    return ClusterMetadata(brokers, controller, partitions)


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------------------------------
# Processes


@dataclass(slots=True)
class _Node:
    name: str
    dir: Path
    heap: str
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    log_offset: int = 0  # where this incarnation's lines start in server.log
    # Started since the last warm-up load (eosim.real.runner warms such a cluster first).
    cold: bool = True
    # Sent SIGKILL (a crash), possibly not reaped yet.
    killed: bool = False

    @property
    def config(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log(self) -> Path:
        return self.dir / "server.log"

    def alive(self) -> bool:
        """Running: started, not exited and not killed (a killed process may still be torn
        down by the kernel for a moment)."""
        return self.process is not None and not self.killed and self.process.poll() is None

    def first_error(self) -> str:
        """This incarnation's first ERROR (or FATAL) log line with the exception under it, one
        line; "" when there is none."""
        try:
            with self.log.open("rb") as log:
                log.seek(self.log_offset)
                text = log.read().decode(errors="replace").splitlines()
        except OSError:
            return ""
        for i, line in enumerate(text):
            if " ERROR " in line or " FATAL " in line:
                cause = line.split("] ", 1)[-1]
                nxt = text[i + 1] if i + 1 < len(text) else ""
                if nxt and not nxt.startswith(("[", "\t")):
                    cause += f": {nxt.strip()}"
                return cause[:300]
        return ""

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


_LIVE: weakref.WeakSet[RealCluster] = weakref.WeakSet()


@atexit.register
def _kill_all_at_exit() -> None:
    """Never leave JVMs behind when the interpreter exits."""
    for cluster in list(_LIVE):
        cluster.stop(graceful=False)


_PATTERN = "[%d] %p %m (%c)%n"
# A trace times steps shorter than a millisecond against the histories, which are on the
# machine's monotonic clock: its lines carry microseconds and, after an " @", System.nanoTime()
# (CLOCK_MONOTONIC). The wall clock will not do: on the machine of 2026-12-02 it ran 5 ms a
# second ahead of the monotonic one during a run and stepped 8 s once (docs/calibration.md,
# "The replication path, step by step").
_TRACE_PATTERN = "[%d{yyyy-MM-dd HH:mm:ss,nnnnnn}] %p %m (%c) @%N%n"
_LOG4J2 = f"""\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = {_PATTERN}
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
_REQUEST_LOG_OFF = "logger.request.level = WARN"
_LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
_LOGGER_NAME = re.compile(r"[A-Za-z_][\w.$]*")


def check_loggers(loggers: Mapping[str, str]) -> dict[str, str]:
    """``loggers`` (Kafka logger name -> level) checked; ValueError names the bad one."""
    for name, level in loggers.items():
        if level.upper() not in _LOG_LEVELS or not _LOGGER_NAME.fullmatch(name):
            levels = ", ".join(_LOG_LEVELS)
            raise ValueError(f"logger {name}={level}: a logger's name and one of {levels}")
    return dict(loggers)


def find_log_binding(libs: Path) -> Path | None:
    """An SLF4J 1.7 binding for Kafka's log: one among the jars, else log4j's in ~/.m2."""
    for jar in sorted(libs.glob("log4j-slf4j*-impl-*.jar")) + sorted(libs.glob("slf4j-*.jar")):
        if "api" not in jar.name:
            return jar
    m2 = Path.home() / ".m2/repository/org/apache/logging/log4j/log4j-slf4j-impl"
    found = sorted(m2.glob("*/log4j-slf4j-impl-*.jar"))
    return found[-1] if found else None


def new_cluster_id() -> str:
    """A Kafka ``Uuid`` string (URL-safe base64 of 16 random bytes, no padding), never one that
    starts with '-' (as ``Uuid.randomUuid``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RealCluster:
    """One KRaft controller and ``brokers`` brokers, each its own JVM, under ``work_dir``.

    ``libs`` is the folder of Kafka's jars; ``config`` the scenario's ``cluster.config`` (Kafka
    names); ``network`` ``"auto"`` (namespaces when :func:`eosim.real.netns.available`, else
    loopback), ``"netns"`` or ``"loopback"``; ``admin`` the :class:`TopicAdmin` for
    :meth:`recreate_topics`.

    Use as a context manager or call :meth:`start` and :meth:`stop`; an interpreter exit kills
    whatever is still running.
    """

    refuses: ClassVar[dict[str, str]] = {
        "power_loss": (
            "needs a filesystem that drops unsynced writes on a crash; this machine's disks "
            "keep them, so a real power loss cannot be staged"
        ),
    }

    def __init__(
        self,
        libs: Path | str,
        work_dir: Path | str,
        brokers: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        network: Any = "auto",
        admin: TopicAdmin | None = None,
        java: str = "java",
        log_binding: Path | None = None,
        start_timeout: float = 90.0,
        stop_grace: float = 10.0,
        request_log: bool = False,
        loggers: Mapping[str, str] | None = None,
    ) -> None:
        if brokers < 1 or brokers > 99:
            raise ValueError(f"a RealCluster has 1 to 99 brokers, not {brokers}")
        self.libs = Path(libs)
        self.work_dir = Path(work_dir).resolve()
        self.brokers = brokers
        self.config: dict[str, Any] = dict(config or {})
        self.admin = admin
        self.java = java
        self.log_binding = log_binding if log_binding is not None else find_log_binding(self.libs)
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        # Every node logs each request it completes, with its times (kafka.request.logger at
        # DEBUG; for tracing, not for runs that are measured: the logging is work of its own).
        self.request_log = request_log
        # More of Kafka's loggers at a level of their own (tracing, same caveat): name -> level.
        self.loggers = check_loggers(loggers or {})
        self.cluster_id = new_cluster_id()
        self.broker_names = [f"broker-{i}" for i in range(brokers)]
        self.refuses = dict(type(self).refuses)
        self.net = _choose_network(network, self.work_dir)
        if self.net is None:
            from eosim.real import netns

            self.refuses |= network_refuses(netns.unavailable_reason() or "loopback was asked for")
            self.ports = {CONTROLLER: _free_port()} | {b: _free_port() for b in self.broker_names}
        else:
            self.refuses |= network_refuses(None)
            self.ports = {CONTROLLER: CONTROLLER_PORT} | {b: BROKER_PORT for b in self.broker_names}
        self.nodes: dict[str, _Node] = {
            name: _Node(name, self.work_dir / name, "256m" if name == CONTROLLER else "512m")
            for name in [CONTROLLER, *self.broker_names]
        }
        self._lock = threading.RLock()

    # --- identity and reuse -----------------------------------------------------------------

    @classmethod
    def for_scenario(
        cls, scenario: Any, libs: Path | str, work_dir: Path | str, **kwargs: Any
    ) -> RealCluster:
        """A cluster for ``scenario``'s cluster block, its topic-level configs left to
        :func:`topic_configs` so that other scenarios can share it."""
        broker, _ = split_config(scenario.cluster.config)
        return cls(libs, work_dir, scenario.cluster.brokers, broker, **kwargs)

    def key(self) -> tuple[int, tuple[tuple[str, str], ...]]:
        """What decides whether two scenarios can share this cluster."""
        broker, _ = split_config(self.config)
        return self.brokers, tuple(sorted(broker.items()))

    def compatible(self, scenario: Any, *, strict: bool = False) -> bool:
        """Whether this cluster can serve ``scenario``: the same broker count and broker-only
        configs (topic-level ones go on the topics, :func:`topic_configs`); ``strict``: every
        broker config the same, topic-level ones included."""
        if scenario.cluster.brokers != self.brokers:
            return False
        if strict:
            mine = {k: _prop(v) for k, v in self.config.items() if v is not None}
            theirs = {k: _prop(v) for k, v in scenario.cluster.config.items() if v is not None}
            return mine == theirs
        broker, _ = split_config(scenario.cluster.config)
        return self.key() == (self.brokers, tuple(sorted(broker.items())))

    def address(self, node: str) -> str:
        return "127.0.0.1" if self.net is None else self.net.address(node)

    def bootstrap(self) -> str:
        """The bootstrap servers clients use, every broker."""
        return ",".join(f"{self.address(b)}:{self.ports[b]}" for b in self.broker_names)

    def client_prefix(self, name: str) -> list[str]:
        """The command prefix that runs a client process where network faults reach it (its own
        namespace, created now); [] on loopback."""
        return [] if self.net is None else self.net.command_prefix(name)

    # --- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log4j(self) -> str:
        """The nodes' log configuration (with ``request_log``, the request logger at DEBUG and
        the trace's stamps, ``_TRACE_PATTERN``; each of ``loggers`` at its level)."""
        out = _LOG4J2
        if self.request_log:
            out = out.replace(_REQUEST_LOG_OFF, "logger.request.level = DEBUG")
            out = out.replace(_PATTERN, _TRACE_PATTERN)
        for i, (name, level) in enumerate(sorted(self.loggers.items())):
            out += f"logger.extra{i}.name = {name}\nlogger.extra{i}.level = {level.upper()}\n"
        return out

    def start(self) -> float:
        """Clean up a previous run's leftovers, write the configs, format, start every node and
        wait until every broker serves. Returns the seconds it took."""
        began = time.monotonic()
        _LIVE.add(self)
        self._kill_stale()
        if self.work_dir.exists():
            shutil.rmtree(self.work_dir)
        self.work_dir.mkdir(parents=True)
        (self.work_dir / "log4j2.properties").write_text(self.log4j())
        if self.net is not None:
            self.net.setup([CONTROLLER, *self.broker_names])
        for node in self.nodes.values():
            node.dir.mkdir(parents=True)
            props = node_properties(
                node.name, self.brokers, self.config, self.address, self.ports, node.dir / "data"
            )
            node.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(self._format, self.nodes.values()))
        for node in self.nodes.values():
            self._spawn(node)
        try:
            self.wait_ready(self.broker_names, self.start_timeout)
        except BaseException:
            self.stop(graceful=False)
            raise
        return time.monotonic() - began

    def stop(self, graceful: bool = True) -> None:
        """Stop every node by pid (brokers first; SIGTERM, SIGKILL after ``stop_grace`` s;
        ``graceful=False``: SIGKILL at once) and tear the network down."""
        with self._lock:
            for name in [*self.broker_names, CONTROLLER]:
                self._stop_node(self.nodes[name], graceful)
            if self.net is not None:
                self.net.teardown()
            _LIVE.discard(self)

    def _classpath(self) -> str:
        parts = [str(self.libs / "*")]
        if self.log_binding is not None:
            parts.append(str(self.log_binding))
        return os.pathsep.join(parts)

    def _format(self, node: _Node) -> None:
        cmd = [
            self.java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            self._classpath(),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(node.config),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            out = (done.stdout + done.stderr).strip().splitlines()
            raise ClusterError(
                f"{node.name}: kafka.tools.StorageTool format failed "
                f"(exit {done.returncode}): {out[-1] if out else 'no output'}"
            )

    def _spawn(self, node: _Node) -> None:
        cmd = [
            self.java,
            f"-Xmx{node.heap}",
            f"-Xms{node.heap}",
            "-XX:+UseSerialGC",
            "-XX:CICompilerCount=2",
            # Every collection and safepoint, a file per process (eosim.analysis.measure reads
            # them).
            gc_log_flag(node.dir / "gc-%p.log"),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={node.dir}",
            f"-Deosim.cluster={self.work_dir}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(node.config),
        ]
        if self.net is not None:
            cmd = self.net.command_prefix(node.name) + cmd
        with node.log.open("ab") as log:
            node.log_offset = log.tell()
            log.write(f"==== eosim: starting {node.name} at {time.time():.3f}\n".encode())
            log.flush()
            node.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node.paused = False
        node.cold = True
        node.killed = False
        (node.dir / "pid").write_text(str(node.process.pid))

    def _stop_node(self, node: _Node, graceful: bool) -> None:
        proc = node.process
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                if node.paused:
                    os.kill(proc.pid, signal.SIGCONT)
                os.kill(proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                proc.wait(self.stop_grace if graceful else 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        node.process, node.paused = None, False
        (node.dir / "pid").unlink(missing_ok=True)

    def _kill_stale(self) -> None:
        """Kill JVMs a previous, killed run left on this work dir (found by their pid files and
        checked by their command line)."""
        for pidfile in self.work_dir.glob("*/pid"):
            try:
                pid = int(pidfile.read_text())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if f"-Deosim.cluster={self.work_dir}".encode() in cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def wait_ready(self, nodes: Iterable[str], timeout: float | None = None) -> None:
        """Wait until each broker of ``nodes`` serves: it answers a Metadata request listing
        itself among the live (unfenced) brokers. The controller is ready when its process is
        up and the brokers are. One-line :class:`ClusterError` with the node's log tail when a
        node exits or the time runs out."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        waiting = [n for n in nodes if n != CONTROLLER]
        check = [CONTROLLER, *waiting] if CONTROLLER in nodes else waiting
        while True:
            for name in check:
                node = self.nodes[name]
                if not node.alive():
                    code = node.process.returncode if node.process else None
                    cause = node.first_error()
                    raise ClusterError(
                        f"{name} exited (code {code}) before it served"
                        + (f" ({cause})" if cause else "")
                        + f"; log {node.log}:\n{node.tail()}"
                    )
            waiting = [n for n in waiting if not self._serves(n)]
            if not waiting:
                return
            if time.monotonic() > deadline:
                node = self.nodes[waiting[0]]
                cause = node.first_error()
                raise ClusterError(
                    f"{node.name} did not serve within {timeout or self.start_timeout:.0f} s"
                    + (f" ({cause})" if cause else "")
                    + f"; log {node.log}:\n{node.tail()}"
                )
            time.sleep(0.25)

    def _serves(self, broker: str) -> bool:
        """Kafka logged "Kafka Server started" for this incarnation (when a log binding is on
        the classpath), the broker lists itself among the live brokers, and so does the first
        other broker that answers (a restarted broker can be ahead of the others' metadata).
        When no other answers (each down or still starting: a KRaft broker answers only once
        unfenced), its own listing stands: waiting for another would date this broker's
        return to the other's (calibration case 4 restarts all three brokers in turn)."""
        node = self.nodes[broker]
        if self.log_binding is not None:
            try:
                with node.log.open("rb") as log:
                    log.seek(node.log_offset)
                    if b"Kafka Server started" not in log.read():
                        return False
            except OSError:
                return False
        try:
            meta = fetch_metadata(self.address(broker), self.ports[broker], (), timeout=1.0)
        except OSError:
            return False
        if node_id(broker) not in meta.brokers:
            return False
        for other in self.broker_names:
            if other == broker or not self._answers(other):
                continue
            try:
                meta = fetch_metadata(self.address(other), self.ports[other], (), timeout=1.0)
            except OSError:
                continue
            return node_id(broker) in meta.brokers
        return True

    def _answers(self, broker: str) -> bool:
        node = self.nodes[broker]
        return node.alive() and not node.paused

    # --- faults (eosim.simulation.faults.FaultableCluster) -----------------------------------

    def _node(self, name: str) -> _Node:
        if name not in self.nodes:
            raise ValueError(f"{name!r} is not a node of this cluster ({', '.join(self.nodes)})")
        return self.nodes[name]

    def crash(self, node: str) -> None:
        """kill -9: the process runs no more instruction once the signal is delivered (it is
        in effect when this returns), its log dirs stay as the OS has them. The kernel then
        tears the process down, its address space first and its sockets last (their peers
        see a reset only then): 27-119 ms for a broker here (``benchmarks/
        real_crash_reset.py``; the model's ``cluster.crash_reset``), so it is reaped later,
        by :meth:`restart` (which raises :class:`ClusterError` if it is not gone within
        10 s)."""
        with self._lock:
            n = self._node(node)
            if n.alive():
                assert n.process is not None
                os.kill(n.process.pid, signal.SIGKILL)
                n.killed = True
            n.paused = False

    def power_loss(self, node: str) -> None:
        raise ClusterError(
            f"power_loss faults cannot run on a real cluster: {self.refuses['power_loss']}"
        )

    def restart(self, node: str, wait: bool = False) -> None:
        """Start ``node`` again with the same node id and dirs if it is down. Returns once the
        JVM is spawned (non-blocking, so a wall-clock schedule is not held up by the ~5-10 s a
        JVM takes); ``wait=True`` returns once it serves (:meth:`wait_ready`). The real run's
        nemesis confirms it serves before it counts as back (:meth:`wait_ready`, from a
        thread of its own)."""
        with self._lock:
            n = self._node(node)
            if n.alive():
                return
            if n.process is not None and n.process.poll() is None:
                try:  # killed, and still being torn down: wait for it
                    n.process.wait(10)
                except subprocess.TimeoutExpired:
                    raise ClusterError(f"{node}: still alive 10 s after SIGKILL") from None
            self._spawn(n)
        if wait:
            self.wait_ready([node])

    def pause(self, node: str) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing. Returns once every
        thread has stopped (a signal is delivered asynchronously), so the fault is in effect
        when the schedule records it; a process whose threads do not all stop within 2 s is
        let go again (SIGCONT) and :class:`ClusterError` raised."""
        with self._lock:
            n = self._node(node)
            if n.alive() and not n.paused:
                assert n.process is not None
                os.kill(n.process.pid, signal.SIGSTOP)
                if not wait_stopped(n.process.pid) and n.alive():
                    os.kill(n.process.pid, signal.SIGCONT)
                    raise ClusterError(f"{node}: not every thread stopped within 2 s")
                n.paused = True

    def resume(self, node: str) -> None:
        """SIGCONT; returns once no thread of the process is stopped (:class:`ClusterError`
        if one still is 2 s later)."""
        with self._lock:
            n = self._node(node)
            if n.alive() and n.paused:
                assert n.process is not None
                os.kill(n.process.pid, signal.SIGCONT)
                if not wait_running(n.process.pid) and n.alive():
                    raise ClusterError(f"{node}: still stopped 2 s after SIGCONT")
            n.paused = False

    def partition(self, groups: Sequence[Sequence[str]]) -> Any:
        self._network_or_refuse("partition")
        assert self.net is not None
        with self._lock:
            return self.net.partition(groups)

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> Any:
        """Delay (``extra_latency`` ms) and/or drop (``loss``) the packets of ``nodes`` and of
        the directed ``links``; the handle (a tuple of two when both) goes to :meth:`heal`."""
        handles: list[Any] = []
        if extra_latency > 0 and "delay" in self.refuses:
            reason = self.refuses["delay"]
            raise ClusterError(f"delay faults cannot run on this cluster: {reason}")
        self._network_or_refuse("loss")
        assert self.net is not None
        with self._lock:
            try:
                if extra_latency > 0:
                    handles.append(self.net.delay(nodes, links, extra_latency))
                if loss > 0 or not handles:
                    handles.append(self.net.loss(nodes, links, loss))
            except BaseException:
                for handle in handles:
                    self.net.heal(handle)
                raise
        return handles[0] if len(handles) == 1 else tuple(handles)

    def prepare_delays(self, nodes: Sequence[str]) -> None:
        """Start the delayers of ``nodes`` ahead of their delay faults (namespaces only)."""
        if self.net is None or "delay" in self.refuses:
            return
        from eosim.real.netns import NetnsError

        with self._lock:
            try:
                self.net.prepare_delays(nodes)
            except NetnsError as exc:
                raise ClusterError(str(exc)) from None

    def heal(self, handle: Any) -> None:
        if self.net is not None:
            with self._lock:
                for one in handle if isinstance(handle, tuple) else (handle,):
                    self.net.heal(one)

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        """An administrator's DeleteRecords (Admin.deleteRecords) of ``topic`` (one
        ``partition``, or every one) below ``offset`` (-1: each high watermark, as Kafka's
        DeleteRecordsRequest reads -1): per partition, its name, the error name (``NONE``) and
        the low watermark after it (-1 on an error). The admin client retries retriable errors
        until its own timeout, as the model's one request does not; an error it gives up on is
        reported, not raised."""
        action = getattr(self.admin, "delete_records", None)
        if action is None:
            raise ClusterError("this TopicAdmin cannot delete records (no delete_records)")
        if partition is None:
            have = self.metadata([topic]).partitions
            partitions = sorted(p for t, p in have if t == topic)
        else:
            partitions = [partition]
        asked = [{"topic": topic, "partition": p, "offset": offset} for p in partitions]
        result = action(self.bootstrap(), asked) or {}
        marks = {(m["topic"], m["partition"]): m for m in result.get("low_watermarks", [])}
        out = []
        for p in partitions:
            mark = marks.get((topic, p), {})
            out.append(
                (
                    f"{topic}-{p}",
                    str(mark.get("error", "UNKNOWN")),
                    int(mark.get("low_watermark", -1)),
                )
            )
        return out

    def _network_or_refuse(self, kind: str) -> None:
        if self.net is None:
            raise ClusterError(f"{kind} faults cannot run on this cluster: {self.refuses[kind]}")

    # --- topics and metadata ------------------------------------------------------------------

    def recreate_topics(self, topics: Sequence[Any]) -> None:
        """Delete and create ``topics`` (scenario Topics or the admin's dicts, e.g. from
        :func:`topic_configs`) through the :class:`TopicAdmin`, then wait until every partition
        has a leader."""
        if self.admin is None:
            raise ClusterError(
                "no TopicAdmin: Kafka 4.x's broker jar has no topic tool; pass admin= "
                "(e.g. ActionTopicAdmin over the driver's admin mode)"
            )
        specs = [topic_spec(t) for t in topics]
        for spec in specs:
            spec["assignment"] = model_assignment(
                self.broker_names, spec["name"], spec["partitions"], spec["replication_factor"]
            )
        created = self.admin.recreate_topics(self.bootstrap(), specs)
        if created is not None and "configs" in created:
            check_topic_configs(specs, created["configs"])
        # Each partition led by its preferred replica, the model's initial leader.
        wanted = {
            (s["name"], p): s["assignment"][p][0] for s in specs for p in range(s["partitions"])
        }
        self._await_leaders(wanted, f"topics {sorted({s['name'] for s in specs})}")

    def place_internal(self, topics: Sequence[str]) -> None:
        """Give the internal ``topics`` (``__transaction_state``, ``__consumer_offsets``) the
        model's placement and leaders: created if missing (as a client's FindCoordinator does),
        replicas reordered where Kafka placed them otherwise, and a preferred leader election
        so that each partition is led by the broker that leads it in the model (a previous
        run's crashes move internal leaders; Kafka moves them back only after
        ``leader.imbalance.check.interval.seconds``, 300 s). Then a transactional.id's
        coordinator is on the same broker on both sides."""
        if not topics:
            return
        factor = internal_replication_factor(len(self.broker_names))
        self._place(topics, INTERNAL_PARTITIONS, factor, f"internal topics {list(topics)}")

    def lead_preferred(self, topic: str, partitions: int, replication_factor: int) -> None:
        """Lead every partition of ``topic`` (created with the model's placement) by its
        preferred replica again. A crash moves leaders; Kafka moves them back only at its
        controller's next ``leader.imbalance.check.interval.seconds`` tick (300 s), and the
        brokers that take them back then compile their leader paths anew."""
        self._place([topic], partitions, replication_factor, f"topic {topic}")

    def _place(self, topics: Sequence[str], partitions: int, factor: int, what: str) -> None:
        place = getattr(self.admin, "place_internal", None)
        if place is None:
            raise ClusterError("this TopicAdmin cannot place topics (no place_internal)")
        specs = [
            {"name": t, "assignment": model_assignment(self.broker_names, t, partitions, factor)}
            for t in topics
        ]
        place(self.bootstrap(), specs)
        wanted = {(s["name"], p): s["assignment"][p][0] for s in specs for p in range(partitions)}
        self._await_leaders(wanted, what)

    def _await_leaders(self, wanted: Mapping[tuple[str, int], int], what: str) -> None:
        """Wait up to 30 s until every partition of ``wanted`` is led by the node id given."""
        deadline = time.monotonic() + 30
        topics = sorted({t for t, _ in wanted})
        while True:
            have = self.metadata(topics).partitions
            wrong = sorted(
                k for k, leader in wanted.items() if k not in have or have[k].leader != leader
            )
            if not wrong:
                return
            if time.monotonic() > deadline:
                t, p = wrong[0]
                got = have[wrong[0]].leader if wrong[0] in have else None
                raise ClusterError(
                    f"{what}: {len(wrong)} partition(s) not led by the model's initial leader, "
                    f"e.g. {t}-{p} led by {got}, not {wanted[wrong[0]]}"
                )
            time.sleep(0.2)

    def metadata(
        self, topics: Sequence[str] | None = None, via: str | None = None
    ) -> ClusterMetadata:
        """The metadata as broker ``via`` sees it (None: the first live broker that answers);
        ``topics`` None: every topic."""
        last: Exception | None = None
        for broker in [via] if via is not None else self.broker_names:
            if via is None and not self._answers(broker):
                continue
            try:
                return fetch_metadata(self.address(broker), self.ports[broker], topics)
            except OSError as exc:
                last = exc
        raise ClusterError(f"no broker answered a Metadata request ({last})")

    def leaders(self, topics: Sequence[str] | None = None) -> dict[tuple[str, int], str | None]:
        """Each partition's leader by node name (None: no leader), as a broker sees it now."""
        names = {node_id(b): b for b in self.broker_names}
        return {
            key: names.get(state.leader) for key, state in self.metadata(topics).partitions.items()
        }

    def cold_nodes(self) -> list[str]:
        """The nodes started (or restarted) since the last :meth:`mark_warm`."""
        return [name for name, n in self.nodes.items() if n.cold]

    def jit_cpu_ms(self, node: str) -> tuple[int, float] | None:
        """(pid, ms its JIT compiler threads have run) of ``node``'s current process; None
        when it is not running (:func:`eosim.real.clients.compiler_cpu_ms`)."""
        pid = self.pid(node)
        if pid is None:
            return None
        ms = compiler_cpu_ms(pid)
        return None if ms is None else (pid, ms)

    def mark_warm(self) -> None:
        """A warm-up load has run: every node's JIT has seen the request paths."""
        for n in self.nodes.values():
            n.cold = False

    def delayer_deaths(self) -> list[str]:
        """Delayers found dead while they held a delay fault, one line each (since the last
        call)."""
        return [] if self.net is None else self.net.take_deaths()

    def unconverged(self, topics: Sequence[str]) -> list[str]:
        """Why the cluster is not at rest, one reason each (empty: it is): a broker down,
        paused or not serving, or a partition of ``topics`` without a leader or with a
        replica out of its ISR (the model's ``Cluster.unconverged``)."""
        reasons = [
            f"{b} is not serving"
            for b in self.broker_names
            if not self._answers(b) or not self._serves_quietly(b)
        ]
        try:
            meta = self.metadata(list(topics))
        except ClusterError as exc:
            return [*reasons, str(exc)]
        for (topic, partition), state in sorted(meta.partitions.items()):
            if state.leader < 0:
                reasons.append(f"{topic}-{partition} has no leader")
            elif set(state.isr) != set(state.replicas):
                reasons.append(
                    f"{topic}-{partition}: ISR {sorted(state.isr)} of replicas "
                    f"{sorted(state.replicas)}"
                )
        return reasons

    def _serves_quietly(self, broker: str) -> bool:
        try:
            return self._serves(broker)
        except (OSError, ClusterError):
            return False

    def gc_log(self, node: str) -> Path | None:
        """The garbage-collection log of ``node``'s current process (None: not running)."""
        pid = self.pid(node)
        return None if pid is None else self._node(node).dir / f"gc-{pid}.log"

    def pid(self, node: str) -> int | None:
        n = self._node(node)
        return n.process.pid if n.alive() and n.process is not None else None


def network_refuses(loopback: str | None) -> dict[str, str]:
    """The network fault kinds a cluster cannot do, each with why: all three on loopback
    (``loopback``: why it runs there), else delay alone where no delayer can be queued to
    (:func:`eosim.real.netns.delay_unavailable_reason`)."""
    from eosim.real import netns

    if loopback is not None:
        return {
            k: f"no network namespaces here ({loopback})" for k in ("partition", "loss", "delay")
        }
    if (reason := netns.delay_unavailable_reason()) is not None:
        return {"delay": f"packets cannot be queued to a delayer here ({reason})"}
    return {}


def _choose_network(mode: Any, work_dir: Path) -> Any:
    """The netns network for ``mode`` (None: loopback); a :class:`eosim.real.netns.Network`
    is used as it is (another prefix and subnet, e.g. for tests beside a running cluster)."""
    if mode == "loopback":
        return None
    from eosim.real import netns

    if isinstance(mode, netns.Network):
        reason = netns.unavailable_reason()
        if reason:
            raise ClusterError(f"network namespaces are not available: {reason}")
        return mode

    if mode == "netns" or (mode == "auto" and netns.available()):
        reason = netns.unavailable_reason()
        if reason:
            raise ClusterError(f"network namespaces are not available: {reason}")
        return netns.Network()
    if mode != "auto":
        raise ValueError(f"network is 'auto', 'netns' or 'loopback', not {mode!r}")
    return None
