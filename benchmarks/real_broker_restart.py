"""How long a killed Kafka broker takes to serve again: the figure behind the model's
``cluster.broker_startup``.

    python benchmarks/real_broker_restart.py [--restarts 6] [--down 12]

Starts a 3-broker Kafka (the one ``eosim kafka install`` fetched) on loopback, then kills
broker-1 and broker-2 in turn with SIGKILL, leaves each down ``--down`` seconds (past
``broker.session.timeout.ms``, 9 s, so its registration is not refused), restarts it and
times the restart until the broker lists itself among the live (unfenced) brokers
(``RealCluster.wait_ready``, polled every 0.25 s). Not a test: figures go to
docs/calibration.md. Run it on an otherwise idle machine; a loaded one slows the JVM's start.
"""

from __future__ import annotations

import argparse
import statistics
import time

from real_kafka import loopback_cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--down", type=float, default=12.0, help="seconds each broker is down")
    args = parser.parse_args(argv)
    times: list[float] = []
    with loopback_cluster("eosim-restart-") as cluster:
        if cluster is None:
            return 2
        for i in range(args.restarts):
            broker = f"broker-{1 + i % 2}"
            cluster.crash(broker)
            time.sleep(args.down)
            start = time.monotonic()
            cluster.restart(broker)
            cluster.wait_ready([broker], timeout=60)
            times.append(time.monotonic() - start)
            print(f"{broker}: serves {times[-1]:.2f} s after its restart", flush=True)
            time.sleep(3)
    print(
        f"restart to serving: median {statistics.median(times):.2f} s, "
        f"range {min(times):.2f}-{max(times):.2f} s over {len(times)} restarts"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
