"""The results directory of a sweep: manifest, committed chunks, staging, aggregate.

Layout under ``results/NAME/``::

    manifest.json              what was run, with the exact command (written first)
    scenario.yaml              the scenario's text, as the sweep ran it (replay commands use it)
    runs/chunk=00000/variant=0/part-00000.parquet
    runs/chunk=00001/...       one directory per committed chunk: its runs, all of one variant
    _staging/                  chunks being written, and their tasks' progress counts;
                               never read as results
    aggregate.parquet, aggregate.csv

A chunk is a few consecutive runs of one variant (``plan.chunk_bounds``). The Spark task that
runs it writes its rows as one Parquet file into ``_staging`` and commits it by one rename to
its fixed name under ``runs/`` (:func:`commit_chunk`). A reader therefore never sees half a
chunk, a chunk present under ``runs/`` is complete, and every chunk a task finished stays
committed when the sweep is interrupted. A retried or duplicated task attempt renames the same
rows to the same name, so a run is never counted twice. Resuming means skipping the chunks
already under ``runs/`` and throwing ``_staging`` away.

The rename is needed only because a file on a filesystem is visible while it is written. On an
object store, which has no atomic rename but shows an object only once it is complete, a task
would write the fixed name directly; :func:`commit_chunk` is the one place that would change.
Nothing reads ``runs/`` to aggregate: the tasks return partial sums.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SCENARIO_COPY = "scenario.yaml"
FORMAT = "eosim-sweep"
# The layout of runs/: 2 since chunks are committed by their tasks, one file per chunk and
# never across a variant (1: a chunk was a Spark job's output, partitioned by variant).
LAYOUT = 2


class StoreError(ValueError):
    """The output directory cannot hold this sweep (one line, for the user)."""


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class SweepStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs_dir = root / "runs"
        self.staging_dir = root / "_staging"
        self.manifest_path = root / MANIFEST

    def read_manifest(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.manifest_path}: unreadable manifest ({exc})") from None

    def prepare(self, manifest: dict[str, Any]) -> list[int]:
        """Create the directory for a new sweep, or accept it for resuming the same sweep.

        Returns the chunks already committed. Raises :class:`StoreError`, touching nothing,
        when the directory holds anything else.
        """
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"--out {self.root}: exists and is not a directory")
        existing = self.read_manifest() if self.root.exists() else None
        if existing is None:
            if self.root.exists() and any(self.root.iterdir()):
                raise StoreError(
                    f"--out {self.root}: exists and is not an eosim sweep; choose another --out"
                )
            self.root.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.manifest_path, manifest)
            return []
        if existing.get("format") != FORMAT or existing.get("sweep_id") != manifest["sweep_id"]:
            other = existing.get("command", "unknown command")
            raise StoreError(
                f"--out {self.root}: holds another sweep's results ({other}); "
                "choose another --out or remove it"
            )
        if existing.get("layout") != LAYOUT and not existing.get("complete"):
            raise StoreError(
                f"--out {self.root}: an unfinished sweep written by an older eosim, whose "
                "chunks this version cannot resume; start it again with another --out"
            )
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        return self.done_chunks()

    def done_chunks(self) -> list[int]:
        """The chunks committed under ``runs/``: those holding their Parquet file."""
        if not self.runs_dir.is_dir():
            return []
        done = []
        for entry in self.runs_dir.iterdir():
            if entry.name.startswith("chunk=") and any(entry.glob("variant=*/part-*.parquet")):
                done.append(int(entry.name.split("=", 1)[1]))
        return sorted(done)

    def chunk_dir(self, chunk: int) -> Path:
        return self.runs_dir / f"chunk={chunk:05d}"

    def progress_dir(self, job: int) -> Path:
        """Where the tasks of a job report finished runs (see eosim.analysis.sweep.progress)."""
        path = self.staging_dir / f"progress-{job:05d}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_scenario(self, text: str) -> Path:
        """The scenario's text as ``scenario.yaml`` (replay commands name it); rewritten only
        when it differs."""
        path = self.root / SCENARIO_COPY
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        return path

    def finish(self, manifest: dict[str, Any]) -> None:
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        write_json_atomic(self.manifest_path, manifest)


# -- what a Spark task does (no driver state: plain paths) ----------------------------------
def chunk_file(root: str | os.PathLike[str], chunk: int, variant: int) -> Path:
    """Where chunk ``chunk`` (all of variant ``variant``) is committed."""
    return (
        Path(root)
        / "runs"
        / f"chunk={chunk:05d}"
        / f"variant={variant}"
        / (f"part-{chunk:05d}.parquet")
    )


def staging_file(root: str | os.PathLike[str], chunk: int) -> Path:
    """A fresh name in ``_staging`` for one attempt at writing chunk ``chunk``."""
    return Path(root) / "_staging" / f"chunk-{chunk:05d}-{uuid.uuid4().hex}.parquet"


def commit_chunk(staged: Path, target: Path) -> None:
    """Make a chunk written to ``staged`` visible as ``target``, in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
