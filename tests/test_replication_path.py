"""benchmarks/replication_path.py: the moments of an acks=1 record's way to its reader, the
same on the model's trace and on a real request log."""

from __future__ import annotations

import json

import pytest
from support import benchmark_module

rp = benchmark_module("replication_path")
KEY = ("events", 0)


def _acked(time: float, value: str, offset: int) -> dict:
    record = {"topic": "events", "partition": 0, "value": value, "offset": offset}
    return {"kind": "op", "type": "ok", "f": "send", "time": time, "value": record}


def _polled(time: float, value: str, offset: int) -> dict:
    record = {"topic": "events", "partition": 0, "offset": offset, "value": value}
    return {"kind": "op", "type": "ok", "f": "poll", "time": time, "value": {"records": [record]}}


def _leaders():
    leaders = rp.Leaders()
    leaders.answer(KEY, 0, 10.0)
    leaders.answer(KEY, 5, 20.0)
    # (arrival, fetch offset, answer ready): each answer carries up to the next fetch's offset.
    leaders.replica[(KEY, "broker-1")] += [(9.0, 0, 10.1), (11.0, 5, 20.2), (21.0, 8, 25.0)]
    leaders.replica[(KEY, "broker-2")] += [(9.5, 0, 10.2), (12.0, 5, 20.3), (22.5, 8, 26.0)]
    # The reader's first answer at offset 0 is empty; the second carries 0-2.
    leaders.consumer[(KEY, "reader")] += [(1.0, 0, 5.0), (6.0, 0, 13.0), (14.0, 3, 23.0)]
    leaders.consumer[(KEY, "reader")] += [(24.0, 8, 27.0)]
    return leaders


def test_a_record_passes_the_high_watermark_with_the_later_followers_next_fetch():
    assert _leaders().moments(KEY, 3) == {
        "answer": 10.0,  # the produce answer of the batch from offset 0
        "replica": 10.2,  # broker-2's answer carried it, and broker-2 fetched past it last
        "hw": 12.0,
        "fetch": 23.0,  # the reader's fetch from offset 3
    }
    assert _leaders().moments(KEY, 1)["fetch"] == 13.0  # not the empty answer before it


def test_a_record_no_follower_has_fetched_past_is_not_traced():
    leaders = _leaders()
    assert leaders.moments(KEY, 9) is None  # no fetch past offset 8 yet
    assert leaders.moments(("events", 1), 0) is None  # a partition without evidence


def test_the_history_gives_each_acknowledged_records_ack_and_first_read():
    lines = [
        _acked(4.0, "a", 3),
        _acked(5.0, "b", 4),
        _polled(7.0, "a", 3),
        _polled(9.0, "a", 3),
    ]
    moments = rp.history_moments(json.dumps(line) for line in lines)
    # "b" was never read: left out; "a" keeps its first read.
    assert moments == {"a": {"key": KEY, "offset": 3, "ack": 4.0, "read": 7.0}}
    records = rp.join(moments, _leaders(), 100.0)
    assert records == [
        {
            "answer": 10.0,
            "replica": 10.2,
            "hw": 12.0,
            "fetch": 23.0,
            "ack": 104.0,
            "read": 107.0,
            "since_epoch": 4.0,
        }
    ]
    text = rp.table(records, 0.0)
    assert text[0].startswith("1 records") and "ack to read" in text[-1]
    assert float(text[-1].split()[-2]) == pytest.approx(3.0)
    # Past --from-ms on the history's clock, not the leaders'.
    assert rp.table(records, 5.0)[0].startswith("0 records")
    # The tail alone: its ack to read (3 ms) is under 5 ms, at or over 3.
    assert rp.table(records, 0.0, tail_ms=5.0)[0].startswith("0 records")
    assert rp.table(records, 0.0, tail_ms=3.0)[0].startswith("1 records")


def test_a_connection_that_began_past_a_record_is_not_its_follower():
    """After a leader change a replica fetches from its new leader from past the records it
    already has: that connection says nothing about them."""
    leaders = _leaders()
    leaders.replica[(KEY, "broker-3")] += [(30.0, 8, 31.0), (32.0, 9, 33.0)]
    assert leaders.moments(KEY, 3)["hw"] == 12.0


def _line(nanos: int, kind: str, client: str, request: dict, response: dict, **times) -> str:
    body = {
        "requestHeader": {"requestApiKeyName": kind, "clientId": client},
        "request": request,
        "response": response,
        "connection": times.pop("connection", client),
        "totalTimeMs": times.get("total", 1.0),
        "responseQueueTimeMs": times.get("queue", 0.0),
        "sendTimeMs": times.get("send", 0.0),
    }
    return (
        f"[2026-12-02 05:01:12,728123] DEBUG Completed request:{json.dumps(body)} "
        f"(kafka.request.logger) @{nanos}\n"
    )


