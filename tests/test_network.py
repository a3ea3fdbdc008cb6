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


def test_until_reset_an_answer_to_a_closed_socket_brings_a_reset_back_and_later_sends_fail():
    """``in_flight_after_close: until_reset``: requests sent before the close still arrive;
    the broker's first answer on the closed connection is lost but brings the client's reset
    back a round trip later (10 ms there, 10 back), from when on its sends fail; before
    that, and under ``deliver``, they do not."""
    for mode, fails in (("until_reset", True), ("deliver", False)):
        env, net, got = make(
            NetworkSettings(LatencyModel("constant", value_ms=10.0), in_flight_after_close=mode)
        )
        conn = Connection("c", "b", 1)
        net.send("c", "b", "request", conn)
        env.run(until=5)
        conn.close()
        env.run(until=12)
        assert [p for _, p in got] == ["request"]
        assert not net.send_fails(conn)
        net.send("b", "c", "answer", conn)  # at 12: lost, the reset is back at 32
        env.run(until=31.9)
        assert not net.send_fails(conn) and conn.reset_back_at == (32.0 if fails else None)
        env.run(until=32)
        assert net.send_fails(conn) is fails
        assert [p for _, p in got] == ["request"]


def test_until_reset_an_answer_on_a_black_holed_connection_brings_no_reset():
    """An answer in flight when its connection was black-holed and then closed by its client
    never reaches the client's host, so nothing comes back; one on a merely closed connection
    does, one hop after it would have arrived."""
    for blackholed, back in ((True, None), (False, 10.0)):
        env, net, _got = make(
            NetworkSettings(
                LatencyModel("constant", value_ms=5.0), in_flight_after_close="until_reset"
            )
        )
        conn = Connection("c", "b", 1)
        net.send("b", "c", "answer", conn)  # arrives at 5
        conn.blackholed = blackholed
        conn.close()
        env.run()
        assert conn.reset_back_at == back


def test_until_reset_a_broker_writes_two_of_five_requests_a_closed_connection_held():
    """Kafka's Selector keeps a connection its client closed until a send on it fails: a
    leader paused past the producer's request timeout writes the first request buffered on
    the closed connection, whose answer brings the reset, and the second, whose answer's
    send fails and drops the other three. A plain producer with five in flight then
    duplicates two fifths of what it does when every request is handled (``deliver``)."""
    from eosim.analysis.history import history_from_recorder
    from eosim.simulation.runner import run_scenario
    from eosim.simulation.scenario import parse_scenario

    text = """
name: closed-connection
seed: 1
cluster:
  brokers: 1
  topics: [{name: events, partitions: 1, replication_factor: 1}]
producers:
  - name: producer-0
    config: {acks: 1, enable.idempotence: false, max.in.flight.requests.per.connection: 5,
             request.timeout.ms: 1500, linger.ms: 5}
    workload: {topic: events, records: 3000, rate: 1000}
faults:
  - {kind: pause, nodes: [broker-0], at: 1s, duration: 4s}
"""
    dups = {}
    for mode in ("deliver", "until_reset"):
        scenario = parse_scenario(
            text.replace("seed: 1", f"seed: 1\nnetwork: {{in_flight_after_close: {mode}}}")
        )
        history = history_from_recorder(run_scenario(scenario, 1).history)
        values = [r.value for r in next(iter(history.logs.values()))]
        dups[mode] = len(values) - len(set(values))
    assert dups["deliver"] > 0
    assert dups["until_reset"] == dups["deliver"] * 2 // 5


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
