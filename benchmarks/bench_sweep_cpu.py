"""Where a sweep's CPU goes, per process: the driver's Python, the JVM, the Python workers.

    python benchmarks/bench_sweep_cpu.py [--runs 1000] [--modes serial,local2] [--partitions N]

CPU seconds (user + system, from /proc) hardly depend on what else runs on the machine, so this
says where time goes even on a loaded VM, where wall times do not. For each mode, in its own
process: Spark is started (not counted), then the whole ``run_sweep`` of
``benchmarks/sweep.yaml`` is counted: the driver process's CPU, the JVM's (in local mode it
is also the executor), and that of every Python worker process under the JVM; with the
wall time. ``serial`` runs the chunks in the driver (``in_process=True``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "benchmarks" / "sweep.yaml")
MASTERS = {"serial": "local[2]", "local1": "local[1]", "local2": "local[2]"}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system seconds of process ``pid`` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def snapshot(jvm: int) -> dict[int, float]:
    return {p: cpu_s(p) for p in [jvm, *descendants(jvm)]}


def one_mode(mode: str, runs: int, partitions: int | None) -> dict:
    from eosim.analysis.sweep import engine, run_sweep
    from eosim.analysis.sweep.plan import default_chunk_runs

    spark, _ = engine.start_session(MASTERS[mode], "eosim-bench-cpu")
    jvm = spark._jvm.java.lang.ProcessHandle.current().pid()
    out = Path(tempfile.mkdtemp()) / "sweep"
    before, own_before = snapshot(jvm), resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    result = run_sweep(
        SCENARIO,
        runs,
        seed=1,
        out=out,
        quiet=True,
        spark=spark,  # unused by an in-process sweep of this version; older ones aggregated on it
        chunk_runs=default_chunk_runs(runs),
        in_process=mode == "serial",
        partitions=partitions,
    )
    wall = time.perf_counter() - start
    after, own_after = snapshot(jvm), resource.getrusage(resource.RUSAGE_SELF)
    spark.stop()
    shutil.rmtree(out.parent, ignore_errors=True)
    workers = sum(after[p] - before.get(p, 0.0) for p in after if p != jvm)
    own = (own_after.ru_utime + own_after.ru_stime) - (own_before.ru_utime + own_before.ru_stime)
    return {
        "mode": mode,
        "runs": runs,
        "partitions": partitions,
        "wall_s": round(wall, 2),
        "runs_phase_s": round(result.runs_s, 2),
        "aggregate_s": round(result.aggregate_s, 3),
        "driver_cpu_s": round(own, 2),
        "jvm_cpu_s": round(after[jvm] - before[jvm], 2),
        "workers_cpu_s": round(workers, 2),
        "cpu_ms_per_run": round(1000 * (own + after[jvm] - before[jvm] + workers) / runs, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--modes", default="serial,local2")
    parser.add_argument("--partitions", type=int, help="Spark tasks (default: the sweep's)")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_mode(args.child, args.runs, args.partitions)))
        return
    for mode in args.modes.split(","):
        command = [sys.executable, __file__, "--child", mode, "--runs", str(args.runs)]
        if args.partitions:
            command += ["--partitions", str(args.partitions)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
