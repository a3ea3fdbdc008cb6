"""Equivalence tests: does the model agree with Kafka within a stated margin?

A test of difference ("do the two sides differ?") cannot say that they agree: with few runs
nothing is significant, and a tenfold gap passes where a 2% one, measured on many records, is
flagged. An equivalence test can. Each comparable figure gets one of three verdicts from two
one-sided tests (TOST; Schuirmann, J. Pharmacokinet. Biopharm. 15, 1987) of a parameter θ
(the log of the model's figure over Kafka's, or their difference) against a margin δ:

* **agree**: θ lies inside (-δ, δ), shown at level α: both H0 θ <= -δ and H0 θ >= δ are
  rejected (``p_equivalent``, the larger of the two one-sided p-values, is below α); the same
  as the (1 - 2α) interval of θ lying inside the margin;
* **disagree**: θ lies outside [-δ, δ], shown at level α: H0 -δ <= θ <= δ is rejected on
  one side (``p_different``, the smaller of the two one-sided p-values, is below α); the
  interval lies wholly beyond the margin;
* **inconclusive**: neither: the interval straddles a margin. ``runs_to_settle`` says how many
  runs per side would settle it if the estimate and the spread per run held.

The margins (:data:`RATE_MARGIN`, :data:`LATENCY_MARGIN`, :data:`SHARE_MARGIN`,
:data:`LAG_MARGIN`) are the project's, stated in docs/calibration.md: per-record rates within 2x,
latency quantiles within 20%, shares of runs within 15 percentage points, and a lag that can be
negative (the median time from a write's acknowledgement to its first read) within 1 ms.

Three estimators, one per kind of figure:

* :func:`rate_ratio`: anomalous records per record sent on each side, the run-clustered ratio
  estimator of :mod:`eosim.analysis.stats` (runs, not records, are independent), compared on
  the log of their ratio with the delta method's standard error. A side with no anomalous
  record has a rate of 0, whose log is not defined: it gets a one-sided upper bound clustered
  by run (:func:`eosim.analysis.stats.zero_count_upper`), and the row can then only disagree
  (the other side is significantly more than ``margin`` times that bound) or stay inconclusive;
  two sides with none are judged by their shares of runs (:func:`share_difference`);
* :func:`share_difference`: the share of runs with an anomaly, k of n, compared as a
  difference with Newcombe's hybrid score interval (Newcombe, Stat. Med. 17, 1998, method 10),
  built from Wilson intervals and so well behaved at 0 of n and n of n; its p-values invert it;
* :func:`log_ratio_welch`: per-run values (a run's latency quantile, a run's failover time)
  compared on the difference of their mean logs, with Welch's t;
* :func:`difference_welch`: per-run values that may be zero or negative (a lag between two
  processes' events), where no ratio is defined, compared on the difference of their means,
  with Welch's t.

:func:`holm` adjusts a family's p-values (Holm's step-down method, both kinds separately) and
re-derives the verdicts; :mod:`eosim.analysis.calibrate` applies it to the primary rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from eosim.analysis.stats import (
    RatioSums,
    ratio_standard_error,
    wilson_bounds,
    zero_count_upper,
)

ALPHA = 0.05

Verdict = Literal["agree", "disagree", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("agree", "disagree", "inconclusive")
# The largest number of runs per side :func:`runs_to_settle` searches.
MAX_RUNS = 10**7


@dataclass(frozen=True)
class Margin:
    """How far apart two figures may be and still agree: a ``ratio`` scale (``bound`` 2.0:
    either side at most twice the other) or a ``difference`` scale, in shares of runs
    (``unit`` "points", ``bound`` 0.15: 15 percentage points) or in milliseconds (``unit``
    "ms", ``bound`` 1.0: 1 ms)."""

    scale: Literal["ratio", "difference"]
    bound: float
    unit: Literal["points", "ms"] = "points"

    @property
    def delta(self) -> float:
        """The margin on the scale tested: log(bound) for a ratio, bound for a difference."""
        return math.log(self.bound) if self.scale == "ratio" else self.bound

    def describe(self) -> str:
        if self.scale == "difference":
            if self.unit == "ms":
                return f"within {self.bound:g} ms"
            return f"within {100 * self.bound:g} points"
        if self.bound >= 1.5:
            return f"within {self.bound:g}x"
        return f"within {100 * (self.bound - 1):g}%"


RATE_MARGIN = Margin("ratio", 2.0)
LATENCY_MARGIN = Margin("ratio", 1.2)
SHARE_MARGIN = Margin("difference", 0.15)
# A lag whose median sits at zero (acks=all: the acknowledgement and the consumer's fetch
# answer leave on the same high-watermark advance) has no ratio. 1 ms is the grain of Kafka's
# own request-latency metrics: a gap inside it is one Kafka does not report.
LAG_MARGIN = Margin("difference", 1.0, unit="ms")


@dataclass(frozen=True)
class Equivalence:
    """One comparison's outcome. ``estimate``, ``low`` and ``high`` are on the margin's own
    scale (a ratio, model over Kafka; or a difference, model minus Kafka), the interval at
    1 - 2α; ``p_equivalent`` and ``p_different`` as in the module docstring, adjusted when the
    comparison belongs to a corrected family (``adjusted``); ``runs_to_settle``: runs per
    side that would settle an inconclusive comparison (None: settled, or no number would)."""

    verdict: Verdict
    method: str
    margin: Margin
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    p_equivalent: float | None = None
    p_different: float | None = None
    runs_to_settle: int | None = None
    adjusted: bool = False

    @staticmethod
    def verdict_of(p_equivalent: float | None, p_different: float | None, alpha: float) -> Verdict:
        if p_equivalent is not None and p_equivalent < alpha:
            return "agree"
        if p_different is not None and p_different < alpha:
            return "disagree"
        return "inconclusive"


def one_side_only(margin: Margin, which: str) -> Equivalence:
    """A figure measured on one side only (``which``): it disagrees, as the two sides did not
    even produce the same kind of data."""
    return Equivalence("disagree", f"data on the {which} side only", margin, p_different=0.0)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _z(p: float) -> float:
    """The standard normal quantile of ``p``."""
    from scipy.stats import norm

    return float(norm.ppf(p))


def _one_sided(
    theta: float, se: float, delta: float, cdf: Callable[[float], float]
) -> tuple[float, float, float, float]:
    """The four one-sided p-values of ``theta`` with standard error ``se`` against ±``delta``:
    H0 θ <= -δ, H0 θ >= δ (the equivalence pair), H0 θ <= δ, H0 θ >= -δ (the difference
    pair). ``cdf`` is the statistic's distribution (normal, or Student's t)."""
    if se <= 0:
        inside = -delta < theta < delta
        eq = 0.0 if inside else 1.0
        return (eq, eq, 0.0 if theta > delta else 1.0, 0.0 if theta < -delta else 1.0)
    lower = (theta + delta) / se
    upper = (theta - delta) / se
    return (1.0 - cdf(lower), cdf(upper), 1.0 - cdf(upper), cdf(lower))


def _decide(
    method: str,
    margin: Margin,
    theta: float,
    se: float,
    runs: int,
    *,
    alpha: float = ALPHA,
    df: float | None = None,
) -> Equivalence:
    """The verdict on θ (log ratio or difference) with standard error ``se`` from ``runs``
    runs per side (the smaller side), by normal tests or, with ``df``, Student's t."""
    if df is None:
        cdf = _phi
        crit = _z(1.0 - alpha)
    else:
        from scipy.stats import t

        def cdf(x: float) -> float:
            return float(t.cdf(x, df))

        crit = float(t.ppf(1.0 - alpha, df))
    delta = margin.delta
    p_low, p_high, p_up, p_down = _one_sided(theta, se, delta, cdf)
    p_eq, p_diff = max(p_low, p_high), min(p_up, p_down)
    verdict = Equivalence.verdict_of(p_eq, p_diff, alpha)
    low, high = theta - crit * se, theta + crit * se
    settle = None
    if verdict == "inconclusive" and se > 0 and abs(theta) != delta:
        # se shrinks as 1/sqrt(runs): the runs at which the interval clears the margin (with
        # today's critical value, which only shrinks with more runs: an upper estimate).
        needed = abs(delta - abs(theta)) / crit
        settle = min(max(math.ceil(runs * (se / needed) ** 2), runs + 1), MAX_RUNS)
    to_scale = math.exp if margin.scale == "ratio" else float
    return Equivalence(
        verdict,
        method,
        margin,
        to_scale(theta),
        to_scale(low),
        to_scale(high),
        p_eq,
        p_diff,
        settle,
    )


