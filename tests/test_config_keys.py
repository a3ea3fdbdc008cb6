"""The config registries (simulation/config.py: PRODUCER_KEYS, BROKER_KEYS, TOPIC_KEYS): one
declaration per key.

Each key's default is Kafka's, written once: :class:`ProducerConfig` or :class:`BrokerConfig`
and every field or parameter that reads the key (``read_by``) must have that default, a topic
config's default is its broker config's, and every ProducerConfig and BrokerConfig attribute
must belong to a declared key. :func:`wiring_errors` lists what disagrees, so a key declared
with another default than its readers', or a reader restating a default of its own, fails
here. A key added to a registry is in the schema and validated by its ``parse`` (the tests
add one and look).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

from eosim.schema import scenario_schema
from eosim.simulation import load_scenario
from eosim.simulation.cluster import ClusterSettings
from eosim.simulation.config import (
    BROKER_KEYS,
    PRODUCER_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigException,
    ConfigKey,
    ProducerConfig,
    parse_producer_config,
)
from eosim.simulation.rules import ProtocolRules

ROOT = Path(__file__).resolve().parent.parent


def _field_default(ref: str) -> object:
    """The default of ``module:Class.field``: a dataclass field's, else the parameter of that
    name of ``Class.__init__``."""
    module, rest = ref.split(":")
    cls_name, name = rest.split(".")
    cls = getattr(importlib.import_module(f"eosim.simulation.{module}"), cls_name)
    if dataclasses.is_dataclass(cls):
        field = {f.name: f for f in dataclasses.fields(cls)}[name]
        if field.default is not dataclasses.MISSING:
            return field.default
        return field.default_factory()  # type: ignore[misc]
    return inspect.signature(cls.__init__).parameters[name].default


def wiring_errors(key: ConfigKey) -> list[str]:
    """Where ``key``'s default is not what its config class and its readers start from."""
    errors = []
    if key.name in PRODUCER_KEYS and PRODUCER_KEYS[key.name].attr == key.attr:
        if getattr(ProducerConfig(), key.attr) != key.default:
            errors.append(f"ProducerConfig.{key.attr}")
    elif getattr(BrokerConfig(), key.attr) != key.default:
        errors.append(f"BrokerConfig.{key.attr}")
    for ref in key.read_by:
        value = _field_default(ref)
        if value != key.default or (value is None) != (key.default is None):
            errors.append(f"{ref} = {value!r}")
    return errors


@pytest.mark.parametrize("name", list(BROKER_KEYS))
def test_every_reader_of_a_key_starts_from_its_kafka_default(name: str) -> None:
    key = BROKER_KEYS[name]
    assert key.name == name and key.source
    assert wiring_errors(key) == []


@pytest.mark.parametrize("name", list(PRODUCER_KEYS))
def test_every_reader_of_a_producer_key_starts_from_its_kafka_default(name: str) -> None:
    key = PRODUCER_KEYS[name]
    assert key.name == name and key.source
    assert wiring_errors(key) == []


@pytest.mark.parametrize("name", list(TOPIC_KEYS))
def test_a_topic_key_starts_from_its_broker_keys_default(name: str) -> None:
    key = TOPIC_KEYS[name]
    assert key.name == name and key.source and key.read_by
    (broker,) = [k for k in BROKER_KEYS.values() if k.attr == key.attr]
    assert key.default == broker.default
    assert wiring_errors(key) == []


def test_a_reader_with_another_default_is_caught() -> None:
    key = dataclasses.replace(BROKER_KEYS["replica.lag.time.max.ms"], default=10_000)
    assert wiring_errors(key) == [
        "BrokerConfig.replica_lag_time_max_ms",
        "broker.replica_manager:ReplicationSettings.replica_lag_time_max_ms = 30000.0",
        "broker.partition:LeaderState.replica_lag_time_max_ms = 30000.0",
    ]


def test_a_producer_default_restated_elsewhere_is_caught() -> None:
    """ClientMetadata restates metadata.max.age.ms as a parameter's default: declared in
    ``read_by``, a registry default that differs is caught there and in ProducerConfig."""
    key = dataclasses.replace(PRODUCER_KEYS["metadata.max.age.ms"], default=60_000)
    assert wiring_errors(key) == [
        "ProducerConfig.metadata_max_age_ms",
        "metadata:ClientMetadata.max_age_ms = 300000.0",
    ]


