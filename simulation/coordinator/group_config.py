"""GroupConfig: the group coordinator's settings (``GroupCoordinatorConfig``), shared by the
classic groups and the consumer groups."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """``GroupCoordinatorConfig``, Kafka's defaults
    (``GroupCoordinatorConfig.java``: group.min/max.session.timeout.ms,
    group.initial.rebalance.delay.ms; the new-member join timeout is
    ``GroupMetadataManager.java:203``)."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    new_member_join_timeout_ms: int = 300_000
    # The consumer groups (KIP-848): group.consumer.session.timeout.ms and
    # group.consumer.heartbeat.interval.ms (the bounds are checked when the config is read).
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    # The rule consumer_partition_epochs (KAFKA-16147's fix; False is 3.7's bookkeeping).
    strict_partition_epochs: bool = True
