"""The transactional model end to end: coordinator, markers, failover, fencing, processors."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.coordinator.group_coordinator import (
    GroupCoordinator,
    OffsetStore,
    offsets_partition,
)
from eosim.simulation.probe import POINTS
from eosim.simulation.protocol import Errors
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import parse_scenario

PIPELINE = """
name: matrix
seed: 7
cluster:
  brokers: 3
  config: {broker.session.timeout.ms: 1000, broker.heartbeat.interval.ms: 250}
  topics:
    - {name: in, partitions: 3}
    - {name: out, partitions: 3}
producers:
  - name: source
    config: {enable.idempotence: true}
    workload: {topic: in, records: 300, rate: 300}
processors:
  - name: app
    input: {topic: in, group: app, auto.offset.reset: earliest}
    output: {topic: out}
    transactional: true
    config: {request.timeout.ms: 1000, delivery.timeout.ms: 3000, transaction.timeout.ms: 3000,
             max.block.ms: 5000}
consumers:
  - {name: reader, topic: out, auto.offset.reset: earliest}
"""


def run(text: str, *overrides: str, seed: int | None = None):
    scenario = parse_scenario(text, "t.yaml", overrides)
    result = run_scenario(scenario, seed)
    records = list(result.history.records())
    return result, records, check_history(history_from_records(records))


def found(verdict) -> dict[str, int]:
    return {name: a.count for name, a in verdict.anomalies.items() if a.count}


# -- the crash-point matrix ------------------------------------------------------------------
COMMIT_POINTS = [p for p in POINTS if p.split(".")[0] in ("producer", "coordinator", "leader")]


@pytest.mark.parametrize("point", COMMIT_POINTS)
@pytest.mark.parametrize("occurrence", [2, 9])
def test_crash_at_every_commit_step_keeps_exactly_once(point: str, occurrence: int) -> None:
    fault = f"faults=[{{kind: crash_at, point: {point}, occurrence: {occurrence}, duration: 1500}}]"
    _result, records, verdict = run(PIPELINE, fault)
    crashes = [r for r in records if r["kind"] == "fault" and r.get("point") == point]
    assert crashes, f"{point} was never reached"
    component = crashes[0]["targets"][0]
    expected = "app" if point.startswith("producer") else "broker-"
    assert component.startswith(expected)
    assert found(verdict) == {}, (point, found(verdict))
    steps = [r for r in records if r["kind"] == "op" and r["f"] == "process"]
    inputs = {json.dumps(r["value"]["input"]) for r in steps if r["type"] == "invoke"}
    assert len(inputs) == 300  # every input was processed (at least attempted)


def test_crash_points_cover_every_component() -> None:
    kinds = {p.split(".")[0] for p in COMMIT_POINTS}
    assert kinds == {"producer", "coordinator", "leader"}


# -- weaker set-ups fail under the same faults -------------------------------------------------
def test_without_transactions_a_crash_after_output_duplicates_processing() -> None:
    fault = "faults=[{kind: crash_at, point: processor.after_send, occurrence: 5, duration: 200}]"
    _r, _records, verdict = run(PIPELINE, "processors.0.transactional=false", fault)
    assert found(verdict).get("duplicate_processing", 0) > 0
    _r, _records, verdict = run(PIPELINE, fault)  # the transactional pipeline: clean
    assert found(verdict) == {}


def test_offsets_before_output_lose_processing() -> None:
    point = "processor.after_send_offsets"
    fault = f"faults=[{{kind: crash_at, point: {point}, occurrence: 5, duration: 200}}]"
    _r, _records, verdict = run(
        PIPELINE, "processors.0.transactional=false", "processors.0.commit=before_output", fault
    )
    assert found(verdict).get("lost_processing", 0) > 0


@pytest.mark.parametrize(
    ("store", "duplicates"), [("append", True), ("dedup", False), ("version", False)]
)
def test_sink_modes(store: str, duplicates: bool) -> None:
    fault = "faults=[{kind: crash_at, point: processor.after_send, occurrence: 5, duration: 200}]"
    _r, records, verdict = run(
        PIPELINE,
        "processors.0.transactional=false",
        "processors.0.output={store: " + store + "}",
        fault,
    )
    assert (found(verdict).get("duplicate_processing", 0) > 0) is duplicates
    assert found(verdict).get("lost_processing", 0) == 0
    assert any(r["kind"] == "log" and r["topic"] == "store.app" for r in records)


@pytest.mark.parametrize(
    ("output", "topic"), [("{topic: out}", "out"), ("{store: append}", "store.app")]
)
def test_process_ops_name_the_topic_their_outputs_go_to(output: str, topic: str) -> None:
    """A record is identified by its topic and value (docs/history-format.md), so a `process`
    op says where its outputs go: the output topic, or the sink's store changelog."""
    _r, records, _verdict = run(
        PIPELINE,
        "producers.0.workload.records=20",
        f"processors.0.output={output}",
        f"processors.0.transactional={'false' if 'store' in output else 'true'}",
    )
    steps = [r for r in records if r["kind"] == "op" and r["f"] == "process" and r["value"]]
    assert steps and {r["value"]["output_topic"] for r in steps} == {topic}
    history = history_from_records(records)
    assert {step.output_topic for step in history.steps} == {topic}


