"""Per-record anomaly rates next to the per-run ones: the run-clustered ratio estimator, the
aggregate's ``ppm_*`` columns and the CLI table's cells."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_sweep_spark import synthetic_run

from analysis.stats import RatioSums, format_ppm, ratio_interval


def test_ratio_interval_by_hand():
    # x = records per run, y = anomalous records: r = 8 / 400 = 0.02; residuals y - r x are
    # -1, 0, 1, 0, their squares sum to 2; var = 4/3 * 2 / 400^2 = 1/60000.
    sums = RatioSums.of([(100, 1), (100, 2), (100, 3), (100, 2)])
    assert sums == RatioSums(4, 400, 8, 40_000, 800, 18)
    half = 1.959963984540054 * math.sqrt(1 / 60_000)
    r, low, high = ratio_interval(sums)
    assert r == pytest.approx(20_000)
    assert (low, high) == pytest.approx((1e6 * (0.02 - half), 1e6 * (0.02 + half)))
    assert (round(low), round(high)) == (11_998, 28_002)


def test_ratio_interval_weights_runs_by_their_records_and_clips_at_zero():
    # r = 8 / 400; residuals 0, -4, 4: var = 3/2 * 32 / 400^2 = 3e-4, se 0.01732.
    r, low, high = ratio_interval(RatioSums.of([(100, 2), (200, 0), (100, 6)]))
    assert r == pytest.approx(20_000)
    assert low == 0.0
    assert high == pytest.approx(1e6 * (0.02 + 1.959963984540054 * math.sqrt(3e-4)))


def test_clustered_interval_is_wider_than_one_treating_records_as_independent():
    # All anomalies in one run of ten: records are not independent draws.
    pairs = [(1000, 50)] + [(1000, 0)] * 9
    r, _, high = ratio_interval(RatioSums.of(pairs))
    p = 50 / 10_000
    binomial = 1.959963984540054 * math.sqrt(p * (1 - p) / 10_000)
    assert r == pytest.approx(5_000)
    assert high - r > 3 * 1e6 * binomial


def test_zero_anomalies_take_the_rule_of_three_upper_bound():
    r, low, high = ratio_interval(RatioSums.of([(500, 0), (1500, 0)]))
    assert (r, low) == (0.0, 0.0)
    assert high == pytest.approx(1e6 * -math.log(0.05) / 2000)  # about 1,498 ppm
    assert round(high) == 1498


def test_no_records_and_a_single_run():
    assert ratio_interval(RatioSums.of([(0, 0), (0, 0)])) == (None, None, None)
    assert ratio_interval(RatioSums.of([])) == (None, None, None)
    assert ratio_interval(RatioSums.of([(200, 3)])) == (15_000.0, 0.0, math.inf)


def test_sums_stay_exact_for_huge_counts():
    # 2^53 + 1 records are not representable as a float; the residual sum is still exactly 0.
    big = 2**53 + 1
    r, low, high = ratio_interval(RatioSums.of([(big, big), (big, big)]))
    assert (r, low, high) == (1e6, 1e6, 1e6)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (math.inf, "∞"),
        (0.0, "0"),
        (0.4123, "0.412"),
        (52.34, "52.3"),
        (99.96, "100"),
        (1150.4, "1,150"),
        (1_234_567.8, "1,234,568"),
    ],
)
def test_ppm_text(value, text):
    assert format_ppm(value) == text


def test_aggregate_has_per_record_rates_with_the_clustered_interval(spark):
    import pyarrow as pa

    from analysis.sweep.aggregate import aggregate
    from analysis.sweep.task import SCHEMA

    pairs = {0: [(100, 1), (100, 2), (100, 3), (100, 2)], 1: [(10, 0), (30, 0)]}
    runs = [
        synthetic_run(v, i, sent=x, duplicate=y, lost_write=y * 3)
        for v, rows in pairs.items()
        for i, (x, y) in enumerate(rows)
    ]
    # Squares beyond a 64-bit integer: 5e9 * 5e9 > 9.2e18.
    runs.append(synthetic_run(2, 0, sent=5_000_000_000, duplicate=5_000_000_000))
    runs.append(synthetic_run(2, 1, sent=5_000_000_000, duplicate=0))
    frame = spark.createDataFrame(pa.Table.from_pylist(runs, schema=SCHEMA).to_pandas())
    table = aggregate(spark, frame, [{}, {}, {}], {}, 8)

    first, clean, huge = table
    assert first["sent"] == 400 and first["total_duplicate"] == 8
    expected = ratio_interval(RatioSums.of(pairs[0]))
    got = (first["ppm_duplicate"], first["ppm_duplicate_low"], first["ppm_duplicate_high"])
    assert got == pytest.approx(expected)
    assert first["ppm_lost_write"] == pytest.approx(60_000)
    assert first["ppm_lost_write_high"] == pytest.approx(3 * expected[2])  # y tripled: r, se too
    assert (clean["ppm_duplicate"], clean["ppm_duplicate_low"]) == (0.0, 0.0)
    assert clean["ppm_duplicate_high"] == pytest.approx(1e6 * -math.log(0.05) / 40)
    # r = 1/2; residuals +-2.5e9: var = 2 * 1.25e19 / 1e20 = 0.25, se 0.5.
    assert huge["ppm_duplicate"] == pytest.approx(500_000)
    assert huge["ppm_duplicate_high"] == pytest.approx(1e6 * (0.5 + 1.959963984540054 * 0.5))


def test_table_cell_shows_runs_and_records_side_by_side():
    from analysis.sweep.runner import SweepResult, anomaly_cell, format_table

    row = {
        "variant": 0,
        "runs": 100,
        "runs_duplicate": 92,
        "rate_duplicate": 0.92,
        "ci_low_duplicate": 0.8503,
        "ci_high_duplicate": 0.9601,
        "ppm_duplicate": 1150.2,
        "ppm_duplicate_low": 980.4,
        "ppm_duplicate_high": 1320.0,
    }
    assert anomaly_cell(row, "duplicate") == "92 (92.0% [85.0-96.0]) · 1,150 ppm [980-1,320]"
    zero = {
        "runs_lost_write": 0,
        "rate_lost_write": 0.0,
        "ci_low_lost_write": 0.0,
        "ci_high_lost_write": 0.037,
        "ppm_lost_write": 0.0,
        "ppm_lost_write_low": 0.0,
        "ppm_lost_write_high": 2.996,
    }
    assert anomaly_cell(zero, "lost_write") == "0 (0.0% [0.0-3.7]) · 0 ppm [0-3]"
    # An aggregate from before the per-record rates shows the per-run part only.
    old = {k: v for k, v in zero.items() if not k.startswith("ppm")}
    assert anomaly_cell(old, "lost_write") == "0 (0.0% [0.0-3.7])"

    from analysis.checks import ALL_ANOMALIES

    full = {f"{k}_{a}": 0 for a in ALL_ANOMALIES for k in ("runs", "rate", "ci_low", "ci_high")}
    full |= {"ack_p50_ms": 5.0, "ack_p99_ms": 9.0, "commit_p50_ms": None}
    full |= {"expect_met": True, "expect_failures": "", "p_x": 1}
    full |= row | zero
    text = format_table(SweepResult(Path("."), "s", 100, [full], 0, 0.0, 0.0, ["x"]))
    assert "· 1,150 ppm [980-1,320]" in text.splitlines()[1]
