"""The equivalence tests of eosim.analysis.equivalence: for each estimator a case that agrees,
one that disagrees and one that is inconclusive; the p-values consistent with the intervals;
the runs that would settle an inconclusive comparison settle it; Holm's adjustment."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eosim.analysis.calibrate import estimate_text
from eosim.analysis.equivalence import (
    ALPHA,
    LAG_MARGIN,
    LATENCY_MARGIN,
    SHARE_MARGIN,
    Equivalence,
    RateSide,
    _newcombe_shares,
    difference_welch,
    holm,
    holm_adjust,
    log_ratio_welch,
    one_side_only,
    rate_ratio,
    share_difference,
)
from eosim.analysis.stats import poisson_rate_interval, zero_count_upper


def _runs(rng: random.Random, n: int, records: int, low: int, high: int) -> RateSide:
    return RateSide.of([(records, rng.randint(low, high)) for _ in range(n)])


# -- per-record rates ----------------------------------------------------------------------
def test_similar_rates_over_many_runs_agree():
    rng = random.Random(1)
    model, kafka = _runs(rng, 20, 10_000, 5, 12), _runs(rng, 20, 10_000, 5, 12)
    result = rate_ratio(model, kafka)
    assert result is not None and result.verdict == "agree"
    assert 0.5 < result.low < result.estimate < result.high < 2.0


def test_a_tenfold_rate_disagrees():
    """Case 1's acks=1 loss: 12.5 against 119 per million is far outside 2x."""
    model = RateSide.of([(36_000, 5)] * 3 + [(36_000, 0)] * 17)
    kafka = RateSide.of([(36_000, 6)] * 15 + [(36_000, 0)] * 5)
    result = rate_ratio(model, kafka)
    assert result is not None and result.verdict == "disagree"
    assert result.high < 0.5 and result.p_different < ALPHA


def test_a_rate_twice_as_high_in_a_few_noisy_runs_is_inconclusive():
    rng = random.Random(3)
    model, kafka = _runs(rng, 5, 10_000, 0, 40), _runs(rng, 5, 10_000, 0, 20)
    result = rate_ratio(model, kafka)
    assert result is not None and result.verdict == "inconclusive"
    assert result.runs_to_settle is not None and result.runs_to_settle > 5


def test_none_on_one_side_against_many_every_run_disagrees():
    model = RateSide.of([(10_000, 0)] * 20)
    kafka = RateSide.of([(10_000, 30)] * 20)
    result = rate_ratio(model, kafka)
    assert result is not None and result.verdict == "disagree"
    assert result.estimate == 0.0 and result.high < 0.5
    mirrored = rate_ratio(kafka, model)
    assert mirrored is not None and mirrored.verdict == "disagree"
    assert math.isinf(mirrored.estimate) and mirrored.low > 2.0


def test_none_on_one_side_against_a_few_runs_is_inconclusive():
    """Case 2's duplicates: the model none in 20 runs, Kafka 333 per million in 5 of 20."""
    model = RateSide.of([(15_000, 0)] * 20)
    kafka = RateSide.of([(15_000, 20)] * 5 + [(15_000, 0)] * 15)
    result = rate_ratio(model, kafka)
    assert result is not None and result.verdict == "inconclusive"
    assert result.p_equivalent == 1.0  # a zero can never be shown within 2x
    assert result.runs_to_settle is not None and result.runs_to_settle > 20


def test_none_on_either_side_is_not_a_rate_comparison():
    assert rate_ratio(RateSide.of([(100, 0)] * 3), RateSide.of([(100, 0)] * 3)) is None


def test_a_zero_bound_clustered_by_run_is_wider_than_the_poisson_one():
    poisson = poisson_rate_interval(0, 20 * 15_000)[1]
    assert zero_count_upper(20, 20 * 15_000, 1.0) == pytest.approx(poisson, rel=0.01)
    clustered = zero_count_upper(20, 20 * 15_000, 20.0)
    assert clustered > 10 * poisson
    # More runs narrow it; a larger cluster widens it.
    assert zero_count_upper(200, 200 * 15_000, 20.0) < clustered
    assert zero_count_upper(20, 20 * 15_000, 40.0) > clustered


