"""The report's figures, drawn with matplotlib (Agg backend) into PNG bytes."""

from __future__ import annotations

import io
import json
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from eosim.analysis.report.data import SweepData, label, show
from eosim.analysis.stats import bucket_upper_ms, format_ppm
from eosim.analysis.sweep.plan import short_names


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def shown_anomalies(data: SweepData) -> list[str]:
    """The anomalies some run showed, in `GUARANTEES` order (duplicate and lost_write if
    none)."""
    found = [a for a in data.guarantees if data.table[f"runs_{a}"].sum() > 0]
    return found or ["duplicate", "lost_write"]


# Series styles: markers and line styles that stay distinguishable where lines coincide (at
# zero, typically), and in grey print.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")
# Values of a parameter at or below this count are drawn as categories (grouped bars).
FEW_VALUES = 2


def categorical(values: list[Any]) -> bool:
    """Whether a parameter's values are drawn as categories (grouped bars with error bars):
    booleans, strings, or only a few distinct values; numbers otherwise get lines."""
    distinct = {json.dumps(v) for v in values}
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        return True
    return len(distinct) <= FEW_VALUES


def _zero_line(ax: Any) -> None:
    """A visible zero line, with room below it so markers at zero are not cut by the axis."""
    ax.axhline(0, color="#333", linewidth=1.0, zorder=1)
    top = ax.get_ylim()[1]
    ax.set_ylim(bottom=-0.04 * max(top, 1e-9), top=max(top, 1e-9))


def _legend(ax: Any, title: str = "") -> None:
    """The legend outside the data area, to the right."""
    ax.legend(
        fontsize=7,
        title=title or None,
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        frameon=False,
    )


def _measures(data: SweepData, anomaly: str) -> list[tuple[str, str, str, str, float, str]]:
    """What a rate plot draws: (value, low, high columns, scale, y label) per panel: the
    share of runs, and the per-record rate when the sweep recorded it."""
    out = [
        (
            f"rate_{anomaly}",
            f"ci_low_{anomaly}",
            f"ci_high_{anomaly}",
            "share",
            100.0,
            f"runs with {anomaly} (%, Wilson 95%)",
        )
    ]
    if data.per_record and f"ppm_{anomaly}" in data.table:
        out.append(
            (
                f"ppm_{anomaly}",
                f"ppm_{anomaly}_low",
                f"ppm_{anomaly}_high",
                "ppm",
                1.0,
                f"{anomaly} per million records (95%)",
            )
        )
    return out


def _finite(values: np.ndarray) -> np.ndarray:
    """NaN and infinity (a one-run variant's upper bound) as NaN, so they are not drawn."""
    out = np.array(values, dtype=float)
    out[~np.isfinite(out)] = np.nan
    return out


