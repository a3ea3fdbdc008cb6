"""How long Kafka brokers' JIT takes to settle under the warm-up load: the figures behind the
real runner's warm-up (``eosim.real.runner.JIT_SETTLED_MS_PER_S``, ``WARMUP_MAX_S``).

    python benchmarks/real_jit_settle.py [--seconds 240] [--slice 10] [--down 12]
        [--transactional] [--restart broker-0,broker-1,broker-2] [--skip-start]

Starts calibration's cluster (a controller and three brokers of the fetched Kafka 4.1.1, each
in its network namespace), runs the runner's warm-up load (the driver's ``warmup`` mode, an
idempotent acks=all producer and a reader at ``WARMUP_RATE`` records/s, or ``--rate``) in slices of
``--slice`` seconds for ``--seconds``, and prints after each slice every broker's JIT compiler
threads' CPU over it (ms/s, ``/proc/PID/task/*/schedstat`` of the threads named "C1/C2
CompilerThread"). Then it kills the brokers of ``--restart`` (broker-1 unless told) one after
another, each down ``--down`` s, restarts them and follows the same way. ``--transactional``
runs the warm-up load a transactional scenario gets (calibration case 4 kills every broker in
turn and warms with transactions); ``--skip-start`` follows only ``--slice`` s after the start
before the kills. After the restarts the warm-up topic's leaders (and with
``--transactional`` the transaction log's) go back to their preferred replicas as a run's
prepare and warm-up put them, unless ``--no-elect``. Not a test: figures go to
docs/real-cluster.md ("A warm cluster"). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from eosim.analysis.measure import BROKERS, calibration_cluster
from eosim.real import runner
from eosim.real.cluster import RealCluster
from eosim.real.install import find_install, requirements_missing
from eosim.real.runner import TRANSACTION_STATE_TOPIC, ensure_warmup_topic, warmup_slice


def follow(
    cluster: RealCluster,
    inst,
    work: Path,
    seconds: float,
    slice_s: float,
    label: str,
    transactional: bool,
) -> None:
    elapsed = 0.0
    while elapsed < seconds:
        rates = warmup_slice(cluster, inst, work, transactional, slice_s)
        elapsed += slice_s
        cells = [f"{float('nan') if r is None else r:7.1f}" for r in rates.values()]
        print(f"{label:8s} {elapsed:6.0f} s  " + "  ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--slice", type=float, default=10.0)
    parser.add_argument("--down", type=float, default=12.0)
    parser.add_argument("--transactional", action="store_true")
    parser.add_argument("--restart", default="broker-1", help="brokers to kill, comma-separated")
    parser.add_argument("--skip-start", action="store_true")
    parser.add_argument("--no-elect", action="store_true")
    parser.add_argument("--rate", type=float, default=runner.WARMUP_RATE, help="records/s")
    args = parser.parse_args(argv)
    runner.WARMUP_RATE = args.rate  # read by each slice's load
    restart = [b for b in args.restart.split(",") if b]
    unknown = [b for b in restart if b not in BROKERS]
    if unknown:
        known = ", ".join(BROKERS)
        print(f"--restart: no broker {unknown[0]!r} (brokers: {known})", file=sys.stderr)
        return 2
    missing = requirements_missing()
    inst = None if missing else find_install("4.1.1", None, None)
    if inst is None:
        print(missing or "Kafka 4.1.1 is not fetched: run eosim kafka install", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="eosim-jit-"))
    try:
        with calibration_cluster(inst, work / "cluster") as cluster:
            ensure_warmup_topic(cluster)
            print(
                f"JIT compiler CPU, ms/s, per {args.slice:g} s slice of the warm-up load "
                f"({args.rate:g} records/s)"
            )
            print(f"{'':8s} {'load':>6s}    " + "  ".join(f"{b:>7s}" for b in BROKERS))
            first = args.slice if args.skip_start else args.seconds
            follow(cluster, inst, work, first, args.slice, "start", args.transactional)
            for broker in restart:
                cluster.crash(broker)
                time.sleep(args.down)
                cluster.restart(broker)
                cluster.wait_ready([broker], timeout=60)
            if not args.no_elect:
                # As a run's prepare and warm-up do: leaders back on their preferred replicas.
                ensure_warmup_topic(cluster)
                if args.transactional:
                    cluster.place_internal([TRANSACTION_STATE_TOPIC])
            follow(cluster, inst, work, args.seconds, args.slice, "restart", args.transactional)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
