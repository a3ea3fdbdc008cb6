"""Subscribed processors in a KIP-848 consumer group (``group.protocol: consumer``), end to
end: each member's epoch in the history, revocation before reassignment, the poll timer's
leave, the owned partitions a heartbeat carries, the scenario checks of the protocol's keys,
and two fixes that each made the exactly-once storm process inputs twice before them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeats
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _run(name: str, seed: int, *overrides: str):  # type: ignore[no-untyped-def]
    return run_scenario(load_scenario(SCENARIOS / name, list(overrides)), seed)


def _group_lines(name: str, seed: int, *overrides: str) -> list[dict]:
    lines = [json.loads(line) for line in _run(name, seed, *overrides).history.lines()]
    return [line for line in lines if line["kind"] == "group"]


def _partitions(line: dict) -> set[int]:
    return {p["partition"] for p in line["partitions"]}


def _anomalies(name: str, seed: int, *overrides: str) -> dict[str, int]:
    records = list(_run(name, seed, *overrides).history.records())
    verdict = check_history(history_from_records(records))
    return {n: a.count for n, a in verdict.anomalies.items() if a.count}


@pytest.mark.parametrize("seed", [1, 2])
def test_no_partition_is_owned_by_two_members_and_lines_carry_member_epochs(seed):
    """Without faults, a partition changes hands only after its owner revoked it: at no time
    do two members' applied assignments overlap (KIP-848's revocation before reassignment)."""
    lines = _group_lines("kip848-within-poll-interval.yaml", seed)
    owned: dict[str, set[int]] = {}
    for line in lines:
        if line["event"] == "assigned":
            assert "epoch" in line and "generation" not in line
            owned[line["process"]] = _partitions(line)
        elif line["event"] in ("revoked", "lost"):
            owned[line["process"]] = owned.get(line["process"], set()) - _partitions(line)
        held = [p for parts in owned.values() for p in parts]
        assert len(held) == len(set(held)), line
    assigned = [line for line in lines if line["event"] == "assigned"]
    assert {line["process"] for line in assigned} == {"app-a/0", "app-b/0"}
    commits = [line for line in lines if line["event"] == "commit"]
    assert commits and all("epoch" in c and "error" not in c for c in commits)


def test_a_member_past_its_poll_timeout_leaves_and_its_commit_fails():
    lines = _group_lines("kip848-slow-processing.yaml", 1)
    failed = [line for line in lines if line["event"] == "commit" and "error" in line]
    assert failed and all(f["error"].startswith("CommitFailedException") for f in failed)
    # It sent a leave heartbeat (epoch -1): its commit named epoch -1, and its partitions
    # were lost before it rejoined with a higher epoch.
    assert any(f["epoch"] == -1 for f in failed)
    lost = [line for line in lines if line["event"] == "lost"]
    assert lost
    epochs = [line["epoch"] for line in lines if line["event"] == "assigned"]
    assert max(epochs) > 2
    # Rejoining with nothing to take yet still calls onPartitionsAssigned (with no partitions),
    # as Kafka 4.1.1 does (LocalAssignment.NONE is not an empty assignment); Kafka's
    # histories of this scenario show the same lines.
    assert any(not line["partitions"] for line in lines if line["event"] == "assigned")


def test_a_heartbeat_carries_the_owned_partitions_only_when_they_changed(monkeypatch):
    """Kafka's SentFields: a heartbeat without owned partitions tells the coordinator nothing
    new, and the coordinator keeps a revoking member revoking until one says it dropped them.
    (Sending them on every heartbeat let the coordinator free a partition the member was
    still taking back; kip848-eos-rebalance-storm processed inputs twice at seed 1.)"""
    sent: list[tuple[str, int, object]] = []
    original = ConsumerGroupHeartbeats.consumer_group_heartbeat

    def spy(self, request):  # type: ignore[no-untyped-def]
        sent.append((request.member_id, request.member_epoch, request.owned))
        return original(self, request)

    monkeypatch.setattr(ConsumerGroupHeartbeats, "consumer_group_heartbeat", spy)
    _run("kip848-within-poll-interval.yaml", 1)
    by_member: dict[str, list[tuple[int, object]]] = {}
    for member, epoch, owned in sent:
        by_member.setdefault(member, []).append((epoch, owned))
    assert len(by_member) == 2
    for beats in by_member.values():
        assert beats[0] == (0, ())  # the join is a full heartbeat
        regular = [owned for epoch, owned in beats[1:] if epoch > 0]
        assert None in regular  # most heartbeats say nothing about ownership
        told = [owned for owned in regular if owned is not None]
        assert told and len(told) < len(regular)


@pytest.mark.parametrize("seed", [1, 12])
def test_the_exactly_once_storm_processes_nothing_twice(seed):
    """Seed 1 failed while every heartbeat carried the owned partitions; seed 12 while a
    committed-offsets fetch asked under an earlier assignment was used for a later one."""
    assert _anomalies("kip848-eos-rebalance-storm.yaml", seed) == {}


@pytest.mark.parametrize("seed", [5, 6])
def test_the_exactly_once_storm_without_member_epoch_checks_processes_twice(seed):
    """The storm does exercise the coordinator's member-epoch check at TxnOffsetCommit (7 of
    seeds 1-20 process inputs twice with it off: 5, 6, 8, 10, 16, 17, 20)."""
    found = _anomalies(
        "kip848-eos-rebalance-storm.yaml", seed, "kafka.rules.offset_commit_checks_generation=false"
    )
    assert found.get("duplicate_processing", 0) > 0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("processors.0.input.session.timeout.ms=10s", "session.timeout.ms is not supported"),
        ("processors.0.input.heartbeat.interval.ms=1s", "heartbeat.interval.ms is not supported"),
        (
            "processors.0.input.partition.assignment.strategy=[range]",
            "partition.assignment.strategy is not supported",
        ),
        ("processors.0.input.group.instance.id=a", "group.instance.id with group.protocol"),
        ("cluster.config.group.consumer.heartbeat.interval.ms=7000", "must be below"),
    ],
)
def test_scenario_checks_of_the_consumer_protocol(override, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(SCENARIOS / "kip848-within-poll-interval.yaml", [override])


def test_a_group_of_members_with_both_protocols_is_refused(tmp_path):
    import yaml

    data = yaml.safe_load((SCENARIOS / "kip848-within-poll-interval.yaml").read_text())
    data["processors"][1]["input"] = {**data["processors"][1]["input"]}
    data["processors"][1]["input"]["group.protocol"] = "classic"
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=r"must use one group\.protocol"):
        load_scenario(path, [])
