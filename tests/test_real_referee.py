"""The referee on a real cluster: in each test one of the rules of eosim.real.referee is made to
fail during a real run (a pause whose threads do not stop, a broker that does not serve again, a
drain that stops short, a driver that dies, a delayer killed during its fault, nftables rules
that do not read back, a workload that starts late, a warm-up whose JIT does not settle, a
workload whose start makes the brokers compile, even after its rehearsals), and
the run is then invalid, with its reason, and counted as such by a sweep; the same small run
left alone is valid. The rules' logic on a fake cluster is in tests/test_referee.py and
tests/test_warmth.py."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka_support import installed_kafka, kafka_target

from eosim.analysis import outcome as checked
from eosim.real import referee as rules
from eosim.real import runner

TINY = textwrap.dedent(
    """
    name: real-referee
    seed: 5
    cluster:
      brokers: 1
      topics:
        - {name: events, partitions: 2, replication_factor: 1}
    producers:
      - name: producer-0
        config: {acks: all, enable.idempotence: true, request.timeout.ms: 3000}
        workload: {topic: events, records: 1500, rate: 500, keys: 20}
    faults:
      - {kind: pause, nodes: [broker-0], at: 1s, duration: 500ms}
    expect:
      lost_write: 0
    """
)


def scenario(text: str = TINY, overrides: tuple[str, ...] = ()):
    return checked.parse(text, "real-referee.yaml", overrides)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with kafka_target(tmp_path_factory.mktemp("kafka")) as target:
        yield target


@pytest.fixture(autouse=True)
def short_warmup(monkeypatch):
    """A short warm-up load: these tests judge the referee, not latencies."""
    monkeypatch.setattr(runner, "WARMUP_S", 1.0)


def _rules(outcome) -> list[str]:
    return [reason.split(": ")[0] for reason in outcome.run.invalid]


@pytest.mark.kafka
def test_a_run_left_alone_is_valid_and_its_faults_carry_both_times(kafka):
    outcome = checked.run(scenario(), target=kafka)
    assert outcome.run.invalid == [], outcome.run.invalid
    assert [f.kind for f in outcome.run.faults] == ["pause"]
    start = next(f for f in outcome.history.faults if f["phase"] == "start")
    assert start["scheduled"] == 1000.0 and 1000.0 <= start["time"] < 1000.0 + rules.LATE_BOUND_MS
    assert outcome.verdict == "expectations met"


@pytest.mark.kafka
def test_a_pause_whose_threads_do_not_stop_makes_the_run_invalid(kafka, monkeypatch):
    import eosim.real.cluster as cluster_module

    monkeypatch.setattr(cluster_module, "wait_stopped", lambda pid, timeout=2.0: False)
    outcome = checked.run(scenario(), target=kafka)
    assert _rules(outcome) == [rules.FAULT_NOT_APPLIED]
    assert "pause ['broker-0']" in outcome.run.invalid[0]
    assert outcome.run.faults == []  # counted as applied only once confirmed
    assert not [f for f in outcome.history.faults if f["fault"] == "pause"]
    assert outcome.verdict.startswith("INVALID")


@pytest.mark.kafka
def test_a_broker_not_serving_again_in_time_makes_the_run_invalid(kafka, monkeypatch):
    monkeypatch.setattr(runner, "BACK_TIMEOUT_S", 0.001)
    s = scenario(overrides=("faults.0.kind=crash",))
    outcome = checked.run(s, target=kafka)
    assert rules.NOT_BACK in _rules(outcome)
    kafka.cluster.wait_ready(["broker-0"])  # for the next test


@pytest.mark.kafka
def test_a_drain_that_stops_short_makes_the_run_invalid(kafka, monkeypatch):
    real_write_spec = runner.write_spec

    def no_time_to_drain(path, mode, name, bootstrap, **kw):
        if mode == "drain":
            kw["workload"] = {**kw["workload"], "timeout_ms": 0}
        return real_write_spec(path, mode, name, bootstrap, **kw)

    monkeypatch.setattr(runner, "write_spec", no_time_to_drain)
    outcome = checked.run(scenario(), target=kafka)
    # With no time at all the drain stops before it knows the partitions (a failed drain)
    # or before it reaches their ends (partitions named): either way the run is invalid.
    assert _rules(outcome) == [rules.DRAIN_INCOMPLETE]
    assert not outcome.history.logs or len(outcome.history.logs) < 2


@pytest.mark.kafka
def test_a_driver_that_dies_makes_the_run_invalid(kafka, monkeypatch):
    real_spec_for = runner.apps.spec_for

    def broken(plan, *args):
        spec = real_spec_for(plan, *args)
        spec["config"] = {**spec["config"], "acks": "sometimes"}  # KafkaProducer refuses it
        return spec

    monkeypatch.setattr(runner.apps, "spec_for", broken)
    outcome = checked.run(scenario(), target=kafka)
    assert rules.DRIVER_DIED in _rules(outcome)
    assert "producer-0 exited with 1" in " ".join(outcome.run.invalid)


@pytest.mark.kafka
def test_a_workload_that_starts_late_makes_the_run_invalid(kafka, monkeypatch):
    monkeypatch.setattr(runner, "START_LEAD_MS", 0.0)  # no time for the JVM before the epoch
    outcome = checked.run(scenario(), target=kafka)
    assert rules.WORKLOAD_LATE in _rules(outcome)


@pytest.mark.kafka
def test_a_warm_up_whose_jit_does_not_settle_makes_the_run_invalid(kafka, monkeypatch):
    cluster = kafka.cluster_for(scenario())
    for node in cluster.nodes.values():
        node.cold = True  # as after a restart: the run warms the cluster first
    monkeypatch.setattr(runner, "JIT_SETTLED_MS_PER_S", -1.0)  # never settled
    monkeypatch.setattr(runner, "WARMUP_SLICE_S", 1.0)
    monkeypatch.setattr(runner, "WARMUP_MAX_S", 2.0)
    outcome = checked.run(scenario(), target=kafka)
    assert _rules(outcome) == [rules.NOT_WARM]
    assert "after 2 s of warm-up load broker-0's JIT compiled" in outcome.run.invalid[0]
    assert cluster.cold_nodes() == []  # the next run does not warm again


@pytest.mark.kafka
def test_a_workload_that_makes_the_brokers_compile_makes_the_run_invalid(kafka, monkeypatch):
    monkeypatch.setattr(runner, "JIT_WORKLOAD_MS_PER_S", -1.0)  # any compiling is too much
    monkeypatch.setattr(runner, "JIT_WINDOW_MIN_S", 0.5)  # the fault comes 1 s in
    outcome = checked.run(scenario(), target=kafka)
    assert _rules(outcome) == [rules.COMPILING]
    assert "broker-0's JIT compiled" in outcome.run.invalid[0]
    # Judged up to the first fault: a window shorter than the bound's is not judged.
    monkeypatch.setattr(runner, "JIT_WINDOW_MIN_S", 1.5)
    assert checked.run(scenario(), target=kafka).run.invalid == []


REHEARSED = textwrap.dedent(
    """
    name: real-rehearsal
    seed: 5
    cluster:
      brokers: 1
      topics:
        - {name: events, partitions: 2, replication_factor: 1}
    producers:
      - name: producer-0
        config: {acks: all, enable.idempotence: true}
        workload: {topic: events, records: 3000, rate: 500, keys: 20}
    consumers:
      - {name: reader, topic: events, auto.offset.reset: earliest}
    expect:
      lost_write: 0
      duplicate: 0
    """
)


def _cold(cluster) -> None:
    for node in cluster.nodes.values():
        node.cold = True  # as after a restart: the run warms the cluster first


@pytest.mark.kafka
def test_a_rehearsal_that_never_keeps_the_rule_stops_at_its_bound_and_leaves_no_record(
    kafka, monkeypatch
):
    # A fault-free start of 6 s, judged by "compiling": after its warm-up the run rehearses
    # its own load; with any compiling too much, every rehearsal breaks the rule.
    _cold(kafka.cluster_for(scenario(REHEARSED)))
    monkeypatch.setattr(runner, "JIT_WORKLOAD_MS_PER_S", -1.0)
    monkeypatch.setattr(runner, "REHEARSALS_MAX", 2)
    outcome = checked.run(scenario(REHEARSED), target=kafka)
    assert outcome.run.stats["rehearsals"] == 2
    assert _rules(outcome) == [rules.COMPILING]  # the run is judged as it comes
    # The topics were recreated after the rehearsals: the log holds the run's records alone
    # (the rehearsals wrote the same values, which would read as duplicates).
    assert outcome.counts["acked"] == 3000
    assert sum(len(records) for records in outcome.history.logs.values()) == 3000
    assert outcome.expect.met, outcome.expect.to_dict()


@pytest.mark.kafka
def test_one_rehearsal_that_keeps_the_rule_is_enough_and_a_warm_cluster_is_not_rehearsed(
    kafka, monkeypatch
):
    _cold(kafka.cluster_for(scenario(REHEARSED)))
    monkeypatch.setattr(runner, "JIT_WORKLOAD_MS_PER_S", 1e9)
    first = checked.run(scenario(REHEARSED), target=kafka)
    assert first.run.stats["rehearsals"] == 1 and first.run.invalid == []
    second = checked.run(scenario(REHEARSED), target=kafka)
    assert "rehearsals" not in second.run.stats and second.run.invalid == []
    assert second.expect.met, second.expect.to_dict()


@pytest.mark.kafka
def test_nft_rules_that_do_not_read_back_make_the_run_invalid(kafka, monkeypatch):
    from eosim.real import netns

    if kafka.cluster_for(scenario()).net is None:
        pytest.skip("no network namespaces here")

    def unread(self, node, handle, inp, out):
        raise netns.NetnsError(f"{node}: table eosim_{handle} holds 0 input and 0 output rules")

    monkeypatch.setattr(netns.Network, "_read_back", unread)
    s = scenario(overrides=("faults.0.kind=partition",))
    outcome = checked.run(s, target=kafka)
    assert _rules(outcome) == [rules.FAULT_NOT_APPLIED]
    assert "partition" in outcome.run.invalid[0]


@pytest.mark.kafka
def test_a_delayer_that_dies_during_its_fault_makes_the_run_invalid(kafka, monkeypatch):
    cluster = kafka.cluster_for(scenario())
    if "delay" in cluster.refuses:
        pytest.skip(cluster.refuses["delay"])
    real_disturb = type(cluster).disturb

    def disturb_then_kill(self, nodes, links, extra_latency, loss):
        handle = real_disturb(self, nodes, links, extra_latency, loss)
        for delayer in self.net._delayers.values():
            delayer.process.kill()
        return handle

    monkeypatch.setattr(type(cluster), "disturb", disturb_then_kill)
    s = scenario(
        overrides=("faults.0.kind=delay", "faults.0.extra_latency=20ms", "faults.0.nodes=[]")
    )
    outcome = checked.run(s, target=kafka)
    assert rules.DELAYER_DIED in _rules(outcome)


def test_a_driver_whose_clock_is_not_the_runners_makes_the_run_invalid(tmp_path):
    run = runner.RealRun.__new__(runner.RealRun)
    run.referee = rules.Referee()

    def finished(clock_ms: float) -> SimpleNamespace:
        process = SimpleNamespace(result=lambda: {"clock_ms": clock_ms, "late_ms": 0.0})
        plan = SimpleNamespace(name="producer-0")
        return SimpleNamespace(
            process=process, plan=plan, spawned_ms=-4000.0, history=Path("producer-0.0.jsonl")
        )

    run.finished = [finished(-3200.0)]
    run.check_drivers()
    assert run.referee.valid
    run.finished = [finished(1.7e12)]  # a wall clock where the monotonic one was expected
    run.check_drivers()
    assert [r.split(": ")[0] for r in run.referee.reasons] == [rules.CLOCK]


@pytest.mark.kafka
def test_the_drivers_clock_is_the_runners_monotonic_clock(tmp_path):
    from eosim.real.clients import run_driver, write_spec

    install = installed_kafka()
    spec = write_spec(tmp_path / "clock.json", "clock", "clock", "localhost:1")
    before = time.monotonic_ns()
    result = run_driver(install, spec, 60.0)
    after = time.monotonic_ns()
    assert before <= result["nano_time"] <= after


@pytest.mark.kafka
def test_a_sweep_counts_an_invalid_run_and_leaves_it_out(kafka, monkeypatch, tmp_path):
    import eosim.real.cluster as cluster_module
    from eosim.analysis.sweep import run_sweep

    monkeypatch.setattr(cluster_module, "wait_stopped", lambda pid, timeout=2.0: False)
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    result = run_sweep(str(path), 1, out=tmp_path / "out", quiet=True, target=kafka)
    row = result.table[0]
    assert (row["runs"], row["invalid_runs"]) == (0, 1)
    import pyarrow.dataset as ds

    runs = ds.dataset(tmp_path / "out" / "runs", partitioning="hive").to_table().to_pylist()
    assert runs[0]["valid"] is False
    assert runs[0]["invalid_reason"].startswith(rules.FAULT_NOT_APPLIED)
    assert runs[0]["faults_pause"] == 0  # what was applied, not what was scheduled
