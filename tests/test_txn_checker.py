"""Transactional checks: each anomaly on a history that has it and on a close one that does not."""

from __future__ import annotations

from typing import Any

import pytest
from histories import Builder

from eosim.analysis.checker import Anomaly
from eosim.analysis.checks import check_history
from eosim.analysis.explain import describe
from eosim.analysis.history import HistoryError
from eosim.analysis.txn_checker import MAX_TRANSACTION_TIMEOUT_MS, TXN_ANOMALIES, check_transactions

RC = "read_committed"


def counts(result: dict[str, Anomaly]) -> dict[str, int]:
    return {name: anomaly.count for name, anomaly in result.items()}


def only(result: dict[str, Anomaly], **expected: int) -> None:
    assert list(result) == list(TXN_ANOMALIES)
    assert counts(result) == {name: expected.get(name, 0) for name in TXN_ANOMALIES}


def example(result: dict[str, Anomaly], name: str) -> dict[str, Any]:
    return result[name].examples[0]


def record(offset: int, value: str, **fields: Any) -> dict[str, Any]:
    return {"offset": offset, "value": value, **fields}


# -- shape -----------------------------------------------------------------------------------


def test_plain_history_has_no_transactional_anomalies() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=1)
    h.send("p/0", "c", "fail")
    h.poll("c/0", [("t", 0, 0, "a")])
    h.poll("c/0", [("t", 0, 1, "b")])
    h.log("t", 0, ["a", "b"])

    only(check_transactions(h.history()))
    only(check_transactions(h.parsed()))


def test_parsing_of_new_lines() -> None:
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a", "b"], producer_id=7, epoch=1)
    h.complete_txn(tx, "p/0", offsets={"a": 0, "b": 1})
    h.poll("c/0", [("t", 0, 0, "a")], isolation=RC, group="g")
    h.step("app/0", ("t", 0, 0, "a"), ["x"], "info", transaction=3)
    h.log_records(
        "t",
        0,
        [record(0, "a", time=3.0, transactional=True)],
        [{"offset": 2, "producer_id": 7, "type": "COMMIT", "time": 4.0}],
    )
    h.offsets("g", [("t", 0, 1)])
    h.fence("tx", 7, 2)
    h.lso("t", 0, 3, 3)

    history = h.parsed()

    (txn,) = history.txns
    assert (txn.outcome, txn.producer_id, txn.epoch) == ("ok", 7, 1)
    assert [(w.value, w.offset) for w in txn.sends] == [("a", 0), ("b", 1)]
    assert (history.polls[0].isolation, history.polls[0].group) == (RC, "g")
    assert history.steps[0].outcome == "info" and history.steps[0].outputs == ["x"]
    assert history.steps[0].transaction == 3
    assert history.logs["t", 0][0].time == 3.0 and history.logs["t", 0][0].transactional
    assert history.markers["t", 0][0].type == "COMMIT"
    assert history.committed == {"g": {("t", 0): 1}}
    assert history.fences[0].epoch == 2 and history.stable_offsets[0].lso == 3


def test_a_step_transaction_that_is_not_an_integer_is_refused() -> None:
    h = Builder()
    h.step("app/0", ("t", 0, 0, "a"), ["x"], "ok", transaction=3)
    h.records[0]["value"]["transaction"] = "3"
    with pytest.raises(HistoryError, match=r"op\.value\.transaction: expected an integer"):
        h.parsed()


# -- aborted_read ----------------------------------------------------------------------------


