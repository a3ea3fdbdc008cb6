"""Conformance with Kafka's UnifiedLogTest (core, kafka.log): the producer-state, LSO,
aborted-transaction, follower-append and truncation cases.

eosim's ``PartitionLog`` is one replica's log; its LSO takes the high watermark as an argument
(without one, the log end stands for it, as for a log whose HW has passed everything). Appends
"as leader" go through a partition leader (``Broker``) so that sequences and epochs are
checked; appends "as follower" go through ``Partition.append_as_follower``, which validates
nothing and rebuilds producer state from the batches, as UnifiedLog.appendAsFollower does.
"""

from __future__ import annotations

from conformance.cluster import RECOVERY_MS, Cluster
from conformance.not_modelled import not_modelled

from eosim.simulation.broker.log import LogConfig, PartitionLog
from eosim.simulation.broker.log_manager import LogManagerSettings
from eosim.simulation.broker.partition import Partition
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.protocol import Errors
from eosim.simulation.records import NO_SEQUENCE, LogBatch, batch_size

TP = ("test", 0)


def txn(log: PartitionLog, pid: int, n: int, epoch: int = 0) -> int:
    """appendTransactionalAsLeader: n transactional records; their first offset."""
    return log.append(pid, epoch, 0, tuple(f"{pid}-{i}" for i in range(n)), 0.0, True).base_offset


def plain(log: PartitionLog, n: int) -> None:
    """appendNonTransactionalAsLeader."""
    log.append(-1, -1, -1, tuple(f"p{i}" for i in range(n)), 0.0)


# TestUtils.singletonRecords("test"): one record, and its batch's size.
RECORD_SIZE = batch_size(("test",))


def singletons(log: PartitionLog, n: int, timestamp: float | None = None, now: float = 0.0) -> None:
    """``n`` appendAsLeader(singletonRecords("test")), each a batch of one record."""
    for _ in range(n):
        log.append(-1, -1, -1, ("test",), now, timestamp=timestamp)


def segmented(**config: object) -> PartitionLog:
    """A log with the given LogConfig (segment.bytes, retention.ms, ...)."""
    return PartitionLog(*TP, LogConfig(**config))  # type: ignore[arg-type]


def leader_with_log(**config: object) -> Cluster:
    """A leader of TP whose topic has the given LogConfig."""
    return Cluster(
        brokers=1,
        partitions=(TP,),
        topic_logs={TP[0]: LogConfig(**config)},  # type: ignore[arg-type]
        transaction_partition_verification=False,
        transaction_version=1,
    )


def leader() -> Cluster:
    # Appends go straight to the log, as in the Kafka test: no coordinator adds the partition
    # (under transaction version 1 that is the client's business, and it is not here).
    return Cluster(
        brokers=1, partitions=(TP,), transaction_partition_verification=False, transaction_version=1
    )


def test_fetch_up_to_last_stable_offset():
    """UnifiedLogTest.testFetchUpToLastStableOffset: read_committed fetches return data below
    the LSO and nothing at or above it."""
    log = PartitionLog(*TP)
    txn(log, 1, 5)
    plain(log, 3)
    txn(log, 2, 2)
    txn(log, 1, 4)
    plain(log, 2)
    txn(log, 1, 10)

    def assert_lso_bounded_fetches() -> None:
        lso = log.last_stable_offset()
        for offset in range(lso):
            assert log.fetch(offset, "read_committed")[0], offset
        for offset in range(lso, log.log_end_offset + 1):
            assert log.fetch(offset, "read_committed")[0] == [], offset

    assert log.last_stable_offset() == 0
    assert_lso_bounded_fetches()
    log.append_marker(1, 0, "COMMIT", 1.0)
    assert log.last_stable_offset() == 8
    assert_lso_bounded_fetches()
    log.append_marker(2, 0, "ABORT", 2.0)
    assert log.last_stable_offset() == log.log_end_offset
    assert_lso_bounded_fetches()


def test_rebuild_transactional_state():
    """UnifiedLogTest.testRebuildTransactionalState: an aborted transaction stays closed after
    an unclean restart."""
    cl = leader()
    assert cl.produce(TP, 137, 5, 0, 3, transactional=True).error is Errors.NONE
    assert cl.marker(TP, 137, 5, False) is Errors.NONE
    broker = cl.leader(TP)
    assert broker.logs[TP].last_stable_offset() == broker.logs[TP].log_end_offset
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert broker.logs[TP].last_stable_offset() == broker.logs[TP].log_end_offset


