"""KafkaConsumer: independent fetches per leader, and auto-commit."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from eosim import api
from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.broker.broker import Broker, BrokerSettings
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator
from eosim.simulation.consumer.kafka_consumer import (
    ConsumerException,
    KafkaConsumer,
    NoOffsetForPartitionException,
    OffsetOutOfRangeException,
)
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Errors,
    FetchRequest,
    ListOffsetsRequest,
)
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]

READER = """
name: reader
seed: 3
cluster:
  brokers: 2
  topics: [{name: events, partitions: 2}]
producers:
  - name: writer
    workload: {topic: events, records: 4000, rate: 500}
consumers:
  - {name: reader, topic: events, auto.offset.reset: earliest}
faults:
  - {kind: partition, nodes: [broker-1], at: 2s, duration: 4s}
"""


def test_a_cut_off_leader_stalls_only_its_own_partitions():
    records = list(run_scenario(parse_scenario(READER, "r.yaml")).history.records())
    during_cut: dict[int, int] = {0: 0, 1: 0}
    for r in records:
        is_read = r["kind"] == "op" and r["process"] == "reader/0" and r["type"] == "ok"
        if is_read and 2_100 < r["time"] < 5_900:
            for polled in r["value"]["records"]:
                during_cut[polled["partition"]] += 1
    # events-0 is led by broker-0, which the reader still reaches; events-1 by broker-1.
    assert during_cut[0] > 500 and during_cut[1] == 0


def auto_commit_run(interval: str, seed: int) -> tuple[dict[str, int], list[dict]]:
    path = ROOT / "scenarios" / "pipeline-auto-commit.yaml"
    scenario = load_scenario(path, [f"processors.0.auto_commit_interval={interval}"])
    records = list(run_scenario(scenario, seed).history.records())
    verdict = check_history(history_from_records(records))
    return {n: a.count for n, a in verdict.anomalies.items()}, records


def committed_and_inputs(records: list[dict]) -> tuple[dict[int, int], dict[int, int]]:
    """The group's final committed offsets and each input partition's length."""
    (offsets,) = [r for r in records if r["kind"] == "offsets"]
    inputs = {}
    for r in records:
        if r["kind"] == "log" and r["topic"] == "in":
            inputs[r["partition"]] = len(r["records"])
    return {o["partition"]: o["offset"] for o in offsets["offsets"]}, inputs


def test_auto_commit_commits_without_the_application_and_on_close():
    counts, records = auto_commit_run("5s", 1)
    committed, inputs = committed_and_inputs(records)
    assert committed == inputs  # the close commit covers every input
    assert counts["lost_processing"] == 0 and counts["duplicate_processing"] > 0


def test_a_failed_auto_commit_is_not_retried_behind_a_later_commit():
    # ConsumerCoordinator.commitOffsetsAsync tries once: a retried auto-commit could land
    # after the commit on close and move the group's offsets back (it did on seeds 4, 8, 10,
    # when every auto-commit retried until it landed).
    for seed in range(1, 11):
        _counts, records = auto_commit_run("5s", seed)
        committed, inputs = committed_and_inputs(records)
        assert committed == inputs, seed


def test_a_shorter_auto_commit_interval_redoes_less_work():
    def total(interval: str) -> int:
        return sum(
            auto_commit_run(interval, seed)[0]["duplicate_processing"] for seed in (1, 2, 3, 4)
        )

    assert total("100ms") < total("10s")


# -- auto.offset.reset ------------------------------------------------------------------------
# Kafka: SubscriptionState.resetInitializingPositions, OffsetFetcher.resetPositionsIfNeeded,
# FetchCollector.handleInitializeErrors (OFFSET_OUT_OF_RANGE), Partition.fetchOffsetForTimestamp
# (LATEST is the LSO under read_committed, the high watermark otherwise).
TP = ("t", 0)


class Cluster:
    """One broker leading ``t-0`` and a consumer ``c``, 1 ms apart."""

    def __init__(self, reset: str, isolation: str = "read_committed") -> None:
        self.env = simpy.Environment()
        streams = RandomStreams(1)
        self.net = Network(
            self.env, NetworkSettings(LatencyModel("constant", value_ms=1.0)), streams.stream("n")
        )
        self.broker = Broker(
            self.env,
            "broker-0",
            self.net,
            [TP],
            VERSIONS["4.0"],
            ProducerIdBlockAllocator(),
            BrokerSettings(),
        )
        self.log = self.broker.logs[TP]
        self.requests: list[object] = []
        handle = self.broker.apis.handle

        def recording(request: object) -> object:
            self.requests.append(request)
            return handle(request)

        self.broker.apis.handle = recording  # type: ignore[method-assign]
        metadata = ClusterMetadata(("broker-0",), {"t": 1})
        self.consumer = KafkaConsumer(
            self.env,
            "c",
            self.net,
            metadata,
            isolation=isolation,
            request_timeout_ms=200.0,
            auto_offset_reset=reset,
        )
        self.consumer.assign([TP])

    def write(self, *values: str, producer_id: int = 1, transactional: bool = False) -> None:
        batch = self.log.append(producer_id, 0, -1, values, self.env.now, transactional)
        # As the leader's produce path does: the high watermark follows the append.
        part = self.broker.partitions[TP]
        part.appended(batch, self.env.now)
        self.broker.replica_manager.after_leader_append(part)

    def poll(self) -> list[str]:
        """One poll; its values, or the exception it raised."""
        proc = self.env.process(self.consumer.poll())
        self.env.run(until=proc)
        return [value for _tp, _offset, value in proc.value]

    def poll_raises(self) -> Exception:
        proc = self.env.process(self.consumer.poll())
        with pytest.raises(ConsumerException) as exc:
            self.env.run(until=proc)
        return exc.value


@pytest.mark.parametrize(
    ("reset", "isolation", "timestamp", "start"),
    [
        ("latest", "read_committed", LATEST_TIMESTAMP, 3),  # the LSO: a transaction is open at 3
        ("latest", "read_uncommitted", LATEST_TIMESTAMP, 5),  # the log end (high watermark)
        ("earliest", "read_committed", EARLIEST_TIMESTAMP, 0),
    ],
)
def test_no_position_resets_through_list_offsets(
    reset: str, isolation: str, timestamp: int, start: int
):
    c = Cluster(reset, isolation)
    c.write("a", "b", "c")
    c.write("x", "y", producer_id=2, transactional=True)  # an open transaction
    c.poll()
    asked = [r for r in c.requests if isinstance(r, ListOffsetsRequest)]
    assert [(r.partitions, r.isolation) for r in asked] == [(((TP, timestamp),), isolation)]
    fetched = [r.partitions for r in c.requests if isinstance(r, FetchRequest)]
    assert fetched[0] == ((TP, start),)  # the first fetch is at the reset position


def test_latest_skips_what_was_written_before_the_reset_and_reads_what_follows():
    c = Cluster("latest")
    c.write("old-1", "old-2")
    assert c.poll() == []  # the reset's ListOffsets, then a fetch at the end
    c.write("new-1")
    assert c.poll() == ["new-1"]


def test_earliest_reads_from_the_start_in_the_same_poll():
    c = Cluster("earliest")
    c.write("a", "b")
    assert c.poll() == ["a", "b"]


def test_none_raises_no_offset_for_partition_until_the_application_seeks():
    c = Cluster("none")
    c.write("a", "b")
    exc = c.poll_raises()
    assert isinstance(exc, NoOffsetForPartitionException) and exc.partitions == [TP]
    assert exc.describe().startswith("NoOffsetForPartitionException: ")
    assert c.poll_raises() is not None  # every poll, as long as there is no position
    c.consumer.seek(TP, 1)
    assert c.poll() == ["b"]


@pytest.mark.parametrize(("reset", "after"), [("latest", ["c"]), ("earliest", ["a", "b", "c"])])
def test_offset_out_of_range_resets_the_position(reset: str, after: list[str]):
    c = Cluster(reset)
    c.write("a", "b")
    c.consumer.seek(TP, 10)  # beyond the log end
    assert c.poll() == []  # answered OFFSET_OUT_OF_RANGE
    assert TP not in c.consumer.positions
    seen = c.poll()  # the reset's ListOffsets, then a fetch from the new position
    c.write("c")
    seen += c.poll() + c.poll()
    assert seen == after


def test_offset_out_of_range_with_none_raises_to_the_application():
    c = Cluster("none")
    c.write("a", "b")
    c.consumer.seek(TP, 10)
    exc = c.poll_raises()
    assert isinstance(exc, OffsetOutOfRangeException) and exc.offsets == {TP: 10}
    assert c.consumer.positions == {TP: 10}  # no reset: the application must seek


def test_the_broker_refuses_a_fetch_beyond_the_log_end_only():
    c = Cluster("latest")
    c.write("a", "b")
    answers: list = []
    c.net.register("probe", lambda m: answers.append(m.payload), client=True)
    for cid, offset in ((1, 2), (2, 3)):
        c.net.send("probe", "broker-0", FetchRequest(cid, ((TP, offset),), "read_committed"))
    c.env.run(until=10)
    assert [a.partitions[0][1].error for a in answers] == [Errors.NONE, Errors.OFFSET_OUT_OF_RANGE]


@pytest.mark.parametrize(("reset", "after"), [("latest", ["e"]), ("earliest", ["c", "d", "e"])])
def test_a_position_below_the_log_start_resets_the_position(reset: str, after: list[str]):
    """Records deleted under the consumer (DeleteRecords, retention): its fetch below the log
    start is OFFSET_OUT_OF_RANGE (UnifiedLog.checkLogStartOffset) and auto.offset.reset
    applies as beyond the end; EARLIEST is the log start."""
    c = Cluster(reset)
    c.write("a", "b", "c", "d")
    assert c.poll() in ([], ["a", "b", "c", "d"])
    c.consumer.seek(TP, 0)
    assert c.broker.log_manager.delete_records(TP, 2) is Errors.NONE
    assert c.poll() == []  # answered OFFSET_OUT_OF_RANGE
    assert TP not in c.consumer.positions
    seen = c.poll()  # the reset's ListOffsets, then a fetch from the new position
    c.write("e")
    seen += c.poll() + c.poll()
    assert seen == after


def test_a_position_below_the_log_start_with_none_raises_to_the_application():
    c = Cluster("none")
    c.write("a", "b", "c")
    c.consumer.seek(TP, 1)
    assert c.broker.log_manager.delete_records(TP, 2) is Errors.NONE
    exc = c.poll_raises()
    assert isinstance(exc, OffsetOutOfRangeException) and exc.offsets == {TP: 1}


def test_the_broker_refuses_a_fetch_below_the_log_start_and_lists_it_as_earliest():
    c = Cluster("latest")
    c.write("a", "b", "c")
    assert c.broker.log_manager.delete_records(TP, 2) is Errors.NONE
    answers: list = []
    c.net.register("probe", lambda m: answers.append(m.payload), client=True)
    for cid, offset in ((1, 1), (2, 2)):
        c.net.send("probe", "broker-0", FetchRequest(cid, ((TP, offset),), "read_committed"))
    c.net.send(
        "probe", "broker-0", ListOffsetsRequest(3, ((TP, EARLIEST_TIMESTAMP),), "read_committed")
    )
    c.env.run(until=10)
    fetches, listed = answers[:2], answers[2]
    assert [a.partitions[0][1].error for a in fetches] == [Errors.OFFSET_OUT_OF_RANGE, Errors.NONE]
    assert listed.partitions == [(TP, Errors.NONE, 2)]


def test_a_lost_list_offsets_is_retried_and_a_seek_cancels_the_reset():
    c = Cluster("earliest")
    c.write("a")
    cut = c.net.start_partition([["c"], ["broker-0"]])
    proc = c.env.process(c.consumer.poll())
    c.env.run(until=proc)
    assert TP not in c.consumer.positions  # the ListOffsets timed out
    c.net.stop(cut)
    assert c.poll() == ["a"]  # retried after retry.backoff.ms
    # A seek while a reset is pending wins: the ListOffsets answer is ignored.
    c2 = Cluster("latest")
    c2.write("a", "b")
    c2.consumer._update_fetch_positions()  # sends the ListOffsets
    c2.consumer.seek(TP, 1)
    c2.env.run(until=c2.env.now + 10)
    assert c2.consumer.positions == {TP: 1}


OFFSET_RESET = ROOT / "scenarios" / "pipeline-offset-reset.yaml"


def ops(outcome: api.Outcome, f: str) -> list[dict]:
    records = outcome.run.history.records()
    return [r for r in records if r["kind"] == "op" and r["f"] == f and r["type"] != "invoke"]


def test_a_processor_with_none_records_the_failed_poll_and_stops():
    outcome = api.run(api.load(OFFSET_RESET, ["processors.app.input.auto.offset.reset=none"]))
    polls = [p for p in ops(outcome, "poll") if p["process"] == "app/0"]
    assert [(p["type"], p["error"].split(":")[0]) for p in polls] == [
        ("fail", "NoOffsetForPartitionException")
    ]
    assert ops(outcome, "process") == []
    assert outcome.run.sim_time_s < 60  # the application stopped; the run did not wait for it


def test_a_reader_with_none_records_the_failed_poll():
    scenario = parse_scenario(READER, "r.yaml", ["consumers.reader.auto.offset.reset=none"])
    outcome = api.run(scenario)
    polls = [p for p in ops(outcome, "poll") if p["process"] == "reader/0"]
    assert [p["type"] for p in polls] == ["fail"]


def test_auto_offset_reset_is_kafkas_key_under_input_and_consumers():
    base = READER.replace("auto.offset.reset: earliest", "isolation: read_committed")
    scenario = parse_scenario(base, "r.yaml", ["consumers.reader.auto.offset.reset=earliest"])
    assert scenario.consumers[0].auto_offset_reset == "earliest"
    assert parse_scenario(base, "r.yaml").consumers[0].auto_offset_reset == "latest"
    with pytest.raises(ScenarioError) as bad:
        parse_scenario(base, "r.yaml", ["consumers.reader.auto.offset.reset=smallest"])
    assert "consumers[0].auto.offset.reset" in str(bad.value)
    with pytest.raises(ScenarioError) as typo:
        parse_scenario(base.replace("isolation: read_committed", "auto.offset.rest: none"))
    assert "did you mean 'auto.offset.reset'?" in str(typo.value)