def test_aborted_read() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a"], "fail")
    h.read_committed("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, ["a"])

    result = check_transactions(h.history())

    assert result["aborted_read"].count == 1
    found = example(result, "aborted_read")
    assert (found["value"], found["offset"], found["process"]) == ("a", 0, "c/0")
    assert found["txns"][0]["outcome"] == "fail"


def test_aborted_read_by_marker_and_not_under_read_uncommitted() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a"], "ok")
    h.poll("c/0", [("t", 0, 0, "a")])  # read_uncommitted may see aborted data
    h.log_records(
        "t", 0, [record(0, "a", producer_id=7)], [{"offset": 1, "producer_id": 7, "type": "COMMIT"}]
    )
    only(check_transactions(h.history()))

    h = Builder()
    h.send("p/0", "a", "ok")
    h.read_committed("c/0", [("t", 0, 0, "a")])
    h.log_records(
        "t", 0, [record(0, "a", producer_id=7)], [{"offset": 1, "producer_id": 7, "type": "ABORT"}]
    )
    result = check_transactions(h.history())
    assert result["aborted_read"].count == 1
    assert example(result, "aborted_read")["marker"] == "ABORT"


def test_aborted_read_under_read_uncommitted_is_counted_with_its_isolation() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a"], "fail")
    h.poll("c/0", [("t", 0, 0, "a")], isolation="read_uncommitted")
    h.log_records(
        "t", 0, [record(0, "a", producer_id=7)], [{"offset": 1, "producer_id": 7, "type": "ABORT"}]
    )
    result = check_transactions(h.history())
    assert result["aborted_read"].count == 1
    assert example(result, "aborted_read")["isolation"] == "read_uncommitted"


# -- torn_transaction ------------------------------------------------------------------------


def test_torn_transaction() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.log("t", 0, ["a"])

    result = check_transactions(h.history())

    only(result, torn_transaction=1)
    found = example(result, "torn_transaction")
    assert (found["visible"], found["missing"]) == (["a"], ["b"])


def test_whole_or_invisible_info_transaction_is_not_torn() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.txn("p/0", "tx", ["c", "d"], "info")
    h.txn("p/0", "tx", ["e", "f"], "fail")
    h.read_committed("c/0", [("t", 1, 0, "b")])
    h.log("t", 0, ["a", "e"])

    only(check_transactions(h.history()))


def test_without_a_log_a_write_not_read_yet_is_not_missing() -> None:
    # Only "x" of a committed transaction was polled and there is no final log: "y" may be
    # there, unread. Nothing proves it missing, so the transaction is not torn.
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["x", "y"])
    h.complete_txn(tx, "p/0", offsets={"x": 0, "y": 1})
    h.read_committed("c/0", [("t", 0, 0, "x")])

    only(check_transactions(h.history()))


def test_without_a_log_a_read_past_a_write_proves_it_missing() -> None:
    # A later read got past offset 1, where the commit put "y", without returning it.
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["x", "y"])
    h.complete_txn(tx, "p/0", offsets={"x": 0, "y": 1})
    h.read_committed("c/0", [("t", 0, 0, "x")])
    h.read_committed("c/0", [("t", 0, 3, "z")])

    result = check_transactions(h.history())

    only(result, torn_transaction=1)
    found = example(result, "torn_transaction")
    assert (found["visible"], found["missing"], found["unproven"]) == (["x"], ["y"], [])


def test_without_a_log_a_write_of_unknown_offset_is_unproven() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["x", "y"], "ok")  # the commit reported no offsets
    h.read_committed("c/0", [("t", 0, 0, "x")])
    h.read_committed("c/0", [("t", 0, 9, "z")])
    only(check_transactions(h.history()))


def test_torn_transaction_lists_unproven_writes() -> None:
    # "a" visible, "b" missing from partition 0's log, "c" on partition 1 with no log: unproven.
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a", "b", "c"])
    h.records[-1]["value"]["sends"][2]["partition"] = 1
    h.complete_txn(tx, "p/0")
    h.log("t", 0, ["a"])

    result = check_transactions(h.history())

    only(result, torn_transaction=1)
    found = example(result, "torn_transaction")
    assert (found["visible"], found["missing"], found["unproven"]) == (["a"], ["b"], ["c"])


# -- precommitted_read -----------------------------------------------------------------------


def committed_log(h: Builder, marker_time: float | None, marker: str = "COMMIT") -> None:
    record = {"offset": 0, "value": "a", "producer_id": 1, "epoch": 0, "transactional": True}
    markers = None
    if marker_time is not None:
        markers = [{"offset": 1, "producer_id": 1, "type": marker, "time": marker_time}]
    h.log_records("t", 0, [record], markers)


def test_precommitted_read_before_the_commit_marker() -> None:
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a"])
    h.read_committed("c/0", [("t", 0, 0, "a")])  # returns at time 3
    h.complete_txn(tx, "p/0", "ok")
    committed_log(h, marker_time=3.5)

    result = check_transactions(h.history())

    only(result, precommitted_read=1)
    found = example(result, "precommitted_read")
    assert (found["value"], found["offset"], found["reason"]) == (
        "a",
        0,
        "read before its COMMIT marker",
    )
    assert "read before its COMMIT marker" in describe("precommitted_read", found)


