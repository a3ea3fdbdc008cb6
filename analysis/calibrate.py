"""The model beside a real Kafka: two sweeps of one scenario, compared row by row.

``eosim calibrate`` runs a scenario's variants N times on the model and N times on a real
cluster with the same seeds (so with the same fault schedules: :mod:`eosim.real.nemesis`), each
as an ordinary sweep (``model/`` and ``kafka/`` under the output directory), then
:func:`compare` reads the two run tables and :func:`write` renders the calibration report.

Per variant, the report has one row per measure, the model's and Kafka's figures side by side,
a two-sample test, and a flag when they disagree:

* **runs with** an anomaly: k of N runs, with the Wilson 95% interval; Fisher's exact test;
* **per record**: anomalous records per million records sent, with the run-clustered interval
  of :func:`eosim.analysis.stats.ratio_interval`; Mann-Whitney's U on the per-run rates;
* **timings** (:mod:`eosim.analysis.timings`): produce latency p50 and p99, over the whole run
  and once warm (:data:`LATENCY_ROWS`), transaction latency p50, failover time; pooled
  quantiles shown, Mann-Whitney's U on the per-run values (a run's own quantile; every failover
  time).

A row disagrees when its test's p-value, adjusted for the number of rows by Holm's method,
is below :data:`ALPHA`. A row whose two sides saw nothing (no anomaly, no timing) has no test.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.stats import (
    RatioSums,
    format_duration,
    format_ppm,
    merge_sketches,
    ratio_interval,
    sketch_quantile,
    wilson_interval,
)
from eosim.analysis.sweep.store import SweepStore

ALPHA = 0.05
# Always shown, even when neither side saw them.
HEADLINE = ("lost_write", "duplicate")
SIDES = ("model", "kafka")


class CalibrationError(ValueError):
    """The two sweeps cannot be compared; one line for the user."""


@dataclass
class Figure:
    """One side of a row: its text and the number the test compares."""

    text: str
    value: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Row:
    variant: int
    params: str
    measure: str
    model: Figure
    kafka: Figure
    test: str = ""
    p: float | None = None
    p_adjusted: float | None = None
    disagree: bool = False


@dataclass
class Calibration:
    scenario: str
    runs: dict[str, int]
    commands: dict[str, str]
    rows: list[Row] = field(default_factory=list)

    @property
    def disagreements(self) -> list[Row]:
        return [r for r in self.rows if r.disagree]

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "runs": self.runs,
            "commands": self.commands,
            "alpha": ALPHA,
            "rows": [asdict(r) for r in self.rows],
        }


def _runs(root: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    store = SweepStore(root)
    manifest = store.read_manifest() if root.is_dir() else None
    if manifest is None:
        raise CalibrationError(f"{root}: not a sweep results directory (no manifest.json)")
    if not store.runs_dir.is_dir():
        raise CalibrationError(f"{root}: the sweep has no finished run")
    dataset = ds.dataset(store.runs_dir, format="parquet", partitioning="hive")
    frame = dataset.to_table().to_pandas()
    frame["variant"] = frame["variant"].astype(int)
    return manifest, frame.sort_values(["variant", "run"]).reset_index(drop=True)


def _fisher(k1: int, n1: int, k2: int, n2: int) -> float | None:
    if k1 + k2 == 0 or (k1 == n1 and k2 == n2):
        return None
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1])


def _mann_whitney(a: Sequence[float], b: Sequence[float]) -> float | None:
    a = [x for x in a if x is not None and not math.isnan(x)]
    b = [x for x in b if x is not None and not math.isnan(x)]
    if not a or not b or (len(set(a) | set(b)) == 1):
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def _runs_with(frame: pd.DataFrame, anomaly: str) -> tuple[Figure, int, int]:
    n = len(frame)
    k = int((frame[anomaly] > 0).sum()) if anomaly in frame else 0
    low, high = wilson_interval(k, n) if n else (0.0, 1.0)
    text = f"{k}/{n} [{100 * low:.0f}–{100 * high:.0f}%]"
    return Figure(text, k / n if n else None, low, high), k, n


def _per_record(frame: pd.DataFrame, anomaly: str) -> tuple[Figure, list[float]]:
    if anomaly not in frame:
        return Figure("-"), []
    pairs = [(int(s), int(a)) for s, a in zip(frame["sent"], frame[anomaly], strict=True)]
    est, low, high = ratio_interval(RatioSums.of(pairs))
    rates = [a / s for s, a in pairs if s > 0]
    if est is None:
        return Figure("-"), rates
    text = f"{format_ppm(est)} [{format_ppm(low)}–{format_ppm(high)}] ppm"
    return Figure(text, est, low, high), rates


# The latency rows: (label, run-table column, quantile). Pooled quantiles are shown; the test
# compares the runs' own quantiles. The warm rows leave out each run's first WARM_UP_MS
# (eosim.analysis.timings), where a real client is a cold JVM and the model has no such thing.
LATENCY_ROWS: tuple[tuple[str, str, float], ...] = (
    ("produce latency p50", "ack_latency_sketch", 0.5),
    ("produce latency p99", "ack_latency_sketch", 0.99),
    ("produce latency p50, warm", "warm_ack_latency_sketch", 0.5),
    ("produce latency p99, warm", "warm_ack_latency_sketch", 0.99),
    ("transaction latency p50", "commit_latency_sketch", 0.5),
    # With acks=1, the replication lag plus a consumer's fetch (eosim.analysis.timings).
    ("ack to first read p50", "read_after_ack_sketch", 0.5),
    ("ack to first read p99", "read_after_ack_sketch", 0.99),
)


def _quantile_figure(blobs: Sequence[bytes | None], q: float) -> Figure:
    merged = merge_sketches(blobs)
    value = sketch_quantile(merged, q)
    return Figure(format_duration(value), value)


def _per_run_quantiles(blobs: Sequence[bytes | None], q: float) -> list[float]:
    out = []
    for blob in blobs:
        v = sketch_quantile(blob, q)
        if v is not None:
            out.append(v)
    return out


def _failovers(frame: pd.DataFrame) -> list[float]:
    if "failover_ms" not in frame:
        return []
    return [
        float(t) for times in frame["failover_ms"] for t in (times if times is not None else [])
    ]


def _failover_figure(times: list[float]) -> Figure:
    if not times:
        return Figure("-")
    s = sorted(times)
    median = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    text = (
        f"{format_duration(median)} (n={len(s)}, {format_duration(s[0])}–{format_duration(s[-1])})"
    )
    return Figure(text, median, s[0], s[-1])


def _variant_rows(variant: int, params: str, m: pd.DataFrame, k: pd.DataFrame) -> list[Row]:
    rows: list[Row] = []
    for anomaly in ALL_ANOMALIES:
        seen = any(a in f and (f[a] > 0).any() for f in (m, k) for a in (anomaly,))
        if not seen and anomaly not in HEADLINE:
            continue
        fm, km, nm = _runs_with(m, anomaly)
        fk, kk, nk = _runs_with(k, anomaly)
        rows.append(
            Row(variant, params, f"{anomaly}: runs with", fm, fk, "Fisher", _fisher(km, nm, kk, nk))
        )
        rm, rates_m = _per_record(m, anomaly)
        rk, rates_k = _per_record(k, anomaly)
        rows.append(
            Row(
                variant,
                params,
                f"{anomaly}: per record",
                rm,
                rk,
                "Mann-Whitney",
                _mann_whitney(rates_m, rates_k),
            )
        )
    for label, column, q in LATENCY_ROWS:
        if column not in m or column not in k:
            continue  # a sweep written before the column existed
        bm, bk = list(m[column]), list(k[column])
        fm, fk = _quantile_figure(bm, q), _quantile_figure(bk, q)
        if fm.value is None and fk.value is None:
            continue
        p = _mann_whitney(_per_run_quantiles(bm, q), _per_run_quantiles(bk, q))
        rows.append(Row(variant, params, label, fm, fk, "Mann-Whitney", p))
    tm, tk = _failovers(m), _failovers(k)
    if tm or tk:
        rows.append(
            Row(
                variant,
                params,
                "failover time",
                _failover_figure(tm),
                _failover_figure(tk),
                "Mann-Whitney",
                _mann_whitney(tm, tk),
            )
        )
    return rows


def holm(rows: list[Row], alpha: float = ALPHA) -> None:
    """Holm's step-down adjustment of the rows' p-values; flags the rows that disagree."""
    tested = sorted((r for r in rows if r.p is not None), key=lambda r: r.p or 0.0)
    m = len(tested)
    running = 0.0
    for i, row in enumerate(tested):
        assert row.p is not None
        running = max(running, min(1.0, (m - i) * row.p))
        row.p_adjusted = running
        row.disagree = running < alpha


# The override ``eosim calibrate`` gives the model's sweep alone, so that the model takes the
# rules of the Kafka release it is compared with (``kafka.version=4.1`` for Kafka 4.1.1).
VERSION_SET = "kafka.version="


def compare(model_dir: str | Path, kafka_dir: str | Path) -> Calibration:
    """The calibration of the sweeps in ``model_dir`` and ``kafka_dir`` (same scenario, grid
    and seeds)."""
    mm, mf = _runs(Path(model_dir))
    km, kf = _runs(Path(kafka_dir))
    for key in ("scenario_yaml", "seed", "runs_per_variant", "grid", "set"):
        mine, theirs = mm.get(key), km.get(key)
        if key == "set":  # the model side may take the real cluster's version's rules
            mine = [s for s in mine or [] if not s.startswith(VERSION_SET)]
        if mine != theirs:
            raise CalibrationError(
                f"{model_dir} and {kafka_dir} are not the same sweep ({key} differs)"
            )
    names = {int(v["variant"]): json.dumps(v["params"], sort_keys=True) for v in mm["variants"]}
    cal = Calibration(
        mm["scenario"],
        {"model": len(mf), "kafka": len(kf)},
        {"model": mm.get("command", ""), "kafka": km.get("command", "")},
    )
    for variant in sorted(names):
        m = mf[mf["variant"] == variant]
        k = kf[kf["variant"] == variant]
        if len(m) == 0 or len(k) == 0:
            continue
        cal.rows.extend(_variant_rows(variant, names[variant], m, k))
    holm(cal.rows)
    return cal


def _p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")


def markdown(cal: Calibration) -> str:
    lines = [
        f"# Calibration: {cal.scenario}",
        "",
        f"Model: {cal.runs['model']} runs (`{cal.commands['model']}`); "
        f"Kafka: {cal.runs['kafka']} runs (`{cal.commands['kafka']}`). A row **disagrees** when "
        f"its Holm-adjusted p-value is below {ALPHA}.",
        "",
    ]
    variants = sorted({r.variant for r in cal.rows})
    for variant in variants:
        rows = [r for r in cal.rows if r.variant == variant]
        lines += [f"## Variant {variant}: {rows[0].params}", ""]
        lines += [
            "| measure | model | Kafka | test | p | adjusted | |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            flag = "**disagree**" if r.disagree else ""
            lines.append(
                f"| {r.measure} | {r.model.text} | {r.kafka.text} | {r.test} | {_p(r.p)} "
                f"| {_p(r.p_adjusted)} | {flag} |"
            )
        lines.append("")
    n = len(cal.disagreements)
    lines.append(f"{n} row(s) disagree." if n else "No row disagrees.")
    return "\n".join(lines) + "\n"


def html(cal: Calibration) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("eosim.analysis.report", "templates"),
        autoescape=True,
    )
    template = env.get_template("calibration.html")
    variants = []
    for variant in sorted({r.variant for r in cal.rows}):
        rows = [r for r in cal.rows if r.variant == variant]
        variants.append({"variant": variant, "params": rows[0].params, "rows": rows})
    return template.render(cal=cal, variants=variants, alpha=ALPHA, p=_p)


def write(cal: Calibration, out: str | Path) -> list[Path]:
    """calibration.md, calibration.html and calibration.json under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (
        ("calibration.md", markdown(cal)),
        ("calibration.html", html(cal)),
        ("calibration.json", json.dumps(cal.to_dict(), indent=2) + "\n"),
    ):
        path = out / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        paths.append(path)
    return paths
