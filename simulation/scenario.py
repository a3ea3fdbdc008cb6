"""Scenario files: schema, loading, validation errors and ``--set`` overrides.

A scenario is YAML describing a cluster, producers (configured under Kafka's own key names),
their workloads, the network, faults and an ``expect:`` block. Loading is safe YAML plus a
pydantic schema. Every problem becomes a :class:`ScenarioError` with one line of text naming
the file, the path inside it (with the YAML line when known) and what would be valid: the
closest key for a misspelling, the allowed range for a bad number. Validation also resolves
every application's effective client configuration (:attr:`Scenario.clients`), which a run
then uses as it is, so a configuration a run could not use is a validation error.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from eosim.simulation.conditions import RUNS, Condition, condition_error
from eosim.simulation.config import (
    BROKER_KEYS,
    MAX_INT,
    PRODUCER_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigException,
    ProducerConfig,
    Unsafe,
    broker_config_for,
    parse_producer_config,
)
from eosim.simulation.consumer.consumer_coordinator import GroupRebalanceConfig
from eosim.simulation.faults import KIND_NAMES, shape_error, target_error
from eosim.simulation.protocol import CONTROLLER, TopicPartition
from eosim.simulation.resources import CostSpec, Resources
from eosim.simulation.rules import DEFAULT_VERSION, VERSIONS, ProtocolRules


class ScenarioError(ValueError):
    """A bad scenario, override or value; its text is one line meant for the user."""


# -- durations ------------------------------------------------------------------------------
_UNITS = {
    "ms": 1.0,
    "s": 1000.0,
    "m": 60_000.0,
    "min": 60_000.0,
    "h": 3_600_000.0,
    "d": 86_400_000.0,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")


def parse_duration_ms(value: object) -> float:
    """``250`` or ``"250ms"`` -> 250.0; ``"1.5s"`` -> 1500.0. Plain numbers are milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 2s, 1m or 7d")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite duration, got {value!r}")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2) or "ms"]
    raise ValueError(f"expected a duration such as 500ms, 2s, 1m or 7d, got {value!r}")


