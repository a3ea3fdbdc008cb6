"""Per-run progress of a chunk, from the Spark tasks to the driver.

Spark tells the driver about a task only when it ends, and one task executes many runs. So
after a run (at most every 0.2 s, see ``task.REPORT_INTERVAL_S``) a task writes its count of
finished runs to a small file named
``PARTITION-ATTEMPT`` in the chunk's progress directory under ``_staging/`` (a sweep's
results directory is one that the driver and every executor see), replacing the file
atomically. A thread of the driver reads the directory a few times a second and moves the
progress bar. A retried task starts again from zero under a new attempt number; the driver
counts each partition's highest count over its attempts, so a run redone by a retry is
counted once, and the committed chunk then sets the exact count.

Progress is best effort: a task that cannot write its file runs on, and the bar then moves
when the chunk is committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


def report_progress(directory: str, task: tuple[int, int], done: int) -> None:
    """Record that ``task`` (partition, attempt) has finished ``done`` runs."""
    path = os.path.join(directory, f"{task[0]}-{task[1]}")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="ascii") as f:
            f.write(str(done))
        os.replace(tmp, path)
    except OSError:
        pass


def finished_runs(directory: Path) -> int:
    """Runs the tasks reporting into ``directory`` have finished (each partition's highest
    count over its attempts)."""
    best: dict[str, int] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        partition, dash, attempt = entry.name.partition("-")
        if not dash or not attempt.isdigit():
            continue  # a file being written
        try:
            with open(entry.path, encoding="ascii") as f:
                count = int(f.read() or 0)
        except (OSError, ValueError):
            continue
        best[partition] = max(best.get(partition, 0), count)
    return sum(best.values())


class ProgressPoller:
    """Calls ``callback(runs done)`` whenever the count grows: from the current chunk's
    progress files (polled every ``interval`` seconds), and exactly at each commit."""

    def __init__(self, callback: Callable[[int], None], interval: float = 0.25) -> None:
        self._callback = callback
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._directory: Path | None = None
        self._base = 0
        self._limit = 0
        self._last = -1
        self._thread = threading.Thread(target=self._loop, name="sweep-progress", daemon=True)

    def __enter__(self) -> ProgressPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def set_done(self, done: int) -> None:
        """Runs committed so far; stops watching any chunk."""
        with self._lock:
            self._directory = None
            self._base = self._limit = done
            self._emit(done)

    def watch(self, directory: Path, base: int, limit: int) -> None:
        """Follow a chunk whose tasks report into ``directory``; ``base`` runs are done
        before it and it ends at ``limit``."""
        with self._lock:
            self._directory, self._base, self._limit = directory, base, limit

    def poll(self) -> None:
        with self._lock:
            if self._directory is not None:
                done = self._base + finished_runs(self._directory)
                self._emit(min(done, self._limit))

    def _emit(self, done: int) -> None:
        if done > self._last:
            self._last = done
            self._callback(done)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()
