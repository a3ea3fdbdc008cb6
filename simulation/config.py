"""Producer configuration under Kafka's own key names, with Kafka's defaults and validation.

:func:`parse_producer_config` mirrors ``ProducerConfig``: it fills defaults, checks types and
ranges, and applies the idempotence rules (idempotence needs ``acks=all``, ``retries > 0`` and
``max.in.flight.requests.per.connection <= 5``; an explicit ``enable.idempotence=true`` that
breaks them is an error, an implicit one is switched off). A scenario can waive a rule only
through its ``unsafe:`` block, to show what the rule protects against.

Every config a scenario may set is declared once, by Kafka's name, in a registry of
:class:`ConfigKey` entries (Kafka's name, its default and where Kafka defines it, its
validation, and the fields of the model that read it): :data:`PRODUCER_KEYS` (an
application's ``config:``), :data:`BROKER_KEYS` (``cluster.config``) and :data:`TOPIC_KEYS`
(``cluster.topics[].config``). :class:`ProducerConfig`, :class:`BrokerConfig` and the
model's settings take their defaults from them (:func:`producer_default`,
:func:`kafka_default`), the scenario schema lists their names (``eosim/schema.py``) and
validation is their ``parse``, so Kafka's default is written in one place;
tests/test_config_keys.py checks every reader against its entry.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eosim.simulation.rules import ProtocolRules

MAX_INT = 2**31 - 1


class ConfigException(ValueError):
    """Kafka's ConfigException: ``Invalid value V for configuration KEY: reason``."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        self.key = key
        super().__init__(f"Invalid value {_show(value)} for configuration {key}: {reason}")


def _show(value: object) -> str:
    """The value as the message shows it: bounded, however large or nested it is."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    text = value if isinstance(value, str) else _REPR.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


@dataclass(frozen=True, slots=True)
class Unsafe:
    """Validation rules a scenario has explicitly waived."""

    idempotence_with_max_in_flight_above_5: bool = False
    idempotence_without_acks_all: bool = False
    idempotence_without_retries: bool = False
    delivery_timeout_below_linger_plus_request_timeout: bool = False


def _parse_int(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigException(key, value, f"expected an integer in [{low}, {high}]")
    try:
        number = int(value)
    except ValueError:
        raise ConfigException(key, value, f"expected an integer in [{low}, {high}]") from None
    if not low <= number <= high:
        raise ConfigException(key, value, f"value must be in [{low}, {high}]")
    return number


def _parse_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigException(key, value, "expected true or false")


def _parse_acks(key: str, value: object) -> int:
    text = (
        str(value).lower() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    )
    mapping = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if text not in mapping:
        raise ConfigException(key, value, "String must be one of: all, -1, 0, 1")
    return mapping[text]


def _parse_str(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigException(key, value, "expected a non-empty string")
    return value


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config a scenario may set, by Kafka's name: a producer config (an application's
    ``config:``, :data:`PRODUCER_KEYS`), a broker config (``cluster.config``,
    :data:`BROKER_KEYS`) or a topic config (``cluster.topics[].config``, :data:`TOPIC_KEYS`).

    ``attr`` is the :class:`ProducerConfig` or :class:`BrokerConfig` attribute it sets (a
    topic config sets the same attribute as the broker config it overrides), ``parse`` its
    validation (Kafka's type and range, as :class:`ConfigException`), ``default`` Kafka's
    default (None: never, no limit, or not set; a topic config's is its broker config's),
    ``source`` where Kafka defines that default, and ``read_by`` the fields of the model that
    take it (``module:Class.field``, or a parameter of ``Class.__init__``): their defaults are
    this one (tests/test_config_keys.py checks it).

    To add a producer config: declare it in :data:`PRODUCER_KEYS` with its default and
    source, add its :class:`ProducerConfig` attribute (default ``producer_default(name)``),
    read it from the config where the client needs it, and name in ``read_by`` any field or
    parameter that restates its default.

    To add a broker config: declare it in :data:`BROKER_KEYS` with its default and source, add
    its :class:`BrokerConfig` attribute (default ``kafka_default(name)``), give the settings
    field that reads it the same default and set it in ``ClusterSettings.from_scenario``, name
    that field in ``read_by``. A topic config that overrides it per topic goes in
    :data:`TOPIC_KEYS` under the same attribute, with ``topic_default(attr)`` as its default
    and the topic's settings field that reads it in ``read_by`` (a ``TopicSettings`` or
    ``LogConfig`` field): ``TopicSettings.of`` sets that field from it.

    Then regenerate the schema (``eosim schema``: it lists every registry's names) and test
    the key (tests/test_config_keys.py checks the wiring of every entry by itself).
    """

    name: str
    attr: str
    parse: Callable[[str, object], Any]
    default: int | bool | str | None
    source: str
    read_by: tuple[str, ...] = ()


