"""Where a real run's requests spend their time, from the brokers' request log: a calibration
trace (case 4: the fast and the slow transaction, request by request).

    python benchmarks/real_request_log.py run SCENARIO --out DIR [--seed N] [--set PATH=VALUE]
    python benchmarks/real_request_log.py summary DIR [--split PRODUCE=15]

``run`` runs ``SCENARIO`` once on a local Kafka cluster (the default release) whose nodes log
every request they complete (``kafka.request.logger`` at DEBUG), and keeps the cluster's
folder and the run's history in ``DIR``. The logging is work of its own, so the times are
indicative and such a run is never a calibration run. ``summary`` reads ``DIR``'s broker logs
and prints, per request kind and client (numbers at the end of a client id dropped), how many
completed and the medians of Kafka's own split of each request's time: waiting in the request
queue, on a handler thread (local), waiting for other brokers (remote), waiting in the
response queue, and sending the answer. AddPartitionsToTxn is split by whether the coordinator
accepted every partition; ``--split KIND=MS`` splits a kind by a total time. Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\[[^\]]*\] DEBUG Completed request:(.*) \(kafka\.request\.logger\)$")
TIMES = (
    "totalTimeMs",
    "requestQueueTimeMs",
    "localTimeMs",
    "remoteTimeMs",
    "responseQueueTimeMs",
    "sendTimeMs",
)


def completed(folder: Path) -> list[dict]:
    """Every request the brokers under ``folder`` logged as completed."""
    out = []
    for path in sorted(folder.glob("**/broker-*/server.log")):
        with path.open(errors="replace") as lines:
            for line in lines:
                if "Completed request:" in line:
                    match = LINE.match(line.rstrip("\n"))
                    if match:
                        out.append(json.loads(match.group(1)))
    return out


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


def label(request: dict, splits: dict[str, float]) -> tuple[str, str]:
    """(request kind, with its split; client id without a trailing number)."""
    header = request["requestHeader"]
    kind = header["requestApiKeyName"]
    client = re.sub(r"-\d+$", "", header.get("clientId") or "") or "(none)"
    if kind == "ADD_PARTITIONS_TO_TXN":
        kind += " ok" if _accepted(request) else " refused"
    if kind in splits:
        below = request["totalTimeMs"] < splits[kind]
        kind += f" {'<' if below else '>='}{splits[kind]:g} ms"
    return kind, client


def summary(folder: Path, splits: dict[str, float], least: int = 20) -> list[str]:
    """The table ``summary`` prints."""
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for request in completed(folder):
        rows[label(request, splits)].append(request)
    out = ["request  client  n  " + "  ".join(t.removesuffix("TimeMs") for t in TIMES)]
    for (kind, client), requests in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(requests) < least or kind in ("API_VERSIONS", "METADATA"):
            continue
        medians = [statistics.median(r[t] for r in requests) for t in TIMES]
        out.append(f"{kind}  {client}  {len(requests)}  " + "  ".join(f"{m:.3f}" for m in medians))
    return out


def run(scenario_path: str, out: Path, seed: int | None, overrides: list[str]) -> int:
    from eosim.api import kafka_install, write_history
    from eosim.real.target import KafkaTarget
    from eosim.simulation.scenario import load_scenario

    scenario = load_scenario(scenario_path, overrides)
    out.mkdir(parents=True, exist_ok=True)
    with KafkaTarget(kafka_install(None, None), out, request_log=True) as target:
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
    s = sub.add_parser("summary")
    s.add_argument("folder", type=Path)
    s.add_argument("--split", action="append", default=[], help="KIND=MS")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.scenario, args.out, args.seed, args.overrides)
    splits = {}
    for split in args.split:
        kind, _, ms = split.partition("=")
        try:
            splits[kind] = float(ms)
        except ValueError:
            parser.error(f"--split {split}: KIND=MS, for example PRODUCE=15")
    print("\n".join(summary(args.folder, splits)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
