"""Measure a real Kafka cluster on this machine and fit the resource model to it.

    python -m eosim.analysis.measure [--loads 1000,3000,6000] [--seconds 20] [--out DIR]
                                 [--preset NAME] [--kafka-version V]

Starts the calibration set-up (a controller and three brokers, each in its namespace, on this
machine's cores, as ``eosim calibrate`` runs them), warms it, and at each load runs an
idempotent acks=all producer and a read_uncommitted consumer on a topic of three partitions,
replication factor 3, ``min.insync.replicas`` 2 (calibration case 5's shape) for ``--seconds``.
Around each load it takes, for every broker:

* Kafka's request metrics over JMX (``kafka.network:type=RequestMetrics``: per request type
  ``LocalTimeMs``, ``RequestQueueTimeMs``, ``RemoteTimeMs``, ``TotalTimeMs`` and their
  counts), ``RequestHandlerAvgIdlePercent`` and ``NetworkProcessorAvgIdlePercent``, the records
  in (``BrokerTopicMetrics``) and the process's CPU time (the driver's ``jmx`` mode, through
  the attach API: the brokers run unchanged);
* its garbage-collection log (``-Xlog:gc``, every broker writes one): each young collection's
  pause and the heap it freed;
* ``/proc/PID/task/*/schedstat``: its threads' time on a core and waiting for one;

and the clients' produce latency and ack-to-first-read from their histories, their processes'
CPU and their threads' (the application's thread, the producer's Sender, the rest). Then it crashes
and restarts one broker and follows its CPU per second under load, for the warm-up. From these
it fits the resource model (:mod:`eosim.simulation.resources`): the CPU cost of each kind of
work (a request's local time, less the share of it its threads spent waiting for a core), what
it allocates (the collections' freed heap over the records handled), the pauses' lognormal,
the warm-up's factor and time constant, and the cores. It writes the fit as a preset
(``simulation/presets/<NAME>.yaml``, default ``calibration-host``) and every measurement as
``<out>/measure.json``; docs/calibration.md shows the fit and how it was validated.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from eosim.real import RealError, clients
from eosim.real.cluster import ActionTopicAdmin, RealCluster
from eosim.real.install import DEFAULT_VERSION, KafkaInstall, install
from eosim.real.runner import warm_up
from eosim.simulation.resources import load_preset, preset_names

BROKERS = ("broker-0", "broker-1", "broker-2")
TOPIC = "measure"
PATTERNS = (
    "kafka.network:type=RequestMetrics,name=LocalTimeMs,request=*",
    "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=*",
    "kafka.network:type=RequestMetrics,name=RemoteTimeMs,request=*",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=*",
    "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*",
    "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
    "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent",
    "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec",
    "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec",
    "java.lang:type=OperatingSystem",
    "java.lang:type=GarbageCollector,name=*",
)
# Kafka's threads by name (their CPU from the JVM's ThreadMXBean, by the jmx mode).
THREAD_GROUPS = (
    ("handler", "data-plane-kafka-request-handler-"),
    ("network", "data-plane-kafka-network-thread-"),
    ("fetcher", "ReplicaFetcherThread-"),
)
GC_LINE = re.compile(
    r"\[(?P<up>[\d.]+)s\].*Pause Young.* (?P<before>\d+)M->(?P<after>\d+)M\((?P<total>\d+)M\) "
    r"(?P<ms>[\d.]+)ms"
)
DEFAULT_PRESET = "calibration-host"
# How long the load runs after the restart whose warm-up is followed.
RESTART_S = 60.0
# The warm-up before the measurements: its first slice, then on until every broker's JIT has
# settled as before a real run (eosim.real.runner.warm_up: about 110 s after a cluster start
# here); measure.json records how it ended ("warmth").
MEASURE_WARMUP_S = 90.0


# -- what is read off the machine ------------------------------------------------------------
# Kafka's request-path threads by their native names (the first 15 characters of the Java
# name): the network and request handler threads share "data-plane-kafk".
NATIVE_GROUPS = (("request", "data-plane-kafk"), ("fetcher", "ReplicaFetcherT"))


def schedstat_threads(pid: int) -> dict[str, tuple[str, float, float, float]]:
    """Each thread of ``pid`` by its id: (its group, :data:`NATIVE_GROUPS` or ``other``; ms on
    a core; ms waiting for one; times put on a core)."""
    out: dict[str, tuple[str, float, float, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        group = next((g for g, prefix in NATIVE_GROUPS if name.startswith(prefix)), "other")
        out[task.name] = (group, int(fields[0]) / 1e6, int(fields[1]) / 1e6, int(fields[2]))
    return out


def _by_group(
    threads: dict[str, tuple[str, float, float, float]],
) -> dict[str, tuple[float, float, float]]:
    """(ms on a core, ms waiting for one, times put on a core) of ``threads``
    (:func:`schedstat_threads`) summed by group."""
    out: dict[str, list[float]] = {}
    for group, on, wait, slices in threads.values():
        acc = out.setdefault(group, [0.0, 0.0, 0.0])
        acc[0] += on
        acc[1] += wait
        acc[2] += slices
    return {g: (on, wait, slices) for g, (on, wait, slices) in out.items()}


def background_slice_ms(
    before: dict[str, tuple[str, float, float, float]],
    after: dict[str, tuple[str, float, float, float]],
) -> float | None:
    """How long the background's work holds a core at a time, from two readings of a
    process's threads (:func:`schedstat_threads`): over the ``other`` threads (neither
    request path nor replica fetcher; what the model's background stands for), each thread's
    CPU per time on a core, weighted by its CPU: the mean length of the run on a core that a
    random millisecond of background work belongs to. None without such work. Threads that
    started or ended between the readings count from zero or not at all."""
    weighted = total = 0.0
    for tid, (group, on, _wait, slices) in after.items():
        if group != "other":
            continue
        _g, on0, _w0, slices0 = before.get(tid, (group, 0.0, 0.0, 0.0))
        d_on, d_slices = on - on0, slices - slices0
        if d_on > 0 and d_slices > 0:
            weighted += d_on * d_on / d_slices
            total += d_on
    return weighted / total if total > 0 else None


# A client driver's threads by their native names: its application's thread (the JVM's main
# thread, "java": the producer's send() loop, the reader's poll loop and the history lines it
# builds) and its producer's Sender ("kafka-producer-network-thread | ..."); the rest (the
# history writer, the JIT's compiler thread, the VM thread that runs its collections, timers)
# is the process's background.
CLIENT_GROUPS = (("main", "java"), ("sender", "kafka-producer-"))


def client_threads_ms(pid: int) -> dict[str, float]:
    """The ms on a core of process ``pid``'s threads so far (``/proc/PID/task/*/schedstat``),
    by :data:`CLIENT_GROUPS` and ``other``; threads that have ended are not counted."""
    out = {group: 0.0 for group, _ in CLIENT_GROUPS} | {"other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on = int((task / "schedstat").read_text().split()[0]) / 1e6
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        group = next((g for g, prefix in CLIENT_GROUPS if name.startswith(prefix)), "other")
        out[group] += on
    return out


def nonempty_polls(lines: Iterable[dict[str, Any]], process: str) -> int:
    """How many ``poll`` ops of ``process`` (any incarnation: the driver writes
    ``NAME/INCARNATION``) ``lines`` hold; the reading driver writes one per non-empty poll."""
    return sum(
        1
        for ln in lines
        if ln.get("kind") == "op"
        and ln.get("type") == "ok"
        and ln.get("f") == "poll"
        and str(ln.get("process", "")).partition("/")[0] == process
    )


def cpu_ms(pid: int) -> float:
    """The CPU time of process ``pid`` (every thread's, those that exited included: utime and
    stime of ``/proc/PID/stat``), in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def gc_pauses(path: Path | None, since_s: float = 0.0) -> list[dict[str, float]]:
    """The young collections of a GC log after JVM uptime ``since_s``: uptime (s), pause (ms),
    heap before and after (MB)."""
    if path is None or not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = GC_LINE.search(line)
        if m and float(m["up"]) >= since_s:
            out.append(
                {
                    "up": float(m["up"]),
                    "ms": float(m["ms"]),
                    "before": float(m["before"]),
                    "after": float(m["after"]),
                }
            )
    return out