def test_read_of_a_transaction_no_marker_ended_is_precommitted() -> None:
    h = Builder()
    h.invoke_txn("p/0", "tx", ["a"])
    h.read_committed("c/0", [("t", 0, 0, "a")])
    committed_log(h, marker_time=None)

    result = check_transactions(h.history())

    assert result["precommitted_read"].count == 1
    assert example(result, "precommitted_read")["reason"] == "read while its transaction was open"


def test_read_after_the_marker_but_before_the_writer_heard_is_not_precommitted() -> None:
    # The COMMIT marker lands while the EndTxn answer is still on its way to the writer: a
    # reader may see the records before commitTransaction returns. That is Kafka, not a bug.
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a"])
    h.read_committed("c/0", [("t", 0, 0, "a")])  # returns at time 3
    h.complete_txn(tx, "p/0", "ok")  # at time 4
    committed_log(h, marker_time=2.5)

    only(check_transactions(h.history()))


def test_without_a_log_only_a_read_before_the_transaction_began_is_precommitted() -> None:
    h = Builder()
    h.read_committed("c/0", [("t", 0, 0, "a")])  # returns at time 2
    h.txn("p/0", "tx", ["a"], "ok")  # invoked at time 3
    tx = h.invoke_txn("p/0", "tx", ["b"])
    h.read_committed("c/0", [("t", 0, 1, "b")])  # after b began, before it completed
    h.complete_txn(tx, "p/0", "ok")

    result = check_transactions(h.history())

    assert result["precommitted_read"].count == 1
    found = example(result, "precommitted_read")
    assert (found["value"], found["reason"]) == ("a", "read before its transaction began")


def test_read_after_commit_is_not_precommitted() -> None:
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a"])
    h.poll("c/1", [("t", 0, 0, "a")])  # read_uncommitted: allowed to see it early
    h.complete_txn(tx, "p/0", "ok")
    h.read_committed("c/0", [("t", 0, 0, "a")])
    committed_log(h, marker_time=2.5)

    only(check_transactions(h.history()))


