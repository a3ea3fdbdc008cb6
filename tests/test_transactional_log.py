"""Transactional logs: markers, the last stable offset, and what consumers are shown."""

from __future__ import annotations

from eosim.simulation.broker.log import PartitionLog
from eosim.simulation.consumer.fetcher import read_committed, read_uncommitted


def txn_log() -> PartitionLog:
    log = PartitionLog("t", 0)
    log.append(-1, -1, -1, ("plain-0",), 0.0)  # offset 0, non-transactional
    log.append(1, 0, 0, ("a-0", "a-1"), 1.0, transactional=True)  # 1-2, txn of producer 1
    log.append(2, 0, 0, ("b-0",), 2.0, transactional=True)  # 3, txn of producer 2
    log.append(1, 0, 2, ("a-2",), 3.0, transactional=True)  # 4
    return log


def test_lso_waits_for_the_earliest_open_transaction():
    log = txn_log()
    assert log.last_stable_offset() == 1
    log.append_marker(2, 0, "COMMIT", 4.0)  # offset 5; producer 1 is still open
    assert log.last_stable_offset() == 1
    log.append_marker(1, 0, "ABORT", 5.0)  # offset 6
    assert log.last_stable_offset() == log.log_end_offset == 7
    # Both transactions are complete, but their markers (5, 6) are at or above a high
    # watermark of 4: they stay unstable until it passes them (ProducerStateManager's
    # unreplicated transactions), so the LSO is the first one's first offset.
    assert log.last_stable_offset(high_watermark=4) == 1
    assert log.last_stable_offset(high_watermark=6) == 1
    assert log.last_stable_offset(high_watermark=7) == 7


def test_read_committed_stops_at_the_lso_then_skips_aborted_records():
    log = txn_log()
    batches, aborted = log.fetch(0, "read_committed")
    assert read_committed(batches, aborted) == ([(0, "plain-0")], 1)
    log.append_marker(1, 0, "ABORT", 5.0)  # offset 5
    log.append_marker(2, 0, "COMMIT", 6.0)  # offset 6
    batches, aborted = log.fetch(0, "read_committed")
    assert [a.producer_id for a in aborted] == [1]
    records, position = read_committed(batches, aborted)
    assert records == [(0, "plain-0"), (3, "b-0")]
    assert position == 7  # moved past both control records


def test_read_uncommitted_sees_everything_but_control_records():
    log = txn_log()
    log.append_marker(1, 0, "ABORT", 5.0)
    records, position = read_uncommitted(log.fetch(0, "read_uncommitted")[0])
    assert [v for _, v in records] == ["plain-0", "a-0", "a-1", "b-0", "a-2"]
    assert position == 6


def test_a_later_transaction_of_an_aborted_producer_is_read():
    log = PartitionLog("t", 0)
    log.append(1, 0, 0, ("x",), 0.0, transactional=True)
    log.append_marker(1, 0, "ABORT", 1.0)
    log.append(1, 1, 0, ("y",), 2.0, transactional=True)
    log.append_marker(1, 1, "COMMIT", 3.0)
    batches, aborted = log.fetch(0, "read_committed")
    assert read_committed(batches, aborted)[0] == [(2, "y")]


def test_history_log_lines_leave_control_records_out():
    log = txn_log()
    log.append_marker(1, 0, "COMMIT", 5.0)
    offsets = [r["offset"] for r in log.records()]
    assert offsets == [0, 1, 2, 3, 4] and 5 not in offsets
