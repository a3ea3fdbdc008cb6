"""The two replication checks, `replica_divergence` (kafka-tlaplus `LogMatchingProperty`) and
`offset_rewrite` (kafka-tlaplus `ConsistentReadProperty`), each on a history that has the
anomaly and on close ones that do not (the lines they read: tests/test_replica_lines.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from histories import Builder

from eosim import api
from eosim.analysis.checks import ALL_ANOMALIES, REPLICATION_ANOMALIES, check_history
from eosim.analysis.expect import EXPECTABLE, evaluate, unknown_expect_key
from eosim.analysis.explain import describe
from eosim.analysis.history import History, history_from_records
from eosim.analysis.replica_checker import check_replicas
from eosim.analysis.rewrite_checker import check_rewrites
from eosim.analysis.timeline import values_of

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = str(ROOT / "scenarios" / "at-least-once.yaml")
SMALL = ("producers.0.workload.records=200", "producers.0.workload.rate=3000")


def divergence(history: History) -> Any:
    return check_replicas(history)["replica_divergence"]


def rewrite(history: History) -> Any:
    return check_rewrites(history)["offset_rewrite"]


# -- replica_divergence ----------------------------------------------------------------------


def test_a_history_without_replication_lines_has_neither_anomaly() -> None:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.poll("c/0", [("t", 0, 0, "a")])
    h.log("t", 0, ["a"])
    result = check_history(h.history())
    assert result.anomalies["replica_divergence"].count == 0
    assert result.anomalies["offset_rewrite"].count == 0


@pytest.mark.parametrize(("settled", "count"), [(None, 1), (True, 1), (False, 0)])
def test_a_follower_that_could_still_truncate_is_not_judged(settled: bool | None, count: int):
    """An old leader whose fetcher had not yet reached the new leader when the run ended keeps
    records its next fetch will cut (its high watermark covers them): not a divergence yet.
    A line without `settled` (older eosim, or another tool) is judged."""
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b"], leader=True, leader_epoch=2)
    h.replica("events", 0, "broker-2", ["a", "x"], leader_epoch=1, settled=settled)
    assert divergence(h.history()).count == count


def test_replicas_disagreeing_below_both_high_watermarks_diverge() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "c"], leader=True, leader_epoch=2)
    h.replica("events", 0, "broker-2", ["a", "x", "c"], leader_epoch=2, high_watermark=2)

    anomaly = divergence(h.history())

    assert anomaly.count == 1
    (example,) = anomaly.examples
    assert example == {
        "topic": "events",
        "partition": 0,
        "offset": 1,
        "replicas": [
            {
                "broker": "broker-1",
                "leader": True,
                "leader_epoch": 2,
                "high_watermark": 3,
                "log_end_offset": 3,
                "entry": {"record": "b", "producer_id": 1000, "epoch": None, "sequence": None},
            },
            {
                "broker": "broker-2",
                "leader": False,
                "leader_epoch": 2,
                "high_watermark": 2,
                "log_end_offset": 3,
                "entry": {"record": "x", "producer_id": 1000, "epoch": None, "sequence": None},
            },
        ],
        "diverging_pairs": 1,
        "pairs": [{"brokers": ["broker-1", "broker-2"], "offset": 1}],
    }
    text = describe("replica_divergence", example)
    assert text == (
        "events-0@1 below both high watermarks: broker-1 (leader, epoch 2, high watermark 3) "
        "has b, broker-2 (follower, epoch 2, high watermark 2) has x"
    )
    assert values_of("replica_divergence", example) == ["b", "x"]


def test_a_lagging_follower_with_a_shorter_log_does_not_diverge() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "c", "d"], leader=True)
    h.replica("events", 0, "broker-2", ["a", "b"], high_watermark=1)
    assert divergence(h.history()).count == 0


def test_a_different_tail_above_a_high_watermark_is_not_judged() -> None:
    """A follower that has not yet truncated to the new leader: its uncommitted tail differs
    from the leader's log, but only at and above its own high watermark."""
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "n1", "n2"], leader=True, leader_epoch=3)
    h.replica("events", 0, "broker-2", ["a", "b", "o1"], leader_epoch=2, high_watermark=2)
    assert divergence(h.history()).count == 0


