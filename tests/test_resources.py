"""The resource model (cluster.resources): hosts book their cores first-come first-served, a
JVM's pauses stretch the work in progress and its warm-up slows a fresh process, a broker's
requests wait for its threads and cores, a follower's append takes its fetcher thread's time,
and a scenario without the block runs the unbounded model unchanged."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import yaml

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.host import GcSettings, Host, Jvm, WarmupSettings
from eosim.simulation.resources import Machines, Resources
from eosim.simulation.rng import RandomStreams
from eosim.simulation.scenario import ScenarioError, parse_scenario

BASE = """
name: resources
seed: 1
cluster:
  brokers: 3
  topics:
    - {name: events, partitions: 3, replication_factor: 3, config: {min.insync.replicas: 2}}
producers:
  - name: producer-0
    config: {acks: all, enable.idempotence: true}
    workload: {topic: events, records: 3000, rate: 1000, keys: 30}
consumers:
  - {name: reader, topic: events, isolation: read_uncommitted, auto.offset.reset: earliest}
"""


def scenario(resources: str = "", overrides: tuple[str, ...] = ()):
    text = BASE
    if resources:
        text = text.replace("cluster:\n", "cluster:\n  resources: " + resources + "\n", 1)
    return parse_scenario(text, "resources.yaml", list(overrides))


PRESETS = Path(__file__).resolve().parent.parent / "simulation" / "presets"


def jvm(cores: int = 1, gc: GcSettings | None = None, warmup: WarmupSettings | None = None):
    return Jvm(
        "p",
        Host("h", cores),
        gc or GcSettings(),
        warmup or WarmupSettings(),
        RandomStreams(1).stream("gc:p"),
    )


# -- hosts and JVMs --------------------------------------------------------------------------
def test_a_host_books_its_cores_first_come_first_served():
    host = Host("h", 2)
    assert [host.book(0.0, 1.0) for _ in range(3)] == [1.0, 1.0, 2.0]
    assert host.book(5.0, 1.0) == 6.0  # a free core starts the work when it is ready
    assert host.busy_ms == 4.0


def test_a_thread_woken_while_every_core_is_busy_pays_the_schedulers_latency():
    host = Host("h", 1, wakeup_ms=0.25)
    p = Jvm("p", host, GcSettings(), WarmupSettings(), RandomStreams(1).stream("gc:p"))
    assert p.book(0.0, 1.0) == 1.0  # an idle core: no latency
    assert p.book(0.5, 1.0) == 2.25  # the core frees at 1.0, the woken thread's work ends late
    assert p.waited_ms == pytest.approx(0.75)  # the latency is waiting, not work
    assert p.worked_ms == 2.0 and host.busy_ms == 2.0
    assert host.book(2.0, 1.0) == 3.0  # the core went on at 2.0; the collector pays none
    assert p.book(10.0, 1.0) == 11.0  # idle again
    assert Host("h", 1).book(0.0, 1.0, True) == 1.0
    busy = Host("h", 1)
    busy.book(0.0, 1.0)
    assert busy.book(0.5, 1.0, True) == 2.0  # wakeup_ms 0: first-come first-served as before


def test_a_pause_stretches_the_work_it_overlaps():
    p = jvm()
    p._stop(2.0, 4.0)
    assert p.finish(0.0, 5.0) == 7.0  # 2 ms before the pause, 3 after it
    assert p.finish(4.0, 1.0) == 5.0  # after it: untouched
    assert p.finish(0.0, 1.0) == 1.0  # before it: untouched
    p._stop(8.0, 10.0)
    assert p.finish(0.0, 7.0) == 11.0  # both pauses


def test_a_sigstop_is_a_pause_from_pause_to_resume():
    p = jvm()
    p.paused(10.0)
    p.resumed(30.0)
    assert p.finish(5.0, 10.0) == 35.0


def test_collections_come_with_allocation_and_stop_the_process():
    p = jvm(gc=GcSettings(young_mb=10.0, pause_ms=4.0, pause_sigma=0.0))
    p.allocate(1.0, 9.0)
    assert p.gc_pauses == 0
    p.allocate(2.0, 2.0)
    assert p.gc_pauses == 1 and p.stopped_until(3.0) == pytest.approx(6.0)
    assert p.finish(2.0, 1.0) == pytest.approx(7.0)


def test_a_fresh_process_is_slower_and_warms_up():
    p = jvm(warmup=WarmupSettings(factor=10.0, seconds=2.0))
    assert p.slowdown(0.0) == 1.0  # warm at the run's start
    p.restarted(1000.0)
    assert p.slowdown(1000.0) == pytest.approx(10.0)
    assert p.slowdown(3000.0) == pytest.approx(1 + 9 * math.exp(-1))
    assert p.slowdown(100_000.0) == 1.0


# -- the block ---------------------------------------------------------------------------------
def test_a_records_booking_is_the_general_paths_written_out():
    """Jvm.record_booker, the per-record path every send takes, books and allocates exactly
    as Jvm.book and Jvm.allocate do: the same core calendar, waits, run-queue latency, warm-up
    slowdown and collections, record after record on a host busy with other work."""
    import simpy

    def world(fast: bool):
        env = simpy.Environment()
        host = Host("h", 1, wakeup_ms=0.15)
        streams = RandomStreams(3)
        p = Jvm(
            "p",
            host,
            GcSettings(young_mb=0.05, pause_ms=2.0, pause_sigma=0.5),
            WarmupSettings(factor=4.0, seconds=0.01),
            streams.stream("gc"),
            started=0.0,
        )
        pauses: list[float] = []
        book = p.record_booker(0.03, 0.008, pauses.append) if fast else None
        other = streams.stream("other")
        for i in range(400):
            now = i * 0.05
            env.run(until=now) if now > env.now else None
            if i % 7 == 0:
                host.book(now, other.exponential(0.2))
            if book is not None:
                book(now)
            else:
                p.book(now, 0.03)
                if (pause := p.allocate(now, 0.008)) > 0:
                    pauses.append(pause)
        return host._free, host.busy_ms, host.late_ms, p.waited_ms, p.worked_ms, pauses

    fast, general = world(True), world(False)
    assert fast == general
    assert general[2] > 0 and general[5] and general[3] > 0


def test_processes_go_to_their_host_then_the_star_then_their_own():
    r = Resources(
        hosts=[
            {"name": "a", "cores": 2, "processes": ["broker-0"]},
            {"name": "b", "cores": 1, "processes": ["*"]},
        ]
    )
    plan = r.host_plan(["broker-0", "broker-1", "producer-0"])
    assert plan.placement == {"broker-0": "a", "broker-1": "b", "producer-0": "b"}
    alone = Resources(cores=3).host_plan(["broker-0", "broker-1"])
    assert alone.placement == {"broker-0": "host-broker-0", "broker-1": "host-broker-1"}
    assert alone.cores == {"host-broker-0": 3, "host-broker-1": 3}


def test_bad_blocks_are_one_line_naming_the_place():
    with pytest.raises(ScenarioError, match="placed on two hosts"):
        scenario(
            "{hosts: [{name: a, cores: 1, processes: [broker-0]},"
            " {name: b, cores: 1, processes: [broker-0]}]}"
        )
    with pytest.raises(ScenarioError, match=r"unknown resources preset 'nope'"):
        scenario("{preset: nope}")
    with pytest.raises(ScenarioError, match=r"cluster\.resources\.cores"):
        scenario("{cores: 0}")
    with pytest.raises(ScenarioError, match=r"cluster\.resources\.service"):
        scenario("{service: {produce: {fixed: 1}}}")


def test_a_preset_may_be_another_with_keys_changed_but_not_in_a_circle(monkeypatch):
    from eosim.simulation import resources as module

    files = {
        "base": {
            "machine": {"cpu": "X"},
            "resources": {"scheduler": {"wakeup_ms": 0.5}, "gc": {"young_mb": 10.0}},
        },
        "child": {"resources": {"preset": "base", "gc": {"young_mb": 20.0}}},
        "a": {"resources": {"preset": "b"}},
        "b": {"resources": {"preset": "a"}},
    }
    monkeypatch.setattr(module, "preset_names", lambda: sorted(files))
    monkeypatch.setattr(module, "_preset_file", lambda name: files[name])
    assert module.load_preset("child") == {
        "scheduler": {"wakeup_ms": 0.5},
        "gc": {"young_mb": 20.0},
    }
    assert module.preset_machine("child") == {"cpu": "X"}
    with pytest.raises(ValueError, match="'a': presets name each other in a circle"):
        module.load_preset("a")


def test_calibration_host_is_the_preset_of_the_machine_the_calibration_runs_on():
    from eosim.simulation.resources import load_preset, preset_machine

    data = yaml.safe_load((PRESETS / "calibration-host.yaml").read_text())
    machine = data["resources"]["preset"]
    assert load_preset("calibration-host") == load_preset(machine)
    assert preset_machine("calibration-host") == preset_machine(machine) is not None


def test_the_broker_thread_configs_are_kafkas():
    s = scenario("{}", ("cluster.config.num.io.threads=2",))
    from eosim.simulation.cluster import ClusterSettings

    threads = ClusterSettings.from_scenario(s).threads
    assert (threads.network_threads, threads.io_threads, threads.queued_max_requests) == (
        3,
        2,
        500,
    )
    assert threads.replica_fetchers == 1


# -- runs ----------------------------------------------------------------------------------
def _latency_p50(run) -> float:
    from eosim.analysis.history import history_from_recorder
    from eosim.analysis.timings import ack_latencies

    latencies = sorted(ack_latencies(history_from_recorder(run.history)))
    return latencies[len(latencies) // 2]


def test_without_the_block_the_model_is_unbounded_and_unchanged():
    s = scenario()
    assert s.cluster.resources is None
    a, b = run_scenario(s, 1), run_scenario(s, 1)
    assert a.history.digest() == b.history.digest()
    # An empty block is the resource model with every cost 0: another model.
    with_block = run_scenario(scenario("{}"), 1)
    assert with_block.history.digest() != a.history.digest()


def test_costly_work_on_one_shared_core_slows_every_answer():
    cheap = run_scenario(scenario("{hosts: [{name: m, cores: 1, processes: ['*']}]}"), 1)
    costly = run_scenario(
        scenario(
            "{hosts: [{name: m, cores: 1, processes: ['*']}],"
            " service: {produce: {fixed_ms: 0.4}, replica_fetch: {fixed_ms: 0.2},"
            " replica_append: {fixed_ms: 0.2}, fetch: {fixed_ms: 0.2}}}"
        ),
        1,
    )
    assert _latency_p50(costly) > _latency_p50(cheap) + 0.5


def test_collections_put_a_tail_on_the_latency():
    def p99(resources: str) -> float:
        from eosim.analysis.history import history_from_recorder
        from eosim.analysis.timings import ack_latencies

        run = run_scenario(scenario(resources), 1)
        lat = sorted(ack_latencies(history_from_recorder(run.history)))
        return lat[int(len(lat) * 0.99)]

    calm = p99("{service: {produce: {alloc_per_record_mb: 0.05}}}")
    paused = p99(
        "{service: {produce: {alloc_per_record_mb: 0.05}},"
        " gc: {young_mb: 5, pause_ms: 40, pause_sigma: 0.1}}"
    )
    assert paused > calm + 20


def test_the_same_seed_gives_the_same_history_with_resources():
    r = "{hosts: [{name: m, cores: 2, processes: ['*']}], gc: {young_mb: 2, pause_ms: 3},"
    r += " service: {produce: {fixed_ms: 0.1, alloc_per_record_mb: 0.01}}}"
    assert (
        run_scenario(scenario(r), 4).history.digest()
        == run_scenario(scenario(r), 4).history.digest()
    )


def test_machines_give_each_process_a_jvm_on_its_host():
    r = Resources(hosts=[{"name": "m", "cores": 2, "processes": ["*"]}])
    machines = Machines(r, ["controller", "broker-0", "producer-0"], RandomStreams(1).stream)
    assert set(machines.jvms) == {"controller", "broker-0", "producer-0"}
    assert len({id(j.host) for j in machines.jvms.values()}) == 1
    assert machines.client_load("producer-0") is None  # applications cost nothing here


def test_background_cpu_is_booked_while_a_process_runs():
    import simpy

    r = Resources(
        hosts=[{"name": "m", "cores": 1, "processes": ["*"]}],
        background={"broker_ms_per_s": 100.0},
    )
    streams = RandomStreams(1)
    machines = Machines(r, ["controller", "broker-0"], streams.stream)
    env = simpy.Environment()
    up = {"broker-0": True, "controller": True}
    machines.start_background(env, lambda name: up[name], streams.stream)
    env.run(until=10_000.0)
    host = machines.hosts["m"]
    assert host.busy_ms == 0.0  # booked lazily: nothing asked the host yet
    machines.catch_up("broker-0", env.now)
    assert 850 < host.busy_ms < 1150  # 10% of a core: about 1,000 bursts of 1 ms in 10 s
    spent = host.busy_ms
    up["broker-0"] = False  # crashed: it spends nothing
    env.run(until=20_000.0)
    host.catch_up(env.now)
    assert host.busy_ms == spent


def test_each_application_spends_the_client_background_and_readers_too():
    """background.client_ms_per_s: every process that is neither a broker nor the
    controller gets its own steady background, whatever ``running`` says of the cluster; at
    0 (the default) no source is added and the brokers' bursts are drawn as before."""
    import simpy

    def busy(client_ms: float, processes: list[str]) -> float:
        r = Resources(
            hosts=[{"name": "m", "cores": 2, "processes": ["*"]}],
            background={"broker_ms_per_s": 100.0, "client_ms_per_s": client_ms},
        )
        streams = RandomStreams(1)
        machines = Machines(r, ["controller", "broker-0", *processes], streams.stream)
        env = simpy.Environment()
        machines.start_background(env, lambda name: name != "controller", streams.stream)
        env.run(until=10_000.0)
        machines.hosts["m"].catch_up(env.now)
        return machines.hosts["m"].busy_ms

    brokers = busy(0.0, ["producer-0", "reader"])
    assert brokers == busy(0.0, [])  # the broker's own bursts, unchanged by clients
    both = busy(50.0, ["producer-0", "reader"])
    assert 850 < both - brokers < 1150  # two clients at 5% of a core for 10 s


