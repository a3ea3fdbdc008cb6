"""GroupCoordinatorService: the group coordinator's requests, from the broker to its shard.

Mirrors Kafka's ``GroupCoordinatorService`` (``group-coordinator``, ``org.apache.kafka.
coordinator.group``): the entry point of every group request a broker hands its coordinator.
It holds

* shard selection (``partitionFor`` and the checks before a request reaches its shard: an
  empty group id is INVALID_GROUP_ID, then the group's ``__consumer_offsets`` partition must
  be loaded here);
* JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic groups and ConsumerGroupHeartbeat
  of consumer groups (KIP-848): each runs its shard's method (:class:`GroupMetadataManager`)
  and has the :class:`CoordinatorRuntime` write the records it returns (``scheduleWriteOperation``,
  :meth:`CoordinatorRuntime.apply_group_result`); a parked join or sync is answered when the
  group gets there, once;
* OffsetCommit and TxnOffsetCommit, validated against the group before they are written, in
  Kafka's order (``OffsetMetadataManager``), then appended with acks=all
  (``offsets.commit.timeout.ms``) and applied to the :class:`GroupCoordinator`'s offsets once
  replicated; under transaction version 2 a TxnOffsetCommit first adds the offsets partition
  to the transaction itself (KIP-890 part 2); OffsetFetch;
* FindCoordinator (``KafkaApis.getCoordinator``): the leader of the key's internal partition as
  this broker's metadata cache has it.

The groups themselves, their offsets, loading and unloading, timers and writes are the
runtime's (:mod:`eosim.simulation.coordinator.runtime`); the membership rules are the shards'
(:mod:`group_metadata_manager`, :mod:`classic_group`, :mod:`consumer_group_heartbeat`).

To add a group request: write a handler ``_<name>(request) -> response | None`` (None: the
answer is held, given later through :meth:`CoordinatorRuntime.answer`) that runs its shard's
method through :meth:`CoordinatorRuntime.apply_group_result`, name it in
:meth:`GroupCoordinatorService.dispatch_table`, and test it through a cluster
(``tests/test_classic_group.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from eosim.simulation.coordinator.classic_group import JoinAnswer, SyncAnswer
from eosim.simulation.coordinator.consumer_group_heartbeat import HeartbeatAnswer
from eosim.simulation.coordinator.coordinator_result import coordinator_error
from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.group_coordinator import OffsetCommitRecord, offsets_partition
from eosim.simulation.coordinator.runtime import CoordinatorRuntime, Handler
from eosim.simulation.protocol import (
    NO_SEQUENCE,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ErrorResponse,
    Errors,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from eosim.simulation.records import LogBatch

if TYPE_CHECKING:
    from eosim.simulation.broker.partition import Partition


class GroupCoordinatorService:
    """The group requests of one broker's coordinator (see the module docstring)."""

    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        # The runtime's, never replaced: its clock, settings, rules and offsets.
        self.env = runtime.env
        self.settings = runtime.settings
        self.rules = runtime.rules
        self.groups = runtime.groups

    def dispatch_table(self) -> dict[type, Handler]:
        """Request type -> bound handler (the runtime merges it into its own table)."""
        return {
            FindCoordinatorRequest: self._find_coordinator,
            TxnOffsetCommitRequest: self._txn_offset_commit,
            OffsetCommitRequest: self._offset_commit,
            OffsetFetchRequest: self._offset_fetch,
            JoinGroupRequest: self._join_group,
            SyncGroupRequest: self._sync_group,
            HeartbeatRequest: self._heartbeat,
            LeaveGroupRequest: self._leave_group,
            ConsumerGroupHeartbeatRequest: self._consumer_group_heartbeat,
        }

    def _group_shard(self, group: str) -> tuple[Errors, int]:
        """``GroupCoordinatorService``'s checks before a group request reaches its shard: an
        empty group id is INVALID_GROUP_ID, then the partition must be loaded here."""
        partition = offsets_partition(group)
        if not group:
            return Errors.INVALID_GROUP_ID, partition[1]
        return self.runtime.partition_error(partition), partition[1]

    def _join_group(self, request: JoinGroupRequest) -> object | None:
        """``GroupCoordinatorService.joinGroup`` -> ``classicGroupJoin``; the answer is
        parked until the join phase completes."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        groups = self.settings.groups
        if error is not Errors.INVALID_GROUP_ID and not (
            groups.min_session_timeout_ms
            <= request.session_timeout_ms
            <= groups.max_session_timeout_ms
        ):
            # GroupCoordinatorService.joinGroup (GroupCoordinatorService.java:391-405): the
            # group id, then the session timeout, then the shard.
            error = Errors.INVALID_SESSION_TIMEOUT
        if error is not Errors.NONE:
            return JoinGroupResponse(cid, error, request.member_id)

        def start(answer: Callable[[object], None]) -> None:
            def respond(a: object) -> None:
                assert isinstance(a, JoinAnswer)
                answer(
                    JoinGroupResponse(
                        cid,
                        a.error,
                        a.member_id,
                        a.generation,
                        a.protocol_name,
                        a.protocol_type,
                        a.leader,
                        a.members,
                        a.skip_assignment,
                    )
                )

            result = self.groups.shard(partition).classic_group_join(request, _once(respond))
            self.runtime.apply_group_result(partition, result, None)

        return self.runtime.answer(start)

    def _sync_group(self, request: SyncGroupRequest) -> object | None:
        """``GroupCoordinatorService.syncGroup`` -> ``classicGroupSync``."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return SyncGroupResponse(cid, error)

        def start(answer: Callable[[object], None]) -> None:
            def respond(a: object) -> None:
                assert isinstance(a, SyncAnswer)
                answer(
                    SyncGroupResponse(cid, a.error, a.assignment, a.protocol_name, a.protocol_type)
                )

            result = self.groups.shard(partition).classic_group_sync(request, _once(respond))
            self.runtime.apply_group_result(partition, result, None)

        return self.runtime.answer(start)

    def _heartbeat(self, request: HeartbeatRequest) -> object | None:
        """``GroupCoordinatorService.heartbeat`` -> ``classicGroupHeartbeat``."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return HeartbeatResponse(cid, error)

        def respond(error: Errors, response: object) -> object:
            assert isinstance(response, Errors)
            return HeartbeatResponse(cid, error if error is not Errors.NONE else response)

        return self.runtime.answer(
            lambda answer: self.runtime.apply_group_result(
                partition,
                self.groups.shard(partition).classic_group_heartbeat(request),
                answer,
                respond,
            )
        )

    def _leave_group(self, request: LeaveGroupRequest) -> object | None:
        """``GroupCoordinatorService.leaveGroup`` -> ``classicGroupLeave``; answered once the
        records the leave caused (if any) are written."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return LeaveGroupResponse(cid, error)

        def respond(error: Errors, response: object) -> object:
            top, members = response  # type: ignore[misc]
            if error is not Errors.NONE:
                return LeaveGroupResponse(cid, error)
            return LeaveGroupResponse(cid, top, members)

        return self.runtime.answer(
            lambda answer: self.runtime.apply_group_result(
                partition,
                self.groups.shard(partition).classic_group_leave(request),
                answer,
                respond,
            )
        )

    def _consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> object | None:
        """``GroupCoordinatorService.consumerGroupHeartbeat`` -> ``consumerGroupHeartbeat``;
        answered once the records it wrote (if any) are replicated."""
        cid = request.correlation_id
        error, partition = self._group_shard(request.group)
        if error is not Errors.NONE:
            return ConsumerGroupHeartbeatResponse(cid, error)

        def respond(error: Errors, answer: object) -> object:
            assert isinstance(answer, HeartbeatAnswer)
            if error is not Errors.NONE:
                return ConsumerGroupHeartbeatResponse(cid, error)
            return ConsumerGroupHeartbeatResponse(cid, *answer)

        return self.runtime.answer(
            lambda answer: self.runtime.apply_group_result(
                partition,
                self.groups.shard(partition).consumer_group_heartbeat(request),
                answer,
                respond,
            )
        )

    def _find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """KafkaApis.getCoordinator: the leader of the key's internal partition as this
        broker's metadata cache has it; COORDINATOR_NOT_AVAILABLE while it has none."""
        partition = internal_partition(request.key, request.key_type)
        self.runtime.activate(partition)
        state = self.runtime.rm.metadata.get(partition)
        node = state.leader if state is not None else None
        error = Errors.NONE if node is not None else Errors.COORDINATOR_NOT_AVAILABLE
        return FindCoordinatorResponse(request.correlation_id, error, node)

    def _txn_offset_commit(self, request: TxnOffsetCommitRequest) -> object | None:
        cid = request.correlation_id
        partition = offsets_partition(request.group)

        def start(answer: Callable[[object], None]) -> None:
            def write(error: Errors) -> None:
                if error is Errors.NONE:
                    # OffsetMetadataManager.validateTransactionalOffsetCommit (:348-379),
                    # after the transaction verification, before the producer epoch check of
                    # the append.
                    error = self.groups.validate_offset_commit(
                        request.group,
                        request.member_id,
                        request.instance_id,
                        request.generation,
                        True,
                        self.rules.offset_commit_checks_generation,
                        [tp for tp, _offset in request.offsets],
                    )
                if error is Errors.NONE:
                    error = self.groups.check_txn_commit(request.producer_id, request.epoch)
                if error is not Errors.NONE:
                    answer(ErrorResponse(cid, error))
                    return

                def make(part: Partition) -> LogBatch:
                    batch = part.log.append(
                        request.producer_id,
                        request.epoch,
                        NO_SEQUENCE,
                        ("",),
                        self.env.now,
                        True,
                        part.leader_epoch,
                    )
                    batch.payload = OffsetCommitRecord(request.group, request.offsets)
                    part.producer_state.load((batch,))
                    return batch

                def written(append_error: Errors) -> None:
                    error = coordinator_error(append_error)
                    if (
                        error is Errors.NONE
                        and self.runtime.partition_error(partition) is Errors.NONE
                    ):
                        self.groups.apply_txn_commit(
                            request.group, request.producer_id, request.epoch, request.offsets
                        )
                    answer(ErrorResponse(cid, error))

                self.runtime.append(
                    partition, make, self.settings.offsets_commit_timeout_ms, written
                )

            error = self.runtime.partition_error(partition)
            if error is Errors.NONE and self.runtime.add_partition is not None:
                # Transaction version 2 (TxnOffsetCommit v5): the group coordinator adds the
                # offsets partition to the transaction itself (no AddOffsetsToTxn).
                def added(error: Errors) -> None:
                    # (PRODUCER_FENCED arrives as INVALID_PRODUCER_EPOCH: the broker's
                    # AddPartitionsToTxnManager maps it.) The answer
                    # reaches the coordinator's own thread, which writes after whatever
                    # request handler the answer completed in has finished (a follower's
                    # fetch that moved the coordinator's high watermark is parked first,
                    # and the write then answers it).
                    def after(_event: object) -> None:
                        ok = error is Errors.NONE
                        write(self.runtime.partition_error(partition) if ok else error)

                    self.env.timeout(0).callbacks.append(after)

                self.runtime.add_partition(
                    request.transactional_id,
                    request.producer_id,
                    request.epoch,
                    (partition,),
                    added,
                )
                return
            write(error)

        return self.runtime.answer(start)

    def _offset_commit(self, request: OffsetCommitRequest) -> object | None:
        """``OffsetMetadataManager.commitOffset``: validated against the group before the
        write (``validateOffsetCommit``, ``OffsetMetadataManager.java:302-346``); an accepted
        commit restarts its member's session (``:456-465``)."""
        cid = request.correlation_id
        partition = offsets_partition(request.group)
        error = self.runtime.partition_error(partition)
        if error is Errors.NONE:
            error = self.groups.validate_offset_commit(
                request.group,
                request.member_id,
                request.instance_id,
                request.generation,
                False,
                self.rules.offset_commit_checks_generation,
                [tp for tp, _offset in request.offsets],
            )
            if error is Errors.NONE:
                shard = self.groups.shards.get(partition[1])
                if shard is not None:
                    shard.commit_keeps_session(request.group, request.member_id)
        if error is not Errors.NONE:
            return ErrorResponse(cid, error)

        def make(part: Partition) -> LogBatch:
            return self.runtime.append_record(
                part, OffsetCommitRecord(request.group, request.offsets)
            )

        def start(answer: Callable[[object], None]) -> None:
            def written(append_error: Errors) -> None:
                error = coordinator_error(append_error)
                if error is Errors.NONE and self.runtime.partition_error(partition) is Errors.NONE:
                    self.groups.commit(request.group, request.offsets)
                answer(ErrorResponse(cid, error))

            self.runtime.append(partition, make, self.settings.offsets_commit_timeout_ms, written)

        return self.runtime.answer(start)

    def _offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        error = self.runtime.partition_error(offsets_partition(request.group))
        offsets: dict[TopicPartition, int] = {}
        if error is Errors.NONE:
            error, offsets = self.groups.fetch(request.group, request.partitions)
        return OffsetFetchResponse(request.correlation_id, error, offsets)


def _once(respond: Callable[[object], None]) -> Callable[[object], None]:
    """A parked answer is given once (a later completion, as of a completed future, is
    ignored)."""
    done = [False]

    def once(response: object) -> None:
        if not done[0]:
            done[0] = True
            respond(response)

    return once
