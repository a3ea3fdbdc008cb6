"""Exactly-once per partition (``transactional_id_per: partition``, Kafka Streams' EOS v1):
task producers named after the group and the partition, offsets committed without a
generation, and zombies fenced by the next owner's initTransactions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
STORMS = ["group-eos-v1-rebalance-storm.yaml", "kip848-eos-v1-rebalance-storm.yaml"]


def _anomalies(name: str, seed: int, *overrides: str) -> dict[str, int]:
    run = run_scenario(load_scenario(SCENARIOS / name, list(overrides)), seed)
    verdict = check_history(history_from_records(list(run.history.records())))
    return {n: a.count for n, a in verdict.anomalies.items() if a.count}


@pytest.mark.parametrize("name", STORMS)
@pytest.mark.parametrize("seed", [1, 2])
def test_the_eos_v1_storm_processes_nothing_twice(name, seed):
    assert _anomalies(name, seed) == {}


def test_each_partition_has_its_own_transactional_id_shared_by_every_member():
    run = run_scenario(load_scenario(SCENARIOS / STORMS[0], []), 1)
    lines = [json.loads(line) for line in run.history.lines()]
    ids: dict[int, set[str]] = {}
    members: dict[int, set[str]] = {}
    for line in lines:
        if line["kind"] == "op" and line["f"] == "process" and line["type"] == "invoke":
            partition = line["value"]["input"]["partition"]
            ids.setdefault(partition, set()).add(line["value"]["transactional_id"])
            members.setdefault(partition, set()).add(line["process"].split("/")[0])
    assert ids == {p: {f"app-in-{p}"} for p in range(6)}
    assert any(len(m) > 1 for m in members.values())  # partitions did change hands


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["kafka.version=4.0"], "needs a 3.x preset"),
        (["processors.0.transactional=false"], "needs transactional: true"),
    ],
)
def test_scenario_checks(overrides, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(SCENARIOS / STORMS[0], overrides)
