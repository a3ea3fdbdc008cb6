"""The report's verdicts on synthetic sweep tables (no Spark): the one-sentence banner, anomalies
the scenario expects shown as expected, and a verdict table that fits a 1280 px page."""

from __future__ import annotations

import html as html_module
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_report_plots import GRID, table

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.report.render import (
    Cell,
    Content,
    Table,
    banner,
    expectations,
    fault_table,
    fit,
    render_html,
    render_markdown,
    scenario_limits,
)
from eosim.analysis.sweep.task import FAULT_KINDS
from eosim.simulation.limits import DEPARTURES

EXPECT_YAML = 'name: s\nexpect:\n  duplicate: ">0"\n  lost_write: 0\n'


def sweep(found: tuple[str, ...] = ("duplicate",), failures: dict[int, str] | None = None):
    """Two variants of the synthetic table (variant 1 shows each of `found` in one run) whose
    scenario expects duplicates and no lost writes; `failures` marks variants unmet."""
    data = table(["a.loss"], GRID, found=found)
    data.manifest["scenario_yaml"] = EXPECT_YAML
    for variant, text in (failures or {}).items():
        data.table.loc[variant, "expect_met"] = False
        data.table.loc[variant, "expect_failures"] = text
    return data


def test_banner_says_every_variant_met():
    data = sweep(failures={})
    assert banner(data) == (True, "Every variant (2) met its expectations.")
    html = render_html(Content(data))
    assert 'class="banner met"' in html
    assert html.index("met its expectations") < html.index("<h2>Verdicts</h2>")


def test_banner_names_each_unmet_variant_and_why(tmp_path):
    failures = {0: "duplicate >0: shown in none of 10 runs"}
    data = sweep(failures=failures)
    met, sentence = banner(data)
    assert not met
    assert sentence == (
        "1 of 2 variants did not meet their expectations: "
        "0 (duplicate >0: shown in none of 10 runs)."
    )
    html = render_html(Content(data))
    assert 'class="banner unmet"' in html and "&gt;0: shown in none" in html
    md = render_markdown(Content(data), tmp_path / "r_files")
    assert md.index("did not meet their expectations") < md.index("## Verdicts")


def _sweep_verdict(verdicts: dict[int, str]) -> dict[str, Any]:
    """An expect_sweep.json as analysis.sweep.verdict writes it, one check per variant."""
    text = {
        "met": "duplicate <1e-4/record: 0 ppm [0-184]: met",
        "inconclusive": "duplicate <1e-4/record: 0 ppm [0-184]: inconclusive",
        "not met": "duplicate <1e-4/record: 900 ppm [500-1,300]: not met",
    }
    worst = max(verdicts.values(), key=["met", "inconclusive", "not met"].index)
    return {
        "expect_sweep": {"duplicate": "<1e-4/record"},
        "verdict": worst,
        "variants": [
            {"variant": v, "verdict": s, "checks": [{"verdict": s, "text": text[s]}]}
            for v, s in verdicts.items()
        ],
    }


def test_banner_judges_the_sweeps_own_expectations():
    """The sweep-level verdict (expect_sweep) joins the banner and the expect column: the
    page is green only when both the runs' and the sweep's expectations are met."""
    data = sweep(failures={})
    data.sweep_verdict = _sweep_verdict({0: "met", 1: "met"})
    assert banner(data) == (
        True,
        "Every variant (2) met its expectations. "
        "The sweep's own expectations (expect_sweep) are met.",
    )
    data.sweep_verdict = _sweep_verdict({0: "met", 1: "inconclusive"})
    data.table["expect_sweep"] = ["met", "inconclusive"]
    data.table["expect_sweep_detail"] = ["", ""]
    met, sentence = banner(data)
    assert not met
    assert sentence.endswith(
        "The sweep's own expectations are INCONCLUSIVE: "
        "1 (inconclusive: duplicate <1e-4/record: 0 ppm [0-184]: inconclusive)."
    )
    html = render_html(Content(data))
    assert 'class="banner unmet"' in html and '<td class="unsure"' in html


