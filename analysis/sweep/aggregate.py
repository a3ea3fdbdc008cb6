"""The per-variant reliability table, merged from partial sums the sweep's tasks return.

A task adds each run it executes (and each chunk an earlier attempt of it had committed) to
one :class:`Sums`: per variant, integer sums, bucket-wise latency histograms and merged
DDSketches. It returns that one small object with its chunk numbers; the driver merges the
tasks' sums (:meth:`Sums.merge`) and turns them into the table (:func:`table`) without
reading any run row back. What reaches the driver grows with tasks and variants, not runs.

For each variant: runs (the valid ones: a real run that proves nothing, ``valid`` false in the
run table, is counted in ``invalid_runs`` and left out of every other figure), runs with each
anomaly (delivery and transactional) and its rate with
a Wilson 95% interval, the anomaly's records per million records (``ppm_A``, with
``ppm_A_low`` / ``ppm_A_high``: the run-clustered ratio interval of
:func:`eosim.analysis.stats.ratio_interval`) over ``sent``, the records the run's applications sent
or processed (the run table has no separate processed count, so every anomaly, processing
ones included, uses it), the number of transactional ops (``txns``), acknowledgement and commit
latency p50/p99 from the merged DDSketches (and the merged histograms the report draws), and
the verdict on the scenario's ``expect:`` block.

A sweep judges an expectation across runs. A bound that must *hold* (``0``, ``<N``,
``<=N``, ``<X/record``, ``<=X/record``) must hold in every run. A condition that must be
*shown* (``>N``, ``>=N``, ``!=N``, ``>X/record``, ``>=X/record``) must be shown by at least one
run, because a sweep's job is to find it. The sweep's own ``expect_sweep:`` is judged on this
table afterwards (:mod:`eosim.analysis.sweep.verdict`).

To add a per-variant figure: add its integer sums in :meth:`Sums.add` (a key of ``ints``, which
:meth:`Sums.merge` adds up and :meth:`Sums.to_bytes` carries), turn them into columns in
:func:`table`, and extend ``tests/test_sweep_aggregate.py``'s comparison with a direct
computation over the runs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.expect import Condition
from eosim.analysis.stats import (
    N_BUCKETS,
    RatioSums,
    dump_sketch,
    load_sketch,
    ratio_interval,
    sketch_quantile,
    wilson_interval,
)
from eosim.simulation.conditions import RECORD

MUST_HOLD = ("==", "<", "<=")
# Latencies of the run table: acknowledged sends and committed transactions. Each has a sketch
# (``PREFIX_latency_sketch``), merged into PREFIX_p50_ms and PREFIX_p99_ms, and a histogram
# (``PREFIX_latency_hist``), merged for the report's curves.
LATENCIES = ("ack", "commit")
HISTOGRAMS = tuple(f"{p}_latency_hist" for p in LATENCIES)
SKETCHES = tuple(f"{p}_latency_sketch" for p in LATENCIES)
# The run table's columns the sums read, besides the keys of ``expect:``.
COLUMNS = (
    "variant",
    "run",
    "valid",
    *ALL_ANOMALIES,
    "sent",
    "acked",
    "txns",
    *HISTOGRAMS,
    *SKETCHES,
)


class AccountingError(ValueError):
    """The run table does not hold every planned run exactly once."""


def meets(row: Mapping[str, Any], key: str, condition: Condition) -> bool:
    """Whether a run meets ``condition`` on ``key``, as :func:`eosim.analysis.expect.evaluate`
    judges it: a rate per record compares count * q with p * sent exactly (the bound is
    p / q), and a run without a record sent, or without the value, does not meet it."""
    value = row.get(key)
    if value is None:
        return False
    if condition.unit == RECORD:
        sent = row.get("sent")
        return sent is not None and sent > 0 and condition.holds(Fraction(value, sent))
    return condition.holds(value)


class _Variant:
    """One variant's sums over some of its runs."""

    __slots__ = ("hists", "ints", "sketches")

    def __init__(self) -> None:
        self.ints: dict[str, int] = {}
        self.hists: dict[str, list[int]] = {h: [0] * N_BUCKETS for h in HISTOGRAMS}
        self.sketches: dict[str, Any] = dict.fromkeys(SKETCHES)

    def add(self, key: str, value: int) -> None:
        self.ints[key] = self.ints.get(key, 0) + value

    def merge_sketch(self, column: str, sketch: Any) -> None:
        held = self.sketches[column]
        if held is None:
            self.sketches[column] = sketch
        else:
            held.merge(sketch)