def test_a_request_log_trace_gives_the_same_moments_on_the_monotonic_clock(tmp_path):
    """``kafka`` reads the brokers' request log by topic id and fetch session (a request names
    only the partitions whose offset changed) and puts the history on the log's clock."""
    ms = 1_000_000  # ns
    epoch = 5_000 * ms
    tid = {"topicId": "T1"}

    def fetch(at, client, offset=None, total=1.0, conn=None):
        parts = [] if offset is None else [{"partition": 0, "fetchOffset": offset}]
        answer = {"responses": [{**tid, "partitions": [{"partitionIndex": 0}]}]}
        return _line(
            at,
            "FETCH",
            client,
            {"topics": [{**tid, "partitions": parts}]},
            answer,
            total=total,
            connection=conn or client,
        )

    lines = [
        _line(epoch, "METADATA", "producer-1", {}, {"topics": [{"name": "events", **tid}]}),
        # The produce of offsets 0-1 leaves the leader 10 ms after the epoch.
        _line(
            epoch + 10 * ms,
            "PRODUCE",
            "",
            {},
            {
                "responses": [
                    {**tid, "partitionResponses": [{"index": 0, "errorCode": 0, "baseOffset": 0}]}
                ]
            },
            send=0.5,
            total=2.0,
        ),
        fetch(epoch + 9 * ms, "broker-2-fetcher-0", 0),
        fetch(epoch + 10 * ms, "broker-2-fetcher-0", None),  # carried 0-1 (same offset)
        fetch(epoch + 13 * ms, "broker-2-fetcher-0", 2, total=0.5),  # arrived at 12.5
        fetch(epoch + 11 * ms, "broker-3-fetcher-0", 0),
        fetch(epoch + 14 * ms, "broker-3-fetcher-0", 2, total=0.5),  # arrived at 13.5: hw
        fetch(epoch + 15 * ms, "consumer-null-1", 0),
        fetch(epoch + 20 * ms, "consumer-null-1", 2),
    ]
    broker = tmp_path / "cluster-0" / "broker-1"
    broker.mkdir(parents=True)
    (broker / "server.log").write_text("".join(lines))
    run = tmp_path / "run-00001"
    run.mkdir()
    (run / "reader.0.spec.json").write_text(json.dumps({"epoch_monotonic_ns": epoch}))
    history = [
        _acked(10.8, "a", 1),
        _polled(15.5, "a", 1),
    ]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    [record] = rp.kafka(tmp_path)
    assert record == pytest.approx(
        {
            "answer": 5009.5,  # done less the send time
            "replica": 5011.0,  # broker-3's answer to its fetch from 0 (its last before 2)
            "hw": 5013.5,
            "fetch": 5015.0,
            "ack": 5010.8,
            "read": 5015.5,
            "since_epoch": 10.8,
        }
    )


def test_a_trace_without_the_monotonic_clock_is_refused(tmp_path):
    broker = tmp_path / "broker-1"
    broker.mkdir()
    line = _line(1, "PRODUCE", "", {}, {})
    (broker / "server.log").write_text(line.replace(" @1\n", "\n"))
    with pytest.raises(ValueError, match="without the monotonic clock"):
        rp.kafka(tmp_path)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert rp.main(["model", "--set", "network.nosuch=1"]) == 2
    assert rp.main(["kafka", str(tmp_path)]) == 2  # no request log, no run, no history
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("replication_path: ") for line in err)


def test_a_restarted_brokers_age_is_on_the_monotonic_clock_when_the_trace_has_it(tmp_path):
    """real_request_log.completed: a request's age since its broker's start, on the monotonic
    clock in a trace (the wall clock of the machine of 2026-12-02 stepped 8 s in a run), on
    the wall-clock stamps in an older log."""
    rrl = benchmark_module("real_request_log")

    def start(stamp: str, nanos: int | None) -> str:
        tail = "" if nanos is None else f" @{nanos}"
        return (
            f"[{stamp}] INFO [BrokerServer id=1] Transition from SHUTDOWN to STARTING "
            f"(kafka.server.BrokerServer){tail}\n"
        )

    broker = tmp_path / "broker-1"
    broker.mkdir()
    # The wall clock says 10 s between the start and the request, the monotonic clock 2 s.
    request = _line(7_000_000_000, "PRODUCE", "p", {}, {})
    (broker / "server.log").write_text(start("2026-12-02 05:01:02,728123", 5_000_000_000) + request)
    [traced] = rrl.completed(tmp_path)
    assert traced["_age_s"] == pytest.approx(2.0) and traced["_starts"] == 1
    (broker / "server.log").write_text(
        start("2026-12-02 05:01:02,728123", None) + request.replace(" @7000000000\n", "\n")
    )
    [old] = rrl.completed(tmp_path)
    assert old["_age_s"] == pytest.approx(10.0) and old["_done_ns"] is None
