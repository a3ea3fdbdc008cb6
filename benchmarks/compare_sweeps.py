"""Run a few small sweeps, or compare two sets of their results: the run tables, the
aggregates, the sweep verdicts and the report's data must be identical between two versions
of eosim (timing columns aside).

    # with the old version importable (e.g. PYTHONPATH=/tmp/old-site python3 ...):
    python benchmarks/compare_sweeps.py run /tmp/sweeps-old
    python benchmarks/compare_sweeps.py run /tmp/sweeps-new
    python benchmarks/compare_sweeps.py compare /tmp/sweeps-old /tmp/sweeps-new

``run`` writes each sweep under DIR/NAME; ``compare`` exits 1 on the first difference it
prints. Sketch columns are compared by their buckets (a serialised DDSketch's padding depends
on the order its parts were merged in, which neither version fixes), every other column
byte for byte after normalising the results directory in replay commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# (name, scenario, runs per variant, keyword arguments of run_sweep)
SWEEPS: list[tuple[str, str, int, dict[str, Any]]] = [
    (
        "bench-grid",
        "benchmarks/sweep.yaml",
        25,
        {
            "grid": ("network.response_loss=0.01,0.2",),
            "expect": {"duplicate": "<1%/record", "lost_write": "0"},
        },
    ),
    (
        "at-least-once-vary",
        "scenarios/at-least-once.yaml",
        12,
        {
            "grid": ("producers.0.config.enable.idempotence=false,true",),
            "vary": ("network.response_loss=uniform(0,0.05)",),
            "overrides": ("producers.0.workload.records=200", "producers.0.workload.rate=3000"),
            "chunk_runs": 5,
        },
    ),
    (
        "transactional",
        "scenarios/transactional-pipeline.yaml",
        6,
        {"chunk_runs": 4},
    ),
]
TIMING = ("wall_time_s",)
SKETCHES = (
    "ack_latency_sketch",
    "commit_latency_sketch",
    "warm_ack_latency_sketch",
    "read_after_ack_sketch",
)


def run(dest: Path) -> None:
    from eosim.analysis.sweep import run_sweep

    for name, scenario, runs, kw in SWEEPS:
        result = run_sweep(str(ROOT / scenario), runs, seed=7, out=dest / name, quiet=True, **kw)
        print(f"{name}: {result.total_runs} runs, wall {result.wall_s:.1f} s")


def canonical_sketch(blob: Any) -> Any:
    if blob is None:
        return None
    from eosim.analysis.stats import load_sketch

    s = load_sketch(bytes(blob))
    bins = [(s._store.offset + i, c) for i, c in enumerate(s._store.bins) if c]
    neg = [(s._negative_store.offset + i, c) for i, c in enumerate(s._negative_store.bins) if c]
    return (s._zero_count, tuple(bins), tuple(neg))


def normal(frame: Any, out: Path) -> Any:
    frame = frame.copy()
    for column in frame.columns:
        if column in SKETCHES:
            frame[column] = frame[column].map(canonical_sketch)
        elif frame[column].dtype == object:
            frame[column] = frame[column].map(
                lambda v: (
                    str(v).replace(str(out.resolve()), "RESULTS")
                    if isinstance(v, str)
                    else (list(v) if hasattr(v, "__len__") and not isinstance(v, bytes) else v)
                )
            )
    return frame


def compare(old: Path, new: Path) -> int:
    import pandas as pd

    from eosim.analysis.report.data import load

    failures = 0
    for name, *_ in SWEEPS:
        a, b = old / name, new / name
        runs_a = pd.read_parquet(a / "runs").drop(columns=[*TIMING, "chunk"])
        runs_b = pd.read_parquet(b / "runs").drop(columns=[*TIMING, "chunk"])
        for frame in (runs_a, runs_b):
            frame["variant"] = frame["variant"].astype(int)
        runs_a = normal(runs_a.sort_values(["variant", "run"]).reset_index(drop=True), a)
        runs_b = normal(runs_b.sort_values(["variant", "run"]).reset_index(drop=True), b)
        checks = [("run table", runs_a, runs_b)]
        agg_a = normal(pd.read_parquet(a / "aggregate.parquet"), a)
        agg_b = normal(pd.read_parquet(b / "aggregate.parquet"), b)
        checks.append(("aggregate.parquet", agg_a, agg_b))
        # The CSV holds the sketches' bytes as text: compared above, by buckets.
        csv_a, csv_b = (pd.read_csv(d / "aggregate.csv") for d in (a, b))
        drop = [c for c in SKETCHES if c in csv_a]
        checks.append(("aggregate.csv", csv_a.drop(columns=drop), csv_b.drop(columns=drop)))
        for what, x, y in checks:
            try:
                pd.testing.assert_frame_equal(x, y, check_exact=True)
            except AssertionError as exc:
                failures += 1
                print(f"{name}: {what} differs: {str(exc)[:500]}")
        verdicts = [d / "expect_sweep.json" for d in (a, b)]
        if any(v.exists() for v in verdicts) and len({v.read_text() for v in verdicts}) != 1:
            failures += 1
            print(f"{name}: expect_sweep.json differs")
        ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
        for key in ("created", "finished", "command", "scenario_path"):
            ma.pop(key, None)
            mb.pop(key, None)
        if ma != mb:
            failures += 1
            print(f"{name}: manifest differs: {sorted(k for k in ma if ma.get(k) != mb.get(k))}")
        da, db = load(a), load(b)
        for attr in sorted(vars(da)):
            x, y = getattr(da, attr), getattr(db, attr)
            if isinstance(x, pd.DataFrame):
                try:
                    pd.testing.assert_frame_equal(
                        normal(x.reset_index(drop=True), a),
                        normal(y.reset_index(drop=True), b),
                        check_exact=True,
                    )
                except AssertionError as exc:
                    failures += 1
                    print(f"{name}: report data {attr} differs: {str(exc)[:500]}")
            elif attr not in ("root", "manifest") and repr(x).replace(str(a), "R") != repr(
                y
            ).replace(str(b), "R"):
                failures += 1
                print(f"{name}: report data {attr} differs")
        print(f"{name}: compared")
    print("identical" if not failures else f"{failures} difference(s)")
    return 1 if failures else 0


def main() -> None:
    if sys.argv[1:2] == ["run"] and len(sys.argv) == 3:
        run(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
