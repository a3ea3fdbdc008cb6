"""Retention, DeleteRecords and producer-id expiry in a running cluster: the log start offset on
leaders and followers (Kafka's UnifiedLog, ReplicaFetcherThread, LogManager), what the
producer learns of it, and what survives a restart or a power loss."""

from __future__ import annotations

from typing import Any

import pytest
import simpy

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.broker.broker import BrokerSettings
from eosim.simulation.broker.log import LogConfig, PartitionLog, Segment
from eosim.simulation.broker.log_manager import HIGH_WATERMARK, LogManagerSettings
from eosim.simulation.broker.partition import TopicSettings
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.broker.replica_manager import ReplicationSettings
from eosim.simulation.cluster import Cluster, ClusterSettings
from eosim.simulation.controller.quorum_controller import ControllerSettings
from eosim.simulation.coordinator.runtime import CoordinatorSettings
from eosim.simulation.metadata import ClusterMetadata
from eosim.simulation.network import LatencyModel, Network, NetworkSettings
from eosim.simulation.protocol import BatchData, Errors, ProduceRequest
from eosim.simulation.records import batch_size
from eosim.simulation.rng import RandomStreams
from eosim.simulation.rules import VERSIONS
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import ScenarioError, parse_scenario

TP = ("t", 0)
SESSION_MS = 100.0


class Harness:
    """``brokers`` brokers, topic ``t`` (one partition, replication factor ``rf``, log configs
    ``log``), 1 ms between nodes, and a client node "c"."""

    def __init__(
        self,
        brokers: int = 3,
        rf: int = 3,
        log: LogConfig | None = None,
        housekeeping: LogManagerSettings | None = None,
        rules: dict[str, Any] | None = None,
    ) -> None:
        self.env = env = simpy.Environment()
        self.net = Network(
            env,
            NetworkSettings(LatencyModel("constant", value_ms=1.0)),
            RandomStreams(1).stream("n"),
        )
        self.inbox: list[Any] = []
        self.net.register("c", lambda m: self.inbox.append(m.payload), client=True)
        names = tuple(f"broker-{i}" for i in range(brokers))
        self.cluster = Cluster(
            env,
            self.net,
            ClusterMetadata(names, {"t": 1}, {"t": rf}),
            VERSIONS["4.0"].with_overrides(rules or {}),
            ClusterSettings(
                BrokerSettings(
                    heartbeat_interval_ms=20.0, session_timeout_ms=SESSION_MS, startup_ms=5.0
                ),
                CoordinatorSettings(load_ms=1.0),
                ReplicationSettings(replica_lag_time_max_ms=200.0, replica_fetch_wait_max_ms=50.0),
                ControllerSettings(session_timeout_ms=SESSION_MS),
                {"t": TopicSettings(rf, 1, False, log or LogConfig())},
                log=housekeeping or LogManagerSettings(),
            ),
        )
        self._cid = 0

    def replica(self, broker: str):  # type: ignore[no-untyped-def]
        return self.cluster.brokers[broker].partitions[TP]

    def produce(
        self, values: tuple[str, ...], seq: int, pid: int = 7, epoch: int = 0, wait: float = 20
    ) -> Any:
        """One batch to the leader (acks=all); its partition answer."""
        self._cid += 1
        cid = self._cid
        data = BatchData(pid, epoch, seq, values)
        leader = self.cluster.leader_of(TP)
        assert leader is not None
        self.net.send("c", leader, ProduceRequest(cid, -1, [(TP, data)], timeout_ms=500.0))
        self.run(wait)
        answers = [a for a in self.inbox if getattr(a, "correlation_id", None) == cid]
        return answers[-1].results[0] if answers else None

    def run(self, ms: float) -> None:
        self.env.run(until=self.env.now + ms)


def test_followers_learn_the_leaders_log_start_from_their_fetches():
    """ReplicaFetcherThread.processPartitionData: a follower moves its log start up to the
    leader's (never past its own high watermark)."""
    h = Harness()
    h.run(5)
    for seq in range(5):
        assert h.produce((f"v{seq}",), seq).error is Errors.NONE
    leader = h.cluster.brokers["broker-0"]
    assert leader.log_manager.delete_records(TP, 3) is Errors.NONE
    assert h.replica("broker-0").log.log_start_offset == 3
    h.run(200)  # the followers' next fetches carry it
    for follower in ("broker-1", "broker-2"):
        log = h.replica(follower).log
        assert log.log_start_offset == 3
        assert [r["value"] for r in log.records()] == ["v3", "v4"]


