"""The per-variant reliability table, computed by Spark from the run table.

For each variant: runs, runs with each anomaly (delivery and transactional) and its rate with
a Wilson 95% interval, the anomaly's records per million records (``ppm_A``, with
``ppm_A_low`` / ``ppm_A_high``: the run-clustered ratio interval of
:func:`eosim.analysis.stats.ratio_interval`) over ``sent``, the records the run's applications sent
or processed (the run table has no separate processed count, so every anomaly, processing
ones included, uses it), the number of transactional ops (``txns``), acknowledgement and commit
latency p50/p99 from the merged DDSketches (and the merged histograms the report draws), and
the verdict on the scenario's ``expect:`` block. Only per-variant rows, and per partition of
the run table one sketch per variant, ever reach the driver.

A sweep judges an expectation across runs. A bound that must *hold* (``0``, ``<N``,
``<=N``, ``<X/record``, ``<=X/record``) must hold in every run. A condition that must be
*shown* (``>N``, ``>=N``, ``!=N``, ``>X/record``, ``>=X/record``) must be shown by at least one
run, because a sweep's job is to find it. The sweep's own ``expect_sweep:`` is judged on this
table afterwards (:mod:`eosim.analysis.sweep.verdict`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.expect import Condition
from eosim.analysis.stats import (
    N_BUCKETS,
    RatioSums,
    merge_sketches,
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


def _condition_column(F: Any, key: str, condition: Condition) -> Any:
    """Whether a run meets ``condition`` on ``key``, as :func:`eosim.analysis.expect.evaluate`
    judges it: a rate per record compares count * q with p * sent exactly (the bound is
    p / q), and a run without a record sent does not meet it."""
    if condition.unit == RECORD:
        fraction = Fraction(condition.bound)
        col = F.col(key).cast("decimal(38,0)") * F.lit(fraction.denominator)
        bound = F.col("sent").cast("decimal(38,0)") * F.lit(fraction.numerator)
    else:
        col, bound = F.col(key), F.lit(condition.bound)
    ops = {
        "==": col == bound,
        "!=": col != bound,
        ">=": col >= bound,
        "<=": col <= bound,
        ">": col > bound,
        "<": col < bound,
    }
    if condition.unit == RECORD:
        return (F.col("sent") > 0) & ops[condition.op]
    return ops[condition.op]


def _ratio_sums(F: Any, records: str, anomalies: tuple[str, ...]) -> list[Any]:
    """The sums of squares and products :class:`eosim.analysis.stats.RatioSums` needs beyond the
    plain sums: ``sq_RECORDS``, ``sq_RECORDS_A`` and ``sq_A``, as exact decimals (a long sum
    of squares could overflow)."""

    def exact(name: str) -> Any:
        return F.col(name).cast("decimal(38,0)")

    exprs = [F.sum(exact(records) * exact(records)).alias(f"sq_{records}")]
    for a in anomalies:
        exprs.append(F.sum(exact(records) * exact(a)).alias(f"sq_{records}_{a}"))
        exprs.append(F.sum(exact(a) * exact(a)).alias(f"sq_{a}"))
    return exprs


class AccountingError(ValueError):
    """The run table does not hold every planned run exactly once."""


def _verify_exactly_once(per_variant: dict[int, dict[str, Any]], expected: int) -> None:
    rows = sum(int(r["runs"]) for r in per_variant.values())
    distinct = sum(int(r["distinct_runs"]) for r in per_variant.values())
    if rows != expected or distinct != expected:
        raise AccountingError(
            f"result accounting failed: {rows} rows, {distinct} distinct runs, "
            f"expected {expected} of each"
        )


def _merged_histograms(
    F: Any, runs_df: Any, columns: tuple[str, ...]
) -> dict[str, dict[int, list[int]]]:
    """Per histogram column and variant, the bucket-wise sum of the runs' latency histograms,
    in one Spark job."""
    parts = [
        runs_df.select(
            "variant", F.lit(column).alias("column"), F.posexplode(column).alias("bucket", "n")
        ).where(F.col("n") > 0)
        for column in columns
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    rows = union.groupBy("variant", "column", "bucket").agg(F.sum("n").alias("n")).collect()
    hists: dict[str, dict[int, list[int]]] = {column: {} for column in columns}
    for r in rows:
        per_variant = hists[r["column"]]
        per_variant.setdefault(r["variant"], [0] * N_BUCKETS)[r["bucket"]] = int(r["n"])
    return hists


def _partial_merge(columns: tuple[str, ...]) -> Any:
    """The ``mapInArrow`` function merging, within one partition of the run table, each
    variant's sketches: one row per variant present, one merged sketch per column."""
    import pyarrow as pa

    def merge(batches: Any) -> Any:
        per_variant: dict[int, dict[str, list[bytes | None]]] = {}
        for batch in batches:
            data = batch.to_pydict()
            for i, variant in enumerate(data["variant"]):
                held = per_variant.setdefault(variant, {c: [] for c in columns})
                for c in columns:
                    held[c].append(data[c][i])
                    if len(held[c]) >= 64:  # keep a task's memory flat
                        held[c] = [merge_sketches(held[c])]
        rows = [
            {"variant": v, **{c: merge_sketches(held[c]) for c in columns}}
            for v, held in sorted(per_variant.items())
        ]
        schema = pa.schema([("variant", pa.int32()), *((c, pa.binary()) for c in columns)])
        yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return merge


