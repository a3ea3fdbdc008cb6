"""The workload driver's processes: one JVM per application, on Kafka's own Java clients.

The driver (``real/driver/*.java``, compiled by :mod:`eosim.real.install`) reads a JSON spec and
writes the application's history lines. Its modes and the Kafka client classes behind them:

- ``produce``: ``org.apache.kafka.clients.producer.KafkaProducer`` (send with a callback);
- ``txn``: a transactional ``KafkaProducer`` (initTransactions, beginTransaction, send,
  commitTransaction / abortTransaction);
- ``consume``: ``org.apache.kafka.clients.consumer.KafkaConsumer`` without a group (assign, poll);
- ``drain``: two ``KafkaConsumer`` reads of every partition (read_uncommitted to the high
  watermark, read_committed to the last stable offset) and
  ``org.apache.kafka.clients.admin.Admin.describeProducers`` for the open transactions;
- ``admin``: ``Admin`` (deleteTopics, createTopics, describeTopics, deleteRecords);
- ``warmup``: a producer, a consumer and optionally transactions on a warm-up topic, to warm a
  freshly started cluster (nothing reaches a history);
- ``jmx``: a snapshot of the MBeans of running JVMs by pid (the attach API), for eosim's
  measurements of the brokers (:mod:`eosim.analysis.measure`);
- ``clock``: prints the JVM's ``System.nanoTime()`` (the tests check it is the runner's
  ``time.monotonic_ns()``).

Spec keys (one JSON object): ``mode``, ``name``, ``incarnation``, ``bootstrap``, ``history``
(path of the JSON Lines file, appended to; ``-`` for stdout), ``epoch_monotonic_ns`` (time 0
on the machine's monotonic clock, which every process reads alike), ``epoch_ms`` (time 0 on
the wall clock, a float: what a broker's LogAppendTime is taken against), ``seed``, ``config``
(client properties, as strings), ``warmup`` (``{topic, records}``: warm the client's code on
that topic before the epoch),
``workload`` (the scenario's workload block, durations in ms) and per mode: ``first_index``
and ``resend`` (``[[value, key], ...]``) for ``produce``; ``first_index``, ``first_txn`` and
``max_restarts`` for ``txn``; ``stop_file`` for ``consume``; ``action`` for ``admin``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from eosim.real import RealError
from eosim.real.install import KafkaInstall

MODES = ("produce", "txn", "consume", "process", "drain", "admin", "warmup", "jmx", "clock")


class DriverError(RealError):
    """The driver failed; ``str()`` is its one-line reason (from its stderr)."""


def write_spec(
    path: Path | str,
    mode: str,
    name: str,
    bootstrap: str,
    *,
    history: Path | str | None = None,
    epoch_ms: float | None = None,
    epoch_monotonic_ns: int | None = None,
    incarnation: int = 0,
    seed: int = 0,
    config: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    """Write a driver spec to ``path``; returns the path.

    ``config`` values are written as Kafka's properties read them (strings; booleans as
    ``true``/``false``; None drops the key). ``extra`` holds the mode's own keys
    (``first_index``, ``resend``, ``first_txn``, ``stop_file``, ``action``...).
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    spec: dict[str, Any] = {
        "mode": mode,
        "name": name,
        "incarnation": incarnation,
        "bootstrap": bootstrap,
        "history": str(history) if history is not None else "-",
        "seed": seed,
        "config": {k: _property(v) for k, v in (config or {}).items() if v is not None},
        "workload": workload or {},
    }
    if epoch_ms is not None:
        spec["epoch_ms"] = float(epoch_ms)
    if epoch_monotonic_ns is not None:
        spec["epoch_monotonic_ns"] = int(epoch_monotonic_ns)
    spec.update(extra)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(spec, indent=1) + "\n")
    tmp.replace(target)
    return target


