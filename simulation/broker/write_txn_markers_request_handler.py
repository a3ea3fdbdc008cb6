"""The WriteTxnMarkers path of a broker: Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``,
the leader's side of a transaction's end. Each partition's COMMIT or ABORT marker is checked
by the producer state (``ProducerAppendInfo.appendEndTxnMarker``: producer epoch, then
coordinator epoch; under transaction version 2 since KIP-1228, rule
``tv2_marker_requires_newer_epoch``, a marker must raise the epoch unless it retries one already
written), appended with acks=all (refused below min.insync.replicas), and answered
once replicated (:func:`eosim.simulation.broker.produce_request_handler.
answer_when_replicated`). A ``__consumer_offsets`` partition's marker is written by the group
coordinator of this broker, which applies it once it is written; its errors are reported as
the group coordinator reports them (:func:`_marker_error`).

Named as Kafka names the request handlers it moves out of ``KafkaApis``
(``DescribeTopicPartitionsRequestHandler``).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from eosim.simulation.broker.produce_request_handler import (
    VERDICT_ERRORS,
    answer_when_replicated,
)
from eosim.simulation.broker.producer_state import Verdict
from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.broker.socket_server import BrokerProcess, SocketServer
from eosim.simulation.coordinator.directory import CONSUMER_OFFSETS_TOPIC
from eosim.simulation.coordinator.runtime import CoordinatorRuntime
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import (
    Errors,
    TopicPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


class WriteTxnMarkersRequestHandler:
    """A broker's WriteTxnMarkers requests (see the module docstring). ``coordinator``: this
    broker's coordinator runtime (None: none, a standalone broker)."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        process: BrokerProcess,
        server: SocketServer,
        replica_manager: ReplicaManager,
        coordinator: Callable[[], CoordinatorRuntime | None],
        probe: Probe,
    ) -> None:
        self.env = env
        self.name = name
        self.process = process
        self.server = server
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.probe = probe

    def handle(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse | None:
        pid, epoch = request.producer_id, request.epoch
        control = "COMMIT" if request.commit else "ABORT"
        results: list[tuple[TopicPartition, Errors]] = []
        waits: list[tuple[TopicPartition, int]] = []
        rm = self.replica_manager
        # KIP-1228 (Kafka 4.2): WriteTxnMarkers v2 tells the leader the transaction version,
        # and a version-2 marker must raise the producer's epoch there (a marker at the same
        # epoch only as a retry, with no transaction of the producer open). The model's
        # transaction version is the run's (a rule), so every marker has it.
        strict = rm.rules.tv2_marker_requires_newer_epoch and rm.rules.transaction_version >= 2
        offsets: list[TopicPartition] = []
        for tp in request.partitions:
            if tp[0] == CONSUMER_OFFSETS_TOPIC:
                # KafkaApis.handleWriteTxnMarkersRequest: the group coordinator writes the
                # marker to its partition (checked like any other by the producer state) and
                # applies it; a coordinator not ready answers NOT_LEADER_OR_FOLLOWER.
                runtime = self.coordinator()
                if runtime is None or runtime.partition_error(tp) is not Errors.NONE:
                    results.append((tp, Errors.NOT_LEADER_OR_FOLLOWER))
                    continue
                offsets.append(tp)
            part = rm.leader_partition(tp)
            if part is None:
                results.append((tp, Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            if tp not in offsets:
                self.probe.hit("leader.before_marker", self.name)
                if not self.process.alive:
                    return None
            assert part.leader_state is not None
            refused = part.leader_state.append_error(-1)
            if refused is not Errors.NONE:
                # The coordinator's markers are appended with requiredAcks -1 (KafkaApis.
                # handleWriteTxnMarkersRequest), so Partition.appendRecordsToLeader refuses
                # them below min.insync.replicas before anything is appended.
                results.append((tp, refused))
                continue
            # ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch, checkCoordinatorEpoch.
            verdict = part.producer_state.mark(
                pid,
                epoch,
                request.coordinator_epoch,
                self.env.now,
                strict,
                strict and pid in part.log.ongoing,
            )
            if verdict is not Verdict.APPEND:
                results.append((tp, VERDICT_ERRORS[verdict]))
                continue
            marker = part.log.append_marker(
                pid,
                epoch,
                control,  # type: ignore[arg-type]
                self.env.now,
                request.coordinator_epoch,
                part.leader_epoch,
            )
            part.appended(marker, self.env.now)
            rm.after_leader_append(part)
            if tp not in offsets:
                self.probe.hit("leader.after_marker", self.name)
                if not self.process.alive:
                    return None
            results.append((tp, Errors.NONE))
            waits.append((tp, marker.last_offset + 1))
        if not waits:
            final = [(tp, _marker_error(tp, error)) for tp, error in results]
            return WriteTxnMarkersResponse(request.correlation_id, pid, final)
        # Markers are written with acks=all (ReplicaManager.appendRecords, requiredAcks -1).

        def build(errors: dict[TopicPartition, Errors]) -> WriteTxnMarkersResponse:
            final = [(tp, errors.get(tp, error)) for tp, error in results]
            for tp, error in final:
                if tp in offsets and error is Errors.NONE:
                    runtime = self.coordinator()
                    if runtime is not None:
                        runtime.marker_written(
                            tp, pid, epoch, request.commit, request.coordinator_epoch
                        )
            final = [(tp, _marker_error(tp, error)) for tp, error in final]
            return WriteTxnMarkersResponse(request.correlation_id, pid, final)

        return answer_when_replicated(
            self.server, self.replica_manager, waits, MARKER_TIMEOUT_MS, build
        )


def _marker_error(tp: TopicPartition, error: Errors) -> Errors:
    """A ``__consumer_offsets`` marker's append error as the group coordinator reports it:
    the errors a coordinator not ready raises become NOT_LEADER_OR_FOLLOWER
    (KafkaApis.handleWriteTxnMarkersRequest)."""
    if tp[0] == CONSUMER_OFFSETS_TOPIC and error in (
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    ):
        return Errors.NOT_LEADER_OR_FOLLOWER
    return error


# How long a leader holds a marker write for replication: Kafka uses the broker's
# request.timeout.ms (30 s) for WriteTxnMarkers' appends.
MARKER_TIMEOUT_MS = 30_000.0
