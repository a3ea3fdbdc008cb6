"""Which of a run's transactions are slow, by where their partition's leader is: the share of
calibration case 4's transactions whose add was refused CONCURRENT_TRANSACTIONS and retried,
split by whether the transaction coordinator's broker also leads the partition written
(docs/calibration.md, "Case 4: the race that makes a transaction slow").

    python benchmarks/txn_slow_share.py model [--seeds 1,2,3] [--set PATH=VALUE] [--before-ms MS]
    python benchmarks/txn_slow_share.py kafka SWEEP_DIR [--before-ms MS]
    python benchmarks/txn_slow_share.py race TRACE_DIR
    python benchmarks/txn_slow_share.py race-model [--seeds 1,2,3] [--set PATH=VALUE]
        [--before-ms MS]

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
accepted; ``race-model`` the same on the model's message trace. Not a test.
"""

from __future__ import annotations

import argparse
import bisect
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


# A broker's timeline: (seconds, what, who): "markers" (a leader's answer to markers left it),
# "reader" (the reader's fetch reached it), "produce" (the transactional producer's),
# "ok"/"refused" (a leader's AddPartitionsToTxn reached it, and its answer), "ffetch" (follower
# ``who``'s fetch reached it) and "fgot" (an answer to follower ``who`` left it carrying
# __transaction_state records).
Timelines = dict[str, list[tuple[float, str, str | None]]]


