"""The scenario JSON Schema: shipped, current, printed by `eosim schema`, and in agreement with
the loader on every shipped scenario and on a few bad ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from test_cli import run_cli

from eosim import api
from eosim.schema import SCHEMA_PATH, schema_text
from eosim.simulation import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_the_generated_one():
    """Regenerate with `eosim schema --out eosim/scenario.schema.json` after a model change."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_shipped_scenario_validates(validator, path):
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8")))
    ]
    assert errors == []


def test_there_are_scenarios_to_validate():
    assert len(SCENARIOS) >= 20


BASE = ROOT / "scenarios" / "idempotent.yaml"


@pytest.mark.parametrize(
    "change",
    [
        {"duration": "2 weeks"},
        {"producers": [{"config": {"enable.idempotance": True}}]},
        {"kafka": {"rules": {"truncation": "sometimes"}}},
        {"kafka": {"rules": {"no_such_rule": 1}}},
        {"cluster": {"config": {"min.insync.replica": 2}}},
        {"cluster": {"topics": [{"config": {"replica.lag.time.max.ms": 1}}]}},  # a broker key
        {"expect": {"duplicates": 0}},
        {"expect": {"duplicate": "more than 0"}},
        {"expect": {"duplicate": "<1%/runs"}},  # a share of runs: only in expect_sweep
        {"expect": {"duplicate": "<1e-4"}},  # per what?
        {"expect": {"acked": "<0.5/record"}},  # a rate is for an anomaly
        {"expect_sweep": {"acked": 0}},  # a sweep judges anomalies only
        {"expect_sweep": {"duplicate": "==1e-4/record"}},
        {"network": {"request_loss": 1.5}},
        {"bogus": 1},
    ],
)
def test_what_the_loader_refuses_the_schema_refuses(validator, tmp_path, change):
    raw = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    bad = merge(copy.deepcopy(raw), change)
    assert list(validator.iter_errors(raw)) == []
    assert list(validator.iter_errors(bad)) != []
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ScenarioError):
        api.load(path)


def test_durations_take_text_in_schema_and_loader(validator, tmp_path):
    raw = yaml.safe_load(BASE.read_text(encoding="utf-8")) | {"duration": "90s", "settle": 250}
    assert list(validator.iter_errors(raw)) == []
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert api.load(path).duration == 90_000.0


def test_rates_and_shares_pass_schema_and_loader(validator, tmp_path):
    raw = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    raw["expect"] |= {"duplicate": "<1e-4/record", "lost_write": "<= 0.01 % / record"}
    raw["expect_sweep"] = {"duplicate": "<1%/runs", "lost_write": "<100ppm", "unseen": 0}
    assert list(validator.iter_errors(raw)) == []
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    scenario = api.load(path)
    assert scenario.expect_sweep == {"duplicate": "<1%/runs", "lost_write": "<100ppm", "unseen": 0}


def merge(into: dict, change: dict) -> dict:
    """``change`` laid over ``into``; a list in ``change`` updates the items at its indices."""
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            for i, item in enumerate(value):
                merge(into[key][i], item)
        else:
            into[key] = value
    return into


def test_eosim_schema_prints_the_shipped_file(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0 and out == SCHEMA_PATH.read_text(encoding="utf-8")
    target = tmp_path / "s.json"
    code, out, _ = run_cli(capsys, "schema", "--out", str(target))
    assert code == 0 and out == f"schema     {target}\n"
    assert target.read_text(encoding="utf-8") == SCHEMA_PATH.read_text(encoding="utf-8")
    code, _, err = run_cli(capsys, "schema", "--out", str(tmp_path / "no" / "s.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write" in err


def test_the_readme_shows_the_editor_line():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "# yaml-language-server: $schema=" in readme
