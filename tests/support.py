"""Shared helpers for the model tests: a small base scenario and overrides of it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import simpy

from eosim.simulation.config import parse_producer_config
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import Network, NetworkSettings
from eosim.simulation.producer.accumulator import RecordAccumulator
from eosim.simulation.producer.sender import Sender
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import ProtocolRules
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


def bare_sender(brokers: tuple[str, ...] = ("b0",), **config: object) -> Sender:
    """A producer "p"'s Sender (idempotence off unless ``config`` says otherwise) on a network
    with no broker behind it, its accumulator empty and its environment not yet run."""
    env = simpy.Environment()
    cfg = parse_producer_config({"enable.idempotence": False, **config}, ProtocolRules())
    acc = RecordAccumulator(cfg.batch_size, 0, cfg.buffer_memory, cfg.delivery_timeout_ms, False)
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    return Sender(
        env,
        "p",
        network,
        ClusterMetadata(brokers, {"t": 1}),
        acc,
        cfg,
        None,
        RandomStreams(1).stream("s"),
        lambda: None,
    )


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded as a module (the benchmarks are scripts, not a
    package)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: a dataclass looks its module up there.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
