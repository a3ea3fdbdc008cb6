"""Shared helpers for the model tests: a small base scenario and overrides of it."""

from __future__ import annotations

from eosim.simulation.scenario import Scenario, parse_scenario

BASE = """
name: t
cluster:
  brokers: 2
  topics: [{name: events, partitions: 4}]
network:
  request_loss: 0.02
  response_loss: 0.02
producers:
  - name: producer-0
    config:
      enable.idempotence: true
      request.timeout.ms: 500
    workload: {topic: events, records: 1500, rate: 3000, keys: 40}
"""


def scenario_with(*overrides: str) -> Scenario:
    return parse_scenario(BASE, "base.yaml", overrides)
