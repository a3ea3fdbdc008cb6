"""The model's stated limits: which features a scenario uses, and the departures listed for
them (simulation/limits.py, summarising docs/model.md's departures)."""

from __future__ import annotations

from eosim.simulation.limits import BIASES, DEPARTURES, bearing, departures, features
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


def test_every_bias_is_one_line_naming_its_departure():
    for bias in BIASES:
        assert "\n" not in bias.text and bias.text.endswith(".") and "departure" in bias.text


def test_the_acks_1_bias_bears_on_leader_crashes_with_acks_1_only():
    case = "scenarios/calibration/acks-leader-kill.yaml"
    acks_1 = load_scenario(case, ["producers.0.config.acks=1"])
    assert BIASES[0].text in bearing(acks_1)
    assert BIASES[0].text not in bearing(load_scenario(case))  # acks=all
    no_faults = load_scenario(case, ["producers.0.config.acks=1", "faults=[]"])
    assert BIASES[0].text not in bearing(no_faults)
    unreplicated = load_scenario("scenarios/at-most-once.yaml")
    assert BIASES[0].text not in bearing(unreplicated)
    modelled = load_scenario(case, ["producers.0.config.acks=1", "cluster.resources={}"])
    assert BIASES[0].text not in bearing(modelled)  # the resource model gives a tail ...
    assert BIASES[2].text in bearing(modelled)  # ... shorter than Kafka's
    assert BIASES[2].text not in bearing(acks_1)
    assert BIASES[2].text not in bearing(load_scenario(case, ["cluster.resources={}"]))


def test_the_reordering_bias_bears_on_plain_pipelined_producers_under_broker_faults():
    case = "scenarios/calibration/idempotence-restarts.yaml"
    assert bearing(load_scenario(case)) == []  # idempotent
    plain = load_scenario(case, ["producers.0.config.enable.idempotence=false"])
    assert BIASES[1].text in bearing(plain)
    assert bearing(load_scenario("scenarios/at-least-once.yaml")) == []  # no broker fault


def test_the_crash_reset_bias_bears_on_plain_pipelined_producers_whose_brokers_are_killed():
    case = "scenarios/calibration/acks-leader-kill.yaml"  # a plain producer, leaders killed
    assert BIASES[3].text in bearing(load_scenario(case))
    assert BIASES[3].text not in bearing(load_scenario(case, ["cluster.crash_reset=40ms"]))
    idempotent = load_scenario(case, ["producers.0.config.enable.idempotence=true"])
    assert BIASES[3].text not in bearing(idempotent)
    one_in_flight = load_scenario(
        case, ["producers.0.config.max.in.flight.requests.per.connection=1"]
    )
    assert BIASES[3].text not in bearing(one_in_flight)
    paused = load_scenario(case, ["faults.0.kind=pause", "faults.1.kind=pause"])
    assert BIASES[3].text not in bearing(paused)  # a paused broker keeps its sockets


def test_the_closed_connection_bias_bears_on_plain_pipelined_producers_under_deliver_only():
    case = "scenarios/calibration/idempotence-restarts.yaml"  # a paused leader, timeouts
    plain = ["producers.0.config.enable.idempotence=false"]
    deliver = [*plain, "network.in_flight_after_close=deliver"]
    assert BIASES[4].text in bearing(load_scenario(case, deliver))
    assert BIASES[4].text not in bearing(load_scenario(case, plain))  # until_reset, the default
    idempotent = ["network.in_flight_after_close=deliver"]
    assert BIASES[4].text not in bearing(load_scenario(case, idempotent))
    assert BIASES[4].text not in bearing(load_scenario(case, [*deliver, "faults=[]"]))


def test_the_limits_no_longer_claim_the_last_known_leader_is_missing():
    """KIP-966's last-known-leader election is modelled (docs/calibration.md, case 4)."""
    assert not any("last-known-leader" in line for lines in DEPARTURES.values() for line in lines)


def test_the_resource_model_brings_its_own_limits_in_place_of_the_unbounded_ones():
    case = "scenarios/calibration/steady-timing.yaml"
    unbounded = features(load_scenario(case))
    assert "unbounded" in unbounded and "resources" not in unbounded
    modelled = features(load_scenario(case, ["cluster.resources.preset=calibration-host"]))
    assert "resources" in modelled and "unbounded" not in modelled
    lines = [line for _f, line in departures(load_scenario(case, ["cluster.resources={}"]))]
    assert any("woken thread's wait" in line for line in lines)
    assert not any("one at a time per broker" in line for line in lines)


def test_the_link_latency_bias_bears_on_the_resource_model_without_a_wire():
    """Under the resource model network.latency's default counts the processes' work twice;
    the wire (resources.wire) or a latency the scenario sets itself lifts it."""
    case = "scenarios/calibration/steady-timing.yaml"
    text = BIASES[5].text
    assert "departure 8" in text
    assert text not in bearing(load_scenario(case))  # unbounded: the latency is fitted for it
    assert text in bearing(load_scenario(case, ["cluster.resources.preset=epyc-2026-12-02"]))
    traced = ["cluster.resources.preset=epyc-2026-12-02-traced"]
    assert text not in bearing(load_scenario(case, traced))
    own = ["cluster.resources.preset=epyc-2026-12-02", "network.latency.median_ms=0.02"]
    assert text not in bearing(load_scenario(case, own))
