"""The model beside a real Kafka: two sweeps of one scenario, compared row by row.

``eosim calibrate`` runs a scenario's variants N times on the model and N times on a real
cluster with the same seeds (so with the same fault schedules: :mod:`eosim.real.nemesis`), each
as an ordinary sweep (``model/`` and ``kafka/`` under the output directory), then
:func:`compare` reads the two run tables and :func:`write` renders the calibration report.

A real run that does not prove what it claims (a fault not applied, or late; a drain that did
not finish; a driver that died; faults skipped: :mod:`eosim.real.referee`) is marked invalid in
its run table; it is left out of every row here and counted, with its reasons, in the report.

Per variant, the report has one row per measure, the model's and Kafka's figures side by side
and a verdict from an equivalence test (:mod:`eosim.analysis.equivalence`): **agree**,
**disagree** or **inconclusive**, with the p-values of both one-sided questions and, for an
inconclusive row, the runs per side that would settle it:

* **runs with** an anomaly: k of N runs, with the Wilson 95% interval; the difference of the
  shares, within 15 points (Newcombe's interval);
* **per record**: anomalous records per million sent, with the run-clustered interval
  (:func:`eosim.analysis.stats.ratio_interval`; a side with none gets a bound clustered by run,
  :func:`eosim.analysis.stats.zero_count_upper`); the log of the ratio, within 2x. With none on
  either side the row takes the verdict of its "runs with" row;
* **timings** (:mod:`eosim.analysis.timings`): produce latency p50 and p99, over the whole run
  and once warm (:data:`LATENCY_ROWS`), transaction latency p50, ack to first read; pooled
  quantiles shown, the runs' own quantiles compared as a ratio of geometric means, within 20%;
* **failover** per fault kind: the share of runs in which a fault of that kind never saw
  writes resume (within 15 points), and the time until they did (the runs' medians, within
  20%).

A figure measured on one side only disagrees. The **primary** rows are the per-record rates
the calibration is for (every anomaly's "per record" row that has a rate to compare: not one
with none on either side, which takes its "runs with" row's verdict); they form one family
whose p-values are Holm-adjusted together. The others are judged alone and say so.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.equivalence import (
    ALPHA,
    LAG_MARGIN,
    LATENCY_MARGIN,
    RATE_MARGIN,
    SHARE_MARGIN,
    VERDICTS,
    Equivalence,
    Margin,
    RateSide,
    difference_welch,
    holm,
    log_ratio_welch,
    one_side_only,
    rate_ratio,
    share_difference,
)
from eosim.analysis.stats import (
    format_duration,
    format_ppm,
    merge_sketches,
    ratio_interval,
    sketch_quantile,
    wilson_interval,
    zero_count_upper,
)
from eosim.analysis.sweep.store import SweepStore

# Always shown, even when neither side saw them.
HEADLINE = ("lost_write", "duplicate")
SIDES = ("model", "kafka")
# The kind a failover is filed under when its sweep predates the run table's failover_kind.
UNKNOWN_KIND = "broker fault"


class CalibrationError(ValueError):
    """The two sweeps cannot be compared; one line for the user."""


@dataclass
class Figure:
    """One side of a row: its text and the number it shows."""

    text: str
    value: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Row:
    """One measure of one variant: both sides' figures and the comparison (None: nothing to
    compare, as when neither side measured it). ``primary`` rows are Holm-adjusted together;
    ``follows`` names the row whose verdict this one takes (a per-record row with none on
    either side takes its "runs with" row's)."""

    variant: int
    params: str
    measure: str
    model: Figure
    kafka: Figure
    result: Equivalence | None = None
    primary: bool = False
    follows: str | None = None

    @property
    def verdict(self) -> str:
        return self.result.verdict if self.result is not None else "-"

    @property
    def disagree(self) -> bool:
        return self.verdict == "disagree"


@dataclass
class Calibration:
    scenario: str
    runs: dict[str, int]
    commands: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    # Per side, the runs left out as invalid and why (rule -> runs that broke it; a run that
    # broke two rules is under both) and how many they are.
    invalid: dict[str, dict[str, int]] = field(default_factory=dict)
    invalid_count: dict[str, int] = field(default_factory=dict)
    # Which runs were compared, when not all of them (compare's ``common``).
    note: str = ""

    @property
    def disagreements(self) -> list[Row]:
        return [r for r in self.rows if r.disagree]

    def counts(self, primary: bool | None = None) -> dict[str, int]:
        """Rows per verdict (``primary``: only the primary rows, or only the others)."""
        rows = [r for r in self.rows if primary is None or r.primary == primary]
        tally = Counter(r.verdict for r in rows if r.result is not None)
        return {v: tally.get(v, 0) for v in VERDICTS}

    def invalid_runs(self, side: str) -> int:
        return self.invalid_count.get(side, 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "runs": self.runs,
            "invalid": self.invalid,
            "invalid_runs": self.invalid_count,
            "commands": self.commands,
            "alpha": ALPHA,
            "margins": {
                "rate": RATE_MARGIN.describe(),
                "latency": LATENCY_MARGIN.describe(),
                "share": SHARE_MARGIN.describe(),
                "lag": LAG_MARGIN.describe(),
            },
            "counts": self.counts(),
            "primary_counts": self.counts(primary=True),
            "rows": [_row_dict(r) for r in self.rows],
        }


def _row_dict(row: Row) -> dict[str, Any]:
    out = asdict(row)
    out["verdict"] = row.verdict
    if row.result is not None:
        out["result"]["margin"] = row.result.margin.describe()
        for key in ("estimate", "low", "high"):
            value = out["result"][key]
            if isinstance(value, float) and not math.isfinite(value):
                out["result"][key] = "inf" if value > 0 else "-inf"
    return out


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


def _valid(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int], int]:
    """The valid runs of a run table, the invalid ones' rules with how many runs broke each
    (a run whose reasons name one rule several times, one per broker, counts once), and how
    many runs are invalid (a sweep made before the ``valid`` column counts every run as
    valid)."""
    if "valid" not in frame:
        return frame, {}, 0
    bad = frame[frame["valid"] == False]  # noqa: E712 (a column, not a bool)
    rules: Counter[str] = Counter()
    for text in bad.get("invalid_reason", pd.Series(dtype=object)):
        rules.update({reason.split(": ", 1)[0] for reason in str(text or "unknown").split("; ")})
    return frame[frame["valid"] != False], dict(sorted(rules.items())), len(bad)  # noqa: E712


