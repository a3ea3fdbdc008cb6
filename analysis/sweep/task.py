"""What one Spark task executes: a few chunks of runs, each run turned into one result row,
each chunk committed as one Parquet file as soon as it is done.

The function shipped to executors is :func:`make_chunk_runner`'s closure. It carries the
plan (scenario text included, so executors need no access to the scenario file) and reaches
the model only through :mod:`eosim.analysis.outcome`. A task writes its chunks itself
(:func:`eosim.analysis.sweep.store.commit_chunk`), so a chunk it finished stays committed
whatever happens to the rest of the job. What goes back to Spark is one small row per task:
its chunks and the partial aggregate of their runs (:mod:`eosim.analysis.sweep.aggregate`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from eosim.analysis.checks import ALL_ANOMALIES, transactional_ops
from eosim.analysis.expect import COUNTS
from eosim.analysis.stats import histogram, sketch
from eosim.analysis.sweep.plan import SweepPlan, param_column, render, run_seed
from eosim.analysis.sweep.progress import add_found, report_progress
from eosim.analysis.sweep.store import chunk_file, commit_chunk, staging_file
from eosim.analysis.timings import (
    ack_latencies,
    commit_latencies,
    failovers,
    read_after_ack_latencies,
    warm_ack_latencies,
)
from eosim.simulation.scenario import FaultKind

# A task reports its finished runs after a run when this long has passed since its last
# report: a file replaced costs a few milliseconds on some filesystems, a run about 100 ms,
# and the driver polls every 0.25 s.
REPORT_INTERVAL_S = 0.2
# The fault load a run actually had: per fault kind, the occurrences applied (`RunResult.faults`:
# on the model the realised schedule, scheduled, random and periodic faults and every crash_at
# that fired, as a crash; on a real cluster the faults confirmed in effect), in `faults_<kind>`
# columns; and `messages_lost`, every message the network lost or dropped (ambient loss, loss
# faults, dead connections). A run that proves nothing (`RunResult.invalid`: a real fault not
# applied, a drain that did not finish...) has `valid` false and its reasons in
# `invalid_reason`; its warnings are kept in `warnings`.
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
        ("valid", pa.bool_()),
        ("invalid_reason", pa.string()),
        ("warnings", pa.list_(pa.string())),
        ("expect_met", pa.bool_()),
        ("ack_latency_hist", pa.list_(pa.int64())),
        ("commit_latency_hist", pa.list_(pa.int64())),
        ("ack_latency_sketch", pa.binary()),
        ("commit_latency_sketch", pa.binary()),
        ("warm_ack_latency_sketch", pa.binary()),
        ("read_after_ack_sketch", pa.binary()),
        # One entry per broker fault (eosim.analysis.timings.failovers): its kind, and the
        # time writes took to resume after it (null: they never did).
        ("failover_ms", pa.list_(pa.float64())),
        ("failover_kind", pa.list_(pa.string())),
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


def fault_counts(faults: list[Any]) -> dict[str, int]:
    """``faults_<kind>`` -> occurrences, for every kind of :data:`FAULT_KINDS`."""
    counts = Counter(f.kind for f in faults)
    return {f"faults_{kind}": counts.get(kind, 0) for kind in FAULT_KINDS}


def replay_command(plan: SweepPlan, seed: int, params: dict[str, Any]) -> str:
    """The command that replays one run of the sweep
    (:func:`eosim.analysis.outcome.replay_command`)."""
    from eosim.analysis.outcome import replay_command as command

    return command(plan.scenario_source, seed, plan.overrides(params), plan.target)


def execute_run(
    plan: SweepPlan,
    sweep_id: str,
    version: str,
    run_id: int,
    target: Any = None,
    keep_history: Path | None = None,
) -> dict[str, Any]:
    """One run of the sweep, as a result row; ``target`` runs it (default: the model).
    ``keep_history``: a folder the run's history is written to, as
    ``variant=V/run-R.jsonl`` (a real run's: it cannot be replayed)."""
    from eosim.analysis import outcome as checked
    from eosim.simulation.scenario import parse_scenario

    variant, run = plan.locate(run_id)
    params = plan.run_parameters(variant, run)
    seed = run_seed(plan.seed, variant, run)
    scenario = parse_scenario(plan.scenario_text, plan.scenario_source, plan.overrides(params))
    outcome = checked.run(scenario, seed, target=target)
    if keep_history is not None:
        folder = keep_history / f"variant={variant}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"run-{run:06d}.jsonl"
        staged = path.with_name(path.name + ".tmp")
        staged.write_text("".join(line + "\n" for line in outcome.run.history.lines()))
        staged.replace(path)
    acks, commits = ack_latencies(outcome.history), commit_latencies(outcome.history)
    resumed = failovers(outcome.history)
    invalid = outcome.run.invalid
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
        **outcome.counts,
        "txns": transactional_ops(outcome.history),
        "sim_time_s": outcome.run.sim_time_s,
        "wall_time_s": outcome.run.wall_time_s,
        "events": outcome.run.events,
        **fault_counts(outcome.run.faults),
        "messages_lost": outcome.run.stats.get("messages_lost", 0),
        "history_sha256": outcome.run.history.digest(),
        "valid": not invalid,
        "invalid_reason": "; ".join(invalid) if invalid else None,
        "warnings": list(outcome.run.warnings),
        "expect_met": outcome.expect.met,
        "ack_latency_hist": histogram(acks),
        "commit_latency_hist": histogram(commits),
        "ack_latency_sketch": sketch(acks),
        "commit_latency_sketch": sketch(commits),
        "warm_ack_latency_sketch": sketch(warm_ack_latencies(outcome.history)),
        "read_after_ack_sketch": sketch(read_after_ack_latencies(outcome.history)),
        "failover_ms": [None if f.time_ms is None else round(f.time_ms, 3) for f in resumed],
        "failover_kind": [f.kind for f in resumed],
        "eosim_version": version,
        "scenario_sha256": outcome.run.history.meta["scenario_sha256"],
        "replay": replay_command(plan, seed, params) if failing else None,
    }