def kafka_timelines(folder: Path) -> Timelines:
    """The brokers' timelines from a request-log trace (``real_request_log.py run``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_request_log as log

    events: Timelines = defaultdict(list)
    state_ids: set[str] = set()  # __transaction_state's topic id, from the brokers' logs
    # (broker, done, follower, the topic ids its answer carried records of): "fgot" once the
    # ids are all known
    answers: list[tuple[str, float, str, set[str]]] = []
    for path in sorted(folder.glob("**/broker-*/server.log")):
        broker = path.parent.name
        with path.open(errors="replace") as lines:
            for line in lines:
                if "Completed request:" not in line:
                    if "topic=__transaction_state" in line and "topicId=" in line:
                        state_ids.add(line.split("topicId=", 1)[1].split(",", 1)[0])
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
                    events[broker].append((done, "markers", None))
                elif kind == "FETCH" and client.startswith("consumer"):
                    events[broker].append((arrived, "reader", None))
                elif kind == "FETCH" and "-fetcher-" in client:
                    follower = client.split("-fetcher-", 1)[0]
                    events[broker].append((arrived, "ffetch", follower))
                    carried = {
                        t.get("topicId")
                        for t in request["response"].get("responses", [])
                        if any(p.get("recordsSizeInBytes", 0) > 0 for p in t["partitions"])
                    }
                    if carried:
                        answers.append((broker, done, follower, carried))
                elif kind == "ADD_PARTITIONS_TO_TXN":
                    outcome = "ok" if log._accepted(request) else "refused"
                    events[broker].append((arrived, outcome, None))
                elif kind == "PRODUCE" and not client:
                    events[broker].append((arrived, "produce", None))
    for broker, done, follower, carried in answers:
        if carried & state_ids:
            events[broker].append((done, "fgot", follower))
    return events


def model_timelines(seed: int, overrides: list[str], before_ms: float | None) -> Timelines:
    """The brokers' timelines from the model's message trace of case 4 (the markers' answers
    before ``before_ms`` only, when given)."""
    from eosim.simulation import load_scenario, run_scenario
    from eosim.simulation.protocol import Errors

    scenario = load_scenario(CASE4, CALIBRATION_SETS + overrides)
    events: Timelines = defaultdict(list)
    adds: dict[tuple[str, str, int], int] = {}  # (leader, coordinator, cid): its index
    for e in run_scenario(scenario, seed, trace=True).trace or []:
        kind = type(e.payload).__name__
        at = e.time / 1000.0
        if e.event == "send":
            if kind == "WriteTxnMarkersResponse":
                if before_ms is None or e.time < before_ms:
                    events[e.src].append((at, "markers", None))
            elif kind == "ReplicaFetchResponse" and any(
                tp[0] == "__transaction_state" and data.batches for tp, data in e.payload.partitions
            ):
                events[e.src].append((at, "fgot", e.dst))
        elif e.event != "deliver":
            continue
        elif kind == "ReplicaFetchRequest":
            events[e.dst].append((at, "ffetch", e.src))
        elif kind == "FetchRequest" and e.src.startswith("reader"):
            events[e.dst].append((at, "reader", None))
        elif kind == "ProduceRequest" and e.src.startswith("txn"):
            events[e.dst].append((at, "produce", None))
        elif kind == "AddPartitionsToTxnBrokerRequest":
            adds[(e.src, e.dst, e.payload.correlation_id)] = len(events[e.dst])
            events[e.dst].append((at, "ok", None))
        elif kind == "AddPartitionsToTxnBrokerResponse":
            index = adds.pop((e.dst, e.src, e.payload.correlation_id), None)
            refused = any(err is Errors.CONCURRENT_TRANSACTIONS for _, err in e.payload.results)
            if index is not None and refused:
                events[e.src][index] = (events[e.src][index][0], "refused", None)
    return events


class _Index:
    """A broker's timeline sorted, with the times of each kind (and follower) for bisecting,
    and the followers that got __transaction_state records from it."""

    def __init__(self, timeline: list[tuple[float, str, str | None]]) -> None:
        timeline.sort(key=lambda e: e[0])
        self.timeline = timeline
        self.times: dict[tuple[str, str | None], list[float]] = defaultdict(list)
        for t, kind, who in timeline:
            self.times[(kind, who)].append(t)
        self.followers = sorted(who for kind, who in self.times if kind == "fgot" and who)

    def first(self, kind: str, after: float, who: str | None = None) -> float | None:
        """The first time of ``kind`` (``who``'s) strictly after ``after``."""
        times = self.times.get((kind, who), [])
        i = bisect.bisect_right(times, after)
        return times[i] if i < len(times) else None


Led = list[tuple[_Index, float, tuple[float, str]]]


def led_by_coordinator(timelines: Timelines) -> Led:
    """Each markers' answer on a broker whose next add there, within 0.2 s, follows a produce
    there (the partition written is led by the coordinator's broker): (index, its time, the
    add's time and outcome)."""
    led: Led = []
    for timeline in timelines.values():
        index = _Index(timeline)
        adds = sorted((t, k) for t, k, _ in index.timeline if k in ("ok", "refused"))
        add_times = [t for t, _ in adds]
        for at in index.times.get(("markers", None), []):
            j = bisect.bisect_right(add_times, at)
            if j == len(adds) or adds[j][0] - at > 0.2:
                continue
            produced = index.first("produce", at)
            if produced is not None and produced <= adds[j][0]:
                led.append((index, at, adds[j]))
    return led


def race_counts(led: Led) -> Counter[tuple[str, str]]:
    """Whether the next add was refused, by when the reader's next fetch reached the broker
    after the markers' answer."""
    counts: Counter[tuple[str, str]] = Counter()
    for index, at, add in led:
        read = index.first("reader", at - 0.003 - 1e-9)
        if read is None or read > add[0]:
            where = "no reader fetch in between"
        elif read - at > 0.001:
            where = "reader's next fetch over 1 ms after the markers' answer"
        else:
            where = "reader's next fetch within 1 ms, or before"
        counts[(where, add[1])] += 1
    return counts


def gaps(led: Led) -> list[tuple[float, str]]:
    """(ms from the markers' answer to the reader's next fetch after it, the next add's
    outcome), for each transaction with such a fetch before its add."""
    found = []
    for index, at, add in led:
        read = index.first("reader", at)
        if read is not None and read <= add[0]:
            found.append(((read - at) * 1000.0, add[1]))
    return found


def chains(led: Led) -> list[tuple[float, float, float, str]]:
    """How the CompleteCommit went on, per transaction whose two followers both fetched it:
    ms from the markers' answer until the first follower got it, until the later follower's
    next fetch reached the leader (its high watermark could then move), until the next add
    reached it; and that add's outcome."""
    rows = []
    for index, at, add in led:
        got = {}
        for who in index.followers:
            t = index.first("fgot", at, who)
            if t is not None and t - at < 0.2:
                got[who] = t
        after = {}
        for who, t0 in got.items():
            t = index.first("ffetch", t0, who)
            if t is not None:
                after[who] = t
        if len(after) >= 2:
            rows.append(
                (
                    (min(got.values()) - at) * 1000.0,
                    (max(after.values()) - at) * 1000.0,
                    (add[0] - at) * 1000.0,
                    add[1],
                )
            )
    return rows


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    return " ".join(
        f"p{int(p * 100)} {ordered[min(len(ordered) - 1, int(p * len(ordered)))]:.2f}"
        for p in (0.1, 0.5, 0.9)
    )


def print_race(timelines: list[Timelines]) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    found: list[tuple[float, str]] = []
    rows: list[tuple[float, float, float, str]] = []
    for t in timelines:
        led = led_by_coordinator(t)
        counts.update(race_counts(led))
        found += gaps(led)
        rows += chains(led)
    for (where, outcome), n in sorted(counts.items()):
        print(f"{where}: next add {outcome}: {n}")
    print(f"reader's next fetch after the markers' answer, ms: {_quantiles([g for g, _ in found])}")
    for low, high in ((0, 0.5), (0.5, 1), (1, 2), (2, 5), (5, 200)):
        within = [outcome for g, outcome in found if low <= g < high]
        if within:
            refused = sum(o == "refused" for o in within) / len(within)
            print(f"  {low:g}-{high:g} ms: {len(within)}, next add refused {refused:.0%}")
    if rows:
        print(f"CompleteCommit, ms after the markers' answer ({len(rows)} transactions):")
        for outcome in ("ok", "refused"):
            mine = [r for r in rows if r[3] == outcome]
            if mine:
                print(f"  next add {outcome} ({len(mine)}):")
                for name, j in (("first follower got it", 0), ("both fetched again", 1)):
                    print(f"    {name}: {_quantiles([r[j] for r in mine])}")


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
    rm = sub.add_parser("race-model")
    rm.add_argument("--seeds", default="1,2,3")
    rm.add_argument("--set", dest="overrides", action="append", default=[])
    rm.add_argument("--before-ms", type=float, default=None)
    args = parser.parse_args(argv)
    seeds: list[int] = []
    if args.command in ("model", "race-model"):
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            parser.error(f"--seeds {args.seeds}: whole numbers separated by commas")
    if args.command == "race":
        print_race([kafka_timelines(args.folder)])
        return 0
    if args.command == "race-model":
        print_race([model_timelines(s, args.overrides, args.before_ms) for s in seeds])
        return 0
    if args.command == "model":
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
