"""The fault protocol: what a cluster must offer for a fault schedule to be driven against it.

A run's faults are realised once (:func:`eosim.simulation.nemesis.realize_faults`) into a list of
:class:`~eosim.simulation.nemesis.FaultEvent`. :func:`apply_fault` turns one event into calls on
a :class:`FaultableCluster` and hands back the call that undoes it, so the same schedule is
driven against the model (:class:`eosim.simulation.nemesis.Nemesis`, in simulated time) and a
real Kafka (:mod:`eosim.real.runner`, on the wall clock), as Jepsen's nemesis drives its ``db``.

To make something a fault target, implement the protocol's methods for the fault kinds it can
do, and list in ``refuses`` the kinds it cannot with one line saying why; a scenario asking
for a refused kind is rejected before it runs (:func:`refusals`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

# Node-level kinds, undone by restart (crash, power_loss) or resume (pause).
NODE_FAULTS = ("crash", "power_loss", "pause")
# Network kinds, undone by heal.
NETWORK_FAULTS = ("partition", "delay", "loss")


class FaultableCluster(Protocol):
    """A cluster the nemesis can hurt: the model's or a real one.

    Every node operation takes a node's name (``broker-0``, ``controller``, ``producer-0``) and is
    idempotent: crashing a dead node or resuming a running one does nothing. Network operations
    return a handle that :meth:`heal` takes back.
    """

    def crash(self, node: str) -> None: ...

    def power_loss(self, node: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]]) -> Any:
        """Cut every link between two groups (one group: cut it off from everyone else)."""
        ...

    def disturb(
        self,
        nodes: Sequence[str],
        links: Sequence[tuple[str, str]],
        extra_latency: float,
        loss: float,
    ) -> Any:
        """Slow (``extra_latency`` ms) or drop (``loss``, a probability) the traffic of ``nodes``
        or of the directed ``links``."""
        ...

    def heal(self, handle: Any) -> None: ...

    def delete_records(
        self, topic: str, partition: int | None, offset: int
    ) -> list[tuple[str, str, int]]:
        """An administrator's DeleteRecords: per partition, (name, error name, new log start)."""
        ...


def apply_fault(
    kind: str,
    targets: Sequence[str],
    groups: Sequence[Sequence[str]],
    links: Sequence[tuple[str, str]],
    extra_latency: float,
    probability: float,
    cluster: FaultableCluster,
) -> Callable[[], None]:
    """Start one fault on ``cluster``; the call that ends it."""
    if kind in NODE_FAULTS:
        do = {"crash": cluster.crash, "power_loss": cluster.power_loss, "pause": cluster.pause}
        undo = cluster.resume if kind == "pause" else cluster.restart
        for node in targets:
            do[kind](node)
        nodes = tuple(targets)

        def end_node_fault() -> None:
            for node in nodes:
                undo(node)

        return end_node_fault
    if kind == "partition":
        handle = cluster.partition(groups or (tuple(targets),))
    elif kind == "delay":
        handle = cluster.disturb(targets, links, extra_latency, 0.0)
    elif kind == "loss":
        handle = cluster.disturb(targets, links, 0.0, probability)
    else:
        raise ValueError(f"{kind} is not a fault apply_fault starts (delete_records is instant)")
    return lambda: cluster.heal(handle)


def refusals(kinds: Sequence[str], refuses: Mapping[str, str], target: str) -> list[str]:
    """One line per fault kind in ``kinds`` that ``target`` cannot do, saying why."""
    seen: list[str] = []
    for kind in kinds:
        if kind in refuses and kind not in seen:
            seen.append(kind)
    return [f"{kind} faults cannot run on {target}: {refuses[kind]}" for kind in seen]
