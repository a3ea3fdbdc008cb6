"""The calibration report (eosim.analysis.calibrate) on run tables written here: agreeing sides
flag nothing, a side that loses writes in every run where the other never does disagrees, the
timing rows come from the runs' sketches and failover times (per fault kind, with faults after
which writes never resumed), invalid runs are left out and counted, and the report opens with
the rows per verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eosim.analysis.calibrate import CalibrationError, compare, write
from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.history import history_from_records
from eosim.analysis.stats import sketch
from eosim.analysis.timings import (
    WARM_UP_MS,
    Failover,
    failover_times,
    failovers,
    read_after_ack,
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
    failover: float | None,
    cold_ms: float | None = None,
    warm: bool = True,
    invalid: dict[int, str] | None = None,
    latency: bool = True,
) -> Path:
    """A finished-looking sweep of 20 runs with ``lost[i]`` lost writes in run i. Each run's
    warm sends take about ``latency_ms``; with ``cold_ms`` a tenth of its sends (its cold
    start) take that long instead. Each run has two crashes, whose writes resume after
    ``failover + i`` ms (None: never). ``warm=False`` writes no warm column, as sweeps made
    before it existed; ``invalid`` marks runs invalid with a reason; ``latency=False`` gives
    no run an acknowledged send."""
    (root / "runs" / "chunk=00000" / "variant=0").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    rows = []
    for i, n in enumerate(lost):
        row = {name: 0 for name in ALL_ANOMALIES}
        times = [cold_ms if cold_ms and j % 10 == 0 else latency_ms + j % 5 for j in range(50)]
        row |= {
            "run": i,
            "seed": 100 + i,
            "sent": 1000,
            "lost_write": n,
            "ack_latency_sketch": sketch(times) if latency else None,
            "commit_latency_sketch": None,
            "failover_ms": [None if failover is None else failover + i + d for d in (0, 50)],
            "failover_kind": ["crash", "crash"],
            "valid": i not in (invalid or {}),
            "invalid_reason": (invalid or {}).get(i),
        }
        if warm:
            warm_times = [latency_ms + j % 5 for j in range(50)]
            row["warm_ack_latency_sketch"] = sketch(warm_times) if latency else None
        rows.append(row)
    pq.write_table(pa.Table.from_pylist(rows), root / "runs/chunk=00000/variant=0/part.parquet")
    return root


def _row(cal, measure):
    return next(r for r in cal.rows if r.measure == measure)


def test_agreeing_sides_flag_nothing(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 19 + [1], 5.0, 6000.0)
    cal = compare(model, kafka)
    assert cal.disagreements == []
    lost = _row(cal, "lost_write: runs with")
    assert lost.model.text.startswith("0/20") and lost.kafka.text.startswith("1/20")
    assert not lost.primary and lost.verdict == "inconclusive"  # 0/20 against 1/20
    assert _row(cal, "lost_write: per record").primary
    assert _row(cal, "duplicate: runs with").verdict == "agree"  # none on either side
    assert _row(cal, "failover after crash: time").verdict == "agree"
    assert _row(cal, "produce latency p50, warm").verdict == "agree"


def test_none_on_either_side_per_record_follows_its_runs_with_row(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0)
    cal = compare(model, kafka)
    per_record = _row(cal, "duplicate: per record")
    runs_with = _row(cal, "duplicate: runs with")
    assert per_record.follows == "duplicate: runs with" and not per_record.primary
    assert per_record.verdict == runs_with.verdict
    assert per_record.result.p_equivalent == runs_with.result.p_equivalent


def test_losses_on_one_side_only_disagree(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [30] * 20, 5.0, 6000.0)
    cal = compare(model, kafka)
    flagged = {r.measure for r in cal.disagreements}
    assert flagged == {"lost_write: runs with", "lost_write: per record"}
    # The model's zero carries a bound clustered by run with Kafka's 30-record clusters.
    assert _row(cal, "lost_write: per record").model.text.startswith("0 [0–")


def test_a_tenfold_rate_disagrees_where_a_difference_test_would_also_see_it(tmp_path):
    model = sweep(tmp_path / "model", [3] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [30 + i % 3 for i in range(20)], 5.0, 6000.0)
    cal = compare(model, kafka)
    per_record = _row(cal, "lost_write: per record")
    assert per_record.verdict == "disagree" and per_record.result.high < 0.5


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
        "failover after crash: time",
    }
    paths = write(cal, tmp_path / "out")
    text = paths[0].read_text()
    assert "**disagree**" in text and "failover after crash: time" in text
    assert "disagree" in paths[1].read_text()


def test_failovers_that_never_resume_are_counted_not_dropped(tmp_path):
    """Case 2 variant 2's failover: the model's writes resumed after 15 s in every run,
    Kafka's never in 7 of 20; they were dropped and the row passed."""
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 15_000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, None)
    cal = compare(model, kafka)
    never = _row(cal, "failover after crash: never resumed")
    assert never.model.text.startswith("0/20") and never.kafka.text.startswith("20/20")
    assert never.verdict == "disagree"
    time = _row(cal, "failover after crash: time")
    assert time.kafka.text == "never (40)" and time.verdict == "disagree"
    assert "model side only" in time.result.method


