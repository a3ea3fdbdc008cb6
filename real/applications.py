"""The scenario's applications on a real cluster: one workload-driver process each.

Each list a scenario declares applications in maps to a driver mode (:data:`MODES`): a
``producers`` entry runs the driver's ``produce`` mode with the application's resolved client
configuration (:attr:`eosim.simulation.scenario.Scenario.clients`, the same one the model
uses), a ``transactional_producers`` entry ``txn``, a ``processors`` entry ``process`` (a
member of its consumer group: subscribed processors only), a ``consumers`` entry ``consume``.
What the driver cannot run is refused before a run starts (:func:`refused_kinds`).

To run a new kind for real, give the driver a mode for it, add the kind's scenario field to
:data:`MODES` and say in :func:`spec_for` what its spec carries.

A crashed application restarts as a new incarnation (``producer-0/1``), as the model's do: it
numbers its values on from the last one its previous incarnation invoked and, with
``on_restart: resend_unacked``, first sends again every value it never saw acknowledged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosim.simulation.scenario import ConsumerSettings, Processor, Scenario

# scenario field -> driver mode
MODES = {
    "producers": "produce",
    "transactional_producers": "txn",
    "processors": "process",
    "consumers": "consume",
}
# Kafka's class for each assignor name a scenario may list.
ASSIGNOR_CLASSES = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
# Kinds whose applications are sources: the run's workload ends when they have all exited.
SOURCES = ("producers", "transactional_producers")


@dataclass
class AppPlan:
    """One application: its name, scenario field, driver mode and the spec fields that do not
    change between incarnations."""

    name: str
    field: str
    mode: str
    config: dict[str, str]
    workload: dict[str, Any]
    incarnation: int = -1
    # Values invoked by earlier incarnations, with their keys, in order; acknowledged ones.
    invoked: dict[str, str | None] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    next_index: int = 0

    @property
    def source(self) -> bool:
        return self.field in SOURCES


def _kafka_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plans(scenario: Scenario) -> list[AppPlan]:
    """Every application of ``scenario`` that runs on a driver, in the model's build order."""
    clients = scenario.clients
    out: list[AppPlan] = []
    for field_name, mode in MODES.items():
        for spec in getattr(scenario, field_name):
            if field_name == "consumers":
                settings = clients.consumers[spec.name]
                config = {
                    "isolation.level": settings.isolation,
                    "auto.offset.reset": settings.auto_offset_reset,
                }
                workload = {
                    "topic": spec.topic,
                    "isolation": settings.isolation,
                    "auto.offset.reset": settings.auto_offset_reset,
                    "poll_interval": spec.poll_interval,
                    "partitions": [p for _t, p in settings.partitions],
                }
            else:
                kafka = clients.producers[spec.name].to_kafka_dict()
                config = {k: _kafka_value(v) for k, v in kafka.items() if v is not None}
                if field_name == "processors":
                    workload = _processor_workload(spec, clients.consumers[spec.name])
                else:
                    workload = json.loads(spec.workload.model_dump_json())
            out.append(AppPlan(spec.name, field_name, mode, config, workload))
    return out


def _processor_workload(spec: Processor, settings: ConsumerSettings) -> dict[str, Any]:
    """A subscribed processor's loop and its consumer's Kafka settings (see
    real/driver/Processor.java)."""
    rebalance = settings.rebalance
    assert rebalance is not None
    consumer: dict[str, Any] = {
        "isolation.level": settings.isolation,
        "auto.offset.reset": settings.auto_offset_reset,
        "group.protocol": rebalance.group_protocol,
        "max.poll.interval.ms": _kafka_value(rebalance.rebalance_timeout_ms),
    }
    if rebalance.group_protocol == "classic":
        # The consumer protocol refuses these (the broker's group.consumer.* apply).
        consumer["session.timeout.ms"] = _kafka_value(rebalance.session_timeout_ms)
        consumer["heartbeat.interval.ms"] = _kafka_value(rebalance.heartbeat_interval_ms)
        consumer["partition.assignment.strategy"] = ",".join(
            ASSIGNOR_CLASSES[name] for name in rebalance.assignors
        )
        consumer["internal.leave.group.on.close"] = _kafka_value(rebalance.leave_group_on_close)
    if rebalance.group_instance_id is not None:
        consumer["group.instance.id"] = rebalance.group_instance_id
    if settings.auto_commit_interval_ms is not None:
        consumer["auto.commit.interval.ms"] = _kafka_value(settings.auto_commit_interval_ms)
    processing: Any = spec.processing
    if not isinstance(processing, (int, float)):
        processing = {"min": processing.min, "max": processing.max}
    return {
        "topic": spec.input.topic,
        "group": rebalance.group_id,
        "output_topic": spec.output.topic,
        "transactional": spec.transactional,
        "commit": spec.commit,
        "batch": spec.batch,
        "processing": processing,
        "start": spec.start,
        "consumer": consumer,
    }


def refused_kinds(scenario: Scenario) -> list[str]:
    """One line per application of ``scenario`` a real cluster cannot run: processors that
    do not subscribe (the driver's ``process`` mode is a group member) and sinks to an
    external store."""
    out = []
    for i, proc in enumerate(scenario.processors):
        why = None
        if not proc.input.subscribe:
            why = "only subscribed processors (input.subscribe: true) run on a real cluster"
        elif proc.output.store is not None:
            why = "a sink to an external store has no driver mode"
        if why is not None:
            out.append(f"processors[{i}] ({proc.name}) cannot run on a real cluster: {why}")
    return out


def note_history(plan: AppPlan, lines: list[dict[str, Any]]) -> None:
    """Remember what an incarnation invoked and saw acknowledged (for the next one)."""
    for line in lines:
        if line.get("kind") != "op" or line.get("f") != "send":
            continue
        value = line.get("value") or {}
        v = value.get("value")
        if not isinstance(v, str):
            continue
        if line.get("type") == "invoke":
            plan.invoked.setdefault(v, value.get("key"))
            prefix = f"{plan.name}-"
            if v.startswith(prefix) and v[len(prefix) :].isdigit():
                plan.next_index = max(plan.next_index, int(v[len(prefix) :]) + 1)
        elif line.get("type") == "ok":
            plan.acked.add(v)


def spec_for(
    plan: AppPlan, bootstrap: str, history: Path, epoch_ms: float, seed: int
) -> dict[str, Any]:
    """The driver's spec for the next incarnation of ``plan`` (see real/driver)."""
    spec: dict[str, Any] = {
        "mode": plan.mode,
        "name": plan.name,
        "incarnation": plan.incarnation,
        "bootstrap": bootstrap,
        "history": str(history),
        "epoch_ms": epoch_ms,
        "seed": seed,
        "config": plan.config,
        "workload": plan.workload,
    }
    if plan.mode == "produce" and plan.incarnation > 0:
        spec["first_index"] = plan.next_index
        if plan.workload.get("on_restart", "resend_unacked") == "resend_unacked":
            spec["resend"] = [[v, k] for v, k in plan.invoked.items() if v not in plan.acked]
    return spec
