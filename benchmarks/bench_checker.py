"""Checker benchmark: every check on synthetic histories of growing size, to show how each
scales.

    python benchmarks/bench_checker.py [--records 100000,1000000] [--repeat 1] [--json FILE]

Two histories per size, written as JSON-ready line objects and built with
``history_from_records`` (the path every history file takes):

* ``plain``: idempotent sends to 6 partitions, each acknowledged at the offset its final log
  holds it at; no anomaly (the delivery screen answers it);
* ``transactional``: 8 transactional producers, transactions of 10 sends over 6
  partitions, one in twenty aborted (ABORT markers, the records left in the log), the rest
  committed (COMMIT markers), and a read_committed consumer reading every committed record
  in polls of 500; no anomaly, but every transactional index is built.

Reported per history: seconds to build the History, seconds for all checks
(``check_history``), and both per record; then the ratio of the largest size's per-record
check time to the smallest's (1.0 is linear; a quadratic check would show about the size
ratio). Not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records

TOPIC = "t"
PARTITIONS = 6


def _op(op_id: int, type_: str, f: str, process: str, t: float, value: Any) -> dict[str, Any]:
    return {"kind": "op", "id": op_id, "type": type_, "f": f, "process": process, "time": t,
            "value": value}  # fmt: skip


def plain_history(records: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"kind": "meta", "format": "eosim-history", "version": 1}]
    logs: list[list[dict[str, Any]]] = [[] for _ in range(PARTITIONS)]
    for i in range(records):
        partition = i % PARTITIONS
        value = f"p-{i}"
        offset = len(logs[partition])
        send = {"topic": TOPIC, "partition": partition, "key": None, "value": value}
        lines.append(_op(i, "invoke", "send", "p", i * 0.1, send))
        lines.append(_op(i, "ok", "send", "p", i * 0.1 + 0.05, {**send, "offset": offset}))
        logs[partition].append({"offset": offset, "value": value, "producer_id": 1, "epoch": 0,
                                "sequence": offset})  # fmt: skip
    for partition, log in enumerate(logs):
        lines.append({"kind": "log", "topic": TOPIC, "partition": partition, "records": log})
    return lines


def transactional_history(records: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"kind": "meta", "format": "eosim-history", "version": 1}]
    logs: list[list[dict[str, Any]]] = [[] for _ in range(PARTITIONS)]
    markers: list[list[dict[str, Any]]] = [[] for _ in range(PARTITIONS)]
    next_offset = [0] * PARTITIONS
    committed: list[tuple[int, int, str]] = []
    per_txn = 10
    clock = 0.0
    for n in range(records // per_txn):
        producer = n % 8
        transactional_id = f"tx-{producer}"
        process = f"producer-{producer}"
        aborted = n % 20 == 19
        writes = []
        for k in range(per_txn):
            i = n * per_txn + k
            partition = (n + k) % PARTITIONS
            value = f"v-{i}"
            offset = next_offset[partition]
            next_offset[partition] += 1
            writes.append((partition, offset, value))
            logs[partition].append({"offset": offset, "value": value, "producer_id": producer,
                                    "epoch": 0, "sequence": offset, "transactional": True,
                                    "time": clock})  # fmt: skip
        for partition in sorted({p for p, _, _ in writes}):
            markers[partition].append({"offset": next_offset[partition], "producer_id": producer,
                                       "type": "ABORT" if aborted else "COMMIT",
                                       "time": clock + 1})  # fmt: skip
            next_offset[partition] += 1
        sends = [{"topic": TOPIC, "partition": p, "key": None, "value": v} for p, _, v in writes]
        txn = {"transactional_id": transactional_id, "producer_id": producer, "epoch": 0,
               "sends": sends}  # fmt: skip
        lines.append(_op(n, "invoke", "txn", process, clock, txn))
        done = [{**s, "offset": o} for s, (_, o, _) in zip(sends, writes, strict=True)]
        lines.append(_op(n, "fail" if aborted else "ok", "txn", process, clock + 2,
                         {**txn, "sends": done}))  # fmt: skip
        if not aborted:
            committed += writes
        clock += 3
    op_id = records
    for start in range(0, len(committed), 500):
        batch = sorted(committed[start : start + 500])
        polled = [{"topic": TOPIC, "partition": p, "offset": o, "value": v} for p, o, v in batch]
        lines.append(_op(op_id, "invoke", "poll", "consumer", clock, None))
        lines.append(_op(op_id, "ok", "poll", "consumer", clock + 1,
                         {"records": polled, "isolation": "read_committed"}))  # fmt: skip
        op_id += 1
        clock += 2
    for partition in range(PARTITIONS):
        lines.append({"kind": "log", "topic": TOPIC, "partition": partition,
                      "records": logs[partition], "markers": markers[partition]})  # fmt: skip
    return lines


def measure(kind: str, records: int, repeat: int) -> dict[str, Any]:
    lines = (plain_history if kind == "plain" else transactional_history)(records)
    builds, checks = [], []
    anomalies: dict[str, int] = {}
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        history = history_from_records(lines)
        built = time.perf_counter()
        verdict = check_history(history)
        checks.append(time.perf_counter() - built)
        builds.append(built - start)
        anomalies = {n: a.count for n, a in verdict.anomalies.items() if a.count}
        del history, verdict
    build, check = statistics.median(builds), statistics.median(checks)
    return {
        "history": kind,
        "records": records,
        "build_s": round(build, 3),
        "checks_s": round(check, 3),
        "build_us_per_record": round(build * 1e6 / records, 2),
        "checks_us_per_record": round(check * 1e6 / records, 2),
        "anomalies": anomalies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", dest="json_path", type=Path)
    args = parser.parse_args()
    sizes = [int(n) for n in args.records.split(",")]
    results = []
    for kind in ("plain", "transactional"):
        rows = [measure(kind, n, args.repeat) for n in sizes]
        for row in rows:
            print(json.dumps(row))
        first, last = rows[0], rows[-1]
        scaling = last["checks_us_per_record"] / first["checks_us_per_record"]
        print(f"{kind}: per-record check time at {sizes[-1]:,} / at {sizes[0]:,}: {scaling:.2f}")
        results += rows
    if args.json_path:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