def test_delete_records_to_the_high_watermark_and_beyond():
    """Partition.deleteRecordsOnLeader: -1 is the high watermark; above it, or on a follower,
    the request is refused and nothing moves."""
    h = Harness()
    h.run(5)
    for seq in range(4):
        h.produce((f"v{seq}",), seq)
    follower = h.cluster.brokers["broker-1"]
    assert follower.log_manager.delete_records(TP, 2) is Errors.NOT_LEADER_OR_FOLLOWER
    leader = h.cluster.brokers["broker-0"]
    assert leader.log_manager.delete_records(TP, 5) is Errors.OFFSET_OUT_OF_RANGE
    assert leader.log_manager.delete_records(TP, HIGH_WATERMARK) is Errors.NONE
    assert h.replica("broker-0").log.log_start_offset == 4 == h.replica("broker-0").high_watermark


def test_a_follower_whose_log_ends_below_the_leaders_start_starts_again_there():
    """AbstractFetcherThread.fetchOffsetAndTruncate: the fetch is OFFSET_OUT_OF_RANGE, and a
    follower whose log ends below the leader's log start truncates fully and starts at it."""
    h = Harness(brokers=2, rf=2)
    h.run(5)
    h.produce(("a",), 0)
    follower = h.cluster.brokers["broker-1"]
    follower.crash()
    h.run(SESSION_MS + 50)  # fenced and out of the ISR: the leader goes on alone
    for seq in range(1, 6):
        assert h.produce((f"v{seq}",), seq).error is Errors.NONE
    leader = h.cluster.brokers["broker-0"]
    assert leader.log_manager.delete_records(TP, HIGH_WATERMARK) is Errors.NONE
    assert h.replica("broker-0").log.log_start_offset == 6
    assert h.replica("broker-1").log.log_end_offset == 1
    follower.restart()
    h.run(SESSION_MS + 300)
    log = h.replica("broker-1").log
    assert log.log_start_offset == 6 and log.log_end_offset == 6 and log.batches == []
    h.produce(("w",), 6)
    h.run(100)
    assert [r["value"] for r in h.replica("broker-1").log.records()] == ["w"]


def test_time_retention_deletes_on_every_replica_but_never_past_its_high_watermark():
    """LogManager.cleanupLogs on leader and followers alike: segments rolled by segment.ms go
    once retention.ms old; the active segment goes too (an empty one is rolled)."""
    h = Harness(
        log=LogConfig(retention_ms=1_000.0, segment_ms=100.0),
        housekeeping=LogManagerSettings(
            log_retention_check_interval_ms=250.0, log_initial_task_delay_ms=0.0
        ),
    )
    h.run(5)
    for seq in range(10):
        h.produce((f"v{seq}",), seq, wait=40)
    ends = {b: h.replica(b).log.log_end_offset for b in h.cluster.brokers}
    assert set(ends.values()) == {10}
    h.run(2_000)
    for broker in h.cluster.brokers:
        log = h.replica(broker).log
        assert log.log_start_offset == 10 and log.batches == [], broker
        assert len(log.segments) == 1 and log.segments[0].size == 0
        assert log.log_start_offset <= h.replica(broker).high_watermark


def test_the_produce_response_carries_the_log_start_offset():
    """PartitionResponse.logStartOffset: what a producer told UNKNOWN_PRODUCER_ID compares
    with its last acknowledged offset (TransactionManager.canRetry)."""
    h = Harness(brokers=1, rf=1)
    h.run(SESSION_MS)
    for seq in range(3):
        assert h.produce((f"v{seq}",), seq).log_start_offset == 0
    assert h.cluster.brokers["broker-0"].log_manager.delete_records(TP, 2) is Errors.NONE
    answer = h.produce(("v3",), 3)
    assert (answer.error, answer.base_offset, answer.log_start_offset) == (Errors.NONE, 3, 2)
    refused = h.produce(("x",), 9)  # out of sequence: the error carries it too
    assert (refused.error, refused.log_start_offset) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 2)


