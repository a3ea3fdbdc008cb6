"""Transaction markers at a replicated leader: written with acks=all by the coordinator, so
refused under min.insync.replicas like any acks=all write, and retried by the coordinator's
marker channel until the partition can take them (KafkaApis.handleWriteTxnMarkersRequest,
Partition.appendRecordsToLeader, TransactionMarkerRequestCompletionHandler)."""

from __future__ import annotations

import pytest
from test_replication import SESSION_MS, TP, Harness

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.protocol import BatchData, Errors, ProduceRequest, WriteTxnMarkersRequest
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import parse_scenario

PID = 7
# A producer that writes to the leader directly, without a coordinator to verify it with.
UNVERIFIED = {"transaction_version": 1, "transaction_partition_verification": False}


def open_transaction(h: Harness) -> None:
    """A transactional batch of producer 7 at epoch 0 on the leader (acks=1)."""
    data = BatchData(PID, 0, 0, ("x",), transactional=True)
    h.send("broker-0", lambda cid: ProduceRequest(cid, 1, [(TP, data)], timeout_ms=500.0))
    h.run(5)


def marker(h: Harness) -> int:
    return h.send("broker-0", lambda cid: WriteTxnMarkersRequest(cid, PID, 0, True, 0, (TP,)))


def test_a_marker_is_refused_under_min_isr_before_it_is_appended():
    """Partition.appendRecordsToLeader's min-ISR check applies to the coordinator's marker
    appends (requiredAcks -1): NOT_ENOUGH_REPLICAS, nothing appended, the producer's
    transaction still open; once the followers are back in the ISR the marker is written."""
    h = Harness(min_isr=2, rules=UNVERIFIED)
    h.run(5)
    open_transaction(h)
    for b in ("broker-1", "broker-2"):
        h.cluster.brokers[b].crash()
    h.run(SESSION_MS + 50)
    assert h.cluster.controller.registrations[TP].isr == ("broker-0",)
    leader = h.replica("broker-0")
    end = leader.log.log_end_offset
    refused = marker(h)
    h.run(5)
    assert h.answer(refused)[1].results == [(TP, Errors.NOT_ENOUGH_REPLICAS)]  # type: ignore[index]
    assert leader.log.log_end_offset == end
    assert PID in leader.log.ongoing
    for b in ("broker-1", "broker-2"):
        h.cluster.brokers[b].restart()
    h.run(2_000)
    assert len(h.cluster.controller.registrations[TP].isr) >= 2
    accepted = marker(h)
    h.run(200)
    assert h.answer(accepted)[1].results == [(TP, Errors.NONE)]  # type: ignore[index]
    assert PID not in leader.log.ongoing


# RF 3, min.insync.replicas 3, a transactional producer, and the link between two brokers
# lost for a while: the ISR of the partitions those two share shrinks below the minimum.
MIN_ISR_3 = """
name: markers-min-isr-3
duration: 90s
cluster:
  brokers: 3
  config: {replica.lag.time.max.ms: 1000}
  topics:
    - {name: out, partitions: 6, replication_factor: 3, config: {min.insync.replicas: 3}}
transactional_producers:
  - name: tx
    config: {delivery.timeout.ms: 3000, request.timeout.ms: 1000}
    workload: {topic: out, transactions: 60, size: 6, rate: 10, keys: 12,
               abort_probability: 0.3}
consumers:
  - {name: reader, topic: out, isolation: read_committed, auto.offset.reset: earliest}
faults:
  - {kind: loss, links: [[broker-0, broker-1], [broker-1, broker-0]], probability: 1.0,
     at: 1s, duration: 20s}
"""


@pytest.mark.parametrize("hw_advances", [True, False])
@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_markers_under_min_isr_are_retried_until_written(hw_advances: bool, version: str):
    """Issue 17.4: markers used to be appended below min.insync.replicas, and the
    NOT_ENOUGH_REPLICAS_AFTER_APPEND that followed (HW moving with the shrunk ISR, before
    KIP-966) stopped the run with UnexpectedMarkerError. Now every transaction ends, and
    no anomaly of any kind is found."""
    scenario = parse_scenario(
        MIN_ISR_3,
        "t.yaml",
        [f"kafka.version={version}", f"kafka.rules.hw_advances_under_min_isr={hw_advances}"],
    )
    result = run_scenario(scenario, 1)
    assert result.counts["sent"] == 60
    verdict = check_history(history_from_records(list(result.history.records())))
    assert not {name: a.count for name, a in verdict.anomalies.items() if a.count}