def test_duplicate_appends():
    """UnifiedLogTest.testDuplicateAppends."""
    cl = leader()
    for seq in range(6):
        assert cl.produce(TP, 1, 0, seq).base_offset == seq
    multi = cl.produce(TP, 1, 0, 6, count=3)
    assert (multi.error, multi.base_offset) == (Errors.NONE, 6)
    assert cl.produce(TP, 1, 0, 6, count=3).base_offset == 6  # duplicate of the tail
    partial = cl.produce(TP, 1, 0, 7, count=2)
    assert partial.error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    fourth = cl.produce(TP, 1, 0, 2)  # 4th from the tail: still cached
    assert (fourth.error, fourth.base_offset) == (Errors.NONE, 2)
    assert cl.produce(TP, 1, 0, 1).error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    original = cl.produce(TP, 1, 0, 9)
    again = cl.produce(TP, 1, 0, 9)
    assert (original.error, again.error) == (Errors.NONE, Errors.NONE)
    assert original.base_offset == again.base_offset == 9
    assert cl.leader(TP).logs[TP].log_end_offset == 10


def test_old_producer_epoch():
    """UnifiedLogTest.testOldProducerEpoch."""
    cl = leader()
    assert cl.produce(TP, 1, 1, 0).error is Errors.NONE
    assert cl.produce(TP, 1, 0, 0).error is Errors.INVALID_PRODUCER_EPOCH


def test_first_unstable_offset_no_transactional_data():
    """UnifiedLogTest.testFirstUnstableOffsetNoTransactionalData."""
    log = PartitionLog(*TP)
    plain(log, 3)
    assert log.ongoing == {} and log.last_stable_offset() == log.log_end_offset


def test_first_unstable_offset_with_transactional_data():
    """UnifiedLogTest.testFirstUnstableOffsetWithTransactionalData."""
    log = PartitionLog(*TP)
    first = log.append(137, 5, 0, ("foo", "bar", "baz"), 0.0, True).base_offset
    assert log.last_stable_offset() == first
    log.append(137, 5, 3, ("blah",), 0.0, True)
    assert log.last_stable_offset() == first
    log.append_marker(137, 5, "COMMIT", 1.0)
    assert log.ongoing == {} and log.last_stable_offset() == log.log_end_offset


def test_read_committed_with_concurrent_high_watermark_updates():
    """UnifiedLogTest.testReadCommittedWithConcurrentHighWatermarkUpdates (one thread): a
    read_committed read of a transaction not yet aborted returns nothing."""
    log = PartitionLog(*TP)
    non_empty = 0
    while log.log_end_offset < 50:
        end = log.log_end_offset
        txn(log, 15, 1)
        non_empty += bool(log.fetch(end, "read_committed")[0])
        log.append_marker(15, 0, "ABORT", 0.0)
    assert non_empty == 0


def test_transaction_index_updated():
    """UnifiedLogTest.testTransactionIndexUpdated: the aborted transactions and the first
    unstable offset as the transactions end."""
    log = PartitionLog(*TP)
    txn(log, 1, 5)  # 0-4
    plain(log, 3)  # 5-7
    txn(log, 2, 2)  # 8-9
    txn(log, 1, 4)  # 10-13
    txn(log, 3, 3)  # 14-16
    plain(log, 2)  # 17-18
    txn(log, 1, 10)  # 19-28
    log.append_marker(1, 0, "ABORT", 0.0)  # 29
    assert log.last_stable_offset() == 8
    txn(log, 2, 6)  # 30-35
    txn(log, 4, 3)  # 36-38
    plain(log, 10)  # 39-48
    txn(log, 3, 9)  # 49-57
    log.append_marker(3, 0, "COMMIT", 0.0)  # 58
    txn(log, 4, 8)  # 59-66
    txn(log, 2, 7)  # 67-73
    log.append_marker(2, 0, "ABORT", 0.0)  # 74
    assert log.last_stable_offset() == 36
    plain(log, 10)  # 75-84
    txn(log, 4, 4)  # 85-88
    log.append_marker(4, 0, "COMMIT", 0.0)  # 89
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted] == [
        (1, 0, 29),
        (2, 8, 74),
    ]
    assert log.last_stable_offset() == log.log_end_offset == 90


