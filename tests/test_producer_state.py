"""ProducerStateManager: every rule of the broker's idempotence check."""

from __future__ import annotations

import pytest

from eosim.simulation.broker.producer_state import ProducerStateManager, Verdict
from eosim.simulation.protocol import MAX_SEQUENCE, NO_PRODUCER_ID


def append(psm: ProducerStateManager, pid: int, epoch: int, first: int, last: int, offset: int):
    check = psm.check(pid, epoch, first, last)
    if check.verdict is Verdict.APPEND:
        psm.update(pid, epoch, first, last, offset, offset + last - first)
    return check


def test_in_sequence_batches_are_appended():
    psm = ProducerStateManager()
    assert append(psm, 1, 0, 0, 9, 0).verdict is Verdict.APPEND
    assert append(psm, 1, 0, 10, 19, 10).verdict is Verdict.APPEND


def test_duplicate_of_cached_batch_returns_original_offset():
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 9, 100)
    append(psm, 1, 0, 10, 19, 110)
    check = psm.check(1, 0, 0, 9)
    assert check.verdict is Verdict.DUPLICATE
    assert check.duplicate_of is not None and check.duplicate_of.first_offset == 100


def test_only_five_batches_are_cached():
    psm = ProducerStateManager()
    for i in range(6):
        append(psm, 1, 0, i * 10, i * 10 + 9, i * 10)
    # The first batch fell out of the cache: its retry is out of order, not a duplicate.
    assert psm.check(1, 0, 0, 9).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    # The second is still remembered.
    assert psm.check(1, 0, 10, 19).verdict is Verdict.DUPLICATE


def test_cache_size_is_a_rule():
    psm = ProducerStateManager(cached_batches=6)
    for i in range(6):
        append(psm, 1, 0, i * 10, i * 10 + 9, i * 10)
    assert psm.check(1, 0, 0, 9).verdict is Verdict.DUPLICATE


def test_partial_overlap_is_not_a_duplicate():
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 9, 0)
    assert psm.check(1, 0, 0, 4).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_gap_is_out_of_order():
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 9, 0)
    assert psm.check(1, 0, 11, 12).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_older_epoch_is_fenced():
    psm = ProducerStateManager()
    append(psm, 1, 3, 0, 0, 0)
    assert psm.check(1, 2, 1, 1).verdict is Verdict.INVALID_PRODUCER_EPOCH


def test_newer_epoch_must_start_at_zero_and_clears_cache():
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 9, 0)
    assert psm.check(1, 1, 10, 19).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert append(psm, 1, 1, 0, 4, 10).verdict is Verdict.APPEND
    # The old epoch's batch is forgotten: resending it is now fenced, not deduplicated.
    assert psm.check(1, 0, 0, 9).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert psm.check(1, 1, 0, 4).verdict is Verdict.DUPLICATE


def test_unknown_producer_accepts_any_sequence_since_kip_360():
    psm = ProducerStateManager()
    assert psm.check(7, 0, 42, 50).verdict is Verdict.APPEND


def test_unknown_producer_rule_switched_off():
    psm = ProducerStateManager(accept_unknown_producer_any_sequence=False)
    assert psm.check(7, 0, 42, 50).verdict is Verdict.UNKNOWN_PRODUCER_ID
    assert psm.check(7, 0, 0, 5).verdict is Verdict.APPEND


def test_sequence_wraps_after_max_int():
    psm = ProducerStateManager()
    append(psm, 1, 0, MAX_SEQUENCE - 1, MAX_SEQUENCE, 0)
    assert psm.check(1, 0, 0, 3).verdict is Verdict.APPEND
    assert psm.check(1, 0, 1, 3).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_non_idempotent_batches_bypass_checks():
    psm = ProducerStateManager()
    for _ in range(3):
        assert append(psm, NO_PRODUCER_ID, -1, -1, -1, 0).verdict is Verdict.APPEND
    assert psm.producers == {}


