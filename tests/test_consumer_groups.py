"""Subscribed processors in a classic consumer group, end to end: the group's story in the
history (assignments by generation, revocations, commit outcomes), slow processing beyond
max.poll.interval.ms, and the scenario checks of the group keys."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _group_lines(name: str, seed: int, *overrides: str) -> list[dict]:
    run = run_scenario(load_scenario(SCENARIOS / name, list(overrides)), seed)
    lines = [json.loads(line) for line in run.history.lines()]
    return [line for line in lines if line["kind"] == "group"]


def _partitions(line: dict) -> list[int]:
    return [p["partition"] for p in line["partitions"]]


def test_members_share_the_input_one_partition_each_per_generation():
    lines = _group_lines("group-within-poll-interval.yaml", 1)
    assigned: dict[int, dict[str, list[int]]] = defaultdict(dict)
    for line in lines:
        if line["event"] == "assigned":
            assigned[line["generation"]][line["process"]] = _partitions(line)
    first = assigned[min(assigned)]
    assert sorted(first) == ["app-a/0", "app-b/0"]
    owned = sorted(p for parts in first.values() for p in parts)
    assert owned == [0, 1, 2, 3]  # disjoint, and the whole input
    commits = [line for line in lines if line["event"] == "commit"]
    assert commits and not any("error" in line for line in commits)
    # Both members leave at the end, revoking what they own.
    assert {line["process"] for line in lines if line["event"] == "revoked"} == {
        "app-a/0",
        "app-b/0",
    }


def test_a_member_slower_than_max_poll_interval_is_thrown_out_and_its_commit_fails():
    lines = _group_lines("group-slow-processing.yaml", 1)
    failed = [line for line in lines if line["event"] == "commit" and "error" in line]
    assert failed and all(f["error"].startswith("CommitFailedException") for f in failed)
    # It left the group (a reset generation): its partitions were lost, not revoked, when
    # it rejoined; the generation moved on meanwhile.
    lost = [line for line in lines if line["event"] == "lost"]
    assert lost
    generations = [line["generation"] for line in lines if line["event"] == "assigned"]
    assert max(generations) > 2


def test_within_the_limit_the_member_is_never_thrown_out():
    lines = _group_lines(
        "group-slow-processing.yaml",
        1,
        "processors.0.processing.max=2s",
        "processors.1.processing.max=2s",
    )
    assert not [line for line in lines if line["event"] == "lost"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["processors.0.input.heartbeat.interval.ms=10s"],
            "heartbeat.interval.ms must be below session.timeout.ms",
        ),
        (
            ["processors.0.input.partition.assignment.strategy=[sticky]"],
            "'sticky' is not modelled",
        ),
        (["processors.1.input={topic: in, group: app}"], "must subscribe, or none"),
        (
            ["processors.0.input.max.poll.interval.ms=0"],
            "max.poll.interval.ms",
        ),
    ],
)
def test_group_settings_a_run_cannot_use_are_refused(overrides: list[str], message: str):
    with pytest.raises(ScenarioError, match=message):
        scenario = load_scenario(SCENARIOS / "group-slow-processing.yaml", overrides)
        scenario.clients  # noqa: B018 - resolving the clients checks them


def _failed_polls(lines: list[dict]) -> list[dict]:
    return [op for op in lines if op["kind"] == "op" and op["f"] == "poll" and op["type"] == "fail"]


def _run_lines(name: str, seed: int, *overrides: str) -> list[dict]:
    run = run_scenario(load_scenario(SCENARIOS / name, list(overrides)), seed)
    return [json.loads(line) for line in run.history.lines()]


def test_auto_commit_of_a_member_thrown_out_fails_locally_and_the_member_rejoins():
    # onJoinPrepare's auto-commit of a member whose generation was reset fails with
    # CommitFailedException (not retriable): the member revokes (lost) and rejoins.
    lines = _run_lines(
        "group-slow-processing.yaml",
        1,
        "processors.0.commit=auto",
        "processors.1.commit=auto",
    )
    groups = [line for line in lines if line["kind"] == "group"]
    assert [line for line in groups if line["event"] == "lost"]
    assert {line["process"] for line in groups if line["event"] == "revoked"} == {
        "app-a/0",
        "app-b/0",
    }  # both worked to the end and left


def test_a_fenced_static_member_fails_its_poll_and_the_other_processes_everything():
    # The anchored input gives both members the same group.instance.id: the second to join
    # replaces the first, whose next request is answered FENCED_INSTANCE_ID (fatal).
    lines = _run_lines("group-slow-processing.yaml", 1, "processors.0.input.group.instance.id=x")
    failed = _failed_polls(lines)
    assert len(failed) == 1 and failed[0]["error"].startswith("FencedInstanceIdException")
    inputs = {
        (op["value"]["input"]["partition"], op["value"]["input"]["offset"])
        for op in lines
        if op["kind"] == "op" and op["f"] == "process" and op["type"] == "invoke"
    }
    assert len(inputs) == 100  # every input was processed, by the member left


def test_a_join_refused_for_good_is_raised_to_the_application():
    # Below group.min.session.timeout.ms (6 s) the coordinator answers INVALID_SESSION_TIMEOUT,
    # which joinGroupIfNeeded throws; the application's poll loop ends.
    lines = _run_lines(
        "group-slow-processing.yaml",
        1,
        "processors.0.input.session.timeout.ms=1s",
        "processors.0.input.heartbeat.interval.ms=100ms",
    )
    failed = _failed_polls(lines)
    assert [op["error"].split(":")[0] for op in failed] == ["InvalidSessionTimeoutException"] * 2


@pytest.mark.parametrize("seed", [1, 2])
def test_a_zombie_members_commit_is_refused_with_the_generation_check(seed: int):
    """app-a, paused past its session, resumes and commits with its old generation: the
    coordinator has removed it (UNKNOWN_MEMBER_ID), so the commit fails with
    CommitFailedException; switched off (the what-if rule), it is written and the group's
    offset goes back."""
    pause_end = None
    for line in _group_lines("group-zombie-commit.yaml", seed):
        if line["process"] == "app-a/0" and line["event"] == "commit" and "error" in line:
            pause_end = line["invoked"]
            assert line["error"].startswith("CommitFailedException"), line
            break
    assert pause_end is not None
    run = run_scenario(load_scenario(SCENARIOS / "group-zombie-commit-unfenced.yaml", []), seed)
    found = check_history(history_from_records(run.history.records())).anomalies
    example = found["offset_rewind"].examples[0]
    assert example["process"] == "app-a/0"
    assert "stale_generation" in example["reasons"]
    assert example["newer"]["generation"] > example["generation"]


def test_a_member_that_starts_late_joins_a_running_group():
    """`start` (scaling out): app-c's first instance starts 10 s in and joins the group in a
    later generation; the group's work is not over before it has joined."""
    lines = _group_lines("kafka-14196.yaml", 1, "kafka.rules.consumer_pending_revocation=true")
    assigned = [line for line in lines if line["event"] == "assigned"]
    first = {}
    for line in assigned:
        first.setdefault(line["process"], line)
    assert sorted(first) == ["app-a/0", "app-b/0", "app-c/0"]
    late = first["app-c/0"]
    assert late["time"] >= 10_000.0
    assert late["generation"] > first["app-a/0"]["generation"]
    # Everyone was revoked for the eager rebalance the newcomer caused.
    revoked = {line["process"] for line in lines if line["event"] == "revoked"}
    assert {"app-a/0", "app-b/0"} <= revoked