# -- anomaly rows ----------------------------------------------------------------------------
def _runs_with_figure(k: int, n: int) -> Figure:
    low, high = wilson_interval(k, n) if n else (0.0, 1.0)
    text = f"{k}/{n} [{100 * low:.0f}–{100 * high:.0f}%]"
    return Figure(text, k / n if n else None, low, high)


def _pairs(frame: pd.DataFrame, anomaly: str) -> list[tuple[int, int]]:
    if anomaly not in frame:
        return [(int(s), 0) for s in frame["sent"]]
    return [
        (int(s), int(a) if a is not None and not pd.isna(a) else 0)
        for s, a in zip(frame["sent"], frame[anomaly], strict=True)
    ]


def _per_record_figure(side: RateSide, other: RateSide) -> Figure:
    """Per million records, with the run-clustered 95% interval; for a side with none, its
    upper bound clustered by run with the other side's cluster size."""
    if side.sums.x <= 0:
        return Figure("-")
    if side.sums.y == 0:
        upper = 1e6 * zero_count_upper(side.sums.n, side.sums.x, other.cluster_size())
        return Figure(f"0 [0–{format_ppm(upper)}] ppm", 0.0, 0.0, upper)
    est, low, high = ratio_interval(side.sums)
    assert est is not None
    text = f"{format_ppm(est)} [{format_ppm(low)}–{format_ppm(high)}] ppm"
    return Figure(text, est, low, high)


