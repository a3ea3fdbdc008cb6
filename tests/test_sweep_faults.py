"""The fault load a sweep's run actually had: `faults_<kind>` counts from the run's realised
fault schedule, and `messages_lost` (analysis/sweep/task.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from eosim.analysis.sweep.runner import build_plan
from eosim.analysis.sweep.task import FAULT_KINDS, SCHEMA, execute_run, fault_counts
from eosim.simulation.nemesis import FaultEvent

CHAOS = str(Path(__file__).resolve().parents[1] / "scenarios" / "at-least-once-chaos.yaml")
SMALL = ("producers.0.workload.records=300", "producers.0.workload.rate=300")


def test_fault_counts_cover_every_kind():
    events = [FaultEvent(0, 1, "crash"), FaultEvent(2, 3, "crash"), FaultEvent(4, 5, "loss")]
    counts = fault_counts(events)
    assert list(counts) == [f"faults_{k}" for k in FAULT_KINDS]
    assert counts["faults_crash"] == 2 and counts["faults_loss"] == 1
    assert counts["faults_partition"] == 0


def test_a_run_row_counts_its_realised_faults():
    from eosim import api
    from eosim.simulation.scenario import parse_scenario

    plan, _ = build_plan(CHAOS, 1, (), (), 4, SMALL)
    row = execute_run(plan, plan.sweep_id(), "test", 0)
    assert list(row) == SCHEMA.names
    scenario = parse_scenario(plan.scenario_text, plan.scenario_source, plan.overrides({}))
    traced = api.run(scenario, row["seed"], trace=True).run
    realised = Counter(f.kind for f in traced.faults)
    assert realised["crash"] > 0 and realised["pause"] > 0  # one second of 2/s and 1/s
    for kind in FAULT_KINDS:
        assert row[f"faults_{kind}"] == realised.get(kind, 0)
    # Every message the network lost (1% request and response loss) or dropped (a crashed
    # broker's connections), as the run's message trace shows them.
    assert traced.trace is not None
    gone = sum(1 for e in traced.trace if e.event in ("lost", "dropped"))
    assert gone > 0 and row["messages_lost"] == gone


def test_a_run_without_loss_or_faults_loses_no_message():
    quiet = (*SMALL, "network.request_loss=0", "network.response_loss=0", "faults=[]")
    plan, _ = build_plan(CHAOS, 1, (), (), 4, quiet)
    row = execute_run(plan, plan.sweep_id(), "test", 0)
    assert row["messages_lost"] == 0
    assert all(row[f"faults_{kind}"] == 0 for kind in FAULT_KINDS)


def test_the_replay_command_survives_a_shell(tmp_path):
    """A --set value with shell syntax ('>0', a flow list) is quoted, so pasting the printed
    replay command gives eosim the same arguments (a bare '>0' was a redirect)."""
    import shlex

    from eosim import api

    weird = tmp_path / "my scenario.yaml"
    weird.write_text(Path(CHAOS).read_text())
    overrides = [
        *SMALL,
        "expect.duplicate='>0'",
        "faults=[{kind: crash, nodes: [broker-0], at: 1s, duration: 10ms}]",
    ]
    outcome = api.run(api.load(weird, overrides), 1, source=str(weird), overrides=overrides)
    argv = shlex.split(outcome.command)
    assert argv[:5] == ["eosim", "run", str(weird), "--seed", "1"]
    assert argv[5::2] == ["--set"] * len(overrides) and argv[6::2] == overrides

    plan, _ = build_plan(CHAOS, 1, (), (), 4, ("expect.duplicate='>0'",))
    from eosim.analysis.sweep.task import replay_command

    assert shlex.split(replay_command(plan, 7, {}))[-2:] == ["--set", "expect.duplicate='>0'"]


def test_a_run_given_a_folder_keeps_its_history_there(tmp_path):
    """A real run cannot be replayed, so its sweep keeps each history (``keep_history``): the
    file holds the run's history line for line, and its digest is the row's."""
    import hashlib

    from eosim.analysis.history import load_history

    plan, _ = build_plan(CHAOS, 3, (), (), 4, SMALL)
    row = execute_run(plan, plan.sweep_id(), "test", 1, keep_history=tmp_path)
    kept = tmp_path / f"variant={row['variant']}" / f"run-{row['run']:06d}.jsonl"
    assert kept.exists() and not list(tmp_path.rglob("*.tmp"))
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == row["history_sha256"]
    assert len(load_history(kept).sends) > 0
    # Without a folder nothing is written.
    execute_run(plan, plan.sweep_id(), "test", 2)
    assert sorted(p.name for p in tmp_path.rglob("*.jsonl")) == [kept.name]
