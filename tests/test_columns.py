"""A history built from the model's recorder (sends kept as columns, objects built on demand)
is the history parsed from its lines; its columns, timings and written bytes are those of the
object form."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eosim.analysis import timings
from eosim.analysis.checks import check_history
from eosim.analysis.columns import SendColumns, SendTable, send_columns
from eosim.analysis.history import History, history_from_recorder, history_from_records
from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.history import HistoryRecorder, LogRecords, time_text

ROOT = Path(__file__).resolve().parent.parent
# Plain, transactional, consumer-group and replicated runs, kept small.
SCENARIOS = {
    "idempotent-restart.yaml": ["producers.0.workload.records=400"],
    "transactional-pipeline.yaml": ["producers.0.workload.records=100"],
    "group-eos-rebalance-storm.yaml": [],
    "replication-idempotent-failover.yaml": [],
}
FIELDS = ("process", "topic", "partition", "value", "outcome", "offset", "error")


def _same_columns(a: SendColumns, b: SendColumns) -> None:
    for name in FIELDS:
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    for name in ("invoke_time", "complete_time"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name


def _fields(history: History) -> dict:
    return {name: getattr(history, name) for name in History.__dataclass_fields__}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_recorded_history_is_its_parsed_lines(name):
    path = ROOT / "scenarios" / name
    run = run_scenario(load_scenario(path, SCENARIOS[name]), 2)
    recorded = history_from_recorder(run.history)
    parsed = history_from_records(json.loads(line) for line in run.history.lines())
    assert isinstance(recorded.sends, SendTable)
    # Columns and timings first, before anything builds the Send objects.
    _same_columns(send_columns(recorded.sends), SendColumns.of_sends(parsed.sends))
    for measure in (
        timings.ack_latencies,
        timings.warm_ack_latencies,
        timings.read_after_ack_latencies,
        timings.failover_times,
        timings.commit_latencies,
    ):
        assert measure(recorded) == measure(parsed), measure.__name__
    verdict = check_history(recorded)
    assert verdict.to_dict() == check_history(parsed).to_dict()
    plain = not (recorded.txns or recorded.steps or recorded.polls)
    if plain and not any(a.count for a in verdict.anomalies.values()):
        # A clean plain history is checked and timed from its columns alone: neither its
        # sends nor its logs are built as objects.
        assert not recorded.sends.built
        assert recorded.logs and all(not log.built for log in recorded.logs.values())
    assert _fields(recorded) == _fields(parsed)  # builds the objects, ops in line order


def test_send_lines_are_the_json_of_their_records():
    """The hand-written send line is byte for byte json.dumps of the send's object, whatever
    its strings hold."""
    recorder = HistoryRecorder({"scenario": "x"})
    odd = ['quote " and \\ backslash', "tab\tnewline\n", "\u00e9\u4e2d\U0001f600", "\x00\x1f"]
    for i, value in enumerate(odd):
        op = recorder.invoke_send(f"p{i}", 0, "t\u00e9", None, value if i % 2 else None, value)
        recorder.complete_send(op, "ok", 1.25 + i, i, i, None)
        op = recorder.invoke_send("q", 2.0000004, "t", 3, "k", value)
        recorder.complete_send(op, "info", 1e17, None, None, value)
        op = recorder.invoke_send("r", 3.1, "t", None, None, value)
        recorder.complete_send(op, "fail", 4, None, -1, "E: " + value)
        recorder.fault(5 + i, "start", "crash", [f"p{i}"], {})  # other lines among the sends
    recorder.invoke_send("s", 9.5, "t", None, None, "never completed")
    expected = [
        json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in recorder.records()
    ]
    assert list(recorder.lines()) == expected
    assert '"time":0,' in expected[1] and '"time":4,' in expected[6]  # ints stay ints
    # Its columns are those of the history parsed back: integer times, errors, None partitions
    # and offsets, a negative offset, a send never completed.
    recorded = history_from_recorder(recorder)
    parsed = history_from_records(json.loads(line) for line in expected)
    _same_columns(send_columns(recorded.sends), SendColumns.of_sends(parsed.sends))
    assert _fields(recorded) == _fields(parsed)


def test_a_recorder_of_written_lines_keeps_its_sends():
    """A real cluster's run records its drivers' ops as lines (``add_line``), not as the
    model's tuples: its sends are the parsed ones (a first version replaced them with the
    model's, of which there are none)."""
    recorder = HistoryRecorder({"scenario": "x"})
    send = {"topic": "t", "partition": 0, "key": None, "value": "a"}
    recorder.add_line({"kind": "op", "id": 0, "type": "invoke", "f": "send", "process": "p",
                       "time": 1.0, "value": send})  # fmt: skip
    recorder.add_line({"kind": "op", "id": 0, "type": "ok", "f": "send", "process": "p",
                       "time": 2.0, "value": {**send, "offset": 0}})  # fmt: skip
    recorder.add_log("t", 0, [{"offset": 0, "value": "a"}])
    recorded = history_from_recorder(recorder)
    assert _fields(recorded) == _fields(history_from_records(recorder.records()))
    assert [s.value for s in recorded.sends] == ["a"]
    assert check_history(recorded).counts["acked"] == 1


