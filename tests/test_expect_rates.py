"""Expectations as rates: per record sent (``<1e-4/record``, ``<100ppm``) in a run's
``expect:``, and a sweep's own ``expect_sweep:`` / ``eosim sweep --expect`` judged per variant
on the aggregate's intervals (met, not met, inconclusive)."""

from __future__ import annotations

import functools
import json
import math
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from test_cli import run_cli

from eosim.analysis.expect import evaluate, parse_expectation
from eosim.analysis.stats import RatioSums, ratio_interval, wilson_interval
from eosim.analysis.sweep.verdict import INCONCLUSIVE, MET, NOT_MET, judge, judge_row
from eosim.simulation.conditions import RECORD, RUNS, Condition

ROOT = Path(__file__).resolve().parent.parent
AT_LEAST_ONCE = str(ROOT / "scenarios" / "at-least-once.yaml")
IDEMPOTENT = str(ROOT / "scenarios" / "idempotent.yaml")
SHORT = ("--set", "producers.0.workload.records=300")


# -- the grammar ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "op", "bound", "unit"),
    [
        ("<1e-4/record", "<", Fraction(1, 10_000), RECORD),
        ("<0.0001/record", "<", Fraction(1, 10_000), RECORD),
        ("< 0.01 % / record", "<", Fraction(1, 10_000), RECORD),
        ("<100ppm", "<", Fraction(1, 10_000), RECORD),
        (">=2.5ppm", ">=", Fraction(1, 400_000), RECORD),
        ("<1%/runs", "<", Fraction(1, 100), RUNS),
        ("<=0.01/runs", "<=", Fraction(1, 100), RUNS),
        (">0/runs", ">", 0, RUNS),
    ],
)
def test_rate_forms(text, op, bound, unit):
    c = Condition.parse(text)
    assert (c.op, c.bound, c.unit) == (op, bound, unit)
    assert str(c) == "".join(text.split())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<1e-4", "say what the number is per"),
        ("<1%", "say what the number is per"),
        ("1e-4/record", "a rate needs <, <=, > or >="),
        ("==1e-4/record", "a rate needs <, <=, > or >="),
        ("!=0/runs", "a rate needs <, <=, > or >="),
        ("<150%/runs", "between 0 and 1"),
        ("<2/runs", "between 0 and 1"),
        ("<1/run", "unknown unit /run"),
        ("<1ppm/record", "'ppm' already means per million records sent"),
        ("<-1/record", "is not a condition"),
        ("lots", "is not a condition"),
    ],
)
def test_bad_forms_say_why(text, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
        Condition.parse(text)


def test_counts_are_unchanged():
    assert [str(Condition.parse(v)) for v in (0, "0", ">0", "<= 3", "!=2")] == [
        "0",
        "0",
        ">0",
        "<=3",
        "!=2",
    ]


# -- one run --------------------------------------------------------------------------------
def test_a_rate_per_record_is_the_count_over_records_sent():
    observed = {"duplicate": 3, "sent": 30_000}
    met = evaluate({"duplicate": "<=1e-4/record"}, observed)  # 3 / 30,000 = 1e-4 exactly
    assert met.met and met.checked[0]["per_record"] == pytest.approx(1e-4)
    failed = evaluate({"duplicate": "<100ppm"}, observed)
    assert not failed.met
    assert failed.failures == [
        "duplicate: expected <100ppm, got 3 in 30000 records sent (1.00e-04/record)"
    ]
    shown = evaluate({"duplicate": ">50ppm"}, observed)
    assert shown.met


def test_a_rate_without_records_sent_is_not_met():
    result = evaluate({"duplicate": "<1/record"}, {"duplicate": 0, "sent": 0})
    assert not result.met and "no record sent" in result.failures[0]


def test_a_share_of_runs_is_refused_for_one_run():
    with pytest.raises(ValueError, match="a share of runs needs a sweep"):
        evaluate({"duplicate": "<1%/runs"}, {"duplicate": 0, "sent": 10})
    with pytest.raises(ValueError, match="a share of runs needs a sweep"):
        parse_expectation("duplicate=<1%/runs")
    assert parse_expectation("duplicate=<1%/runs", sweep=True) == ("duplicate", "<1%/runs")
    with pytest.raises(ValueError, match="unknown key 'acked'"):
        parse_expectation("acked=0", sweep=True)


@pytest.mark.parametrize("seed", [1, 3])
def test_run_judges_a_rate_on_its_own_records(capsys, seed):
    """A real short run of at-least-once.yaml, which duplicates: the verdict follows the
    duplicates over the records the producer sent, against a bound under and over it."""
    code, out, _ = run_cli(capsys, "run", AT_LEAST_ONCE, "--seed", str(seed), *SHORT, "--json")
    data = json.loads(out)
    duplicates, sent = data["anomalies"]["duplicate"], data["counts"]["sent"]
    assert duplicates > 0 and sent == 300
    rate = duplicates / sent
    for bound, met in ((rate / 2, False), (rate * 2, True)):
        form = f"<{bound:.6g}/record"
        code, out, err = run_cli(
            capsys, "run", AT_LEAST_ONCE, "--seed", str(seed), *SHORT,
            "--set", f"expect.duplicate={form}",
        )  # fmt: skip
        assert code == (0 if met else 1), out + err
        line = next(
            x for x in out.splitlines() if x.strip().startswith("duplicate ") and "got" in x
        )
        assert f"got {duplicates} in {sent} records sent" in line
        assert line.endswith("met" if met else "NOT MET")


def test_check_takes_a_rate_and_refuses_a_share_of_runs(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    code, _, _ = run_cli(
        capsys, "run", IDEMPOTENT, "--seed", "1", *SHORT, "--history", str(history)
    )
    assert code == 0
    code, out, _ = run_cli(capsys, "check", str(history), "--expect", "duplicate=<100ppm")
    assert code == 0 and "got 0 in 300 records sent (0/record): met" in out
    code, out, err = run_cli(capsys, "check", str(history), "--expect", "duplicate=<1%/runs")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--expect duplicate=<1%/runs: duplicate: <1%/runs: a share of runs needs a sweep" in err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("<1%/runs", "expect: duplicate: '<1%/runs' is a share of runs"),
        ("<1e-4", "expect: duplicate: '<1e-4' is not a condition: say what the number is per"),
        ("<2%/record/x", "expect: duplicate: '<2%/record/x' is not a condition"),
    ],
)
def test_bad_forms_in_a_scenario_exit_2_with_one_line(capsys, value, message):
    code, out, err = run_cli(
        capsys, "run", IDEMPOTENT, *SHORT, "--set", f"expect.duplicate={value}"
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert message in err


def test_a_rate_on_an_operation_count_is_refused(capsys):
    code, _, err = run_cli(capsys, "run", IDEMPOTENT, *SHORT, "--set", "expect.acked=<0.5/record")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "expect.acked: <0.5/record: a rate is for an anomaly" in err


def test_expect_sweep_in_a_scenario_is_validated(capsys):
    code, _, err = run_cli(capsys, "run", IDEMPOTENT, *SHORT, "--set", "expect_sweep.duplicate=<1%")
    assert code == 2 and "expect_sweep: duplicate: '<1%' is not a condition" in err
    code, _, err = run_cli(capsys, "run", IDEMPOTENT, *SHORT, "--set", "expect_sweep.acked=0")
    assert code == 2 and "expect_sweep.acked: unknown key 'acked'" in err
    # One run ignores the sweep's block.
    code, _, _ = run_cli(
        capsys, "run", IDEMPOTENT, *SHORT, "--set", "expect_sweep.duplicate=<1%/runs"
    )
    assert code == 0


# -- a sweep's verdict ----------------------------------------------------------------------
def row(runs_with: int, runs: int, pairs: list[tuple[int, int]]) -> dict:
    """An aggregate row for ``duplicate``: ``runs_with`` of ``runs`` runs had one, and
    (records sent, duplicates) per run."""
    sums = RatioSums.of(pairs)
    ppm, low, high = ratio_interval(sums)
    ci_low, ci_high = wilson_interval(runs_with, runs)
    return {
        "variant": 0,
        "runs": runs,
        "runs_duplicate": runs_with,
        "rate_duplicate": runs_with / runs,
        "ci_low_duplicate": ci_low,
        "ci_high_duplicate": ci_high,
        "total_duplicate": sums.y,
        "ppm_duplicate": ppm,
        "ppm_duplicate_low": low,
        "ppm_duplicate_high": high,
    }


CLEAN = row(0, 40, [(10_000, 0)] * 40)  # 400,000 records, no duplicate: [0, 9.2] ppm
DIRTY = row(40, 40, [(1_000, 30), (1_000, 34)] * 20)  # 32,000 ppm, a narrow interval
FEW = row(0, 10, [(100, 0)] * 10)  # 1,000 records, no duplicate: [0, 3,689] ppm


@pytest.mark.parametrize(
    ("data", "form", "verdict"),
    [
        (CLEAN, "<100ppm", MET),
        (CLEAN, "<1e-4/record", MET),
        (DIRTY, "<1e-4/record", NOT_MET),
        (FEW, "<1e-4/record", INCONCLUSIVE),  # 0 ppm, but the interval reaches 3,689
        (DIRTY, ">1%/record", MET),
        (DIRTY, ">5%/record", NOT_MET),  # 32,000 ppm [30,300-33,800]
        (CLEAN, ">0/record", INCONCLUSIVE),  # none seen, yet up to 9.2 ppm: not shown to be 0
        (FEW, ">1e-3/record", INCONCLUSIVE),
        (CLEAN, "<10%/runs", MET),  # 0 of 40 runs: [0, 8.8%]
        (FEW, "<10%/runs", INCONCLUSIVE),  # 0 of 10 runs: [0, 27.8%]
        (DIRTY, "<=50%/runs", NOT_MET),  # 40 of 40: [91.2%, 100%]
        (DIRTY, ">=0.9/runs", MET),
        (CLEAN, 0, MET),
        (DIRTY, 0, NOT_MET),
        (DIRTY, "<=1280", MET),  # 20 * 64 = 1,280 duplicates in all
        (DIRTY, "<1280", NOT_MET),
    ],
)
def test_sweep_verdicts(data, form, verdict):
    check = judge_row(data, "duplicate", Condition.parse(form))
    assert check.verdict == verdict, check.text
    assert check.text.startswith(f"duplicate {Condition.parse(form)}: {verdict}: ")


def test_interval_verdict_reports_the_point_estimate_too():
    check = judge_row(FEW, "duplicate", Condition.parse("<1e-4/record"))
    assert check.point_met is True and check.estimate == 0.0
    assert check.low == 0.0 and check.high == pytest.approx(-math.log(0.025) / 1_000)
    assert check.text == (
        "duplicate <1e-4/record: inconclusive: 0 ppm [0-3,690] vs 100 ppm (point estimate meets "
        "it; about 371 runs in all would settle it at this rate)"
    )
    runs = judge_row(DIRTY, "duplicate", Condition.parse("<=50%/runs"))
    assert runs.text == "duplicate <=50%/runs: not met: 40 of 40 runs, 100.0% [91.2-100.0] vs 50%"


def test_an_inconclusive_rate_says_how_many_runs_would_settle_it():
    """An inconclusive verdict says how many runs (in all) would take its interval off the
    bound if the observed rate held: exactly the Wilson threshold for a share of runs, and
    within a few percent of it for a rate per record (its run-clustered interval is matched to
    a Wilson one of the same width)."""
    share = judge_row(FEW, "duplicate", Condition.parse("<10%/runs"))  # 0 of 10: [0, 27.8%]
    assert share.runs_to_settle == 35
    for runs, verdict in ((34, INCONCLUSIVE), (35, MET)):
        again = judge_row(
            row(0, runs, [(100, 0)] * runs), "duplicate", Condition.parse("<10%/runs")
        )
        assert again.verdict == verdict, (runs, again.text)
    # 0 of 1,000 records against 100 ppm: met from 369 runs of 100 records (Poisson bound
    # 3.689 / records), estimated at 371.
    record = judge_row(FEW, "duplicate", Condition.parse("<1e-4/record"))
    assert record.runs_to_settle == 371
    for runs, verdict in ((368, INCONCLUSIVE), (369, MET), (371, MET)):
        again = judge_row(row(0, runs, [(100, 0)] * runs), "duplicate", Condition.parse("<100ppm"))
        assert again.verdict == verdict, (runs, again.text)
    # A rate above the bound settles as not met: 10 of 40 runs (25%) against <30%.
    some = row(10, 40, [(100, 1)] * 10 + [(100, 0)] * 30)
    check = judge_row(some, "duplicate", Condition.parse("<30%/runs"))
    assert check.verdict == INCONCLUSIVE and check.runs_to_settle is not None
    n = check.runs_to_settle
    settled = row(n // 4, n, [(100, 1)] * (n // 4) + [(100, 0)] * (n - n // 4))
    assert judge_row(settled, "duplicate", Condition.parse("<30%/runs")).verdict == MET
    # Nothing seen cannot settle ">0": no number of runs at a rate of 0 would.
    never = judge_row(CLEAN, "duplicate", Condition.parse(">0/record"))
    assert never.runs_to_settle is None
    assert never.text.endswith(
        "(point estimate misses it; no number of runs would settle it at this rate)"
    )
    assert never.to_dict()["runs_to_settle"] is None and record.to_dict()["runs_to_settle"] == 371
    # One run bounds no per-record rate.
    alone = judge_row(row(0, 1, [(100, 0)]), "duplicate", Condition.parse("<1e-4/record"))
    assert alone.runs_to_settle is None and alone.text.endswith("; one run bounds no rate)")
    # A settled verdict carries none.
    assert judge_row(CLEAN, "duplicate", Condition.parse("<100ppm")).runs_to_settle is None


def test_the_worst_verdict_decides():
    table = [{**CLEAN, "variant": 0}, {**FEW, "variant": 1}, {**DIRTY, "variant": 2}]
    verdict = judge(table, {"duplicate": "<1e-4/record"})
    assert [v.verdict for v in verdict.variants] == [MET, INCONCLUSIVE, NOT_MET]
    assert verdict.verdict == NOT_MET and not verdict.met
    assert judge(table[:2], {"duplicate": "<1e-4/record"}).verdict == INCONCLUSIVE
    assert judge(table[:1], {"duplicate": "<1e-4/record"}).met


def test_a_run_meets_a_per_record_bound_in_the_aggregate_exactly():
    """The scenario's expect: with a /record form, judged per run in the aggregate as by evaluate():
    1 in 100 meets <=1%/record exactly, 2 in 100 breaks it, a run without records too."""
    import pyarrow as pa
    from test_sweep_spark import synthetic_run

    from eosim.analysis.sweep.aggregate import aggregate
    from eosim.analysis.sweep.task import SCHEMA

    runs = [
        synthetic_run(0, 0, sent=100, duplicate=1),
        synthetic_run(0, 1, sent=300, duplicate=3),
        synthetic_run(1, 0, sent=100, duplicate=1),
        synthetic_run(1, 1, sent=100, duplicate=2),
        synthetic_run(2, 0, sent=0, duplicate=0),
    ]
    stored = pa.Table.from_pylist(runs, schema=SCHEMA).to_pylist()  # as the run table holds them
    table = aggregate(stored, [{}, {}, {}], {"duplicate": "<=1%/record"}, 5)
    assert [r["expect_met"] for r in table] == [True, False, False]
    assert table[1]["expect_failures"] == "duplicate <=1%/record: broken in 1 of 2 runs"
    single = [evaluate({"duplicate": "<=1%/record"}, r).met for r in runs]
    assert single == [True, True, True, False, False]


# -- a real sweep ---------------------------------------------------------------------------
SWEEP_SET = (
    "producers.0.workload.records=150",
    "producers.0.workload.rate=3000",
    # The scenario wants duplicates shown; the variant without loss has none.
    "expect.duplicate='>=0'",
    "expect.nonmonotonic_send='>=0'",
    # The scenario's own block; --expect adds to it.
    "expect_sweep.lost_write=0",
)


@pytest.fixture(scope="module")
def swept(spark, tmp_path_factory):
    """3 runs per variant of at-least-once.yaml, without and with response loss, and the
    sweep's expectations from --expect."""
    from eosim.analysis.sweep import run_sweep

    out = tmp_path_factory.mktemp("expect-sweep") / "s"
    result = run_sweep(
        AT_LEAST_ONCE,
        3,
        grid=("network.response_loss=0,0.05",),
        overrides=SWEEP_SET,
        quiet=True,
        spark=spark,
        out=out,
        expect={"duplicate": "<1%/record"},
    )
    return result, out


def test_a_real_sweep_writes_its_verdict(swept):
    result, out = swept
    aggregate = pd.read_parquet(out / "aggregate.parquet").sort_values("variant")
    saved = json.loads((out / "expect_sweep.json").read_text(encoding="utf-8"))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert saved["expect_sweep"] == {"lost_write": "0", "duplicate": "<1%/record"}
    assert manifest["expect_sweep_verdict"] == saved["verdict"] == result.sweep_verdict.verdict
    for variant, stored in zip(result.sweep_verdict.variants, saved["variants"], strict=True):
        r = next(x for x in result.table if x["variant"] == variant.variant)
        # Judged on the aggregate's own columns.
        check = judge_row(r, "duplicate", Condition.parse("<1%/record"))
        lost, duplicate = stored["checks"]
        assert duplicate["verdict"] == check.verdict
        assert duplicate["high"] == pytest.approx(r["ppm_duplicate_high"] / 1e6)
        assert (lost["key"], lost["verdict"], lost["estimate"]) == ("lost_write", MET, 0)
    assert list(aggregate["expect_sweep"]) == [v.verdict for v in result.sweep_verdict.variants]
    assert all(aggregate["expect_sweep_detail"].str.contains("; duplicate <1%/record: "))
    # 450 records without loss and no duplicate: at most 8,200 ppm, under 1%. With 5% loss
    # the producer duplicates far more than 1% of its records: not met, or with 3 runs, whose
    # duplicates vary a lot, inconclusive; either way not a pass.
    clean, lossy = result.sweep_verdict.variants
    assert clean.verdict == MET and clean.checks[1].high < 0.01
    assert lossy.verdict != MET and lossy.checks[1].point_met is False
    assert result.met is False and result.runs_met is True


def test_sweep_cli_prints_the_verdicts_and_exits_1(swept, spark, capsys, monkeypatch):
    from eosim.analysis import sweep as sweeps

    result, out = swept
    lossy = result.sweep_verdict.variants[1].verdict
    monkeypatch.setattr(sweeps, "run_sweep", functools.partial(sweeps.run_sweep, spark=spark))
    base = ["sweep", AT_LEAST_ONCE, "--runs", "3", "--grid", "network.response_loss=0,0.05"]
    base += [a for s in SWEEP_SET for a in ("--set", s)] + ["--out", str(out), "-q"]
    code, text, _ = run_cli(capsys, *base, "--expect", "duplicate=<1%/record")
    lines = text.splitlines()
    assert code == 1
    assert lines[-4].startswith("sweep      variant 0: MET: lost_write 0: met: 0 across 3 runs; ")
    assert "; duplicate <1%/record: met: 0 ppm [0-" in lines[-4]
    assert lines[-3].startswith("sweep      variant 1: ")
    assert lines[-2] == f"sweep      sweep: {lossy.upper()}: {lossy} in variant 1"
    assert lines[-1] == f"verdict    every variant meets expect; expect_sweep {lossy.upper()}"
    code, text, _ = run_cli(capsys, *base, "--expect", "duplicate=<=100%/runs")
    assert (
        code == 0
        and text.splitlines()[-1] == "verdict    every variant meets expect; expect_sweep met"
    )


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ("duplicate=<1e-4", "--expect duplicate=<1e-4: duplicate: '<1e-4' is not a condition"),
        ("acked=0", "--expect acked=0: unknown key 'acked'"),
        ("duplicate=<2/runs", "a share of runs lies between 0 and 1"),
    ],
)
def test_bad_sweep_expectations_exit_2_before_spark(capsys, tmp_path, expect, message):
    out = tmp_path / "never"
    code, text, err = run_cli(
        capsys, "sweep", AT_LEAST_ONCE, "--runs", "2", "--out", str(out), "--expect", expect
    )
    assert code == 2 and text == "" and len(err.strip().splitlines()) == 1
    assert message in err and not out.exists()


def test_an_empty_expect_sweep_keeps_the_scenario_digest():
    """Histories carry the scenario's digest: a scenario without expect_sweep: keeps the one
    it had before the block existed (so history digests stay byte-identical)."""
    from eosim import api

    # The digest b3a9565 (before expect_sweep: existed) gives this scenario under today's
    # defaults: it gave 44eab607... under the old latency defaults; re-pinned when the defaults
    # changed (36a9abb), checked by running b3a9565 with the new latency values set; re-pinned
    # when network.in_flight_after_close's default became until_reset (cf692e29... before, and
    # ea22de2 with network.in_flight_after_close=until_reset set gives the digest below).
    before = "ab3c5ced8ef18117f191034d3d814d0d3a862e2edd97983164dff86e44811183"
    assert api.load(IDEMPOTENT).digest() == before
    assert api.load(IDEMPOTENT, ["expect_sweep.duplicate=<1%/runs"]).digest() != before
