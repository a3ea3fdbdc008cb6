"""The producer application's per-record fast paths give the histories the plain paths give:
a batch's records completed in one step (`_Completion.succeeded`, `_Completion.failed`)
against one callback per record, and a record sent through a bound send
(`KafkaProducer.bind_send`) against `KafkaProducer.send`."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.producer.accumulator import ProducerBatch, RecordAccumulator
from eosim.simulation.producer.kafka_producer import KafkaProducer
from eosim.simulation.workload import _Completion

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    # acks=0: every offset is -1
    ("scenarios/at-most-once.yaml", ["producers.0.workload.records=3000"]),
    # crashes of the application: open sends completed `info`, resent by the next incarnation
    ("scenarios/idempotent-restart.yaml", []),
    # keyed records over several partitions, and sends that block for memory
    (
        "benchmarks/standard.yaml",
        [
            "producers.0.workload.records=3000",
            "producers.0.workload.keys=7",
            "producers.0.config.buffer.memory=65536",
        ],
    ),
    # heavy loss and short timeouts: batches fail, some of them with their fate unknown
    (
        "benchmarks/standard.yaml",
        [
            "producers.0.workload.records=3000",
            "network.request_loss=0.1",
            "network.response_loss=0.1",
            "producers.0.config.delivery.timeout.ms=3000",
            "producers.0.config.request.timeout.ms=1000",
        ],
    ),
]


def _run(path: str, overrides: list[str], seed: int) -> tuple[str, int, dict[str, int]]:
    result = run_scenario(load_scenario(ROOT / path, overrides), seed)
    return result.history.digest(), result.events, result.counts


@pytest.mark.parametrize(("path", "overrides"), CASES)
def test_a_batch_completed_in_one_step_is_recorded_as_one_callback_per_record(
    path: str, overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = [_run(path, overrides, seed) for seed in (1, 2)]
    monkeypatch.delattr(_Completion, "succeeded")
    monkeypatch.delattr(_Completion, "failed")
    assert [_run(path, overrides, seed) for seed in (1, 2)] == fast


@pytest.mark.parametrize(("path", "overrides"), CASES)
def test_a_bound_send_is_send(
    path: str, overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = [_run(path, overrides, seed) for seed in (1, 2)]
    bind = KafkaProducer.bind_send

    def one_at_a_time(self, topic, partition, callback, value_bytes):  # type: ignore[no-untyped-def]
        """A bound send that binds anew for every record, as `send` does."""
        return lambda key, value, waited=False: bind(self, topic, partition, callback, value_bytes)(
            key, value, waited
        )

    monkeypatch.setattr(KafkaProducer, "bind_send", one_at_a_time)
    assert [_run(path, overrides, seed) for seed in (1, 2)] == fast


def test_a_batch_with_two_callbacks_completes_each_record_through_its_own():
    seen: list[tuple[str, str, int]] = []

    class Tagged:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def __call__(self, value, partition, offset, error, maybe_written):  # type: ignore[no-untyped-def]
            seen.append((self.tag, value, offset))

        def succeeded(self, values, partition, base_offset):  # type: ignore[no-untyped-def]
            seen.extend((self.tag + "*", v, base_offset + i) for i, v in enumerate(values))

        def failed(self, values, partition, error, maybe_written):  # type: ignore[no-untyped-def]
            seen.extend((self.tag + "!", v, -1) for v in values)

    acc = RecordAccumulator(16384, 0, 1 << 20, 120000, False)
    a, b = Tagged("a"), Tagged("b")
    acc.append(("t", 0), "v0", 10, a, 0.0)
    acc.append(("t", 0), "v1", 10, a, 0.0)
    batch: ProducerBatch = acc.batches[("t", 0)][0]
    assert batch.shared_callback is a and batch.callbacks is None
    assert batch.complete(40)
    assert seen == [("a*", "v0", 40), ("a*", "v1", 41)]

    seen.clear()
    acc.append(("t", 1), "w0", 10, a, 0.0)
    acc.append(("t", 1), "w1", 10, b, 0.0)
    mixed = acc.batches[("t", 1)][0]
    assert mixed.callbacks == [a, b]
    assert mixed.complete(7)
    assert seen == [("a", "w0", 7), ("b", "w1", 8)]

    seen.clear()
    acc.append(("t", 2), "x0", 10, b, 0.0)
    acc.append(("t", 2), "x1", 10, b, 0.0)
    assert acc.batches[("t", 2)][0].fail("TimeoutException")
    acc.append(("t", 3), "y0", 10, b, 0.0)
    acc.append(("t", 3), "y1", 10, a, 0.0)
    assert acc.batches[("t", 3)][0].fail("TimeoutException")
    assert seen == [("b!", "x0", -1), ("b!", "x1", -1), ("b", "y0", -1), ("a", "y1", -1)]


def test_a_batch_completes_only_the_sends_still_open():
    """A record whose send was already completed (or never opened by this incarnation) is
    left out; the others keep their own offsets."""
    from types import SimpleNamespace

    from eosim.simulation.history import HistoryRecorder

    history = HistoryRecorder({})
    ids = [history.invoke_send("p/0", 0.0, "t", None, None, f"v{i}") for i in range(4)]
    app = SimpleNamespace(
        incarnation=0,
        open_ops={"v0": ids[0], "v2": ids[2], "v3": ids[3]},
        open_keys={},
        counts={"acked": 0},
        env=SimpleNamespace(now=5.0),
        history=history,
    )
    _Completion(app, 0).succeeded(["v0", "v1", "v2", "v3"], 1, 100)  # type: ignore[arg-type]
    assert app.counts["acked"] == 3 and app.open_ops == {}
    done = [
        (line["value"]["value"], line["value"]["offset"])
        for line in history.records()
        if line.get("type") == "ok"
    ]
    assert done == [("v0", 100), ("v2", 102), ("v3", 103)]

    stale = _Completion(app, 0)
    app.incarnation = 1
    stale.succeeded(["v0"], 1, 7)  # type: ignore[arg-type]
    assert app.counts["acked"] == 3


def test_send_leaves_no_garbage_for_the_collector():
    """`KafkaProducer.send` binds a send for each record: what it binds must be freed by
    reference counting alone (a bound send naming itself was a cycle per record, freed only
    when the collector ran, which a run holds off: 8% more peak memory in transactional
    runs)."""
    import gc

    import simpy

    from eosim.simulation.config import parse_producer_config
    from eosim.simulation.metadata import ClusterMetadata
    from eosim.simulation.network import Network, NetworkSettings
    from eosim.simulation.rng import RandomStreams
    from eosim.simulation.rules import ProtocolRules

    env = simpy.Environment()
    cfg = parse_producer_config({"enable.idempotence": False}, ProtocolRules())
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    producer = KafkaProducer(
        env, "p", network, ClusterMetadata(("b0",), {"t": 3}), cfg, RandomStreams(1).stream("s")
    )
    ok = lambda *_: None  # noqa: E731
    gc.collect()
    gc.disable()
    try:
        for i in range(200):
            assert producer.send("t", None, f"v{i}", None, ok, 10) is None
        assert gc.collect() == 0
    finally:
        gc.enable()