def _int(low: int = 0, high: int = MAX_INT) -> Callable[[str, object], int]:
    return lambda key, value: _parse_int(key, value, low, high)


def _long(low: int = 0) -> Callable[[str, object], int]:
    return lambda key, value: _parse_int(key, value, low, 2**63 - 1)


# Producer configs an application may set under ``config:``, by Kafka's names, each with
# Kafka's default (see :class:`ConfigKey`). Their order is the schema's and
# :meth:`ProducerConfig.to_kafka_dict`'s.
PRODUCER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        # "all": -1.
        ConfigKey("acks", "acks", _parse_acks, -1, "ProducerConfig"),
        ConfigKey("enable.idempotence", "enable_idempotence", _parse_bool, True, "ProducerConfig"),
        ConfigKey("retries", "retries", _int(), MAX_INT, "ProducerConfig"),
        ConfigKey(
            "max.in.flight.requests.per.connection",
            "max_in_flight",
            _int(1),
            5,
            "ProducerConfig",
        ),
        ConfigKey("delivery.timeout.ms", "delivery_timeout_ms", _int(), 120_000, "ProducerConfig"),
        ConfigKey("request.timeout.ms", "request_timeout_ms", _int(), 30_000, "ProducerConfig"),
        # Kafka 4.0's (KIP-1030); 3.x's is 0: ProtocolRules.linger_ms_default.
        ConfigKey("linger.ms", "linger_ms", _int(), 5, "ProducerConfig"),
        ConfigKey("batch.size", "batch_size", _int(), 16_384, "ProducerConfig"),
        ConfigKey("buffer.memory", "buffer_memory", _int(), 33_554_432, "ProducerConfig"),
        ConfigKey("max.request.size", "max_request_size", _int(1), 1_048_576, "ProducerConfig"),
        ConfigKey(
            "retry.backoff.ms",
            "retry_backoff_ms",
            _int(),
            100,
            "CommonClientConfigs",
            ("metadata:ClientMetadata.refresh_backoff_ms",),
        ),
        ConfigKey(
            "retry.backoff.max.ms",
            "retry_backoff_max_ms",
            _int(),
            1_000,
            "CommonClientConfigs",
            ("metadata:ClientMetadata.refresh_backoff_max_ms",),
        ),
        ConfigKey(
            "reconnect.backoff.ms", "reconnect_backoff_ms", _int(), 50, "CommonClientConfigs"
        ),
        ConfigKey(
            "reconnect.backoff.max.ms",
            "reconnect_backoff_max_ms",
            _int(),
            1_000,
            "CommonClientConfigs",
        ),
        ConfigKey(
            "socket.connection.setup.timeout.ms",
            "socket_connection_setup_timeout_ms",
            _int(),
            10_000,
            "CommonClientConfigs",
        ),
        ConfigKey(
            "socket.connection.setup.timeout.max.ms",
            "socket_connection_setup_timeout_max_ms",
            _int(),
            30_000,
            "CommonClientConfigs",
        ),
        ConfigKey("max.block.ms", "max_block_ms", _int(), 60_000, "ProducerConfig"),
        ConfigKey(
            "metadata.max.age.ms",
            "metadata_max_age_ms",
            _int(),
            300_000,
            "ProducerConfig",
            ("metadata:ClientMetadata.max_age_ms",),
        ),
        # None: not set (a transactional application gives itself one: Scenario.clients).
        ConfigKey("transactional.id", "transactional_id", _parse_str, None, "ProducerConfig"),
        ConfigKey(
            "transaction.timeout.ms", "transaction_timeout_ms", _int(1), 60_000, "ProducerConfig"
        ),
        ConfigKey(
            "partitioner.ignore.keys",
            "partitioner_ignore_keys",
            _parse_bool,
            False,
            "ProducerConfig",
        ),
        ConfigKey("client.id", "client_id", _parse_str, "", "CommonClientConfigs"),
    )
}


def producer_default(name: str) -> Any:
    """Kafka's default of producer config ``name`` (:data:`PRODUCER_KEYS`)."""
    return PRODUCER_KEYS[name].default


