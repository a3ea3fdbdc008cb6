"""The fetch path of a broker: Kafka's ``KafkaApis.handleFetchRequest`` with
``ReplicaManager.fetchMessages`` (a consumer's fetch, answered now or held as a
``DelayedFetch`` until there is something to return, up to its ``max_wait_ms``; a follower's,
served by :meth:`ReplicaManager.handle_replica_fetch`, parked until data arrives) and
``KafkaApis.handleListOffsetRequest`` with ``Partition.fetchOffsetForTimestamp`` (a
consumer's EARLIEST and LATEST offsets).

Named as Kafka names the request handlers it moves out of ``KafkaApis``
(``DescribeTopicPartitionsRequestHandler``). What a fetch may read of a partition (the
high watermark, the last stable offset for read_committed, whole batches up to
``fetch_max_records`` records) is the log's (:meth:`PartitionLog.fetch`).
"""

from __future__ import annotations

from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.broker.socket_server import SocketServer
from eosim.simulation.protocol import (
    EARLIEST_TIMESTAMP,
    Errors,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)


class FetchRequestHandler:
    """A broker's Fetch (consumers' and followers') and ListOffsets requests (see the module
    docstring). ``fetch_max_records``: the most records one fetch returns for a partition."""

    def __init__(
        self, server: SocketServer, replica_manager: ReplicaManager, fetch_max_records: int
    ) -> None:
        self.server = server
        self.replica_manager = replica_manager
        self.fetch_max_records = fetch_max_records

    def handle(self, request: FetchRequest) -> FetchResponse | None:
        """A consumer's fetch, answered now if it finds something to return, else held up to
        its ``max_wait_ms`` (ReplicaManager.fetchMessages, DelayedFetch) until it does."""
        if request.max_wait_ms <= 0 or self._fetch_completable(request):
            return self._read_fetch(request)
        reply = self.server.hold_current()
        self.replica_manager.hold_read(
            tuple(tp for tp, _offset in request.partitions),
            lambda: self._fetch_completable(request),
            lambda: self._read_fetch(request),
            reply,
            request.max_wait_ms,
        )
        return None

    def _fetch_completable(self, request: FetchRequest) -> bool:
        """DelayedFetch.tryComplete with fetch.min.bytes 1: some partition is no longer led
        here (case A) or cannot be read at its offset, or its offset differs from the end
        its isolation level reads to (the last stable offset, else the high watermark):
        below it there is something to return (case G), above it the log was truncated
        under the consumer (case F)."""
        rm = self.replica_manager
        for tp, offset in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                return True
            log = part.log
            if offset > log.log_end_offset or offset < log.log_start_offset:
                return True
            hw = part.high_watermark
            end = log.last_stable_offset(hw) if request.isolation == "read_committed" else hw
            if offset != end:
                return True
        return False

    def _read_fetch(self, request: FetchRequest) -> FetchResponse:
        parts: list[tuple[TopicPartition, FetchPartition]] = []
        rm = self.replica_manager
        for tp, offset in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                parts.append((tp, FetchPartition(Errors.NOT_LEADER_OR_FOLLOWER)))
                continue
            log = part.log
            hw = part.high_watermark
            if offset > log.log_end_offset or offset < log.log_start_offset:
                # Beyond the log's end or before its start a read is refused
                # (LocalLog.read, UnifiedLog.checkLogStartOffset).
                refused = FetchPartition(
                    Errors.OFFSET_OUT_OF_RANGE,
                    last_stable_offset=log.last_stable_offset(hw),
                    log_end_offset=hw,
                )
                parts.append((tp, refused))
                continue
            batches, aborted = log.fetch(offset, request.isolation, self.fetch_max_records, hw)
            fetched = FetchPartition(Errors.NONE, batches, aborted, log.last_stable_offset(hw), hw)
            parts.append((tp, fetched))
        return FetchResponse(request.correlation_id, parts)

    def handle_list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        """EARLIEST: the log start offset; LATEST: the end a
        consumer of that isolation level may read to (Partition.fetchOffsetForTimestamp): the
        last stable offset for read_committed, else the high watermark, refused with
        OFFSET_NOT_AVAILABLE while a new leader's high watermark has not yet reached the
        start of its epoch (it may still be below offsets a consumer has already read)."""
        parts: list[tuple[TopicPartition, Errors, int]] = []
        for tp, timestamp in request.partitions:
            part = self.replica_manager.leader_partition(tp)
            if part is None:
                parts.append((tp, Errors.NOT_LEADER_OR_FOLLOWER, -1))
                continue
            state = part.leader_state
            assert state is not None
            if timestamp == EARLIEST_TIMESTAMP:
                parts.append((tp, Errors.NONE, part.log.log_start_offset))
            elif state.epoch_start_offset > state.high_watermark:
                parts.append((tp, Errors.OFFSET_NOT_AVAILABLE, -1))
            elif request.isolation == "read_committed":
                parts.append((tp, Errors.NONE, part.log.last_stable_offset(part.high_watermark)))
            else:
                parts.append((tp, Errors.NONE, part.high_watermark))
        return ListOffsetsResponse(request.correlation_id, parts)

    def handle_replica_fetch(self, request: ReplicaFetchRequest) -> ReplicaFetchResponse | None:
        response = self.replica_manager.handle_replica_fetch(self.server.current, request)
        if response is None:
            self.server.held = True  # held until data arrives (DelayedFetch)
        return response
