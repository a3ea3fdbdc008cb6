"""The wire's own time between two network namespaces: the round trip of a 32-byte TCP
ping-pong through a bridge, as the real cluster's nodes are connected (real/netns.py), on an
otherwise idle machine (docs/calibration.md, "The replication path, step by step").

    python benchmarks/netns_rtt.py [--count 3000]

Each side is a Python process blocked in ``recv``, so the round trip holds two wake-ups and
four system calls besides the kernel's path; half of it bounds a hop's time on the wire from
above. Needs root and ``ip``; everything it makes (``eosimrtt-*``) is removed at the end.
Not a test.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time

PREFIX = "eosimrtt"
PORT = 7777


def ip(*args: str, ns: str | None = None) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    subprocess.run(cmd, check=True)


def setup() -> None:
    ip("link", "add", f"{PREFIX}-br", "type", "bridge")
    ip("link", "set", f"{PREFIX}-br", "up")
    for i in (1, 2):
        ns, host, peer = f"{PREFIX}-{i}", f"{PREFIX}-h{i}", f"{PREFIX}-p{i}"
        ip("netns", "add", ns)
        ip("link", "add", host, "type", "veth", "peer", "name", peer)
        ip("link", "set", host, "master", f"{PREFIX}-br")
        ip("link", "set", host, "up")
        ip("link", "set", peer, "netns", ns)
        ip("addr", "add", f"10.98.0.{i}/24", "dev", peer, ns=ns)
        ip("link", "set", peer, "up", ns=ns)


def teardown() -> None:
    for i in (1, 2):
        subprocess.run(["ip", "netns", "del", f"{PREFIX}-{i}"], stderr=subprocess.DEVNULL)
    subprocess.run(["ip", "link", "del", f"{PREFIX}-br"], stderr=subprocess.DEVNULL)


def serve() -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("10.98.0.2", PORT))
    server.listen(1)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(64):
        conn.sendall(data)


def ping(count: int) -> list[float]:
    """``count`` round trips in µs, a millisecond apart (the server's side asleep each time)."""
    for _ in range(50):
        try:
            conn = socket.create_connection(("10.98.0.2", PORT), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit("netns_rtt: the server in the second namespace never listened")
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(count):
        began = time.perf_counter_ns()
        conn.sendall(b"x" * 32)
        conn.recv(64)
        rtts.append((time.perf_counter_ns() - began) / 1e3)
        time.sleep(0.001)
    conn.close()
    return rtts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--role", choices=["serve", "ping"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "serve":
        serve()
        return 0
    if args.role == "ping":
        rtts = sorted(ping(args.count))
        p90 = rtts[int(0.9 * len(rtts))]
        print(
            f"round trip over {len(rtts)}: p50 {statistics.median(rtts):.1f} µs, p90 {p90:.1f} µs"
        )
        return 0
    teardown()
    setup()
    try:
        me = [sys.executable, __file__]
        server = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}-2", *me, "--role", "serve"])
        try:
            ns = f"{PREFIX}-1"
            cmd = ["ip", "netns", "exec", ns, *me, "--role", "ping", "--count", str(args.count)]
            return subprocess.run(cmd).returncode
        finally:
            server.kill()
    finally:
        teardown()


if __name__ == "__main__":
    sys.exit(main())
