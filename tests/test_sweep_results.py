"""Readable, reusable sweep results: typed parameter columns, the documented DuckDB and pandas
queries, latency sketches, and per-run progress."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from test_sweep_spark import SCENARIO, SMALL

from eosim.analysis.stats import (
    RELATIVE_ACCURACY,
    format_duration,
    merge_sketches,
    sketch,
    sketch_count,
    sketch_quantile,
)
from eosim.analysis.sweep import run_sweep
from eosim.analysis.sweep.aggregate import Sums, aggregate, table
from eosim.analysis.sweep.plan import GridAxis, PlanError, SweepPlan, VarySpec, param_column
from eosim.analysis.sweep.progress import (
    Progress,
    ProgressPoller,
    finished,
    finished_runs,
    report_progress,
)

GRID = (
    "network.response_loss=0,0.05",
    "producers.0.config.enable.idempotence=false,true",
)
VARY = ("producers.0.config.retries=randint(3,9)",)
TYPES = {
    "p_network_response_loss": "double",
    "p_producers_0_config_enable_idempotence": "bool",
    "p_producers_0_config_retries": "int64",
}


@pytest.fixture(scope="module")
def typed(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("typed") / "sweep"
    seen: list[int] = []
    result = run_sweep(
        SCENARIO,
        5,
        grid=GRID,
        vary=VARY,
        overrides=SMALL,
        out=out,
        quiet=True,
        spark=spark,
        chunk_runs=20,
        partitions=2,
        on_progress=seen.append,
        progress_interval=0.02,
    )
    return result, out, seen


def arrow_types(schema) -> dict[str, str]:
    names = {"bool": "bool", "int64": "int64", "double": "double"}
    return {f.name: names.get(str(f.type), str(f.type)) for f in schema if f.name.startswith("p_")}


def test_each_swept_parameter_has_a_typed_column_alike_in_runs_and_aggregate(typed):
    _, out, _ = typed
    runs = ds.dataset(out / "runs", format="parquet", partitioning="hive").schema
    assert arrow_types(runs) == TYPES
    aggregate = pq.read_schema(out / "aggregate.parquet")
    grid_only = {k: v for k, v in TYPES.items() if k != "p_producers_0_config_retries"}
    assert arrow_types(aggregate) == grid_only
    frame = pd.read_parquet(out / "runs")
    assert sorted(frame.p_network_response_loss.unique()) == [0.0, 0.05]
    assert set(frame.p_producers_0_config_enable_idempotence) == {False, True}
    assert frame.p_producers_0_config_retries.between(3, 9).all()
    # The JSON is kept, and agrees with the typed columns.
    for _, row in frame.iterrows():
        params = json.loads(row["params"])
        assert float(params["network.response_loss"]) == row.p_network_response_loss
        assert int(params["producers.0.config.retries"]) == row.p_producers_0_config_retries


def test_the_documented_duckdb_query(typed):
    duckdb = pytest.importorskip("duckdb")
    result, out, _ = typed
    # As in docs/sweeps.md.
    query = f"""
        SELECT p_network_response_loss AS loss,
               p_producers_0_config_enable_idempotence AS idempotence,
               count(*) AS runs,
               count(*) FILTER (WHERE duplicate > 0) AS runs_with_duplicates
        FROM read_parquet('{out}/runs/*/*/*.parquet', hive_partitioning = true)
        GROUP BY ALL ORDER BY ALL
    """
    rows = duckdb.sql(query).fetchall()
    assert [r[:3] for r in rows] == [
        (0.0, False, 5),
        (0.0, True, 5),
        (0.05, False, 5),
        (0.05, True, 5),
    ]
    by_variant = {(r["p_network_response_loss"], r[GRID_BOOL]): r for r in result.table}
    for loss, idem, _, dups in rows:
        assert by_variant[(loss, idem)]["runs_duplicate"] == dups
    # The aggregate joins on the same typed columns.
    joined = duckdb.sql(
        f"SELECT a.variant, count(*) FROM read_parquet('{out}/aggregate.parquet') a "
        f"JOIN read_parquet('{out}/runs/*/*/*.parquet', hive_partitioning = true) r "
        "USING (p_network_response_loss, p_producers_0_config_enable_idempotence) "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert joined == [(v, 5) for v in range(4)]


GRID_BOOL = "p_producers_0_config_enable_idempotence"


def test_the_documented_pandas_example(typed):
    _, out, _ = typed
    # As in docs/sweeps.md.
    runs = pd.read_parquet(out / "runs")
    table = (
        runs.assign(dup=runs.duplicate > 0)
        .groupby(["p_network_response_loss", "p_producers_0_config_enable_idempotence"])
        .agg(runs=("run", "size"), runs_with_duplicates=("dup", "sum"))
    )
    aggregate = pd.read_parquet(out / "aggregate.parquet")
    merged = aggregate.merge(
        table.reset_index(), on=["p_network_response_loss", GRID_BOOL], validate="one_to_one"
    )
    assert len(merged) == 4
    assert (merged.runs_x == merged.runs_y).all()
    assert (merged.runs_duplicate == merged.runs_with_duplicates).all()


def test_progress_advances_per_run_not_per_chunk(typed):
    result, _, seen = typed
    # One job of 20 runs: a bar moved per job would only have seen 0 and 20. A task reports
    # after its first run and then at most every REPORT_INTERVAL_S, so how many values fall
    # between depends on how fast the runs are; at least one always does.
    assert seen == sorted(set(seen)) and seen[0] == 0 and seen[-1] == result.total_runs == 20
    assert [n for n in seen if 0 < n < 20], seen


def test_latency_quantiles_come_from_the_merged_sketches(typed):
    result, out, _ = typed
    runs = pd.read_parquet(out / "runs", columns=["variant", "ack_latency_sketch"])
    for entry in result.table:
        blobs = runs[runs.variant == entry["variant"]].ack_latency_sketch
        merged = merge_sketches(list(blobs))
        assert entry["ack_p50_ms"] == pytest.approx(sketch_quantile(merged, 0.5))
        assert entry["ack_p99_ms"] == pytest.approx(sketch_quantile(merged, 0.99))
        assert sketch_count(entry["ack_latency_sketch"]) == sketch_count(merged) > 0


def test_a_merged_sketch_is_within_its_relative_accuracy():
    rng = np.random.default_rng(7)
    parts = [rng.lognormal(2.0, 1.5, size=n) for n in (1, 50, 700, 3000)]
    merged = merge_sketches([sketch(p) for p in parts] + [None, sketch([])])
    every = np.concatenate(parts)
    assert sketch_count(merged) == len(every)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999):
        exact = float(np.quantile(every, q, method="lower"))
        assert sketch_quantile(merged, q) == pytest.approx(exact, rel=RELATIVE_ACCURACY)
    assert sketch([]) is None and merge_sketches([None]) is None
    assert sketch_quantile(None, 0.5) is None


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0.85, "850 µs"),
        (8.912, "8.91 ms"),
        (8.9, "8.9 ms"),
        (28183.8, "28.2 s"),
        (1412.5, "1.41 s"),
        (999.96, "1 s"),
        (12_345_678.0, "12300 s"),
    ],
)
def test_durations_have_units_and_three_significant_digits(ms, text):
    assert format_duration(ms) == text


def test_column_names_and_types_from_the_plan():
    assert param_column("network.response_loss") == "p_network_response_loss"
    assert param_column("faults.0.extra-latency") == "p_faults_0_extra_latency"
    plan = SweepPlan(
        "x: 1",
        "s.yaml",
        2,
        1,
        grid=(
            GridAxis.parse("a.b=1,2"),
            GridAxis.parse("c=0,0.5"),
            GridAxis.parse("d=2s,4s"),
            GridAxis.parse("e=true,false"),
            GridAxis.parse("f=1,x"),
        ),
        vary=(VarySpec.parse("g=uniform(1,2)"), VarySpec.parse("h=choice(1,2)")),
    )
    assert plan.column_types() == {
        "a.b": "int64",
        "c": "double",
        "d": "string",
        "e": "bool",
        "f": "string",
        "g": "double",
        "h": "int64",
    }
    assert plan.typed_columns({"c": 0, "f": 1, "e": True}) == {"p_c": 0.0, "p_f": "1", "p_e": True}
    with pytest.raises(PlanError, match=r"a\.b and A_b would share the column p_A_b"):
        SweepPlan("x: 1", "s.yaml", 1, 1, grid=(GridAxis.parse("a.b=1"), GridAxis.parse("A_b=2")))


def test_progress_files_count_each_partition_once_across_retries(tmp_path):
    report_progress(str(tmp_path), (0, 0), 3)
    report_progress(str(tmp_path), (1, 0), 2)
    report_progress(str(tmp_path), (0, 1), 1)  # partition 0 retried, at its first run again
    (tmp_path / "1-0.123.tmp").write_text("99")  # a file being written
    assert finished_runs(tmp_path) == 5
    report_progress(str(tmp_path), (0, 1), 4)
    assert finished_runs(tmp_path) == 6
    assert finished_runs(tmp_path / "missing") == 0

    seen: list[Progress] = []
    with ProgressPoller(seen.append, interval=3600) as poller:
        poller.set_done(Progress(10))
        poller.watch(tmp_path, Progress(10), 14)
        poller.poll()  # 10 + 6, capped at the job's end
        poller.set_done(Progress(14))
    assert [p.runs for p in seen] == [10, 14]


def test_progress_counts_every_anomaly_kind_the_tasks_report(tmp_path):
    """The bar named no anomaly until a chunk was committed, so a sweep in one chunk said
    "no anomalies yet" while its runs lost writes: the tasks' progress files now carry, per
    anomaly kind, the runs that reported it, and the bar shows them as they come."""
    from eosim.analysis.sweep.runner import _found_text

    report_progress(str(tmp_path), (0, 0), 3, {"lost_write": 2})
    report_progress(str(tmp_path), (1, 0), 2, {"lost_write": 1, "duplicate": 2})
    report_progress(str(tmp_path), (1, 1), 1, {"G0": 1})  # a retry, behind its first attempt
    assert finished(tmp_path) == Progress(5, {"lost_write": 3, "duplicate": 2})
    seen: list[Progress] = []
    with ProgressPoller(seen.append, interval=3600) as poller:
        base = Progress(10, {"torn_transaction": 1})
        poller.watch(tmp_path, base, 40)
        poller.poll()
        report_progress(str(tmp_path), (2, 0), 0, {})  # nothing new: no call
        poller.poll()
        report_progress(
            str(tmp_path),
            (1, 1),
            3,
            {"lost_write": 1, "duplicate": 2, "G1c": 0, "hanging_transaction": 1},
        )
        poller.poll()
    assert [p.runs for p in seen] == [15, 16]
    assert seen[0].found == {"torn_transaction": 1, "lost_write": 3, "duplicate": 2}
    text = _found_text(seen[1].found)
    assert text == "runs with duplicate=2, lost_write=3, torn_transaction=1, hanging_transaction=1"
    assert _found_text({}) == "no anomalies yet"


def test_a_task_reports_after_every_run(tmp_path, monkeypatch):
    import pyarrow as pa

    from eosim.analysis.sweep import task

    plan = SweepPlan(Path(SCENARIO).read_text(), SCENARIO, 3, 1, base_overrides=SMALL)
    progress = tmp_path / "progress"
    progress.mkdir()
    (tmp_path / "_staging").mkdir()
    seen_before: list[int] = []
    real = task.execute_run

    def spy(*args):
        seen_before.append(finished_runs(progress))
        return real(*args)

    monkeypatch.setattr(task, "execute_run", spy)
    monkeypatch.setattr(task, "REPORT_INTERVAL_S", 0.0)
    runner = task.make_chunk_runner(
        plan,
        "s",
        "v",
        str(tmp_path),
        [(0, 0, 2), (1, 2, 3)],
        progress_dir=str(progress),
        expect={"duplicate": "0"},
    )
    out = [
        r for b in runner(iter([pa.RecordBatch.from_pydict({"id": [0, 1]})])) for r in b.to_pylist()
    ]
    assert len(out) == 1 and out[0]["chunks"] == [0, 1] and out[0]["skipped"] == 0
    # The task's partial aggregate is that of the rows it committed.
    sums = Sums.from_bytes(out[0]["sums"], {"duplicate": "0"})
    committed = pd.read_parquet(tmp_path / "runs").to_dict("records")
    expected = aggregate(committed, [{}], {"duplicate": "0"}, 3)
    assert table(sums, [{}], 3) == expected
    assert seen_before == [0, 1, 2] and finished_runs(progress) == 3
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet"))
    assert files == [
        "runs/chunk=00000/variant=0/part-00000.parquet",
        "runs/chunk=00001/variant=0/part-00001.parquet",
    ]
    assert list((tmp_path / "_staging").iterdir()) == []
    # Run again (a retried task): the committed chunks are skipped, and still counted.
    again = [
        r for b in runner(iter([pa.RecordBatch.from_pydict({"id": [0, 1]})])) for r in b.to_pylist()
    ]
    assert again[0]["skipped"] == 2 and again[0]["chunks"] == [0, 1]
    assert table(Sums.from_bytes(again[0]["sums"], {"duplicate": "0"}), [{}], 3) == expected
    assert len(seen_before) == 3


def test_a_task_reports_the_anomalies_of_its_runs_before_committing_them(tmp_path, monkeypatch):
    """Runs that lost writes show in the task's progress file run by run, before their chunk
    is committed, with every anomaly kind the committed rows hold."""
    import pyarrow as pa

    from eosim.analysis.sweep import task

    lossy = str(Path(SCENARIO).parent / "at-most-once.yaml")
    plan = SweepPlan(Path(lossy).read_text(), lossy, 2, 1)
    progress = tmp_path / "progress"
    progress.mkdir()
    (tmp_path / "_staging").mkdir()
    at_commit: list[Progress] = []
    real = task.commit_chunk

    def spy(staged, target):
        at_commit.append(finished(progress))
        return real(staged, target)

    monkeypatch.setattr(task, "commit_chunk", spy)
    monkeypatch.setattr(task, "REPORT_INTERVAL_S", 0.0)
    runner = task.make_chunk_runner(
        plan, "s", "v", str(tmp_path), [(0, 0, 2)], progress_dir=str(progress), expect={}
    )
    list(runner(iter([pa.RecordBatch.from_pydict({"id": [0]})])))
    committed = task.committed_found(str(next(tmp_path.rglob("part-*.parquet"))))
    assert committed.get("lost_write", 0) >= 1, committed
    assert at_commit == [Progress(2, committed)]


def test_tasks_report_progress_only_when_someone_follows_it(tmp_path, monkeypatch):
    """A quiet sweep without ``on_progress`` has no bar to move: its tasks write no progress
    files; with ``on_progress`` they do, and the callback sees every run."""
    from eosim.analysis.sweep import task

    reports: list[int] = []
    real = task.report_progress

    def spy(directory, which, done, found=None):
        reports.append(done)
        return real(directory, which, done, found)

    monkeypatch.setattr(task, "report_progress", spy)
    kw = {"overrides": SMALL, "quiet": True, "in_process": True, "chunk_runs": 2}
    run_sweep(SCENARIO, 3, out=tmp_path / "unwatched", **kw)
    assert reports == []
    seen: list[int] = []
    run_sweep(SCENARIO, 3, out=tmp_path / "watched", on_progress=seen.append, **kw)
    assert reports and seen[-1] == 3
