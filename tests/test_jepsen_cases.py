"""Jepsen's own checker tests (jepsen/test/jepsen/tests/kafka_test.clj), each `testing` block
transcribed to an EDN history, with what kafka_test.clj asserts Jepsen finds, compared with what
eosim finds.

For every case:

* `jepsen`: the error maps kafka_test.clj asserts (one of Jepsen's error types, or several, or
  "no error at all"), in Jepsen's words: `key`, `value`, `offset`, `index`, `delta`, `skipped`,
  ops as (process, invocation :index, outcome). eosim must report exactly these, in the
  anomaly of the same meaning (`JEPSEN_NAMES`), with the same contents.
* `also`: anything else eosim reports, each with the reason. Either Jepsen's analysis reports it
  too (kafka_test.clj asserts one error type at a time, so its other findings are read from
  jepsen.tests.kafka's source, the function named; these come with their contents), or eosim
  departs from Jepsen on purpose (docs/history-format.md, "Where eosim departs from Jepsen").
* `unseen`: Jepsen's unseen messages at the end of the history (`jepsen.tests.kafka/unseen`:
  values sent by `ok` ops that no `ok` op polled, per key). eosim's `unseen` leaves out the
  writes it reports lost, so its unseen values and the `ok` writes it reports lost make up
  Jepsen's set exactly.

The helper-function tests (op->max-offsets, log->last-index->values, log->value->first-index)
and the generator test gen-poll-unseen have no classification to compare; realtime-lag-test's
lag statistics are not computed by eosim (a departure). So 38 cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from eosim.analysis import checker
from eosim.analysis.checks import check_history
from eosim.analysis.history import History
from eosim.analysis.jepsen import parse_jepsen_history
from eosim.analysis.version_order import Analysis


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


# -- Jepsen's error maps and eosim's examples in one form -------------------------------------

Op = tuple[str, "int | None", str]  # (process, the invocation's :index, outcome)


def op(process: int | str, index: int | None, type_: str) -> Op:
    return (str(process), index, type_)


def _op(summary: dict[str, Any] | None) -> Op | None:
    return None if summary is None else (summary["process"], summary["id"], summary["type"])


def _key(e: dict[str, Any]) -> str:
    """A Jepsen key as eosim's reader converts it: an integer key k is partition k of topic
    jepsen, any other key (`:x`) a topic of its own."""
    return str(e["partition"]) if e["topic"] == "jepsen" else e["topic"]


def _pair(e: dict[str, Any], *fields: str) -> dict[str, Any]:
    """An order pair (eosim.analysis.version_order) with the fields Jepsen's error type has."""
    found: dict[str, Any] = {"key": _key(e), "delta": e["delta"]}
    if "values" in fields:
        found["values"] = tuple(e["values"])
    if "skipped" in fields:
        found["skipped"] = tuple(e["skipped"])
    if "ops" in fields:
        found["ops"] = tuple(_op(o) for o in e["ops"])
    if "op" in fields:
        found["op"] = _op(e["op"])
    return found


def _cycle(e: dict[str, Any]) -> dict[str, Any]:
    steps = [(s["type"], _key(s), s["value"], s.get("value_after")) for s in e["steps"]]
    return rotated([_op(o) for o in e["cycle"]], steps)


def rotated(cycle: list[Any], steps: list[Any]) -> dict[str, Any]:
    """A cycle (first op repeated at the end) and its steps, started at its least op: Jepsen
    and eosim may start one cycle at different ops."""
    ring = cycle[:-1]
    start = min(range(len(ring)), key=lambda i: repr(ring[i]))
    ring = ring[start:] + ring[:start]
    return {"cycle": (*ring, ring[0]), "steps": tuple(steps[start:] + steps[:start])}