Duration = Annotated[float, BeforeValidator(parse_duration_ms)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class _Model(BaseModel):
    # No inf or nan anywhere: YAML's .inf and .nan are numbers, but no setting means them.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# -- cluster and network --------------------------------------------------------------------
class DurationRange(_Model):
    min: Duration
    max: Duration

    @model_validator(mode="after")
    def _ordered(self) -> DurationRange:
        if self.max < self.min:
            raise ValueError("max must be at least min")
        return self


class Topic(_Model):
    name: str = Field(min_length=1)
    partitions: int = Field(ge=1, le=10_000)
    # Kafka's default.replication.factor is 1; at most the number of brokers.
    replication_factor: int = Field(default=1, ge=1, le=1000)
    # Topic configs under Kafka's names (min.insync.replicas, unclean.leader.election.enable).
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("config")
    @classmethod
    def _known_topic_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        for key in config:
            if key not in TOPIC_KEYS and key in BROKER_KEYS:
                raise _KeyError(
                    key, f"{key!r} is a broker config, not a topic config: set it in cluster.config"
                )
        _check_named(config, TOPIC_KEYS)
        return config


def _check_named(config: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
    for key, value in config.items():
        spec = keys.get(key)
        if spec is None:
            raise _UnknownKey(key, keys)
        try:
            spec.parse(key, value)
        except ConfigException as exc:
            raise _KeyError(key, str(exc)) from None


class Cluster(_Model):
    brokers: int = Field(default=1, ge=1, le=1000)
    # What a broker spends on one request. 0.25 ms, with the network's default latency below,
    # fits Kafka 4.1.1 on one machine (docs/calibration.md, case 5).
    request_time_ms: float = Field(default=0.25, ge=0.0)
    # How long loading a coordinator partition takes.
    coordinator_load: Duration = 50.0
    # Broker configs under Kafka's names (replica.lag.time.max.ms, broker.session.timeout.ms,
    # log.flush.interval.messages, min.insync.replicas, ...): defaults for every topic.
    config: dict[str, Any] = Field(default_factory=dict)
    # How long the operating system leaves written pages dirty before writing them back on
    # its own (Linux: vm.dirty_expire_centisecs, 30 s): what a power loss can take.
    os_writeback: Duration = Field(default=30_000.0, ge=0.0)
    # How long a restarted broker process takes from the machine being up to registering with
    # the controller and replaying the metadata log (JVM start, log loading, the raft client).
    # A guess until measured against a real Kafka; the session timeout usually matters more:
    # a broker that comes back sooner waits for the controller to fence its previous self.
    broker_startup: Duration = Field(default=2_000.0, ge=0.0)
    # How long after a broker's process is killed its peers see its connections reset. The
    # kernel tears a killed process down memory first and sockets last; until then what
    # clients send on an open connection is taken into its buffer and never answered, and a
    # connect completes. Drawn per crash ({min, max}: uniform). 0: at once (the model before
    # 2026-11-29, docs/model.md departure 17); Kafka 4.1.1 on the calibration machine: see
    # docs/calibration.md, "A crashed broker's sockets".
    crash_reset: Duration | DurationRange = 0.0
    # transactional.id.expiration.ms (default 7 days), how often expired ids are removed
    # (transaction.remove.expired.transaction.cleanup.interval.ms, 1 hour) and how often open
    # transactions are checked against their timeout
    # (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s).
    # Kafka defines all three as int milliseconds, at least 1 (TransactionStateManagerConfig).
    transactional_id_expiration: Duration = Field(default=604_800_000.0, ge=1.0, le=MAX_INT)
    transactional_id_cleanup_interval: Duration = Field(default=3_600_000.0, ge=1.0, le=MAX_INT)
    transaction_abort_check_interval: Duration = Field(default=10_000.0, ge=1.0, le=MAX_INT)
    topics: list[Topic] = Field(min_length=1)
    # The resource model (hosts and cores, threads, service times, GC, warm-up:
    # eosim.simulation.resources); None: unbounded, one request at a time per broker at
    # request_time_ms.
    resources: Resources | None = None

    @field_validator("topics")
    @classmethod
    def _unique_topics(cls, topics: list[Topic]) -> list[Topic]:
        names = [t.name for t in topics]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"topic {name!r} is defined twice")
        return topics

    @field_validator("config")
    @classmethod
    def _known_broker_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        _check_named(config, BROKER_KEYS)
        return config

    @model_validator(mode="after")
    def _replication_fits(self) -> Cluster:
        config = self.broker_config()
        self._below(
            "broker.heartbeat.interval.ms",
            config.broker_heartbeat_interval_ms,
            "broker.session.timeout.ms",
            config.broker_session_timeout_ms,
            "must be below {other} ({high}), or every broker is fenced between heartbeats",
            strict=True,
        )
        # KafkaConfig.validateValues refuses both (the broker does not start).
        for other, high in (
            ("replica.socket.timeout.ms", config.replica_socket_timeout_ms),
            ("replica.lag.time.max.ms", config.replica_lag_time_max_ms),
        ):
            self._below(
                "replica.fetch.wait.max.ms",
                config.replica_fetch_wait_max_ms,
                other,
                high,
                "must be at most {other} ({high}); Kafka refuses to start a broker otherwise",
                strict=False,
            )
        # GroupCoordinatorConfig's requirements for the consumer groups (KIP-848).
        refused = "must be {relation} {other} ({high}); Kafka refuses to start a broker otherwise"
        for key, value, other, high, strict in (
            (
                "group.consumer.min.session.timeout.ms",
                config.group_consumer_min_session_timeout_ms,
                "group.consumer.session.timeout.ms",
                config.group_consumer_session_timeout_ms,
                False,
            ),
            (
                "group.consumer.session.timeout.ms",
                config.group_consumer_session_timeout_ms,
                "group.consumer.max.session.timeout.ms",
                config.group_consumer_max_session_timeout_ms,
                False,
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                config.group_consumer_min_heartbeat_interval_ms,
                "group.consumer.heartbeat.interval.ms",
                config.group_consumer_heartbeat_interval_ms,
                False,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                config.group_consumer_heartbeat_interval_ms,
                "group.consumer.max.heartbeat.interval.ms",
                config.group_consumer_max_heartbeat_interval_ms,
                False,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                config.group_consumer_heartbeat_interval_ms,
                "group.consumer.session.timeout.ms",
                config.group_consumer_session_timeout_ms,
                True,
            ),
        ):
            relation = "below" if strict else "at most"
            self._below(key, value, other, high, refused.replace("{relation}", relation), strict)
        for i, topic in enumerate(self.topics):
            if topic.replication_factor > self.brokers:
                raise _PathError(
                    ("cluster", "topics", i, "replication_factor"),
                    f"{topic.replication_factor} is more than the {self.brokers} broker(s)",
                )
        return self

    def _below(
        self, key: str, value: int, other: str, high: int, reason: str, strict: bool
    ) -> None:
        """``key``'s value must be below (``strict``) or at most ``other``'s; the error names
        the one of the two the scenario sets (``key`` when it sets both)."""
        if value < high or (value == high and not strict):
            return
        if key in self.config or other not in self.config:
            message = f"{value} " + reason.format(other=other, high=high)
            raise _PathError(("cluster", "config", key), message)
        relation = "above" if strict else "at least"
        raise _PathError(("cluster", "config", other), f"{high} must be {relation} {key} ({value})")

    def broker_config(self, rules: ProtocolRules | None = None) -> BrokerConfig:
        """The broker configs, Kafka's defaults where the scenario says nothing: those of the
        Kafka version ``rules`` model (:func:`broker_config_for`; None: the registry's)."""
        config = BrokerConfig() if rules is None else broker_config_for(rules)
        for key, value in self.config.items():
            setattr(config, BROKER_KEYS[key].attr, BROKER_KEYS[key].parse(key, value))
        return config

    def topic_config(self, topic: Topic) -> BrokerConfig:
        """A topic's effective configs: its own over the broker-wide defaults."""
        config = self.broker_config()
        for key, value in topic.config.items():
            setattr(config, TOPIC_KEYS[key].attr, TOPIC_KEYS[key].parse(key, value))
        return config


class Latency(_Model):
    """One message's time on a link, from its send to its handling: the network and what the
    two processes spend on it. The default (lognormal, median 0.25 ms, sigma 0.9) is fitted to
    Kafka 4.1.1 on one machine, loopback between JVMs (docs/calibration.md, case 5: produce
    latency p50 and p99 with acks=1 and acks=all); a network between machines adds its own
    one-way time (about 0.1 ms within a zone, 0.5-1 ms across zones). Under the resource
    model, which books the processes' part on their hosts, ``cluster.resources.wire`` takes
    its place unless the scenario sets ``network.latency`` itself."""

    distribution: Literal["constant", "uniform", "exponential", "lognormal"] = "lognormal"
    value_ms: float = Field(default=1.0, ge=0.0)
    low_ms: float = Field(default=0.5, ge=0.0)
    high_ms: float = Field(default=1.5, ge=0.0)
    mean_ms: float = Field(default=1.0, ge=0.0)
    median_ms: float = Field(default=0.25, ge=0.0)
    sigma: float = Field(default=0.9, ge=0.0, le=5.0)


class NetworkSpec(_Model):
    latency: Latency = Latency()
    request_loss: Probability = 0.0
    response_loss: Probability = 0.0
    loss_model: Literal["connection", "message"] = "connection"
    dead_connection_reset: Duration = 30_000.0
    in_flight_after_close: Literal["deliver", "until_reset", "drop"] = Field(
        default="until_reset",
        description="requests already sent on a connection the client closes: "
        "until_reset (Kafka's broker, the default: handled one at a time until an answer's "
        "send fails on the reset the closed socket sends back), deliver (every one handled, "
        "as TCP delivers them) or drop",
    )
    # Loss that TCP repairs: a message is retransmitted, not dropped (see docs/model.md).
    packet_loss: Probability = 0.0
    # The first retransmission timeout; Linux's is the round trip plus its 200 ms minimum
    # (TCP_RTO_MIN), RFC 6298's before any round trip is measured 1 s. It doubles per retry.
    retransmission_timeout: Duration = Field(default=200.0, gt=0.0, le=120_000.0)


# -- producers ------------------------------------------------------------------------------
class Workload(_Model):
    topic: str
    records: int = Field(ge=0, le=100_000_000)
    rate: float = Field(default=1000.0, gt=0.0, description="records per second")
    arrival: Literal["constant", "poisson"] = "constant"
    keys: int | None = Field(default=None, ge=1, description="distinct keys; null = no key")
    partition: int | None = Field(default=None, ge=0)
    value_bytes: int = Field(default=100, ge=0, le=10_000_000)
    start: Duration = 0.0
    on_restart: Literal["resend_unacked", "continue"] = "resend_unacked"


class Producer(_Model):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    config: dict[str, Any] = Field(default_factory=dict)
    workload: Workload

    @field_validator("config")
    @classmethod
    def _known_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        for key in config:
            if key not in PRODUCER_KEYS:
                raise _UnknownKey(key, list(PRODUCER_KEYS))
        return config


class _KeyError(ValueError):
    """A bad value of ``key`` inside the mapping being validated (a Kafka config key)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


class _UnknownKey(ValueError):
    def __init__(self, key: str, valid: Iterable[str]) -> None:
        self.key = key
        close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(f"unknown key {key!r}{hint}")


# -- transactional applications -----------------------------------------------------------
class TxnWorkload(_Model):
    topic: str
    transactions: int = Field(ge=0, le=10_000_000)
    size: int = Field(default=5, ge=1, le=10_000, description="records per transaction")
    rate: float = Field(default=50.0, gt=0.0, description="transactions per second")
    abort_probability: Probability = 0.0
    keys: int | None = Field(default=None, ge=1)
    value_bytes: int = Field(default=100, ge=0, le=10_000_000)
    start: Duration = 0.0


class TransactionalProducer(_Model):
    """A Jepsen-style transactional writer: begin, send ``size`` records, commit or abort."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    config: dict[str, Any] = Field(default_factory=dict)
    workload: TxnWorkload

    _known_keys = field_validator("config")(Producer._known_keys.__func__)  # type: ignore[attr-defined]


# auto.offset.reset: where a consumer starts on a partition its group has no committed offset
# for (and after OFFSET_OUT_OF_RANGE); Kafka's key and default.
OffsetReset = Literal["latest", "earliest", "none"]
_AUTO_OFFSET_RESET = "auto.offset.reset"


class ProcessorInput(_Model):
    topic: str
    group: str | None = None
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    auto_offset_reset: OffsetReset = Field(default="latest", alias=_AUTO_OFFSET_RESET)
    # subscribe(): the processors of the group are its members (the classic protocol), and
    # the group's leader assigns the partitions; otherwise they split them with assign().
    subscribe: bool = False
    # The consumer's group settings (ConsumerConfig's keys and defaults).
    session_timeout: Duration = Field(default=45_000.0, gt=0.0, alias="session.timeout.ms")
    heartbeat_interval: Duration = Field(default=3_000.0, gt=0.0, alias="heartbeat.interval.ms")
    max_poll_interval: Duration = Field(default=300_000.0, gt=0.0, alias="max.poll.interval.ms")
    assignment_strategy: list[str] = Field(
        default_factory=lambda: ["range", "cooperative-sticky"],
        alias="partition.assignment.strategy",
    )
    group_instance_id: str | None = Field(default=None, alias="group.instance.id")
    leave_group_on_close: bool = Field(default=True, alias="internal.leave.group.on.close")
    # group.protocol: classic (the default) or consumer (KIP-848: the coordinator assigns,
    # the session and heartbeat interval are the broker's group.consumer.* settings).
    group_protocol: Literal["classic", "consumer"] = Field(
        default="classic", alias="group.protocol"
    )

    @model_validator(mode="after")
    def _consumer_protocol_keys(self) -> ProcessorInput:
        """ConsumerConfig refuses the classic protocol's own keys under group.protocol=
        consumer (checkUnsupportedConfigsPostProcess); static membership under it is not
        modelled."""
        if self.group_protocol != "consumer":
            return self
        if not self.subscribe:
            raise ValueError("group.protocol: consumer needs subscribe: true")
        refused = {
            "session_timeout": "session.timeout.ms",
            "heartbeat_interval": "heartbeat.interval.ms",
            "assignment_strategy": "partition.assignment.strategy",
        }
        for attr, key in refused.items():
            if attr in self.model_fields_set:
                raise ValueError(
                    f"{key} is not supported with group.protocol: consumer (the broker's "
                    "group.consumer.* settings and its assignor apply)"
                )
        if self.group_instance_id is not None:
            raise ValueError("group.instance.id with group.protocol: consumer is not modelled")
        return self


# The consumer keys a scenario spells as Kafka does (dotted), for --set paths.
_CONSUMER_KEYS = frozenset(
    f.alias for f in ProcessorInput.model_fields.values() if f.alias and "." in f.alias
)
# ProcessorInput's group keys (left out of a scenario's digest while at their defaults).
_GROUP_INPUT_KEYS = (
    "subscribe",
    "session_timeout",
    "heartbeat_interval",
    "max_poll_interval",
    "assignment_strategy",
    "group_instance_id",
    "leave_group_on_close",
    "group_protocol",
)


class ProcessorOutput(_Model):
    topic: str | None = None
    store: Literal["append", "dedup", "version"] | None = None

    @model_validator(mode="after")
    def _one(self) -> ProcessorOutput:
        if (self.topic is None) == (self.store is None):
            raise ValueError("give exactly one of 'topic' (a Kafka topic) or 'store' (a sink)")
        return self


class Processor(_Model):
    """A consume-transform-produce application (or, with ``output.store``, a sink)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    input: ProcessorInput
    output: ProcessorOutput
    transactional: bool = True
    # When a non-transactional processor commits its input offsets: after its output is
    # flushed, before it is written, or automatically (enable.auto.commit) every
    # auto_commit_interval (auto.commit.interval.ms) from within poll, and on close.
    commit: Literal["after_output", "before_output", "auto"] = "after_output"
    auto_commit_interval: Duration = Field(default=5_000.0, gt=0.0)
    batch: int = Field(default=10, ge=1, le=100_000, description="records per transaction")
    poll_interval: Duration = 20.0
    # How long processing one input record takes (a constant, or uniform in [min, max]);
    # a batch that takes longer than max.poll.interval.ms costs a subscribed processor its
    # place in the group.
    processing: Duration | DurationRange = 0.0
    # When the processor's first instance starts: later than 0, a member that joins its group
    # while the others run (scaling out).
    start: Duration = Field(default=0.0, ge=0.0)
    # How a transactional processor deploys exactly-once: one transactional.id per instance,
    # fenced by the group's generation or member epoch (KIP-447, Kafka Streams' EOS v2), or
    # one per input partition, "<group>-<topic>-<partition>" (the same in every member),
    # fenced by the next owner's initTransactions (Streams' EOS v1; removed in Kafka 4.0).
    transactional_id_per: Literal["instance", "partition"] = "instance"
    config: dict[str, Any] = Field(default_factory=dict)

    _known_keys = field_validator("config")(Producer._known_keys.__func__)  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _consistent(self) -> Processor:
        if self.transactional and self.output.store is not None:
            raise ValueError("a sink to an external store cannot be transactional")
        if self.transactional and self.commit != "after_output":
            raise ValueError("a transactional processor commits offsets with its output")
        if self.transactional_id_per == "partition" and not self.transactional:
            raise ValueError("transactional_id_per: partition needs transactional: true")
        return self


class Consumer(_Model):
    """A reader that polls a topic and records what it saw."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    topic: str
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    poll_interval: Duration = 50.0
    auto_offset_reset: OffsetReset = Field(default="latest", alias=_AUTO_OFFSET_RESET)


# -- faults ---------------------------------------------------------------------------------
# The kinds a fault may be, in their declaration order (simulation/faults.py declares each).
FaultKind = Literal[KIND_NAMES]  # type: ignore[valid-type]


class Fault(_Model):
    kind: FaultKind
    nodes: list[str] = Field(default_factory=list)
    groups: list[list[str]] | None = None
    links: list[tuple[str, str]] = Field(default_factory=list, description="[src, dst] pairs")
    at: Duration | None = None
    rate: float | None = Field(default=None, gt=0.0, description="occurrences per second")
    # Periodic: at start + every, start + 2*every, ... before end, one node of `nodes` each
    # time, in the listed order (a rolling restart).
    every: Duration | None = None
    start: Duration = 0.0
    end: Duration | None = None
    # Every kind but delete_records (instantaneous) lasts a while.
    duration: Duration | DurationRange | None = None
    extra_latency: Duration = 0.0
    probability: Probability = 0.0
    point: str | None = None
    occurrence: int = Field(default=1, ge=1)
    # delete_records: the partition (None: every partition of the topic) and the offset below
    # which its records go (-1: the high watermark), as an administrator's DeleteRecords.
    topic: str | None = None
    partition: int | None = Field(default=None, ge=0)
    offset: int = Field(default=-1, ge=-1)

    @model_validator(mode="after")
    def _shape(self) -> Fault:
        """The shape its kind's declaration asks for
        (:func:`eosim.simulation.faults.shape_error`)."""
        problem = shape_error(self)
        if problem is not None:
            raise ValueError(problem)
        return self


# -- the scenario ---------------------------------------------------------------------------
# Ranges of the integer protocol rules (default [0, MAX_INT]); the other rules are switches.
_RULE_RANGES: dict[str, tuple[int, int]] = {
    "producer_state_cached_batches": (1, 1_000),
    "transaction_version": (0, 2),
    "transaction_max_timeout_ms": (1, MAX_INT),
    # group.consumer.assignment.interval.ms's range (BROKER_KEYS).
    "consumer_assignment_interval_ms_default": (0, 15_000),
}


# The rules that take one of a few names.
_RULE_CHOICES: dict[str, tuple[str, ...]] = {
    "truncation": ("leader_epoch", "leader_epoch_kip101", "high_watermark")
}


class Kafka(_Model):
    version: Literal["3.9", "4.0", "4.1", "4.4"] = DEFAULT_VERSION  # type: ignore[assignment]
    rules: dict[str, Any] = Field(default_factory=dict)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, version: Any) -> Any:
        # `version: 4.0` in YAML (or `--set kafka.version=4.0`) is a number; mean the text.
        return f"{version:.1f}" if isinstance(version, float) else version

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, rules: dict[str, Any]) -> dict[str, Any]:
        for key, value in rules.items():
            if key not in ProtocolRules.names():
                raise _UnknownKey(key, ProtocolRules.names())
            if isinstance(getattr(VERSIONS[DEFAULT_VERSION], key), bool):
                if not isinstance(value, bool):
                    raise _PathError(("kafka", "rules", key), "expected true or false")
                continue
            if key in _RULE_CHOICES:
                if value not in _RULE_CHOICES[key]:
                    choices = ", ".join(_RULE_CHOICES[key])
                    raise _PathError(("kafka", "rules", key), f"expected one of {choices}")
                continue
            low, high = _RULE_RANGES.get(key, (0, MAX_INT))
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise _PathError(("kafka", "rules", key), f"expected an integer in [{low}, {high}]")
        return rules

    def protocol_rules(self) -> ProtocolRules:
        return VERSIONS[self.version].with_overrides(self.rules)