def test_zombie_coordinator_fenced():
    """UnifiedLogTest.testZombieCoordinatorFenced."""
    cl = leader()
    assert cl.produce(TP, 1, 0, 0, 10, transactional=True).error is Errors.NONE
    assert cl.marker(TP, 1, 0, False, coordinator_epoch=1) is Errors.NONE
    assert cl.produce(TP, 1, 0, 10, 5, transactional=True).error is Errors.NONE
    assert cl.marker(TP, 1, 0, True, coordinator_epoch=2) is Errors.NONE
    assert cl.marker(TP, 1, 0, False, coordinator_epoch=1) is Errors.TRANSACTION_COORDINATOR_FENCED


def test_zombie_coordinator_fenced_empty_transaction():
    """UnifiedLogTest.testZombieCoordinatorFencedEmptyTransaction: markers of empty transactions
    update and check the coordinator epoch too."""
    cl = leader()
    assert cl.produce(TP, 1, 0, 0, 10, transactional=True).error is Errors.NONE
    assert cl.marker(TP, 1, 0, True) is Errors.NONE
    assert cl.marker(TP, 1, 0, False, coordinator_epoch=2) is Errors.NONE
    assert cl.marker(TP, 1, 0, False, coordinator_epoch=2) is Errors.NONE
    assert cl.marker(TP, 1, 0, False, coordinator_epoch=1) is Errors.TRANSACTION_COORDINATOR_FENCED


def test_end_txn_with_fenced_producer_epoch():
    """UnifiedLogTest.testEndTxnWithFencedProducerEpoch."""
    cl = leader()
    assert cl.marker(TP, 1, 5, False, coordinator_epoch=1) is Errors.NONE
    assert cl.marker(TP, 1, 4, False, coordinator_epoch=1) is Errors.INVALID_PRODUCER_EPOCH


def test_last_stable_offset_with_mixed_producer_data():
    """UnifiedLogTest.testLastStableOffsetWithMixedProducerData."""
    log = PartitionLog(*TP)
    first = log.append(137, 5, 0, ("a", "b", "c"), 0.0, True).base_offset
    assert log.last_stable_offset() == first
    plain(log, 3)
    second = log.append(983, 5, 0, ("d", "e", "f"), 0.0, True).base_offset
    assert log.last_stable_offset() == first
    log.append_marker(137, 5, "ABORT", 0.0)
    assert log.last_stable_offset() == second
    log.append_marker(983, 5, "COMMIT", 0.0)
    assert log.last_stable_offset() == log.log_end_offset


def test_aborted_transaction_spanning_multiple_segments():
    """UnifiedLogTest.testAbortedTransactionSpanningMultipleSegments: a read_committed fetch
    from 0 lists the aborted transaction with its first offset."""
    log = PartitionLog(*TP)
    first = log.append(137, 5, 0, ("a", "b", "c"), 0.0, True).base_offset
    log.roll()
    log.append(137, 5, 3, ("d", "e", "f"), 0.0, True)
    assert log.last_stable_offset() == first
    log.append_marker(137, 5, "ABORT", 0.0)
    assert log.last_stable_offset() == log.log_end_offset
    _batches, aborted = log.fetch(0, "read_committed")
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(137, 0)]


def test_allow_non_zero_sequence_on_first_append_non_zero_epoch():
    """UnifiedLogTest.testAllowNonZeroSequenceOnFirstAppendNonZeroEpoch: a producer the partition
    has never seen may start at any sequence (KIP-360)."""
    cl = leader()
    assert cl.produce(TP, 23, 1, 3, 2, transactional=True).error is Errors.NONE


def follower() -> Partition:
    return Partition(TP, "broker-1", ProducerStateManager())


def data(offset: int, pid: int, seq: int, n: int = 1, *, txn: bool = False) -> LogBatch:
    """A batch as a leader wrote it (offsets assigned), for a follower to append."""
    values = tuple(f"{pid}@{offset + i}" for i in range(n))
    return LogBatch(offset, pid, 0, seq, values, 0.0, txn)


def plain_data(offset: int, n: int) -> LogBatch:
    return LogBatch(offset, -1, -1, NO_SEQUENCE, tuple(f"p@{offset + i}" for i in range(n)), 0.0)


