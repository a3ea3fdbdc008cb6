"""A latency row of a sweep read run by run: each run's quantiles of one sketch column, and
their median over the runs, per variant (docs/calibration.md, "The replication path under
the wire": a pooled p99 can be a few runs' tails).

    python benchmarks/run_quantiles.py SWEEP_DIR [SWEEP_DIR ...] [--column read_after_ack_sketch]
        [--quantiles 0.5,0.99,0.999]

SWEEP_DIR is a sweep's output or a kept side (``runs/`` under it: a Kafka side, a model side).
Prints, per folder and variant, the median over the valid runs of each quantile and each run's
quantiles sorted by the last one. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import pandas as pd

from eosim.analysis.stats import sketch_quantile


def per_run(folder: Path, column: str, quantiles: list[float]) -> dict[int, list[tuple]]:
    """Each valid run's quantiles of ``column`` (ms), by variant."""
    files = sorted(folder.glob("runs/*/variant=*/*.parquet"))
    if not files:
        raise ValueError(f"{folder}: no runs/*/variant=*/*.parquet (not a sweep's output)")
    out: dict[int, list[tuple]] = {}
    for path in files:
        variant = int(path.parent.name.split("=", 1)[1])
        table = pd.read_parquet(path)
        if column not in table.columns:
            raise ValueError(f"{path}: no column {column!r}")
        for _i, row in table.iterrows():
            if "valid" in table.columns and not row["valid"]:
                continue
            values = tuple(sketch_quantile(row[column], q) for q in quantiles)
            if all(v is not None for v in values):
                out.setdefault(variant, []).append(values)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--column", default="read_after_ack_sketch")
    parser.add_argument("--quantiles", default="0.5,0.99,0.999")
    args = parser.parse_args(argv)
    try:
        quantiles = [float(q) for q in args.quantiles.split(",")]
        if not all(0.0 < q < 1.0 for q in quantiles):
            raise ValueError
    except ValueError:
        print(
            f"--quantiles {args.quantiles}: numbers between 0 and 1, e.g. 0.5,0.99", file=sys.stderr
        )
        return 2
    for folder in args.folders:
        try:
            runs = per_run(folder, args.column, quantiles)
        except (ValueError, OSError) as exc:
            print(f"run_quantiles: {exc}", file=sys.stderr)
            return 2
        for variant, rows in sorted(runs.items()):
            medians = [statistics.median(r[i] for r in rows) for i in range(len(quantiles))]
            head = ", ".join(
                f"p{q * 100:g} {m:.3g}" for q, m in zip(quantiles, medians, strict=True)
            )
            print(f"{folder} variant {variant}: {len(rows)} runs, median of the runs' {head} ms")
            for r in sorted(rows, key=lambda r: r[-1]):
                print("  " + " ".join(f"{v:.3g}" for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
