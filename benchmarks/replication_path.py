"""Where an acknowledged record spends its time before it is read: calibration case 5's
replication path, step by step, on the model and on a real Kafka (docs/calibration.md,
"The replication path, step by step").

    python benchmarks/replication_path.py model [--seeds 1] [--resources PRESET] [--set PATH=VALUE]
    python benchmarks/replication_path.py kafka TRACE_DIR
    python benchmarks/replication_path.py run TRACE_DIR [--set PATH=VALUE]

With acks=1 a record is acknowledged once its leader has appended it, and read once the high
watermark has passed it, which takes both followers' next fetches. Each record acknowledged and
read gets six moments, on each side from the same kind of evidence:

- ``answer``: its produce answer leaves the leader (the model: the ProduceResponse's send; Kafka:
  the request log's completion less the response's queue and send times);
- ``ack``: the producer has it acknowledged (the history's ``send`` completion);
- ``replica``: the answer to a follower's fetch carrying it leaves the leader (as ``answer``;
  the follower whose next fetch came last);
- ``hw``: the second follower's fetch past it reaches the leader, read by its network thread
  (the model: the end of the ReplicaFetchRequest's network read, ``BrokerThreads.read_ends``,
  its delivery without the resource model; Kafka: the follower FETCH's completion less its
  total time, which Kafka counts from the end of that read), from which the leader's high
  watermark passes it;
- ``fetch``: the consumer's fetch answer carrying it leaves the leader (as ``answer``);
- ``read``: the reader's ``poll`` returns it (the history).

It prints, for the records past ``--from-ms`` (1,000: the run's first second left out as in
case 5's warm rows), the median and the 90th percentile of each step and of ack to read, which
is their sum less answer to ack; with ``--tail-ms MS``, for the records whose ack to read took
``MS`` or more alone (the tail: which step holds it). ``model`` runs case 5 with acks=1
(idempotence off, as the calibration's variant) and the ``--resources`` preset with the message
trace; ``run`` runs it once on a local Kafka with the request log at DEBUG and microsecond
stamps (``real_request_log.py run``) into ``TRACE_DIR``; ``kafka`` reads such a folder: its
brokers' lines carry the monotonic clock (real/cluster.py, ``_TRACE_PATTERN``), which the
history's times are put on with the run's ``epoch_monotonic_ns``. The logging is work of its
own, so the real figures are indicative; the history is the same on both sides.
Not a test.
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

CASE5 = Path(__file__).resolve().parent.parent / "scenarios/calibration/steady-timing.yaml"
ACKS1 = ["producers.0.config.acks=1", "producers.0.config.enable.idempotence=false"]
STEPS = (
    ("answer to ack", "answer", "ack"),
    ("answer to replica", "answer", "replica"),
    ("replica to hw", "replica", "hw"),
    ("hw to fetch answer", "hw", "fetch"),
    ("fetch answer to read", "fetch", "read"),
    ("ack to read", "ack", "read"),
)

Key = tuple[str, int]  # (topic, partition)


def history_moments(lines: Iterable[str]) -> dict[str, dict[str, object]]:
    """Each acknowledged value's partition, offset, ``ack`` and first ``read`` (ms), from a
    history's lines."""
    out: dict[str, dict[str, object]] = {}
    for line in lines:
        d = json.loads(line)
        if d.get("kind") != "op" or d.get("type") != "ok":
            continue
        if d["f"] == "send":
            v = d["value"]
            out.setdefault(v["value"], {}).update(
                key=(v["topic"], v["partition"]), offset=v["offset"], ack=d["time"]
            )
        elif d["f"] == "poll":
            for rec in (d.get("value") or {}).get("records", []):
                out.setdefault(rec["value"], {}).setdefault("read", d["time"])
    return {v: m for v, m in out.items() if "ack" in m and "read" in m}