def test_background_booked_lazily_gives_the_calendar_booking_each_burst_would():
    """A host books its background's bursts when it is next asked (Host.catch_up), each at
    its own moment: every piece of work then starts and ends as it would had each burst been
    booked by a simulation event of its own at its moment (an event per burst, written out
    here: the steady part's Poisson moments, and after each start the JIT's, drawn by
    inverting its decaying cumulative rate), through a crash, two restarts (the first JIT's
    moments void once the second JVM starts) and pieces of work ready later than now."""
    import simpy

    from eosim.simulation.host import Background, Host, Jvm, WarmupSettings

    base_ms, jit_ms, seconds, burst = 150.0, 300.0, 2.0, 0.7
    down, restarts = (1000, 2000), (1500, 2200)

    def world(lazy: bool):
        env = simpy.Environment()
        host = Host("h", 2)
        jvm = Jvm("b", host, GcSettings(), WarmupSettings(), RandomStreams(7).stream("gc"))
        up = [True]
        base_rng, jit_rng = RandomStreams(7).stream("bg"), RandomStreams(7).stream("jit")
        if lazy:
            source = Background(
                jvm, base_ms, jit_ms, seconds, burst, lambda: up[0], base_rng, jit_rng
            )
            host.add_background(env, source)
        else:

            def steady():
                while True:
                    yield env.timeout(base_rng.exponential(1000.0 * burst / base_ms))
                    if up[0]:
                        host.book(env.now, burst)

            def jit(started: float):  # one JVM's JIT, from its start until the next start
                scale = jit_ms * seconds / burst
                mass = 0.0
                while True:
                    mass += jit_rng.exponential(1.0)
                    if mass >= scale * (1 - math.exp(-20.0)):
                        return
                    moment = started - 1000.0 * seconds * math.log1p(-mass / scale)
                    yield env.timeout(moment - env.now)
                    if jvm.started != started:
                        return  # a new JVM: this one's moments are void
                    if up[0]:
                        host.book(moment, burst)  # (env.now can differ by a rounding)

            env.process(steady())
        ends: list[float] = []

        def work():
            rng = RandomStreams(3).stream("work")
            for i in range(3000):
                yield env.timeout(rng.exponential(2.0))
                if (i in down or i in restarts) and lazy:
                    host.before_change(env.now)  # before the process's state changes
                if i in down:
                    up[0] = False  # the process dies
                elif i in restarts:
                    up[0] = True
                    jvm.restarted(env.now)
                    if not lazy:
                        env.process(jit(env.now))
                later = rng.uniform(0.0, 1.0)  # some work is ready a little later than now
                ends.append(host.book(env.now + later, rng.uniform(0.05, 0.6), i % 2 == 0))
                ends.append(host.earliest())

        env.process(work())
        env.run(until=20_000.0)
        if lazy:
            host.catch_up(env.now)
        return ends, host.busy_ms

    (lazy, lazy_busy), (eager, eager_busy) = world(True), world(False)
    assert lazy == eager
    assert lazy_busy == pytest.approx(eager_busy, rel=1e-12)  # summed in another order
    # The background did book bursts, the JIT's among them (more than the steady part's).
    assert lazy_busy > 1.2 * base_ms * 20.0 * 0.7


