"""Protocol rules that differ between Kafka versions, each a named switch.

A scenario picks a version preset (``kafka.version``) and may flip single rules under
``kafka.rules``. Every place in the model that behaves differently across versions reads its
rule from here, so a version, or a reproduction of a known Kafka bug, is a switch on one rule
rather than a fork of the model.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class ProtocolRules:
    # Default of linger.ms: 5 since Kafka 4.0 (KIP-1030), 0 before.
    linger_ms_default: int = 5
    # max.in.flight > 5 with implicit idempotence: older clients silently switch idempotence
    # off; newer trunk always raises a ConfigException.
    max_in_flight_above_5_disables_implicit_idempotence: bool = False
    # Unknown producer id on a partition: accept any sequence (KIP-360, Kafka 2.5+).
    # False reproduces the older UNKNOWN_PRODUCER_ID answer for a non-zero first sequence.
    accept_unknown_producer_any_sequence: bool = True
    # How many batches ProducerStateManager remembers per producer for duplicate detection.
    producer_state_cached_batches: int = 5
    # Kafka in every version eosim models: a broker's restart (clean or not) and a replica's
    # truncation rebuild its producer state from a producer snapshot, which keeps only each
    # producer's last batch, and the batches after it (UnifiedLog.rebuildProducerState,
    # ProducerStateManager.readSnapshot), so a retry of an earlier batch still in flight is
    # then OUT_OF_ORDER_SEQUENCE_NUMBER, and an idempotent producer's epoch bump writes it
    # again. False is a what-if (not Kafka, safer than Kafka): the whole log is replayed and
    # every cached batch kept, as eosim did before.
    producer_state_rebuilt_from_snapshots: bool = True
    # Transaction protocol version: 2 (KIP-890 part 2, Kafka 4.0) bumps the epoch at every
    # commit and abort, so (producer id, epoch) names one transaction.
    transaction_version: int = 2
    # transaction.max.timeout.ms: InitProducerId with a longer timeout is refused.
    transaction_max_timeout_ms: int = 900_000
    # KIP-890 part 1 (Kafka 3.6+): before a partition's first transactional append, its leader
    # verifies with the coordinator that the partition is in the producer's open transaction.
    # False lets a late produce request open a transaction nobody will end (a hanging one).
    transaction_partition_verification: bool = True
    # KAFKA-14034 (open in Kafka): when a batch of an idempotent producer fails for good while
    # it still had retries (Sender.failBatch with adjustSequenceNumbers = attempts < retries,
    # e.g. a retriable error handled after delivery.timeout.ms), the client bumps its epoch
    # and renumbers every in-flight batch of the partition, including earlier ones that may
    # already be written: they are written again. True applies the proposed fix (mark the
    # sequence unresolved, bump only once nothing is in flight). False is Kafka as released.
    failed_batch_marks_sequence_unresolved: bool = False
    # Where a replica that becomes a follower cuts its log: "leader_epoch" (KIP-101 with
    # KIP-279's fix, Kafka 2.1+, checked on every fetch since KIP-595: to the last offset its
    # log shares with the leader's), "leader_epoch_kip101" (Kafka 0.11 to 2.0: one
    # OffsetsForLeaderEpoch whose answer carries no epoch, so a follower cannot tell that the
    # logs diverged inside an older epoch, KIP-279's case) or "high_watermark" (before
    # KIP-101: to its own high watermark, which can lose or diverge committed records when
    # two brokers fail in turn).
    truncation: str = "leader_epoch"
    # KIP-966 (3.7+): a leader does not advance the high watermark while its ISR is smaller
    # than min.insync.replicas. True is the older behaviour.
    hw_advances_under_min_isr: bool = False
    # KIP-966 part 1, eligible leader replicas (the controller's eligible.leader.replicas
    # feature: on by default in clusters created by 4.1+, off before): ISR members that leave
    # it below min ISR stay electable while the ISR is empty, and a broker that comes back
    # from an unclean shutdown leaves every ISR and ELR, so that the last ISR member cannot
    # come back with a log it lost part of and be elected cleanly.
    eligible_leader_replicas: bool = False
    # KAFKA-9144 (fixed in 2.4.1 and 2.5.0): producer-id expiration counts a transaction
    # marker as the producer's last write. False is the bug: only cached data batches count,
    # and a marker with a new epoch (the coordinator fencing a timed-out transaction) clears
    # them, so the entry expires at the next check and the partition forgets the fencing
    # epoch: a fenced producer's late write is then accepted.
    producer_expiry_tracks_marker_timestamps: bool = True
    # What-if (not a Kafka bug): the group coordinator checks an OffsetCommit's and a
    # TxnOffsetCommit's member and generation against the group (ClassicGroup.
    # validateOffsetCommit, ClassicGroup.java:823-862; for TxnOffsetCommit since KIP-447, 2.5).
    # False skips those checks, so a zombie member's commit is written (the pre-KIP-447
    # TxnOffsetCommit; never Kafka for OffsetCommit).
    offset_commit_checks_generation: bool = True
    # KAFKA-18654 part 2 (apache/kafka PR #18810, in Kafka 4.0.0 and later): under transaction
    # version 2, a leader whose implicit add of a produce request's partitions to the
    # transaction is answered CONCURRENT_TRANSACTIONS asks the coordinator again itself every
    # add.partitions.to.txn.retry.backoff.ms (20) until min(add.partitions.to.txn.retry.
    # backoff.max.ms (100), request.timeout.ms) has passed since the first ask, and only then
    # answers the client (ReplicaManager.appendRecordsWithTransactionVerification). False:
    # the client gets CONCURRENT_TRANSACTIONS at once and retries after retry.backoff.ms.
    add_partitions_server_retry: bool = True
    # KAFKA-14196 (3.2.0 to 3.2.2; fixed in 3.2.3 and 3.3.0): the classic consumer's
    # onJoinPrepare marks its partitions pending revocation while its asynchronous auto-commit
    # is in flight, so that no fetched data of theirs is returned meanwhile
    # (ConsumerCoordinator.onJoinPrepare, SubscriptionState.markPendingRevocation). False is
    # the bug: poll keeps returning records of partitions about to be revoked, the application
    # processes them past the offsets being committed, and the next owner processes them again.
    consumer_pending_revocation: bool = True
    # KAFKA-14024 (3.2.0; fixed in 3.2.1 and 3.3.0): the classic consumer's onJoinPrepare
    # waits, across polls and at most the rebalance timeout, for the asynchronous auto-commit
    # it sent, retrying a retriable failure, before revoking and joining (ConsumerCoordinator.
    # onJoinPrepare with its joinPrepareTimer). False is 3.2.0 (KAFKA-13310): every poll sends
    # another auto-commit and goes on only if that one is complete at once, which under the
    # COOPERATIVE protocol it never is: the member never sends its JoinGroup, the coordinator
    # drops it after the rebalance timeout, and it keeps processing partitions that the group
    # has given to another member meanwhile.
    consumer_join_prepare_waits_for_commit: bool = True
    # KAFKA-18641 (3.7 to 3.9, the consumer protocol's AsyncKafkaConsumer; fixed in 4.0.0 by
    # PR #18737): the periodic auto-commit runs on the application thread's poll, of the
    # positions of then (ApplicationEventProcessor's PollEvent, CommitRequestManager.
    # updateTimerAndMaybeCommit). False is the bug: the network thread commits on its own
    # timer the positions of records the last poll returned, while the application is still
    # processing them; a crash then loses them.
    consumer_auto_commit_app_thread: bool = True
    # KAFKA-16147 (3.7; fixed in 3.8.0): a consumer group member revoking partitions that a
    # new target assignment gives back takes them back at once (3.7's CurrentAssignmentBuilder)
    # and the coordinator's partition-epoch bookkeeping loses their epochs, so they can be
    # given to a second member while the first still owns them. True is 3.8's fix: the
    # member finishes revoking first, and an inconsistent update is refused.
    consumer_partition_epochs: bool = True
    # KIP-1228 (Kafka 4.2.0, with KAFKA-19999's retry case): WriteTxnMarkers v2 carries the
    # transaction version, and a partition leader takes a transaction-version-2 marker only
    # at an epoch above the producer's current one there (the coordinator bumps the epoch at
    # every end), so a late marker of an ended transaction cannot end the producer's next
    # one. A marker at the current epoch is still written when the producer has no
    # transaction open on the partition: a retry of one already written (ProducerAppendInfo.
    # checkProducerEpoch; followers keep the older check). A refused marker is answered
    # INVALID_PRODUCER_EPOCH, which makes the coordinator drop the transaction's markers
    # (TransactionMarkerRequestCompletionHandler). Applies only under transaction version 2.
    # False is Kafka 4.1 and before: any marker epoch not below the producer's is taken.
    tv2_marker_requires_newer_epoch: bool = False
    # Default of the broker config group.consumer.assignment.interval.ms (KIP-1263, Kafka
    # 4.3.0: 1000): a consumer group (KIP-848) computes a new target assignment only once
    # this long has passed since its last one; until then its group epoch still moves but
    # its members reconcile towards the old target, and the next heartbeat of any member
    # after the interval computes it (GroupMetadataManager.maybeUpdateTargetAssignment; no
    # timer). 0, Kafka 4.2 and before (which have no such config), computes it at once.
    consumer_assignment_interval_ms_default: int = 0
    # KAFKA-20268 (Kafka 4.3.0): a new consumer group starts at group epoch 1 with an empty
    # target assignment, so its first real assignment, and its first member, are at epoch 2.
    # False is 4.2 and before: a new group starts at epoch 0 and its first member gets 1.
    consumer_group_starts_at_epoch_1: bool = False
    # KIP-1251 (Kafka 4.3.0): a consumer group member's OffsetCommit or TxnOffsetCommit at
    # an older member epoch than its current one is accepted when every partition it commits
    # is still assigned to it, or pending revocation from it, at an assignment epoch (the
    # member epoch at which the member got the partition) not above the commit's epoch
    # (ConsumerGroup.validateOffsetCommit's per-partition validator); otherwise
    # STALE_MEMBER_EPOCH. False is 4.2 and before: any epoch but the current one is
    # STALE_MEMBER_EPOCH. (For a TxnOffsetCommit of version 5 or less the broker answers
    # ILLEGAL_GENERATION instead; see txn_offset_commit_v6.)
    consumer_commit_assignment_epochs: bool = False
    # KAFKA-20106 (PR #21495) and KAFKA-20332 (PR #21897), Kafka 4.3.0: the consumer
    # protocol's AsyncKafkaConsumer reconciles only from the application thread's poll (the
    # commit, the callbacks and the new assignment; checked on every pass of poll's loop),
    # so the network thread never marks partitions for revocation, nor changes the
    # assignment, while the application holds records; and partitions lost (fenced, or left
    # on the poll timeout) stop being fetched, and their fetched records returned, at once.
    # False is 4.2 and before: without
    # auto-commit a reconciliation starts on the network thread as soon as an assignment
    # arrives, and lost partitions stay fetchable until the next poll runs onPartitionsLost.
    consumer_reconciles_in_poll: bool = False
    # KIP-1319 (KAFKA-20444, Kafka 4.4.0): TxnOffsetCommit v6, which a client uses under
    # transaction version 2 only (version 5 and later need it). The group coordinator answers
    # GROUP_ID_NOT_FOUND for a group it does not have and STALE_MEMBER_EPOCH for a stale
    # member epoch of a consumer group (version 5 and before: ILLEGAL_GENERATION for both,
    # OffsetMetadataManager.validateTransactionalOffsetCommit), and the producer treats both
    # as ILLEGAL_GENERATION: an abortable CommitFailedException. v6 names topics by id, so
    # sendOffsetsToTransaction first waits, at most max.block.ms, for the metadata of consumed
    # topics the producer has not used (one metadata round trip per topic, its first call).
    # False is 4.3 and before.
    txn_offset_commit_v6: bool = False

    def with_overrides(self, overrides: dict[str, object]) -> ProtocolRules:
        return replace(self, **overrides)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


# Known Kafka bugs, each reproduced by one rule at one value: bug id -> (rule, the value that
# reproduces it, the value that fixes it). A preset has a bug's reproducing value unless the bug
# was fixed in a release up to the preset's version (FIXED_IN), as in Kafka.
KNOWN_BUGS: dict[str, tuple[str, object, object]] = {
    "KAFKA-14034": ("failed_batch_marks_sequence_unresolved", False, True),
    "KAFKA-9144": ("producer_expiry_tracks_marker_timestamps", False, True),
    "KAFKA-14196": ("consumer_pending_revocation", False, True),
    "KAFKA-14024": ("consumer_join_prepare_waits_for_commit", False, True),
    "KAFKA-18641": ("consumer_auto_commit_app_thread", False, True),
    "KAFKA-16147": ("consumer_partition_epochs", False, True),
}

# The first releases of each line with a bug's fix (KAFKA-9144: 2.4.1 and 2.5.0, backported to
# 2.3.2 and 2.2.3); a bug missing here is open in Kafka.
FIXED_IN: dict[str, tuple[str, ...]] = {
    "KAFKA-9144": ("2.2.3", "2.3.2", "2.4.1", "2.5.0"),
    "KAFKA-14196": ("3.2.3", "3.3.0"),
    "KAFKA-14024": ("3.2.1", "3.3.0"),
    "KAFKA-18641": ("4.0.0",),
    "KAFKA-16147": ("3.8.0",),
}


def has_fix(bug: str, version: str) -> bool:
    """Whether Kafka ``version`` (a preset: the latest release of its line, "3.9") carries
    ``bug``'s fix: its own line got a fixed release, or it is later than every line that did
    (later lines branch off after the fix)."""
    lines = [_line(release) for release in FIXED_IN.get(bug, ())]
    mine = _line(version)
    return bool(lines) and (mine in lines or mine > max(lines))


def _line(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


_KAFKA_41 = ProtocolRules(eligible_leader_replicas=True)

VERSIONS: dict[str, ProtocolRules] = {
    "3.9": ProtocolRules(
        linger_ms_default=0,
        max_in_flight_above_5_disables_implicit_idempotence=True,
        transaction_version=1,
        add_partitions_server_retry=False,
        consumer_auto_commit_app_thread=False,
    ),
    "4.0": ProtocolRules(),
    "4.1": _KAFKA_41,
    # Kafka 4.4.0: 4.1's rules and the changes of 4.2, 4.3 and 4.4 that the model covers
    # (docs/model.md, "Departures from Kafka", the version rules). A new 4.4 cluster has the
    # feature levels of a new 4.1.1 one (transaction.version 2, group.version 1,
    # eligible.leader.replicas.version 1).
    "4.4": replace(
        _KAFKA_41,
        tv2_marker_requires_newer_epoch=True,
        consumer_assignment_interval_ms_default=1_000,
        consumer_group_starts_at_epoch_1=True,
        consumer_commit_assignment_epochs=True,
        consumer_reconciles_in_poll=True,
        txn_offset_commit_v6=True,
    ),
}
DEFAULT_VERSION = "4.0"


def preset_for(release: str) -> str | None:
    """The preset that models Kafka ``release`` ("4.1.1" -> "4.1"), or None when none does."""
    parts = release.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    line = f"{int(parts[0])}.{int(parts[1])}"
    return line if line in VERSIONS else None
