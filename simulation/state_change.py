"""The state-change log: what happened to brokers and partitions, for timelines.

Kafka keeps a ``state-change.log`` (``StateChangeLogger``) of every leader and ISR change a
broker or controller makes, which is where an operator looks to learn why a record was lost.
eosim keeps the same kind of record when a run is traced (``run_scenario(trace=True)``:
``eosim run --timeline``, replays and shrinking): broker crashes, power losses (with what each
replica lost), restarts, registrations, fencing, elections, leader epochs, ISR and ELR changes,
truncations (with the offsets cut), high-watermark moves and replicas that stopped fetching.
Untraced runs keep nothing and pay one attribute test per change.

Extending it: call :meth:`StateChangeLog.record` where the model changes a state a reader
needs to explain an outcome, with the node that made the change, a short event name and the
partition it concerns; describe the new event in ``simulation/trace.py`` and
docs/history-format.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import simpy

from eosim.simulation.protocol import TopicPartition


@dataclass(frozen=True, slots=True)
class StateChange:
    time: float
    node: str
    event: str
    tp: TopicPartition | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class StateChangeLog:
    """The run's state changes, in the order they happened (empty unless ``enabled``)."""

    __slots__ = ("enabled", "env", "events")

    def __init__(self, env: simpy.Environment | None = None, enabled: bool = False) -> None:
        self.env = env
        self.enabled = enabled and env is not None
        self.events: list[StateChange] = []

    def record(
        self, node: str, event: str, tp: TopicPartition | None = None, **detail: Any
    ) -> None:
        if self.enabled:
            assert self.env is not None
            self.events.append(StateChange(self.env.now, node, event, tp, detail))


# The log of a run that is not traced (and of a component built on its own).
DISABLED = StateChangeLog()
