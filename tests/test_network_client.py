"""The producer's connections as Kafka's NetworkClient sets them up: a TCP connect accepted
by the broker's host within the connection setup timeout, then an ApiVersionsRequest that
must be answered before anything else is sent (simulation/producer/sender.py)."""

from __future__ import annotations

from itertools import pairwise

from support import bare_sender

from eosim.simulation import run_scenario
from eosim.simulation.network import TraceEvent
from eosim.simulation.protocol import (
    ApiVersionsRequest,
    Disconnected,
    Errors,
    ProduceRequest,
    TcpConnect,
)
from eosim.simulation.scenario import parse_scenario

ONE_BROKER = """
name: handshake
cluster:
  brokers: 1
  topics: [{{name: events, partitions: 2}}]
producers:
  - name: producer-0
    config:
      enable.idempotence: false
      max.in.flight.requests.per.connection: 5
      request.timeout.ms: 1500
      delivery.timeout.ms: 120000
    workload: {{topic: events, records: {records}, rate: 1000, keys: 20}}
faults: [{fault}]
"""


def _trace(fault: str, records: int = 12_000) -> list[TraceEvent]:
    scenario = parse_scenario(ONE_BROKER.format(fault=fault, records=records), "t.yaml", [])
    trace = run_scenario(scenario, 1, trace=True).trace
    assert trace is not None
    return trace


def _sent(trace: list[TraceEvent], kind: type, start: float, end: float) -> list[float]:
    return [
        e.time
        for e in trace
        if e.event == "send"
        and e.src == "producer-0"
        and isinstance(e.payload, kind)
        and start <= e.time < end
    ]


def test_a_producer_sends_no_batch_into_a_paused_broker_after_its_requests_time_out():
    """Broker-0 is paused from 2 s to 6 s. Its requests time out at 3.5 s; the new connection
    is accepted by the host, but the ApiVersionsRequest goes unanswered, so the producer's
    batches stay in its accumulator until the broker resumes (before the handshake was
    modelled, they were sent at once into the paused broker, to be written on resume and
    written again when retried)."""
    trace = _trace("{kind: pause, nodes: [broker-0], at: 2s, duration: 4s}")
    first_timeout = 2_000 + 1_500
    assert _sent(trace, ProduceRequest, 1_000, 2_000)  # writing before the pause
    assert _sent(trace, ApiVersionsRequest, first_timeout, 6_000)  # reconnected, not ready
    assert _sent(trace, ProduceRequest, first_timeout + 1, 6_000) == []
    assert _sent(trace, ProduceRequest, 6_000, 7_000)  # answered on resume: writing again


def test_a_crashed_broker_refuses_connects_and_the_reconnect_backoff_grows():
    """With no process listening the host refuses the connect (a reset after one hop), and
    each refused connect lengthens the reconnect backoff, from reconnect.backoff.ms (50 ms)
    to reconnect.backoff.max.ms (1 s), each with 20% jitter."""
    trace = _trace("{kind: crash, nodes: [broker-0], at: 2s, duration: 6s}")
    connects = _sent(trace, TcpConnect, 2_000, 7_000)
    resets = [
        e.time
        for e in trace
        if isinstance(e.payload, Disconnected) and e.dst == "producer-0" and e.event == "deliver"
    ]
    assert len(connects) >= 6 and resets
    gaps = [b - a for a, b in pairwise(connects)]
    assert gaps[0] < 100  # 50 ms +-20%, plus the hop that brings the reset
    assert max(gaps) < 1_300 and max(gaps[-3:]) > 750  # grown to about the 1 s cap


def test_a_connect_across_a_cut_times_out_after_the_connection_setup_timeout():
    """Cut off from its broker, the producer's requests time out (1.5 s); its new connect is
    never accepted and gives up after socket.connection.setup.timeout.ms (10 s +-20%), the
    next after twice that (20 s +-20%; the max is 30 s)."""
    trace = _trace(
        "{kind: partition, groups: [[producer-0], [broker-0, controller]], at: 2s, duration: 40s}",
        records=50_000,
    )
    connects = _sent(trace, TcpConnect, 2_000, 42_000)
    assert len(connects) == 3
    first, second = (b - a for a, b in pairwise(connects))
    assert 8_000 < first < 13_100  # the setup timeout and a reconnect backoff
    assert 16_000 < second < 25_100


def test_least_loaded_node_prefers_a_ready_connection_then_one_being_set_up():
    """NetworkClient.leastLoadedNode: a ready connection is used (the one with fewest requests
    in flight); with none ready, a connection being set up is waited for rather than a second
    one started; with none of either, a connect starts to the broker tried longest ago."""
    from eosim.simulation.producer.network_client import ConnectionState, InFlightRequest

    sender = bare_sender(("b0", "b1", "b2"))
    b0, b1, b2 = (sender.client.connections[b] for b in ("b0", "b1", "b2"))
    for nc in (b0, b1):
        sender.client.initiate_connect(nc, 0.0)
        nc.state = ConnectionState.READY
    b0.in_flight.append(InFlightRequest(1, 30_000.0, []))
    for _ in range(10):  # whatever broker the scan starts from
        assert sender.client.least_loaded_node(0.0) is b1
    assert b2.state is ConnectionState.DISCONNECTED  # no connect started

    sender = bare_sender(("b0", "b1", "b2"))
    b0, b1, b2 = (sender.client.connections[b] for b in ("b0", "b1", "b2"))
    sender.client.initiate_connect(b1, 0.0)  # CONNECTING
    assert sender.client.least_loaded_node(1.0) is None
    assert (b0.state, b2.state) == (ConnectionState.DISCONNECTED,) * 2

    sender = bare_sender(("b0", "b1", "b2"))
    b0, b1, b2 = (sender.client.connections[b] for b in ("b0", "b1", "b2"))
    for nc, at in ((b0, 300.0), (b1, 100.0), (b2, 200.0)):
        sender.client.initiate_connect(nc, at)
        sender.client.disconnect(nc, at, Errors.NETWORK_EXCEPTION)
    assert sender.client.least_loaded_node(5_000.0) is None
    assert b1.state is ConnectionState.CONNECTING  # tried longest ago
    assert (b0.state, b2.state) == (ConnectionState.DISCONNECTED,) * 2
