"""Jepsen history reading benchmark: edn_format (the old path) vs eosim.analysis.edn_reader.

    python benchmarks/bench_edn.py [--ops 20000] [--repeat 3] [--seed 1] [--keep FILE]

Synthesises a Jepsen Kafka history of ``--ops`` completed ops (an invocation and a completion
each, so twice as many lines) as jepsen.tests.kafka writes it: sends
``{:type :invoke, :f :send, :value [[:send 3 12]], :time 123456, :process 4, :index 17}``
completed with ``[[:send 3 [45 12]]]``, polls ``[[:poll]]`` completed with
``[[:poll {3 [[44 11] [45 12]], 5 [[2 7]]}]]``, a few ``:txn`` ops mixing both, some ``:info``
and ``:fail`` completions, subscribes and nemesis ops; writes it to a temporary file and times
(median of ``--repeat``):

* ``parse_jepsen_history`` on the old path (edn_format only: ``jepsen.FAST_READER = False``)
  and on the new one;
* the reader alone (``edn_reader.loads_all``) vs ``edn_format.loads_all`` alone;
* ``check_history`` on the result.

Results the later timings need stay alive (the old History while the new path runs,
edn_format's forms while the reader runs), which, if anything, slows the new path.

Prints a table with µs per op (per line, one EDN op map each) and asserts that both paths give
the same History (``check_history(...).to_dict()``, sends, polls, client ops). Not a test.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import edn_format

from eosim.analysis import edn_reader, jepsen
from eosim.analysis.checks import check_history
from eosim.analysis.history import History

KEYS = 8
PROCESSES = 10


def synthesise(ops: int, seed: int = 1) -> str:
    """A Jepsen Kafka history of `ops` completed ops (2 * ops lines and a few nemesis ops),
    consistent enough to check: offsets are assigned per key in send order, polls read each
    key's log in order."""
    rng = random.Random(seed)
    logs: dict[int, list[int]] = {k: [] for k in range(KEYS)}
    next_value = dict.fromkeys(range(KEYS), 0)
    read_to: dict[tuple[int, int], int] = {}
    lines: list[str] = []
    index = 0
    clock = 1_000_000

    def emit(fields: str) -> None:
        nonlocal index, clock
        clock += rng.randint(10_000, 2_000_000)
        lines.append(f"{{{fields}, :time {clock}, :index {index}}}")
        index += 1

    def send(key: int, value: int, outcome: str) -> str:
        if outcome == "ok":
            logs[key].append(value)
            return f"[:send {key} [{len(logs[key]) - 1} {value}]]"
        if outcome == "info" and rng.random() < 0.5:
            logs[key].append(value)  # committed after all
        return f"[:send {key} {value}]"

    def poll(process: int) -> str:
        found = []
        for key in rng.sample(range(KEYS), rng.randint(1, 2)):
            start = read_to.get((process, key), 0)
            end = min(len(logs[key]), start + rng.randint(0, 3))
            read_to[process, key] = end
            pairs = " ".join(f"[{o} {logs[key][o]}]" for o in range(start, end))
            found.append(f"{key} [{pairs}]")
        return "[:poll {" + ", ".join(found) + "}]"

    for process in range(PROCESSES):
        keys = " ".join(str(k) for k in range(KEYS))
        emit(f":type :invoke, :f :subscribe, :value [{keys}], :process {process}")
        emit(f":type :ok, :f :subscribe, :value [{keys}], :process {process}")
    done = PROCESSES  # the subscribes
    while done < ops:
        process = rng.randrange(PROCESSES)
        roll = rng.random()
        outcome = rng.choices(["ok", "info", "fail"], [92, 5, 3])[0]
        head = f":process {process}"
        if roll < 0.5:
            key = rng.randrange(KEYS)
            value = next_value[key]
            next_value[key] += 1
            emit(f":type :invoke, :f :send, :value [[:send {key} {value}]], {head}")
            completion = send(key, value, outcome)
            error = "" if outcome == "ok" else ", :error [:not-leader-for-partition]"
            emit(f":type :{outcome}, :f :send, :value [{completion}], {head}{error}")
        elif roll < 0.95:
            emit(f":type :invoke, :f :poll, :value [[:poll]], {head}")
            if outcome == "ok":
                emit(f":type :ok, :f :poll, :value [{poll(process)}], {head}")
            else:
                emit(f":type :{outcome}, :f :poll, :value [[:poll]], {head}, :error :timeout")
        else:
            key = rng.randrange(KEYS)
            value = next_value[key]
            next_value[key] += 1
            emit(f":type :invoke, :f :txn, :value [[:send {key} {value}] [:poll]], {head}")
            if outcome == "ok":
                completed = f"[{send(key, value, 'ok')} {poll(process)}]"
                emit(f":type :ok, :f :txn, :value {completed}, {head}")
            else:
                completed = f"[{send(key, value, outcome)} [:poll]]"
                emit(f":type :{outcome}, :f :txn, :value {completed}, {head}, :error :abort")
        done += 1
        if rng.random() < 0.002:
            emit(":type :info, :f :start-partition, :value nil, :process :nemesis")
    return "\n".join(lines) + "\n"


def timed(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    """The median wall time of `repeat` runs, and the last run's result. Each run starts after
    a full collection, the previous run's result dropped (so that it does not make the garbage
    collector's work, and the run's time, grow)."""
    times = []
    result = None
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def parse(text: str, fast: bool) -> History:
    saved = jepsen.FAST_READER
    jepsen.FAST_READER = fast
    try:
        return jepsen.parse_jepsen_history(text, "bench")
    finally:
        jepsen.FAST_READER = saved


def same_history(old: History, new: History) -> None:
    assert check_history(old).to_dict() == check_history(new).to_dict()
    assert old.sends == new.sends
    assert old.polls == new.polls
    assert old.client_ops == new.client_ops
    assert old.ops == new.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20_000, help="completed ops (2 lines each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="also write the history here")
    args = parser.parse_args()

    text = synthesise(args.ops, args.seed)
    if args.keep:
        args.keep.write_text(text)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "history.edn"
        path.write_text(text)
        text = path.read_text()
    lines = text.count("\n")
    print(f"history: {args.ops} completed ops, {lines} lines, {len(text) / 1e6:.1f} MB")

    rows: list[tuple[str, float]] = []
    old_s, old = timed(args.repeat, lambda: parse(text, fast=False))
    rows.append(("parse_jepsen_history, edn_format (old)", old_s))
    new_s, new = timed(args.repeat, lambda: parse(text, fast=True))
    rows.append(("parse_jepsen_history, edn_reader (new)", new_s))
    edn_s, edn_forms = timed(args.repeat, lambda: edn_format.loads_all(text))
    rows.append(("edn_format.loads_all alone", edn_s))
    fast_s, fast_forms = timed(args.repeat, lambda: edn_reader.loads_all(text))
    rows.append(("edn_reader.loads_all alone", fast_s))
    check_s, _ = timed(args.repeat, lambda: check_history(new))
    rows.append(("check_history on the result", check_s))

    assert fast_forms == edn_forms
    same_history(old, new)

    print(f"{'':40} {'seconds':>9} {'µs/op':>9}  (an op: one line, one EDN op map)")
    for name, seconds in rows:
        print(f"{name:40} {seconds:9.3f} {seconds / lines * 1e6:9.1f}")
    print(f"parse speed-up: {old_s / new_s:.1f}x; reader alone: {edn_s / fast_s:.1f}x")
    print("same History on both paths: yes")


if __name__ == "__main__":
    main()
