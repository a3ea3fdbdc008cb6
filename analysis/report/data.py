"""What a report needs from a sweep's results directory, read without loading every run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds

from analysis.checker import ANOMALIES
from analysis.sweep.store import SweepStore

# The guarantee each anomaly breaks, in the order a reader cares about.
GUARANTEES = {
    "duplicate": "no duplicates",
    "lost_write": "no lost writes",
    "nonmonotonic_send": "no reordering",
    "inconsistent_offsets": "consistent offsets",
    "unseen": "every acknowledged write read",
}
FAILING_RUNS_SHOWN = 5


@dataclass
class SweepData:
    root: Path
    manifest: dict[str, Any]
    table: pd.DataFrame
    params: list[str]
    failing: dict[str, list[dict[str, Any]]]

    @property
    def variant_labels(self) -> list[str]:
        return [label(json.loads(params), self.params) for params in self.table["params"]]


def short(path: str) -> str:
    """A parameter path's last word, as a column or legend title."""
    if path.endswith("max.in.flight.requests.per.connection"):
        return "max.in.flight"
    return path.rsplit(".", 1)[-1]


def show(value: Any) -> str:
    from analysis.sweep.plan import render

    return render(value)


def label(values: dict[str, Any], params: list[str]) -> str:
    return ", ".join(f"{short(p)}={show(values[p])}" for p in params) or "all"


class DataError(ValueError):
    """The directory is not a finished sweep (one line, for the user)."""


def load(root: str | Path) -> SweepData:
    root = Path(root)
    store = SweepStore(root)
    manifest = store.read_manifest() if root.is_dir() else None
    if manifest is None:
        raise DataError(f"{root}: not a sweep results directory (no manifest.json)")
    if not manifest.get("complete") or not (root / "aggregate.parquet").exists():
        raise DataError(f"{root}: the sweep has not finished; run the same eosim sweep again")
    table = pd.read_parquet(root / "aggregate.parquet").sort_values("variant")
    params = [g["path"] for g in manifest["grid"]]
    dataset = ds.dataset(store.runs_dir, format="parquet", partitioning="hive")
    failing: dict[str, list[dict[str, Any]]] = {}
    columns = ["variant", "run", "seed", "params", *ANOMALIES, "replay"]
    for name in ANOMALIES:
        hits = dataset.to_table(columns=columns, filter=pc.field(name) > 0)
        if hits.num_rows:
            rows = hits.sort_by([("variant", "ascending"), ("run", "ascending")])
            failing[name] = rows.slice(0, FAILING_RUNS_SHOWN).to_pylist()
    return SweepData(root, manifest, table.reset_index(drop=True), params, failing)