# -- zombies and timeouts ---------------------------------------------------------------------
GROUP_PIPELINE = PIPELINE.replace(
    "broker.heartbeat.interval.ms: 250}",
    "broker.heartbeat.interval.ms: 250,\n           group.min.session.timeout.ms: 1000}",
).replace(
    """processors:
  - name: app
    input: {topic: in, group: app, auto.offset.reset: earliest}
    output: {topic: out}
    transactional: true
""",
    """processors:
  - name: app-2
    input: {topic: in, group: app, auto.offset.reset: earliest, subscribe: true,
            session.timeout.ms: 1s, heartbeat.interval.ms: 250ms}
    output: {topic: out}
    transactional: true
    config: {request.timeout.ms: 1000, delivery.timeout.ms: 3000, transaction.timeout.ms: 3000,
             max.block.ms: 5000}
  - name: app
    input: {topic: in, group: app, auto.offset.reset: earliest, subscribe: true,
            session.timeout.ms: 1s, heartbeat.interval.ms: 250ms}
    output: {topic: out}
    transactional: true
""",
)


def test_a_paused_member_is_fenced_when_the_group_hands_its_partitions_over() -> None:
    """``app`` freezes inside a transaction, past its session; the group gives its
    partitions to ``app-2``. When it thaws, the zombie's transaction cannot commit: its
    offsets name a generation the group no longer has (KIP-447), or the coordinator has
    already aborted it on timeout."""
    assert GROUP_PIPELINE != PIPELINE
    _r, records, verdict = run(
        GROUP_PIPELINE,
        "faults=[{kind: pause_at, point: processor.after_send, nodes: [app], occurrence: 5,"
        " duration: 5000}]",
    )
    paused = next(r for r in records if r["kind"] == "fault" and r["phase"] == "start")["time"]
    assert found(verdict) == {}
    invoked = {r["id"]: r["time"] for r in records if r["kind"] == "op" and r["type"] == "invoke"}
    # The zombie's transaction, open when it froze, never commits (what it does after it
    # rejoined the group is a new member's work).
    zombie = [
        r
        for r in records
        if r["kind"] == "op"
        and r["process"] == "app/0"
        and r["type"] != "invoke"
        and invoked[r["id"]] < paused + 5000 < r["time"]
    ]
    assert zombie and all(r["type"] != "ok" for r in zombie), "the zombie committed"
    taken = [r for r in records if r["kind"] == "group" and r["process"] == "app-2/0"]
    assert any(r["event"] == "assigned" and len(r["partitions"]) == 3 for r in taken)


def test_a_zombie_member_without_transactions_duplicates() -> None:
    _r, _records, verdict = run(
        GROUP_PIPELINE,
        "processors.0.transactional=false",
        "processors.1.transactional=false",
        "faults=[{kind: pause_at, point: processor.after_send, nodes: [app], occurrence: 5,"
        " duration: 5000}]",
    )
    assert found(verdict).get("duplicate_processing", 0) > 0


def test_coordinator_failover_moves_with_the_transaction_log_leader() -> None:
    _result, records, verdict = run(
        PIPELINE,
        "faults=[{kind: crash_at, point: coordinator.prepare_persisted, occurrence: 3,"
        " duration: 20000}]",
        # Replicated data topics, so that the crashed coordinator's broker does not also take
        # the only copy of an input partition with it.
        "cluster.topics.0.replication_factor=3",
        "cluster.topics.1.replication_factor=3",
    )
    assert found(verdict) == {}
    crash = next(r for r in records if r["kind"] == "fault" and r.get("point"))
    steps = [r for r in records if r["kind"] == "op" and r["f"] == "process" and r["type"] == "ok"]
    # Work went on while the old coordinator was still down (after the 1 s failover).
    assert any(crash["time"] + 1000 < r["time"] < crash["time"] + 20000 for r in steps)


