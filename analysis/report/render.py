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
import os
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from eosim.analysis.expect import Condition
from eosim.analysis.report import plots
from eosim.analysis.report.data import GUARANTEES, DataError, SweepData, load, short, show
from eosim.analysis.stats import format_duration
from eosim.analysis.sweep.aggregate import MUST_HOLD
from eosim.simulation.scenario import ScenarioError, apply_override


class ReportError(ValueError):
    """The report cannot be made (one line, for the user)."""


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes


@dataclass
class Story:
    anomaly: str
    runs: list[dict[str, Any]]
    timeline_text: str = ""
    timeline_svg: str = ""
    note: str = ""


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
    shown and that was, or ``bad``) and its text."""
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


def banner(data: SweepData) -> tuple[bool, str]:
    """The report's verdict in one sentence, and whether every variant met its
    expectations."""
    n = len(data.table)
    missed = [row for _, row in data.table.iterrows() if not row["expect_met"]]
    if not missed:
        if not any(expectations(data)):
            return True, f"The scenario sets no expectations; {n} variant(s) ran."
        if n == 1:
            return True, "The variant met its expectations."
        return True, f"Every variant ({n}) met its expectations."
    groups: dict[str, list[int]] = {}
    for row in missed:
        groups.setdefault(str(row["expect_failures"]), []).append(int(row["variant"]))
    parts = [f"{_spans(variants)} ({why})" for why, variants in groups.items()]
    if len(parts) > BANNER_REASONS:
        rest = len(parts) - BANNER_REASONS
        parts = [*parts[:BANNER_REASONS], f"and {rest} more (see the expect column)"]
    which = ", ".join(parts)
    return False, f"{len(missed)} of {n} variants did not meet their expectations: {which}."


BANNER_REASONS = 4


def _spans(numbers: list[int]) -> str:
    """Variant numbers, consecutive ones as a range: ``0–3, 7``."""
    spans: list[list[int]] = []
    for k in numbers:
        if spans and k == spans[-1][1] + 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


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


def _th(text: str, params: list[str]) -> str:
    """A header cell; a parameter shows its last word, with the full path as a tooltip."""
    if text in params:
        return f'<th title="{escape(text)}">{escape(short(text))}</th>'
    return f"<th>{escape(text)}</th>"


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
                    f"Share of runs with {anomaly} against {param}, with Wilson 95% intervals.",
                    plots.rate_vs_param(data, param, anomaly),
                )
            )
        if len(data.params) == 2:
            content.figures.append(
                Figure(
                    f"heatmap-{anomaly}",
                    f"Share of runs with {anomaly} over the two-parameter grid.",
                    plots.heatmap(data, anomaly),
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
    content.stories = [_story(data, anomaly, runs) for anomaly, runs in data.failing.items()]
    return content


def _story(data: SweepData, anomaly: str, runs: list[dict[str, Any]]) -> Story:
    from eosim.analysis import outcome as checked
    from eosim.analysis.sweep.replay import ReplayError, replay

    story = Story(anomaly, runs)
    first = runs[0]
    try:
        r = replay(data.root, f"{first['variant']}:{first['run']}")
    except ReplayError as exc:
        story.note = f"could not replay run {first['variant']}:{first['run']}: {exc}"
        return story
    if r.mismatches:
        story.note = "replay did not reproduce the recorded outcome: " + "; ".join(r.mismatches)
    for t in checked.timelines(r.outcome):
        if t.anomaly == anomaly:
            story.timeline_text, story.timeline_svg = t.text(), t.svg()
    return story


# -- HTML ----------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222}
h1{margin-bottom:.2em} .sub{color:#666;margin-top:0}
.banner{padding:.6em 1em;border-radius:4px;font-size:17px;font-weight:600;margin:.8em 0}
.banner.met{background:#eaf7ea;border:1px solid #9c9} .banner.unmet{background:#fbe5e5;
border:1px solid #d99}
table{border-collapse:collapse;margin:1em 0;font-size:14px;max-width:100%}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top;
overflow-wrap:break-word}
table.verdicts{table-layout:fixed;width:100%;font-size:12px}
table.verdicts td,table.verdicts th{padding:3px 4px;hyphens:auto}
table.verdicts th{font-size:11px} table.verdicts th.expect{width:12%}
table.verdicts th.variant{width:4.5em}
th{background:#f5f5f5} .ok{background:#eaf7ea} .bad{background:#fbe5e5;font-weight:600}
.expected{background:#eef3fb}
figure{display:inline-block;margin:1em 1em 1em 0;max-width:100%}
figcaption{color:#555;font-size:13px}
img{max-width:100%} pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:12px}
code{background:#f2f2f2;padding:1px 4px} td code{white-space:normal;word-break:break-all}
.timeline{overflow:auto;border:1px solid #eee}
.note{color:#a00}
"""


