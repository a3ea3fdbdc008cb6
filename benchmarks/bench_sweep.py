"""Sweep benchmark: the same sweep serially and on embedded Spark, compared like for like.

    python benchmarks/bench_sweep.py [--runs 2000] [--memory-runs 20000] [--json FILE]
                                     [--modes serial,local1,local2,loop]

Each mode runs in its own process (so peak-memory figures do not mix):

* ``serial``: the whole sweep (``run_sweep``: the same chunk tasks, Parquet chunk files,
  commits, partial aggregates, aggregation and verdict) with its chunks run one after another
  in the driver process (``in_process=True``), without Spark;
* ``local1`` and ``local2``: the same sweep with its chunks run as Spark tasks on
  ``local[1]`` and ``local[2]``;
* ``loop``: the sweep's run function alone (``execute_run``) in a plain loop: no chunk
  files, no commits, no aggregation. This was the "serial" of earlier figures; it is kept to
  show what the old ratio compared.

Reported per mode: wall seconds without Spark's start-up (which is listed on its own), runs/s,
the seconds of the run phase and of the aggregation, and the driver's peak memory (Python
peak RSS; the driver JVM's peak RSS, which in local mode includes the executor). Then the
like-for-like ratio local[2]/serial (whole sweeps, start-up excluded on both sides), the same
for the run phase alone, and the old ratio local[2]/loop. ``--memory-runs`` runs local[2] once
more at that size, for the driver's memory. Not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "benchmarks" / "sweep.yaml")
MASTERS = {"local1": "local[1]", "local2": "local[2]"}


def python_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_mode(mode: str, runs: int) -> dict:
    from eosim.analysis.sweep.plan import SweepPlan, default_chunk_runs
    from eosim.analysis.sweep.task import execute_run

    if mode == "loop":
        plan = SweepPlan(Path(SCENARIO).read_text(), SCENARIO, runs, 1)
        start = time.perf_counter()
        for run_id in range(plan.total_runs):
            execute_run(plan, "bench", "bench", run_id)
        wall = time.perf_counter() - start
        return {
            "mode": mode,
            "runs": runs,
            "wall_s": wall,
            "runs_per_s": runs / wall,
            "python_peak_mib": python_peak_mib(),
        }

    from eosim.analysis.sweep import engine, run_sweep

    spark = None
    startup = 0.0
    if mode != "serial":  # an in-process sweep does not use Spark
        spark, startup = engine.start_session(MASTERS[mode], "eosim-bench")
    out = Path(tempfile.mkdtemp()) / "sweep"
    start = time.perf_counter()
    result = run_sweep(
        SCENARIO,
        runs,
        seed=1,
        out=out,
        quiet=True,
        spark=spark,
        chunk_runs=default_chunk_runs(runs),
        in_process=mode == "serial",
    )
    wall = time.perf_counter() - start
    jvm_peak = 0.0
    if spark is not None:
        jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        for line in Path(f"/proc/{jvm_pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                jvm_peak = int(line.split()[1]) / 1024
        spark.stop()
    shutil.rmtree(out.parent, ignore_errors=True)
    return {
        "mode": mode,
        "runs": runs,
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "runs_phase_s": result.runs_s,
        "aggregate_s": result.aggregate_s,
        "spark_startup_s": startup,
        "python_peak_mib": python_peak_mib(),
        "jvm_peak_mib": jvm_peak,
    }


def run_child(mode: str, runs: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--runs", str(runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--memory-runs", type=int, default=20000)
    parser.add_argument("--modes", default="serial,local1,local2,loop")
    parser.add_argument("--json", dest="json_path", type=Path)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_mode(args.child, args.runs)))
        return
    modes = args.modes.split(",")
    results = {mode: run_child(mode, args.runs) for mode in modes}
    rows = list(results.values())
    if args.memory_runs:
        rows.append(run_child("local2", args.memory_runs))
    for r in rows:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    local2 = results.get("local2")
    if local2 and "serial" in results:
        serial = results["serial"]
        print(f"local[2]/serial, whole sweep: {serial['wall_s'] / local2['wall_s']:.2f}")
        print(f"local[2]/serial, run phase: {serial['runs_phase_s'] / local2['runs_phase_s']:.2f}")
    if local2 and "loop" in results:
        old = local2["runs_per_s"] / results["loop"]["runs_per_s"]
        print(f"local[2]/loop (the old ratio): {old:.2f}")
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
