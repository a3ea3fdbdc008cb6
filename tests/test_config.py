"""ProducerConfig: Kafka's defaults and validation rules, and the unsafe escape hatch."""

from __future__ import annotations

import pytest

from eosim.simulation.config import ConfigException, Unsafe, parse_producer_config
from eosim.simulation.rules import VERSIONS

V40, V39 = VERSIONS["4.0"], VERSIONS["3.9"]


def test_defaults_match_kafka():
    c = parse_producer_config({}, V40)
    assert (c.acks, c.enable_idempotence, c.retries) == (-1, True, 2**31 - 1)
    assert (c.max_in_flight, c.delivery_timeout_ms, c.request_timeout_ms) == (5, 120_000, 30_000)
    assert (c.linger_ms, c.batch_size, c.buffer_memory) == (5, 16_384, 33_554_432)
    assert (c.retry_backoff_ms, c.retry_backoff_max_ms) == (100, 1_000)
    assert parse_producer_config({}, V39).linger_ms == 0


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"enable.idempotence": True, "acks": 1}, "acks"),
        ({"enable.idempotence": True, "retries": 0}, "retries"),
        ({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6}, "max.in.flight"),
    ],
)
def test_explicit_idempotence_violations_raise(raw, key):
    with pytest.raises(ConfigException, match=key):
        parse_producer_config(raw, V40)


def test_implicit_idempotence_is_disabled_by_acks():
    c = parse_producer_config({"acks": "1"}, V40)
    assert not c.enable_idempotence and c.acks == 1
    assert any("disabled" in w for w in c.warnings)


def test_max_in_flight_above_5_depends_on_version():
    with pytest.raises(ConfigException, match="at most 5"):
        parse_producer_config({"max.in.flight.requests.per.connection": 6}, V40)
    c = parse_producer_config({"max.in.flight.requests.per.connection": 6}, V39)
    assert not c.enable_idempotence


def test_unsafe_block_waives_the_rule():
    raw = {"enable.idempotence": True, "max.in.flight.requests.per.connection": 6}
    c = parse_producer_config(raw, V40, Unsafe(idempotence_with_max_in_flight_above_5=True))
    assert c.enable_idempotence and c.max_in_flight == 6


def test_delivery_timeout_must_cover_linger_and_request_timeout():
    with pytest.raises(ConfigException, match=r"delivery.timeout.ms.*linger.ms \+ request"):
        parse_producer_config({"delivery.timeout.ms": 1000, "request.timeout.ms": 2000}, V40)
    c = parse_producer_config({"request.timeout.ms": 200_000}, V40)
    assert c.delivery_timeout_ms == 200_005


def test_transactional_id_needs_idempotence():
    with pytest.raises(ConfigException, match=r"transactional\.id"):
        parse_producer_config({"transactional.id": "t", "enable.idempotence": False}, V40)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"acks": "2"}, "Invalid value 2 for configuration acks"),
        ({"retries": -1}, "retries: value must be in"),
        ({"linger.ms": "soon"}, "expected an integer"),
        ({"enable.idempotence": "yes"}, "expected true or false"),
    ],
)
def test_bad_values_name_the_key(raw, message):
    with pytest.raises(ConfigException, match=message):
        parse_producer_config(raw, V40)


@pytest.mark.parametrize(
    ("raw", "rules", "key"),
    [
        ({"acks": "1"}, V40, "acks"),
        ({"retries": 0}, V40, "retries"),
        ({"max.in.flight.requests.per.connection": 6}, V39, "max.in.flight"),
    ],
)
def test_a_value_that_disables_implicit_idempotence_is_named_for_a_transactional_id(
    raw, rules, key
):
    """ProducerConfig.postProcessAndValidateIdempotenceConfigs switches implicit idempotence
    off for such a value and then refuses the transactional.id; the error names the value."""
    without = parse_producer_config(raw, rules)
    assert not without.enable_idempotence and without.warnings
    with pytest.raises(ConfigException, match=rf"^Invalid value \S+ for configuration {key}"):
        parse_producer_config({"transactional.id": "t", **raw}, rules)
    with pytest.raises(ConfigException, match=r"which a transactional\.id requires") as exc:
        parse_producer_config({"transactional.id": "t", **raw}, rules)
    assert exc.value.key.startswith(key)


def test_unsafe_waiver_keeps_a_transactional_producer_idempotent_with_acks_1():
    c = parse_producer_config(
        {"transactional.id": "t", "acks": "1"}, V40, Unsafe(idempotence_without_acks_all=True)
    )
    assert c.enable_idempotence and c.acks == 1 and c.transactional_id == "t"


@pytest.mark.parametrize("key", ["acks", "retries", "enable.idempotence", "client.id"])
def test_a_huge_shared_value_is_shown_bounded(key):
    """YAML aliases can make a value of 10^9 elements out of a few lines; the message used to
    spell it out (str() ran for minutes and used gigabytes)."""
    value: list = ["x"] * 10
    for _ in range(8):
        value = [value] * 10
    with pytest.raises(ConfigException) as exc:
        parse_producer_config({key: value}, V40)
    assert len(str(exc.value)) < 250 and "..." in str(exc.value)
