"""run_sweep: plan, prepare the results directory, run chunks on Spark, aggregate.

Everything that can be wrong with the input is checked before Spark starts: the grid and vary
paths (every variant is validated as a scenario), the run count and the output directory.
The sweep then runs its chunks in one Spark job, skipping chunks a previous, interrupted
invocation already committed (their runs are summed from their files). Each task returns the
partial aggregate of its chunks; the driver merges them, verifies exactly-once accounting
(every chunk summed once, every (variant, run) present exactly once), writes the aggregate
table and marks the manifest complete. No run row is read back after it was written.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.stats import format_duration, format_ppm
from eosim.analysis.sweep import engine
from eosim.analysis.sweep.aggregate import LATENCIES, AccountingError, Sums, table
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
from eosim.analysis.sweep.task import (
    RESULT_DDL,
    found_in,
    make_chunk_runner,
    read_chunk,
    run_schema,
)
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
    cluster), each run committed as its own chunk, without Spark.

    ``in_process`` runs the model's chunks the same way, one after another in this process
    (the same chunk files, commits, partial aggregates and progress), without Spark: the
    serial baseline that ``benchmarks/bench_sweep.py`` compares Spark's execution with.

    The phases, each a function below: plan the sweep, lay out its chunks and manifest, open
    the results directory, sum the chunks committed before, run the pending chunks (their
    tasks return partial sums), build the table from the sums, judge ``expect_sweep:``, write
    the aggregate and mark the manifest complete.
    """
    started = time.perf_counter()
    plan, scenario = build_plan(scenario_path, runs, grid, vary, seed, overrides)
    plan, real = _for_target(plan, target)
    if partitions is not None and partitions < 1:
        raise SweepError(f"--partitions must be at least 1, got {partitions}")
    sweep = _lay_out(plan, scenario, scenario_path, overrides, out, command, chunk_runs, real)
    if real and not sweep.complete:
        _note_machine(sweep, target)
    local = real or in_process
    if spark is None and not local and not sweep.complete:
        _preflight(master)
    sweep = _open_store(sweep)
    sums, found = _committed_sums(sweep)
    options = _RunOptions(
        master, spark, partitions, quiet, on_progress, progress_interval, local, target
    )
    timings = _run_pending(sweep, sums, found, options)
    aggregating = time.perf_counter()
    table = _table(sweep, sums)
    timings.aggregate_s = time.perf_counter() - aggregating
    expectations = {k: str(Condition.parse(v)) for k, v in scenario.expect_sweep.items()}
    expectations.update(expect or {})
    sweep_verdict = _judge(table, expectations)
    _write_results(sweep, table, sweep_verdict)
    return SweepResult(
        out=sweep.store.root,
        sweep_id=sweep.sweep_id,
        total_runs=plan.total_runs,
        table=table,
        resumed_chunks=len(sweep.done),
        spark_startup_s=timings.startup_s,
        wall_s=time.perf_counter() - started,
        params=[a.path for a in plan.grid],
        sweep_verdict=sweep_verdict,
        runs_s=timings.runs_s,
        aggregate_s=timings.aggregate_s,
    )


@dataclass
class _Sweep:
    """What the phases of :func:`run_sweep` share: the plan, its chunks, the store and its
    manifest, and the chunks already committed."""

    plan: SweepPlan
    scenario: Any
    sweep_id: str
    store: SweepStore
    manifest: dict[str, Any]
    chunks: list[tuple[int, int]]
    layout: int
    complete: bool
    done: list[int] = field(default_factory=list)
    # Whether run_sweep created the results directory (removed again if Spark cannot start).
    fresh: bool = False

    @property
    def pending(self) -> list[tuple[int, int, int]]:
        """The chunks to run: (chunk, first run id, end run id)."""
        if self.complete:  # nothing to run (its chunks may be of an older layout)
            return []
        done = set(self.done)
        return [(c, s, e) for c, (s, e) in enumerate(self.chunks) if c not in done]


