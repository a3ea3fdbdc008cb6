"""Sweeps on the shared embedded Spark: results, aggregate, exactly-once, resume, clashes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from eosim import api
from eosim.analysis.stats import RatioSums, ratio_interval, wilson_interval
from eosim.analysis.sweep import SweepError, run_sweep, task
from eosim.analysis.sweep.task import NONDETERMINISTIC

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "scenarios" / "at-least-once.yaml")
SMALL = ("producers.0.workload.records=150", "producers.0.workload.rate=3000")
GRID = ("network.response_loss=0,0.05",)


def sweep(spark, out: Path, inject_failures: frozenset[tuple[int, int]] = frozenset(), **kw):
    """A sweep of GRID on the shared Spark; ``inject_failures`` kills the Python worker as it
    starts chunk c in attempt a, for each (c, a) (:func:`task.injected_failures`)."""
    args = {"grid": GRID, "overrides": SMALL, "quiet": True, "spark": spark, "out": out}
    with task.injected_failures(inject_failures):
        return run_sweep(SCENARIO, kw.pop("runs", 6), **{**args, **kw})


def rows(out: Path) -> pd.DataFrame:
    """The run table, to compare sweeps row for row: without the columns that differ between
    two executions of a run, and with the results directory in replay commands (they name
    its copy of the scenario) written RESULTS."""
    frame = pd.read_parquet(out / "runs")
    frame = frame.drop(columns=[*NONDETERMINISTIC, "chunk"])
    frame["replay"] = frame["replay"].str.replace(str(out.resolve()), "RESULTS", regex=False)
    frame["variant"] = frame["variant"].astype(int)
    for column in ("ack_latency_hist", "commit_latency_hist"):
        frame[column] = frame[column].map(list)
    return frame.sort_values(["variant", "run"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweeps") / "clean"
    result = sweep(spark, out, chunk_runs=4)
    return result, out


def test_one_row_per_run_and_a_manifest(clean):
    result, out = clean
    frame = rows(out)
    assert len(frame) == 12 and result.total_runs == 12
    assert sorted(zip(frame.variant, frame.run, strict=True)) == [
        (v, r) for v in range(2) for r in range(6)
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["total_runs"] == 12
    assert manifest["variants"][1]["params"] == {"network.response_loss": 0.05}
    assert (out / "aggregate.parquet").exists() and (out / "aggregate.csv").exists()
    assert not (out / "_staging").exists()
    # Chunks of at most 4 runs, never across a variant: 6 runs per variant make two each.
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "chunk=00000",
        "chunk=00001",
        "chunk=00002",
        "chunk=00003",
    ]
    for chunk, variant in ((0, 0), (1, 0), (2, 1), (3, 1)):
        files = list((out / "runs" / f"chunk={chunk:05d}").rglob("*.parquet"))
        assert [f.relative_to(out / "runs").as_posix() for f in files] == [
            f"chunk={chunk:05d}/variant={variant}/part-{chunk:05d}.parquet"
        ]
    assert manifest["chunks"] == 4 and manifest["chunk_runs"] == 4


def test_aggregate_matches_the_run_table(clean):
    result, out = clean
    frame = rows(out)
    for entry in result.table:
        mine = frame[frame.variant == entry["variant"]]
        assert entry["runs"] == len(mine)
        for name in ("duplicate", "nonmonotonic_send", "lost_write"):
            k = int((mine[name] > 0).sum())
            assert entry[f"runs_{name}"] == k
            assert (entry[f"ci_low_{name}"], entry[f"ci_high_{name}"]) == pytest.approx(
                wilson_interval(k, len(mine))
            )
            # Per record: the run-clustered ratio over the runs' own counts.
            pairs = list(zip(mine["sent"], mine[name], strict=True))
            per_record = ratio_interval(RatioSums.of((int(x), int(y)) for x, y in pairs))
            got = (entry[f"ppm_{name}"], entry[f"ppm_{name}_low"], entry[f"ppm_{name}_high"])
            assert got == pytest.approx(per_record)
            assert entry[f"total_{name}"] == int(mine[name].sum())
        assert entry["sent"] == int(mine["sent"].sum()) > 0
    # Response loss makes duplicates more common: the table must show it.
    by_variant = {e["variant"]: e for e in result.table}
    assert by_variant[1]["runs_duplicate"] >= by_variant[0]["runs_duplicate"]
    assert by_variant[1]["runs_duplicate"] > 0
    assert by_variant[1]["ppm_duplicate"] > 0 and by_variant[0]["ppm_duplicate_low"] == 0


def test_a_sweep_run_in_process_writes_what_spark_writes(spark, clean, tmp_path, monkeypatch):
    """``in_process`` (the serial baseline of benchmarks/bench_sweep.py) runs the same chunks
    in the driver, without Spark: the same run table and aggregate, and the phases' times are
    reported."""
    from eosim.analysis.sweep import engine

    def no_spark(*args, **kwargs):
        raise AssertionError("an in-process sweep started Spark")

    monkeypatch.setattr(engine, "preflight", no_spark)
    monkeypatch.setattr(engine, "start_session", no_spark)
    result, out = clean
    mine = sweep(None, tmp_path / "serial", chunk_runs=4, in_process=True)
    pd.testing.assert_frame_equal(rows(tmp_path / "serial"), rows(out))
    assert mine.table == result.table
    assert sorted(p.name for p in (tmp_path / "serial" / "runs").iterdir()) == sorted(
        p.name for p in (out / "runs").iterdir()
    )
    assert mine.runs_s > 0 and mine.aggregate_s > 0
    assert mine.runs_s + mine.aggregate_s <= mine.wall_s


def test_plain_sweep_has_transactional_columns_but_no_transactions(clean):
    from eosim.analysis.checks import ALL_ANOMALIES
    from eosim.analysis.sweep.runner import format_table
    from eosim.analysis.sweep.task import SCHEMA

    result, out = clean
    frame = rows(out)
    assert set(SCHEMA.names) - set(NONDETERMINISTIC) <= set(frame.columns)
    assert (frame["txns"] == 0).all() and (frame["torn_transaction"] == 0).all()
    assert all(sum(h) == 0 for h in frame["commit_latency_hist"])
    for entry in result.table:
        assert entry["txns"] == 0 and entry["commit_p50_ms"] is None
        assert all(f"runs_{a}" in entry and f"total_{a}" in entry for a in ALL_ANOMALIES)
    text = format_table(result)
    assert "ack p50 / p99" in text and "commit" not in text and "torn_transaction" not in text


def synthetic_run(variant: int, run: int, **fields) -> dict:
    from eosim.analysis.checks import ALL_ANOMALIES
    from eosim.analysis.expect import COUNTS
    from eosim.analysis.stats import N_BUCKETS, sketch

    row = {"sweep_id": "s", "variant": variant, "run": run, "seed": run, "params": "{}"}
    row |= dict.fromkeys((*ALL_ANOMALIES, *COUNTS), 0) | {"sent": 10, "acked": 10, "txns": 0}
    row |= {"sim_time_s": 1.0, "wall_time_s": 0.1, "events": 5, "history_sha256": "h"}
    row |= {"expect_met": True, "eosim_version": "t", "scenario_sha256": "x", "replay": None}
    ack = [0] * N_BUCKETS
    ack[40] = 10
    row |= {"ack_latency_hist": ack, "commit_latency_hist": [0] * N_BUCKETS}
    row |= {"ack_latency_sketch": sketch([1.0] * 10), "commit_latency_sketch": None}
    return row | fields


def test_aggregate_of_transactional_runs_has_rates_and_commit_latency():
    import pyarrow as pa

    from eosim.analysis.stats import N_BUCKETS, bucket_of, format_duration, sketch
    from eosim.analysis.sweep.aggregate import aggregate
    from eosim.analysis.sweep.runner import SweepResult, format_table
    from eosim.analysis.sweep.task import SCHEMA

    runs = [synthetic_run(0, r) for r in range(4)]
    every: list[float] = []
    for r in range(4):
        commit = [0] * N_BUCKETS
        commit[bucket_of(20.0)] = 3
        latencies = [20.0, 20.1, 19.9]
        if r == 3:
            commit[bucket_of(200.0)] = 1
            latencies += [200.0, 210.0]
        every += latencies
        torn = {0: 2, 1: 1}.get(r, 0)
        runs.append(
            synthetic_run(
                1,
                r,
                txns=5,
                torn_transaction=torn,
                commit_latency_hist=commit,
                commit_latency_sketch=sketch(latencies),
            )
        )
    stored = pa.Table.from_pylist(runs, schema=SCHEMA).to_pylist()  # as the run table holds them

    columns = [{"p_x": 0}, {"p_x": 1}]
    table = aggregate(stored, [{"x": 0}, {"x": 1}], {"torn_transaction": 0}, 8, columns)

    plain, txn = table
    assert (plain["txns"], txn["txns"]) == (0, 20)
    assert (txn["runs_torn_transaction"], txn["total_torn_transaction"]) == (2, 3)
    assert txn["rate_torn_transaction"] == 0.5
    assert (txn["ci_low_torn_transaction"], txn["ci_high_torn_transaction"]) == pytest.approx(
        wilson_interval(2, 4)
    )
    assert plain["commit_p50_ms"] is None and plain["commit_p99_ms"] is None
    # 14 commits: twelve at about 20 ms, two at 200 and 210 ms. The sketches merged across
    # runs give the (lower) quantiles of all of them within their 1% relative accuracy.
    for q in (50, 99):
        exact = float(np.quantile(every, q / 100, method="lower"))
        assert txn[f"commit_p{q}_ms"] == pytest.approx(exact, rel=0.01)
    assert txn["commit_p99_ms"] == pytest.approx(200.0, rel=0.01)
    assert sum(txn["commit_latency_hist"]) == 13
    assert txn["ack_p50_ms"] == pytest.approx(1.0, rel=0.01)
    assert plain["ack_p50_ms"] == txn["ack_p50_ms"]
    assert (plain["p_x"], txn["p_x"]) == (0, 1)
    assert plain["expect_met"] and not txn["expect_met"]
    assert txn["expect_failures"] == "torn_transaction 0: broken in 2 of 4 runs"

    text = format_table(SweepResult(Path("."), "s", 8, table, 0, 0.0, 0.0, ["x"])).splitlines()
    head = ["variant", "x", "runs", "torn_transaction", "runs", "·", "ppm", "ack", "p50", "/"]
    assert text[0].split()[:10] == head
    assert "commit p50 / p99" in text[0]
    assert text[1].split()[-2] == "-"  # no commits in variant 0
    ack = format_duration(plain["ack_p50_ms"])
    assert ack in ("990 µs", "1 ms", "1.01 ms") and f"{ack} / {ack}" in text[1]
    assert f"{txn['commit_p50_ms']:.3g} ms / {txn['commit_p99_ms']:.3g} ms" in text[2]


def test_a_failing_run_replays_alone_with_the_same_outcome(clean):
    _, out = clean
    frame = pd.read_parquet(out / "runs")  # the replay commands as stored
    failing = frame[frame.replay.notna()].iloc[0]
    argv = failing.replay.split()
    assert argv[:2] == ["eosim", "run"] and "--seed" in argv
    seed = int(argv[argv.index("--seed") + 1])
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    outcome = api.run(api.load(argv[2], overrides), seed)
    for name, anomaly in outcome.check.anomalies.items():
        assert anomaly.count == failing[name]
    assert outcome.run.events == failing.events


def test_exactly_once_when_python_workers_die(spark, clean, tmp_path):
    _, clean_out = clean
    out = tmp_path / "faulty"
    # Kill the Python worker as it starts chunks 0 and 1 in their first attempt, and chunk 2
    # in its first two (one chunk per task here); Spark retries them.
    inject = frozenset({(0, 0), (1, 0), (2, 0), (2, 1)})
    sweep(spark, out, chunk_runs=4, inject_failures=inject)
    pd.testing.assert_frame_equal(rows(out), rows(clean_out))


def test_a_retried_task_keeps_the_chunks_it_had_committed(spark, clean, tmp_path):
    _, clean_out = clean
    out = tmp_path / "retried"
    # One task runs the four chunks in turn and dies as it starts chunk 2; its next attempt
    # finds chunks 0 and 1 committed and starts at chunk 2.
    seen: list[int] = []
    sweep(
        spark,
        out,
        chunk_runs=4,
        partitions=1,
        inject_failures=frozenset({(2, 0)}),
        on_progress=seen.append,
        progress_interval=0.02,
    )
    pd.testing.assert_frame_equal(rows(out), rows(clean_out))
    assert seen == sorted(seen) and seen[-1] == 12  # the bar never went back


def test_resume_after_a_failed_job_keeps_every_finished_chunk(spark, clean, tmp_path):
    _, clean_out = clean
    out = tmp_path / "resumed"
    # Chunk 2 fails in every attempt: the job dies, but chunks 0 and 1, run before it by the
    # same task, were committed as each finished.
    with pytest.raises(Exception):  # noqa: B017 - Spark's job failure type varies by version
        sweep(
            spark,
            out,
            chunk_runs=4,
            partitions=1,
            inject_failures=frozenset({(2, a) for a in range(4)}),
        )
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["chunk=00000", "chunk=00001"]
    first = {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*.parquet")}
    assert len(first) == 2
    result = sweep(spark, out)  # resumed with the chunking it started with
    assert result.resumed_chunks == 2
    assert {p: p.stat().st_mtime_ns for p in first} == first  # not redone
    pd.testing.assert_frame_equal(rows(out), rows(clean_out))


def test_a_resumed_sweep_keeps_its_chunking(spark, clean):
    _, out = clean
    with pytest.raises(SweepError, match="started with --chunk-runs 4"):
        sweep(spark, out, chunk_runs=5)


def test_an_unfinished_sweep_of_the_old_layout_is_not_resumed(spark, clean, tmp_path):
    import shutil

    _, out = clean
    old = tmp_path / "old-layout"
    shutil.copytree(out, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["layout"]
    manifest["complete"] = False
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SweepError, match="older eosim, whose chunks this version cannot resume"):
        sweep(spark, old, chunk_runs=4)


def test_output_holding_another_sweep_is_refused_untouched(spark, clean):
    _, out = clean
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    manifest = (out / "manifest.json").read_bytes()
    with pytest.raises(SweepError, match="another sweep"):
        sweep(spark, out, runs=3, chunk_runs=4)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    assert (out / "manifest.json").read_bytes() == manifest


def test_rerunning_a_finished_sweep_redoes_nothing(spark, clean):
    result, out = clean
    again = sweep(spark, out, chunk_runs=4)
    assert again.resumed_chunks == 4 and again.table == result.table


def test_chunks_from_before_the_transactional_checks_are_not_resumed(spark, clean, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    _, out = clean
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for part in (old / "runs" / "chunk=00000").rglob("*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["torn_transaction", "txns"]), part)
    with pytest.raises(SweepError, match="older eosim without the torn_transaction column"):
        sweep(spark, old, chunk_runs=4)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"grid": ("network.respons_loss=0,1",)}, "did you mean 'response_loss'"),
        ({"grid": ("network.response_loss=",)}, "empty value list"),
        ({"runs": 0}, "at least 1"),
        ({"vary": ("network.response_loss=uniform(0.5)",)}, "two numbers"),
    ],
)
def test_bad_sweep_input(spark, tmp_path, kw, message):
    with pytest.raises(SweepError, match=message):
        sweep(spark, tmp_path / "bad", **kw)
    assert not (tmp_path / "bad").exists()


# -- replay ----------------------------------------------------------------------------------
def test_replay_confirms_a_recorded_run_and_draws_it(clean):
    from eosim.analysis.sweep.replay import replay

    _, out = clean
    frame = rows(out)
    failing = frame[frame.duplicate > 0].iloc[0]
    r = replay(out, f"{failing.variant}:{failing.run}")
    assert r.mismatches == []
    assert r.outcome.check.anomalies["duplicate"].count == failing.duplicate
    assert any(t.anomaly == "duplicate" for t in api.timelines(r.outcome))
    # A global run number names the same run.
    again = replay(out, str(failing.variant * 6 + failing.run))
    assert (again.variant, again.run) == (failing.variant, failing.run)


def test_replay_reports_a_changed_model_as_a_mismatch(clean, tmp_path):
    import shutil

    from eosim.analysis.sweep.replay import replay

    _, out = clean
    copy = tmp_path / "changed"
    shutil.copytree(out, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["scenario_yaml"] = manifest["scenario_yaml"].replace(
        "request_loss: 0.01", "request_loss: 0.03"
    )
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert replay(copy, "1:0").mismatches


def test_replay_cli_exit_codes(clean, capsys):
    from eosim.cli import main

    _, out = clean
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(out), "--run", "1:0", "--svg", str(out / "tl")])
    assert exc.value.code == 0
    assert "identical to the recorded outcome" in capsys.readouterr().out
    for bad in ("9:9", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["replay", str(out), "--run", bad])
        assert exc.value.code == 2
    capsys.readouterr()


# -- reports ---------------------------------------------------------------------------------
def test_html_report_is_self_contained_and_escaped(clean, tmp_path):
    import re

    from eosim.analysis.report.render import build, render_html

    _, out = clean
    content = build(out)
    content.data.manifest["scenario_yaml"] += "\n# <script>alert('x')</script>\n"
    content.data.manifest["command"] = "eosim sweep <evil>"
    html = render_html(content)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;evil&gt;" in html
    assert re.search(r"<(?:link|script)[^>]*(?:href|src)=", html) is None  # loads nothing
    images = re.findall(r'<img[^>]+src="data:image/png;base64,', html)
    assert len(images) == len(content.figures) >= 4
    assert "✗" in html and "Wilson" in html and "<svg" in html  # verdicts and a timeline
    # at-least-once.yaml expects duplicates: where runs showed them, that is no failure.
    assert "shown, as expected (&gt;0)" in html and 'id="verdict"' in html


def test_markdown_report_writes_its_images(clean, tmp_path):
    from eosim.analysis.report import write_report

    _, out = clean
    path = write_report(out, tmp_path / "r.md", "md")
    text = path.read_text()
    files = sorted(p.name for p in (tmp_path / "r_files").iterdir())
    assert any(f.endswith(".png") for f in files)
    for name in files:
        assert f"r_files/{name}" in text
    assert "| variant |" in text


@pytest.fixture(scope="module")
def lossy(spark, tmp_path_factory):
    """Three variants, each with response loss: every one shows duplicates."""
    out = tmp_path_factory.mktemp("sweeps") / "lossy"
    sweep(spark, out, runs=4, grid=("network.response_loss=0.02,0.05,0.1",))
    return out


def test_every_failing_variant_gets_a_story(lossy, tmp_path):
    """The report told the first failing runs' story, which were all of the first variant or
    two: each variant that showed an anomaly gets its own story now, folded but the first."""
    import re

    from eosim.analysis.report import write_report
    from eosim.analysis.report.data import load
    from eosim.analysis.report.render import build, render_html

    data = load(lossy)
    table = data.table.set_index("variant")
    for anomaly, rows in data.failing.items():
        failing = [int(v) for v in table.index if table.loc[v, f"runs_{anomaly}"] > 0]
        assert [int(r["variant"]) for r in rows] == failing, anomaly
        for r in rows:
            assert r["failing_runs"] == table.loc[int(r["variant"]), f"runs_{anomaly}"]
            assert r["run"] == r["first_runs"][0] and r["replay"]
    assert len(data.failing["duplicate"]) == 3
    content = build(lossy)
    told = {(s.anomaly, s.variant) for s in content.stories}
    assert told == {(a, int(r["variant"])) for a, rows in data.failing.items() for r in rows}
    assert all(s.timeline_svg and s.run[s.anomaly] > 0 for s in content.stories)
    html = render_html(content)
    stories = re.findall(r'<details class="story"( open)?><summary>([^<]*)</summary>', html)
    assert len(stories) == len(content.stories)
    assert [bool(o) for o, _ in stories].count(True) == len(data.failing)  # one open each
    assert "variant 2 (response_loss=0.1), run 2:" in html
    md = write_report(lossy, tmp_path / "r.md", "md").read_text()
    for s in content.stories:
        assert f"r_files/timeline-{s.anomaly}-v{s.variant}.svg" in md
        assert (tmp_path / "r_files" / f"timeline-{s.anomaly}-v{s.variant}.svg").is_file()
    assert md.count("#### variant ") == len(content.stories)


def test_a_lost_writes_story_in_the_report_says_what_lost_it(spark, tmp_path, capsys):
    """A replicated sweep: the report's story of a lost write names the power loss and the
    election that lost it (kafka.version 4.0); with ELR (4.1) nothing is lost."""
    from eosim.analysis.report import write_report
    from eosim.analysis.report.render import build, render_html

    out = tmp_path / "res"
    scenario = str(ROOT / "scenarios" / "replication-last-replica-standing.yaml")
    run_sweep(scenario, 2, grid=("kafka.version=4.0,4.1",), quiet=True, spark=spark, out=out)
    content = build(out)
    (story,) = [s for s in content.stories if s.anomaly == "lost_write"]
    assert story.variant == 0 and story.label == "version=4.0"
    assert (
        story.summary[1].endswith("offset 0 with it")
        and "power loss on broker-0" in story.summary[1]
    )
    assert "lost by" in story.timeline_text and "<== cuts offset" in story.timeline_text
    html = render_html(content)
    assert "; lost by " in html and "<li>lost by " in html
    md = write_report(out, tmp_path / "r.md", "md").read_text()
    assert "- lost by " in md and "power loss on broker-0" in md
    # eosim replay draws the same story.
    from eosim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["replay", str(out), "--run", f"0:{story.run['run']}", "--svg", str(tmp_path)])
    assert exc.value.code == 0
    printed = capsys.readouterr().out
    assert story.timeline_text in printed
    drawn = (tmp_path / f"run-0-{story.run['run']}-lost_write.svg").read_text()
    assert drawn == story.timeline_svg


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_a_report_goes_where_out_says_creating_its_folders(clean, tmp_path, capsys, fmt):
    """`eosim report --format md --out dir/x.md` failed when dir did not exist; the report's
    folders are made as for any output file (the images' folder of a Markdown report too)."""
    from eosim.analysis.report import ReportError, write_report
    from eosim.cli import main

    _, out = clean
    target = tmp_path / "new" / "deeper" / f"x.{fmt}"
    with pytest.raises(SystemExit) as exc:
        main(["report", str(out), "--format", fmt, "--out", str(target)])
    assert exc.value.code == 0 and capsys.readouterr().out == f"report     {target}\n"
    assert target.is_file() and "Reliability report" in target.read_text()
    if fmt == "md":
        assert any((target.parent / "x_files").glob("*.png"))
    # A file where a folder should be is bad input: one line, exit 2.
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ReportError, match="cannot create"):
        write_report(out, tmp_path / "a-file" / f"x.{fmt}", fmt)
    with pytest.raises(SystemExit) as exc:
        main(["report", str(out), "--format", fmt, "--out", str(tmp_path)])
    assert exc.value.code == 2 and "is a directory" in capsys.readouterr().err