# -- pieces ------------------------------------------------------------------------------------
def test_transactional_offsets_materialise_only_on_commit() -> None:
    g = GroupCoordinator(OffsetStore())
    tp = ("in", 0)
    assert g.txn_commit("grp", 1, 0, ((tp, 5),)) is Errors.NONE
    assert g.fetch("grp", (tp,))[0] is Errors.UNSTABLE_OFFSET_COMMIT
    assert g.fetch("grp", (tp,), require_stable=False) == (Errors.NONE, {})
    part = offsets_partition("grp")[1]
    g.complete_txn(part, 1, 0, commit=False)
    assert g.fetch("grp", (tp,)) == (Errors.NONE, {})
    g.txn_commit("grp", 1, 1, ((tp, 7),))
    assert g.txn_commit("grp", 1, 0, ((tp, 9),)) is Errors.PRODUCER_FENCED
    g.complete_txn(part, 1, 1, commit=True)
    assert g.fetch("grp", (tp,)) == (Errors.NONE, {tp: 7})


def test_transactional_runs_are_deterministic() -> None:
    fault = "faults=[{kind: crash, nodes: [app, broker-0], rate: 2, duration: 300}]"
    a = run_scenario(parse_scenario(PIPELINE, "t.yaml", [fault]))
    b = run_scenario(parse_scenario(PIPELINE, "t.yaml", [fault]))
    assert a.history.digest() == b.history.digest()


# -- transactional.id expiry -------------------------------------------------------------------
EXPIRY = """
name: expiry
seed: 1
cluster:
  brokers: 2
  transactional_id_expiration: 2s
  transactional_id_cleanup_interval: 500ms
  topics: [{name: events, partitions: 2}]
transactional_producers:
  - name: writer
    config: {transaction.timeout.ms: 1000}
    workload: {topic: events, transactions: 40, size: 2, rate: 10}
faults:
  - {kind: crash, nodes: [writer], at: 1s, duration: 5s}
"""


def producer_ids(records) -> list[int]:
    ids: list[int] = []
    for r in records:
        is_txn = r["kind"] == "op" and r["type"] == "invoke" and r["f"] == "txn"
        if is_txn and (not ids or ids[-1] != r["value"]["producer_id"]):
            ids.append(r["value"]["producer_id"])
    return ids


def test_idle_transactional_id_expires_and_the_restart_gets_a_new_producer_id():
    _result, records, verdict = run(EXPIRY)
    assert found(verdict) == {}
    first, second = producer_ids(records)
    assert second != first
    invokes = [
        r["value"]
        for r in records
        if r["kind"] == "op" and r["type"] == "invoke" and r["f"] == "txn"
    ]
    new_id = [v["epoch"] for v in invokes if v["producer_id"] == second]
    assert new_id[0] == 0  # a new id starts again at epoch 0
    committed = [r for r in records if r["kind"] == "op" and r["f"] == "txn" and r["type"] == "ok"]
    assert len(committed) == 40


def test_without_expiry_the_restart_keeps_its_producer_id():
    _result, records, verdict = run(EXPIRY, "cluster.transactional_id_expiration=7d")
    assert found(verdict) == {}
    assert len(producer_ids(records)) == 1


# -- the transactional writer's outcome rules --------------------------------------------------
WRITER = """
name: outcomes
seed: 1
cluster:
  brokers: 3
  config: {broker.session.timeout.ms: 5000, broker.heartbeat.interval.ms: 1000}
  topics: [{name: events, partitions: 3}]
transactional_producers:
  - name: writer
    config: {max.block.ms: 1000, request.timeout.ms: 2000, transaction.timeout.ms: 10000}
    workload: {topic: events, transactions: 20, size: 2, rate: 10}
consumers:
  - {name: reader, topic: events, auto.offset.reset: earliest}
faults:
  - {kind: crash_at, point: coordinator.prepare_persisted, occurrence: 5, duration: 3s}
"""


