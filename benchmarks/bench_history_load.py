"""`load_history` of one JSON Lines history in fresh processes: a process's first load and the
loads after it, for one or more interpreters (trees) in one sitting, alternating.

    python benchmarks/bench_history_load.py HISTORY [--rounds 5] [--loads 3]
        [--python LABEL=PYTHON[:SCANNER] ...]

Each round starts, for each ``--python`` in turn, a fresh process of that interpreter that
imports ``eosim.analysis.history`` and then loads HISTORY ``--loads`` times (the previous
result dropped and collected before each). Each load is timed three ways: wall time, the
CPU time of the loading thread, and the CPU time of the whole process (which also counts
what other threads do meanwhile: numpy's OpenBLAS worker spins for a while after numpy is
imported, about 0.06 s here, whatever is being done). Prints, per interpreter, the medians
over the rounds for the first load and for the later ones, and each interpreter's ratio to
the first one's. ``:SCANNER`` sets ``eosim.analysis.jsonl_reader.SCANNER`` (``compiled`` or
``arrow``) in that interpreter; without ``--python``, the running interpreter alone.

Write the standard history first with ``bench_history_in.py --keep std.jsonl --repeat 1``.
To compare trees, give each its own virtualenv (docs/performance.md, "Honest benchmarks"):
this file only calls ``load_history``, which every tree has. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import gc, json, sys, time
scanner, path, loads = sys.argv[1], sys.argv[2], int(sys.argv[3])
from eosim.analysis.history import load_history
if scanner:
    from eosim.analysis import jsonl_reader
    jsonl_reader.SCANNER = scanner
times = []
for _ in range(loads):
    gc.collect()
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    history = load_history(path)
    times.append((time.perf_counter() - wall, time.thread_time() - thread,
                  time.process_time() - process))
    del history
print(json.dumps(times))
"""

KINDS = ("wall", "thread CPU", "process CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="LABEL=PYTHON[:SCANNER]",
        help="an interpreter to time (repeat the option to alternate several)",
    )
    args = parser.parse_args()
    if not args.history.is_file():
        parser.error(f"{args.history}: no such file")
    if args.rounds < 1 or args.loads < 2:
        parser.error("--rounds must be at least 1 and --loads at least 2")
    entries = []
    for entry in args.python or [f"this={sys.executable}"]:
        label, _, rest = entry.partition("=")
        python, _, scanner = rest.partition(":")
        if not label or not python:
            parser.error(f"--python {entry!r}: expected LABEL=PYTHON[:SCANNER]")
        entries.append((label, python, scanner))

    first: dict[str, list[tuple[float, ...]]] = {label: [] for label, _, _ in entries}
    later: dict[str, list[tuple[float, ...]]] = {label: [] for label, _, _ in entries}
    for number in range(1, args.rounds + 1):
        for label, python, scanner in entries:
            done = subprocess.run(
                [python, "-c", CHILD, scanner, str(args.history), str(args.loads)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(f"{label}: {done.stderr.strip().splitlines()[-1]}")
            times = [tuple(t) for t in json.loads(done.stdout)]
            first[label].append(times[0])
            later[label].extend(times[1:])
            shown = "  ".join(f"{t[0]:.3f}" for t in times)
            print(f"round {number} {label:>10}: wall {shown}", flush=True)

    print(f"\nmedians, s ({args.rounds} rounds; later loads: {args.loads - 1} a round)")
    base = entries[0][0]
    for when, table in (("first load", first), ("later loads", later)):
        print(f"{when}:")
        for label, _, _ in entries:
            medians = [statistics.median(t[k] for t in table[label]) for k in range(3)]
            ratios = [statistics.median(t[k] for t in table[base]) / medians[k] for k in range(3)]
            cells = "  ".join(
                f"{kind} {m:.3f} ({r:.1f}x)"
                for kind, m, r in zip(KINDS, medians, ratios, strict=True)
            )
            print(f"  {label:>10}: {cells}")


if __name__ == "__main__":
    main()