def test_report_reads_results_from_before_the_transactional_checks(clean, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    from eosim.analysis.report import write_report
    from eosim.analysis.txn_checker import TXN_ANOMALIES

    _, out = clean
    old = tmp_path / "old"
    shutil.copytree(out, old)
    new_columns = [*TXN_ANOMALIES, "txns", "commit_latency_hist"]
    for part in (old / "runs").rglob("*.parquet"):
        pq.write_table(pq.read_table(part).drop_columns(new_columns), part)
    aggregate = pd.read_parquet(old / "aggregate.parquet")
    dropped = [c for c in aggregate.columns if c == "txns" or c.startswith("commit_")]
    dropped += [c for c in aggregate.columns if c.endswith(tuple(f"_{a}" for a in TXN_ANOMALIES))]
    aggregate.drop(columns=dropped).to_parquet(old / "aggregate.parquet", index=False)

    text = write_report(old, tmp_path / "old.md", "md").read_text()
    assert "no duplicates" in text and "✗" in text
    assert "no partial commits" not in text and "commit p50 / p99" not in text
    assert "replay did not reproduce" not in text


def test_report_data_exposes_the_per_record_rates(clean, tmp_path):
    import shutil

    from eosim.analysis.report.data import load

    _, out = clean
    data = load(out)
    assert data.per_record
    assert data.table["ppm_duplicate"].iloc[1] > 0
    old = tmp_path / "old"
    shutil.copytree(out, old)
    aggregate = pd.read_parquet(old / "aggregate.parquet")
    ppm = [c for c in aggregate.columns if c.startswith("ppm_")]
    aggregate.drop(columns=ppm).to_parquet(old / "aggregate.parquet", index=False)
    assert not load(old).per_record


def test_report_refuses_an_unfinished_sweep(tmp_path, clean):
    import shutil

    from eosim.analysis.report import ReportError, write_report

    _, out = clean
    copy = tmp_path / "unfinished"
    shutil.copytree(out, copy)
    (copy / "aggregate.parquet").unlink()
    with pytest.raises(ReportError, match="not finished"):
        write_report(copy)
    with pytest.raises(ReportError, match="no manifest"):
        write_report(tmp_path)


def test_report_renders_in_a_real_browser(clean, tmp_path):
    from test_report_render import open_report, page_fits

    from eosim.analysis.report import write_report

    _, out = clean
    page = write_report(out, tmp_path / "report.html")
    with open_report(page, tmp_path) as browser:
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        sizes = browser.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth]);"
        )
        assert len(sizes) >= 4 and all(ok and width > 100 for ok, width in sizes)
        assert browser.execute_script("return document.querySelectorAll('svg').length;") >= 1
        assert "Reliability report" in browser.title + browser.page_source
        # At 1280 px: the verdict sentence on the first screen, no table wider than the page.
        banner = browser.execute_script("return document.getElementById('verdict').textContent;")
        assert "expectations" in banner
        page_fits(browser)
        browser.save_screenshot(str(tmp_path / "report.png"))


