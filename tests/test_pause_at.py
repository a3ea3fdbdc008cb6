"""`pause_at` faults: freeze the node that passes a protocol point, resume it after `duration`
(the zombie member of group-zombie-commit); checked like `crash_at`'s points."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosim import api
from eosim.real.runner import refusals
from eosim.simulation import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parent.parent
ZOMBIE = str(ROOT / "scenarios" / "group-zombie-commit.yaml")


def _faults(history: list[dict]) -> list[tuple[str, str, list[str], float, str | None]]:
    return [
        (r["phase"], r["fault"], r["targets"], r["time"], r.get("point"))
        for r in history
        if r.get("kind") == "fault"
    ]


def test_the_node_that_passes_the_point_is_paused_for_the_duration() -> None:
    run = run_scenario(load_scenario(ZOMBIE, []), 3)
    (start, stop) = _faults(list(run.history.records()))
    assert start[:3] == ("start", "pause", ["app-a"]) and start[4] == "processor.after_send"
    assert stop[:3] == ("stop", "pause", ["app-a"])
    assert stop[3] - start[3] == pytest.approx(15_000.0)
    # It fired on app-a's fifth output: four steps of app-a completed before it.
    steps = [
        r
        for r in run.history.records()
        if r.get("kind") == "op"
        and r["f"] == "process"
        and r["type"] == "ok"
        and r["process"] == "app-a/0"
        and r["time"] < start[3]
    ]
    assert len(steps) == 4


def test_a_paused_member_does_not_run_until_it_resumes() -> None:
    run = run_scenario(load_scenario(ZOMBIE, []), 1)
    records = list(run.history.records())
    (start, stop) = _faults(records)
    during = [
        r
        for r in records
        if r.get("process", "").startswith("app-a") and start[3] < r.get("time", 0) < stop[3]
    ]
    assert during == []


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("{kind: pause_at, nodes: [app-a], duration: 1s}", "a pause_at fault needs a 'point'"),
        (
            "{kind: pause_at, point: processor.after_send, at: 1s, duration: 1s}",
            "a pause_at fault is triggered by its 'point'",
        ),
        ("{kind: pause_at, point: processor.after_send}", "a pause_at fault needs a 'duration'"),
        (
            "{kind: pause, point: processor.after_send, at: 1s, duration: 1s, nodes: [app-a]}",
            "'point' applies to crash_at and pause_at faults only",
        ),
    ],
)
def test_a_malformed_pause_at_is_refused_in_one_line(fault: str, message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        load_scenario(ZOMBIE, [f"faults=[{fault}]"])
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_real_cluster_refuses_pause_at() -> None:
    lines = refusals(api.load(ZOMBIE), {})
    assert (
        "pause_at faults cannot run on a real cluster: they pause a node at a protocol point "
        "inside Kafka's code, which eosim cannot reach in a real JVM"
    ) in lines
