"""Send outcomes as a client sees them (issue: fidelity corrections, point 12).

A send is ``fail`` when no attempt of its batch can have been written: every attempt that
reached a broker was answered with an error that means "not appended". It is ``info`` as soon
as one attempt's fate is unknown (a timeout, a disconnection), as in Jepsen. ``errored``
counts every send whose callback got an exception, whatever the outcome.
"""

from __future__ import annotations

import simpy
from support import scenario_with

from eosim.simulation import run_scenario
from eosim.simulation.config import parse_producer_config
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.producer.accumulator import RecordAccumulator
from eosim.simulation.producer.sender import Sender
from eosim.simulation.protocol import Errors, PartitionResponse
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import ProtocolRules

TP = ("t", 0)


def sender_with_one_batch(**config: object):
    """A plain producer's Sender and one drained batch whose callback records its result."""
    env = simpy.Environment()
    cfg = parse_producer_config(
        {"enable.idempotence": False, "retries": 1, **config}, ProtocolRules()
    )
    acc = RecordAccumulator(cfg.batch_size, 0, cfg.buffer_memory, cfg.delivery_timeout_ms, False)
    results: list[tuple[int, str | None, bool]] = []
    acc.append(TP, "v", 10, lambda *r: results.append(r), 0.0)
    sender = Sender(
        env,
        "p",
        None,
        ClusterMetadata(("b0",), {"t": 1}),
        acc,
        cfg,
        None,  # type: ignore[arg-type]
        RandomStreams(1).stream("s"),
        lambda: None,
    )
    batch = acc.pop_head(TP)
    return sender, batch, results


def test_a_batch_refused_by_every_attempt_fails():
    sender, batch, results = sender_with_one_batch()
    batch.attempts = 1
    sender._complete_batch(batch, PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER), 1.0)
    assert results == []  # retried
    batch.attempts = 2
    sender._complete_batch(batch, PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER), 2.0)
    ((_value, _partition, _offset, error, maybe_written),) = results
    assert error is not None and not maybe_written  # fail, not info


def test_one_attempt_of_unknown_fate_makes_the_send_indeterminate():
    sender, batch, results = sender_with_one_batch()
    batch.attempts = 1
    batch.fate_unknown = True  # the first attempt timed out: it may have been written
    sender._complete_batch(batch, PartitionResponse(Errors.REQUEST_TIMED_OUT, -1, -1), 1.0)
    batch.attempts = 2
    sender._complete_batch(batch, PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER), 2.0)
    ((_value, _partition, _offset, error, maybe_written),) = results
    assert error is not None and maybe_written  # info


def test_retries_zero_under_loss_shows_its_errors():
    result = run_scenario(
        scenario_with(
            "producers.0.config.enable.idempotence=false", "producers.0.config.retries=0"
        ),
        1,
    )
    c = result.counts
    assert c["errored"] > 0
    # Every error here is a timeout or a disconnection: the write may have happened.
    assert c["errored"] == c["indeterminate"] and c["failed"] == 0
    assert c["acked"] + c["failed"] + c["indeterminate"] == c["sent"]