def test_report_reads_the_fault_load_and_the_drawn_values(clean, spark, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    from eosim.analysis.report.data import load
    from eosim.analysis.report.render import build, render_html

    _, out = clean
    data = load(out)
    frame = rows(out)
    assert data.faults is not None and list(data.faults["runs"]) == [6, 6]
    lost = frame.groupby("variant")["messages_lost"].sum()
    assert list(data.faults["messages_lost"]) == list(lost)
    assert lost[1] > 0  # response_loss 0.05
    # Results from before runs recorded their faults.
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for part in (old / "runs").rglob("*.parquet"):
        table = pq.read_table(part)
        drop = [c for c in table.column_names if c.startswith("faults_") or c == "messages_lost"]
        pq.write_table(table.drop_columns(drop), part)
    assert load(old).faults is None

    drawn = tmp_path / "drawn"
    sweep(spark, drawn, runs=6, grid=(), vary=("producers.0.config.retries=randint(3,9)",))
    content = build(drawn)
    assert content.data.vary == ["producers.0.config.retries"]
    assert any(f.name.startswith("drawn-") for f in content.figures)
    assert "Drawn per run" in render_html(content)


def test_replay_commands_work_from_any_directory(spark, tmp_path, monkeypatch):
    """Replay commands named the scenario by the path the sweep was run with (relative to
    where it ran, and only as good as that file stays). They name the copy of the scenario's
    text the sweep keeps beside its results, by its absolute path; a report and `eosim replay`
    name it where the results directory is now."""
    import shlex
    import shutil

    from eosim.analysis.report.data import load
    from eosim.analysis.sweep.replay import replay

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SCENARIO, work / "mine.yaml")
    monkeypatch.chdir(work)
    sweep(spark, Path("res"), runs=4)
    (work / "mine.yaml").write_text("name: edited since\n")  # the file the sweep ran from
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    def reproduces(command: str, row) -> None:
        argv = shlex.split(command)
        assert argv[:2] == ["eosim", "run"] and Path(argv[2]).is_absolute(), command
        sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        seed = int(argv[argv.index("--seed") + 1])
        outcome = api.run(api.load(argv[2], sets), seed)
        assert outcome.run.history.digest() == row["history_sha256"], command

    frame = pd.read_parquet(work / "res" / "runs")  # as stored
    failing = frame[frame.replay.notna()]
    assert len(failing) > 0
    for _, row in failing.iterrows():
        assert shlex.split(row.replay)[2] == str((work / "res" / "scenario.yaml").resolve())
        reproduces(row.replay, row)
    # Moved elsewhere, the results still print commands that work.
    moved = tmp_path / "moved"
    shutil.move(work / "res", moved)
    data = load(moved)
    shown = [r for runs in data.failing.values() for r in runs]
    assert shown
    columns = (frame.variant, frame.run, frame.history_sha256)
    digests = {(v, r): h for v, r, h in zip(*columns, strict=True)}
    for r in shown:
        assert shlex.split(r["replay"])[2] == str((moved / "scenario.yaml").resolve())
        reproduces(r["replay"], {"history_sha256": digests[r["variant"], r["run"]]})
    r = replay(moved, f"{shown[0]['variant']}:{shown[0]['run']}")
    assert r.mismatches == [] and shlex.split(r.command)[2] == str(moved / "scenario.yaml")
