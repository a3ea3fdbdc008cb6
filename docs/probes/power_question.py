"""A user's question: replication factor 3, acks=all, min.insync.replicas=2, clean elections,
single-broker power losses: how many of N runs lose acknowledged writes?

Run from a checkout: ``PYTHONPATH=. python docs/probes/power_question.py 100``. docs/model.md
(A broker's restart) records what it printed before and after the restart path was modelled.
"""

from __future__ import annotations

import itertools
import sys
import time

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation import run_scenario
from eosim.simulation.scenario import parse_scenario

SCENARIO = """
name: power-loss-question
cluster:
  brokers: 3
  topics:
    - {name: events, partitions: 3, replication_factor: 3, config: {min.insync.replicas: 2}}
producers:
  - name: producer-0
    config: {acks: all, enable.idempotence: true}
    workload: {topic: events, records: 6000, rate: 1000, keys: 60}
faults:
  - {kind: power_loss, nodes: [broker-0, broker-1, broker-2], rate: 0.3,
     duration: {min: 1ms, max: 5s}}
"""


def main(runs: int) -> None:
    scenario = parse_scenario(SCENARIO, "power-loss-question")
    lost_runs = lost = close_runs = 0
    lost_seeds = []
    started = time.time()
    for seed in range(1, runs + 1):
        result = run_scenario(scenario, seed)
        found = check_history(history_from_records(list(result.history.records())))
        n = found.anomalies["lost_write"].count
        # Two power losses of different brokers within 15 s of each other: the window in which
        # a broker that lost power has not yet been fenced, registered again and caught up.
        losses = sorted((e.start, e.end, e.targets) for e in result.faults)
        close = any(b[0] - a[1] < 15_000 and a[2] != b[2] for a, b in itertools.pairwise(losses))
        close_runs += close
        if n:
            lost_runs += 1
            lost += n
            lost_seeds.append((seed, n, close))
    print(
        f"runs {runs}: {lost_runs} lost acknowledged writes ({lost} records); {close_runs} runs "
        "had two power losses of different brokers within 15 s; lost runs (seed, records, "
        f"close losses): {lost_seeds}; {time.time() - started:.0f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
