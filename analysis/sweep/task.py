"""What one Spark task executes: a batch of runs, each turned into one result row.

The function shipped to executors is :func:`make_batch_runner`'s closure. It carries the
plan (scenario text included, so executors need no access to the scenario file) and reaches
the model only through :mod:`eosim.analysis.outcome`. Rows leave as Arrow record batches
(``mapInArrow``), a few runs at a time, so a task's memory does not grow with its run count.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, get_args

import pyarrow as pa

from eosim.analysis.checks import ALL_ANOMALIES, transactional_ops
from eosim.analysis.expect import COUNTS
from eosim.analysis.history import History
from eosim.analysis.stats import histogram, sketch
from eosim.analysis.sweep.plan import SweepPlan, param_column, render, run_seed
from eosim.analysis.sweep.progress import report_progress
from eosim.simulation.scenario import FaultKind

ROWS_PER_BATCH = 16
# A task reports its finished runs after a run when this long has passed since its last
# report: a file replaced costs a few milliseconds on some filesystems, a run about 100 ms,
# and the driver polls every 0.25 s.
REPORT_INTERVAL_S = 0.2
# The fault load a run actually had: per fault kind, the occurrences of its realised schedule
# (`RunResult.faults`: scheduled, random and periodic faults and every crash_at that fired, as a
# crash), in `faults_<kind>` columns; and `messages_lost`, every message the network lost or
# dropped (ambient loss, loss faults, dead connections).
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

SCHEMA = pa.schema(
    [
        ("sweep_id", pa.string()),
        ("variant", pa.int32()),
        ("run", pa.int64()),
        ("seed", pa.int64()),
        ("params", pa.string()),
        *((name, pa.int64()) for name in ALL_ANOMALIES),
        *((name, pa.int64()) for name in COUNTS),
        ("txns", pa.int64()),
        ("sim_time_s", pa.float64()),
        ("wall_time_s", pa.float64()),
        ("events", pa.int64()),
        *((f"faults_{kind}", pa.int64()) for kind in FAULT_KINDS),
        ("messages_lost", pa.int64()),
        ("history_sha256", pa.string()),
        ("expect_met", pa.bool_()),
        ("ack_latency_hist", pa.list_(pa.int64())),
        ("commit_latency_hist", pa.list_(pa.int64())),
        ("ack_latency_sketch", pa.binary()),
        ("commit_latency_sketch", pa.binary()),
        ("eosim_version", pa.string()),
        ("scenario_sha256", pa.string()),
        ("replay", pa.string()),
    ]
)
ARROW_TYPES = {
    "bool": pa.bool_(),
    "int64": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
}


def run_schema(plan: SweepPlan) -> pa.Schema:
    """:data:`SCHEMA` with the typed column of every swept parameter after ``params``."""
    at = SCHEMA.get_field_index("params") + 1
    fields = list(SCHEMA)
    typed = [pa.field(param_column(p), ARROW_TYPES[t]) for p, t in plan.column_types().items()]
    return pa.schema(fields[:at] + typed + fields[at:])


# Columns that differ between two executions of the same run.
NONDETERMINISTIC = ("wall_time_s",)


def ack_latencies(history: History) -> list[float]:
    """Invocation-to-completion time (ms) of every `ok` send, in invocation order."""
    return [
        s.complete_time - s.invoke_time
        for s in history.sends
        if s.outcome == "ok" and s.complete_time is not None
    ]


def commit_latencies(history: History) -> list[float]:
    """Invocation-to-completion time (ms) of every committed transaction: each `ok` `txn` op,
    in invocation order, then each transaction of a transactional processor. A processor's
    transaction carries one `process` op per input; those share a process and an invocation
    time, and count once."""
    latencies = [
        t.complete_time - t.invoke_time
        for t in history.txns
        if t.outcome == "ok" and t.complete_time is not None
    ]
    seen: set[tuple[str, float]] = set()
    for step in history.steps:
        if step.outcome != "ok" or step.transactional_id is None or step.complete_time is None:
            continue
        key = (step.process, step.invoke_time)
        if key not in seen:
            seen.add(key)
            latencies.append(step.complete_time - step.invoke_time)
    return latencies


def fault_counts(faults: list[Any]) -> dict[str, int]:
    """``faults_<kind>`` -> occurrences, for every kind of :data:`FAULT_KINDS`."""
    counts = Counter(f.kind for f in faults)
    return {f"faults_{kind}": counts.get(kind, 0) for kind in FAULT_KINDS}


def replay_command(plan: SweepPlan, seed: int, params: dict[str, Any]) -> str:
    """The command that replays one run of the sweep
    (:func:`eosim.analysis.outcome.replay_command`)."""
    from eosim.analysis.outcome import replay_command as command

    return command(plan.scenario_source, seed, plan.overrides(params))


def execute_run(plan: SweepPlan, sweep_id: str, version: str, run_id: int) -> dict[str, Any]:
    """One run of the sweep, as a result row."""
    from eosim.analysis import outcome as checked
    from eosim.simulation.scenario import parse_scenario

    variant, run = plan.locate(run_id)
    params = plan.run_parameters(variant, run)
    seed = run_seed(plan.seed, variant, run)
    scenario = parse_scenario(plan.scenario_text, plan.scenario_source, plan.overrides(params))
    outcome = checked.run(scenario, seed)
    acks, commits = ack_latencies(outcome.history), commit_latencies(outcome.history)
    anomalies = {name: a.count for name, a in outcome.check.anomalies.items()}
    failing = not outcome.expect.met or any(anomalies.values())
    return {
        "sweep_id": sweep_id,
        "variant": variant,
        "run": run,
        "seed": seed,
        "params": json.dumps({p: render(v) for p, v in params.items()}, sort_keys=True),
        **plan.typed_columns(params),
        **anomalies,
        **outcome.run.counts,
        "txns": transactional_ops(outcome.history),
        "sim_time_s": outcome.run.sim_time_s,
        "wall_time_s": outcome.run.wall_time_s,
        "events": outcome.run.events,
        **fault_counts(outcome.run.faults),
        "messages_lost": outcome.run.stats.get("messages_lost", 0),
        "history_sha256": outcome.run.history.digest(),
        "expect_met": outcome.expect.met,
        "ack_latency_hist": histogram(acks),
        "commit_latency_hist": histogram(commits),
        "ack_latency_sketch": sketch(acks),
        "commit_latency_sketch": sketch(commits),
        "eosim_version": version,
        "scenario_sha256": outcome.run.history.meta["scenario_sha256"],
        "replay": replay_command(plan, seed, params) if failing else None,
    }


def make_batch_runner(
    plan: SweepPlan,
    sweep_id: str,
    version: str,
    chunk: int,
    inject_failures: frozenset[tuple[int, int, int]] = frozenset(),
    progress_dir: str | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function for one chunk.

    ``inject_failures`` holds (chunk, partition, attempt) triples on which the Python worker
    kills itself, for testing that Spark's retries keep the accounting exactly-once.
    ``progress_dir``, when given, receives the task's count of finished runs after a run, at
    most every :data:`REPORT_INTERVAL_S` (see :mod:`eosim.analysis.sweep.progress`).
    """
    schema = run_schema(plan)

    def run_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if (
            inject_failures
            and ctx is not None
            and (chunk, ctx.partitionId(), ctx.attemptNumber()) in inject_failures
        ):
            os._exit(17)
        task = (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (os.getpid(), 0)
        rows: list[dict[str, Any]] = []
        done = 0
        reported = -REPORT_INTERVAL_S
        for batch in batches:
            for run_id in batch.column("id").to_pylist():
                rows.append(execute_run(plan, sweep_id, version, run_id))
                done += 1
                now = time.monotonic()
                if progress_dir is not None and now - reported >= REPORT_INTERVAL_S:
                    report_progress(progress_dir, task, done)
                    reported = now
                if len(rows) >= ROWS_PER_BATCH:
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)
                    rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run_batches
