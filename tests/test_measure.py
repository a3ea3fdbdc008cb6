"""The resource model's fit from a real cluster's measurements (eosim.analysis.measure): each
step on synthetic measurements with a known answer, and each machine's shipped preset
reproduced from the measurement it was fitted on (calibration/MACHINE/measure.json, kept with
the Kafka sides of its machine). No Kafka needed."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest

from eosim.analysis import measure

# The measurement the shipped calibration-host preset names (its machine's preset) was fitted on.
MACHINE = "xeon-2026-12-01"
CALIBRATION = Path(__file__).resolve().parent.parent / "calibration"
# Every machine with a shipped preset and the measurement it was fitted on.
MACHINES = sorted(p.parent.name for p in CALIBRATION.glob("*/measure.json"))


def test_gc_pauses_reads_young_collections_after_an_uptime(tmp_path: Path) -> None:
    log = tmp_path / "gc.log"
    log.write_text(
        "[2026-11-29T02:30:01.000+0000][12.500s][info][gc] GC(3) Pause Young (Normal) "
        "(G1 Evacuation Pause) 150M->20M(512M) 23.456ms\n"
        '[2026-11-29T02:30:02.000+0000][13.000s][info][gc,safepoint] Safepoint "G1", '
        "Time since last: 1 ns\n"
        "[2026-11-29T02:30:09.000+0000][20.250s][info][gc] GC(4) Pause Young (Normal) "
        "(G1 Evacuation Pause) 160M->22M(512M) 31.000ms\n"
    )
    assert measure.gc_pauses(log) == [
        {"up": 12.5, "ms": 23.456, "before": 150.0, "after": 20.0},
        {"up": 20.25, "ms": 31.0, "before": 160.0, "after": 22.0},
    ]
    assert [g["up"] for g in measure.gc_pauses(log, since_s=15.0)] == [20.25]
    assert measure.gc_pauses(tmp_path / "missing.log") == []
    assert measure.jvm_uptime_s(log) == 20.25


def _restart(start_ms: float, tau: float, warm: float) -> list[dict[str, float]]:
    """A restarted broker's CPU per second: warm plus a decaying excess, sampled every 2 s."""
    samples = []
    t = measure.LEAD_S + 1.0
    while t <= measure.LEAD_S + measure.RESTART_S - 1.0:
        excess = start_ms * math.exp(-(t - measure.LEAD_S) / tau)
        samples.append({"t": t, "cpu": warm + excess})
        t += 2.0
    return samples


def test_warmup_fit_recovers_a_decaying_excess() -> None:
    fitted = measure._warmup_fit(_restart(400.0, 20.0, 300.0), 300.0)
    assert fitted["factor"] == 1.0
    assert fitted["seconds"] == pytest.approx(20.0, rel=0.02)
    # Matched on the samples' mean (2 s apart), not the curve's integral: within 5%.
    assert fitted["background_ms_per_s"] == pytest.approx(400.0, rel=0.05)


def test_warmup_fit_caps_the_time_constant_and_the_rate() -> None:
    span = measure.RESTART_S - 2.0
    # No decay within the window: the time constant is the window.
    flat = measure._warmup_fit(_restart(200.0, 1e9, 300.0), 300.0)
    assert flat["seconds"] == pytest.approx(span)
    # More than a core's worth at the start: one core (the model runs it a burst at a time).
    assert (
        measure._warmup_fit(_restart(5000.0, 10.0, 300.0), 300.0)["background_ms_per_s"] == 1000.0
    )


def test_warmup_fit_without_a_usable_restart_is_no_warm_up() -> None:
    none = {"factor": 1.0, "seconds": 1.0, "background_ms_per_s": 0.0}
    assert measure._warmup_fit([], 300.0) == none
    assert measure._warmup_fit(_restart(400.0, 20.0, 300.0), 0.0) == none
    # A restarted broker no busier than a warm one: nothing to add.
    assert measure._warmup_fit(_restart(0.0, 20.0, 300.0), 300.0)["background_ms_per_s"] == 0.0