def marker(offset: int, pid: int, control: str) -> LogBatch:
    return LogBatch(offset, pid, 0, NO_SEQUENCE, ("",), 0.0, True, control)  # type: ignore[arg-type]


def test_duplicate_append_to_follower():
    """UnifiedLogTest.testDuplicateAppendToFollower: a follower validates no sequence; a batch
    repeating the last one's sequences at new offsets is appended."""
    part = follower()
    part.append_as_follower([data(0, 1, 0, 2)], 0, 0.0)
    part.append_as_follower([data(2, 1, 0, 2)], 0, 0.0)
    assert part.log_end_offset == 4


def test_multiple_producer_ids_per_memory_record():
    """UnifiedLogTest.testMultipleProducerIdsPerMemoryRecord: one fetch carrying batches of
    four producers is appended as it is: producer ids, offsets and sequences kept."""
    part = follower()
    sent = [data(i, pid, 0) for i, pid in enumerate((1, 2, 3, 4))]
    part.append_as_follower(sent, 0, 0.0)
    got = part.log.fetch(0, "replica")[0]
    assert [(b.producer_id, b.base_offset, b.base_sequence) for b in got] == [
        (b.producer_id, b.base_offset, b.base_sequence) for b in sent
    ]


def test_multiple_producers_with_duplicates_in_single_append():
    """UnifiedLogTest.testMultipleProducersWithDuplicatesInSingleAppend: batches of two
    producers, the last a duplicate of pid 1's sequence 1, are all appended by a follower."""
    part = follower()
    batches = [data(0, 1, 0), data(1, 2, 0), data(2, 1, 1), data(3, 2, 1), data(4, 1, 1)]
    part.append_as_follower(batches, 0, 0.0)
    assert part.log_end_offset == 5


def test_transaction_index_updated_through_replication():
    """UnifiedLogTest.testTransactionIndexUpdatedThroughReplication: transactions of four
    producers replicated in one append; the aborted index is built from the markers, and the
    first unstable offset follows the high watermark: a completed transaction stays unstable
    until the high watermark passes its marker."""
    part = follower()
    batches = [
        data(0, 1, 0, 5, txn=True),
        plain_data(5, 3),
        data(8, 2, 0, 2, txn=True),
        data(10, 1, 5, 4, txn=True),
        data(14, 3, 0, 3, txn=True),
        plain_data(17, 2),
        data(19, 1, 9, 10, txn=True),
        marker(29, 1, "ABORT"),
        data(30, 2, 2, 6, txn=True),
        data(36, 4, 0, 3, txn=True),
        plain_data(39, 10),
        data(49, 3, 3, 9, txn=True),
        marker(58, 3, "COMMIT"),
        data(59, 4, 3, 8, txn=True),
        data(67, 2, 8, 7, txn=True),
        marker(74, 2, "ABORT"),
        plain_data(75, 10),
        data(85, 4, 11, 4, txn=True),
        marker(89, 4, "COMMIT"),
    ]
    part.append_as_follower(batches, 0, 0.0)
    log = part.log
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted] == [
        (1, 0, 29),
        (2, 8, 74),
    ]
    assert log.last_stable_offset(30) == 8
    assert log.last_stable_offset(75) == 36
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset


def test_truncate_below_first_unstable_offset():
    """UnifiedLogTest.testTruncateBelowFirstUnstableOffset: truncating below an open
    transaction's first offset leaves no unstable offset and no active producer."""
    part = follower()
    part.append_as_follower([plain_data(0, 3), data(3, 17, 0, 2, txn=True)], 0, 0.0)
    assert part.log.last_stable_offset(part.log_end_offset) == 3
    part.truncate_to(0, ProducerStateManager())
    assert part.log.last_stable_offset(part.log_end_offset) == 0 == part.log_end_offset
    assert part.log.ongoing == {}
    assert part.producer_state.producers == {}


