"""The fast JSON Lines reader (eosim.analysis.jsonl_reader) gives what the line-by-line reader
gives: the same History field by field, the same send columns and check result, or the same
error naming the same line. Every case runs with each of its scanners: the C one
(`_jsonl_scan`, where it was built) and the Arrow one (`jsonl_arrow`)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eosim.analysis import history as history_module
from eosim.analysis import jsonl_arrow, jsonl_reader
from eosim.analysis.checks import check_history
from eosim.analysis.columns import SendColumns, send_columns
from eosim.analysis.history import History, HistoryError, load_history, parse_history
from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.history import HistoryRecorder

ROOT = Path(__file__).resolve().parent.parent
# One shipped scenario of each kind (every shipped and calibration scenario, seeds 1-2, was
# compared once with benchmarks/bench_history_in.py --all; see docs/performance.md).
SHIPPED = [
    "at-least-once-chaos.yaml",
    "at-most-once-failover.yaml",
    "idempotent-restart.yaml",
    "transactional-pipeline.yaml",
    "hanging-transaction.yaml",
    "group-eos-rebalance-storm.yaml",
    "kip848-zombie-commit.yaml",
    "pipeline-auto-commit.yaml",
    "sink-append.yaml",
    "replication-idempotent-failover.yaml",
    "replication-power-loss.yaml",
    "kafka-14024.yaml",
]


COMPILED_MISSING = "the C scanner eosim.analysis._jsonl_scan was not built (no C compiler)"


@pytest.fixture(autouse=True, params=["compiled", "arrow"])
def scanner(request, monkeypatch):
    """Each case with each scanner; the fast path for small histories too (it declines below
    MIN_SEND_LINES)."""
    if request.param == "compiled" and jsonl_reader._jsonl_scan is None:
        pytest.skip(COMPILED_MISSING)
    monkeypatch.setattr(jsonl_reader, "SCANNER", request.param)
    monkeypatch.setattr(jsonl_reader, "MIN_SEND_LINES", 1)
    return request.param


def test_the_c_scanner_is_built_where_required():
    """CI sets EOSIM_REQUIRE_COMPILED=1: there a missing C scanner fails instead of skipping."""
    if jsonl_reader._jsonl_scan is None:
        if os.environ.get("EOSIM_REQUIRE_COMPILED") == "1":
            pytest.fail(COMPILED_MISSING)
        pytest.skip(COMPILED_MISSING)
    assert jsonl_reader.SCANNER == "compiled" or jsonl_reader.SCANNER == "arrow"


def _read(text: str, fast: bool) -> History | HistoryError:
    saved = history_module.FAST_READER
    history_module.FAST_READER = fast
    try:
        return parse_history(text, "h.jsonl")
    except HistoryError as exc:
        return exc
    finally:
        history_module.FAST_READER = saved


def _same(fast: History, slow: History) -> None:
    a, b = send_columns(fast.sends), SendColumns.of_sends(slow.sends)
    for name in ("process", "topic", "partition", "value", "outcome", "offset", "error"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    for name in ("invoke_time", "complete_time"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert check_history(fast).to_dict() == check_history(slow).to_dict()
    for name in History.__dataclass_fields__:
        assert getattr(fast, name) == getattr(slow, name), name
    # Types as well as values (1 == 1.0 == True): the objects a check reads.
    for x, y in zip(fast.sends, slow.sends, strict=True):
        assert [type(v) for v in vars_of(x)] == [type(v) for v in vars_of(y)]
    for x, y in zip(fast.ops, slow.ops, strict=True):
        assert [type(v) for v in vars_of(x)] == [type(v) for v in vars_of(y)]
    for x, y in zip(fast.faults, slow.faults, strict=True):  # as decoded, not as columns
        assert [type(v) for v in x.values()] == [type(v) for v in y.values()]


def vars_of(obj) -> list:
    return [getattr(obj, name) for name in obj.__slots__]


def compare(text: str) -> History | HistoryError:
    """Both readers on `text`: equal histories, or the same error."""
    fast = _read(text, True)
    slow = _read(text, False)
    if isinstance(slow, HistoryError):
        assert isinstance(fast, HistoryError), f"fast path accepted: {slow}"
        assert str(fast) == str(slow)
    else:
        assert not isinstance(fast, HistoryError), str(fast)
        _same(fast, slow)
    return fast


def took_fast_path(text: str) -> bool:
    return jsonl_reader.read_history(text.encode(), "h.jsonl") is not None


@functools.cache
def _shipped_text(name: str) -> str:
    run = run_scenario(load_scenario(ROOT / "scenarios" / name), 1)
    return "\n".join(run.history.lines()) + "\n"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_read_the_same(name):
    text = _shipped_text(name)
    history = compare(text)
    if any(line.startswith('{"kind":"op"') and '"f":"send"' in line for line in text.split("\n")):
        assert took_fast_path(text), "the model's send lines take the fast path"
        assert type(history.sends) is jsonl_reader.ReadSendTable


def _recorder_lines() -> list[str]:
    """A small history with every kind of send line the model writes, and odd strings."""
    recorder = HistoryRecorder({"scenario": "x"})
    odd = ['quote " and \\ backslash', "tab\tnewline\n", "\u00e9\u4e2d\U0001f600", "\x00\x1f", ""]
    odd += ["\u2028 line separator", "}", '"}', ',"offset":1', "null", "a,b:c{d}[e]"]
    for i, value in enumerate(odd):
        op = recorder.invoke_send(f"p{i}", 0, "t\u00e9", None, value if i % 2 else None, value)
        recorder.complete_send(op, "ok", 1.25 + i, i, i, None)
        op = recorder.invoke_send("q", 2.0000004, "t", 3, "k", value)
        recorder.complete_send(op, "info", 1e17, None, None, value)
        op = recorder.invoke_send("r", 3.1, "t", None, None, value)
        recorder.complete_send(op, "fail", 4, None, -1, "E: " + value)
        recorder.invoke_send("never", 5 + i, value or "t", None, None, f"open {value}")
    recorder.invoke("poll", "c", 6, None)
    recorder.add_log("t", 3, [{"offset": 0, "value": "x"}])
    return list(recorder.lines())


def test_odd_strings_read_the_same():
    lines = _recorder_lines()
    compare("\n".join(lines) + "\n")
    compare("\n".join(lines))  # no newline at the end
    compare("\n\n".join(lines) + "\n  \n")  # blank lines keep their numbers
    plain = [line for line in lines if "\\" not in line]
    assert took_fast_path("\n".join(plain))


SEND = (
    '{"kind":"op","id":%s,"type":"%s","f":"send","process":"p","time":%s,'
    '"value":{"topic":"t","partition":%s,"key":null,"value":"v%s"%s}%s}'
)


def _send(i, type_="invoke", time="1.5", partition="null", offset="", error="", value=None):
    return SEND % (i, type_, time, partition, i if value is None else value, offset, error)


def _pairs(n=4, **completion) -> list[str]:
    lines = []
    for i in range(n):
        lines.append(_send(i))
        lines.append(_send(i, **{"type_": "ok", "offset": f',"offset":{i}', **completion}))
    return lines


OUT_OF_ORDER = (
    '{"id":0,"kind":"op","f":"send","type":"invoke","process":"p","time":1.5,'
    '"value":{"value":"v0","topic":"t","key":null,"partition":null}}'
)
NO_ID = '{"kind":"op","id":null,"type":"invoke","f":"poll","process":"p","time":1,"value":null}'
VARIANTS = {
    "canonical": [],
    "integer time": [(0, _send(0, time="1"))],
    "exponent time": [(0, _send(0, time="1.5e-3")), (1, _send(0, "ok", "2E+2", offset=""))],
    "negative zero time": [(0, _send(0, time="-0.0"))],
    "time not JSON": [(0, _send(0, time="01"))],
    "time NaN": [(0, _send(0, time="NaN"))],
    "time infinite": [(0, _send(0, time="1e400"))],
    "time a string": [(0, _send(0, time='"1"'))],
    "time true": [(0, _send(0, time="true"))],
    "negative id": [(0, _send(-5)), (1, _send(-5, "ok", offset=',"offset":0', value=0))],
    "huge id": [(0, _send(10**30)), (1, _send(10**30, "ok", offset=',"offset":0', value=0))],
    "id null": [(0, _send("null")), (1, _send("null", "ok", value=0))],
    "id a float": [(0, _send("0.0"))],
    "duplicate id": [(2, _send(0, value=1))],
    "completed twice": [(3, _send(0, "ok", value=0))],
    "completion first": [(0, _send(0, "ok", value=0)), (1, _send(0, value=0))],
    "completion of nothing": [(1, _send(99, "ok"))],
    "other process": [(1, _send(0, "ok", value=0).replace('"p"', '"p2"'))],
    "empty process": [(0, _send(0).replace('"p"', '""'))],
    "other value": [(1, _send(0, "ok", value="x"))],
    "other topic": [(1, _send(0, "ok", value=0).replace('"t"', '"u"'))],
    "partition reported": [(1, _send(0, "ok", partition="2", offset=',"offset":0', value=0))],
    "partition as invoked": [
        (0, _send(0, partition="2")),
        (1, _send(0, "ok", partition="2", offset=',"offset":0', value=0)),
    ],
    "partition changed": [
        (0, _send(0, partition="2")),
        (1, _send(0, "ok", partition="3", offset=',"offset":0', value=0)),
    ],
    "partition negative": [(0, _send(0, partition="-1"))],
    "partition a float": [(0, _send(0, partition="1.0"))],
    "offset null": [(1, _send(0, "ok", offset=',"offset":null', value=0))],
    "offset -1": [(1, _send(0, "ok", offset=',"offset":-1', value=0))],
    "offset -2": [(1, _send(0, "ok", offset=',"offset":-2', value=0))],
    "offset on fail": [(1, _send(0, "fail", offset=',"offset":4', value=0))],
    "offset of 19 digits": [(1, _send(0, "ok", offset=',"offset":9000000000000000000', value=0))],
    "error": [(1, _send(0, "info", error=',"error":"Timeout: x"', value=0))],
    "error null": [(1, _send(0, "info", error=',"error":null', value=0))],
    "error a number": [(1, _send(0, "info", error=',"error":3', value=0))],
    "escaped value": [(0, _send(0, value='\\"q')), (1, _send(0, "ok", value='\\"q'))],
    "unicode escape": [(0, _send(0, value="\\u00e9")), (1, _send(0, "ok", value="\u00e9"))],
    "raw control character": [(0, _send(0, value="a\tb"))],
    "space after colon": [(0, _send(0).replace('"id":', '"id": '))],
    "fields out of order": [(0, OUT_OF_ORDER)],
    "extra field": [(0, _send(0)[:-1] + ',"extra":1}')],
    "extra value field": [(0, _send(0).replace('"value":"v0"', '"value":"v0","x":1'))],
    "missing key field": [(0, _send(0).replace('"key":null,', ""))],
    "value null on completion": [
        (1, '{"kind":"op","id":0,"type":"ok","f":"send","process":"p","time":2,"value":null}')
    ],
    "duplicate JSON key": [(0, _send(0)[:-1] + ',"time":7}')],
    "a key": [(0, _send(0).replace('"key":null', '"key":"k"'))],
    "a key not a string": [(0, _send(0).replace('"key":null', '"key":5'))],
    "trailing garbage": [(0, _send(0) + "x")],
    "not JSON": [(2, '{"kind":"op",')],
    "a poll sharing an id": [
        (2, '{"kind":"op","id":1,"type":"invoke","f":"poll","process":"c","time":1,"value":null}')
    ],
    "a poll without id": [(2, NO_ID)],
    "a poll": [
        (2, '{"kind":"op","id":50,"type":"invoke","f":"poll","process":"c","time":1,"value":null}')
    ],
    "carriage return": [(0, _send(0) + "\r")],
    "invalid UTF-8": [],  # below
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_adversarial_lines_read_the_same(name):
    lines = _pairs()
    for index, line in VARIANTS[name]:
        lines[index] = line
    text = "\n".join(lines) + "\n"
    compare(text)
    if name in ("canonical", "integer time", "exponent time", "offset null", "error"):
        assert took_fast_path(text)


def test_invalid_utf8_is_named_by_its_line(tmp_path):
    path = tmp_path / "h.jsonl"
    lines = [line.encode() for line in _pairs(40)]
    lines[57] = lines[57].replace(b"v28", b"v\xff")
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert caught.value.line == 58 and "invalid UTF-8" in str(caught.value)


def test_a_bad_line_among_many_is_named(tmp_path):
    """A large history takes the fast path; its first bad line is still the one named, by the
    line-by-line reader, even when a later line is bad too."""
    lines = _pairs(500)
    lines[701] = _send(350, "ok", value=351)  # a completion of another value
    lines[900] = '{"kind":"op"'
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError) as caught:
        load_history(path)
    assert str(caught.value).startswith(f"{path}:702: op.value.value: expected 'v350'")


_TEXT = st.text(st.characters(codec="utf-8"), max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ok", "fail", "info", None]),
            st.sampled_from(["p", "q\u00e9", 'r"']),
            st.one_of(st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**6)),
            st.one_of(st.none(), st.integers(0, 5)),
            st.one_of(st.none(), _TEXT),
            _TEXT,
            st.one_of(st.none(), st.integers(-1, 10**9)),
            st.one_of(st.none(), _TEXT),
        ),
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_random_send_histories_read_the_same(sends, rng):
    recorder = HistoryRecorder({"scenario": "random"})
    completions = []
    for i, (outcome, process, time, partition, key, value, offset, error) in enumerate(sends):
        payload = f"{i}:{value}"  # unique, as the model's
        op = recorder.invoke_send(process, time, "t", partition, key, payload)
        if outcome is not None:
            reported = partition if partition is not None else rng.choice([None, 1])
            completions.append((op, outcome, time + 1, reported, offset, error))
        if completions and rng.random() < 0.5:
            recorder.complete_send(*completions.pop(rng.randrange(len(completions))))
    for completion in completions:
        recorder.complete_send(*completion)
    lines = list(recorder.lines())
    if len(lines) > 1 and rng.random() < 0.3:  # one line reordered or re-encoded
        index = rng.randrange(1, len(lines))
        record = json.loads(lines[index])
        if rng.random() < 0.5:
            lines[index] = json.dumps(record)  # with spaces
        else:
            lines.insert(rng.randrange(1, len(lines)), lines.pop(index))
    compare("\n".join(lines) + "\n")


LOG_RECORDS = {
    "plain": [{"offset": 0, "value": "a"}, {"offset": 2, "value": "b", "producer_id": 3}],
    "every field": [
        {
            "offset": 1,
            "value": "a",
            "producer_id": 1,
            "epoch": 0,
            "sequence": 4,
            "time": 2,
            "transactional": True,
            "aborted": True,
            "extra": [1],
        },
        {"offset": 5, "value": "b", "time": 2.5, "transactional": None},
    ],
    "offsets not increasing": [{"offset": 1, "value": "a"}, {"offset": 1, "value": "b"}],
    "negative offset": [{"offset": -1, "value": "a"}],
    "offset a float": [{"offset": 1.0, "value": "a"}],
    "offset true": [{"offset": True, "value": "a"}],
    "value missing": [{"offset": 0}],
    "epoch a string": [{"offset": 0, "value": "a", "epoch": "0"}],
    "time infinite": [{"offset": 0, "value": "a", "time": float("inf")}],
    "time a bool": [{"offset": 0, "value": "a", "time": False}],
    "transactional a number": [{"offset": 0, "value": "a", "transactional": 1}],
    "aborted null": [{"offset": 0, "value": "a", "aborted": None}],
    "not an object": [{"offset": 0, "value": "a"}, 3],
    "empty": [],
}


@pytest.mark.parametrize("name", sorted(LOG_RECORDS))
def test_log_records_read_column_wise_as_one_by_one(name):
    """`_parse_records` checks a well-formed log a field at a time; anything else goes through
    the record-by-record loop, which names the record."""
    line = json.dumps({"kind": "log", "topic": "t", "partition": 0, "records": LOG_RECORDS[name]})
    text = "\n".join([*_pairs(), line]) + "\n"
    history = compare(text)
    saved = history_module._well_formed_records
    try:
        history_module._well_formed_records = lambda entries: None  # the loop alone
        alone = _read(text, False)
    finally:
        history_module._well_formed_records = saved
    if isinstance(alone, HistoryError):
        assert str(history) == str(alone)
    else:
        assert history.logs == alone.logs
        assert [[type(v) for v in vars_of(r)] for r in history.logs[("t", 0)]] == [
            [type(v) for v in vars_of(r)] for r in alone.logs[("t", 0)]
        ]


def test_paused_gc_moves_what_it_made_to_the_oldest_generation():
    import gc

    from eosim.analysis.history import paused_gc

    with paused_gc():
        made = [[] for _ in range(1000)]
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in oldest for o in made)
    gc.freeze()  # as a model run does: what is frozen stays frozen
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            more = [[] for _ in range(10)]
        # Neither unfrozen (the count would be 0) nor frozen again (it would grow by every
        # object, `more` among them). It may shrink a little: another thread (the shared
        # SparkSession's) can free frozen objects meanwhile, as a CI run saw.
        assert 0 < gc.get_freeze_count() <= frozen and more
    finally:
        gc.unfreeze()


def _model_record(offset, value="v", producer_id=0, epoch=0, sequence=None):
    sequence = offset if sequence is None else sequence
    return (
        f'{{"offset":{offset},"value":"{value}","producer_id":{producer_id},'
        f'"epoch":{epoch},"sequence":{sequence}}}'
    )


def _log_line(records, head='{"kind":"log","topic":"t","partition":0,', tail="}"):
    return head + '"records":[' + ",".join(records) + "]" + tail


_MODEL_LOG = [_model_record(0, "a"), _model_record(1, "b", -1, 2, 7), _model_record(5, "c")]
REPLICA_HEAD = (
    '{"kind":"replica","topic":"t","partition":0,"broker":"b1","leader":true,'
    '"leader_epoch":1,"high_watermark":6,"log_end_offset":6,'
)
# (line, whether its records are read as columns)
RECORDS_LINES = {
    "model log": (_log_line(_MODEL_LOG), True),
    "one record": (_log_line(_MODEL_LOG[:1]), True),
    "fields after the records": (
        _log_line(_MODEL_LOG, tail=',"markers":[{"offset":6,"type":"COMMIT"}],"leader":"b1"}'),
        True,
    ),
    "log start offset": (_log_line(_MODEL_LOG, tail=',"log_start_offset":1}'), True),
    "log start offset above a record": (
        _log_line(_MODEL_LOG, tail=',"log_start_offset":3}'),
        True,
    ),
    "replica": (_log_line(_MODEL_LOG, REPLICA_HEAD), True),
    "replica below its records": (
        _log_line(_MODEL_LOG, REPLICA_HEAD.replace('"log_end_offset":6', '"log_end_offset":5')),
        True,
    ),
    "unicode value": (_log_line([_model_record(0, "\u00e9\U0001f600")]), True),
    "value holding }]": (_log_line([_model_record(0, "}]"), _model_record(1, "x}]}")]), False),
    "value holding },{": (
        _log_line([_model_record(0, '},{"'.replace('"', "")), _MODEL_LOG[1]]),
        True,
    ),
    "value records": (_log_line([_model_record(0, "records")]), False),
    "value holding records": (_log_line([_model_record(0, "a records b")]), True),
    "escaped value": (_log_line([_model_record(0, '\\"}]')]), False),
    "escape elsewhere": (_log_line(_MODEL_LOG, tail=',"leader":"b\\u0031"}'), False),
    "offsets not increasing": (_log_line([_model_record(1), _model_record(1)]), False),
    "offsets decreasing": (_log_line([_model_record(2), _model_record(1)]), False),
    "negative offset": (_log_line([_model_record(-1)]), False),
    "offset with a leading zero": (_log_line([_model_record("01")]), False),
    "producer id null": (_log_line([_model_record(0, producer_id="null")]), False),
    "epoch of 19 digits": (_log_line([_model_record(0, epoch="1" * 19)]), False),
    "transactional": (
        _log_line([_model_record(0)[:-1] + ',"transactional":true,"time":1.5}']),
        False,
    ),
    "aborted": (_log_line([_model_record(0)[:-1] + ',"aborted":true}']), False),
    "no records": (_log_line([]), False),
    "records twice": (_log_line(_MODEL_LOG, tail=',"records":[]}'), False),
    "records twice, spaced": (_log_line(_MODEL_LOG, tail=',"records" : []}'), False),
    "records as a string too": (_log_line(_MODEL_LOG, tail=',"leader":"records"}'), False),
    "kind repeated": (_log_line(_MODEL_LOG, tail=',"kind":"fault"}'), False),
    "records nested": (
        _log_line(_MODEL_LOG, head='{"kind":"log","topic":"t","partition":0,"x":{'),
        False,
    ),
    "records in a list before": (
        _log_line(_MODEL_LOG, head='{"kind":"log","topic":"t","partition":0,"x":[1],'),
        False,
    ),
    "brace in a string before": (
        _log_line(_MODEL_LOG, head='{"kind":"log","topic":"{","partition":0,'),
        False,
    ),
    "records a string's text": (
        '{"kind":"log","topic":"t","partition":0,"x":"\\"records\\":[","records":[]}',
        False,
    ),
    "space before the records": (_log_line(_MODEL_LOG).replace('"records":', '"records": '), False),
    "not JSON after the records": (_log_line(_MODEL_LOG, tail=",}"), False),
    "not JSON before the records": (
        _log_line(_MODEL_LOG, head='{"kind":"log","topic":"t","partition":0,,'),
        False,
    ),
    "a second log of the partition": (_log_line(_MODEL_LOG) + "\n" + _log_line(_MODEL_LOG), True),
    "a log of another shape": (_log_line(['{"offset":0,"value":"a"}']), False),
    "a poll with records": (
        '{"kind":"op","id":90,"type":"invoke","f":"poll","process":"c","time":1,"value":null}\n'
        '{"kind":"op","id":90,"type":"ok","f":"poll","process":"c","time":2,"value":'
        '{"records":[{"topic":"t","partition":0,"offset":0,"value":"a"}]}}',
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(RECORDS_LINES))
def test_log_and_replica_records_read_as_columns_the_same(name):
    """A `log` or `replica` line whose records are as the model writes them is read into the
    model's columns (a LogTable), else line by line; the history is the same either way."""
    line, as_columns = RECORDS_LINES[name]
    text = "\n".join([*_pairs(), line]) + "\n"
    history = compare(text)
    if isinstance(history, HistoryError):
        return
    from eosim.analysis.columns import LogTable

    read = [*history.logs.values(), *(replica.records for replica in history.replicas)]
    assert all(isinstance(records, LogTable) == as_columns for records in read)
    if as_columns:
        assert read
        for records in read:  # the LogRecord objects too, type for type
            assert all(type(r.offset) is int and type(r.producer_id) is int for r in records)