def test_a_high_watermark_above_the_log_end_is_bounded_by_it() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "c"], leader=True)
    h.replica("events", 0, "broker-2", ["a"], high_watermark=3, log_end_offset=1)
    assert divergence(h.history()).count == 0


def test_a_gap_at_a_marker_offset_on_both_replicas_is_no_divergence() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", {0: "a", 1: "b", 3: "c"}, leader=True, markers={2: "COMMIT"})
    h.replica("events", 0, "broker-2", {0: "a", 1: "b", 3: "c"}, markers={2: "COMMIT"})
    assert divergence(h.history()).count == 0


@pytest.mark.parametrize(
    ("other", "markers", "entry"),
    [
        ({0: "a", 1: "b", 2: "z", 3: "c"}, {}, {"record": "z"}),  # a record against a marker
        ({0: "a", 1: "b", 3: "c"}, {}, None),  # a gap against a marker
        ({0: "a", 1: "b", 3: "c"}, {2: "ABORT"}, {"marker": "ABORT"}),  # another marker type
    ],
)
def test_a_marker_on_one_replica_only_diverges(
    other: dict[int, str], markers: dict[int, str], entry: dict[str, Any] | None
) -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", {0: "a", 1: "b", 3: "c"}, leader=True, markers={2: "COMMIT"})
    h.replica("events", 0, "broker-2", other, markers=markers, log_end_offset=4)
    anomaly = divergence(h.history())
    assert anomaly.count == 1
    example = anomaly.examples[0]
    assert example["offset"] == 2
    assert example["replicas"][0]["entry"] == {"marker": "COMMIT", "producer_id": 1000}
    got = example["replicas"][1]["entry"]
    if entry is None:
        assert got is None
    else:
        assert {k: got[k] for k in entry} == entry


def test_a_record_missing_from_one_replica_below_both_high_watermarks_diverges() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", {0: "a", 1: "b", 2: "c"}, leader=True)
    h.replica("events", 0, "broker-2", {0: "a", 2: "c"}, log_end_offset=3)
    example = divergence(h.history()).examples[0]
    assert example["offset"] == 1
    assert [r["entry"] for r in example["replicas"]][1] is None
    assert "broker-2 (follower, epoch 0, high watermark 3) has nothing" in describe(
        "replica_divergence", example
    )


def test_producer_fields_are_compared_only_where_both_replicas_state_them() -> None:
    def line(broker: str, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "replica",
            "topic": "t",
            "partition": 0,
            "broker": broker,
            "leader": broker == "broker-1",
            "leader_epoch": 0,
            "high_watermark": 1,
            "log_end_offset": 1,
            "records": [record],
        }

    same = [
        line("broker-1", {"offset": 0, "value": "a", "producer_id": 7, "epoch": 0}),
        line("broker-2", {"offset": 0, "value": "a", "producer_id": None, "time": 99.0}),
    ]
    assert divergence(history_from_records(same)).count == 0
    other_producer = [
        line("broker-1", {"offset": 0, "value": "a", "producer_id": 7}),
        line("broker-2", {"offset": 0, "value": "a", "producer_id": 8}),
    ]
    assert divergence(history_from_records(other_producer)).count == 1