def test_read_of_an_indeterminate_transaction_is_not_precommitted() -> None:
    # A transaction whose commit was info "must have committed" once any write is read.
    h = Builder()
    h.txn("p/0", "tx", ["a"], None)
    h.read_committed("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, ["a"])

    only(check_transactions(h.history()))


# -- poll_skip and nonmonotonic_poll ---------------------------------------------------------


def test_poll_skip() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.poll("c/0", [("t", 0, 3, "d")])
    h.log("t", 0, ["a", "b", "c", "d"])

    result = check_transactions(h.history())

    only(result, poll_skip=1)
    found = example(result, "poll_skip")
    assert (found["previous_last_offset"], found["first_offset"]) == (1, 3)
    assert found["skipped"] == [{"offset": 2, "value": "c"}]


def test_poll_skip_lists_every_record_strictly_inside_the_gap() -> None:
    """The skipped records are found by binary search in the log: exactly those strictly
    between the two polls' offsets, in offset order, whatever lies around them."""
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.poll("c/0", [("t", 0, 5, "f"), ("t", 0, 6, "g")])
    h.log("t", 0, {0: "a", 1: "b", 2: "c", 4: "e", 5: "f", 6: "g", 9: "j"})

    result = check_transactions(h.history())

    only(result, poll_skip=1)
    found = example(result, "poll_skip")
    assert found["skipped"] == [{"offset": 2, "value": "c"}, {"offset": 4, "value": "e"}]
    assert found["skipped_count"] == 2


def test_gap_over_aborted_data_or_markers_is_not_a_skip_under_read_committed() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.txn("p/0", "tx", ["c"], "fail")
    h.txn("p/0", "tx", ["d"], "ok")
    h.read_committed("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.read_committed("c/0", [("t", 0, 5, "d")])
    # 2 is a commit marker, 3 the aborted "c", 4 its abort marker.
    h.log("t", 0, {0: "a", 1: "b", 3: "c", 5: "d"})

    only(check_transactions(h.history()))

    h.poll("c/1", [("t", 0, 1, "b")])
    h.poll("c/1", [("t", 0, 5, "d")])  # read_uncommitted should have returned "c"
    result = check_transactions(h.history())
    only(result, poll_skip=1)
    assert example(result, "poll_skip")["skipped"] == [{"offset": 3, "value": "c"}]


def test_nonmonotonic_poll() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.poll("c/0", [("t", 0, 1, "b"), ("t", 0, 2, "c")])
    h.log("t", 0, ["a", "b", "c"])

    result = check_transactions(h.history())

    only(result, nonmonotonic_poll=1)
    found = example(result, "nonmonotonic_poll")
    assert (found["process"], found["previous_last_offset"], found["first_offset"]) == ("c/0", 1, 1)


def test_rereads_by_another_process_are_monotonic() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.poll("c/1", [("t", 0, 1, "b"), ("t", 0, 2, "c")])
    h.poll("c/0", [("t", 0, 2, "c")])
    h.log("t", 0, ["a", "b", "c"])

    only(check_transactions(h.history()))


# -- duplicate_processing and lost_processing ------------------------------------------------


def _input_log(h: Builder) -> None:
    h.log("in", 0, ["i0", "i1"])


def test_duplicate_processing() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0-a"], "ok")
    h.step("app/1", ("in", 0, 0, "i0"), ["o0-b"], "ok")
    h.step("app/1", ("in", 0, 1, "i1"), ["o1"], "ok")
    _input_log(h)
    h.log("out", 0, ["o0-a", "o0-b", "o1"])

    result = check_transactions(h.history())

    only(result, duplicate_processing=1)
    found = example(result, "duplicate_processing")
    assert found["input"] == {"topic": "in", "partition": 0, "offset": 0, "value": "i0"}
    assert found["ok_steps"] == 2


def test_duplicate_processing_by_output_at_two_positions() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "info")
    _input_log(h)
    h.log("out", 0, ["o0", "o0"])

    result = check_transactions(h.history())

    assert result["duplicate_processing"].count == 1
    repeated = example(result, "duplicate_processing")["outputs_at_several_positions"]
    assert repeated[0]["value"] == "o0" and len(repeated[0]["positions"]) == 2


def test_aborted_retry_is_not_duplicate_processing() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0-a"], "fail")
    h.step("app/1", ("in", 0, 0, "i0"), ["o0-b"], "ok")
    h.step("app/1", ("in", 0, 1, "i1"), ["o1"], "ok")
    h.offsets("app", [("in", 0, 2)])
    _input_log(h)
    # The aborted attempt's output stays in the log, with its ABORT marker after it.
    h.log_records(
        "out",
        0,
        [
            record(0, "o0-a", producer_id=1),
            record(2, "o0-b", producer_id=2),
            record(3, "o1", producer_id=2),
        ],
        [
            {"offset": 1, "producer_id": 1, "type": "ABORT"},
            {"offset": 4, "producer_id": 2, "type": "COMMIT"},
        ],
    )

    only(check_transactions(h.history()))


def test_lost_processing() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok")
    h.step("app/0", ("in", 0, 1, "i1"), ["o1"], "fail")
    h.offsets("app", [("in", 0, 2)])
    _input_log(h)
    h.log("out", 0, ["o0"])

    result = check_transactions(h.history())

    only(result, lost_processing=1)
    found = example(result, "lost_processing")
    assert found["input"] == {"topic": "in", "partition": 0, "offset": 1}
    assert (found["value"], found["committed_offset"], found["group"]) == ("i1", 2, "app")


def test_uncommitted_input_is_not_lost() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok")
    h.step("app/0", ("in", 0, 1, "i1"), ["o1"], "fail")
    h.offsets("app", [("in", 0, 1)])
    h.offsets("verifier", [("out", 0, 1)])
    _input_log(h)
    h.log("out", 0, ["o0"])

    only(check_transactions(h.history()))


# -- record identity: a value within its topic ---------------------------------------------


def test_a_failed_write_is_an_aborted_read_even_if_its_value_committed_in_another_topic() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["1"], "fail", topic="a")
    h.txn("p/0", "tx", ["1"], "ok", topic="b")
    h.read_committed("c/0", [("a", 0, 0, "1")])

    result = check_transactions(h.history())

    only(result, aborted_read=1)
    assert example(result, "aborted_read")["topic"] == "a"


def test_reading_a_value_another_topics_failed_write_carried_is_no_aborted_read() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["1"], "fail", topic="a")
    h.read_committed("c/0", [("b", 0, 0, "1")])  # b's "1" has no failed writer
    only(check_transactions(h.history()))


