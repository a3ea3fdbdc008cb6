"""The network: FIFO links, TCP-style loss, partitions that hold messages."""

from __future__ import annotations

import simpy

from eosim.simulation.network import Connection, LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import Disconnected
from eosim.simulation.rng import RandomStreams


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


def test_requests_sent_before_the_client_closes_still_arrive():
    env, net, got = make(NetworkSettings(LatencyModel("constant", value_ms=10.0)))
    conn = Connection("c", "b", 1)
    net.send("c", "b", "request", conn)
    env.run(until=5)
    conn.close()  # the client's request timeout: the bytes are already on their way
    net.send("c", "b", "too late", conn)  # nothing can be sent on a closed connection
    net.send("b", "c", "response", conn)
    env.run()
    assert [p for _, p in got] == ["request"]


def test_in_flight_after_close_drop_discards_them():
    env, net, got = make(
        NetworkSettings(LatencyModel("constant", value_ms=10.0), in_flight_after_close="drop")
    )
    conn = Connection("c", "b", 1)
    net.send("c", "b", "request", conn)
    env.run(until=5)
    conn.close()
    env.run()
    assert got == []


def test_nothing_in_flight_arrives_once_the_broker_side_is_gone():
    env, net, got = make(NetworkSettings(LatencyModel("constant", value_ms=10.0)))
    conn = Connection("c", "b", 1)
    net.send("c", "b", "request", conn)
    env.run(until=5)
    conn.close()
    conn.destroy(env.now)  # the broker crashed: its socket is gone
    env.run()
    assert got == []


def test_held_request_arrives_after_the_cut_heals_though_its_client_gave_up():
    env, net, got = make(NetworkSettings(LatencyModel("constant", value_ms=1.0)))
    cut = net.start_partition([["c"], ["b"]])
    conn = Connection("c", "b", 1)
    net.send("c", "b", "held", conn)
    env.run(until=50)
    conn.close()
    net.stop(cut)
    env.run()
    assert [p for _, p in got] == ["held"]
