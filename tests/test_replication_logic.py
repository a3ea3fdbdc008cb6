"""Replication's pure logic: the leader epoch cache, truncation, and the leader's ISR and HW.

Cases from Kafka's LeaderEpochFileCacheTest, ReplicaTest and PartitionTest, restated against
``eosim.simulation.broker.leader_epoch_cache`` and ``eosim.simulation.broker.partition``.
"""

from __future__ import annotations

from eosim.simulation.broker.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
    truncation_offset,
)
from eosim.simulation.broker.partition import LeaderState, ReplicaState
from eosim.simulation.protocol import Errors

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
LAG = 30_000.0


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache()
    for epoch, offset in entries:
        c.assign(epoch, offset)
    return c


def entries(c: LeaderEpochCache) -> list[tuple[int, int]]:
    return list(zip(c.epochs, c.start_offsets, strict=True))


# -- LeaderEpochFileCacheTest -----------------------------------------------------------------


def test_should_return_log_end_offset_if_latest_epoch_requested():
    """LeaderEpochFileCacheTest.shouldReturnLogEndOffsetIfLatestEpochRequested"""
    c = cache((2, 5), (3, 6), (4, 7))
    assert c.end_offset_for(4, 11) == (4, 11)


def test_should_return_undefined_for_undefined_epoch_or_empty_cache():
    """LeaderEpochFileCacheTest.shouldReturnUndefinedOffsetIfUndefinedEpochRequested,
    shouldReturnUnsupportedIfNoEpochRecorded(AndUndefinedEpochRequested)"""
    assert cache((2, 5)).end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    assert cache().end_offset_for(0, 0) == UNDEFINED
    assert cache().end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_should_not_overwrite_offset_for_an_epoch_once_assigned():
    """LeaderEpochFileCacheTest.shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned,
    shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned,
    shouldNotUpdateEpochAndStartOffsetIfItDidNotChange"""
    assert entries(cache((2, 9), (2, 10))) == [(2, 9)]
    assert entries(cache((2, 6), (2, 7))) == [(2, 6)]


def test_should_enforce_monotonically_increasing_start_offsets():
    """LeaderEpochFileCacheTest.shouldEnforceMonotonicallyIncreasingStartOffsets,
    shouldEnforceOffsetsIncreaseMonotonically"""
    assert entries(cache((2, 9), (3, 9))) == [(3, 9)]
    assert entries(cache((2, 6), (3, 5))) == [(3, 5)]


def test_should_return_first_epoch_if_requested_epoch_less_than_first_epoch():
    """LeaderEpochFileCacheTest.shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch"""
    assert cache((5, 11), (6, 12), (7, 13)).end_offset_for(4, 0) == (4, 11)


def test_should_truncate_if_matching_epoch_but_earlier_starting_offset():
    """LeaderEpochFileCacheTest.shouldTruncateIfMatchingEpochButEarlierStartingOffset"""
    c = cache((5, 11), (6, 12), (7, 13), (7, 12))
    assert c.end_offset_for(5, 0) == (5, 12)
    assert c.end_offset_for(6, 0) == (5, 12)