def _property(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _thread_states(pid: int, proc: Path = Path("/proc")) -> list[str] | None:
    """The scheduler state of every thread of process ``pid`` (``/proc/PID/task/*/stat``);
    None when ``/proc`` cannot tell (the process is gone). A thread that ends while they are
    read is left out: a JVM starts and ends threads all the time, and taking one that
    vanished for the process being gone made a resume fail at once ("still stopped")."""
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return None
    states = []
    for task in tasks:
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return states


# HotSpot's JIT compiler threads by their native names ("C2 CompilerThread0" cut to 15
# characters by the kernel).
COMPILER_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def compiler_cpu_ms(pid: int) -> float | None:
    """Milliseconds on a core that the JIT compiler threads of JVM ``pid`` have spent so far
    (``/proc/PID/task/*/schedstat``, threads named :data:`COMPILER_THREADS`; a compiler thread
    HotSpot has retired takes its time with it, so compare readings a few seconds apart);
    None when ``/proc`` cannot tell (the process is gone)."""
    total = 0.0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            if not (task / "comm").read_text().startswith(COMPILER_THREADS):
                continue
            total += int((task / "schedstat").read_text().split()[0]) / 1e6
        except (OSError, IndexError, ValueError):
            continue  # a thread that exited meanwhile
    return total


def _wait_states(pid: int, stopped: bool, timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while True:
        states = _thread_states(pid)
        if states is None:
            return False
        if states and all((s in ("T", "t")) == stopped for s in states):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)


def wait_stopped(pid: int, timeout: float = 2.0) -> bool:
    """Wait until every thread of process ``pid`` is stopped (state T in ``/proc``); False
    when that did not happen within ``timeout`` s or ``/proc`` cannot tell."""
    return _wait_states(pid, True, timeout)


def wait_running(pid: int, timeout: float = 2.0) -> bool:
    """Wait until no thread of process ``pid`` is stopped any more (after a SIGCONT); False
    when that did not happen within ``timeout`` s or ``/proc`` cannot tell."""
    return _wait_states(pid, False, timeout)


class DriverProcess:
    """One running driver JVM (an application process).

    ``prefix`` is put before the java command, to run it elsewhere (for instance inside a
    network namespace: ``["ip", "netns", "exec", "ns-producer-0"]``); ``gc_log``, a file for
    the JVM's garbage-collection log. Its stdout (the final
    JSON result) and stderr (the clients' warnings, the driver's error line) go to files beside
    the spec: ``<spec>.out`` and ``<spec>.err``.
    """

    def __init__(
        self,
        install: KafkaInstall,
        spec: Path | str,
        prefix: Sequence[str] = (),
        env: dict[str, str] | None = None,
        gc_log: Path | str | None = None,
    ) -> None:
        self.spec = Path(spec)
        self.command = [*prefix, *install.driver_command(self.spec, gc_log)]
        self.stdout_path = self.spec.with_name(self.spec.name + ".out")
        self.stderr_path = self.spec.with_name(self.spec.name + ".err")
        self._out: IO[bytes] = open(self.stdout_path, "wb")  # noqa: SIM115
        self._err: IO[bytes] = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once it has ended (negative: killed by that signal), else None."""
        return self.proc.poll()

    def running(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): a paused client process, as a long GC pause. Returns once
        every thread has stopped: a signal is delivered asynchronously, and a thread inside a
        write finishes it first. A process whose threads do not all stop is let go again
        and :class:`DriverError` raised: the pause did not happen."""
        if self.proc.poll() is not None:
            return
        self._signal(signal.SIGSTOP)
        if not wait_stopped(self.proc.pid):
            self._signal(signal.SIGCONT)
            raise DriverError(f"pid {self.proc.pid}: not every thread stopped within 2 s")

    def resume(self) -> None:
        """Let a paused JVM run on (SIGCONT); returns once no thread is stopped, else raises
        :class:`DriverError`."""
        if self.proc.poll() is not None:
            return
        self._signal(signal.SIGCONT)
        if not wait_running(self.proc.pid) and self.proc.poll() is None:
            raise DriverError(f"pid {self.proc.pid}: still stopped 2 s after SIGCONT")

    def kill(self) -> None:
        """Crash the process (SIGKILL): its open operations stay without a completion."""
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self._close_files()

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM; a paused process is resumed first so it can)."""
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds; the exit code, or None if it is still running."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_files()
        return code

    def _close_files(self) -> None:
        for f in (self._out, self._err):
            if not f.closed:
                f.close()

    def result(self) -> dict[str, Any] | None:
        """The driver's final JSON result (its last stdout line), once it has exited 0."""
        if self.returncode != 0:
            return None
        lines = [ln for ln in self.stdout_path.read_text().splitlines() if ln.strip()]
        try:
            value = json.loads(lines[-1]) if lines else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def error(self) -> str | None:
        """The driver's error line (``eosim-driver: ...`` on stderr), if it wrote one."""
        if not self.stderr_path.exists():
            return None
        for line in reversed(self.stderr_path.read_text(errors="replace").splitlines()):
            if line.startswith("eosim-driver: "):
                return line.removeprefix("eosim-driver: ")
        return None