@pytest.mark.parametrize("epoch", [0, 5])
def test_producers_are_independent(epoch: int):
    psm = ProducerStateManager()
    append(psm, 1, epoch, 0, 9, 0)
    assert psm.check(2, 0, 0, 9).verdict is Verdict.APPEND


# -- markers: ProducerAppendInfo.appendEndTxnMarker and checkSequence after them -----------------
def test_after_a_marker_that_bumps_the_epoch_the_next_batch_must_start_at_zero():
    """ProducerAppendInfo.checkSequence: same epoch, no batch cached (the marker's new epoch
    cleared them) -> the last sequence is NO_SEQUENCE and only 0 follows it
    (ProducerStateManagerTest.testOutOfSequenceAfterControlRecordEpochBump)."""
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 0, 0)
    append(psm, 1, 0, 1, 1, 1)
    assert psm.mark(1, 1, 0) is Verdict.APPEND
    assert psm.check(1, 1, 42, 42).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert psm.check(1, 1, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert psm.check(1, 2, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert append(psm, 1, 1, 0, 0, 3).verdict is Verdict.APPEND


def test_a_marker_with_no_producer_state_still_fences_and_resets_the_sequence():
    """ProducerStateManagerTest.testAppendTxnMarkerWithNoProducerState: the marker alone sets
    the epoch; an older epoch is fenced, sequence 17 is out of order, sequence 0 is accepted."""
    psm = ProducerStateManager()
    assert psm.mark(1, 2, 0) is Verdict.APPEND
    entry = psm.producers[1]
    assert (entry.epoch, entry.last_seq) == (2, -1)
    assert psm.check(1, 0, 0, 0).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert psm.check(1, 2, 17, 17).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert append(psm, 1, 2, 0, 0, 4).verdict is Verdict.APPEND


def test_a_marker_of_the_same_epoch_keeps_the_cached_batches():
    """ProducerStateEntry.maybeUpdateProducerEpoch clears only on a different epoch: after a
    marker of the current epoch (transaction version 1) the sequence continues."""
    psm = ProducerStateManager()
    append(psm, 1, 0, 0, 4, 0)
    assert psm.mark(1, 0, 0) is Verdict.APPEND
    assert psm.check(1, 0, 0, 4).verdict is Verdict.DUPLICATE
    assert psm.check(1, 0, 0, 0).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert psm.check(1, 0, 5, 5).verdict is Verdict.APPEND


def test_markers_check_the_producer_then_the_coordinator_epoch():
    """ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch, then checkCoordinatorEpoch
    (ProducerStateManagerTest.testCoordinatorFencing and testOldEpochForControlRecord)."""
    psm = ProducerStateManager()
    append(psm, 1, 5, 0, 0, 99)
    assert psm.mark(1, 5, 1) is Verdict.APPEND
    assert psm.producers[1].coordinator_epoch == 1
    assert psm.mark(1, 5, 1) is Verdict.APPEND  # the current coordinator epoch
    assert psm.mark(1, 5, 2) is Verdict.APPEND  # a newer one
    assert psm.mark(1, 5, 1) is Verdict.COORDINATOR_FENCED
    assert psm.mark(1, 3, 2) is Verdict.INVALID_PRODUCER_EPOCH
    assert psm.producers[1].coordinator_epoch == 2


def test_a_new_epoch_keeps_the_coordinator_epoch():
    """The coordinator epoch belongs to the producer id: a data batch of a new epoch clears the
    cached batches but keeps it (ProducerStateEntry.maybeUpdateProducerEpoch)."""
    psm = ProducerStateManager()
    assert psm.mark(1, 0, 3) is Verdict.APPEND
    append(psm, 1, 1, 0, 0, 1)
    assert psm.producers[1].coordinator_epoch == 3
    assert psm.mark(1, 1, 2) is Verdict.COORDINATOR_FENCED