@dataclass
class _RunOptions:
    """How :func:`_run_pending` runs the chunks."""

    master: str | None
    spark: Any
    partitions: int | None
    quiet: bool
    on_progress: Callable[[int], None] | None
    progress_interval: float
    # True: in this process, one chunk after another (a real cluster's runs, or in_process).
    local: bool
    target: Any


@dataclass
class _Timings:
    startup_s: float = 0.0
    runs_s: float = 0.0
    aggregate_s: float = 0.0


def _for_target(plan: SweepPlan, target: Any) -> tuple[SweepPlan, bool]:
    """The plan for a real cluster (``target`` not the model), checked against what the
    cluster can do; and whether it is one."""
    real = target is not None and target.name != "model"
    if not real:
        return plan, False
    plan = dataclasses.replace(plan, target=target.name)
    for variant_overrides in [plan.overrides(v) for v in plan.variants]:
        refused = target.refusals(checked_parse(plan, variant_overrides))
        if refused:
            raise SweepError(refused[0])
    return plan, True


def _lay_out(
    plan: SweepPlan,
    scenario: Any,
    scenario_path: str,
    overrides: Sequence[str],
    out: str | Path | None,
    command: str | None,
    chunk_runs: int | None,
    real: bool,
) -> _Sweep:
    """The sweep's chunks and manifest. The same sweep, started before in ``out``, keeps its
    chunking (and a finished one its layout)."""
    from eosim import __version__

    if real and chunk_runs is None:
        chunk_runs = 1
    sweep_id = plan.sweep_id()
    root = Path(out) if out is not None else Path("results") / scenario.name
    store = SweepStore(root)
    try:
        existing = store.read_manifest() if root.is_dir() else None
    except StoreError as exc:
        raise SweepError(str(exc)) from None
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
        "runs_per_variant": plan.runs,
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
    if real:
        manifest["machines"] = list(previous.get("machines", []))
    return _Sweep(plan, scenario, sweep_id, store, manifest, chunks, layout, complete)


def _note_machine(sweep: _Sweep, target: Any) -> None:
    """A real sweep records the machine its runs are made on (``eosim.real.machine``), each
    machine once: a sweep resumed on another one says so on stderr, since Kafka's figures
    scale with the machine (docs/calibration.md, "One machine for both sides")."""
    from eosim.real.machine import describe, differs

    here = target.machine()
    machines = sweep.manifest.setdefault("machines", [])
    if any(differs(here, seen) is None for seen in machines):
        return
    if machines:
        reason = differs(here, machines[-1])
        print(
            f"eosim sweep: warning: resumed on another machine than its earlier runs "
            f"({reason}; now {describe(here)}): the runs table mixes them",
            file=sys.stderr,
        )
    machines.append(here)


def _preflight(master: str | None) -> None:
    """Java and the master, checked before anything is written."""
    try:
        engine.preflight(master)
    except engine.EngineError as exc:
        raise SweepError(str(exc)) from None


def _open_store(sweep: _Sweep) -> _Sweep:
    """Create the results directory, or accept it for resuming the same sweep (noting its
    committed chunks), and copy the scenario's text beside the results: each failing run's
    replay command names it by its absolute path, so the command works from any directory
    and replays exactly the text the sweep ran, whatever becomes of the file it was read
    from."""
    store = sweep.store
    fresh = not store.root.exists()
    try:
        done = store.prepare(sweep.manifest)
        copy = store.write_scenario(sweep.plan.scenario_text).resolve()
    except StoreError as exc:
        raise SweepError(str(exc)) from None
    except OSError as exc:
        raise SweepError(f"{store.root}: cannot write the scenario's copy: {exc}") from None
    plan = dataclasses.replace(sweep.plan, scenario_source=str(copy))
    return dataclasses.replace(sweep, plan=plan, done=done, fresh=fresh)


