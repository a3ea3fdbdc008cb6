"""A client's metadata refreshes (``ClientMetadata``), timed as Kafka 3.7+'s ``Metadata``
(KIP-580): exponential backoff with failed requests and with responses that teach nothing
new, reset by progress and by the periodic refresh. Compare Kafka's MetadataTest
(testTimeToNextUpdate, testTimeToNextUpdateRetryBackoff, testFailedUpdate)."""

from __future__ import annotations

import pytest

from eosim.simulation.exponential_backoff import exponential_backoff
from eosim.simulation.metadata import ClientMetadata, ClusterMetadata
from eosim.simulation.protocol import PartitionLeader

TP = ("t", 0)
CLUSTER = ClusterMetadata(("broker-0", "broker-1"), {"t": 1}, {"t": 2})


class NoJitter:
    def uniform(self, low: float, high: float) -> float:
        return 1.0


def cache() -> ClientMetadata:
    return ClientMetadata(CLUSTER, 300_000.0, 100.0, 0.0, jitter=NoJitter())


def test_exponential_backoff_matches_kafkas_formula():
    """ExponentialBackoff(100, 2, 1000, jitter): 100, 200, 400, 800, then capped at 1000;
    the jitter multiplies before the cap, so at the cap it can only shorten the wait."""
    assert [exponential_backoff(100, 1000, n, 1.0) for n in range(6)] == [
        100,
        200,
        400,
        800,
        1000,
        1000,
    ]
    assert exponential_backoff(100, 1000, 0, 0.8) == pytest.approx(80)
    assert exponential_backoff(100, 1000, 9, 1.19) == 1000
    assert exponential_backoff(100, 1000, 9, 0.8) == pytest.approx(800)
    # retry.backoff.max.ms below retry.backoff.ms: no growth.
    assert exponential_backoff(500, 100, 3, 1.0) == 100


def test_a_requested_update_waits_the_backoff_after_the_last_response():
    m = cache()
    m.update({TP: PartitionLeader("broker-0", 1)}, 1_000.0)
    assert m.time_to_update(1_050.0) == pytest.approx(299_950.0)  # not requested: max age
    m.request_update()
    assert m.time_to_update(1_050.0) == pytest.approx(50.0)
    assert m.time_to_update(1_100.0) == 0.0


def test_failed_requests_back_off_exponentially_and_a_response_resets():
    m = cache()
    m.request_update()
    waits = []
    now = 0.0
    for _ in range(6):
        m.failed(now)
        waits.append(m.time_to_update(now))
    assert waits == [100.0, 200.0, 400.0, 800.0, 1000.0, 1000.0]
    m.update({TP: PartitionLeader("broker-1", 1)}, now)
    m.request_update()
    assert m.time_to_update(now) == 100.0


def test_equivalent_responses_back_off_until_a_leader_epoch_rises():
    """A producer waiting out an election asks again and again and hears the same leader:
    each answer without progress doubles the wait (Kafka's equivalentResponseCount)."""
    m = cache()
    m.update({TP: PartitionLeader("broker-0", 1)}, 0.0)  # progress: epoch 0 -> 1
    now, waits = 0.0, []
    for _ in range(5):
        m.request_update()
        waits.append(m.time_to_update(now))
        now += waits[-1]
        m.update({TP: PartitionLeader("broker-0", 1)}, now)  # the same answer
    assert waits == [100.0, 100.0, 200.0, 400.0, 800.0]
    m.request_update()
    assert m.time_to_update(now) == 1000.0
    # The new leader's epoch arrives: progress, and the next wait is the base again.
    m.update({TP: PartitionLeader("broker-1", 2)}, now)
    m.request_update()
    assert m.time_to_update(now) == 100.0


def test_the_periodic_refresh_ends_the_equivalent_response_backoff():
    m = ClientMetadata(CLUSTER, 5_000.0, 100.0, 0.0, jitter=NoJitter())
    for t in (0.0, 100.0, 300.0, 700.0):
        m.update({TP: PartitionLeader("broker-0", 0)}, t)
    m.request_update()
    assert m.time_to_update(700.0) == 800.0  # four equivalent answers: 100 * 2**3
    # Past metadata.max.age.ms since the last answer, the count is forgotten.
    assert m.time_to_update(5_800.0) == 0.0
    assert m.equivalent_responses == 0


def test_a_client_created_mid_run_asks_at_once():
    m = ClientMetadata(CLUSTER, 300_000.0, 100.0, 5_000.0, jitter=NoJitter())
    assert m.leader(TP) is None and m.time_to_update(5_000.0) == 0.0


def test_the_jitter_is_drawn_from_the_clients_stream():
    class Fixed:
        def uniform(self, low: float, high: float) -> float:
            assert (low, high) == (0.8, 1.2)
            return 0.9

    m = ClientMetadata(CLUSTER, 300_000.0, 100.0, 0.0, jitter=Fixed())
    m.failed(0.0)
    m.request_update()
    assert m.time_to_update(0.0) == pytest.approx(90.0)