def rate_vs_param(data: SweepData, param: str, anomaly: str) -> bytes:
    """Anomaly rate against one swept parameter, one series per combination of the others:
    the share of runs (Wilson 95%) and, beside it, anomalous records per million sent.
    Categorical parameters (see `categorical`) get grouped bars with error bars, numeric ones
    lines with interval bands."""
    t = data.table
    values = [json.loads(p) for p in t["params"]]
    others = [p for p in data.params if p != param]
    names = short_names([*data.params, *data.vary])
    series: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        key = label(v, others, names) if others else anomaly
        series.setdefault(key, []).append(i)
    xs_all = sorted({json.dumps(v[param]) for v in values}, key=lambda x: _sortable(json.loads(x)))
    xs_all = [json.loads(x) for x in xs_all]
    bars = categorical([v[param] for v in values])
    measures = _measures(data, anomaly)
    fig, axes = plt.subplots(
        1, len(measures), figsize=(4.6 * len(measures) + 1.8, 3.6), squeeze=False
    )
    n = len(series)
    for ax, (col, low_col, high_col, _kind, scale, ylabel) in zip(axes[0], measures, strict=True):
        for k, (key, rows) in enumerate(series.items()):
            rows = sorted(rows, key=lambda i: _sortable(values[i][param]))
            if bars:
                x = np.array([xs_all.index(values[i][param]) for i in rows], dtype=float)
            else:
                x = np.array([float(values[i][param]) for i in rows])
            y = _finite(t[col].to_numpy()[rows].astype(float)) * scale
            low = _finite(t[low_col].to_numpy()[rows].astype(float)) * scale
            high = _finite(t[high_col].to_numpy()[rows].astype(float)) * scale
            style = {"marker": MARKERS[k % len(MARKERS)], "label": key}
            if bars:
                width = 0.8 / n
                offset = (k - (n - 1) / 2) * width
                # An edge in the bar's own colour: a bar of height 0 still shows, as a line.
                color = f"C{k % 10}"
                ax.bar(
                    x + offset,
                    y,
                    width * 0.9,
                    label=key,
                    zorder=2,
                    color=color,
                    alpha=0.85,
                    edgecolor=color,
                    linewidth=2.0,
                )
                ax.errorbar(
                    x + offset,
                    y,
                    yerr=[np.nan_to_num(y - low), np.nan_to_num(high - y)],
                    fmt="none",
                    ecolor="#222",
                    capsize=3,
                    zorder=3,
                )
            else:
                # Coinciding series (all at zero, often) stay visible: each is shifted a
                # little sideways and has its own marker and line style.
                span = float(max(xs_all)) - float(min(xs_all)) or 1.0
                shift = (k - (n - 1) / 2) * span * min(0.012, 0.05 / max(n, 1))
                line = ax.plot(
                    x + shift,
                    y,
                    linestyle=LINESTYLES[k % len(LINESTYLES)],
                    markersize=5,
                    zorder=3 + n - k,
                    **style,
                )[0]
                ax.fill_between(x + shift, low, high, color=line.get_color(), alpha=0.12, zorder=2)
        if bars:
            ax.set_xticks(range(len(xs_all)), [show(x) for x in xs_all])
        else:
            ax.set_xticks([float(x) for x in xs_all], [show(x) for x in xs_all])
        ax.set_xlabel(data.short(param))
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        _zero_line(ax)
    axes[0][0].set_title(f"{anomaly} vs {data.short(param)}: share of runs", fontsize=9)
    if len(measures) > 1:
        axes[0][1].set_title(f"{anomaly} vs {data.short(param)}: per record", fontsize=9)
    if n > 1 or bars:
        _legend(axes[0][-1], ", ".join(data.short(p) for p in others))
    fig.tight_layout()
    return _png(fig)


VARY_BINS = 5
VARY_SERIES = 6


def rate_vs_drawn(data: SweepData, path: str, anomaly: str) -> bytes:
    """The share of runs with ``anomaly`` against a `--vary` parameter's drawn value, in
    quantile bins of the draws (a few distinct values are their own bins), with Wilson 95%
    intervals per bin; one series per variant, or all variants pooled when there are many."""
    from eosim.analysis.stats import wilson_interval
    from eosim.analysis.sweep.plan import param_column

    runs = data.runs
    column = param_column(path)
    assert runs is not None and column in runs and anomaly in runs
    drawn = runs[column]
    distinct = sorted(drawn.dropna().unique().tolist(), key=_sortable)
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in distinct)
    if numeric and len(distinct) > VARY_BINS:
        edges = np.unique(np.quantile(drawn.astype(float), np.linspace(0, 1, VARY_BINS + 1)))
        at = np.searchsorted(edges, drawn.astype(float), side="right") - 1
        bins = np.clip(at, 0, len(edges) - 2)
        names = [f"{_g(edges[b])}–{_g(edges[b + 1])}" for b in range(len(edges) - 1)]
    else:
        bins = np.array([distinct.index(v) for v in drawn])
        names = [show(v) for v in distinct]
    labels = data.variant_labels
    variants = sorted(runs["variant"].unique().tolist())
    groups = (
        [(labels[v] if v < len(labels) else str(v), runs["variant"] == v) for v in variants]
        if len(variants) <= VARY_SERIES
        else [("all variants", np.ones(len(runs), dtype=bool))]
    )
    fig, ax = plt.subplots(figsize=(6.8, 3.6))
    x_pos = np.arange(len(names), dtype=float)
    for k, (name, mask) in enumerate(groups):
        mask = np.asarray(mask)
        rate, low, high = [], [], []
        for b in range(len(names)):
            sel = mask & (bins == b)
            total = int(sel.sum())
            hits = int((runs[anomaly][sel] > 0).sum())
            lo, hi = wilson_interval(hits, total) if total else (np.nan, np.nan)
            rate.append(100 * hits / total if total else np.nan)
            low.append(100 * lo)
            high.append(100 * hi)
        shift = (k - (len(groups) - 1) / 2) * 0.06
        r = np.array(rate)
        ax.errorbar(
            x_pos + shift,
            r,
            yerr=[np.nan_to_num(r - np.array(low)), np.nan_to_num(np.array(high) - r)],
            marker=MARKERS[k % len(MARKERS)],
            linestyle=LINESTYLES[k % len(LINESTYLES)],
            capsize=3,
            markersize=5,
            label=name,
            zorder=3 + len(groups) - k,
        )
    ax.set_xticks(x_pos, names, rotation=20 if len(names) > 3 else 0, fontsize=8)
    ax.set_xlabel(f"{data.short(path)} (drawn per run; {'quantile bins' if numeric else 'values'})")
    ax.set_ylabel(f"runs with {anomaly} (%, Wilson 95%)", fontsize=8)
    ax.set_title(f"{anomaly} vs drawn {data.short(path)}", fontsize=9)
    ax.grid(alpha=0.3)
    _zero_line(ax)
    _legend(ax)
    return _png(fig)


