"""Statistics for reliability tables: Wilson intervals, latency sketches and histograms.

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
