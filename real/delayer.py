"""Delay faults on real processes: a node's packets queued to userspace and let go late.

This kernel has no ``sch_netem`` (and no ``sch_fq`` for BPF timestamps), and nftables' own
``queue`` statement is not built (``CONFIG_NFT_QUEUE``), but the xtables ``NFQUEUE`` target is,
through nftables' xt compat layer: an ``iptables-nft ... -j NFQUEUE`` rule inside a node's
namespace hands each matching packet to a process that holds it and then tells the kernel to
let it go (a *deferred verdict*). That process is this module, run once per delayed node as
a script (``python -I -S .../delayer.py --queue N`` under ``ip netns exec``, so it starts
without importing eosim); it speaks the nfnetlink queue protocol itself over an
``AF_NETLINK`` socket, with the standard library only, and runs at a real-time priority.

What is delayed, as in the model (``simulation/network.py``: a delay window adds its
``extra_latency`` to every message that *touches* it, once, without jitter):

- a fault on ``nodes``: every packet a listed node sends, and every packet it receives from a
  node not listed (so a packet between two listed nodes is delayed once, by its sender);
- a fault on a directed link ``(a, b)``: the packets ``a`` sends to ``b``; a fault that names
  links delays those alone, whatever its ``nodes`` say.

Two faults that both touch a packet add up. Packets of one direction between two addresses
leave in the order they came (a release time never precedes the one before it on the same
pair, like the model's FIFO links), also when a fault starts or ends in between. The host's
address (the bridge, where this process probes the brokers) is never queued.

The main process (:class:`eosim.real.netns.Network`) starts the delayer and waits for its
``ready`` line (the queue is bound), then sends it each fault as a JSON line on its standard
input (``{"add": handle, "extra_ms": ..., "out": ..., "in_except": ...}``,
``{"remove": handle}``) and inserts the two queue rules while the node has a fault. When the
node's last delay fault is healed and the packets held have left, it deletes the rules; the
delayer idles until its input closes, then lets go of what it still holds and exits. Rules
do not use ``--queue-bypass``: with no delayer bound, a queued packet is dropped, so a delayer
that died cannot let a delay fault pass unnoticed as no delay (the main process watches its
delayers and a run in which one died while holding a fault is invalid).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import heapq
import itertools
import json
import os
import selectors
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

# Netfilter hooks (linux/netfilter.h) a packet can be queued at.
HOOK_IN = 1  # NF_INET_LOCAL_IN
HOOK_OUT = 3  # NF_INET_LOCAL_OUT

# --- which packets a fault delays ------------------------------------------------------------


@dataclass(frozen=True)
class DelayRule:
    """One fault's delay at one node: ``extra_ms`` on the packets it sends to any address
    (``out_all``) or to ``out_to``, and on those it receives from any address not in
    ``in_except`` (``in_all``)."""

    extra_ms: float
    out_all: bool = False
    out_to: frozenset[str] = frozenset()
    in_all: bool = False
    in_except: frozenset[str] = frozenset()

    def delays(self, hook: int, src: str, dst: str) -> bool:
        if hook == HOOK_OUT:
            return self.out_all or dst in self.out_to
        return self.in_all and src not in self.in_except

    def message(self, handle: str) -> dict[str, object]:
        """The control line that adds this rule to a delayer."""
        return {
            "add": handle,
            "extra_ms": self.extra_ms,
            "out": "all" if self.out_all else sorted(self.out_to),
            "in_except": sorted(self.in_except) if self.in_all else None,
        }

    @classmethod
    def from_message(cls, msg: Mapping[str, object]) -> DelayRule:
        out = msg.get("out")
        in_except = msg.get("in_except")
        extra = msg.get("extra_ms")
        if not isinstance(extra, int | float) or extra < 0:
            raise ValueError(f"extra_ms is a non-negative number, not {extra!r}")
        return cls(
            float(extra),
            out_all=out == "all",
            out_to=frozenset(out) if isinstance(out, list) else frozenset(),
            in_all=in_except is not None,
            in_except=frozenset(in_except) if isinstance(in_except, list) else frozenset(),
        )


def delay_rules(
    nodes: Sequence[str],
    links: Sequence[tuple[str, str]],
    extra_ms: float,
    address: Callable[[str], str],
) -> dict[str, DelayRule]:
    """The rule each touched node gets for one delay fault on ``nodes`` or, when it names
    ``links``, on those links alone (the model's ``_Window.touches``: links win over nodes)."""
    rules: dict[str, DelayRule] = {}
    if links:
        for src, dst in links:
            old = rules.get(src, DelayRule(extra_ms))
            rules[src] = DelayRule(extra_ms, out_to=old.out_to | {address(dst)})
        return rules
    listed = frozenset(address(n) for n in nodes)
    for node in nodes:
        rules[node] = DelayRule(extra_ms, out_all=True, in_all=True, in_except=listed)
    return rules


class DelayTable:
    """The faults active at one node, by handle; a packet's delay is the sum of those that
    touch it."""

    def __init__(self) -> None:
        self.rules: dict[str, DelayRule] = {}

    def delay_ms(self, hook: int, src: str, dst: str) -> float:
        return sum(r.extra_ms for r in self.rules.values() if r.delays(hook, src, dst))

    def apply(self, msg: Mapping[str, object]) -> None:
        """One control line: ``{"add": handle, ...}`` or ``{"remove": handle}``."""
        if "add" in msg:
            self.rules[str(msg["add"])] = DelayRule.from_message(msg)
        elif "remove" in msg:
            self.rules.pop(str(msg["remove"]), None)
        else:
            raise ValueError(f"a control line adds or removes a fault, not {sorted(msg)}")


class Releases:
    """Held packets and when each may leave: ``now + delay``, but never before the packet
    held before it on the same key (one direction between two addresses)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int]] = []
        self._last: dict[object, float] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, now: float, key: object, delay_s: float, packet: int) -> float:
        """Hold ``packet`` and return its release time."""
        at = max(now + delay_s, self._last.get(key, now))
        self._last[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), packet))
        return at

    def due(self, now: float) -> list[int]:
        """The packets whose time has come, in release order (ties: in arrival order)."""
        out: list[int] = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        if not self._heap:
            self._last.clear()
        return out

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None


# --- nfnetlink queue --------------------------------------------------------------------------

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_PAYLOAD = 10
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQA_CFG_F_GSO = 4
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NF_ACCEPT = 1
IPV4_HEADER = 20
QUEUE_MAXLEN = 65536
RCVBUF = 16 << 20


class QueueError(OSError):
    """The kernel refused a queue operation; the message is one line."""


def _attr(kind: int, data: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(data), kind) + data
    return raw + b"\0" * (-len(raw) % 4)


def _message(msg: int, flags: int, seq: int, queue: int, attrs: bytes) -> bytes:
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack("!H", queue) + attrs
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg
    return struct.pack("=IHHII", 16 + len(body), kind, flags, seq, 0) + body


def verdict_message(queue: int, packet: int, seq: int = 0) -> bytes:
    """An accept verdict for ``packet`` (the packet goes on unchanged)."""
    return _message(
        NFQNL_MSG_VERDICT,
        NLM_F_REQUEST,
        seq,
        queue,
        _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet)),
    )


def parse_packets(data: bytes) -> Iterator[tuple[int, int, str, str]]:
    """``(packet id, hook, source, destination)`` of each queued IPv4 packet in ``data``."""
    pos = 0
    while pos + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, pos)
        if length < 16:
            return
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            packet = hook = -1
            payload = b""
            at = pos + 20  # nlmsghdr, nfgenmsg
            while at + 4 <= pos + length:
                alen, akind = struct.unpack_from("=HH", data, at)
                if alen < 4:
                    break
                akind &= 0x3FFF
                value = data[at + 4 : at + alen]
                if akind == NFQA_PACKET_HDR:
                    packet, _proto, hook = struct.unpack_from("!IHB", value)
                elif akind == NFQA_PAYLOAD:
                    payload = value
                at += (alen + 3) & ~3
            if packet >= 0:
                src = dst = ""
                if len(payload) >= IPV4_HEADER and payload[0] >> 4 == 4:
                    src = socket.inet_ntoa(payload[12:16])
                    dst = socket.inet_ntoa(payload[16:20])
                yield packet, hook, src, dst
        pos += (length + 3) & ~3


class PacketQueue:
    """Queue number ``queue`` of this network namespace, bound to this process: a packet's IP
    header is copied up, the packet itself waits in the kernel for its verdict."""

    def __init__(self, queue: int) -> None:
        self.queue = queue
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            with contextlib.suppress(OSError):  # SO_RCVBUFFORCE: root may pass rmem_max
                self.sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)
            self.sock.bind((0, 0))
            self._seq = 1
            self._request(
                _attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET))
            )
            self._request(
                _attr(NFQA_CFG_PARAMS, struct.pack("!IB", IPV4_HEADER, NFQNL_COPY_PACKET))
                + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
                + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO))
                + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO))
            )
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise

    def _request(self, attrs: bytes) -> None:
        seq = self._seq
        self._seq += 1
        self.sock.send(
            _message(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, self.queue, attrs)
        )
        while True:
            data = self.sock.recv(65536)
            pos = 0
            while pos + 16 <= len(data):
                length, kind, _f, got, _p = struct.unpack_from("=IHHII", data, pos)
                if kind == NLMSG_ERROR and got == seq:
                    (code,) = struct.unpack_from("=i", data, pos + 16)
                    if code:
                        raise QueueError(-code, f"queue {self.queue}: {os.strerror(-code)}")
                    return
                pos += (length + 3) & ~3

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> list[tuple[int, int, str, str]]:
        """Every packet queued since the last call (none: an empty list)."""
        out: list[tuple[int, int, str, str]] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the kernel dropped some: TCP resends them
                    continue
                raise
            out.extend(parse_packets(data))

    def accept(self, packets: Iterable[int]) -> None:
        """Let ``packets`` go, in this order (one datagram for all of them)."""
        batch = b"".join(verdict_message(self.queue, p) for p in packets)
        if batch:
            self.sock.send(batch)

    def close(self) -> None:
        self.sock.close()


# --- the process ------------------------------------------------------------------------------


def serve(queue: PacketQueue, control: int, table: DelayTable) -> None:
    """Hold and release ``queue``'s packets by ``table`` until ``control`` (a file
    descriptor of JSON lines) closes. Then no fault holds a packet any more (the main process
    may have died with its faults still in), and once every packet held has left, it returns
    (queue rules still in then drop the node's packets until its namespace is torn down)."""
    sel = selectors.DefaultSelector()
    sel.register(queue.fileno(), selectors.EVENT_READ, "packets")
    sel.register(control, selectors.EVENT_READ, "control")
    held = Releases()
    buffered = b""
    closed = False
    while True:
        at = held.next_at()
        events = sel.select(None if at is None else max(0.0, at - time.monotonic()))
        now = time.monotonic()
        for key, _ in events:
            if key.data == "packets":
                for packet, hook, src, dst in queue.receive():
                    held.hold(now, (src, dst), table.delay_ms(hook, src, dst) / 1000.0, packet)
                continue
            chunk = os.read(control, 65536)
            if not chunk:
                sel.unregister(control)
                table.rules.clear()
                closed = True
                continue
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                if line.strip():
                    table.apply(json.loads(line))
        queue.accept(held.due(time.monotonic()))
        if closed and not held:
            return


def _first_in_line() -> None:
    """Run before the JVMs: the delayer stands in for the kernel's qdisc timer, and on a
    loaded machine an ordinary process waits milliseconds to be scheduled, which would add
    that to every packet it holds. A real-time priority (SCHED_FIFO, which root may take;
    the process sleeps in ``select`` between packets), else the highest nice."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        with contextlib.suppress(OSError):
            os.nice(-20)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eosim.real.delayer", description=__doc__)
    parser.add_argument("--queue", type=int, required=True, help="the NFQUEUE number to bind")
    parser.add_argument("--probe", action="store_true", help="bind, say ready, and exit")
    args = parser.parse_args(argv)
    _first_in_line()
    try:
        queue = PacketQueue(args.queue)
    except OSError as exc:
        print(f"cannot bind NFQUEUE {args.queue}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print("ready", flush=True)
    try:
        if not args.probe:
            serve(queue, sys.stdin.fileno(), DelayTable())
    finally:
        queue.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
