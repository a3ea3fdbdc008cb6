"""Property-based fuzzing of the model: no valid scenario may end in a traceback.

Small replicated scenarios are built from strategies over the settings that change the
protocol's paths (replication factor 1-3, min.insync.replicas 1-3, unclean election, the
truncation rule and the HW rule, acks, idempotence, transactional producers and processors,
transaction versions 1 and 2 through ``kafka.version`` 3.9 / 4.0) and over the faults (crash,
pause and power loss of brokers, of the controller and of applications, partitions, loss and
delay on nodes and on links between brokers, and crash_at points). Each is run and checked as
``eosim run`` does (``api.run``); any exception fails the test with the scenario.

Hypothesis runs derandomized with no example database, so CI draws the same scenarios every
time; record counts are small so that the whole test takes well under a minute. A scenario the
fuzzer once broke is pinned below it, as a regression test.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from eosim import api
from eosim.simulation import ScenarioError
from eosim.simulation.probe import POINTS

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

MS = st.sampled_from(["10ms", "50ms", "200ms", "500ms", "1s", "2s", "4s", "8s"])
AT = st.sampled_from(["100ms", "300ms", "700ms", "1s", "1500ms", "2s", "3s"])


@st.composite
def faults(draw: st.DrawFn, brokers: list[str], apps: list[str]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["crash", "pause", "power_loss", "partition", "loss", "delay"]))
    kind = draw(st.sampled_from([kind, kind, kind, "crash_at"]))
    broker = st.sampled_from(brokers)
    if kind == "crash_at":
        point = draw(st.sampled_from(POINTS))
        fault: dict[str, Any] = {"kind": kind, "point": point, "duration": draw(MS)}
        fault["occurrence"] = draw(st.integers(1, 6))
        if point.split(".")[0] in ("producer", "processor") and apps:
            fault["nodes"] = [draw(st.sampled_from(apps))]
        return fault
    fault = {"kind": kind, "duration": draw(MS)}
    when = draw(st.sampled_from(["at", "at", "at", "rate", "every"]))
    if when == "at":
        fault["at"] = draw(AT)
    elif when == "rate":  # random occurrences between start and end
        fault |= {"rate": draw(st.sampled_from([0.5, 2.0])), "start": "200ms", "end": "5s"}
    else:  # one node at a time, in turn (a rolling restart)
        fault |= {"every": draw(st.sampled_from(["1s", "3s"])), "start": "500ms", "end": "8s"}
    if kind == "power_loss":
        fault["nodes"] = draw(st.lists(broker, min_size=1, max_size=len(brokers), unique=True))
    elif kind in ("crash", "pause"):
        nodes = st.sampled_from([*brokers, *brokers, "controller", *apps])
        fault["nodes"] = draw(st.lists(nodes, min_size=1, max_size=2, unique=True))
    elif kind == "partition":
        isolated = draw(st.sampled_from([*brokers, "controller"]))
        fault["groups"] = [[isolated], [n for n in [*brokers, "controller"] if n != isolated]]
    else:
        if len(brokers) > 1 and draw(st.booleans()):
            a, b = draw(st.permutations(brokers))[:2]
            fault["links"] = [[a, b], [b, a]]
        else:
            fault["nodes"] = [draw(st.sampled_from([*brokers, "controller", *apps]))]
        if kind == "loss":
            fault["probability"] = draw(st.sampled_from([0.3, 0.7, 1.0]))
        else:
            fault["extra_latency"] = draw(st.sampled_from(["20ms", "200ms", "1s"]))
    return fault


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A small valid scenario: 1-4 brokers, topics ``in`` and ``out`` replicated as drawn,
    one to three applications and one to four faults."""
    n = draw(st.integers(1, 4))
    brokers = [f"broker-{i}" for i in range(n)]
    rf = min(draw(st.integers(1, 3)), n)
    topic_config = {
        "min.insync.replicas": draw(st.integers(1, 3)),
        "unclean.leader.election.enable": draw(st.booleans()),
    }
    topics = [
        {"name": name, "partitions": draw(st.integers(1, 3)), "replication_factor": rf}
        | {"config": topic_config}
        for name in ("in", "out")
    ]
    doc: dict[str, Any] = {
        "name": "fuzz-faults",
        "duration": "20s",
        "cluster": {
            "brokers": n,
            "config": {
                "replica.lag.time.max.ms": draw(st.sampled_from([500, 2000, 30000])),
                "broker.session.timeout.ms": 2000,
                "broker.heartbeat.interval.ms": 500,
                "transaction.state.log.replication.factor": draw(st.sampled_from([1, 3])),
                "transaction.state.log.min.isr": draw(st.integers(1, 3)),
                "offsets.topic.replication.factor": draw(st.sampled_from([1, 3])),
            },
            "topics": topics,
        },
        "kafka": {
            "version": draw(st.sampled_from(["3.9", "4.0"])),
            "rules": {
                "truncation": draw(st.sampled_from(["leader_epoch", "high_watermark"])),
                "hw_advances_under_min_isr": draw(st.booleans()),
                "transaction_partition_verification": draw(st.booleans()),
            },
        },
    }
    network = draw(st.sampled_from(["none", "ambient", "message", "packets"]))
    if network == "ambient":
        doc["network"] = {"request_loss": 0.02, "response_loss": 0.02}
    elif network == "message":
        doc["network"] = {"loss_model": "message", "request_loss": 0.05, "response_loss": 0.05}
    elif network == "packets":
        doc["network"] = {"packet_loss": 0.05}
    apps: list[str] = []
    kinds = draw(st.sets(st.sampled_from(["producer", "transactional", "processor"]), min_size=1))
    client = {"request.timeout.ms": 1000, "delivery.timeout.ms": 4000}
    if "producer" in kinds or "processor" in kinds:
        idempotent = draw(st.booleans())
        acks = "all" if idempotent else draw(st.sampled_from([0, 1, "all"]))
        config = client | {"acks": acks, "enable.idempotence": idempotent}
        doc["producers"] = [
            {
                "name": "src",
                "config": config,
                "workload": {"topic": "in", "records": draw(st.integers(5, 40)), "rate": 50},
            }
        ]
        apps.append("src")
    if "transactional" in kinds:
        workload = {"topic": "out", "transactions": draw(st.integers(2, 8)), "size": 3}
        workload |= {"rate": 10, "abort_probability": draw(st.sampled_from([0.0, 0.3]))}
        doc["transactional_producers"] = [
            {
                "name": "tx",
                "config": client | {"transaction.timeout.ms": 3000},
                "workload": workload,
            }
        ]
        apps.append("tx")
    if "processor" in kinds:
        doc["processors"] = [
            {
                "name": "app",
                "input": {"topic": "in", "group": "g", "auto.offset.reset": "earliest"},
                "output": {"topic": "out"},
                "transactional": draw(st.booleans()),
                "config": client | {"transaction.timeout.ms": 3000, "max.block.ms": 5000},
            }
        ]
        apps.append("app")
    isolation = draw(st.sampled_from(["read_committed", "read_uncommitted"]))
    doc["consumers"] = [
        {"name": "reader", "topic": "out", "isolation": isolation, "auto.offset.reset": "earliest"}
    ]
    doc["faults"] = draw(st.lists(faults(brokers, apps), min_size=1, max_size=4))
    return doc


@FUZZ
@given(doc=scenarios(), seed=st.integers(1, 20))
def test_no_valid_scenario_ends_in_a_traceback(doc: dict[str, Any], seed: int) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    note(text)
    try:
        scenario = api.parse(text, "fuzz.yaml")
    except ScenarioError:
        pytest.fail(f"the fuzzer built a scenario eosim refuses:\n{text}")
    api.run(scenario, seed)
