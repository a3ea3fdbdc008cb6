"""The fault kinds' registry (simulation/faults.py): every registered kind has all its pieces.

A kind is one declaration; this file holds what a declaration cannot: a valid example of each
kind, run on the model, and an invalid one with its error line. :func:`missing_pieces` lists
what a kind lacks (its schema, its examples, its realisation, its docs rows), so registering a
kind without them fails here. It also checks that the model's and the real cluster's fault
operations follow one protocol (:class:`eosim.simulation.faults.FaultableCluster`).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from eosim.real.cluster import RealCluster
from eosim.real.runner import RealFaults
from eosim.schema import scenario_schema
from eosim.simulation import run_scenario
from eosim.simulation.cluster import Cluster
from eosim.simulation.faults import (
    KIND_KEYS,
    KINDS,
    FaultableCluster,
    FaultEvent,
    FaultKindSpec,
    carry_out,
    register,
    start_fault,
)
from eosim.simulation.nemesis import RunFaults
from eosim.simulation.scenario import ScenarioError, parse_scenario

ROOT = Path(__file__).resolve().parent.parent

BASE = """\
name: kinds
duration: 20s
cluster:
  brokers: 3
  topics: [{name: t, partitions: 2, replication_factor: 3}]
transactional_producers:
  - name: tp
    workload: {topic: t, transactions: 20, size: 5, rate: 50}
producers:
  - name: p
    workload: {topic: t, records: 200, rate: 200}
consumers:
  - name: c
    topic: t