def _anomaly_rows(variant: int, params: str, m: pd.DataFrame, k: pd.DataFrame) -> list[Row]:
    rows: list[Row] = []
    for anomaly in ALL_ANOMALIES:
        seen = any(anomaly in f and (f[anomaly] > 0).any() for f in (m, k))
        if not seen and anomaly not in HEADLINE:
            continue
        pm, pk = _pairs(m, anomaly), _pairs(k, anomaly)
        sm, sk = RateSide.of(pm), RateSide.of(pk)
        nm, nk = len(pm), len(pk)
        shares = share_difference(sm.runs_with, nm, sk.runs_with, nk)
        runs_with = f"{anomaly}: runs with"
        rows.append(
            Row(
                variant,
                params,
                runs_with,
                _runs_with_figure(sm.runs_with, nm),
                _runs_with_figure(sk.runs_with, nk),
                shares,
            )
        )
        rates = rate_ratio(sm, sk)
        follows = None
        if rates is None and sm.sums.x > 0 and sk.sums.x > 0:
            follows = runs_with
            rates = replace(
                shares,
                method="none on either side: as its runs with",
                margin=RATE_MARGIN,
                estimate=None,
                low=None,
                high=None,
            )
        rows.append(
            Row(
                variant,
                params,
                f"{anomaly}: per record",
                _per_record_figure(sm, sk),
                _per_record_figure(sk, sm),
                rates,
                primary=follows is None and rates is not None,
                follows=follows,
            )
        )
    return rows