# Jepsen's error type -> (eosim's anomaly of the same meaning, its example in Jepsen's form).
JEPSEN_NAMES = {
    "inconsistent-offsets": (
        "inconsistent_offsets",
        lambda e: {
            "key": _key(e),
            "offset": e["offset"],
            "index": e["index"],
            "values": tuple(sorted(e["values"])),
        },
    ),
    "duplicate": (
        "duplicate",
        lambda e: {
            "key": _key(e["positions"][0]),
            "value": e["value"],
            "count": e["times_landed"],
            "offsets": tuple(p["offset"] for p in e["positions"]),
        },
    ),
    "lost-write": (
        "lost_write",
        lambda e: {
            "key": _key(e),
            "value": e["value"],
            "index": e["index"],
            "max-read-index": e["max_read_index"],
            "writer": _op(e["writer"]),
            "max-read": _op(e["max_read"]),
        },
    ),
    "poll-skip": ("poll_skip", lambda e: _pair(e, "skipped", "ops")),
    "nonmonotonic-poll": ("nonmonotonic_poll", lambda e: _pair(e, "values", "ops")),
    "nonmonotonic-send": ("nonmonotonic_send", lambda e: _pair(e, "values", "ops")),
    "int-poll-skip": ("int_poll_skip", lambda e: _pair(e, "values", "skipped", "op")),
    "int-nonmonotonic-poll": ("int_nonmonotonic_poll", lambda e: _pair(e, "values", "op")),
    "int-nonmonotonic-send": ("int_nonmonotonic_send", lambda e: _pair(e, "values", "op")),
    "precommitted-read": (
        "precommitted_read",
        lambda e: {"op": _op(e["op"]), "key": _key(e), "value": e["value"]},
    ),
    "G1a": (
        "aborted_read",
        lambda e: {
            "key": _key(e),
            "value": e["value"],
            "reader": _op(e["reader"]),
            "writer": _op(e["writer"]),
        },
    ),
    "G0": ("G0", _cycle),
    "G1c": ("G1c", _cycle),
}
EOSIM_NAMES = {name: jepsen for jepsen, (name, _) in JEPSEN_NAMES.items()}


def canon(errors: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(e.items())) for e in errors)


def lost(
    key: str, value: str, index: int, bound: int, writer: Op, max_read: Op | None
) -> dict[str, Any]:
    return {
        "key": key,
        "value": value,
        "index": index,
        "max-read-index": bound,
        "writer": writer,
        "max-read": max_read,
    }


@dataclass(frozen=True)
class Also:
    """Something eosim reports that kafka_test.clj does not assert, and why: `errors` in
    Jepsen's form when Jepsen's analysis reports the same (read from its source), else the
    `count` eosim reports by one of its departures."""

    why: str
    errors: list[dict[str, Any]] | None = None
    count: int | None = None


@dataclass(frozen=True)
class Case:
    ops: list[str]
    # Jepsen's error type -> the error maps kafka_test.clj asserts ([] for "none"); a type
    # absent here is one the test does not look at.
    jepsen: dict[str, list[dict[str, Any]]]
    # eosim anomaly -> what else eosim reports, and why.
    also: dict[str, Also] = field(default_factory=dict)
    # Jepsen's unseen messages at the end: key -> values.
    unseen: dict[str, set[str]] = field(default_factory=dict)
    # kafka_test.clj asserts that the analysis has no error of any type.
    no_errors: bool = False
    # Jepsen's findings eosim is designed not to report as Jepsen does: type -> why.
    differs: dict[str, str] = field(default_factory=dict)


# Reasons, for what eosim reports beyond what a case asserts.
LOST = "Jepsen's lost-write-cases reports it too (kafka_test.clj asserts another error type)"
BY_OFFSET = (
    "departure: eosim places a send or a read at the offset its op reports, Jepsen by its "
    "value, whose index is arbitrary when it is at several offsets; a send acknowledged at the "
    "offset of its process's previous send, or a re-read of one offset, is nonmonotonic"
)
REWRITE = (
    "departure: eosim's offset_rewrite (a position read, then read with another value) also runs"
)
INT_SEND_SKIP = (
    "Jepsen's analysis reports int-send-skip, but its checker always allows it (transaction "
    "writes interleave in Kafka: allowed-error-types); eosim does not report it"
)
EMPTY = (
    "Jepsen's Kafka checker calls the history invalid (Elle's :empty-transaction-graph, not one "
    "of its allowed-error-types); eosim says unknown, nothing to check (exit 3), as Elle itself "
    "classifies an empty transaction graph (unknown-anomaly-types): neither calls it valid"
)