def test_producer_id_map_truncate_to():
    """UnifiedLogTest.testProducerIdMapTruncateTo: each truncation rebuilds the producer state
    to its offset and writes a snapshot there (UnifiedLog.rebuildProducerState), deleting those
    above it; a producer whose only batch was cut is forgotten. (Kafka's test takes two
    snapshots by hand first, at 2 and 3; eosim takes them only where Kafka's log does.)"""
    part = follower()
    part.append_as_follower([data(0, 1, 0), data(1, 2, 0), data(2, 3, 0)], 0, 0.0)
    part.truncate_to(2, ProducerStateManager())
    assert sorted(part.producer_state.producers) == [1, 2]
    assert part.log.latest_snapshot(part.log_end_offset) == 2
    part.truncate_to(1, ProducerStateManager())
    assert sorted(part.producer_state.producers) == [1]
    assert part.log.latest_snapshot(part.log_end_offset) == 1
    part.truncate_to(0, ProducerStateManager())
    assert part.producer_state.producers == {}
    assert part.log.latest_snapshot(part.log_end_offset) is None


# -- retention, the log start offset and producer-id expiry ---------------------------------
def test_producer_id_expiration_on_segment_deletion():
    """UnifiedLogTest.testProducerIdExpirationOnSegmentDeletion: retention deletes the segment
    of the only batch of producer 1, and both producers are still known (KAFKA-7190: producer
    state outlives the records)."""
    size = batch_size(("foo",))
    log = segmented(segment_bytes=size, retention_bytes=size * 2)
    psm = ProducerStateManager()
    for pid, seq, value in ((1, 0, "foo"), (2, 0, "bar"), (2, 1, "baz")):
        batch = log.append(pid, 0, seq, (value,), 0.0)
        psm.load((batch,))
    assert log.size == 3 * size  # segment.bytes is one batch: each batch has its own segment
    assert log.number_of_segments == 3
    assert log.delete_old_segments(0.0, log.log_end_offset, psm) == 1
    assert log.number_of_segments == 2 and log.log_start_offset == 1
    assert set(psm.producers) == {1, 2}
    assert set(log.rebuild_producer_state(ProducerStateManager()).producers) == {1, 2}


def test_periodic_producer_id_expiration():
    """UnifiedLogTest.testPeriodicProducerIdExpiration: producer.id.expiration.ms 200, checked
    every 100 ms: still there after the first check, gone after the second."""
    cl = Cluster(
        brokers=1,
        partitions=(TP,),
        log=LogManagerSettings(
            producer_id_expiration_ms=200, producer_id_expiration_check_interval_ms=100
        ),
        transaction_partition_verification=False,
        transaction_version=1,
    )
    broker = cl.leader(TP)
    cl.run(101 - cl.env.now)
    # A record stamped at the check at 100 ms (Kafka's test appends at the mock clock's now).
    assert cl.produce(TP, 23, 0, 0, timestamp=100.0).error is Errors.NONE
    cl.run(250 - cl.env.now)  # the check at 200 ms: 100 ms old
    assert set(broker.producer_state[TP].producers) == {23}
    cl.run(100)  # the check at 300 ms: 200 ms old
    assert set(broker.producer_state[TP].producers) == set()


def test_last_stable_offset_does_not_exceed_log_start_offset_mid_segment():
    """UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment."""
    log = segmented(segment_bytes=5 * 1024 * 1024)
    txn(log, 1, 5)
    plain(log, 3)
    assert log.log_end_offset == 8
    log.roll()
    assert log.number_of_segments == 2
    txn(log, 1, 5)
    assert log.last_stable_offset() == 0
    assert log.increment_log_start_offset(5, ProducerStateManager())
    assert log.last_stable_offset() == 5  # the first unstable offset, bounded by the log start


def test_last_stable_offset_does_not_exceed_log_start_offset_after_segment_deletion():
    """UnifiedLogTest.testLastStableOffsetDoesNotExceedLogStartOffsetAfterSegmentDeletion."""
    log = segmented(segment_bytes=5 * 1024 * 1024)
    txn(log, 1, 5)
    plain(log, 3)
    log.roll()
    txn(log, 1, 5)
    assert log.last_stable_offset() == 0
    psm = ProducerStateManager()
    assert log.increment_log_start_offset(8, psm)
    log.delete_old_segments(0.0, log.log_end_offset, psm)
    assert log.number_of_segments == 1
    assert log.last_stable_offset() == 8


def test_log_deletion_after_delete_records():
    """UnifiedLogTest.testLogDeletionAfterDeleteRecords: a segment goes once the log start has
    passed the whole of it."""
    log = segmented(segment_bytes=RECORD_SIZE * 5)
    singletons(log, 15)
    assert log.number_of_segments == 3 and log.log_start_offset == 0
    psm = ProducerStateManager()
    for start, segments in ((1, 3), (6, 2), (15, 1)):
        log.increment_log_start_offset(start, psm)
        log.delete_old_segments(0.0, log.log_end_offset, psm)
        assert (log.number_of_segments, log.log_start_offset) == (segments, start)


