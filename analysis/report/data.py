"""What a report needs from a sweep's results directory, read without loading every run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from eosim.analysis.anomalies import KINDS, report_order
from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.sweep.plan import short_names
from eosim.analysis.sweep.replay import replay_commands
from eosim.analysis.sweep.store import SweepStore
from eosim.analysis.sweep.verdict import FILE as SWEEP_VERDICT_FILE

# The guarantee each anomaly breaks (`AnomalyKind.guarantee`), in the order a reader cares
# about (`eosim.analysis.anomalies.report_order`): delivery first, then the transactional ones
# (shown only for sweeps that need them, see `SweepData.guarantees`), then the consumer-group,
# replication and Jepsen ones (shown only when some run broke them).
GUARANTEES = {name: KINDS[name].guarantee for name in report_order()}
# Per anomaly and failing variant, how many of its failing runs the report lists by number.
FIRST_RUNS_LISTED = 5


@dataclass
class SweepData:
    root: Path
    manifest: dict[str, Any]
    table: pd.DataFrame
    params: list[str]
    # Per anomaly, one row per variant that showed it, in variant order: the variant's first
    # run with it (``variant``, ``run``, ``seed``, ``params``, the anomaly counts, ``replay``),
    # with ``failing_runs`` (how many of its runs showed it) and ``first_runs`` (the first
    # FIRST_RUNS_LISTED of them, by run number).
    failing: dict[str, list[dict[str, Any]]]
    # Per variant (index), the fault load its runs had: `runs` and the sums of every
    # `faults_<kind>` and `messages_lost` column; None for sweeps made before runs recorded it.
    faults: pd.DataFrame | None = None
    # The `--vary` parameters (paths), and one row per run with what their plots need: variant,
    # sent, the anomaly counts and the typed `p_<path>` columns of the drawn values.
    vary: list[str] = field(default_factory=list)
    runs: pd.DataFrame | None = None
    # The sweep's own expectations judged (expect_sweep.json: `expect_sweep:` and
    # `eosim sweep --expect`); None when the sweep had none.
    sweep_verdict: dict[str, Any] | None = None

    @property
    def transactional(self) -> bool:
        """Whether any run had a `txn` or `process` op (False for sweeps made before eosim
        counted them)."""
        return "txns" in self.table and int(self.table["txns"].sum()) > 0

    @property
    def guarantees(self) -> list[str]:
        """The anomalies whose guarantee the report shows, in `GUARANTEES` order: every delivery
        one, a transactional one only when the sweep had transactional ops or some run broke
        it, and a consumer-group or replication one only when some run broke it (the results
        do not say whether the runs had groups or replicated partitions), so that reports on
        plain producers stay uncluttered."""

        def shown(a: str) -> bool:
            broken = self.table[f"runs_{a}"].sum() > 0
            family = KINDS[a].family
            if family == "transactional":
                return self.transactional or broken
            # consumer-group and replication checks, and those of histories read from Jepsen
            # (never a sweep's own runs), only when some run broke them
            return family == "delivery" or broken

        return [a for a in GUARANTEES if f"runs_{a}" in self.table and shown(a)]

    @property
    def per_record(self) -> bool:
        """Whether the aggregate has the per-record rates ``ppm_<name>``, ``ppm_<name>_low`` and
        ``ppm_<name>_high`` (anomalous records per million records sent, see
        `eosim.analysis.stats.ratio_interval`) for every shown anomaly; False for sweeps made before
        them."""
        suffixes = ("", "_low", "_high")
        return all(f"ppm_{a}{s}" in self.table for a in self.guarantees for s in suffixes)

    def has_latency(self, prefix: str) -> bool:
        """Whether the aggregate has a non-empty `PREFIX_latency_hist` (ack, commit)."""
        column = f"{prefix}_latency_hist"
        return column in self.table and any(sum(h) for h in self.table[column])

    def short(self, path: str) -> str:
        """The title of a swept parameter (grid or --vary) in tables and legends: its last
        word, unless another of the sweep's parameters shares it (:func:`short_names`)."""
        return short_names([*self.params, *self.vary]).get(path, path)

    @property
    def variant_labels(self) -> list[str]:
        names = short_names([*self.params, *self.vary])
        return [label(json.loads(params), self.params, names) for params in self.table["params"]]


def vary_paths(manifest: dict[str, Any]) -> list[str]:
    """The `--vary` parameters of a sweep, from the manifest's ``path=distribution(...)``."""
    return [str(v).split("=", 1)[0] for v in manifest.get("vary") or []]


def show(value: Any) -> str:
    from eosim.analysis.sweep.plan import render

    return render(value)


def label(values: dict[str, Any], params: list[str], names: dict[str, str]) -> str:
    return ", ".join(f"{names.get(p, p)}={show(values[p])}" for p in params) or "all"


def first_failing_runs(hits: pa.Table) -> list[dict[str, Any]]:
    """From the runs that showed an anomaly, each variant's first (see `SweepData.failing`),
    read column by column so that a sweep of many failing runs builds one dict per variant."""
    hits = hits.sort_by([("variant", "ascending"), ("run", "ascending")])
    variants = np.asarray(hits.column("variant").to_numpy(zero_copy_only=False))
    runs = np.asarray(hits.column("run").to_numpy(zero_copy_only=False))
    _, starts, counts = np.unique(variants, return_index=True, return_counts=True)
    rows = hits.take(pa.array(starts)).to_pylist()
    for row, start, count in zip(rows, starts, counts, strict=True):
        row["failing_runs"] = int(count)
        row["first_runs"] = [int(r) for r in runs[start : start + min(count, FIRST_RUNS_LISTED)]]
    return rows


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
    # Sweeps made before the transactional checks lack their columns.
    anomalies = [a for a in ALL_ANOMALIES if a in dataset.schema.names]
    columns = ["variant", "run", "seed", "params", *anomalies, "replay"]
    for name in anomalies:
        hits = dataset.to_table(columns=columns, filter=pc.field(name) > 0)
        if hits.num_rows:
            failing[name] = first_failing_runs(hits)
            replay_commands(root, manifest, failing[name])
    names = dataset.schema.names
    fault_columns = [c for c in names if c.startswith("faults_")]
    faults = None
    if fault_columns and "messages_lost" in names:
        columns = ["variant", *fault_columns, "messages_lost"]
        frame = dataset.to_table(columns=columns).to_pandas()
        frame["variant"] = frame["variant"].astype(int)
        grouped = frame.groupby("variant")
        faults = grouped.sum()
        faults.insert(0, "runs", grouped.size())
    vary = vary_paths(manifest)
    runs = None
    if vary:
        from eosim.analysis.sweep.plan import param_column

        wanted = ["variant", "sent", *anomalies, *(param_column(p) for p in vary)]
        runs = dataset.to_table(columns=[c for c in wanted if c in names]).to_pandas()
    verdict_file = root / SWEEP_VERDICT_FILE
    sweep_verdict = json.loads(verdict_file.read_text()) if verdict_file.is_file() else None
    return SweepData(
        root,
        manifest,
        table.reset_index(drop=True),
        params,
        failing,
        faults,
        vary,
        runs,
        sweep_verdict,
    )
