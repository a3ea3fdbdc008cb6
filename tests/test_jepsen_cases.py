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


# kafka_test.clj's fixtures, shared by several of its `testing` blocks.
POLL_SKIP = {
    "poll-1-2": (
        o(0, 0, "invoke", "poll", "[[:poll]]"),
        o(1, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b]]}]]"),
    ),
    "poll-3": (
        o(2, 1, "invoke", "poll", "[[:poll]]"),
        o(3, 1, "ok", "poll", "[[:poll {:x [[3 :c]]}]]"),
    ),
    "poll-4": (
        o(6, 0, "invoke", "poll", "[[:poll]]"),
        o(7, 0, "ok", "poll", "[[:poll {:x [[4 :d]]}]]"),
    ),
    "write-6": (
        o(10, 2, "invoke", "send", "[[:send :x :f]]"),
        o(11, 2, "ok", "send", "[[:send :x [6 :f]]]"),
    ),
    "poll-7": (
        o(12, 0, "invoke", "poll", "[[:poll]]"),
        o(13, 0, "ok", "poll", "[[:poll {:x [[7 :g]]}]]"),
    ),
    "write-*": (
        o(
            14,
            3,
            "invoke",
            "send",
            "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d] [:send :x :g]]",
        ),
        o(
            15,
            3,
            "info",
            "send",
            "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d] [:send :x :g]]",
        ),
    ),
    "sub-xy": (o(4, 0, "invoke", "subscribe", "[:x :y]"), o(5, 0, "ok", "subscribe", "[:x :y]")),
    "assign-xy": (o(8, 0, "invoke", "assign", "[:x :y]"), o(9, 0, "ok", "assign", "[:x :y]")),
    "sub-y": (o(4, 0, "invoke", "subscribe", "[:y]"), o(5, 0, "ok", "subscribe", "[:y]")),
    "assign-y": (o(8, 0, "invoke", "assign", "[:y]"), o(9, 0, "info", "assign", "[:y]")),
}


def poll_skip(*names: str) -> list[str]:
    return [line for name in names for line in POLL_SKIP[name]]