class UnsafeSpec(_Model):
    idempotence_with_max_in_flight_above_5: bool = False
    idempotence_without_acks_all: bool = False
    idempotence_without_retries: bool = False
    delivery_timeout_below_linger_plus_request_timeout: bool = False

    def to_unsafe(self) -> Unsafe:
        return Unsafe(**self.model_dump())


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """A Kafka consumer's effective settings: isolation.level, group.id (None: no group),
    auto.commit.interval.ms (None: enable.auto.commit=false), its assigned partitions and
    auto.offset.reset."""

    isolation: str
    group: str | None
    auto_commit_interval_ms: float | None
    partitions: tuple[TopicPartition, ...]
    auto_offset_reset: str = "latest"
    # subscribe(): the group membership settings (None: the partitions are assigned).
    rebalance: GroupRebalanceConfig | None = None


@dataclass(frozen=True)
class ClientConfigs:
    """Every application's effective client configuration, resolved once from a scenario.

    ``producers`` holds the effective :class:`ProducerConfig` of each application with a
    Kafka producer (producers, transactional producers, then processors that write to a
    topic), including the transactional.id the application gives itself; ``consumers`` the
    settings of each processor's and reader's consumer. ``eosim validate`` and a run use
    the same object, so a configuration a run cannot use is a validation error.
    """

    producers: dict[str, ProducerConfig]
    consumers: dict[str, ConsumerSettings]

    @property
    def warnings(self) -> list[str]:
        return [f"{name}: {w}" for name, c in self.producers.items() for w in c.warnings]


