"""The calibration report (eosim.analysis.calibrate) on run tables written here: agreeing sides
flag nothing, a side that loses writes in every run where the other never does is flagged, and
the timing rows come from the runs' sketches and failover times."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eosim.analysis.calibrate import CalibrationError, Figure, Row, compare, holm, write
from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.history import history_from_records
from eosim.analysis.stats import sketch
from eosim.analysis.timings import (
    WARM_UP_MS,
    failover_times,
    read_after_ack_latencies,
    warm_ack_latencies,
)
from eosim.simulation.rules import preset_for

MANIFEST = {
    "format": "eosim-sweep",
    "scenario": "calib",
    "scenario_yaml": "name: calib\n",
    "seed": 1,
    "runs_per_variant": 20,
    "grid": [],
    "set": [],
    "variants": [{"variant": 0, "params": {}}],
    "command": "eosim sweep calib.yaml --runs 20",
}


def sweep(
    root: Path,
    lost: list[int],
    latency_ms: float,
    failover: float,
    cold_ms: float | None = None,
    warm: bool = True,
) -> Path:
    """A finished-looking sweep of 20 runs with ``lost[i]`` lost writes in run i. Each run's
    warm sends take about ``latency_ms``; with ``cold_ms`` a tenth of its sends (its cold
    start) take that long instead. ``warm=False`` writes no warm column, as sweeps made before
    it existed."""
    (root / "runs" / "chunk=00000" / "variant=0").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    rows = []
    for i, n in enumerate(lost):
        row = {name: 0 for name in ALL_ANOMALIES}
        row |= {
            "run": i,
            "seed": 100 + i,
            "sent": 1000,
            "lost_write": n,
            "ack_latency_sketch": sketch(
                [cold_ms if cold_ms and j % 10 == 0 else latency_ms + j % 5 for j in range(50)]
            ),
            "commit_latency_sketch": None,
            "failover_ms": [failover + i],
        }
        if warm:
            row["warm_ack_latency_sketch"] = sketch([latency_ms + j % 5 for j in range(50)])
        rows.append(row)
    pq.write_table(pa.Table.from_pylist(rows), root / "runs/chunk=00000/variant=0/part.parquet")
    return root


def test_agreeing_sides_flag_nothing(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 19 + [1], 5.0, 6000.0)
    cal = compare(model, kafka)
    assert cal.disagreements == []
    measures = [r.measure for r in cal.rows]
    assert "lost_write: runs with" in measures and "failover time" in measures
    lost = next(r for r in cal.rows if r.measure == "lost_write: runs with")
    assert lost.model.text.startswith("0/20") and lost.kafka.text.startswith("1/20")


def test_losses_on_one_side_only_disagree(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [30] * 20, 5.0, 6000.0)
    cal = compare(model, kafka)
    flagged = {r.measure for r in cal.disagreements}
    assert flagged == {"lost_write: runs with", "lost_write: per record"}


def test_slower_failover_and_latency_disagree(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 50.0, 20000.0)
    cal = compare(model, kafka)
    flagged = {r.measure for r in cal.disagreements}
    assert flagged == {
        "produce latency p50",
        "produce latency p99",
        "produce latency p50, warm",
        "produce latency p99, warm",
        "failover time",
    }
    paths = write(cal, tmp_path / "out")
    text = paths[0].read_text()
    assert "**disagree**" in text and "failover time" in text
    assert "disagree" in paths[1].read_text()


def test_different_sweeps_are_refused(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0)
    manifest = json.loads((kafka / "manifest.json").read_text())
    manifest["seed"] = 2
    (kafka / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CalibrationError, match="seed differs"):
        compare(model, kafka)


def _set(root: Path, overrides: list[str]) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["set"] = overrides
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_the_model_side_may_take_the_clusters_version_and_nothing_else(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0)
    _set(model, ["kafka.version=4.1"])
    assert compare(model, kafka).rows  # the model of Kafka 4.1 against Kafka 4.1.1
    _set(model, ["kafka.version=4.1", "network.request_loss=0.1"])
    with pytest.raises(CalibrationError, match="set differs"):
        compare(model, kafka)


def test_a_release_maps_to_the_preset_of_its_line():
    assert [preset_for(r) for r in ("4.1.1", "4.0.0", "3.9.1")] == ["4.1", "4.0", "3.9"]
    assert preset_for("3.7.2") is None and preset_for("trunk") is None


def test_holm_adjusts_by_rank():
    rows = [
        Row(0, "{}", f"m{i}", Figure("a"), Figure("b"), "t", p)
        for i, p in enumerate([0.01, 0.02, 0.03, None])
    ]
    holm(rows)
    assert [r.p_adjusted for r in rows] == [
        pytest.approx(0.03),
        pytest.approx(0.04),
        pytest.approx(0.04),
        None,
    ]
    assert [r.disagree for r in rows] == [True, True, True, False]


def _send(i: int, partition: int, invoke: float, complete: float) -> list[dict]:
    value = {"topic": "t", "partition": partition, "key": None, "value": f"v{i}"}
    return [
        {
            "kind": "op",
            "id": i,
            "type": "invoke",
            "f": "send",
            "process": "p/0",
            "time": invoke,
            "value": value,
        },
        {
            "kind": "op",
            "id": i,
            "type": "ok",
            "f": "send",
            "process": "p/0",
            "time": complete,
            "value": {**value, "offset": i},
        },
    ]


def test_a_cold_start_shows_in_the_whole_run_tail_but_not_once_warm(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0, cold_ms=120.0)
    flagged = {r.measure for r in compare(model, kafka).disagreements}
    assert flagged == {"produce latency p99"}


def test_sweeps_without_the_warm_column_compare_without_its_rows(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0, warm=False)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0)
    measures = {r.measure for r in compare(model, kafka).rows}
    assert "produce latency p99" in measures
    assert not any(m.endswith(", warm") for m in measures)


def test_warm_latencies_leave_out_the_first_seconds_of_sends():
    records = [*_send(0, 0, 100, 400), *_send(1, 1, 100 + WARM_UP_MS - 1, 200 + WARM_UP_MS)]
    records += _send(2, 0, 100 + WARM_UP_MS, 104 + WARM_UP_MS)
    records += _send(3, 1, 200 + WARM_UP_MS, 203 + WARM_UP_MS)
    history = history_from_records(records)
    assert sorted(warm_ack_latencies(history)) == [3.0, 4.0]
    assert warm_ack_latencies(history_from_records([])) == []


def _poll(i: int, process: str, time: float, values: list[str]) -> list[dict]:
    records = [
        {"topic": "t", "partition": 0, "offset": n, "value": v} for n, v in enumerate(values)
    ]
    return [
        {
            "kind": "op",
            "id": i,
            "type": "invoke",
            "f": "poll",
            "process": process,
            "time": time,
            "value": {"isolation": "read_uncommitted"},
        },
        {
            "kind": "op",
            "id": i,
            "type": "ok",
            "f": "poll",
            "process": process,
            "time": time,
            "value": {"isolation": "read_uncommitted", "records": records},
        },
    ]


def test_ack_to_first_read_takes_each_records_first_read_by_a_consumer_not_the_drain():
    records = [*_send(0, 0, 100, 104), *_send(1, 0, 110, 112), *_send(2, 0, 120, 121)]
    records += _poll(10, "reader/0", 109, ["v0"])  # v0: acked at 104, read at 109
    records += _poll(11, "reader/0", 111, ["v0", "v1"])  # v1 read before its ack came back
    records += _poll(12, "reader/0", 130, ["v1"])  # a later read of v1 does not count
    records += _poll(13, "drain/0", 500, ["v0", "v1", "v2"])  # v2: only the drain read it
    history = history_from_records(records)
    assert sorted(read_after_ack_latencies(history)) == [-1.0, 5.0]
    assert read_after_ack_latencies(history_from_records(_send(0, 0, 1, 2))) == []


def test_failover_time_is_the_slowest_partition_to_take_writes_again():
    records: list[dict] = []
    i = 0
    for t in range(0, 1000, 100):  # both partitions written before the crash at 1000
        for p in (0, 1):
            records += _send(i, p, t, t + 2)
            i += 1
    records.append(
        {
            "kind": "fault",
            "time": 1000.0,
            "phase": "start",
            "fault": "crash",
            "targets": ["broker-0"],
        }
    )
    records += _send(i, 0, 1001, 1010)  # partition 0 answers at once
    records += _send(i + 1, 1, 990, 7500)  # partition 1 waits for its new leader
    history = history_from_records(records)
    assert failover_times(history) == [6500.0]


def test_no_broker_fault_no_failover_time():
    records = [
        *_send(0, 0, 0, 5),
        {
            "kind": "fault",
            "time": 3.0,
            "phase": "start",
            "fault": "pause",
            "targets": ["producer-0"],
        },
        *_send(1, 0, 10, 20),
    ]
    assert failover_times(history_from_records(records)) == []
