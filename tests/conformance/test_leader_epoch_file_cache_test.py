"""Conformance with Kafka's LeaderEpochFileCacheTest (core, kafka.server.epoch): how a replica's
leader-epoch cache is assigned, answers OffsetsForLeaderEpoch (``endOffsetFor``) and is cut
from the end (a truncated log) and from the start (a log whose start moved).

eosim's ``LeaderEpochCache`` keeps the entries in memory (no checkpoint file); the cases about
persistence are left out with that reason."""

from __future__ import annotations

from conformance.not_modelled import not_modelled

from eosim.simulation.broker.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def entries(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return list(zip(cache.epochs, cache.start_offsets, strict=True))


def assigned(*pairs: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, offset in pairs:
        cache.assign(epoch, offset)
    return cache


def test_should_add_epoch_and_message_offset_to_cache():
    cache = assigned((2, 10))
    assert cache.latest_epoch == 2 and entries(cache) == [(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_should_return_log_end_offset_if_latest_epoch_requested():
    assert assigned((2, 11), (2, 12)).end_offset_for(2, 14) == (2, 14)


def test_should_return_undefined_offset_if_undefined_epoch_requested():
    assert assigned((2, 11), (3, 12)).end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_should_not_overwrite_log_end_offset_for_a_leader_epoch_once_it_has_been_assigned():
    assert entries(assigned((2, 9), (2, 10))) == [(2, 9)]


def test_should_enforce_monotonically_increasing_start_offsets():
    assert entries(assigned((2, 9), (3, 9))) == [(3, 9)]


def test_should_not_overwrite_offset_for_a_leader_epoch_once_it_has_been_assigned():
    assert entries(assigned((2, 6), (2, 10))) == [(2, 6)]


def test_should_return_unsupported_if_no_epoch_recorded():
    assert LeaderEpochCache().end_offset_for(0, 0) == UNDEFINED


def test_should_return_unsupported_if_no_epoch_recorded_and_undefined_epoch_requested():
    assert LeaderEpochCache().end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_should_return_first_epoch_if_requested_epoch_less_than_first_epoch():
    assert assigned((5, 11), (6, 12), (7, 13)).end_offset_for(4, 0) == (4, 11)


def test_should_truncate_if_matching_epoch_but_earlier_starting_offset():
    cache = assigned((5, 11), (6, 12), (7, 13), (7, 12))
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_should_get_first_offset_of_subsequent_epoch_when_offset_requested_for_previous_epoch():
    cache = assigned((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert cache.end_offset_for(2, 17) == (2, 15)


def test_should_return_next_available_epoch_if_there_is_no_exact_epoch_for_the_one_requested():
    cache = assigned((0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)


def test_should_not_update_epoch_and_start_offset_if_it_did_not_change():
    assert entries(assigned((2, 6), (2, 7))) == [(2, 6)]


def test_should_return_invalid_offset_if_epoch_is_requested_which_is_not_currently_tracked():
    assert assigned((2, 100)).end_offset_for(3, 100) == UNDEFINED


def test_should_support_epochs_that_do_not_start_from_zero():
    cache = assigned((2, 6))
    assert cache.end_offset_for(2, 7) == (2, 7) and entries(cache) == [(2, 6)]


def test_should_enforce_monotonically_increasing_epochs():
    cache = assigned((1, 5), (2, 6), (1, 7))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert entries(cache)[0] == (1, 7)


def test_should_enforce_offsets_increase_monotonically():
    assert entries(assigned((2, 6), (3, 5)))[0] == (3, 5)


def test_should_increase_and_track_epochs_as_leaders_change_many_times():
    cache = assigned((0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    assert cache.end_offset_for(0, 5) == (0, 0)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_should_increase_and_track_epochs_as_follower_receives_many_messages():
    cache = assigned((0, 0), (0, 1), (0, 2))
    assert cache.latest_epoch == 0 and cache.end_offset_for(0, 3) == (0, 3)
    for offset in (3, 4, 5):
        cache.assign(1, offset)
    assert cache.latest_epoch == 1 and cache.end_offset_for(1, 6) == (1, 6)
    for offset in (6, 7, 8):
        cache.assign(2, offset)
    assert cache.latest_epoch == 2 and cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


def three() -> LeaderEpochCache:
    return assigned((2, 6), (3, 8), (4, 11))


def test_should_drop_entries_on_epoch_boundary_when_removing_latest_entries():
    cache = three()
    cache.truncate_from_end(8)
    assert entries(cache) == [(2, 6)]


def test_should_preserve_reset_offset_on_clear_earliest_if_one_exists():
    cache = three()
    cache.truncate_from_start(15)
    assert entries(cache) == [(4, 15)]


def test_should_update_saved_offset_when_offset_to_clear_to_is_between_epochs():
    cache = three()
    cache.truncate_from_start(9)
    assert entries(cache) == [(3, 9), (4, 11)]


def test_should_not_clear_anything_if_offset_to_early():
    cache = three()
    cache.truncate_from_start(1)
    assert entries(cache) == [(2, 6), (3, 8), (4, 11)]


def test_should_not_clear_anything_if_offset_to_first_offset():
    cache = three()
    cache.truncate_from_start(6)
    assert entries(cache) == [(2, 6), (3, 8), (4, 11)]


def test_should_retain_latest_epoch_on_clear_all_earliest():
    cache = three()
    cache.truncate_from_start(11)
    assert entries(cache) == [(4, 11)]


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest():
    cache = three()
    cache.truncate_from_start(9)
    assert entries(cache) == [(3, 9), (4, 11)]


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest2():
    cache = assigned((0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert entries(cache) == [(0, 5), (1, 7), (2, 10)]


def test_should_retain_latest_epoch_on_clear_all_earliest_and_update_its_offset():
    cache = three()
    cache.truncate_from_start(15)
    assert entries(cache) == [(4, 15)]


def test_should_drop_entries_between_epoch_boundary_when_removing_newest():
    cache = three()
    cache.truncate_from_end(9)
    assert cache.latest_epoch == 3 and entries(cache) == [(2, 6), (3, 8)]


def test_should_not_reset_epoch_history_head_if_undefined_passed():
    cache = three()
    cache.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    assert len(entries(cache)) == 3


def test_should_not_reset_epoch_history_tail_if_undefined_passed():
    cache = three()
    cache.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert len(entries(cache)) == 3


def test_should_fetch_latest_epoch_of_empty_cache():
    assert LeaderEpochCache().latest_epoch == UNDEFINED_EPOCH


def test_should_fetch_end_offset_of_empty_cache():
    assert LeaderEpochCache().end_offset_for(7, 0) == UNDEFINED


def test_should_clear_earliest_on_empty_cache():
    cache = LeaderEpochCache()
    cache.truncate_from_start(7)
    assert entries(cache) == []


def test_should_clear_latest_on_empty_cache():
    cache = LeaderEpochCache()
    cache.truncate_from_end(7)
    assert entries(cache) == []


def test_should_write_checkpoint_on_truncation():
    """Kafka checks the checkpoint file; eosim the entries the truncations leave."""
    cache = three()
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert entries(cache) == [(3, 8)]


# Lookups Kafka uses only on paths eosim does not model: tiered storage (RemoteLogManager),
# moves between log directories (LocalLeaderEndPoint), timestamp lookups
# (UnifiedLog.fetchOffsetByTimestamp), a follower restarting below its leader's log start
# (truncateFullyAndStartAt), and the checkpoint file.
UNUSED = "used by Kafka only on paths eosim does not model (tiered storage, log-dir moves)"
NOT_MODELLED = {
    "testPreviousEpoch": UNUSED,
    "testFindPreviousEpoch": UNUSED,
    "testFindPreviousEntry": UNUSED,
    "testFindNextEpoch": UNUSED,
    "testGetEpochEntry": UNUSED,
    "shouldFetchEpochForGivenOffset": "epochForOffset serves timestamp lookups and log-dir "
    "moves, which eosim does not model",
    "shouldPersistEpochsBetweenInstances": "no checkpoint file: the cache lives in memory",
    "shouldClearAllEntries": "clearAndFlush serves truncateFullyAndStartAt (a follower below "
    "its leader's log start), which eosim does not model",
}

test_not_modelled = not_modelled("LeaderEpochFileCacheTest", NOT_MODELLED)
