"""Delay faults on real processes (eosim.real.delayer): which packets a fault holds (checked
against the model's own rule), the release order, the netlink messages and the delayer's loop
on plain sockets without root."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time
from collections import deque

import pytest

from eosim.real.delayer import (
    HOOK_IN,
    HOOK_OUT,
    NF_ACCEPT,
    NFNL_SUBSYS_QUEUE,
    NFQA_PACKET_HDR,
    NFQA_PAYLOAD,
    NFQNL_MSG_PACKET,
    NFQNL_MSG_VERDICT,
    DelayRule,
    DelayTable,
    Releases,
    delay_rules,
    parse_packets,
    serve,
    verdict_message,
)
from eosim.simulation.network import _Window

NODES = ["broker-0", "broker-1", "broker-2", "controller"]


def _address(node: str) -> str:
    return f"10.0.0.{NODES.index(node) + 1}"


# --- which packets, without root --------------------------------------------------------------


def test_a_delayed_node_holds_what_it_sends_and_what_unlisted_nodes_send_it_a_link_one_way() -> (
    None
):
    rules = delay_rules(["broker-0", "broker-1"], [("controller", "broker-2")], 50.0, _address)
    assert rules["controller"] == DelayRule(50.0, out_to=frozenset({"10.0.0.3"}))
    assert "broker-2" not in rules  # a link is held by its source only
    assert "broker-0" not in rules  # links given: as in the model, the nodes are not delayed
    nodes = delay_rules(["broker-0", "broker-1"], [], 50.0, _address)
    assert nodes["broker-0"] == DelayRule(
        50.0, out_all=True, in_all=True, in_except=frozenset({"10.0.0.1", "10.0.0.2"})
    )


def _real_delay(rules: dict[str, DelayRule], src: str, dst: str) -> float:
    """What a packet from ``src`` to ``dst`` is held in all: at its sender's output and at
    its receiver's input, each by the rule that node has."""
    s, d = _address(src), _address(dst)
    out = rules[src].extra_ms if src in rules and rules[src].delays(HOOK_OUT, s, d) else 0.0
    inp = rules[dst].extra_ms if dst in rules and rules[dst].delays(HOOK_IN, s, d) else 0.0
    return out + inp


def test_every_packet_is_held_once_exactly_where_the_model_delays_its_message() -> None:
    links = [(a, b) for a in NODES for b in NODES if a != b]
    for size in range(len(NODES) + 1):
        for nodes in itertools.combinations(NODES, size):
            for chosen in ([], [links[0]], [links[1], links[5]]):
                window = _Window(frozenset(nodes), extra_ms=30.0, links=frozenset(chosen))
                # The real side's "neither nodes nor links": every node (Network.delay).
                targets = list(nodes) if nodes or chosen else NODES
                rules = delay_rules(targets, chosen if nodes or chosen else [], 30.0, _address)
                for src, dst in links:
                    want = 30.0 if window.touches(src, dst) else 0.0
                    assert _real_delay(rules, src, dst) == want, (nodes, chosen, src, dst)


def test_faults_that_touch_one_packet_add_up_and_a_removed_one_stops() -> None:
    table = DelayTable()
    node = DelayRule(100.0, out_all=True, in_all=True, in_except=frozenset({"10.0.0.1"}))
    table.apply(node.message("f1"))
    table.apply(DelayRule(20.0, out_to=frozenset({"10.0.0.2"})).message("f2"))
    assert table.delay_ms(HOOK_OUT, "10.0.0.1", "10.0.0.2") == 120.0
    assert table.delay_ms(HOOK_OUT, "10.0.0.1", "10.0.0.3") == 100.0
    assert table.delay_ms(HOOK_IN, "10.0.0.3", "10.0.0.1") == 100.0
    assert table.delay_ms(HOOK_IN, "10.0.0.1", "10.0.0.1") == 0.0  # listed: its sender held it
    table.apply({"remove": "f1"})
    assert table.delay_ms(HOOK_OUT, "10.0.0.1", "10.0.0.2") == 20.0
    table.apply({"remove": "f1"})  # twice: nothing
    with pytest.raises(ValueError, match="adds or removes"):
        table.apply({"pause": "f2"})
    with pytest.raises(ValueError, match="extra_ms"):
        table.apply({"add": "f3", "extra_ms": -1, "out": "all", "in_except": None})