# -- rates -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateSide:
    """One side's runs for a per-record rate: per run, the records sent and how many of them
    were anomalous."""

    sums: RatioSums
    runs_with: int

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, int]]) -> RateSide:
        return cls(RatioSums.of(pairs), sum(1 for _x, y in pairs if y > 0))

    @property
    def rate(self) -> float:
        return self.sums.y / self.sums.x

    def log_se(self) -> float:
        """Standard error of log(rate): the run-clustered delta method's, never below the
        Poisson one of independent records (1 / sqrt(anomalous records))."""
        r = self.rate
        return max(ratio_standard_error(self.sums) / r, 1.0 / math.sqrt(self.sums.y))

    def cluster_size(self) -> float:
        """Anomalous records per run that had any."""
        return self.sums.y / self.runs_with if self.runs_with else 1.0


def rate_ratio(
    model: RateSide, kafka: RateSide, margin: Margin = RATE_MARGIN, alpha: float = ALPHA
) -> Equivalence | None:
    """The model's per-record rate against Kafka's, on the log of their ratio (see the module
    docstring); None when neither side saw an anomalous record (judge the shares of runs
    instead) or a side sent nothing."""
    if model.sums.x <= 0 or kafka.sums.x <= 0:
        return None
    runs = min(model.sums.n, kafka.sums.n)
    if model.sums.y > 0 and kafka.sums.y > 0:
        theta = math.log(model.rate / kafka.rate)
        se = math.hypot(model.log_se(), kafka.log_se())
        return _decide("log rate ratio, run-clustered", margin, theta, se, runs, alpha=alpha)
    if model.sums.y == 0 and kafka.sums.y == 0:
        return None
    return _rate_against_zero(model, kafka, margin, alpha)


