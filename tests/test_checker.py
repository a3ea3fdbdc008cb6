"""The anomaly checker: each anomaly on a history that has it and on a close one that does not."""

from __future__ import annotations

import json
from typing import Any

from histories import Builder
from hypothesis import given, settings
from hypothesis import strategies as st

from eosim.analysis.checker import ANOMALIES, CheckResult, check
from eosim.analysis.history import History, LogRecord


def counts(result: CheckResult) -> dict[str, int]:
    return {name: anomaly.count for name, anomaly in result.anomalies.items()}


def only(result: CheckResult, **expected: int) -> None:
    assert counts(result) == {name: expected.get(name, 0) for name in ANOMALIES}


def example(result: CheckResult, name: str) -> dict[str, Any]:
    return result.anomalies[name].examples[0]


def offsets(positions: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(p["topic"], p["partition"], p["offset"]) for p in positions]


# -- result shape ----------------------------------------------------------------------------


def test_clean_history_and_result_shape() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", "fail")
    h.send("p/0", "c", "info")
    h.send("p/0", "d", None)
    h.log("t", 0, ["a"])

    result = check(h.history())

    only(result)
    assert list(result.anomalies) == list(ANOMALIES)
    # b and c completed with an error (errored); d never completed.
    assert result.counts == {
        "sent": 4,
        "acked": 1,
        "failed": 1,
        "indeterminate": 2,
        "errored": 2,
    }
    as_dict = result.to_dict()
    assert list(as_dict["anomalies"]) == list(ANOMALIES)
    assert as_dict["anomalies"]["duplicate"] == {"count": 0, "examples": []}
    assert json.loads(json.dumps(as_dict)) == as_dict


def test_examples_are_capped_and_deterministic() -> None:
    h = Builder()
    values = [f"v{i}" for i in range(6)]
    for value in values:
        h.send("p/0", value, "info")
    h.log("t", 0, values + values)

    first = check(h.history()).to_dict()

    assert first["anomalies"]["duplicate"]["count"] == 6
    assert [e["value"] for e in first["anomalies"]["duplicate"]["examples"]] == ["v0", "v1", "v2"]
    assert check(h.parsed()).to_dict() == first


# -- duplicate -------------------------------------------------------------------------------


def test_duplicate_value_at_two_offsets() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=1)
    h.log("t", 0, {0: "a", 1: "b", 2: "a"})

    result = check(h.history())

    only(result, duplicate=1)
    found = example(result, "duplicate")
    assert found["value"] == "a"
    assert offsets(found["positions"]) == [("t", 0, 0), ("t", 0, 2)]
    assert [(s["id"], s["process"], s["offset"]) for s in found["sends"]] == [(0, "p/0", 0)]


def test_no_duplicate_when_each_value_lands_once() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=1)
    h.log("t", 0, ["a", "b"])
    h.poll("c/0", [("t", 0, 0, "a"), ("t", 0, 1, "b")])
    only(check(h.history()))


def test_info_write_present_once_is_not_a_duplicate() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.log("t", 0, ["a"])
    only(check(h.history()))


def test_info_write_present_twice_is_a_duplicate() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.log("t", 0, ["a", "a"])
    result = check(h.history())
    only(result, duplicate=1)
    assert offsets(example(result, "duplicate")["positions"]) == [("t", 0, 0), ("t", 0, 1)]


def test_value_resent_after_restart_is_a_duplicate_if_it_lands_twice() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/1", "a", offset=1)
    h.log("t", 0, ["a", "a"])

    result = check(h.history())

    only(result, duplicate=1)
    sends = example(result, "duplicate")["sends"]
    assert [(s["process"], s["outcome"]) for s in sends] == [("p/0", "info"), ("p/1", "ok")]


def test_value_resent_after_restart_landing_once_is_fine() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/1", "a", offset=0)
    h.log("t", 0, ["a"])
    only(check(h.history()))


def test_value_acknowledged_at_one_offset_and_read_at_another_is_a_duplicate() -> None:
    # Jepsen's Kafka checker builds each partition's version order from acknowledged send
    # offsets and polled offsets alike; a value at two offsets of it is a duplicate.
    h = Builder()
    h.send("p/0", "a", offset=1)
    h.poll("c/0", [("t", 0, 3, "a")])

    result = check(h.history())

    only(result, duplicate=1)
    found = example(result, "duplicate")
    assert offsets(found["positions"]) == [("t", 0, 1), ("t", 0, 3)]
    assert offsets(found["only_acknowledged"]) == [("t", 0, 1)]
    assert found["times_landed"] == 2


