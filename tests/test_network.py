"""The network: FIFO links, TCP-style loss, partitions that hold messages."""

from __future__ import annotations

import simpy

from simulation.network import Connection, LatencyModel, Network, NetworkSettings
from simulation.protocol import Disconnected
from simulation.rng import RandomStreams


def make(settings: NetworkSettings | None = None):
    env = simpy.Environment()
    net = Network(env, settings or NetworkSettings(), RandomStreams(1).stream("network"))
    got: list[tuple[float, object]] = []
    net.register("c", lambda m: got.append((env.now, m.payload)), client=True)
    net.register("b", lambda m: got.append((env.now, m.payload)), client=False)
    return env, net, got


def test_links_are_fifo_despite_random_latency():
    env, net, got = make(NetworkSettings(LatencyModel("exponential", mean_ms=5.0)))
    for i in range(200):
        net.send("c", "b", i)
    env.run()
    assert [p for _, p in got] == list(range(200))


def test_connection_loss_blackholes_later_messages_then_resets():
    settings = NetworkSettings(request_loss=1.0, dead_connection_reset_ms=100.0)
    env, net, got = make(settings)
    conn = Connection("c", "b", 1)
    net.send("c", "b", "first", conn)
    assert conn.blackholed
    net.settings = NetworkSettings(dead_connection_reset_ms=100.0)
    net.send("c", "b", "second", conn)  # no loss drawn now, but the connection is dead
    net.send("b", "c", "reply", conn)
    env.run()
    assert [p for _, p in got if not isinstance(p, Disconnected)] == []
    resets = [(t, p) for t, p in got if isinstance(p, Disconnected)]
    assert len(resets) == 1 and resets[0][0] == 100.0 and conn.closed


def test_message_loss_model_drops_only_that_message():
    env, net, got = make(NetworkSettings(request_loss=0.5, loss_model="message"))
    conn = Connection("c", "b", 1)
    for i in range(400):
        net.send("c", "b", i, conn)
    env.run()
    delivered = [p for _, p in got]
    assert 100 < len(delivered) < 300 and not conn.blackholed
    assert delivered == sorted(delivered)


def test_partition_holds_messages_until_it_heals():
    env, net, got = make(NetworkSettings(LatencyModel("constant", value_ms=1.0)))
    cut = net.start_partition([["c"], ["b"]])
    net.send("c", "b", "held")
    env.run(until=50)
    assert got == []
    net.stop(cut)
    env.run()
    assert got == [(51.0, "held")]


def test_held_messages_of_a_closed_connection_are_dropped():
    env, net, got = make()
    conn = Connection("c", "b", 1)
    cut = net.start_partition([["c"]])  # c alone; everyone else is the rest
    net.send("c", "b", "held", conn)
    conn.closed = True  # the client timed out meanwhile
    net.stop(cut)
    env.run()
    assert got == []


def test_delay_spike_adds_latency_on_touching_links_only():
    env, net, got = make(NetworkSettings(LatencyModel("constant", value_ms=1.0)))
    net.register("x", lambda m: got.append((env.now, m.payload)), client=False)
    spike = net.start_spike(["b"], extra_ms=100.0)
    net.send("c", "b", "slow")
    net.send("c", "x", "fast")
    env.run()
    net.stop(spike)
    assert dict((p, t) for t, p in got) == {"fast": 1.0, "slow": 101.0}