@dataclass(slots=True)
class ProducerConfig:
    """A producer's effective configs, Kafka's defaults (:data:`PRODUCER_KEYS`) where the
    scenario says nothing; ``linger.ms``'s depends on the Kafka version
    (``ProtocolRules.linger_ms_default``, which :func:`parse_producer_config` starts from)."""

    acks: int = producer_default("acks")
    enable_idempotence: bool = producer_default("enable.idempotence")
    retries: int = producer_default("retries")
    max_in_flight: int = producer_default("max.in.flight.requests.per.connection")
    delivery_timeout_ms: int = producer_default("delivery.timeout.ms")
    request_timeout_ms: int = producer_default("request.timeout.ms")
    linger_ms: int = producer_default("linger.ms")
    batch_size: int = producer_default("batch.size")
    buffer_memory: int = producer_default("buffer.memory")
    max_request_size: int = producer_default("max.request.size")
    retry_backoff_ms: int = producer_default("retry.backoff.ms")
    retry_backoff_max_ms: int = producer_default("retry.backoff.max.ms")
    reconnect_backoff_ms: int = producer_default("reconnect.backoff.ms")
    reconnect_backoff_max_ms: int = producer_default("reconnect.backoff.max.ms")
    # ClusterConnectionStates' connection setup timeout: how long a TCP connect may take
    # (doubling, with jitter, after each that timed out).
    socket_connection_setup_timeout_ms: int = producer_default("socket.connection.setup.timeout.ms")
    socket_connection_setup_timeout_max_ms: int = producer_default(
        "socket.connection.setup.timeout.max.ms"
    )
    max_block_ms: int = producer_default("max.block.ms")
    metadata_max_age_ms: int = producer_default("metadata.max.age.ms")
    transactional_id: str | None = producer_default("transactional.id")
    transaction_timeout_ms: int = producer_default("transaction.timeout.ms")
    partitioner_ignore_keys: bool = producer_default("partitioner.ignore.keys")
    client_id: str = producer_default("client.id")
    warnings: list[str] = field(default_factory=list)

    def to_kafka_dict(self) -> dict[str, Any]:
        """The effective configuration under Kafka's key names."""
        out: dict[str, Any] = {}
        for key, spec in PRODUCER_KEYS.items():
            value = getattr(self, spec.attr)
            out[key] = "all" if key == "acks" and value == -1 else value
        return out


def parse_producer_config(
    raw: Mapping[str, object], rules: ProtocolRules, unsafe: Unsafe | None = None
) -> ProducerConfig:
    """Build a validated :class:`ProducerConfig` from Kafka-named keys.

    Unknown keys are rejected by the scenario schema before this is called; a key unknown
    here raises :class:`ConfigException` all the same.
    """
    unsafe = unsafe or Unsafe()
    config = ProducerConfig(linger_ms=rules.linger_ms_default)
    for key, value in raw.items():
        spec = PRODUCER_KEYS.get(key)
        if spec is None:
            raise ConfigException(key, value, "unknown producer configuration")
        setattr(config, spec.attr, spec.parse(key, value))
    _backoff_configs(config, raw)
    transactional = config.transactional_id is not None
    _validate_idempotence(config, "enable.idempotence" in raw, transactional, rules, unsafe)
    _validate_timeouts(config, "delivery.timeout.ms" in raw, unsafe)
    if transactional and not config.enable_idempotence:
        raise ConfigException(
            "enable.idempotence",
            False,
            "cannot set a transactional.id without enabling idempotence",
        )
    return config


def _backoff_configs(config: ProducerConfig, raw: Mapping[str, object]) -> None:
    """CommonClientConfigs.postProcessReconnectBackoffConfigs: ``reconnect.backoff.ms`` set
    without ``reconnect.backoff.max.ms`` makes the reconnect backoff constant; and
    ``warnDisablingExponentialBackoff``: ``retry.backoff.ms`` above ``retry.backoff.max.ms``
    gives a constant backoff of the max (simulation/exponential_backoff.py)."""
    if "reconnect.backoff.ms" in raw and "reconnect.backoff.max.ms" not in raw:
        config.reconnect_backoff_max_ms = config.reconnect_backoff_ms
        config.warnings.append(
            "exponential reconnect backoff disabled: reconnect.backoff.ms is set, "
            "reconnect.backoff.max.ms is not"
        )
    if config.retry_backoff_ms > config.retry_backoff_max_ms:
        config.warnings.append(
            f"retry.backoff.ms ({config.retry_backoff_ms}) is greater than retry.backoff.max.ms "
            f"({config.retry_backoff_max_ms}): a static backoff of "
            f"{config.retry_backoff_max_ms} ms applies"
        )
    setup, setup_max = (
        config.socket_connection_setup_timeout_ms,
        config.socket_connection_setup_timeout_max_ms,
    )
    if setup > setup_max:
        config.warnings.append(
            f"socket.connection.setup.timeout.ms ({setup}) is greater than "
            f"socket.connection.setup.timeout.max.ms ({setup_max}): a static connection setup "
            f"timeout of {setup_max} ms applies"
        )