def txn_outcomes(records) -> list[tuple[str, str, str | None]]:
    return [
        (r["type"], r["process"], r.get("error"))
        for r in records
        if r["kind"] == "op" and r["f"] == "txn" and r["type"] != "invoke"
    ]


def test_commit_timeout_is_info_and_the_writer_restarts_with_its_transactional_id():
    # The coordinator dies right after PrepareCommit: commitTransaction times out after
    # max.block.ms, the producer refuses to abort a commit in flight, the outcome is unknown.
    _result, records, verdict = run(WRITER)
    outcomes = txn_outcomes(records)
    unknown = [o for o in outcomes if o[0] == "info"]
    # The first is the commit the crash interrupted; while the crashed broker's partitions
    # have no leader (until it is fenced, registers again and leads), a later incarnation's
    # commit can time out the same way.
    assert unknown and unknown[0][1] == "writer/0"
    for o in unknown:
        assert o[2].startswith("TimeoutException")
        assert "abort failed: IllegalStateException" in o[2]
    later = outcomes[outcomes.index(unknown[-1]) + 1 :]
    # New processes (initTransactions also times out while no coordinator answers), all ok.
    assert later and all(o[0] == "ok" and o[1] != "writer/0" for o in later)
    # The new incarnation fenced the old epoch, and the failed-over coordinator finished the
    # prepared commit: its values are visible, all of them.
    assert any(r["kind"] == "fence" for r in records)
    assert found(verdict) == {}


def test_an_expired_batch_makes_the_commit_fail_and_the_writer_aborts():
    # Requests to one leader take longer than delivery.timeout.ms (the hanging-transaction
    # set-up, with verification on): each commit fails with the expiry, the abort succeeds.
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "hanging-transaction.yaml"
    text = scenario.read_text()
    _result, records, verdict = run(text, "kafka.rules.transaction_partition_verification=true")
    failed = [o for o in txn_outcomes(records) if o[0] != "ok"]
    assert failed and all(o[0] == "fail" and "expired" in o[2] for o in failed)
    assert {o[1] for o in txn_outcomes(records)} == {"writer/0"}  # no restart needed
    assert found(verdict) == {}


# -- the first produce of a transaction (version 2) and the coordinator's partition -----------
STEADY_TXNS = """
name: steady-transactions
seed: 1
cluster:
  brokers: 3
  topics:
    - {name: events, partitions: 3, replication_factor: 3, config: {min.insync.replicas: 2}}
transactional_producers:
  - name: txn-0
    workload: {topic: events, transactions: 60, size: 5, rate: 20}
"""


@functools.cache
def steady_spans(seed: int) -> tuple[tuple[float, float], ...]:
    """(invoke time, duration) of each committed transaction of STEADY_TXNS with ``seed``."""
    _result, records, _verdict = run(STEADY_TXNS, seed=seed)
    invoked: dict[int, float] = {}
    spans = []
    for r in records:
        if r.get("kind") != "op" or r.get("f") != "txn":
            continue
        if r["type"] == "invoke":
            invoked[r["id"]] = r["time"]
        elif r["type"] == "ok":
            spans.append((invoked[r["id"]], r["time"] - invoked[r["id"]]))
    return tuple(spans)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_no_transaction_waits_for_a_fetch_to_expire_without_faults(seed: int) -> None:
    # Under transaction version 2 a transaction's first produce to a partition waits for the
    # coordinator to add it. The coordinator's write completes as a follower's fetch moves its
    # high watermark; Kafka hands the answer back through the network and appends on a
    # callback request after that fetch was parked, so the append answers it. Made inside the
    # fetch, before it was parked, the append left it parked for replica.fetch.wait.max.ms:
    # 38% of these transactions took about 525 ms.
    spans = steady_spans(seed)
    assert len(spans) == 60
    assert max(d for _t, d in spans) < 200.0


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_init_transactions_at_a_runs_start_takes_milliseconds(seed: int) -> None:
    # The transaction log's partition is hosted from the first FindCoordinator (a shortcut
    # for 50 idle partitions), and must behave as if hosted all along: in its followers' fetch
    # sessions, so that the InitProducerId write answers their parked fetches at once. Left
    # out of them, it waited replica.fetch.wait.max.ms (500 ms) for every run's first write.
    first_invoke, _duration = steady_spans(seed)[0]
    assert first_invoke < 50.0