def test_an_inconclusive_sweep_expectation_says_so_and_how_many_runs_would_settle_it(tmp_path):
    """The expect cell of a variant whose runs met expect: but whose expect_sweep was
    inconclusive read "met", in red; it reads "inconclusive", with the runs that would settle
    it (the most that any of its inconclusive checks needs)."""
    from eosim.analysis.report.render import verdict_table

    data = sweep(failures={1: "lost_write 0: broken in 1 of 10 runs"})
    data.sweep_verdict = _sweep_verdict({0: "inconclusive", 1: "not met"})
    data.sweep_verdict["variants"][0]["checks"] = [
        {"verdict": "inconclusive", "text": "a", "runs_to_settle": 74},
        {"verdict": "met", "text": "b", "runs_to_settle": None},
        {"verdict": "inconclusive", "text": "c", "runs_to_settle": 1234},
    ]
    data.table["expect_sweep"] = ["inconclusive", "not met"]
    data.table["expect_sweep_detail"] = ["a; b; c", "d"]
    cells = [row[-1] for row in verdict_table(data).rows]
    assert (cells[0].text, cells[0].sub, cells[0].cls) == (
        "inconclusive",
        "about 1,234 runs would settle it at this rate",
        "unsure",
    )
    assert (cells[1].text, cells[1].sub, cells[1].cls) == (
        "NOT MET: lost_write 0: broken in 1 of 10 runs",
        "sweep: not met",
        "bad",
    )
    md = render_markdown(Content(data), tmp_path / "r_files")
    assert "| inconclusive · about 1,234 runs would settle it at this rate |" in md
    # Runs that met expect: under a sweep expectation not met, or one no run count settles.
    data.table.loc[1, "expect_met"] = True
    data.sweep_verdict["variants"][0]["checks"][2]["runs_to_settle"] = None
    cells = [row[-1] for row in verdict_table(data).rows]
    assert (cells[0].text, cells[0].sub) == (
        "inconclusive",
        "no number of runs would settle it at this rate",
    )
    assert (cells[1].text, cells[1].sub, cells[1].cls) == ("sweep NOT MET", "runs: met", "bad")


def test_banner_without_an_expect_block():
    data = table(["a.loss"], GRID)
    assert expectations(data) == [{}, {}]
    assert banner(data) == (True, "The scenario sets no expectations; 2 variant(s) ran.")


def test_expect_overrides_of_the_sweep_and_of_a_variant_apply():
    data = table(["expect.lost_write"], [{"expect.lost_write": 0}, {"expect.lost_write": 2}])
    data.manifest["scenario_yaml"] = EXPECT_YAML
    data.manifest["set"] = ["expect.duplicate=0"]
    conditions = [{k: str(c) for k, c in e.items()} for e in expectations(data)]
    assert conditions == [
        {"duplicate": "0", "lost_write": "0"},
        {"duplicate": "0", "lost_write": "2"},
    ]


def test_an_expected_anomaly_that_was_shown_is_not_a_failure(tmp_path):
    # Variant 1 shows a duplicate (expected) and a lost write (expected 0): the first reads as
    # expected, the second stays a failure; variant 0 shows no duplicate, which it should have.
    failures = {
        0: "duplicate >0: shown in none of 10 runs",
        1: "lost_write 0: broken in 1 of 10 runs",
    }
    data = sweep(found=("duplicate", "lost_write"), failures=failures)
    html = render_html(Content(data))
    assert '<td class="expected">shown, as expected (&gt;0): 1/10' in html
    assert '<td class="bad">✗ 1/10' in html  # the lost write
    assert '<td class="bad">✗ not shown (expected &gt;0) 0/10' in html
    md = render_markdown(Content(data), tmp_path / "r_files")
    assert "shown, as expected (>0): 1/10" in md and "✗ not shown (expected >0) 0/10" in md


def test_an_anomaly_nobody_expected_stays_a_failure():
    data = table(["a.loss"], GRID, found=("duplicate",))
    assert '<td class="bad">✗ 1/10' in render_html(Content(data))