def test_producer_state_outlives_deleted_records_and_a_restart():
    """KAFKA-7190 (Kafka 2.4): a producer whose records were all deleted is still known, and in
    eosim also after a restart (the deleted head's state, loaded as a snapshot: its last
    batch): its retry is a duplicate, not a second copy. Kafka keeps it across a restart only
    in a snapshot above the log start, and here there is none (DeleteRecords to the log end):
    a departure, docs/model.md 5."""
    h = Harness(brokers=1, rf=1)
    h.run(SESSION_MS)
    for seq in range(3):
        h.produce((f"v{seq}",), seq)
    broker = h.cluster.brokers["broker-0"]
    assert broker.log_manager.delete_records(TP, HIGH_WATERMARK) is Errors.NONE
    broker.crash()
    broker.restart()
    h.run(SESSION_MS + 200)
    again = h.produce(("v2",), 2)  # a retry of the last batch
    assert (again.error, again.base_offset) == (Errors.NONE, 2)
    assert h.replica("broker-0").log.log_end_offset == 3
    assert h.produce(("v3",), 3).base_offset == 3


def test_a_power_loss_does_not_bring_deleted_records_back_or_move_the_start_down():
    """LogLoader: a log whose unflushed tail is lost restarts at its checkpointed start, not
    below it."""
    h = Harness(brokers=1, rf=1)
    h.run(SESSION_MS)
    for seq in range(4):
        h.produce((f"v{seq}",), seq)
    broker = h.cluster.brokers["broker-0"]
    assert broker.log_manager.delete_records(TP, 2) is Errors.NONE
    broker.power_loss()  # nothing was flushed or written back yet
    broker.restart()
    h.run(SESSION_MS + 200)
    log = h.replica("broker-0").log
    assert log.log_start_offset == 2 == log.log_end_offset


def test_producer_ids_expire_on_followers_too_and_not_while_the_broker_is_paused():
    """UnifiedLog's PeriodicProducerExpirationCheck runs on every replica; a paused broker
    checks nothing until it resumes."""
    h = Harness(
        housekeeping=LogManagerSettings(
            producer_id_expiration_ms=300.0, producer_id_expiration_check_interval_ms=100.0
        )
    )
    h.run(5)
    h.produce(("a",), 0)
    h.run(50)
    assert all(7 in h.replica(b).producer_state.producers for b in h.cluster.brokers)
    h.cluster.brokers["broker-2"].pause()
    h.run(400)
    assert 7 not in h.replica("broker-0").producer_state.producers
    assert 7 not in h.replica("broker-1").producer_state.producers
    assert 7 in h.replica("broker-2").producer_state.producers
    h.cluster.brokers["broker-2"].resume()
    h.run(100)
    assert 7 not in h.replica("broker-2").producer_state.producers


def test_a_batch_larger_than_a_segment_is_refused():
    """UnifiedLog.append: RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE)."""
    h = Harness(brokers=1, rf=1, log=LogConfig(segment_bytes=100))
    h.run(SESSION_MS)
    assert h.produce(("small",), 0).error is Errors.NONE
    refused = h.produce(tuple("x" * 10 for _ in range(10)), 1)
    assert refused.error is Errors.RECORD_LIST_TOO_LARGE
    assert h.replica("broker-0").log.log_end_offset == 1


# -- scenario keys -------------------------------------------------------------------------
SCENARIO = """\
name: s
cluster:
  brokers: 1
  config:
    log.retention.check.interval.ms: 1000
    producer.id.expiration.ms: 5000
  topics:
    - name: events
      partitions: 1
      config:
        retention.ms: 2000
        segment.ms: 500
producers:
  - name: p
    workload: {topic: events, records: 10}
"""


def test_log_configs_reach_the_brokers_and_topics():
    settings = ClusterSettings.from_scenario(parse_scenario(SCENARIO, "s.yaml"))
    assert settings.log == LogManagerSettings(
        log_retention_check_interval_ms=1000.0, producer_id_expiration_ms=5000.0
    )
    assert settings.topics["events"].log == LogConfig(retention_ms=2000.0, segment_ms=500.0)
    defaults = ClusterSettings.from_scenario(
        parse_scenario(SCENARIO.replace("        retention.ms: 2000\n", ""), "s.yaml")
    )
    assert defaults.topics["events"].log.retention_ms == 604_800_000.0  # 7 days
    unlimited = parse_scenario(SCENARIO.replace("retention.ms: 2000", "retention.ms: -1"), "s")
    assert ClusterSettings.from_scenario(unlimited).topics["events"].log.retention_ms is None
    # The broker-wide defaults, overridden by the topic's own.
    broker_wide = parse_scenario(
        SCENARIO.replace(
            "producer.id.expiration.ms: 5000",
            "log.retention.bytes: 4096\n    log.segment.bytes: 1024\n    log.roll.ms: 100",
        ),
        "s.yaml",
    )
    log = ClusterSettings.from_scenario(broker_wide).topics["events"].log
    assert (log.retention_bytes, log.segment_bytes, log.segment_ms) == (4096, 1024, 500.0)