def test_records_lines_among_many_read_as_columns(tmp_path):
    """In a large history too, with the send lines on the fast path (load_history)."""
    lines = [*_pairs(200), _log_line(_MODEL_LOG), _log_line(_MODEL_LOG, REPLICA_HEAD)]
    lines[-2] = lines[-2].replace('"partition":0', '"partition":1')
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    history = load_history(path)
    slow = _read(path.read_text(), False)
    _same(history, slow)
    assert type(history.sends) is jsonl_reader.ReadSendTable
    assert type(history.logs[("t", 1)]).__name__ == "LogTable"
    assert type(history.replicas[0].records).__name__ == "LogTable"


def test_a_load_imports_neither_pandas_nor_pyarrow_compute(tmp_path, scanner):
    """A fresh process's first load pays for no import it does not need: pandas (which
    `pa.array` and numpy indices handed to Arrow import) and pyarrow.compute (a wrapper built
    for each of its functions) took longer than reading the standard history itself; with
    the C scanner, pyarrow itself is not needed."""
    import subprocess
    import sys

    path = tmp_path / "h.jsonl"
    path.write_text("\n".join([*_pairs(100), _log_line(_MODEL_LOG)]) + "\n")
    code = (
        "import sys\n"
        "from eosim.analysis import jsonl_reader\n"
        f"jsonl_reader.SCANNER = {scanner!r}\n"
        "from eosim.analysis.history import load_history\n"
        "from eosim.analysis.jsonl_reader import ReadSendTable\n"
        f"history = load_history({str(path)!r})\n"
        "assert type(history.sends) is ReadSendTable\n"
        "assert type(history.logs['t', 0]).__name__ == 'LogTable'\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'pyarrow.compute') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("[]" if scanner == "compiled" else "['pyarrow']")


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # the gap to the previous offset (0: not increasing)
            _TEXT,
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-5, 5),
            st.integers(0, 10**19),
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_random_log_records_read_the_same(records, model_writer, rng):
    """Random records in the model's shape, written by the model's LogRecords (as a run
    writes them) or by json.dumps, with odd values (quotes, escapes, `}]`, any character),
    offsets increasing or not, numbers of any size."""
    from eosim.simulation.history import LogRecords

    columns = LogRecords()
    offset = -1
    for gap, value, producer_id, epoch, sequence in records:
        offset += gap
        columns.offset.append(max(offset, 0))
        columns.value.append(value)
        columns.producer_id.append(producer_id)
        columns.epoch.append(epoch)
        columns.sequence.append(min(sequence, 2**63 - 1))
        columns.transactional.append(False)
        columns.time.append(0.0)
    as_json = columns.json() if model_writer else json.dumps(list(columns))
    if rng.random() < 0.2:  # a number past int64's range
        as_json = as_json.replace('"sequence":', '"sequence":' + "9" * 19, 1)
    line = '{"kind":"log","topic":"t","partition":0,"records":' + as_json + "}"
    compare("\n".join([*_pairs(), line]) + "\n")


