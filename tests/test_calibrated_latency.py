"""The default latency (network.latency and cluster.request_time_ms) reproduces the produce
latency measured on Kafka 4.1.1 on one machine (docs/calibration.md, case 5): the warm median
and p99 with acks=1 and acks=all. The bounds are the Kafka runs' median, +-15%; the defaults
before the calibration (1 ms hops) gave 5.31 ms and 8.25 ms medians."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eosim.analysis import outcome
from eosim.analysis.timings import warm_ack_latencies

CASE = Path(__file__).parent.parent / "scenarios" / "calibration" / "steady-timing.yaml"
PLAIN = ["producers.0.config.enable.idempotence=false", "producers.0.workload.records=12000"]


@pytest.mark.parametrize(
    ("acks", "kafka_p50", "kafka_p99"),
    [("1", 4.05, 7.8), ("all", 4.9, 10.9)],
)
def test_default_latency_matches_kafka_on_one_machine(
    acks: str, kafka_p50: float, kafka_p99: float
) -> None:
    scenario = outcome.load(str(CASE), [*PLAIN, f"producers.0.config.acks={acks}"])
    latencies = np.array(warm_ack_latencies(outcome.run(scenario, seed=1).history))
    p50, p99 = np.percentile(latencies, [50, 99])
    assert kafka_p50 * 0.85 <= p50 <= kafka_p50 * 1.15, p50
    assert kafka_p99 * 0.7 <= p99 <= kafka_p99 * 1.3, p99
