"""Per-run progress of a sweep, from the Spark tasks to the driver: runs finished, and how many
of them showed each anomaly.

Spark tells the driver about a task only when it ends, and one task executes many runs. So
after a run (at most every 0.2 s, see ``task.REPORT_INTERVAL_S``) a task writes what it has
done so far to a small file named ``PARTITION-ATTEMPT`` in the job's progress directory under
``_staging/`` (a sweep's results directory is one that the driver and every executor see),
replacing the file atomically: one JSON object, ``{"runs": N, "found": {ANOMALY: RUNS}}``,
``found`` holding every anomaly kind some of those runs reported, with the number of runs that
reported it. A thread of the driver reads the directory a few times a second and moves the
progress bar, whose text names the anomalies found so far. A retried task starts again under a
new attempt number (counting the chunks its earlier attempts committed as done); the driver
takes each partition's attempt with the most runs, so a run redone by a retry is counted once.

Progress is best effort: a task that cannot write its file runs on, and the bar then moves
when the job ends.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Progress:
    """Runs finished, and per anomaly kind the runs among them that reported it."""

    runs: int = 0
    found: dict[str, int] = field(default_factory=dict)

    def plus(self, other: Progress) -> Progress:
        found = dict(self.found)
        for name, n in other.found.items():
            found[name] = found.get(name, 0) + n
        return Progress(self.runs + other.runs, found)


def add_found(found: dict[str, int], anomalies: Mapping[str, int]) -> None:
    """Count one run's anomalies (name -> count) into ``found`` (name -> runs with it)."""
    for name, count in anomalies.items():
        if count:
            found[name] = found.get(name, 0) + 1


def report_progress(
    directory: str, task: tuple[int, int], done: int, found: Mapping[str, int] | None = None
) -> None:
    """Record that ``task`` (partition, attempt) has finished ``done`` runs, ``found[name]``
    of which reported anomaly ``name``."""
    path = os.path.join(directory, f"{task[0]}-{task[1]}")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"runs": done, "found": dict(found or {})}, f)
        os.replace(tmp, path)
    except OSError:
        pass


def finished(directory: Path) -> Progress:
    """What the tasks reporting into ``directory`` have done: for each partition, its attempt
    with the most runs."""
    best: dict[str, Progress] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return Progress()
    for entry in entries:
        partition, dash, attempt = entry.name.partition("-")
        if not dash or not attempt.isdigit():
            continue  # a file being written
        try:
            with open(entry.path, encoding="utf-8") as f:
                data = json.load(f)
            progress = Progress(int(data["runs"]), {k: int(v) for k, v in data["found"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if progress.runs >= best.get(partition, Progress(-1)).runs:
            best[partition] = progress
    total = Progress()
    for progress in best.values():
        total = total.plus(progress)
    return total


def finished_runs(directory: Path) -> int:
    """Runs the tasks reporting into ``directory`` have finished."""
    return finished(directory).runs


class ProgressPoller:
    """Calls ``callback(progress)`` whenever the count of runs grows or a new anomaly is
    found: from the running job's progress files (polled every ``interval`` seconds), on top
    of what was committed before it, and exactly at :meth:`set_done`."""

    def __init__(self, callback: Callable[[Progress], None], interval: float = 0.25) -> None:
        self._callback = callback
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._directory: Path | None = None
        self._base = Progress()
        self._limit = 0
        self._last = Progress(-1)
        self._thread = threading.Thread(target=self._loop, name="sweep-progress", daemon=True)

    def __enter__(self) -> ProgressPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def last(self) -> Progress:
        """What was last reported."""
        with self._lock:
            return self._last

    def set_done(self, done: Progress) -> None:
        """What is committed so far; stops watching any job."""
        with self._lock:
            self._directory = None
            self._base = done
            self._limit = done.runs
            self._emit(done)

    def watch(self, directory: Path, base: Progress, limit: int) -> None:
        """Follow a job whose tasks report into ``directory``; ``base`` was done before it
        and it ends at ``limit`` runs."""
        with self._lock:
            self._directory, self._base, self._limit = directory, base, limit

    def poll(self) -> None:
        with self._lock:
            if self._directory is not None:
                done = self._base.plus(finished(self._directory))
                self._emit(Progress(min(done.runs, self._limit), done.found))

    def _emit(self, done: Progress) -> None:
        if done.runs > self._last.runs or (
            done.runs == self._last.runs and done.found != self._last.found
        ):
            self._last = done
            self._callback(done)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()