X = ":x"
Y = ":y"
POLL_SKIP_ERRS = [
    {"key": X, "delta": 2, "skipped": (":c",), "ops": (op(0, 0, "ok"), op(0, 6, "ok"))},
    {"key": X, "delta": 2, "skipped": (":f",), "ops": (op(0, 6, "ok"), op(0, 12, "ok"))},
]
POLL_SKIP_LOST_F = Also(LOST, [lost(X, ":f", 4, 5, op(2, 10, "ok"), op(0, 12, "ok"))])
NM_POLL_ERRS = [
    {"key": X, "values": (":c", ":b"), "delta": -1, "ops": (op(0, 2, "ok"), op(0, 6, "ok"))}
]
NM_SEND_ERRS = [
    {"key": X, "values": (":d", ":a"), "delta": -3, "ops": (op(0, 0, "ok"), op(0, 10, "ok"))}
]
NM_SEND_UNSEEN = {X: {":a", ":b", ":c", ":d"}}


def every_value_twice() -> list[dict[str, Any]]:
    return [{"key": X, "value": str(v), "count": 2, "offsets": (0, 1)} for v in range(10)]


ALL_TEN = tuple(sorted(str(v) for v in range(10)))

CASES: dict[str, Case] = {
    # Jepsen's ops here have no :process, :index or :time, and no invocations.
    "version-orders-test": Case(
        [
            "{:type :ok, :f :txn, :value [[:poll {:x [[0 :a] [1 :b]]}]]}",
            "{:type :info, :f :txn, "
            ":value [[:send :x [1 :c]] [:send :x [3 :b]] [:send :x [4 :d]]]}",
        ],
        {"inconsistent-offsets": [{"key": X, "index": 1, "offset": 1, "values": (":b", ":c")}]},
        {
            "duplicate": Also(
                "Jepsen's duplicate-cases reports it too: b is in the :log at offsets 1 and 3",
                [{"key": X, "value": ":b", "count": 2, "offsets": (1, 3)}],
            ),
            "lost_write": Also(
                LOST + ": the bound is b's first index, 1, c's last index is 1, no ok op read "
                "it, and its info writer must have committed (its b was read); no op read c, "
                "so there is no max-read",
                [lost(X, ":c", 1, 1, op("nil", None, "info"), None)],
            ),
        },
    ),
    "version-orders-test/real-world": Case(
        [
            o(0, 379, "invoke", "send", "[[:send 11 641]]"),
            o(1, 379, "ok", "send", "[[:send 11 [537 641]]]"),
            o(2, 363, "invoke", "send", "[[:send 11 645]]"),
            o(3, 363, "ok", "send", "[[:send 11 [537 645]]]"),
        ],
        {
            "inconsistent-offsets": [
                {"key": "11", "index": 0, "offset": 537, "values": ("641", "645")}
            ]
        },
        unseen={"11": {"641", "645"}},
    ),
    "inconsistent-offsets-test/info-without-read": Case(
        INCONSISTENT_INFO, {"inconsistent-offsets": []}, unseen={X: {"2"}}
    ),
    "inconsistent-offsets-test/info-with-read": Case(
        [
            *INCONSISTENT_INFO,
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:y [[5 1]]}]]"),
        ],
        {"inconsistent-offsets": [{"key": X, "index": 0, "offset": 0, "values": ("1", "2")}]},
        unseen={X: {"2"}},
    ),
    "g1a-test": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x 2] [:send :y 3]]"),
            o(1, 0, "fail", "send", "[[:send :x 2] [:send :y 3]]"),
            o(2, 1, "invoke", "poll", "[[:poll]]"),
            o(3, 1, "ok", "poll", "[[:poll {:x [[0 2]]}]]"),
        ],
        {"G1a": [{"key": X, "value": "2", "reader": op(1, 2, "ok"), "writer": op(0, 0, "fail")}]},
    ),
    "lost-write-test/consistent": Case(
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
        {
            "lost-write": [
                lost(X, ":a", 0, 2, op(0, 0, "ok"), op(0, 6, "ok")),
                lost(X, ":b", 1, 2, op(0, 2, "ok"), op(0, 6, "ok")),
            ]
        },
        unseen={X: {":a", ":b", ":d"}},
    ),
    "lost-write-test/inconsistent": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x :a]]"),
            o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
            o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :c]]"),
            o(3, 0, "ok", "send", "[[:send :x [0 :b]] [:send :x [2 :c]]]"),
            o(4, 0, "invoke", "poll", "[[:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[0 :b] [2 :c]]}]]"),
        ],
        {"lost-write": [lost(X, ":a", 0, 1, op(0, 0, "ok"), op(0, 4, "ok"))]},
        {
            "inconsistent_offsets": Also(
                "Jepsen's version-orders reports it too: a and b were both sent to offset 0",
                [{"key": X, "offset": 0, "index": 0, "values": (":a", ":b")}],
            ),
            "nonmonotonic_send": Also(BY_OFFSET + " (b after a, both at 0)", count=1),
        },
        unseen={X: {":a"}},
    ),
    "lost-write-test/atomic-without-poll-of-a": Case(
        atomic("send-ab", "send-c", "poll-c"), {"lost-write": []}
    ),
    "lost-write-test/atomic": Case(
        atomic("send-ab", "send-c", "poll-a", "poll-c"),
        {"lost-write": [lost(Y, ":b", 0, 1, op(0, 0, "info"), op(3, 6, "ok"))]},
    ),
    "poll-skip-test": Case(
        poll_skip("poll-1-2", "poll-3", "poll-4", "write-6", "poll-7", "write-*"),
        {"poll-skip": POLL_SKIP_ERRS},
        {"lost_write": POLL_SKIP_LOST_F},
        unseen={X: {":f"}},
    ),
    "poll-skip-test/subscribe-y-assign-y": Case(
        poll_skip(
            "poll-1-2", "poll-3", "sub-y", "poll-4", "assign-y", "write-6", "poll-7", "write-*"
        ),
        {"poll-skip": []},
        {"lost_write": POLL_SKIP_LOST_F},
        unseen={X: {":f"}},
    ),
    "poll-skip-test/subscribe-xy-assign-xy": Case(
        poll_skip(
            "poll-1-2", "poll-3", "sub-xy", "poll-4", "assign-xy", "write-6", "poll-7", "write-*"
        ),
        {"poll-skip": POLL_SKIP_ERRS},
        {"lost_write": POLL_SKIP_LOST_F},
        unseen={X: {":f"}},
    ),
    "poll-skip-test/txn-abort-good": Case(
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
        {},
        no_errors=True,
    ),
    # (h 3), (h 7) and (h 9) of kafka_test.clj: the ok poll of 0 (invoked at index 1), the
    # failed poll of 3 and 4 (index 5) and the ok poll of 5 (index 7), all of process 1.
    "poll-skip-test/txn-abort-doesnt-roll-back": Case(
        [
            *SEND_0_5,
            o(5, 1, "invoke", "txn", "[[:poll]]"),
            o(6, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
            o(7, 1, "invoke", "txn", "[[:poll]]"),
            o(8, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]"),
        ],
        {
            "poll-skip": [
                {
                    "key": X,
                    "delta": 3,
                    "skipped": ("1", "2"),
                    "ops": (op(1, 1, "ok"), op(1, 5, "fail")),
                },
                {
                    "key": X,
                    "delta": 5,
                    "skipped": ("1", "2", "3", "4"),
                    "ops": (op(1, 1, "ok"), op(1, 7, "ok")),
                },
            ]
        },
        {
            "lost_write": Also(
                LOST + ": only 0 and 5 were read by ok ops, and 5's index bounds them",
                [lost(X, str(v), v, 5, op(0, 0, "ok"), op(1, 7, "ok")) for v in (1, 2, 3, 4)],
            )
        },
        unseen={X: {"1", "2", "3", "4"}},
    ),
    "poll-skip-test/txn-info-can-be-a-poll-skip": Case(
        [
            *SEND_0_5,
            o(5, 1, "invoke", "txn", "[[:poll]]"),
            o(6, 1, "info", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
        ],
        {
            "poll-skip": [
                {
                    "key": X,
                    "delta": 3,
                    "skipped": ("1", "2"),
                    "ops": (op(1, 1, "ok"), op(1, 5, "info")),
                }
            ]
        },
        unseen={X: {"1", "2", "3", "4", "5"}},
    ),
    "nonmonotonic-poll-test/together": Case(
        [*NM_POLL, *NM_POLL_234], {"nonmonotonic-poll": NM_POLL_ERRS}
    ),
    "nonmonotonic-poll-test/subscribe-y": Case(
        [*NM_POLL, *assign(4, "subscribe", "[:y]"), *NM_POLL_234], {"nonmonotonic-poll": []}
    ),
    "nonmonotonic-poll-test/assign-y": Case(
        [*NM_POLL, *assign(4, "assign", "[:y]"), *NM_POLL_234], {"nonmonotonic-poll": []}
    ),
    "nonmonotonic-poll-test/subscribe-xy": Case(
        [*NM_POLL, *assign(4, "subscribe", "[:x :y]"), *NM_POLL_234],
        {"nonmonotonic-poll": NM_POLL_ERRS},
    ),
    "nonmonotonic-poll-test/assign-xy": Case(
        [*NM_POLL, *assign(4, "assign", "[:x :y]"), *NM_POLL_234],
        {"nonmonotonic-poll": NM_POLL_ERRS},
    ),
    "nonmonotonic-send-test/together": Case(
        [*NM_SEND_34, *NM_SEND_12], {"nonmonotonic-send": NM_SEND_ERRS}, unseen=NM_SEND_UNSEEN
    ),
    "nonmonotonic-send-test/subscribe-y": Case(
        [*NM_SEND_34, *assign(2, "subscribe", "[:y]"), *NM_SEND_12],
        {"nonmonotonic-send": []},
        unseen=NM_SEND_UNSEEN,
    ),
    "nonmonotonic-send-test/info-assign-y": Case(
        [*NM_SEND_34, *assign(2, "assign", "[:y]", "info"), *NM_SEND_12],
        {"nonmonotonic-send": []},
        unseen=NM_SEND_UNSEEN,
    ),
    "nonmonotonic-send-test/subscribe-xy": Case(
        [*NM_SEND_34, *assign(2, "subscribe", "[:x :y]"), *NM_SEND_12],
        {"nonmonotonic-send": NM_SEND_ERRS},
        unseen=NM_SEND_UNSEEN,
    ),
    "nonmonotonic-send-test/assign-xy": Case(
        [*NM_SEND_34, *assign(2, "assign", "[:x :y]"), *NM_SEND_12],
        {"nonmonotonic-send": NM_SEND_ERRS},
        unseen=NM_SEND_UNSEEN,
    ),
    "int-poll-skip-test": Case(
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
        {
            "int-poll-skip": [
                {
                    "key": X,
                    "values": (":a", ":d"),
                    "skipped": (":b",),
                    "delta": 2,
                    "op": op(0, 2, "ok"),
                },
                {
                    "key": X,
                    "values": (":a", ":d"),
                    "skipped": (":b",),
                    "delta": 2,
                    "op": op(0, 4, "ok"),
                },
            ]
        },
        {
            "nonmonotonic_poll": Also(
                "Jepsen's poll-skip+nonmonotonic-cases reports them too: each op starts before "
                "where process 0's previous one ended (a after d, b after d)",
                [
                    {
                        "key": X,
                        "values": (":d", ":a"),
                        "delta": -2,
                        "ops": (op(0, 2, "ok"), op(0, 4, "ok")),
                    },
                    {
                        "key": X,
                        "values": (":d", ":b"),
                        "delta": -1,
                        "ops": (op(0, 4, "ok"), op(0, 6, "ok")),
                    },
                ],
            )
        },
    ),
    "int-send-skip-test": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :c]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x :c]]"),
            o(2, 1, "invoke", "send", "[[:send :x :b]]"),
            o(3, 1, "info", "send", "[[:send :x :b]]"),
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}]]"),
        ],
        {
            "int-send-skip": [
                {
                    "key": X,
                    "values": (":a", ":c"),
                    "skipped": (":b",),
                    "delta": 2,
                    "op": op(0, 0, "ok"),
                }
            ]
        },
        {
            "lost_write": Also(
                LOST + ": b and c were read, a before them never was",
                [lost(X, ":a", 0, 2, op(0, 0, "ok"), op(2, 4, "ok"))],
            )
        },
        unseen={X: {":a"}},
        differs={"int-send-skip": INT_SEND_SKIP},
    ),
    "int-nonmonotonic-poll-test": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
            o(1, 0, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
            o(2, 0, "invoke", "poll", "[[:poll]]"),
            o(3, 0, "ok", "poll", "[[:poll {:x [[3 :c] [1 :a]]}]]"),
            o(4, 0, "invoke", "poll", "[[:poll]]"),
            o(5, 0, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}] [:poll {:x [[3 :c]]}]]"),
        ],
        {
            "int-nonmonotonic-poll": [
                {"key": X, "values": (":c", ":a"), "delta": -2, "op": op(0, 2, "ok")},
                {"key": X, "values": (":c", ":c"), "delta": 0, "op": op(0, 4, "ok")},
            ]
        },
    ),
    "int-nonmonotonic-send-test": Case(
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
        {
            "int-nonmonotonic-send": [
                {"key": X, "values": (":c", ":a"), "delta": -1, "op": op(0, 0, "ok")},
                {"key": Y, "values": (":d", ":b"), "delta": -2, "op": op(0, 2, "info")},
            ]
        },
        # :y's c was read; :x's c and a never were (a value is identified within its key).
        unseen={X: {":c", ":a"}},
    ),
    "duplicate-test/basic": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x :a]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 :a]]]"),
            o(2, 1, "invoke", "send", "[[:send :x :b]]"),
            o(3, 1, "info", "send", "[[:send :x :b]]"),
            o(4, 2, "invoke", "poll", "[[:poll]]"),
            o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :a]]}]]"),
        ],
        {"duplicate": [{"key": X, "value": ":a", "count": 2, "offsets": (1, 3)}]},
    ),
    # kafka_test.clj asserts the set of duplicated values (every one) and both offsets' errors;
    # each duplicate's map is read from duplicate-cases.
    "duplicate-test/hash-insensitive": Case(
        hash_insensitive(),
        {
            "duplicate": every_value_twice(),
            "inconsistent-offsets": [
                {"key": X, "offset": 0, "index": 0, "values": ALL_TEN},
                {"key": X, "offset": 1, "index": 1, "values": ALL_TEN},
            ],
        },
        {
            "nonmonotonic_send": Also(
                BY_OFFSET + " (each send at offset 0, as the one before)", count=9
            ),
            "nonmonotonic_poll": Also(BY_OFFSET + " (each poll re-reads offset 1)", count=9),
            "offset_rewrite": Also(REWRITE + " (offset 1 read as 0, later as 1 to 9)", count=1),
        },
    ),
    "duplicate-test/aborted-txns": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x 0]]"),
            o(1, 0, "ok", "send", "[[:send :x [1 0]]]"),
            o(2, 0, "invoke", "send", "[[:send :x 1]]"),
            o(3, 0, "fail", "send", "[[:send :x [2 1]]]"),
            o(4, 1, "invoke", "poll", "[[:poll]]"),
            o(5, 1, "fail", "poll", "[[:poll {:x [[11 0] [12 1]]}]]"),
        ],
        {"duplicate": [{"key": X, "value": "0", "count": 2, "offsets": (1, 11)}]},
        unseen={X: {"0"}},
    ),
    # kafka_test.clj asserts the unseen series; its last entry, {:x 0}, is the final unseen.
    "unseen-test": Case(
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
        {},
    ),
    "empty-history-test": Case(
        [o(0, 0, "invoke", "assign", "[:x]"), o(1, 0, "ok", "assign", "[:x]")],
        {"empty-transaction-graph": [{}]},
        differs={"empty-transaction-graph": EMPTY},
    ),
    # kafka_test.clj runs the next two with :ww-deps; eosim always draws ww edges.
    "g0-test": Case(
        [
            o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :a]]"),
            o(1, 1, "invoke", "send", "[[:send :x :b] [:send :y :b]]"),
            o(2, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
            o(3, 1, "ok", "send", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
        ],
        {
            "G0": [
                rotated(
                    [op(1, 1, "ok"), op(0, 0, "ok"), op(1, 1, "ok")],
                    [("ww", Y, ":b", ":a"), ("ww", X, ":a", ":b")],
                )
            ]
        },
        unseen={X: {":a", ":b"}, Y: {":a", ":b"}},
    ),
    "g1c-pure-wr-test": Case(
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 1, "invoke", "txn", "[[:send :y :b] [:poll]]"),
            o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"),
            o(3, 1, "ok", "txn", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"),
        ],
        {
            "G1c": [
                rotated(
                    [op(1, 1, "ok"), op(0, 0, "ok"), op(1, 1, "ok")],
                    [("wr", Y, ":b", None), ("wr", X, ":a", None)],
                )
            ]
        },
    ),
    "g1c-ww-wr-test": Case(
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:send :y :c]]"),
            o(1, 1, "invoke", "txn", "[[:poll] [:send :y :b]]"),
            o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:send :y [2 :c]]]"),
            o(3, 1, "ok", "txn", "[[:poll {:x [[0 :a]]}] [:send :y [1 :b]]]"),
        ],
        {
            "G1c": [
                rotated(
                    [op(0, 0, "ok"), op(1, 1, "ok"), op(0, 0, "ok")],
                    [("wr", X, ":a", None), ("ww", Y, ":b", ":c")],
                )
            ]
        },
        unseen={Y: {":b", ":c"}},
    ),
    "precommitted-read-test": Case(
        [
            o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
            o(1, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:x [[0 :a]]}]]"),
        ],
        {"precommitted-read": [{"op": op(0, 0, "ok"), "key": X, "value": ":a"}]},
    ),
}