def test_value_acknowledged_and_read_at_the_same_offset_is_no_duplicate() -> None:
    h = Builder()
    h.send("p/0", "a", offset=3)
    h.poll("c/0", [("t", 0, 3, "a")])
    only(check(h.history()))


def test_value_resent_and_acknowledged_at_two_offsets_is_a_duplicate() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/1", "a", offset=4)

    result = check(h.history())

    only(result, duplicate=1, unseen=2)
    assert offsets(example(result, "duplicate")["only_acknowledged"]) == [
        ("t", 0, 0),
        ("t", 0, 4),
    ]


def test_duplicate_across_partitions_seen_by_reads_only() -> None:
    h = Builder()
    h.send("p/0", "a", partition=None)
    h.poll("c/0", [("t", 0, 0, "a")])
    h.poll("c/1", [("t", 1, 0, "a")])
    result = check(h.history())
    only(result, duplicate=1)
    assert offsets(example(result, "duplicate")["positions"]) == [("t", 0, 0), ("t", 1, 0)]


# -- record identity: a value within its topic ---------------------------------------------


def test_the_same_value_in_two_topics_is_two_records_not_a_duplicate() -> None:
    h = Builder()
    h.send("p/0", "1", topic="a", offset=0)
    h.send("p/0", "1", topic="b", offset=0)
    h.log("a", 0, ["1"])
    h.log("b", 0, ["1"])
    only(check(h.history()))


def test_a_value_twice_in_one_topic_beside_another_topics_copy_is_a_duplicate() -> None:
    h = Builder()
    h.send("p/0", "1", topic="a", offset=0)
    h.send("p/0", "1", topic="b", offset=0)
    h.log("a", 0, ["1"])
    h.log("b", 0, ["1", "1"])
    result = check(h.history())
    only(result, duplicate=1)
    assert offsets(example(result, "duplicate")["positions"]) == [("b", 0, 0), ("b", 0, 1)]


def test_a_value_read_in_one_topic_does_not_hide_the_same_value_unread_in_another() -> None:
    # Values are unique per topic only: reading "1" from topic a says nothing of b's "1".
    h = Builder()
    h.send("p/0", "1", topic="a", offset=0)
    h.send("p/0", "1", topic="b", offset=0)
    h.poll("c/0", [("a", 0, 0, "1")])
    result = check(h.history())
    only(result, unseen=1)
    assert example(result, "unseen")["topic"] == "b"


def test_the_same_value_read_in_both_its_topics_is_seen_in_both() -> None:
    h = Builder()
    h.send("p/0", "1", topic="a", offset=0)
    h.send("p/0", "1", topic="b", offset=0)
    h.poll("c/0", [("a", 0, 0, "1"), ("b", 0, 0, "1")])
    only(check(h.history()))


def test_a_value_logged_in_another_topic_does_not_save_a_send_of_unknown_partition() -> None:
    h = Builder()
    h.send("p/0", "1", topic="a", partition=None)
    h.send("p/0", "1", topic="b", offset=0)
    h.log("a", 0, [])
    h.log("b", 0, ["1"])
    result = check(h.history())
    only(result, lost_write=1)
    assert example(result, "lost_write")["topic"] == "a"


# -- lost_write and unseen -------------------------------------------------------------------


def test_acknowledged_write_missing_from_final_log_is_lost() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=1)
    h.log("t", 0, {1: "b"})

    result = check(h.history())

    only(result, lost_write=1)
    found = example(result, "lost_write")
    assert (found["value"], found["partition"], found["offset"]) == ("a", 0, 0)
    assert (found["process"], found["outcome"], found["missing_from"]) == ("p/0", "ok", "final log")


def test_acknowledged_write_in_final_log_is_not_lost() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=1)
    h.log("t", 0, ["a", "b"])
    only(check(h.history()))


def test_info_write_absent_is_not_lost() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", None)
    h.log("t", 0, [])
    only(check(h.history()))


