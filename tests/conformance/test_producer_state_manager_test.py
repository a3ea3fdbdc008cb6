"""Conformance with Kafka's ProducerStateManagerTest (storage module).

Each test restates one of Kafka's cases against eosim's ``ProducerStateManager`` (the per
partition producer state), ``PartitionLog`` (open transactions, LSO, aborted index) or a
partition leader (``Broker``). Kafka's ``appendClientEntry`` is ``check`` then ``update``;
its replication path (no validation) is ``update`` alone, which is also how a restarted eosim
broker replays the batches after its producer snapshot. eosim's snapshots are offsets its logs
keep (segment rolls, truncations, recoveries) and what each holds is worked out from the log when
it is loaded (``PartitionLog.rebuild_producer_state``), so the cases about snapshot files are
skipped. The duplicate check Kafka performs in ``UnifiedLog`` is part of eosim's
``check`` (a DUPLICATE verdict).
"""

from __future__ import annotations

from conformance.cluster import RECOVERY_MS, Cluster
from conformance.not_modelled import not_modelled

from eosim.simulation.broker.log import LogBatch, LogConfig, PartitionLog
from eosim.simulation.broker.log_manager import LogManagerSettings
from eosim.simulation.broker.producer_state import ProducerStateManager, Verdict
from eosim.simulation.coordinator.group_coordinator import GroupCoordinator, OffsetStore
from eosim.simulation.protocol import MAX_SEQUENCE, NO_SEQUENCE, Errors

PID = 1
TP = ("test", 0)
# PRODUCER_ID_EXPIRATION_MS_DEFAULT, the expiration Kafka's test runs with: one day.
EXPIRATION_MS = 86_400_000.0


def client_append(
    psm: ProducerStateManager, pid: int, epoch: int, seq: int, offset: int, timestamp: float = 0.0
):
    """Kafka's appendClientEntry for a one-record batch: validate, then record."""
    verdict = psm.check(pid, epoch, seq, seq).verdict
    if verdict is Verdict.APPEND:
        psm.update(pid, epoch, seq, seq, offset, offset, timestamp)
    return verdict


def leader() -> Cluster:
    # Appends go straight to the log, as in the Kafka test: no coordinator adds the partition
    # (under transaction version 1 that is the client's business, and it is not here).
    return Cluster(
        brokers=1, partitions=(TP,), transaction_partition_verification=False, transaction_version=1
    )


def leader_with_logs(producer_id_expiration_ms: float, check_ms: float) -> Cluster:
    """A leader whose producer ids expire after ``producer_id_expiration_ms``, checked every
    ``check_ms``."""
    return Cluster(
        brokers=1,
        partitions=(TP,),
        log=LogManagerSettings(
            producer_id_expiration_ms=producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms=check_ms,
        ),
        topic_logs={TP[0]: LogConfig()},
        transaction_partition_verification=False,
        transaction_version=1,
    )


def test_basic_id_mapping():
    """ProducerStateManagerTest.testBasicIdMapping."""
    psm = ProducerStateManager()
    assert client_append(psm, PID, 0, 0, 0) is Verdict.APPEND
    assert client_append(psm, PID, 0, 1, 1) is Verdict.APPEND
    # Kafka's ProducerStateManager alone calls the repeat out of order; the log's duplicate
    # check in front of it (UnifiedLogTest.testDuplicateAppends) answers it as a duplicate.
    assert psm.check(PID, 0, 1, 1).verdict is Verdict.DUPLICATE
    assert psm.check(PID, 0, 5, 5).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert client_append(psm, PID, 1, 0, 3) is Verdict.APPEND
    assert psm.check(PID, 0, 0, 0).verdict is Verdict.INVALID_PRODUCER_EPOCH


def test_append_txn_marker_with_no_producer_state():
    """ProducerStateManagerTest.testAppendTxnMarkerWithNoProducerState."""
    psm = ProducerStateManager()
    assert psm.mark(PID, 2, 0) is Verdict.APPEND
    entry = psm.producers[PID]
    assert (entry.producer_id, entry.epoch, entry.last_seq) == (PID, 2, NO_SEQUENCE)
    assert psm.check(PID, 0, 0, 0).verdict is Verdict.INVALID_PRODUCER_EPOCH
    assert psm.check(PID, 2, 17, 17).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert client_append(psm, PID, 2, 0, 39) is Verdict.APPEND
    assert (psm.producers[PID].epoch, psm.producers[PID].last_seq) == (2, 0)


