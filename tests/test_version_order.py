"""Jepsen-style checks on histories without a final log (eosim.analysis.version_order): version
orders from acknowledged offsets and every poll, and the checks judged against them. Each
check on a history with the anomaly and one without; the rules are those of Jepsen's Kafka
checker (jepsen.tests.kafka: version-orders, poll-skip+nonmonotonic-cases,
int-poll-skip+nonmonotonic-cases, lost-write-cases)."""

from __future__ import annotations

from eosim.analysis.checks import ALL_ANOMALIES, check_history
from eosim.analysis.jepsen import parse_jepsen_history
from eosim.analysis.version_order import Analysis


def op(index: int, process: int, type_: str, f: str, value: str) -> str:
    return (
        f"{{:index {index}, :time {index}, :process {process}, :type :{type_}, :f :{f}, "
        f":value {value}}}"
    )


def txn(index: int, process: int, type_: str, f: str, invoked: str, done: str) -> list[str]:
    return [op(index, process, "invoke", f, invoked), op(index + 1, process, type_, f, done)]


def send(index: int, process: int, type_: str, done: str) -> list[str]:
    return txn(index, process, type_, "send", done, done)


def poll(index: int, process: int, type_: str, done: str, f: str = "poll") -> list[str]:
    return txn(index, process, type_, f, "[[:poll]]", done)


def judged(*ops: list[str]):
    history = parse_jepsen_history("\n".join(line for lines in ops for line in lines))
    return check_history(history)


def counts(*ops: list[str]) -> dict[str, int]:
    return {n: a.count for n, a in judged(*ops).anomalies.items() if a.count}


# -- version orders ---------------------------------------------------------------------------


def test_version_order_takes_acks_and_polls_of_every_outcome_and_committed_info_sends():
    history = parse_jepsen_history(
        "\n".join(
            [
                *send(0, 0, "ok", "[[:send 1 [0 :a]]]"),
                # an info send whose other write was read: its offsets count
                *send(2, 1, "info", "[[:send 1 [2 :c]] [:send 2 [0 :z]]]"),
                # a failed poll still says what the log holds
                *poll(4, 2, "fail", "[[:poll {1 [[1 :b]]}]]"),
                *poll(6, 3, "ok", "[[:poll {2 [[0 :z]]}]]"),
                # an info send nobody read: its offset is not taken
                *send(8, 4, "info", "[[:send 1 [5 :q]]]"),
            ]
        )
    )
    order = Analysis(history).order(("jepsen", 1))
    assert order.by_index == [":a", ":b", ":c"]
    assert order.offset_of == [0, 1, 2]
    assert order.by_value == {":a": 0, ":b": 1, ":c": 2}


def test_inconsistent_offsets_from_an_ack_and_a_poll():
    clash = counts(
        send(0, 0, "ok", "[[:send 1 [0 :a]]]"), poll(2, 1, "ok", "[[:poll {1 [[0 :b]]}]]")
    )
    assert clash["inconsistent_offsets"] == 1
    example = (
        judged(send(0, 0, "ok", "[[:send 1 [0 :a]]]"), poll(2, 1, "ok", "[[:poll {1 [[0 :b]]}]]"))
        .anomalies["inconsistent_offsets"]
        .examples[0]
    )
    assert example["offset"] == 0 and example["values"] == [":a", ":b"]
    agreeing = counts(
        send(0, 0, "ok", "[[:send 1 [0 :a]]]"), poll(2, 1, "ok", "[[:poll {1 [[0 :a]]}]]")
    )
    assert agreeing == {}


def test_values_are_identified_per_key():
    """One value sent to two keys is two values (Jepsen keys its version orders per key)."""
    two_keys = counts(
        send(0, 0, "ok", "[[:send 1 [0 :a]] [:send 2 [0 :a]]]"),
        poll(2, 1, "ok", "[[:poll {1 [[0 :a]] 2 [[0 :a]]}]]"),
    )
    assert two_keys == {}
    twice_in_one_key = counts(
        send(0, 0, "ok", "[[:send 1 [0 :a]]]"),
        poll(2, 1, "ok", "[[:poll {1 [[0 :a] [1 :a]]}]]"),
    )
    assert twice_in_one_key["duplicate"] == 1


