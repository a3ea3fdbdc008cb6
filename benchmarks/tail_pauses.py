"""Kafka's replication-lag tail beside every JVM's pauses: which process stopped while a record
waited between its acknowledgement and its first read (calibration case 5 with acks=1,
docs/calibration.md, "Kafka's acks=1 tail and the JVMs' pauses").

    python benchmarks/tail_pauses.py run --out DIR [--runs 5] [--set PATH=VALUE ...]
    python benchmarks/tail_pauses.py analyse DIR [--tail-ms 10] [--min-pause-ms 1] [--shifts 200]

``run`` runs case 5 (scenarios/calibration/steady-timing.yaml with acks=1 and no idempotence,
unless ``--set`` says otherwise) ``--runs`` times, seeds 1, 2, ..., on a local Kafka cluster
kept in ``DIR``: each run's history (``run-NNNNN/history.jsonl``), its clients' GC logs and
the brokers' and controller's (``cluster-0/NODE/gc-PID.log``). Every JVM logs each safepoint
with ``System.nanoTime()`` (real/install.py, ``gc_log_flag``), the histories' clock.

``analyse`` reads them back. Every safepoint is a pause of its JVM from its end less its total
(reaching the safepoint included). A record is in the tail when its ack to first read is at
least ``--tail-ms``; a tail record's wait is the span from its acknowledgement to its first
read, and a process *overlaps* it when one of its pauses of at least ``--min-pause-ms`` meets
that span. The processes are grouped by role: the reader, the producer, the broker leading the
record's partition (its ``log`` line), the other brokers, the controller. For each role it
prints the share of tail records and of tail episodes (tail records read by one poll) that
it overlaps, beside the share expected by chance: the same spans moved to ``--shifts`` random
times of the run's workload (a seeded draw), so a role whose pauses are frequent gets no
credit for being everywhere. Then each role's pauses over the workloads: how many, their
median, 99th percentile and longest, and their time per second. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios/calibration/steady-timing.yaml"
CASE5_ACKS1 = ("producers.0.config.acks=1", "producers.0.config.enable.idempotence=false")
ROLES = ("reader", "producer", "leader", "follower", "controller", "any")
# A safepoint line: the monotonic clock at its end (timenanos), its name and its total time.
SAFEPOINT = re.compile(
    r"\[(?P<ns>\d+)ns\]\[info\s*\]\[safepoint\s*\] Safepoint \"(?P<name>[^\"]+)\".*"
    r"Total: (?P<total>\d+) ns"
)


class TailError(ValueError):
    """A folder that is not what ``run`` keeps; one line."""


@dataclass(frozen=True)
class Pause:
    """One stop of a JVM, in ms since a run's epoch."""

    start: float
    end: float
    name: str

    @property
    def ms(self) -> float:
        return self.end - self.start


def safepoints(path: Path, epoch_ns: int) -> list[Pause]:
    """Every safepoint in the GC log ``path``, in ms since ``epoch_ns`` (monotonic). A log
    written before its lines carried ``timenanos`` gives none."""
    out = []
    with path.open(errors="replace") as lines:
        for line in lines:
            m = SAFEPOINT.search(line)
            if m:
                end = (int(m["ns"]) - epoch_ns) / 1e6
                out.append(Pause(end - int(m["total"]) / 1e6, end, m["name"]))
    return out


def epoch_ns(run_dir: Path) -> int:
    """The run's epoch on the monotonic clock, from a driver's spec."""
    for spec in sorted(run_dir.glob("*.spec.json")):
        value = json.loads(spec.read_text()).get("epoch_monotonic_ns")
        if value is not None:
            return int(value)
    raise TailError(f"{run_dir}: no spec with epoch_monotonic_ns (not a kept real run)")


@dataclass(frozen=True)
class TailRecord:
    partition: tuple[str, int]
    acked: float
    read: float
    poll: int  # the index of the poll that first read it


def acked_reads(history: object) -> list[TailRecord]:
    """Each acknowledged record a consumer (not the drain) read: its partition, its
    acknowledgement, its first read, and that poll's index."""
    from eosim.analysis.timings import DRAIN_PROCESS

    first: dict[tuple[str, str], tuple[float, int, tuple[str, int]]] = {}
    for i, poll in enumerate(history.polls):  # type: ignore[attr-defined]
        if poll.process.startswith(DRAIN_PROCESS):
            continue
        for r in poll.records:
            key = (r.topic, r.value)
            if key not in first or poll.time < first[key][0]:
                first[key] = (poll.time, i, (r.topic, r.partition))
    out = []
    for send in history.sends:  # type: ignore[attr-defined]
        if send.outcome != "ok" or send.complete_time is None:
            continue
        hit = first.get((send.topic, send.value))
        if hit is not None:
            out.append(TailRecord(hit[2], send.complete_time, hit[0], hit[1]))
    return out


