"""Statistics for reliability tables: Wilson intervals, per-record rates with run-clustered
intervals, latency sketches and histograms.

A per-record rate (anomalous records per million records) treats the *run* as the unit of
independence: one run's records share its faults, so they are not independent draws.
:func:`ratio_interval` is the ratio estimator r = sum(y) / sum(x) over runs i (y_i the
anomalous records, x_i the records of run i) with its linearised (delta-method) variance,
the cluster-robust variance of a ratio estimator (Cochran, *Sampling Techniques*, 3rd ed.,
ch. 6, ratio estimators, applied with each run as one cluster):

    var(r) = n / (n - 1) * sum((y_i - r * x_i) ** 2) / sum(x) ** 2

and the normal interval r +- 1.96 se, clipped at 0, widened to hold the exact Poisson
interval for independent records when that one is wider (so that the interval never
collapses to a point when runs happen to agree, nor to [0, 0] when no record was anomalous).
The delta method needs only the sums of x, y, x*x, x*y and y*y per variant, which Spark
computes exactly, and no random draws (a cluster bootstrap would need both every run on the
driver and a random stream).

Latency quantiles come from DDSketch (Datadog's ``ddsketch`` package): a run's latencies go
into a sketch with a relative accuracy of 1% (:data:`RELATIVE_ACCURACY`), serialised with the
package's protobuf format. Sketches merge without losing accuracy, so a variant's p50 and p99
over thousands of runs are within 1% of the exact quantiles of all its latencies.

Latencies are also counted in fixed log-spaced buckets (20 per decade, 0.01 ms to 10^6 ms),
which the report draws as distribution curves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# DDSketch's guarantee: a quantile it returns is within this fraction of the exact one.
RELATIVE_ACCURACY = 0.01

BUCKETS_PER_DECADE = 20
LOW_EXPONENT = -2  # 0.01 ms
HIGH_EXPONENT = 6  # 10^6 ms
N_BUCKETS = (HIGH_EXPONENT - LOW_EXPONENT) * BUCKETS_PER_DECADE + 1


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (scipy's implementation)."""
    if trials <= 0:
        return (0.0, 1.0)
    from scipy.stats import binomtest  # only the driver needs scipy; workers never load it

    ci = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


Z95 = 1.959963984540054
PER_MILLION = 1_000_000


