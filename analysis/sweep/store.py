"""The results directory of a sweep: manifest, committed chunks, staging, aggregate.

Layout under ``results/NAME/``::

    manifest.json              what was run, with the exact command (written first)
    runs/chunk=00000/variant=0/part-*.parquet
    runs/chunk=00001/...       one directory per committed chunk, partitioned by variant
    _staging/                  chunks being written, and their tasks' progress counts;
                               never read as results
    aggregate.parquet, aggregate.csv

A chunk is written by Spark into ``_staging`` and becomes visible by one directory rename.
A reader therefore never sees half a chunk, and a chunk present under ``runs/`` is complete.
Resuming means skipping the chunks already under ``runs/`` and throwing ``_staging`` away.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
FORMAT = "eosim-sweep"


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
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        return self.done_chunks()

    def done_chunks(self) -> list[int]:
        if not self.runs_dir.is_dir():
            return []
        done = []
        for entry in self.runs_dir.iterdir():
            if entry.name.startswith("chunk=") and (entry / "_SUCCESS").exists():
                done.append(int(entry.name.split("=", 1)[1]))
        return sorted(done)

    def chunk_dir(self, chunk: int) -> Path:
        return self.runs_dir / f"chunk={chunk:05d}"

    def new_staging(self, chunk: int) -> Path:
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        return self.staging_dir / f"chunk={chunk:05d}-{uuid.uuid4().hex[:8]}"

    def progress_dir(self, chunk: int) -> Path:
        """Where the tasks of a chunk report finished runs (see eosim.analysis.sweep.progress)."""
        path = self.staging_dir / f"progress-{chunk:05d}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def commit(self, staging: Path, chunk: int) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        os.rename(staging, self.chunk_dir(chunk))

    def finish(self, manifest: dict[str, Any]) -> None:
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        write_json_atomic(self.manifest_path, manifest)
