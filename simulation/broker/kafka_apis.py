"""The request handling of a broker that is not a path of its own: Kafka's ``KafkaApis``,
with ``handle`` (the dispatch by request type) and the small requests (ApiVersions,
Metadata, an idempotent producer's InitProducerId); every coordinator request, and a
transactional InitProducerId, goes to the broker's :class:`CoordinatorRuntime`.

The request paths have modules of their own, named as Kafka names the request handlers it
moves out of ``KafkaApis`` (``DescribeTopicPartitionsRequestHandler``):
:mod:`~eosim.simulation.broker.produce_request_handler` (Produce),
:mod:`~eosim.simulation.broker.fetch_request_handler` (Fetch, from consumers and followers,
and ListOffsets) and :mod:`~eosim.simulation.broker.write_txn_markers_request_handler`
(WriteTxnMarkers). What the broker's own threads receive goes to where Kafka handles it: a
follower's fetch answers and AlterPartition answers to the :class:`ReplicaManager`, the
controller's metadata to the :class:`BrokerMetadataPublisher`, registration and heartbeat
answers to the :class:`BrokerLifecycleManager`, marker answers to the coordinator's marker
channel, AddPartitionsToTxn answers to the broker's :class:`AddPartitionsToTxnManager`. To
add a request, see :meth:`KafkaApis._dispatch_table`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eosim.simulation.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from eosim.simulation.broker.fetch_request_handler import FetchRequestHandler
from eosim.simulation.broker.lifecycle import BrokerLifecycleManager
from eosim.simulation.broker.metadata_publisher import BrokerMetadataPublisher
from eosim.simulation.broker.produce_request_handler import ProduceRequestHandler
from eosim.simulation.broker.producer_id_manager import ProducerIdManager
from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.broker.socket_server import BrokerProcess, SocketServer
from eosim.simulation.broker.write_txn_markers_request_handler import (
    WriteTxnMarkersRequestHandler,
)
from eosim.simulation.coordinator.directory import is_internal
from eosim.simulation.coordinator.runtime import CoordinatorRuntime
from eosim.simulation.protocol import (
    AddPartitionsToTxnBrokerResponse,
    AlterPartitionResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    Disconnected,
    Errors,
    FetchRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    MetadataDelta,
    MetadataRequest,
    MetadataResponse,
    PartitionLeader,
    ProduceRequest,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from eosim.simulation.request_channel import CallbackRequest


class KafkaApis:
    """One broker's request dispatch and small requests (see the module docstring).
    ``coordinator``: this broker's coordinator runtime (None: none, a standalone broker)."""

    def __init__(
        self,
        name: str,
        process: BrokerProcess,
        server: SocketServer,
        replica_manager: ReplicaManager,
        producer_ids: ProducerIdManager,
        coordinator: Callable[[], CoordinatorRuntime | None],
        lifecycle: BrokerLifecycleManager | None,
        produce: ProduceRequestHandler,
        fetch: FetchRequestHandler,
        markers: WriteTxnMarkersRequestHandler,
        metadata_publisher: BrokerMetadataPublisher,
        add_partitions: AddPartitionsToTxnManager | None = None,
    ) -> None:
        self.name = name
        self.process = process
        self.server = server
        self.replica_manager = replica_manager
        self.producer_ids = producer_ids
        self.coordinator = coordinator
        self.lifecycle = lifecycle
        self.produce = produce
        self.fetch = fetch
        self.markers = markers
        self.metadata_publisher = metadata_publisher
        self.add_partitions = add_partitions
        self.handlers = self._dispatch_table()

    def handle(self, request: object) -> object | None:
        """Answer ``request`` (None: no answer, or not yet). Broker requests go to the handler
        the dispatch table names for their type; any other to the coordinator runtime's."""
        handler = self.handlers.get(type(request))
        if handler is not None:
            return handler(request)
        return self.to_coordinator(request)

    def to_coordinator(self, request: object) -> object | None:
        runtime = self.coordinator()
        response = runtime.handle(request) if runtime is not None else None
        if response is None and (not self.process.alive or self.server.held):
            return None
        if response is None:
            raise TypeError(f"{self.name}: unexpected request {type(request).__name__}")
        return response

    def _dispatch_table(self) -> dict[type, Callable[[Any], object | None]]:
        """Request type -> bound handler, built once. A new broker request gets a handler
        ``(request) -> response | None``, a method ``_handle_<name>`` here for a small one,
        else on the request handler of its path (one module per path, named like Kafka's
        ``...RequestHandler``, built by the broker and passed in), and an entry here; a
        coordinator request is registered in :meth:`CoordinatorRuntime._dispatch_table`
        instead."""
        rm = self.replica_manager
        server = self.server
        fetchers = rm.replica_fetcher_manager
        return {
            ApiVersionsRequest: lambda r: ApiVersionsResponse(r.correlation_id),
            ProduceRequest: self.produce.handle,
            FetchRequest: self.fetch.handle,
            ListOffsetsRequest: self.fetch.handle_list_offsets,
            InitProducerIdRequest: self._handle_init_producer_id,
            WriteTxnMarkersRequest: self.markers.handle,
            WriteTxnMarkersResponse: self._handle_markers_response,
            MetadataRequest: self._handle_metadata,
            ReplicaFetchRequest: self.fetch.handle_replica_fetch,
            ReplicaFetchResponse: lambda r: fetchers.on_replica_fetch_response(
                server.current.src, server.current.conn, r
            ),
            AlterPartitionResponse: rm.alter_partition_manager.on_alter_partition_response,
            MetadataDelta: self.metadata_publisher.on_delta,
            BrokerHeartbeatResponse: self._handle_heartbeat_response,
            BrokerRegistrationResponse: self._handle_registration_response,
            AddPartitionsToTxnBrokerResponse: self._handle_add_partitions_response,
            Disconnected: self._handle_disconnected,
            CallbackRequest: lambda r: r.run(),
        }

    def _handle_init_producer_id(self, request: InitProducerIdRequest) -> object | None:
        """An idempotent producer's id comes from any broker; a transactional one's from its
        transaction coordinator."""
        if request.transactional_id is not None:
            return self.to_coordinator(request)
        return InitProducerIdResponse(
            request.correlation_id, Errors.NONE, self.producer_ids.generate_producer_id(), 0
        )

    def writes_log(self, answer: object) -> bool:
        """Whether handling ``answer``, an own thread's that has just arrived, ends in a log
        append on that thread: the leader's answer to markers that completes its transaction
        (the coordinator then appends CompleteCommit/CompleteAbort on its marker sender)."""
        if type(answer) is not WriteTxnMarkersResponse:
            return False
        runtime = self.coordinator()
        return runtime is not None and runtime.markers.arrives(
            answer.correlation_id, answer.results
        )

    def _handle_markers_response(self, response: WriteTxnMarkersResponse) -> None:
        """A leader's answer to markers this broker's coordinator sent."""
        runtime = self.coordinator()
        if runtime is not None:
            runtime.markers.on_response(response.correlation_id, response.results)

    def _handle_add_partitions_response(self, response: AddPartitionsToTxnBrokerResponse) -> None:
        """A coordinator's answer to this broker's AddPartitionsToTxn (its sender thread)."""
        if self.add_partitions is not None:
            msg = self.server.current
            self.add_partitions.on_response(msg.src, msg.conn, response)

    def _handle_disconnected(self, payload: Disconnected) -> None:
        """A connection this broker opened was reset: a replica fetcher's, or its
        AddPartitionsToTxnManager's."""
        self.replica_manager.replica_fetcher_manager.on_disconnected(payload)
        if self.add_partitions is not None:
            self.add_partitions.on_disconnected(payload)

    def _handle_metadata(self, request: MetadataRequest) -> MetadataResponse:
        """A client's metadata request, answered from this broker's metadata cache (which
        lags the controller by the time its changes take to arrive)."""
        return MetadataResponse(
            request.correlation_id,
            {
                tp: PartitionLeader(st.leader, st.leader_epoch, st.replicas, st.isr)
                for tp, st in self.replica_manager.metadata.items()
                if not is_internal(tp[0])
            },
        )

    # -- the controller: registration and heartbeats (BrokerLifecycleManager) -----------
    def _handle_registration_response(self, response: BrokerRegistrationResponse) -> None:
        if self.lifecycle is not None:
            self.lifecycle.on_registration_response(response)

    def _handle_heartbeat_response(self, response: BrokerHeartbeatResponse) -> None:
        if self.lifecycle is not None and self.lifecycle.on_heartbeat_response(response):
            self.server.kick()
