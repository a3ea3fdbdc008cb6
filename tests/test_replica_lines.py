"""Replicated partitions in a history: the `replica` line and the `log` line's `leader` and
`high_watermark`, parsed into `History.replicas`, `History.leaders` and
`History.high_watermarks`; a malformed field is one error naming the line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from histories import Builder

from eosim.analysis.history import (
    HistoryError,
    LogRecord,
    Marker,
    Replica,
    history_from_records,
    load_history,
)


def error_of(records: list[Any]) -> str:
    with pytest.raises(HistoryError) as info:
        history_from_records(records, source="h.jsonl")
    text = str(info.value)
    assert "\n" not in text
    return text


# -- the lines ---------------------------------------------------------------------------------


def replica_line(**changes: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "kind": "replica",
        "topic": "events",
        "partition": 0,
        "broker": "broker-1",
        "leader": True,
        "leader_epoch": 2,
        "high_watermark": 8,
        "log_end_offset": 9,
        "records": [
            {"offset": 0, "value": "p-0", "producer_id": 1000, "epoch": 0, "sequence": 0},
            {"offset": 8, "value": "p-1", "producer_id": 1000, "epoch": 0, "sequence": 1},
        ],
        "markers": [{"offset": 7, "producer_id": 1000, "type": "COMMIT", "time": 12.5}],
    }
    line.update(changes)
    return {k: v for k, v in line.items() if v is not DROP}


DROP = object()


def test_replica_lines_and_log_replication_fields_are_parsed(tmp_path: Path) -> None:
    log = {
        "kind": "log",
        "topic": "events",
        "partition": 0,
        "records": [{"offset": 0, "value": "p-0"}],
        "leader": "broker-1",
        "high_watermark": 8,
    }
    offline = {"kind": "log", "topic": "events", "partition": 1, "records": [], "leader": None}
    follower = replica_line(broker="broker-2", leader=False, high_watermark=1, markers=DROP)
    follower["records"] = follower["records"][:1]
    follower["log_end_offset"] = 1
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (log, offline, replica_line(), follower)))

    history = load_history(path)

    assert history.leaders == {("events", 0): "broker-1", ("events", 1): None}
    assert history.high_watermarks == {("events", 0): 8}
    leader, second = history.replicas
    assert leader == Replica(
        "events",
        0,
        "broker-1",
        True,
        2,
        8,
        9,
        [LogRecord(0, "p-0", 1000, 0, 0), LogRecord(8, "p-1", 1000, 0, 1)],
        [Marker(7, 1000, "COMMIT", 12.5)],
        3,
    )
    assert (second.broker, second.leader, second.high_watermark, second.markers) == (
        "broker-2",
        False,
        1,
        [],
    )


def test_histories_without_replication_lines_have_none() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.log("t", 0, ["a"])
    history = h.history()
    assert (history.replicas, history.leaders, history.high_watermarks) == ([], {}, {})


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"topic": 3}, "replica.topic: expected a string, got 3"),
        ({"partition": -1}, "replica.partition: expected an integer >= 0, got -1"),
        ({"broker": DROP}, "replica.broker: expected a non-empty string, got None"),
        ({"broker": ""}, "replica.broker: expected a non-empty string, got ''"),
        ({"leader": "yes"}, "replica.leader: expected a boolean, got 'yes'"),
        ({"leader": None}, "replica.leader: expected a boolean, got None"),
        ({"leader_epoch": 1.5}, "replica.leader_epoch: expected an integer >= 0, got 1.5"),
        ({"high_watermark": "8"}, "replica.high_watermark: expected an integer >= 0, got '8'"),
        ({"log_end_offset": DROP}, "replica.log_end_offset: expected an integer >= 0, got None"),
        ({"records": DROP}, "replica.records: expected a list, got None"),
        ({"records": [{"offset": 0}]}, "replica.records[0].value: expected a string, got None"),
        (
            {"records": [{"offset": 2, "value": "a"}, {"offset": 1, "value": "b"}]},
            "replica.records[1].offset: offsets must increase, got 1 after 2",
        ),
        ({"markers": {}}, "replica.markers: expected a list, got {}"),
        (
            {"markers": [{"offset": 7, "producer_id": 1, "type": "PREPARE"}]},
            "replica.markers[0].type: expected one of COMMIT, ABORT, got 'PREPARE'",
        ),
        (
            {"markers": [{"offset": 8, "producer_id": 1, "type": "ABORT"}]},
            "replica.markers: offset 8 holds a record or another marker already",
        ),
        (
            {"log_end_offset": 8},
            "replica.log_end_offset: expected an offset above the last entry's (8), got 8",
        ),
        (
            {"log_start_offset": -1},
            "replica.log_start_offset: expected an integer >= 0, got -1",
        ),
        (
            {"log_start_offset": 1},
            "replica.log_start_offset: 1 is above the first record's offset (0)",
        ),
        (
            {"records": [], "markers": [], "log_end_offset": 3, "log_start_offset": 4},
            "replica.log_start_offset: 4 is above the log end offset (3)",
        ),
    ],
)
def test_a_malformed_replica_line_names_its_line_and_field(
    changes: dict[str, Any], expected: str
) -> None:
    meta = {"kind": "meta", "format": "eosim-history", "version": 1}
    assert error_of([meta, replica_line(**changes)]) == f"h.jsonl:2: {expected}"


def test_a_second_line_for_the_same_replica_is_refused() -> None:
    other = replica_line(broker="broker-2")
    text = error_of([replica_line(), other, replica_line()])
    assert text == (
        "h.jsonl:3: replica.broker: 'broker-1' already has a replica of ('events', 0) at line 1"
    )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("leader", 1, "log.leader: expected a string or null, got 1"),
        ("high_watermark", -1, "log.high_watermark: expected an integer >= 0, got -1"),
        ("high_watermark", None, "log.high_watermark: expected an integer >= 0, got None"),
        ("log_start_offset", "3", "log.log_start_offset: expected an integer >= 0, got '3'"),
    ],
)
def test_malformed_log_replication_fields(field: str, value: Any, expected: str) -> None:
    log = {"kind": "log", "topic": "t", "partition": 0, "records": [], field: value}
    assert error_of([log]) == f"h.jsonl:1: {expected}"


def test_log_start_offsets_are_read_from_log_and_replica_lines() -> None:
    log = {"kind": "log", "topic": "t", "partition": 0, "log_start_offset": 4}
    log["records"] = [{"offset": 4, "value": "a"}]
    replica = replica_line(log_start_offset=0)
    history = history_from_records([log, replica], source="h.jsonl")
    assert history.log_starts == {("t", 0): 4}
    assert history.replicas[0].log_start_offset == 0
    below = {**log, "records": [{"offset": 3, "value": "a"}]}
    assert error_of([below]) == (
        "h.jsonl:1: log.log_start_offset: 4 is above the first record's offset (3)"
    )