def _merged_sketches(runs_df: Any, columns: tuple[str, ...]) -> dict[str, dict[int, bytes]]:
    """Per sketch column and variant, the merge of the runs' sketches.

    Executors merge the sketches of each partition of the run table (``mapInArrow``); the
    driver merges the few partial sketches, one per partition and variant, each a few KB.
    A grouped aggregation would need a user-defined aggregate over bytes; this two-level
    merge needs none, and what reaches the driver grows with partitions, not runs.
    """
    ddl = ", ".join(["variant int", *(f"`{c}` binary" for c in columns)])
    parts = runs_df.select("variant", *columns).mapInArrow(_partial_merge(columns), ddl)
    collected: dict[str, dict[int, list[bytes | None]]] = {c: {} for c in columns}
    for row in parts.collect():
        for c in columns:
            collected[c].setdefault(row["variant"], []).append(row[c])
    merged: dict[str, dict[int, bytes]] = {c: {} for c in columns}
    for c in columns:
        for variant, blobs in collected[c].items():
            blob = merge_sketches(bytes(b) if b is not None else None for b in blobs)
            if blob is not None:
                merged[c][variant] = blob
    return merged


def aggregate(
    spark: Any,
    runs_df: Any,
    variants: list[dict[str, Any]],
    expect: Mapping[str, int | str],
    expected_runs: int,
    variant_columns: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The per-variant table; raises :class:`AccountingError` unless every planned run is
    present exactly once. ``variant_columns`` holds each variant's typed parameter columns
    (name -> value), placed after ``params``."""
    from pyspark.sql import functions as F

    conditions = {key: Condition.parse(value) for key, value in expect.items()}
    exprs = [F.count(F.lit(1)).alias("runs")]
    exprs += [F.sum(F.when(F.col(a) > 0, 1).otherwise(0)).alias(f"runs_{a}") for a in ALL_ANOMALIES]
    exprs += [F.sum(F.col(a)).alias(f"total_{a}") for a in ALL_ANOMALIES]
    exprs += [
        F.sum(F.when(_condition_column(F, key, c), 1).otherwise(0)).alias(f"meet_{key}")
        for key, c in conditions.items()
    ]
    exprs += [F.sum("sent").alias("sent"), F.sum("acked").alias("acked")]
    exprs += _ratio_sums(F, "sent", ALL_ANOMALIES)
    exprs += [F.sum("txns").alias("txns")]
    per_variant = {
        row["variant"]: row.asDict() for row in runs_df.groupBy("variant").agg(*exprs).collect()
    }

    hists = _merged_histograms(F, runs_df, tuple(f"{p}_latency_hist" for p in LATENCIES))
    sketches = _merged_sketches(runs_df, tuple(f"{p}_latency_sketch" for p in LATENCIES))

    table = []
    for variant in sorted(per_variant):
        row = per_variant[variant]
        runs = int(row["runs"])
        out: dict[str, Any] = {
            "variant": variant,
            "params": json.dumps(variants[variant], sort_keys=True),
            **(variant_columns[variant] if variant_columns is not None else {}),
            "runs": runs,
            "txns": int(row["txns"]),
            "sent": int(row["sent"]),
        }
        for a in ALL_ANOMALIES:
            k = int(row[f"runs_{a}"])
            low, high = wilson_interval(k, runs)
            out[f"runs_{a}"] = k
            out[f"rate_{a}"] = k / runs
            out[f"ci_low_{a}"] = low
            out[f"ci_high_{a}"] = high
            out[f"total_{a}"] = int(row[f"total_{a}"])
            sums = RatioSums(
                runs,
                int(row["sent"]),
                int(row[f"total_{a}"]),
                int(row["sq_sent"]),
                int(row[f"sq_sent_{a}"]),
                int(row[f"sq_{a}"]),
            )
            ppm, ppm_low, ppm_high = ratio_interval(sums)
            out[f"ppm_{a}"] = ppm
            out[f"ppm_{a}_low"] = ppm_low
            out[f"ppm_{a}_high"] = ppm_high
        for prefix in LATENCIES:
            blob = sketches[f"{prefix}_latency_sketch"].get(variant)
            out[f"{prefix}_p50_ms"] = sketch_quantile(blob, 0.50)
            out[f"{prefix}_p99_ms"] = sketch_quantile(blob, 0.99)
            out[f"{prefix}_latency_hist"] = hists[f"{prefix}_latency_hist"].get(
                variant, [0] * N_BUCKETS
            )
            out[f"{prefix}_latency_sketch"] = blob
        failures = []
        for key, c in conditions.items():
            meeting = int(row[f"meet_{key}"])
            if c.op in MUST_HOLD and meeting < runs:
                failures.append(f"{key} {c}: broken in {runs - meeting} of {runs} runs")
            elif c.op not in MUST_HOLD and meeting == 0:
                failures.append(f"{key} {c}: shown in none of {runs} runs")
        out["expect_met"] = not failures
        out["expect_failures"] = "; ".join(failures)
        table.append(out)
    return table
