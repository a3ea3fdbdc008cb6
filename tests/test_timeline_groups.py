"""A processing anomaly's timeline tells its consumer group's story: the steps that processed
the input, and the assignments, revocations, lost partitions and commits (with their
refusals) between them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosim.analysis import timeline
from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        ("group-slow-processing.yaml", "(generation "),
        ("kip848-slow-processing.yaml", "(member epoch "),
    ],
)
def test_a_duplicate_processing_timeline_shows_the_steps_and_the_group(name, refusal):
    run = run_scenario(load_scenario(SCENARIOS / name, []), 1)
    records = [json.loads(line) for line in run.history.lines()]
    verdict = check_history(history_from_records(records))
    example = verdict.anomalies["duplicate_processing"].examples[0]
    t = timeline.build("duplicate_processing", example, [], records)
    labels = [r.label for r in t.rows]
    steps = [r for r in t.rows if r.kind == "op" and r.label.startswith("process ")]
    assert len(steps) == example["ok_steps"] >= 2
    assert all(r.src.endswith(".consumer") for r in steps)
    # The refused commit that explains the second step, with who it named.
    assert any("refused: CommitFailedException" in label and refusal in label for label in labels)
    assert any(": lost [" in label or ": revoked [" in label for label in labels)
    first, last = steps[0].time, steps[-1].time
    assert all(first - timeline.MARGIN_MS <= r.time for r in t.rows)
    assert all(r.time <= (steps[-1].end_time or last) + timeline.MARGIN_MS for r in t.rows)
    assert "refused" in t.text() and t.svg().startswith("<svg")


def test_other_anomalies_have_no_group_rows():
    history = [
        {
            "kind": "group",
            "time": 1.0,
            "process": "a/0",
            "group": "g",
            "event": "lost",
            "member": "m",
            "partitions": [{"topic": "t", "partition": 0}],
        },
        {
            "kind": "op",
            "id": 1,
            "type": "ok",
            "f": "send",
            "process": "p/0",
            "time": 1.0,
            "value": {"topic": "t", "partition": 0, "value": "v", "offset": 3},
        },
    ]
    rows = timeline.build("duplicate", {"value": "v"}, [], history).rows
    assert [r.kind for r in rows] == ["op"]
