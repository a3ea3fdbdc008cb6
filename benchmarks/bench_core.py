"""Core benchmark: bare SimPy event rate vs the model's throughput on the standard scenario.

    python benchmarks/bench_core.py [--repeat 3] [--json results/bench-core.json]
                                    [--scenario scenarios/transactional-pipeline.yaml]

Prints records/s, SimPy events/s and runs/s of the model (median of ``--repeat`` runs, each
timed around ``run_scenario``, its final garbage collection included), the cost per record
(SimPy events per record, wall milliseconds per record, with the spread of the runs' wall
times: min, max and (max - min) / median), the ratio of the model's event rate to bare
SimPy's (a plain ``simpy.Environment``; the model's own counting environment is printed
beside it), the checkers' time (the delivery checks, and all checks as runs apply them, on
the history as a run hands it over), what one run costs a sweep task (``execute_run``: run,
checks, timings, digest and result row; runs per hour per core follow from it, and the checks'
share of it), and peak memory (traced Python allocations of one extra run, plus the process's
peak RSS). The run, all checks and the sweep task are also given in CPU time
(``time.process_time``), which a busy machine disturbs less than wall time. ``--scenario``
measures another scenario the same way ("records" are then the
operations its applications started; ``benchmarks/standard-rf3.yaml`` is the standard scenario
at replication factor 3). Not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import time
import tracemalloc
from pathlib import Path

import simpy

from eosim.analysis.checker import check
from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_recorder
from eosim.analysis.sweep.plan import SweepPlan
from eosim.analysis.sweep.task import execute_run
from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.runner import CountingEnvironment

ROOT = Path(__file__).resolve().parent.parent

STANDARD = ROOT / "benchmarks" / "standard.yaml"


def bare_simpy_rate(events: int = 1_000_000, env_class: type = simpy.Environment) -> float:
    """Events/s of SimPy alone: one process yielding timeouts, as cheap as SimPy gets, on a
    plain ``simpy.Environment`` (``env_class``: another environment, such as the model's
    ``CountingEnvironment``, for comparison)."""
    env = env_class()
    ticks = [0]

    def ticker(env: simpy.Environment):
        while True:
            yield env.timeout(1)
            ticks[0] += 1

    env.process(ticker(env))
    start = time.perf_counter()
    env.run(until=events)
    return ticks[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_path", type=Path)
    parser.add_argument("--scenario", type=Path, default=STANDARD)
    args = parser.parse_args()

    bare = statistics.median(bare_simpy_rate() for _ in range(3))
    counting = statistics.median(bare_simpy_rate(env_class=CountingEnvironment) for _ in range(3))
    scenario = load_scenario(args.scenario)
    walls, events, check_walls, all_check_walls = [], 0, [], []
    cpus, all_check_cpus = [], []  # CPU time: steadier than wall time on a shared machine
    result = None
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        result = run_scenario(scenario)
        walls.append(time.perf_counter() - t)  # with the run's final collection
        cpus.append(time.process_time() - c)
        events = result.events
        t = time.perf_counter()
        verdict = check(history_from_recorder(result.history))
        check_walls.append(time.perf_counter() - t)
        t, c = time.perf_counter(), time.process_time()
        verdict = check_history(history_from_recorder(result.history))
        all_check_walls.append(time.perf_counter() - t)
        all_check_cpus.append(time.process_time() - c)
    assert result is not None
    records = result.counts["sent"]
    wall = statistics.median(walls)

    # What one run costs a sweep task: run, all checks, timings, digest and the result row.
    plan = SweepPlan(args.scenario.read_text(), str(args.scenario), 1, scenario.seed)
    task_walls, task_cpus = [], []
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        execute_run(plan, "bench", "bench", 0)
        task_walls.append(time.perf_counter() - t)
        task_cpus.append(time.process_time() - c)
    task = statistics.median(task_walls)
    all_checks = statistics.median(all_check_walls)

    tracemalloc.start()
    run_scenario(scenario)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    figures = {
        "scenario": str(args.scenario.resolve().relative_to(ROOT)),
        "python": platform.python_version(),
        "simpy": simpy.__version__,
        "bare_simpy_events_per_s": round(bare),
        "counting_env_events_per_s": round(counting),
        "records": records,
        "sim_time_s": round(result.sim_time_s, 3),
        "events_per_run": events,
        "wall_s_median": round(wall, 3),
        "cpu_s_median": round(statistics.median(cpus), 3),
        "records_per_s": round(records / wall),
        "events_per_s": round(events / wall),
        "runs_per_s": round(1 / wall, 3),
        "wall_s_runs": [round(w, 3) for w in walls],
        "wall_s_min": round(min(walls), 3),
        "wall_s_max": round(max(walls), 3),
        "wall_spread": round((max(walls) - min(walls)) / wall, 3),
        "events_per_record": round(events / records, 3) if records else None,
        "wall_ms_per_record": round(wall * 1000 / records, 5) if records else None,
        "ratio_to_bare_simpy": round(events / wall / bare, 3),
        "check_wall_s_median": round(statistics.median(check_walls), 3),
        "all_checks_wall_s_median": round(all_checks, 3),
        "all_checks_cpu_s_median": round(statistics.median(all_check_cpus), 3),
        "sweep_task_wall_s_median": round(task, 3),
        "sweep_task_cpu_s_median": round(statistics.median(task_cpus), 3),
        "runs_per_hour_per_core": round(3600 / task),
        "checks_share_of_task": round(all_checks / task, 3),
        "peak_traced_mib": round(traced_peak / 2**20, 1),
        "peak_rss_mib": round(rss_peak_mib, 1),
        "anomalies": {n: a.count for n, a in verdict.anomalies.items()},
    }
    for key, value in figures.items():
        print(f"{key:<26}{value}")
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
