"""Loading histories: pairing, outcomes, and errors that name the line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from histories import Builder

from eosim.analysis.history import (
    HistoryError,
    LogRecord,
    Poll,
    PolledRecord,
    history_from_records,
    load_history,
    parse_history,
)


def op(type: str, process: str = "p/0", f: str = "send", **fields: Any) -> dict[str, Any]:
    return {"kind": "op", "type": type, "f": f, "process": process, "time": 1.0, **fields}


def send_value(value: str = "a", partition: int | None = 0, **extra: Any) -> dict[str, Any]:
    return {"topic": "t", "partition": partition, "key": None, "value": value, **extra}


def error_of(records: list[Any]) -> str:
    with pytest.raises(HistoryError) as info:
        history_from_records(records, source="history.jsonl")
    text = str(info.value)
    assert "\n" not in text
    return text


def test_load_file_with_meta_faults_logs_and_blank_lines(tmp_path: Path) -> None:
    lines = [
        {"kind": "meta", "format": "eosim-history", "version": 1, "seed": 7},
        op("invoke", id=1, value=send_value("a", None)),
        {"kind": "fault", "time": 2.0, "phase": "start", "fault": "crash", "targets": ["b0"]},
        op("ok", id=1, value=send_value("a", 3, offset=41)),
        {
            "kind": "log",
            "topic": "t",
            "partition": 3,
            "records": [
                {"offset": 41, "value": "a", "producer_id": 1000, "epoch": 0, "sequence": 7},
            ],
        },
        {"kind": "future-thing", "whatever": [1, 2]},
    ]
    path = tmp_path / "history.jsonl"
    path.write_text(
        "\n".join(json.dumps(line) for line in lines[:3])
        + "\n\n   \n"
        + "\n".join(json.dumps(line) for line in lines[3:])
        + "\n"
    )

    history = load_history(path)

    assert history.meta == {"format": "eosim-history", "version": 1, "seed": 7}
    assert history.faults == [{"time": 2.0, "phase": "start", "fault": "crash", "targets": ["b0"]}]
    assert [o.line for o in history.ops] == [2, 6]
    (send,) = history.sends
    assert (send.id, send.process, send.outcome, send.topic, send.partition) == (
        1,
        "p/0",
        "ok",
        "t",
        3,
    )
    assert (send.value, send.offset, send.invoke_index) == ("a", 41, 0)
    assert (send.invoke_time, send.complete_time) == (1.0, 1.0)
    assert history.logs == {("t", 3): [LogRecord(41, "a", 1000, 0, 7)]}


def test_pairs_by_id_with_several_outstanding() -> None:
    h = Builder()
    first = h.invoke_send("p/0", "a")
    second = h.invoke_send("p/0", "b")
    h.complete_send(second, "p/0", "b", "ok", offset=0)
    h.complete_send(first, "p/0", "a", "fail")

    history = h.history()

    assert [(s.value, s.outcome, s.offset, s.invoke_index) for s in history.sends] == [
        ("a", "fail", None, 0),
        ("b", "ok", 0, 1),
    ]
    assert history.sends[0].error == "TimeoutException: expired"
    assert history.sends[0].complete_time == 4.0


def test_pairs_without_ids_jepsen_style() -> None:
    h = Builder(ids=False)
    h.invoke_send("p/0", "a")
    h.invoke_send("q/0", "b")
    h.complete_send(0, "q/0", "b", "ok", offset=0)
    h.complete_send(0, "p/0", "a", "info")
    h.send("p/0", "c", offset=1)

    history = h.parsed()

    assert all(o.id is None for o in history.ops)
    assert [(s.process, s.value, s.outcome, s.offset) for s in history.sends] == [
        ("p/0", "a", "info", None),
        ("q/0", "b", "ok", 0),
        ("p/0", "c", "ok", 1),
    ]
    assert [s.complete_time for s in history.sends] == [4.0, 3.0, 6.0]


def test_idless_completion_pairs_with_the_one_open_invocation_even_if_it_has_an_id() -> None:
    history = history_from_records(
        [op("invoke", id=5, value=send_value()), op("ok", value=send_value(offset=0))]
    )
    assert (history.sends[0].id, history.sends[0].outcome) == (5, "ok")


def test_invocation_without_completion_is_info() -> None:
    h = Builder()
    h.send("p/0", "a", None)
    (send,) = h.history().sends
    assert (send.outcome, send.complete_time, send.offset) == ("info", None, None)


def test_unknown_offset_and_partition_learned_on_completion() -> None:
    history = history_from_records(
        [
            op("invoke", id=1, value=send_value("a", None)),
            op("ok", id=1, value=send_value("a", 2, offset=-1)),
            op("invoke", id=2, value=send_value("b", None)),
            op("ok", id=2, value=None),
        ]
    )
    assert [(s.partition, s.offset) for s in history.sends] == [(2, None), (None, None)]


def test_polls_and_unknown_operations() -> None:
    records = [
        op("invoke", "c/0", "poll", id=1, value=None),
        op(
            "ok",
            "c/0",
            "poll",
            id=1,
            value={
                "records": [
                    {"topic": "t", "partition": 0, "offset": 4, "value": "a"},
                ]
            },
        ),
        op("invoke", "c/0", "poll", id=2, value=None),
        op("fail", "c/0", "poll", id=2, value=None),
        op("invoke", "c/0", "commit", id=3, value={"offsets": {"t-0": 5}}),
        op("ok", "c/0", "commit", id=3, value=None),
    ]
    history = history_from_records(records)
    assert history.polls == [Poll("c/0", 1.0, [PolledRecord("t", 0, 4, "a")], invoke_time=1.0)]
    assert [o.f for o in history.ops] == ["poll"] * 4 + ["commit"] * 2
    assert history.sends == []


def test_parse_history_accepts_text() -> None:
    text = "\n".join(Builder().lines()) + "\n"
    assert parse_history(text).ops == []
    h = Builder()
    h.send("p/0", "a", offset=0)
    assert parse_history("\n".join(h.lines())).sends[0].offset == 0


def test_bad_json_names_the_line() -> None:
    lines = [json.dumps(op("invoke", id=1, value=send_value())), "", '{"kind": "op", "id": 2,']
    with pytest.raises(HistoryError) as info:
        parse_history(lines, source="history.jsonl")
    assert str(info.value).startswith("history.jsonl:3: line: invalid JSON: ")
    assert info.value.line == 3


def test_bad_type_names_line_and_field() -> None:
    message = error_of([op("invoke", id=1, value=send_value()), op("done", id=1)])
    assert message == (
        "history.jsonl:2: op.type: expected one of invoke, ok, fail, info, got 'done'"
    )


def test_completion_without_invocation() -> None:
    by_id = error_of([op("invoke", id=1, value=send_value()), op("ok", id=2)])
    assert by_id == ("history.jsonl:2: op.id: completion without invocation: no invoke has id 2")
    without_id = error_of([op("ok", "q/0")])
    assert without_id == (
        "history.jsonl:1: op.process: completion without invocation: 'q/0' has no open invocation"
    )


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (["not an object"], "history.jsonl:1: line: expected a JSON object, got str"),
        ([{"topic": "t"}], "history.jsonl:1: kind: missing"),
        (
            [op("invoke", id=1, value=send_value()), op("invoke", id=1, value=send_value("b"))],
            "history.jsonl:2: op.id: duplicate id 1 (first invoked at line 1)",
        ),
        (
            [op("invoke", id=1, value=send_value()), op("ok", id=1), op("ok", id=1)],
            "history.jsonl:3: op.id: id 1 already completed (invoked at line 1)",
        ),
        (
            [op("invoke", id=1, value=send_value()), op("ok", f="poll", id=1)],
            "history.jsonl:2: op.f: expected 'send' as invoked at line 1, got 'poll'",
        ),
        (
            [op("invoke", id=1, value=send_value()), op("ok", "q/0", id=1)],
            "history.jsonl:2: op.process: expected 'p/0' as invoked at line 1, got 'q/0'",
        ),
        (
            [op("invoke", value=send_value()), op("invoke", value=send_value("b"))],
            "history.jsonl:2: op.id: 'p/0' invokes without an id while its invocation at line 1"
            " is still open; ids are needed when a process has several operations outstanding",
        ),
        (
            [op("invoke", id=1, value=send_value()), op("invoke", value=send_value("b")), op("ok")],
            "history.jsonl:3: op.id: completion without id is ambiguous: 'p/0' has open "
            "invocations at lines 1, 2",
        ),
        (
            [{**op("invoke", value=send_value()), "time": "soon"}],
            "history.jsonl:1: op.time: expected a finite number, got 'soon'",
        ),
        (
            [op("invoke", id=True, value=send_value())],
            "history.jsonl:1: op.id: expected an integer or null, got True",
        ),
        (
            [op("invoke", value={"topic": "t", "partition": 0, "value": 7})],
            "history.jsonl:1: op.value.value: expected a string, got 7",
        ),
        (
            [op("invoke", value=send_value(partition=-2))],
            "history.jsonl:1: op.value.partition: expected an integer >= 0 or null, got -2",
        ),
        (
            [op("invoke", id=1, value=send_value("a")), op("ok", id=1, value=send_value("b"))],
            "history.jsonl:2: op.value.value: expected 'a' as invoked, got 'b'",
        ),
        (
            [
                op("invoke", id=1, value=send_value("a", 1)),
                op("ok", id=1, value=send_value("a", 2)),
            ],
            "history.jsonl:2: op.value.partition: expected 1 as invoked, got 2",
        ),
        (
            [
                op("invoke", "c/0", "poll", id=1, value=None),
                op("ok", "c/0", "poll", id=1, value={"records": [{"topic": "t", "partition": 0}]}),
            ],
            "history.jsonl:2: op.value.records[0].offset: expected an integer >= 0, got None",
        ),
        (
            [
                {
                    "kind": "log",
                    "topic": "t",
                    "partition": 0,
                    "records": [
                        {"offset": 3, "value": "a"},
                        {"offset": 3, "value": "b"},
                    ],
                }
            ],
            "history.jsonl:1: log.records[1].offset: offsets must increase, got 3 after 3",
        ),
        (
            [
                {"kind": "log", "topic": "t", "partition": 0, "records": []},
                {"kind": "log", "topic": "t", "partition": 0, "records": []},
            ],
            "history.jsonl:2: log.partition: ('t', 0) already has a log at line 1",
        ),
        (
            [{"kind": "meta", "format": "eosim-history", "version": 2}],
            "history.jsonl:1: meta.version: unsupported version 2; expected 1",
        ),
    ],
)
def test_malformed_lines(records: list[Any], expected: str) -> None:
    assert error_of(records) == expected


def test_error_is_a_value_error_with_parts() -> None:
    with pytest.raises(ValueError) as info:
        history_from_records([op("ok", id=9)], source="x.jsonl")
    error = info.value
    assert isinstance(error, HistoryError)
    assert (error.source, error.line, error.field) == ("x.jsonl", 1, "op.id")
