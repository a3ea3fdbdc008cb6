"""KIP-890: a produce request that lands after its transaction ended.

The shipped scenario delays the writer's requests to one partition leader past
delivery.timeout.ms, from just before its last transaction. The writer aborts; the late
request then reaches the leader after the ABORT marker. Whether it opens a transaction
nobody ends depends on one rule (`transaction_partition_verification`, KIP-890 part 1) and
on the transaction version (part 2 bumps the epoch at every end, so the markers fence the
late request).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "hanging-transaction.yaml"
VERIFY = "kafka.rules.transaction_partition_verification=true"


def run(*overrides: str, seed: int | None = None) -> tuple[dict[str, int], list[dict]]:
    scenario = load_scenario(SCENARIO, overrides)
    records = list(run_scenario(scenario, seed).history.records())
    verdict = check_history(history_from_records(records))
    return {n: a.count for n, a in verdict.anomalies.items() if a.count}, records


def lso_lines(records: list[dict]) -> list[dict]:
    return [r for r in records if r["kind"] == "lso"]


@pytest.mark.parametrize("seed", [1, 2])
def test_late_request_hangs_the_partition_without_verification(seed):
    found, records = run(seed=seed)
    assert found.get("hanging_transaction") == 1
    assert "aborted_read" not in found and "lost_write" not in found
    (line,) = lso_lines(records)
    assert line["lso"] < line["log_end_offset"] and line["open_transactions"]


@pytest.mark.parametrize("overrides", [(VERIFY,), ("kafka.version=4.0",)], ids=["kip890-1", "tv2"])
def test_late_request_is_refused_by_verification_or_epoch_bump(overrides):
    found, records = run(*overrides)
    assert found == {}
    (line,) = lso_lines(records)
    assert line["lso"] == line["log_end_offset"] and not line["open_transactions"]


def test_stray_joins_the_next_transaction_and_aborted_data_commits():
    # The delay ends while the writer is still writing: the connection it opened during the
    # delay becomes ready soon after the stray lands, and its next transaction on the same
    # partition ends the stray's "transaction" with a COMMIT marker. (With a delay lasting
    # longer, the next transactions could not reach the leader and their ABORT markers would
    # sweep the stray up instead.)
    late_end = ("faults.0.duration=5s", "transactional_producers.0.workload.transactions=40")
    found, _ = run(*late_end)
    assert found.get("aborted_read", 0) > 0 and "hanging_transaction" not in found
    # KIP-890 part 1 does not stop this one. The batch expired while the writer was
    # committing, so Kafka's client aborts without bumping its epoch
    # (TransactionManager.maybeTransitionToErrorState: no bump while completing); the late
    # request, still at that epoch, is verified against the *next* transaction, which has the
    # partition, and its sequence continues the log's. Only transaction version 2, whose
    # epoch changes with every transaction, refuses it (KIP-890 part 2's motivation).
    found, _ = run(*late_end, VERIFY)
    assert found.get("aborted_read", 0) > 0 and "hanging_transaction" not in found
    found, _ = run(*late_end, "kafka.version=4.0")
    assert found == {}


def test_dropping_requests_after_close_hides_the_bug():
    # The departure switch: if a closed connection lost its in-flight requests (it does not
    # on TCP), nothing would arrive late.
    found, _ = run("network.in_flight_after_close=drop")
    assert found == {}


def test_kafkas_closed_connection_rule_still_writes_the_late_request():
    # until_reset (Kafka's Selector: a closed connection's requests are handled until a send
    # on it fails) drops only what follows the first answers; the late produce is the first
    # request buffered on its connection, so the transaction still hangs.
    found, _ = run("network.in_flight_after_close=until_reset")
    assert found == {"hanging_transaction": 1}
