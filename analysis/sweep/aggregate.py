"""The per-variant reliability table, computed by Spark from the run table.

For each variant: runs, runs with each anomaly (delivery and transactional) and its rate with
a Wilson 95% interval, the number of transactional ops (``txns``), acknowledgement and commit
latency p50/p99 from the merged histograms, and the verdict on the scenario's ``expect:``
block. Only per-variant rows ever reach the driver.

A sweep judges an expectation across runs. A bound that must *hold* (``0``, ``<N``,
``<=N``) must hold in every run. A condition that must be *shown* (``>N``, ``>=N``,
``!=N``) must be shown by at least one run, because a sweep's job is to find it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from analysis.checks import ALL_ANOMALIES
from analysis.expect import Condition
from analysis.stats import N_BUCKETS, quantile, wilson_interval

MUST_HOLD = ("==", "<", "<=")
# Latency histograms of the run table (``PREFIX_latency_hist``), merged into PREFIX_p50_ms and
# PREFIX_p99_ms: acknowledged sends and committed transactions.
LATENCIES = ("ack", "commit")


def _condition_column(F: Any, key: str, condition: Condition) -> Any:
    col = F.col(key)
    ops = {
        "==": col == condition.bound,
        "!=": col != condition.bound,
        ">=": col >= condition.bound,
        "<=": col <= condition.bound,
        ">": col > condition.bound,
        "<": col < condition.bound,
    }
    return ops[condition.op]


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


def aggregate(
    spark: Any,
    runs_df: Any,
    variants: list[dict[str, Any]],
    expect: Mapping[str, int | str],
    expected_runs: int,
) -> list[dict[str, Any]]:
    """The per-variant table; raises :class:`AccountingError` unless every planned run is
    present exactly once."""
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
    exprs += [F.sum("txns").alias("txns")]
    per_variant = {
        row["variant"]: row.asDict() for row in runs_df.groupBy("variant").agg(*exprs).collect()
    }

    hists = _merged_histograms(F, runs_df, tuple(f"{p}_latency_hist" for p in LATENCIES))

    table = []
    for variant in sorted(per_variant):
        row = per_variant[variant]
        runs = int(row["runs"])
        out: dict[str, Any] = {
            "variant": variant,
            "params": json.dumps(variants[variant], sort_keys=True),
            "runs": runs,
            "txns": int(row["txns"]),
        }
        for a in ALL_ANOMALIES:
            k = int(row[f"runs_{a}"])
            low, high = wilson_interval(k, runs)
            out[f"runs_{a}"] = k
            out[f"rate_{a}"] = k / runs
            out[f"ci_low_{a}"] = low
            out[f"ci_high_{a}"] = high
            out[f"total_{a}"] = int(row[f"total_{a}"])
        for prefix in LATENCIES:
            hist = hists[f"{prefix}_latency_hist"].get(variant, [0] * N_BUCKETS)
            out[f"{prefix}_p50_ms"] = quantile(hist, 0.50)
            out[f"{prefix}_p99_ms"] = quantile(hist, 0.99)
            out[f"{prefix}_latency_hist"] = hist
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