# -- poll_skip, nonmonotonic_poll, lost_write ---------------------------------------------------


WRITES = send(0, 9, "ok", "[[:send 1 [0 :a]] [:send 1 [1 :b]] [:send 1 [2 :c]]]")


def test_poll_skip_over_an_offset_another_consumer_read():
    found = judged(
        send(0, 9, "info", "[[:send 1 :a] [:send 1 :b] [:send 1 :c]]"),
        poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
        poll(4, 1, "ok", "[[:poll {1 [[1 :b]]}]]"),  # another consumer read offset 1
        poll(6, 0, "ok", "[[:poll {1 [[2 :c]]}]]"),
    )
    skip = found.anomalies["poll_skip"]
    assert skip.count == 1
    assert skip.examples[0]["skipped"] == [":b"] and skip.examples[0]["delta"] == 2
    assert found.anomalies["lost_write"].count == 0  # :b was read, by process 1


def test_an_empty_read_of_a_key_leaves_no_position_to_skip_from():
    """As Jepsen's poll-skip+nonmonotonic-cases: an ok poll whose result names a key with no
    record becomes that key's last read, and a read of nothing has no last value, so the next
    poll of the key is not compared. Without the empty poll the same jump is a poll_skip."""
    skipping = [
        send(0, 9, "info", "[[:send 1 :a] [:send 1 :b] [:send 1 :c]]"),
        poll(2, 1, "ok", "[[:poll {1 [[1 :b]]}]]"),  # another consumer read offset 1
        poll(4, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
    ]
    later = poll(8, 0, "ok", "[[:poll {1 [[2 :c]]}]]")
    assert counts(*skipping, later) == {"poll_skip": 1}
    empty = poll(6, 0, "ok", "[[:poll {1 []}]]")
    assert counts(*skipping, empty, later) == {}
    # A poll that names no key at all leaves the position where it was.
    nothing = poll(6, 0, "ok", "[[:poll {}]]")
    assert counts(*skipping, nothing, later) == {"poll_skip": 1}


def test_no_poll_skip_when_nothing_says_the_gap_held_a_record():
    assert (
        counts(
            send(0, 9, "info", "[[:send 1 :a] [:send 1 :c]]"),
            poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
            poll(4, 0, "ok", "[[:poll {1 [[2 :c]]}]]"),  # offset 1 may be a gap (a marker)
        )
        == {}
    )


def test_poll_skip_over_an_acknowledged_offset_is_also_a_lost_write():
    assert counts(
        WRITES,
        poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
        poll(4, 0, "ok", "[[:poll {1 [[2 :c]]}]]"),
    ) == {"poll_skip": 1, "lost_write": 1}


def test_an_assignment_without_the_key_resets_expectations_but_a_failed_one_does_not():
    reread = (
        poll(2, 0, "ok", "[[:poll {1 [[0 :a] [1 :b]]}]]"),
        poll(8, 0, "ok", "[[:poll {1 [[0 :a]]}]]"),
    )
    assert counts(WRITES, reread[0], reread[1])["nonmonotonic_poll"] == 1
    dropped = txn(4, 0, "ok", "assign", "[2]", "[2]")
    assert "nonmonotonic_poll" not in counts(WRITES, reread[0], dropped, reread[1])
    subscribed = txn(4, 0, "info", "subscribe", "[2]", "[2]")
    assert "nonmonotonic_poll" not in counts(WRITES, reread[0], subscribed, reread[1])
    failed = txn(4, 0, "fail", "assign", "[2]", "[2]")
    assert counts(WRITES, reread[0], failed, reread[1])["nonmonotonic_poll"] == 1


def test_failed_and_info_polls_are_judged_but_do_not_move_the_position():
    """kafka_test.clj poll-skip-test "txn abort": an aborted consumer must rewind."""
    rewound = counts(
        WRITES,
        poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]", f="txn"),
        poll(4, 0, "fail", "[[:poll {1 [[1 :b]]}]]", f="txn"),
        poll(6, 0, "ok", "[[:poll {1 [[1 :b] [2 :c]]}]]", f="txn"),
    )
    assert rewound == {}
    not_rewound = judged(
        WRITES,
        poll(2, 0, "ok", "[[:poll {1 [[0 :a]]}]]", f="txn"),
        poll(4, 0, "fail", "[[:poll {1 [[1 :b]]}]]", f="txn"),
        poll(6, 0, "info", "[[:poll {1 [[2 :c]]}]]", f="txn"),
    )
    assert not_rewound.anomalies["poll_skip"].count == 1
    assert not_rewound.anomalies["poll_skip"].examples[0]["skipped"] == [":b"]


