"""Keep a finished Kafka side of a calibration case in the repository, without its histories.

    python benchmarks/keep_side.py results/calib/case5w/kafka calibration/PRESET/case5w

A real side takes from minutes to hours on the machine it ran on, and each session may be on
another machine; the model side is deterministic and runs anywhere. So a side is kept with
the preset measured on its machine (``simulation/presets/PRESET.yaml``), and a later model
change is compared with it on any machine (docs/calibration.md, "Kafka sides kept"):

    eosim calibrate SCENARIO --runs 20 [--grid ...] --resources PRESET \\
        --kafka-side calibration/PRESET/case5w --out results/calib/case5w

What is kept is what ``eosim calibrate`` reads: the manifest, the scenario's copy and the run
table, one Parquet file per variant (each run keeps its history's digest, not the history).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq


def keep(source: Path, dest: Path) -> int:
    """Copy ``source``'s manifest, scenario and run table into ``dest`` (a new directory);
    the runs kept."""
    if not (source / "manifest.json").is_file() or not (source / "runs").is_dir():
        raise ValueError(f"{source}: not a sweep with finished runs")
    if dest.exists():
        raise ValueError(f"{dest}: exists already")
    table = ds.dataset(source / "runs", format="parquet", partitioning="hive").to_table()
    dest.mkdir(parents=True)
    shutil.copy2(source / "manifest.json", dest / "manifest.json")
    if (source / "scenario.yaml").is_file():
        shutil.copy2(source / "scenario.yaml", dest / "scenario.yaml")
    for variant in sorted(set(table.column("variant").to_pylist())):
        rows = table.filter(pa.compute.equal(table.column("variant"), variant))
        rows = rows.drop_columns(["chunk", "variant"]).sort_by("run")
        folder = dest / "runs" / "chunk=00000" / f"variant={variant}"
        folder.mkdir(parents=True)
        pq.write_table(rows, folder / "part-00000.parquet", compression="zstd")
    return table.num_rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: keep_side.py SWEEP DEST", file=sys.stderr)
        return 2
    try:
        n = keep(Path(argv[0]), Path(argv[1]))
    except ValueError as exc:
        print(f"keep_side: {exc}", file=sys.stderr)
        return 2
    print(f"kept {n} runs in {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