def _committed_sums(sweep: _Sweep) -> tuple[Sums, dict[str, int]]:
    """The partial aggregate of the chunks committed before this invocation, and per anomaly
    their runs that reported it (for the progress bar), read one chunk at a time after
    checking that each has every column of this version's run table."""
    sums = Sums(sweep.scenario.expect)
    found: dict[str, int] = {}
    expected = run_schema(sweep.plan).names
    columns = sums.columns()
    for chunk in sweep.done:
        for path in sorted(sweep.store.chunk_dir(chunk).glob("variant=*/*.parquet")):
            names = pq.read_schema(path).names
            missing = [n for n in expected if n not in names and n != "variant"]
            if missing:
                raise SweepError(
                    f"{sweep.store.chunk_dir(chunk)}: written by an older eosim without the "
                    f"{missing[0]} column; this sweep cannot be resumed, start it again with "
                    "another --out"
                )
            rows = read_chunk(path, columns)
            runs = None
            if sweep.layout == LAYOUT and chunk < len(sweep.chunks):
                start, end = sweep.chunks[chunk]
                variant, first = sweep.plan.locate(start)
                runs = (variant, first, first + end - start)
            sums.add(rows, runs)
            for name, n in found_in(rows).items():
                found[name] = found.get(name, 0) + n
    return sums, found


def _run_pending(
    sweep: _Sweep, sums: Sums, found: dict[str, int], options: _RunOptions
) -> _Timings:
    """Run the pending chunks, on Spark or here, with the progress bar, merging the partial
    aggregates their tasks return into ``sums``; then check that each was committed and
    summed exactly once. Ctrl-C stops Spark quietly and raises KeyboardInterrupt."""
    from eosim import __version__

    plan, store = sweep.plan, sweep.store
    pending = sweep.pending
    if options.local and options.target is not None:
        pending = interleaved(pending, plan)
    committed = plan.total_runs - sum(e - s for _, s, e in pending)
    timings = _Timings()
    bar = _progress(plan.total_runs, options.quiet)
    advance = _advance(bar, options.on_progress)
    spark = options.spark
    own_session = spark is None and bool(pending) and not options.local
    interrupted = False
    interrupt = _Interrupt()
    try:
        if own_session:
            spark, timings.startup_s = _start_spark(sweep, options.master, bar)
        bar.set_description_str("sweep", refresh=False)
        if spark is not None and not options.local:
            interrupt.install(spark)
        with ProgressPoller(advance, options.progress_interval) as poller:
            base = Progress(committed, found)
            poller.set_done(base)
            if pending:
                # Tasks report their progress only when someone follows it: a bar on a
                # terminal, or on_progress.
                watched = options.on_progress is not None or not bar.disable
                store.staging_dir.mkdir(parents=True, exist_ok=True)
                progress_dir = store.progress_dir(0) if watched else None
                runner = make_chunk_runner(
                    plan,
                    sweep.sweep_id,
                    __version__,
                    str(store.root.resolve()),  # the executors' working directory is not ours
                    pending,
                    None if progress_dir is None else str(progress_dir),
                    options.target if options.local else None,
                    expect=sweep.scenario.expect,
                )
                if progress_dir is not None:
                    poller.watch(progress_dir, base, plan.total_runs)
                interrupt.check()
                running = time.perf_counter()
                if options.local:
                    results = run_here(runner, len(pending), interrupt)
                else:
                    n_partitions = options.partitions or engine.default_partitions(spark)
                    try:
                        results = engine.run_job(
                            spark, runner, RESULT_DDL, len(pending), n_partitions
                        )
                    except Exception:
                        interrupt.check()  # the job failed because Ctrl-C cancelled it
                        raise
                timings.runs_s = time.perf_counter() - running
                _merge_results(sweep, sums, results)
                poller.poll()
                poller.set_done(Progress(plan.total_runs, poller.last.found))
        bar.close()
    except KeyboardInterrupt:
        interrupted = True
        bar.close()
        engine.silence_shutdown()
        raise
    finally:
        interrupt.restore()
        if own_session and spark is not None:
            _stop(spark, interrupted)
    return timings


