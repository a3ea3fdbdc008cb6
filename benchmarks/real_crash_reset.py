"""How long a killed Kafka broker's connections stay open: the figure behind the model's
``cluster.crash_reset``.

    python benchmarks/real_crash_reset.py [--kills 8] [--load 20]

Starts a 3-broker Kafka (the one ``eosim kafka install`` fetched) on loopback, as the
calibration runs do (brokers with a 512 MB heap, -Xms as -Xmx). Before each kill it keeps
every broker busy for ``--load`` seconds (clients connecting and asking for metadata in a
loop, so the JVMs allocate and collect as under a workload), opens a TCP connection to the
victim's listener, sends SIGKILL and times how long the connection stays open: until a read
returns end of file or a reset. It also times the kill until the process is reaped. The
victim is then restarted and waited for. Not a test: figures go to docs/calibration.md ("A
crashed broker's sockets"). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import select
import socket
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

from real_kafka import loopback_cluster


def _metadata_request(correlation: int) -> bytes:
    """A MetadataRequest v4 (the oldest Kafka 4 accepts, KIP-896) for every topic (a null
    topic array, no auto-creation), as bytes on the wire."""
    client = b"eosim-probe"
    header = struct.pack(">hhih", 3, 4, correlation, len(client)) + client
    body = header + struct.pack(">ib", -1, 0)
    return struct.pack(">i", len(body)) + body


def _busy(host: str, port: int, stop: threading.Event) -> None:
    """Ask ``host:port`` for metadata in a loop until ``stop`` (load for its JVM)."""
    n = 0
    while not stop.is_set():
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                for _ in range(200):
                    n += 1
                    s.sendall(_metadata_request(n))
                    size = struct.unpack(">i", _read(s, 4))[0]
                    _read(s, size)
                    if stop.is_set():
                        return
        except OSError:
            time.sleep(0.05)


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--load", type=float, default=20.0, help="seconds of load before a kill")
    args = parser.parse_args(argv)
    open_ms: list[float] = []
    reaped_ms: list[float] = []
    with loopback_cluster("eosim-crash-reset-") as cluster:
        if cluster is None:
            return 2
        for i in range(args.kills):
            broker = f"broker-{i % 3}"
            host, port = cluster.address(broker), cluster.ports[broker]
            stop = threading.Event()
            loaders = [
                threading.Thread(target=_busy, args=(cluster.address(b), cluster.ports[b], stop))
                for b in cluster.broker_names
            ]
            for t in loaders:
                t.start()
            time.sleep(args.load)
            probe = socket.create_connection((host, port), timeout=5)
            node = cluster.nodes[broker]
            assert node.process is not None
            pid = node.process.pid
            rss = _rss_mb(pid)
            start = time.monotonic()
            cluster.crash(broker)  # SIGKILL
            closed = None
            while time.monotonic() - start < 10:
                ready, _, _ = select.select([probe], [], [], 0.001)
                if ready:
                    try:
                        if probe.recv(1) == b"":
                            closed = time.monotonic()
                            break
                    except OSError:
                        closed = time.monotonic()
                        break
            node.process.wait(10)
            reaped = time.monotonic()
            stop.set()
            for t in loaders:
                t.join()
            probe.close()
            if closed is None:
                print(f"{broker}: still open 10 s after SIGKILL", flush=True)
                continue
            open_ms.append((closed - start) * 1000)
            reaped_ms.append((reaped - start) * 1000)
            print(
                f"{broker}: RSS {rss:.0f} MB, connection open {open_ms[-1]:.1f} ms after "
                f"SIGKILL, reaped after {reaped_ms[-1]:.1f} ms",
                flush=True,
            )
            cluster.restart(broker)
            cluster.wait_ready([broker], timeout=60)
            time.sleep(2)
    if not open_ms:
        print("no kill closed its connection", file=sys.stderr)
        return 1
    print(
        f"connection open after SIGKILL: median {statistics.median(open_ms):.1f} ms, "
        f"range {min(open_ms):.1f}-{max(open_ms):.1f} ms over {len(open_ms)} kills "
        f"(reaped: median {statistics.median(reaped_ms):.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