def wide_sweep(variants: int = 16):
    """Variants over three parameters with long values, every guarantee shown and broken
    somewhere with its per-record rate, every fault kind applied, every variant but the first
    failing its expectations."""
    grid = [
        {
            "producers.0.config.max.in.flight.requests.per.connection": i % 4 + 1,
            "network.response_loss": round(0.0125 * (i // 4 % 4), 4),
            "kafka.rules.transaction_partition_verification": i // 16 % 2 == 0,
        }
        for i in range(variants)
    ]
    data = table(list(grid[0]), grid, ALL_ANOMALIES, txns=3, found=ALL_ANOMALIES, ppm=True)
    for a in ALL_ANOMALIES:  # seven-digit per-record rates
        data.table[f"ppm_{a}_high"] = 1_234_567.0
    data.manifest["scenario_yaml"] = EXPECT_YAML
    for i in range(1, variants):
        data.table.loc[i, "expect_met"] = False
        data.table.loc[i, "expect_failures"] = "lost_write 0: broken in 3 of 10 runs"
    faults = {f"faults_{k}": [1_000_000 + i for i in range(variants)] for k in FAULT_KINDS}
    data.faults = pd.DataFrame({"runs": [10] * variants, **faults, "messages_lost": 12_345_678})
    return data


# -- in a real browser (also used by test_sweep_spark's report test) ------------------------
WIDTH, HEIGHT = 1280, 800


@contextmanager
def open_report(page: Path, tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium, WIDTH x HEIGHT, on `page`; skips unless chromium and chromedriver are
    installed (CI installs them)."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if (chromium is None or driver_path is None) and not os.environ.get("CI"):
        pytest.skip("chromium and chromedriver are not installed (CI installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        browser.get(page.resolve().as_uri())
        yield browser
    finally:
        browser.quit()


def page_fits(browser: Any) -> None:
    """The verdict banner is on the first screen, and neither the page nor any table is wider
    than the window (nothing, least of all a pass/fail, behind a horizontal scrollbar)."""
    top, bottom, height = browser.execute_script(
        "const r = document.getElementById('verdict').getBoundingClientRect();"
        "return [r.top, r.bottom, window.innerHeight];"
    )
    assert 0 <= top < bottom <= height  # the whole banner, on the first screen
    width = browser.execute_script("return document.documentElement.clientWidth;")
    assert browser.execute_script("return document.documentElement.scrollWidth;") <= width
    overflowing = browser.execute_script(
        "return Array.from(document.querySelectorAll('table')).filter(t => "
        "t.scrollWidth > t.parentElement.clientWidth"
        " || t.getBoundingClientRect().right > document.documentElement.clientWidth)"
        ".map(t => t.rows[0].textContent.slice(0, 60));"
    )
    assert overflowing == []


@pytest.mark.parametrize("variants", [4, 16, 48])
def test_every_table_fits_1280px_in_a_real_browser(tmp_path, variants):
    data = wide_sweep(variants)
    html = render_html(Content(data))
    assert html.count("<table") == 3  # verdicts, fault load, latency
    page = tmp_path / "wide.html"
    page.write_text(html, encoding="utf-8")
    with open_report(page, tmp_path) as browser:
        page_fits(browser)
        assert browser.execute_script("return document.querySelectorAll('table').length") == 3


def test_names_and_values_from_the_sweep_are_escaped():
    evil = "<script>alert(1)</script>"
    data = table(["a.mode"], [{"a.mode": evil}, {"a.mode": "ok"}])
    data.manifest["scenario"] = evil
    data.manifest["scenario_yaml"] = f"name: '{evil}'\n"
    data.manifest["set"] = [f"a.x={evil}"]
    html = render_html(Content(data))
    assert "<script" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_per_record_rates_beside_the_runs_or_not_recorded(tmp_path):
    data = table(["a.loss"], GRID, ppm=True)
    html = render_html(Content(data))
    assert '<td class="bad">✗ 1/10 10.0% [0.0–30.0]<br><span class="sub2">100 ppm [0–468]' in html
    assert '✓ 0/10 (≤20%)<br><span class="sub2">0 ppm [0–368]' in html
    assert "Per-record rates: not recorded" not in html
    md = render_markdown(Content(data), tmp_path / "r_files")
    assert "✗ 1/10 10.0% [0.0–30.0] · 100 ppm [0–468]" in md

    old = table(["a.loss"], GRID)  # made before the ppm columns existed
    html = render_html(Content(old))
    assert "Per-record rates: not recorded" in html and "ppm not recorded" in html


def test_fault_load_per_variant_or_not_recorded():
    data = table(["a.loss"], GRID)
    html = render_html(Content(data))
    assert "before eosim recorded each run's faults" in html
    kinds = {f"faults_{k}": [0, 0] for k in FAULT_KINDS}
    kinds["faults_crash"] = [0, 25]
    data.faults = pd.DataFrame({"runs": [10, 10], **kinds, "messages_lost": [3, 40]})
    fault_cells = fault_table(data)
    assert [c.text for c in fault_cells.head] == ["variant", "loss", "crash", "messages lost"]
    assert [[c.text for c in r] for r in fault_cells.rows] == [
        ["0", "0", "0 (0 / run)", "3 (0.3 / run)"],
        ["1", "0.01", "25 (2.5 / run)", "40 (4 / run)"],
    ]
    html = render_html(Content(data))
    assert "Fault load applied" in html and "25 (2.5 / run)" in html


TXN_YAML = """name: t
cluster: {brokers: 1, topics: [{name: t, partitions: 1}]}
transactional_producers:
  - name: tp
    workload: {topic: t, transactions: 5}
"""
PLAIN_YAML = """name: p
cluster: {brokers: 1, topics: [{name: t, partitions: 1}]}
producers:
  - name: p
    config: {enable.idempotence: false}
    workload: {topic: t, records: 5}
"""


def test_the_model_limits_listed_are_those_of_the_features_used():
    txn = table(["network.request_loss"], [{"network.request_loss": 0}])
    txn.manifest["scenario_yaml"] = TXN_YAML
    used, limits, note, biases = scenario_limits(txn)
    assert note == "" and "transactions" in used and biases == []
    assert any(f == "transactions" for f, _lines in limits)
    html = render_html(Content(txn))
    # Every line of the scenario's features is shown, as written (the page escapes it).
    shown = html_module.unescape(html)
    assert all(line in shown for line in DEPARTURES["transactions"])

    plain = table(["network.response_loss"], [{"network.response_loss": 0.01}])
    plain.manifest["scenario_yaml"] = PLAIN_YAML
    used, limits, note, _biases = scenario_limits(plain)
    assert note == "" and "transactions" not in used and "idempotence" not in used
    assert "network loss" in used  # from the variant's grid value
    assert DEPARTURES["transactions"][1] not in render_html(Content(plain))


def test_wide_tables_are_transposed_or_wrapped():
    head = [Cell(f"h{i}") for i in range(12)]
    short_table = fit(Table(head, [[Cell(f"{r}:{i}") for i in range(12)] for r in range(2)]))
    assert [c.text for c in short_table.head] == ["h0", "0:0", "1:0"]
    assert [c.text for c in short_table.rows[0]] == ["h1", "0:1", "1:1"]
    assert short_table.rows[0][0].header
    long_table = fit(Table(head, [[Cell(f"{r}:{i}") for i in range(12)] for r in range(20)]))
    assert long_table.css == "wide" and len(long_table.head) == 12
    narrow = Table(head[:4], [])
    assert fit(narrow) is narrow


ACKS1_YAML = """
name: acks1
cluster:
  brokers: 3
  topics: [{name: t, partitions: 3, replication_factor: 3}]
producers:
  - name: p
    config: {acks: all, enable.idempotence: false, max.in.flight.requests.per.connection: 1}
    workload: {topic: t, records: 5}
faults:
  - {kind: crash, nodes: [broker-0], at: 1s, duration: 1s}
"""


def test_the_known_biases_bearing_on_a_variant_come_first():
    """The acks=1 variant of a sweep with leader crashes carries the lower-bound line; the
    acks=all one alone does not."""
    from eosim.simulation.limits import BIASES

    sweep = table(["producers.0.config.acks"], [{"producers.0.config.acks": "all"}])
    sweep.manifest["scenario_yaml"] = ACKS1_YAML
    assert scenario_limits(sweep)[3] == []
    both = table(
        ["producers.0.config.acks"],
        [{"producers.0.config.acks": "all"}, {"producers.0.config.acks": 1}],
    )
    both.manifest["scenario_yaml"] = ACKS1_YAML
    assert scenario_limits(both)[3] == [BIASES[0].text]
    from markupsafe import escape

    assert str(escape(BIASES[0].text)) in render_html(Content(both))
    real = table(["producers.0.config.acks"], [{"producers.0.config.acks": 1}])
    real.manifest["scenario_yaml"] = ACKS1_YAML
    real.manifest["target"] = "kafka"  # Kafka's own figures carry no model bias
    assert scenario_limits(real)[3] == []