def wilson_bounds(rate: float, trials: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``rate`` over ``trials`` (not necessarily a
    whole number: an effective sample size), in closed form; equal to
    :func:`wilson_interval` for ``rate = k / trials``."""
    if trials <= 0:
        return (0.0, 1.0)
    z2n = z * z / trials
    centre = (rate + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(rate * (1 - rate) / trials + z2n / (4 * trials)) / (1 + z2n)
    # At a rate of 0 (1) the low (high) bound is 0 (1) exactly; rounding would leave a speck.
    low = 0.0 if rate <= 0 else max(centre - half, 0.0)
    high = 1.0 if rate >= 1 else min(centre + half, 1.0)
    return (low, high)


MAX_TRIALS = 10**15


def _settled(op: str, bound: float, low: float, high: float) -> bool:
    """Whether [low, high] lies wholly on one side of ``bound`` for a condition ``op``."""
    if op in ("<", ">="):
        return high < bound or low >= bound
    return high <= bound or low > bound  # "<=", ">"


def trials_to_settle(rate: float, trials: float, op: str, bound: float) -> float | None:
    """The least number of trials (a real number: round it up) at which the Wilson interval of
    ``rate`` would no longer straddle ``bound`` (for a condition ``op bound``, as
    :func:`eosim.analysis.sweep.verdict.interval_verdict` judges it), if the observed rate
    held; ``trials`` when it does not straddle it already; None when no number would: the
    rate is the bound itself (``>0`` with nothing seen, say), or beyond :data:`MAX_TRIALS`.

    The Wilson interval of a fixed rate narrows monotonically towards it as the trials grow,
    so the answer is found by doubling and then bisection."""
    if _settled(op, bound, *wilson_bounds(rate, trials)):
        return trials
    if rate == bound:
        return None
    low, high = trials, max(trials, 1.0) * 2
    while not _settled(op, bound, *wilson_bounds(rate, high)):
        low, high = high, high * 2
        if high > MAX_TRIALS:
            return None
    for _ in range(200):
        if high - low <= high * 1e-12:
            break
        middle = (low + high) / 2
        if _settled(op, bound, *wilson_bounds(rate, middle)):
            high = middle
        else:
            low = middle
    return high


def effective_trials(rate: float, low: float, high: float) -> float | None:
    """The number of independent trials whose Wilson interval around ``rate`` is as wide as
    [low, high] (an interval from clustered data, or a Poisson one): the effective sample
    size behind it. None for an unbounded or empty interval."""
    width = high - low
    if not math.isfinite(width) or width <= 0:
        return None
    if rate >= 1:
        return None
    lo, hi = 1e-9, 1.0
    while wilson_bounds(rate, hi)[1] - wilson_bounds(rate, hi)[0] > width:
        lo, hi = hi, hi * 2
        if hi > MAX_TRIALS:
            return None
    for _ in range(200):
        middle = (lo + hi) / 2
        low_m, high_m = wilson_bounds(rate, middle)
        if high_m - low_m > width:
            lo = middle
        else:
            hi = middle
        if hi - lo <= hi * 1e-9:
            break
    return hi


@dataclass(frozen=True, slots=True)
class RatioSums:
    """What :func:`ratio_interval` needs of a set of runs: their number and the sums of x, y,
    x*x, x*y and y*y (exact integers)."""

    n: int
    x: int
    y: int
    xx: int
    xy: int
    yy: int

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> RatioSums:
        """The sums of (x_i, y_i) pairs: records and anomalous records per run."""
        n = x = y = xx = xy = yy = 0
        for xi, yi in pairs:
            n += 1
            x, y = x + xi, y + yi
            xx, xy, yy = xx + xi * xi, xy + xi * yi, yy + yi * yi
        return cls(n, x, y, xx, xy, yy)


def ratio_standard_error(sums: RatioSums) -> float:
    """The delta-method standard error of sum(y) / sum(x) with runs as clusters (see the
    module docstring); infinite with fewer than two runs. ``sums.x`` must be positive."""
    if sums.n < 2:
        return math.inf
    # sum((y - r x)^2) * X^2 = yy X^2 - 2 Y X xy + Y^2 xx, exactly in integers.
    residual = sums.yy * sums.x**2 - 2 * sums.y * sums.x * sums.xy + sums.y**2 * sums.xx
    variance = sums.n / (sums.n - 1) * (residual / sums.x**2) / sums.x**2
    return math.sqrt(max(variance, 0.0))


def clustered_ratio_interval(sums: RatioSums) -> tuple[float, float, float]:
    """The ratio sum(y) / sum(x) and its 95% delta-method interval with runs as clusters
    (see the module docstring), clipped at 0: (estimate, low, high). ``sums.x`` must be
    positive; with fewer than two runs the variance is unknown and ``high`` is infinite."""
    r = sums.y / sums.x
    if sums.n < 2:
        return (r, 0.0, math.inf)
    se = ratio_standard_error(sums)
    return (r, max(r - Z95 * se, 0.0), r + Z95 * se)


def zero_count_upper(runs: int, records: int, cluster_size: float, level: float = 0.025) -> float:
    """A one-sided upper bound (at ``level``) on the per-record rate of a side that saw no
    anomalous record in ``runs`` runs of ``records`` records in all, clustered by run.

    Anomalous records come in clusters (a leader's death loses a burst of writes in one run),
    so a count of zero says first that few *runs* have the anomaly: at most
    1 - level ** (1 / runs) of them (the exact binomial bound for 0 of ``runs``). Each such run
    would carry ``cluster_size`` anomalous records (taken from where the anomaly was seen: the
    other side of a comparison), out of records / runs. The bound is that share of runs times
    the cluster over a run's records, and never below the Poisson bound for independent records,
    -ln(level) / records, which it equals for clusters of one."""
    if runs <= 0 or records <= 0:
        return math.inf
    share = 1.0 - level ** (1.0 / runs)
    clustered = share * max(cluster_size, 1.0) / (records / runs)
    return max(clustered, -math.log(level) / records)


def poisson_rate_interval(events: int, exposure: int) -> tuple[float, float]:
    """The exact (Garwood) 95% interval of a Poisson rate: ``events`` seen over ``exposure``
    independent records. For 0 events the upper bound is -ln(0.025) / exposure."""
    if events == 0:
        return (0.0, -math.log(0.025) / exposure)
    from scipy.stats import chi2  # only the driver needs scipy

    low = float(chi2.ppf(0.025, 2 * events)) / 2
    high = float(chi2.ppf(0.975, 2 * events + 2)) / 2
    return (low / exposure, high / exposure)


def ratio_interval(
    sums: RatioSums, scale: float = PER_MILLION
) -> tuple[float | None, float | None, float | None]:
    """Anomalous records per ``scale`` records over a set of runs, with a 95% interval:
    (estimate, low, high); (None, None, None) when the runs have no record at all.

    The interval is the run-clustered one of :func:`clustered_ratio_interval`, widened where
    needed to hold the exact Poisson interval of :func:`poisson_rate_interval`: never narrower
    than if every record were an independent draw. The delta method alone collapses to a
    point when the runs show no variation, most visibly when no record was anomalous (it
    would claim [0, 0]); then the Poisson bound, -ln(0.025) / sum(x), is the upper bound.
    With a single run (no variance between runs) the upper bound is infinite.
    """
    if sums.x <= 0:
        return (None, None, None)
    r, low, high = clustered_ratio_interval(sums)
    p_low, p_high = poisson_rate_interval(sums.y, sums.x)
    return (scale * r, scale * min(low, p_low), scale * max(high, p_high))


def format_ppm(value: float | None) -> str:
    """A rate per million with three significant digits, thousands separated (``37,700``,
    ``1,150``, ``52.3``, ``0.412``); ``∞``, and ``-`` for none."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "∞"
    rounded = float(f"{value:.3g}")
    if rounded >= 100:
        return f"{rounded:,.0f}"
    return f"{rounded:g}"


def bucket_of(latency_ms: float) -> int:
    if latency_ms <= 0:
        return 0
    index = math.floor(BUCKETS_PER_DECADE * (math.log10(latency_ms) - LOW_EXPONENT)) + 1
    return min(max(index, 0), N_BUCKETS - 1)


def bucket_upper_ms(index: int) -> float:
    return 10 ** (LOW_EXPONENT + index / BUCKETS_PER_DECADE)


def histogram(latencies: Iterable[float]) -> list[int]:
    counts = [0] * N_BUCKETS
    for x in latencies:
        counts[bucket_of(x)] += 1
    return counts


def quantile(counts: Sequence[int], q: float) -> float | None:
    """The upper edge of the bucket holding quantile ``q``; None for an empty histogram."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    running = 0
    for i, c in enumerate(counts):
        running += c
        if running >= rank and c:
            return bucket_upper_ms(i)
    return bucket_upper_ms(len(counts) - 1)


def _sketch(latencies: Iterable[float] = ()) -> Any:
    from ddsketch import DDSketch

    sketch = DDSketch(relative_accuracy=RELATIVE_ACCURACY)
    for x in latencies:
        sketch.add(x)
    return sketch


def _encode(sketch: Any) -> bytes:
    from ddsketch.pb.proto import DDSketchProto

    return DDSketchProto.to_proto(sketch).SerializeToString()


def _decode(blob: bytes) -> Any:
    from ddsketch.pb.ddsketch_pb2 import DDSketch as SketchMessage
    from ddsketch.pb.proto import DDSketchProto

    message = SketchMessage()
    message.ParseFromString(blob)
    return DDSketchProto.from_proto(message)


def load_sketch(blob: bytes) -> Any:
    """A serialised sketch as a mergeable ``DDSketch`` (:func:`dump_sketch` is the reverse)."""
    return _decode(blob)


def dump_sketch(sketch: Any) -> bytes:
    """A merged ``DDSketch`` serialised canonically, as the aggregate holds it: each store
    trimmed to its first and last non-empty bucket, so that the bytes depend on the counts
    only, not on the order of the merges that made them (a store's padding does)."""
    from ddsketch.pb.proto import DDSketchProto

    message = DDSketchProto.to_proto(sketch)
    for store in (message.positiveValues, message.negativeValues):
        counts = list(store.contiguousBinCounts)
        used = [i for i, c in enumerate(counts) if c]
        del store.contiguousBinCounts[:]
        if used:
            store.contiguousBinIndexOffset += used[0]
            store.contiguousBinCounts.extend(counts[used[0] : used[-1] + 1])
        else:
            store.contiguousBinIndexOffset = 0
    return message.SerializeToString()


def sketch(latencies: Iterable[float]) -> bytes | None:
    """The serialised DDSketch of ``latencies``; None when there are none."""
    s = _sketch(latencies)
    return _encode(s) if s.count else None


def merge_sketches(blobs: Iterable[bytes | None]) -> bytes | None:
    """One serialised sketch holding every latency of ``blobs`` (None entries are skipped);
    None when all are empty."""
    merged = None
    for blob in blobs:
        if blob is None:
            continue
        s = _decode(blob)
        if merged is None:
            merged = s
        else:
            merged.merge(s)
    return _encode(merged) if merged is not None and merged.count else None


def sketch_quantile(blob: bytes | None, q: float) -> float | None:
    """Quantile ``q`` of a serialised sketch, within :data:`RELATIVE_ACCURACY` of the exact
    (lower) quantile of its values; None for no sketch."""
    if blob is None:
        return None
    value = _decode(blob).get_quantile_value(q)
    return None if value is None else float(value)


def sketch_count(blob: bytes | None) -> int:
    return 0 if blob is None else int(_decode(blob).count)


def format_duration(ms: float | None) -> str:
    """A duration in milliseconds with a unit and three significant digits at most:
    ``850 µs``, ``8.9 ms``, ``1.41 s``; ``-`` for None."""
    if ms is None:
        return "-"
    ms = float(f"{ms:.3g}")  # so that 999.96 ms reads 1 s, not 1000 ms
    if ms < 1:
        value, unit = ms * 1000, "µs"
    elif ms < 1000:
        value, unit = ms, "ms"
    else:
        value, unit = ms / 1000, "s"
    text = f"{value:.3g}"
    if "e" in text:  # 1000 s and more: whole seconds
        text = f"{value:.0f}"
    return f"{text} {unit}"