def test_a_write_visible_only_in_another_topic_is_missing_from_its_own() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["1", "2"], "ok", topic="a")
    h.log("a", 0, ["2"])
    h.log("b", 0, ["1"])

    result = check_transactions(h.history())

    only(result, torn_transaction=1)
    found = example(result, "torn_transaction")
    assert (found["visible"], found["missing"]) == (["2"], ["1"])


def test_an_output_is_looked_for_in_its_output_topic_only() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok", output_topic="out")
    _input_log(h)
    h.log("out", 0, ["o0"])
    h.log("other", 0, ["o0"])  # the same value in another topic: another record
    only(check_transactions(h.history()))

    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok", output_topic="out")
    h.offsets("app", [("in", 0, 1)])
    _input_log(h)
    h.log("out", 0, [])
    h.log("other", 0, ["o0"])  # not where the step wrote it
    only(check_transactions(h.history()), lost_processing=1)


def test_an_output_without_output_topic_is_looked_for_in_every_topic() -> None:
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok")
    _input_log(h)
    h.log("out", 0, ["o0"])
    h.log("other", 0, ["o0"])
    only(check_transactions(h.history()), duplicate_processing=1)


# -- zombie_write ----------------------------------------------------------------------------


def _zombie_history(append_time: float, epoch: int) -> Builder:
    h = Builder()
    h.clock = 10.0
    h.fence("tx", 7, 1)  # at 11.0
    h.log_records("t", 0, [record(0, "z", producer_id=7, epoch=epoch, time=append_time)])
    return h


def test_zombie_write() -> None:
    result = check_transactions(_zombie_history(12.0, 0).history())

    only(result, zombie_write=1)
    found = example(result, "zombie_write")
    assert (found["value"], found["offset"], found["epoch"]) == ("z", 0, 0)
    assert found["fence"]["epoch"] == 1 and found["fence"]["time"] == 11.0


def test_write_before_fence_or_from_new_epoch_is_not_zombie() -> None:
    only(check_transactions(_zombie_history(10.5, 0).history()))
    only(check_transactions(_zombie_history(12.0, 1).history()))


# -- hanging_transaction ---------------------------------------------------------------------


def test_hanging_transaction() -> None:
    h = Builder()
    h.lso("t", 0, 4, 9, [(7, 4)])
    h.lso("t", 1, 9, 9)

    result = check_transactions(h.history())

    only(result, hanging_transaction=1)
    found = example(result, "hanging_transaction")
    assert (found["partition"], found["lso"], found["log_end_offset"]) == (0, 4, 9)
    assert found["open_transactions"] == [{"producer_id": 7, "first_offset": 4}]


def test_stable_partition_is_not_hanging() -> None:
    h = Builder()
    h.lso("t", 0, 9, 9)
    h.lso("t", 1, 4, 9)  # behind, but no open transaction is named

    only(check_transactions(h.history()))


# A writer mid-transaction when the run is cut by its duration (hanging-transaction with
# `--set duration=10s --set faults=[]` and a long, fast workload, seed 4): its last append is a
# few ms before the end, well within its transaction.timeout.ms.
CONFIGS = {"writer": {"transactional.id": "tx", "transaction.timeout.ms": 1000}}


def open_transaction(h: Builder, appended: float) -> None:
    h.meta(configs=CONFIGS)
    h.invoke_txn("writer/0", "tx", ["a", "b"], producer_id=7, epoch=0)
    h.log_records(
        "t",
        0,
        [
            record(4, "a", producer_id=7, epoch=0, transactional=True, time=appended - 1),
            record(5, "b", producer_id=7, epoch=0, transactional=True, time=appended),
        ],
    )
    h.lso("t", 0, 4, 6, [(7, 4)])


def test_open_transaction_within_its_timeout_when_the_run_was_cut_is_not_hanging() -> None:
    h = Builder()
    open_transaction(h, appended=5000.0)
    h.end(5600.0, duration=3000.0)

    history = h.history()
    only(check_transactions(history))
    (note,) = check_history(history).notes
    assert note == (
        "the run was cut by its duration (3000 ms) before its workload finished; 1 open "
        "transaction was still within its timeout at its end (5600 ms): not hanging"
    )