# --- the two scanners, side by side -------------------------------------------------------


def _scans(raw: bytes) -> tuple:
    data = np.frombuffer(raw, dtype=np.uint8)
    return jsonl_reader._scan_compiled(raw, data), jsonl_arrow.scan(raw, data)


def assert_same_scan(raw: bytes) -> None:
    """The C and the Arrow scanner pick the same send lines of `raw` (valid UTF-8) and read
    the same columns, bit for bit, and the same other lines."""
    compiled, arrow = _scans(raw)
    if arrow is None:  # no send line, or a time out of range
        assert compiled is None or len(compiled[0].line) == 0
        return
    assert compiled is not None
    (a, a_others), (b, b_others) = compiled, arrow
    assert a_others == b_others
    for name in ("line", "ids", "types", "partition", "has_offset", "offset", "offset_null"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert a.times.tobytes() == b.times.tobytes()
    for name in ("key", "error"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    for name in ("process", "topic"):
        assert getattr(a, name).texts().tolist() == getattr(b, name).texts().tolist(), name
    assert a.value.texts().tolist() == b.value.texts().tolist()


needs_compiled = pytest.mark.skipif(jsonl_reader._jsonl_scan is None, reason=COMPILED_MISSING)


@needs_compiled
def test_the_scanners_agree_on_every_test_line():
    lines = [*_pairs(), *_recorder_lines()]
    for changes in VARIANTS.values():
        lines += [line for _, line in changes]
    lines += [line for line, _ in RECORDS_LINES.values()]
    for line in lines:
        assert_same_scan(line.encode())  # alone, without a newline
    assert_same_scan("\n".join(lines).encode())
    assert_same_scan(("\n".join(lines) + "\n\n").encode())


# Characters that matter to a send line's shape.
_EDITS = st.sampled_from([*'"\\{}[],:-+.0123456789eEnulltrueaf \t\r\n\x00\x1f\x7f', "\u00e9"])
_SHAPES = [
    _send(7),
    _send(7, "ok", time="2.5e-3", partition="3", offset=',"offset":12'),
    _send(7, "info", offset=',"offset":null', error=',"error":"E: x"'),
    _send(7, "fail", offset=',"offset":-1').replace('"key":null', '"key":"k"'),
    _send(123456789012345678, "ok", time="-0", partition="0", offset=',"offset":0'),
]


def _edited(line: str, edits: list[tuple[int, int, str]]) -> str:
    """`line` with each edit applied: (where, how: 0 delete, 1 replace, else insert, char)."""
    for at, how, character in edits:
        at %= len(line) + 1
        if how == 0:
            line = line[:at] + line[at + 1 :]
        elif how == 1:
            line = line[:at] + character + line[at + 1 :]
        else:
            line = line[:at] + character + line[at:]
    return line


@needs_compiled
def test_the_scanners_agree_on_every_one_character_edit():
    """Every send line shape with one character deleted, replaced or inserted at every
    place (the characters that matter to the shape), all in one file."""
    critical = ['"', "\\", "\x00", "\x1f", " ", "\x7f", "\u00e9", "\n", "0", "-", ",", "}", "e"]
    lines = []
    for line in _SHAPES:
        for at in range(len(line) + 1):
            lines.append(_edited(line, [(at, 0, "")]))
            for character in critical:
                lines.append(_edited(line, [(at, 1, character)]))
                lines.append(_edited(line, [(at, 2, character)]))
    assert_same_scan("\n".join(lines).encode())


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_SHAPES), st.data())
def test_the_scanners_agree_on_edited_send_lines(line, data):
    """A send line edited at random (characters deleted, replaced or inserted) is picked by
    both scanners or by neither, and read the same."""
    edit = st.tuples(st.integers(0, len(line)), st.integers(0, 3), _EDITS)
    line = _edited(line, data.draw(st.lists(edit, max_size=3)))
    assert_same_scan(line.encode())
    assert_same_scan((_SHAPES[0] + "\n" + line + "\n" + _SHAPES[1]).encode())