def test_divergence_counts_once_per_partition_with_every_pair_listed() -> None:
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b"], leader=True)
    h.replica("events", 0, "broker-2", ["a", "b"])
    h.replica("events", 0, "broker-3", ["x", "b"])  # disagrees with both others at 0
    h.replica("events", 1, "broker-1", ["c"])
    h.replica("events", 1, "broker-2", ["d"], leader=True)
    h.replica("other", 0, "broker-1", ["e"], leader=True)  # agrees with nobody but is alone

    anomaly = divergence(h.history())

    assert anomaly.count == 2
    first, second = anomaly.examples
    assert (first["partition"], first["offset"], first["diverging_pairs"]) == (0, 0, 2)
    assert first["pairs"] == [
        {"brokers": ["broker-1", "broker-3"], "offset": 0},
        {"brokers": ["broker-2", "broker-3"], "offset": 0},
    ]
    assert [r["broker"] for r in first["replicas"]] == ["broker-1", "broker-3"]
    assert (second["partition"], second["diverging_pairs"]) == (1, 1)


# -- offset_rewrite --------------------------------------------------------------------------


def truncated_and_rewritten(final: list[str] | dict[int, str]) -> Builder:
    """A consumer reads "a" at offset 1 from a leader whose tail is then truncated by a new
    leader (its log ends at 1); the final log is `final`."""
    h = Builder()
    h.send("p/0", "z", offset=0)
    h.send("p/0", "a", offset=1)
    h.poll("c/0", [("t", 0, 0, "z"), ("t", 0, 1, "a")])  # invoked at 5, completed at 6
    h.log("t", 0, final, leader="broker-2", high_watermark=2)
    return h


def test_a_read_value_replaced_in_the_final_log_is_rewritten() -> None:
    result = check_history(truncated_and_rewritten(["z", "b"]).history())

    anomaly = result.anomalies["offset_rewrite"]
    assert anomaly.count == 1
    assert anomaly.examples[0] == {
        "topic": "t",
        "partition": 0,
        "offset": 1,
        "read": {
            "value": "a",
            "process": "c/0",
            "invoke_time": 5.0,
            "time": 6.0,
            "isolation": "read_uncommitted",
        },
        "later": {
            "source": "final log",
            "value": "b",
            "leader": "broker-2",
            "high_watermark": 2,
        },
        "reads": 1,
    }
    # The unordered check sees the same position; the lost acknowledged write is its own.
    assert result.anomalies["inconsistent_offsets"].count == 1
    assert result.anomalies["lost_write"].count == 1
    text = describe("offset_rewrite", anomaly.examples[0])
    assert text == "c/0 read a at t-0@1 at 6 ms, but the final log (leader broker-2) holds b there"
    assert values_of("offset_rewrite", anomaly.examples[0]) == ["a", "b"]


def test_a_read_truncated_and_never_rewritten_is_no_rewrite() -> None:
    result = check_history(truncated_and_rewritten(["z"]).history())
    assert result.anomalies["offset_rewrite"].count == 0
    assert result.anomalies["lost_write"].count == 1  # "a" is lost: another check's finding


def test_reads_below_the_final_log_end_that_match_are_no_rewrite() -> None:
    h = truncated_and_rewritten(["z", "a", "b"])
    h.poll("c/1", [("t", 0, 1, "a"), ("t", 0, 2, "b")])
    assert rewrite(h.history()).count == 0


def test_a_later_poll_of_another_value_is_a_rewrite() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 5, "a")])  # 1-2
    h.poll("c/1", [("t", 0, 5, "b")])  # 3-4: invoked after the first completed
    h.poll("c/0", [("t", 0, 5, "b")])  # the same change again: still one position

    anomaly = rewrite(h.history())

    assert anomaly.count == 1
    later = anomaly.examples[0]["later"]
    assert later == {
        "source": "poll",
        "value": "b",
        "process": "c/1",
        "invoke_time": 3.0,
        "time": 4.0,
        "isolation": "read_uncommitted",
    }
    assert anomaly.examples[0]["reads"] == 3
    text = describe("offset_rewrite", anomaly.examples[0])
    assert text == "c/0 read a at t-0@5 at 2 ms, but c/1 read b there at 4 ms"


