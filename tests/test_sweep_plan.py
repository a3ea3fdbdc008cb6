"""Sweep plans and statistics, without Spark."""

from __future__ import annotations

import math

import pytest

from eosim.analysis.stats import bucket_of, bucket_upper_ms, histogram, quantile, wilson_interval
from eosim.analysis.sweep.plan import (
    GridAxis,
    PlanError,
    SweepPlan,
    VarySpec,
    chunk_bounds,
    default_chunk_runs,
    run_seed,
)


def plan(**kw) -> SweepPlan:
    args = {"scenario_text": "name: x", "scenario_source": "x.yaml", "runs": 4, "seed": 9}
    return SweepPlan(**{**args, **kw})


def test_grid_is_cartesian_last_axis_fastest():
    p = plan(grid=(GridAxis.parse("a=1,2"), GridAxis.parse("b=x,y,z")))
    assert p.total_runs == 24
    assert p.variants[:4] == (
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 1, "b": "z"},
        {"a": 2, "b": "x"},
    )
    assert p.locate(13) == (3, 1)


def test_seeds_depend_only_on_sweep_seed_variant_and_run():
    assert run_seed(9, 2, 3) == run_seed(9, 2, 3)
    seeds = {run_seed(9, v, r) for v in range(5) for r in range(200)}
    assert len(seeds) == 1000
    assert run_seed(10, 2, 3) != run_seed(9, 2, 3)
    assert all(0 <= s < 2**63 for s in seeds)


def test_vary_draws_are_seeded_and_in_range():
    p = plan(
        vary=(
            VarySpec.parse("network.response_loss=uniform(0.01,0.05)"),
            VarySpec.parse("producers.0.workload.keys=randint(1,3)"),
            VarySpec.parse("x=choice(a,b)"),
        )
    )
    draws = [p.run_parameters(0, r) for r in range(50)]
    assert draws == [p.run_parameters(0, r) for r in range(50)]
    assert all(0.01 <= d["network.response_loss"] <= 0.05 for d in draws)
    assert {d["producers.0.workload.keys"] for d in draws} == {1, 2, 3}
    assert {d["x"] for d in draws} == {"a", "b"}


def test_overrides_render_as_set_values():
    p = plan(grid=(GridAxis.parse("a.b=true,0.5"),), base_overrides=("c=1",))
    assert p.overrides(p.variants[0]) == ["c=1", "a.b=true"]
    assert p.overrides(p.variants[1]) == ["c=1", "a.b=0.5"]


def test_sweep_id_changes_with_inputs():
    assert plan().sweep_id() == plan().sweep_id()
    assert plan().sweep_id() != plan(runs=5).sweep_id()
    assert plan().sweep_id() != plan(grid=(GridAxis.parse("a=1"),)).sweep_id()


@pytest.mark.parametrize(
    ("text", "message"),
    [("a=", "empty value list"), ("a=1,,2", "empty value list"), ("noequals", "path=v1")],
)
def test_bad_grid(text, message):
    with pytest.raises(PlanError, match=message):
        GridAxis.parse(text)


@pytest.mark.parametrize(
    "text", ["a=uniform(1)", "a=gaussian(0,1)", "a=uniform(2,1)", "a=loguniform(0,1)", "a=choice()"]
)
def test_bad_vary(text):
    with pytest.raises(PlanError):
        VarySpec.parse(text)


def test_runs_must_be_positive_and_paths_unique():
    with pytest.raises(PlanError, match="at least 1"):
        plan(runs=0)
    with pytest.raises(PlanError, match="twice"):
        plan(grid=(GridAxis.parse("a=1"),), vary=(VarySpec.parse("a=uniform(0,1)"),))


def test_chunks_cover_every_run_once():
    bounds = chunk_bounds(1001, 250)
    assert bounds[0] == (0, 250) and bounds[-1] == (1000, 1001)
    assert sum(e - s for s, e in bounds) == 1001


def test_chunks_never_cross_a_variant():
    # 3 variants of 25 runs in chunks of 10: 10, 10, 5 per variant.
    bounds = chunk_bounds(75, 10, runs_per_variant=25)
    assert bounds == [
        (0, 10), (10, 20), (20, 25), (25, 35), (35, 45), (45, 50), (50, 60), (60, 70), (70, 75)
    ]  # fmt: skip


def test_default_chunks_are_small_and_bounded():
    """Chunks are what an interruption can lose: a small sweep commits every ten runs (it
    used to be one chunk of up to 400 runs, lost whole on Ctrl-C), a large one in at most
    about 200 files of up to 1,000 runs."""
    assert [default_chunk_runs(n) for n in (1, 40, 399, 2_000, 20_000)] == [10, 10, 10, 10, 100]
    assert default_chunk_runs(1_000_000) == 1_000
    assert len(chunk_bounds(20_000, default_chunk_runs(20_000), 10_000)) == 200


def test_wilson_interval_matches_the_formula():
    k, n, z = 7, 120, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(centre - half, abs=1e-9)
    assert high == pytest.approx(centre + half, abs=1e-9)
    assert wilson_interval(0, 50)[0] == 0.0 and wilson_interval(0, 50)[1] > 0.05


def test_latency_quantiles_from_histograms():
    counts = histogram([1.0] * 98 + [1000.0] * 2)
    assert quantile(counts, 0.5) == pytest.approx(bucket_upper_ms(bucket_of(1.0)))
    assert quantile(counts, 0.99) == pytest.approx(bucket_upper_ms(bucket_of(1000.0)))
    assert 1.0 <= quantile(counts, 0.5) < 1.13
    assert quantile([0] * len(counts), 0.5) is None
