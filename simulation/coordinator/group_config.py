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
    # The rule consumer_partition_epochs (KAFKA-16147's fix; False is 3.7's bookkeeping).
    strict_partition_epochs: bool = True