# How many occurrences a random fault may be expected to have, and a periodic one may have
# (they are realised before the run).
MAX_RANDOM_FAULTS = 1_000_000
# The longest recovery window a scenario gets without asking for it (``recovery:``): the
# default window is the longest transaction.timeout.ms plus two abort checks, and a quiet
# cluster still costs events every simulated second, so an abort check interval of weeks
# (Kafka allows up to 2^31-1 ms) would make a short run simulate weeks.
MAX_DEFAULT_RECOVERY_MS = 3_600_000.0
# The default of Scenario.max_records: about 1.4 GB at the peak of a run that holds every record
# outstanding at once (about 300 bytes a record, more with replication: docs/performance.md),
# less for most runs.
MAX_RECORDS = 5_000_000

ExpectValue = int | str
# The controller's node name, a fault target like the brokers.
CONTROLLER_NODE = CONTROLLER


class Scenario(_Model):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=1, ge=0)
    duration: Duration = 600_000.0
    settle: Duration = 1_000.0
    # After settle and recovery, how long the run may wait for the cluster to come to rest
    # (every broker serving, every partition led, every replica caught up) before judging it.
    converge_timeout: Duration = 120_000.0
    kafka: Kafka = Kafka()
    cluster: Cluster
    network: NetworkSpec = NetworkSpec()
    producers: list[Producer] = Field(default_factory=list)
    transactional_producers: list[TransactionalProducer] = Field(default_factory=list)
    processors: list[Processor] = Field(default_factory=list)
    consumers: list[Consumer] = Field(default_factory=list)
    # Fault-free time after the workload, so timed-out transactions are aborted before the
    # final drain; default: transaction.timeout.ms plus two abort checks when there are
    # transactional applications, else 0.
    recovery: Duration | None = None
    # The most records a run may write (producers' records plus transactional producers'
    # transactions times their size): a run holds every record, in its logs and its history,
    # until it ends (docs/performance.md, "Memory"), so a larger run is refused up front.
    max_records: int = Field(default=MAX_RECORDS, ge=1)
    faults: list[Fault] = Field(default_factory=list)
    unsafe: UnsafeSpec = UnsafeSpec()
    expect: dict[str, ExpectValue] = Field(default_factory=dict)
    # What a sweep of this scenario must show across its runs (eosim sweep); one run ignores it.
    expect_sweep: dict[str, ExpectValue] = Field(default_factory=dict)
    _clients: ClientConfigs | None = PrivateAttr(default=None)

    @field_validator("expect")
    @classmethod
    def _conditions(cls, expect: dict[str, ExpectValue]) -> dict[str, ExpectValue]:
        for key, value in expect.items():
            problem = condition_error(value)
            if problem is None and Condition.parse(value).unit == RUNS:
                problem = (
                    f"{value!r} is a share of runs, which one run cannot judge; "
                    "put it under expect_sweep:"
                )
            if problem is not None:
                raise ValueError(f"{key}: {problem}")
        return expect

    @field_validator("expect_sweep")
    @classmethod
    def _sweep_conditions(cls, expect: dict[str, ExpectValue]) -> dict[str, ExpectValue]:
        for key, value in expect.items():
            problem = condition_error(value)
            if problem is not None:
                raise ValueError(f"{key}: {problem}")
        return expect

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        topics = {t.name: t.partitions for t in self.cluster.topics}
        brokers = [f"broker-{i}" for i in range(self.cluster.brokers)]
        apps: list[tuple[str, int, str]] = [
            (section, i, a.name)
            for section in ("producers", "transactional_producers", "processors", "consumers")
            for i, a in enumerate(getattr(self, section))
        ]
        if not apps:
            raise _PathError(("producers",), "a scenario needs at least one application")
        names = [name for _s, _i, name in apps]
        for section, i, name in apps:
            if names.count(name) > 1:
                raise _PathError((section, i, "name"), f"application {name!r} is defined twice")
            if name in brokers:
                raise _PathError((section, i, "name"), f"{name!r} is a broker's name")
            if name == CONTROLLER_NODE:
                raise _PathError((section, i, "name"), f"{name!r} is the controller's name")

        def known_topic(path: tuple[str | int, ...], topic: str | None) -> None:
            if topic is not None and topic not in topics:
                raise _PathError(path, f"unknown topic {topic!r}; topics are {sorted(topics)}")

        for i, t in enumerate(self.transactional_producers):
            known_topic(("transactional_producers", i, "workload", "topic"), t.workload.topic)
        for i, proc in enumerate(self.processors):
            known_topic(("processors", i, "input", "topic"), proc.input.topic)
            known_topic(("processors", i, "output", "topic"), proc.output.topic)
            if proc.transactional_id_per == "partition" and not self.kafka.version.startswith("3."):
                raise _PathError(
                    ("processors", i, "transactional_id_per"),
                    "a transactional.id per partition (Kafka Streams' EOS v1) needs a 3.x "
                    f'preset (kafka.version: "3.9"); Kafka 4.0 removed it and the '
                    f"sendOffsetsToTransaction(offsets, groupId) it commits with, not "
                    f"{self.kafka.version}",
                )
        for i, c in enumerate(self.consumers):
            known_topic(("consumers", i, "topic"), c.topic)
        for i, f in enumerate(self.faults):
            known_topic(("faults", i, "topic"), f.topic)
            if f.topic is not None and f.partition is not None and f.partition >= topics[f.topic]:
                raise _PathError(
                    ("faults", i, "partition"),
                    f"must be in [0, {topics[f.topic] - 1}] for topic {f.topic!r}",
                )
        for i, p in enumerate(self.producers):
            w = p.workload
            if w.topic not in topics:
                raise _PathError(
                    ("producers", i, "workload", "topic"),
                    f"unknown topic {w.topic!r}; topics are {sorted(topics)}",
                )
            if w.partition is not None and w.partition >= topics[w.topic]:
                raise _PathError(
                    ("producers", i, "workload", "partition"),
                    f"must be in [0, {topics[w.topic] - 1}] for topic {w.topic!r}",
                )
        nodes = set(names) | set(brokers) | {CONTROLLER_NODE}
        # What each node is, for the kinds that hit only some (simulation/faults.py).
        roles = {n: "reader" if s == "consumers" else "application" for s, _i, n in apps}
        roles |= dict.fromkeys(brokers, "broker") | {CONTROLLER_NODE: "controller"}
        for i, f in enumerate(self.faults):
            named = list(f.nodes) + [n for g in f.groups or [] for n in g]
            named += [n for link in f.links for n in link]
            for n in named:
                if n not in nodes:
                    close = difflib.get_close_matches(n, sorted(nodes), n=1, cutoff=0.5)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    raise _PathError(("faults", i), f"unknown node {n!r}{hint}")
            for n in f.nodes:
                problem = target_error(f.kind, n, roles[n])
                if problem is not None:
                    raise _PathError(("faults", i, "nodes"), problem)
            # Random and periodic faults are realised up front, over [start, end or the
            # duration).
            window = max((f.end if f.end is not None else self.duration) - f.start, 0.0)
            if f.rate is not None:
                expected = f.rate * window / 1000.0
                if expected > MAX_RANDOM_FAULTS:
                    raise _PathError(
                        ("faults", i, "rate"),
                        f"would fire about {expected:.3g} times over its window; "
                        f"at most {MAX_RANDOM_FAULTS:,} (lower the rate or shorten the window)",
                    )
            if f.every is not None and f.every <= 0:
                raise _PathError(("faults", i, "every"), "must be a positive duration")
            if f.every is not None and f.end is not None and f.start + f.every >= f.end:
                raise _PathError(
                    ("faults", i, "every"),
                    f"never fires: its first occurrence (start + every = {f.start + f.every:g} ms)"
                    f" is not before its end ({f.end:g} ms)",
                )
            if f.every is not None and window / f.every > MAX_RANDOM_FAULTS:
                raise _PathError(
                    ("faults", i, "every"),
                    f"would fire {math.floor(window / f.every):,} times over its window; "
                    f"at most {MAX_RANDOM_FAULTS:,} (lengthen the period or shorten the window)",
                )
        return self

    @model_validator(mode="after")
    def _resolve_clients(self) -> Scenario:
        records = self.records()
        if records > self.max_records:
            raise _PathError(
                ("max_records",),
                f"the workloads write {records:,} records, above max_records "
                f"({self.max_records:,}); a run holds every record in memory until it ends "
                "(about 300 bytes each at its peak, docs/performance.md): raise max_records to "
                "run it",
            )
        self._clients = _resolve_clients(self)
        window = self.recovery_ms()
        if self.recovery is None and window > MAX_DEFAULT_RECOVERY_MS:
            raise _PathError(
                ("cluster", "transaction_abort_check_interval"),
                f"{self.cluster.transaction_abort_check_interval:.0f} ms gives a default "
                f"recovery window (the longest transaction.timeout.ms plus two abort checks) "
                f"of {window / 3_600_000:.1f} h, above the "
                f"{MAX_DEFAULT_RECOVERY_MS / 3_600_000:g} h a scenario gets without asking; "
                "set recovery: to simulate it",
            )
        return self

    def records(self) -> int:
        """The records the workloads write: every producer's records, and every
        transactional producer's transactions times their size."""
        return sum(p.workload.records for p in self.producers) + sum(
            t.workload.transactions * t.workload.size for t in self.transactional_producers
        )

    def recovery_ms(self) -> float:
        """The fault-free time after the workload: ``recovery`` when set, else, with
        transactional applications, the longest transaction.timeout.ms plus two abort checks
        (so that every transaction left open has been aborted before the final drain), else
        0."""
        if self.recovery is not None:
            return self.recovery
        producers = self.clients.producers.values()
        timeouts = [c.transaction_timeout_ms for c in producers if c.transactional_id]
        if not timeouts:
            return 0.0
        return max(timeouts) + 2 * self.cluster.transaction_abort_check_interval

    # -- derived -----------------------------------------------------------------------
    @property
    def clients(self) -> ClientConfigs:
        """The effective client configurations (resolved when the scenario was validated)."""
        if self._clients is None:  # only a model_construct()ed scenario gets here
            self._clients = _resolve_clients(self)
        return self._clients

    def warnings(self) -> list[str]:
        """What is valid but likely not meant: every client configuration's warning, then the
        configuration warnings of the scenario itself (:func:`min_isr_warnings`).
        ``eosim validate`` and ``eosim run`` print them."""
        return [*self.clients.warnings, *min_isr_warnings(self)]

    def topic_partitions(self) -> dict[str, int]:
        return {t.name: t.partitions for t in self.cluster.topics}

    def replication_factors(self) -> dict[str, int]:
        return {t.name: t.replication_factor for t in self.cluster.topics}

    def broker_names(self) -> list[str]:
        return [f"broker-{i}" for i in range(self.cluster.brokers)]

    def application_names(self) -> list[str]:
        """Every application's name: producers, transactional producers, processors and
        consumers, in that order."""
        apps = [
            *self.producers,
            *self.transactional_producers,
            *self.processors,
            *self.consumers,
        ]
        return [a.name for a in apps]

    def protocol_rules(self) -> ProtocolRules:
        return self.kafka.protocol_rules()

    def digest(self) -> str:
        data = self.model_dump(mode="json")
        # Keys added since digests were first recorded are left out while they hold their
        # defaults, so a scenario that does not use them keeps its digest (and its runs their
        # history digests).
        for fault in data["faults"]:
            if fault["every"] is None:
                del fault["every"]
            for key, default in (("topic", None), ("partition", None), ("offset", -1)):
                if fault[key] == default:
                    del fault[key]
        network = data["network"]
        for key, default in (("packet_loss", 0.0), ("retransmission_timeout", 200.0)):
            if network[key] == default:
                del network[key]
        if not data["expect_sweep"]:
            del data["expect_sweep"]
        if data["converge_timeout"] == 120_000.0:
            del data["converge_timeout"]
        if data["max_records"] == MAX_RECORDS:
            del data["max_records"]
        if data["cluster"]["broker_startup"] == 2_000.0:
            del data["cluster"]["broker_startup"]
        resources = data["cluster"]["resources"]
        if resources is None:
            del data["cluster"]["resources"]
        else:
            if resources["wire"] is None:
                del resources["wire"]
            zero = CostSpec().model_dump(mode="json")
            for key in ("client_answer", "fetch_complete"):
                if resources["service"][key] == zero:
                    del resources["service"][key]
        if data["cluster"]["crash_reset"] == 0.0:
            del data["cluster"]["crash_reset"]
        defaults = ProcessorInput(topic="-").model_dump(mode="json")
        for proc in data["processors"]:
            if proc["processing"] == 0.0:
                del proc["processing"]
            if proc["start"] == 0.0:
                del proc["start"]
            if proc["transactional_id_per"] == "instance":
                del proc["transactional_id_per"]
            for key in _GROUP_INPUT_KEYS:
                if proc["input"][key] == defaults[key]:
                    del proc["input"][key]
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _PathError(ValueError):
    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        self.path = path
        super().__init__(message)


