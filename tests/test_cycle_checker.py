"""G0 and G1c dependency cycles (eosim.analysis.cycle_checker), modelled on Jepsen's kafka_test.clj
g0-test, g1c-pure-wr-test and g1c-ww-wr-test: each on a history with the cycle and one
without."""

from __future__ import annotations

from histories import Builder
from test_version_order import judged, poll, send, txn

from eosim.analysis.cycle_checker import check_cycles, dependency_graph
from eosim.analysis.history import History
from eosim.analysis.jepsen import parse_jepsen_history
from eosim.analysis.version_order import Analysis


def cycles(*ops: list[str]) -> dict[str, int]:
    result = judged(*ops)
    return {name: result.anomalies[name].count for name in ("G0", "G1c")}


def test_g0_a_write_cycle_over_two_keys():
    found = judged(
        send(0, 0, "ok", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
        send(2, 1, "ok", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
    ).anomalies["G0"]
    assert found.count == 1
    example = found.examples[0]
    assert [op["id"] for op in example["cycle"]] == [0, 2, 0]
    assert [step["type"] for step in example["steps"]] == ["ww", "ww"]
    assert [(s["topic"], s["value"], s["value_after"]) for s in example["steps"]] == [
        (":x", ":a", ":b"),
        (":y", ":b", ":a"),
    ]


def test_no_g0_when_both_keys_agree():
    assert cycles(
        send(0, 0, "ok", "[[:send :x [0 :a]] [:send :y [0 :a]]]"),
        send(2, 1, "ok", "[[:send :x [1 :b]] [:send :y [1 :b]]]"),
    ) == {"G0": 0, "G1c": 0}


def test_g1c_pure_write_read():
    t1 = txn(
        0, 0, "ok", "txn", "[[:send :x :a] [:poll]]", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"
    )
    t2 = txn(
        2, 1, "ok", "txn", "[[:send :y :b] [:poll]]", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"
    )
    found = judged(t1, t2).anomalies["G1c"]
    assert found.count == 1
    assert [s["type"] for s in found.examples[0]["steps"]] == ["wr", "wr"]
    assert cycles(t1, t2)["G0"] == 0


def test_g1c_write_write_and_write_read():
    t1 = txn(
        0, 0, "ok", "txn", "[[:send :x :a] [:send :y :c]]", "[[:send :x [0 :a]] [:send :y [2 :c]]]"
    )
    t2 = txn(
        2, 1, "ok", "txn", "[[:poll] [:send :y :b]]", "[[:poll {:x [[0 :a]]}] [:send :y [1 :b]]]"
    )
    found = judged(t1, t2).anomalies["G1c"]
    assert found.count == 1
    assert sorted(s["type"] for s in found.examples[0]["steps"]) == ["wr", "ww"]
    # t2's write before t1's on :y, but t2 read :a: no cycle once :b comes after :c
    t2_later = txn(
        2, 1, "ok", "txn", "[[:poll] [:send :y :b]]", "[[:poll {:x [[0 :a]]}] [:send :y [3 :b]]]"
    )
    assert cycles(t1, t2_later) == {"G0": 0, "G1c": 0}


def test_only_committed_ops_take_part():
    """An info (or failed) txn is not in the graph, so no cycle goes through it."""
    t1 = txn(
        0, 0, "info", "txn", "[[:send :x :a] [:poll]]", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"
    )
    t2 = txn(
        2, 1, "ok", "txn", "[[:send :y :b] [:poll]]", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"
    )
    assert cycles(t1, t2) == {"G0": 0, "G1c": 0}


def test_a_read_of_a_value_nobody_sent_draws_no_edge():
    history = parse_jepsen_history(
        "\n".join(
            [*poll(0, 0, "ok", "[[:poll {:x [[0 :a]]}]]"), *send(2, 1, "ok", "[[:send :x [1 :b]]]")]
        )
    )
    graph = dependency_graph(Analysis(history))
    assert graph.number_of_nodes() == 2 and graph.number_of_edges() == 0


def test_a_history_without_transactions_reports_zero():
    assert {name: a.count for name, a in check_cycles(History()).items()} == {"G0": 0, "G1c": 0}


# -- eosim's own histories: txn ops and transactional process steps --------------------


def eosim_cycles(h: Builder) -> dict[str, int]:
    return {name: a.count for name, a in check_cycles(h.parsed()).items()}


def two_writers(crossing: bool) -> Builder:
    """Transactions of two producers, each writing t-0 and t-1; with ``crossing`` the logs
    order them differently in the two partitions."""
    h = Builder()
    a0 = h.invoke_txn("a/0", "ta", ["a0"], partition=0)
    b0 = h.invoke_txn("b/0", "tb", ["b0"], partition=0)
    h.records[-2]["value"]["sends"].append({"topic": "t", "partition": 1, "value": "a1"})
    h.records[-1]["value"]["sends"].append({"topic": "t", "partition": 1, "value": "b1"})
    h.complete_txn(a0, "a/0")
    h.complete_txn(b0, "b/0")
    h.log("t", 0, ["a0", "b0"])
    h.log("t", 1, ["b1", "a1"] if crossing else ["a1", "b1"])
    return h


def test_g0_between_two_transactional_producers_of_an_eosim_history():
    """Offsets come from the final logs when the txn ops do not report them."""
    assert eosim_cycles(two_writers(crossing=True)) == {"G0": 1, "G1c": 0}
    assert eosim_cycles(two_writers(crossing=False)) == {"G0": 0, "G1c": 0}


def batches(transaction: bool) -> Builder:
    """Two processors, each with one transaction of two steps that write out-0 and out-1,
    in opposite orders. Only steps known to share a transaction make a cycle."""
    h = Builder()
    number = {"transaction": 1} if transaction else {}
    h.step("p/0", ("in", 0, 0, "x0"), ["x0>p"], output_topic="out", **number)
    h.step("p/0", ("in", 1, 0, "x1"), ["x1>p"], output_topic="out", **number)
    h.step("q/0", ("in", 0, 1, "y0"), ["y0>q"], output_topic="out", **number)
    h.step("q/0", ("in", 1, 1, "y1"), ["y1>q"], output_topic="out", **number)
    h.log("in", 0, ["x0", "y0"])
    h.log("in", 1, ["x1", "y1"])
    h.log("out", 0, ["x0>p", "y1>q"])
    h.log("out", 1, ["y0>q", "x1>p"])
    return h


def test_g0_between_processing_transactions_needs_their_transaction_numbers():
    assert eosim_cycles(batches(transaction=True)) == {"G0": 1, "G1c": 0}
    assert eosim_cycles(batches(transaction=False)) == {"G0": 0, "G1c": 0}


def pipeline_loop(closed: bool) -> Builder:
    """p reads what q wrote and q what p wrote (a two-stage loop): a read-write cycle."""
    h = Builder()
    h.step("p/0", ("x", 0, 0, "b"), ["a"], output_topic="y", transaction=1)
    h.step("q/0", ("y", 0, 0, "a" if closed else "z"), ["b"], output_topic="x", transaction=1)
    h.log("x", 0, ["b"])
    h.log("y", 0, ["a", "z"] if not closed else ["a"])
    return h


def test_g1c_through_the_inputs_and_outputs_of_processing_transactions():
    assert eosim_cycles(pipeline_loop(closed=True)) == {"G0": 0, "G1c": 1}
    assert eosim_cycles(pipeline_loop(closed=False)) == {"G0": 0, "G1c": 0}


def test_an_aborted_or_unknown_step_takes_no_part():
    h = batches(transaction=True)
    for record in h.records:
        if record.get("f") == "process" and record["type"] == "ok" and record["process"] == "q/0":
            record["type"] = "info"
    assert eosim_cycles(h) == {"G0": 0, "G1c": 0}


def test_a_cycle_and_a_skip_read_as_sentences():
    from eosim.analysis.explain import describe

    found = judged(
        send(0, 0, "ok", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
        send(2, 1, "ok", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
    ).anomalies["G0"]
    assert describe("G0", found.examples[0]) == (
        "cycle of ok ops 0, 2, 0: op 0 sent :a to :x-0 before op 2 sent :b; "
        "op 2 sent :b to :y-0 before op 0 sent :a"
    )
    skip = judged(
        send(0, 9, "ok", "[[:send 1 [0 :a]] [:send 1 [1 :b]]]"),
        poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
        poll(4, 0, "ok", "[[:poll {1 [[1 :b]]}]]"),
        poll(6, 1, "ok", "[[:poll {1 [[0 :a] [2 :c]]}]]"),
    ).anomalies["int_poll_skip"]
    assert describe("int_poll_skip", skip.examples[0]) == (
        "op 6 (ok poll, process 1) read :a then :c on jepsen-1: +2 positions, skipping :b"
    )