def test_producer_sequence_wrap_around():
    """ProducerStateManagerTest.testProducerSequenceWrapAround."""
    psm = ProducerStateManager()
    psm.update(PID, 15, MAX_SEQUENCE, MAX_SEQUENCE, 735, 735)  # replication: not validated
    assert client_append(psm, PID, 15, 0, 1235) is Verdict.APPEND
    entry = psm.producers[PID]
    assert (entry.epoch, entry.first_seq, entry.last_seq) == (15, MAX_SEQUENCE, 0)


def test_producer_sequence_with_wrap_around_batch_record():
    """ProducerStateManagerTest.testProducerSequenceWithWrapAroundBatchRecord: one batch whose
    sequences wrap past 2147483647."""
    psm = ProducerStateManager()
    first, last = MAX_SEQUENCE - 10, 9
    psm.update(PID, 15, first, last, 2000, 2020)
    entry = psm.producers[PID]
    assert (entry.first_seq, entry.last_seq) == (first, last)
    assert (entry.batches[0].first_offset, entry.batches[-1].last_offset) == (2000, 2020)
    batch = LogBatch(2000, PID, 15, first, tuple(str(i) for i in range(21)), 0.0)
    assert batch.last_sequence == last


def test_producer_sequence_invalid_wrap_around():
    """ProducerStateManagerTest.testProducerSequenceInvalidWrapAround."""
    psm = ProducerStateManager()
    psm.update(PID, 15, MAX_SEQUENCE, MAX_SEQUENCE, 735, 735)
    assert psm.check(PID, 15, 1, 1).verdict is Verdict.OUT_OF_ORDER_SEQUENCE


def test_no_validation_on_first_entry_when_loading_log():
    """ProducerStateManagerTest.testNoValidationOnFirstEntryWhenLoadingLog: replaying the log
    (eosim: a broker restart) records sequence 16 as it is."""
    psm = ProducerStateManager()
    psm.update(PID, 5, 16, 16, 735, 735)
    entry = psm.producers[PID]
    assert (entry.epoch, entry.first_seq, entry.last_seq) == (5, 16, 16)
    assert (entry.batches[0].first_offset, entry.batches[0].last_offset) == (735, 735)


def test_control_record_bumps_producer_epoch():
    """ProducerStateManagerTest.testControlRecordBumpsProducerEpoch."""
    psm = ProducerStateManager()
    log = PartitionLog(*TP)
    log.append(PID, 0, 0, ("a",), 0.0, transactional=True)
    client_append(psm, PID, 0, 0, 0)
    assert psm.mark(PID, 1, 0) is Verdict.APPEND
    log.append_marker(PID, 1, "ABORT", 1.0)
    entry = psm.producers[PID]
    assert (entry.epoch, entry.first_seq, entry.last_seq) == (1, NO_SEQUENCE, NO_SEQUENCE)
    assert PID not in log.ongoing
    assert client_append(psm, PID, 1, 0, 2) is Verdict.APPEND
    assert psm.producers[PID].first_seq == 0


def test_txn_first_offset_metadata_cached():
    """ProducerStateManagerTest.testTxnFirstOffsetMetadataCached: the first unstable offset is
    the first offset of the producer's first transactional append."""
    log = PartitionLog(*TP)
    log.append(-1, -1, -1, tuple("x" * 7), 0.0)
    batch = log.append(PID, 0, 0, ("t",), 1.0, transactional=True)
    assert log.ongoing[PID] == batch.base_offset == 7
    assert log.last_stable_offset() == 7


def test_prepare_update_does_not_mutate():
    """ProducerStateManagerTest.testPrepareUpdateDoesNotMutate: validating a batch changes
    nothing until it is recorded."""
    psm = ProducerStateManager()
    assert psm.check(PID, 0, 0, 5).verdict is Verdict.APPEND
    assert PID not in psm.producers
    psm.update(PID, 0, 0, 5, 15, 20)
    assert psm.check(PID, 0, 6, 10).verdict is Verdict.APPEND
    entry = psm.producers[PID]
    assert (entry.first_seq, entry.last_seq, entry.batches[-1].last_offset) == (0, 5, 20)
    psm.update(PID, 0, 6, 10, 26, 30)
    assert (entry.first_seq, entry.last_seq, entry.batches[-1].last_offset) == (0, 10, 30)


