"""benchmarks/tail_pauses.py: a kept real run's tail records beside its JVMs' pauses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import benchmark_module

tp = benchmark_module("tail_pauses")

EPOCH_NS = 5_000_000_000_000


def _safepoint(end_ms: float, total_ms: float) -> str:
    ns = EPOCH_NS + int(end_ms * 1e6)
    return (
        f"[2026-12-02T15:02:45.219+0000][0.759s][{ns}ns][info][safepoint] Safepoint "
        f'"GenCollectForAllocation", Time since last: 1 ns, Reaching safepoint: 4377 ns, '
        f"Cleanup: 94 ns, At safepoint: 1 ns, Total: {int(total_ms * 1e6)} ns\n"
    )


def _op(op_id: int, kind: str, f: str, process: str, time: float, value: object) -> dict:
    return {
        "kind": "op",
        "id": op_id,
        "type": kind,
        "f": f,
        "process": process,
        "time": time,
        "value": value,
    }


def _kept(root: Path, reader_pause: tuple[float, float], leader_pause: tuple[float, float]) -> Path:
    """One kept run: four records of partition 0 (led by broker-1), two of them read 30 and
    20 ms after their acknowledgement, each by a poll of its own; the reader and the leader
    each pause once (end, total ms), and a follower for 0.3 ms."""
    run = root / "run-00001"
    run.mkdir(parents=True)
    (run / "producer-0.0.spec.json").write_text(json.dumps({"epoch_monotonic_ns": EPOCH_NS}))
    lines = [{"kind": "meta", "format": "eosim-history", "version": 1}]
    for i, (acked, read) in enumerate(((100, 101), (200, 230), (400, 420), (600, 601))):
        value = {"topic": "events", "partition": 0, "key": None, "value": f"v{i}"}
        polled = {"records": [{"topic": "events", "partition": 0, "offset": i, "value": f"v{i}"}]}
        lines += [
            _op(i, "invoke", "send", "producer-0/0", acked - 5, value),
            _op(i, "ok", "send", "producer-0/0", acked, {**value, "offset": i}),
            _op(100 + i, "invoke", "poll", "reader/0", read - 1, None),
            _op(100 + i, "ok", "poll", "reader/0", read, polled),
        ]
    records = [{"offset": i, "value": f"v{i}"} for i in range(4)]
    lines.append(
        {"kind": "log", "topic": "events", "partition": 0, "leader": "broker-1", "records": records}
    )
    (run / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "reader.0.gc.log").write_text(_safepoint(*reader_pause))
    (run / "producer-0.0.gc.log").write_text("")
    for node, pause in (("broker-1", leader_pause), ("broker-2", (100.5, 0.3))):
        (root / "cluster-0" / node).mkdir(parents=True)
        (root / "cluster-0" / node / "gc-123.log").write_text(_safepoint(*pause))
    return run


def test_each_tail_record_is_put_beside_the_pauses_that_meet_it(tmp_path):
    # The reader stops from 210 to 225 ms (in v1's wait), the leader from 405 to 408 (v2's).
    run = _kept(tmp_path, reader_pause=(225, 15), leader_pause=(408, 3))
    rng = __import__("numpy").random.default_rng(1)
    a = tp.analyse_run(tmp_path, run, tail_ms=10, min_pause_ms=1, shifts=50, rng=rng)
    assert (a.records, a.tail, a.episodes) == (4, 2, 2)
    assert a.hit == {
        "reader": 1,
        "producer": 0,
        "leader": 1,
        "follower": 0,
        "controller": 0,
        "any": 2,
    }
    assert a.hit_episodes["any"] == 2
    assert 0 <= a.chance["reader"] <= 1 and 0 <= a.chance["any"] <= 2
    assert a.pauses["reader"] == [pytest.approx(15)]


def test_pauses_outside_every_wait_meet_nothing(tmp_path):
    run = _kept(tmp_path, reader_pause=(150, 15), leader_pause=(500, 3))
    rng = __import__("numpy").random.default_rng(1)
    a = tp.analyse_run(tmp_path, run, tail_ms=10, min_pause_ms=1, shifts=10, rng=rng)
    assert a.tail == 2 and a.hit["any"] == 0 and a.hit_episodes["any"] == 0
    report = "\n".join(tp.report([("run-00001", a)], 10))
    assert "reader" in report and "broker" in report


def test_a_folder_without_kept_runs_is_one_line_and_exit_2(tmp_path, capsys):
    assert tp.main(["analyse", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "no run-*/history.jsonl" in err[0]


def test_other_processes_cpu_is_read_over_the_workload_alone(tmp_path):
    rows = [  # 0.5 s samples at 0.5, 1.0 and 9.0 s after the epoch
        {"ns": EPOCH_NS + 500_000_000, "java": 400, "harness": 5, "other": 10, "top": []},
        {
            "ns": EPOCH_NS + 1_000_000_000,
            "java": 400,
            "harness": 5,
            "other": 200,
            "top": [["python3", 180], ["kworker/0:1", 20]],
        },
        {"ns": EPOCH_NS + 9_000_000_000, "java": 400, "harness": 5, "other": 400, "top": []},
    ]
    (tmp_path / "cpu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = tp.other_cpu(tmp_path, EPOCH_NS, 0.0, 1000.0)
    assert other.mean == pytest.approx(210.0) and other.peak == pytest.approx(400.0)
    assert other.peak_top == "python3 180, kworker/0:1 20"
    assert tp.other_cpu(tmp_path / "none", EPOCH_NS, 0.0, 1000.0) is None
    assert other.jvm == {}  # a sample made before JVMs were split by thread


def test_the_sampler_names_the_process_that_took_the_cpu(tmp_path, monkeypatch):
    import subprocess
    import sys
    import time

    monkeypatch.setattr(tp, "SAMPLE_S", 0.2)
    sampler = tp.CpuSampler(tmp_path / "cpu.jsonl")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        sampler.start()
        time.sleep(1.0)
    finally:
        sampler.stop.set()
        sampler.join()
        busy.kill()
        busy.wait()
    rows = [json.loads(x) for x in (tmp_path / "cpu.jsonl").read_text().splitlines()]
    assert len(rows) >= 3
    assert any(r["other"] >= 100 and r["top"][0][0].startswith("python") for r in rows)


def test_a_jvm_is_named_by_its_role_and_its_threads_grouped(tmp_path, monkeypatch):
    import subprocess
    import time

    config = tmp_path / "broker-2" / "server.properties"
    config.parent.mkdir()
    args = ["-c", "import time; time.sleep(30)", "kafka.Kafka", str(config)]
    java = subprocess.Popen([__import__("sys").executable, *args])
    try:
        deadline = time.monotonic() + 5.0  # its command line is the new one once it has run
        while (name := tp._jvm_name(java.pid)) != "broker-2" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert name == "broker-2"
    finally:
        java.kill()
        java.wait()
    assert tp._jvm_name(2**22 + 7) == f"java-{2**22 + 7}"  # gone: by pid
    assert set(tp._thread_ticks(__import__("os").getpid())) <= {
        "jit",
        "gc",
        "request",
        "fetcher",
        "other",
    }