def _zero_bound(zero: RateSide, other: RateSide, level: float) -> float:
    """The zero side's one-sided upper bound at ``level``, clustered by run with the other
    side's cluster size."""
    s = zero.sums
    return zero_count_upper(s.n, s.x, other.cluster_size(), level)


def _rate_against_zero(
    model: RateSide, kafka: RateSide, margin: Margin, alpha: float
) -> Equivalence:
    """One side saw none: it can only be shown to be below 1/``margin`` of the other (or the
    other above ``margin`` times it): disagree, or inconclusive. The two one-sided bounds, the
    zero side's upper and the other's lower, are each taken at level p/2 (Bonferroni), and
    ``p_different`` is the smallest p at which they clear the margin."""
    model_zero = model.sums.y == 0
    zero, other = (model, kafka) if model_zero else (kafka, model)
    log_m = margin.delta

    def gap(level: float, scale: float = 1.0) -> float:
        """log(other's lower bound / margin / zero's upper bound) at ``level``, with both
        sides' runs multiplied by ``scale``: positive when the gap is shown."""
        z = zero if scale == 1.0 else _scaled(zero, scale)
        o = other if scale == 1.0 else _scaled(other, scale)
        upper = _zero_bound(z, o, level / 2)
        lower = math.log(o.rate) - _z(1.0 - level / 2) * o.log_se()
        return lower - log_m - math.log(upper)

    p_diff = _smallest_level(gap)
    upper = _zero_bound(zero, other, alpha)
    lower = other.rate * math.exp(-_z(1.0 - alpha) * other.log_se())
    verdict: Verdict = "disagree" if p_diff < alpha else "inconclusive"
    settle = None
    if verdict == "inconclusive":
        settle = _runs_to_settle(lambda s: gap(alpha, s) > 0, min(zero.sums.n, other.sums.n))
    bound = upper / lower
    low, high = (0.0, bound) if model_zero else (1.0 / bound, math.inf)
    return Equivalence(
        verdict,
        f"none on the {'model' if model_zero else 'Kafka'} side: its bound clustered by run",
        margin,
        0.0 if model_zero else math.inf,
        low,
        high,
        1.0,
        p_diff,
        settle,
    )