class Sums:
    """A partial aggregate: per variant, what the table needs of some runs, mergeable.

    ``expect`` is the scenario's ``expect:`` block (key -> condition), whose per-run verdicts
    it counts. Integer sums are exact (Python integers: a sum of squares cannot overflow);
    latency sketches merge bucket by bucket, so the quantiles do not depend on the order in
    which runs and partial sums are added.
    """

    def __init__(self, expect: Mapping[str, int | str]) -> None:
        self.expect = dict(expect)
        self.conditions = {key: Condition.parse(value) for key, value in expect.items()}
        self.variants: dict[int, _Variant] = {}

    def columns(self) -> list[str]:
        """The run table's columns :meth:`add` reads."""
        return [*COLUMNS, *(k for k in self.conditions if k not in COLUMNS)]

    def _variant(self, variant: int) -> _Variant:
        held = self.variants.get(variant)
        if held is None:
            held = self.variants[variant] = _Variant()
        return held

    def add(
        self, rows: Iterable[Mapping[str, Any]], runs: tuple[int, int, int] | None = None
    ) -> None:
        """Add run rows. ``runs`` = (variant, first run, end run) says which runs ``rows``
        should be (a chunk): only distinct rows among those count as distinct runs, so that a
        row out of place fails the accounting. Without it, distinct (variant, run) pairs
        among ``rows`` count."""
        distinct: set[tuple[int, int]] = set()
        for row in rows:
            variant, run = int(row["variant"]), int(row["run"])
            held = self._variant(variant)
            if runs is None or (variant == runs[0] and runs[1] <= run < runs[2]):
                distinct.add((variant, run))
            held.add("runs", 1)
            if row.get("valid") is False:
                # A real run that proves nothing (eosim.real.referee): counted, and left out of
                # every figure.
                held.add("invalid", 1)
                continue
            sent = row["sent"]
            for a in ALL_ANOMALIES:
                count = row[a]
                if count is None:
                    continue
                held.add(f"runs_{a}", 1 if count > 0 else 0)
                held.add(f"total_{a}", count)
                held.add(f"sq_{a}", count * count)
                if sent is not None:
                    held.add(f"sq_sent_{a}", sent * count)
            for key, condition in self.conditions.items():
                held.add(f"meet_{key}", 1 if meets(row, key, condition) else 0)
            for key in ("sent", "acked", "txns"):
                if row[key] is not None:
                    held.add(key, row[key])
            if sent is not None:
                held.add("sq_sent", sent * sent)
            for column in HISTOGRAMS:
                counts = row[column]
                if counts is not None:
                    total = held.hists[column]
                    for i, n in enumerate(counts):
                        total[i] += n
            for column in SKETCHES:
                blob = row[column]
                if blob is not None:
                    held.merge_sketch(column, load_sketch(bytes(blob)))
        for variant, _ in distinct:
            self.variants[variant].add("distinct_runs", 1)

    def merge(self, other: Sums) -> None:
        """Add ``other``'s sums (of other runs) to these."""
        for variant, theirs in other.variants.items():
            mine = self._variant(variant)
            for key, value in theirs.ints.items():
                mine.add(key, value)
            for column in HISTOGRAMS:
                total = mine.hists[column]
                for i, n in enumerate(theirs.hists[column]):
                    total[i] += n
            for column in SKETCHES:
                if theirs.sketches[column] is not None:
                    mine.merge_sketch(column, theirs.sketches[column])

    @property
    def runs(self) -> int:
        return sum(v.ints.get("runs", 0) for v in self.variants.values())

    def to_bytes(self) -> bytes:
        """A compact serialisation (JSON, sketches base64): what a task returns."""

        def blob(sketch: Any) -> str | None:
            return None if sketch is None else base64.b64encode(dump_sketch(sketch)).decode("ascii")

        data = [
            [variant, held.ints, held.hists, {c: blob(s) for c, s in held.sketches.items()}]
            for variant, held in sorted(self.variants.items())
        ]
        return json.dumps(data, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, expect: Mapping[str, int | str]) -> Sums:
        sums = cls(expect)
        for variant, ints, hists, sketches in json.loads(bytes(data)):
            held = sums._variant(int(variant))
            held.ints = {k: int(v) for k, v in ints.items()}
            held.hists = {c: [int(n) for n in hists[c]] for c in HISTOGRAMS}
            held.sketches = {
                c: None if b is None else load_sketch(base64.b64decode(b))
                for c, b in sketches.items()
            }
        return sums