def test_an_info_sends_value_read_elsewhere_is_known_written():
    """kafka_test.clj lost-write-test "atomic": once :a is read, the info op committed, so its
    write of :b at 0 is lost when a read of :y reached offset 1 without it."""
    base = [
        send(0, 0, "info", "[[:send :x :a] [:send :y [0 :b]]]"),
        send(2, 1, "info", "[[:send :y :c]]"),
        poll(6, 3, "ok", "[[:poll {:y [[1 :c]]}]]"),
    ]
    assert counts(*base) == {}
    with_read = counts(*base, poll(4, 2, "ok", "[[:poll {:x [[0 :a]]}]]"))
    assert with_read == {"lost_write": 1}


# -- within one op ------------------------------------------------------------------------------


def test_a_value_twice_inside_one_poll_is_an_internal_nonmonotonic_poll():
    found = counts(WRITES, poll(2, 0, "ok", "[[:poll {1 [[0 :a] [1 :b]]} ] [:poll {1 [[1 :b]]}]]"))
    assert found["int_nonmonotonic_poll"] == 1
    assert counts(WRITES, poll(2, 0, "ok", "[[:poll {1 [[0 :a] [1 :b] [2 :c]]}]]")) == {}


def test_sends_out_of_order_inside_one_op():
    out_of_order = counts(send(0, 0, "ok", "[[:send 1 [1 :b]] [:send 1 [0 :a]]]"))
    assert out_of_order["int_nonmonotonic_send"] == 1
    assert "int_nonmonotonic_send" not in counts(
        send(0, 0, "ok", "[[:send 1 [0 :a]] [:send 1 [1 :b]]]")
    )


def test_the_new_names_are_registered_and_zero_for_eosim_histories():
    for name in ("int_poll_skip", "int_nonmonotonic_poll", "int_nonmonotonic_send", "G0", "G1c"):
        assert name in ALL_ANOMALIES
    from eosim.analysis.history import History

    result = check_history(History())
    assert list(result.anomalies) == list(ALL_ANOMALIES)
    assert all(a.count == 0 for a in result.anomalies.values())


def test_an_aborted_read_is_judged_per_key():
    """Jepsen's g1a-cases: the failed write of :a to key 1 is read; the same value sent to key
    2 by an ok op does not make the read of key 1 fine, nor is the read of key 2 aborted."""
    failed = send(0, 0, "fail", "[[:send 1 :a]]")
    ok = send(2, 1, "ok", "[[:send 2 [0 :a]]]")
    aborted = judged(failed, ok, poll(4, 2, "ok", "[[:poll {1 [[0 :a]]}]]")).anomalies
    assert aborted["aborted_read"].count == 1
    assert aborted["aborted_read"].examples[0]["partition"] == 1
    fine = counts(failed, ok, poll(4, 2, "ok", "[[:poll {2 [[0 :a]]}]]"))
    assert fine == {}