def _validate_idempotence(
    config: ProducerConfig,
    explicit: bool,
    transactional: bool,
    rules: ProtocolRules,
    unsafe: Unsafe,
) -> None:
    """Kafka's ``ProducerConfig.postProcessAndValidateIdempotenceConfigs``. A value that
    would switch implicit idempotence off is an error when a transactional.id is set: Kafka
    switches it off and then refuses the transactional.id; the error names the value."""
    if not config.enable_idempotence:
        return
    violations: list[tuple[str, object, str, bool]] = []
    if config.max_in_flight > 5 and not unsafe.idempotence_with_max_in_flight_above_5:
        violations.append(
            (
                "max.in.flight.requests.per.connection",
                config.max_in_flight,
                "must be at most 5 to use the idempotent producer",
                rules.max_in_flight_above_5_disables_implicit_idempotence,
            )
        )
    if config.acks != -1 and not unsafe.idempotence_without_acks_all:
        violations.append(
            ("acks", config.acks, "must be all (-1) to use the idempotent producer", True)
        )
    if config.retries == 0 and not unsafe.idempotence_without_retries:
        violations.append(
            ("retries", 0, "must be greater than 0 to use the idempotent producer", True)
        )
    for key, value, reason, implicit_disables in violations:
        if explicit or not implicit_disables:
            raise ConfigException(key, value, reason)
        if transactional:
            raise ConfigException(key, value, f"{reason}, which a transactional.id requires")
    if violations:
        config.enable_idempotence = False
        keys = ", ".join(v[0] for v in violations)
        config.warnings.append(
            f"idempotence was not set explicitly and is disabled because of {keys}"
        )


def _validate_timeouts(config: ProducerConfig, explicit: bool, unsafe: Unsafe) -> None:
    floor = config.linger_ms + config.request_timeout_ms
    if config.delivery_timeout_ms >= floor:
        return
    if unsafe.delivery_timeout_below_linger_plus_request_timeout:
        return
    if explicit:
        raise ConfigException(
            "delivery.timeout.ms",
            config.delivery_timeout_ms,
            f"should be equal to or larger than linger.ms + request.timeout.ms ({floor})",
        )
    config.warnings.append(
        f"delivery.timeout.ms raised to linger.ms + request.timeout.ms ({floor})"
    )
    config.delivery_timeout_ms = floor


# -- broker and topic configurations ----------------------------------------------------------
def _optional_long(low: int = 1) -> Callable[[str, object], int | None]:
    """A Kafka long whose default, Long.MAX_VALUE, means never: None here."""

    def parse(key: str, value: object) -> int | None:
        if isinstance(value, str) and value.lower() in ("never", "none"):
            return None
        number = _parse_int(key, value, low, 2**63 - 1)
        return None if number >= MAX_INT else number

    return parse


def _unlimited_below_zero(low: int) -> Callable[[str, object], int | None]:
    """A Kafka long where a negative value (-1) means no limit: None here."""

    def parse(key: str, value: object) -> int | None:
        number = _parse_int(key, value, low, 2**63 - 1)
        return None if number < 0 else number

    return parse


def _broker_retention_ms(key: str, value: object) -> int | None:
    """log.retention.ms: -1 (keep for ever) or at least 1 (KafkaConfig.validateValues)."""
    number = _parse_int(key, value, -1, 2**63 - 1)
    if number == 0:
        raise ConfigException(key, value, "must be unlimited (-1) or at least 1")
    return None if number < 0 else number


# The smallest segment.bytes Kafka accepts (LegacyRecord.RECORD_OVERHEAD_V0).
MIN_SEGMENT_BYTES = 14


