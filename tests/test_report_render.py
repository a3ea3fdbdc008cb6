"""The report's verdicts on synthetic sweep tables (no Spark): the one-sentence banner, anomalies
the scenario expects shown as expected, and a verdict table that fits a 1280 px page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.report.render import Content, banner, expectations, render_html, render_markdown
from test_report_plots import GRID, table

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


def wide_sweep():
    """Sixteen variants over two parameters with long values, every guarantee shown and
    broken somewhere, every variant failing its expectations."""
    grid = [
        {
            "producers.0.config.max.in.flight.requests.per.connection": i % 4 + 1,
            "network.response_loss": round(0.0125 * (i // 4), 4),
        }
        for i in range(16)
    ]
    data = table(list(grid[0]), grid, ALL_ANOMALIES, txns=3, found=ALL_ANOMALIES)
    data.manifest["scenario_yaml"] = EXPECT_YAML
    for i in range(1, 16):
        data.table.loc[i, "expect_met"] = False
        data.table.loc[i, "expect_failures"] = "lost_write 0: broken in 3 of 10 runs"
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
    top, height = browser.execute_script(
        "const b = document.getElementById('verdict');"
        "return [b.getBoundingClientRect().top, window.innerHeight];"
    )
    assert 0 <= top < height
    width = browser.execute_script("return document.documentElement.clientWidth;")
    assert browser.execute_script("return document.documentElement.scrollWidth;") <= width
    overflowing = browser.execute_script(
        "return Array.from(document.querySelectorAll('table')).filter(t => "
        "t.scrollWidth > t.parentElement.clientWidth"
        " || t.getBoundingClientRect().right > document.documentElement.clientWidth)"
        ".map(t => t.rows[0].textContent.slice(0, 60));"
    )
    assert overflowing == []


def test_verdict_table_fits_1280px_in_a_real_browser(tmp_path):
    page = tmp_path / "wide.html"
    page.write_text(render_html(Content(wide_sweep())), encoding="utf-8")
    with open_report(page, tmp_path) as browser:
        page_fits(browser)
