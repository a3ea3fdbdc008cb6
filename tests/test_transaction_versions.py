"""Transaction version 2 end to end (KIP-890 part 2, the 4.0 preset) against version 1.

Under version 2 the client sends neither AddPartitionsToTxn nor AddOffsetsToTxn: partition
leaders and the group coordinator add partitions to the transaction themselves. Exactly-once
holds either way.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eosim.analysis.checks import check_history
from eosim.analysis.history import history_from_records
from eosim.simulation.coordinator.runtime import CoordinatorRuntime
from eosim.simulation.runner import run_scenario
from eosim.simulation.scenario import load_scenario

PIPELINE = Path(__file__).resolve().parents[1] / "scenarios" / "transactional-pipeline.yaml"


@pytest.mark.parametrize("version", ["3.9", "4.0"])
def test_pipeline_requests_by_transaction_version(monkeypatch, version):
    seen: Counter[str] = Counter()
    handle = CoordinatorRuntime.handle

    def counting(self, request):  # type: ignore[no-untyped-def]
        seen[type(request).__name__] += 1
        return handle(self, request)

    monkeypatch.setattr(CoordinatorRuntime, "handle", counting)
    scenario = load_scenario(PIPELINE, (f"kafka.version={version}",))
    records = list(run_scenario(scenario, 1).history.records())
    verdict = check_history(history_from_records(records))
    assert {n: a.count for n, a in verdict.anomalies.items() if a.count} == {}
    assert seen["EndTxnRequest"] > 0 and seen["TxnOffsetCommitRequest"] > 0
    client_adds = seen["AddPartitionsToTxnRequest"] + seen["AddOffsetsToTxnRequest"]
    assert (client_adds == 0) == (version == "4.0")