class Leaders:
    """The leaders' evidence on one side, in ms on that side's clock: produce answers by
    partition and base offset, and each follower's and consumer's fetches by partition and
    connection, as (arrival, fetch offset, answer ready); the answer to a fetch carried the
    offsets from its fetch offset up to the next fetch's."""

    def __init__(self) -> None:
        self.answers: dict[Key, list[tuple[int, float]]] = defaultdict(list)
        self.replica: dict[tuple[Key, str], list[tuple[float, int, float]]] = defaultdict(list)
        self.consumer: dict[tuple[Key, str], list[tuple[float, int, float]]] = defaultdict(list)
        # Built at the first ``moments``, once every piece of evidence is in.
        self.index: dict[tuple[Key, str], tuple[list, list[int]]] | None = None

    def answer(self, key: Key, base_offset: int, at: float) -> None:
        self.answers[key].append((base_offset, at))

    @staticmethod
    def _carried(
        fetches: list[tuple[float, int, float]], offsets: list[int], offset: int
    ) -> tuple[float, float] | tuple[()] | None:
        """(when the answer carrying ``offset`` was ready, when the next fetch arrived); None
        when no fetch has passed it yet, () when this connection began past it (a replica
        that fetched from this broker only after a leader change)."""
        j = bisect.bisect_right(offsets, offset)
        if j == len(fetches):
            return None
        return (fetches[j - 1][2], fetches[j][0]) if j > 0 else ()

    def _sorted(self) -> dict[tuple[Key, str], tuple[list, list[int]]]:
        """The produce answers by base offset, and each connection's fetches in arrival order
        with their offsets for bisecting (a partition's fetch offsets only grow while its
        leader does not change, as in case 5)."""
        for answers in self.answers.values():
            answers.sort()
        index = {}
        for fetches in (self.replica, self.consumer):
            for where, f in fetches.items():
                f.sort()
                index[where] = (f, [o for _, o, _ in f])
        return index

    def moments(self, key: Key, offset: int) -> dict[str, float] | None:
        if self.index is None:
            self.index = self._sorted()
        answers = self.answers.get(key, [])
        i = bisect.bisect_right(answers, (offset, float("inf"))) - 1
        replicas = [self._carried(*self.index[w], offset) for w in self.replica if w[0] == key]
        reads = [self._carried(*self.index[w], offset) for w in self.consumer if w[0] == key]
        reads = [r for r in reads if r]
        if i < 0 or None in replicas or not reads:
            return None
        replicas = [r for r in replicas if r]
        if not replicas:
            return None
        answered, passed = max(replicas, key=lambda r: r[1])  # type: ignore[arg-type,return-value]
        return {
            "answer": answers[i][1],
            "replica": answered,
            "hw": passed,
            "fetch": min(ready for ready, _ in reads),
        }


def table(records: list[dict[str, float]], from_ms: float, tail_ms: float = 0.0) -> list[str]:
    """Median and p90 of each step over the records acknowledged past ``from_ms`` (with
    ``tail_ms``, those alone whose ack to read took at least that long)."""
    kept = [r for r in records if r["since_epoch"] >= from_ms and r["read"] - r["ack"] >= tail_ms]
    tail = f" whose ack to read took {tail_ms:g} ms or more" if tail_ms else ""
    out = [f"{len(kept)} records acknowledged past {from_ms:g} ms, read, and traced{tail}"]
    out.append(f"{'step':<22} {'p50 ms':>8} {'p90 ms':>8}")
    for name, a, b in STEPS:
        xs = sorted(r[b] - r[a] for r in kept)
        if not xs:
            continue
        p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
        out.append(f"{name:<22} {statistics.median(xs):>8.3f} {p90:>8.3f}")
    return out


def join(history: dict[str, dict[str, object]], leaders: Leaders, shift: float) -> list[dict]:
    """Each history record with its leader-side moments (history time + ``shift`` = the
    leaders' clock)."""
    out = []
    for m in history.values():
        found = leaders.moments(m["key"], m["offset"])  # type: ignore[arg-type]
        if found is None:
            continue
        found.update(ack=m["ack"] + shift, read=m["read"] + shift)  # type: ignore[operator]
        found["since_epoch"] = m["ack"]  # type: ignore[assignment]
        out.append(found)
    return out


def _traced_run(scenario, seed: int):  # type: ignore[no-untyped-def]
    """:func:`eosim.simulation.runner.run_scenario`'s phases with the message trace, and each
    broker's requests' network read ends recorded (``BrokerThreads.read_ends``): the run's
    result and those ends by message id."""
    import time

    from eosim.simulation.runner import Run, finish

    started = time.perf_counter()
    run = Run(scenario, seed, True)
    read_ends: dict[int, float] = {}
    for broker in run.cluster.brokers.values():
        if broker.threads is not None:
            broker.threads.read_ends = read_ends
    return finish(run, started), read_ends