def _same_records(line: str) -> None:
    raw = line.encode()
    opened = raw.find(b'"records":[')
    if opened < 0:
        return
    data = np.frombuffer(raw, dtype=np.uint8)
    arrays = [(opened + len(b'"records":'), len(raw))]
    (compiled,) = jsonl_reader._records_compiled(raw, data, arrays)
    (arrow,) = jsonl_arrow.log_records(raw, data, arrays)
    assert (compiled is None) == (arrow is None), line
    if compiled is not None:
        assert compiled[0] == arrow[0]  # where the array closes
        for a, b in zip(compiled[1], arrow[1], strict=True):
            assert list(a) == list(b)


@needs_compiled
def test_the_scanners_agree_on_every_records_line():
    for line, _ in RECORDS_LINES.values():
        _same_records(line.split("\n")[-1])


@needs_compiled
def test_the_scanners_agree_on_every_one_character_edit_of_records():
    line = _log_line(_MODEL_LOG)
    critical = ['"', "\\", "\x1f", " ", "\u00e9", "0", "-", ",", "}", "]", "{"]
    for at in range(len(line) + 1):
        _same_records(_edited(line, [(at, 0, "")]))
        for character in critical:
            _same_records(_edited(line, [(at, 1, character)]))
            _same_records(_edited(line, [(at, 2, character)]))


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_scanners_agree_on_edited_records(data):
    line = _log_line(_MODEL_LOG)
    edit = st.tuples(st.integers(0, len(line)), st.integers(0, 3), _EDITS)
    _same_records(_edited(line, data.draw(st.lists(edit, max_size=3))))