# -- shares of runs --------------------------------------------------------------------------
def test_shares_agree_disagree_or_stay_inconclusive():
    assert share_difference(0, 40, 1, 40).verdict == "agree"
    assert share_difference(0, 20, 0, 20).verdict == "agree"
    assert share_difference(3, 20, 15, 20).verdict == "disagree"
    # Case 2's duplicates, 0 of 20 against 5 of 20: not shown either way at 20 runs.
    undecided = share_difference(0, 20, 5, 20)
    assert undecided.verdict == "inconclusive"
    assert undecided.estimate == pytest.approx(-0.25)


def test_the_runs_that_would_settle_a_share_settle_it():
    """At the runs given, the interval of the same shares clears the margin; one run fewer,
    it does not."""
    z = 1.6448536269514722  # the 90% interval's
    delta = SHARE_MARGIN.delta

    def settled(p1: float, p2: float, n: float) -> bool:
        low, high = _newcombe_shares(p1, n, p2, n, z)
        return (-delta < low and high < delta) or high < -delta or low > delta

    for k1, n1, k2, n2 in ((10, 40, 11, 40), (0, 20, 5, 20), (20, 20, 19, 20)):
        result = share_difference(k1, n1, k2, n2)
        assert result.verdict == "inconclusive"
        more = result.runs_to_settle
        assert more is not None and more > n1
        assert settled(k1 / n1, k2 / n2, more)
        assert not settled(k1 / n1, k2 / n2, more - 1)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n1: st.tuples(
            st.integers(0, n1),
            st.just(n1),
            st.integers(1, 60).flatmap(lambda n2: st.tuples(st.integers(0, n2), st.just(n2))),
        )
    )
)
def test_share_verdicts_follow_the_interval(case):
    """Inverting the interval gives p-values whose verdict is the interval's: agree exactly
    when the 90% interval lies inside the margin, disagree when it lies wholly outside."""
    k1, n1, (k2, n2) = case
    result = share_difference(k1, n1, k2, n2)
    delta, eps = SHARE_MARGIN.delta, 1e-6
    if -delta + eps < result.low and result.high < delta - eps:
        assert result.verdict == "agree"
    elif result.high < -delta - eps or result.low > delta + eps:
        assert result.verdict == "disagree"
    elif (
        min(
            abs(result.low - delta),
            abs(result.low + delta),
            abs(result.high - delta),
            abs(result.high + delta),
        )
        > eps
    ):
        assert result.verdict == "inconclusive"


# -- per-run values --------------------------------------------------------------------------
def test_latencies_within_a_few_percent_agree():
    """Case 5's warm p50, 5.31 against 5.21 ms: a difference test flagged it; within 20%."""
    rng = random.Random(5)
    model = [5.31 * math.exp(rng.gauss(0, 0.03)) for _ in range(20)]
    kafka = [5.21 * math.exp(rng.gauss(0, 0.03)) for _ in range(20)]
    result = log_ratio_welch(model, kafka)
    assert result is not None and result.verdict == "agree"


def test_tenfold_latencies_disagree():
    rng = random.Random(6)
    model = [9.5 * math.exp(rng.gauss(0, 0.2)) for _ in range(20)]
    kafka = [91 * math.exp(rng.gauss(0, 0.5)) for _ in range(20)]
    result = log_ratio_welch(model, kafka)
    assert result is not None and result.verdict == "disagree" and result.high < 1 / 1.2


