"""Faults: realisation is deterministic and follows the spec; each fault kind bites."""

from __future__ import annotations

from support import scenario_with

from eosim.simulation import run_scenario
from eosim.simulation.nemesis import realize_faults
from eosim.simulation.protocol import InitProducerIdRequest
from eosim.simulation.rng import RandomStreams
from eosim.simulation.scenario import Fault


def test_random_faults_are_poisson_and_seeded():
    spec = [Fault(kind="crash", nodes=["a", "b"], rate=2.0, duration={"min": 10, "max": 20})]
    one = realize_faults(spec, 100_000, RandomStreams(5).stream("nemesis"))
    two = realize_faults(spec, 100_000, RandomStreams(5).stream("nemesis"))
    assert one == two
    assert 150 < len(one) < 250  # 2/s over 100 s
    assert all(10 <= e.end - e.start <= 20 and e.targets[0] in ("a", "b") for e in one)
    assert [e.start for e in one] == sorted(e.start for e in one)


def test_scheduled_fault_is_exact():
    spec = [Fault(kind="pause", nodes=["broker-0"], at="2s", duration="500ms")]
    (event,) = realize_faults(spec, 10_000, RandomStreams(1).stream("nemesis"))
    assert (event.start, event.end, event.targets) == (2000.0, 2500.0, ("broker-0",))


def test_broker_crashes_and_pauses_do_not_break_idempotence():
    s = scenario_with(
        "faults=[{kind: crash, nodes: [broker-0, broker-1], rate: 4,"
        " duration: {min: 20, max: 200}},"
        " {kind: pause, nodes: [broker-1], at: 100, duration: 300}]",
        "producers.0.config.request.timeout.ms=200",
    )
    for seed in range(3):
        r = run_scenario(s, seed)
        assert r.faults and r.counts["acked"] + r.counts["indeterminate"] == 1500
        logs = [rec["value"] for log in r.history.logs for rec in log["records"]]
        assert len(logs) == len(set(logs))


def test_restarted_producer_gets_a_new_producer_id():
    s = scenario_with("faults=[{kind: crash, nodes: [producer-0], at: 100, duration: 50}]")
    r = run_scenario(s, 1)
    pids = {rec["producer_id"] for log in r.history.logs for rec in log["records"]}
    assert len(pids) == 2
    processes = {rec["process"] for rec in r.history.records() if rec.get("kind") == "op"}
    assert processes == {"producer-0/0", "producer-0/1"}


def test_partition_between_producer_and_brokers_stalls_then_recovers():
    s = scenario_with(
        "network.request_loss=0",
        "network.response_loss=0",
        "faults=[{kind: partition, groups: [[producer-0]], at: 100, duration: 2s}]",
    )
    r = run_scenario(s, 1)
    assert r.counts["acked"] == 1500
    times = [rec["time"] for rec in r.history.records() if rec.get("type") == "ok"]
    assert max(times) > 2100  # nothing could be acknowledged during the cut


def test_buffer_memory_blocks_send_and_fails_after_max_block_ms():
    s = scenario_with(
        "network.request_loss=0",
        "network.response_loss=0",
        "producers.0.config.buffer.memory=32768",
        "producers.0.config.max.block.ms=50",
        "faults=[{kind: partition, groups: [[producer-0]], at: 50, duration: 3s}]",
        "producers.0.workload.keys=null",
    )
    r = run_scenario(s, 1)
    errors = [rec.get("error", "") for rec in r.history.records() if rec.get("type") == "fail"]
    assert r.counts["failed"] > 0 and all("max.block.ms" in e for e in errors)


def test_lost_init_producer_id_response_times_out_like_any_request():
    # The producer asks a broker for its id once its connection is ready; the answer is lost
    # and the connection black-holed. The request must time out after request.timeout.ms
    # (500 ms), not wait for TCP to reset the dead connection (30 s). A first run finds when
    # and where the request goes; the fault's run is the same until then.
    calm = ("network.request_loss=0", "network.response_loss=0")
    trace = run_scenario(scenario_with(*calm), 1, trace=True).trace
    assert trace is not None
    sent = next(
        e for e in trace if e.event == "send" and isinstance(e.payload, InitProducerIdRequest)
    )
    s = scenario_with(
        *calm,
        f"faults=[{{kind: loss, links: [[{sent.dst}, producer-0]], at: {sent.time},"
        " duration: 5, probability: 1}]",
    )
    r = run_scenario(s, 1)
    assert r.counts["acked"] == 1500
    first_ack = min(rec["time"] for rec in r.history.records() if rec.get("type") == "ok")
    assert sent.time + 500 <= first_ack < 2_000
