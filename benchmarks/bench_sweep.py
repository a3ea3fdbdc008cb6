"""Sweep benchmark: the same sweep serially, on local[1] and on local[2].

    python benchmarks/bench_sweep.py [--runs 2000] [--memory-runs 20000] [--json FILE]

Each mode runs in its own process (so peak-memory figures do not mix). Serial runs the
sweep's task function in a plain loop, without Spark. Reported: runs/s per mode, the
local[2]/serial ratio, Spark start-up seconds, and the driver's peak memory (Python peak RSS,
and the driver JVM's peak RSS, which in local mode includes the executor) at ``--runs`` and
``--memory-runs`` runs. Not a test: figures go to docs/performance.md.
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
sys.path.insert(0, str(ROOT))
SCENARIO = str(ROOT / "benchmarks" / "sweep.yaml")


def python_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_mode(mode: str, runs: int) -> dict:
    from eosim.analysis.sweep.plan import SweepPlan, default_chunk_runs
    from eosim.analysis.sweep.task import execute_run

    if mode == "serial":
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

    master = {"local1": "local[1]", "local2": "local[2]"}[mode]
    spark, startup = engine.start_session(master, "eosim-bench")
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    out = Path(tempfile.mkdtemp()) / "sweep"
    start = time.perf_counter()
    run_sweep(
        SCENARIO,
        runs,
        seed=1,
        out=out,
        quiet=True,
        spark=spark,
        chunk_runs=default_chunk_runs(runs),
    )
    wall = time.perf_counter() - start
    jvm_peak = 0.0
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
    parser.add_argument("--json", dest="json_path", type=Path)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_mode(args.child, args.runs)))
        return
    results = [run_child(mode, args.runs) for mode in ("serial", "local1", "local2")]
    if args.memory_runs:
        results.append(run_child("local2", args.memory_runs))
    for r in results:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    serial, local2 = results[0], results[2]
    print(f"local[2]/serial runs/s ratio: {local2['runs_per_s'] / serial['runs_per_s']:.2f}")
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