# Broker configs a scenario may set under ``cluster.config``, by Kafka's names, each with
# Kafka's default and the model's settings that read it (see :class:`ConfigKey`). Their order
# is the schema's.
BROKER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "replica.lag.time.max.ms",
            "replica_lag_time_max_ms",
            _int(1),
            30_000,
            "ReplicationConfigs",
            (
                "broker.replica_manager:ReplicationSettings.replica_lag_time_max_ms",
                "broker.partition:LeaderState.replica_lag_time_max_ms",
            ),
        ),
        ConfigKey(
            "replica.fetch.wait.max.ms",
            "replica_fetch_wait_max_ms",
            _int(0),
            500,
            "ReplicationConfigs",
            ("broker.replica_manager:ReplicationSettings.replica_fetch_wait_max_ms",),
        ),
        ConfigKey(
            "replica.fetch.backoff.ms",
            "replica_fetch_backoff_ms",
            _int(0),
            1_000,
            "ReplicationConfigs",
            ("broker.replica_manager:ReplicationSettings.replica_fetch_backoff_ms",),
        ),
        ConfigKey(
            "num.network.threads",
            "num_network_threads",
            _int(1),
            3,
            "SocketServerConfigs",
            ("broker.request_handler_pool:ThreadSettings.network_threads",),
        ),
        ConfigKey(
            "num.io.threads",
            "num_io_threads",
            _int(1),
            8,
            "ServerConfigs",
            ("broker.request_handler_pool:ThreadSettings.io_threads",),
        ),
        ConfigKey(
            "queued.max.requests",
            "queued_max_requests",
            _int(1),
            500,
            "ServerConfigs",
            ("broker.request_handler_pool:ThreadSettings.queued_max_requests",),
        ),
        ConfigKey(
            "num.replica.fetchers",
            "num_replica_fetchers",
            _int(1),
            1,
            "ReplicationConfigs",
            ("broker.request_handler_pool:ThreadSettings.replica_fetchers",),
        ),
        ConfigKey(
            "replica.socket.timeout.ms",
            "replica_socket_timeout_ms",
            _int(1),
            30_000,
            "ReplicationConfigs",
            ("broker.replica_manager:ReplicationSettings.replica_socket_timeout_ms",),
        ),
        ConfigKey(
            "broker.session.timeout.ms",
            "broker_session_timeout_ms",
            _int(1),
            9_000,
            "KRaftConfigs",
            (
                "broker.broker:BrokerSettings.session_timeout_ms",
                "controller.quorum_controller:ControllerSettings.session_timeout_ms",
            ),
        ),
        ConfigKey(
            "broker.heartbeat.interval.ms",
            "broker_heartbeat_interval_ms",
            _int(1),
            2_000,
            "KRaftConfigs",
            ("broker.broker:BrokerSettings.heartbeat_interval_ms",),
        ),
        ConfigKey(
            "group.min.session.timeout.ms",
            "group_min_session_timeout_ms",
            _int(0),
            6_000,
            "GroupCoordinatorConfig",
            ("coordinator.group_config:GroupConfig.min_session_timeout_ms",),
        ),
        ConfigKey(
            "group.max.session.timeout.ms",
            "group_max_session_timeout_ms",
            _int(0),
            1_800_000,
            "GroupCoordinatorConfig",
            ("coordinator.group_config:GroupConfig.max_session_timeout_ms",),
        ),
        ConfigKey(
            "group.initial.rebalance.delay.ms",
            "group_initial_rebalance_delay_ms",
            _int(0),
            3_000,
            "GroupCoordinatorConfig",
            ("coordinator.group_config:GroupConfig.initial_rebalance_delay_ms",),
        ),
        ConfigKey(
            "group.consumer.session.timeout.ms",
            "group_consumer_session_timeout_ms",
            _int(1),
            45_000,
            "GroupCoordinatorConfig",
            ("coordinator.group_config:GroupConfig.consumer_session_timeout_ms",),
        ),
        # The bounds below are read only by the scenario's validation (Cluster._replication_fits).
        ConfigKey(
            "group.consumer.min.session.timeout.ms",
            "group_consumer_min_session_timeout_ms",
            _int(1),
            45_000,
            "GroupCoordinatorConfig",
        ),
        ConfigKey(
            "group.consumer.max.session.timeout.ms",
            "group_consumer_max_session_timeout_ms",
            _int(1),
            60_000,
            "GroupCoordinatorConfig",
        ),
        ConfigKey(
            "group.consumer.heartbeat.interval.ms",
            "group_consumer_heartbeat_interval_ms",
            _int(1),
            5_000,
            "GroupCoordinatorConfig",
            ("coordinator.group_config:GroupConfig.consumer_heartbeat_interval_ms",),
        ),
        ConfigKey(
            "group.consumer.min.heartbeat.interval.ms",
            "group_consumer_min_heartbeat_interval_ms",
            _int(1),
            5_000,
            "GroupCoordinatorConfig",
        ),
        ConfigKey(
            "group.consumer.max.heartbeat.interval.ms",
            "group_consumer_max_heartbeat_interval_ms",
            _int(1),
            15_000,
            "GroupCoordinatorConfig",
        ),
        # KIP-1263 (Kafka 4.3+; 1000 there): the least time between two target assignments of
        # a consumer group. Its default depends on the Kafka version, so it is a rule
        # (ProtocolRules.consumer_assignment_interval_ms_default), as linger.ms's is for the
        # producer: the registry holds the default preset's value, 0 (Kafka up to 4.2 has no
        # such config and assigns at once), so that BrokerConfig, GroupConfig and the tests of
        # both agree on one default, and a scenario's broker configs start from its version's
        # (broker_config_for, read by ClusterSettings.from_scenario: 1000 on the 4.4 preset);
        # a value under cluster.config wins on any version. The range is Kafka's default
        # bounds (group.consumer.min/max.assignment.interval.ms, 0 and 15000, which also bound
        # the per-group override; neither is modelled).
        ConfigKey(
            "group.consumer.assignment.interval.ms",
            "group_consumer_assignment_interval_ms",
            _int(0, 15_000),
            0,
            "GroupCoordinatorConfig (Kafka 4.3+)",
            ("coordinator.group_config:GroupConfig.consumer_assignment_interval_ms",),
        ),
        # Kafka's default for the three is Long.MAX_VALUE: never (None here).
        ConfigKey(
            "log.flush.interval.messages",
            "log_flush_interval_messages",
            _optional_long(1),
            None,
            "ServerLogConfigs",
            ("broker.replica_manager:ReplicationSettings.log_flush_interval_messages",),
        ),
        ConfigKey(
            "log.flush.interval.ms",
            "log_flush_interval_ms",
            _optional_long(0),
            None,
            "ServerLogConfigs",
            ("broker.replica_manager:ReplicationSettings.log_flush_interval_ms",),
        ),
        ConfigKey(
            "log.flush.scheduler.interval.ms",
            "log_flush_scheduler_interval_ms",
            _optional_long(1),
            None,
            "ServerLogConfigs",
            ("broker.replica_manager:ReplicationSettings.log_flush_scheduler_interval_ms",),
        ),
        ConfigKey(
            "min.insync.replicas",
            "min_insync_replicas",
            _int(1),
            1,
            "ServerLogConfigs",
            (
                "broker.partition:TopicSettings.min_insync_replicas",
                "broker.partition:LeaderState.min_insync_replicas",
                # __consumer_offsets takes the broker's min.insync.replicas.
                "cluster:ClusterSettings.offsets_min_isr",
            ),
        ),
        ConfigKey(
            "unclean.leader.election.enable",
            "unclean_leader_election_enable",
            _parse_bool,
            False,
            "ReplicationConfigs",
            ("broker.partition:TopicSettings.unclean_leader_election_enable",),
        ),
        ConfigKey(
            "transaction.state.log.replication.factor",
            "transaction_state_log_replication_factor",
            _int(1, 32767),
            3,
            "TransactionLogConfig",
            ("cluster:ClusterSettings.transaction_state_replication_factor",),
        ),
        ConfigKey(
            "transaction.state.log.min.isr",
            "transaction_state_log_min_isr",
            _int(1, 32767),
            2,
            "TransactionLogConfig",
            ("cluster:ClusterSettings.transaction_state_min_isr",),
        ),
        ConfigKey(
            "offsets.topic.replication.factor",
            "offsets_topic_replication_factor",
            _int(1, 32767),
            3,
            "GroupCoordinatorConfig",
            ("cluster:ClusterSettings.offsets_replication_factor",),
        ),
        # Log housekeeping (LogManager, UnifiedLog) and the broker-wide defaults of the topic
        # configs below.
        ConfigKey(
            "log.retention.check.interval.ms",
            "log_retention_check_interval_ms",
            _long(1),
            300_000,
            "ServerLogConfigs",
            ("broker.log_manager:LogManagerSettings.log_retention_check_interval_ms",),
        ),
        ConfigKey(
            "log.initial.task.delay.ms",
            "log_initial_task_delay_ms",
            _long(0),
            30_000,
            "ServerLogConfigs",
            ("broker.log_manager:LogManagerSettings.log_initial_task_delay_ms",),
        ),
        ConfigKey(
            "producer.id.expiration.ms",
            "producer_id_expiration_ms",
            _int(1),
            86_400_000,
            "TransactionLogConfig",
            ("broker.log_manager:LogManagerSettings.producer_id_expiration_ms",),
        ),
        ConfigKey(
            "producer.id.expiration.check.interval.ms",
            "producer_id_expiration_check_interval_ms",
            _int(1),
            600_000,
            "TransactionLogConfig",
            ("broker.log_manager:LogManagerSettings.producer_id_expiration_check_interval_ms",),
        ),
        # What a topic's log keeps (LogConfig; retention: None is -1, no limit).
        ConfigKey(
            "log.retention.ms",
            "retention_ms",
            _broker_retention_ms,
            604_800_000,
            "ServerLogConfigs (log.retention.hours: 168)",
            ("broker.log:LogConfig.retention_ms",),
        ),
        ConfigKey(
            "log.retention.bytes",
            "retention_bytes",
            _unlimited_below_zero(-(2**63)),
            None,
            "ServerLogConfigs",
            ("broker.log:LogConfig.retention_bytes",),
        ),
        ConfigKey(
            "log.segment.bytes",
            "segment_bytes",
            _int(MIN_SEGMENT_BYTES),
            1_073_741_824,
            "ServerLogConfigs",
            ("broker.log:LogConfig.segment_bytes",),
        ),
        ConfigKey(
            "log.roll.ms",
            "segment_ms",
            _long(1),
            604_800_000,
            "ServerLogConfigs (log.roll.hours: 168)",
            ("broker.log:LogConfig.segment_ms",),
        ),
        # A leader's own retries of an implicit add answered CONCURRENT_TRANSACTIONS
        # (KAFKA-18654; rules.add_partitions_server_retry), Kafka 4.0+.
        ConfigKey(
            "add.partitions.to.txn.retry.backoff.ms",
            "add_partitions_to_txn_retry_backoff_ms",
            _int(1),
            20,
            "AddPartitionsToTxnConfig",
            ("broker.broker:BrokerSettings.add_partitions_retry_backoff_ms",),
        ),
        ConfigKey(
            "add.partitions.to.txn.retry.backoff.max.ms",
            "add_partitions_to_txn_retry_backoff_max_ms",
            _int(0),
            100,
            "AddPartitionsToTxnConfig",
            ("broker.broker:BrokerSettings.add_partitions_retry_max_ms",),
        ),
    )
}