faults:
"""
FAULT_LINE = BASE.count("\n") + 1  # the line of the first fault

# One valid entry of each kind; its run must record it.
VALID = {
    "crash": "{kind: crash, nodes: [broker-1], at: 100, duration: 200}",
    "pause": "{kind: pause, nodes: [p], at: 100, duration: 200}",
    "partition": "{kind: partition, nodes: [broker-2], at: 100, duration: 200}",
    "delay": "{kind: delay, links: [[p, broker-0]], extra_latency: 5, at: 100, duration: 200}",
    "loss": "{kind: loss, nodes: [broker-0], probability: 0.1, at: 100, duration: 200}",
    "crash_at": "{kind: crash_at, point: producer.before_end_txn, nodes: [tp], duration: 100}",
    "power_loss": "{kind: power_loss, nodes: [broker-2], at: 100, duration: 200}",
    "delete_records": "{kind: delete_records, topic: t, at: 300}",
    "pause_at": "{kind: pause_at, point: producer.after_end_txn_sent, nodes: [tp], duration: 9}",
}
# One invalid entry of each kind, and its error after ``s.yaml:LINE: ``.
INVALID = {
    "crash": ("{kind: crash, at: 1s, duration: 1s}", "faults[0]: a crash fault needs 'nodes'"),
    "pause": ("{kind: pause, nodes: [p], at: 1s}", "faults[0]: a pause fault needs a 'duration'"),
    "partition": (
        "{kind: partition, at: 1s, duration: 1s}",
        "faults[0]: a partition fault needs 'nodes' (to isolate) or 'groups'",
    ),
    "delay": (
        "{kind: delay, nodes: [p], at: 1s, duration: 1s}",
        "faults[0]: a delay fault needs a positive 'extra_latency'",
    ),
    "loss": (
        "{kind: loss, nodes: [p], probability: 0.1, groups: [[p]], at: 1s, duration: 1s}",
        "faults[0]: 'groups' applies to partition faults only",
    ),
    "crash_at": (
        "{kind: crash_at, point: producer.after_commit, at: 1s, duration: 1s}",
        "faults[0]: a crash_at fault is triggered by its 'point', not 'at'/'rate'/'every'",
    ),
    "power_loss": (
        "{kind: power_loss, nodes: [controller], at: 1s, duration: 1s}",
        "faults[0].nodes: power_loss applies to brokers only, not 'controller'",
    ),
    "delete_records": (
        "{kind: delete_records, topic: t, at: 1s, duration: 1s}",
        "faults[0]: a delete_records fault is instantaneous: it takes no 'duration'",
    ),
    "pause_at": (
        "{kind: pause_at, nodes: [tp], duration: 1s}",
        "faults[0]: a pause_at fault needs a 'point', one of: producer.before_end_txn, "
        "producer.after_end_txn_sent,",
    ),
}


def _table_rows(path: Path, header: str) -> list[str]:
    lines = path.read_text().split("\n")
    start = lines.index(header) + 2
    rows = []
    while lines[start].startswith("|"):
        rows.append(lines[start])
        start += 1
    return rows


def model_row(kind: FaultKindSpec) -> str:
    return f"| `{kind.name}` | {kind.effect} |"


def missing_pieces(kind: FaultKindSpec) -> list[str]:
    """What ``kind`` lacks of what every fault kind must have."""
    missing = []
    schema = scenario_schema()["$defs"]["Fault"]["properties"]
    if kind.name not in schema["kind"]["enum"]:
        missing.append("the schema's kind enum")
    if any(key not in schema for key in kind.keys):
        missing.append("its keys in the schema")
    if kind.name not in VALID:
        missing.append("a valid example (VALID)")
    if kind.name not in INVALID:
        missing.append("an invalid example and its error (INVALID)")
    realised = {
        "timed": kind.start is not None,
        "instant": kind.carry_out is not None,
        "point": kind.acts_as in KINDS and KINDS[kind.acts_as].start is not None,
    }
    if not realised[kind.trigger]:
        missing.append("its realisation")
    if model_row(kind) not in _table_rows(ROOT / "docs" / "model.md", "| kind | effect |"):
        missing.append("its row of docs/model.md's fault table")
    real = _table_rows(ROOT / "docs" / "real-cluster.md", "| kind | real operation | notes |")
    if not any(f"`{kind.name}`" in row.split("|")[1] for row in real):
        missing.append("its row of docs/real-cluster.md's fault table")
    return missing


@pytest.mark.parametrize("name", list(KINDS))
def test_every_registered_kind_has_all_its_pieces(name: str) -> None:
    assert missing_pieces(KINDS[name]) == []


def test_a_kind_without_its_pieces_is_caught() -> None:
    """The check above can fail: an undocumented, unexampled kind lacks everything."""
    bare = FaultKindSpec("flood", "timed", "floods", start=lambda cluster, event: lambda: None)
    assert missing_pieces(bare) == [
        "the schema's kind enum",
        "a valid example (VALID)",
        "an invalid example and its error (INVALID)",
        "its row of docs/model.md's fault table",
        "its row of docs/real-cluster.md's fault table",
    ]
    with pytest.raises(ValueError, match="already registered"):
        register(KINDS["crash"])


def test_the_examples_and_the_docs_name_only_registered_kinds() -> None:
    assert list(VALID) == list(KINDS) and list(INVALID) == list(KINDS)
    rows = _table_rows(ROOT / "docs" / "model.md", "| kind | effect |")
    assert sorted(rows) == sorted(model_row(k) for k in KINDS.values())


def test_the_schema_lists_the_kinds_in_declaration_order() -> None:
    shipped = json.loads((ROOT / "eosim" / "scenario.schema.json").read_text())
    assert shipped["$defs"]["Fault"]["properties"]["kind"]["enum"] == list(KINDS)
    assert set(KIND_KEYS) <= set(shipped["$defs"]["Fault"]["properties"])


@pytest.mark.parametrize("name", list(KINDS))
def test_an_invalid_entry_of_each_kind_gets_its_one_line(name: str) -> None:
    fault, expected = INVALID[name]
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(BASE + f"  - {fault}\n", "s.yaml")
    assert str(exc.value).startswith(f"s.yaml:{FAULT_LINE}: {expected}")


@pytest.mark.parametrize("name", list(KINDS))
def test_a_valid_entry_of_each_kind_is_realised_on_the_model(name: str) -> None:
    kind = KINDS[name]
    scenario = parse_scenario(BASE + f"  - {VALID[name]}\n", "s.yaml")
    result = run_scenario(scenario, 1)
    recorded = kind.acts_as or name
    assert [e.kind for e in result.faults] == [recorded]
    lines = [r for r in result.history.records() if r.get("kind") == "fault"]
    assert [(r["fault"], r["phase"]) for r in lines] == [(recorded, "start"), (recorded, "stop")]


class _Log:
    """A FaultableCluster that writes down what it is asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def __getattr__(self, op: str):  # type: ignore[no-untyped-def]
        def call(*args: object) -> object:
            self.calls.append((op, *args))
            if op == "delete_records":
                return [("t-0", "NONE", 5)]
            return f"handle-{len(self.calls)}"

        return call


