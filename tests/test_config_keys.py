"""The broker configs' registry (simulation/config.py, BROKER_KEYS): one declaration per key.

Each key's default is Kafka's, written once: :class:`BrokerConfig` and every settings field
that reads the key (``read_by``) must have that default, and every BrokerConfig attribute must
belong to a declared key. :func:`wiring_errors` lists what disagrees, so a key declared with
another default than its readers', or a reader restating a default of its own, fails here.
"""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from eosim.simulation.config import BROKER_KEYS, TOPIC_KEYS, BrokerConfig, ConfigKey


def _field_default(ref: str) -> object:
    module, rest = ref.split(":")
    cls_name, name = rest.split(".")
    cls = getattr(importlib.import_module(f"eosim.simulation.{module}"), cls_name)
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def wiring_errors(key: ConfigKey) -> list[str]:
    """Where ``key``'s default is not what BrokerConfig and its readers start from."""
    errors = []
    if getattr(BrokerConfig(), key.attr) != key.default:
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


def test_a_reader_with_another_default_is_caught() -> None:
    key = dataclasses.replace(BROKER_KEYS["replica.lag.time.max.ms"], default=10_000)
    assert wiring_errors(key) == [
        "BrokerConfig.replica_lag_time_max_ms",
        "broker.replica_manager:ReplicationSettings.replica_lag_time_max_ms = 30000.0",
        "broker.partition:LeaderState.replica_lag_time_max_ms = 30000.0",
    ]


def test_every_broker_config_attribute_is_a_declared_key() -> None:
    attrs = [f.name for f in dataclasses.fields(BrokerConfig)]
    assert sorted(attrs) == sorted(k.attr for k in BROKER_KEYS.values())
    # A topic config overrides the broker config of the same attribute.
    assert {t.attr for t in TOPIC_KEYS.values()} <= set(attrs)


def test_a_key_parses_its_own_default() -> None:
    """Kafka's default is a value the key accepts (None, never or unlimited, aside)."""
    for key in BROKER_KEYS.values():
        if key.default is not None:
            assert key.parse(key.name, key.default) == key.default, key.name
