"""The scenario's applications on a real cluster: one workload-driver process each.

Each list a scenario declares applications in maps to a driver mode (:data:`MODES`): a
``producers`` entry runs the driver's ``produce`` mode with the application's resolved client
configuration (:attr:`eosim.simulation.scenario.Scenario.clients`, the same one the model
uses), a ``transactional_producers`` entry ``txn``, a ``consumers`` entry ``consume``. Kinds
without a driver mode (``processors``) are refused before a run starts (:data:`REFUSED_KINDS`).

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

from eosim.simulation.scenario import Scenario

# scenario field -> driver mode
MODES = {"producers": "produce", "transactional_producers": "txn", "consumers": "consume"}
# scenario field -> why it cannot run on a real cluster (yet)
REFUSED_KINDS = {
    "processors": "the workload driver has no consume-transform-produce mode yet",
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
                workload = json.loads(spec.workload.model_dump_json())
            out.append(AppPlan(spec.name, field_name, mode, config, workload))
    return out


def refused_kinds(scenario: Scenario) -> list[str]:
    """One line per application kind of ``scenario`` a real cluster cannot run."""
    return [
        f"{name} cannot run on a real cluster: {why}"
        for name, why in REFUSED_KINDS.items()
        if getattr(scenario, name)
    ]


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
    plan: AppPlan, bootstrap: str, history: Path, epoch_ms: int, seed: int
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