# What a task tells Spark, once: the chunks it was given, how many of them an earlier attempt
# had committed already, and the partial aggregate of all their runs
# (:meth:`eosim.analysis.sweep.aggregate.Sums.to_bytes`).
RESULT_DDL = "chunks array<int>, skipped int, sums binary"
RESULT_SCHEMA = pa.schema(
    [("chunks", pa.list_(pa.int32())), ("skipped", pa.int32()), ("sums", pa.binary())]
)

# A chunk: (chunk number, first run id, end run id), all of one variant.
Chunk = tuple[int, int, int]

# The test seam of the exactly-once guarantee: (chunk, attempt) pairs on which a task's Python
# worker kills itself as it starts that chunk. Set only through :func:`injected_failures`;
# :func:`make_chunk_runner` captures it, so it travels to the executors with the task.
_INJECTED_FAILURES: frozenset[tuple[int, int]] = frozenset()


@contextlib.contextmanager
def injected_failures(pairs: frozenset[tuple[int, int]]) -> Iterator[None]:
    """Within this block, the chunk runners made kill their worker as they start chunk ``c``
    in attempt ``a`` for each ``(c, a)`` of ``pairs``: for testing that Spark's retries keep
    the accounting exactly-once and that finished chunks stay committed."""
    global _INJECTED_FAILURES
    before = _INJECTED_FAILURES
    _INJECTED_FAILURES = frozenset(pairs)
    try:
        yield
    finally:
        _INJECTED_FAILURES = before


def chunk_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """A chunk's rows as written under ``runs/``: the run table's columns but ``variant``,
    which the file's directory (``variant=V``) gives, as Spark's partitioned writer had it."""
    table = pa.Table.from_pylist(rows, schema=schema)
    return table.drop_columns(["variant"])


