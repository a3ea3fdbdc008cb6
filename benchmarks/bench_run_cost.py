"""What one run costs, in CPU time, on this tree or an old one: for comparing commits.

    python benchmarks/bench_run_cost.py SCENARIO [REPEAT]

Prints one JSON line: the median CPU time (``time.process_time``) of the run, of all checks on
the history as the run hands it over, and of a sweep task (``execute_run``: run, checks,
timings, digest, result row), with runs per hour per core from the last; the run's median wall
time; and the peak of traced allocations during one more run, per record. It uses only what
``ae4769c`` (issue 20's starting point) already had, so the same file measures any commit since:
install the old commit into a virtualenv of its own and run this file with that
virtualenv's Python, from the old tree (docs/performance.md, "Benchmarking an old commit").
``bench_core.py`` gives more figures for the current tree. Not a test.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from eosim.analysis.checks import check_history
from eosim.analysis.sweep.plan import SweepPlan
from eosim.analysis.sweep.task import execute_run
from eosim.simulation import load_scenario, run_scenario

try:
    from eosim.analysis.history import history_from_recorder
except ImportError:  # before history_from_recorder: the history through its JSON objects
    from eosim.analysis.history import history_from_records

    def history_from_recorder(recorder: Any) -> Any:
        return history_from_records(recorder.records())


def measure(path: Path, repeat: int) -> dict[str, Any]:
    scenario = load_scenario(path)
    cpu, wall, checks, task = [], [], [], []
    records = 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = run_scenario(scenario)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        c = time.process_time()
        check_history(history_from_recorder(result.history))
        checks.append(time.process_time() - c)
        records = result.counts["sent"]
        del result
    plan = SweepPlan(path.read_text(), str(path), 1, scenario.seed)
    for _ in range(repeat):
        c = time.process_time()
        execute_run(plan, "bench", "bench", 0)
        task.append(time.process_time() - c)
    tracemalloc.start()
    run_scenario(scenario)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    median = statistics.median
    return {
        "scenario": str(path),
        "records": records,
        "model_cpu_s": round(median(cpu), 3),
        "model_wall_s": round(median(wall), 3),
        "checks_cpu_s": round(median(checks), 3),
        "task_cpu_s": round(median(task), 3),
        "runs_per_hour_per_core_cpu": round(3600 / median(task)),
        "peak_bytes_per_record": round(peak / max(records, 1)),
    }


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: bench_run_cost.py SCENARIO [REPEAT]")
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 3)))
