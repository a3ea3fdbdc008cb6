"""Cases of Jepsen's checker tests (jepsen/test/jepsen/tests/kafka_test.clj), transcribed to
EDN histories, with eosim's classification. docs/history-format.md ("Jepsen histories") lists
each case with Jepsen's classification, and why eosim's differs where it does."""

from __future__ import annotations

import pytest
from eosim.analysis.checks import check_history
from eosim.analysis.jepsen import parse_jepsen_history


def o(index: int, process: int, type_: str, f: str, value: str) -> str:
    """kafka_test.clj's `o` shorthand: time equals index."""
    head = f"{{:index {index}, :time {index}, :process {process}"
    return f"{head}, :type :{type_}, :f :{f}, :value {value}}}"


CASES = {
    # deftest name / testing name: (ops, eosim's nonzero anomaly counts)
    "g1a-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 2] [:send :y 3]]"),
            o(1, 0, "fail", "send", "[[:send :x 2] [:send :y 3]]"),
            o(2, 1, "invoke", "poll", "[[:poll]]"),
            o(3, 1, "ok", "poll", "[[:poll {:x [[0 2]]}]]"),
        ],
        {"aborted_read": 1},
    ),
    "version-orders-test/real-world": (
        [
            o(0, 379, "invoke", "send", "[[:send 11 641]]"),
            o(1, 379, "ok", "send", "[[:send 11 [537 641]]]"),
            o(2, 363, "invoke", "send", "[[:send 11 645]]"),
            o(3, 363, "ok", "send", "[[:send 11 [537 645]]]"),
        ],
        {"inconsistent_offsets": 1, "unseen": 2},
    ),
    "inconsistent-offsets-test/info-without-read": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
            o(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
            o(2, 1, "invoke", "send", "[[:send :x 2]]"),
            o(3, 1, "ok", "send", "[[:send :x [0 2]]]"),
        ],
        {"unseen": 1},
    ),
    "lost-write-test/consistent": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a]]"),
            o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
            o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :d]]"),
            o(3, 0, "ok", "send", "[[:send :x [1 :b]] [:send :x [3 :d]]]"),
            o(4, 1, "invoke", "send", "[[:send :x :c]]"),
            o(5, 1, "info", "send", "[[:send :x :c]]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:x [[2 :c]]}]]"),
        ],
        {"lost_write": 2, "unseen": 1},
    ),
    "nonmonotonic-poll-test/together": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
            o(1, 0, "ok", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
            o(2, 0, "invoke", "poll", "[[:poll]]"),
            o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b], [3 :c]]}]]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b], [3 :c], [4 :d]]}]]"),
        ],
        {"nonmonotonic_poll": 1},
    ),
    "nonmonotonic-poll-test/assign-y": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
            o(1, 0, "ok", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
            o(2, 0, "invoke", "poll", "[[:poll]]"),
            o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b], [3 :c]]}]]"),
            o(4, 0, "invoke", "assign", "[:y]"),
            o(5, 0, "ok", "assign", "[:y]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b], [3 :c], [4 :d]]}]]"),
        ],
        {},
    ),
    "nonmonotonic-send-test/together": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
            o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
            o(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
            o(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
        ],
        {"nonmonotonic_send": 2, "unseen": 4},
    ),
    "nonmonotonic-send-test/info-assign-y": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
            o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
            o(2, 0, "invoke", "assign", "[:y]"),
            o(3, 0, "info", "assign", "[:y]"),
            o(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
            o(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
        ],
        {"unseen": 4},
    ),
    "duplicate-test/basic": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 :a]]]"),
            o(2, 1, "invoke", "send", "[[:send :x :b]]"),
            o(3, 1, "info", "send", "[[:send :x :b]]"),
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :a]]}]]"),
        ],
        {"duplicate": 1},
    ),
    "g0-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :a]]"),
            o(1, 1, "invoke", "send", "[[:send :x :b] [:send :y :b]]"),
            o(2, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
            o(3, 1, "ok", "send", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
        ],
        {"duplicate": 2, "unseen": 4},
    ),
    "g1c-pure-wr-test": (
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 1, "invoke", "txn", "[[:send :y :b] [:poll]]"),
            o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"),
            o(3, 1, "ok", "txn", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"),
        ],
        {},
    ),
    "precommitted-read-test": (
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:x [[0 :a]]}]]"),
        ],
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jepsen_checker_case(name):
    ops, expected = CASES[name]
    result = check_history(parse_jepsen_history("\n".join(ops)))
    assert {n: a.count for n, a in result.anomalies.items() if a.count} == expected