def test_open_transaction_past_its_timeout_at_the_end_is_hanging() -> None:
    h = Builder()
    open_transaction(h, appended=5000.0)
    h.end(6001.0, duration=3000.0)

    history = h.history()
    result = check_transactions(history)

    only(result, hanging_transaction=1)
    (txn,) = example(result, "hanging_transaction")["open_transactions"]
    assert txn == {
        "producer_id": 7,
        "first_offset": 4,
        "last_append_time": 5000.0,
        "age_ms": 1001.0,
        "timeout_ms": 1000.0,
    }
    assert check_history(history).notes == [
        "the run was cut by its duration (3000 ms) before its workload finished"
    ]


def test_without_a_configured_timeout_the_brokers_maximum_bounds_it() -> None:
    h = Builder()
    h.log_records("t", 0, [record(4, "a", producer_id=7, epoch=0, time=10.0)])
    h.lso("t", 0, 4, 5, [(7, 4)])
    h.end(10.0 + MAX_TRANSACTION_TIMEOUT_MS)
    only(check_transactions(h.history()))
    h.records[-1]["time"] += 1
    only(check_transactions(h.history()), hanging_transaction=1)


def test_open_transaction_without_append_times_is_not_judged_hanging_after_a_cut() -> None:
    h = Builder()
    h.log_records("t", 0, [record(4, "a", producer_id=7, epoch=0)])
    h.lso("t", 0, 4, 5, [(7, 4)])
    h.end(1e9)
    only(check_transactions(h.history()))


def test_history_that_ran_to_completion_has_no_notes() -> None:
    h = Builder()
    open_transaction(h, appended=5000.0)
    result = check_history(h.history())
    assert result.notes == [] and "notes" not in result.to_dict()
    assert result.anomalies["hanging_transaction"].count == 1


def test_end_line_is_parsed_and_checked() -> None:
    h = Builder()
    h.end(12.5, duration=10.0)
    assert h.parsed().end == (12.5, True, 10.0)
    for line, problem in (
        ({"kind": "end"}, "end.time: expected a finite number"),
        ({"kind": "end", "time": 1, "cut_by_duration": "yes"}, "end.cut_by_duration"),
        ({"kind": "end", "time": 1, "duration": "10s"}, "end.duration"),
    ):
        h = Builder()
        h.records.append(line)
        with pytest.raises(HistoryError, match=problem):
            h.parsed()
    h = Builder()
    h.end(1.0)
    h.end(2.0)
    with pytest.raises(HistoryError, match="2: end: a second end line"):
        h.parsed()


def test_a_run_cut_by_its_duration_says_so_and_its_writer_in_flight_is_not_hanging() -> None:
    from pathlib import Path

    from eosim import api

    path = str(Path(__file__).resolve().parent.parent / "scenarios" / "hanging-transaction.yaml")
    # The writer is still writing when the run ends (the cut at 10 s, then the recovery
    # window). Its transaction is open on events-0 from its append to the COMMIT marker: with
    # the default latency about 2 ms of each ~106 ms cycle (the rest is the retry.backoff.ms
    # after CONCURRENT_TRANSACTIONS), so few seeds would end inside one. The scenario's own
    # fault (requests delayed past delivery.timeout.ms: a hanging transaction) is replaced by
    # one that only slows broker-0's answers to the writer by 200 ms: the writer waits for its
    # produce response with its records appended, most of each cycle.
    cut = (
        "duration=10s",
        "faults=[{kind: delay, links: [[broker-0, writer]], at: 0s, duration: 1000s, "
        "extra_latency: 200ms}]",
        "transactional_producers.0.workload.transactions=10000",
        "transactional_producers.0.workload.rate=1000",
        "expect={}",
    )
    # Each cycle takes about 226 ms, nearly the same in every seed, so whether the end falls
    # inside a transaction depends on the cycle's phase at the end, not on the seed: the
    # recovery window after the cut is stretched 50 ms at a time until it does.
    for extra in range(0, 300, 50):
        outcome = api.run(api.load(path, (*cut, f"recovery={100_000 + extra}ms")), 1)
        if outcome.history.stable_offsets[0].open_transactions:
            break
    history = outcome.history
    assert history.end is not None and history.end.cut_by_duration
    assert history.end.duration == 10_000.0
    assert history.end.time == round(outcome.run.sim_time_ms, 6)
    (line,) = history.stable_offsets
    assert line.open_transactions, "the writer was mid-transaction at the end"
    # ... in its own transaction, still open: past every record of a committed one.
    committed = [w.offset for t in history.txns if t.outcome == "ok" for w in t.sends]
    assert line.open_transactions[0].first_offset > max(committed)
    assert history.txns[-1].outcome == "info"
    assert outcome.check.anomalies["hanging_transaction"].count == 0
    assert "cut by its duration" in outcome.check.notes[0]

    finished = api.run(api.load(path), 1)
    assert finished.history.end is None and finished.check.notes == []
    assert finished.check.anomalies["hanging_transaction"].count == 1


