"""Delay faults on real processes (eosim.real.delayer, eosim.real.netns.Network.delay): which
packets a fault holds (checked against the model's own rule), the release order, the netlink
messages and the delayer's loop on plain sockets without root; and, where this machine has
network namespaces and iptables-nft, the added latency on real TCP and UDP between two
namespaces, the order of a stream across a fault's start and heal, and a delay together with
a loss and a partition."""

from __future__ import annotations

import itertools
import os
import select
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_support import installed_kafka, kafka_target

from eosim.real import netns
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


def test_a_run_starts_the_delayers_its_schedule_needs_before_the_workload() -> None:
    from eosim.real.runner import delayed_nodes
    from eosim.simulation.nemesis import FaultEvent

    every = ["controller", "broker-0", "broker-1", "producer-0"]
    schedule = [
        FaultEvent(1.0, 2.0, "crash", ("broker-1",)),
        FaultEvent(1.0, 2.0, "delay", ("broker-0",), extra_latency=5.0),
        FaultEvent(
            3.0,
            4.0,
            "delay",
            ("controller",),
            extra_latency=5.0,
            links=(("producer-0", "broker-1"),),
        ),
        FaultEvent(5.0, 6.0, "delay", ("broker-0",), extra_latency=9.0),
    ]
    assert delayed_nodes(schedule, every) == ["broker-0", "producer-0"]
    assert delayed_nodes([FaultEvent(1.0, 2.0, "delay", (), extra_latency=5.0)], every) == every
    assert delayed_nodes(schedule[:1], every) == []


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


# --- on real namespaces -------------------------------------------------------------------

PROBE = r"""
import socket, sys, threading, time, statistics
role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    seen = []
    def tcp():
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port)); s.listen()
        while True:
            c, _ = s.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            echo = lambda c=c: [c.sendall(d) for d in iter(lambda: c.recv(65536), b"")]
            threading.Thread(target=echo, daemon=True).start()
    def udp():
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", port))
        while True:
            d, peer = u.recvfrom(2048)
            if d.startswith(b"seq"):
                seen.append(int(d[3:]))
            else:
                u.sendto(d, peer)
    def halves():
        # Each message answered in two writes, as Kafka writes a fetch answer: its header,
        # then the records (sendfile).
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port + 1)); s.listen()
        while True:
            c, _ = s.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            def answer(c=c):
                for d in iter(lambda: c.recv(65536), b""):
                    c.sendall(d[:32]); c.sendall(d[32:])
            threading.Thread(target=answer, daemon=True).start()
    threading.Thread(target=tcp, daemon=True).start()
    threading.Thread(target=udp, daemon=True).start()
    threading.Thread(target=halves, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        print(" ".join(map(str, seen)), flush=True)
else:
    host = sys.argv[3]
    conn = None
    print("ready", flush=True)
    for line in sys.stdin:
        what, n = line.split()[0], int(line.split()[1])
        rtts = []
        if what in ("tcp", "halves"):
            c = conn if what == "tcp" else None
            if c is None:
                c = socket.create_connection((host, port + (what == "halves")), timeout=5)
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if what == "tcp":
                    conn = c
            for _ in range(n):
                t = time.monotonic(); c.sendall(b"x" * 64); got = 0
                while got < 64:
                    got += len(c.recv(4096))
                rtts.append((time.monotonic() - t) * 1000); time.sleep(0.01)
            if what == "halves":
                c.close()
        elif what == "udp":
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1.0)
            for i in range(n):
                t = time.monotonic()
                try:  # a packet dropped on its way out is EPERM here
                    u.sendto(b"ping%d" % i, (host, port))
                    while u.recv(2048) != b"ping%d" % i:
                        pass
                    rtts.append((time.monotonic() - t) * 1000)
                except OSError:
                    time.sleep(1.0)
            u.close()
        elif what == "stream":
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for i in range(n):
                u.sendto(b"seq%d" % i, (host, port)); time.sleep(0.001)
            u.close()
        print(f"{len(rtts)} {statistics.median(rtts) if rtts else -1:.2f}", flush=True)
"""


