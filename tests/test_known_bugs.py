"""Known Kafka bugs, each a switch on one rule (eosim.simulation.rules.KNOWN_BUGS).

Every bug has a shipped scenario that shows it with the rule at Kafka's value and shows
nothing with the fix, over several seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.rules import FIXED_IN, KNOWN_BUGS, VERSIONS, has_fix
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def anomalies(name: str, seed: int, *overrides: str) -> dict[str, int]:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml", overrides)
    records = list(run_scenario(scenario, seed).history.records())
    verdict = check_history(history_from_records(records))
    return {n: a.count for n, a in verdict.anomalies.items() if a.count}


def test_every_preset_has_every_known_bug_as_kafka_does():
    """A preset has a bug unless a release of its line, or of an earlier line, fixed it."""
    for bug, (rule, buggy, fixed) in KNOWN_BUGS.items():
        for version, rules in VERSIONS.items():
            expected = fixed if has_fix(bug, version) else buggy
            assert getattr(rules, rule) == expected, (bug, version)


def test_fixed_versions():
    """KAFKA-9144's fix is in 2.4.1 and 2.5.0 (git tags of commits b13a7ff and dbc9cd6) and
    backported to 2.2.3 and 2.3.2; KAFKA-14034 is open."""
    assert FIXED_IN["KAFKA-9144"] == ("2.2.3", "2.3.2", "2.4.1", "2.5.0")
    assert [has_fix("KAFKA-9144", v) for v in ("2.1", "2.2", "2.4", "3.9", "4.0")] == [
        False,
        True,
        True,
        True,
        True,
    ]
    assert not any(has_fix("KAFKA-14034", v) for v in VERSIONS)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_kafka_14034_duplicates_and_its_fix(seed, version):
    rule, _buggy, fixed = KNOWN_BUGS["KAFKA-14034"]
    found = anomalies("kafka-14034", seed, f"kafka.version={version}")
    assert found.get("duplicate", 0) > 0 and "lost_write" not in found
    fix = f"kafka.rules.{rule}={fixed}"
    assert anomalies("kafka-14034", seed, f"kafka.version={version}", fix) == {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kafka_9144_hanging_transaction_and_its_fix(seed):
    """The fenced producer's late write is accepted after its entry expired early, and the
    transaction it opens hangs; with the fix (both presets) the write is refused."""
    rule, _buggy, fixed = KNOWN_BUGS["KAFKA-9144"]
    found = anomalies("kafka-9144", seed)
    assert found.get("hanging_transaction", 0) > 0 and found.get("zombie_write", 0) > 0
    assert anomalies("kafka-9144", seed, f"kafka.rules.{rule}={fixed}") == {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kafka_14196_duplicate_consumption_and_its_fix(seed):
    """Records of partitions about to be revoked, returned while onJoinPrepare's auto-commit
    is in flight, are processed again by their next owner; marking them pending revocation
    first (3.2.3+, every preset) leaves nothing processed twice."""
    rule, buggy, fixed = KNOWN_BUGS["KAFKA-14196"]
    assert (rule, buggy, fixed) == ("consumer_pending_revocation", False, True)
    found = anomalies("kafka-14196", seed)
    assert found.get("duplicate_processing", 0) > 0 and "lost_processing" not in found
    assert anomalies("kafka-14196", seed, f"kafka.rules.{rule}={fixed}") == {}
    assert [has_fix("KAFKA-14196", v) for v in ("3.1", "3.2", "3.3", "4.0")] == [
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kafka_18641_background_auto_commit_loses_records_and_its_fix(seed):
    """The consumer protocol's network thread auto-committing positions the application is
    still processing (3.7-3.9) loses the records a crash interrupts; auto-commit on the
    application's poll (4.0.0+) loses nothing."""
    rule, buggy, fixed = KNOWN_BUGS["KAFKA-18641"]
    assert (rule, buggy, fixed) == ("consumer_auto_commit_app_thread", False, True)
    found = anomalies("kafka-18641", seed)
    assert found.get("lost_processing", 0) > 0
    assert "lost_processing" not in anomalies("kafka-18641", seed, f"kafka.rules.{rule}={fixed}")
    assert [has_fix("KAFKA-18641", v) for v in ("3.9", "4.0", "4.1")] == [False, True, True]


def test_kafka_16147_is_fixed_in_3_8():
    """The partition-epoch bookkeeping fix (apache/kafka cf90382fb92, January 2024) shipped in
    3.8.0; the coordinator-level cases are in test_consumer_group.py."""
    assert KNOWN_BUGS["KAFKA-16147"] == ("consumer_partition_epochs", False, True)
    assert [has_fix("KAFKA-16147", v) for v in ("3.7", "3.8", "3.9", "4.0")] == [
        False,
        True,
        True,
        True,
    ]


def _dropped_members(name: str, seed: int, *overrides: str) -> list[str]:
    """Members the group dropped without a crash or a pause: their partitions were lost."""
    run = run_scenario(load_scenario(SCENARIOS / f"{name}.yaml", list(overrides)), seed)
    lines = [json.loads(line) for line in run.history.lines()]
    return sorted({g["process"] for g in lines if g["kind"] == "group" and g["event"] == "lost"})


@pytest.mark.parametrize("seed", [1, 2])
def test_kafka_14024_members_never_rejoin_and_its_fix(seed):
    """3.2.0's onJoinPrepare under COOPERATIVE: the two first members never send their
    JoinGroup, the coordinator drops them after the rebalance timeout while they go on
    processing (duplicate_processing), and the group never settles. With the fix every member
    rejoins: nobody is dropped. (Both sides process some inputs twice: the cooperative
    revocation does not commit the progress made since onJoinPrepare's commit, as in Kafka
    and on the real cluster; docs/calibration.md.)"""
    rule, buggy, fixed = KNOWN_BUGS["KAFKA-14024"]
    assert (rule, buggy, fixed) == ("consumer_join_prepare_waits_for_commit", False, True)
    assert anomalies("kafka-14024", seed)["duplicate_processing"] > 0
    assert _dropped_members("kafka-14024", seed) == ["app-a/0", "app-b/0", "app-c/0"]
    assert _dropped_members("kafka-14024", seed, f"kafka.rules.{rule}={fixed}") == []
    assert [has_fix("KAFKA-14024", v) for v in ("3.1", "3.2", "3.3", "4.0")] == [
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_kafka_16147_two_owners_and_its_fix(seed):
    """3.7's coordinator loses the epochs of partitions given back to a member still revoking
    them, then gives them to the next member at once: both process them. With the fix the
    next member waits for the release: nothing is processed twice."""
    rule, buggy, fixed = KNOWN_BUGS["KAFKA-16147"]
    assert (rule, buggy, fixed) == ("consumer_partition_epochs", False, True)
    assert anomalies("kafka-16147", seed)["duplicate_processing"] > 0
    assert anomalies("kafka-16147", seed, f"kafka.rules.{rule}={fixed}") == {}