def test_noisy_latencies_from_few_runs_are_inconclusive():
    rng = random.Random(7)
    model = [5.0 * math.exp(rng.gauss(0, 0.6)) for _ in range(4)]
    kafka = [5.5 * math.exp(rng.gauss(0, 0.6)) for _ in range(4)]
    result = log_ratio_welch(model, kafka)
    assert result is not None and result.verdict == "inconclusive"
    assert result.runs_to_settle is not None and result.runs_to_settle > 4


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(0.1, 1000.0), min_size=2, max_size=12),
    st.lists(st.floats(0.1, 1000.0), min_size=2, max_size=12),
)
def test_welch_verdicts_follow_the_interval(model, kafka):
    result = log_ratio_welch(model, kafka, LATENCY_MARGIN)
    assert result is not None
    bound = LATENCY_MARGIN.bound
    if 1 / bound * 1.000001 < result.low and result.high * 1.000001 < bound:
        assert result.verdict == "agree"
    elif result.high * 1.000001 < 1 / bound or result.low > bound * 1.000001:
        assert result.verdict == "disagree"


# -- lags of either sign ---------------------------------------------------------------------
def test_a_median_lag_at_zero_of_either_sign_agrees_within_a_millisecond():
    """Case 5, acks=all: the median ack to first read is a few µs either side of zero on
    Kafka (the ack and the fetch answer leave together); the log ratio drops those values."""
    rng = random.Random(8)
    model = [0.15 + rng.gauss(0, 0.05) for _ in range(20)]
    kafka = [rng.gauss(0, 0.01) for _ in range(20)]
    assert any(v < 0 for v in kafka)
    result = difference_welch(model, kafka)
    assert result is not None and result.verdict == "agree"
    assert result.low < 0.15 < result.high and estimate_text(result).endswith(" ms")


def test_a_lag_several_milliseconds_apart_disagrees():
    rng = random.Random(9)
    model = [4.0 + rng.gauss(0, 0.5) for _ in range(20)]
    kafka = [rng.gauss(0, 0.2) for _ in range(20)]
    result = difference_welch(model, kafka, LAG_MARGIN)
    assert result is not None and result.verdict == "disagree" and result.low > 1.0


def test_a_noisy_lag_from_few_runs_is_inconclusive():
    rng = random.Random(10)
    model = [0.8 + rng.gauss(0, 1.0) for _ in range(4)]
    kafka = [rng.gauss(0, 1.0) for _ in range(4)]
    result = difference_welch(model, kafka, LAG_MARGIN)
    assert result is not None and result.verdict == "inconclusive"
    assert result.runs_to_settle is not None and result.runs_to_settle > 4
    assert difference_welch([1.0], [0.0, 1.0]) is None


def test_too_few_values_and_one_sided_data():
    assert log_ratio_welch([5.0], [5.0, 6.0]) is None
    assert log_ratio_welch([-1.0, 0.0, 5.0], [5.0, 6.0]) is None  # one positive value left
    only = one_side_only(LATENCY_MARGIN, "model")
    assert only.verdict == "disagree" and "model side only" in only.method


# -- families --------------------------------------------------------------------------------
def test_holm_adjusts_by_rank():
    assert holm_adjust([0.01, 0.04, None, 0.03]) == [0.03, 0.06, None, 0.06]


def test_holm_turns_a_lone_agreement_inconclusive_in_a_large_family():
    lone = share_difference(0, 20, 0, 20)  # p_equivalent 0.030
    assert lone.verdict == "agree"
    family = holm([lone] * 4)
    assert all(e.verdict == "inconclusive" and e.adjusted for e in family)
    assert all(e.p_equivalent == pytest.approx(min(1.0, 4 * lone.p_equivalent)) for e in family)


def test_verdict_of_p_values():
    assert Equivalence.verdict_of(0.01, 0.99, ALPHA) == "agree"
    assert Equivalence.verdict_of(0.99, 0.01, ALPHA) == "disagree"
    assert Equivalence.verdict_of(0.2, 0.3, ALPHA) == "inconclusive"
    assert Equivalence.verdict_of(None, None, ALPHA) == "inconclusive"