SHORTEST_SEND = (
    '{"kind":"op","id":0,"type":"ok","f":"send","process":"p","time":0,'
    '"value":{"topic":"","partition":0,"key":"","value":""}}'
)


@needs_compiled
def test_the_c_scanner_holds_a_file_of_the_shortest_lines():
    """Its columns are sized for the most send lines a file of its size can hold."""
    from eosim.analysis import _jsonl_scan

    for count in (1, 2, 1000):
        for end in ("", "\n"):
            raw = ("\n".join([SHORTEST_SEND] * count) + end).encode()
            _, _, capacity, sends, others, _, _ = _jsonl_scan.scan(raw, -1, -1)
            assert sends == count and capacity >= count and len(others) == 0
    record = '{"offset":0,"value":"","producer_id":0,"epoch":0,"sequence":0}'
    for count in (1, 2, 1000):
        raw = ("[" + ",".join([record] * count) + "]").encode()
        _, values, capacity, closed = _jsonl_scan.log_records(raw, 0, len(raw))
        assert len(values) == count and capacity >= count and closed == len(raw) - 1


@needs_compiled
def test_the_c_scanner_refuses_ranges_outside_the_data():
    from eosim.analysis import _jsonl_scan

    starts, sizes = np.array([0, 3]), np.array([2, 5])
    with pytest.raises(ValueError, match="outside"):
        _jsonl_scan.texts(b"abcdef", starts, sizes)
    with pytest.raises(ValueError, match="outside"):
        _jsonl_scan.equal(b"abcdef", starts, sizes, starts, np.array([2, 2]))
    with pytest.raises(ValueError, match="int64"):
        _jsonl_scan.texts(b"abcdef", starts.astype(np.int32), sizes)
    with pytest.raises(ValueError, match="outside"):
        _jsonl_scan.log_records(b"[]", 1, 5)
    assert _jsonl_scan.texts(b"abcdef", starts, np.array([2, -1])) == ["ab", None]
    assert _jsonl_scan.equal(b"abab", np.array([0]), np.array([2]), np.array([2]), np.array([2]))
    assert not _jsonl_scan.equal(
        b"abac", np.array([0]), np.array([2]), np.array([2]), np.array([2])
    )


_JSON_NUMBER = st.builds(
    lambda minus, whole, fraction, exponent: (
        ("-" if minus else "")
        + whole
        + (f".{fraction}" if fraction else "")
        + (f"e{exponent}" if exponent is not None else "")
    ),
    st.booleans(),
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,19}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[0-9]{1,20}", fullmatch=True)),
    st.one_of(st.none(), st.integers(-400, 400)),
)


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(st.one_of(_JSON_NUMBER, st.floats(allow_nan=False, allow_infinity=False).map(repr)))
def test_the_c_scanner_reads_times_as_python_does(text):
    """Its fast path for short numbers (Clinger's) and its fallback to Python's own
    conversion give float(text), bit for bit."""
    from eosim.analysis import _jsonl_scan

    raw = _send(0, time=text).encode()
    _, times, _, sends, _, _, _ = _jsonl_scan.scan(raw, -1, -1)
    assert sends == 1
    assert np.frombuffer(times, dtype=np.float64)[:1].tobytes() == np.float64(float(text)).tobytes()
