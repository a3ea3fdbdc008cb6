"""GroupConfig: the group coordinator's settings (``GroupCoordinatorConfig``), shared by the
classic groups and the consumer groups."""

from __future__ import annotations

from dataclasses import dataclass

from eosim.simulation.config import kafka_default


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """``GroupCoordinatorConfig``, Kafka's defaults
    (``GroupCoordinatorConfig.java``: group.min/max.session.timeout.ms,
    group.initial.rebalance.delay.ms; the new-member join timeout is
    ``GroupMetadataManager.java:203``)."""

    min_session_timeout_ms: int = kafka_default("group.min.session.timeout.ms")
    max_session_timeout_ms: int = kafka_default("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = kafka_default("group.initial.rebalance.delay.ms")
    new_member_join_timeout_ms: int = 300_000
    # The consumer groups (KIP-848): group.consumer.session.timeout.ms and
    # group.consumer.heartbeat.interval.ms (the bounds are checked when the config is read).
    consumer_session_timeout_ms: int = kafka_default("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = kafka_default("group.consumer.heartbeat.interval.ms")
    # group.consumer.assignment.interval.ms (KIP-1263, Kafka 4.3+): the least time between two
    # target assignments of a consumer group (0: at once, Kafka 4.2 and before).
    consumer_assignment_interval_ms: int = kafka_default("group.consumer.assignment.interval.ms")
    # The rule consumer_partition_epochs (KAFKA-16147's fix; False is 3.7's bookkeeping).
    strict_partition_epochs: bool = True
    # The rule consumer_group_starts_at_epoch_1 (KAFKA-20268, Kafka 4.3).
    starts_at_epoch_1: bool = False
    # The rule consumer_commit_assignment_epochs (KIP-1251, Kafka 4.3): a commit at an older
    # member epoch is checked against the committed partitions' assignment epochs.
    commit_assignment_epochs: bool = False
    # The rule txn_offset_commit_v6 under transaction version 2 (KIP-1319, Kafka 4.4): a
    # TxnOffsetCommit is answered GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH as they are, not
    # as ILLEGAL_GENERATION.
    txn_offset_commit_v6: bool = False
