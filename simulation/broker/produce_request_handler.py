"""The produce path of a broker: Kafka's ``KafkaApis.handleProduceRequest`` and what it calls
of ``ReplicaManager`` (``handleProduceAppend``, ``appendRecords``, ``appendToLocalLog``) and of
``Partition.appendRecordsToLeader``, with the transaction checks of KIP-890: verification
(part 1, ``AddPartitionsToTxnManager``: is the partition in the producer's transaction?) and
the implicit add (part 2, transaction version 2: the leader adds the partition itself, and
retries CONCURRENT_TRANSACTIONS, KAFKA-18654). An acks=all write is answered once it is
replicated (``DelayedProduce``, :func:`answer_when_replicated`, which WriteTxnMarkers uses
too); an acks=0 write is not answered, and a failed one closes the connection.

Named as Kafka names the request handlers it moves out of ``KafkaApis``
(``DescribeTopicPartitionsRequestHandler``). The append's checks in order: leadership,
verification or implicit add, INVALID_TXN_STATE for a non-transactional write into an open
transaction, min.insync.replicas for acks=all, the segment size, then the producer state's
verdict (:class:`eosim.simulation.broker.producer_state.ProducerStateManager`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from eosim.simulation.broker.producer_state import Verdict
from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.broker.socket_server import BrokerProcess, SocketServer
from eosim.simulation.coordinator.runtime import AddPartition
from eosim.simulation.network import Connection
from eosim.simulation.protocol import (
    Errors,
    PartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from eosim.simulation.records import batch_size
from eosim.simulation.rules import ProtocolRules

# KIP-890 part 1: (transactional id, producer id, epoch, partition) -> error or NONE
PartitionVerifier = Callable[[str | None, int, int, TopicPartition], Errors]

VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: Errors.INVALID_PRODUCER_EPOCH,
    Verdict.UNKNOWN_PRODUCER_ID: Errors.UNKNOWN_PRODUCER_ID,
    Verdict.COORDINATOR_FENCED: Errors.TRANSACTION_COORDINATOR_FENCED,
}

# How a leader answers a produce whose verification (KIP-890 part 1) failed: Kafka's
# AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH,
# and ReplicaManager.handleProduceAppend turns the retriable coordinator errors into
# NOT_ENOUGH_REPLICAS (which every client retries). TRANSACTION_ABORTABLE (a partition not in
# the transaction) reaches clients that send Produce v11+ (Kafka 3.8+) as is.
_VERIFICATION_ERRORS = {
    Errors.CONCURRENT_TRANSACTIONS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NETWORK_EXCEPTION: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_LOAD_IN_PROGRESS: Errors.NOT_ENOUGH_REPLICAS,
    Errors.COORDINATOR_NOT_AVAILABLE: Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_COORDINATOR: Errors.NOT_ENOUGH_REPLICAS,
}


def verification_error(error: Errors) -> Errors:
    """The produce error for a failed verification answered ``error`` by the coordinator."""
    return _VERIFICATION_ERRORS.get(error, error)


# The broker's request.timeout.ms (Kafka's default; not a scenario config): it caps how long a
# leader retries an implicit add (add.partitions.to.txn.retry.backoff.max.ms).
BROKER_REQUEST_TIMEOUT_MS = 30_000.0


def implicit_add_error(error: Errors) -> Errors:
    """The produce error for a failed implicit add (transaction version 2, Produce v12:
    TransactionSupportedOperation ``addPartition``): as for verification, except that
    CONCURRENT_TRANSACTIONS reaches the client as is (KAFKA-18662), which retries it."""
    return error if error is Errors.CONCURRENT_TRANSACTIONS else verification_error(error)


class ProduceRequestHandler:
    """A broker's Produce requests (see the module docstring). ``verify_partition``: the
    leader's question to the transaction coordinator (KIP-890 part 1; None: not verified);
    ``add_partition``: its implicit add (part 2; used with transaction version 2 only)."""

    def __init__(
        self,
        env: simpy.Environment,
        process: BrokerProcess,
        server: SocketServer,
        replica_manager: ReplicaManager,
        rules: ProtocolRules,
        verify_partition: PartitionVerifier | None,
        add_partition: AddPartition | None,
        retry_backoff_ms: float,
        retry_max_ms: float,
    ) -> None:
        self.env = env
        self.process = process
        self.server = server
        self.replica_manager = replica_manager
        self.rules = rules
        self.verify_partition = verify_partition
        # Transaction version 2 (KIP-890 part 2): the leader adds the partition to the
        # producer's transaction itself, on its first transactional produce there.
        self.add_partition = add_partition if rules.transaction_version >= 2 else None
        # add.partitions.to.txn.retry.backoff.ms and add.partitions.to.txn.retry.backoff.max.ms.
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_max_ms = retry_max_ms

    def _needs_add(self, tp: TopicPartition, pid: int, epoch: int) -> bool:
        """Transaction version 2: UnifiedLog.hasOngoingTransaction(producerId, producerEpoch):
        the open transaction must be this epoch's, else the leader adds the partition."""
        part = self.replica_manager.leader_partition(tp)
        if part is None:
            return False
        return pid not in part.log.ongoing or part.producer_state.epoch_of(pid) != epoch

    def handle(self, request: ProduceRequest) -> ProduceResponse | None:
        msg = self.server.current
        if self.add_partition is None or request.transactional_id is None:
            return self._produce(request, {}, None, msg.conn)
        # Transaction version 2: the partitions the leader must add to the transaction first
        # (ReplicaManager.appendRecords with addPartition: the append waits for the
        # coordinator's answers).
        adds = [
            (tp, data)
            for tp, data in request.partitions
            if data.transactional and self._needs_add(tp, data.producer_id, data.epoch)
        ]
        if not adds:
            return self._produce(request, {}, None, msg.conn)
        # One entry for the request's partitions (AddPartitionsToTxnManager.addOrVerifyTransaction
        # with the producer id and epoch of the request's transactional batches).
        tps = tuple(tp for tp, _data in adds)
        pid, epoch = adds[0][1].producer_id, adds[0][1].epoch
        txn_id = request.transactional_id
        reply: list[Callable[[object], None]] = []
        now_answer: list[object | None] = []
        started = self.env.now
        incarnation = self.process.incarnation
        # KAFKA-18654 part 2: the leader retries CONCURRENT_TRANSACTIONS itself, every
        # add.partitions.to.txn.retry.backoff.ms until min(add.partitions.to.txn.retry.backoff.
        # max.ms, request.timeout.ms) has passed since its first ask (the check is made when an
        # answer arrives, as ReplicaManager.maybeRetryOnConcurrentTransactions makes it).
        retry_for = min(self.retry_max_ms, BROKER_REQUEST_TIMEOUT_MS)

        def ask() -> None:
            if self.process.alive and self.process.incarnation == incarnation:
                assert self.add_partition is not None
                self.add_partition(txn_id, pid, epoch, tps, answered)

        def answered(error: Errors) -> None:
            if (
                self.rules.add_partitions_server_retry
                and error is Errors.CONCURRENT_TRANSACTIONS
                and self.env.now - started < retry_for
            ):
                timer = self.env.timeout(self.retry_backoff_ms)
                timer.callbacks.append(lambda _ev: ask())
                return
            added = dict.fromkeys(tps, error)
            if not reply:
                now_answer.append(self._produce(request, added, None, msg.conn))
                return
            # The answer came later, on another thread (AddPartitionsToTxnManager's): the
            # append runs as a callback request on a request handler thread
            # (KafkaRequestHandler.wrapAsyncCallback, RequestChannel.sendCallbackRequest),
            # after whatever request the answer completed in has been handled (a follower's
            # fetch that moved the coordinator's high watermark is parked first, and this
            # append then answers it), and the handler completes the queued actions after it.
            if self.process.alive and self.process.incarnation == incarnation:
                self.server.send_callback(lambda: append(added))

        def append(added: dict[TopicPartition, Errors]) -> None:
            response = self._produce(request, added, reply[0], msg.conn)
            if response is not None:
                reply[0](response)
            elif request.acks == 0 and self.process.alive:
                self.server.unmute(msg.conn)

        ask()
        if now_answer:
            return now_answer[0]  # type: ignore[return-value]
        reply.append(self.server.hold_current())
        return None

    def _produce(
        self,
        request: ProduceRequest,
        added: dict[TopicPartition, Errors],
        reply: Callable[[object], None] | None,
        conn: Connection | None,
    ) -> ProduceResponse | None:
        """Append a produce request's batches; ``added``: the coordinator's answers for the
        partitions the leader added to the transaction; ``reply``: how to answer a request
        that was held for them; ``conn``: the connection it came on."""
        now = self.env.now
        rm = self.replica_manager
        results: list[PartitionResponse] = []
        waits: list[tuple[TopicPartition, int]] = []
        for tp, data in request.partitions:
            part = rm.leader_partition(tp)
            if part is None:
                results.append(PartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            log = part.log
            state = part.producer_state
            pid = data.producer_id
            if data.transactional:
                if self.add_partition is not None:
                    error = added.get(tp, Errors.NONE)
                    if (
                        error is Errors.NONE
                        and tp not in added
                        and self._needs_add(tp, pid, data.epoch)
                    ):
                        error = Errors.CONCURRENT_TRANSACTIONS  # no longer open: add again
                    if error is not Errors.NONE:
                        results.append(PartitionResponse(implicit_add_error(error)))
                        continue
                elif pid not in log.ongoing and self.verify_partition is not None:
                    error = self.verify_partition(request.transactional_id, pid, data.epoch, tp)
                    if error is not Errors.NONE:
                        results.append(PartitionResponse(verification_error(error)))
                        continue
            elif pid in log.ongoing:
                # A non-transactional write while the producer's transaction is open.
                results.append(PartitionResponse(Errors.INVALID_TXN_STATE))
                continue
            assert part.leader_state is not None
            refused = part.leader_state.append_error(request.acks)
            if refused is not Errors.NONE:
                # Partition.appendRecordsToLeader: too few in sync for acks=all.
                results.append(PartitionResponse(refused, log_start_offset=log.log_start_offset))
                continue
            size = data.size_bytes if data.size_bytes is not None else batch_size(data.values)
            if size > log.config.segment_bytes:
                # UnifiedLog.append: a batch must fit in a segment.
                results.append(PartitionResponse(Errors.RECORD_LIST_TOO_LARGE, log_start_offset=-1))
                continue
            last_seq = data.last_sequence
            check = state.check(pid, data.epoch, data.base_sequence, last_seq)
            if check.verdict is Verdict.APPEND:
                batch = log.append(
                    pid,
                    data.epoch,
                    data.base_sequence,
                    data.values,
                    now,
                    data.transactional,
                    part.leader_epoch,
                    data.timestamp,
                    size,
                )
                state.update(
                    data.producer_id,
                    data.epoch,
                    data.base_sequence,
                    last_seq,
                    batch.base_offset,
                    batch.last_offset,
                    batch.timestamp,
                )
                part.appended(batch, now)
                rm.after_leader_append(part)
                results.append(
                    PartitionResponse(Errors.NONE, batch.base_offset, log.log_start_offset)
                )
                waits.append((tp, batch.last_offset + 1))
            elif check.verdict is Verdict.DUPLICATE:
                assert check.duplicate_of is not None
                first = check.duplicate_of.first_offset
                results.append(PartitionResponse(Errors.NONE, first, log.log_start_offset))
                waits.append((tp, check.duplicate_of.last_offset + 1))
            else:
                # The log start offset travels with the error (ReplicaManager.appendToLocalLog),
                # so a producer told UNKNOWN_PRODUCER_ID can see its records were deleted.
                error = VERDICT_ERRORS[check.verdict]
                results.append(PartitionResponse(error, log_start_offset=log.log_start_offset))
        if request.acks == 0:
            # KafkaApis.handleProduceRequest: acks=0 gets no answer; if any partition failed,
            # the broker closes the connection so that the client notices and refreshes its
            # metadata (requestChannel.closeConnection).
            if any(r.error is not Errors.NONE for r in results):
                self.server.close_connection(conn)
            return None
        if request.acks == -1 and waits:
            return self._after_replication(request.correlation_id, request, results, waits, reply)
        return ProduceResponse(request.correlation_id, results)

    def _after_replication(
        self,
        correlation_id: int,
        request: ProduceRequest,
        results: list[PartitionResponse],
        waits: list[tuple[TopicPartition, int]],
        reply: Callable[[object], None] | None = None,
    ) -> ProduceResponse | None:
        """acks=all: answer once every appended partition is replicated (DelayedProduce);
        None when the answer is held."""

        def build(errors: dict[TopicPartition, Errors]) -> ProduceResponse:
            final = [
                r if errors.get(tp, Errors.NONE) is Errors.NONE else PartitionResponse(errors[tp])
                for (tp, _data), r in zip(request.partitions, results, strict=True)
            ]
            return ProduceResponse(correlation_id, final)

        return answer_when_replicated(
            self.server, self.replica_manager, waits, request.timeout_ms, build, reply
        )


def answer_when_replicated(
    server: SocketServer,
    replica_manager: ReplicaManager,
    waits: list[tuple[TopicPartition, int]],
    timeout_ms: float,
    build: Callable[[dict[TopicPartition, Errors]], Any],
    reply: Callable[[object], None] | None = None,
) -> Any:
    """Wait for ``waits`` to be replicated (DelayedProduce: a produce or markers request
    with acks=all); the response ``build`` makes from their errors is returned now if
    nothing needs waiting, else sent when it is ready (None now). ``reply``: how to answer a
    request already held (else the request being handled)."""
    already_held = reply is not None
    answer = reply if reply is not None else server.reply_later()
    now: list[Any] = []
    held = [False]

    def complete(errors: dict[TopicPartition, Errors]) -> None:
        response = build(errors)
        if held[0]:
            answer(response)
        else:
            now.append(response)

    replica_manager.wait_for_replication(waits, timeout_ms, complete)
    if now:
        return now[0]
    held[0] = True
    if not already_held:
        server.held = True
    return None
