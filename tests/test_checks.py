"""All checks in one place: base and transactional anomalies flow through every consumer that
reports on a history (API, expect blocks, explanations, sweep rows, commit latency)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from histories import Builder

from eosim import api
from eosim.analysis.anomalies import ANOMALY_KINDS
from eosim.analysis.checker import ANOMALIES, check
from eosim.analysis.checks import (
    ALL_ANOMALIES,
    GROUP_ANOMALIES,
    JEPSEN_ANOMALIES,
    REPLICATION_ANOMALIES,
    check_history,
    transactional_ops,
)
from eosim.analysis.expect import EXPECTABLE, evaluate, unknown_expect_key
from eosim.analysis.explain import describe
from eosim.analysis.history import History, history_from_records
from eosim.analysis.stats import bucket_of, histogram
from eosim.analysis.sweep.task import SCHEMA, ack_latencies, commit_latencies, execute_run
from eosim.analysis.txn_checker import TXN_ANOMALIES, check_transactions
from eosim.simulation import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "scenarios" / "at-least-once.yaml")
SMALL = ("producers.0.workload.records=200", "producers.0.workload.rate=3000")
RC = "read_committed"


def torn() -> History:
    """One committed transaction of two values, only one of which reached the log."""
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.log("t", 0, ["a"])
    return h.history()


def whole() -> History:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.read_committed("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.log("t", 0, ["a", "b"])
    return h.history()


def counts(history: History) -> dict[str, int]:
    return {name: a.count for name, a in check_history(history).anomalies.items()}


# -- check_history ---------------------------------------------------------------------------


def test_all_anomalies_are_base_then_transactional_then_group_then_replication_then_jepsen():
    assert (
        *ANOMALIES,
        *TXN_ANOMALIES,
        *GROUP_ANOMALIES,
        *REPLICATION_ANOMALIES,
        *JEPSEN_ANOMALIES,
    ) == ALL_ANOMALIES
    assert GROUP_ANOMALIES == ("offset_rewind",)
    assert REPLICATION_ANOMALIES == ("replica_divergence", "offset_rewrite")
    assert JEPSEN_ANOMALIES == (
        "int_poll_skip",
        "int_nonmonotonic_poll",
        "int_nonmonotonic_send",
        "G0",
        "G1c",
    )
    # one per registry entry (eosim.analysis.anomalies; tests/test_anomalies.py checks each)
    assert len(set(ALL_ANOMALIES)) == len(ALL_ANOMALIES) == len(ANOMALY_KINDS)


def test_check_history_reports_every_name_in_order() -> None:
    found = counts(torn())
    assert list(found) == list(ALL_ANOMALIES)
    assert found == {name: int(name == "torn_transaction") for name in ALL_ANOMALIES}
    assert counts(whole()) == dict.fromkeys(ALL_ANOMALIES, 0)


def test_check_history_keeps_the_base_result_and_counts() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", "fail")
    h.log("t", 0, ["a", "a"])
    history = h.history()

    combined, base = check_history(history), check(history)

    expected = {"sent": 2, "acked": 1, "failed": 1, "indeterminate": 0, "errored": 1}
    assert combined.counts == base.counts == expected
    for name in ANOMALIES:
        assert combined.anomalies[name].to_dict() == base.anomalies[name].to_dict()
    assert combined.anomalies["duplicate"].count == 1
    txn = check_transactions(history)
    for name in TXN_ANOMALIES:
        assert combined.anomalies[name].to_dict() == txn[name].to_dict()
    assert list(combined.to_dict()["anomalies"]) == list(ALL_ANOMALIES)


def test_transactional_ops_counts_txns_and_process_steps() -> None:
    h = Builder()
    h.send("p/0", "x", offset=0)
    h.poll("c/0", [("t", 0, 0, "x")])
    assert transactional_ops(h.history()) == 0
    h.txn("p/0", "tx", ["a"], "ok")
    h.txn("p/0", "tx", ["b"], "fail")
    h.step("app/0", ("t", 0, 0, "x"), ["y"], "ok")
    assert transactional_ops(h.history()) == 3


# -- commit latency --------------------------------------------------------------------------


def test_commit_latency_is_invoke_to_ok_completion_of_each_txn() -> None:
    # The builder's clock ticks one millisecond per line.
    h = Builder()
    first = h.invoke_txn("p/0", "tx", ["a"])  # t=1
    second = h.invoke_txn("p/1", "ty", ["b"])  # t=2
    h.poll("c/0", [])  # t=3, t=4
    h.complete_txn(first, "p/0", "ok")  # t=5: 4 ms
    h.complete_txn(second, "p/1", "fail")  # aborted: not a commit
    h.txn("p/0", "tx", ["c"], "info")  # unknown: not a commit
    h.txn("p/2", "tz", ["d"], None)  # never completed
    h.txn("p/0", "tx", ["e"], "ok")  # t=10, t=11: 1 ms
    h.send("p/3", "s", offset=0)  # a plain send is an ack, not a commit
    history = h.history()

    assert commit_latencies(history) == [4.0, 1.0]
    assert ack_latencies(history) == [1.0]
    hist = histogram(commit_latencies(history))
    assert sum(hist) == 2 and hist[bucket_of(4.0)] == 1 and hist[bucket_of(1.0)] == 1


def test_a_processor_transaction_counts_once_whatever_its_inputs() -> None:
    def op(type_: str, op_id: int, time: float, process: str, txn_id: str | None) -> dict:
        body = None
        if type_ == "invoke":
            source = {"topic": "in", "partition": 0, "offset": op_id, "value": f"i{op_id}"}
            body = {"input": source, "outputs": [f"o{op_id}"], "transactional_id": txn_id}
        return {
            "kind": "op",
            "type": type_,
            "f": "process",
            "process": process,
            "id": op_id,
            "time": time,
            "value": body,
        }

    records = [
        op("invoke", 0, 10.0, "app/0", "app"),  # one transaction of two inputs: 15 ms
        op("invoke", 1, 10.0, "app/0", "app"),
        op("ok", 0, 25.0, "app/0", "app"),
        op("ok", 1, 25.0, "app/0", "app"),
        op("invoke", 2, 30.0, "app/0", "app"),  # aborted: not a commit
        op("fail", 2, 31.0, "app/0", "app"),
        op("invoke", 3, 40.0, "plain/0", None),  # not transactional: no commit
        op("ok", 3, 42.0, "plain/0", None),
    ]
    assert commit_latencies(history_from_records(records)) == [15.0]


def test_no_transactions_no_commit_latency() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    assert commit_latencies(h.history()) == []


# -- expect ----------------------------------------------------------------------------------


def test_expect_accepts_transactional_keys() -> None:
    for name in TXN_ANOMALIES:
        assert name in EXPECTABLE and unknown_expect_key(name) is None
    observed = counts(torn())
    held = evaluate({"torn_transaction": 0, "aborted_read": 0}, observed)
    assert not held.met
    assert held.failures == ["torn_transaction: expected 0, got 1"]
    assert evaluate({"torn_transaction": ">0", "duplicate": 0}, observed).met


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("torn_transation", "torn_transaction"),
        ("aborted_reads", "aborted_read"),
        ("zombie_writes", "zombie_write"),
    ],
)
def test_expect_typo_of_a_transactional_key_suggests_it(typo: str, meant: str) -> None:
    problem = unknown_expect_key(typo)
    assert problem is not None and f"did you mean {meant!r}?" in problem


def test_scenario_expect_block_may_name_transactional_anomalies() -> None:
    overrides = (*SMALL, "expect.torn_transaction=0", "expect.hanging_transaction=0")
    scenario = api.load(SCENARIO, overrides)
    outcome = api.run(scenario, 1)
    assert list(outcome.check.anomalies) == list(ALL_ANOMALIES)
    assert list(outcome.to_dict()["anomalies"]) == list(ALL_ANOMALIES)
    checked = {item["key"]: item for item in outcome.expect.checked}
    assert checked["torn_transaction"]["met"] and checked["hanging_transaction"]["met"]
    with pytest.raises(ScenarioError, match="did you mean 'torn_transaction'"):
        api.load(SCENARIO, (*SMALL, "expect.torn_transation=0"))


def test_check_file_runs_the_transactional_checks(tmp_path: Path) -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.log("t", 0, ["a"])
    path = tmp_path / "torn.jsonl"
    path.write_text("\n".join(h.lines()) + "\n")
    history, result = api.check_file(path)
    assert transactional_ops(history) == 1
    assert result.anomalies["torn_transaction"].count == 1


# -- explanations ----------------------------------------------------------------------------


def _history(build: Any) -> History:
    h = Builder()
    build(h)
    return h.history()


def _zombie(h: Builder) -> None:
    h.fence("tx", 7, 1)
    record = {"offset": 0, "value": "z", "producer_id": 7, "epoch": 0, "time": 99.0}
    h.log_records("t", 0, [record])


def _precommitted(h: Builder) -> None:
    tx = h.invoke_txn("p/0", "tx", ["a"])
    h.read_committed("c/0", [("t", 0, 0, "a")])
    h.complete_txn(tx, "p/0", "ok")
    record = {"offset": 0, "value": "a", "producer_id": 1, "transactional": True}
    h.log_records("t", 0, [record], [{"offset": 1, "producer_id": 1, "type": "COMMIT", "time": 9}])


def _lost(h: Builder) -> None:
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok")
    h.step("app/0", ("in", 0, 1, "i1"), ["o1"], "fail")
    h.offsets("app", [("in", 0, 2)])
    h.log("in", 0, ["i0", "i1"])
    h.log("out", 0, ["o0"])


DESCRIBED = [
    ("torn_transaction", lambda h: (h.txn("p/0", "tx", ["a", "b"]), h.log("t", 0, ["a"])), "b"),
    (
        "aborted_read",
        lambda h: (h.txn("p/0", "tx", ["a"], "fail"), h.read_committed("c/0", [("t", 0, 0, "a")])),
        "aborted",
    ),
    ("precommitted_read", _precommitted, "read before its COMMIT marker (written by txn"),
    (
        "poll_skip",
        lambda h: (
            h.poll("c/0", [("t", 0, 0, "a")]),
            h.poll("c/0", [("t", 0, 2, "c")]),
            h.log("t", 0, ["a", "b", "c"]),
        ),
        "skipping 1 record(s) such as b@1",
    ),
    (
        "nonmonotonic_poll",
        lambda h: (h.poll("c/0", [("t", 0, 1, "b")]), h.poll("c/0", [("t", 0, 0, "a")])),
        "then again from @0",
    ),
    (
        "duplicate_processing",
        lambda h: (
            h.step("app/0", ("in", 0, 0, "i0"), ["o-a"]),
            h.step("app/1", ("in", 0, 0, "i0"), ["o-b"]),
        ),
        "2 ok steps",
    ),
    ("lost_processing", _lost, "committed offset 2"),
    ("zombie_write", _zombie, "fenced by epoch 1"),
    ("hanging_transaction", lambda h: h.lso("t", 0, 4, 9, [(7, 4)]), "producer 7 from @4"),
]


def test_every_transactional_anomaly_is_described() -> None:
    assert sorted(name for name, _, _ in DESCRIBED) == sorted(TXN_ANOMALIES)


@pytest.mark.parametrize(("name", "build", "phrase"), DESCRIBED, ids=[d[0] for d in DESCRIBED])
def test_transactional_examples_read_as_sentences(name: str, build: Any, phrase: str) -> None:
    anomaly = check_history(_history(build)).anomalies[name]
    assert anomaly.count == 1
    text = describe(name, anomaly.examples[0])
    assert phrase in text
    assert "=" not in text  # not the key=value fallback


# -- sweep rows ------------------------------------------------------------------------------


def test_a_sweep_row_has_every_schema_column_including_transactional_ones() -> None:
    import pyarrow as pa

    from eosim.analysis.sweep.runner import build_plan

    plan, _ = build_plan(SCENARIO, 2, (), (), 5, SMALL)
    row = execute_run(plan, plan.sweep_id(), "test", 0)

    assert list(row) == SCHEMA.names
    for name in (*TXN_ANOMALIES, "txns", "commit_latency_hist"):
        assert name in SCHEMA.names
    assert all(row[name] == 0 for name in TXN_ANOMALIES)
    assert row["txns"] == 0 and sum(row["commit_latency_hist"]) == 0
    assert sum(row["ack_latency_hist"]) == row["acked"] > 0
    assert pa.RecordBatch.from_pylist([row], schema=SCHEMA).num_rows == 1
