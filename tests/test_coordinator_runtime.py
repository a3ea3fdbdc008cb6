"""The coordinator runtime and its two request paths (issue 20, "classes by request path"):
each coordinator request is handled by exactly one path, the transaction requests by
:class:`TransactionCoordinatorHandlers` and the group requests by
:class:`GroupCoordinatorService`, and the runtime gets its collaborators through its
constructor."""

from __future__ import annotations

import pytest
from conformance.cluster import Cluster

import eosim.simulation.cluster as cluster_module
from eosim.simulation.coordinator.group_coordinator_service import GroupCoordinatorService
from eosim.simulation.coordinator.runtime import Handler
from eosim.simulation.coordinator.transaction_coordinator_handlers import (
    TransactionCoordinatorHandlers,
)
from eosim.simulation.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBrokerRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupHeartbeatRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)

TRANSACTION_REQUESTS = {
    InitProducerIdRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnBrokerRequest,
    AddOffsetsToTxnRequest,
    EndTxnRequest,
}
GROUP_REQUESTS = {
    FindCoordinatorRequest,
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    ConsumerGroupHeartbeatRequest,
    OffsetCommitRequest,
    TxnOffsetCommitRequest,
    OffsetFetchRequest,
}


def test_each_coordinator_request_goes_to_its_request_path() -> None:
    runtime = Cluster().brokers["broker-0"].coordinator
    assert runtime is not None
    assert isinstance(runtime.txn_handlers, TransactionCoordinatorHandlers)
    assert isinstance(runtime.group_service, GroupCoordinatorService)
    assert set(runtime.txn_handlers.dispatch_table()) == TRANSACTION_REQUESTS
    assert set(runtime.group_service.dispatch_table()) == GROUP_REQUESTS
    assert set(runtime.handlers) == TRANSACTION_REQUESTS | GROUP_REQUESTS
    for request_type, handler in runtime.handlers.items():
        owner = (
            runtime.txn_handlers if request_type in TRANSACTION_REQUESTS else runtime.group_service
        )
        assert handler.__self__ is owner  # type: ignore[attr-defined]


def test_a_request_handled_by_both_paths_is_refused_when_the_runtime_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Greedy(GroupCoordinatorService):
        def dispatch_table(self) -> dict[type, Handler]:
            return {**super().dispatch_table(), EndTxnRequest: self._offset_fetch}

    monkeypatch.setattr(cluster_module, "GroupCoordinatorService", Greedy)
    with pytest.raises(ValueError, match="EndTxnRequest is handled by both request paths"):
        Cluster()


@pytest.mark.parametrize(("version", "adds"), [("3.9", False), ("4.0", True)])
def test_the_runtime_gets_its_collaborators_through_its_constructor(
    version: str, adds: bool
) -> None:
    """The broker's ``hold``, the cluster's ``activate``, and under transaction version 2
    (Kafka 4.0) the cluster's way to add a partition to a transaction (none before)."""
    cl = Cluster(version=version)
    for name, broker in cl.brokers.items():
        runtime = broker.coordinator
        assert runtime is not None and runtime.node == name
        assert runtime.hold == broker.hold_current
        assert runtime.activate == cl.activate
        assert (runtime.add_partition is not None) is adds
        assert runtime.member_id_stream is None  # no streams: member ids from a stream seeded 0
