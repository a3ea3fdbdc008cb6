"""PartitionChangeBuilder: how the controller changes a partition's leader, ISR and ELR.

A partition's registration (replicas, ISR, eligible leader replicas, leader, leader epoch)
changes when a broker is fenced (its session timed out), when one comes back, when a broker
registers again after an unclean shutdown, and when a leader asks for an ISR change
(AlterPartition). The rules, from Kafka's ``PartitionChangeBuilder`` and
``ReplicationControlManager.generateLeaderAndIsrUpdates``:

* The broker being fenced (or registering after an unclean shutdown) leaves the target ISR.
  Without eligible leader replicas (ELR, KIP-966; the rule ``eligible_leader_replicas``, off
  before Kafka 4.1) an ISR is never emptied: the last member stays, so that only it can later
  be elected cleanly. With ELR the ISR may become empty.
* With ELR, while the target ISR is smaller than the topic's effective ``min.insync.replicas``
  (capped at the replication factor), the ELR is the previous ISR and ELR less the target ISR
  and less any replica that registered after an unclean shutdown
  (``maybePopulateTargetElr``); once the ISR is back at the minimum the ELR is cleared. A
  replica of the ELR has every record the high watermark passed, since the HW does not move
  under min ISR (KIP-966's "strict min ISR").
* The leader stays if it is still a valid leader; otherwise the first replica in assignment
  order that is valid leads: in the target ISR, or (ISR empty) in the ELR, and acceptable
  (registered, unfenced, not the broker being removed). A leader taken from the ELR makes the
  ISR itself alone and leaves the ELR. With no valid leader the partition has no leader
  (offline) until one returns, or, with ``unclean.leader.election.enable``, the first
  acceptable replica in assignment order leads with an ISR of itself alone (records it never
  received are lost) and the ELR is cleared.
* The leader epoch goes up by one whenever the leader changes (metadata versions 3.6+ do not
  bump it for an ISR shrink alone); the partition epoch on every change.

* With ELR, the partition remembers its last known leader (``lastKnownElr``,
  ``maybeUpdateLastKnownLeader``): the leader it had when its ISR first became empty; it is
  forgotten as soon as the partition has a leader again. When the ISR and the ELR are both
  empty and that broker is acceptable again, it is elected (``canElectLastKnownLeader``), even
  with unclean election off and even if it registered after an unclean shutdown; Kafka counts
  it an unclean election (the ISR becomes itself alone, the leader is RECOVERING). Kafka's
  builder has a switch for this (``useLastKnownLeaderInBalancedRecovery``); nothing in Kafka
  4.1.1 turns it off, so the model has none. Checked in the 4.1.1 jar: the trunk of late 2024
  elected a last known leader that was not alive; 4.1.1 requires it to be acceptable.

Pure logic: the controller process (liveness, heartbeats, publishing metadata) calls in.
Brokers are compared by name; the functions are generic in the broker type.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[Any, ...]
    isr: tuple[Any, ...]
    leader: Any
    leader_epoch: int = 0
    # Bumped on every change (Kafka's partition epoch): AlterPartition must name the current one.
    partition_epoch: int = 0
    unclean: bool = False  # the current leader came from an unclean election
    elr: tuple[Any, ...] = ()
    # Kafka's lastKnownElr with last-known-leader recovery: the leader the partition had when
    # its ISR became empty (ELR only).
    last_known_elr: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class ElectionPolicy:
    """What an election may do for one partition: ``unclean_allowed`` is the topic's
    ``unclean.leader.election.enable``; ``elr_enabled`` and ``min_isr`` (the topic's effective
    ``min.insync.replicas``) drive the eligible leader replicas."""

    unclean_allowed: bool = False
    elr_enabled: bool = False
    min_isr: int = 1


def build(
    current: PartitionRegistration,
    target_isr: tuple[Any, ...],
    acceptable: Callable[[Any], bool],
    policy: ElectionPolicy,
    unclean_shutdown: Collection[Any] = (),
) -> PartitionRegistration:
    """The registration after asking for ``target_isr`` (PartitionChangeBuilder.build): the
    ELR, a leader election, then the ISR; ``current`` itself when nothing changes."""
    target_elr = current.elr
    if policy.elr_enabled:
        if len(target_isr) >= policy.min_isr:
            target_elr = ()
        else:
            candidates = set(current.elr) | set(current.isr)
            target_elr = tuple(
                r
                for r in current.replicas
                if r in candidates and r not in target_isr and r not in unclean_shutdown
            )

    def valid(r: Any) -> bool:
        in_isr = r in target_isr
        return (in_isr or (not target_isr and r in target_elr)) and acceptable(r)

    leader = current.leader
    unclean = False
    if current.leader == NO_LEADER or not valid(current.leader):
        leader = next((r for r in current.replicas if valid(r)), NO_LEADER)
        last_known = current.last_known_elr
        if (
            leader == NO_LEADER
            and policy.elr_enabled
            and not target_isr
            and not target_elr
            and len(last_known) == 1
            and acceptable(last_known[0])
        ):
            leader, unclean = last_known[0], True  # canElectLastKnownLeader
        elif leader == NO_LEADER and policy.unclean_allowed:
            leader = next((r for r in current.replicas if acceptable(r)), NO_LEADER)
            unclean = leader != NO_LEADER
    isr = target_isr
    if leader != current.leader and leader != NO_LEADER:
        if unclean:
            isr = (leader,)
        elif leader in target_elr:
            isr = (leader,)
            target_elr = tuple(r for r in target_elr if r != leader)
    if unclean or not policy.elr_enabled:
        target_elr = ()
    if not isr and not policy.elr_enabled:
        isr = current.isr  # no ELR: the last member stays
    last_known_elr = current.last_known_elr
    if policy.elr_enabled:  # maybeUpdateLastKnownLeader
        if not isr and isr != current.isr:
            last_known_elr = (current.leader,)
        elif leader != NO_LEADER:
            last_known_elr = ()
    if (
        leader == current.leader
        and isr == current.isr
        and target_elr == current.elr
        and last_known_elr == current.last_known_elr
    ):
        return current
    changed_leader = leader != current.leader
    return replace(
        current,
        isr=isr,
        elr=target_elr,
        last_known_elr=last_known_elr,
        leader=leader,
        leader_epoch=current.leader_epoch + (1 if changed_leader else 0),
        partition_epoch=current.partition_epoch + 1,
        unclean=unclean if changed_leader else current.unclean,
    )


def elect(
    current: PartitionRegistration,
    target_isr: tuple[Any, ...],
    acceptable: Callable[[Any], bool],
    unclean_allowed: bool,
) -> PartitionRegistration:
    """The registration after an ISR change to ``target_isr`` and a leader election, without
    eligible leader replicas."""
    return build(current, target_isr, acceptable, ElectionPolicy(unclean_allowed))


def on_broker_fenced(
    current: PartitionRegistration,
    broker: Any,
    alive: Callable[[Any], bool],
    unclean_allowed: bool,
    policy: ElectionPolicy | None = None,
) -> PartitionRegistration:
    """``broker`` is fenced (handleBrokerFenced): it leaves the ISR and, if it led, a new
    leader is elected."""
    policy = policy if policy is not None else ElectionPolicy(unclean_allowed)
    target = tuple(r for r in current.isr if r != broker)
    return build(current, target, lambda r: r != broker and alive(r), policy)


def on_broker_unfenced(
    current: PartitionRegistration,
    broker: Any,
    alive: Callable[[Any], bool],
    unclean_allowed: bool,
    policy: ElectionPolicy | None = None,
) -> PartitionRegistration:
    """``broker`` is back (handleBrokerUnfenced): a partition without a leader may elect it
    (cleanly if it is in the ISR, or in the ELR while the ISR is empty)."""
    if current.leader != NO_LEADER:
        return current
    policy = policy if policy is not None else ElectionPolicy(unclean_allowed)
    return build(current, current.isr, lambda r: r == broker or alive(r), policy)


def on_unclean_shutdown(
    current: PartitionRegistration,
    broker: Any,
    alive: Callable[[Any], bool],
    policy: ElectionPolicy,
) -> PartitionRegistration:
    """``broker`` registered again after an unclean shutdown (handleBrokerUncleanShutdown,
    KIP-966): with eligible leader replicas it leaves the ISR and the ELR, since its log may
    have lost what it acknowledged; without them nothing changes."""
    if not policy.elr_enabled:
        return current
    if broker not in current.isr and broker not in current.elr:
        return current
    target = tuple(r for r in current.isr if r != broker)
    return build(current, target, lambda r: r != broker and alive(r), policy, (broker,))


def alter_isr(
    current: PartitionRegistration,
    leader: Any,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: tuple[Any, ...],
    alive: Callable[[Any], bool],
    policy: ElectionPolicy | None = None,
) -> tuple[str, PartitionRegistration]:
    """AlterPartition from the leader: ("NONE", new registration) or the error and the
    unchanged one (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA,
    INVALID_REQUEST). With ELR, members leaving the ISR below min ISR become eligible."""
    if leader != current.leader or leader_epoch != current.leader_epoch:
        return "FENCED_LEADER_EPOCH", current
    if partition_epoch != current.partition_epoch:
        return "INVALID_UPDATE_VERSION", current
    if any(r not in current.isr and not alive(r) for r in new_isr):
        return "INELIGIBLE_REPLICA", current
    if not new_isr or leader not in new_isr:
        return "INVALID_REQUEST", current
    policy = policy if policy is not None else ElectionPolicy()
    new = build(current, new_isr, lambda r: r == leader or alive(r), policy)
    if new is current:
        new = replace(current, partition_epoch=current.partition_epoch + 1)
    return "NONE", new