def role_pauses(root: Path, run_dir: Path, epoch: int) -> dict[str, list[Pause]]:
    """Each process's pauses (by name: the clients, each broker, the controller)."""
    out: dict[str, list[Pause]] = {}
    for log in sorted(run_dir.glob("*.gc.log")):
        name = log.name.split(".", 1)[0]
        out.setdefault(name, []).extend(safepoints(log, epoch))
    for cluster in sorted(root.glob("cluster-*")):
        for node in sorted(p for p in cluster.iterdir() if p.is_dir()):
            for log in sorted(node.glob("gc-*.log")):
                out.setdefault(node.name, []).extend(safepoints(log, epoch))
    for pauses in out.values():
        pauses.sort(key=lambda p: p.start)
    return out


def _role(process: str, leader: str | None) -> str:
    if process == leader:
        return "leader"
    if process.startswith("broker"):
        return "follower"
    if process.startswith("controller"):
        return "controller"
    if process.startswith("producer"):
        return "producer"
    return "reader"


def _meets(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each span [lo, hi]: does one of the sorted pauses [starts, ends] meet it?"""
    if starts.size == 0:
        return np.zeros(lo.shape, dtype=bool)
    # The first pause ending at or after lo; it meets the span when it starts by hi (pauses of
    # one JVM do not overlap, so ends are sorted with starts).
    i = np.searchsorted(ends, lo, side="left")
    ok = i < starts.size
    j = np.minimum(i, starts.size - 1)
    return ok & (starts[j] <= hi)


@dataclass
class RunAnalysis:
    """One kept run read back: its tail records and episodes, how many of each a pause of
    each role met (and would by chance), each role's pauses (ms), the workload's span (s)."""

    tail: int
    episodes: int
    records: int
    hit: dict[str, int]
    hit_episodes: dict[str, int]
    chance: dict[str, float]
    pauses: dict[str, list[float]]
    span_s: float
    widths: dict[int, int]  # tail episodes by how many partitions lag in them
    other: OtherCpu | None = None  # other processes' CPU over the workload (cpu.jsonl)


def analyse_run(
    root: Path,
    run_dir: Path,
    tail_ms: float,
    min_pause_ms: float,
    shifts: int,
    rng: np.random.Generator,
    from_ms: float = 0.0,
) -> RunAnalysis:
    from eosim.analysis.history import load_history

    path = run_dir / "history.jsonl"
    history = load_history(path if path.exists() else root / "history.jsonl")
    epoch = epoch_ns(run_dir)
    start = min(s.invoke_time for s in history.sends)
    reads = [r for r in acked_reads(history) if r.acked >= start + from_ms]
    if not reads:
        raise TailError(f"{run_dir}: no record acknowledged past {from_ms:g} ms was read")
    by_process = role_pauses(root, run_dir, epoch)
    lo_run, hi_run = min(r.acked for r in reads), max(r.read for r in reads)
    tail = [r for r in reads if r.read - r.acked >= tail_ms]
    lo = np.array([r.acked for r in tail])
    hi = np.array([r.read for r in tail])
    hit = {role: np.zeros(len(tail), dtype=bool) for role in ROLES}
    chance = {role: 0.0 for role in ROLES}
    moved_any = np.zeros((shifts, len(tail)), dtype=bool)
    # Each tail span moved to a random time of the workload, ``shifts`` times (one draw for
    # every process, so a moved span meets each process's pauses at the same times).
    moved_lo = rng.uniform(lo_run, hi_run, size=(shifts, len(tail)))
    moved_hi = moved_lo + (hi - lo)[None, :]
    pauses_by_role: dict[str, list[float]] = {role: [] for role in ROLES}
    for process, pauses in sorted(by_process.items()):
        long = [p for p in pauses if p.ms >= min_pause_ms]
        starts = np.array([p.start for p in long])
        ends = np.array([p.end for p in long])
        inside = [p.ms for p in pauses if lo_run <= p.start <= hi_run]
        roles = np.array([_role(process, history.leaders.get(r.partition)) for r in tail])
        met = _meets(starts, ends, lo, hi)
        moved = _meets(starts, ends, moved_lo, moved_hi)
        for role in ROLES[:-1]:
            mask = roles == role
            hit[role] |= met & mask
            if shifts:
                chance[role] += float((moved & mask[None, :]).sum()) / shifts
        moved_any |= moved
        role = _role(process, None) if not process.startswith("broker") else "broker"
        pauses_by_role.setdefault(role, []).extend(inside)
    hit["any"] = np.logical_or.reduce([hit[r] for r in ROLES[:-1]])
    chance["any"] = float(moved_any.sum()) / shifts if shifts else 0.0
    polls = np.array([r.poll for r in tail])
    lagging: dict[int, set[tuple[str, int]]] = {}
    for r in tail:
        lagging.setdefault(r.poll, set()).add(r.partition)
    widths = Counter(len(parts) for parts in lagging.values())
    hit_episodes = {
        role: int(np.unique(polls[hit[role]]).size) if len(tail) else 0 for role in ROLES
    }
    return RunAnalysis(
        tail=len(tail),
        episodes=len(lagging),
        records=len(reads),
        hit={role: int(hit[role].sum()) for role in ROLES},
        hit_episodes=hit_episodes,
        chance=chance,
        pauses={k: v for k, v in pauses_by_role.items() if v},
        widths=dict(widths),
        other=other_cpu(run_dir, epoch, lo_run, hi_run),
        span_s=(hi_run - lo_run) / 1000.0,
    )


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def report(
    analyses: Sequence[tuple[str, RunAnalysis]], tail_ms: float, from_ms: float = 0.0
) -> list[str]:
    out = [
        f"runs {len(analyses)}, records acknowledged past {from_ms:g} ms;"
        f" tail: ack to first read >= {tail_ms:g} ms",
        "run  records  tail  (share)  episodes  (met by a pause)  CPU in ms/s: Kafka's nodes'"
        " JIT, all of Kafka's nodes, the clients; other processes: mean, busiest 0.5 s",
    ]
    for name, a in analyses:
        other = (
            "not sampled"
            if a.other is None
            else f"{a.other.jit('broker') + a.other.jit('controller'):.0f}, "
            f"{a.other.jvm_total('broker') + a.other.jvm_total('controller'):.0f}, "
            f"{a.other.jvm_total('producer') + a.other.jvm_total('reader'):.0f}; "
            f"{a.other.mean:.0f}, {a.other.peak:.0f} ({a.other.peak_top})"
        )
        met = _pct(a.hit_episodes["any"], a.episodes)
        out.append(
            f"{name}  {a.records}  {a.tail}  {_pct(a.tail, a.records)}  {a.episodes}  ({met})"
            f"  {other}"
        )
    tail = sum(a.tail for _, a in analyses)
    episodes = sum(a.episodes for _, a in analyses)
    widths = Counter[int]()
    for _, a in analyses:
        widths.update(a.widths)
    out.append(
        "tail episodes by partitions lagging in them: "
        + ", ".join(f"{n}: {widths[n]}" for n in sorted(widths))
    )
    out.append("")
    out.append("role        tail records overlapped  by chance   tail episodes overlapped")
    for role in ROLES:
        hit = sum(a.hit[role] for _, a in analyses)
        chance = sum(a.chance[role] for _, a in analyses)
        hit_e = sum(a.hit_episodes[role] for _, a in analyses)
        out.append(
            f"{role:<10}  {hit:6d} {_pct(hit, tail)}            {_pct(chance, tail)}"
            f"      {hit_e:5d} {_pct(hit_e, episodes)}"
        )
    sampled = [a.other for _, a in analyses if a.other is not None and a.other.jvm]
    if sampled:
        out.append("")
        groups = ("jit", "gc", "request", "fetcher", "other")
        out.append("JVM         CPU ms/s  " + "  ".join(f"{g:>7}" for g in groups))
        for jvm in sorted({n for o in sampled for n in o.jvm}):
            per = [o.jvm.get(jvm, {}) for o in sampled]
            mean = {g: sum(p.get(g, 0.0) for p in per) / len(per) for g in groups}
            out.append(
                f"{jvm:<10}  {sum(mean.values()):8.0f}  "
                + "  ".join(f"{mean[g]:7.1f}" for g in groups)
            )
    out.append("")
    out.append("process     pauses  p50 ms  p99 ms  max ms  ms/s (over the workloads)")
    span = sum(a.span_s for _, a in analyses)
    roles = sorted({r for _, a in analyses for r in a.pauses})
    for role in roles:
        ms = np.array([m for _, a in analyses for m in a.pauses.get(role, [])])
        p50, p99 = np.quantile(ms, [0.5, 0.99])
        out.append(
            f"{role:<10}  {ms.size:6d}  {p50:6.2f}  {p99:6.2f}  {ms.max():6.2f}  "
            f"{ms.sum() / span:6.2f}"
        )
    return out


def analyse(
    root: Path, tail_ms: float, min_pause_ms: float, shifts: int, from_ms: float = 1000.0
) -> list[str]:
    runs = sorted(p for p in root.glob("run-*") if (p / "history.jsonl").exists())
    if not runs and (root / "history.jsonl").exists():  # a trace (replication_path.py run)
        runs = sorted(p for p in root.glob("run-*") if p.is_dir())[:1]
    if not runs:
        raise TailError(f"{root}: no run-*/history.jsonl (made by `tail_pauses.py run`)")
    rng = np.random.default_rng(20261202)
    analyses = [
        (r.name, analyse_run(root, r, tail_ms, min_pause_ms, shifts, rng, from_ms)) for r in runs
    ]
    return report(analyses, tail_ms, from_ms)


# How often the CPU of every process is read during a run, and how many of the busiest other
# processes each sample names.
SAMPLE_S = 0.5
TOP = 3


def _stat(path: Path) -> tuple[str, int] | None:
    """A process's or thread's name and CPU (user and system, in clock ticks) so far, from
    its ``stat`` file (None: gone since it was listed)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return text[text.index("(") + 1 : text.rindex(")")], int(fields[11]) + int(fields[12])


def _cpu_ticks() -> dict[int, tuple[str, int]]:
    """Each process's name and CPU (clock ticks) so far."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        if (found := _stat(stat)) is not None:
            out[int(stat.parent.name)] = found
    return out


# Each JVM's threads by group, from the first characters of their names (Linux keeps 15).
THREAD_GROUPS = (
    ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread", "VM Thread", "G1 ", "VM Periodic")),
    ("request", ("data-plane-kafk",)),
    ("fetcher", ("ReplicaFetcherT",)),
)


def _jvm_name(pid: int) -> str:
    """A JVM by its role: the node a Kafka process serves (its config's folder) or the spec a
    driver runs (``producer-0.0``, ``reader.0``, ``warmup``, ``drain``)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return f"java-{pid}"
    args = [a for a in args if a]
    if "kafka.Kafka" in args and args[-1].endswith(".properties"):
        return Path(args[-1]).parent.name
    if args and args[-1].endswith(".spec.json"):
        return Path(args[-1]).name.removesuffix(".spec.json")
    return f"java-{pid}"


def _thread_ticks(pid: int) -> dict[str, int]:
    """JVM ``pid``'s CPU so far (clock ticks) by thread group (``THREAD_GROUPS``, else
    ``other``); threads that exited took theirs with them."""
    out: dict[str, int] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        if (found := _stat(task / "stat")) is None:
            continue
        comm, ticks = found
        group = next((g for g, names in THREAD_GROUPS if comm.startswith(names)), "other")
        out[group] = out.get(group, 0) + ticks
    return out


class CpuSampler(threading.Thread):
    """Every ``SAMPLE_S`` during a run, the CPU each kind of process took since the last
    sample: the JVMs (Kafka's and the clients'), this script (the harness), and every other
    process (kernel threads included), with the busiest of those by name; and each JVM's by
    its role and thread group (``jvm``: the JIT, the collector, Kafka's request threads, its
    replica fetchers, the rest). Written to ``cpu.jsonl`` (times on the monotonic clock), so
    a tail can be set beside other work on the machine (a real run is only a measurement of
    Kafka if nothing else competed for the cores) and beside Kafka's own."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.stop = threading.Event()
        self.tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        self.names: dict[int, str] = {}

    def _jvms(self, procs: dict[int, tuple[str, int]]) -> dict[tuple[str, str], int]:
        out = {}
        for pid, (comm, _) in procs.items():
            if comm != "java":
                continue
            name = self.names.get(pid) or self.names.setdefault(pid, _jvm_name(pid))
            for group, ticks in _thread_ticks(pid).items():
                out[(f"{name}#{pid}", group)] = ticks
        return out

    def run(self) -> None:
        own = os.getpid()
        before = _cpu_ticks()
        threads_before = self._jvms(before)
        with self.path.open("w") as out:
            while not self.stop.wait(SAMPLE_S):
                now, at = _cpu_ticks(), time.monotonic_ns()
                threads = self._jvms(now)
                sums = {"java": 0.0, "harness": 0.0, "other": 0.0}
                others: Counter[str] = Counter()
                for pid, (comm, ticks) in now.items():
                    ms = (ticks - before.get(pid, (comm, 0))[1]) * self.tick_ms
                    if ms <= 0:
                        continue
                    kind = "harness" if pid == own else "java" if comm == "java" else "other"
                    sums[kind] += ms
                    if kind == "other":
                        others[comm] += ms
                jvm: dict[str, dict[str, float]] = {}
                for (name, group), ticks in sorted(threads.items()):
                    ms = (ticks - threads_before.get((name, group), 0)) * self.tick_ms
                    if ms > 0:
                        groups = jvm.setdefault(name.split("#")[0], {})
                        groups[group] = groups.get(group, 0.0) + ms
                before, threads_before = now, threads
                top = [[c, round(ms, 1)] for c, ms in others.most_common(TOP)]
                out.write(json.dumps({"ns": at, **sums, "top": top, "jvm": jvm}) + "\n")
                out.flush()


@dataclass(frozen=True)
class OtherCpu:
    """The CPU other processes took over a run's workload: ms per second on average, and the
    busiest sample's ms per second with its processes; and each JVM's, by thread group, in ms
    per second (empty from a sample made before it was recorded)."""

    mean: float
    peak: float
    peak_top: str
    jvm: dict[str, dict[str, float]]

    def jvm_total(self, prefix: str) -> float:
        return sum(sum(g.values()) for n, g in self.jvm.items() if n.startswith(prefix))

    def jit(self, prefix: str) -> float:
        return sum(g.get("jit", 0.0) for n, g in self.jvm.items() if n.startswith(prefix))


def other_cpu(run_dir: Path, epoch: int, lo: float, hi: float) -> OtherCpu | None:
    """What ``cpu.jsonl`` says of the span [lo, hi] (ms since the epoch); None without it."""
    path = run_dir / "cpu.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    inside = [r for r in rows if lo <= (r["ns"] - epoch) / 1e6 <= hi + SAMPLE_S * 1000]
    if not inside:
        return None
    peak = max(inside, key=lambda r: r["other"])
    top = ", ".join(f"{c} {ms:g}" for c, ms in peak["top"])
    seconds = len(inside) * SAMPLE_S
    jvm: dict[str, dict[str, float]] = {}
    for r in inside:
        for name, groups in r.get("jvm", {}).items():
            mine = jvm.setdefault(name, {})
            for group, ms in groups.items():
                mine[group] = mine.get(group, 0.0) + ms / seconds
    return OtherCpu(
        mean=sum(r["other"] for r in inside) / seconds,
        peak=peak["other"] / SAMPLE_S,
        peak_top=top,
        jvm=jvm,
    )


def run(out: Path, runs: int, overrides: Iterable[str]) -> int:
    from eosim.api import kafka_install, write_history
    from eosim.real.target import KafkaTarget
    from eosim.simulation.scenario import load_scenario

    scenario = load_scenario(SCENARIO, [*CASE5_ACKS1, *overrides])
    out.mkdir(parents=True, exist_ok=True)
    install = kafka_install(None, None)
    with KafkaTarget(install, out, keep=True) as target:
        for seed in range(1, runs + 1):
            folder = out / f"run-{target.runs + 1:05d}"
            folder.mkdir(parents=True, exist_ok=True)
            sampler = CpuSampler(folder / "cpu.jsonl")
            sampler.start()
            try:
                result = target.run(scenario, seed)
            finally:
                sampler.stop.set()
                sampler.join()
            write_history(result, folder / "history.jsonl")
            print(f"{folder.name}: seed {seed}, invalid: {result.invalid or 'no'}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--set", dest="overrides", action="append", default=[])
    a = sub.add_parser("analyse")
    a.add_argument("folder", type=Path)
    a.add_argument("--tail-ms", type=float, default=10.0)
    a.add_argument("--min-pause-ms", type=float, default=1.0)
    a.add_argument("--shifts", type=int, default=200)
    a.add_argument("--from-ms", type=float, default=1000.0)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.out, args.runs, args.overrides)
    try:
        lines = analyse(args.folder, args.tail_ms, args.min_pause_ms, args.shifts, args.from_ms)
    except TailError as exc:
        print(f"tail_pauses: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