def _g(value: float) -> str:
    return f"{value:.3g}"


def heatmap(data: SweepData, anomaly: str) -> bytes:
    p1, p2 = data.params
    values = [json.loads(p) for p in data.table["params"]]
    xs = sorted({v[p2] for v in values}, key=_sortable)
    ys = sorted({v[p1] for v in values}, key=_sortable)
    grid = np.full((len(ys), len(xs)), np.nan)
    for i, v in enumerate(values):
        grid[ys.index(v[p1]), xs.index(v[p2])] = data.table[f"rate_{anomaly}"][i] * 100
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    im = ax.imshow(grid, cmap="Reds", vmin=0, aspect="auto", origin="lower")
    ppm = np.full((len(ys), len(xs)), np.nan)
    if data.per_record and f"ppm_{anomaly}" in data.table:
        for i, v in enumerate(values):
            ppm[ys.index(v[p1]), xs.index(v[p2])] = data.table[f"ppm_{anomaly}"][i]
    for (r, c), val in np.ndenumerate(grid):
        text = f"{val:.1f}%"
        if np.isfinite(ppm[r, c]):
            text += f"\n{format_ppm(float(ppm[r, c]))} ppm"
        ax.text(c, r, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(xs)), [show(x) for x in xs])
    ax.set_yticks(range(len(ys)), [show(y) for y in ys])
    ax.set_xlabel(data.short(p2))
    ax.set_ylabel(data.short(p1))
    title = f"runs with {anomaly} (%)"
    ax.set_title(title + (" and per million records" if np.isfinite(ppm).any() else ""), fontsize=9)
    fig.colorbar(im, ax=ax)
    return _png(fig)


# What each latency histogram measures: axis label, CDF's y label, title.
LATENCY_TEXT = {
    "ack": (
        "acknowledgement latency (ms, simulated)",
        "fraction of acknowledged sends",
        "acknowledgement latency (CDF)",
    ),
    "commit": (
        "commit latency (ms, simulated)",
        "fraction of committed transactions",
        "transaction commit latency (CDF)",
    ),
}


CDF_STYLES = ("-", "--", ":", "-.")


def latency(data: SweepData, prefix: str = "ack") -> bytes:
    """CDF of the merged `PREFIX_latency_hist` per variant: `ack` (sends) or `commit`
    (transactions)."""
    xlabel, ylabel, title = LATENCY_TEXT[prefix]
    hists = data.table[f"{prefix}_latency_hist"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    used = [i for h in hists for i, c in enumerate(h) if c]
    for k, (name, hist) in enumerate(zip(data.variant_labels, hists, strict=True)):
        counts = np.array(list(hist), dtype=float)
        if counts.sum() == 0:
            continue
        edges = np.array([bucket_upper_ms(i) for i in range(len(counts))])
        # Up to 20 variants get 20 distinct colours; beyond, the line style tells them apart
        # (the default cycle repeats after 10, so two variants shared a colour).
        style = {"color": plt.get_cmap("tab20")(k % 20), "linestyle": CDF_STYLES[k // 20 % 4]}
        ax.step(edges, np.cumsum(counts) / counts.sum(), where="post", label=name, **style)
    ax.set_xscale("log")
    if used:
        ax.set_xlim(bucket_upper_ms(max(min(used) - 2, 0)), bucket_upper_ms(max(used) + 2))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _png(fig)


def breakdown(data: SweepData) -> bytes:
    anomalies = shown_anomalies(data)
    labels = data.variant_labels
    fig, ax = plt.subplots(figsize=(max(6.4, 0.6 * len(labels) + 2), 3.8))
    width = 0.8 / len(anomalies)
    x = np.arange(len(labels))
    for k, a in enumerate(anomalies):
        ax.bar(x + k * width, data.table[f"runs_{a}"], width, label=a)
    ax.set_xticks(x + width * (len(anomalies) - 1) / 2, labels, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("runs with the anomaly")
    ax.set_title("anomalies by type and variant")
    _legend(ax)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _sortable(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))