def test_should_delete_size_based_segments():
    """UnifiedLogTest.shouldDeleteSizeBasedSegments."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_bytes=RECORD_SIZE * 10)
    singletons(log, 15)
    log.delete_old_segments(0.0, log.log_end_offset, ProducerStateManager())
    assert log.number_of_segments == 2


def test_should_not_delete_size_based_segments_when_under_retention_size():
    """UnifiedLogTest.shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_bytes=RECORD_SIZE * 15)
    singletons(log, 15)
    log.delete_old_segments(0.0, log.log_end_offset, ProducerStateManager())
    assert log.number_of_segments == 3


def test_should_delete_time_based_segments_ready_to_be_deleted():
    """UnifiedLogTest.shouldDeleteTimeBasedSegmentsReadyToBeDeleted: every segment is older
    than retention.ms, the active one included; an empty one is rolled in its place."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_ms=10_000)
    singletons(log, 15, timestamp=10)
    now = 1_000_000.0
    assert log.delete_old_segments(now, log.log_end_offset, ProducerStateManager()) == 3
    assert log.number_of_segments == 1 and log.log_start_offset == log.log_end_offset == 15


def test_should_not_delete_time_based_segments_when_none_ready_to_be_deleted():
    """UnifiedLogTest.shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_ms=10_000_000)
    now = 1_000_000.0
    singletons(log, 15, timestamp=now)
    log.delete_old_segments(now, log.log_end_offset, ProducerStateManager())
    assert log.number_of_segments == 3