def test_log_records_write_what_their_objects_are():
    """The model's final logs are columns (`LogRecords`): a batch added at once equals its
    records added one by one, and the line writer writes exactly the JSON of the objects,
    integer and float append times, transactional or not."""
    one_by_one, batched = LogRecords(), LogRecords()
    batches = [
        (0, ["a", "b\u00e9"], 7, 0, [0, 1], None),
        (3, ["c"], -1, -1, [-1], None),
        (4, ['d"q', "e"], 9, 2, [5, 6], 12.3456789),
        (7, ["f"], 9, 2, [7], 0),
    ]
    for base, values, producer_id, epoch, sequences, time in batches:
        for i, value in enumerate(values):
            one_by_one.append(base + i, value, producer_id, epoch, sequences[i], time)
        offsets = range(base, base + len(values))
        batched.extend(offsets, values, producer_id, epoch, sequences, time)
    assert list(one_by_one.rows()) == list(batched.rows())
    assert one_by_one == batched and len(batched) == 6
    objects = list(batched)
    assert objects[4] == {"offset": 5, "value": "e", "producer_id": 9, "epoch": 2,
                          "sequence": 6, "transactional": True, "time": 12.345679}  # fmt: skip
    assert objects[5]["time"] == 0 and type(objects[5]["time"]) is int
    assert batched.json() == json.dumps(objects, separators=(",", ":"), ensure_ascii=False)
    assert batched[-1] == objects[-1] and batched[1:3] == objects[1:3]


def _replica_history(
    broker_records: dict[str, list[tuple]], markers: dict[str, list]
) -> HistoryRecorder:
    recorder = HistoryRecorder({"scenario": "x"})
    for broker, rows in broker_records.items():
        records = LogRecords()
        for row in rows:
            records.append(*row)
        recorder.add_end_line(
            {"kind": "replica", "topic": "t", "partition": 0, "broker": broker,
             "leader": broker == "a", "leader_epoch": 1, "high_watermark": 4,
             "log_end_offset": 6, "settled": True, "records": records,
             "markers": markers.get(broker, [])}
        )  # fmt: skip
    return recorder


BASE = [(0, "v0", 7, 0, 0), (1, "v1", 7, 0, 1), (2, "v2", 7, 0, 2), (5, "v5", 7, 0, 5)]
COMMIT = {"offset": 3, "producer_id": 7, "type": "COMMIT", "time": 1.0}


@pytest.mark.parametrize(
    ("other", "other_markers", "diverges"),
    [
        (BASE, [COMMIT], False),
        ([*BASE[:1], (1, "x", 7, 0, 1), *BASE[2:]], [COMMIT], True),  # another value
        ([*BASE[:2], (2, "v2", 7, 0, 9), BASE[3]], [COMMIT], True),  # another sequence
        # transactional on one side only: not stated (null) on the other, no divergence
        ([*BASE[:2], (2, "v2", 7, 0, 2, 3.5), BASE[3]], [COMMIT], False),
        (BASE[:2], [COMMIT], True),  # a record missing below the high watermark
        ([*BASE[:3], (5, "other", 7, 0, 5)], [COMMIT], False),  # above it
        (BASE, [{**COMMIT, "type": "ABORT"}], True),
        (BASE, [{**COMMIT, "time": 2.0}], False),  # a marker's time is not compared
    ],
)
def test_replicas_kept_as_columns_are_judged_as_parsed_ones(other, other_markers, diverges):
    """The replica check compares the model's replicas column by column first; it finds what
    the entry-by-entry comparison of the same lines read from a file finds."""
    recorder = _replica_history({"a": BASE, "b": other}, {"a": [COMMIT], "b": other_markers})
    recorded = check_history(history_from_recorder(recorder)).to_dict()
    parsed = check_history(history_from_records(recorder.records())).to_dict()
    assert recorded == parsed
    assert (recorded["anomalies"]["replica_divergence"]["count"] > 0) is diverges


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=0, max_value=2e9, allow_nan=False),
        st.integers(0, 10**9).map(lambda n: n / 10**6),
        st.integers(0, 10**12).map(lambda n: n * 0.1),
        st.sampled_from([0.0, 1e-4, 9.99999e-5, 0.00015, 1e9, 999999999.9999995, 5e-7, 1e16]),
    )
)
def test_a_time_is_written_as_round_then_repr(time):
    assert time_text(time) == float.__repr__(round(time, 6))