def resolve(scenario: Scenario) -> ClientConfigs:
    """The effective client configuration of every application of ``scenario``."""
    return scenario.clients


# The one line for a plain producer with a transactional.id. Kafka's KafkaProducer.send()
# calls TransactionManager.maybeAddPartition, which throws IllegalStateException for a
# transactional producer whose initTransactions() has not completed; a plain producer
# application never calls it.
_PLAIN_WITH_TXN_ID = (
    "Kafka's send() throws IllegalStateException on a producer with a transactional.id until "
    "initTransactions() has completed, and a {what} never calls it; remove the key{hint}"
)


def min_isr_warnings(scenario: Scenario) -> list[str]:
    """A topic whose ``min.insync.replicas`` (its own, or the broker default it takes) is
    above its replication factor. Kafka accepts it (no check when a topic or the broker is
    configured). Since 3.7 a partition uses min(min.insync.replicas, its replicas)
    (``Partition.effectiveMinIsr``, KAFKA-15583; the controller's
    ``ReplicationControlManager.getTopicEffectiveMinIsr`` likewise), as the model does
    (``LeaderState.effective_min_isr``): acks=all then waits for every replica, and a single
    replica out of the ISR refuses them with NOT_ENOUGH_REPLICAS. Before 3.7 the partition
    compared the ISR with the configured value itself, so every acks=all produce failed with
    NOT_ENOUGH_REPLICAS (ProducerFailureHandlingTest.testNotEnoughReplicas, removed with
    KAFKA-15583)."""
    out = []
    default = scenario.cluster.broker_config().min_insync_replicas
    takes_default: list[Topic] = []
    for i, topic in enumerate(scenario.cluster.topics):
        rf = topic.replication_factor
        min_isr = scenario.cluster.topic_config(topic).min_insync_replicas
        if min_isr <= rf:
            continue
        if "min.insync.replicas" not in topic.config:
            takes_default.append(topic)
            continue
        out.append(
            f"cluster.topics.{i}.config.min.insync.replicas: {min_isr} is above the replication "
            f"factor of topic {topic.name!r} ({rf}). Kafka accepts it; since 3.7 it uses "
            f"min({min_isr}, {rf}) = {rf} instead{_MIN_ISR_CONSEQUENCE}"
        )
    if takes_default:
        which = ", ".join(f"{t.name!r} ({t.replication_factor})" for t in takes_default)
        out.append(
            f"cluster.config.min.insync.replicas: {default} is above the replication factor of "
            f"topic(s) {which}, which take it. Kafka accepts it; since 3.7 it uses the "
            f"replication factor instead{_MIN_ISR_CONSEQUENCE}"
        )
    return out


