"""The sweep driver's memory against the number of runs, with a stubbed run function.

    python benchmarks/bench_sweep_memory.py [--runs 2000,200000] [--no-tracemalloc]

Each size runs in its own process: ``run_sweep(in_process=True)`` of ``benchmarks/sweep.yaml``
whose ``execute_run`` is replaced by a stub that returns a copy of one real run's row (its
sketches and histograms included) with the run's variant, run and seed. The run's cost is
gone; everything else a sweep does per run and per chunk stays: the Parquet chunk files and
their commits, the progress files, the partial aggregate of every run, the merge of the
tasks' sums, the table, the verdict. In-process, the driver also executes the chunks, so
this bounds what a Spark driver holds from above (its tasks run elsewhere).

Reported per size: the Python heap's peak (tracemalloc, from just before ``run_sweep``), the
process's peak RSS, wall seconds, and the chunks. Not a test: figures go to
docs/performance.md.
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
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "benchmarks" / "sweep.yaml")


def one_size(runs: int, trace: bool) -> dict:
    from eosim.analysis.sweep import run_sweep, task
    from eosim.analysis.sweep.plan import SweepPlan, run_seed

    plan = SweepPlan(Path(SCENARIO).read_text(), SCENARIO, runs, 1)
    template = task.execute_run(plan, "template", "bench", 0)

    def stub(plan, sweep_id, version, run_id, target=None):
        variant, run = plan.locate(run_id)
        row = dict(template)
        row.update(
            sweep_id=sweep_id, variant=variant, run=run, seed=run_seed(plan.seed, variant, run)
        )
        return row

    task.execute_run = stub
    out = Path(tempfile.mkdtemp()) / "sweep"
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    result = run_sweep(SCENARIO, runs, seed=1, out=out, quiet=True, in_process=True)
    wall = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    manifest = json.loads((out / "manifest.json").read_text())
    shutil.rmtree(out.parent, ignore_errors=True)
    assert result.total_runs == runs and result.table[0]["runs"] == runs
    return {
        "runs": runs,
        "chunks": manifest["chunks"],
        "wall_s": round(wall, 1),
        "traced_peak_mib": None if peak is None else round(peak / 2**20, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="2000,200000")
    parser.add_argument("--no-tracemalloc", action="store_true")
    parser.add_argument("--child", type=int)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_size(args.child, not args.no_tracemalloc)))
        return
    for runs in (int(n) for n in args.runs.split(",")):
        command = [sys.executable, __file__, "--child", str(runs)]
        if args.no_tracemalloc:
            command.append("--no-tracemalloc")
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
