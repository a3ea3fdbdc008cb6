"""Periodic faults (``every``): realised up front at fixed intervals, targets taken in turn."""

from __future__ import annotations

import re

import pytest
from support import scenario_with

from eosim.simulation.nemesis import realize_faults
from eosim.simulation.rng import RandomStreams
from eosim.simulation.runner import Run
from eosim.simulation.scenario import Fault, ScenarioError, parse_scenario


def realise(spec: Fault, horizon: float = 10_000.0, seed: int = 1) -> list:
    return realize_faults([spec], horizon, RandomStreams(seed).stream("nemesis"))


def test_periodic_fault_fires_one_period_after_start_until_end_cycling_through_nodes():
    spec = Fault(
        kind="crash",
        nodes=["broker-0", "broker-1", "broker-2"],
        every="1s",
        start="500ms",
        end="5s",
        duration="200ms",
    )
    events = realise(spec)
    assert [(e.start, e.end, e.targets) for e in events] == [
        (1500.0, 1700.0, ("broker-0",)),
        (2500.0, 2700.0, ("broker-1",)),
        (3500.0, 3700.0, ("broker-2",)),
        (4500.0, 4700.0, ("broker-0",)),
    ]


def test_periodic_fault_ends_at_the_horizon_by_default_and_draws_ranged_durations():
    spec = Fault(kind="pause", nodes=["producer-0"], every=300, duration={"min": 10, "max": 50})
    events = realise(spec, horizon=1000.0, seed=3)
    assert [e.start for e in events] == [300.0, 600.0, 900.0]
    assert all(10 <= e.end - e.start <= 50 for e in events)
    assert len({e.end - e.start for e in events}) == 3  # one draw per occurrence
    assert events == realise(spec, horizon=1000.0, seed=3)


def test_periodic_fault_without_nodes_keeps_its_node_less_form():
    spec = Fault(kind="loss", probability=0.5, every="2s", end="5s", duration="1s")
    events = realise(spec)
    assert [(e.start, e.targets, e.probability) for e in events] == [
        (2000.0, (), 0.5),
        (4000.0, (), 0.5),
    ]


def test_periodic_events_shrink_to_explicit_scheduled_faults():
    spec = Fault(kind="crash", nodes=["broker-0", "broker-1"], every=100, end=250, duration=20)
    specs = [e.to_spec() for e in realise(spec)]
    assert specs == [
        {"kind": "crash", "at": 100.0, "duration": 20.0, "nodes": ["broker-0"]},
        {"kind": "crash", "at": 200.0, "duration": 20.0, "nodes": ["broker-1"]},
    ]


def error_for(*overrides: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        scenario_with(*overrides)
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("fault", "path", "text"),
    [
        (
            "{kind: crash, nodes: [broker-0], every: 1s, at: 2s, duration: 1s}",
            "faults[0]",
            "exactly one of 'at' (scheduled), 'rate' (random) or 'every' (periodic)",
        ),
        (
            "{kind: crash, nodes: [broker-0], every: 1s, rate: 2, duration: 1s}",
            "faults[0]",
            "exactly one of 'at'",
        ),
        (
            "{kind: crash, nodes: [broker-0], every: 0, duration: 1s}",
            "faults[0].every",
            "must be a positive duration",
        ),
        (
            "{kind: crash, nodes: [broker-0], every: 2s, start: 1s, end: 3s, duration: 1s}",
            "faults[0].every",
            "never fires",
        ),
        (
            "{kind: crash, nodes: [broker-0], every: 0.001, duration: 1s}",
            "faults[0].every",
            "at most 1,000,000",
        ),
        (
            "{kind: crash_at, point: processor.after_poll, every: 1s, duration: 1s}",
            "faults[0]",
            "not 'at'/'rate'/'every'",
        ),
        (
            "{kind: crash, nodes: [broker-0], every: soon, duration: 1s}",
            "faults[0].every",
            "expected a duration",
        ),
    ],
)
def test_bad_periodic_faults_are_one_line_naming_the_path(fault: str, path: str, text: str):
    message = error_for(f"faults=[{fault}]")
    assert re.match(rf"base\.yaml(:\d+| \(--set [^)]*\]\))?: {re.escape(path)}: ", message), message
    assert text in message


def test_every_enters_the_digest_only_when_set():
    at = scenario_with("faults=[{kind: crash, nodes: [broker-0], at: 1s, duration: 1s}]")
    every = scenario_with("faults=[{kind: crash, nodes: [broker-0], every: 1s, duration: 1s}]")
    # The first is the digest this scenario had before 'every' existed (f14b8c8^), under
    # today's defaults: 074e3fa6... under the old latency defaults; re-pinned when they changed
    # (36a9abb), checked by running f14b8c8^ with the new latency values set; e7ef270c... until
    # network.in_flight_after_close's default became until_reset (ea22de2 with it set gives
    # the digest below).
    assert at.digest() == "d13b33ee65f4857c7cba49b8584eb0495949a91cc14a1680cd84990bfc57305e"
    assert every.digest() != at.digest()


ROLLING = """
name: rolling-restart
cluster:
  brokers: 3
  topics: [{name: events, partitions: 3, replication_factor: 3}]
network: {latency: {distribution: constant, value_ms: 1}}
producers:
  - name: producer-0
    config: {acks: all, enable.idempotence: true}
    workload: {topic: events, records: 3000, rate: 1000, keys: 30}
faults:
  - {kind: crash, nodes: [broker-0, broker-1, broker-2], every: 1s, end: 3500ms, duration: 300ms}
"""


def test_a_rolling_restart_crashes_each_broker_in_turn():
    run = Run(parse_scenario(ROLLING, "rolling.yaml"), 1, False)
    brokers = run.cluster.brokers
    down: list[list[str]] = []
    for t in (500, 1100, 1500, 2100, 2500, 3100, 3400):
        run.env.run(until=t)
        down.append([name for name, b in brokers.items() if not b.alive])
    assert down == [[], ["broker-0"], [], ["broker-1"], [], ["broker-2"], []]
    run.run_workload()
    faults = [
        (r["time"], r["phase"], r["targets"])
        for r in run.history.records()
        if r.get("kind") == "fault"
    ]
    assert faults == [
        (1000.0, "start", ["broker-0"]),
        (1300.0, "stop", ["broker-0"]),
        (2000.0, "start", ["broker-1"]),
        (2300.0, "stop", ["broker-1"]),
        (3000.0, "start", ["broker-2"]),
        (3300.0, "stop", ["broker-2"]),
    ]
    assert run.finished
