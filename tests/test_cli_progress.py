"""`eosim run`'s progress line, and the runner's progress hook behind it."""

from __future__ import annotations

import io
import json

import pytest
from test_cli import run_cli, scenario

import eosim.simulation.runner
from eosim import api, cli
from eosim.simulation import run_scenario

SMALL = ["--set", "producers.0.workload.records=2000"]


def test_progress_is_called_and_changes_nothing(monkeypatch):
    """The hook sees the simulated time grow and the tally fill up; the run it watches is the
    run without it: same history, same events."""
    monkeypatch.setattr(eosim.simulation.runner, "PROGRESS_EVERY", 500)
    s = api.load(scenario("at-least-once"), ["producers.0.workload.records=2000"])
    calls: list[tuple[float, dict[str, int]]] = []
    watched = run_scenario(s, 3, progress=lambda now, counts: calls.append((now, dict(counts))))
    plain = run_scenario(s, 3)
    assert watched.history.digest() == plain.history.digest()
    assert watched.events == plain.events
    assert len(calls) == plain.events // 500
    times = [now for now, _ in calls]
    assert times == sorted(times) and times[-1] > times[0]
    assert calls[-1][1]["sent"] > calls[0][1]["sent"]
    assert set(calls[0][1]) == {"sent", "acked", "failed", "indeterminate", "errored"}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_progress_line_waits_then_rewrites_one_line_then_erases_it():
    stream, clock = io.StringIO(), Clock()
    line = cli.ProgressLine(stream, 600_000.0, clock)
    counts = {"sent": 1500, "acked": 1000, "failed": 2, "indeterminate": 3, "errored": 0}
    line(1000.0, counts)
    clock.t += 1.9
    line(2000.0, counts)
    assert stream.getvalue() == ""  # a short run shows nothing
    clock.t += 0.2
    line(30_000.0, counts)
    first = "simulated 30.0 s of 600 s (5%), 1,500 operations sent, 1,005 done, 2 s wall"
    assert stream.getvalue() == "\r" + first
    line(31_000.0, counts)  # too soon after the last update
    assert stream.getvalue() == "\r" + first
    clock.t += 1.0
    line(700_000.0, counts)  # past the duration: settling, recovering
    assert stream.getvalue().endswith(
        "\rsimulated 700.0 s of 600 s, 1,500 operations sent, 1,005 done, 3 s wall    "
    )  # padded over the longer line before
    line.close()
    assert stream.getvalue().endswith("\r" + " " * len(first) + "\r")
    assert "\n" not in stream.getvalue()


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(cli, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(cli, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(eosim.simulation.runner, "PROGRESS_EVERY", 200)


def test_run_progress_on_stderr_with_the_flag(capsys, eager):
    code, out, err = run_cli(capsys, "run", scenario("at-least-once"), "--progress", *SMALL)
    assert code == 0
    assert err.startswith("\rsimulated ") and " of 600 s (" in err and err.endswith("\r")
    assert "\n" not in err and "\r" not in out


@pytest.mark.parametrize("flags", [[], ["--json", "--progress"], ["--no-progress"]])
def test_no_progress_without_a_terminal_or_with_json(capsys, eager, flags):
    code, out, err = run_cli(capsys, "run", scenario("at-least-once"), *flags, *SMALL)
    assert code == 0 and err == ""
    if "--json" in flags:
        json.loads(out)


def test_a_run_cut_by_its_duration_warns(capsys):
    argv = ["--set", "producers.0.workload.records=100000", "--set", "duration=2s"]
    code, out, _ = run_cli(capsys, "run", scenario("idempotent"), *argv)
    assert code == 0  # its expectations hold on what it did
    assert (
        "warning    the run was cut by its duration (2000 ms) before its workload finished\n" in out
    )
    assert "note " not in out
    code, out, _ = run_cli(capsys, "run", scenario("idempotent"), *argv, "--json")
    assert json.loads(out)["cut_by_duration"] is True
    code, out, _ = run_cli(capsys, "run", scenario("idempotent"), "--json", *SMALL)
    assert json.loads(out)["cut_by_duration"] is False