def run_driver(
    install: KafkaInstall,
    spec: Path | str,
    timeout: float,
    prefix: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the driver on ``spec`` to its end; its result, or :class:`DriverError`."""
    process = DriverProcess(install, spec, prefix)
    code = process.wait(timeout)
    if code is None:
        process.kill()
        raise DriverError(f"{Path(spec).name}: the driver did not finish within {timeout:g} s")
    result = process.result()
    if code != 0 or result is None:
        reason = process.error() or f"exit code {code}"
        raise DriverError(f"{Path(spec).name}: {reason}")
    return result


def admin(
    install: KafkaInstall,
    bootstrap: str,
    action: dict[str, Any],
    timeout: float = 120.0,
    workdir: Path | str | None = None,
    prefix: Sequence[str] = (),
) -> dict[str, Any]:
    """One Admin action (``{"name": "recreate_topics" | "describe" | "delete_records", ...}``,
    see ``AdminMode.java``); the driver's JSON result, or :class:`DriverError`.

    ``timeout`` (s) bounds the JVM; the action's own ``timeout_ms`` defaults to it.
    """
    import tempfile

    action = {"timeout_ms": int(timeout * 1000 * 0.9), **action}
    with tempfile.TemporaryDirectory(prefix="eosim-admin-", dir=workdir) as tmp:
        spec = write_spec(
            Path(tmp) / "admin.json", "admin", "admin", bootstrap, action=action, history=None
        )
        return run_driver(install, spec, timeout, prefix)


def read_history_lines(path: Path | str) -> list[dict[str, Any]]:
    """The JSON objects of a driver's history file, in order.

    A process killed mid-write may leave a torn last line (no newline, or not JSON): it is
    dropped. A malformed line anywhere else is an error (``ValueError`` naming the line).
    """
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    chunks = text.split("\n")
    # Every whole line ends with a newline (the driver writes line and newline at once), so
    # the last chunk is empty, or a line the process was writing when it died.
    torn = chunks.pop()
    lines: list[dict[str, Any]] = []
    for number, line in enumerate(chunks, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        lines.append(obj)
    if torn.strip():
        # A complete object is the whole line (no JSON object has a prefix that is one).
        try:
            obj = json.loads(torn)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            lines.append(obj)
    return lines


_FINAL_KINDS = ("log", "replica", "offsets", "lso", "end")


def merge_histories(parts: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Merge the histories of several driver processes into one, in time order.

    Each driver numbers its ops from 0; here the ids are renumbered so that they are unique
    (each part's ids shifted past the previous parts'). Lines with a ``time`` (ops, faults)
    are merged by time, a part's own order kept on ties; the final lines (``log``,
    ``replica``, ``offsets``, ``lso``, ``end``) follow, in that kind order and the parts' order.
    """
    timed: list[tuple[float, int, int, dict[str, Any]]] = []
    final: list[tuple[int, int, dict[str, Any]]] = []
    base = 0
    for index, lines in enumerate(parts):
        top = -1
        for position, line in enumerate(lines):
            if line.get("kind") in _FINAL_KINDS:
                final.append((_FINAL_KINDS.index(line["kind"]), len(final), line))
                continue
            if line.get("kind") == "op" and isinstance(line.get("id"), int):
                top = max(top, line["id"])
                line = {**line, "id": line["id"] + base}
            timed.append((float(line.get("time", 0.0)), index, position, line))
        base += top + 1
    timed.sort(key=lambda t: (t[0], t[1], t[2]))
    final.sort(key=lambda t: (t[0], t[1]))
    return [t[3] for t in timed] + [t[2] for t in final]


__all__ = [
    "MODES",
    "DriverError",
    "DriverProcess",
    "admin",
    "merge_histories",
    "read_history_lines",
    "run_driver",
    "wait_running",
    "wait_stopped",
    "write_spec",
]