def _scaled(side: RateSide, factor: float) -> RateSide:
    """``side`` with ``factor`` times as many runs, each like its own (sums scaled; the
    clustered variance scales with them)."""
    s = side.sums
    sums = RatioSums(
        round(s.n * factor),
        round(s.x * factor),
        round(s.y * factor),
        round(s.xx * factor),
        round(s.xy * factor),
        round(s.yy * factor),
    )
    return RateSide(sums, round(side.runs_with * factor))


def _smallest_level(shown: Callable[[float], float]) -> float:
    """The smallest level p in (0, 1] at which ``shown(p) > 0`` (``shown`` grows with p);
    1.0 when even p = 1 does not show it."""
    if shown(1.0 - 1e-12) <= 0:
        return 1.0
    lo, hi = -40.0, 0.0  # log10 of the level
    if shown(10.0**lo) > 0:
        return 10.0**lo
    for _ in range(60):
        mid = (lo + hi) / 2
        if shown(10.0**mid) > 0:
            hi = mid
        else:
            lo = mid
    return 10.0**hi


def _runs_to_settle(settled: Callable[[float], bool], runs: int) -> int | None:
    """The least runs per side (``runs`` times a factor) at which ``settled(factor)`` holds,
    found by doubling and then bisection; None beyond :data:`MAX_RUNS`."""
    if runs <= 0:
        return None
    lo, hi = 1.0, 2.0
    while not settled(hi):
        lo, hi = hi, hi * 2
        if runs * hi > MAX_RUNS:
            return None
    while runs * (hi - lo) > 1:
        mid = (lo + hi) / 2
        if settled(mid):
            hi = mid
        else:
            lo = mid
    return math.ceil(runs * hi)