def test_info_write_seen_then_missing_from_final_log_is_lost() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.poll("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, [])

    result = check(h.history())

    only(result, lost_write=1)
    found = example(result, "lost_write")
    assert (found["value"], found["outcome"], found["missing_from"]) == ("a", "info", "final log")


def test_failed_write_absent_is_nothing() -> None:
    h = Builder()
    h.send("p/0", "a", "fail")
    h.log("t", 0, [])
    only(check(h.history()))
    h = Builder()
    h.send("p/0", "a", "fail")
    h.poll("c/0", [("t", 0, 5, "other")])
    only(check(h.history()))


def test_reads_only_write_skipped_by_a_read_past_it_is_lost() -> None:
    h = Builder()
    h.send("p/0", "a", offset=3)
    h.poll("c/0", [("t", 0, 2, "x"), ("t", 0, 4, "y")])

    result = check(h.history())

    only(result, lost_write=1)
    found = example(result, "lost_write")
    assert (found["value"], found["offset"], found["missing_from"]) == ("a", 3, "reads")
    assert found["highest_offset_read"] == 4


def test_reads_only_write_not_yet_reached_is_unseen() -> None:
    h = Builder()
    h.send("p/0", "a", offset=3)
    h.poll("c/0", [("t", 0, 2, "x"), ("t", 0, 3, "y"), ("t", 1, 9, "z")])

    result = check(h.history())

    # offset 3 was read holding another value, but no read got past it
    only(result, unseen=1, inconsistent_offsets=1)
    found = example(result, "unseen")
    assert (found["value"], found["partition"], found["offset"]) == ("a", 0, 3)


def test_reads_only_write_that_was_read_is_fine() -> None:
    h = Builder()
    h.send("p/0", "a", offset=3)
    h.poll("c/0", [("t", 0, 3, "a"), ("t", 0, 4, "y")])
    only(check(h.history()))


def test_reads_only_write_with_unknown_offset_is_unseen_not_lost() -> None:
    h = Builder()
    h.send("p/0", "a")  # acks=0: the broker returns offset -1
    h.poll("c/0", [("t", 0, 7, "x")])
    result = check(h.history())
    only(result, unseen=1)
    assert example(result, "unseen")["offset"] is None


def test_never_read_acknowledged_write_without_log_is_unseen() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", "info")
    h.send("p/0", "c", "fail")
    result = check(h.history())
    only(result, unseen=1)
    assert example(result, "unseen")["value"] == "a"


def test_unknown_partition_lost_if_absent_from_all_the_topics_logs() -> None:
    h = Builder()
    h.send("p/0", "a", partition=None)
    h.send("p/0", "b", partition=None)
    h.log("t", 0, ["b"])
    h.log("t", 1, [])
    h.log("other", 0, ["a"])

    result = check(h.history())

    only(result, lost_write=1)
    found = example(result, "lost_write")
    assert (found["value"], found["partition"], found["missing_from"]) == ("a", None, "final logs")
    assert found["logged_partitions"] == [0, 1]


def test_unknown_partition_found_in_any_log_of_the_topic_is_not_lost() -> None:
    h = Builder()
    h.send("p/0", "a", partition=None)
    h.log("t", 0, [])
    h.log("t", 1, ["a"])
    only(check(h.history()))


def test_unknown_partition_without_logs_is_unseen() -> None:
    h = Builder()
    h.send("p/0", "a", partition=None)
    h.poll("c/0", [("t", 0, 5, "x")])
    only(check(h.history()), unseen=1)


def test_committed_transaction_missing_from_the_final_log_is_a_lost_write() -> None:
    # Neither write of a committed transaction is in the complete log: torn_transaction needs
    # one visible, so the loss is a lost_write, with an example naming the transaction.
    h = Builder()
    tx = h.invoke_txn("p/0", "tx", ["a", "b"], producer_id=3, epoch=1)
    h.complete_txn(tx, "p/0", offsets={"a": 0, "b": 1})
    h.log("t", 0, ["c"])

    result = check(h.history())

    only(result, lost_write=1)
    found = example(result, "lost_write")
    assert (found["value"], found["id"], found["outcome"], found["offset"]) == ("a", tx, "ok", 0)
    assert found["missing_from"] == "final log"
    assert found["transaction"] == {
        "id": tx,
        "transactional_id": "tx",
        "producer_id": 3,
        "epoch": 1,
        "values": ["a", "b"],
        "writes": 2,
    }


def test_committed_transaction_under_an_abort_marker_is_a_lost_write() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a"], "ok")
    h.log_records(
        "t",
        0,
        [{"offset": 0, "value": "a", "producer_id": 3, "epoch": 0}],
        [{"offset": 1, "producer_id": 3, "type": "ABORT"}],
    )
    only(check(h.history()), lost_write=1)


def test_info_transaction_read_committed_then_missing_is_a_lost_write() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a"], "info")
    h.read_committed("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, [])
    only(check(h.history()), lost_write=1)


def test_transactions_that_are_in_the_log_or_unknown_are_not_lost() -> None:
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")  # in the log
    h.txn("p/0", "tx", ["c"], "info")  # maybe aborted
    h.txn("p/0", "tx", ["d"], "fail")  # aborted
    h.txn("p/0", "tx", ["e"], "info")  # read by read_uncommitted only: not proof of commit
    h.poll("c/0", [("t", 1, 0, "e")])
    h.txn("p/0", "tx", ["f"], "ok", partition=1)  # partition 1 has no final log
    h.log("t", 0, ["a", "b"])
    only(check(h.history()))


# -- nonmonotonic_send -----------------------------------------------------------------------


def test_later_send_landing_lower_is_nonmonotonic() -> None:
    h = Builder()
    h.send("p/0", "a", offset=1)
    h.send("p/0", "b", offset=0)
    h.log("t", 0, ["b", "a"])

    result = check(h.history())

    only(result, nonmonotonic_send=1)
    found = example(result, "nonmonotonic_send")
    assert (found["process"], found["topic"], found["partition"]) == ("p/0", "t", 0)
    assert (found["value"], found["offset"]) == ("b", 0)
    assert (found["earlier_value"], found["earlier_offset"]) == ("a", 1)


def test_same_order_from_different_processes_is_not_nonmonotonic() -> None:
    h = Builder()
    h.send("p/0", "a", offset=1)
    h.send("p/1", "b", offset=0)
    h.log("t", 0, ["b", "a"])
    only(check(h.history()))


def test_sends_to_different_partitions_are_not_compared() -> None:
    h = Builder()
    h.send("p/0", "a", offset=1)
    h.send("p/0", "b", partition=1, offset=0)
    h.log("t", 0, {1: "a"})
    h.log("t", 1, ["b"])
    only(check(h.history()))


def test_nonmonotonic_counts_every_send_below_the_running_maximum() -> None:
    h = Builder()
    h.send("p/0", "a", offset=2)
    h.send("p/0", "b", offset=0)
    h.send("p/0", "c", offset=1)
    h.send("p/0", "d", offset=3)
    h.log("t", 0, ["b", "c", "a", "d"])
    result = check(h.history())
    only(result, nonmonotonic_send=2)
    assert [e["value"] for e in result.anomalies["nonmonotonic_send"].examples] == ["b", "c"]


def test_nonmonotonic_falls_back_to_acknowledged_offsets() -> None:
    h = Builder()
    h.send("p/0", "a", offset=5)
    h.send("p/0", "b", offset=3)
    result = check(h.history())
    only(result, nonmonotonic_send=1, unseen=2)
    assert example(result, "nonmonotonic_send")["earlier_offset"] == 5


def test_nonmonotonic_uses_the_lowest_observed_offset_of_a_duplicated_value() -> None:
    # a non-idempotent retry of "a" lands again after "b": a duplicate, not a reordering
    h = Builder()
    h.send("p/0", "a", offset=2)
    h.send("p/0", "b", offset=1)
    h.log("t", 0, ["a", "b", "a"])
    result = check(h.history())
    only(result, duplicate=1)


def test_unacknowledged_sends_take_their_observed_offset() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", "info")
    h.send("p/0", "c", "fail")
    h.log("t", 0, ["b", "a"])
    only(check(h.history()), nonmonotonic_send=1)


def test_resend_written_by_a_later_process_is_not_the_crashed_senders() -> None:
    # idempotent-restart, seed 4: p/0 sent "a" then "b" and crashed before "a" was written; its
    # restarted self p/1 resent "a" after new sends. The log's producer ids say p/1 wrote "a":
    # p/0's send of "a" landed nowhere, so p/0 did not reorder anything.
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", "info")
    h.send("p/1", "c", offset=1)
    h.send("p/1", "a", offset=2)
    h.log_records(
        "t",
        0,
        [
            {"offset": 0, "value": "b", "producer_id": 7, "epoch": 0, "sequence": 0},
            {"offset": 1, "value": "c", "producer_id": 8, "epoch": 0, "sequence": 0},
            {"offset": 2, "value": "a", "producer_id": 8, "epoch": 0, "sequence": 1},
        ],
    )
    only(check(h.history()))


def test_resend_attributed_by_producer_id_even_without_an_ack() -> None:
    # As above, but p/1's resend is info too: p/1's session (producer id 8) is known from "c",
    # a value only p/1 sent.
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", "info")
    h.send("p/1", "c", "info")
    h.send("p/1", "a", "info")
    h.log_records(
        "t",
        0,
        [
            {"offset": 0, "value": "b", "producer_id": 7, "epoch": 0},
            {"offset": 1, "value": "c", "producer_id": 8, "epoch": 0},
            {"offset": 2, "value": "a", "producer_id": 8, "epoch": 0},
        ],
    )
    only(check(h.history()))


def test_crashed_process_that_wrote_its_send_late_is_still_nonmonotonic() -> None:
    # The same values, but the record of "a" carries p/0's producer id: p/0 wrote "a" after
    # "b", out of order, and p/1's resend never landed.
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", "info")
    h.send("p/1", "c", offset=1)
    h.send("p/1", "a", "info")
    h.log_records(
        "t",
        0,
        [
            {"offset": 0, "value": "b", "producer_id": 7, "epoch": 0},
            {"offset": 1, "value": "c", "producer_id": 8, "epoch": 0},
            {"offset": 2, "value": "a", "producer_id": 7, "epoch": 0},
        ],
    )
    result = check(h.history())
    only(result, nonmonotonic_send=1)
    found = example(result, "nonmonotonic_send")
    assert (found["process"], found["value"], found["offset"]) == ("p/0", "b", 0)
    assert (found["earlier_value"], found["earlier_offset"]) == ("a", 2)


def test_resent_value_with_unknown_writers_keeps_the_lowest_offset() -> None:
    # Without producer ids (a non-idempotent producer writes -1), nothing says who wrote the
    # record, so each send is placed at the value's lowest offset, as before.
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("p/0", "b", "info")
    h.send("p/1", "a", "info")
    h.log_records(
        "t",
        0,
        [
            {"offset": 0, "value": "b", "producer_id": -1, "epoch": -1},
            {"offset": 1, "value": "a", "producer_id": -1, "epoch": -1},
        ],
    )
    only(check(h.history()), nonmonotonic_send=1)


# -- inconsistent_offsets --------------------------------------------------------------------


def test_acknowledged_offset_holding_another_value_is_inconsistent() -> None:
    h = Builder()
    h.send("q/0", "x", "info")
    h.send("p/0", "a", offset=0)
    h.log("t", 0, ["x", "a"])

    result = check(h.history())

    # The ack puts "a" at offset 0 and the log at offset 1: as in Jepsen's version order, one
    # value at two offsets is also a duplicate.
    only(result, inconsistent_offsets=1, duplicate=1)
    found = example(result, "inconsistent_offsets")
    assert (found["topic"], found["partition"], found["offset"]) == ("t", 0, 0)
    assert [(v["value"], v["sources"]) for v in found["values"]] == [
        ("a", ["ack of send 1 by p/0"]),
        ("x", ["log"]),
    ]


def test_acknowledged_offset_matching_the_log_is_consistent() -> None:
    h = Builder()
    h.send("q/0", "x", "info")
    h.send("p/0", "a", offset=1)
    h.log("t", 0, ["x", "a"])
    only(check(h.history()))


def test_read_and_final_log_disagreeing_is_inconsistent() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.send("q/0", "b", "info")
    h.poll("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, ["b", "a"])

    result = check(h.history())

    only(result, inconsistent_offsets=1, duplicate=1)
    values = example(result, "inconsistent_offsets")["values"]
    assert [(v["value"], v["sources"]) for v in values] == [
        ("a", ["poll by c/0 at 6.0"]),
        ("b", ["log"]),
    ]


def test_two_reads_agreeing_with_the_log_are_consistent() -> None:
    h = Builder()
    h.send("p/0", "a", "info")
    h.poll("c/0", [("t", 0, 0, "a")])
    h.poll("c/1", [("t", 0, 0, "a")])
    h.log("t", 0, ["a"])
    only(check(h.history()))


# -- property: clean histories are clean, one injected duplicate is found ----------------------
# A clean history: each process's values land in invocation order, every ok send acknowledged
# at its true offset; fail sends and some info sends never land, the other info sends land once.


@st.composite
def clean_histories(draw: st.DrawFn) -> History:
    processes = draw(st.integers(1, 3))
    partitions = draw(st.integers(1, 3))
    plan = draw(
        st.lists(
            st.tuples(
                st.integers(0, processes - 1),
                st.integers(0, partitions - 1),
                st.integers(0, 2),
                st.sampled_from(["ok", "ok", "ok", "info", "info, never landed", "fail"]),
            ),
            max_size=30,
        )
    )
    h = Builder()
    logs: dict[int, dict[int, str]] = {p: {} for p in range(partitions)}
    next_offset = dict.fromkeys(range(partitions), 0)
    for number, (process, partition, gap, outcome) in enumerate(plan):
        value = f"v{number}"
        if outcome in ("fail", "info, never landed"):
            h.send(f"p{process}/0", value, outcome[:4], partition=partition)
            continue
        offset = next_offset[partition] + gap  # gaps: compaction, transaction markers
        next_offset[partition] = offset + 1
        h.send(f"p{process}/0", value, outcome, partition=partition, offset=offset)
        logs[partition][offset] = value
    for partition, placed in logs.items():
        records = sorted(placed.items())
        start = draw(st.integers(0, len(records)))
        end = draw(st.integers(start, len(records)))
        h.poll("c/0", [("t", partition, offset, value) for offset, value in records[start:end]])
    for partition, placed in logs.items():
        h.log("t", partition, placed)
    return h.history()


@settings(max_examples=200, deadline=None)
@given(clean_histories(), st.data())
def test_clean_histories_have_no_anomalies_until_a_duplicate_is_injected(
    history: History, data: st.DataObject
) -> None:
    only(check(history))

    landed = [(key, record) for key, log in history.logs.items() for record in log]
    if not landed:
        return
    (topic, partition), original = data.draw(st.sampled_from(landed))
    log = history.logs[topic, partition]
    used = {record.offset for record in log}
    free = [o for o in range(original.offset + 1, log[-1].offset + 2) if o not in used]
    copy_at = data.draw(st.sampled_from(free))
    log.append(LogRecord(copy_at, original.value))
    log.sort(key=lambda record: record.offset)

    result = check(history)

    only(result, duplicate=1)
    found = example(result, "duplicate")
    assert found["value"] == original.value
    assert offsets(found["positions"]) == [
        (topic, partition, original.offset),
        (topic, partition, copy_at),
    ]


# -- logs whose head was deleted (retention, DeleteRecords) -----------------------------------


def test_a_write_acknowledged_below_the_log_start_is_not_lost() -> None:
    """The final log starts at 5: a write acknowledged at 2 may have been deleted with its
    head; one acknowledged at 6 and missing is lost, and so is one at 5."""
    h = Builder()
    h.send("p/0", "old", offset=2)
    h.send("p/0", "first", offset=5)
    h.send("p/0", "kept", offset=6)
    h.send("p/0", "gone", offset=7)
    h.log("t", 0, {6: "kept"}, log_start_offset=5)
    result = check(h.history())
    only(result, lost_write=2, unseen=1)
    assert sorted(e["value"] for e in result.anomalies["lost_write"].examples) == ["first", "gone"]
    assert example(result, "unseen")["value"] == "old"


def test_a_write_at_an_unknown_offset_of_a_log_with_a_deleted_head_is_not_judged_lost() -> None:
    h = Builder()
    h.send("p/0", "a", offset=None)  # acknowledged, offset unknown (acks=0)
    h.send("p/0", "b", partition=None, offset=None)
    h.log("t", 0, {9: "c"}, log_start_offset=9)
    only(check(h.history()), unseen=2)
    # The same history with the log starting at 0: both are lost.
    h = Builder()
    h.send("p/0", "a", offset=None)
    h.send("p/0", "b", partition=None, offset=None)
    h.log("t", 0, {9: "c"})
    only(check(h.history()), lost_write=2)
