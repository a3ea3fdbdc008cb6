"""What a broker's start costs in CPU, and how long it takes in wall time: the figures behind
the resource model's start-up (``resources.startup``, docs/calibration.md).

    python benchmarks/real_startup_cpu.py [--root /tmp] [--seconds 3600] [--out FILE.csv]

Watches every real cluster eosim runs under ``--root`` (``eosim-kafka-*/cluster-*``, as a
sweep with ``--target kafka`` or ``eosim calibrate`` makes them) and, for each broker process
that starts while it watches, polls ``/proc`` every 50 ms until the broker's log says
"Kafka Server started" for it. One CSV row per start: the node, its pid, the wall time from
the process's start (``/proc/PID/stat``'s start time) to its registration with the
controller ("Successfully registered broker") and to that line, the CPU the process had used
by each (user and system, every thread), its JIT compiler threads' CPU by each, and the
share of the machine's cores busy meanwhile (``/proc/stat``). Light (it reads ``/proc`` only), so it
can watch a sweep without disturbing it. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
STARTED = b"Kafka Server started"
REGISTERED = b"Successfully registered broker"


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("/proc/stat has no btime")


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the machine since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from the state (3rd) on


def _cpu_s(pid: int) -> tuple[float, float] | None:
    """(process CPU, its compiler threads' CPU) in seconds."""
    stat = _stat(pid)
    if stat is None:
        return None
    total = (int(stat[11]) + int(stat[12])) / TICK
    jit = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                if (task / "comm").read_text().startswith(("C1 ", "C2 ")):
                    jit += int((task / "schedstat").read_text().split()[0]) / 1e9
            except OSError:
                continue
    except OSError:
        return None
    return total, jit


@dataclass
class Start:
    node: str
    pid: int
    log: Path
    log_from: int  # bytes of the log before this process's lines
    began: float  # wall clock (s since the epoch) the process started
    busy0: tuple[int, int] = field(default_factory=_machine_ticks)
    registered: tuple[float, float, float] | None = None  # (wall, CPU, JIT CPU) s, registered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp"))
    parser.add_argument("--seconds", type=float, default=3600.0)
    parser.add_argument("--out", type=Path, default=None, help="CSV file (default: stdout)")
    args = parser.parse_args(argv)
    boot = _boot_time()
    out = args.out.open("a", newline="") if args.out else sys.stdout
    writer = csv.writer(out)
    if not args.out or out.tell() == 0:
        writer.writerow(
            [
                "node",
                "pid",
                "registered_wall_s",
                "registered_cpu_s",
                "registered_jit_cpu_s",
                "wall_s",
                "cpu_s",
                "jit_cpu_s",
                "machine_busy",
                "cluster",
            ]
        )
        out.flush()
    seen: set[int] = set()
    watching: dict[int, Start] = {}
    deadline = time.time() + args.seconds
    while time.time() < deadline:
        for pid_file in sorted(args.root.glob("eosim-kafka-*/cluster-*/broker-*/pid")):
            try:
                pid = int(pid_file.read_text().strip())
            except (OSError, ValueError):
                continue
            if pid in seen:
                continue
            seen.add(pid)
            stat = _stat(pid)
            log = pid_file.parent / "server.log"
            if stat is None or not log.exists():
                continue
            began = boot + int(stat[19]) / TICK
            if time.time() - began > 2.0:
                continue  # already running when first seen: its start was not watched
            size = log.stat().st_size
            watching[pid] = Start(pid_file.parent.name, pid, log, size, began)
        for pid, start in list(watching.items()):
            cpu = _cpu_s(pid)
            if cpu is None:
                del watching[pid]  # died before it served
                continue
            try:
                with start.log.open("rb") as f:
                    f.seek(start.log_from)
                    text = f.read()
            except OSError:
                continue
            now = time.time()
            if start.registered is None and REGISTERED in text:
                start.registered = (now - start.began, cpu[0], cpu[1])
            if STARTED in text:
                busy1 = _machine_ticks()
                share = (busy1[0] - start.busy0[0]) / max(busy1[1] - start.busy0[1], 1)
                writer.writerow(
                    [
                        start.node,
                        pid,
                        *(f"{x:.2f}" for x in start.registered or (float("nan"),) * 3),
                        f"{now - start.began:.2f}",
                        f"{cpu[0]:.2f}",
                        f"{cpu[1]:.2f}",
                        f"{share:.2f}",
                        start.log.parent.parent,
                    ]
                )
                out.flush()
                del watching[pid]
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