_MIN_ISR_CONSEQUENCE = (
    " (KAFKA-15583), so acks=all writes need every replica in the ISR (else "
    "NOT_ENOUGH_REPLICAS); before 3.7 every acks=all write failed"
)


def _resolve_clients(scenario: Scenario) -> ClientConfigs:
    rules = scenario.protocol_rules()
    unsafe = scenario.unsafe.to_unsafe()
    producers: dict[str, ProducerConfig] = {}

    def parse(section: str, i: int, raw: Mapping[str, Any]) -> ProducerConfig:
        try:
            config = parse_producer_config(raw, rules, unsafe)
        except ConfigException as exc:
            raise _PathError((section, i, "config", exc.key), str(exc)) from None
        if config.transactional_id is not None and config.max_block_ms == 0:
            # Not a Kafka rule: initTransactions() waits at most max.block.ms for a round
            # trip, so with 0 it always times out, and the application restarts at once:
            # a loop in which simulated time never advances.
            raise _PathError(
                (section, i, "config", "max.block.ms"),
                "Invalid value 0 for configuration max.block.ms: a transactional application "
                "waits at most max.block.ms for initTransactions(), which needs a round trip, "
                "and would restart forever without simulated time passing; use at least 1",
            )
        return config

    def plain(section: str, i: int, config: Mapping[str, Any], what: str, hint: str) -> None:
        if "transactional.id" in config:
            raise _PathError(
                (section, i, "config", "transactional.id"),
                _PLAIN_WITH_TXN_ID.format(what=what, hint=hint),
            )

    for i, p in enumerate(scenario.producers):
        plain(
            "producers",
            i,
            p.config,
            "plain producer",
            " or make the producer a transactional_producers entry",
        )
        producers[p.name] = parse("producers", i, p.config)
    for i, t in enumerate(scenario.transactional_producers):
        # The application uses its name as its transactional.id unless its config sets one.
        producers[t.name] = parse(
            "transactional_producers", i, {"transactional.id": t.name, **t.config}
        )
    for i, proc in enumerate(scenario.processors):
        if proc.output.topic is None:
            continue
        if proc.transactional:
            producers[proc.name] = parse(
                "processors", i, {"transactional.id": proc.name, **proc.config}
            )
        else:
            plain(
                "processors",
                i,
                proc.config,
                "non-transactional processor",
                " or set transactional: true",
            )
            producers[proc.name] = parse("processors", i, proc.config)

    topics = scenario.topic_partitions()
    consumers: dict[str, ConsumerSettings] = {}
    for i, proc in enumerate(scenario.processors):
        # The processors of one group split its input topic's partitions round-robin, or,
        # subscribed, are its members.
        group = proc.input.group or proc.name
        peers = [q for q in scenario.processors if (q.input.group or q.name) == group]
        index, count = peers.index(proc), len(peers)
        topic = proc.input.topic
        rebalance = None
        if proc.input.subscribe:
            if any(not q.input.subscribe for q in peers):
                raise _PathError(
                    ("processors", i, "input", "subscribe"),
                    f"every processor of group {group!r} must subscribe, or none",
                )
            if any(q.input.group_protocol != proc.input.group_protocol for q in peers):
                raise _PathError(
                    ("processors", i, "input", "group.protocol"),
                    f"every processor of group {group!r} must use one group.protocol "
                    "(mixed groups are not modelled)",
                )
            if _sticky_over_different_topics(peers):
                raise _PathError(
                    ("processors", i, "input", "partition.assignment.strategy"),
                    f"group {group!r} could choose cooperative-sticky while its members "
                    "subscribe to different topics (the sticky assignor's general builder is "
                    "not modelled)",
                )
            rebalance = _rebalance_config(("processors", i, "input"), group, proc.input, rules)
        consumers[proc.name] = ConsumerSettings(
            isolation=proc.input.isolation,
            group=group,
            auto_commit_interval_ms=proc.auto_commit_interval if proc.commit == "auto" else None,
            partitions=()
            if rebalance is not None
            else tuple((topic, n) for n in range(topics[topic]) if n % count == index),
            auto_offset_reset=proc.input.auto_offset_reset,
            rebalance=rebalance,
        )
    for r in scenario.consumers:
        consumers[r.name] = ConsumerSettings(
            isolation=r.isolation,
            group=None,
            auto_commit_interval_ms=None,
            partitions=tuple((r.topic, n) for n in range(topics[r.topic])),
            auto_offset_reset=r.auto_offset_reset,
        )
    return ClientConfigs(producers, consumers)


