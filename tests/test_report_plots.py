"""Report figures on synthetic sweep tables (no Spark): every plot type renders."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from eosim.analysis.checker import ANOMALIES
from eosim.analysis.checks import (
    ALL_ANOMALIES,
    GROUP_ANOMALIES,
    JEPSEN_ANOMALIES,
    REPLICATION_ANOMALIES,
)
from eosim.analysis.report import plots
from eosim.analysis.report.data import GUARANTEES, SweepData, label, show
from eosim.analysis.report.render import (
    Content,
    latencies,
    latency_table,
    render_html,
    render_markdown,
)
from eosim.analysis.stats import N_BUCKETS, bucket_upper_ms, format_duration
from eosim.analysis.sweep.plan import short_names

PNG = b"\x89PNG\r\n\x1a\n"


MANIFEST = {
    "scenario": "s",
    "sweep_id": "abc",
    "total_runs": 40,
    "eosim_version": "test",
    "command": "eosim sweep s.yaml",
    "scenario_yaml": "name: s\n",
}


def table(
    params: list[str],
    grid: list[dict],
    anomalies: tuple[str, ...] = ANOMALIES,
    txns: int | None = None,
    found: tuple[str, ...] = ("duplicate",),
    commits: bool = False,
    acks: bool = True,
    ppm: bool = False,
) -> SweepData:
    """A synthetic aggregate: variant i has i runs with each anomaly in `found`. Without
    `txns` the table looks like one from before the transactional checks; without `ppm`,
    like one from before the per-record rates (with it, 1,000 records sent per run)."""
    rows = []
    for i, values in enumerate(grid):
        row = {"variant": i, "params": json.dumps(values), "runs": 10}
        if ppm:
            row["sent"] = 10_000
        if txns is not None:
            row["txns"] = txns
        for a in anomalies:
            k = i if a in found else 0
            row |= {
                f"runs_{a}": k,
                f"rate_{a}": k / 10,
                f"ci_low_{a}": 0.0,
                f"ci_high_{a}": min(1.0, k / 10 + 0.2),
                f"total_{a}": k,
            }
            if ppm:
                row |= {
                    f"ppm_{a}": 100.0 * k,
                    f"ppm_{a}_low": 0.0,
                    f"ppm_{a}_high": 100.0 * k + 368,
                }
        hist = [0] * N_BUCKETS
        hist[40 + i] = 5 if acks else 0
        row |= {"ack_latency_hist": hist, "expect_met": True, "expect_failures": ""}
        ack = bucket_upper_ms(40 + i) if acks else None
        row |= {"ack_p50_ms": ack, "ack_p99_ms": ack}
        if txns is not None:
            commit = [0] * N_BUCKETS
            if commits:
                commit[60 + i] = 3
            p = bucket_upper_ms(60 + i) if commits else None
            row |= {"commit_latency_hist": commit, "commit_p50_ms": p, "commit_p99_ms": p}
        rows.append(row)
    return SweepData(Path("."), dict(MANIFEST), pd.DataFrame(rows), params, {})


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
    inflight = "producers.0.config.max.in.flight.requests.per.connection"
    names = short_names([inflight, "network.response_loss"])
    assert names == {inflight: "max.in.flight", "network.response_loss": "response_loss"}
    assert show(True) == "true" and show(0.01) == "0.01"
    assert label({"a.x": False}, ["a.x"], short_names(["a.x"])) == "x=false"


def test_two_parameters_with_one_last_word_keep_apart():
    """Two producers' acks swept together were both titled 'acks'; each now keeps as many
    words as tell it apart, in the report and in the CLI table."""
    paths = ["producers.0.config.acks", "producers.1.config.acks", "network.response_loss"]
    assert short_names(paths) == {
        "producers.0.config.acks": "0.config.acks",
        "producers.1.config.acks": "1.config.acks",
        "network.response_loss": "response_loss",
    }
    assert short_names(["a.b", "x.a.b"]) == {"a.b": "a.b", "x.a.b": "x.a.b"}
    data = table(paths[:2], [{paths[0]: 1, paths[1]: "all"}, {paths[0]: 0, paths[1]: 1}])
    assert data.variant_labels == [
        "0.config.acks=1, 1.config.acks=all",
        "0.config.acks=0, 1.config.acks=1",
    ]


GRID = [{"a.loss": x} for x in (0, 0.01)]
BASE = ["duplicate", "lost_write", "nonmonotonic_send", "inconsistent_offsets", "unseen"]


def test_every_anomaly_has_its_own_guarantee():
    assert sorted(GUARANTEES) == sorted(ALL_ANOMALIES)
    assert len(set(GUARANTEES.values())) == len(GUARANTEES)
    assert GUARANTEES["torn_transaction"] == "no partial commits"
    assert GUARANTEES["aborted_read"] == "no aborted reads"


def test_transactional_guarantees_only_for_transactional_sweeps():
    plain = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0)
    assert plain.guarantees == BASE and not plain.transactional

    txn = table(["a.loss"], GRID, ALL_ANOMALIES, txns=12, commits=True)
    assert txn.transactional
    hidden = (*GROUP_ANOMALIES, *REPLICATION_ANOMALIES, *JEPSEN_ANOMALIES)  # only when broken
    assert txn.guarantees == [a for a in GUARANTEES if a not in hidden]
    broken = table(["a.loss"], GRID, ALL_ANOMALIES, txns=12, commits=True, found=("G0",))
    assert broken.guarantees[-1] == "G0"

    # A transactional anomaly some run showed is never hidden.
    shown = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0, found=("duplicate", "poll_skip"))
    assert shown.guarantees == [*BASE, "poll_skip"]
    assert plots.shown_anomalies(shown) == ["duplicate", "poll_skip"]

    # Results of a sweep made before the transactional checks.
    old = table(["a.loss"], GRID)
    assert old.guarantees == BASE and not old.has_latency("commit")


def test_replication_guarantees_only_when_some_run_broke_them():
    assert GUARANTEES["replica_divergence"] == "replica logs match"
    plain = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0)
    assert not set(REPLICATION_ANOMALIES) & set(plain.guarantees)
    broken = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0, found=("offset_rewrite",))
    assert broken.guarantees == [*BASE, "offset_rewrite"]
    assert plots.shown_anomalies(broken) == ["offset_rewrite"]


def test_report_tables_show_transactional_guarantees_and_commit_latency(tmp_path):
    txn = table(["a.loss"], GRID, ALL_ANOMALIES, txns=12, found=("torn_transaction",), commits=True)
    html = render_html(Content(txn))
    md = render_markdown(Content(txn), tmp_path / "txn_files")
    for text in (html, md):
        assert "no partial commits" in text and "no hanging transactions" in text
        assert "commit p50 / p99" in text and "ack p50 / p99" in text
    assert "✗ 1/10" in html  # variant 1 tore a transaction
    head, rows = latency_table(txn)
    assert head == ["variant", "a.loss", "ack p50 / p99", "commit p50 / p99"]
    commit = bucket_upper_ms(61)
    assert (
        rows[1][3]
        == f"{format_duration(commit)} / {format_duration(commit)}"
        == "11.2 ms / 11.2 ms"
    )

    plain = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0)
    html = render_html(Content(plain))
    md = render_markdown(Content(plain), tmp_path / "plain_files")
    for text in (html, md):
        assert "no duplicates" in text and "ack p50 / p99" in text
        assert "no partial commits" not in text and "commit p50/p99" not in text
    lines = md.splitlines()
    verdicts = lines[lines.index("## Verdicts") + 2]
    assert verdicts.count(" | ") == 1 + 1 + 5  # variant, a.loss, five guarantees, expect
    assert lines[lines.index("## Latency") + 4] == "| variant | a.loss | ack p50 / p99 |"


def test_commit_latency_cdf_renders():
    data = table(["a.loss"], GRID, ALL_ANOMALIES, txns=12, commits=True)
    assert data.has_latency("commit")
    assert plots.latency(data, "commit").startswith(PNG)


def test_latencies_shown_are_the_measured_ones():
    assert latencies(table(["a.loss"], GRID, ALL_ANOMALIES, txns=0)) == ["ack"]
    both = table(["a.loss"], GRID, ALL_ANOMALIES, txns=4, commits=True)
    assert latencies(both) == ["ack", "commit"]
    # Transactional producers only: their sends are not `send` ops, so nothing is acknowledged.
    commits_only = table(["a.loss"], GRID, ALL_ANOMALIES, txns=4, commits=True, acks=False)
    assert latencies(commits_only) == ["commit"]
    head, rows = latency_table(commits_only)
    assert head == ["variant", "a.loss", "commit p50 / p99"] and len(rows) == 2
    # Nothing measured at all: the acknowledgement column stays, empty.
    nothing = table(["a.loss"], GRID, ALL_ANOMALIES, txns=0, acks=False)
    assert latency_table(nothing)[1][0][-1] == "- / -"


def test_categorical_parameters_are_bars_and_numeric_ones_lines():
    assert plots.categorical([False, True]) and plots.categorical(["2s", "4s", "6s"])
    assert plots.categorical([1, 5])  # only two values
    assert not plots.categorical([0, 0.01, 0.02, 0.05])
    grid = [{"a.loss": x, "b.idem": y} for x in (0, 0.01, 0.02) for y in (False, True)]
    data = table(["a.loss", "b.idem"], grid, ppm=True)
    for param in data.params:  # one of each kind, each with its per-record panel
        assert plots.rate_vs_param(data, param, "duplicate").startswith(PNG)
    assert plots.heatmap(data, "duplicate").startswith(PNG)


def test_rate_against_a_drawn_parameter_in_bins():
    data = table(["a.loss"], GRID)
    n = 60
    data.vary = ["producers.0.config.retries", "network.mode"]
    data.runs = pd.DataFrame(
        {
            "variant": [i % 2 for i in range(n)],
            "sent": [100] * n,
            "duplicate": [int(i % 7 == 0) for i in range(n)],
            "p_producers_0_config_retries": list(range(n)),
            "p_network_mode": ["a", "b", "c"] * (n // 3),
        }
    )
    for path in data.vary:
        assert plots.rate_vs_drawn(data, path, "duplicate").startswith(PNG)