def test_bad_log_configs_are_one_line_naming_the_path():
    cases = [
        (
            "retention.ms: 2000",
            "retention.ms: -2",
            "s.yaml:11: cluster.topics[0].config.retention.ms: Invalid value -2 for "
            "configuration retention.ms: value must be in [-1, 9223372036854775807]",
        ),
        (
            "segment.ms: 500",
            "segment.bytes: 13",
            "s.yaml:12: cluster.topics[0].config.segment.bytes: Invalid value 13 for "
            "configuration segment.bytes: value must be in [14, 2147483647]",
        ),
        (
            "producer.id.expiration.ms: 5000",
            "producer.id.expiration.ms: 0",
            "s.yaml:6: cluster.config.producer.id.expiration.ms: Invalid value 0 for "
            "configuration producer.id.expiration.ms: value must be in [1, 2147483647]",
        ),
        (
            "producer.id.expiration.ms: 5000",
            "log.retention.ms: 0",
            "s.yaml:6: cluster.config.log.retention.ms: Invalid value 0 for configuration "
            "log.retention.ms: must be unlimited (-1) or at least 1",
        ),
        (
            "log.retention.check.interval.ms: 1000",
            "producer.id.expiration.check.interval.ms: 0s",
            "s.yaml:5: cluster.config.producer.id.expiration.check.interval.ms: Invalid value 0s "
            "for configuration producer.id.expiration.check.interval.ms: expected an integer in "
            "[1, 2147483647]",
        ),
        (
            "segment.ms: 500",
            "log.retention.check.interval.ms: 5",
            "s.yaml:12: cluster.topics[0].config.log.retention.check.interval.ms: "
            "'log.retention.check.interval.ms' is a broker config, not a topic config: "
            "set it in cluster.config",
        ),
    ]
    for old, new, expected in cases:
        with pytest.raises(ScenarioError) as exc:
            parse_scenario(SCENARIO.replace(old, new), "s.yaml")
        assert str(exc.value) == expected


# -- the client's UNKNOWN_PRODUCER_ID, end to end ----------------------------------------------
UNKNOWN = """\
name: unknown-producer
kafka:
  version: "3.9"
  rules: {accept_unknown_producer_any_sequence: false, transaction_partition_verification: false}
cluster:
  brokers: 1
  config:
    producer.id.expiration.ms: 1000
    producer.id.expiration.check.interval.ms: 200
    log.retention.check.interval.ms: 200
    log.initial.task.delay.ms: 0
  topics:
    - {name: events, partitions: 1, config: {retention.ms: 500, segment.ms: 100}}
transactional_producers:
  - name: writer
    workload: {topic: events, transactions: 4, size: 2, rate: 0.5}
"""


def txn_outcomes(text: str, *overrides: str) -> list[tuple[str, str | None]]:
    scenario = parse_scenario(text, "s.yaml", overrides)
    records = run_scenario(scenario).history.records()
    return [
        (r["type"], r.get("error"))
        for r in records
        if r["kind"] == "op" and r["f"] == "txn" and r["type"] != "invoke"
    ]


@pytest.mark.parametrize(
    ("retention_ms", "failed"),
    [("500", 0), ("-1", 2)],
)
def test_unknown_producer_id_below_the_log_start_restarts_the_sequence(
    retention_ms: str, failed: int
):
    """Before KIP-360's broker rule (UNKNOWN_PRODUCER_ID for a producer the partition forgot):
    between transactions the writer's entry expires (1 s idle). Where retention has also
    deleted its records, the answer's log start offset is above the writer's last acknowledged
    offset, and TransactionManager.canRetry restarts the partition's sequence at 0 and retries:
    every transaction commits. Where nothing was deleted, the batch fails and the transaction
    aborts (an abortable error)."""
    outcomes = txn_outcomes(UNKNOWN, f"cluster.topics.events.config.retention.ms={retention_ms}")
    assert len(outcomes) == 4
    errors = [error for outcome, error in outcomes if outcome == "fail"]
    assert errors == ["UnknownProducerIdException: UNKNOWN_PRODUCER_ID"] * failed


# -- the delete_records fault ----------------------------------------------------------------
DELETE = """\
name: del
cluster:
  brokers: 3
  topics: [{name: events, partitions: 2, replication_factor: 3}]
producers:
  - name: p
    config: {acks: all}
    workload: {topic: events, records: 1000, rate: 200}
faults:
  - {kind: delete_records, topic: events, at: 2s}
  - {kind: delete_records, topic: events, partition: 1, offset: 100000, at: 3s}
"""


