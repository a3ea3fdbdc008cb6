"""The referee of a real run (eosim.real.referee) through the wall-clock nemesis, on a fake
cluster: every rule made to fail makes the run invalid, with its reason, and records nothing
that did not happen; a schedule that plays out cleanly proves its faults, each line with its
scheduled and its confirmed time. The same rules on a real cluster are in
tests/test_real_referee.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from eosim.real.nemesis import WallClockNemesis
from eosim.real.referee import (
    FAULT_LATE,
    FAULT_NOT_APPLIED,
    FAULT_NOT_UNDONE,
    FAULTS_SKIPPED,
    NOT_BACK,
    RULES,
    Referee,
)
from eosim.simulation.faults import FaultEvent


class FakeCluster:
    """A FaultableCluster that records what it is asked and fails where told."""

    def __init__(self, fail: dict[tuple[str, str], str] | None = None, slow_s: float = 0.0):
        self.fail = fail or {}
        self.slow_s = slow_s
        self.calls: list[tuple[str, str]] = []

    def _do(self, op: str, node: str) -> None:
        self.calls.append((op, node))
        if self.slow_s:
            time.sleep(self.slow_s)
        if (op, node) in self.fail:
            raise RuntimeError(self.fail[(op, node)])

    def crash(self, node: str) -> None:
        self._do("crash", node)

    def restart(self, node: str) -> None:
        self._do("restart", node)

    def pause(self, node: str) -> None:
        self._do("pause", node)

    def resume(self, node: str) -> None:
        self._do("resume", node)

    def power_loss(self, node: str) -> None:
        self._do("power_loss", node)

    def partition(self, groups: Any) -> Any:
        self.calls.append(("partition", str(groups)))
        return "h1"

    def disturb(self, nodes: Any, links: Any, extra_latency: float, loss: float) -> Any:
        self.calls.append(("disturb", str(nodes)))
        return "h2"

    def heal(self, handle: Any) -> None:
        self.calls.append(("heal", handle))
        if ("heal", handle) in self.fail:
            raise RuntimeError(self.fail[("heal", handle)])

    def delete_records(self, topic: str, partition: int | None, offset: int) -> list:
        return []


class Run:
    """A nemesis on a clock that starts at 0 now, its recorded lines and its referee."""

    def __init__(self, schedule, cluster, await_back=None, late_bound_ms=250.0):
        self.t0 = time.monotonic()
        self.lines: list[tuple[float, str, str, list[str], dict]] = []
        self.referee = Referee()
        self.nemesis = WallClockNemesis(
            schedule,
            cluster,
            self.clock,
            lambda *line: self.lines.append(line),
            self.referee,
            await_back,
            late_bound_ms,
        )

    def clock(self) -> float:
        return (time.monotonic() - self.t0) * 1000.0

    def play(self, timeout_s: float = 5.0) -> Run:
        self.nemesis.start()
        assert self.nemesis.finish(timeout_s)
        self.nemesis.abort()
        return self


def pause(start: float, end: float, *nodes: str) -> FaultEvent:
    return FaultEvent(start, end, "pause", tuple(nodes or ("broker-0",)))


def crash(start: float, end: float, node: str = "broker-0") -> FaultEvent:
    return FaultEvent(start, end, "crash", (node,))


def test_a_clean_schedule_proves_each_fault_with_its_scheduled_and_confirmed_time():
    schedule = [pause(20, 60), crash(40, 80, "broker-1")]
    run = Run(schedule, FakeCluster()).play()
    assert run.referee.valid and run.referee.reasons == []
    assert run.nemesis.applied == sorted(schedule, key=lambda e: e.start)
    starts = [line for line in run.lines if line[1] == "start"]
    assert [(k, t) for _, _, k, t, _ in starts] == [
        ("pause", ["broker-0"]),
        ("crash", ["broker-1"]),
    ]
    for at, _phase, _kind, _targets, detail in run.lines:
        assert detail["scheduled"] <= at < detail["scheduled"] + 250


def test_a_pause_not_confirmed_is_not_recorded_and_makes_the_run_invalid():
    cluster = FakeCluster({("pause", "broker-0"): "not every thread stopped within 2 s"})
    run = Run([pause(10, 30)], cluster).play()
    assert run.referee.reasons == [
        f"{FAULT_NOT_APPLIED}: pause ['broker-0'] at 10 ms: not every thread stopped within 2 s"
    ]
    assert run.lines == [] and run.nemesis.applied == []
    # What was done is undone: the pause is resumed at once, never at its scheduled end.
    assert cluster.calls == [("pause", "broker-0"), ("resume", "broker-0")]


def test_a_fault_that_fails_on_its_second_target_is_undone_on_the_first():
    cluster = FakeCluster({("pause", "broker-2"): "not every thread stopped"})
    run = Run([pause(10, 30, "broker-1", "broker-2")], cluster).play()
    assert not run.referee.valid
    assert ("resume", "broker-1") in cluster.calls and ("resume", "broker-2") in cluster.calls
    assert run.nemesis.applied == []


def test_a_fault_confirmed_late_makes_the_run_invalid():
    run = Run([pause(10, 500)], FakeCluster(slow_s=0.3), late_bound_ms=250.0).play()
    assert [r.split(":")[0] for r in run.referee.reasons] == [FAULT_LATE, FAULT_LATE]
    assert "start confirmed" in run.referee.reasons[0]
    assert "end confirmed" in run.referee.reasons[1]
    start = run.lines[0]
    assert start[1] == "start" and start[0] - start[4]["scheduled"] > 250


def test_a_fault_not_undone_makes_the_run_invalid():
    cluster = FakeCluster({("resume", "broker-0"): "still stopped 2 s after SIGCONT"})
    run = Run([pause(10, 30)], cluster).play()
    assert run.referee.reasons == [
        f"{FAULT_NOT_UNDONE}: pause ['broker-0'] at 10 ms: still stopped 2 s after SIGCONT"
    ]
    assert [line[1] for line in run.lines] == ["start"]  # no stop line for what did not stop


def test_a_heal_that_leaves_its_rules_makes_the_run_invalid():
    event = FaultEvent(10, 30, "partition", ("broker-0",))
    cluster = FakeCluster({("heal", "h1"): "heal f1: eosim-broker-0 still has table eosim_f1"})
    run = Run([event], cluster).play()
    assert run.referee.reasons[0].startswith(f"{FAULT_NOT_UNDONE}: partition")


def test_a_restarted_broker_counts_as_back_once_it_serves():
    def await_back(event):
        def served() -> float:
            time.sleep(0.05)
            return 123.456

        return served

    run = Run([crash(10, 30)], FakeCluster(), await_back=await_back).play()
    assert run.referee.valid
    stop = next(line for line in run.lines if line[1] == "stop")
    assert stop[4]["served"] == 123.456 and stop[4]["scheduled"] == 30


def test_a_restarted_broker_that_does_not_serve_makes_the_run_invalid():
    def await_back(event):
        def served() -> float:
            raise RuntimeError("broker-0 did not serve within 45 s")

        return served

    run = Run([crash(10, 30)], FakeCluster(), await_back=await_back).play()
    assert run.referee.reasons == [
        f"{NOT_BACK}: crash ['broker-0'] at 10 ms: broker-0 did not serve within 45 s"
    ]
    assert "served" not in next(line for line in run.lines if line[1] == "stop")[4]


def test_faults_the_run_ended_before_playing_are_skipped():
    run = Run([pause(10, 30), pause(5_000, 6_000, "broker-1")], FakeCluster())
    run.nemesis.start()
    time.sleep(0.1)
    run.nemesis.abort(until_ms=10_000)  # the run lasted 10 s: the second pause was due
    assert run.referee.reasons == [
        f"{FAULTS_SKIPPED}: 1 of 2 scheduled fault(s) never played, the first pause "
        "['broker-1'] at 5000 ms"
    ]
    # A fault due after the run's end is not skipped: the model would not play it either.
    late = Run([pause(10, 30), pause(5_000, 6_000, "broker-1")], FakeCluster())
    late.nemesis.start()
    time.sleep(0.1)
    late.nemesis.abort(until_ms=1_000)
    assert late.referee.valid


def test_aborting_ends_a_fault_in_force_with_a_stop_line():
    cluster = FakeCluster()
    run = Run([pause(10, 60_000)], cluster)
    run.nemesis.start()
    time.sleep(0.1)
    run.nemesis.abort(until_ms=50)
    assert cluster.calls == [("pause", "broker-0"), ("resume", "broker-0")]
    assert [line[1] for line in run.lines] == ["start", "stop"] and run.referee.valid


def test_the_referee_knows_its_rules():
    referee = Referee()
    with pytest.raises(ValueError, match="not a referee rule"):
        referee.invalid("nothing happened", "x")
    for rule in RULES:
        referee.invalid(rule, "detail")
    assert [r.split(": ")[0] for r in referee.reasons] == list(RULES)
