"""PartitionChangeBuilder: how the controller changes a partition's leader and ISR.

A partition's registration (replicas, ISR, leader, leader epoch) changes when a broker is
fenced (its session timed out, or it shut down), when one comes back, and when a leader asks
for an ISR change (AlterPartition). The rules, from Kafka's ``PartitionChangeBuilder`` and
``ReplicationControlManager.generateLeaderAndIsrUpdates`` (KRaft, without eligible leader
replicas):

* A fenced broker leaves the ISR, unless that would empty it: the last member stays, so that
  only it can later be elected cleanly.
* The leader stays if it is still in the ISR and acceptable (alive, not the fenced one);
  otherwise the first replica in assignment order that is in the new ISR and acceptable
  leads. With none, the partition has no leader (offline) until a broker of its ISR returns,
  or, with ``unclean.leader.election.enable``, the first acceptable replica in assignment
  order leads with an ISR of itself alone: records it never received are lost.
* The leader epoch goes up by one whenever the leader changes (metadata versions 3.6+ do not
  bump it for an ISR shrink alone).

Pure logic: the controller process (liveness, heartbeats, publishing metadata) calls in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    # Bumped on every change (Kafka's partition epoch): AlterPartition must name the current one.
    partition_epoch: int = 0
    unclean: bool = False  # the current leader came from an unclean election


def elect(
    current: PartitionRegistration,
    target_isr: tuple[int, ...],
    acceptable: Callable[[int], bool],
    unclean_allowed: bool,
) -> PartitionRegistration:
    """The registration after an ISR change to ``target_isr`` and a leader election."""
    isr = target_isr if target_isr else current.isr  # no ELR: the last member stays
    leader = NO_LEADER
    unclean = False
    if current.leader in target_isr and acceptable(current.leader):
        leader = current.leader
    else:
        leader = next((r for r in current.replicas if r in target_isr and acceptable(r)), NO_LEADER)
        if leader == NO_LEADER and unclean_allowed:
            leader = next((r for r in current.replicas if acceptable(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr, unclean = (leader,), True
    if leader == current.leader and isr == current.isr:
        return current
    return replace(
        current,
        isr=isr,
        leader=leader,
        leader_epoch=current.leader_epoch + (1 if leader != current.leader else 0),
        partition_epoch=current.partition_epoch + 1,
        unclean=unclean if leader != current.leader else current.unclean,
    )


def on_broker_fenced(
    current: PartitionRegistration, broker: int, alive: Callable[[int], bool], unclean_allowed: bool
) -> PartitionRegistration:
    """``broker`` is fenced: it leaves the ISR and, if it led, a new leader is elected."""
    target = tuple(r for r in current.isr if r != broker)
    return elect(current, target, lambda r: r != broker and alive(r), unclean_allowed)


def on_broker_unfenced(
    current: PartitionRegistration, broker: int, alive: Callable[[int], bool], unclean_allowed: bool
) -> PartitionRegistration:
    """``broker`` is back: an offline partition may elect it (cleanly if it is in the ISR)."""
    if current.leader != NO_LEADER:
        return current
    return elect(current, current.isr, lambda r: r == broker or alive(r), unclean_allowed)


def alter_isr(
    current: PartitionRegistration,
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: tuple[int, ...],
    alive: Callable[[int], bool],
) -> tuple[str, PartitionRegistration]:
    """AlterPartition from the leader: ("NONE", new registration) or the error and the
    unchanged one (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA)."""
    if leader != current.leader or leader_epoch != current.leader_epoch:
        return "FENCED_LEADER_EPOCH", current
    if partition_epoch != current.partition_epoch:
        return "INVALID_UPDATE_VERSION", current
    if any(r not in current.isr and not alive(r) for r in new_isr):
        return "INELIGIBLE_REPLICA", current
    if not new_isr or leader not in new_isr:
        return "INVALID_REQUEST", current
    return "NONE", replace(current, isr=new_isr, partition_epoch=current.partition_epoch + 1)
