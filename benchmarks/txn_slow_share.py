"""Which of a run's transactions are slow, by where their partition's leader is: the share of
calibration case 4's transactions whose add was refused CONCURRENT_TRANSACTIONS and retried,
split by whether the transaction coordinator's broker also leads the partition written
(docs/calibration.md, "Case 4: the race that makes a transaction slow").

    python benchmarks/txn_slow_share.py model [--seeds 1,2,3] [--set PATH=VALUE] [--before-ms MS]
    python benchmarks/txn_slow_share.py kafka SWEEP_DIR [--before-ms MS]
    python benchmarks/txn_slow_share.py race TRACE_DIR

``model`` runs case 4 on the model (the calibration's overrides: Kafka 4.1's rules, the
``calibration-host`` preset, ``crash_reset``) with its message trace and counts, before
``--before-ms`` (2,000: the first kill) and after, the transactions whose produce requests all
went to the broker that got their EndTxn (the coordinator's) and the others, and how many of
each had a produce of 15 ms or more (a refused add costs 20).

``kafka`` reads a real sweep's kept histories (its valid runs) and counts the transactions
begun before ``--before-ms``, while the placement is the model's (the coordinator's broker,
broker-0, leads partition 0): those that wrote partition 0 alone and the others, and how many
took 20 ms or more.

``race`` reads a request-log trace (``benchmarks/real_request_log.py run``) and, for each
transaction led by the coordinator's broker, whether the reader's next fetch reached that
broker more than 1 ms after the markers' answer left it, and whether the next add was
accepted. Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

CASE4 = Path(__file__).resolve().parent.parent / "scenarios/calibration"
CASE4 /= "transactions-coordinator-kill.yaml"
CALIBRATION_SETS = [
    "kafka.version=4.1",
    "cluster.resources.preset=calibration-host",
    "cluster.crash_reset={min: 25ms, max: 120ms}",
]


def model(
    seeds: list[int], overrides: list[str], before_ms: float
) -> Counter[tuple[str, str, bool]]:
    from eosim.simulation import load_scenario, run_scenario

    scenario = load_scenario(CASE4, CALIBRATION_SETS + overrides)
    counts: Counter[tuple[str, str, bool]] = Counter()
    for seed in seeds:
        trace = run_scenario(scenario, seed, trace=True).trace or []
        sent: dict[int, tuple[float, str]] = {}
        produces: list[tuple[str, float]] = []
        for e in trace:
            kind = type(e.payload).__name__
            if kind == "ProduceRequest" and e.event == "send" and e.src.startswith("txn"):
                sent[e.payload.correlation_id] = (e.time, e.dst)
            elif kind == "ProduceResponse" and e.event == "deliver" and e.dst.startswith("txn"):
                begun = sent.pop(e.payload.correlation_id, None)
                if begun is not None:
                    produces.append((begun[1], e.time - begun[0]))
            elif kind == "EndTxnRequest" and e.event == "deliver" and produces:
                led = all(broker == e.dst for broker, _ in produces)
                slow = any(ms >= 15.0 for _, ms in produces)
                when = f"before {before_ms:g} ms" if e.time < before_ms else "after"
                counts[(when, "coordinator-led" if led else "led elsewhere", slow)] += 1
                produces = []
    return counts


def kafka(sweep: Path, before_ms: float) -> Counter[tuple[str, str, bool]]:
    import pandas as pd

    from eosim.analysis.history import load_history

    runs = pd.read_parquet(sweep / "runs", columns=["variant", "run", "valid"])
    counts: Counter[tuple[str, str, bool]] = Counter()
    for variant, run in runs[runs["valid"]][["variant", "run"]].itertuples(index=False):
        path = sweep / "histories" / f"variant={variant}" / f"run-{int(run):06d}.jsonl"
        for txn in load_history(path).txns:
            if txn.outcome != "ok" or txn.complete_time is None or txn.invoke_time >= before_ms:
                continue
            led = {s.partition for s in txn.sends} == {0}
            slow = txn.complete_time - txn.invoke_time >= 20.0
            counts[
                (f"before {before_ms:g} ms", "coordinator-led" if led else "led elsewhere", slow)
            ] += 1
    return counts


def race(folder: Path) -> Counter[tuple[str, str]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_request_log as log

    events: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for path in sorted(folder.glob("**/broker-*/server.log")):
        broker = path.parent.name
        with path.open(errors="replace") as lines:
            for line in lines:
                if "Completed request:" not in line:
                    continue
                match = log.LINE.match(line.rstrip("\n"))
                if not match:
                    continue
                request = json.loads(match.group(2))
                header = request["requestHeader"]
                kind, client = header["requestApiKeyName"], header.get("clientId") or ""
                done = log._seconds(match.group(1))
                arrived = done - request["totalTimeMs"] / 1000.0
                if kind == "WRITE_TXN_MARKERS":
                    events[broker].append((done, "markers"))
                elif kind == "FETCH" and client.startswith("consumer"):
                    events[broker].append((arrived, "reader"))
                elif kind == "ADD_PARTITIONS_TO_TXN":
                    events[broker].append((arrived, "ok" if log._accepted(request) else "refused"))
                elif kind == "PRODUCE" and not client:
                    events[broker].append((arrived, "produce"))
    counts: Counter[tuple[str, str]] = Counter()
    for timeline in events.values():
        timeline.sort()
        for i, (at, kind) in enumerate(timeline):
            if kind != "markers":
                continue
            add = next((e for e in timeline[i + 1 :] if e[1] in ("ok", "refused")), None)
            if add is None or add[0] - at > 0.2:
                continue
            if not any(k == "produce" and t <= add[0] for t, k in timeline[i + 1 :]):
                continue  # the partition written is led elsewhere
            reads = [t - at for t, k in timeline if k == "reader" and at - 0.003 <= t <= add[0]]
            if not reads:
                where = "no reader fetch in between"
            elif min(reads) > 0.001:
                where = "reader's next fetch over 1 ms after the markers' answer"
            else:
                where = "reader's next fetch within 1 ms, or before"
            counts[(where, add[1])] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("--seeds", default="1,2,3")
    m.add_argument("--set", dest="overrides", action="append", default=[])
    m.add_argument("--before-ms", type=float, default=2000.0)
    k = sub.add_parser("kafka")
    k.add_argument("sweep", type=Path)
    k.add_argument("--before-ms", type=float, default=2000.0)
    r = sub.add_parser("race")
    r.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.command == "race":
        for (where, outcome), n in sorted(race(args.folder).items()):
            print(f"{where}: next add {outcome}: {n}")
        return 0
    if args.command == "model":
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            parser.error(f"--seeds {args.seeds}: whole numbers separated by commas")
        counts = model(seeds, args.overrides, args.before_ms)
    else:
        counts = kafka(args.sweep, args.before_ms)
    for when, led in sorted({(w, led) for w, led, _ in counts}):
        slow, total = (
            counts[(when, led, True)],
            counts[(when, led, True)] + counts[(when, led, False)],
        )
        print(f"{when}, {led}: {slow} of {total} slow ({slow / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
