"""Per-record anomaly rates next to the per-run ones: the run-clustered ratio estimator, the
aggregate's ``ppm_*`` columns and the CLI table's cells."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_sweep_spark import synthetic_run

from eosim.analysis.stats import (
    RatioSums,
    clustered_ratio_interval,
    format_ppm,
    poisson_rate_interval,
    ratio_interval,
    wilson_interval,
)

Z = 1.959963984540054


def test_clustered_interval_by_hand():
    # x = records per run, y = anomalous records: r = 8 / 400 = 0.02; residuals y - r x are
    # -1, 0, 1, 0, their squares sum to 2; var = 4/3 * 2 / 400^2 = 1/60000.
    sums = RatioSums.of([(100, 1), (100, 2), (100, 3), (100, 2)])
    assert sums == RatioSums(4, 400, 8, 40_000, 800, 18)
    half = Z * math.sqrt(1 / 60_000)
    r, low, high = clustered_ratio_interval(sums)
    assert (r, low, high) == pytest.approx((0.02, 0.02 - half, 0.02 + half))
    assert (round(1e6 * low), round(1e6 * high)) == (11_998, 28_002)


def test_clustered_interval_weights_runs_by_their_records_and_clips_at_zero():
    # r = 8 / 400; residuals 0, -4, 4: var = 3/2 * 32 / 400^2 = 3e-4.
    r, low, high = clustered_ratio_interval(RatioSums.of([(100, 2), (200, 0), (100, 6)]))
    assert (r, low, high) == pytest.approx((0.02, 0.0, 0.02 + Z * math.sqrt(3e-4)))


def test_poisson_interval_by_hand():
    # Garwood's exact interval for 8 events: [3.4538, 15.7632] (chi-square quantiles / 2).
    low, high = poisson_rate_interval(8, 400)
    assert (400 * low, 400 * high) == pytest.approx((3.4538, 15.7632), abs=1e-4)
    assert poisson_rate_interval(0, 2000) == (0.0, pytest.approx(3.6889 / 2000, abs=1e-7))


def test_overdispersed_runs_give_the_clustered_interval():
    # All anomalies in one run of ten: far wider than for 50 independent records.
    pairs = [(1000, 50)] + [(1000, 0)] * 9
    sums = RatioSums.of(pairs)
    r, low, high = ratio_interval(sums)
    clustered = clustered_ratio_interval(sums)
    assert (r, low, high) == pytest.approx(tuple(1e6 * v for v in clustered))
    # var = 10/9 * (45^2 + 9 * 5^2) / 10^4^2 = 2.5e-5: 5,000 ppm [0, 14,800].
    assert high == pytest.approx(1e6 * (0.005 + Z * math.sqrt(2.5e-5)))
    assert low == 0.0
    assert high > 2 * 1e6 * poisson_rate_interval(50, 10_000)[1]


def test_runs_that_agree_do_not_collapse_the_interval():
    # Every run has exactly 1 in 24: the delta method gives a point, Poisson bounds remain.
    sums = RatioSums.of([(24, 1)] * 20)
    assert clustered_ratio_interval(sums) == pytest.approx((1 / 24, 1 / 24, 1 / 24))
    r, low, high = ratio_interval(sums)
    p_low, p_high = poisson_rate_interval(20, 480)
    assert (r, low, high) == pytest.approx((1e6 / 24, 1e6 * p_low, 1e6 * p_high))
    assert low < r < high


def test_zero_anomalies_take_the_poisson_upper_bound():
    r, low, high = ratio_interval(RatioSums.of([(500, 0), (1500, 0)]))
    assert (r, low) == (0.0, 0.0)
    assert high == pytest.approx(1e6 * -math.log(0.025) / 2000)
    assert round(high) == 1844


def test_no_records_and_a_single_run():
    assert ratio_interval(RatioSums.of([(0, 0), (0, 0)])) == (None, None, None)
    assert ratio_interval(RatioSums.of([])) == (None, None, None)
    assert ratio_interval(RatioSums.of([(200, 3)])) == (15_000.0, 0.0, math.inf)


def test_sums_stay_exact_for_huge_counts():
    # 2^53 + 1 is not a float; with exact sums the residuals are exactly 0.
    big = 2**53 + 1
    assert clustered_ratio_interval(RatioSums.of([(big, big), (big, big)])) == (1.0, 1.0, 1.0)


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
        (22_846.0, "22,800"),
        (1_234_567.8, "1,230,000"),
    ],
)
def test_ppm_text(value, text):
    assert format_ppm(value) == text


def test_aggregate_has_per_record_rates_with_the_clustered_interval():
    import pyarrow as pa

    from eosim.analysis.sweep.aggregate import aggregate
    from eosim.analysis.sweep.task import SCHEMA

    pairs = {0: [(100, 1), (100, 2), (100, 3), (100, 2)], 1: [(10, 0), (30, 0)]}
    runs = [
        synthetic_run(v, i, sent=x, duplicate=y, lost_write=y * 3)
        for v, rows in pairs.items()
        for i, (x, y) in enumerate(rows)
    ]
    # Squares beyond a 64-bit integer: 5e9 * 5e9 > 9.2e18.
    runs.append(synthetic_run(2, 0, sent=5_000_000_000, duplicate=5_000_000_000))
    runs.append(synthetic_run(2, 1, sent=5_000_000_000, duplicate=0))
    stored = pa.Table.from_pylist(runs, schema=SCHEMA).to_pylist()  # as the run table holds them
    table = aggregate(stored, [{}, {}, {}], {}, 8)

    first, clean, huge = table
    assert first["sent"] == 400 and first["total_duplicate"] == 8
    expected = ratio_interval(RatioSums.of(pairs[0]))
    got = (first["ppm_duplicate"], first["ppm_duplicate_low"], first["ppm_duplicate_high"])
    assert got == pytest.approx(expected)
    assert first["ppm_lost_write"] == pytest.approx(60_000)
    tripled = ratio_interval(RatioSums.of([(x, 3 * y) for x, y in pairs[0]]))
    assert first["ppm_lost_write_high"] == pytest.approx(tripled[2])
    assert (clean["ppm_duplicate"], clean["ppm_duplicate_low"]) == (0.0, 0.0)
    assert clean["ppm_duplicate_high"] == pytest.approx(1e6 * -math.log(0.025) / 40)
    # r = 1/2; residuals +-2.5e9: var = 2 * 1.25e19 / 1e20 = 0.25, se 0.5.
    assert huge["ppm_duplicate"] == pytest.approx(500_000)
    assert huge["ppm_duplicate_high"] == pytest.approx(1e6 * (0.5 + Z * 0.5))


def test_table_cell_shows_runs_and_records_side_by_side():
    from eosim.analysis.sweep.runner import SweepResult, anomaly_cell, format_table

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
    assert anomaly_cell(row, "duplicate") == "92 (92.0% [85.0-96.0]) · 1,150 [980-1,320]"
    zero = {
        "runs_lost_write": 0,
        "rate_lost_write": 0.0,
        "ci_low_lost_write": 0.0,
        "ci_high_lost_write": 0.037,
        "ppm_lost_write": 0.0,
        "ppm_lost_write_low": 0.0,
        "ppm_lost_write_high": 2.996,
    }
    assert anomaly_cell(zero, "lost_write") == "0 (0.0% [0.0-3.7]) · 0 [0-3]"
    # An aggregate from before the per-record rates shows the per-run part only.
    old = {k: v for k, v in zero.items() if not k.startswith("ppm")}
    assert anomaly_cell(old, "lost_write") == "0 (0.0% [0.0-3.7])"

    from eosim.analysis.checks import ALL_ANOMALIES

    full = {f"{k}_{a}": 0 for a in ALL_ANOMALIES for k in ("runs", "rate", "ci_low", "ci_high")}
    full |= {"ack_p50_ms": 5.0, "ack_p99_ms": 9.0, "commit_p50_ms": None}
    full |= {"expect_met": True, "expect_failures": "", "p_x": 1}
    full |= row | zero
    text = format_table(SweepResult(Path("."), "s", 100, [full], 0, 0.0, 0.0, ["x"]))
    head, line = text.splitlines()
    assert "duplicate runs · ppm" in head and "lost_write" not in head
    assert "92 (92.0% [85.0-96.0]) · 1,150 [980-1,320]" in line

    # A long parameter path is titled by its last word and spelled out below the table.
    path = "producers.0.config.enable.idempotence"
    long = full | {"p_producers_0_config_enable_idempotence": True}
    text = format_table(SweepResult(Path("."), "s", 100, [long], 0, 0.0, 0.0, [path]))
    head, line, legend = text.splitlines()
    assert head.split()[:3] == ["variant", "idempotence", "runs"] and path not in head
    assert legend == f"param      idempotence = {path}"
    assert line == line.rstrip()


def test_the_table_fits_a_terminal_whatever_the_expect_failures():
    """The expect column held every reason a variant missed expect:, so a scenario with a few
    expectations made rows of ~700 characters; it now holds one word, and the reasons follow
    the table one per line, each naming the variants it applies to."""
    from eosim.analysis.checks import ALL_ANOMALIES
    from eosim.analysis.sweep.runner import SweepResult, format_table

    base = {f"{k}_{a}": 0 for a in ALL_ANOMALIES for k in ("runs", "rate", "ci_low", "ci_high")}
    base |= {f"ppm_{a}{s}": 0.0 for a in ALL_ANOMALIES for s in ("", "_low", "_high")}
    base |= {"runs": 20, "ack_p50_ms": 5.0, "ack_p99_ms": 900.0, "commit_p50_ms": None}
    keys = ["duplicate", "lost_write", "nonmonotonic_send", "torn_transaction", "aborted_read"]
    keys += ["zombie_write", "hanging_transaction", "lost_processing", "duplicate_processing"]
    failures = "; ".join(f"{k} 0: broken in 20 of 20 runs" for k in keys)
    table = []
    for v in range(4):
        met = v == 3
        row = base | {"variant": v, "p_x": v, "runs_duplicate": 20, "rate_duplicate": 1.0}
        row |= {"expect_met": met, "expect_failures": "" if met else failures}
        table.append(row)
    table[1]["expect_failures"] = "lost_write 0: broken in 1 of 20 runs"
    text = format_table(SweepResult(Path("."), "s", 80, table, 0, 0.0, 0.0, ["x"]))
    lines = text.splitlines()
    assert len(failures) > 350  # the old column's width
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    head, *rows = lines[:5]
    assert head.split()[-1] == "expect" and [r.split()[-1] for r in rows] == ["MET"] * 3 + ["met"]
    assert lines[5:] == [
        *(f"expect     variants 0, 2 NOT MET: {k} 0: broken in 20 of 20 runs" for k in keys),
        "expect     variant 1 NOT MET: lost_write 0: broken in 1 of 20 runs",
    ]


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 40), (3, 40), (7, 120), (40, 40), (1, 10_000)])
def test_the_closed_form_wilson_interval_is_scipys(k, n):
    from eosim.analysis.stats import wilson_bounds

    assert wilson_bounds(k / n, n) == pytest.approx(wilson_interval(k, n), abs=1e-12)


def test_trials_to_settle_is_the_wilson_threshold():
    from eosim.analysis.stats import trials_to_settle

    # 0 seen against <5%: z^2 / (n + z^2) < 0.05 from n > z^2 / 0.05 - z^2 = 72.99.
    assert math.ceil(trials_to_settle(0.0, 40, "<", 0.05)) == 73
    assert trials_to_settle(0.0, 100, "<", 0.05) == 100  # settled already
    assert trials_to_settle(0.05, 40, "<", 0.05) is None  # at the bound: never
    assert trials_to_settle(0.0, 40, ">", 0.0) is None
    n = trials_to_settle(0.25, 40, "<", 0.3)
    assert wilson_interval(round(0.25 * math.ceil(n) * 4) // 4, math.ceil(n))[1] < 0.3 + 1e-3
