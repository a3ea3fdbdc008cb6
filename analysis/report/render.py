"""Writing the report: one content model, rendered as self-contained HTML or as Markdown.

The HTML page embeds its images (PNG as data URIs, timelines as inline SVG), loads nothing
from anywhere and runs no script, so it opens offline and can be attached anywhere. Every
string that comes from a scenario or a result is escaped. The Markdown variant writes its
images into ``<name>_files/`` beside the ``.md`` file.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
import yaml
from markupsafe import Markup

from eosim.analysis.expect import Condition
from eosim.analysis.report import plots
from eosim.analysis.report.data import GUARANTEES, DataError, SweepData, load, show
from eosim.analysis.stats import format_duration, format_ppm
from eosim.analysis.sweep.aggregate import MUST_HOLD
from eosim.analysis.sweep.task import FAULT_KINDS
from eosim.simulation.limits import DEPARTURES, bearing, features
from eosim.simulation.scenario import ScenarioError, apply_override, parse_scenario


class ReportError(ValueError):
    """The report cannot be made (one line, for the user)."""


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes


@dataclass
class Story:
    """How one variant showed one anomaly: its first run that did (``run``: a row of
    `SweepData.failing`), replayed and drawn."""

    anomaly: str
    run: dict[str, Any]
    label: str = ""  # the variant's parameters
    timeline_text: str = ""
    timeline_svg: str = ""
    # The timeline's head: a lost write's partition and what decided the loss (else empty).
    summary: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def variant(self) -> int:
        return int(self.run["variant"])

    @property
    def slug(self) -> str:
        """The story's name in file names."""
        return f"{self.anomaly}-v{self.variant}"


# At most this many stories per anomaly (one per failing variant, in variant order); the
# runs table still lists every failing variant with its replay command.
STORIES_PER_ANOMALY = 24


@dataclass
class Content:
    data: SweepData
    figures: list[Figure] = field(default_factory=list)
    stories: list[Story] = field(default_factory=list)


def expectations(data: SweepData) -> list[dict[str, Condition]]:
    """Per variant (in table order), the scenario's ``expect:`` block as conditions: the
    sweep's scenario text with its ``--set`` overrides and the variant's own parameters that
    touch ``expect.``; empty when the text cannot be read."""
    m = data.manifest
    try:
        raw = yaml.safe_load(m.get("scenario_yaml") or "") or {}
    except yaml.YAMLError:
        raw = {}
    out = []
    for params_text in data.table["params"]:
        variant = dict(raw) if isinstance(raw, dict) else {}
        variant["expect"] = dict(variant.get("expect") or {})
        params = json.loads(params_text)
        sets = [*m.get("set", []), *(f"{p}={show(v)}" for p, v in params.items())]
        for text in sets:
            if text.startswith("expect."):
                try:
                    apply_override(variant, text)
                except ScenarioError:
                    continue
        conditions = {}
        for key, value in variant["expect"].items():
            try:
                conditions[str(key)] = Condition.parse(value)
            except ValueError:
                continue
        out.append(conditions)
    return out


def _failed_keys(row: Any) -> set[str]:
    """The expect keys a variant failed, from the aggregate's ``expect_failures`` (each entry
    starts with its key)."""
    text = row.get("expect_failures") or ""
    return {part.split(" ", 1)[0] for part in str(text).split("; ") if part}


def _verdict(row: Any, anomaly: str, expect: dict[str, Condition] | None = None) -> tuple[str, str]:
    """A verdict cell: its style (``ok``, ``expected``: an anomaly the scenario expects to be
    shown and that was, or ``bad``) and its text (the runs that showed the anomaly, their
    share and its Wilson 95% interval)."""
    k, n = int(row[f"runs_{anomaly}"]), int(row["runs"])
    high = 100 * row[f"ci_high_{anomaly}"]
    condition = (expect or {}).get(anomaly)
    failed = condition is not None and anomaly in _failed_keys(row)
    if k == 0:
        if failed and condition.op not in MUST_HOLD:
            return "bad", f"✗ not shown (expected {condition}) 0/{n}"
        return "ok", f"✓ 0/{n} (≤{high:.2g}%)"
    low, rate = 100 * row[f"ci_low_{anomaly}"], 100 * row[f"rate_{anomaly}"]
    counts = f"{k}/{n} {rate:.1f}% [{low:.1f}–{high:.1f}]"
    if condition is not None and condition.op not in MUST_HOLD and not failed:
        return "expected", f"shown, as expected ({condition}): {counts}"
    return "bad", f"✗ {counts}"