def test_every_testing_block_of_kafka_test_is_here():
    assert len(CASES) == 38


@pytest.fixture
def every_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every example, whole, so that each error can be compared."""
    from eosim.analysis import version_order

    monkeypatch.setattr(checker, "MAX_EXAMPLES", 1000)
    monkeypatch.setattr(checker, "MAX_LISTED", 1000)
    monkeypatch.setattr(version_order, "MAX_LISTED", 1000)


def judge(case: Case) -> tuple[History, Any]:
    history = parse_jepsen_history("\n".join(case.ops))
    return history, check_history(history)


@pytest.mark.parametrize("name", sorted(CASES))
def test_eosim_finds_what_kafka_test_asserts_jepsen_finds(name, every_example):
    case = CASES[name]
    _, result = judge(case)
    found = {n: a for n, a in result.anomalies.items() if a.count}
    for jepsen_type, errors in case.jepsen.items():
        if jepsen_type in case.differs:
            continue
        eosim_name, normal = JEPSEN_NAMES[jepsen_type]
        got = [normal(e) for e in result.anomalies[eosim_name].examples]
        assert result.anomalies[eosim_name].count == len(errors), (jepsen_type, got)
        assert canon(got) == canon(errors), jepsen_type
    asserted = {JEPSEN_NAMES[t][0] for t in case.jepsen if t not in case.differs}
    if case.no_errors:
        assert found == {}
    for eosim_name, anomaly in found.items():
        if eosim_name in asserted or eosim_name == "unseen":
            continue
        assert eosim_name in case.also, f"{eosim_name} is neither asserted nor explained"
        also = case.also[eosim_name]
        if also.errors is not None:
            normal = JEPSEN_NAMES[EOSIM_NAMES[eosim_name]][1]
            assert canon([normal(e) for e in anomaly.examples]) == canon(also.errors)
        else:
            assert anomaly.count == also.count
    assert not set(case.also) - set(found), "explained but not found"


@pytest.mark.parametrize("name", sorted(CASES))
def test_unseen_and_the_ok_writes_eosim_calls_lost_are_jepsens_unseen(name, every_example):
    """Jepsen's unseen (`jepsen.tests.kafka/unseen`) counts every value an `ok` op sent and no
    `ok` op polled, lost or not; eosim's `unseen` leaves out the writes it reports lost."""
    case = CASES[name]
    _, result = judge(case)
    got: dict[str, set[str]] = {}
    for e in result.anomalies["unseen"].examples:
        got.setdefault(_key(e), set()).add(e["value"])
    for e in result.anomalies["lost_write"].examples:
        if e["writer"]["type"] == "ok":
            got.setdefault(_key(e), set()).add(e["value"])
    assert got == case.unseen


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.differs))
def test_where_eosim_differs_from_jepsen_it_says_why(name):
    case = CASES[name]
    _, result = judge(case)
    for jepsen_type, why in case.differs.items():
        assert jepsen_type not in JEPSEN_NAMES and why
        assert jepsen_type.replace("-", "_") not in result.anomalies
    if "empty-transaction-graph" in case.differs:
        assert result.unknown is not None
        assert not any(a.count for a in result.anomalies.values())


def test_version_orders_test_orders():
    """kafka_test.clj's version-orders-test also asserts the order: the raw log, and a by-index
    that picks one value, nondeterministically, at the offset holding two."""
    history, _ = judge(CASES["version-orders-test"])
    order = Analysis(history).order((X, 0))
    assert {k: set(v) for k, v in order.log.items()} == {
        0: {":a"},
        1: {":b", ":c"},
        3: {":b"},
        4: {":d"},
    }
    assert order.offset_of == [0, 1, 3, 4]
    assert order.by_index[0] == ":a" and order.by_index[1] in (":b", ":c")
    assert order.by_index[2:] == [":b", ":d"]
