"""run_sweep: plan, prepare the results directory, run chunks on Spark, aggregate.

Everything that can be wrong with the input is checked before Spark starts: the grid and vary
paths (every variant is validated as a scenario), the run count and the output directory.
The sweep then runs chunk by chunk, skipping chunks a previous, interrupted invocation already
committed. Afterwards it verifies exactly-once accounting: every (variant, run) must be
present exactly once. It writes the aggregate table and marks the manifest complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.stats import format_duration, format_ppm
from eosim.analysis.sweep import engine
from eosim.analysis.sweep.aggregate import LATENCIES, AccountingError, aggregate
from eosim.analysis.sweep.plan import (
    GridAxis,
    PlanError,
    SweepPlan,
    VarySpec,
    chunk_bounds,
    default_chunk_runs,
    param_column,
    short_names,
)
from eosim.analysis.sweep.progress import Progress, ProgressPoller
from eosim.analysis.sweep.store import FORMAT, LAYOUT, SCENARIO_COPY, StoreError, SweepStore
from eosim.analysis.sweep.task import RESULT_DDL, make_chunk_runner, run_schema
from eosim.analysis.sweep.verdict import SweepVerdict, judge, verdict_columns
from eosim.simulation.conditions import Condition

# pandas dtypes that write each typed parameter column with its Arrow type.
PANDAS_DTYPES = {"bool": "boolean", "int64": "Int64", "double": "Float64", "string": "string"}


class SweepError(ValueError):
    """Bad sweep input or an unusable environment; its text is one line for the user."""


@dataclass
class SweepResult:
    out: Path
    sweep_id: str
    total_runs: int
    table: list[dict[str, Any]]
    resumed_chunks: int
    spark_startup_s: float
    wall_s: float
    params: list[str] = field(default_factory=list)
    sweep_verdict: SweepVerdict | None = None
    # Seconds spent running the pending chunks (until the last was committed) and aggregating
    # the committed runs; with spark_startup_s, where wall_s went.
    runs_s: float = 0.0
    aggregate_s: float = 0.0

    @property
    def runs_met(self) -> bool:
        """Whether every variant meets the scenario's ``expect:``, judged across its runs."""
        return all(row["expect_met"] for row in self.table)

    @property
    def met(self) -> bool:
        """Whether every variant meets ``expect:`` and the sweep's own ``expect_sweep:`` (with
        ``--expect``) is met; an inconclusive one is not."""
        return self.runs_met and (self.sweep_verdict is None or self.sweep_verdict.met)


def build_plan(
    scenario_path: str,
    runs: int,
    grid: Sequence[str],
    vary: Sequence[str],
    seed: int | None,
    overrides: Sequence[str],
) -> tuple[SweepPlan, Any]:
    from eosim.analysis import outcome as checked
    from eosim.simulation.scenario import ScenarioError

    try:
        scenario = checked.load(scenario_path, overrides)
        text = Path(scenario_path).read_text(encoding="utf-8")
        plan = SweepPlan(
            scenario_text=text,
            scenario_source=scenario_path,
            runs=runs,
            seed=scenario.seed if seed is None else seed,
            grid=tuple(GridAxis.parse(g) for g in grid),
            vary=tuple(VarySpec.parse(v) for v in vary),
            base_overrides=tuple(overrides),
        )
        for what, variant_overrides in plan.validation_overrides():
            try:
                checked.parse(text, scenario_path, variant_overrides)
            except ScenarioError as exc:
                raise SweepError(f"{what}: {exc}" if what else str(exc)) from None
    except (ScenarioError, PlanError) as exc:
        raise SweepError(str(exc)) from None
    return plan, scenario


