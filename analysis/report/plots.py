"""The report's figures, drawn with matplotlib (Agg backend) into PNG bytes."""

from __future__ import annotations

import io
import json
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from eosim.analysis.report.data import SweepData, label, short, show
from eosim.analysis.stats import bucket_upper_ms


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


def rate_vs_param(data: SweepData, param: str, anomaly: str) -> bytes:
    """Anomaly rate against one swept parameter, one line per combination of the others."""
    t = data.table
    values = [json.loads(p) for p in t["params"]]
    others = [p for p in data.params if p != param]
    series: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        key = label(v, others) if others else anomaly
        series.setdefault(key, []).append(i)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    xs_all = sorted({v[param] for v in values}, key=_sortable)
    for key, rows in series.items():
        rows = sorted(rows, key=lambda i: _sortable(values[i][param]))
        x = [xs_all.index(values[i][param]) for i in rows]
        rate = np.array([t[f"rate_{anomaly}"][i] for i in rows]) * 100
        low = rate - np.array([t[f"ci_low_{anomaly}"][i] for i in rows]) * 100
        high = np.array([t[f"ci_high_{anomaly}"][i] for i in rows]) * 100 - rate
        ax.errorbar(x, rate, yerr=[low, high], marker="o", capsize=3, label=key)
    ax.set_xticks(range(len(xs_all)), [show(x) for x in xs_all])
    ax.set_xlabel(short(param))
    ax.set_ylabel(f"runs with {anomaly} (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{anomaly} rate vs {short(param)} (Wilson 95%)")
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="best")
    return _png(fig)


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
    for (r, c), val in np.ndenumerate(grid):
        ax.text(c, r, f"{val:.1f}%", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(xs)), [show(x) for x in xs])
    ax.set_yticks(range(len(ys)), [show(y) for y in ys])
    ax.set_xlabel(short(p2))
    ax.set_ylabel(short(p1))
    ax.set_title(f"runs with {anomaly} (%)")
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


def latency(data: SweepData, prefix: str = "ack") -> bytes:
    """CDF of the merged `PREFIX_latency_hist` per variant: `ack` (sends) or `commit`
    (transactions)."""
    xlabel, ylabel, title = LATENCY_TEXT[prefix]
    hists = data.table[f"{prefix}_latency_hist"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    used = [i for h in hists for i, c in enumerate(h) if c]
    for name, hist in zip(data.variant_labels, hists, strict=True):
        counts = np.array(list(hist), dtype=float)
        if counts.sum() == 0:
            continue
        edges = np.array([bucket_upper_ms(i) for i in range(len(counts))])
        ax.step(edges, np.cumsum(counts) / counts.sum(), where="post", label=name)
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
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _sortable(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))
