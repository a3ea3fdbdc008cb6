"""A consumer's fetch that finds nothing to return is held by the leader (fetch.max.wait.ms).

Kafka's ReplicaManager.fetchMessages answers at once only a fetch with at least
fetch.min.bytes to return (default 1), an error, or a diverging epoch; any other waits in
the fetch purgatory (DelayedFetch) until one of its partitions has something below the end
its isolation level reads to (the high watermark; the last stable offset for read_committed),
stops being led there, or fetch.max.wait.ms (default 500) has passed. The consumer sends a
leader no new fetch while one is in flight (AbstractFetch.prepareFetchRequests), so an idle
consumer asks each leader about twice a second, and sees new records as soon as they are
readable."""

from __future__ import annotations

import simpy
from conformance.cluster import Cluster

from eosim.simulation.consumer.kafka_consumer import KafkaConsumer
from eosim.simulation.protocol import Errors, FetchRequest

TP = ("t", 0)


def _reader(isolation: str = "read_uncommitted") -> tuple[Cluster, KafkaConsumer, list[object]]:
    """One broker leading ``t-0`` (1 ms away), a consumer at its start with Kafka's default
    settings, and the requests the broker handles."""
    cl = Cluster(
        brokers=1, partitions=(TP,), transaction_partition_verification=False, transaction_version=1
    )
    broker = cl.leader(TP)
    requests: list[object] = []
    handle = broker.apis.handle

    def recording(request: object) -> object:
        requests.append(request)
        return handle(request)

    broker.apis.handle = recording  # type: ignore[method-assign]
    consumer = KafkaConsumer(cl.env, "reader", cl.net, cl.metadata, isolation=isolation)
    consumer.assign([TP])
    consumer.seek(TP, 0)
    return cl, consumer, requests


def _poll(cl: Cluster, consumer: KafkaConsumer) -> simpy.Process:
    """A poll, running; its value is (when it returned, the values it returned)."""

    def polling():  # type: ignore[no-untyped-def]
        records = yield from consumer.poll()
        return cl.env.now, [value for _tp, _offset, value in records]

    return cl.env.process(polling())


def test_an_idle_consumer_asks_once_per_fetch_max_wait():
    cl, consumer, requests = _reader()

    def poll_for_a_second():  # type: ignore[no-untyped-def]
        while cl.env.now < 1_200:
            yield from consumer.poll()

    cl.env.run(until=cl.env.process(poll_for_a_second()))
    fetches = [r for r in requests if isinstance(r, FetchRequest)]
    assert [r.max_wait_ms for r in fetches] == [500.0] * 3


def test_an_empty_fetch_is_answered_after_fetch_max_wait():
    cl, consumer, _requests = _reader()
    start = cl.env.now
    poll = _poll(cl, consumer)
    cl.env.run(until=poll)
    returned, values = poll.value
    assert values == []
    assert 500 <= returned - start < 510


def test_a_held_fetch_is_answered_by_an_append():
    cl, consumer, _requests = _reader()
    start = cl.env.now
    poll = _poll(cl, consumer)
    cl.run(100)
    assert not poll.triggered
    assert cl.produce(TP, 1, 0, 0).error is Errors.NONE
    returned, values = poll.value
    assert values == ["v0"]
    assert 100 < returned - start < 110


def test_read_committed_waits_for_the_marker_not_the_records():
    """A transaction's records do not move the last stable offset; its marker does."""
    cl, consumer, _requests = _reader("read_committed")
    start = cl.env.now
    poll = _poll(cl, consumer)
    cl.run(100)
    assert cl.produce(TP, 1, 0, 0, 2, transactional=True).error is Errors.NONE
    assert not poll.triggered
    assert cl.marker(TP, 1, 0, True) is Errors.NONE
    returned, values = poll.value
    assert values == ["v0", "v1"]
    assert 150 < returned - start < 160


def test_a_fetch_whose_wait_ends_while_the_leader_is_paused_is_answered_when_it_resumes():
    """The purgatory's reaper is stopped with the rest of the process: the empty answer due at
    500 ms goes when the leader runs again (2 s), not before, and not never."""
    cl, consumer, _requests = _reader()
    consumer.poll_timeout_ms = 10_000.0  # the poll waits for the answer
    leader = cl.leader(TP)
    start = cl.env.now
    poll = _poll(cl, consumer)
    cl.run(100)
    leader.pause()
    cl.run(1_900)
    assert not poll.triggered
    leader.resume()
    cl.env.run(until=poll)
    returned, values = poll.value
    assert values == []
    assert 2_000 <= returned - start < 2_010