def test_update_producer_transaction_state():
    """ProducerStateManagerTest.updateProducerTransactionState: a COMMIT marker of the same
    epoch closes the transaction but leaves the cached batches as they were."""
    psm = ProducerStateManager()
    log = PartitionLog(*TP)
    psm.update(PID, 0, 0, 0, 9, 9)
    first = log.append(PID, 0, 1, tuple("abcde"), 1.0, transactional=True)
    psm.update(PID, 0, 1, 5, first.base_offset, first.last_offset)
    second = log.append(PID, 0, 6, tuple("fghij"), 2.0, transactional=True)
    psm.update(PID, 0, 6, 10, second.base_offset, second.last_offset)
    assert log.ongoing[PID] == first.base_offset
    assert psm.mark(PID, 0, 15) is Verdict.APPEND
    marker = log.append_marker(PID, 0, "COMMIT", 3.0, 15)
    entry = psm.producers[PID]
    assert (entry.first_seq, entry.last_seq) == (0, 10)
    assert entry.batches[-1].last_offset == second.last_offset
    assert PID not in log.ongoing and log.aborted == []
    assert marker.base_offset == second.last_offset + 1


def test_out_of_sequence_after_control_record_epoch_bump():
    """ProducerStateManagerTest.testOutOfSequenceAfterControlRecordEpochBump."""
    psm = ProducerStateManager()
    client_append(psm, PID, 0, 0, 0)
    client_append(psm, PID, 0, 1, 1)
    assert psm.mark(PID, 1, 0) is Verdict.APPEND
    assert psm.check(PID, 1, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert psm.check(PID, 2, 2, 2).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert client_append(psm, PID, 1, 0, 0) is Verdict.APPEND
    assert (psm.producers[PID].epoch, psm.producers[PID].last_seq) == (1, 0)


def test_non_transactional_append_with_ongoing_transaction():
    """ProducerStateManagerTest.testNonTransactionalAppendWithOngoingTransaction."""
    cl = leader()
    assert cl.produce(TP, PID, 0, 0, transactional=True).error is Errors.NONE
    assert cl.produce(TP, PID, 0, 1).error is Errors.INVALID_TXN_STATE


def test_recover_unfinished_transaction():
    """ProducerStateManagerTest.testRecoverFromSnapshotUnfinishedTransaction, through a
    restart that loads the snapshot its recovery wrote: the transaction is still open and the
    producer continues at the next sequence."""
    cl = leader()
    assert cl.produce(TP, PID, 0, 0, transactional=True).error is Errors.NONE
    assert cl.produce(TP, PID, 0, 1, transactional=True).error is Errors.NONE
    broker = cl.leader(TP)
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert broker.logs[TP].ongoing == {PID: 0}
    assert broker.producer_state[TP].producers[PID].last_seq == 1
    assert cl.produce(TP, PID, 0, 2, transactional=True).error is Errors.NONE


def test_recover_finished_transaction():
    """ProducerStateManagerTest.testRecoverFromSnapshotFinishedTransaction (a restart)."""
    cl = leader()
    cl.produce(TP, PID, 0, 0, transactional=True)
    cl.produce(TP, PID, 0, 1, transactional=True)
    assert cl.marker(TP, PID, 0, False) is Errors.NONE
    broker = cl.leader(TP)
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert broker.logs[TP].ongoing == {}
    assert broker.producer_state[TP].producers[PID].last_seq == 1


def test_recover_empty_transaction():
    """ProducerStateManagerTest.testRecoverFromSnapshotEmptyTransaction: a marker with no data
    leaves a producer entry and no open transaction, also after a restart."""
    cl = leader()
    assert cl.marker(TP, PID, 0, False) is Errors.NONE
    broker = cl.leader(TP)
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert PID in broker.producer_state[TP].producers and broker.logs[TP].ongoing == {}


def test_producer_state_after_fencing_abort_marker():
    """ProducerStateManagerTest.testProducerStateAfterFencingAbortMarker: a fencing ABORT (a
    new epoch) clears the cached batches, and the producer does not expire at the next check:
    its fencing epoch is kept (KAFKA-9144's fix, in both presets)."""
    psm = ProducerStateManager()
    log = PartitionLog(*TP)
    log.append(PID, 0, 0, ("a",), 0.0, transactional=True)
    client_append(psm, PID, 0, 0, 0)
    assert psm.mark(PID, 1, 0, 1.0) is Verdict.APPEND
    log.append_marker(PID, 1, "ABORT", 1.0)
    assert PID not in log.ongoing
    assert len(psm.producers[PID].batches) == 0  # lastDataOffset / firstDataOffset -1
    assert psm.remove_expired_producers(1.0, EXPIRATION_MS, log.ongoing) == []
    assert PID in psm.producers


def test_producer_state_after_fencing_abort_marker_before_kafka_9144():
    """KAFKA-9144 (rule ``producer_expiry_tracks_marker_timestamps`` false, Kafka before
    2.4.1): the same fencing ABORT leaves an entry with no batch and so no timestamp, and the
    next check expires it, fencing epoch and all. The case Kafka's fix added to its test
    (testProducerStateAfterFencingAbortMarker's last assertion) then fails."""
    psm = ProducerStateManager(marker_timestamps=False)
    client_append(psm, PID, 0, 0, 0)
    assert psm.mark(PID, 1, 0, 1.0) is Verdict.APPEND
    assert psm.remove_expired_producers(1.0, EXPIRATION_MS) == [PID]
    # The fenced epoch is forgotten: the old producer's next batch is taken as a new one's.
    assert psm.check(PID, 0, 1, 1).verdict is Verdict.APPEND


def test_remove_expired_pids_on_reload():
    """ProducerStateManagerTest.testRemoveExpiredPidsOnReload: after a reload the producer is
    gone, so its next append (sequence 2) is accepted as a new producer's and the producer is
    back with that sequence. Kafka's reload finds no snapshot in range; eosim's reload (a
    restart) finds none either (the log is empty above its start) and loads the deleted head's
    state, where the producer's entry expired, which eosim's reload, like Kafka's
    ``loadFromSnapshot``, does not bring back."""
    cl = leader_with_logs(producer_id_expiration_ms=60_000, check_ms=10_000)
    broker = cl.leader(TP)
    assert cl.produce(TP, PID, 0, 0).error is Errors.NONE
    assert cl.produce(TP, PID, 0, 1).error is Errors.NONE
    assert broker.log_manager.delete_records(TP, 2) is Errors.NONE
    part = broker.partitions[TP]
    assert part.log.batches == [] and PID in part.log.head_state.producers
    cl.run(70_000)  # the producer expires: from the live state and from the deleted head
    assert PID not in broker.producer_state[TP].producers
    assert PID not in part.log.head_state.producers
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert PID not in broker.producer_state[TP].producers
    assert cl.produce(TP, PID, 0, 2).error is Errors.NONE
    assert list(broker.producer_state[TP].producers) == [PID]
    assert broker.producer_state[TP].producers[PID].last_seq == 2
    assert broker.logs[TP].log_end_offset == 3


def test_accept_append_without_producer_state_on_replica():
    """ProducerStateManagerTest.testAcceptAppendWithoutProducerStateOnReplica: a replica whose
    producer entry expired takes the leader's next batch (sequence 2) without validation, and
    the entry is back with its epoch and sequence."""
    psm = ProducerStateManager()
    client_append(psm, PID, 0, 0, 0, timestamp=0.0)
    client_append(psm, PID, 0, 1, 1, timestamp=1.0)
    assert psm.remove_expired_producers(1.0 + EXPIRATION_MS, EXPIRATION_MS) == [PID]
    batch = LogBatch(2, PID, 0, 2, ("c",), 70_001.0, timestamp=70_001.0)
    psm.load((batch,))  # the follower's append: no validation
    entry = psm.producers[PID]
    assert (entry.epoch, entry.first_seq, entry.last_seq) == (0, 2, 2)


def test_pid_expiration_timeout():
    """ProducerStateManagerTest.testPidExpirationTimeout: idle for producer.id.expiration.ms
    plus 1, the producer is removed; its next batch (sequence 1) is accepted as a new
    producer's."""
    psm = ProducerStateManager()
    client_append(psm, PID, 5, 0, 1, timestamp=0.0)
    assert psm.remove_expired_producers(EXPIRATION_MS + 1, EXPIRATION_MS) == [PID]
    assert client_append(psm, PID, 5, 1, 2, timestamp=EXPIRATION_MS + 1) is Verdict.APPEND
    assert len(psm.producers) == 1 and psm.producers[PID].last_seq == 1


def test_producers_with_ongoing_transactions_dont_expire():
    """ProducerStateManagerTest.testProducersWithOngoingTransactionsDontExpire: a producer with
    a transaction open on the partition is kept however long it is idle."""
    psm = ProducerStateManager()
    log = PartitionLog(*TP)
    log.append(PID, 5, 0, ("a",), 0.0, transactional=True)
    client_append(psm, PID, 5, 0, 0, timestamp=0.0)
    assert log.ongoing == {PID: 0}
    assert psm.remove_expired_producers(EXPIRATION_MS + 1, EXPIRATION_MS, log.ongoing) == []
    assert PID in psm.producers and log.ongoing == {PID: 0}
    assert psm.remove_expired_producers(EXPIRATION_MS + 1, EXPIRATION_MS, log.ongoing) == []
    assert PID in psm.producers


def test_accept_append_with_sequence_gaps_on_replica():
    """ProducerStateManagerTest.testAcceptAppendWithSequenceGapsOnReplica: a client append with
    a gap is refused, the same batch replayed without validation is recorded."""
    psm = ProducerStateManager()
    client_append(psm, PID, 0, 0, 0)
    assert psm.check(PID, 0, 3, 3).verdict is Verdict.OUT_OF_ORDER_SEQUENCE
    assert psm.producers[PID].last_seq == 0
    psm.update(PID, 0, 3, 3, 1, 1)
    assert psm.producers[PID].last_seq == 3


def test_first_unstable_offset():
    """ProducerStateManagerTest.testFirstUnstableOffset, with the high watermark at the log
    end: eosim has one replica, so a marker is never above the high watermark and Kafka's
    steps that hold the LSO at a completed but unreplicated transaction do not arise."""
    log = PartitionLog(*TP)
    log.append(-1, -1, -1, tuple("p" * 99), 0.0)
    assert log.last_stable_offset() == log.log_end_offset
    log.append(PID, 5, 0, ("a",), 1.0, transactional=True)  # 99
    assert log.last_stable_offset() == 99
    log.append(-1, -1, -1, tuple("p" * 5), 2.0)
    log.append(2, 5, 0, ("b",), 3.0, transactional=True)  # 105
    assert log.last_stable_offset() == 99
    log.append(-1, -1, -1, tuple("p" * 3), 4.0)
    assert log.append_marker(PID, 5, "COMMIT", 5.0).base_offset == 109
    assert log.last_stable_offset() == 105
    log.append(-1, -1, -1, tuple("p" * 2), 6.0)
    assert log.append_marker(2, 5, "ABORT", 7.0).base_offset == 112
    assert log.last_stable_offset() == log.log_end_offset == 113


def test_sequence_not_validated_for_group_metadata_topic():
    """ProducerStateManagerTest.testSequenceNotValidatedForGroupMetadataTopic: transactional
    offset commits carry no sequence; two of the same epoch are both accepted."""
    g = GroupCoordinator(OffsetStore())
    tp = ("in", 0)
    assert g.txn_commit("grp", PID, 0, ((tp, 99),)) is Errors.NONE
    assert g.txn_commit("grp", PID, 0, ((tp, 100),)) is Errors.NONE


def test_old_epoch_for_control_record():
    """ProducerStateManagerTest.testOldEpochForControlRecord."""
    psm = ProducerStateManager()
    client_append(psm, PID, 5, 0, 99)
    assert psm.mark(PID, 3, 0) is Verdict.INVALID_PRODUCER_EPOCH


def test_coordinator_fencing():
    """ProducerStateManagerTest.testCoordinatorFencing."""
    psm = ProducerStateManager()
    client_append(psm, PID, 5, 0, 99)
    assert psm.mark(PID, 5, 1) is Verdict.APPEND
    assert psm.producers[PID].coordinator_epoch == 1
    assert psm.mark(PID, 5, 1) is Verdict.APPEND
    assert psm.mark(PID, 5, 2) is Verdict.APPEND
    assert psm.mark(PID, 5, 1) is Verdict.COORDINATOR_FENCED


def test_coordinator_fenced_after_reload():
    """ProducerStateManagerTest.testCoordinatorFencedAfterReload (reload = a restart: the
    snapshot keeps the coordinator epoch)."""
    cl = leader()
    cl.produce(TP, PID, 0, 0, transactional=True)
    assert cl.marker(TP, PID, 0, True, coordinator_epoch=1) is Errors.NONE
    broker = cl.leader(TP)
    broker.crash()
    broker.restart()
    cl.run(RECOVERY_MS)  # re-registered, unfenced and leading again
    assert cl.marker(TP, PID, 0, True, coordinator_epoch=0) is Errors.TRANSACTION_COORDINATOR_FENCED


def test_last_stable_offset_completed_txn():
    """ProducerStateManagerTest.testLastStableOffsetCompletedTxn: transactions completed out of
    order; the LSO is the first offset of the earliest one still open."""
    log = PartitionLog(*TP)
    start1 = log.append(1, 0, 0, ("a",), 0.0, transactional=True).base_offset
    log.append(-1, -1, -1, tuple("p" * 24), 0.0)
    start2 = log.append(2, 0, 0, ("b",), 0.0, transactional=True).base_offset
    log.append(-1, -1, -1, tuple("p" * 31), 0.0)
    log.append(3, 0, 0, ("c",), 0.0, transactional=True)
    assert (start1, start2) == (0, 25)
    log.append_marker(1, 0, "COMMIT", 1.0)
    assert log.last_stable_offset() == start2
    log.append_marker(3, 0, "COMMIT", 2.0)
    assert log.last_stable_offset() == start2
    log.append_marker(2, 0, "COMMIT", 3.0)
    assert log.last_stable_offset() == log.log_end_offset


def test_skip_empty_transactions():
    """ProducerStateManagerTest.testSkipEmptyTransactions: markers with no open transaction
    complete nothing (no aborted-index entry, no LSO change)."""
    log = PartitionLog(*TP)
    log.append(PID, 0, 0, tuple("abcde"), 0.0, transactional=True)
    assert log.last_stable_offset() == 0
    log.append_marker(PID, 0, "COMMIT", 1.0)  # completes the open transaction
    log.append_marker(PID, 0, "COMMIT", 1.0)  # empty
    log.append_marker(PID, 0, "ABORT", 1.0)  # empty: no aborted entry
    assert log.aborted == []
    second = log.append(PID, 0, 5, tuple("fghi"), 2.0, transactional=True).base_offset
    log.append_marker(PID, 0, "ABORT", 3.0)
    log.append_marker(PID, 0, "ABORT", 3.0)  # empty
    third = log.append(PID, 0, 9, ("j", "k"), 4.0, transactional=True).base_offset
    assert [(a.producer_id, a.first_offset) for a in log.aborted] == [(PID, second)]
    assert log.last_stable_offset() == third


def test_first_unstable_offset_after_truncation():
    """ProducerStateManagerTest.testFirstUnstableOffsetAfterTruncation: a transaction from
    offset 99 is unstable until the high watermark passes its COMMIT at 105; truncating back
    below the marker makes it open, and unstable, again."""
    log = PartitionLog("t", 0)
    log.append(-1, -1, NO_SEQUENCE, tuple(f"p{i}" for i in range(99)), 0.0)
    log.append(7, 0, 0, tuple(f"t{i}" for i in range(6)), 0.0, True)
    assert log.last_stable_offset(log.log_end_offset) == 99
    log.append_marker(7, 0, "COMMIT", 0.0)
    assert log.last_stable_offset(105) == 99  # the marker is not yet below the HW
    assert log.last_stable_offset(106) == 106
    log.append(7, 0, 6, ("after",), 0.0)
    log.truncate_to(106)
    assert log.last_stable_offset(106) == 106
    log.truncate_to(100)
    assert log.last_stable_offset(log.log_end_offset) == 99


SNAPSHOT_FILES = (
    "snapshots are offsets the log keeps, taken where Kafka's log takes them (rolls, "
    "truncations, recoveries), not files a test can take, read or corrupt (what they hold: "
    "tests/test_producer_snapshots.py)"
)
NOT_MODELLED = {
    "testHasLateTransaction": "no late-transaction metric",
    "testHasLateTransactionInitializedAfterReload": "no late-transaction metric",
    "testHasLateTransactionUpdatedAfterPartialTruncation": "no late-transaction metric",
    "testHasLateTransactionUpdatedAfterFullTruncation": "no late-transaction metric",
    "testTruncateAndReloadRemovesOutOfRangeSnapshots": SNAPSHOT_FILES,
    "testTakeSnapshot": SNAPSHOT_FILES,
    "testLoadFromCorruptSnapshotFile": SNAPSHOT_FILES,
    "testAppendEmptyControlBatch": "no compaction, so no emptied control batches",
    "testEntryForVerification": "verification is an instantaneous call, no verification guard",
    "testThrowOutOfOrderSequenceWithVerificationSequenceCheck": "no verification state entry",
    "testVerificationStateEntryExpiration": "no verification state entry",
    "testLoadFromEmptySnapshotFile": SNAPSHOT_FILES,
    "testReadWriteSnapshot": SNAPSHOT_FILES,
    "testSequenceAndEpochInVerificationEntry": "no verification state entry",
}


test_not_modelled = not_modelled("ProducerStateManagerTest", NOT_MODELLED)