def test_a_late_start_must_not_be_negative():
    with pytest.raises(ScenarioError, match="start"):
        load_scenario(SCENARIOS / "kafka-14196.yaml", ["processors.2.start=-1s"])


@pytest.mark.parametrize(("delay", "low", "high"), [(None, 3_000, 3_100), (0, 0, 100)])
def test_an_empty_groups_first_rebalance_waits_the_initial_delay(delay, low, high):
    """group.initial.rebalance.delay.ms (a cluster.config key, Kafka's 3 s by default)."""
    overrides = (
        [] if delay is None else [f"cluster.config={{group.initial.rebalance.delay.ms: {delay}}}"]
    )
    lines = _group_lines("group-within-poll-interval.yaml", 1, *overrides)
    first = min(line["time"] for line in lines if line["event"] == "assigned")
    assert low <= first <= high


@pytest.mark.parametrize(
    ("name", "seeds"),
    [("group-eos-rebalance-storm", (6, 7)), ("group-eos-cooperative-rebalance-storm", (1, 2))],
)
def test_the_rebalance_storm_needs_the_generation_fencing(name, seeds):
    """The EOS rebalance storms (EAGER and COOPERATIVE) hold for every seed
    (tests/test_scenarios.py) because the group coordinator fences zombies' offsets: with that
    check off, their zombies' transactions commit and inputs are processed twice."""
    off = "kafka.rules.offset_commit_checks_generation=false"
    found = []
    for seed in seeds:
        run = run_scenario(load_scenario(SCENARIOS / f"{name}.yaml", [off]), seed)
        result = check_history(history_from_records(run.history.records()))
        found.append(result.anomalies["duplicate_processing"].count)
    assert all(n > 0 for n in found), found


MIXED_TOPICS = """\
name: mixed
cluster:
  brokers: 1
  topics: [{name: a, partitions: 2}, {name: b, partitions: 2}, {name: out, partitions: 1}]
processors:
  - name: p
    input: {topic: a, group: g, subscribe: true, partition.assignment.strategy: [%s]}
    output: {topic: out}
  - name: q
    input: {topic: b, group: g, subscribe: true, partition.assignment.strategy: [%s]}
    output: {topic: out}
"""


@pytest.mark.parametrize(
    ("first", "second", "refused"),
    [
        ("cooperative-sticky", "cooperative-sticky", True),
        ("roundrobin, cooperative-sticky", "cooperative-sticky", True),  # the only common one
        ("range, cooperative-sticky", "cooperative-sticky, range", True),  # one vote for it
        ("range, cooperative-sticky", "range, cooperative-sticky", False),  # range chosen
        ("range", "cooperative-sticky, range", False),
    ],
)
def test_cooperative_sticky_over_different_topics_is_refused_up_front(first, second, refused):
    """The sticky assignor's general builder (members subscribed to different topics) is not
    modelled: a group that could choose cooperative-sticky then is refused when validated, in
    one line, instead of failing in the run."""
    text = MIXED_TOPICS % (first, second)
    if refused:
        with pytest.raises(ScenarioError, match="general builder is not modelled"):
            parse_scenario(text, "s.yaml")
    else:
        parse_scenario(text, "s.yaml")