# -- timing rows -----------------------------------------------------------------------------
# The latency rows: (label, run-table column, quantile, margin). Pooled quantiles are shown; the
# test compares the runs' own quantiles. The warm rows leave out each run's first WARM_UP_MS
# (eosim.analysis.timings), where a real client is a cold JVM and the model has no such thing.
LATENCY_ROWS: tuple[tuple[str, str, float, Margin], ...] = (
    ("produce latency p50", "ack_latency_sketch", 0.5, LATENCY_MARGIN),
    ("produce latency p99", "ack_latency_sketch", 0.99, LATENCY_MARGIN),
    ("produce latency p50, warm", "warm_ack_latency_sketch", 0.5, LATENCY_MARGIN),
    ("produce latency p99, warm", "warm_ack_latency_sketch", 0.99, LATENCY_MARGIN),
    ("transaction latency p50", "commit_latency_sketch", 0.5, LATENCY_MARGIN),
    # With acks=1, the replication lag plus a consumer's fetch (eosim.analysis.timings). With
    # acks=all the median sits at zero, either sign: a difference, not a ratio (LAG_MARGIN).
    ("ack to first read p50", "read_after_ack_sketch", 0.5, LAG_MARGIN),
    ("ack to first read p99", "read_after_ack_sketch", 0.99, LATENCY_MARGIN),
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


def _compare_values(
    model: list[float], kafka: list[float], margin: Margin = LATENCY_MARGIN
) -> Equivalence | None:
    """Per-run values on both sides compared (a ratio or a difference within ``margin``); one
    side only disagrees; None when neither has any."""
    if model and kafka:
        if margin.scale == "difference":
            return difference_welch(model, kafka, margin)
        return log_ratio_welch(model, kafka, margin)
    if model or kafka:
        return one_side_only(margin, "model" if model else "Kafka")
    return None


def _timing_rows(variant: int, params: str, m: pd.DataFrame, k: pd.DataFrame) -> list[Row]:
    rows: list[Row] = []
    for label, column, q, margin in LATENCY_ROWS:
        if column not in m or column not in k:
            continue  # a sweep written before the column existed
        bm, bk = list(m[column]), list(k[column])
        fm, fk = _quantile_figure(bm, q), _quantile_figure(bk, q)
        if fm.value is None and fk.value is None:
            continue
        result = _compare_values(_per_run_quantiles(bm, q), _per_run_quantiles(bk, q), margin)
        rows.append(Row(variant, params, label, fm, fk, result))
    rows.extend(_failover_rows(variant, params, m, k))
    return rows


def _failovers(frame: pd.DataFrame) -> dict[str, list[list[float | None]]]:
    """Per fault kind, per run that had one, the failover times of its faults of that kind
    (None: writes never resumed)."""
    if "failover_ms" not in frame:
        return {}
    kinds = frame["failover_kind"] if "failover_kind" in frame else [None] * len(frame)
    out: dict[str, list[list[float | None]]] = {}
    for times, names in zip(frame["failover_ms"], kinds, strict=True):
        if times is None or len(times) == 0:
            continue
        names = names if names is not None else [UNKNOWN_KIND] * len(times)
        per_kind: dict[str, list[float | None]] = {}
        for t, kind in zip(times, names, strict=True):
            value = None if t is None or pd.isna(t) else float(t)
            per_kind.setdefault(str(kind), []).append(value)
        for kind, values in per_kind.items():
            out.setdefault(kind, []).append(values)
    return out


def _failover_figure(runs: list[list[float | None]]) -> Figure:
    times = sorted(t for run in runs for t in run if t is not None)
    never = sum(1 for run in runs for t in run if t is None)
    if not times:
        return Figure(f"never ({never})" if never else "-")
    median = statistics.median(times)
    text = (
        f"{format_duration(median)} (n={len(times)}, {format_duration(times[0])}–"
        f"{format_duration(times[-1])}" + (f", {never} never" if never else "") + ")"
    )
    return Figure(text, median, times[0], times[-1])


def _never_figure(runs: list[list[float | None]]) -> Figure:
    return _runs_with_figure(sum(1 for run in runs if None in run), len(runs))


def _failover_rows(variant: int, params: str, m: pd.DataFrame, k: pd.DataFrame) -> list[Row]:
    fm, fk = _failovers(m), _failovers(k)
    rows: list[Row] = []
    for kind in sorted(set(fm) | set(fk)):
        rm, rk = fm.get(kind, []), fk.get(kind, [])
        if rm and rk:
            never_m = sum(1 for run in rm if None in run)
            never_k = sum(1 for run in rk if None in run)
            never = share_difference(never_m, len(rm), never_k, len(rk))
        else:
            never = one_side_only(SHARE_MARGIN, "model" if rm else "Kafka")
        rows.append(
            Row(
                variant,
                params,
                f"failover after {kind}: never resumed",
                _never_figure(rm) if rm else Figure("-"),
                _never_figure(rk) if rk else Figure("-"),
                never,
            )
        )
        medians_m = [statistics.median(ts) for run in rm if (ts := [t for t in run if t])]
        medians_k = [statistics.median(ts) for run in rk if (ts := [t for t in run if t])]
        rows.append(
            Row(
                variant,
                params,
                f"failover after {kind}: time",
                _failover_figure(rm),
                _failover_figure(rk),
                _compare_values(medians_m, medians_k),
            )
        )
    return rows


# -- the comparison --------------------------------------------------------------------------
def adjust(rows: list[Row], alpha: float = ALPHA) -> None:
    """Holm-adjust the primary rows' p-values together and re-derive their verdicts; a row
    that ``follows`` another takes that row's adjusted verdict."""
    family = [r for r in rows if r.primary and r.result is not None]
    for row, adjusted in zip(family, holm([r.result for r in family], alpha), strict=True):
        assert row.result is not None
        row.result = adjusted
    by_measure = {(r.variant, r.measure): r for r in rows}
    for row in rows:
        if row.follows is not None and row.result is not None:
            leader = by_measure[(row.variant, row.follows)].result
            assert leader is not None
            row.result = replace(
                row.result,
                verdict=leader.verdict,
                p_equivalent=leader.p_equivalent,
                p_different=leader.p_different,
                adjusted=leader.adjusted,
            )


# The overrides ``eosim calibrate`` gives the model's sweep alone: the rules of the Kafka release
# it is compared with (``kafka.version=4.1`` for Kafka 4.1.1), and the resource model of the
# machine the real cluster runs on (``cluster.resources.preset=calibration-host``).
VERSION_SET = "kafka.version="
RESOURCES_SET = "cluster.resources.preset="
# ... and how long a killed broker's sockets outlive it on that machine (cluster.crash_reset),
# measured with benchmarks/real_crash_reset.py (docs/calibration.md, "A crashed broker's
# sockets").
CRASH_RESET_SET = "cluster.crash_reset="
CALIBRATION_CRASH_RESET = "{min: 25ms, max: 120ms}"
MODEL_ONLY = (VERSION_SET, RESOURCES_SET, CRASH_RESET_SET)


def machine_note(model_manifest: dict[str, Any], kafka_manifest: dict[str, Any]) -> str:
    """A sentence when the model's resources preset was measured on another machine than the
    Kafka side ran on (or the Kafka side ran on several): Kafka's costs scale with the machine,
    so its timing rows then compare two machines (docs/calibration.md, "One machine for both
    sides"). Empty when they match or either is not recorded."""
    from eosim.real.machine import describe, differs
    from eosim.simulation.resources import preset_machine

    machines: list[dict[str, Any]] = []
    for record in kafka_manifest.get("machines") or []:
        # Records an older rule kept apart that today's finds one machine are one (a sweep
        # records each machine once, by ``differs`` as it was then).
        if all(differs(record, seen) is not None for seen in machines):
            machines.append(record)
    if len(machines) > 1:
        return (
            f"The Kafka side ran on {len(machines)} machines: "
            + "; ".join(describe(m) for m in machines)
            + "."
        )
    presets = [
        s.removeprefix(RESOURCES_SET)
        for s in model_manifest.get("set") or []
        if s.startswith(RESOURCES_SET)
    ]
    if not presets or not machines:
        return ""
    fitted = preset_machine(presets[-1])
    reason = differs(fitted, machines[0])
    if reason is None:
        return ""
    return (
        f"The model's preset {presets[-1]} was measured on another machine than the Kafka "
        f"side ran on ({reason}): its timing rows compare two machines."
    )


def compare(model_dir: str | Path, kafka_dir: str | Path, common: bool = False) -> Calibration:
    """The calibration of the sweeps in ``model_dir`` and ``kafka_dir`` (same scenario, grid
    and seeds). ``common``: only the runs both sides have finished (a side cut short is
    compared with the same runs of the other), which the report says."""
    mm, mf = _runs(Path(model_dir))
    km, kf = _runs(Path(kafka_dir))
    note = ""
    if common:
        mk, kk = (list(zip(f["variant"], f["run"], strict=True)) for f in (mf, kf))
        both = set(mk) & set(kk)
        total = int(km.get("total_runs") or len(kf))
        note = (
            f"Compared on the {len(both)} runs both sides have finished (the Kafka side has "
            f"{len(kf)} of {total}, the model side {len(mf)})."
        )
        mf = mf[[key in both for key in mk]]
        kf = kf[[key in both for key in kk]]
    for key in ("scenario_yaml", "seed", "runs_per_variant", "grid", "set"):
        mine, theirs = mm.get(key), km.get(key)
        if key == "set":  # the model side may take the real cluster's version and machine
            # (and a user's --set of them, given to both sides, decides nothing on Kafka's)
            mine = [s for s in mine or [] if not s.startswith(MODEL_ONLY)]
            theirs = [s for s in theirs or [] if not s.startswith(MODEL_ONLY)]
        if mine != theirs:
            raise CalibrationError(
                f"{model_dir} and {kafka_dir} are not the same sweep ({key} differs)"
            )
    note = " ".join(x for x in (note, machine_note(mm, km)) if x)
    mf, model_invalid, model_bad = _valid(mf)
    kf, kafka_invalid, kafka_bad = _valid(kf)
    names = {int(v["variant"]): json.dumps(v["params"], sort_keys=True) for v in mm["variants"]}
    cal = Calibration(
        mm["scenario"],
        {"model": len(mf), "kafka": len(kf)},
        {"model": mm.get("command", ""), "kafka": km.get("command", "")},
        invalid={"model": model_invalid, "kafka": kafka_invalid},
        invalid_count={"model": model_bad, "kafka": kafka_bad},
        note=note,
    )
    for variant in sorted(names):
        m = mf[mf["variant"] == variant]
        k = kf[kf["variant"] == variant]
        if len(m) == 0 or len(k) == 0:
            continue
        cal.rows.extend(_anomaly_rows(variant, names[variant], m, k))
        cal.rows.extend(_timing_rows(variant, names[variant], m, k))
    adjust(cal.rows)
    return cal


# -- the report ------------------------------------------------------------------------------
def _p(p: float | None) -> str:
    return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")


def _number(value: float | None, margin: Margin) -> str:
    if value is None:
        return "?"
    if math.isinf(value):
        return "∞"
    if margin.scale == "difference":
        if margin.unit == "ms":
            return f"{value:+.3g}"
        return f"{100 * value:+.0f}"
    return f"{value:.3g}"


def estimate_text(result: Equivalence | None) -> str:
    """The comparison's estimate and interval: ``0.52 [0.31–0.87]`` (model over Kafka) or
    ``-25 [-43–-8] points`` (model minus Kafka)."""
    if result is None or result.estimate is None:
        return "-"
    margin = result.margin
    text = (
        f"{_number(result.estimate, margin)} "
        f"[{_number(result.low, margin)}–{_number(result.high, margin)}]"
    )
    return text + (f" {margin.unit}" if margin.scale == "difference" else "")


def verdict_text(row: Row) -> str:
    if row.result is None:
        return ""
    text = {"agree": "agree", "disagree": "**disagree**", "inconclusive": "inconclusive"}[
        row.verdict
    ]
    if row.verdict == "inconclusive" and row.result.runs_to_settle is not None:
        text += f" (~{row.result.runs_to_settle:,} runs)"
    return text


def summary(cal: Calibration) -> str:
    """The report's opening line: rows per verdict, all and primary."""
    c, p = cal.counts(), cal.counts(primary=True)
    return (
        f"**{c['agree']} row(s) agree, {c['disagree']} disagree, {c['inconclusive']} "
        f"inconclusive** (primary rows, Holm-adjusted together: {p['agree']} agree, "
        f"{p['disagree']} disagree, {p['inconclusive']} inconclusive)."
    )


def _invalid_text(cal: Calibration, side: str) -> str:
    n = cal.invalid_runs(side)
    if not n:
        return ""
    reasons = ", ".join(f"{reason} ({count})" for reason, count in cal.invalid[side].items())
    return f", {n} invalid and left out: {reasons}"


def markdown(cal: Calibration) -> str:
    lines = [
        f"# Calibration: {cal.scenario}",
        "",
        summary(cal),
        "",
        f"Model: {cal.runs['model']} valid runs{_invalid_text(cal, 'model')} "
        f"(`{cal.commands['model']}`); Kafka: {cal.runs['kafka']} valid "
        f"runs{_invalid_text(cal, 'kafka')} (`{cal.commands['kafka']}`)."
        + (f" {cal.note}" if cal.note else ""),
        "",
        f"Margins: per-record rates {RATE_MARGIN.describe()}, latencies and failover times "
        f"{LATENCY_MARGIN.describe()}, shares of runs {SHARE_MARGIN.describe()}, the median "
        f"ack to first read {LAG_MARGIN.describe()}; two one-sided "
        f"tests at α = {ALPHA} (intervals at {100 * (1 - 2 * ALPHA):.0f}%). The estimate is the "
        "model's figure over Kafka's (a difference, model minus Kafka, in points for shares and "
        "in ms for the lag). Primary rows (†) are Holm-adjusted together; the others are judged "
        "alone.",
        "",
    ]
    variants = sorted({r.variant for r in cal.rows})
    for variant in variants:
        rows = [r for r in cal.rows if r.variant == variant]
        lines += [f"## Variant {variant}: {rows[0].params}", ""]
        lines += [
            "| measure | model | Kafka | model/Kafka | p equivalent | p different | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            res = r.result
            lines.append(
                f"| {r.measure}{' †' if r.primary else ''} | {r.model.text} | {r.kafka.text} "
                f"| {estimate_text(res)} | {_p(res.p_equivalent if res else None)} "
                f"| {_p(res.p_different if res else None)} | {verdict_text(r)} |"
            )
        lines.append("")
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
    return template.render(
        cal=cal,
        variants=variants,
        alpha=ALPHA,
        p=_p,
        estimate=estimate_text,
        counts=cal.counts(),
        primary=cal.counts(primary=True),
        margins={
            "rate": RATE_MARGIN.describe(),
            "latency": LATENCY_MARGIN.describe(),
            "share": SHARE_MARGIN.describe(),
            "lag": LAG_MARGIN.describe(),
        },
        invalid={side: _invalid_text(cal, side) for side in SIDES},
    )


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


__all__ = [
    "HEADLINE",
    "LATENCY_ROWS",
    "MODEL_ONLY",
    "RESOURCES_SET",
    "VERSION_SET",
    "Calibration",
    "CalibrationError",
    "Figure",
    "Row",
    "adjust",
    "compare",
    "markdown",
    "summary",
    "write",
]
