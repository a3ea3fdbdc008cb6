"""The columnar delivery screen (eosim.analysis.delivery_screen) against the record-by-record
delivery checks: it may call a history clean only when they find nothing, and within what it
judges it must call clean every history in which they find nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosim.analysis.checker import ANOMALIES, check
from eosim.analysis.delivery_screen import clean_deliveries
from eosim.analysis.history import History, history_from_recorder, history_from_records
from eosim.simulation.history import HistoryRecorder
from tests.histories import Builder

VALUES = [f"v{i}" for i in range(6)]


def _exact_counts(history: History) -> dict[str, int]:
    result = check(history, screen=False)
    return {name: result.anomalies[name].count for name in ANOMALIES}


def _shared(history: History) -> bool:
    """Whether some record was sent by two processes (the screen leaves those to the full
    checks even when they find nothing)."""
    writers: dict[tuple[str, str], str] = {}
    return any(
        writers.setdefault((s.topic, s.value), s.process) != s.process for s in history.sends
    )


def _agrees(history: History) -> None:
    counts = _exact_counts(history)
    clean = clean_deliveries(history)
    if clean:
        assert not any(counts.values()), counts
    in_domain = not (history.txns or history.log_starts or _shared(history))
    if in_domain and not any(counts.values()):
        assert clean, "the screen sent a clean history to the full checks"
    # Whatever the screen says, check() gives what the full checks give.
    screened = check(history)
    assert {n: screened.anomalies[n].count for n in ANOMALIES} == counts


@st.composite
def recorded_history(draw: Any) -> HistoryRecorder:
    """A small random history written through the model's recorder: sends that may collide
    in value, partition and offset, final logs and polls that may or may not hold them."""
    recorder = HistoryRecorder({})
    time = 0.0
    for _ in range(draw(st.integers(0, 8))):
        process = draw(st.sampled_from(["p1", "p2", "p3"]))
        topic = draw(st.sampled_from(["t", "u"]))
        partition = draw(st.sampled_from([0, 1, None]))
        value = draw(st.sampled_from(VALUES))
        time += 1.0
        op_id = recorder.invoke_send(process, time, topic, partition, None, value)
        outcome = draw(st.sampled_from(["ok", "ok", "fail", "info", None]))
        if outcome is None:
            continue  # never completed
        landed = partition if partition is not None else draw(st.sampled_from([0, 1, None]))
        offset = draw(st.sampled_from([None, 0, 1, 2, 3])) if outcome == "ok" else None
        error = None if outcome == "ok" else "TimeoutException: x"
        time += 1.0
        recorder.complete_send(op_id, outcome, time, landed, offset, error)
    for _ in range(draw(st.integers(0, 2))):
        records = draw(st.lists(st.tuples(st.sampled_from(["t", "u"]), st.sampled_from([0, 1]),
                                          st.integers(0, 3), st.sampled_from(VALUES)),
                                max_size=3))  # fmt: skip
        time += 1.0
        poll = recorder.invoke("poll", "c1", time, None)
        polled = [{"topic": t, "partition": p, "offset": o, "value": v} for t, p, o, v in records]
        time += 1.0
        recorder.complete(poll, "ok", "poll", "c1", time, {"records": polled})
    logged = draw(st.sets(st.tuples(st.sampled_from(["t", "u"]), st.sampled_from([0, 1]))))
    for topic, partition in sorted(logged):
        values = draw(st.lists(st.sampled_from(VALUES), max_size=4))
        records = [
            {"offset": i, "value": v, "producer_id": 1, "epoch": 0, "sequence": i}
            for i, v in enumerate(values)
        ]
        recorder.add_log(topic, partition, records)
    return recorder


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recorded_history())
def test_the_screen_agrees_with_the_full_checks_on_random_histories(recorder):
    # Both forms of the same history: columns from the recorder's tuples, and from objects.
    _agrees(history_from_recorder(recorder))
    _agrees(history_from_records(recorder.records()))


def _clean_history() -> Builder:
    h = Builder()
    h.send("p", "a", offset=0)
    h.send("p", "b", offset=1)
    h.log("t", 0, ["a", "b"])
    return h


def test_a_clean_history_is_clean():
    h = _clean_history().history()
    assert clean_deliveries(h)
    assert not any(_exact_counts(h).values())


def test_each_anomaly_is_sent_to_the_full_checks():
    """One history per delivery anomaly: the screen must not call it clean."""
    cases: dict[str, Builder] = {}
    dup = Builder()
    dup.send("p", "a", offset=0)
    dup.log("t", 0, ["a", "a"])
    cases["duplicate"] = dup
    lost = Builder()
    lost.send("p", "a", offset=0)
    lost.send("p", "b", offset=1)
    lost.log("t", 0, ["a"])
    cases["lost_write"] = lost
    reorder = Builder()
    reorder.send("p", "a", offset=1)
    reorder.send("p", "b", offset=0)
    reorder.log("t", 0, ["b", "a"])
    cases["nonmonotonic_send"] = reorder
    clash = Builder()
    clash.send("p", "a", offset=0)
    clash.log("t", 0, ["b"])
    cases["inconsistent_offsets"] = clash
    unseen = Builder()
    unseen.send("p", "a", offset=0)
    cases["unseen"] = unseen
    for name, builder in cases.items():
        history = builder.history()
        assert _exact_counts(history)[name] > 0, name
        assert not clean_deliveries(history), name
        assert check(history).anomalies[name].count == _exact_counts(history)[name]


def test_histories_outside_the_screen_go_to_the_full_checks():
    h = _clean_history()
    h.records.append(
        {"kind": "log", "topic": "u", "partition": 0, "records": [], "log_start_offset": 2}
    )
    assert not clean_deliveries(h.history())  # a deleted log head
