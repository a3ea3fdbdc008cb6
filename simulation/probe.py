"""Named points in the protocol at which the nemesis can strike.

Components call :meth:`Probe.hit` when they pass a step of the commit protocol
(``coordinator.prepare_persisted``, ``leader.before_marker``, ...). A ``crash_at`` fault
registers a hook on one point and crashes its target the n-th time that point is passed.
Hooks run synchronously, so the component that called ``hit`` must check afterwards whether
it is still alive. The list of points is :data:`POINTS`; docs/model.md describes each.
"""

from __future__ import annotations

from collections.abc import Callable

POINTS = (
    # the producer (client)
    "producer.before_end_txn",
    "producer.after_end_txn_sent",
    "producer.after_commit",
    # the transaction coordinator
    "coordinator.prepare_persisted",
    "coordinator.markers_sent",
    "coordinator.complete_persisted",
    # the leader of a partition in the transaction
    "leader.before_marker",
    "leader.after_marker",
    # a replica whose broker applies the controller's metadata
    "replica.became_leader",
    "replica.became_follower",
    # a consume-transform-produce application
    "processor.after_poll",
    "processor.after_send",
    "processor.after_send_offsets",
)

Hook = Callable[[str], None]  # called with the node that passed the point


class Probe:
    def __init__(self) -> None:
        self._hooks: dict[str, list[Hook]] = {}

    def on(self, point: str, hook: Hook) -> None:
        if point not in POINTS:
            raise ValueError(f"unknown probe point {point!r}")
        self._hooks.setdefault(point, []).append(hook)

    def hit(self, point: str, node: str) -> None:
        hooks = self._hooks.get(point)
        if hooks:
            for hook in list(hooks):
                hook(node)