NOT_RECORDED = "not recorded"


def _number(value: Any) -> float | None:
    """A float, or None for a missing value (None, NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def per_record(row: Any, anomaly: str) -> str:
    """The per-record rate of a verdict cell: anomalous records per million records sent and
    its 95% interval (``11,400 ppm [5,720–17,100]``); ``not recorded`` for sweeps made before
    the aggregate had it, ``no records sent`` when the variant sent none."""
    if f"ppm_{anomaly}" not in row or f"ppm_{anomaly}_high" not in row:
        return f"ppm {NOT_RECORDED}"
    ppm = _number(row[f"ppm_{anomaly}"])
    if ppm is None:
        return "no records sent"
    low, high = _number(row[f"ppm_{anomaly}_low"]), _number(row[f"ppm_{anomaly}_high"])
    return f"{format_ppm(ppm)} ppm [{format_ppm(low)}–{format_ppm(high)}]"


def banner(data: SweepData) -> tuple[bool, str]:
    """The report's verdict in a sentence, and whether every variant met its expectations;
    when the sweep has its own (``expect_sweep``), a second sentence judges them, and the
    verdict is met only when both are."""
    met, sentence = _run_banner(data)
    sweep = data.sweep_verdict
    if sweep is None:
        return met, sentence
    verdict = str(sweep["verdict"])
    if verdict == "met":
        return met, f"{sentence} The sweep's own expectations (expect_sweep) are met."
    reasons = []
    for v in sweep["variants"]:
        if v["verdict"] != "met":
            why = "; ".join(c["text"] for c in v["checks"] if c["verdict"] != "met")
            reasons.append((f"{v['verdict']}: {why}", int(v["variant"])))
    what = "NOT MET" if verdict == "not met" else verdict.upper()
    return False, f"{sentence} The sweep's own expectations are {what}: {_which(reasons)}."


def _run_banner(data: SweepData) -> tuple[bool, str]:
    n = len(data.table)
    missed = [row for _, row in data.table.iterrows() if not row["expect_met"]]
    if not missed:
        if not any(expectations(data)):
            return True, f"The scenario sets no expectations; {n} variant(s) ran."
        if n == 1:
            return True, "The variant met its expectations."
        return True, f"Every variant ({n}) met its expectations."
    which = _which([(str(row["expect_failures"]), int(row["variant"])) for row in missed])
    return False, f"{len(missed)} of {n} variants did not meet their expectations: {which}."


BANNER_REASONS = 4


def _which(reasons: list[tuple[str, int]]) -> str:
    """(reason, variant) pairs as the banner lists them: the variants of each reason as spans,
    the first ``BANNER_REASONS`` reasons, then how many more the expect column holds."""
    groups: dict[str, list[int]] = {}
    for why, variant in reasons:
        groups.setdefault(why, []).append(variant)
    parts = [f"{_spans(variants)} ({why})" for why, variants in groups.items()]
    if len(parts) > BANNER_REASONS:
        rest = len(parts) - BANNER_REASONS
        parts = [*parts[:BANNER_REASONS], f"and {rest} more (see the expect column)"]
    return ", ".join(parts)


def _spans(numbers: list[int]) -> str:
    """Variant numbers, consecutive ones as a range: ``0–3, 7``."""
    spans: list[list[int]] = []
    for k in numbers:
        if spans and k == spans[-1][1] + 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def build(root: str | Path) -> Content:
    try:
        data = load(root)
    except DataError as exc:
        raise ReportError(str(exc)) from None
    content = Content(data)
    for anomaly in plots.shown_anomalies(data):
        for param in data.params:
            content.figures.append(
                Figure(
                    f"rate-{anomaly}-{param}",
                    f"{anomaly} against {param}: the share of runs (Wilson 95%)"
                    + (
                        " and anomalous records per million sent (95%)."
                        if data.per_record
                        else "; per-record rates not recorded."
                    ),
                    plots.rate_vs_param(data, param, anomaly),
                )
            )
        if len(data.params) == 2:
            content.figures.append(
                Figure(
                    f"heatmap-{anomaly}",
                    f"{anomaly} over the two-parameter grid: share of runs"
                    + (" and per million records." if data.per_record else "."),
                    plots.heatmap(data, anomaly),
                )
            )
        for path in data.vary:
            if data.runs is not None and anomaly in data.runs:
                content.figures.append(
                    Figure(
                        f"drawn-{anomaly}-{path}",
                        f"{anomaly} against the drawn value of {path} (--vary), in quantile "
                        "bins of the draws, with Wilson 95% intervals per bin.",
                        plots.rate_vs_drawn(data, path, anomaly),
                    )
                )
    content.figures.append(
        Figure("breakdown", "Runs with each anomaly type, by variant.", plots.breakdown(data))
    )
    if "ack" in latencies(data):
        content.figures.append(
            Figure("latency", "Acknowledgement latency by variant.", plots.latency(data))
        )
    if "commit" in latencies(data):
        content.figures.append(
            Figure(
                "commit-latency",
                "Transaction commit latency (invocation to ok completion) by variant.",
                plots.latency(data, "commit"),
            )
        )
    content.stories = stories(data)
    return content


def stories(data: SweepData) -> list[Story]:
    """One story per anomaly and variant that showed it (at most STORIES_PER_ANOMALY per
    anomaly), each from the variant's first run with it, replayed. A run that shows several
    anomalies is replayed once."""
    from eosim.analysis import outcome as checked
    from eosim.analysis.sweep.replay import ReplayError, replay

    labels = dict(zip((int(v) for v in data.table["variant"]), data.variant_labels, strict=True))
    replays: dict[tuple[int, int], tuple[list[Any], str]] = {}
    out = []
    for anomaly, rows in data.failing.items():
        for row in rows[:STORIES_PER_ANOMALY]:
            story = Story(anomaly, row, labels.get(int(row["variant"]), ""))
            key = (story.variant, int(row["run"]))
            if key not in replays:
                run_id = f"{key[0]}:{key[1]}"
                try:
                    r = replay(data.root, run_id)
                except ReplayError as exc:
                    replays[key] = ([], f"could not replay run {run_id}: {exc}")
                else:
                    note = ""
                    if r.mismatches:
                        note = "replay did not reproduce the recorded outcome: " + "; ".join(
                            r.mismatches
                        )
                    replays[key] = (checked.timelines(r.outcome), note)
            timelines, story.note = replays[key]
            for t in timelines:
                if t.anomaly == anomaly:
                    story.timeline_text, story.timeline_svg = t.text(), t.svg()
                    story.summary = list(t.summary)
            out.append(story)
    return out


def story_groups(content: Content) -> list[dict[str, Any]]:
    """The "How it happened" section, per anomaly: a table row per variant that showed it
    (``rows``: variant, its parameters, runs with it out of its runs, the first of them,
    the replay command of the first), its stories, and how many failing variants have no
    story (``more``, beyond STORIES_PER_ANOMALY)."""
    d = content.data
    total = dict(zip((int(v) for v in d.table["variant"]), d.table["runs"], strict=True))
    labels = dict(zip((int(v) for v in d.table["variant"]), d.variant_labels, strict=True))
    groups = []
    for anomaly, failing in d.failing.items():
        rows = [
            {
                "variant": int(r["variant"]),
                "label": labels.get(int(r["variant"]), ""),
                "runs": f"{r['failing_runs']}/{int(total.get(int(r['variant']), 0))}",
                "first_runs": ", ".join(str(n) for n in r["first_runs"])
                + (" …" if r["failing_runs"] > len(r["first_runs"]) else ""),
                "replay": r["replay"] or "",
            }
            for r in failing
        ]
        told = [s for s in content.stories if s.anomaly == anomaly]
        groups.append(
            {"anomaly": anomaly, "rows": rows, "stories": told, "more": len(rows) - len(told)}
        )
    return groups


def headline(story: Story) -> str:
    """A story's one line: which run, and for a lost write the first event that decided the
    loss (the timeline's summary)."""
    count = story.run[story.anomaly]
    line = f"variant {story.variant}"
    if story.label and story.label != "all":
        line += f" ({story.label})"
    line += f", run {story.variant}:{story.run['run']}: {count} {story.anomaly}"
    if len(story.summary) > 1:
        line += f"; lost by {story.summary[1]}" + (" …" if len(story.summary) > 2 else "")
    return line


# -- tables --------------------------------------------------------------------------------
@dataclass
class Cell:
    text: str
    cls: str = ""
    title: str = ""
    sub: str = ""  # a second line, smaller
    header: bool = False  # a row header (a transposed table's first column)


@dataclass
class Table:
    head: list[Cell]
    rows: list[list[Cell]]
    css: str = ""


# A table with more columns than this is transposed when it has fewer rows than columns, and
# otherwise laid out to the page width with wrapping cells, so it never needs a scrollbar.
WIDE_COLUMNS = 9


def fit(table: Table) -> Table:
    """``table`` as it fits the page: unchanged when narrow; transposed (columns become rows)
    when wide and short; laid out to the page width (cells wrap) when wide and long."""
    if len(table.head) <= WIDE_COLUMNS:
        return table
    if len(table.rows) + 1 < len(table.head):
        head = [table.head[0], *(Cell(r[0].text, title=r[0].title) for r in table.rows)]
        rows = [
            [Cell(h.text, title=h.title, header=True), *(r[j] for r in table.rows)]
            for j, h in enumerate(table.head)
            if j > 0
        ]
        out = Table(head, rows, "wide" if len(head) > WIDE_COLUMNS else table.css)
        return out
    return Table(table.head, table.rows, "wide")


def _param_head(data: SweepData) -> list[Cell]:
    return [Cell(data.short(p), cls="param", title=p) for p in data.params]


def _param_cells(data: SweepData, row: Any) -> list[Cell]:
    params = json.loads(row["params"])
    return [Cell(show(params[p])) for p in data.params]


def verdict_table(data: SweepData) -> Table:
    """Per variant and guarantee: the runs that broke it (share, Wilson 95%) and, below, the
    per-record rate; then whether the variant met the scenario's expectations."""
    head = [Cell("variant", cls="variant"), *_param_head(data)]
    head += [Cell(GUARANTEES[a], title=a) for a in data.guarantees]
    head.append(Cell("expect", cls="expect"))
    rows = []
    for (_, row), expect in zip(data.table.iterrows(), expectations(data), strict=True):
        cells = [Cell(str(row["variant"])), *_param_cells(data, row)]
        for anomaly in data.guarantees:
            style, text = _verdict(row, anomaly, expect)
            cells.append(Cell(text, cls=style, sub=per_record(row, anomaly)))
        text, sub, style = expect_cell(row, sweep_checks(data, int(row["variant"])))
        detail = row.get("expect_sweep_detail")
        title = detail if isinstance(detail, str) else ""
        cells.append(Cell(text, cls=style, sub=sub, title=title))
        rows.append(cells)
    return Table(head, rows, "verdicts")


def sweep_checks(data: SweepData, variant: int) -> list[dict[str, Any]]:
    """The checks of the sweep's own expectations on ``variant`` (expect_sweep.json); empty
    when the sweep had none."""
    for v in (data.sweep_verdict or {}).get("variants", []):
        if int(v["variant"]) == variant:
            return list(v.get("checks") or [])
    return []


def expect_cell(row: Any, checks: list[dict[str, Any]] | None = None) -> tuple[str, str, str]:
    """A variant's expect cell: its text, a second line and its style (``ok``, ``bad``, or
    ``unsure`` for an inconclusive sweep expectation). The runs' verdict on ``expect:`` comes
    first when they missed it; otherwise the sweep's own verdict (``expect_sweep``) decides
    the text, and an inconclusive one says how many runs would settle it (the most any of its
    inconclusive checks needs: ``runs_to_settle`` in expect_sweep.json)."""
    sweep = row.get("expect_sweep")
    sweep = sweep if isinstance(sweep, str) else ""
    if not row["expect_met"]:
        return f"NOT MET: {row['expect_failures']}", f"sweep: {sweep}" if sweep else "", "bad"
    if sweep in ("", "met"):
        return "met", "sweep: met" if sweep else "", "ok"
    if sweep == "not met":
        return "sweep NOT MET", "runs: met", "bad"
    unsure = [c for c in checks or () if c.get("verdict") == "inconclusive"]
    if not unsure or any("runs_to_settle" not in c for c in unsure):
        return "inconclusive", "more runs would settle it", "unsure"  # from an older eosim
    needed = [c["runs_to_settle"] for c in unsure]
    if None in needed:
        return "inconclusive", "no number of runs would settle it at this rate", "unsure"
    return "inconclusive", f"about {max(needed):,} runs would settle it at this rate", "unsure"


def fault_table(data: SweepData) -> Table | None:
    """Per variant, the fault load its runs had: each fault kind that occurred in some run
    (total, and mean per run below) and the messages lost; None when not recorded."""
    faults = data.faults
    if faults is None:
        return None
    kinds = [k for k in FAULT_KINDS if f"faults_{k}" in faults and faults[f"faults_{k}"].sum()]
    columns = [*(f"faults_{k}" for k in kinds), "messages_lost"]
    head = [Cell("variant"), *_param_head(data), *(Cell(k) for k in kinds)]
    head.append(Cell("messages lost"))
    rows = []
    for _, row in data.table.iterrows():
        v = int(row["variant"])
        cells = [Cell(str(v)), *_param_cells(data, row)]
        for c in columns:
            if v not in faults.index:
                cells.append(Cell("-"))
                continue
            total, runs = int(faults.loc[v, c]), int(faults.loc[v, "runs"])
            mean = f"{total / max(runs, 1):.3g}"
            cells.append(Cell(f"{total:,} ({mean} / run)", cls="num"))
        rows.append(cells)
    return fit(Table(head, rows))


def _ms(value: Any) -> str:
    """A latency with its unit and at most three significant digits, as the CLI prints it."""
    return "-" if value is None or pd.isna(value) else format_duration(float(value))


def latencies(data: SweepData) -> list[str]:
    """The latencies the report shows: `ack` and `commit`, each when some run measured it;
    `ack` alone when none did."""
    return [p for p in ("ack", "commit") if data.has_latency(p)] or ["ack"]


def latency_table(data: SweepData) -> tuple[list[str], list[list[str]]]:
    """Per variant, p50/p99 of each latency in `latencies`: a header (parameters by full
    path) and rows of text."""
    prefixes = latencies(data)
    head = ["variant", *data.params]
    head += [f"{p} p50 / p99" for p in prefixes]
    rows = []
    for _, row in data.table.iterrows():
        params = json.loads(row["params"])
        cells = [str(row["variant"]), *(show(params[p]) for p in data.params)]
        cells += [f"{_ms(row[f'{p}_p50_ms'])} / {_ms(row[f'{p}_p99_ms'])}" for p in prefixes]
        rows.append(cells)
    return head, rows


def _latency_cells(data: SweepData) -> Table:
    head, rows = latency_table(data)
    cells = [Cell(data.short(h), title=h) if h in data.params else Cell(h) for h in head]
    return fit(Table(cells, [[Cell(c) for c in r] for r in rows]))


FEATURE_NAMES = {
    "unbounded": "CPU and time (no resource model)",
    "resources": "CPU and time (the resource model)",
    "producers": "producers and brokers",
    "network_loss": "network loss",
    "packet_loss": "packet loss",
    "replication": "replication",
    "idempotence": "idempotence",
    "transactions": "transactions",
    "consumers": "consumers and processors",
}


def scenario_limits(
    data: SweepData,
) -> tuple[list[str], list[tuple[str, list[str]]], str, list[str]]:
    """The features the sweep's scenario uses in any variant (with the sweep's overrides, each
    variant's grid values and each --vary parameter at a sample value), and the model's
    departures from Kafka for them (``eosim.simulation.limits``); a note when the scenario could
    not be read; and the model's known biases that bear on any variant
    (:func:`eosim.simulation.limits.bearing`), in order."""
    from eosim.analysis.sweep.plan import PlanError, VarySpec

    m = data.manifest
    text = m.get("scenario_yaml") or ""
    drawn: list[str] = []
    for spec in m.get("vary") or []:
        try:
            v = VarySpec.parse(str(spec))
        except PlanError:
            continue
        drawn.append(f"{v.path}={show(v.sample())}")
    used: set[str] = set()
    biases: dict[str, None] = {}
    note = ""
    for params_text in data.table["params"]:
        params = json.loads(params_text)
        sets = [*m.get("set", []), *(f"{p}={show(v)}" for p, v in params.items()), *drawn]
        try:
            scenario = parse_scenario(text, m.get("scenario", "scenario"), sets)
        except (ScenarioError, ValueError) as exc:
            note = f"The scenario could not be read ({exc}); the general limits are listed."
            continue
        used.update(features(scenario))
        if m.get("target") in (None, "model"):
            biases.update(dict.fromkeys(bearing(scenario)))
    if not used:
        used = {"producers"}
    names = [f for f in DEPARTURES if f in used]
    return (
        [FEATURE_NAMES.get(f, f) for f in names],
        [(FEATURE_NAMES.get(f, f), list(DEPARTURES[f])) for f in names],
        note,
        list(biases),
    )


# -- HTML ----------------------------------------------------------------------------------
_ENV = jinja2.Environment(
    # The templates ship inside the package (package data), beside this module.
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=jinja2.select_autoescape(["html"], default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_html(content: Content) -> str:
    d = content.data
    m = dict(d.manifest)
    met, sentence = banner(d)
    used, limits, note, biases = scenario_limits(d)
    faults = fault_table(d)
    fault_kinds_none = (
        faults is not None
        and d.faults is not None
        and not any(d.faults[f"faults_{k}"].sum() for k in FAULT_KINDS if f"faults_{k}" in d.faults)
    )
    figures = [
        {"caption": f.caption, "data": base64.b64encode(f.png).decode("ascii")}
        for f in content.figures
    ]
    stories = [
        {
            **group,
            "stories": [
                {
                    "variant": s.variant,
                    "run": s.run["run"],
                    "label": s.label,
                    "count": s.run[s.anomaly],
                    "headline": headline(s),
                    "summary": s.summary,
                    "note": s.note,
                    # Drawn by eosim (eosim.analysis.timeline), which escapes every text it
                    # puts in.
                    "timeline_svg": Markup(s.timeline_svg),
                    "timeline_text": s.timeline_text,
                }
                for s in group["stories"]
            ],
        }
        for group in story_groups(content)
    ]
    m.setdefault("set", [])
    m.setdefault("finished", "")
    return _ENV.get_template("report.html").render(
        m=m,
        variants=len(d.table),
        met=met,
        sentence=sentence,
        per_record=d.per_record,
        verdicts=verdict_table(d),
        faults=faults,
        fault_kinds_none=fault_kinds_none,
        features=used,
        limits=limits,
        limits_note=note,
        biases=biases,
        latency=_latency_cells(d),
        figures=figures,
        stories=stories,
        vary=[str(v) for v in m.get("vary") or []],
        root=str(d.root),
        generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )


# -- Markdown ------------------------------------------------------------------------------
def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    def text(c: Cell) -> str:
        return _md(f"{c.text} ({c.sub})" if c.sub else c.text)

    lines = ["| " + " | ".join(text(c) for c in table.head) + " |"]
    lines.append("|---" * len(table.head) + "|")
    lines += ["| " + " | ".join(text(c) for c in r) + " |" for r in table.rows]
    return lines


def render_markdown(content: Content, files_dir: Path) -> str:
    d = content.data
    m = d.manifest
    files_dir.mkdir(parents=True, exist_ok=True)
    rel = files_dir.name
    met, sentence = banner(d)
    out = [
        f"# Reliability report: {_md(m['scenario'])}",
        "",
        f"sweep `{m['sweep_id']}` · {m['total_runs']} runs · {len(d.table)} variant(s) · "
        f"eosim {m['eosim_version']}",
        "",
        f"Command: `{m['command']}`",
        "",
        f"**{'✓' if met else '✗'} {_md(sentence)}**",
        "",
        "## Verdicts",
        "",
        "| variant | "
        + " | ".join(_md(p) for p in d.params)
        + (" | " if d.params else "")
        + " | ".join(GUARANTEES[a] for a in d.guarantees)
        + " | expect |",
        "|---" * (2 + len(d.params) + len(d.guarantees)) + "|",
    ]
    for (_, row), expect in zip(d.table.iterrows(), expectations(d), strict=True):
        params = json.loads(row["params"])
        cells = [str(row["variant"])] + [_md(show(params[p])) for p in d.params]
        cells += [
            _md(f"{_verdict(row, a, expect)[1]} · {per_record(row, a)}") for a in d.guarantees
        ]
        text, sub, _ = expect_cell(row, sweep_checks(d, int(row["variant"])))
        cells.append(_md(f"{text} · {sub}" if sub else text))
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "## Fault load applied", ""]
    faults = fault_table(d)
    if faults is None:
        out.append("Not recorded: the sweep was made before eosim recorded each run's faults.")
    else:
        out += _md_table(faults)
    used, limits, note, biases = scenario_limits(d)
    out += ["", "## The model's limits for this scenario", ""]
    if note:
        out += [f"> {_md(note)}", ""]
    if biases:
        out += ["Known biases of the rates above, measured beside a real Kafka:", ""]
        out += [f"- **{_md(b)}**" for b in biases]
        out.append("")
    out += [f"Features used: {', '.join(used)}.", ""]
    out += [f"- **{feature}**: {' '.join(lines)}" for feature, lines in limits]
    head, rows = latency_table(d)
    out += [
        "",
        "## Latency",
        "",
        "Simulated time, p50 / p99 per variant (DDSketch, 1% relative error).",
        "",
    ]
    out.append("| " + " | ".join(_md(h) for h in head) + " |")
    out.append("|---" * len(head) + "|")
    out += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    out += ["", "## How risk moves with the settings", ""]
    for f in content.figures:
        (files_dir / f"{f.name}.png").write_bytes(f.png)
        out += [f"![{_md(f.caption)}]({rel}/{f.name}.png)", "", f"*{_md(f.caption)}*", ""]
    out += ["## How it happened", ""]
    if not content.stories:
        out += ["No run showed any anomaly.", ""]
    for group in story_groups(content):
        anomaly = group["anomaly"]
        out += [
            f"### {anomaly}",
            "",
            "| variant | runs with it | first runs | replay the first |",
            "|---|---|---|---|",
        ]
        for r in group["rows"]:
            variant = _md(f"{r['variant']} ({r['label']})" if r["label"] else str(r["variant"]))
            out.append(f"| {variant} | {r['runs']} | {r['first_runs']} | `{_md(r['replay'])}` |")
        out.append("")
        if group["more"]:
            out += [f"(Timelines of the first {len(group['stories'])} variants only.)", ""]
        for s in group["stories"]:
            out += [f"#### {_md(headline(s))}", ""]
            if s.note:
                out += [f"> {_md(s.note)}", ""]
            if len(s.summary) > 1:
                out += [f"- lost by {_md(line)}" for line in s.summary[1:]]
                out.append("")
            if s.timeline_svg:
                name = f"timeline-{s.slug}.svg"
                (files_dir / name).write_text(s.timeline_svg, encoding="utf-8")
                out += [
                    f"![timeline of {anomaly}, run {s.variant}:{s.run['run']}]({rel}/{name})",
                    "",
                    "<details><summary>as text</summary>",
                    "",
                    "```text",
                    s.timeline_text,
                    "```",
                    "",
                    "</details>",
                    "",
                ]
    out += ["## Scenario", "", "```yaml", m["scenario_yaml"].rstrip(), "```", ""]
    return "\n".join(out)


def write_report(root: str | Path, out: str | Path | None = None, fmt: str = "html") -> Path:
    if fmt not in ("html", "md"):
        raise ReportError(f"--format {fmt}: choose html or md")
    root = Path(root)
    try:
        load(root)  # cheap: is this a finished sweep at all?
    except DataError as exc:
        raise ReportError(str(exc)) from None
    target = Path(out) if out else root / f"report.{fmt}"
    if target.is_dir():
        raise ReportError(f"--out {target}: is a directory; name the report file")
    try:  # the folders it names, as for any output file (and the images' folder, below)
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(
            f"--out {target}: cannot create {str(target.parent)!r}: {exc.strerror or exc}"
        ) from None
    content = build(root)
    try:
        text = (
            render_html(content)
            if fmt == "html"
            else render_markdown(content, target.with_name(f"{target.stem}_files"))
        )
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        name = exc.filename or target
        raise ReportError(f"--out {target}: cannot write {name}: {exc.strerror or exc}") from None
    return target