def kafka_default(name: str) -> Any:
    """Kafka's default of broker config ``name`` (:data:`BROKER_KEYS`)."""
    return BROKER_KEYS[name].default


def topic_default(attr: str) -> Any:
    """The default of the topic config that sets ``attr``: the broker config's of the same
    attribute (Kafka's topic configs fall back on the broker-wide defaults)."""
    return next(k.default for k in BROKER_KEYS.values() if k.attr == attr)


# Topic configs a scenario may set under ``cluster.topics[].config`` (they override the
# broker-wide defaults of the same attributes; see :class:`ConfigKey`).
TOPIC_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "min.insync.replicas",
            "min_insync_replicas",
            _int(1),
            topic_default("min_insync_replicas"),
            "TopicConfig",
            ("broker.partition:TopicSettings.min_insync_replicas",),
        ),
        ConfigKey(
            "unclean.leader.election.enable",
            "unclean_leader_election_enable",
            _parse_bool,
            topic_default("unclean_leader_election_enable"),
            "TopicConfig",
            ("broker.partition:TopicSettings.unclean_leader_election_enable",),
        ),
        ConfigKey(
            "retention.ms",
            "retention_ms",
            _unlimited_below_zero(-1),
            topic_default("retention_ms"),
            "TopicConfig",
            ("broker.log:LogConfig.retention_ms",),
        ),
        ConfigKey(
            "retention.bytes",
            "retention_bytes",
            _unlimited_below_zero(-(2**63)),
            topic_default("retention_bytes"),
            "TopicConfig",
            ("broker.log:LogConfig.retention_bytes",),
        ),
        ConfigKey(
            "segment.bytes",
            "segment_bytes",
            _int(MIN_SEGMENT_BYTES),
            topic_default("segment_bytes"),
            "TopicConfig",
            ("broker.log:LogConfig.segment_bytes",),
        ),
        ConfigKey(
            "segment.ms",
            "segment_ms",
            _long(1),
            topic_default("segment_ms"),
            "TopicConfig",
            ("broker.log:LogConfig.segment_ms",),
        ),
    )
}


