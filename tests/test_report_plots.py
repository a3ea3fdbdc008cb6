"""Report figures on synthetic sweep tables (no Spark): every plot type renders."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.checker import ANOMALIES
from analysis.report import plots
from analysis.report.data import SweepData, label, short, show
from analysis.stats import N_BUCKETS

PNG = b"\x89PNG\r\n\x1a\n"


def table(params: list[str], grid: list[dict]) -> SweepData:
    rows = []
    for i, values in enumerate(grid):
        row = {"variant": i, "params": json.dumps(values), "runs": 10}
        for a in ANOMALIES:
            k = i if a == "duplicate" else 0
            row |= {
                f"runs_{a}": k,
                f"rate_{a}": k / 10,
                f"ci_low_{a}": 0.0,
                f"ci_high_{a}": min(1.0, k / 10 + 0.2),
                f"total_{a}": k,
            }
        hist = [0] * N_BUCKETS
        hist[40 + i] = 5
        row |= {"ack_latency_hist": hist, "expect_met": True, "expect_failures": ""}
        rows.append(row)
    return SweepData(Path("."), {}, pd.DataFrame(rows), params, {})


def test_two_parameter_grid_gets_a_heatmap():
    grid = [{"a.loss": x, "b.idem": y} for x in (0, 0.01) for y in (False, True)]
    data = table(["a.loss", "b.idem"], grid)
    assert plots.heatmap(data, "duplicate").startswith(PNG)
    for param in data.params:
        assert plots.rate_vs_param(data, param, "duplicate").startswith(PNG)
    assert plots.breakdown(data).startswith(PNG)
    assert plots.latency(data).startswith(PNG)
    assert plots.shown_anomalies(data) == ["duplicate"]


def test_labels_are_short_and_kafka_spelled():
    assert short("producers.0.config.max.in.flight.requests.per.connection") == "max.in.flight"
    assert short("network.response_loss") == "response_loss"
    assert show(True) == "true" and show(0.01) == "0.01"
    assert label({"a.x": False}, ["a.x"]) == "x=false"
