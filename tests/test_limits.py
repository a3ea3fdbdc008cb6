"""The model's stated limits: which features a scenario uses, and the departures listed for
them (simulation/limits.py, summarising docs/model.md's departures)."""

from __future__ import annotations

from eosim.simulation.limits import DEPARTURES, departures, features
from eosim.simulation.scenario import load_scenario

TXN_LIMIT = "The transaction version is one rule for the whole run"


def test_a_transactional_scenario_lists_a_transactional_limit():
    scenario = load_scenario("scenarios/transactional-pipeline.yaml")
    assert "transactions" in features(scenario)
    assert any(line.startswith(TXN_LIMIT) for _f, line in departures(scenario))


def test_a_plain_producer_scenario_lists_no_transactional_limit():
    scenario = load_scenario("scenarios/delivery-semantics.yaml")
    used = features(scenario)
    assert "transactions" not in used and "consumers" not in used
    assert "idempotence" not in used  # enable.idempotence: false
    assert not any(line.startswith(TXN_LIMIT) for _f, line in departures(scenario))
    assert "network_loss" in used  # response_loss > 0
    # Idempotence switched on by an override brings its own limits.
    on = load_scenario(
        "scenarios/delivery-semantics.yaml", ["producers.0.config.enable.idempotence=true"]
    )
    assert "idempotence" in features(on)


def test_replication_only_for_replicated_topics():
    assert "replication" not in features(load_scenario("scenarios/delivery-semantics.yaml"))
    assert "replication" in features(load_scenario("scenarios/replication-acks-all.yaml"))


def test_every_departure_is_one_short_line():
    for lines in DEPARTURES.values():
        for line in lines:
            assert "\n" not in line and len(line) < 200 and line.endswith(".")
