"""PartitionLog.truncate_to: what a follower (or a broker after a power loss) keeps."""

from __future__ import annotations

from eosim.simulation.broker.log import PartitionLog


def log_with_transactions() -> PartitionLog:
    log = PartitionLog("t", 0)
    log.append(1, 0, 0, ("a", "b"), 0.0)  # 0-1 plain
    log.append(7, 0, 0, ("x",), 1.0, transactional=True)  # 2: txn of 7
    log.append_marker(7, 0, "ABORT", 2.0)  # 3: abort marker
    log.append(8, 0, 0, ("y", "z"), 3.0, transactional=True)  # 4-5: txn of 8
    log.append_marker(8, 0, "COMMIT", 4.0)  # 6
    return log


def test_truncation_drops_the_tail_and_keeps_the_head():
    log = log_with_transactions()
    log.truncate_to(4)
    assert log.log_end_offset == 4
    assert [b.base_offset for b in log.batches] == [0, 2, 3]
    assert log.ongoing == {} and [a.producer_id for a in log.aborted] == [7]


def test_a_transaction_whose_marker_is_cut_off_is_open_again():
    log = log_with_transactions()
    log.truncate_to(6)
    assert log.ongoing == {8: 4}
    assert log.last_stable_offset() == 4


def test_an_abort_cut_off_leaves_no_aborted_index_entry():
    log = log_with_transactions()
    log.truncate_to(3)
    assert log.aborted == [] and log.ongoing == {7: 2}


def test_a_batch_holding_the_offset_goes_entirely():
    log = log_with_transactions()
    log.truncate_to(1)  # inside the first batch (0-1)
    assert log.log_end_offset == 0 and log.batches == []


def test_truncating_at_or_past_the_end_changes_nothing():
    log = log_with_transactions()
    log.truncate_to(7)
    log.truncate_to(50)
    assert log.log_end_offset == 7 and len(log.batches) == 5