def _sticky_over_different_topics(peers: list[Processor]) -> bool:
    """Whether a classic group whose members subscribe to different topics could choose
    cooperative-sticky: it is among the assignors every member lists, and some member's first
    such assignor (its vote, ClassicGroupMember.vote) is cooperative-sticky."""
    if len({q.input.topic for q in peers}) < 2 or peers[0].input.group_protocol != "classic":
        return False
    lists = [q.input.assignment_strategy for q in peers]
    common = set(lists[0]).intersection(*lists[1:])
    votes = {next((a for a in names if a in common), None) for names in lists}
    return "cooperative-sticky" in votes


def _rebalance_config(
    path: tuple[str | int, ...], group: str, spec: ProcessorInput, rules: ProtocolRules
) -> GroupRebalanceConfig:
    try:
        return GroupRebalanceConfig(
            group_id=group,
            group_instance_id=spec.group_instance_id,
            session_timeout_ms=spec.session_timeout,
            heartbeat_interval_ms=spec.heartbeat_interval,
            rebalance_timeout_ms=spec.max_poll_interval,
            leave_group_on_close=spec.leave_group_on_close,
            assignors=tuple(spec.assignment_strategy),
            pending_revocation=rules.consumer_pending_revocation,
            join_prepare_waits_for_commit=rules.consumer_join_prepare_waits_for_commit,
            group_protocol=spec.group_protocol,
            auto_commit_app_thread=rules.consumer_auto_commit_app_thread,
            reconciles_in_poll=rules.consumer_reconciles_in_poll,
        )
    except ValueError as exc:
        raise _PathError(path, str(exc)) from None


