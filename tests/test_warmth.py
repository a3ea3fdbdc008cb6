"""The warm-up load before a real run goes on until every broker's JIT has settled
(eosim.real.runner.warm_up), on a fake cluster whose compiler threads' CPU readings the test
gives; the referee's "not warm" rule on a real cluster is in tests/test_real_referee.py."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosim.real import clients, runner
from eosim.real import referee as rules


class FakeCluster:
    """Brokers whose compiler threads' CPU (ms) is read from ``readings``: one reading per
    broker before and after each slice of warm-up load; ``clock`` advances with each slice."""

    broker_names = ("broker-0", "broker-1")

    def __init__(self, rates: list[dict[str, float]], pids: dict[str, int] | None = None):
        self.rates = iter(rates)  # ms/s of each broker during each slice
        self.spent = {b: 0.0 for b in self.broker_names}
        self.pids = dict(pids or {b: 100 + i for i, b in enumerate(self.broker_names)})
        self.warm_marked = 0
        self.slices: list[float] = []

    def jit_cpu_ms(self, node: str) -> tuple[int, float] | None:
        pid = self.pids.get(node)
        return None if pid is None else (pid, self.spent[node])

    def run_slice(self, seconds: float) -> None:
        self.slices.append(seconds)
        for b, rate in next(self.rates).items():
            self.spent[b] += rate * seconds

    def mark_warm(self) -> None:
        self.warm_marked += 1


@pytest.fixture
def fake(monkeypatch) -> Iterator[list[FakeCluster]]:
    """warm_up's load and clock made the fake cluster's: a slice of ``s`` seconds takes ``s``."""
    now = [0.0]
    made: list[FakeCluster] = []

    def load(cluster, install, workdir, transactional, seconds):
        cluster.run_slice(seconds)
        now[0] += seconds

    monkeypatch.setattr(runner, "_warmup_load", load)
    monkeypatch.setattr(runner, "ensure_warmup_topic", lambda cluster: None)
    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(runner, "WARMUP_SLICE_S", 10.0)
    monkeypatch.setattr(runner, "WARMUP_MAX_S", 60.0)
    monkeypatch.setattr(runner, "JIT_SETTLED_MS_PER_S", 25.0)
    yield made


def _warm_up(cluster: FakeCluster, seconds: float = 30.0) -> runner.Warmth:
    return runner.warm_up(cluster, None, Path("."), False, seconds)  # type: ignore[arg-type]


def test_a_settled_jit_ends_the_warm_up_after_its_first_slice(fake):
    cluster = FakeCluster([{"broker-0": 12.0, "broker-1": 3.0}])
    warmth = _warm_up(cluster)
    assert (warmth.settled, warmth.seconds, cluster.slices) == (True, 30.0, [30.0])
    assert warmth.jit_ms_per_s == pytest.approx({"broker-0": 12.0, "broker-1": 3.0})
    assert cluster.warm_marked == 1


def test_the_warm_up_goes_on_while_a_broker_still_compiles(fake):
    rates = [
        {"broker-0": 5.0, "broker-1": 300.0},
        {"broker-0": 5.0, "broker-1": 80.0},
        {"broker-0": 5.0, "broker-1": 20.0},
    ]
    cluster = FakeCluster(rates)
    warmth = _warm_up(cluster)
    assert (warmth.settled, warmth.seconds, cluster.slices) == (True, 50.0, [30.0, 10.0, 10.0])
    assert warmth.jit_ms_per_s["broker-1"] == pytest.approx(20.0)


def test_a_jit_that_never_settles_ends_the_warm_up_at_its_bound_unsettled(fake):
    cluster = FakeCluster([{"broker-0": 5.0, "broker-1": 90.0}] * 10)
    warmth = _warm_up(cluster)
    assert (warmth.settled, warmth.seconds, cluster.slices) == (
        False,
        60.0,
        [30.0, 10.0, 10.0, 10.0],
    )
    assert cluster.warm_marked == 1  # the next run does not warm again from the start
    assert warmth.describe() == (
        "after 60 s of warm-up load broker-1's JIT compiled 90 ms/s in its last 10 s "
        "(bound 25 ms/s)"
    )


def test_a_broker_whose_process_cannot_be_read_is_not_warm(fake):
    cluster = FakeCluster([{"broker-0": 1.0, "broker-1": 1.0}] * 10, pids={"broker-0": 100})
    warmth = _warm_up(cluster)
    assert not warmth.settled and warmth.jit_ms_per_s["broker-1"] is None
    assert "broker-1's JIT not measured" in warmth.describe()


def test_without_settle_the_warm_up_is_one_slice_whatever_the_jit_does(fake):
    cluster = FakeCluster([{"broker-0": 500.0, "broker-1": 500.0}])
    warmth = runner.warm_up(cluster, None, Path("."), False, 90.0, settle=False)  # type: ignore[arg-type]
    assert (warmth.settled, cluster.slices) == (False, [90.0])


def test_a_run_whose_warm_up_did_not_settle_is_invalid(fake, monkeypatch):
    cluster = FakeCluster([{"broker-0": 200.0, "broker-1": 200.0}] * 10)
    cluster.cold_nodes = lambda: ["broker-0"]  # type: ignore[attr-defined]
    run = runner.RealRun.__new__(runner.RealRun)
    run.cluster, run.workdir, run.install = cluster, Path(os.devnull).parent, None
    run.referee = rules.Referee()
    monkeypatch.setattr(runner.RealRun, "_transactional", lambda self: False)
    run.warm_up()
    assert [r.split(": ")[0] for r in run.referee.reasons] == [rules.NOT_WARM]
    settled = FakeCluster([{"broker-0": 1.0, "broker-1": 1.0}])
    settled.cold_nodes = lambda: ["broker-1"]  # type: ignore[attr-defined]
    run.cluster, run.referee = settled, rules.Referee()
    run.warm_up()
    assert run.referee.valid


def test_compiler_cpu_reads_nothing_from_a_process_without_a_jit_and_none_when_gone():
    assert clients.compiler_cpu_ms(os.getpid()) == 0.0
    assert clients.compiler_cpu_ms(2**22 + 12345) is None


def test_the_last_slice_is_a_whole_one_even_past_the_bound(fake, monkeypatch):
    # JIT_SETTLED_MS_PER_S was set for a whole slice: a warm broker's compiler blips higher
    # over a shorter one (docs/real-cluster.md, "A warm cluster"), so the slice that crosses
    # WARMUP_MAX_S is not cut short (55 s here: slices of 30, 10, 10, then 10, not 5).
    monkeypatch.setattr(runner, "WARMUP_MAX_S", 55.0)
    cluster = FakeCluster([{"broker-0": 5.0, "broker-1": 90.0}] * 10)
    warmth = _warm_up(cluster)
    assert cluster.slices == [30.0, 10.0, 10.0, 10.0]
    assert (warmth.settled, warmth.seconds, warmth.last_slice_s) == (False, 60.0, 10.0)


# -- the run's own load (referee rule "compiling") -------------------------------------------


def test_a_broker_compiling_over_the_workloads_start_is_named_with_its_rate():
    before = {"broker-0": (100, 1000.0), "broker-1": (101, 50.0)}
    after = {"broker-0": (100, 1000.0 + 6 * 90.0), "broker-1": (101, 50.0 + 6 * 20.0)}
    assert runner.compiling(before, after, 6.0) == [
        "broker-0's JIT compiled 90 ms/s over the workload's first 6 s (bound 50 ms/s)"
    ]


def test_a_workload_start_under_the_bound_is_not_compiling():
    before = {"broker-0": (100, 0.0), "broker-1": (101, 0.0)}
    after = {"broker-0": (100, 10 * 49.0), "broker-1": (101, 0.0)}
    assert runner.compiling(before, after, 10.0) == []


def test_a_short_window_a_restarted_or_stopped_broker_are_not_judged():
    hot = {"broker-0": (100, 0.0)}
    assert runner.compiling(hot, {"broker-0": (100, 4000.0)}, runner.JIT_WINDOW_MIN_S - 0.1) == []
    assert runner.compiling(hot, {"broker-0": (200, 4000.0)}, 10.0) == []  # another process
    assert runner.compiling(hot, {"broker-0": None}, 10.0) == []
    assert runner.compiling({"broker-0": None}, {"broker-0": (100, 4000.0)}, 10.0) == []
    assert rules.COMPILING in rules.RULES


# -- the rehearsal of the run's own load before it (RealRun.rehearse) -------------------------


def _window(text: str) -> float | None:
    from eosim.analysis import outcome
    from eosim.simulation.applications import workload_horizon
    from eosim.simulation.nemesis import realize_faults
    from eosim.simulation.rng import RandomStreams

    scenario = outcome.parse(text, "rehearsal.yaml")
    schedule = realize_faults(
        scenario.faults, workload_horizon(scenario), RandomStreams(1).stream("nemesis")
    )
    return runner.rehearsal_window(scenario, schedule)


PLAIN = textwrap.dedent(
    """
    name: rehearsal
    duration: 40s
    cluster:
      brokers: 1
      topics: [{name: events, partitions: 1, replication_factor: 1}]
    producers:
      - {name: producer-0, workload: {topic: events, records: 3000, rate: 500}}
    consumers:
      - {name: reader, topic: events}
    """
)


def test_a_rehearsal_plays_the_window_the_compiling_rule_judges():
    assert _window(PLAIN) == 40_000.0  # no fault: the whole run (its sources end it earlier)
    pause = "faults: [{kind: pause, nodes: [broker-0], at: %s, duration: 1s}]\n"
    assert _window(PLAIN + pause % "8s") == 8_000.0
    assert runner.JIT_WINDOW_MIN_S > 1.0
    assert _window(PLAIN + pause % "1s") is None  # not judged by the rule, so not rehearsed


def test_applications_that_keep_state_in_the_cluster_are_not_rehearsed():
    transactional = PLAIN + textwrap.dedent(
        """
        transactional_producers:
          - name: writer
            workload: {topic: events, transactions: 10, size: 5, rate: 2}
        """
    )
    assert _window(transactional) is None