def test_a_pairs_packets_leave_in_order_when_the_delay_changes_under_them() -> None:
    held = Releases()
    assert held.hold(0.0, "a>b", 0.100, 1) == 0.100
    # The fault healed: the next packet has no delay of its own but waits behind the first.
    assert held.hold(0.050, "a>b", 0.0, 2) == 0.100
    assert held.hold(0.050, "c>b", 0.0, 3) == 0.050  # another pair is not held up
    assert held.due(0.060) == [3]
    assert held.due(0.100) == [1, 2]
    assert held.next_at() is None and len(held) == 0
    assert held.hold(0.2, "a>b", 0.0, 4) == 0.2  # nothing held: no wait


# --- netlink messages and the loop, on plain sockets ------------------------------------------


def _packet_message(packet: int, hook: int, src: str, dst: str) -> bytes:
    def attr(kind: int, data: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(data), kind) + data
        return raw + b"\0" * (-len(raw) % 4)

    ip = bytes([0x45]) + bytes(11) + socket.inet_aton(src) + socket.inet_aton(dst)
    body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(7))
    body += attr(NFQA_PACKET_HDR, struct.pack("!IHB", packet, 0x0800, hook))
    body += attr(NFQA_PAYLOAD, ip)
    kind = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
    return struct.pack("=IHHII", 16 + len(body), kind, 0, 0, 0) + body


def test_queued_packets_are_read_and_accepted_in_the_kernels_format() -> None:
    data = _packet_message(41, HOOK_OUT, "10.0.0.1", "10.0.0.2") + _packet_message(
        42, HOOK_IN, "10.0.0.3", "10.0.0.1"
    )
    assert list(parse_packets(data)) == [
        (41, HOOK_OUT, "10.0.0.1", "10.0.0.2"),
        (42, HOOK_IN, "10.0.0.3", "10.0.0.1"),
    ]
    msg = verdict_message(7, 41)
    length, kind, flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) == 16 + 4 + 12
    assert kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT and flags == 1
    assert struct.unpack_from("!H", msg, 18) == (7,)  # the queue, big-endian
    assert struct.unpack_from("!II", msg, 24) == (NF_ACCEPT, 41)


class _FakeQueue:
    """A PacketQueue stand-in: packets pushed by the test, verdicts recorded with their time."""

    def __init__(self) -> None:
        self.ready_r, self.ready_w = socket.socketpair()
        self.ready_r.setblocking(False)
        self.packets: deque[tuple[int, int, str, str]] = deque()
        self.accepted: list[tuple[int, float]] = []
        self.lock = threading.Lock()

    def push(self, packet: int, hook: int, src: str, dst: str) -> float:
        with self.lock:
            self.packets.append((packet, hook, src, dst))
        self.ready_w.send(b"x")
        return time.monotonic()

    def fileno(self) -> int:
        return self.ready_r.fileno()

    def receive(self) -> list[tuple[int, int, str, str]]:
        try:
            while self.ready_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        with self.lock:
            out = list(self.packets)
            self.packets.clear()
        return out

    def accept(self, packets: list[int]) -> None:
        now = time.monotonic()
        self.accepted.extend((p, now) for p in packets)


def test_the_delayer_loop_holds_releases_in_order_and_exits_once_drained() -> None:
    queue = _FakeQueue()
    control_r, control_w = os.pipe()
    table = DelayTable()
    loop = threading.Thread(target=serve, args=(queue, control_r, table), daemon=True)
    loop.start()
    a, b = "10.0.0.1", "10.0.0.2"
    os.write(control_w, b'{"add": "f1", "extra_ms": 80, "out": "all", "in_except": null}\n')
    time.sleep(0.05)
    sent = {1: queue.push(1, HOOK_OUT, a, b)}
    time.sleep(0.02)
    os.write(control_w, b'{"remove": "f1"}\n')
    time.sleep(0.02)
    sent[2] = queue.push(2, HOOK_OUT, a, b)  # no delay of its own: waits behind packet 1
    sent[3] = queue.push(3, HOOK_OUT, a, "10.0.0.3")  # another pair: at once
    os.close(control_w)  # the main process is done: the loop lets go of all, then ends
    loop.join(5)
    assert not loop.is_alive()
    order = [p for p, _ in queue.accepted]
    assert order == [3, 1, 2]
    at = dict(queue.accepted)
    assert at[1] - sent[1] >= 0.080
    assert at[2] >= at[1]
    assert at[3] - sent[3] < 0.040
    os.close(control_r)
