"""The controller's leader election and ISR changes (Kafka's PartitionChangeBuilderTest and
ReplicationControlManagerTest, without eligible leader replicas)."""

from __future__ import annotations

from eosim.simulation.controller.partition_change import (
    NO_LEADER,
    PartitionRegistration,
    alter_isr,
    on_broker_fenced,
    on_broker_unfenced,
)


def reg(isr=(1, 2, 3), leader=1, replicas=(1, 2, 3)) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader)


def alive_except(*dead: int):
    return lambda r: r not in dead


def test_fencing_the_leader_elects_the_next_isr_replica_in_assignment_order():
    p = on_broker_fenced(reg(), 1, alive_except(1), unclean_allowed=False)
    assert (p.leader, p.isr, p.leader_epoch) == (2, (2, 3), 1)
    assert not p.unclean


def test_fencing_a_follower_shrinks_the_isr_without_a_new_leader_epoch():
    p = on_broker_fenced(reg(), 3, alive_except(3), unclean_allowed=False)
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2), 0, 1)


def test_the_last_isr_member_stays_and_the_partition_goes_offline():
    """ReplicationControlManager: without ELR the ISR never becomes empty."""
    p = on_broker_fenced(reg(isr=(1,)), 1, alive_except(1), unclean_allowed=False)
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    # It comes back: the only clean leader there is.
    back = on_broker_unfenced(p, 1, alive_except(), unclean_allowed=False)
    assert (back.leader, back.isr, back.leader_epoch) == (1, (1,), 2)


def test_a_returning_out_of_sync_replica_cannot_lead_cleanly():
    p = on_broker_fenced(reg(isr=(1,)), 1, alive_except(1), unclean_allowed=False)
    assert on_broker_unfenced(p, 2, alive_except(1), unclean_allowed=False).leader == NO_LEADER


def test_unclean_election_picks_any_live_replica_with_an_isr_of_itself():
    """PartitionChangeBuilder.electAnyLeader with Election.UNCLEAN"""
    p = on_broker_fenced(reg(isr=(1,)), 1, alive_except(1), unclean_allowed=True)
    assert (p.leader, p.isr, p.unclean) == (2, (2,), True)


def test_alter_partition_checks_leader_epoch_and_partition_epoch():
    p = reg(isr=(1, 2))
    code, q = alter_isr(p, 1, 0, 0, (1, 2, 3), alive_except())
    assert code == "NONE" and q.isr == (1, 2, 3) and q.partition_epoch == 1
    assert alter_isr(q, 1, 0, 0, (1, 2), alive_except())[0] == "INVALID_UPDATE_VERSION"
    assert alter_isr(q, 2, 0, 1, (1, 2), alive_except())[0] == "FENCED_LEADER_EPOCH"
    assert alter_isr(p, 1, 0, 0, (1, 2, 3), alive_except(3))[0] == "INELIGIBLE_REPLICA"
