"""The run's SimPy environment: it counts the events it processes, and lets a wait that
nothing can interrupt pass without an event (`CountingEnvironment.elapse`), the same run
either way."""

from __future__ import annotations

from pathlib import Path

import simpy

from eosim.simulation import load_scenario, run_scenario
from eosim.simulation.runner import CountingEnvironment, ReportingEnvironment


def test_elapse_stands_in_for_a_timeout_only_when_nothing_is_due_until_then():
    env = CountingEnvironment()
    env.timeout(5.0)
    assert not env.elapse(5.0)  # due at the same moment: it was scheduled first, runs first
    assert not env.elapse(6.0)
    assert env.now == 0
    assert env.elapse(4.5)
    assert env.now == 4.5 and env.events_processed == 1  # counted as the timeout it replaced
    env.run()
    assert env.now == 5.0 and env.events_processed == 2
    assert env.elapse(1.0) and env.now == 6.0  # nothing queued


def test_a_process_that_elapses_sees_what_one_that_yields_sees():
    """Two processes, one ticking by timeouts, one by `elapse` where it can: each sees the
    other's ticks at the same times, in the same order, and the event counts agree."""

    def run(shortcut: bool) -> tuple[list[tuple[str, float]], int]:
        env = CountingEnvironment()
        seen: list[tuple[str, float]] = []

        def ticker(name: str, gap: float, use_elapse: bool):  # type: ignore[no-untyped-def]
            for _ in range(20):
                seen.append((name, env.now))
                if not (use_elapse and env.elapse(gap)):
                    yield env.timeout(gap)

        env.process(ticker("fast", 0.25, shortcut))  # exact in binary: ties
        env.process(ticker("slow", 1.0, False))
        env.run()
        return seen, env.events_processed

    assert run(True) == run(False)


def test_progress_is_reported_for_elapsed_waits_too():
    reports: list[float] = []
    env = ReportingEnvironment(lambda: reports.append(env.now), every=2)
    for _ in range(4):
        assert env.elapse(1.0)
    assert reports == [2.0, 4.0]


def test_a_run_on_a_plain_environment_has_the_same_history(monkeypatch):
    """The producer application elapses only on the run's environment; on a plain SimPy one
    it yields every timeout, and the history is the same."""
    standard = Path(__file__).resolve().parent.parent / "benchmarks" / "standard.yaml"
    scenario = load_scenario(standard, ["producers.0.workload.records=2000"])
    fast = run_scenario(scenario, 3)
    monkeypatch.setattr(CountingEnvironment, "elapse", _never)
    slow = run_scenario(scenario, 3)
    assert fast.history.digest() == slow.history.digest()
    assert fast.events == slow.events


def _never(self: simpy.Environment, delay: float) -> bool:
    return False