SEND_0_5 = [
    o(0, 0, "invoke", "send", "[" + " ".join(f"[:send :x {i}]" for i in range(6)) + "]"),
    o(1, 0, "ok", "send", "[" + " ".join(f"[:send :x [{i} {i}]]" for i in range(6)) + "]"),
    o(1, 1, "invoke", "txn", "[[:poll]]"),
    o(2, 1, "ok", "txn", "[[:poll {:x [[0 0]]}]]"),
    o(3, 1, "invoke", "txn", "[[:poll]]"),
    o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
]
NM_POLL = [
    o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
    o(1, 0, "ok", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
    o(2, 0, "invoke", "poll", "[[:poll]]"),
    o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [2 :b], [3 :c]]}]]"),
]
NM_POLL_234 = [
    o(6, 0, "invoke", "poll", "[[:poll]]"),
    o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b], [3 :c], [4 :d]]}]]"),
]
NM_SEND_34 = [
    o(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
    o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
]
NM_SEND_12 = [
    o(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
    o(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
]


def assign(i: int, f: str, keys: str, type_: str = "ok") -> list[str]:
    return [o(i, 0, "invoke", f, keys), o(i + 1, 0, type_, f, keys)]


def hash_insensitive() -> list[str]:
    ops = []
    for n, value in enumerate(range(10)):
        i = 4 * n
        ops += [
            o(i, 0, "invoke", "send", f"[[:send :x {value}]]"),
            o(i + 1, 0, "ok", "send", f"[[:send :x [0 {value}]]]"),
            o(i + 2, 1, "invoke", "poll", "[[:poll]]"),
            o(i + 3, 1, "ok", "poll", f"[[:poll {{:x [[1 {value}]]}}]]"),
        ]
    return ops


INCONSISTENT_INFO = [
    o(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
    o(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
    o(2, 1, "invoke", "send", "[[:send :x 2]]"),
    o(3, 1, "ok", "send", "[[:send :x [0 2]]]"),
]
LOST_ATOMIC = {
    "send-ab": [
        o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
        o(1, 0, "info", "send", "[[:send :x :a] [:send :y [0 :b]]]"),
    ],
    "send-c": [
        o(2, 1, "invoke", "send", "[[:send :y :c]]"),
        o(3, 1, "info", "send", "[[:send :y :c]]"),
    ],
    "poll-a": [
        o(4, 2, "invoke", "poll", "[[:poll]]"),
        o(5, 2, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
    ],
    "poll-c": [
        o(6, 3, "invoke", "poll", "[[:poll]]"),
        o(7, 3, "ok", "poll", "[[:poll {:y [[1 :c]]}]]"),
    ],
}


def atomic(*names: str) -> list[str]:
    return [line for name in names for line in LOST_ATOMIC[name]]


# deftest name / testing name: (ops, Jepsen's classification, eosim's nonzero anomaly counts).
# docs/history-format.md ("Jepsen histories") says why where the two differ.
CASES = {
    "version-orders-test": (
        [
            o(0, 0, "invoke", "txn", "[[:poll]]"),
            o(1, 0, "ok", "txn", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
            o(2, 1, "invoke", "txn", "[[:send :x :c] [:send :x :b] [:send :x :d]]"),
            o(3, 1, "info", "txn", "[[:send :x [1 :c]] [:send :x [3 :b]] [:send :x [4 :d]]]"),
        ],
        "inconsistent offset 1 (b, c); the info txn's offsets count, as b was read",
        {"inconsistent_offsets": 1, "duplicate": 1, "lost_write": 1},
    ),
    "version-orders-test/real-world": (
        [
            o(0, 379, "invoke", "send", "[[:send 11 641]]"),
            o(1, 379, "ok", "send", "[[:send 11 [537 641]]]"),
            o(2, 363, "invoke", "send", "[[:send 11 645]]"),
            o(3, 363, "ok", "send", "[[:send 11 [537 645]]]"),
        ],
        "inconsistent offset 537",
        {"inconsistent_offsets": 1, "unseen": 2},
    ),
    "inconsistent-offsets-test/info-without-read": (
        INCONSISTENT_INFO,
        "none",
        {"unseen": 1},
    ),
    "inconsistent-offsets-test/info-with-read": (
        [
            *INCONSISTENT_INFO,
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:y [[5 1]]}]]"),
        ],
        "inconsistent offset 0 of x (1, 2)",
        {"inconsistent_offsets": 1, "unseen": 1},
    ),
    "g1a-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 2] [:send :y 3]]"),
            o(1, 0, "fail", "send", "[[:send :x 2] [:send :y 3]]"),
            o(2, 1, "invoke", "poll", "[[:poll]]"),
            o(3, 1, "ok", "poll", "[[:poll {:x [[0 2]]}]]"),
        ],
        "G1a",
        {"aborted_read": 1},
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
        "lost a, b",
        {"lost_write": 2, "unseen": 1},
    ),
    "lost-write-test/inconsistent": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a]]"),
            o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
            o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :c]]"),
            o(3, 0, "ok", "send", "[[:send :x [0 :b]] [:send :x [2 :c]]]"),
            o(4, 0, "invoke", "poll", "[[:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[0 :b] [2 :c]]}]]"),
        ],
        "lost a (and inconsistent offset 0)",
        {"lost_write": 1, "inconsistent_offsets": 1, "nonmonotonic_send": 1},
    ),
    "lost-write-test/atomic-without-poll-of-a": (
        atomic("send-ab", "send-c", "poll-c"),
        "none",
        {},
    ),
    "lost-write-test/atomic": (
        atomic("send-ab", "send-c", "poll-a", "poll-c"),
        "lost b",
        {"lost_write": 1},
    ),
    "poll-skip-test": (
        poll_skip("poll-1-2", "poll-3", "poll-4", "write-6", "poll-7", "write-*"),
        "skips of c and of f (and lost f, which no ok poll read)",
        {"poll_skip": 2, "lost_write": 1},
    ),
    "poll-skip-test/subscribe-y-assign-y": (
        poll_skip(
            "poll-1-2", "poll-3", "sub-y", "poll-4", "assign-y", "write-6", "poll-7", "write-*"
        ),
        "no skip (lost f)",
        {"lost_write": 1},
    ),
    "poll-skip-test/subscribe-xy-assign-xy": (
        poll_skip(
            "poll-1-2", "poll-3", "sub-xy", "poll-4", "assign-xy", "write-6", "poll-7", "write-*"
        ),
        "skips of c and of f (lost f)",
        {"poll_skip": 2, "lost_write": 1},
    ),
    "poll-skip-test/txn-abort-good": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 0] [:send :x 1] [:send :x 2]]"),
            o(1, 0, "ok", "send", "[[:send :x [0 0]] [:send :x [1 1]] [:send :x [2 2]]]"),
            o(1, 1, "invoke", "txn", "[[:poll]]"),
            o(2, 1, "ok", "txn", "[[:poll {:x [[0 0]]}]]"),
            o(3, 1, "invoke", "txn", "[[:poll]]"),
            o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
            o(5, 1, "invoke", "txn", "[[:poll]]"),
            o(6, 1, "info", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
            o(7, 1, "invoke", "txn", "[[:poll]]"),
            o(8, 1, "ok", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
        ],
        "none",
        {},
    ),
    "poll-skip-test/txn-abort-doesnt-roll-back": (
        [
            *SEND_0_5,
            o(5, 1, "invoke", "txn", "[[:poll]]"),
            o(6, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
            o(7, 1, "invoke", "txn", "[[:poll]]"),
            o(8, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]"),
        ],
        "two skips: of 1 2, of 1 2 3 4 (lost 1-4: no ok poll read them)",
        {"poll_skip": 2, "lost_write": 4},
    ),
    "poll-skip-test/txn-info-can-be-a-poll-skip": (
        [
            *SEND_0_5,
            o(5, 1, "invoke", "txn", "[[:poll]]"),
            o(6, 1, "info", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
        ],
        "skip of 1 2",
        {"poll_skip": 1, "unseen": 5},
    ),
    "nonmonotonic-poll-test/together": (
        [*NM_POLL, *NM_POLL_234],
        "nonmonotonic",
        {"nonmonotonic_poll": 1},
    ),
    "nonmonotonic-poll-test/subscribe-y": (
        [*NM_POLL, *assign(4, "subscribe", "[:y]"), *NM_POLL_234],
        "none",
        {},
    ),
    "nonmonotonic-poll-test/assign-y": (
        [*NM_POLL, *assign(4, "assign", "[:y]"), *NM_POLL_234],
        "none",
        {},
    ),
    "nonmonotonic-poll-test/subscribe-xy": (
        [*NM_POLL, *assign(4, "subscribe", "[:x :y]"), *NM_POLL_234],
        "nonmonotonic",
        {"nonmonotonic_poll": 1},
    ),
    "nonmonotonic-poll-test/assign-xy": (
        [*NM_POLL, *assign(4, "assign", "[:x :y]"), *NM_POLL_234],
        "nonmonotonic",
        {"nonmonotonic_poll": 1},
    ),
    "nonmonotonic-send-test/together": (
        [*NM_SEND_34, *NM_SEND_12],
        "nonmonotonic (d then a)",
        {"nonmonotonic_send": 1, "unseen": 4},
    ),
    "nonmonotonic-send-test/subscribe-y": (
        [*NM_SEND_34, *assign(2, "subscribe", "[:y]"), *NM_SEND_12],
        "none",
        {"unseen": 4},
    ),
    "nonmonotonic-send-test/info-assign-y": (
        [*NM_SEND_34, *assign(2, "assign", "[:y]", "info"), *NM_SEND_12],
        "none",
        {"unseen": 4},
    ),
    "nonmonotonic-send-test/subscribe-xy": (
        [*NM_SEND_34, *assign(2, "subscribe", "[:x :y]"), *NM_SEND_12],
        "nonmonotonic",
        {"nonmonotonic_send": 1, "unseen": 4},
    ),
    "nonmonotonic-send-test/assign-xy": (
        [*NM_SEND_34, *assign(2, "assign", "[:x :y]"), *NM_SEND_12],
        "nonmonotonic",
        {"nonmonotonic_send": 1, "unseen": 4},
    ),
    "int-poll-skip-test": (
        [
            o(0, 1, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
            o(1, 1, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
            o(2, 0, "invoke", "poll", "[[:poll]]"),
            o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a], [4 :d]]}]]"),
            o(4, 0, "invoke", "poll", "[[:poll] [:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[1 :a]]}] [:poll {:x [[4 :d]]}]]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b]]}]]"),
        ],
        "two internal skips of b (and, between ops, two nonmonotonic polls)",
        {"int_poll_skip": 2, "nonmonotonic_poll": 2},
    ),
    "int-send-skip-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :c]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x :c]]"),
            o(2, 1, "invoke", "send", "[[:send :x :b]]"),
            o(3, 1, "info", "send", "[[:send :x :b]]"),
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}]]"),
        ],
        "internal send skip of b (an error type Jepsen always allows); lost a",
        {"lost_write": 1},
    ),
    "int-nonmonotonic-poll-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
            o(1, 0, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
            o(2, 0, "invoke", "poll", "[[:poll]]"),
            o(3, 0, "ok", "poll", "[[:poll {:x [[3 :c] [1 :a]]}]]"),
            o(4, 0, "invoke", "poll", "[[:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}] [:poll {:x [[3 :c]]}]]"),
        ],
        "two internal nonmonotonic polls (c then a, c then c)",
        {"int_nonmonotonic_poll": 2},
    ),
    "int-nonmonotonic-send-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 3] [:send :x 1]]"),
            o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [1 :a]]]"),
            o(2, 0, "invoke", "send", "[[:send :y :d] [:send :y :b]]"),
            o(3, 0, "info", "send", "[[:send :y :d] [:send :y :b]]"),
            o(4, 1, "invoke", "send", "[[:send :y :c]]"),
            o(5, 1, "info", "send", "[[:send :y :c]]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:y [[2 :b] [3 :c] [4 :d]]}]]"),
        ],
        "two internal nonmonotonic sends (c then a on x, d then b on y)",
        {"int_nonmonotonic_send": 2, "unseen": 2},
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
        "duplicate a at 1 and 3",
        {"duplicate": 1},
    ),
    "duplicate-test/hash-insensitive": (
        hash_insensitive(),
        "every value duplicate; inconsistent offsets 0 and 1",
        {
            "duplicate": 10,
            "inconsistent_offsets": 2,
            "nonmonotonic_send": 9,
            "nonmonotonic_poll": 9,
            "offset_rewrite": 1,
        },
    ),
    "duplicate-test/aborted-txns": (
        [
            o(0, 0, "invoke", "send", "[[:send :x 0]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 0]]]"),
            o(2, 0, "invoke", "send", "[[:send :x 1]]"),
            o(3, 0, "fail", "send", "[[:send :x [2 1]]]"),
            o(4, 1, "invoke", "poll", "[[:poll]]"),
            o(5, 1, "fail", "poll", "[[:poll {:x [[11 0] [12 1]]}]]"),
        ],
        "duplicate 0 at 1 and 11 (not 1: its write failed)",
        {"duplicate": 1, "unseen": 1},
    ),
    "unseen-test": (
        [
            o(0, 0, "invoke", "poll", "[[:poll]]"),
            o(1, 0, "ok", "poll", "[[:poll {}]]"),
            o(2, 0, "invoke", "send", "[[:send :x :a] [:send :x :b]]"),
            o(3, 0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]]]"),
            o(4, 0, "invoke", "poll", "[[:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
            o(6, 0, "invoke", "poll", "[[:poll]]"),
            o(7, 0, "ok", "poll", "[[:poll {:x [[1 :b]]}]]"),
        ],
        "unseen: 0 at the end (a statistic)",
        {},
    ),
    "empty-history-test": (
        [o(0, 0, "invoke", "assign", "[:x]"), o(1, 0, "ok", "assign", "[:x]")],
        "invalid: nothing was read",
        {},
    ),
    "g0-test": (
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :a]]"),
            o(1, 1, "invoke", "send", "[[:send :x :b] [:send :y :b]]"),
            o(2, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
            o(3, 1, "ok", "send", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
        ],
        "G0 (with :ww-deps)",
        {"G0": 1, "unseen": 4},
    ),
    "g1c-pure-wr-test": (
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 1, "invoke", "txn", "[[:send :y :b] [:poll]]"),
            o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"),
            o(3, 1, "ok", "txn", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"),
        ],
        "G1c",
        {"G1c": 1},
    ),
    "g1c-ww-wr-test": (
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:send :y :c]]"),
            o(1, 1, "invoke", "txn", "[[:poll] [:send :y :b]]"),
            o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:send :y [2 :c]]]"),
            o(3, 1, "ok", "txn", "[[:poll {:x [[0 :a]]}] [:send :y [1 :b]]]"),
        ],
        "G1c (with :ww-deps)",
        {"G1c": 1, "unseen": 2},
    ),
    "precommitted-read-test": (
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:x [[0 :a]]}]]"),
        ],
        "precommitted read of a",
        {"precommitted_read": 1},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jepsen_checker_case(name):
    ops, _, expected = CASES[name]
    result = check_history(parse_jepsen_history("\n".join(ops)))
    assert {n: a.count for n, a in result.anomalies.items() if a.count} == expected