def model(seeds: list[int], preset: str, overrides: list[str]) -> list[dict]:
    from eosim.simulation import load_scenario

    sets = [*ACKS1, f"cluster.resources.preset={preset}", *overrides]
    scenario = load_scenario(CASE5, sets)
    out = []
    for seed in seeds:
        result, read_ends = _traced_run(scenario, seed)
        leaders = Leaders()
        produced: dict[tuple[str, str, int], list[Key]] = {}
        fetching: dict[tuple[str, str, int], tuple[float, tuple]] = {}
        for e in result.trace or []:
            kind = type(e.payload).__name__
            if e.event == "deliver" and kind in ("ReplicaFetchRequest", "FetchRequest"):
                # Its arrival as Kafka stamps it: once the leader's network thread has read
                # it (its delivery without the resource model).
                arrived = read_ends.get(e.msg_id, e.time)
                fetching[(e.dst, e.src, e.payload.correlation_id)] = (arrived, e.payload)
            elif e.event == "send" and kind in ("ReplicaFetchResponse", "FetchResponse"):
                arrived, request = fetching.pop((e.src, e.dst, e.payload.correlation_id))
                into = leaders.replica if kind == "ReplicaFetchResponse" else leaders.consumer
                for key, part in request.partitions:
                    offset = part.fetch_offset if kind == "ReplicaFetchResponse" else part
                    into[(key, e.dst)].append((arrived, offset, e.time))
            elif kind == "ProduceRequest" and e.event == "deliver":
                produced[(e.dst, e.src, e.payload.correlation_id)] = [
                    tp for tp, _ in e.payload.partitions
                ]
            elif kind == "ProduceResponse" and e.event == "send":
                keys = produced.pop((e.src, e.dst, e.payload.correlation_id), [])
                for key, r in zip(keys, e.payload.results, strict=False):
                    if r.base_offset >= 0:
                        leaders.answer(key, r.base_offset, e.time)
        out += join(history_moments(result.history.lines()), leaders, 0.0)
    return out


def kafka(folder: Path) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_request_log as log

    requests = log.completed(folder)
    for request in requests:
        if request["_done_ns"] is None:
            raise ValueError(
                f"{folder}: a request-log line without the monotonic clock (a trace made "
                "before 2026-12-02?); the wall clock cannot be set beside a history"
            )
        request["_done_ms"] = request["_done_ns"] / 1e6
    names = {  # topic id -> name, from metadata answers
        t["topicId"]: t["name"]
        for r in requests
        if r["requestHeader"]["requestApiKeyName"] == "METADATA"
        for t in r["response"].get("topics", [])
        if t.get("name") and t.get("topicId")
    }

    def topic(t: dict) -> str:
        return t.get("name") or t.get("topic") or names.get(t.get("topicId", ""), "?")

    leaders = Leaders()
    requests.sort(key=lambda r: r["_done_ms"] - r["totalTimeMs"])
    positions: dict[str, dict[Key, int]] = defaultdict(dict)  # a connection's fetch offsets
    for r in requests:
        header = r["requestHeader"]
        kind, client = header["requestApiKeyName"], header.get("clientId") or ""
        done = r["_done_ms"]
        ready = done - r["sendTimeMs"] - r["responseQueueTimeMs"]
        arrived = done - r["totalTimeMs"]
        if kind == "PRODUCE":  # any producer's: the warm-up's write topics of their own
            for t in r["response"].get("responses", []):
                for p in t.get("partitionResponses", []):
                    if p.get("errorCode", 0) == 0 and p.get("baseOffset", -1) >= 0:
                        leaders.answer((topic(t), p["index"]), p["baseOffset"], ready)
        elif kind == "FETCH" and ("-fetcher-" in client or client.startswith("consumer")):
            # A fetch session's request names only the partitions whose offset changed.
            conn = r.get("connection", "")
            known = positions[conn]
            for t in r["request"].get("topics", []):
                for p in t.get("partitions", []):
                    known[(topic(t), p["partition"])] = p["fetchOffset"]
            into = leaders.replica if "-fetcher-" in client else leaders.consumer
            for key, offset in known.items():
                into[(key, conn)].append((arrived, offset, ready))
    history = folder / "history.jsonl"
    specs = sorted(folder.glob("**/*.spec.json"))
    if not specs:
        raise ValueError(f"{folder}: no run spec with the run's epoch (not a trace folder?)")
    epoch = json.loads(specs[0].read_text())["epoch_monotonic_ns"] / 1e6
    with history.open() as lines:
        moments = history_moments(lines)
    return join(moments, leaders, epoch)


def run(folder: Path, overrides: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import real_request_log as log

    return log.run(str(CASE5), folder, None, [*ACKS1, *overrides])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("--seeds", default="1")
    m.add_argument("--resources", default="calibration-host")
    m.add_argument("--set", dest="overrides", action="append", default=[])
    k = sub.add_parser("kafka")
    k.add_argument("folder", type=Path)
    r = sub.add_parser("run")
    r.add_argument("folder", type=Path)
    r.add_argument("--set", dest="overrides", action="append", default=[])
    for p in (m, k):
        p.add_argument("--from-ms", type=float, default=1000.0)
        p.add_argument("--tail-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return run(args.folder, args.overrides)
        if args.command == "model":
            try:
                seeds = [int(s) for s in args.seeds.split(",")]
            except ValueError:
                parser.error(f"--seeds {args.seeds}: numbers separated by commas, e.g. 1,2,3")
            records = model(seeds, args.resources, args.overrides)
        else:
            records = kafka(args.folder)
    except (ValueError, OSError) as exc:  # a bad --set or preset (ScenarioError); a bad folder
        print(f"replication_path: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(records, args.from_ms, args.tail_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