def test_the_jit_background_decays_at_its_rate_after_each_start():
    """The JIT's moments, drawn by inverting their cumulative rate, come at jit_ms per second
    decaying with seconds from the JVM's start: in each second of age the bursts number what
    the rate integrates to (within sampling error over many starts), and none come 20
    seconds-constants after it."""
    from eosim.simulation.host import Background, Host, Jvm, WarmupSettings

    jit_ms, seconds, burst = 400.0, 1.0, 0.5
    counts = [0] * 6
    late = 0
    starts = 400
    streams = RandomStreams(11)
    for k in range(starts):
        host = Host("h", 1)
        jvm = Jvm("b", host, GcSettings(), WarmupSettings(), streams.stream("gc"))
        jvm.started = 0.0
        steady, jit = streams.stream(f"a{k}"), streams.stream(f"j{k}")
        source = Background(jvm, 0.0, jit_ms, seconds, burst, lambda: True, steady, jit)
        source.start()
        bursts: list[float] = []
        source.collect(100_000.0, bursts)
        for moment in bursts:
            if moment < 6000.0:
                counts[int(moment // 1000.0)] += 1
            elif moment >= 20_000.0 * seconds:
                late += 1
    for second, n in enumerate(counts):
        # bursts per start in [s, s+1): (jit / burst) * seconds * (e^-s - e^-(s+1)).
        expected = starts * jit_ms / burst * (math.exp(-second) - math.exp(-second - 1))
        assert abs(n - expected) < 4 * math.sqrt(expected) + 2, (second, n, expected)
    assert late == 0


# -- a broker's threads --------------------------------------------------------------------------
def _threads(cores: int = 1, io: int = 1, net: int = 1, queued: int = 500, **service):
    import simpy

    from eosim.simulation.broker.request_handler_pool import (
        BrokerThreads,
        Cost,
        ServiceTimes,
        ThreadSettings,
    )

    env = simpy.Environment()
    costs = ServiceTimes(**{k: Cost(fixed_ms=v) for k, v in service.items()})
    p = jvm(cores)
    return env, BrokerThreads(env, p, costs, ThreadSettings(net, io, queued, 1))


class _Conn:
    """A connection as the threads see it: its number in the run."""

    _numbers = itertools.count(1)

    def __init__(self) -> None:
        self.number = next(self._numbers)


def _msg(payload: object, conn: object = None):
    from eosim.simulation.network import Message

    return Message("client", "broker-0", payload, conn, 0.0, 0, False)


def test_requests_wait_for_a_handler_thread_and_a_core():
    from eosim.simulation.protocol import MetadataRequest

    _env, threads = _threads(cores=2, io=1, other=1.0, network=0.5)
    ends = [threads.book_request(_msg(MetadataRequest(i)), 0.0)[1] for i in range(3)]
    # One network thread reads them one after another (0.5 ms each), one handler handles
    # them one after another (1 ms each).
    assert ends == [1.5, 2.5, 3.5]
    _env2, more = _threads(cores=2, io=2, net=2, other=1.0, network=0.5)
    conns = [_Conn(), _Conn()]
    a = more.book_request(_msg(MetadataRequest(1), conns[0]), 0.0)[1]
    b = more.book_request(_msg(MetadataRequest(2), conns[1]), 0.0)[1]
    assert (a, b) == (1.5, 1.5)  # two connections, two network threads, two handlers, 2 cores


def test_a_request_queue_time_is_its_wait_for_a_handler_and_the_handlers_wake_up():
    """What Kafka's RequestQueueTimeMs measures and analysis.measure fits the scheduler's
    latency to: from the read's end to the handling's start."""
    from eosim.simulation.protocol import MetadataRequest

    _env, threads = _threads(cores=2, io=1, other=1.0, network=0.5)
    for i in range(3):
        threads.book_request(_msg(MetadataRequest(i)), 0.0)
    # The first read and handled as one piece (0-1.5); the second read at 0.5-1.0 on the
    # other core, the third at 1.5-2.0 (both cores busy until then); the one handler is free
    # at 1.5 and 2.5: queued 0, 0.5 and 0.5 ms.
    assert threads.jvm.requests == 3 and threads.jvm.queued_ms == pytest.approx(1.0)
    _env, woken = _threads(cores=1, io=1, other=1.0, network=0.5)
    host = woken.jvm.host
    host.wakeup_ms = 0.25
    host.book(0.0, 1.0)  # the core busy until 1.0: the handler thread wakes late
    _start, end = woken.book_request(_msg(MetadataRequest(1)), 0.5)
    assert end == pytest.approx(2.75) and woken.jvm.queued_ms == pytest.approx(0.25)
    woken.book_request(_msg(MetadataRequest(2)), 10.0)  # an idle core: no latency
    assert woken.jvm.requests == 2 and woken.jvm.queued_ms == pytest.approx(0.25)
    assert host.late_ms == pytest.approx(0.25)


def test_answers_to_a_brokers_own_requests_take_the_thread_that_sent_them():
    """Kafka's TxnMarkerSenderThread reads a leader's answer to its markers and, after the
    last one, appends CompleteCommit on that same thread (TransactionMarkerChannelManager.
    tryAppendToLog); AddPartitionsToTxnManager's sender thread reads the coordinator's answer.
    With the resource model each answer waits for its thread's work (network, plus a
    transaction log write for the markers), in order per thread, before it is handled."""
    from eosim.simulation.broker.request_handler_pool import InterBrokerThreads
    from eosim.simulation.protocol import (
        AddPartitionsToTxnBrokerResponse,
        Errors,
        MetadataDelta,
        WriteTxnMarkersResponse,
    )

    env, threads = _threads(cores=3, network=0.5, transaction=1.0)

    class Node:
        alive, paused, incarnation = True, False, 0

    handled: list[tuple[float, str]] = []
    own = InterBrokerThreads(
        env,
        Node(),
        threads,
        lambda m: handled.append((env.now, type(m.payload).__name__)),
        handled.append,
        lambda m: m.payload.correlation_id == 2,  # the second marker answer completes
    )
    assert own.accept(_msg(WriteTxnMarkersResponse(1, 7, [])))
    assert own.accept(_msg(WriteTxnMarkersResponse(2, 7, [])))
    assert own.accept(_msg(AddPartitionsToTxnBrokerResponse(3, (("t", Errors.NONE),))))
    assert not own.accept(_msg(MetadataDelta(1, {})))  # the metadata loader: not modelled
    env.run(until=10)
    assert handled == [
        (0.5, "WriteTxnMarkersResponse"),  # network only: another leader's markers remain
        (0.5, "AddPartitionsToTxnBrokerResponse"),  # its own thread: network only
        (2.0, "WriteTxnMarkersResponse"),  # the same thread, after the first: and the write
    ]


@pytest.mark.parametrize("seed", range(40))
def test_the_marker_answer_foreseen_to_complete_is_the_one_that_does(seed: int) -> None:
    """The marker sender is charged the CompleteCommit write on the answer whose handling
    completes the transaction, known as it arrives (``arrives``), before the answers that
    arrived ahead of it are handled: over random answers (errors retried, timeouts, a
    cancelling epoch, late duplicates) and random handling lags, exactly the answer whose
    ``on_response`` calls ``on_done`` was foreseen, and none when none does."""
    import random

    import simpy

    from eosim.simulation.coordinator.marker_channel import TransactionMarkerChannelManager
    from eosim.simulation.protocol import Errors

    rng = random.Random(seed)
    env = simpy.Environment()
    sent: list = []

    class Net:
        def send(self, src, dst, payload, conn=None, **_kw):
            sent.append(payload)

    parts = [("t", p) for p in range(rng.randint(1, 4))]
    leaders = {tp: f"b{rng.randint(0, 2)}" for tp in parts}
    channel = TransactionMarkerChannelManager(env, "c", Net(), leaders.get, 50.0, 5.0)
    done: list[int] = []
    foreseen: list[int] = []
    handling: list[int] = []
    arrived: list[tuple[int, list]] = []  # in arrival order; handled in that order, later
    channel.send_markers("tx", 1, 0, True, 0, tuple(parts), lambda: done.append(handling[-1]))
    answered = 0

    def answer_some():
        nonlocal answered
        while answered < len(sent) and rng.random() < 0.7:
            request = sent[answered]
            answered += 1
            results = []
            for tp in request.partitions:
                roll = rng.random()
                error = (
                    Errors.NONE
                    if roll < 0.75
                    else Errors.NOT_LEADER_OR_FOLLOWER
                    if roll < 0.97
                    else Errors.INVALID_PRODUCER_EPOCH
                )
                results.append((tp, error))
            copies = 2 if rng.random() < 0.1 else 1  # a duplicate answer
            for _ in range(copies):
                if rng.random() < 0.15:
                    continue  # lost: the request times out and is sent again
                if channel.arrives(request.correlation_id, results):
                    foreseen.append(len(arrived))
                arrived.append((request.correlation_id, results))

    handled = 0
    for _ in range(400):
        answer_some()
        while handled < len(arrived) and rng.random() < 0.5:  # the thread lags behind
            handling.append(handled)
            channel.on_response(*arrived[handled])
            handled += 1
        env.run(until=env.now + rng.choice([1.0, 6.0, 60.0]))
    while handled < len(arrived):
        handling.append(handled)
        channel.on_response(*arrived[handled])
        handled += 1
    assert foreseen == done and len(done) <= 1


def test_a_full_request_queue_stops_the_network_threads_reading():
    import simpy

    from eosim.simulation.broker.request_handler_pool import TimedRequestChannel
    from eosim.simulation.protocol import MetadataRequest

    env, threads = _threads(cores=1, io=1, queued=1, other=10.0)

    class Node:
        alive, paused, incarnation = True, False, 0

    channel = TimedRequestChannel(env, Node(), threads)
    for i in range(3):
        channel.put(_msg(MetadataRequest(i)))
    taken: list[float] = []

    def handler():
        while True:
            yield from channel.take()
            taken.append(env.now)

    env.process(handler())
    env.run(until=100)
    # Two fit (one handled, one queued); the third is read only when the first ends.
    assert taken == [10.0, 20.0, 30.0]
    assert isinstance(env, simpy.Environment)


def test_a_collection_freezes_an_application_and_a_fault_pause_outlasts_it():
    import simpy

    from eosim.simulation.resources import GcFreezer

    class App:
        def __init__(self):
            self.paused = False

        def pause(self):
            self.paused = True

        def resume(self):
            self.paused = False

    env = simpy.Environment()
    app = App()
    freezer = GcFreezer(env, app)
    freezer.collect(5.0)
    assert app.paused
    env.run(until=6.0)
    assert not app.paused  # the collection ended
    freezer.collect(5.0)
    freezer.pause()  # a pause fault starts during the collection
    env.run(until=20.0)
    assert app.paused  # the collection's end does not end the fault's pause
    freezer.resume()
    assert not app.paused


def test_a_restarted_process_spends_its_jit_warm_up_then_settles():
    """warmup.background_ms_per_s: a restarted broker's extra background CPU starts at that
    rate and decays with warmup.seconds; a process that never restarts spends none of it."""
    import math

    import simpy

    r = Resources(
        hosts=[{"name": "m", "cores": 1, "processes": ["*"]}],
        warmup={"seconds": 5.0, "background_ms_per_s": 200.0},
        background={"burst_ms": 1.0},
    )
    streams = RandomStreams(1)
    machines = Machines(r, ["broker-0"], streams.stream)
    env = simpy.Environment()
    machines.start_background(env, lambda name: True, streams.stream)
    env.run(until=10_000.0)
    host = machines.hosts["m"]
    machines.catch_up("broker-0", env.now)
    assert host.busy_ms == 0.0  # warm from the run's start: no JIT left to compile
    machines.jvms["broker-0"].restarted(env.now)
    env.run(until=40_000.0)
    host.catch_up(env.now)
    # 200 ms/s decaying with 5 s over 30 s: 200 * 5 * (1 - e^-6), about 1,000 ms.
    expected = 200.0 * 5.0 * (1 - math.exp(-6.0))
    assert 0.85 * expected < host.busy_ms < 1.15 * expected
    spent = host.busy_ms
    env.run(until=60_000.0)
    host.catch_up(env.now)
    assert host.busy_ms - spent < 0.01 * expected  # settled


def test_a_records_own_work_is_the_application_threads_not_the_senders():
    """client_send's per-record part is spent when the application hands the record over
    (the real driver builds, sends and logs each record on its own thread); the Sender that
    carries a batch of them is not frozen for it. Booked per request instead, the Sender of a
    producer that had queued records through a 4 s pause stalled about 20 ms per 146-record
    batch after it, its requests timed out and were sent again: 1,645 duplicates against 257
    without the resource model in calibration case 3, seed 1, and 4,430 per million on Kafka."""
    from eosim.simulation.protocol import ProduceRequest

    r = Resources(
        hosts=[{"name": "m", "cores": 1, "processes": ["*"]}],
        service={"client_send": {"fixed_ms": 0.5, "per_record_ms": 0.1}},
    )
    machines = Machines(r, ["broker-0", "producer-0"], RandomStreams(1).stream)
    host = machines.jvms["producer-0"].host
    record = machines.client_record_load("producer-0")
    assert record is not None
    record(10.0)
    assert host.busy_ms == pytest.approx(0.1)
    send = machines.client_load("producer-0")  # the request: its fixed part alone
    assert send is not None
    send(20.0, ProduceRequest(1, -1, []))
    assert host.busy_ms == pytest.approx(0.6)
    # The case of the docstring, with and without the resource model.
    case = "scenarios/calibration/idempotence-restarts.yaml"
    plain = "producers.0.config.enable.idempotence=false"
    counts = []
    for extra in ([], ["cluster.resources.preset=calibration-host"]):
        result = run_scenario(load_scenario(case, [plain, *extra]), 1)
        found = check_history(history_from_records(list(result.history.records())))
        counts.append(found.anomalies["duplicate"].count)
    unbounded, modelled = counts
    assert modelled < 2 * unbounded, counts


# -- a broker's start as CPU work (resources.startup) ---------------------------------------
def _ran(p: Jvm, cpu_ms: float, threads: int, alive=lambda: True, until: float = 10_000.0):
    import simpy

    env = simpy.Environment()
    done = p.run(env, cpu_ms, threads, 4.0, alive)
    fired: list[float] = []
    done.callbacks.append(lambda _ev: fired.append(env.now))
    env.run(until=until)
    return fired


def test_a_start_takes_its_cpu_on_its_threads_and_stretches_on_a_busy_host():
    assert _ran(jvm(cores=2), 100.0, 2) == [pytest.approx(50.0)]  # two threads, two cores
    assert _ran(jvm(cores=2), 100.0, 1) == [pytest.approx(100.0)]  # one thread, one core
    busy = jvm(cores=2)
    busy.host.book(0.0, 60.0)  # another process holds a core for 60 ms
    busy.host.book(0.0, 60.0)  # ... and the other
    (end,) = _ran(busy, 100.0, 2)
    assert end == pytest.approx(110.0)
    assert busy.waited_ms == pytest.approx(120.0)  # both threads' first slices waited 60 ms


def test_a_start_whose_process_died_never_finishes_nor_books_more():
    p = jvm(cores=1)
    calls = itertools.count()
    assert _ran(p, 100.0, 1, alive=lambda: next(calls) < 5) == []
    assert p.host.busy_ms == pytest.approx(20.0)  # five slices of 4 ms, then it stopped


def _starts(resources: str) -> dict[str, list[float]]:
    """Each restarted broker's (restart, process started, first publish, running) times."""
    sc = parse_scenario(
        BASE.replace("cluster:\n", "cluster:\n  resources: " + resources + "\n", 1)
        + "faults:\n  - {kind: crash, nodes: [broker-1], at: 1s, duration: 1s}\n",
        "resources.yaml",
    )
    run = run_scenario(sc, 1, trace=True)
    seen: dict[str, list[float]] = {}
    for c in run.state_changes or []:
        if c.tp is None and c.event in ("restart", "process_started", "metadata_published"):
            seen.setdefault(c.node, []).append(c.time)
        if c.tp is None and c.event == "running":
            seen.setdefault(c.node, []).append(c.time)
    return seen


def test_a_restarted_broker_starts_for_its_startup_cpu_and_a_busy_host_slows_it():
    """With ``resources.startup`` a restarted broker registers once its start has had
    ``cpu_ms`` of CPU on its host and unfences after its first publish's ``publish_cpu_ms``;
    the same start on two cores that the other processes keep busy takes longer. Without it
    the start is ``cluster.broker_startup`` (2 s) whatever the host."""
    startup = "startup: {cpu_ms: 3000, publish_cpu_ms: 1000, threads: 2}"
    wide = _starts("{hosts: [{name: m, cores: 16, processes: ['*']}], " + startup + "}")
    busy = "background: {broker_ms_per_s: 400, controller_ms_per_s: 200, burst_ms: 4}"
    narrow = _starts(
        "{hosts: [{name: m, cores: 2, processes: ['*']}], " + busy + ", " + startup + "}"
    )
    fixed = _starts("{hosts: [{name: m, cores: 2, processes: ['*']}]}")
    restart, started, published, running = wide["broker-1"]
    assert 1500.0 <= started - restart < 1600.0  # 3 s of CPU on two threads
    assert 500.0 <= published - started < 700.0  # 1 s more, once registered and caught up
    assert running > published
    restart, started, *_ = narrow["broker-1"]
    assert started - restart > 1600.0
    restart, started, *_ = fixed["broker-1"]
    assert started - restart == pytest.approx(2000.0)


# -- the clients' CPU (service.client_send, service.client_receive) ------------------------
def _run_workload(resources: str):
    from eosim.analysis.history import history_from_recorder
    from eosim.simulation.runner import Run

    run = Run(scenario(resources), 1, False)
    run.run_workload()
    return run, history_from_recorder(run.history)


def test_a_reader_pays_for_each_fetch_answer_and_reads_it_once_the_work_is_done():
    """client_receive is the reading application's: a reader (which the nemesis does not
    hit) pays it per fetch answer and sees the records once its CPU for them is spent.
    Readers paid nothing before: the calibration cases' reader took no core from the
    brokers, where Kafka's took 2.7-3.4 s of CPU in each 15 s of the measurement."""
    from eosim.analysis.timings import read_after_ack_latencies

    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
    free, _ = _run_workload(cores + "}")
    costly, history = _run_workload(cores + ", service: {client_receive: {fixed_ms: 3.0}}}")
    assert free.machines is not None and costly.machines is not None
    assert free.machines.jvms["reader"].worked_ms == 0.0
    reader = costly.machines.jvms["reader"]
    answers = reader.worked_ms / 3.0
    assert answers > 100 and answers == pytest.approx(round(answers))
    assert costly.machines.jvms["producer-0"].worked_ms == 0.0  # produce answers cost nothing
    _, free_history = _run_workload(cores + "}")

    def p50(h) -> float:
        lat = sorted(read_after_ack_latencies(h))
        return lat[len(lat) // 2]

    assert p50(history) > p50(free_history) + 2.0


def test_the_work_after_poll_delays_the_next_answer_not_the_records_just_read():
    """client_after_poll is the reader's work once poll() has returned the records (Kafka's
    consumer parses the answer and sends the next fetch inside poll(); the real driver
    writes the records' history lines after it): the records are read at once, and the
    reader, busy with them, reads the next answer late. The same CPU as client_receive,
    booked before the records are handed over, delays the records themselves."""
    from eosim.analysis.timings import read_after_ack_latencies

    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"

    def p50(h) -> float:
        lat = sorted(read_after_ack_latencies(h))
        return lat[len(lat) // 2]

    _, free = _run_workload(cores + "}")
    before_run, before = _run_workload(cores + ", service: {client_receive: {fixed_ms: 1.0}}}")
    after_run, after = _run_workload(cores + ", service: {client_after_poll: {fixed_ms: 1.0}}}")
    assert before_run.machines is not None and after_run.machines is not None
    assert after_run.machines.jvms["reader"].worked_ms > 100.0
    assert p50(before) > p50(free) + 0.9
    assert p50(after) < p50(free) + 0.2


def test_an_answer_without_records_costs_nothing_after_poll():
    from types import SimpleNamespace as ns

    from eosim.simulation.protocol import FetchResponse, ProduceRequest

    r = Resources(
        hosts=[{"name": "m", "cores": 1, "processes": ["*"]}],
        service={"client_after_poll": {"fixed_ms": 0.5, "per_record_ms": 0.1}},
    )
    machines = Machines(r, ["broker-0", "reader"], RandomStreams(1).stream)
    host = machines.jvms["reader"].host
    after = machines.client_load("reader", "after_poll")
    assert after is not None
    assert machines.client_load("reader", "receive") is None  # client_receive is 0
    two = [("t-0", ns(batches=[ns(values=[1]), ns(values=[2])]))]
    assert after(1.0, FetchResponse(1, [])) == 0.0
    assert after(1.0, FetchResponse(1, [("t-0", ns(batches=[]))])) == 0.0
    assert after(1.0, ProduceRequest(1, -1, [("t-0", ns(values=[1]))])) == 0.0
    assert host.busy_ms == 0.0
    assert after(5.0, FetchResponse(1, two)) == pytest.approx(0.7)
    assert host.busy_ms == pytest.approx(0.7)


def test_a_messages_work_after_poll_holds_what_arrives_next_not_the_message():
    """The network with after-poll loads: a message is handed over at once and its work is
    booked after; a freeze it sets off holds the next message, which is handed over (and
    booked) when the freeze ends."""
    got, charged = _two_messages_read_by("after_poll_loads")
    assert got == [(0.0, "a"), (2.0, "b")]
    assert charged == [(0.0, "a"), (2.0, "b")]


def test_a_produce_requests_work_keeps_the_sender_busy_not_the_application():
    """client_send's fixed part is the Sender thread's (building a produce request, reading
    its answer): it sends nothing else meanwhile, so a CPU-bound Sender sets the request
    rate (on the measured machine Kafka's producer sent about 300 requests a second at
    every load from 1,000 to 6,000 records a second). The application's thread goes on
    handing records over on schedule; freezing it instead, as before, made the model's
    producer fall seconds behind its workload."""
    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
    run, history = _run_workload(cores + ", service: {client_send: {fixed_ms: 4.0}}}")
    assert run.machines is not None
    requests = run.machines.jvms["producer-0"].worked_ms / 4.0
    invokes = [s.invoke_time for s in history.sends]
    acks = [s.complete_time for s in history.sends if s.complete_time is not None]
    assert len(invokes) == 3000
    assert invokes[-1] - invokes[0] == pytest.approx(2999.0, abs=2.0)  # on schedule
    # One request at a time, 4 ms each: at most one per 4 ms of the sending.
    assert 100 < requests <= (max(acks) - invokes[0]) / 4.0 + 1


def _producer_loads(service: dict, work: str):
    """A producer alone on one core with ``service``: its host, its send load and its
    ``work`` load."""
    r = Resources(hosts=[{"name": "m", "cores": 1, "processes": ["*"]}], service=service)
    machines = Machines(r, ["broker-0", "producer-0"], RandomStreams(1).stream)
    send = machines.client_load("producer-0")
    other = machines.client_load("producer-0", work)  # type: ignore[arg-type]
    assert send is not None and other is not None
    return machines.jvms["producer-0"].host, send, other


def test_only_produce_requests_and_fetch_answers_cost_a_client():
    from eosim.simulation.protocol import FetchResponse, MetadataRequest, ProduceRequest

    host, send, receive = _producer_loads(
        {"client_send": {"fixed_ms": 0.5}, "client_receive": {"fixed_ms": 0.3}}, "receive"
    )
    assert send(1.0, MetadataRequest(1)) == 0.0 and receive(1.0, object()) == 0.0
    assert host.busy_ms == 0.0
    assert send(2.0, ProduceRequest(1, -1, [])) == pytest.approx(0.5)
    assert receive(10.0, FetchResponse(1, [])) == pytest.approx(0.3)
    assert host.busy_ms == pytest.approx(0.8)


def _two_messages_read_by(kind: str) -> tuple[list, list]:
    """Two messages reach client "c" at 0 and 1 ms through a network whose ``kind`` loads
    (``receive_loads`` or ``after_poll_loads``) freeze "c" for 2 ms each time they charge:
    what "c" got and what was charged, each as (time, payload)."""
    import simpy

    from eosim.simulation.network import Message, Network, NetworkSettings

    env = simpy.Environment()
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    got: list[tuple[float, str]] = []
    network.register("c", lambda msg: got.append((env.now, msg.payload)), client=True)
    charged: list[tuple[float, str]] = []

    def load(now: float, payload: object) -> None:
        charged.append((now, payload))
        network.pause_node("c")
        env.timeout(2.0).callbacks.append(lambda _e: network.resume_node("c"))

    setattr(network, kind, {"c": load})
    for at, name in ((0.0, "a"), (1.0, "b")):
        msg = Message("broker-0", "c", name, None, at, msg_id=10 + len(name) + int(at))
        env.timeout(at).callbacks.append(lambda _e, m=msg: network._deliver(m))
    env.run(until=20.0)
    return got, charged


def test_a_message_is_read_after_its_cost_and_what_waited_is_charged_on_resume():
    """The network with receive loads: a message whose cost freezes its process is handed
    over when the freeze ends; messages that arrived meanwhile are charged as they are read,
    each once, and a charge that freezes again holds the rest."""
    got, charged = _two_messages_read_by("receive_loads")
    assert charged == [(0.0, "a"), (2.0, "b")]  # "b" waited, charged when read
    assert got == [(2.0, "a"), (4.0, "b")]


def test_a_hosts_background_sources_share_one_burst_length():
    """The host books its sources' moments merged, each one burst long: a source with
    another length is refused at once, naming the host, not booked at the wrong length."""
    import simpy

    from eosim.simulation.host import Background, Host, Jvm, WarmupSettings

    env, host, streams = simpy.Environment(), Host("m", 2), RandomStreams(1)

    def source(name: str, burst: float) -> Background:
        jvm = Jvm(name, host, GcSettings(), WarmupSettings(), streams.stream(name))
        rngs = streams.stream(f"bg:{name}"), streams.stream(f"jit:{name}")
        return Background(jvm, 100.0, 0.0, 1.0, burst, lambda: True, *rngs)

    host.add_background(env, source("a", 0.5))
    host.add_background(env, source("b", 0.5))
    with pytest.raises(ValueError, match="host m: its background sources share one burst"):
        host.add_background(env, source("c", 1.0))


# -- the wire, a produce answer's reading, a held fetch's completion -----------------------
def test_the_wire_replaces_the_link_latency_unless_the_scenario_sets_its_own():
    """resources.wire is the wire alone (the processes' work is booked on their hosts); a
    scenario that sets network.latency, in its file or by --set, keeps it."""
    from eosim.simulation.runner import link_latency

    wire = "{wire: {median_ms: 0.02, sigma: 0.5}}"
    assert link_latency(scenario(wire)).median_ms == 0.02
    assert link_latency(scenario(wire)).sigma == 0.5
    assert link_latency(scenario("{}")).median_ms == 0.25  # no wire: the scenario's default
    assert link_latency(scenario()).median_ms == 0.25
    own = link_latency(scenario(wire, ("network.latency.median_ms=0.1",)))
    assert (own.median_ms, own.sigma) == (0.1, 0.9)
    with pytest.raises(ScenarioError, match=r"cluster\.resources\.wire\.median_ms"):
        scenario("{wire: {median_ms: -1}}")


def test_a_produce_answers_part_is_refused_beyond_the_requests_whole():
    with pytest.raises(ScenarioError, match=r"client_answer.*cannot exceed"):
        scenario("{service: {client_send: {fixed_ms: 0.2}, client_answer: {fixed_ms: 0.3}}}")


def test_a_produce_answers_part_of_the_senders_work_is_booked_when_it_comes():
    from eosim.simulation.protocol import FetchResponse, ProduceRequest, ProduceResponse

    host, send, answer = _producer_loads(
        {"client_send": {"fixed_ms": 0.5}, "client_answer": {"fixed_ms": 0.2}}, "answer"
    )
    assert answer(1.0, FetchResponse(1, [])) == 0.0
    assert answer(1.0, ProduceRequest(1, -1, [])) == 0.0
    assert send(2.0, ProduceRequest(1, -1, [])) == pytest.approx(0.3)  # the request's part
    assert answer(10.0, ProduceResponse(1, [])) == pytest.approx(0.2)  # the answer's
    assert host.busy_ms == pytest.approx(0.5)


def test_the_sender_reads_its_answers_after_their_work_so_acks_come_later():
    """The same Sender CPU a request, booked whole with the request or its answer's part on
    the answer: each acknowledgement waits for that part (it is read, then the batch is
    completed), and the Sender does as much work either way."""
    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
    whole_run, _ = _run_workload(cores + ", service: {client_send: {fixed_ms: 1.0}}}")
    split_run, _ = _run_workload(
        cores + ", service: {client_send: {fixed_ms: 1.0}, client_answer: {fixed_ms: 1.0}}}"
    )
    assert _latency_p50(split_run) > _latency_p50(whole_run) + 0.7
    assert whole_run.machines is not None and split_run.machines is not None
    whole = whole_run.machines.jvms["producer-0"].worked_ms
    split = split_run.machines.jvms["producer-0"].worked_ms
    assert split == pytest.approx(whole, rel=0.25) and split > 100.0


def test_an_answer_that_keeps_the_sender_busy_is_held_and_so_is_what_follows():
    """The network with answer loads: an answer whose work keeps its producer's Sender busy
    is handed over when that work ends; what arrives meanwhile waits behind it, in order,
    and is charged as it is read."""
    import simpy

    from eosim.simulation.network import Message, Network, NetworkSettings

    env = simpy.Environment()
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    got: list[tuple[float, str]] = []
    network.register("p", lambda msg: got.append((env.now, msg.payload)), client=True)
    charged: list[tuple[float, str]] = []

    def busy(ms: float) -> None:
        network.pause_node("p")
        env.timeout(ms).callbacks.append(lambda _e: network.resume_node("p"))

    def load(now: float, payload: object) -> float:
        charged.append((now, payload))
        return 2.0 if payload == "answer" else 0.0

    network.sender_busy["p"] = busy
    network.answer_loads = {"p": load}
    for at, name in ((0.0, "answer"), (1.0, "reset")):
        msg = Message("broker-0", "p", name, None, at, msg_id=10 + int(at))
        env.timeout(at).callbacks.append(lambda _e, m=msg: network._deliver(m))
    env.run(until=20.0)
    assert got == [(2.0, "answer"), (2.0, "reset")]
    assert charged == [(0.0, "answer"), (2.0, "reset")]


def test_a_held_fetchs_completion_takes_a_handler_thread_and_a_core():
    _env, threads = _threads(cores=1, io=1, fetch_complete=0.5)
    assert threads.book_completion(1.0) == pytest.approx(1.5)
    assert threads.book_completion(1.0) == pytest.approx(2.0)  # the one handler thread
    _env, free = _threads(cores=1, io=1)
    assert free.book_completion(3.0) == 3.0  # costs nothing: at once, nothing booked
    assert free.jvm.host.busy_ms == 0.0


def _purgatory(complete_work):
    import simpy

    from eosim.simulation.broker.delayed_fetch import DelayedFetchPurgatory
    from eosim.simulation.broker.delayed_operation import ExpiredOperationReaper
    from eosim.simulation.network import Message, Network, NetworkSettings
    from eosim.simulation.protocol import ReplicaFetchRequest

    env = simpy.Environment()
    network = Network(env, NetworkSettings(), RandomStreams(1).stream("n"))
    answered: list[float] = []
    purgatory = DelayedFetchPurgatory(
        env,
        "broker-0",
        network,
        500.0,
        lambda *_a: None,
        lambda: True,
        ExpiredOperationReaper(),
        lambda _msg, _response: answered.append(env.now),
        complete_work,
    )
    request = ReplicaFetchRequest(1, "broker-1", ())
    return env, purgatory, Message("broker-1", "broker-0", request, None, 0.0), answered, request


def test_a_parked_fetch_is_answered_once_its_completion_is_done_unless_the_broker_crashed():
    for crash, expected in ((False, [1.5]), (True, [])):
        env, purgatory, msg, answered, request = _purgatory(lambda now: now + 0.5)
        purgatory.park(msg, request)
        env.timeout(1.0).callbacks.append(lambda _e, p=purgatory: p._answer_parked(p.parked[0]))
        if crash:
            env.timeout(1.2).callbacks.append(lambda _e, p=purgatory: p.shutdown())
        env.run(until=100.0)
        assert answered == expected
    env, purgatory, msg, answered, request = _purgatory(None)
    purgatory.park(msg, request)
    env.timeout(1.0).callbacks.append(lambda _e: purgatory._answer_parked(purgatory.parked[0]))
    env.run(until=100.0)
    assert answered == [1.0]  # without the resource model: at once


def test_a_leaders_completion_work_delays_replication_and_the_readers_records():
    """fetch_complete: each held fetch an append or a high watermark completes (followers'
    parked fetches, the reader's held reads) is answered after a handler thread's work, so
    acks=all acknowledgements (which wait for the followers) and reads come later."""
    from eosim.analysis.timings import read_after_ack_latencies

    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
    free_run, free = _run_workload(cores + "}")
    slow_run, slow = _run_workload(cores + ", service: {fetch_complete: {fixed_ms: 2.0}}}")

    def p50(h) -> float:
        lat = sorted(read_after_ack_latencies(h))
        return lat[len(lat) // 2]

    assert _latency_p50(slow_run) > _latency_p50(free_run) + 1.5
    assert p50(slow) > p50(free) + 1.5
    assert slow_run.machines is not None
    assert slow_run.machines.jvms["broker-0"].worked_ms > 100.0


def test_a_requests_read_end_is_recorded_for_a_trace_when_asked():
    """BrokerThreads.read_ends (benchmarks/replication_path.py): when each request's network
    read ended, as Kafka stamps its arrival; nothing is recorded unless asked."""
    from eosim.simulation.network import Message
    from eosim.simulation.protocol import MetadataRequest

    _env, threads = _threads(cores=2, io=1, other=1.0, network=0.5)
    assert threads.read_ends is None
    threads.book_request(_msg(MetadataRequest(0)), 0.0)
    threads.read_ends = {}
    for i in (1, 2):  # each waits for the one handler thread: read apart
        msg = Message("client", "broker-0", MetadataRequest(i), None, 0.0, i, False)
        threads.book_request(msg, 0.0)
    # 1 is read after 0 (0.5-1.0); 2 after 1 once a core frees (the first is 0's until 1.5,
    # the second 1's handling's from then).
    assert threads.read_ends == {1: 1.0, 2: 2.0}


def test_the_sender_sends_nothing_while_an_answer_it_read_on_waking_holds_it():
    """An answer that waited for the Sender's send work is read when that work ends, and its
    own work (client_answer) holds the Sender again: it sends no request until that ends too
    (requests of the pass that began the hold go out in its first instant, to each node
    ready). Before, the Sender was resumed after the answers were read, even when one held
    it."""
    from eosim.simulation.producer.kafka_producer import KafkaProducer
    from eosim.simulation.protocol import ProduceRequest
    from eosim.simulation.runner import Run

    began: dict[str, tuple[float, KafkaProducer]] = {}
    original = KafkaProducer._sender_stops

    def stops(self: KafkaProducer) -> None:
        began[self.node] = (self.env.now, self)
        original(self)

    KafkaProducer._sender_stops = stops  # type: ignore[method-assign]
    try:
        cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
        costs = "service: {client_send: {fixed_ms: 2.0}, client_answer: {fixed_ms: 1.0}}"
        run = Run(scenario(cores + ", " + costs + "}"), 1, False)
        late: list[float] = []
        network_send = run.network.send

        def send(src, dst, payload, *args, **kwargs):  # type: ignore[no-untyped-def]
            now = run.env.now
            if type(payload) is ProduceRequest and src in began:
                since, producer = began[src]
                if producer._busy.holding and since < now:
                    late.append(now)
            return network_send(src, dst, payload, *args, **kwargs)

        run.network.send = send  # type: ignore[method-assign]
        run.run_workload()
    finally:
        KafkaProducer._sender_stops = original  # type: ignore[method-assign]
    assert len(began) == 1 and late == []


def test_a_producer_crashed_while_its_sender_was_busy_is_answered_after_its_restart():
    """A crash while the Sender was at work left the producer's node paused, so the process
    a restart built on it never read an answer (an idempotent producer never got its id)."""
    cores = "{hosts: [{name: m, cores: 8, processes: ['*']}]"
    s = scenario(
        cores + ", service: {client_send: {fixed_ms: 3.0}}}",
        ("faults=[{kind: crash, nodes: [producer-0], at: 1s, duration: 300ms}]",),
    )
    from eosim.analysis.history import history_from_recorder
    from eosim.simulation.runner import Run

    run = Run(s, 1, False)
    run.run_workload()
    history = history_from_recorder(run.history)
    after = [x.complete_time for x in history.sends if x.invoke_time > 1300.0]
    # Answered within ms of the restart at 1,300 ms (before: once the run gave up, 120 s on).
    assert len(after) > 1000 and min(t for t in after if t is not None) < 1400.0
