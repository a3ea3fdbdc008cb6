"""The machine record (eosim.real.machine): what says that a preset's measurement and a Kafka
side ran on one machine, how a real sweep records it (and warns when resumed elsewhere), and
the calibration report's note when they differ. No Kafka needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eosim.analysis import calibrate
from eosim.analysis.sweep import runner
from eosim.real import machine

HERE = {"cpu": "AMD EPYC", "mhz": 2445, "cores": 2, "probe_ms": 12.0, "loop_ms": 60.0}


def test_a_fingerprint_names_the_processor_cores_and_two_probes() -> None:
    record = machine.fingerprint()
    assert set(record) == {"cpu", "mhz", "cores", "probe_ms", "loop_ms"}
    assert record["cores"] >= 1 and record["probe_ms"] > 0 and record["loop_ms"] > 0
    assert machine.differs(record, record) is None


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        ({**HERE, "cpu": "Intel Xeon"}, "processor 'AMD EPYC' against 'Intel Xeon'"),
        ({**HERE, "cores": 4}, "2 cores against 4"),
        ({**HERE, "probe_ms": 24.0}, "2.00 times slower on one (hash probe 12.0 against 24.0"),
    ],
)
def test_another_processor_core_count_or_speed_is_another_machine(other, reason) -> None:
    assert reason in (machine.differs(HERE, other) or "")


def test_the_same_machine_within_the_probes_spread_or_unrecorded_is_not_flagged() -> None:
    assert machine.differs(HERE, {**HERE, "probe_ms": 14.0, "loop_ms": 70.0, "mhz": 2300}) is None
    # The loop probe judges nothing: these two are one idle machine's records, two sessions
    # apart (a case 3 Kafka side resumed on it was flagged "another machine" by them).
    ours = {"cpu": "AMD EPYC", "mhz": 2445, "cores": 2}
    assert (
        machine.differs(
            {**ours, "probe_ms": 11.39, "loop_ms": 59.49},
            {**ours, "probe_ms": 11.93, "loop_ms": 35.2},
        )
        is None
    )
    assert machine.differs(HERE, None) is None and machine.differs({}, HERE) is None
    assert machine.describe(None) == "not recorded"
    assert machine.describe(HERE) == "AMD EPYC at 2445 MHz, 2 cores, probes 12.0 and 60.0 ms"


def _sweep(machines: list[dict]) -> SimpleNamespace:
    return SimpleNamespace(manifest={"machines": [dict(m) for m in machines]})


def test_a_real_sweep_records_each_machine_once_and_warns_when_resumed_elsewhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = SimpleNamespace(machine=lambda: dict(HERE))
    sweep = _sweep([])
    runner._note_machine(sweep, target)  # type: ignore[arg-type]
    runner._note_machine(sweep, target)  # type: ignore[arg-type]
    assert sweep.manifest["machines"] == [HERE]
    assert capsys.readouterr().err == ""
    slower = SimpleNamespace(machine=lambda: {**HERE, "probe_ms": 30.0})
    runner._note_machine(sweep, slower)  # type: ignore[arg-type]
    assert len(sweep.manifest["machines"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eosim sweep: warning: resumed on another machine than its earlier")
    assert "2.50 times slower" in err and err.count("\n") == 1


def test_the_calibration_notes_a_preset_measured_on_another_machine(monkeypatch) -> None:
    from eosim.simulation import resources

    model = {"set": ["kafka.version=4.1", "cluster.resources.preset=calibration-host"]}
    monkeypatch.setattr(resources, "preset_machine", lambda name: dict(HERE))
    assert calibrate.machine_note(model, {"machines": [HERE]}) == ""
    assert calibrate.machine_note(model, {}) == ""  # an older Kafka side: nothing recorded
    assert calibrate.machine_note({"set": []}, {"machines": [HERE]}) == ""  # no preset
    note = calibrate.machine_note(model, {"machines": [{**HERE, "cores": 8}]})
    assert note == (
        "The model's preset calibration-host was measured on another machine than the Kafka "
        "side ran on (2 cores against 8): its timing rows compare two machines."
    )
    two = calibrate.machine_note(model, {"machines": [HERE, {**HERE, "cpu": "x"}]})
    assert two.startswith("The Kafka side ran on 2 machines: AMD EPYC at 2445 MHz")
    # two records of one machine, kept apart by the loop probe's rule of 2026-11-29
    one = calibrate.machine_note(model, {"machines": [HERE, {**HERE, "loop_ms": 35.2}]})
    assert one == ""
