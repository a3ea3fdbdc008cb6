"""The parts ``ReplicaManager`` is built from, each under its Kafka name: the log flusher
(``LogManager``), the shared expiration reaper (``DelayedOperationPurgatory``'s), and the
collaborators handed to it through its constructor (``hostable``)."""

from __future__ import annotations

import pytest
import simpy
from test_replication import SESSION_MS, TP, Harness

from eosim.simulation.broker.delayed_operation import ExpiredOperationReaper
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.broker.replica_manager import ReplicaManager, ReplicationSettings
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import PartitionState
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS


@pytest.mark.parametrize(("scheduler_ms", "kept"), [(None, []), (50.0, ["a", "b"])])
def test_the_log_flusher_flushes_logs_whose_flush_interval_passed(
    scheduler_ms: float | None, kept: list[str]
):
    """LogManager's kafka-log-flusher runs every log.flush.scheduler.interval.ms and flushes
    each log whose log.flush.interval.ms has passed: what it flushed survives a power loss;
    without it (Kafka's default) only the OS write-back would have saved the records."""
    replication = ReplicationSettings(
        replica_lag_time_max_ms=200.0,
        replica_fetch_wait_max_ms=50.0,
        log_flush_interval_ms=100.0,
        log_flush_scheduler_interval_ms=scheduler_ms,
    )
    h = Harness(rf=1, brokers=1, replication=replication)
    h.run(5)
    h.produce("broker-0", ("a", "b"), acks=-1)
    h.run(300)
    broker = h.cluster.brokers["broker-0"]
    broker.power_loss()
    broker.restart()
    h.run(SESSION_MS + 60)
    assert [r["value"] for r in h.replica("broker-0").log.records()] == kept


def test_the_reaper_completes_overdue_requests_in_the_order_they_expired():
    """One reaper per broker: completions deferred during a pause run on resume in the order
    their timers fired, whichever purgatory they came from; a crash drops them."""
    reaper = ExpiredOperationReaper()
    done: list[str] = []
    reaper.defer(lambda: done.append("produce"))
    reaper.defer(lambda: done.append("fetch"))
    reaper.resumed()
    assert done == ["produce", "fetch"]
    reaper.resumed()
    assert done == ["produce", "fetch"]  # each runs once
    reaper.defer(lambda: done.append("lost"))
    reaper.clear()
    reaper.resumed()
    assert done == ["produce", "fetch"]


def _replica_manager(**kwargs: object) -> ReplicaManager:
    env = simpy.Environment()
    network = Network(
        env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), RandomStreams(1).stream("n")
    )
    return ReplicaManager(
        env,
        "broker-0",
        network,
        VERSIONS["4.0"],
        ReplicationSettings(),
        {},
        ProducerStateManager,
        lambda: True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_hostable_is_a_constructor_collaborator_and_defaults_to_every_partition():
    """The metadata names broker-0 a replica of two partitions; ``hostable`` decides which it
    hosts (the cluster's: internal partitions only once active)."""
    changes = {
        TP: PartitionState(("broker-0",), ("broker-0",), "broker-0", 0, 0),
        ("__transaction_state", 0): PartitionState(("broker-0",), ("broker-0",), "broker-0", 0, 0),
    }
    every = _replica_manager()
    every.apply_metadata(0, changes, True)
    assert sorted(every.partitions) == sorted(changes)
    data_only = _replica_manager(hostable=lambda tp: not tp[0].startswith("__"))
    data_only.apply_metadata(0, changes, True)
    assert list(data_only.partitions) == [TP]
    assert data_only.metadata == changes  # its metadata cache still has both
