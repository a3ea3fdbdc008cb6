"""Expectations that can never fail: `eosim validate` and `eosim run` warn about them, and no
shipped scenario has one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import run_cli, scenario

from eosim import api
from eosim.simulation.conditions import Condition

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.yaml"))
SMALL = ["--set", "producers.0.workload.records=50"]


@pytest.mark.parametrize(
    ("value", "always"),
    [
        (">=0", True),
        (" >= 0 ", True),
        (">=0/record", True),
        (">=0ppm", True),
        (">=0%/runs", True),
        ("<=1/runs", True),
        ("<=100%/runs", True),
        (0, False),
        ("0", False),
        (">0", False),
        (">=1", False),
        ("<=1000000000", False),  # a count has no upper bound
        ("!=0", False),
        ("<1/runs", False),
        ("<=99%/runs", False),
        ("<=100%/record", False),  # nor has a rate per record: an anomaly may recur per record
        ("<1e-4/record", False),
    ],
)
def test_which_conditions_always_hold(value, always):
    assert Condition.parse(value).always_holds is always


def test_validate_warns_about_an_expectation_that_always_holds(capsys):
    path = scenario("at-least-once")
    code, out, _ = run_cli(capsys, "validate", path, "--set", "expect.duplicate='>=0'")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{path}: ok")
    assert lines[1:] == [
        "warning    expect.duplicate: '>=0' holds for every possible count or rate, so it can "
        "never fail; expect what the scenario shows, such as 0 or '>0', or remove it"
    ]
    code, out, _ = run_cli(
        capsys, "validate", path, "--set", "expect_sweep={duplicate: <=100%/runs}"
    )
    assert code == 0 and "warning    expect_sweep.duplicate: '<=100%/runs' holds" in out
    code, out, _ = run_cli(capsys, "validate", path, "--set", "expect.duplicate='>0'")
    assert code == 0 and "warning" not in out


def test_run_warns_about_an_expectation_that_always_holds(capsys):
    argv = ["run", scenario("idempotent"), *SMALL, "--set", "expect.duplicate='>=0'"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert "warning    expect.duplicate: '>=0' holds for every possible count" in out
    code, out, _ = run_cli(capsys, *argv, "--json")
    warnings = json.loads(out)["warnings"]
    assert warnings[0].startswith("expect.duplicate: '>=0' holds for every possible count")


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_no_shipped_scenario_expects_what_always_holds(path):
    assert api.expectation_warnings(api.load(path)) == []