def _verify_exactly_once(sums: Sums, expected: int) -> None:
    rows = sum(v.ints.get("runs", 0) for v in sums.variants.values())
    distinct = sum(v.ints.get("distinct_runs", 0) for v in sums.variants.values())
    if rows != expected or distinct != expected:
        raise AccountingError(
            f"result accounting failed: {rows} rows, {distinct} distinct runs, "
            f"expected {expected} of each"
        )


def table(
    sums: Sums,
    variants: list[dict[str, Any]],
    expected_runs: int,
    variant_columns: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The per-variant table of ``sums``; raises :class:`AccountingError` unless every planned
    run is there exactly once. ``variant_columns`` holds each variant's typed parameter
    columns (name -> value), placed after ``params``."""
    _verify_exactly_once(sums, expected_runs)
    out_rows = []
    for variant in sorted(sums.variants):
        held = sums.variants[variant]
        row = held.ints
        invalid = row.get("invalid", 0)
        runs = row["runs"] - invalid
        out: dict[str, Any] = {
            "variant": variant,
            "params": json.dumps(variants[variant], sort_keys=True),
            **(variant_columns[variant] if variant_columns is not None else {}),
            "runs": runs,
            "invalid_runs": invalid,
            "txns": row.get("txns", 0),
            "sent": row.get("sent", 0),
        }
        for a in ALL_ANOMALIES:
            k = row.get(f"runs_{a}", 0)
            low, high = wilson_interval(k, runs)
            out[f"runs_{a}"] = k
            out[f"rate_{a}"] = k / runs if runs else None
            out[f"ci_low_{a}"] = low
            out[f"ci_high_{a}"] = high
            out[f"total_{a}"] = row.get(f"total_{a}", 0)
            ratio = RatioSums(
                runs,
                row.get("sent", 0),
                row.get(f"total_{a}", 0),
                row.get("sq_sent", 0),
                row.get(f"sq_sent_{a}", 0),
                row.get(f"sq_{a}", 0),
            )
            ppm, ppm_low, ppm_high = ratio_interval(ratio)
            out[f"ppm_{a}"] = ppm
            out[f"ppm_{a}_low"] = ppm_low
            out[f"ppm_{a}_high"] = ppm_high
        for prefix in LATENCIES:
            sketch = held.sketches[f"{prefix}_latency_sketch"]
            blob = dump_sketch(sketch) if sketch is not None and sketch.count else None
            out[f"{prefix}_p50_ms"] = sketch_quantile(blob, 0.50)
            out[f"{prefix}_p99_ms"] = sketch_quantile(blob, 0.99)
            out[f"{prefix}_latency_hist"] = list(held.hists[f"{prefix}_latency_hist"])
            out[f"{prefix}_latency_sketch"] = blob
        failures = []
        for key, c in sums.conditions.items():
            meeting = row.get(f"meet_{key}", 0)
            if c.op in MUST_HOLD and meeting < runs:
                failures.append(f"{key} {c}: broken in {runs - meeting} of {runs} runs")
            elif c.op not in MUST_HOLD and meeting == 0:
                failures.append(f"{key} {c}: shown in none of {runs} runs")
        out["expect_met"] = not failures
        out["expect_failures"] = "; ".join(failures)
        out_rows.append(out)
    return out_rows


def aggregate(
    rows: Iterable[Mapping[str, Any]],
    variants: list[dict[str, Any]],
    expect: Mapping[str, int | str],
    expected_runs: int,
    variant_columns: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The per-variant table of run rows held in memory (tests, small tables): :class:`Sums`
    of them, then :func:`table`."""
    sums = Sums(expect)
    sums.add(rows)
    return table(sums, variants, expected_runs, variant_columns)