def jvm_uptime_s(path: Path | None) -> float:
    """The JVM uptime of the last line of a GC log (0 if none)."""
    if path is None or not path.exists():
        return 0.0
    found = re.findall(r"\[([\d.]+)s\]", path.read_text(errors="replace"))
    return float(found[-1]) if found else 0.0


class Samplers:
    """One ``jmx`` driver per broker, in the broker's namespace (its JVM's management agent
    listens on that namespace's loopback), kept running: a snapshot is a line asked of each
    (:meth:`snapshot`), so taking one costs the machine little."""

    def __init__(self, cluster: RealCluster, inst: KafkaInstall, workdir: Path) -> None:
        self.cluster, self.inst, self.workdir = cluster, inst, workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for broker in BROKERS:
            self.start(broker)

    def start(self, broker: str) -> None:
        pid = self.cluster.pid(broker)
        if pid is None:
            raise RealError(f"{broker} is not running")
        spec = clients.write_spec(
            self.workdir / f"jmx-{broker}.json",
            "jmx",
            "jmx",
            "-",
            pids={broker: str(pid)},
            patterns=list(PATTERNS),
            serve=True,
        )
        net = self.cluster.net
        prefix = [] if net is None else net.prefix_cmd(broker)
        self.procs[broker] = subprocess.Popen(
            [*prefix, *self.inst.driver_command(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def restart(self, broker: str) -> None:
        self.stop(broker)
        self.start(broker)

    def stop(self, broker: str) -> None:
        proc = self.procs.pop(broker, None)
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def snapshot(self, brokers: Sequence[str] | None = None) -> dict[str, Any]:
        """Every broker's MBeans and threads now (or those of ``brokers``)."""
        out: dict[str, Any] = {}
        asked = {b: p for b, p in self.procs.items() if brokers is None or b in brokers}
        for proc in asked.values():
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(b"\n")
            proc.stdin.flush()
        for broker, proc in asked.items():
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise RealError(f"the JMX sampler of {broker} exited")
            out[broker] = json.loads(line)[broker]
        return out

    def close(self) -> None:
        for broker in list(self.procs):
            self.stop(broker)


class Snapshot:
    """Every measure of every broker at one moment.

    Reading the MBeans is work the brokers do (their RMI threads walk every MBean the
    patterns match, computing each histogram's percentiles; about 1.5 s of a broker's CPU on
    the machine of 2026-11-30). Each broker's process CPU is therefore read from ``/proc``
    just before the walk (``cpu``, at ``at``) and just after it (``cpu_after``, at
    ``at_after``), and so are the threads' run-queue accounts (``sched``, ``sched_after``): a
    window between two snapshots runs from the first's end to the second's start
    (:func:`deltas`), so that neither walk is counted as the broker's own CPU nor its burst
    as their waiting. (Until then the process CPU came from the walk itself, each window
    counted one walk, and the fitted background was 173 ms/s per broker where a broker of
    the calibration runs spends about 25 ms/s idle.)"""

    def __init__(self, cluster: RealCluster, samplers: Samplers) -> None:
        pids = {b: cluster.pid(b) for b in BROKERS}
        self.threads = {b: schedstat_threads(pid) for b, pid in pids.items() if pid}
        self.sched_groups = {b: _by_group(t) for b, t in self.threads.items()}
        self.sched = {b: _totals(g) for b, g in self.sched_groups.items()}
        controller = cluster.pid("controller")
        self.controller_cpu = cpu_ms(controller) if controller else 0.0
        self.cpu = {b: cpu_ms(pid) for b, pid in pids.items() if pid}
        self.at = time.monotonic()
        self.jmx = samplers.snapshot()
        self.cpu_after = {b: cpu_ms(pid) for b, pid in pids.items() if pid}
        self.at_after = time.monotonic()
        self.threads_after = {b: schedstat_threads(pid) for b, pid in pids.items() if pid}
        self.sched_groups_after = {b: _by_group(t) for b, t in self.threads_after.items()}
        self.sched_after = {b: _totals(g) for b, g in self.sched_groups_after.items()}
        self.gc_len = {b: len(gc_pauses(cluster.gc_log(b))) for b in BROKERS}


def _totals(groups: dict[str, tuple[float, float, float]]) -> tuple[float, float]:
    """(ms on a core, ms waiting for one) over every group of :func:`_by_group`."""
    return (sum(g[0] for g in groups.values()), sum(g[1] for g in groups.values()))


def _bean(snap: Snapshot, broker: str, prefix: str) -> dict[str, dict[str, float]]:
    return {k: v for k, v in snap.jmx.get(broker, {}).items() if k.startswith(prefix)}


def _request_type(name: str) -> str:
    return dict(part.split("=", 1) for part in name.split(":", 1)[1].split(","))["request"]


def thread_cpu(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """The CPU ms each group of Kafka's threads (:data:`THREAD_GROUPS`) spent between two
    snapshots, and every other Java thread's (``other``)."""
    before, after = a.get("threads", {}), b.get("threads", {})
    out = {name: 0.0 for name, _ in THREAD_GROUPS} | {"other": 0.0}
    for thread, ns in after.items():
        spent = (ns - before.get(thread, 0)) / 1e6
        group = next((g for g, prefix in THREAD_GROUPS if thread.startswith(prefix)), "other")
        out[group] += max(spent, 0.0)
    return out


def deltas(a: Snapshot, b: Snapshot, cluster: RealCluster) -> dict[str, Any]:
    """What happened on each broker between two snapshots: its process CPU and its threads'
    run-queue accounts from the end of ``a``'s MBean walk to the start of ``b``'s (see
    :class:`Snapshot`), what the MBeans count from one walk to the other."""
    seconds = b.at - a.at_after
    out: dict[str, Any] = {
        "seconds": seconds,
        # What the MBeans count (requests, the threads' CPU) spans from one walk's end to the
        # next's: the threads' CPU per second is over this, not ``seconds``.
        "walk_to_walk_seconds": b.at_after - a.at_after,
        "brokers": {},
        "controller_cpu_ms": b.controller_cpu - a.controller_cpu,
    }
    for broker in BROKERS:
        if broker not in a.jmx or broker not in b.jmx:
            continue
        row: dict[str, Any] = {"requests": {}}
        for metric in ("LocalTimeMs", "RequestQueueTimeMs", "RemoteTimeMs", "TotalTimeMs"):
            before = _bean(a, broker, f"kafka.network:name={metric}")
            for name, after in _bean(b, broker, f"kafka.network:name={metric}").items():
                kind = _request_type(name)
                count = after.get("Count", 0.0) - before.get(name, {}).get("Count", 0.0)
                total = after.get("Mean", 0.0) * after.get("Count", 0.0) - before.get(name, {}).get(
                    "Mean", 0.0
                ) * before.get(name, {}).get("Count", 0.0)
                if count > 0:
                    req = row["requests"].setdefault(kind, {"count": count})
                    req[metric] = total / count
        idle = "kafka.server:name=RequestHandlerAvgIdlePercent,type=KafkaRequestHandlerPool"
        ia, ib = a.jmx[broker].get(idle, {}), b.jmx[broker].get(idle, {})
        row["handler_idle"] = (ib.get("Count", 0.0) - ia.get("Count", 0.0)) / (seconds * 1e9)
        row["handler_busy_ms"] = sum(
            r["count"] * r.get("LocalTimeMs", 0.0) for r in row["requests"].values()
        )
        net = "kafka.network:name=NetworkProcessorAvgIdlePercent,type=SocketServer"
        row["network_idle"] = b.jmx[broker].get(net, {}).get("Value")
        msgs = "kafka.server:name=MessagesInPerSec,type=BrokerTopicMetrics"
        row["records_in"] = b.jmx[broker].get(msgs, {}).get("Count", 0.0) - a.jmx[broker].get(
            msgs, {}
        ).get("Count", 0.0)
        row["cpu_ms"] = b.cpu.get(broker, 0.0) - a.cpu_after.get(broker, 0.0)
        on_a, wait_a = a.sched_after.get(broker, (0.0, 0.0))
        on_b, wait_b = b.sched.get(broker, (0.0, 0.0))
        row["on_core_ms"], row["wait_ms"] = on_b - on_a, wait_b - wait_a
        groups_a, groups_b = a.sched_groups_after.get(broker, {}), b.sched_groups.get(broker, {})
        # [ms on a core, ms waiting for one, times put on a core] per group of threads.
        row["sched_groups"] = {
            g: [x - y for x, y in zip(now, groups_a.get(g, (0.0, 0.0, 0.0)), strict=True)]
            for g, now in groups_b.items()
        }
        threads_a, threads_b = a.threads_after.get(broker, {}), b.threads.get(broker, {})
        if threads_b:
            row["background_slice_ms"] = background_slice_ms(threads_a, threads_b)
        gc = gc_pauses(cluster.gc_log(broker))[a.gc_len[broker] : b.gc_len[broker]]
        row["gc"] = gc
        row["threads_ms"] = thread_cpu(a.jmx[broker], b.jmx[broker])
        out["brokers"][broker] = row
    return out


# -- loads -----------------------------------------------------------------------------------
LEAD_S = 5.0  # the clients start this long before their epoch (a JVM, a warm-up)
SETTLE_S = 3.0  # the window opens this long after the epoch, once the load is steady


def run_load(
    cluster: RealCluster,
    inst: KafkaInstall,
    samplers: Samplers,
    workdir: Path,
    rate: float,
    seconds: float,
) -> dict[str, Any]:
    """An idempotent acks=all producer at ``rate`` records/s for ``seconds`` and a
    read_uncommitted consumer; the brokers' measures over a window inside the load (from
    ``SETTLE_S`` after its start to a second before its end) and the clients' latencies and
    CPU in it."""
    from eosim.analysis.history import history_from_records
    from eosim.analysis.timings import ack_latencies, read_after_ack_latencies

    shutil.rmtree(workdir, ignore_errors=True)  # histories are appended to
    workdir.mkdir(parents=True)
    epoch_ns = time.monotonic_ns() + int(LEAD_S * 1e9)
    epoch_ms = time.time() * 1000 + LEAD_S * 1000
    records = int(rate * seconds)
    common = {"epoch_ms": epoch_ms, "epoch_monotonic_ns": epoch_ns, "seed": 1}
    stop = workdir / "reader.stop"
    reader = clients.DriverProcess(
        inst,
        clients.write_spec(
            workdir / "reader.json",
            "consume",
            "reader",
            cluster.bootstrap(),
            history=workdir / "reader.jsonl",
            workload={"topic": TOPIC, "isolation": "read_uncommitted"},
            stop_file=str(stop),
            **common,
        ),
        gc_log=workdir / "reader.gc.log",
    )
    producer = clients.DriverProcess(
        inst,
        clients.write_spec(
            workdir / "producer.json",
            "produce",
            "producer-0",
            cluster.bootstrap(),
            history=workdir / "producer.jsonl",
            config={"acks": "all", "enable.idempotence": True},
            workload={"topic": TOPIC, "records": records, "rate": rate, "keys": 300},
            warmup={"topic": "eosim-warmup", "records": 2000},
            **common,
        ),
        gc_log=workdir / "producer.gc.log",
    )

    def run_ms() -> float:
        return (time.monotonic_ns() - epoch_ns) / 1e6

    def client_cpu() -> dict[str, float]:
        return {
            name: cpu_ms(proc.pid)
            for name, proc in (("producer", producer), ("reader", reader))
            if proc.running()
        }

    def client_threads() -> dict[str, dict[str, float]]:
        out = {}
        for name, proc in (("producer", producer), ("reader", reader)):
            if proc.running():
                with contextlib.suppress(OSError):
                    out[name] = client_threads_ms(proc.pid)
        return out

    opens, closes = SETTLE_S * 1000, (seconds - 2.0) * 1000
    while run_ms() < opens and producer.running():
        time.sleep(0.02)
    cpu_before, threads_before, window = client_cpu(), client_threads(), [run_ms()]
    before = Snapshot(cluster, samplers)
    while run_ms() < closes and producer.running():
        time.sleep(0.02)
    cpu_after, threads_after = client_cpu(), client_threads()
    window.append(run_ms())
    after = Snapshot(cluster, samplers)
    code = producer.wait(seconds + 120)
    stop.touch()
    reader.wait(30)
    if code != 0:
        raise RealError(f"the measuring producer failed ({producer.error()})")
    lines = clients.merge_histories(
        [
            clients.read_history_lines(workdir / "producer.jsonl"),
            clients.read_history_lines(workdir / "reader.jsonl"),
        ]
    )
    # The operations invoked in the window, with their completions.
    keep = {
        ln["id"]
        for ln in lines
        if ln.get("kind") == "op"
        and ln.get("type") == "invoke"
        and window[0] <= float(ln.get("time", 0.0)) <= window[1]
    }
    in_window = [ln for ln in lines if ln.get("kind") != "op" or ln.get("id") in keep]
    history = history_from_records(in_window)
    reader_out = reader.result() or {}
    acks = sorted(ack_latencies(history))
    reads = sorted(read_after_ack_latencies(history))
    row = deltas(before, after, cluster)
    # The clients' collections in the window (their logs' uptimes counted from each JVM's
    # start, a moment before it was spawned here: the window shifted by the spawn time).
    spawn_ms = -LEAD_S * 1000
    client_gc = {
        name: [
            g
            for g in gc_pauses(workdir / f"{name}.gc.log")
            if window[0] <= g["up"] * 1000 + spawn_ms <= window[1]
        ]
        for name in ("producer", "reader")
    }
    row["client"] = {
        "rate": rate,
        "records": records,
        "window_ms": window,
        "records_in_window": rate * (window[1] - window[0]) / 1000,
        "produce_p50_ms": _q(acks, 0.5),
        "produce_p99_ms": _q(acks, 0.99),
        "read_after_ack_p50_ms": _q(reads, 0.5),
        "read_after_ack_p99_ms": _q(reads, 0.99),
        "late_ms": (producer.result() or {}).get("late_ms"),
        "client_cpu_ms": {n: cpu_after.get(n, 0.0) - ms for n, ms in cpu_before.items()},
        "client_threads_ms": {
            n: {g: threads_after[n][g] - ms for g, ms in groups.items()}
            for n, groups in threads_before.items()
            if n in threads_after
        },
        "client_gc": client_gc,
        # The reader's polling thread, inside poll() and after its non-empty ones (over its
        # whole run: the driver's result), and its non-empty polls in the window.
        "reader_poll_cpu_ms": {
            key: reader_out[f"{key}_cpu_ms"]
            for key in ("poll", "after_poll")
            if f"{key}_cpu_ms" in reader_out
        },
        "reader_polls": nonempty_polls(in_window, "reader"),
        "fetches": sum(
            r["requests"].get("FetchConsumer", {}).get("count", 0.0)
            for r in row["brokers"].values()
        ),
    }
    return row


def _q(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(q * len(values)))]


def idle(cluster: RealCluster, samplers: Samplers, seconds: float) -> dict[str, Any]:
    """The brokers' measures over ``seconds`` without load: what they spend on their own."""
    before = Snapshot(cluster, samplers)
    time.sleep(seconds)
    return deltas(before, Snapshot(cluster, samplers), cluster)


def follow_restart(
    cluster: RealCluster,
    inst: KafkaInstall,
    samplers: Samplers,
    workdir: Path,
    rate: float,
    seconds: float,
) -> list[dict[str, float]]:
    """Crash and restart broker-2, then, under load, each second: its CPU ms per second, and
    its Kafka threads' (handler, network, fetcher) and the rest's apart (the JIT and the
    collector): ``{t, cpu, kafka, rest}`` with ``t`` in seconds since it served."""
    import threading

    cluster.crash("broker-2")
    cluster.restart("broker-2", wait=True)
    samplers.restart("broker-2")
    started = time.monotonic()
    samples: list[dict[str, float]] = []
    done = threading.Event()

    def sample() -> None:
        pid = cluster.pid("broker-2")
        if pid is None:
            return
        # The process CPU between the MBean walks, not in them (see Snapshot): read after
        # one walk and before the next.
        last_jmx = samplers.snapshot(["broker-2"])["broker-2"]
        last_t, last_cpu = time.monotonic(), cpu_ms(pid)
        walked = last_t
        while not done.wait(1.0):
            now, cpu = time.monotonic(), cpu_ms(pid)
            jmx = samplers.snapshot(["broker-2"])["broker-2"]
            after = time.monotonic()
            threads = thread_cpu(last_jmx, jmx)
            kafka = (threads["handler"] + threads["network"] + threads["fetcher"]) / (
                after - walked
            )
            total = (cpu - last_cpu) / (now - last_t)
            samples.append(
                {"t": now - started, "cpu": total, "kafka": kafka, "rest": max(total - kafka, 0)}
            )
            last_jmx, walked = jmx, after
            last_t, last_cpu = time.monotonic(), cpu_ms(pid)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        run_load(cluster, inst, samplers, workdir, rate, seconds)
    finally:
        done.set()
        thread.join(2)
    return samples


# -- the fit ---------------------------------------------------------------------------------
def _linear(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` of ``points`` (a, b); with one x, (mean y, 0)."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return (statistics.fmean(y for _, y in points), 0.0)
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return (my - b * mx, b)


def _two_part(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least-squares ``cpu = fixed * count + per_record * records`` through the origin over
    ``points`` (count, records, cpu), neither part negative: when the free fit makes one
    negative, it is 0 and the other is fitted alone. (0, 0) without points."""
    if not points:
        return (0.0, 0.0)
    sxx = sum(n * n for n, _, _ in points)
    srr = sum(r * r for _, r, _ in points)
    sxr = sum(n * r for n, r, _ in points)
    sxy = sum(n * c for n, _, c in points)
    sry = sum(r * c for _, r, c in points)
    det = sxx * srr - sxr * sxr
    if det > 1e-9 * max(sxx * srr, 1.0):
        fixed = (sxy * srr - sry * sxr) / det
        per_record = (sry * sxx - sxy * sxr) / det
        if fixed >= 0 and per_record >= 0:
            return (fixed, per_record)
    # One part alone: the one that leaves the smaller squared error.
    alone = []
    if sxx > 0:
        c = sxy / sxx
        alone.append((sum((c * n - y) ** 2 for n, _, y in points), max(c, 0.0), 0.0))
    if srr > 0:
        c = sry / srr
        alone.append((sum((c * r - y) ** 2 for _, r, y in points), 0.0, max(c, 0.0)))
    if not alone:
        return (0.0, 0.0)
    _, fixed, per_record = min(alone)
    return (fixed, per_record)


def fit(
    quiet: dict[str, Any],
    loads: list[dict[str, Any]],
    restart: list[dict[str, float]],
    cores: int,
) -> dict[str, Any]:
    """The resource model's parameters from the measurements (see the module docstring).

    Costs are CPU, read off the JVM's own accounts of its threads (ThreadMXBean), medians
    over every load and broker:

    * the request handler threads' CPU, shared among the request kinds in proportion to the
      time each kind spent in them (count times ``LocalTimeMs``), gives each kind's CPU per
      request; Produce's is fitted per request and per record across every load;
    * the network threads' CPU per request read;
    * the replica fetcher threads' CPU per fetch answer (the broker's own FetchFollower count
      stands for the answers it gets back: each follows as many partitions as it leads), and
      the records they bring cost nothing more (measured: per answer it is flat across loads,
      per record it is not);
    * ``background``: what the process spends besides those threads (timers, the collector's
      and the JIT's threads), per second, and how long that work holds a core at a time
      (``burst_ms``: :func:`background_slice_ms`, the median over loads and brokers, where
      the measurement read each thread's time on a core);

    the clients' CPU comes from ``/proc``, fitted across the loads (:func:`_two_part`): the
    producer's per produce request (the brokers' Produce counts) and per record sent, the
    reader's per fetch answer (FetchConsumer) and per record read. Both send about as many
    requests a second at every load, so per request is not told apart from per second here;
    per record is (measured: per record alone, the producer's cost fell from 0.245 ms at
    1,000 records a second to 0.074 at 6,000). A measurement that read the clients' threads
    (``client_threads_ms``, since 2026-12-01's seventeenth session) fits from the threads on
    each path alone, the application's thread (the producer's per record sent, the reader's
    per answer and record) and the producer's Sender (per produce request), and gives the
    rest, less the collections the model books itself, as ``background.client_ms_per_s``:
    the history writer, the JIT and the VM threads, off the records' path. Where the reading
    driver also split its polling thread's CPU inside ``poll()`` and after its non-empty polls
    (``reader_poll_cpu_ms``, since 2026-12-02), the thread's window CPU is split in the same
    proportion: inside is ``client_receive`` (per answer and record), after is
    ``client_after_poll``, fitted per non-empty poll in the window (``reader_polls``, standing
    for the answers with records: a poll can return several answers' records) and record."""
    produce: list[tuple[float, float]] = []
    kinds: dict[str, list[float]] = {}
    network: list[float] = []
    append: list[float] = []
    alloc: list[float] = []
    pauses: list[float] = []
    young: list[float] = []
    producer_cpu: list[tuple[float, float, float]] = []
    reader_cpu: list[tuple[float, float, float]] = []
    after_poll_cpu: list[tuple[float, float, float]] = []
    waiting: list[float] = []
    background: list[float] = []
    slices: list[float] = []
    client_pauses: list[float] = []
    client_young: list[float] = []
    producer_alloc: list[float] = []
    reader_alloc: list[float] = []
    producer_main: list[float] = []
    producer_sender: list[float] = []
    client_background: list[float] = []
    for load in loads:
        window = load["seconds"]
        client = load["client"]
        # Measurements before 2026-11-30's twelfth session have no walk_to_walk_seconds: their
        # process CPU came from the walks too, so one window serves both.
        walk_to_walk = load.get("walk_to_walk_seconds", window)
        records = client["records_in_window"]
        replicated = 2 * records / 3  # each broker follows two of the three partitions
        fetches = sent = 0.0
        for row in load["brokers"].values():
            threads = row.get("threads_ms", {})
            reqs = row["requests"]
            kinds_only = {k: r for k, r in reqs.items() if k != "Fetch" and "LocalTimeMs" in r}
            handled = sum(r["count"] for r in kinds_only.values())
            fetches += reqs.get("FetchConsumer", {}).get("count", 0.0)
            sent += reqs.get("Produce", {}).get("count", 0.0)
            weight = sum(r["count"] * r["LocalTimeMs"] for r in kinds_only.values())
            handler_cpu = threads.get("handler", 0.0)
            for kind, r in kinds_only.items():
                if r["count"] <= 0 or weight <= 0:
                    continue
                per_request = handler_cpu * r["LocalTimeMs"] / weight
                if kind == "Produce":
                    produce.append((row["records_in"] / r["count"], per_request))
                else:
                    kinds.setdefault(kind, []).append(per_request)
            if row["gc"]:
                pauses.extend(g["ms"] for g in row["gc"])
                freed = [g["before"] - g["after"] for g in row["gc"]]
                young.append(statistics.median(freed))
                if row["records_in"] + replicated > 0:
                    alloc.append(sum(freed) / (row["records_in"] + replicated))
            if handled:
                network.append(threads.get("network", 0.0) / handled)
            answers = reqs.get("FetchFollower", {}).get("count", 0.0)
            if answers:
                append.append(threads.get("fetcher", 0.0) / answers)
            kafka = handler_cpu + threads.get("network", 0.0) + threads.get("fetcher", 0.0)
            # The process CPU is between the MBean walks (``window``), the threads' from one
            # walk's end to the next's (Snapshot): each as a rate.
            background.append(max(row["cpu_ms"] / window - kafka / walk_to_walk, 0.0))
        cpu = client["client_cpu_ms"]
        threads = client.get("client_threads_ms", {})
        if {"producer", "reader"} <= threads.keys():
            producer, reader = threads["producer"], threads["reader"]
            if records > 0:
                producer_main.append(producer["main"] / records)
            if sent > 0:
                producer_sender.append(producer["sender"] / sent)
            main = reader["main"]
            split = client.get("reader_poll_cpu_ms", {})
            inside, after = split.get("poll", 0.0), split.get("after_poll", 0.0)
            if inside + after > 0 and client.get("reader_polls", 0) > 0:
                # The polling thread's window CPU split as its whole run's was: inside poll()
                # per answer and record, after the non-empty polls per poll and record.
                share = after / (inside + after)
                after_poll_cpu.append((client["reader_polls"], records, main * share))
                main *= 1.0 - share
            reader_cpu.append((fetches, records, main + reader["sender"]))
            span_s = (client["window_ms"][1] - client["window_ms"][0]) / 1000.0
            for name, groups in threads.items():
                gc_ms = sum(g["ms"] for g in client.get("client_gc", {}).get(name, []))
                # The rest of the process's CPU (which counts threads that ended, where the
                # threads' sum does not: a JVM stops idle JIT compiler threads, so "other"
                # can fall over a window), else the other threads' own sum.
                other = (
                    cpu[name] - groups["main"] - groups["sender"]
                    if name in cpu
                    else groups["other"]
                )
                if span_s > 0:
                    client_background.append(max(other - gc_ms, 0.0) / span_s)
        else:
            if cpu.get("producer", 0.0) > 0:
                producer_cpu.append((sent, records, cpu["producer"]))
            if cpu.get("reader", 0.0) > 0:
                reader_cpu.append((fetches, records, cpu["reader"]))
        for name, collections in client.get("client_gc", {}).items():
            client_pauses.extend(g["ms"] for g in collections)
            freed = [g["before"] - g["after"] for g in collections]
            if freed:
                client_young.append(statistics.median(freed))
            if name == "producer" and records > 0:
                producer_alloc.append(sum(freed) / records)
            if name == "reader" and records > 0:
                reader_alloc.append(sum(freed) / records)
        for row in load["brokers"].values():
            if row.get("background_slice_ms") is not None:
                slices.append(row["background_slice_ms"])
            groups = row.get("sched_groups", {})
            on = sum(groups.get(g, [0.0, 0.0])[0] for g in ("request", "fetcher"))
            wait = sum(groups.get(g, [0.0, 0.0])[1] for g in ("request", "fetcher"))
            if on + wait > 0:
                waiting.append(wait / (on + wait))
    a, b = _linear(produce) if produce else (0.0, 0.0)
    send_fixed, send_per_record = _two_part(producer_cpu)
    if producer_main or producer_sender:
        send_fixed = statistics.median(producer_sender) if producer_sender else 0.0
        send_per_record = statistics.median(producer_main) if producer_main else 0.0
    receive_fixed, receive_per_record = _two_part(reader_cpu)
    after_fixed, after_per_record = _two_part(after_poll_cpu)
    # The restart is followed at the last load's rate: a warm broker's CPU there.
    last = loads[-1] if loads else None
    restart_warm = (
        statistics.median(row["cpu_ms"] / last["seconds"] for row in last["brokers"].values())
        if last
        else 0.0
    )

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    def lognormal(values: list[float]) -> dict[str, float]:
        logs = [math.log(v) for v in values if v > 0]
        return {
            "pause_ms": _r(math.exp(statistics.fmean(logs)) if logs else 0.0),
            "pause_sigma": _r(statistics.pstdev(logs) if len(logs) > 1 else 0.0),
        }

    fetch_kinds = ("FetchConsumer", "FetchFollower")
    other = [v for k, vs in kinds.items() if k not in fetch_kinds for v in vs]
    per_record_mb = median(alloc)
    return {
        "hosts": [{"name": "machine", "cores": cores, "processes": ["*"]}],
        "service": {
            "network": {"fixed_ms": _r(median(network))},
            "produce": {
                "fixed_ms": _r(max(a, 0.0)),
                "per_record_ms": _r(max(b, 0.0)),
                "alloc_per_record_mb": _r(per_record_mb),
            },
            "fetch": {"fixed_ms": _r(median(kinds.get("FetchConsumer", [])))},
            "replica_fetch": {"fixed_ms": _r(median(kinds.get("FetchFollower", [])))},
            "replica_append": {
                "fixed_ms": _r(median(append)),
                "alloc_per_record_mb": _r(per_record_mb),
            },
            "other": {"fixed_ms": _r(median(other))},
            "client_send": {
                "fixed_ms": _r(send_fixed),
                "per_record_ms": _r(send_per_record),
                "alloc_per_record_mb": _r(median(producer_alloc)),
            },
            "client_receive": {
                "fixed_ms": _r(receive_fixed),
                "per_record_ms": _r(receive_per_record),
                "alloc_per_record_mb": _r(median(reader_alloc)),
            },
            **(
                {
                    "client_after_poll": {
                        "fixed_ms": _r(after_fixed),
                        "per_record_ms": _r(after_per_record),
                    }
                }
                if after_poll_cpu
                else {}
            ),
        },
        "gc": {"young_mb": _r(median(young)), **lognormal(pauses)},
        "client_gc": {"young_mb": _r(median(client_young)), **lognormal(client_pauses)},
        "warmup": _warmup_fit(restart, restart_warm),
        "background": {
            "broker_ms_per_s": _r(median(background)),
            "controller_ms_per_s": _r(
                median([load["controller_cpu_ms"] / load["seconds"] for load in loads])
            ),
            **({"client_ms_per_s": _r(median(client_background))} if client_background else {}),
            # Measured where the loads read each thread's time on a core (since the thirteenth
            # session); without it fit_burst fits it to the waiting share (main).
            **({"burst_ms": _r(median(slices))} if slices else {}),
        },
        # Not a resource parameter: what the brokers' request and fetcher threads spent
        # waiting for a core, which fit_burst matches (popped before the preset is written).
        "_waiting": median(waiting),
    }


# The burst lengths (ms) fit_burst tries for the background's CPU.
BURSTS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0)


# The scheduler's wake-up latencies (ms) fit_wakeup tries, with the burst fit_burst found.
WAKEUPS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0)


def fit_burst(params: dict[str, Any], rates: Sequence[float]) -> tuple[float, dict[float, float]]:
    """For a measurement that did not read the background threads' time on a core at a time
    (:func:`background_slice_ms`; those before 2026-11-30's thirteenth session): the
    background's burst length at which the model's brokers wait for a core the share
    of their runnable time the real brokers' request and fetcher threads did (schedstat), on
    the measured loads: the model is run on each (the measurement's shape: three brokers, a
    topic of three partitions, replication factor 3, an idempotent acks=all producer and a
    reader, 15 s) for each of :data:`BURSTS`, without a wake-up latency. The burst with the
    nearest share, and every burst's share. ``params["_waiting"]`` is the real share (left
    in place: the caller pops it)."""

    def with_burst(resources: dict[str, Any], burst: float) -> None:
        resources["background"]["burst_ms"] = burst
        resources.pop("scheduler", None)

    best, figures = _nearest(params, params["_waiting"], BURSTS, with_burst, rates, WAITING)
    return best, {burst: figure[WAITING] for burst, figure in figures.items()}


def request_queue_ms(loads: Sequence[dict[str, Any]]) -> float:
    """Kafka's request queue time over the measured loads: for each load and broker, the mean
    ``RequestQueueTimeMs`` of its Produce and Fetch requests (weighted by their counts), and
    the median of those, as the other costs are medians over loads and brokers (the first
    load after the warm-up is often slow: 0.39 ms against 0.04-0.10 on the machine of
    2026-12-01). With most handler threads idle, it is how long a handler thread takes to
    wake for a request the network thread queued: the scheduler's wake-up latency as Kafka's
    own threads meet it. 0 without any such request."""
    means: list[float] = []
    for load in loads:
        for row in load["brokers"].values():
            total = count = 0.0
            for kind in ("Produce", "Fetch"):
                r = row["requests"].get(kind, {})
                n = r.get("count", 0.0)
                if n > 0 and "RequestQueueTimeMs" in r:
                    total += n * r["RequestQueueTimeMs"]
                    count += n
            if count:
                means.append(total / count)
    return statistics.median(means) if means else 0.0


def fit_wakeup(
    params: dict[str, Any], rates: Sequence[float], queue_ms: float
) -> tuple[float, dict[float, tuple[float, float]]]:
    """The scheduler's wake-up latency (``scheduler.wakeup_ms``) at which the model's brokers,
    with the background's burst already fitted, keep a request in their request queue as
    long as Kafka's did (``queue_ms``, :func:`request_queue_ms`): the model run on the
    measured loads for each of :data:`WAKEUPS`. The latency with the nearest queue time, and
    every latency's (queue time, waiting share).

    Until the sixteenth session the latency was fitted to the brokers' waiting share
    (schedstat) instead. Booking whole pieces of work first-come first-served, the model
    meets that share only by delaying every woken thread far longer than Kafka's handlers
    wait to be woken (0.8 ms on the machine of 2026-12-01, where Kafka's request queue time
    was about 0.1 ms), which put case 5's medians 1.2-1.5 times Kafka's; Linux's
    time-sharing makes its threads wait while they run, not when they wake (docs/model.md,
    departure 16). The share is still computed, for the record."""

    def with_wakeup(resources: dict[str, Any], wakeup: float) -> None:
        resources["scheduler"] = {"wakeup_ms": wakeup}

    return _nearest(params, queue_ms, WAKEUPS, with_wakeup, rates, QUEUE)


# Which of :func:`_model_figures`' figures a fit matches.
QUEUE, WAITING = 0, 1


def _nearest(
    params: dict[str, Any],
    target: float,
    grid: Sequence[float],
    setting: Callable[[dict[str, Any], float], None],
    rates: Sequence[float],
    figure: int,
) -> tuple[float, dict[float, tuple[float, float]]]:
    """For each value of ``grid``, the model's figures (:func:`_model_figures`) with a copy of
    ``params`` that ``setting`` gave the value; the value whose ``figure`` (:data:`QUEUE` or
    :data:`WAITING`) is nearest ``target``, and every value's figures."""
    figures: dict[float, tuple[float, float]] = {}
    for value in grid:
        resources = json.loads(json.dumps(params))
        resources.pop("_waiting", None)
        setting(resources, value)
        figures[value] = _model_figures(resources, rates)
    best = min(grid, key=lambda v: abs(figures[v][figure] - target))
    return best, figures


def _model_figures(resources: dict[str, Any], rates: Sequence[float]) -> tuple[float, float]:
    """The model's brokers over ``rates`` (the measurement's shape, seed 1): their requests'
    mean time in the request queue (ms, as :func:`request_queue_ms` reads Kafka's), and the
    share of their runnable time they wait for a core."""
    from eosim.simulation.runner import Run

    waited = worked = queued = 0.0
    requests = 0
    for rate in rates:
        run = Run(_measure_scenario(rate, resources), 1, False)
        run.run_workload()
        assert run.machines is not None
        for name, jvm in run.machines.jvms.items():
            if name.startswith("broker-"):
                waited += jvm.waited_ms
                worked += jvm.worked_ms
                queued += jvm.queued_ms
                requests += jvm.requests
    share = waited / (waited + worked) if waited + worked > 0 else 0.0
    return (queued / requests if requests else 0.0), share


def _measure_scenario(rate: float, resources: dict[str, Any]) -> Any:
    from eosim.simulation.scenario import parse_scenario

    text = yaml.safe_dump(
        {
            "name": "measure",
            "cluster": {
                "brokers": 3,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": 3,
                        "replication_factor": 3,
                        "config": {"min.insync.replicas": 2},
                    }
                ],
                "resources": resources,
            },
            "producers": [
                {
                    "name": "producer-0",
                    "config": {"acks": "all", "enable.idempotence": True},
                    "workload": {
                        "topic": TOPIC,
                        "records": int(rate * 15),
                        "rate": rate,
                        "keys": 300,
                    },
                }
            ],
            "consumers": [{"name": "reader", "topic": TOPIC, "isolation": "read_uncommitted"}],
        }
    )
    return parse_scenario(text, "measure.yaml")


def _warmup_fit(samples: list[dict[str, float]], warm_ms_per_s: float) -> dict[str, float]:
    """A restarted broker's warm-up, from its CPU per second under a steady load (``samples``)
    against a warm broker's at the same load (``warm_ms_per_s``, the loads' median).

    What a restarted broker spends above a warm one (the JIT compiling, the collector, and its
    request threads while code is still interpreted) is modelled as extra background that
    starts at ``background_ms_per_s`` and decays with time constant ``seconds``, fitted
    log-linearly on the excess. The work's own slowdown (``factor``) is not separable here: the
    restarted broker changes role while it is followed (a follower until it is back in the ISR
    and made preferred leader again), so its request threads' CPU does not measure a fixed
    amount of work. It stays 1 and the whole excess is background (docs/calibration.md)."""
    start, end = LEAD_S + 1.0, LEAD_S + RESTART_S - 1.0
    window = [s for s in samples if start <= s["t"] <= end]
    if len(window) < 3 or warm_ms_per_s <= 0:
        return {"factor": 1.0, "seconds": 1.0, "background_ms_per_s": 0.0}
    excess = [(s["t"] - LEAD_S, s["cpu"] - warm_ms_per_s) for s in window]
    span = end - start
    points = [(t, math.log(e)) for t, e in excess if e > 0.05 * warm_ms_per_s]
    tau = span
    if len(points) >= 3:
        _, b = _linear(points)
        if b < 0:
            tau = min(-1.0 / b, span)
    # The start value that gives the excess's mean over the window for that time constant:
    # mean = A * tau * (exp(-t0/tau) - exp(-t1/tau)) / span.
    t0, t1 = start - LEAD_S, end - LEAD_S
    mean = max(statistics.fmean(e for _, e in excess), 0.0)
    shape = tau * (math.exp(-t0 / tau) - math.exp(-t1 / tau)) / span
    # The model runs a process's background one burst at a time, on one core: at most a core's
    # worth, whatever the JIT's several compiler threads took at the start.
    start_ms = min(mean / shape if shape > 0 else 0.0, 1000.0)
    return {"factor": 1.0, "seconds": _r(tau), "background_ms_per_s": _r(start_ms)}


def _r(x: float) -> float:
    return float(f"{x:.4g}")


# -- the command -----------------------------------------------------------------------------
def calibration_cluster(inst: KafkaInstall, folder: Path) -> RealCluster:
    """Calibration's cluster, not started: a controller and :data:`BROKERS`, each in its
    network namespace, on this machine's cores."""
    return RealCluster(
        inst.libs,
        folder,
        len(BROKERS),
        admin=ActionTopicAdmin(partial(clients.admin, inst)),
        java=str(inst.java),
    )


def measure(
    inst: KafkaInstall, loads: list[float], seconds: float, workdir: Path
) -> dict[str, Any]:
    with calibration_cluster(inst, workdir / "cluster") as cluster:
        warmth = warm_up(cluster, inst, workdir, False, MEASURE_WARMUP_S)
        print(
            f"warm-up    {warmth.seconds:g} s"
            + ("" if warmth.settled else f" (not settled: {warmth.describe()})"),
            file=sys.stderr,
        )
        cluster.recreate_topics(
            [
                {
                    "name": TOPIC,
                    "partitions": 3,
                    "replication_factor": 3,
                    "config": {"min.insync.replicas": "2"},
                }
            ]
        )
        samplers = Samplers(cluster, inst, workdir)
        try:
            samplers.snapshot()  # the brokers' management agents up and warm
            time.sleep(10.0)
            print("idle       10 s", file=sys.stderr)
            quiet = idle(cluster, samplers, 10.0)
            measured = []
            for i, rate in enumerate(loads):
                print(f"load       {rate:g} records/s for {seconds:g} s", file=sys.stderr)
                measured.append(
                    run_load(cluster, inst, samplers, workdir / f"load-{i}", rate, seconds)
                )
            print("restart    broker-2, following its warm-up", file=sys.stderr)
            restart = follow_restart(
                cluster, inst, samplers, workdir / "restart", loads[-1], RESTART_S
            )
        finally:
            samplers.close()
    return {
        "warmth": dataclasses.asdict(warmth),
        "idle": quiet,
        "loads": measured,
        "restart": restart,
    }


def summary(data: dict[str, Any]) -> str:
    """The measurements as a Markdown table, the brokers' figures averaged (docs/calibration.md
    shows it), and the fitted parameters."""

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else float("nan")

    lines = [
        "| records/s | produce p50 / p99 | ack to first read p50 / p99 | broker CPU | waiting "
        "for a core | request queue | Produce local | FetchFollower local | young GCs "
        "(median pause) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for load in data["loads"]:
        c = load["client"]
        rows = list(load["brokers"].values())
        secs = load["seconds"]
        cpu = mean([r["cpu_ms"] / secs / 10 for r in rows])  # % of a core
        waiting = mean([r["wait_ms"] / (r["cpu_ms"] + r["wait_ms"]) * 100 for r in rows])
        produce = mean([r["requests"].get("Produce", {}).get("LocalTimeMs", 0.0) for r in rows])
        follower = mean(
            [r["requests"].get("FetchFollower", {}).get("LocalTimeMs", 0.0) for r in rows]
        )
        queue = request_queue_ms([load])
        pauses = [g["ms"] for r in rows for g in r["gc"]]
        gc = f"{len(pauses)} ({statistics.median(pauses):.0f} ms)" if pauses else "0"
        lines.append(
            f"| {c['rate']:,.0f} | {c['produce_p50_ms']:.2f} / {c['produce_p99_ms']:.1f} ms "
            f"| {c['read_after_ack_p50_ms']:.2f} / {c['read_after_ack_p99_ms']:.1f} ms "
            f"| {cpu:.0f}% of a core | {waiting:.0f}% of runnable time | {queue:.3f} ms "
            f"| {produce:.2f} ms "
            f"| {follower:.2f} ms | {gc} |"
        )
    lines += ["", "```yaml", yaml.safe_dump({"resources": data["fit"]}, sort_keys=False).rstrip()]
    lines.append("```")
    return "\n".join(lines) + "\n"


# Costs the measurement's loads (a plain producer and a reader) cannot fit: kept from the preset
# being replaced, with where they came from (its header says). Service costs, and whole blocks
# (a broker's start: benchmarks/real_startup_cpu.py).
NOT_MEASURED = ("transaction",)
NOT_MEASURED_BLOCKS = ("startup",)


def keep_unmeasured(params: dict[str, Any], previous: dict[str, Any] | None) -> list[str]:
    """Carry the previous preset's (its ``resources`` block, :func:`load_preset`)
    :data:`NOT_MEASURED` service costs and :data:`NOT_MEASURED_BLOCKS` into ``params``; the
    keys carried over (``service.transaction``, ``startup``)."""
    kept: list[str] = []
    previous = previous or {}
    old = previous.get("service") or {}
    for kind in NOT_MEASURED:
        if kind not in params["service"] and kind in old:
            params["service"][kind] = old[kind]
            kept.append(f"service.{kind}")
    for block in NOT_MEASURED_BLOCKS:
        if block not in params and block in previous:
            params[block] = previous[block]
            kept.append(block)
    return kept


def write_preset(
    name: str, params: dict[str, Any], header: str, machine: dict[str, Any] | None = None
) -> Path:
    """The preset file: ``header``, the machine it was measured on (``machine``, read by
    ``eosim calibrate``, not by the model) and the ``resources`` block."""
    folder = Path(__file__).resolve().parent.parent / "simulation" / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    document: dict[str, Any] = {"machine": machine} if machine else {}
    document["resources"] = params
    body = yaml.safe_dump(document, sort_keys=False)
    path.write_text(header + body, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--loads",
        default="3000,1000,6000,2000",
        help="Records/s, comma-separated, in the order run (not monotone: a JIT still warming "
        "would otherwise pass for a cost that falls with the load).",
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="Seconds per load.")
    parser.add_argument("--out", default="results/measure", help="Where measure.json goes.")
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="The preset's name.")
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument(
        "--refit", action="store_true", help="Fit again from OUT/measure.json, measuring nothing."
    )
    args = parser.parse_args(argv)
    try:
        loads = [float(x) for x in args.loads.split(",")]
    except ValueError:
        print(f"eosim-measure: --loads {args.loads}: not numbers", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.refit:
        try:
            data = json.loads((out / "measure.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"eosim-measure: --refit: {out / 'measure.json'}: {exc}", file=sys.stderr)
            return 2
        version = data.get("kafka_version", args.kafka_version)
    else:
        out.mkdir(parents=True, exist_ok=True)
        inst = install(args.kafka_version)
        version = inst.version
        from eosim.real.machine import fingerprint

        machine = fingerprint()  # before the cluster starts: the probes on an idle machine
        data = measure(inst, loads, args.seconds, out / "work")
        data["kafka_version"] = version
        data["loads_asked"] = loads
        data["machine"] = machine
        # The measurement first, so that a fit that fails can be run again with --refit.
        (out / "measure.json").write_text(json.dumps(data, indent=1) + "\n")
    cores = os.cpu_count() or 1
    params = fit(data["idle"], data["loads"], data["restart"], cores)
    data["waiting_for_a_core"] = params["_waiting"]
    data["request_queue_ms"] = request_queue_ms(data["loads"])
    rates = data.get("loads_asked", loads)
    if "burst_ms" not in params["background"]:  # a measurement without the threads' slices
        burst, shares = fit_burst(params, rates)
        params["background"]["burst_ms"] = burst
        data["burst_fit"] = {str(b): share for b, share in shares.items()}
    params.pop("_waiting")
    wakeup, figures = fit_wakeup(params, rates, data["request_queue_ms"])
    params["scheduler"] = {"wakeup_ms": wakeup}
    data["wakeup_fit"] = {
        str(w): {"queue_ms": q, "waiting": share} for w, (q, share) in figures.items()
    }
    data["fit"] = params
    (out / "measure.json").write_text(json.dumps(data, indent=1) + "\n")
    header = (
        f"# Fitted by `python -m eosim.analysis.measure --loads {args.loads} --seconds "
        f"{args.seconds:g}` on {time.strftime('%Y-%m-%d')}: Kafka {version}, {cores} "
        "cores,\n# a controller, three brokers and the clients on this machine "
        '(docs/calibration.md, "The resource model, fitted").\n'
    )
    previous = load_preset(args.preset) if args.preset in preset_names() else None
    for key in keep_unmeasured(params, previous):
        header += f"# {key}: not measured by these loads, kept from the preset replaced.\n"
    path = write_preset(args.preset, params, header, data.get("machine"))
    (out / "measure.md").write_text(summary(data))
    print(summary(data))
    print(f"measured   {out / 'measure.json'}")
    print(f"preset     {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