def test_a_topic_default_restated_elsewhere_is_caught() -> None:
    key = dataclasses.replace(TOPIC_KEYS["segment.bytes"], default=1_000)
    assert wiring_errors(key) == [
        "BrokerConfig.segment_bytes",
        "broker.log:LogConfig.segment_bytes = 1073741824",
    ]


def test_every_broker_config_attribute_is_a_declared_key() -> None:
    attrs = [f.name for f in dataclasses.fields(BrokerConfig)]
    assert sorted(attrs) == sorted(k.attr for k in BROKER_KEYS.values())
    # A topic config overrides the broker config of the same attribute.
    assert {t.attr for t in TOPIC_KEYS.values()} <= set(attrs)


def test_every_producer_config_attribute_is_a_declared_key() -> None:
    attrs = [f.name for f in dataclasses.fields(ProducerConfig) if f.name != "warnings"]
    assert sorted(attrs) == sorted(k.attr for k in PRODUCER_KEYS.values())
    assert list(ProducerConfig().to_kafka_dict()) == list(PRODUCER_KEYS)


def test_a_key_parses_its_own_default() -> None:
    """Kafka's default is a value the key accepts (None, never or unlimited, and the empty
    client.id, aside)."""
    for key in [*BROKER_KEYS.values(), *PRODUCER_KEYS.values(), *TOPIC_KEYS.values()]:
        if key.default is not None and key.default != "":
            assert key.parse(key.name, key.default) == key.default, key.name


def test_a_producer_config_left_out_is_kafkas_default() -> None:
    """Rules with linger.ms's registry default: an empty config is every registry default."""
    rules = dataclasses.replace(
        ProtocolRules(), linger_ms_default=PRODUCER_KEYS["linger.ms"].default
    )
    config = parse_producer_config({}, rules).to_kafka_dict()
    assert config == {
        name: "all" if name == "acks" else key.default for name, key in PRODUCER_KEYS.items()
    }


def _properties(schema: dict, definition: str) -> dict:
    return schema["$defs"][definition]["properties"]["config"]["properties"]


def test_a_key_added_to_a_registry_is_in_the_schema_and_validated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "test.only.backoff.ms"
    with pytest.raises(ConfigException, match="unknown producer configuration"):
        parse_producer_config({name: 10}, ProtocolRules())
    assert name not in _properties(scenario_schema(), "Producer")
    key = ConfigKey(name, "retry_backoff_ms", PRODUCER_KEYS["retry.backoff.ms"].parse, 100, "test")
    monkeypatch.setitem(PRODUCER_KEYS, name, key)
    schema = scenario_schema()
    for definition in ("Producer", "TransactionalProducer", "Processor"):
        assert name in _properties(schema, definition)
    assert parse_producer_config({name: 10}, ProtocolRules()).retry_backoff_ms == 10
    with pytest.raises(ConfigException, match=f"for configuration {name}"):
        parse_producer_config({name: -1}, ProtocolRules())
    topic_name = "test.only.segment.bytes"
    topic_key = dataclasses.replace(TOPIC_KEYS["segment.bytes"], name=topic_name)
    monkeypatch.setitem(TOPIC_KEYS, topic_name, topic_key)
    assert topic_name in _properties(scenario_schema(), "Topic")


# A value other than the default for each topic config, to see it reach the topic's settings.
TOPIC_VALUES = {
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": True,
    "retention.ms": 1_000,
    "retention.bytes": 1_000,
    "segment.bytes": 1_000,
    "segment.ms": 1_000,
}


@pytest.mark.parametrize("name", list(TOPIC_KEYS))
def test_every_topic_key_reaches_the_topics_settings(name: str) -> None:
    """ClusterSettings.from_scenario hands each topic config to the fields in its
    ``read_by`` (a topic's TopicSettings, or its LogConfig: TopicSettings.of)."""
    key = TOPIC_KEYS[name]
    value = TOPIC_VALUES[name]
    assert value != key.default
    scenario = load_scenario(
        ROOT / "scenarios" / "replication-acks-all.yaml",
        [f"cluster.topics.0.config.{name}={str(value).lower()}"],
    )
    topic = scenario.cluster.topics[0].name
    settings = ClusterSettings.from_scenario(scenario).topics[topic]
    for ref in key.read_by:
        cls_name, field = ref.split(":")[1].split(".")
        holder = settings if cls_name == "TopicSettings" else settings.log
        assert type(holder).__name__ == cls_name
        assert getattr(holder, field) == value, ref