def test_overlapping_polls_that_disagree_are_not_ordered() -> None:
    """Which of two concurrent reads came first is unknown: the disagreement is an
    inconsistent_offsets only."""
    h = Builder()
    first = h.next_id
    h.next_id += 1
    h._op("invoke", "poll", "c/0", None, first)  # 1
    h.poll("c/1", [("t", 0, 5, "b")])  # 2-3, inside c/0's poll
    h._op("ok", "poll", "c/0", {"records": [_read("t", 0, 5, "a")]}, first)  # 4
    result = check_history(h.history())
    assert result.anomalies["offset_rewrite"].count == 0
    assert result.anomalies["inconsistent_offsets"].count == 1


def _read(topic: str, partition: int, offset: int, value: str) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "offset": offset, "value": value}


def test_a_read_record_replaced_by_a_control_marker_is_rewritten() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a")])
    h.log_records("t", 0, [], [{"offset": 0, "producer_id": 9, "type": "COMMIT", "time": 4.0}])
    result = check_history(h.history())
    anomaly = result.anomalies["offset_rewrite"]
    assert anomaly.count == 1
    assert anomaly.examples[0]["later"] == {
        "source": "final log",
        "marker": "COMMIT",
        "producer_id": 9,
    }
    assert result.anomalies["inconsistent_offsets"].count == 0  # markers are not values
    assert "holds a COMMIT marker there" in describe("offset_rewrite", anomaly.examples[0])


def test_rereading_the_same_value_is_no_rewrite() -> None:
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "a")])
    h.poll("c/1", [("t", 0, 0, "a")])
    h.log("t", 0, ["a"])
    assert rewrite(h.history()).count == 0


# -- registration ----------------------------------------------------------------------------


def test_both_checks_are_registered_and_expectable() -> None:
    assert REPLICATION_ANOMALIES == ("replica_divergence", "offset_rewrite")
    assert set(REPLICATION_ANOMALIES) <= set(ALL_ANOMALIES)
    for name in ("replica_divergence", "offset_rewrite"):
        assert name in EXPECTABLE and unknown_expect_key(name) is None
    problem = unknown_expect_key("replica_divergance")
    assert problem is not None and "did you mean 'replica_divergence'?" in problem
    result = check_history(truncated_and_rewritten(["z", "b"]).history())
    observed = {name: anomaly.count for name, anomaly in result.anomalies.items()}
    held = evaluate({"replica_divergence": 0, "offset_rewrite": 0}, observed)
    assert held.failures == ["offset_rewrite: expected 0, got 1"]


def test_a_scenario_may_expect_no_replica_divergence() -> None:
    overrides = (*SMALL, "expect.replica_divergence=0", "expect.offset_rewrite=0")
    outcome = api.run(api.load(SCENARIO, overrides), 1)
    assert list(outcome.check.anomalies) == list(ALL_ANOMALIES)
    checked = {item["key"]: item for item in outcome.expect.checked}
    assert checked["replica_divergence"] == {
        "key": "replica_divergence",
        "expected": "0",
        "actual": 0,
        "got": "0",
        "met": True,
    }
    assert checked["offset_rewrite"]["met"]


def test_replicas_are_compared_only_above_both_log_starts() -> None:
    """Each replica deletes its head in its own time (retention, DeleteRecords reaching the
    followers through their fetches): an offset one replica has deleted is no divergence; one
    above both starts still is."""
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "c", "d"], leader=True)
    h.replica("events", 0, "broker-2", {2: "c", 3: "d"}, log_start_offset=2)
    assert divergence(h.history()).count == 0
    h = Builder()
    h.replica("events", 0, "broker-1", ["a", "b", "c", "d"], leader=True)
    h.replica("events", 0, "broker-2", {2: "c", 3: "x"}, log_start_offset=2)
    found = divergence(h.history())
    assert found.count == 1 and found.examples[0]["offset"] == 3