def _load(rate: float, seconds: float = 20.0) -> dict:
    """One load's measurements, built from known costs: Produce 0.2 ms + 0.005 ms a record,
    FetchFollower 0.1 ms, network 0.15 ms a request, 0.01 MB allocated a record replicated
    or appended, young collections of 100 MB pausing 20 ms, request threads waiting 60% of
    their runnable time; the producer 0.6 ms a request + 0.04 ms a record, the reader 0.5 ms
    a fetch answer + 0.003 ms a record."""
    records = rate * seconds
    produces = records / (rate / 200)  # more records a request at higher loads
    followers = 2 * produces
    fetches = produces * (1.0 + rate / 10_000)  # the reader's: more at higher loads
    brokers = {}
    for name in measure.BROKERS:
        records_in = records / 3
        produce_cpu = produces / 3 * (0.2 + 0.005 * records_in / (produces / 3))
        fetch_cpu = followers / 3 * 0.1
        handled = produces / 3 + followers / 3
        freed = 0.01 * (records_in + 2 * records / 3)
        collections = int(freed // 100)
        brokers[name] = {
            "requests": {
                # LocalTimeMs in proportion to each kind's CPU per request.
                "Produce": {"count": produces / 3, "LocalTimeMs": produce_cpu / (produces / 3)},
                "FetchFollower": {"count": followers / 3, "LocalTimeMs": 0.1},
                # The reader's fetches (no LocalTimeMs: left out of the handlers' share).
                "FetchConsumer": {"count": fetches / 3},
            },
            "records_in": records_in,
            "cpu_ms": produce_cpu
            + fetch_cpu
            + 0.15 * handled
            + 0.2 * followers / 3
            + 50.0 * seconds,
            "threads_ms": {
                "handler": produce_cpu + fetch_cpu,
                "network": 0.15 * handled,
                "fetcher": 0.2 * followers / 3,
            },
            "sched_groups": {"request": [400.0, 600.0, 10.0], "fetcher": [100.0, 150.0, 5.0]},
            "gc": [
                {"up": 1.0 + i, "ms": 20.0, "before": 120.0, "after": 20.0}
                for i in range(collections)
            ],
        }
    return {
        "seconds": seconds,
        "brokers": brokers,
        "controller_cpu_ms": 10.0 * seconds,
        "client": {
            "records_in_window": records,
            "client_cpu_ms": {
                "producer": 0.6 * produces + 0.04 * records,
                "reader": 0.5 * fetches + 0.003 * records,
            },
            "client_gc": {},
        },
    }


def test_fit_recovers_known_costs() -> None:
    loads = [_load(r) for r in (3000, 1000, 6000, 2000)]
    params = measure.fit({}, loads, [], cores=2)
    service = params["service"]
    assert service["produce"]["fixed_ms"] == pytest.approx(0.2, rel=1e-3)
    assert service["produce"]["per_record_ms"] == pytest.approx(0.005, rel=1e-3)
    assert service["replica_fetch"]["fixed_ms"] == pytest.approx(0.1, rel=1e-3)
    assert service["network"]["fixed_ms"] == pytest.approx(0.15, rel=1e-3)
    assert service["replica_append"]["fixed_ms"] == pytest.approx(0.2, rel=1e-3)
    assert service["client_send"]["fixed_ms"] == pytest.approx(0.6, rel=1e-3)
    assert service["client_send"]["per_record_ms"] == pytest.approx(0.04, rel=1e-3)
    assert service["client_receive"]["fixed_ms"] == pytest.approx(0.5, rel=1e-3)
    assert service["client_receive"]["per_record_ms"] == pytest.approx(0.003, rel=1e-3)
    assert params["gc"] == {"young_mb": 100.0, "pause_ms": 20.0, "pause_sigma": 0.0}
    assert service["produce"]["alloc_per_record_mb"] == pytest.approx(0.01, rel=0.1)
    assert params["background"]["broker_ms_per_s"] == pytest.approx(50.0, rel=1e-3)
    assert params["background"]["controller_ms_per_s"] == pytest.approx(10.0)
    assert params["hosts"] == [{"name": "machine", "cores": 2, "processes": ["*"]}]
    assert params["_waiting"] == pytest.approx(0.6)


def _threaded_loads(after_poll_ms: float = 0.0, per_record_ms: float = 0.0) -> list[dict]:
    """The four loads with the clients' threads read: the producer's Sender 0.25 ms a request
    and its application 0.03 ms a record, the reader's thread 0.2 ms an answer and 0.001 a
    record, plus ``after_poll_ms`` a non-empty poll and ``per_record_ms`` a record after its
    polls (one poll for every three answers); 80 and 45 ms/s on the other threads, 5 of the
    reader's its collections."""
    loads = [_load(r) for r in (3000, 1000, 6000, 2000)]
    for load in loads:
        client, seconds = load["client"], load["seconds"]
        produces = sum(b["requests"]["Produce"]["count"] for b in load["brokers"].values())
        fetches = sum(b["requests"]["FetchConsumer"]["count"] for b in load["brokers"].values())
        records = client["records_in_window"]
        polls = fetches / 3
        after = after_poll_ms * polls + per_record_ms * records
        client["window_ms"] = [1000.0, 1000.0 + 1000.0 * seconds]
        client["client_gc"] = {
            "reader": [{"ms": 5.0 * seconds, "up": 1.0, "before": 60.0, "after": 10.0}]
        }
        client["client_threads_ms"] = {
            "producer": {
                "main": 0.03 * records,
                "sender": 0.25 * produces,
                "other": 80.0 * seconds,
            },
            "reader": {
                "main": 0.2 * fetches + 0.001 * records + after,
                "sender": 0.0,
                "other": 45.0 * seconds,  # 5 ms/s of it the reader's collections
            },
        }
        # The processes' CPU (/proc/PID/stat) counts every thread, ended ones too.
        client["client_cpu_ms"] = {
            name: sum(groups.values()) for name, groups in client["client_threads_ms"].items()
        }
        if after_poll_ms or per_record_ms:
            # The driver's whole-run split, three times the window's, in its proportion.
            client["reader_polls"] = polls
            client["reader_poll_cpu_ms"] = {
                "poll": 3 * (0.2 * fetches + 0.001 * records),
                "after_poll": 3 * after,
            }
    return loads


def test_clients_threads_split_their_paths_from_their_background() -> None:
    """With the clients' threads read (client_threads_ms): the producer's Sender per produce
    request, its application's thread per record, the reader's thread per answer and record;
    the other threads, less the collections the model books itself, are the background per
    second. Without them (an older measurement) the whole process is fitted as before."""
    params = measure.fit({}, _threaded_loads(), [], cores=2)
    service = params["service"]
    assert service["client_send"]["fixed_ms"] == pytest.approx(0.25, rel=1e-3)
    assert service["client_send"]["per_record_ms"] == pytest.approx(0.03, rel=1e-3)
    assert service["client_receive"]["fixed_ms"] == pytest.approx(0.2, rel=1e-3)
    assert service["client_receive"]["per_record_ms"] == pytest.approx(0.001, rel=1e-3)
    assert params["background"]["client_ms_per_s"] == pytest.approx(60.0, rel=1e-3)
    assert "client_after_poll" not in service  # the driver did not split its poll thread
    older = measure.fit({}, [_load(r) for r in (3000, 1000, 6000, 2000)], [], cores=2)
    assert "client_ms_per_s" not in older["background"]
    assert older["service"]["client_send"]["fixed_ms"] == pytest.approx(0.6, rel=1e-3)


def test_the_readers_thread_is_split_inside_poll_and_after_it() -> None:
    """With the reading driver's split of its polling thread (reader_poll_cpu_ms, over its
    whole run), the thread's window CPU is split in that proportion: inside poll() is
    client_receive per answer and record, after the non-empty polls client_after_poll per
    poll and record. The whole thread booked as client_receive, as before, put the driver's
    history lines ahead of the records being read."""
    params = measure.fit({}, _threaded_loads(0.08, 0.002), [], cores=2)
    service = params["service"]
    assert service["client_receive"]["fixed_ms"] == pytest.approx(0.2, rel=1e-3)
    assert service["client_receive"]["per_record_ms"] == pytest.approx(0.001, rel=1e-3)
    assert service["client_after_poll"] == {
        "fixed_ms": pytest.approx(0.08, rel=1e-3),
        "per_record_ms": pytest.approx(0.002, rel=1e-3),
    }
    assert params["background"]["client_ms_per_s"] == pytest.approx(60.0, rel=1e-3)
    unsplit = _threaded_loads(0.08, 0.002)
    for load in unsplit:
        del load["client"]["reader_poll_cpu_ms"]
    lumped = measure.fit({}, unsplit, [], cores=2)["service"]
    assert "client_after_poll" not in lumped
    assert lumped["client_receive"]["per_record_ms"] > 0.002  # the work after poll in it


def test_a_clients_background_counts_the_threads_that_ended_in_the_window() -> None:
    """The background is the process's CPU less its threads on the records' path: a JVM stops
    idle JIT compiler threads, so the sum over the other threads alive at each end of the
    window can fall (-36 to -163 ms over 15 s on the machine of 2026-12-02), which read as no
    background at all."""
    loads = _threaded_loads()
    for load in loads:
        for groups in load["client"]["client_threads_ms"].values():
            groups["other"] = -100.0  # what the threads still alive at the end show
    params = measure.fit({}, loads, [], cores=2)
    assert params["background"]["client_ms_per_s"] == pytest.approx(60.0, rel=1e-3)


def test_a_readers_polls_are_counted_over_its_incarnations() -> None:
    lines = [
        {"kind": "op", "type": "invoke", "f": "poll", "process": "reader/0"},
        {"kind": "op", "type": "ok", "f": "poll", "process": "reader/0"},
        {"kind": "op", "type": "ok", "f": "poll", "process": "reader/1"},
        {"kind": "op", "type": "ok", "f": "poll", "process": "reader-2/0"},
        {"kind": "op", "type": "ok", "f": "send", "process": "reader/0"},
        {"kind": "fault", "type": "start", "f": "poll", "process": "reader"},
    ]
    assert measure.nonempty_polls(lines, "reader") == 2
    assert measure.nonempty_polls(lines, "reader-2") == 1


def test_a_clients_threads_are_read_by_group() -> None:
    groups = measure.client_threads_ms(os.getpid())
    assert set(groups) == {"main", "sender", "other"}
    assert all(ms >= 0 for ms in groups.values()) and sum(groups.values()) > 0


def test_the_background_slice_is_the_cpu_weighted_time_on_a_core_of_the_other_threads() -> None:
    """background_slice_ms: over the ``other`` threads only, each thread's CPU per time put on
    a core, weighted by its CPU; a thread started between the readings counts from zero, one
    that ended not at all; None without background work."""
    before = {
        "1": ("other", 100.0, 0.0, 1000),  # a timer: 0.1 ms a time
        "2": ("other", 50.0, 0.0, 10),  # a compiler: 5 ms a time
        "3": ("request", 0.0, 0.0, 0),  # request threads are not background
        "4": ("other", 7.0, 0.0, 7),  # ends before the second reading
    }
    after = {
        "1": ("other", 190.0, 0.0, 1900),  # 90 ms in 900 slices
        "2": ("other", 60.0, 0.0, 12),  # 10 ms in 2 slices
        "3": ("request", 500.0, 0.0, 10),
        "5": ("other", 20.0, 0.0, 20),  # started between: 20 ms in 20 slices
    }
    want = (90 * 0.1 + 10 * 5.0 + 20 * 1.0) / (90 + 10 + 20)
    assert measure.background_slice_ms(before, after) == pytest.approx(want)
    assert measure.background_slice_ms(after, after) is None
    assert measure.background_slice_ms({}, {"3": ("request", 5.0, 0.0, 5)}) is None


def test_a_measured_background_slice_is_the_burst_and_none_leaves_it_to_fit_burst() -> None:
    loads = [_load(r) for r in (3000, 1000, 6000, 2000)]
    assert "burst_ms" not in measure.fit({}, loads, [], cores=2)["background"]
    for i, load in enumerate(loads):
        for j, row in enumerate(load["brokers"].values()):
            row["background_slice_ms"] = 0.1 * (1 + i + j)  # medians of 0.1 .. 0.6
    assert measure.fit({}, loads, [], cores=2)["background"]["burst_ms"] == pytest.approx(0.35)


def test_the_threads_of_a_process_are_read_with_their_group() -> None:
    threads = measure.schedstat_threads(os.getpid())
    assert str(threading.get_native_id()) in threads
    assert {group for group, *_ in threads.values()} == {"other"}
    assert all(on >= 0 and wait >= 0 and slices >= 0 for _g, on, wait, slices in threads.values())
    groups = measure._by_group(threads)
    assert set(groups) == {"other"} and groups["other"][0] == pytest.approx(
        sum(on for _g, on, _w, _s in threads.values())
    )


def test_a_clients_cost_is_split_per_request_and_per_record_neither_negative() -> None:
    """_two_part: cpu = fixed * requests + per_record * records through the origin; a part
    the free fit makes negative is 0 and the other fitted alone; nothing from no points."""
    exact = [(300.0, r, 0.6 * 300.0 + 0.04 * r) for r in (15e3, 45e3, 90e3)]
    assert measure._two_part(exact) == pytest.approx((0.6, 0.04))
    # Less CPU at more records for as many requests: the free fit's per-record part is
    # negative, so it is all per request.
    falling = [(300.0, 15e3, 240.0), (300.0, 90e3, 200.0)]
    fixed, per_record = measure._two_part(falling)
    assert per_record == 0.0 and fixed == pytest.approx(440.0 / 600.0)
    assert measure._two_part([]) == (0.0, 0.0)
    # One point: the parts cannot be told apart; one part explains it exactly.
    fixed, per_record = measure._two_part([(300.0, 15e3, 600.0)])
    assert fixed * 300.0 + per_record * 15e3 == pytest.approx(600.0)


def test_calibration_host_names_a_machine_with_its_measurement() -> None:
    from eosim.simulation.resources import load_preset

    assert MACHINE in MACHINES and load_preset("calibration-host") == load_preset(MACHINE)


@pytest.mark.parametrize("machine", MACHINES)
def test_the_shipped_preset_is_the_fit_of_its_measurement(machine: str) -> None:
    """Refitting the measurement of a machine gives its preset, key for key (but the
    scheduler's wake-up latency, which fit_wakeup finds by running the model, and the costs
    its loads cannot measure, which a refit keeps from the preset it replaces). Its
    background's burst is measured (the threads' slices), not found by fit_burst."""
    from eosim.simulation.resources import load_preset, preset_machine

    data = json.loads((CALIBRATION / machine / "measure.json").read_text())
    params = measure.fit(data["idle"], data["loads"], data["restart"], 2)
    assert params.pop("_waiting") == pytest.approx(data["waiting_for_a_core"])
    preset = load_preset(machine)
    assert preset_machine(machine) == data["machine"]
    assert "burst_ms" in params["background"] and "burst_fit" not in data
    assert preset.pop("scheduler") == data["fit"]["scheduler"]  # fit_wakeup's
    assert data["fit"]["scheduler"]["wakeup_ms"] == float(
        min(
            data["wakeup_fit"],
            key=lambda w: abs(data["wakeup_fit"][w]["queue_ms"] - data["request_queue_ms"]),
        )
    ) and data["request_queue_ms"] == pytest.approx(measure.request_queue_ms(data["loads"]))
    assert "transaction" not in params["service"]
    assert "startup" not in params
    kept = measure.keep_unmeasured(params, preset)
    assert "service.transaction" in kept and set(kept) <= {"service.transaction", "startup"}
    assert params == preset


def test_a_refit_keeps_only_what_its_loads_did_not_measure() -> None:
    previous = {
        "service": {"transaction": {"fixed_ms": 0.3}, "fetch": {"fixed_ms": 9}},
        "startup": {"cpu_ms": 4000.0},
        "gc": {"young_mb": 1.0},
    }
    params: dict = {"service": {"fetch": {"fixed_ms": 0.01}}, "gc": {"young_mb": 2.0}}
    assert measure.keep_unmeasured(params, previous) == ["service.transaction", "startup"]
    assert params["service"] == {"fetch": {"fixed_ms": 0.01}, "transaction": {"fixed_ms": 0.3}}
    assert params["startup"] == {"cpu_ms": 4000.0} and params["gc"] == {"young_mb": 2.0}
    measured: dict = {"service": {"transaction": {"fixed_ms": 0.5}}, "startup": {"cpu_ms": 1.0}}
    assert measure.keep_unmeasured(measured, previous) == []
    assert measured["service"]["transaction"] == {"fixed_ms": 0.5}
    assert measure.keep_unmeasured({"service": {}}, None) == []


def test_refit_without_a_measurement_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nothing-here"
    assert measure.main(["--refit", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "measure.json" in err[0]
    assert not out.exists()  # nothing created


def test_bad_loads_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert measure.main(["--loads", "1000,fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--loads" in err[0]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_measurement_table_in_the_docs_is_what_measure_prints(machine: str) -> None:
    data = json.loads((CALIBRATION / machine / "measure.json").read_text())
    table = [line for line in measure.summary(data).splitlines() if line.startswith("|")]
    docs = (Path(__file__).resolve().parent.parent / "docs" / "calibration.md").read_text()
    assert len(table) == 2 + len(data["loads"])
    missing = [line for line in table if line not in docs.splitlines()]
    assert not missing, f"docs/calibration.md lacks {missing}"


def test_fit_wakeup_takes_the_latency_whose_request_queue_time_is_nearest_kafkas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[float] = []

    def figures(resources: dict, rates: list[float]) -> tuple[float, float]:
        assert rates == [1000.0] and resources["background"]["burst_ms"] == 40.0
        assert "_waiting" not in resources
        latency = resources["scheduler"]["wakeup_ms"]
        seen.append(latency)
        return 0.02 + latency / 2, 0.3 + latency / 4

    monkeypatch.setattr(measure, "_model_figures", figures)
    params = {"background": {"burst_ms": 40.0}, "_waiting": 0.81}
    best, found = measure.fit_wakeup(params, [1000.0], 0.1)
    assert best == 0.15 and found[0.15] == pytest.approx((0.095, 0.3375))
    assert seen == list(measure.WAKEUPS)
    assert "scheduler" not in params  # the caller sets it


def test_the_request_queue_time_is_the_median_over_loads_and_brokers_of_their_means() -> None:
    def load(*brokers: dict) -> dict:
        return {"brokers": {f"broker-{i}": {"requests": r} for i, r in enumerate(brokers)}}

    loads = [
        load(
            {
                "Produce": {"count": 100.0, "RequestQueueTimeMs": 0.2},
                "Fetch": {"count": 300.0, "RequestQueueTimeMs": 0.1},
                "FetchFollower": {"count": 300.0, "RequestQueueTimeMs": 9.0},  # within Fetch
            },
            {"Produce": {"count": 0.0, "RequestQueueTimeMs": 5.0}},
        ),
        load({"Fetch": {"count": 600.0, "RequestQueueTimeMs": 0.4}, "Metadata": {"count": 1.0}}),
    ]
    # Per load and broker: (20 + 30) / 400 and 0.4 (a broker without either kind: none); the
    # median of the two.
    assert measure.request_queue_ms(loads) == pytest.approx((0.125 + 0.4) / 2)
    assert measure.request_queue_ms(loads[1:] * 2 + loads[:1]) == pytest.approx(0.4)
    assert measure.request_queue_ms([]) == 0.0


def test_the_wakeup_latency_keeps_the_models_requests_longer_in_the_queue() -> None:
    """What fit_wakeup relies on: on the measurement's shape, a latency raises the brokers'
    request queue time and their waiting share, and 0 is the model without it."""
    from eosim.simulation.resources import load_preset

    resources = load_preset("calibration-host")
    resources.pop("scheduler", None)
    queue, share = measure._model_figures(resources, [300.0])
    resources["scheduler"] = {"wakeup_ms": 0.0}
    assert measure._model_figures(resources, [300.0]) == (queue, share)
    resources["scheduler"] = {"wakeup_ms": 0.5}
    later, more = measure._model_figures(resources, [300.0])
    assert later > queue + 0.02 and more > share + 0.02


def test_fit_burst_takes_the_burst_whose_waiting_share_is_nearest_and_leaves_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[float] = []

    def figures(resources: dict, rates: list[float]) -> tuple[float, float]:
        assert "scheduler" not in resources and "_waiting" not in resources
        burst = resources["background"]["burst_ms"]
        seen.append(burst)
        return 0.7 - burst / 1000, 0.6 + burst / 100  # the queue time is not what it matches

    monkeypatch.setattr(measure, "_model_figures", figures)
    params = {"background": {"burst_ms": 1.0}, "scheduler": {"wakeup_ms": 1.0}, "_waiting": 0.7}
    best, shares = measure.fit_burst(params, [1000.0])
    assert best == 10.0 and shares[10.0] == pytest.approx(0.7)
    assert seen == list(measure.BURSTS)
    assert params["_waiting"] == 0.7 and params["background"]["burst_ms"] == 1.0  # untouched


def test_a_window_counts_the_brokers_cpu_between_the_mbean_walks_not_in_them() -> None:
    """deltas: the brokers' process CPU runs from the end of one snapshot's MBean walk to the
    start of the next (the walk is the brokers' work for the measurement: about 1.5 s of CPU
    each on the machine of 2026-11-30). Read from inside the walk, as before, a window
    counted one walk, and an idle broker seemed to spend 157-187 ms/s where it spends about
    25 ms/s."""

    class Cluster:
        def gc_log(self, broker: str) -> None:
            return None

    def snap(at: float, cpu: float, walk_cpu: float) -> measure.Snapshot:
        s = object.__new__(measure.Snapshot)
        s.at, s.at_after = at, at + 0.5
        s.cpu = {b: cpu for b in measure.BROKERS}
        s.cpu_after = {b: cpu + walk_cpu for b in measure.BROKERS}
        s.jmx = {b: {"threads": {}} for b in measure.BROKERS}
        s.sched, s.sched_groups, s.controller_cpu = {}, {}, 0.0
        s.sched_after, s.sched_groups_after = {}, {}
        s.threads, s.threads_after = {}, {}
        s.gc_len = {b: 0 for b in measure.BROKERS}
        return s

    # 10 s between the walks at 25 ms/s; each walk costs 1,500 ms.
    a = snap(0.0, 1000.0, 1500.0)
    b = snap(10.5, 1000.0 + 1500.0 + 250.0, 1500.0)
    out = measure.deltas(a, b, Cluster())  # type: ignore[arg-type]
    assert out["seconds"] == pytest.approx(10.0)
    for row in out["brokers"].values():
        assert row["cpu_ms"] == pytest.approx(250.0)


def test_the_background_is_the_process_cpu_between_walks_less_the_threads_rate() -> None:
    """fit: the brokers' process CPU is read between the MBean walks (``seconds``), what the
    MBeans count from one walk's end to the next's (``walk_to_walk_seconds``); the background
    is the difference of the two as rates. Taken over one window, a 1.5 times longer span
    for the threads would have taken half their rate again off the background."""
    loads = []
    for rate in (3000, 1000, 6000, 2000):
        load = _load(rate)
        load["walk_to_walk_seconds"] = 1.5 * load["seconds"]
        for row in load["brokers"].values():
            row["threads_ms"] = {k: 1.5 * v for k, v in row["threads_ms"].items()}
            row["records_in"] *= 1.5
            for req in row["requests"].values():
                req["count"] *= 1.5
        loads.append(load)
    params = measure.fit({}, loads, [], cores=2)
    assert params["background"]["broker_ms_per_s"] == pytest.approx(50.0, rel=1e-3)
    assert params["service"]["produce"]["fixed_ms"] == pytest.approx(0.2, rel=1e-3)
    assert params["service"]["network"]["fixed_ms"] == pytest.approx(0.15, rel=1e-3)