def test_should_not_delete_segments_when_policy_does_not_include_delete():
    """UnifiedLogTest.shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete (a compacted log:
    the internal topics)."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_ms=10_000, delete=False)
    singletons(log, 15, timestamp=10)
    log.delete_old_segments(30_000.0, log.log_end_offset, ProducerStateManager())
    assert log.number_of_segments == 3


def test_should_delete_start_offset_breached_segments_when_policy_does_not_include_delete():
    """UnifiedLogTest.shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete."""
    log = segmented(segment_bytes=RECORD_SIZE * 5, retention_ms=10_000, delete=False)
    singletons(log, 15, timestamp=10)
    psm = ProducerStateManager()
    log.delete_old_segments(0.0, log.log_end_offset, psm)
    assert log.number_of_segments == 3
    log.increment_log_start_offset(5, psm)
    log.delete_old_segments(30_000.0, log.log_end_offset, psm)
    assert log.number_of_segments == 2
    assert log.segments[0].base_offset <= log.log_start_offset
    assert all(s.base_offset > log.log_start_offset for s in log.segments[1:])


def test_retention_idempotency():
    """UnifiedLogTest.testRetentionIdempotency: once the log start has passed the first
    segment, time-based retention is unblocked for the next (a younger first segment stops it
    otherwise); a second pass deletes nothing."""
    log = segmented(retention_ms=900)
    log.append(-1, -1, -1, ("a",), 0.0, timestamp=100.0)
    log.roll()
    log.append(-1, -1, -1, ("b",), 0.0, timestamp=0.0)
    log.roll()
    log.append(-1, -1, -1, ("c",), 0.0, timestamp=100.0)
    now = 901.0
    psm = ProducerStateManager()
    log.increment_log_start_offset(1, psm)
    assert log.delete_old_segments(now, log.log_end_offset, psm) == 2
    assert log.delete_old_segments(now, log.log_end_offset, psm) == 0


def test_cannot_delete_segments_at_or_above_high_watermark():
    """UnifiedLogTest.testCannotDeleteSegmentsAtOrAboveHighWatermark: retention never moves
    the log start past the high watermark."""
    log = segmented(segment_bytes=512, retention_ms=999)
    for i in range(100):
        log.append(-1, -1, -1, (f"test{i}",), 1000.0, timestamp=0.0)
    psm = ProducerStateManager()
    log.delete_old_segments(1000.0, 0, psm)
    assert log.number_of_segments > 5
    assert (log.log_start_offset, log.log_end_offset) == (0, 100)
    for hw in range(101):
        log.delete_old_segments(1000.0, hw, psm)
        assert log.log_start_offset <= hw
        first, *rest = log.segments
        assert log.log_start_offset <= first.base_offset <= hw
        assert all(s.base_offset > hw for s in rest)
    assert log.log_start_offset == 100
    assert log.number_of_segments == 1 and log.segments[0].size == 0


def test_segment_deletion_with_high_watermark_initialization():
    """UnifiedLogTest.testSegmentDeletionWithHighWatermarkInitialization."""
    log = segmented(segment_bytes=512, retention_ms=999)
    for i in range(100):
        log.append(-1, -1, -1, (f"test{i}",), 1000.0, timestamp=0.0)
    psm = ProducerStateManager()
    initial = log.number_of_segments
    log.delete_old_segments(1000.0, 25, psm)
    assert log.number_of_segments < initial
    assert log.log_start_offset <= 25


def test_cannot_increment_log_start_offset_past_high_watermark():
    """UnifiedLogTest.testCannotIncrementLogStartOffsetPastHighWatermark, through DeleteRecords:
    an offset above the high watermark is OFFSET_OUT_OF_RANGE, and nothing moves."""
    cl = leader()
    for seq in range(100):
        assert cl.produce(TP, 1, 0, seq).error is Errors.NONE
    broker = cl.leader(TP)
    hw = broker.partitions[TP].high_watermark
    assert hw == 100
    assert broker.log_manager.delete_records(TP, hw + 1) is Errors.OFFSET_OUT_OF_RANGE
    assert broker.logs[TP].log_start_offset == 0
    assert broker.log_manager.delete_records(TP, 25) is Errors.NONE
    assert broker.logs[TP].log_start_offset == 25


def test_should_truncate_leader_epochs_when_deleting_segments():
    """UnifiedLogTest.shouldTruncateLeaderEpochsWhenDeletingSegments: the epochs of a deleted
    segment leave the leader-epoch cache."""
    cl = leader_with_log(segment_bytes=RECORD_SIZE * 5, retention_bytes=RECORD_SIZE * 10)
    broker = cl.leader(TP)
    part = broker.partitions[TP]
    for seq in range(15):
        assert cl.produce(TP, 1, 0, seq, count=1, value="test").error is Errors.NONE
    part.epoch_cache.epochs, part.epoch_cache.start_offsets = [0, 1, 2], [0, 5, 10]
    broker.log_manager.cleanup_logs()
    assert (part.epoch_cache.epochs, part.epoch_cache.start_offsets) == ([1, 2], [5, 10])


def test_should_update_offset_for_leader_epochs_when_deleting_segments():
    """UnifiedLogTest.shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments: the first epoch
    left now starts at the log start."""
    cl = leader_with_log(segment_bytes=RECORD_SIZE * 5, retention_bytes=RECORD_SIZE * 10)
    broker = cl.leader(TP)
    part = broker.partitions[TP]
    for seq in range(15):
        assert cl.produce(TP, 1, 0, seq, count=1, value="test").error is Errors.NONE
    part.epoch_cache.epochs, part.epoch_cache.start_offsets = [0, 1, 2], [0, 7, 10]
    broker.log_manager.cleanup_logs()
    assert (part.epoch_cache.epochs, part.epoch_cache.start_offsets) == ([0, 1, 2], [5, 7, 10])


def test_read_out_of_range():
    """UnifiedLogTest.testReadOutOfRange, through a leader's fetch: a read below the log start
    (after DeleteRecords) or beyond the log end is OFFSET_OUT_OF_RANGE; one at the log start
    reads."""
    cl = leader()
    for seq in range(10):
        cl.produce(TP, 1, 0, seq)
    broker = cl.leader(TP)
    assert broker.log_manager.delete_records(TP, 4) is Errors.NONE
    assert cl.fetch(TP, 3).error is Errors.OFFSET_OUT_OF_RANGE
    assert cl.fetch(TP, 11).error is Errors.OFFSET_OUT_OF_RANGE
    read = cl.fetch(TP, 4)
    assert read.error is Errors.NONE and read.batches[0].base_offset == 4


NOT_MODELLED = {
    "testRebuildProducerIdMapWithCompactedData": "no compaction",
}


test_not_modelled = not_modelled("UnifiedLogTest", NOT_MODELLED)