def render_html(content: Content) -> str:
    d = content.data
    m = d.manifest
    e = escape
    met, sentence = banner(d)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>eosim reliability report: {e(m['scenario'])}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Reliability report: {e(m['scenario'])}</h1>",
        f'<p class="sub">sweep {e(m["sweep_id"])} · {m["total_runs"]} runs · '
        f"{len(d.table)} variant(s) · eosim {e(m['eosim_version'])} · "
        f"finished {e(str(m.get('finished', '')))}</p>",
        f"<p>Command: <code>{e(m['command'])}</code></p>",
        f'<p class="banner {"met" if met else "unmet"}" id="verdict">{e(sentence)}</p>',
        "<h2>Verdicts</h2>",
        "<p>✓: no run of the variant showed the anomaly; the bound is the upper end of the "
        "Wilson 95% interval on its rate. ✗: runs with the anomaly (or, for one the scenario "
        "expects, no run showing it), the rate and its 95% interval. <i>shown, as "
        "expected</i>: the scenario expects the anomaly and runs showed it.</p>",
        '<table class="verdicts"><tr><th class="variant">variant</th>',
        *(f'<th title="{e(p)}">{e(short(p))}</th>' for p in d.params),
        *(f'<th title="{e(a)}">{e(GUARANTEES[a])}</th>' for a in d.guarantees),
        '<th class="expect">expect</th></tr>',
    ]
    for (_, row), expect in zip(d.table.iterrows(), expectations(d), strict=True):
        params = json.loads(row["params"])
        cells = [f"<td>{row['variant']}</td>"]
        cells += [f"<td>{e(show(params[p]))}</td>" for p in d.params]
        for anomaly in d.guarantees:
            style, text = _verdict(row, anomaly, expect)
            cells.append(f'<td class="{style}">{e(text)}</td>')
        expect_text = "met" if row["expect_met"] else f"NOT MET: {row['expect_failures']}"
        cells.append(f'<td class="{"ok" if row["expect_met"] else "bad"}">{e(expect_text)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    head, rows = latency_table(d)
    out.append(
        "<h2>Latency</h2><p>Simulated time, p50 / p99 per variant (DDSketch, 1% relative "
        "error).</p>"
    )
    out.append("<table><tr>" + "".join(_th(h, d.params) for h in head) + "</tr>")
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows]
    out.append("</table><h2>How risk moves with the settings</h2>")
    for f in content.figures:
        data_uri = base64.b64encode(f.png).decode("ascii")
        out.append(
            f'<figure><img alt="{e(f.caption)}" src="data:image/png;base64,{data_uri}">'
            f"<figcaption>{e(f.caption)}</figcaption></figure>"
        )
    out.append("<h2>How it happened</h2>")
    if not content.stories:
        out.append("<p>No run showed any anomaly.</p>")
    for s in content.stories:
        out.append(
            f"<h3>{e(s.anomaly)}</h3><table><tr><th>variant</th><th>run</th>"
            "<th>count</th><th>replay</th></tr>"
        )
        for r in s.runs:
            out.append(
                f"<tr><td>{r['variant']}</td><td>{r['run']}</td><td>{r[s.anomaly]}</td>"
                f"<td><code>{e(r['replay'] or '')}</code></td></tr>"
            )
        out.append("</table>")
        if s.note:
            out.append(f'<p class="note">{e(s.note)}</p>')
        if s.timeline_svg:
            first = s.runs[0]
            out.append(
                f"<p>Minimal timeline of run {first['variant']}:{first['run']} "
                f"(<code>eosim replay {e(str(d.root))} --run "
                f"{first['variant']}:{first['run']}</code>):</p>"
            )
            out.append(f'<div class="timeline">{s.timeline_svg}</div>')
            out.append(
                f"<details><summary>as text</summary><pre>{e(s.timeline_text)}</pre></details>"
            )
    out.append("<h2>Scenario</h2>")
    out.append(f"<pre>{e(m['scenario_yaml'])}</pre>")
    if m.get("set"):
        out.append("<p>With overrides: " + ", ".join(f"<code>{e(s)}</code>" for s in m["set"]))
    out.append(
        f'<p class="sub">Generated {e(dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))} '
        f"by <code>eosim report {e(str(d.root))}</code>.</p></body></html>"
    )
    return "\n".join(out)


# -- Markdown ------------------------------------------------------------------------------
def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
        cells += [_md(_verdict(row, a, expect)[1]) for a in d.guarantees]
        cells.append("met" if row["expect_met"] else _md(f"NOT MET: {row['expect_failures']}"))
        out.append("| " + " | ".join(cells) + " |")
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
    for s in content.stories:
        out += [f"### {s.anomaly}", "", "| variant | run | count | replay |", "|---|---|---|---|"]
        for r in s.runs:
            out.append(f"| {r['variant']} | {r['run']} | {r[s.anomaly]} | `{r['replay'] or ''}` |")
        out.append("")
        if s.note:
            out += [f"> {_md(s.note)}", ""]
        if s.timeline_svg:
            (files_dir / f"timeline-{s.anomaly}.svg").write_text(s.timeline_svg, encoding="utf-8")
            out += [
                f"![timeline of {s.anomaly}]({rel}/timeline-{s.anomaly}.svg)",
                "",
                "```text",
                s.timeline_text,
                "```",
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
    if not target.parent.is_dir():
        raise ReportError(f"--out {target}: directory {str(target.parent)!r} does not exist")
    content = build(root)
    text = (
        render_html(content)
        if fmt == "html"
        else render_markdown(content, target.with_name(f"{target.stem}_files"))
    )
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target