@pytest.mark.parametrize(
    ("event", "started", "ended"),
    [
        (FaultEvent(0, 1, "crash", ("a", "b")), [("crash", "a"), ("crash", "b")], "restart"),
        (FaultEvent(0, 1, "power_loss", ("a",)), [("power_loss", "a")], "restart"),
        (FaultEvent(0, 1, "pause", ("a",)), [("pause", "a")], "resume"),
        (FaultEvent(0, 1, "partition", ("a",)), [("partition", (("a",),))], "heal"),
        (
            FaultEvent(0, 1, "delay", ("a",), extra_latency=3.0),
            [("disturb", ("a",), (), 3.0, 0.0)],
            "heal",
        ),
        (
            FaultEvent(0, 1, "loss", (), probability=0.5, links=(("a", "b"),)),
            [("disturb", (), (("a", "b"),), 0.0, 0.5)],
            "heal",
        ),
    ],
)
def test_timed_kinds_call_the_protocol_and_undo_what_they_did(event, started, ended) -> None:
    log = _Log()
    end = start_fault(event, log)  # type: ignore[arg-type]
    assert log.calls == started
    end()
    assert [c[0] for c in log.calls[len(started) :]] == [ended] * (
        len(event.targets) if ended in ("restart", "resume") else 1
    )


def test_an_instant_kind_is_carried_out_not_started() -> None:
    log = _Log()
    event = FaultEvent(0, 0, "delete_records", topic="t", offset=-1)
    assert carry_out(event, log) == (  # type: ignore[arg-type]
        ["t-0"],
        {"offset": -1, "log_start_offsets": {"t-0": 5}},
    )
    with pytest.raises(ValueError, match="not a fault that starts and ends"):
        start_fault(event, log)  # type: ignore[arg-type]


PROTOCOL = [
    name
    for name, _ in inspect.getmembers(FaultableCluster, inspect.isfunction)
    if not name.startswith("_")
]


@pytest.mark.parametrize("implementation", [Cluster, RunFaults, RealCluster, RealFaults])
def test_the_model_and_the_real_cluster_offer_one_fault_protocol(implementation) -> None:
    """Each of the protocol's operations, with its parameters in order (an implementation may
    add optional ones, as RealCluster.restart's ``wait``)."""
    assert PROTOCOL == [
        "crash",
        "delete_records",
        "disturb",
        "heal",
        "partition",
        "pause",
        "power_loss",
        "restart",
        "resume",
    ]
    for name in PROTOCOL:
        want = list(inspect.signature(getattr(FaultableCluster, name)).parameters)
        have = inspect.signature(getattr(implementation, name)).parameters
        assert list(have)[: len(want)] == want, f"{implementation.__name__}.{name}"
        extra = list(have.values())[len(want) :]
        assert all(p.default is not inspect.Parameter.empty for p in extra), name


@pytest.mark.parametrize(
    "fault",
    [
        "{kind: crash, nodes: [c], at: 1s, duration: 1s}",
        "{kind: pause, nodes: [c], at: 1s, duration: 1s}",
        "{kind: crash_at, nodes: [c], point: processor.after_poll, duration: 1s}",
        "{kind: pause_at, nodes: [c], point: processor.after_poll, duration: 1s}",
    ],
)
def test_a_node_fault_on_a_consumer_is_refused_when_validated(fault: str) -> None:
    """A consumer (a reader) only observes and is no target of the nemesis: crashing or
    pausing one ended the run in a KeyError, and a crash_at on one never fired."""
    kind = fault.split(",")[0].split()[-1]
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(BASE + f"  - {fault}\n", "s.yaml")
    assert str(exc.value) == (
        f"s.yaml:{FAULT_LINE}: faults[0].nodes: {kind} applies to brokers, the controller, "
        "producers and processors only, not 'c'"
    )


def test_a_network_fault_may_name_a_consumer() -> None:
    fault = "{kind: partition, nodes: [c], at: 100, duration: 100}"
    result = run_scenario(parse_scenario(BASE + f"  - {fault}\n", "s.yaml"), 1)
    assert [e.targets for e in result.faults] == [("c",)]