def read_chunk(path: str | os.PathLike[str], columns: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of a committed chunk file, with only ``columns`` (those it has) and
    ``variant``, which its directory names."""
    variant = int(Path(path).parent.name.split("=", 1)[1])
    names = set(pq.read_schema(path).names)
    table = pq.read_table(path, columns=[c for c in columns if c in names and c != "variant"])
    rows = table.to_pylist()
    for row in rows:
        row["variant"] = variant
    return rows


def found_in(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per anomaly, the runs of ``rows`` that reported it."""
    found: dict[str, int] = {}
    for row in rows:
        add_found(found, {name: row.get(name) for name in ALL_ANOMALIES})
    return found


def committed_found(path: str) -> dict[str, int]:
    """Per anomaly, the runs of a committed chunk file that reported it."""
    return found_in(read_chunk(path, ALL_ANOMALIES))


def make_chunk_runner(
    plan: SweepPlan,
    sweep_id: str,
    version: str,
    root: str,
    chunks: list[Chunk],
    progress_dir: str | None = None,
    run_target: Any = None,
    *,
    expect: Mapping[str, int | str],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a sweep's job: each input id ``i`` is ``chunks[i]``,
    whose runs it executes and commits under ``root`` as one file (a chunk already committed,
    by an earlier attempt of the same task, is read back instead). It adds every run to one
    :class:`~eosim.analysis.sweep.aggregate.Sums` (``expect`` is the scenario's ``expect:``)
    and yields, once, a :data:`RESULT_SCHEMA` row with it: the driver merges those rows
    instead of reading the runs back.

    ``progress_dir``, when given, receives the task's runs done and anomalies found after a
    run, at most every :data:`REPORT_INTERVAL_S` (see :mod:`eosim.analysis.sweep.progress`).
    ``run_target``, when given, runs every run (a real cluster: the function is then called
    in the driver, one chunk after another). Failures set by :func:`injected_failures` when
    the runner is made are injected.
    """
    from eosim.analysis.sweep.aggregate import Sums

    schema = run_schema(plan)
    inject = _INJECTED_FAILURES
    # A real cluster's runs cannot be replayed: their histories are kept beside the results.
    kept = Path(root) / "histories" if run_target is not None else None

    def run_chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (os.getpid(), 0)
        done = 0
        found: dict[str, int] = {}
        reported = -REPORT_INTERVAL_S
        sums = Sums(expect)
        covered: list[int] = []
        skipped = 0

        def report(force: bool = False) -> None:
            nonlocal reported
            now = time.monotonic()
            if progress_dir is not None and (force or now - reported >= REPORT_INTERVAL_S):
                report_progress(progress_dir, task, done, found)
                reported = now

        for batch in batches:
            for index in batch.column("id").to_pylist():
                chunk, start, end = chunks[index]
                variant, first = plan.locate(start)
                runs = (variant, first, first + end - start)
                covered.append(chunk)
                target = chunk_file(root, chunk, variant)
                if target.exists():  # committed by an earlier attempt
                    rows = read_chunk(target, sums.columns())
                    sums.add(rows, runs)
                    done += end - start
                    for name, n in found_in(rows).items():
                        found[name] = found.get(name, 0) + n
                    skipped += 1
                    report(force=True)
                    continue
                if (chunk, task[1]) in inject:
                    os._exit(17)
                rows = []
                for run_id in range(start, end):
                    row = execute_run(plan, sweep_id, version, run_id, run_target, kept)
                    rows.append(row)
                    done += 1
                    add_found(found, {name: row[name] for name in ALL_ANOMALIES})
                    report()
                staged = staging_file(root, chunk)
                pq.write_table(chunk_table(rows, schema), staged)
                commit_chunk(staged, target)
                sums.add(rows, runs)
        report(force=True)
        result = {"chunks": covered, "skipped": skipped, "sums": sums.to_bytes()}
        yield pa.RecordBatch.from_pylist([result], schema=RESULT_SCHEMA)

    return run_chunks