def test_the_delete_records_fault_deletes_up_to_each_high_watermark():
    """The leaders delete below their high watermarks, the followers follow; the history's
    fault line gives each leader's log start, the logs say where they start, and no write
    acknowledged below a log start is judged lost."""
    records = list(run_scenario(parse_scenario(DELETE, "d.yaml"), 1).history.records())
    deletes = [r for r in records if r["kind"] == "fault" and r["fault"] == "delete_records"]
    assert [(r["phase"], r["targets"]) for r in deletes] == [
        ("start", ["events-0", "events-1"]),
        ("stop", ["events-0", "events-1"]),
        ("start", ["events-1"]),
        ("stop", ["events-1"]),
    ]
    first, second = deletes[0], deletes[2]
    starts = first["log_start_offsets"]
    assert first["offset"] == -1 and "errors" not in first and min(starts.values()) > 0
    assert second["errors"] == {"events-1": "OFFSET_OUT_OF_RANGE"}
    assert second["log_start_offsets"] == {"events-1": starts["events-1"]}
    for r in records:
        if r["kind"] in ("log", "replica"):
            start = starts[f"{r['topic']}-{r['partition']}"]
            assert r["log_start_offset"] == start and r["records"][0]["offset"] >= start
    found = check_history(history_from_records(records))
    assert found.anomalies["lost_write"].count == 0
    assert found.anomalies["replica_divergence"].count == 0


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            "{kind: delete_records, at: 1s}",
            "faults[0]: a delete_records fault needs a 'topic'",
        ),
        (
            "{kind: delete_records, topic: events, at: 1s, duration: 1s}",
            "faults[0]: a delete_records fault is instantaneous: it takes no 'duration'",
        ),
        (
            "{kind: delete_records, topic: events, nodes: [broker-0], at: 1s}",
            "faults[0]: a delete_records fault names a 'topic' (and 'partition'), not nodes or "
            "links",
        ),
        ("{kind: delete_records, topic: evnts, at: 1s}", "faults[0].topic: unknown topic 'evnts'"),
        (
            "{kind: delete_records, topic: events, partition: 2, at: 1s}",
            "faults[0].partition: must be in [0, 1] for topic 'events'",
        ),
        (
            "{kind: delete_records, topic: events, offset: -2, at: 1s}",
            "faults[0].offset: input should be greater than or equal to -1",
        ),
        ("{kind: crash, nodes: [broker-0], at: 1s}", "faults[0]: a crash fault needs a 'duration'"),
        (
            "{kind: crash, nodes: [broker-0], at: 1s, duration: 1s, topic: events}",
            "faults[0]: 'topic' applies to delete_records faults only",
        ),
    ],
)
def test_a_bad_delete_records_fault_is_one_line_naming_the_path(fault: str, expected: str):
    text = DELETE.split("faults:")[0] + f"faults:\n  - {fault}\n"
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(text, "d.yaml")
    assert expected in str(exc.value) and "\n" not in str(exc.value)


# -- segments, at the log's level -----------------------------------------------------------------
def _log(config: LogConfig, n: int) -> PartitionLog:
    log = PartitionLog(*TP, config)
    for i in range(n):
        log.append(-1, -1, -1, ("test",), float(i), timestamp=float(i))
    return log


def test_a_check_with_kafkas_defaults_works_nothing_out():
    """Retention that cannot delete anything (7 days, no size limit, nothing deleted by hand)
    costs nothing per record: the segments are not even worked out."""
    log = _log(LogConfig(), 100)
    assert log.delete_old_segments(60_000.0, 100, ProducerStateManager()) == 0
    assert log.segments == [Segment(0)]
    assert log.number_of_segments == 1 and log.size == 100 * batch_size(("test",))


def test_a_truncation_across_segments_keeps_each_segments_bytes():
    """LocalLog.truncateTo: segments that began after the new end go; the last one left keeps
    the bytes of its batches below it."""
    size = batch_size(("test",))
    log = _log(LogConfig(segment_bytes=size * 5), 15)
    assert log.number_of_segments == 3
    log.truncate_to(3)
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 3 * size)]
    assert log.segments[0].largest_timestamp == 2.0
    for i in range(3, 8):
        log.append(-1, -1, -1, ("test",), float(i), timestamp=float(i))
    assert log.number_of_segments == 2  # rolled again where the first fills up
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 5 * size), (5, 3 * size)]