def test_should_get_first_offset_of_subsequent_epoch_for_a_previous_epoch():
    """LeaderEpochFileCacheTest.shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch"""
    c = cache((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert c.end_offset_for(2, 17) == (2, 15)


def test_should_return_next_available_epoch_if_there_is_no_exact_epoch():
    """LeaderEpochFileCacheTest.shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested"""
    c = cache((0, 10), (2, 13), (4, 17))
    assert c.end_offset_for(1, 0) == (0, 13)
    assert c.end_offset_for(2, 0) == (2, 17)
    assert c.end_offset_for(3, 0) == (2, 17)


def test_should_return_undefined_for_an_epoch_later_than_any():
    """LeaderEpochFileCacheTest.shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked"""
    assert cache((2, 100)).end_offset_for(3, 100) == UNDEFINED


def test_should_enforce_monotonically_increasing_epochs():
    """LeaderEpochFileCacheTest.shouldEnforceMonotonicallyIncreasingEpochs"""
    c = cache((1, 5), (2, 6), (1, 7))
    assert c.latest_epoch == 1
    assert c.end_offset_for(1, 8) == (1, 8)
    assert c.end_offset_for(2, 8) == UNDEFINED
    assert entries(c) == [(1, 7)]


def test_should_drop_entries_between_epoch_boundary_when_removing_newest():
    """LeaderEpochFileCacheTest.shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest"""
    c = cache((2, 6), (3, 8), (4, 11))
    c.truncate_from_end(9)
    assert c.latest_epoch == 3 and entries(c) == [(2, 6), (3, 8)]


# -- truncation when a replica becomes a follower ---------------------------------------------


def leader_answers(leader: LeaderEpochCache, leader_leo: int):
    return lambda epoch: leader.end_offset_for(epoch, leader_leo)


def test_same_epoch_keeps_the_common_prefix():
    # Follower has epoch 1 up to 10; the leader (still epoch 1's history) has up to 8.
    follower = cache((0, 0), (1, 5))
    leader = cache((0, 0), (1, 5))
    assert truncation_offset(follower, 10, 3, leader_answers(leader, 8)) == 8
    assert truncation_offset(follower, 6, 3, leader_answers(leader, 8)) == 6


def test_records_of_an_epoch_the_leader_never_saw_are_truncated():
    """KIP-101: the old leader wrote offsets 5..9 in epoch 1 that never reached the new leader,
    which took over in epoch 2 at offset 5: the follower truncates to 5, whatever its HW."""
    follower = cache((0, 0), (1, 5))
    leader = cache((0, 0), (2, 5))
    assert truncation_offset(follower, 10, 9, leader_answers(leader, 20)) == 5


def test_a_diverged_epoch_is_cut_where_the_leaders_epoch_ended():
    """KIP-101: the follower wrote offsets 7..11 in epoch 2, which the leader never had (it
    moved from epoch 1 to 3 at offset 7): the leader answers (1, 7) and the follower keeps 7."""
    follower = cache((0, 0), (1, 4), (2, 9))
    leader = cache((0, 0), (1, 4), (3, 7))
    assert truncation_offset(follower, 12, 9, leader_answers(leader, 15)) == 7


def test_diverging_epochs_are_resolved_one_at_a_time():
    """KIP-279: each answer names an epoch the follower does not have exactly, so it asks
    again for its own older epoch, until both name the same one: here epoch 0, which the
    leader ended at 3 and the follower at 5."""
    follower = cache((0, 0), (2, 5), (4, 9))
    leader = cache((0, 0), (1, 3), (3, 6), (5, 8))
    assert truncation_offset(follower, 12, 11, leader_answers(leader, 15)) == 3


def test_without_epochs_the_follower_falls_back_to_its_high_watermark():
    assert truncation_offset(cache(), 10, 6, leader_answers(cache(), 20)) == 6


# -- ReplicaTest --------------------------------------------------------------------------------


def test_is_caught_up_when_replica_is_caught_up_to_log_end():
    """ReplicaTest.testIsCaughtUpWhenReplicaIsCaughtUpToLogEnd"""
    r = ReplicaState()
    assert not r.is_caught_up(10, 1_000, LAG)
    r.update_fetch_state(10, 1_000, 10)
    assert r.is_caught_up(10, 1_000, LAG)
    assert r.is_caught_up(10, 1_000 + LAG + 1, LAG)


def test_is_caught_up_when_replica_is_not_caught_up_to_log_end():
    """ReplicaTest.testIsCaughtUpWhenReplicaIsNotCaughtUpToLogEnd"""
    r = ReplicaState()
    r.update_fetch_state(5, 1_000, 10)
    assert not r.is_caught_up(10, 1_000, LAG)
    r.update_fetch_state(10, 2_000, 15)
    assert r.is_caught_up(16, 2_000, LAG)  # caught up to the previous fetch's log end
    assert not r.is_caught_up(16, 1_000 + LAG + 1, LAG)


def test_reset_replica_state_when_leader_is_elected():
    """ReplicaTest.testResetReplicaStateWhen(New)Leader...ReplicaIsInSync / IsNotInSync: an
    in-sync follower counts as caught up from the election, another does not."""
    r = ReplicaState()
    r.reset_for_new_leader(5_000, 20, in_sync=True)
    assert r.is_caught_up(20, 5_000 + LAG, LAG) and not r.is_caught_up(20, 5_001 + LAG, LAG)
    r.reset_for_new_leader(5_000, 20, in_sync=False)
    assert not r.is_caught_up(21, 5_000, LAG)


# -- the leader: HW, ISR, acks=all (PartitionTest) ----------------------------------------------


def leader(**kwargs) -> LeaderState:
    base = dict(
        broker=0, replicas=(0, 1, 2), leader_epoch=1, isr=frozenset({0, 1, 2}), epoch_start_offset=0
    )
    base.update(kwargs)
    return LeaderState(**base)


def test_high_watermark_is_the_smallest_log_end_of_the_isr():
    p = leader()
    assert not p.follower_fetched(1, 5, 10, 100)  # follower 2 is still at 0
    p.follower_fetched(2, 3, 10, 100)
    assert p.high_watermark == 3
    p.follower_fetched(2, 10, 10, 101)
    assert p.high_watermark == 5
    p.follower_fetched(1, 10, 10, 102)
    assert p.high_watermark == 10


def test_high_watermark_never_moves_back():
    p = leader(high_watermark=8)
    p.follower_fetched(1, 3, 10, 100)
    assert p.high_watermark == 8


def test_high_watermark_does_not_advance_under_min_isr():
    """Partition.maybeIncrementLeaderHW (KIP-966, Kafka 3.7+): no HW progress while the ISR
    is smaller than min.insync.replicas; the older rule lets it move."""
    p = leader(isr=frozenset({0}), min_insync_replicas=2)
    assert not p.maybe_increment_high_watermark(10, 100)
    p = leader(isr=frozenset({0}), min_insync_replicas=2, hw_advances_under_min_isr=True)
    assert p.maybe_increment_high_watermark(10, 100) and p.high_watermark == 10


def test_a_follower_that_stops_fetching_falls_out_of_the_isr():
    """PartitionTest.testMaybeShrinkIsr: out of sync once not caught up for the lag time."""
    p = leader()
    p.follower_fetched(1, 10, 10, 1_000)
    p.follower_fetched(2, 10, 10, 1_000)
    assert p.out_of_sync_replicas(12, 1_000 + LAG) == []
    p.follower_fetched(1, 12, 12, 20_000)
    assert p.out_of_sync_replicas(12, 1_000 + LAG + 1) == [2]


def test_a_caught_up_follower_rejoins_the_isr():
    """PartitionTest.testIsrExpansion: a follower whose log end reached the HW (and the
    epoch's start offset) is proposed; the change applies when the controller accepts."""
    p = leader(isr=frozenset({0, 1}), high_watermark=10, epoch_start_offset=4)
    p.follower_fetched(2, 9, 12, 100)
    assert not p.isr_to_expand(2)
    p.follower_fetched(2, 10, 12, 101)
    assert p.isr_to_expand(2)
    p.propose_isr(frozenset({0, 1, 2}))
    assert p.maximal_isr == {0, 1, 2} and p.isr == {0, 1}
    assert not p.isr_to_expand(2)  # one change at a time
    p.isr_committed(frozenset({0, 1, 2}))
    assert p.isr == {0, 1, 2} and p.pending_isr is None


def test_acks_all_refused_before_append_under_min_isr():
    """Partition.appendRecordsToLeader: NOT_ENOUGH_REPLICAS for acks=all only."""
    p = leader(isr=frozenset({0}), min_insync_replicas=2)
    assert p.append_error(-1) is Errors.NOT_ENOUGH_REPLICAS
    assert p.append_error(1) is Errors.NONE
    assert leader(min_insync_replicas=5).append_error(-1) is Errors.NONE  # min(minIsr, RF)


def test_acks_all_answered_once_the_high_watermark_passes():
    """Partition.checkEnoughReplicasReachOffset"""
    p = leader(min_insync_replicas=2)
    assert p.replicated(5) is None
    p.follower_fetched(1, 5, 5, 100)
    p.follower_fetched(2, 5, 5, 100)
    assert p.replicated(5) is Errors.NONE
    p.isr_committed(frozenset({0}))
    assert p.replicated(5) is Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