class _Probe:
    """A line-driven Python process in one namespace (``server`` or ``client``)."""

    def __init__(self, prefix: list[str], script: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [*prefix, sys.executable, str(script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.readline(20) == "ready"

    def readline(self, timeout: float) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        assert ready, "the probe did not answer"
        return self.process.stdout.readline().strip()

    def ask(self, line: str, timeout: float = 30) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.readline(timeout)

    def close(self) -> None:
        self.process.kill()
        self.process.wait(5)


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[netns.Network, _Probe, _Probe]]:
    reason = netns.delay_unavailable_reason()
    if reason:
        pytest.skip(f"needs network namespaces and iptables-nft: {reason}")
    # A prefix and subnet of their own, so a cluster the owner runs at the same time is
    # untouched.
    net = netns.Network(prefix="eosd", subnet="10.78.0")
    net.setup(["broker-0", "broker-1"])
    script = tmp_path_factory.mktemp("probe") / "probe.py"
    script.write_text(PROBE)
    server = _Probe(net.prefix_cmd("broker-1"), script, "server", "7777")
    client = _Probe(net.prefix_cmd("broker-0"), script, "client", "7777", net.address("broker-1"))
    try:
        yield net, client, server
    finally:
        client.close()
        server.close()
        net.teardown()


def _rtt(client: _Probe, what: str, n: int = 10) -> tuple[int, float]:
    got, p50 = client.ask(f"{what} {n}").split()
    return int(got), float(p50)


def _ruleset(net: netns.Network, node: str) -> str:
    cmd = [*net.prefix_cmd(node), "nft", "list", "ruleset"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def test_a_delay_adds_its_latency_to_a_real_connection_and_a_heal_takes_it_away(pair) -> None:
    net, client, _ = pair
    _, base = _rtt(client, "tcp")  # the connection is opened here, before the fault
    assert base < 50
    handle = net.delay(["broker-0"], [], 60.0)
    # The open connection is slowed at once: 60 ms out, 60 ms back.
    _, slowed = _rtt(client, "tcp")
    assert 120 <= slowed < 120 + 50
    assert "queue" in _ruleset(net, "broker-0") and _ruleset(net, "broker-1") == ""
    net.heal(handle)
    # A link: one way only, and a second fault on the same packets adds up.
    link = net.delay([], [("broker-0", "broker-1")], 30.0)
    _, one_way = _rtt(client, "udp")
    assert 30 <= one_way < 30 + 50
    more = net.delay([], [("broker-0", "broker-1")], 20.0)
    assert 50 <= _rtt(client, "udp")[1] < 50 + 50
    net.heal(link)
    net.heal(more)
    net.heal(more)  # twice: nothing
    assert net.delayed() == {"broker-0": []}
    _, healed = _rtt(client, "tcp")
    assert healed < 30
    time.sleep(0.050 + netns.RETIRE_MARGIN_S + 0.3)  # the rules go once the held ones left
    assert _ruleset(net, "broker-0") == ""
    print(f"\nTCP echo p50: {base:.2f} ms, {slowed:.2f} ms with 60 ms on the client's node")


def test_an_answer_written_in_two_pieces_is_held_once_not_twice(pair) -> None:
    """The delayer holds a packet in its sender's own stack, so TCP counts it as not yet sent.
    With Linux's TCP autocorking a second small write then waits for the first packet's
    release before it is sent, and is held in turn: two delays for an answer written in two
    pieces (as Kafka writes a fetch answer), where a slow link gives one. The namespaces turn
    autocorking off (netns.Network.ensure); this failed before (about 180 ms against 120)."""
    net, client, _ = pair
    handle = net.delay(["broker-1"], [], 60.0)  # the answering node
    try:
        got, p50 = _rtt(client, "halves")
    finally:
        net.heal(handle)
    assert got == 10
    assert 120 <= p50 < 120 + 40, f"{p50:.1f} ms: the second piece was held twice"
    print(f"\nan answer in two pieces, 60 ms on the answering node: p50 {p50:.2f} ms")


def test_a_stream_keeps_its_order_across_a_delays_start_and_heal(pair) -> None:
    net, client, server = pair
    server.ask("dump")  # what earlier tests sent
    streaming = threading.Thread(target=client.ask, args=("stream 400",))
    streaming.start()
    time.sleep(0.1)
    handle = net.delay(["broker-0"], [], 40.0)
    time.sleep(0.15)
    net.heal(handle)  # the packets after the heal wait behind the held ones
    streaming.join(30)
    time.sleep(0.2)
    seen = [int(s) for s in server.ask("dump").split()]
    assert len(seen) >= 390  # UDP on a bridge: none lost in practice
    assert seen == sorted(seen)


def test_a_delay_a_loss_and_a_partition_compose(pair) -> None:
    net, client, _ = pair
    delay = net.delay(["broker-0"], [], 40.0)
    cut = net.partition([["broker-0"], ["broker-1"]])
    assert _rtt(client, "udp", 3)[0] == 0  # cut: nothing comes back
    net.heal(cut)
    assert _rtt(client, "udp", 3)[1] >= 80
    lossy = net.loss([], [("broker-0", "broker-1")], 1.0)
    assert _rtt(client, "udp", 3)[0] == 0  # every packet to broker-1 dropped
    net.heal(lossy)
    got, rtt = _rtt(client, "udp", 3)
    assert got == 3 and rtt >= 80
    net.heal(delay)
    assert _rtt(client, "udp", 5)[1] < 30


# --- on a real Kafka ------------------------------------------------------------------------

DELAYED = textwrap.dedent(
    """
    name: real-delay
    seed: 5
    cluster:
      brokers: 1
      topics:
        - {name: events, partitions: 1, replication_factor: 1}
    producers:
      - name: producer-0
        config: {acks: all, enable.idempotence: true}
        workload: {topic: events, records: 2200, rate: 200, keys: 10}
    faults:
      - {kind: delay, nodes: [broker-0], extra_latency: 150ms, at: 5s, duration: 3s}
    expect:
      lost_write: 0
      duplicate: 0
    """
)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    installed_kafka()  # skips first if Kafka is missing, then the delayer's own reason
    reason = netns.delay_unavailable_reason()
    if reason:
        pytest.skip(f"needs network namespaces and iptables-nft: {reason}")
    # Its own prefix and subnet, apart from the owner's cluster and from `pair`'s namespaces,
    # which live until the module ends (CI failed on a shared prefix: the veth existed).
    network = netns.Network(prefix="eosk", subnet="10.76.0")
    with kafka_target(tmp_path_factory.mktemp("kafka"), network) as target:
        yield target


@pytest.mark.kafka
def test_a_delayed_broker_slows_every_produce_during_the_fault_and_the_run_checks(kafka) -> None:
    from eosim.analysis import outcome as checked

    outcome = checked.run(checked.parse(DELAYED, "real-delay.yaml"), target=kafka)
    history = outcome.history
    (start,) = [f for f in history.faults if f["fault"] == "delay" and f["phase"] == "start"]
    (stop,) = [f for f in history.faults if f["fault"] == "delay" and f["phase"] == "stop"]
    assert start["targets"] == ["broker-0"] and start["extra_latency"] == 150
    assert 4900 <= start["time"] <= 5500 and 7900 <= stop["time"] <= 8500

    def p50(sends: list[Any]) -> float:
        took = sorted(s.complete_time - s.invoke_time for s in sends)
        return took[len(took) // 2]

    acked = [s for s in history.sends if s.outcome == "ok" and s.complete_time is not None]
    before = [s for s in acked if start["time"] - 1500 <= s.invoke_time < start["time"] - 200]
    during = [s for s in acked if start["time"] + 100 <= s.invoke_time < stop["time"] - 400]
    after = [s for s in acked if s.invoke_time >= stop["time"] + 1000]
    assert len(before) > 100 and len(during) > 300 and len(after) > 100
    # The request waits 150 ms into the broker and the response 150 ms out of it.
    assert min(s.complete_time - s.invoke_time for s in during) >= 300
    assert p50(before) < 150 and p50(after) < 150
    assert outcome.counts["acked"] == 2200
    assert outcome.expect.met, outcome.expect.to_dict()
    print(
        f"\nproduce p50: {p50(before):.1f} ms before, {p50(during):.1f} ms with 150 ms on "
        f"broker-0, {p50(after):.1f} ms after the heal"
    )