def interleaved(chunks: list[tuple[int, int, int]], plan: SweepPlan) -> list[tuple[int, int, int]]:
    """A real cluster's chunks in the order that interleaves the variants (run 0 of each
    variant, then run 1 of each, ...): a real cluster drifts over a sweep (warmer, older
    logs), and a variant run last would meet another cluster than one run first."""
    return sorted(chunks, key=lambda c: (plan.locate(c[1])[1], plan.locate(c[1])[0], c[0]))


def _start_spark(sweep: _Sweep, master: str | None, bar: Any) -> tuple[Any, float]:
    bar.set_description_str("starting Spark", refresh=True)
    try:
        return engine.start_session(master, f"eosim-sweep-{sweep.scenario.name}")
    except engine.EngineError as exc:
        if sweep.fresh:
            shutil.rmtree(sweep.store.root, ignore_errors=True)
        raise SweepError(str(exc)) from None


def _advance(bar: Any, on_progress: Callable[[int], None] | None) -> Callable[[Progress], None]:
    """What the progress poller calls: the bar, then ``on_progress`` when the runs grew."""
    reported = [-1]

    def advance(progress: Progress) -> None:
        if bar.n != progress.runs:
            bar.update(progress.runs - bar.n)
        bar.set_postfix_str(_found_text(progress.found), refresh=True)
        if on_progress is not None and progress.runs != reported[0]:
            reported[0] = progress.runs
            on_progress(progress.runs)

    return advance


def _merge_results(sweep: _Sweep, sums: Sums, results: Iterable[Any]) -> None:
    """Merge the tasks' partial aggregates into ``sums``, after checking that the pending
    chunks were each covered by exactly one task's result and are committed."""
    expect = sweep.scenario.expect
    covered: list[int] = []
    for result in results:
        covered += result["chunks"]
        sums.merge(Sums.from_bytes(result["sums"], expect))
    pending = sorted(c for c, _, _ in sweep.pending)
    missing = sorted(set(pending) - set(sweep.store.done_chunks()))
    if missing:
        raise SweepError(
            f"result accounting failed: chunk {missing[0]} was not committed "
            f"({len(missing)} chunk(s) missing); run the same command again"
        )
    if sorted(covered) != pending:
        raise SweepError(
            f"result accounting failed: the tasks summed chunks {spans(sorted(covered))}, "
            f"expected {spans(pending)}; run the same command again"
        )


def _table(sweep: _Sweep, sums: Sums) -> list[dict[str, Any]]:
    plan = sweep.plan
    variant_columns = [plan.typed_columns(v) for v in plan.variants]
    try:
        return table(sums, list(plan.variants), plan.total_runs, variant_columns)
    except AccountingError as exc:
        raise SweepError(str(exc)) from None


def _judge(table: list[dict[str, Any]], expectations: dict[str, str]) -> SweepVerdict | None:
    """The sweep's own expectations judged on the table, their columns added to it."""
    if not expectations:
        return None
    sweep_verdict = judge(table, expectations)
    columns = verdict_columns(sweep_verdict)
    for row in table:
        row.update(columns[row["variant"]])
    return sweep_verdict


def _write_results(
    sweep: _Sweep, table: list[dict[str, Any]], sweep_verdict: SweepVerdict | None
) -> None:
    """The aggregate (Parquet, with each parameter's type, and CSV), the verdict, and the
    manifest marked complete."""
    plan, root, manifest = sweep.plan, sweep.store.root, sweep.manifest
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
    sweep.store.finish(manifest)


def checked_parse(plan: SweepPlan, overrides: Sequence[str]) -> Any:
    from eosim.analysis import outcome as checked

    return checked.parse(plan.scenario_text, plan.scenario_source, overrides)


def run_here(runner: Any, chunks: int, interrupt: Any) -> list[dict[str, Any]]:
    """Run a sweep's chunks in this process, one after another (a real cluster's runs, or
    ``in_process``); the result rows, as Spark's job would collect them."""
    results = []
    for i in range(chunks):
        interrupt.check()
        batch = pa.RecordBatch.from_pylist([{"id": i}], schema=pa.schema([("id", pa.int64())]))
        for out in runner(iter([batch])):
            results += out.to_pylist()
    return results


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
