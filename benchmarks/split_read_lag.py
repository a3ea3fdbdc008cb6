"""Ack to first read split by the part of a run it falls in: a calibration row read apart
(case 5: a real run's first second, its clients' start, against the rest).

    python benchmarks/split_read_lag.py RESULTS/kafka [RESULTS/kafka ...] [--first-ms 1000]

Reads each real sweep's kept histories (``histories/variant=V/run-*.jsonl``). For each run,
the acknowledged records a consumer read are split by their acknowledgement: within
``--first-ms`` of the run's first send, or after; each part's median and 99th percentile are
taken per run, and the median over the runs is printed, per variant. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from eosim.analysis.history import load_history
from eosim.analysis.timings import read_after_ack


def split(path: Path, first_ms: float) -> tuple[list[float], list[float]]:
    """(lags of records acknowledged in the run's first ``first_ms``, lags of the rest)."""
    history = load_history(path)
    start = min((s.invoke_time for s in history.sends), default=0.0)
    pairs = read_after_ack(history)
    early = [lag for acked, lag in pairs if acked < start + first_ms]
    late = [lag for acked, lag in pairs if acked >= start + first_ms]
    return early, late


def _quantiles(lags: list[float]) -> tuple[float, float] | None:
    if not lags:
        return None
    p50, p99 = np.quantile(np.asarray(lags), [0.5, 0.99])
    return float(p50), float(p99)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="Real sweeps' results directories.")
    parser.add_argument("--first-ms", type=float, default=1000.0)
    args = parser.parse_args(argv)
    print("sweep  variant  params  runs  first part p50 / p99 (ms)  rest p50 / p99 (ms)")
    for results in args.results:
        root = Path(results)
        manifest = json.loads((root / "manifest.json").read_text())
        params_of = {int(v["variant"]): v["params"] for v in manifest["variants"]}
        for folder in sorted((root / "histories").glob("variant=*")):
            variant = int(folder.name.split("=", 1)[1])
            parts: list[list[tuple[float, float]]] = [[], []]
            paths = sorted(folder.glob("run-*.jsonl"))
            for path in paths:
                for i, lags in enumerate(split(path, args.first_ms)):
                    q = _quantiles(lags)
                    if q is not None:
                        parts[i].append(q)
            cells = [
                f"{statistics.median(p[0] for p in part):.2f} / "
                f"{statistics.median(p[1] for p in part):.1f}"
                if part
                else "-"
                for part in parts
            ]
            params = json.dumps(params_of[variant], sort_keys=True)
            print(f"{results}  {variant}  {params}  {len(paths)}  {cells[0]}  {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