def test_latency_on_one_side_only_disagrees(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0, latency=False)
    cal = compare(model, kafka)
    p50 = _row(cal, "produce latency p50")
    assert p50.kafka.text == "-" and p50.verdict == "disagree"


def test_invalid_runs_are_left_out_and_counted(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    bad = {
        3: "fault not applied: pause [broker-0]: not every thread stopped",
        7: "drain incomplete",
    }
    kafka = sweep(tmp_path / "kafka", [0] * 3 + [500] + [0] * 16, 5.0, 6000.0, invalid=bad)
    cal = compare(model, kafka)
    assert cal.runs == {"model": 20, "kafka": 18}
    assert cal.invalid["kafka"] == {"drain incomplete": 1, "fault not applied": 1}
    # Run 3's 500 lost writes are not counted: it did not prove its pause.
    assert _row(cal, "lost_write: runs with").kafka.text.startswith("0/18")
    report = write(cal, tmp_path / "out")[0].read_text()
    assert "18 valid runs, 2 invalid and left out: drain incomplete (1)" in report


def test_a_run_is_counted_once_however_many_reasons_it_has(tmp_path):
    """A run made invalid by one rule for each of three brokers, and one by two rules, are
    two runs: each rule counts the runs that broke it."""
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    three = "; ".join(f"compiling: broker-{b}'s JIT compiled 90 ms/s" for b in range(3))
    bad = {0: three, 1: "compiling: broker-0's JIT compiled 60 ms/s; drain incomplete"}
    kafka = sweep(tmp_path / "kafka", [0] * 20, 5.0, 6000.0, invalid=bad)
    cal = compare(model, kafka)
    assert cal.runs["kafka"] == 18 and cal.invalid_runs("kafka") == 2
    assert cal.invalid["kafka"] == {"compiling": 2, "drain incomplete": 1}
    assert cal.to_dict()["invalid_runs"] == {"model": 0, "kafka": 2}
    report = write(cal, tmp_path / "out")[0].read_text()
    assert "18 valid runs, 2 invalid and left out: compiling (2), drain incomplete (1)" in report


def test_a_side_cut_short_is_compared_on_the_runs_both_sides_have(tmp_path):
    """The model loses writes in runs 12-19 only, which the Kafka side, cut after 12 runs,
    never ran: compared on the common runs, both sides agree on none; compared whole, the model's
    eight runs with losses are counted against Kafka's twelve."""
    model = sweep(tmp_path / "model", [0] * 12 + [40] * 8, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [0] * 12, 5.0, 6000.0, invalid={4: "not warm"})
    whole = compare(model, kafka)
    assert _row(whole, "lost_write: runs with").model.text.startswith("8/20")
    cal = compare(model, kafka, common=True)
    assert cal.runs == {"model": 12, "kafka": 11}
    assert _row(cal, "lost_write: runs with").model.text.startswith("0/12")
    assert _row(cal, "lost_write: runs with").kafka.text.startswith("0/11")
    report = write(cal, tmp_path / "out")[0].read_text()
    assert (
        "Compared on the 12 runs both sides have finished (the Kafka side has 12 of 12, "
        "the model side 20)." in report
    )
    assert "Compared on" not in write(whole, tmp_path / "whole")[0].read_text()


def test_the_report_opens_with_the_rows_per_verdict(tmp_path):
    model = sweep(tmp_path / "model", [0] * 20, 5.0, 6000.0)
    kafka = sweep(tmp_path / "kafka", [30] * 20, 50.0, 6000.0)
    cal = compare(model, kafka)
    counts = cal.counts()
    assert sum(counts.values()) == sum(1 for r in cal.rows if r.result is not None)
    lines = write(cal, tmp_path / "out")[0].read_text().splitlines()
    assert lines[2] == (
        f"**{counts['agree']} row(s) agree, {counts['disagree']} disagree, "
        f"{counts['inconclusive']} inconclusive** (primary rows, Holm-adjusted together: "
        f"{cal.counts(primary=True)['agree']} agree, {cal.counts(primary=True)['disagree']} "
        f"disagree, {cal.counts(primary=True)['inconclusive']} inconclusive)."
    )
    data = json.loads((tmp_path / "out" / "calibration.json").read_text())
    assert data["counts"] == counts


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
    # ... and the resource model of the machine the real cluster runs on.
    _set(model, ["kafka.version=4.1", "cluster.resources.preset=calibration-host"])
    assert compare(model, kafka).rows
    _set(model, ["kafka.version=4.1", "network.request_loss=0.1"])
    with pytest.raises(CalibrationError, match="set differs"):
        compare(model, kafka)
    # A scenario that pins another version is set to the cluster's on both sides (Kafka 4.4.0).
    _set(model, ["kafka.version=4.4", "cluster.crash_reset={min: 20ms, max: 60ms}"])
    _set(kafka, ["kafka.version=4.4"])
    assert compare(model, kafka).rows
    _set(kafka, ["kafka.version=4.4", "network.request_loss=0.1"])
    with pytest.raises(CalibrationError, match="set differs"):
        compare(model, kafka)


def test_a_release_maps_to_the_preset_of_its_line():
    assert [preset_for(r) for r in ("4.1.1", "4.0.0", "3.9.1")] == ["4.1", "4.0", "3.9"]
    assert preset_for("3.7.2") is None and preset_for("trunk") is None


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
    # ... each with its send's acknowledgement, which benchmarks/split_read_lag.py splits by
    assert sorted(read_after_ack(history)) == [(104.0, 5.0), (112.0, -1.0)]


def _written_then_faulted(kind: str, target: str) -> tuple[list[dict], int]:
    """Both partitions written every 100 ms up to 1 s, then a ``kind`` fault of ``target`` at
    1 s: the records, and the next op id."""
    records: list[dict] = []
    i = 0
    for t in range(0, 1000, 100):
        for p in (0, 1):
            records += _send(i, p, t, t + 2)
            i += 1
    fault = {"kind": "fault", "time": 1000.0, "phase": "start", "fault": kind}
    records.append(fault | {"targets": [target]})
    return records, i


def test_failover_time_is_the_slowest_partition_to_take_writes_again():
    records, i = _written_then_faulted("crash", "broker-0")
    records += _send(i, 0, 1001, 1010)  # partition 0 answers at once
    records += _send(i + 1, 1, 990, 7500)  # partition 1 waits for its new leader
    history = history_from_records(records)
    assert failover_times(history) == [6500.0]
    assert failovers(history) == [Failover("crash", ("broker-0",), 1000.0, 6500.0)]


def test_a_partition_that_never_takes_writes_again_is_a_failover_that_never_resumed():
    records, i = _written_then_faulted("pause", "broker-1")
    for t in range(1000, 5000, 100):  # the workload goes on; partition 1 never answers
        records += _send(i, 0, t, t + 2)
        i += 1
    history = history_from_records(records)
    assert failovers(history) == [Failover("pause", ("broker-1",), 1000.0, None)]
    assert failover_times(history) == []
    # A fault so near the workload's end that nothing could tell is left out.
    late = [r for r in records if r.get("kind") != "op" or r["time"] < 2500.0]
    assert failovers(history_from_records(late)) == []


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


def _keep_side():
    from support import benchmark_module

    return benchmark_module("keep_side")


def test_a_kept_side_compares_as_the_sweep_it_was_kept_from(tmp_path):
    """benchmarks/keep_side.py: the run table in one file per variant, no histories; the
    comparison with it is the one with the sweep itself."""
    kafka = sweep(tmp_path / "kafka", [0] * 18 + [2, 1], 5.0, 6000.0)
    (kafka / "histories").mkdir()
    (kafka / "histories" / "run.jsonl").write_text("{}\n")
    model = sweep(tmp_path / "model", [0] * 20, 6.0, 6000.0)
    keep = _keep_side()
    assert keep.keep(kafka, tmp_path / "kept") == 20
    assert not (tmp_path / "kept" / "histories").exists()
    before, after = compare(model, kafka), compare(model, tmp_path / "kept")
    assert after.to_dict() == before.to_dict() and len(after.rows) >= 10
    with pytest.raises(ValueError, match="exists already"):
        keep.keep(kafka, tmp_path / "kept")
    with pytest.raises(ValueError, match="not a sweep"):
        keep.keep(tmp_path / "nothing", tmp_path / "kept2")


def _partial(root: Path, runs: int) -> Path:
    """A real sweep cut short as the sweep commits it: one chunk a run, not complete."""
    whole = sweep(root.with_name(root.name + "-whole"), [0] * 18 + [2, 1], 5.0, 6000.0)
    table = pq.read_table(whole / "runs/chunk=00000/variant=0/part.parquet")
    for i in range(runs):
        folder = root / "runs" / f"chunk={i:05d}" / "variant=0"
        folder.mkdir(parents=True)
        pq.write_table(table.slice(i, 1), folder / "part-00000.parquet")
    (root / "manifest.json").write_text(
        json.dumps(MANIFEST | {"sweep_id": "s1", "complete": False})
    )
    return root


def test_an_unfinished_side_is_kept_run_by_run_and_resumes(tmp_path):
    """A side cut short is kept as its sweep committed it, replaced by a later keep of the
    same sweep with more runs (never by one with fewer), compares as the sweep does, and
    --resume puts it back for the sweep command to carry on."""
    keep = _keep_side()
    model = sweep(tmp_path / "model", [0] * 20, 6.0, 6000.0)
    early, late = _partial(tmp_path / "early", 7), _partial(tmp_path / "late", 12)
    kept = tmp_path / "kept"
    assert keep.keep(early, kept) == 7
    assert len(list((kept / "runs").glob("chunk=*/variant=0/part-00000.parquet"))) == 7
    assert keep.keep(late, kept) == 12
    assert compare(model, kept).to_dict() == compare(model, late).to_dict()
    with pytest.raises(ValueError, match="more than"):
        keep.keep(early, kept)
    assert keep.resume(kept, tmp_path / "again" / "kafka") == 12
    with pytest.raises(ValueError, match="exists already"):
        keep.resume(kept, tmp_path / "again" / "kafka")
    other = _partial(tmp_path / "other", 3)
    (other / "manifest.json").write_text(json.dumps(MANIFEST | {"sweep_id": "s2"}))
    with pytest.raises(ValueError, match="exists already"):
        keep.keep(other, kept)
    finished = sweep(tmp_path / "finished", [0] * 20, 5.0, 6000.0)
    (finished / "manifest.json").write_text(json.dumps(MANIFEST | {"complete": True}))
    with pytest.raises(ValueError, match="nothing to resume"):
        keep.resume(finished, tmp_path / "x")
    assert keep.main(["--resume", str(kept)]) == 2


KEPT = sorted((Path(__file__).resolve().parent.parent / "calibration").glob("*/*/manifest.json"))


@pytest.mark.parametrize("manifest", KEPT, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_each_kept_kafka_side_ran_on_the_machine_of_its_preset(manifest):
    """calibration/PRESET/CASE: a Kafka side kept with the preset measured where it ran, so
    that a model side compared with it on any machine compares one machine."""
    from eosim.analysis.calibrate import RESOURCES_SET, machine_note
    from eosim.simulation.resources import preset_machine

    preset = manifest.parent.parent.name
    side = json.loads(manifest.read_text())
    assert side["target"] == "kafka" and side["machines"]
    assert preset_machine(preset) is not None
    model = {"set": [f"{RESOURCES_SET}{preset}"]}
    assert machine_note(model, side) == ""
    frame = compare(manifest.parent, manifest.parent).counts()
    assert frame["disagree"] == 0
