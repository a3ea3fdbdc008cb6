"""Every shipped scenario is valid and meets its own expect block for every seed (1-20), not
only its own: an expectation is something the set-up guarantees or shows every time."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from eosim import api

SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "scenarios").glob("*.yaml"))
SEEDS = range(1, 21)


def _expectations(job: tuple[str, int]) -> tuple[int, bool, list[str]]:
    path, seed = job
    outcome = api.run(api.load(path), seed)
    return seed, outcome.expect.met, [str(f) for f in outcome.expect.failures]


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    # Two workers (the machine has two cores); spawned, so no Spark JVM is forked.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as executor:
        yield executor


def test_scenarios_are_shipped():
    names = {p.stem for p in SCENARIOS}
    assert {"at-most-once", "at-least-once", "idempotent", "idempotent-restart"} <= names
    assert "max-in-flight-6-unsafe" in names


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_meets_its_expectations_for_every_seed(path: Path, pool: ProcessPoolExecutor):
    assert api.load(path).expect, f"{path.name} has no expect block"
    results = pool.map(_expectations, [(str(path), seed) for seed in SEEDS])
    failing = {seed: failures for seed, met, failures in results if not met}
    assert not failing, f"{path.name}: expectations not met for seeds {failing}"


def test_restart_duplicates_vanish_without_resending():
    path = next(p for p in SCENARIOS if p.stem == "idempotent-restart")
    s = api.load(path, ["producers.0.workload.on_restart=continue"])
    outcome = api.run(s)
    assert outcome.check.anomalies["duplicate"].count == 0


def test_max_in_flight_5_does_not_duplicate_under_the_same_faults():
    path = next(p for p in SCENARIOS if p.stem == "max-in-flight-6-unsafe")
    s = api.load(path, ["producers.0.config.max.in.flight.requests.per.connection=5"])
    outcome = api.run(s)
    assert outcome.check.anomalies["duplicate"].count == 0


def test_offset_reset_earliest_redoes_instead_of_losing():
    # pipeline-offset-reset with its default (latest) loses what arrived while the processor
    # was down (its own expect block, above); from the earliest offset nothing is lost.
    path = next(p for p in SCENARIOS if p.stem == "pipeline-offset-reset")
    overrides = ["processors.app.input.auto.offset.reset=earliest", "expect.lost_processing=0"]
    outcome = api.run(api.load(path, overrides))
    assert outcome.expect.met, outcome.expect.failures
    assert outcome.check.anomalies["duplicate_processing"].count > 0


@pytest.mark.parametrize(
    ("override", "duplicates"),
    [
        ("cluster.config.producer.id.expiration.ms=86400000", 0),  # Kafka's default: a day
        ("kafka.rules.accept_unknown_producer_any_sequence=false", 1),  # one value, again
    ],
)
def test_producer_id_expiry_duplicates_need_a_short_expiration(override: str, duplicates: int):
    """idempotent-producer-id-expiry with Kafka's default expiration writes nothing twice;
    before KIP-360 the broker answers UNKNOWN_PRODUCER_ID, and the producer's epoch bump
    writes the batch again all the same."""
    path = next(p for p in SCENARIOS if p.stem == "idempotent-producer-id-expiry")
    outcome = api.run(api.load(path, [override]))
    assert outcome.check.anomalies["duplicate"].count == duplicates
    assert outcome.check.anomalies["lost_write"].count == 0
