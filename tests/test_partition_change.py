"""The controller's leader election and ISR changes (Kafka's PartitionChangeBuilderTest and
ReplicationControlManagerTest), without eligible leader replicas and then with them and the
last known leader (KIP-966, Kafka 4.1)."""

from __future__ import annotations

from eosim.simulation.controller.partition_change import (
    NO_LEADER,
    ElectionPolicy,
    PartitionRegistration,
    alter_isr,
    build,
    on_broker_fenced,
    on_broker_unfenced,
    on_unclean_shutdown,
)

ELR = ElectionPolicy(unclean_allowed=False, elr_enabled=True, min_isr=3)


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


# -- eligible leader replicas and the last known leader (PartitionChangeBuilderTest) --------


def test_isr_can_shrink_to_zero_and_the_last_leader_is_remembered():
    """testEligibleLeaderReplicas_IsrCanShrinkToZero (last known leader on, as in 4.1.1)."""
    p = PartitionRegistration((1, 2, 3, 4), (1, 2, 3, 4), 1)
    q = build(p, (), lambda r: False, ELR)
    assert (q.leader, q.isr, q.elr, q.last_known_elr) == (NO_LEADER, (), (1, 2, 3, 4), (1,))
    # An unclean shutdown of replica 2 leaves the last known leader alone.
    r = build(q, (), lambda r: False, ELR, unclean_shutdown=(2,))
    assert r.last_known_elr == (1,) and r.elr == (1, 3, 4)


def test_the_last_known_leader_is_elected_when_isr_and_elr_are_empty():
    """testEligibleLeaderReplicas_ElectLastKnownLeader: an unclean election (the ISR is the
    leader alone) that clears the last known leader."""
    p = PartitionRegistration((1, 2, 3, 4), (), NO_LEADER, elr=(), last_known_elr=(1,))
    q = build(p, (), lambda r: True, ELR)
    assert (q.leader, q.isr, q.elr, q.last_known_elr, q.unclean) == (1, (1,), (), (), True)


def test_no_last_known_leader_election_while_the_elr_is_not_empty():
    """testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail: ELR member 3 is offline, so
    nothing changes."""
    p = PartitionRegistration((1, 2, 3, 4), (), NO_LEADER, elr=(3,), last_known_elr=(1,))
    assert build(p, (), lambda r: r != 3, ELR) is p


def test_a_last_known_leader_that_is_not_alive_is_not_elected():
    """Kafka 4.1.1's canElectLastKnownLeader asks isAcceptableLeader (the trunk of late 2024
    did not)."""
    p = PartitionRegistration((1, 2, 3), (), NO_LEADER, last_known_elr=(1,))
    assert build(p, (), lambda r: r != 1, ELR) is p


def test_without_elr_there_is_no_last_known_leader():
    p = PartitionRegistration((1, 2, 3), (1,), 1)
    q = on_broker_fenced(p, 1, alive_except(1), unclean_allowed=False)
    assert (q.leader, q.isr, q.last_known_elr) == (NO_LEADER, (1,), ())


def test_a_rolling_kill_of_every_replica_recovers_through_the_last_known_leader():
    """Each broker of a partition killed in turn (kill -9): the last ISR member is fenced, the
    ISR empties, it registers after an unclean shutdown (leaving the ELR) and, once unfenced,
    leads again as the last known leader. Before the rule the partition stayed offline for
    good, which Kafka 4.1.1 does not do (docs/calibration.md, case 4)."""
    policy = ElectionPolicy(unclean_allowed=False, elr_enabled=True, min_isr=2)
    p = PartitionRegistration((1, 2, 3), (3,), 3)
    p = on_broker_fenced(p, 3, alive_except(1, 2, 3), unclean_allowed=False, policy=policy)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, (), (3,), (3,))
    p = on_unclean_shutdown(p, 3, alive_except(1, 2, 3), policy)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, (), (), (3,))
    # Brokers 1 and 2, out of sync, come back first: neither may lead.
    assert on_broker_unfenced(p, 1, alive_except(2, 3), False, policy).leader == NO_LEADER
    p = on_broker_unfenced(p, 3, alive_except(1, 2), False, policy)
    assert (p.leader, p.isr, p.last_known_elr, p.unclean) == (3, (3,), (), True)