@dataclass(slots=True)
class BrokerConfig:
    """Broker configs, Kafka's defaults (:data:`BROKER_KEYS`; ``log.flush.*``: never, None here);
    ``group.consumer.assignment.interval.ms``'s depends on the Kafka version
    (:func:`broker_config_for` starts from it)."""

    replica_lag_time_max_ms: int = kafka_default("replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: int = kafka_default("replica.fetch.wait.max.ms")
    replica_fetch_backoff_ms: int = kafka_default("replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = kafka_default("replica.socket.timeout.ms")
    # The broker's threads (read by the resource model, cluster.resources).
    num_network_threads: int = kafka_default("num.network.threads")
    num_io_threads: int = kafka_default("num.io.threads")
    queued_max_requests: int = kafka_default("queued.max.requests")
    num_replica_fetchers: int = kafka_default("num.replica.fetchers")
    broker_session_timeout_ms: int = kafka_default("broker.session.timeout.ms")
    broker_heartbeat_interval_ms: int = kafka_default("broker.heartbeat.interval.ms")
    log_flush_interval_messages: int | None = kafka_default("log.flush.interval.messages")
    log_flush_interval_ms: int | None = kafka_default("log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int | None = kafka_default("log.flush.scheduler.interval.ms")
    min_insync_replicas: int = kafka_default("min.insync.replicas")
    unclean_leader_election_enable: bool = kafka_default("unclean.leader.election.enable")
    # The internal topics (KafkaConfig / TransactionLogConfig / GroupCoordinatorConfig
    # defaults); __consumer_offsets takes the broker's min.insync.replicas.
    transaction_state_log_replication_factor: int = kafka_default(
        "transaction.state.log.replication.factor"
    )
    transaction_state_log_min_isr: int = kafka_default("transaction.state.log.min.isr")
    offsets_topic_replication_factor: int = kafka_default("offsets.topic.replication.factor")
    # Log housekeeping (ServerLogConfigs, TransactionLogConfig).
    log_retention_check_interval_ms: int = kafka_default("log.retention.check.interval.ms")
    log_initial_task_delay_ms: int = kafka_default("log.initial.task.delay.ms")
    producer_id_expiration_ms: int = kafka_default("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = kafka_default(
        "producer.id.expiration.check.interval.ms"
    )
    # What a topic's log keeps (LogConfig; retention: None is -1, no limit).
    retention_ms: int | None = kafka_default("log.retention.ms")
    retention_bytes: int | None = kafka_default("log.retention.bytes")
    segment_bytes: int = kafka_default("log.segment.bytes")
    segment_ms: int = kafka_default("log.roll.ms")
    # AddPartitionsToTxnConfig (Kafka 4.0+): the backoff between a leader's own retries of an
    # implicit add, and how long it retries (capped by the broker's request.timeout.ms).
    add_partitions_to_txn_retry_backoff_ms: int = kafka_default(
        "add.partitions.to.txn.retry.backoff.ms"
    )
    add_partitions_to_txn_retry_backoff_max_ms: int = kafka_default(
        "add.partitions.to.txn.retry.backoff.max.ms"
    )
    # GroupCoordinatorConfig: the classic groups' session timeout bounds and the delay of an
    # empty group's first rebalance.
    group_min_session_timeout_ms: int = kafka_default("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = kafka_default("group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = kafka_default("group.initial.rebalance.delay.ms")
    # The consumer groups' (KIP-848) session and heartbeat interval, with their bounds.
    group_consumer_session_timeout_ms: int = kafka_default("group.consumer.session.timeout.ms")
    group_consumer_min_session_timeout_ms: int = kafka_default(
        "group.consumer.min.session.timeout.ms"
    )
    group_consumer_max_session_timeout_ms: int = kafka_default(
        "group.consumer.max.session.timeout.ms"
    )
    group_consumer_heartbeat_interval_ms: int = kafka_default(
        "group.consumer.heartbeat.interval.ms"
    )
    group_consumer_min_heartbeat_interval_ms: int = kafka_default(
        "group.consumer.min.heartbeat.interval.ms"
    )
    group_consumer_max_heartbeat_interval_ms: int = kafka_default(
        "group.consumer.max.heartbeat.interval.ms"
    )
    # KIP-1263: the least time between a consumer group's target assignments; its default
    # is the Kafka version's (broker_config_for).
    group_consumer_assignment_interval_ms: int = kafka_default(
        "group.consumer.assignment.interval.ms"
    )


def broker_config_for(rules: ProtocolRules) -> BrokerConfig:
    """Kafka's broker defaults in the version ``rules`` model: :class:`BrokerConfig`'s, but
    for a config whose default changed between the modelled versions, which is a rule, as
    ``linger.ms``'s is for the producer (:func:`parse_producer_config`):
    ``group.consumer.assignment.interval.ms`` (KIP-1263, Kafka 4.3)."""
    return BrokerConfig(
        group_consumer_assignment_interval_ms=rules.consumer_assignment_interval_ms_default
    )


def parse_named_config(
    raw: Mapping[str, object], keys: Mapping[str, ConfigKey], target: Any, what: str
) -> Any:
    """Set ``target``'s attributes from Kafka-named ``raw`` keys of ``keys``."""
    for key, value in raw.items():
        spec = keys.get(key)
        if spec is None:
            raise ConfigException(key, value, f"unknown {what} configuration")
        setattr(target, spec.attr, spec.parse(key, value))
    return target