# -- loading --------------------------------------------------------------------------------
def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override and validate a scenario file; raises :class:`ScenarioError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_scenario(decode_scenario(data, str(path)), str(path), overrides)


def decode_scenario(data: bytes, source: str) -> str:
    """A scenario file's bytes as text; anything but UTF-8 is a :class:`ScenarioError`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(
            f"{source}:{line}: not UTF-8 text: {exc.reason} at byte {exc.start}"
        ) from None


def parse_scenario(
    text: str, source: str = "<scenario>", overrides: Iterable[str] = ()
) -> Scenario:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{source}{where}: invalid YAML: {problem}") from None
    except RecursionError:
        # PyYAML composes nested collections recursively; no scenario nests this deep.
        raise ScenarioError(f"{source}: invalid YAML: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping of keys to values")
    overridden = [(apply_override(raw, override), override) for override in overrides]
    return validate_scenario(raw, source, node, overridden)


def validate_scenario(
    raw: Mapping[str, Any],
    source: str,
    node: Any = None,
    overridden: Iterable[tuple[tuple[str | int, ...], str]] = (),
) -> Scenario:
    """Validate a raw scenario mapping, including every application's effective client
    configuration (:attr:`Scenario.clients`); raises :class:`ScenarioError`. ``overridden``
    pairs each ``--set`` (its resolved path, its text): an error at or under such a path names
    the ``--set``, not a line of the file, which no longer holds the value."""
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(_format_validation_error(exc, source, node, overridden)) from None


def _format_validation_error(
    exc: ValidationError,
    source: str,
    node: Any,
    overridden: Iterable[tuple[tuple[str | int, ...], str]] = (),
) -> str:
    errors = exc.errors()
    err = next((e for e in errors if not _other_branch(e)), errors[0])
    # A union's errors name its branch in the path ("function-after[_ordered(), ...]").
    loc: tuple[str | int, ...] = tuple(
        p for p in err["loc"] if not (isinstance(p, str) and "[" in p)
    )
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _PathError):
        loc, message = inner.path, str(inner)
    elif isinstance(inner, _UnknownKey | _KeyError):
        loc, message = (*loc, inner.key), str(inner)
    elif err["type"] == "extra_forbidden":
        message = _unknown_field_message(loc)
    elif err["type"] == "missing":
        message = "required key is missing"
    else:
        message = _clean(err["msg"])
    where = _line(node, loc)
    for path, override in reversed(list(overridden)):  # the last --set of a path wins
        if loc[: len(path)] == path:
            where = f" (--set {override})"
            break
    return f"{source}{where}: {_dotted(loc) or '(top level)'}: {message}"


def _other_branch(err: Any) -> bool:
    """Whether ``err`` is a union branch's refusal of an input meant for another branch: a
    mapping given to a scalar duration (``Duration | DurationRange``), or a scalar given to a
    model, so that the error shown is the one of the branch the input was written for."""
    if err["type"] in ("model_type", "dict_type"):
        return True
    return isinstance(err.get("input"), Mapping) and "parse_duration_ms" in str(err["loc"])


def _clean(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg[0].lower() + msg[1:] if msg else msg


def _unknown_field_message(loc: tuple[str | int, ...]) -> str:
    key = str(loc[-1])
    model: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            model = None
            break
        model = _model_of(field.annotation)
    valid = [f.alias or n for n, f in model.model_fields.items()] if model is not None else []
    return str(_UnknownKey(key, valid))


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line(node: Any, path: Iterable[str | int]) -> str:
    """``:LINE`` of the deepest YAML node found along ``path``, or an empty string."""
    if node is None:
        return ""
    found = node
    for part in path:
        nxt = None
        if isinstance(found, yaml.MappingNode):
            for k, v in found.value:
                if getattr(k, "value", None) == str(part):
                    nxt = v if not isinstance(v, yaml.ScalarNode) else k
                    break
        elif (
            isinstance(found, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(found.value)
        ):
            nxt = found.value[part]
        if nxt is None:
            break
        found = nxt
    return f":{found.start_mark.line + 1}"


# -- overrides ------------------------------------------------------------------------------
def apply_override(raw: dict[str, Any], override: str) -> tuple[str | int, ...]:
    """Apply ``path=value`` to the raw scenario mapping (before validation); returns the path
    it set, as keys and list positions (``producers.producer-0.config.acks`` is
    ``("producers", 0, "config", "acks")``).

    Path parts are separated by dots. A list is indexed by position or by an item's
    ``name`` (``producers.producer-0.config.acks=1``), and a Kafka key that itself contains
    dots is matched whole (``...config.enable.idempotence=false``). The value is read as YAML.
    """
    if "=" not in override:
        raise ScenarioError(f"--set {override}: expected path=value")
    path_text, value_text = override.split("=", 1)
    parts = [p for p in path_text.strip().split(".") if p]
    if not parts:
        raise ScenarioError(f"--set {override}: empty path")
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else ""
    except (yaml.YAMLError, RecursionError):
        raise ScenarioError(f"--set {override}: cannot read value {value_text!r}") from None
    target: Any = raw
    i = 0
    parent = ""
    resolved: list[str | int] = []
    while True:
        key, i = _next_key(target, parts, i, override, parent)
        resolved.append(key)
        parent = str(key)
        if i == len(parts):
            break
        if isinstance(target, dict):
            if key not in target or target[key] is None:
                target[key] = {}
            target = target[key]
        else:
            target = target[key]
    target[key] = value
    return tuple(resolved)


# Mappings whose keys are leaves that may contain dots (Kafka configuration keys).
_LEAF_MAPPINGS = ("config", "rules", "expect", "expect_sweep")


def _next_key(target: Any, parts: list[str], i: int, override: str, parent: str) -> tuple[Any, int]:
    if isinstance(target, list):
        part = parts[i]
        if part.isdigit() and int(part) < len(target):
            return int(part), i + 1
        for index, item in enumerate(target):
            if isinstance(item, dict) and item.get("name") == part:
                return index, i + 1
        raise ScenarioError(
            f"--set {override}: no item {part!r} in the list at {'.'.join(parts[:i])}"
        )
    if not isinstance(target, dict):
        raise ScenarioError(f"--set {override}: {'.'.join(parts[:i])} is not a mapping")
    for k in range(len(parts), i, -1):
        candidate = ".".join(parts[i:k])
        known = candidate in PRODUCER_KEYS or candidate in _CONSUMER_KEYS
        if candidate in target or (k - i > 1 and known):
            return candidate, k
    if parent in _LEAF_MAPPINGS:
        return ".".join(parts[i:]), len(parts)
    return parts[i], i + 1