# -- shares of runs --------------------------------------------------------------------------
def _newcombe(k1: int, n1: float, k2: int, n2: float, z: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p1 - p2 at normal quantile ``z``, with ``n1`` and
    ``n2`` trials (real numbers allowed, for projections) and the observed shares."""
    p1, p2 = k1 / n1, k2 / n2
    return _newcombe_shares(p1, n1, p2, n2, z)


def _newcombe_shares(p1: float, n1: float, p2: float, n2: float, z: float) -> tuple[float, float]:
    l1, u1 = wilson_bounds(p1, n1, z)
    l2, u2 = wilson_bounds(p2, n2, z)
    d = p1 - p2
    return (d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2))


def _p_beyond(bound_at: Callable[[float], float], target: float, estimate: float) -> float:
    """The one-sided p-value, by inverting an interval, of H0 "θ is on the far side of
    ``target``": ``bound_at(z)`` is the interval's bound towards ``target`` at normal quantile
    z (moving away from ``estimate`` as z grows). p = 1 - Φ(z*) where bound_at(z*) = target;
    when the estimate is itself beyond the target, p = Φ(z*) of the opposite bound, >= 0.5."""
    if estimate == target:
        return 0.5
    towards = 1.0 if target > estimate else -1.0

    def reached(z: float) -> bool:
        return towards * (bound_at(z) - target) >= 0

    lo, hi = 0.0, 1.0
    while not reached(hi):
        lo, hi = hi, hi * 2
        if hi > 64:
            return 0.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return 1.0 - _phi(hi)


def share_difference(
    k_model: int,
    n_model: int,
    k_kafka: int,
    n_kafka: int,
    margin: Margin = SHARE_MARGIN,
    alpha: float = ALPHA,
) -> Equivalence:
    """The model's share of runs with an anomaly (k of n) against Kafka's, as a difference
    (model minus Kafka) with Newcombe's hybrid score interval."""
    delta = margin.delta
    d = k_model / n_model - k_kafka / n_kafka

    def upper(z: float) -> float:
        return _newcombe(k_model, n_model, k_kafka, n_kafka, z)[1]

    def lower(z: float) -> float:
        return _newcombe(k_model, n_model, k_kafka, n_kafka, z)[0]

    # H0 θ >= δ is rejected when the upper bound is below δ; H0 θ <= -δ when the lower bound
    # is above -δ. The difference pair is their complement.
    p_high = _p_beyond(upper, delta, d) if d < delta else 1.0 - _p_beyond(lower, delta, d)
    p_low = _p_beyond(lower, -delta, d) if d > -delta else 1.0 - _p_beyond(upper, -delta, d)
    p_eq = max(p_high, p_low)
    p_diff = min(1.0 - p_high, 1.0 - p_low)
    verdict = Equivalence.verdict_of(p_eq, p_diff, alpha)
    z = _z(1.0 - alpha)
    low, high = _newcombe(k_model, n_model, k_kafka, n_kafka, z)
    settle = None
    if verdict == "inconclusive" and abs(d) != delta:
        p1, p2 = k_model / n_model, k_kafka / n_kafka

        def settled(factor: float) -> bool:
            lo, hi = _newcombe_shares(p1, n_model * factor, p2, n_kafka * factor, z)
            if abs(d) < delta:
                return -delta < lo and hi < delta
            return hi < -delta or lo > delta

        settle = _runs_to_settle(settled, min(n_model, n_kafka))
    return Equivalence(
        verdict, "difference of shares, Newcombe", margin, d, low, high, p_eq, p_diff, settle
    )


# -- per-run values --------------------------------------------------------------------------
def log_ratio_welch(
    model: Sequence[float],
    kafka: Sequence[float],
    margin: Margin = LATENCY_MARGIN,
    alpha: float = ALPHA,
) -> Equivalence | None:
    """Per-run values (positive: a latency quantile, a failover time) compared on the
    difference of their mean logs, that is the ratio of their geometric means, with Welch's t.
    Values that are not positive cannot be logged and are left out; None when a side has
    fewer than two left."""
    a = [math.log(v) for v in model if v is not None and v > 0 and math.isfinite(v)]
    b = [math.log(v) for v in kafka if v is not None and v > 0 and math.isfinite(v)]
    return _welch("ratio of geometric means, Welch", a, b, margin, alpha)


def difference_welch(
    model: Sequence[float],
    kafka: Sequence[float],
    margin: Margin = LAG_MARGIN,
    alpha: float = ALPHA,
) -> Equivalence | None:
    """Per-run values of any sign (a lag between two processes' events) compared on the
    difference of their means, model minus Kafka, with Welch's t. None when a side has fewer
    than two finite values."""
    a = [float(v) for v in model if v is not None and math.isfinite(v)]
    b = [float(v) for v in kafka if v is not None and math.isfinite(v)]
    return _welch("difference of means, Welch", a, b, margin, alpha)


def _welch(
    method: str, a: list[float], b: list[float], margin: Margin, alpha: float
) -> Equivalence | None:
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    qa, qb = va / len(a), vb / len(b)
    se = math.sqrt(qa + qb)
    if se > 0:
        df = (qa + qb) ** 2 / (
            (qa**2 / (len(a) - 1) if qa else 0.0) + (qb**2 / (len(b) - 1) if qb else 0.0)
        )
    else:
        df = float(len(a) + len(b) - 2)
    return _decide(method, margin, ma - mb, se, min(len(a), len(b)), alpha=alpha, df=df)


# -- families --------------------------------------------------------------------------------
def holm_adjust(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``ps`` (None entries are left out and stay None)."""
    tested = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def holm(family: Sequence[Equivalence], alpha: float = ALPHA) -> list[Equivalence]:
    """``family`` with both kinds of p-value Holm-adjusted over it and the verdicts
    re-derived; the interval and ``runs_to_settle`` stay those of one comparison."""
    eq = holm_adjust([e.p_equivalent for e in family])
    diff = holm_adjust([e.p_different for e in family])
    return [
        replace(
            e,
            p_equivalent=pe,
            p_different=pd,
            verdict=Equivalence.verdict_of(pe, pd, alpha),
            adjusted=True,
        )
        for e, pe, pd in zip(family, eq, diff, strict=True)
    ]


__all__ = [
    "ALPHA",
    "LAG_MARGIN",
    "LATENCY_MARGIN",
    "RATE_MARGIN",
    "SHARE_MARGIN",
    "VERDICTS",
    "Equivalence",
    "Margin",
    "RateSide",
    "Verdict",
    "difference_welch",
    "holm",
    "holm_adjust",
    "log_ratio_welch",
    "one_side_only",
    "rate_ratio",
    "share_difference",
]