def run_sweep(
    scenario_path: str,
    runs: int,
    *,
    grid: Sequence[str] = (),
    vary: Sequence[str] = (),
    seed: int | None = None,
    overrides: Sequence[str] = (),
    master: str | None = None,
    out: str | Path | None = None,
    partitions: int | None = None,
    chunk_runs: int | None = None,
    quiet: bool = False,
    command: str | None = None,
    spark: Any = None,
    inject_failures: frozenset[tuple[int, int]] = frozenset(),
    on_progress: Callable[[int], None] | None = None,
    progress_interval: float = 0.25,
    expect: Mapping[str, str] | None = None,
    target: Any = None,
    in_process: bool = False,
) -> SweepResult:
    """Run a sweep. ``expect`` (``--expect``: anomaly -> condition, already checked) adds to
    the scenario's ``expect_sweep:`` block, replacing a key it also names; the sweep judges
    them on the aggregate (:mod:`eosim.analysis.sweep.verdict`). ``on_progress(runs done)`` is
    called, from a driver thread too, each time the count of finished runs grows (see
    :mod:`eosim.analysis.sweep.progress`). On Ctrl-C the sweep stops Spark quietly and raises
    KeyboardInterrupt; the committed chunks stay, and the same command resumes.

    ``target`` (:class:`eosim.real.target.KafkaTarget`) runs every run on a real cluster
    instead of the model: one after another in this process (they share the machine's one
    cluster), each run committed as its own chunk; Spark then only aggregates.

    ``in_process`` runs the model's chunks the same way, one after another in this process
    (the same chunk files, commits and progress), and leaves Spark only the aggregation: the
    serial baseline that ``benchmarks/bench_sweep.py`` compares Spark's execution with."""
    from eosim import __version__

    started = time.perf_counter()
    plan, scenario = build_plan(scenario_path, runs, grid, vary, seed, overrides)
    real = target is not None and target.name != "model"
    if real:
        plan = dataclasses.replace(plan, target=target.name)
        for variant_overrides in [plan.overrides(v) for v in plan.variants]:
            refused = target.refusals(checked_parse(plan, variant_overrides))
            if refused:
                raise SweepError(refused[0])
        if chunk_runs is None:
            chunk_runs = 1
    if partitions is not None and partitions < 1:
        raise SweepError(f"--partitions must be at least 1, got {partitions}")
    sweep_id = plan.sweep_id()
    root = Path(out) if out is not None else Path("results") / scenario.name
    store = SweepStore(root)
    try:
        existing = store.read_manifest() if root.is_dir() else None
    except StoreError as exc:
        raise SweepError(str(exc)) from None
    # The same sweep, started before: it keeps its chunking (and a finished one its layout).
    previous: dict[str, Any] = {}
    if existing and existing.get("format") == FORMAT and existing.get("sweep_id") == sweep_id:
        previous = existing
    complete = bool(previous.get("complete"))
    layout = previous.get("layout", 1) if previous else LAYOUT
    stored = previous.get("chunk_runs")
    if stored is not None:
        if chunk_runs is not None and chunk_runs != stored:
            raise SweepError(
                f"--chunk-runs {chunk_runs}: the sweep in {root} was started with "
                f"--chunk-runs {stored}; leave it out to resume"
            )
        chunk_runs = stored
    chunk_runs = chunk_runs or default_chunk_runs(plan.total_runs)
    chunks = chunk_bounds(plan.total_runs, chunk_runs, plan.runs)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "layout": layout,
        "sweep_id": sweep_id,
        "command": command or " ".join(sys.argv),
        "scenario": scenario.name,
        "target": plan.target,
        "scenario_path": scenario_path,
        "scenario_copy": SCENARIO_COPY,
        "scenario_yaml": plan.scenario_text,
        "set": list(overrides),
        "runs_per_variant": runs,
        "total_runs": plan.total_runs,
        "seed": plan.seed,
        "grid": [{"path": a.path, "values": list(a.values)} for a in plan.grid],
        "vary": [str(v) for v in plan.vary],
        "variants": plan.describe(),
        "chunk_runs": chunk_runs,
        "chunks": previous["chunks"] if complete else len(chunks),
        "eosim_version": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "complete": False,
    }
    own_session = spark is None
    if own_session:
        try:
            engine.preflight(master)
        except engine.EngineError as exc:
            raise SweepError(str(exc)) from None
    fresh = not root.exists()
    try:
        done = set(store.prepare(manifest))
        # The scenario's text beside the results: each failing run's replay command names it
        # by its absolute path, so the command works from any directory and replays exactly
        # the text the sweep ran, whatever becomes of the file it was read from.
        copy = store.write_scenario(plan.scenario_text).resolve()
    except StoreError as exc:
        raise SweepError(str(exc)) from None
    except OSError as exc:
        raise SweepError(f"{root}: cannot write the scenario's copy: {exc}") from None
    plan = dataclasses.replace(plan, scenario_source=str(copy))

    schema = run_schema(plan)
    found: dict[str, int] = {}
    for c in sorted(done):
        _count_into(found, store.chunk_dir(c), schema.names)
    if complete:  # nothing to run (its chunks may be of an older layout)
        pending: list[tuple[int, int, int]] = []
        committed = plan.total_runs
    else:
        pending = [(c, s, e) for c, (s, e) in enumerate(chunks) if c not in done]
        committed = sum(chunks[c][1] - chunks[c][0] for c in done)
    bar = _progress(plan.total_runs, quiet)

    reported = [-1]

    def advance(progress: Progress) -> None:
        if bar.n != progress.runs:
            bar.update(progress.runs - bar.n)
        bar.set_postfix_str(_found_text(progress.found), refresh=True)
        if on_progress is not None and progress.runs != reported[0]:
            reported[0] = progress.runs
            on_progress(progress.runs)

    startup = 0.0
    runs_s = aggregate_s = 0.0
    interrupted = False
    interrupt = _Interrupt()
    try:
        if own_session:
            bar.set_description_str("starting Spark", refresh=True)
            try:
                spark, startup = engine.start_session(master, f"eosim-sweep-{scenario.name}")
            except engine.EngineError as exc:
                if fresh:
                    shutil.rmtree(root, ignore_errors=True)
                raise SweepError(str(exc)) from None
        bar.set_description_str("sweep", refresh=False)
        n_partitions = partitions or engine.default_partitions(spark)
        interrupt.install(spark)
        with ProgressPoller(advance, progress_interval) as poller:
            base = Progress(committed, found)
            poller.set_done(base)
            if pending:
                progress_dir = store.progress_dir(0)
                runner = make_chunk_runner(
                    plan,
                    sweep_id,
                    __version__,
                    str(root.resolve()),  # the executors' working directory is not ours
                    pending,
                    inject_failures,
                    str(progress_dir),
                    target if real else None,
                )
                poller.watch(progress_dir, base, plan.total_runs)
                interrupt.check()
                running = time.perf_counter()
                if real or in_process:
                    run_here(runner, len(pending), interrupt)
                else:
                    try:
                        engine.run_job(spark, runner, RESULT_DDL, len(pending), n_partitions)
                    except Exception:
                        interrupt.check()  # the job failed because Ctrl-C cancelled it
                        raise
                runs_s = time.perf_counter() - running
                missing = sorted({c for c, _, _ in pending} - set(store.done_chunks()))
                if missing:
                    raise SweepError(
                        f"result accounting failed: chunk {missing[0]} was not committed "
                        f"({len(missing)} chunk(s) missing); run the same command again"
                    )
                poller.poll()
                poller.set_done(Progress(plan.total_runs, poller.last.found))
        bar.close()

        aggregating = time.perf_counter()
        runs_df = spark.read.parquet(str(store.runs_dir.resolve()))
        variant_columns = [plan.typed_columns(v) for v in plan.variants]
        interrupt.check()
        try:
            table = aggregate(
                spark,
                runs_df,
                list(plan.variants),
                scenario.expect,
                plan.total_runs,
                variant_columns,
            )
        except AccountingError as exc:
            raise SweepError(str(exc)) from None
        except Exception:
            interrupt.check()
            raise
        aggregate_s = time.perf_counter() - aggregating
    except KeyboardInterrupt:
        interrupted = True
        bar.close()
        engine.silence_shutdown()
        raise
    finally:
        interrupt.restore()
        if own_session and spark is not None:
            _stop(spark, interrupted)

    expectations = {k: str(Condition.parse(v)) for k, v in scenario.expect_sweep.items()}
    expectations.update(expect or {})
    sweep_verdict = judge(table, expectations) if expectations else None
    if sweep_verdict is not None:
        columns = verdict_columns(sweep_verdict)
        for row in table:
            row.update(columns[row["variant"]])
    frame = pd.DataFrame(table)
    types = plan.column_types()
    for axis in plan.grid:
        column = param_column(axis.path)
        frame[column] = frame[column].astype(PANDAS_DTYPES[types[axis.path]])
    frame.to_parquet(root / "aggregate.parquet", index=False)
    frame.to_csv(root / "aggregate.csv", index=False)
    manifest["complete"] = True
    manifest["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    manifest["expect_met"] = all(row["expect_met"] for row in table)
    if sweep_verdict is not None:
        sweep_verdict.write(root)
        manifest["expect_sweep"] = sweep_verdict.expect
        manifest["expect_sweep_verdict"] = sweep_verdict.verdict
    store.finish(manifest)
    return SweepResult(
        out=root,
        sweep_id=sweep_id,
        total_runs=plan.total_runs,
        table=table,
        resumed_chunks=len(done),
        spark_startup_s=startup,
        wall_s=time.perf_counter() - started,
        params=[a.path for a in plan.grid],
        sweep_verdict=sweep_verdict,
        runs_s=runs_s,
        aggregate_s=aggregate_s,
    )


def checked_parse(plan: SweepPlan, overrides: Sequence[str]) -> Any:
    from eosim.analysis import outcome as checked

    return checked.parse(plan.scenario_text, plan.scenario_source, overrides)


def run_here(runner: Any, chunks: int, interrupt: Any) -> None:
    """Run a sweep's chunks in this process, one after another (a real cluster's runs)."""
    for i in range(chunks):
        interrupt.check()
        batch = pa.RecordBatch.from_pylist([{"id": i}], schema=pa.schema([("id", pa.int64())]))
        for _ in runner(iter([batch])):
            pass


class _Interrupt:
    """Ctrl-C during the chunks: cancel Spark's jobs from another thread, and let the main
    thread, which waits in a Py4J call, see its job fail and raise KeyboardInterrupt.

    PySpark's own handler cancels the jobs from inside the signal handler, on the main
    thread's Py4J connection while a call on it is in progress. That breaks the connection
    and prints hundreds of lines of tracebacks. A second Ctrl-C interrupts at once.
    """

    def __init__(self) -> None:
        self.requested = False
        self._spark: Any = None
        self._previous: Any = None

    def install(self, spark: Any) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._spark = spark
        self._previous = signal.signal(signal.SIGINT, self._handle)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        engine.silence_shutdown()
        threading.Thread(target=self._cancel, name="sweep-cancel", daemon=True).start()

    def _cancel(self) -> None:
        with contextlib.suppress(Exception):  # the session may be going away already
            self._spark.sparkContext.cancelAllJobs()


def _stop(spark: Any, interrupted: bool) -> None:
    """Stop the session; after Ctrl-C, cancel the running jobs first and swallow what the
    dying JVM connection raises."""
    if not interrupted:
        spark.stop()
        return
    try:
        spark.sparkContext.cancelAllJobs()
        spark.stop()
    except Exception:  # Py4J errors of a connection being torn down
        pass


def _count_into(found: dict[str, int], chunk_dir: Path, expected: Sequence[str]) -> None:
    """Add a committed chunk's runs-with-anomaly counts (reads only those columns), after
    checking that the chunk has every column of this version's run table."""
    names = ds.dataset(chunk_dir, format="parquet", partitioning="hive").schema.names
    missing = [name for name in expected if name not in names]
    if missing:
        raise SweepError(
            f"{chunk_dir}: written by an older eosim without the {missing[0]} column; "
            "this sweep cannot be resumed, start it again with another --out"
        )
    table = pq.read_table(chunk_dir, columns=list(ALL_ANOMALIES))
    for name in ALL_ANOMALIES:
        runs = sum(1 for v in table.column(name).to_pylist() if v)
        if runs:
            found[name] = found.get(name, 0) + runs


def _found_text(found: Mapping[str, int]) -> str:
    """The progress bar's text: every anomaly kind some finished run reported, with the runs
    that reported it (in the checks' order, then any other name)."""
    order = {name: i for i, name in enumerate(ALL_ANOMALIES)}
    names = sorted((n for n, c in found.items() if c), key=lambda n: (order.get(n, len(order)), n))
    hits = [f"{n}={found[n]}" for n in names]
    return "runs with " + ", ".join(hits) if hits else "no anomalies yet"


def _progress(total: int, quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="run",
        desc="sweep",
        disable=quiet or not sys.stderr.isatty(),
        file=sys.stderr,
        dynamic_ncols=True,
    )


def _cell(value: Any) -> str:
    from eosim.analysis.sweep.plan import render

    return render(value)


def anomaly_cell(row: dict[str, Any], a: str) -> str:
    """Anomaly ``a`` of an aggregate row, per run and per record side by side: runs with it,
    their share and its Wilson interval, then its records per million records sent and their
    run-clustered interval, e.g. ``24 (60.0% [44.6-73.7]) · 1,150 [980-1,320]``; the column's
    title says ``runs · ppm``."""
    text = (
        f"{row[f'runs_{a}']} ({100 * row[f'rate_{a}']:.1f}% "
        f"[{100 * row[f'ci_low_{a}']:.1f}-{100 * row[f'ci_high_{a}']:.1f}])"
    )
    if row.get(f"ppm_{a}") is None:  # no records, or an aggregate from before the rates
        return text
    low, high = format_ppm(row[f"ppm_{a}_low"]), format_ppm(row[f"ppm_{a}_high"])
    return f"{text} · {format_ppm(row[f'ppm_{a}'])} [{low}-{high}]"


def format_table(result: SweepResult) -> str:
    """The aggregate table as aligned text: the swept parameters by their short titles
    (:func:`~eosim.analysis.sweep.plan.short_names`, each spelled out on a ``param`` line
    below), the anomalies some run showed (duplicate and lost_write if none), each per run and
    per record (:func:`anomaly_cell`), acknowledgement and commit latency when some run
    measured them (acknowledgement latency if neither), and the verdict on ``expect:``, one
    word (``met``, ``NOT MET``), the reasons of a variant that missed it on ``expect`` lines
    below the table (:func:`expect_lines`), so that no reason widens the table."""
    lines = []
    shown = [a for a in ALL_ANOMALIES if any(r[f"runs_{a}"] for r in result.table)]
    shown = shown or ["duplicate", "lost_write"]
    latencies = [p for p in LATENCIES if any(r[f"{p}_p50_ms"] is not None for r in result.table)]
    latencies = latencies or ["ack"]
    names = short_names(result.params)
    head = ["variant", *(names[p] for p in result.params), "runs"]
    head += [f"{a} runs · ppm" for a in shown]
    head += [f"{p} p50 / p99" for p in latencies] + ["expect"]
    rows = []
    for r in result.table:
        cells = [
            str(r["variant"]),
            *(_cell(r[param_column(p)]) for p in result.params),
            str(r["runs"]),
        ]
        for a in shown:
            cells.append(anomaly_cell(r, a))
        for p in latencies:
            p50, p99 = r[f"{p}_p50_ms"], r[f"{p}_p99_ms"]
            cells.append("-" if p50 is None else f"{format_duration(p50)} / {format_duration(p99)}")
        cells.append("met" if r["expect_met"] else "NOT MET")
        rows.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines += [f"param      {names[p]} = {p}" for p in result.params if names[p] != p]
    lines += [f"expect     {line}" for line in expect_lines(result.table)]
    return "\n".join(lines)


def expect_lines(table: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why variants missed ``expect:``, one line per reason (each expectation missed, from the
    aggregate's ``expect_failures``), naming the variants that missed it for that reason:
    ``variants 0-2, 5 NOT MET: lost_write 0: broken in 3 of 20 runs``."""
    reasons: dict[str, list[int]] = {}
    for r in table:
        if r["expect_met"]:
            continue
        for reason in str(r.get("expect_failures") or "").split("; "):
            if reason:
                reasons.setdefault(reason, []).append(int(r["variant"]))
    lines = []
    for reason, variants in reasons.items():
        which = "variant" if len(variants) == 1 else "variants"
        lines.append(f"{which} {spans(variants)} NOT MET: {reason}")
    return lines


def spans(numbers: Sequence[int]) -> str:
    """Numbers in order, consecutive ones as a range: ``0-3, 7``."""
    runs: list[list[int]] = []
    for k in numbers:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
