"""Statistics for reliability tables: Wilson intervals and mergeable latency histograms.

Latencies are counted in fixed log-spaced buckets (20 per decade, 0.01 ms to 10^6 ms), so
the histograms of many runs add up exactly in Spark and quantiles come from the merged
counts, with about 6% resolution.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

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
