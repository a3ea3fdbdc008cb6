"""Where a real run's requests spend their time, from the brokers' request log: a calibration
trace (case 4: the fast and the slow transaction, request by request).

    python benchmarks/real_request_log.py run SCENARIO --out DIR [--seed N] [--set PATH=VALUE]
                                              [--log LOGGER=LEVEL]
    python benchmarks/real_request_log.py summary DIR [--split PRODUCE=15] [--ages 10,20,40]

``run`` runs ``SCENARIO`` once on a local Kafka cluster (the default release) whose nodes log
every request they complete (``kafka.request.logger`` at DEBUG), and keeps the cluster's
folder and the run's history in ``DIR``; ``--log`` sets more of Kafka's loggers (for example
``kafka.coordinator.transaction=TRACE``). The logging is work of its own, so the times are
indicative and such a run is never a calibration run. ``summary`` reads ``DIR``'s broker logs
and prints, per request kind and client (numbers at the end of a client id dropped), how many
completed and the medians of Kafka's own split of each request's time: waiting in the request
queue, on a handler thread (local), waiting for other brokers (remote), waiting in the
response queue, and sending the answer. AddPartitionsToTxn is split by whether the coordinator
accepted every partition; ``--split KIND=MS`` splits a kind by a total time; ``--ages S,...``
splits every row by how long the broker that logged the request had been running: its first
process (``first``) or a restarted one, by age in seconds since its start (``restart 0-10 s``,
..., ``restart 40+ s``), to compare a restarted broker's per-request cost with a warm one's.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

# A completed request: its wall-clock stamp, its JSON, and (a trace since 2026-12-02) the
# monotonic clock in ns, the histories' clock (real/cluster.py, _TRACE_PATTERN).
LINE = re.compile(
    r"^\[([^\]]*)\] DEBUG Completed request:(.*) \(kafka\.request\.logger\)(?: @(\d+))?$"
)
# A broker process's start in its server.log (every process of a node appends to the same file).
START = re.compile(
    r"^\[([^\]]*)\] INFO \[BrokerServer id=\d+\] Transition from SHUTDOWN to STARTING"
)
# A trace's line ends with the monotonic clock (real/cluster.py, _TRACE_PATTERN).
MONOTONIC = re.compile(r" @(\d+)$")
STAMP = "%Y-%m-%d %H:%M:%S,%f"
TIMES = (
    "totalTimeMs",
    "requestQueueTimeMs",
    "localTimeMs",
    "remoteTimeMs",
    "responseQueueTimeMs",
    "sendTimeMs",
)


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, STAMP).timestamp()


def completed(folder: Path) -> list[dict]:
    """Every request the brokers under ``folder`` logged as completed, each with ``_starts``
    (its broker's process starts so far, 1 for the first process), ``_age_s`` (seconds
    from that process's start to the request's completion) and ``_done_ns`` (its completion
    on the monotonic clock; None in a trace made before 2026-12-02). The age is taken on the
    monotonic clock when both lines carry it (a trace's do), else on the log's wall-clock
    stamps, which a step of the wall clock shifts."""
    out = []
    for path in sorted(folder.glob("**/broker-*/server.log")):
        starts, started, started_ns = 0, 0.0, None
        with path.open(errors="replace") as lines:
            for line in lines:
                if "Completed request:" in line:
                    match = LINE.match(line.rstrip("\n"))
                    if match:
                        request = json.loads(match.group(2))
                        request["_starts"] = starts
                        mono = match.group(3)
                        done_ns = None if mono is None else int(mono)
                        request["_done_ns"] = done_ns
                        if done_ns is not None and started_ns is not None:
                            request["_age_s"] = (done_ns - started_ns) / 1e9
                        else:
                            request["_age_s"] = _seconds(match.group(1)) - started
                        out.append(request)
                elif "Transition from SHUTDOWN to STARTING" in line:
                    start = START.match(line)
                    if start:
                        starts, started = starts + 1, _seconds(start.group(1))
                        mono_start = MONOTONIC.search(line.rstrip("\n"))
                        started_ns = None if mono_start is None else int(mono_start.group(1))
    return out


def age_label(request: dict, ages: list[float]) -> str:
    """``first`` for a broker's first process, else the restarted process's age bucket."""
    if request["_starts"] <= 1:
        return "first"
    age = request["_age_s"]
    low = 0.0
    for bound in ages:
        if age < bound:
            return f"restart {low:g}-{bound:g} s"
        low = bound
    return f"restart {low:g}+ s"


def _accepted(request: dict) -> bool:
    """Whether AddPartitionsToTxn accepted every partition: a broker's batched request
    (version 4 on, ``resultsByTransaction``) or a client's (``resultsByTopicV3AndBelow``)."""
    response = request["response"]
    if response.get("errorCode", 0) != 0:
        return False
    topics = [
        topic
        for t in response.get("resultsByTransaction", [])
        for topic in t.get("topicResults", [])
    ] + list(response.get("resultsByTopicV3AndBelow", []))
    return all(
        p.get("partitionErrorCode", 0) == 0
        for topic in topics
        for p in topic.get("resultsByPartition", [])
    )


def label(
    request: dict, splits: dict[str, float], ages: list[float] | None = None
) -> tuple[str, str]:
    """(request kind, with its split and age; client id without a trailing number)."""
    header = request["requestHeader"]
    kind = header["requestApiKeyName"]
    client = re.sub(r"-\d+$", "", header.get("clientId") or "") or "(none)"
    if kind == "ADD_PARTITIONS_TO_TXN":
        kind += " ok" if _accepted(request) else " refused"
    if kind in splits:
        below = request["totalTimeMs"] < splits[kind]
        kind += f" {'<' if below else '>='}{splits[kind]:g} ms"
    if ages is not None:
        kind += f" [{age_label(request, ages)}]"
    return kind, client


def summary(
    folder: Path, splits: dict[str, float], least: int = 20, ages: list[float] | None = None
) -> list[str]:
    """The table ``summary`` prints."""
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for request in completed(folder):
        rows[label(request, splits, ages)].append(request)
    out = ["request  client  n  " + "  ".join(t.removesuffix("TimeMs") for t in TIMES)]
    for (kind, client), requests in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(requests) < least or kind in ("API_VERSIONS", "METADATA"):
            continue
        medians = [statistics.median(r[t] for r in requests) for t in TIMES]
        out.append(f"{kind}  {client}  {len(requests)}  " + "  ".join(f"{m:.3f}" for m in medians))
    return out


def run(
    scenario_path: str,
    out: Path,
    seed: int | None,
    overrides: list[str],
    loggers: dict[str, str] | None = None,
) -> int:
    from eosim.api import kafka_install, write_history
    from eosim.real.target import KafkaTarget
    from eosim.simulation.scenario import load_scenario

    scenario = load_scenario(scenario_path, overrides)
    out.mkdir(parents=True, exist_ok=True)
    install = kafka_install(None, None)
    with KafkaTarget(install, out, request_log=True, loggers=loggers) as target:
        result = target.run(scenario, scenario.seed if seed is None else seed)
    write_history(result, out / "history.jsonl")
    print(f"kept in {out}: {result.counts}, invalid: {result.invalid or 'no'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("scenario")
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--set", dest="overrides", action="append", default=[])
    r.add_argument("--log", action="append", default=[], help="LOGGER=LEVEL")
    s = sub.add_parser("summary")
    s.add_argument("folder", type=Path)
    s.add_argument("--split", action="append", default=[], help="KIND=MS")
    s.add_argument("--ages", default=None, help="S,S,...: split by a restarted broker's age")
    s.add_argument("--least", type=int, default=20, help="rows with fewer requests left out")
    args = parser.parse_args(argv)
    if args.command == "run":
        from eosim.real.cluster import check_loggers

        try:
            loggers = check_loggers(dict(log.partition("=")[::2] for log in args.log))
        except ValueError as exc:
            parser.error(f"--log: {exc}")
        return run(args.scenario, args.out, args.seed, args.overrides, loggers)
    splits = {}
    for split in args.split:
        kind, _, ms = split.partition("=")
        try:
            splits[kind] = float(ms)
        except ValueError:
            parser.error(f"--split {split}: KIND=MS, for example PRODUCE=15")
    ages = None
    if args.ages is not None:
        try:
            ages = sorted(float(a) for a in args.ages.split(","))
        except ValueError:
            parser.error(f"--ages {args.ages}: seconds separated by commas, for example 10,20,40")
    print("\n".join(summary(args.folder, splits, args.least, ages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
