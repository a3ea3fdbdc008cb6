"""Keep a Kafka side of a calibration case in the repository, without its histories.

    python benchmarks/keep_side.py results/calib/case5w/kafka calibration/PRESET/case5w
    python benchmarks/keep_side.py --resume calibration/PRESET/case1w results/calib/case1w/kafka

A real side takes from minutes to hours on the machine it ran on, and each session may be on
another machine; the model side is deterministic and runs anywhere. So a side is kept with
the preset measured on its machine (``simulation/presets/PRESET.yaml``), and a later model
change is compared with it on any machine (docs/calibration.md, "Kafka sides kept"):

    eosim calibrate SCENARIO --runs 20 [--grid ...] --resources PRESET \\
        --kafka-side calibration/PRESET/case5w --out results/calib/case5w

What is kept is what ``eosim calibrate`` reads: the manifest, the scenario's copy and the run
table (each run keeps its history's digest, not the history). A finished side is kept as one
Parquet file per variant. A side cut short (its manifest not complete: a case 1 or 3 side
takes longer than a session) is kept as the sweep wrote it, one file per committed run, so
that ``--resume`` puts it back where the same sweep command carries on with the runs it
lacks, on a machine like the one it ran on (the sweep warns when it is not). Keeping a side
again into the same place replaces the kept one when it is the same sweep with at least as
many runs.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable manifest ({exc})") from None


def _runs(path: Path) -> int:
    if not (path / "runs").is_dir():
        return 0
    return ds.dataset(path / "runs", format="parquet", partitioning="hive").count_rows()


def keep(source: Path, dest: Path) -> int:
    """Copy ``source``'s manifest, scenario and run table into ``dest``; the runs kept.
    ``dest`` is new, or a side kept earlier from the same sweep with no more runs, which is
    replaced whole (written beside it first, so a failure leaves it as it was)."""
    if not (source / "manifest.json").is_file() or not (source / "runs").is_dir():
        raise ValueError(f"{source}: not a sweep with finished runs")
    manifest = _manifest(source)
    if dest.exists():
        kept = _manifest(dest) if (dest / "manifest.json").is_file() else {}
        if kept.get("sweep_id") is None or kept.get("sweep_id") != manifest.get("sweep_id"):
            raise ValueError(f"{dest}: exists already")
        if kept.get("complete") and not manifest.get("complete"):
            raise ValueError(f"{dest}: exists already, finished; {source} is not")
        if _runs(dest) > _runs(source):
            raise ValueError(
                f"{dest}: exists already with {_runs(dest)} runs, more than {source}'s "
                f"{_runs(source)}"
            )
    staging = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}")
    try:
        n = _copy(source, staging, bool(manifest.get("complete")))
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old.{uuid.uuid4().hex}")
            dest.rename(old)
            staging.rename(dest)
            shutil.rmtree(old)
        else:
            staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return n


def _copy(source: Path, dest: Path, complete: bool) -> int:
    dest.mkdir(parents=True)
    shutil.copy2(source / "manifest.json", dest / "manifest.json")
    if (source / "scenario.yaml").is_file():
        shutil.copy2(source / "scenario.yaml", dest / "scenario.yaml")
    if not complete:
        # As the sweep committed them, run by run: what the sweep reads to resume.
        n = 0
        for part in sorted((source / "runs").glob("chunk=*/variant=*/*.parquet")):
            target = dest / part.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(part, target)
            n += pq.read_metadata(part).num_rows
        return n
    table = ds.dataset(source / "runs", format="parquet", partitioning="hive").to_table()
    for variant in sorted(set(table.column("variant").to_pylist())):
        rows = table.filter(pa.compute.equal(table.column("variant"), variant))
        rows = rows.drop_columns(["chunk", "variant"]).sort_by("run")
        folder = dest / "runs" / "chunk=00000" / f"variant={variant}"
        folder.mkdir(parents=True)
        pq.write_table(rows, folder / "part-00000.parquet", compression="zstd")
    return table.num_rows


def resume(kept: Path, out: Path) -> int:
    """Put a side kept unfinished back at ``out`` (new), where its sweep command resumes it;
    the runs it holds."""
    if not (kept / "manifest.json").is_file():
        raise ValueError(f"{kept}: not a kept side (no manifest.json)")
    if _manifest(kept).get("complete"):
        raise ValueError(f"{kept}: finished; there is nothing to resume")
    if out.exists():
        raise ValueError(f"{out}: exists already")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(kept, out)
    return _runs(out)


def main(argv: list[str]) -> int:
    resuming = argv[:1] == ["--resume"]
    args = argv[1:] if resuming else argv
    if len(args) != 2:
        print("usage: keep_side.py SWEEP DEST | keep_side.py --resume KEPT OUT", file=sys.stderr)
        return 2
    source, dest = Path(args[0]), Path(args[1])
    try:
        if resuming:
            n = resume(source, dest)
        else:
            n = keep(source, dest)
            finished = _manifest(dest).get("complete")
    except ValueError as exc:
        print(f"keep_side: {exc}", file=sys.stderr)
        return 2
    if resuming:
        print(f"{n} runs back in {dest}; the same sweep command carries on")
    elif finished:
        print(f"kept {n} runs in {dest}")
    else:
        print(f"kept {n} runs in {dest}, unfinished (--resume puts it back to carry on)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