def test_eosim_check_prints_the_note_and_lists_it_in_json(tmp_path, capsys) -> None:
    import json

    from eosim.cli import main

    h = Builder()
    open_transaction(h, appended=5000.0)
    h.end(5600.0, duration=3000.0)
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(h.lines()) + "\n")

    for argv in (["check", str(path)], ["check", str(path), "--json"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
        out = capsys.readouterr().out
        note = (
            "the run was cut by its duration (3000 ms) before its workload finished; 1 open "
            "transaction was still within its timeout at its end (5600 ms): not hanging"
        )
        if "--json" in argv:
            assert json.loads(out)["notes"] == [note]
        else:
            assert f"warning    {note}" in out.splitlines()


# -- logs whose head was deleted (retention, DeleteRecords) -----------------------------------


def test_a_write_that_may_lie_below_the_log_start_is_not_proof_of_a_torn_transaction() -> None:
    """A transaction's write missing from a log whose head was deleted is unproven unless its
    acknowledged offset is at or above the log start."""
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")  # no offsets reported
    h.log("t", 0, {5: "a"}, log_start_offset=5)
    only(check_transactions(h.history()))
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a", "b"])
    h.complete_txn(tx, "p/0", offsets={"a": 5, "b": 6})
    h.log("t", 0, {5: "a"}, log_start_offset=5)
    result = check_transactions(h.history())
    only(result, torn_transaction=1)
    assert example(result, "torn_transaction")["missing"] == ["b"]


def test_outputs_deleted_with_a_log_head_are_not_lost_processing() -> None:
    """The output of a processed input was deleted before the end: not evidence that the
    input's processing was lost. An input never processed at all is still lost."""
    h = Builder()
    h.step("app/0", ("in", 0, 0, "i0"), ["o0"], "ok")
    h.offsets("app", [("in", 0, 2)])
    _input_log(h)
    h.log("out", 0, {}, log_start_offset=1)
    result = check_transactions(h.history())
    only(result, lost_processing=1)
    assert example(result, "lost_processing")["value"] == "i1"  # no step at all


# -- records a real drain marks aborted (no markers known) -----------------------------------


def _real_drain_history(marked: bool, outcome: str = "info") -> Builder:
    """A real run's shape: a transaction whose commit failed on the client (`info`), a
    read_committed reader that polls over its record, and a final log without markers where
    the drain marked the record its read_committed pass did not return."""
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.txn("p/0", "tx", ["c"], outcome)
    h.txn("p/0", "tx", ["d"], "ok")
    h.read_committed("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    h.read_committed("c/0", [("t", 0, 5, "d")])
    flag = {"aborted": True} if marked else {}
    h.log_records("t", 0, [record(0, "a"), record(1, "b"), record(3, "c", **flag), record(5, "d")])
    return h


def test_a_gap_over_a_record_the_drain_marked_aborted_is_not_a_skip() -> None:
    only(check_transactions(_real_drain_history(marked=True).parsed()))
    # Without the mark nothing says "c" was aborted: the gap reads as a skip (what a real
    # drain's history showed before the drain marked aborted records).
    only(check_transactions(_real_drain_history(marked=False).parsed()), poll_skip=1)


def test_an_acknowledged_transaction_whose_record_the_drain_marked_aborted_is_lost() -> None:
    result = check_history(_real_drain_history(marked=True, outcome="ok").parsed())
    assert result.anomalies["lost_write"].count == 1
    assert result.anomalies["poll_skip"].count == 0
    unmarked = check_history(_real_drain_history(marked=False, outcome="ok").parsed())
    assert unmarked.anomalies["lost_write"].count == 0


def test_aborted_mark_must_be_a_boolean() -> None:
    h = Builder()
    h.log_records("t", 0, [record(0, "a", aborted="yes")])
    with pytest.raises(HistoryError, match=r"records\[0\]\.aborted: expected a boolean"):
        h.parsed()
