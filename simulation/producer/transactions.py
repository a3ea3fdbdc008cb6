"""The transactional half of Kafka's TransactionManager: states, coordinator requests, errors.

The application calls :meth:`Transactions.init_transactions`, :meth:`begin`,
:meth:`send_offsets_to_transaction`, :meth:`commit` and :meth:`abort`; each that talks to a
coordinator returns a SimPy event whose value is ``None`` on success or the error (as
``"ExceptionName: detail"``).

Requests to coordinators are queued here and sent by the Sender, **one at a time, by
priority**: FindCoordinator, then InitProducerId, then AddPartitionsToTxn/AddOffsetsToTxn
(and TxnOffsetCommit), then EndTxn. EndTxn also waits until every batch of the transaction
has completed. A request whose coordinator is unknown first looks it up with
FindCoordinator.

The client's reactions (the reference's table):

* CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, UNSTABLE_OFFSET_COMMIT and
  disconnections: retry after ``retry.backoff.ms``;
* NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, or a coordinator that cannot be reached: look
  the coordinator up again and retry;
* PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT,
  TRANSACTIONAL_ID_NOT_FOUND on a coordinator request: FATAL_ERROR;
* INVALID_PRODUCER_ID_MAPPING, UNKNOWN_PRODUCER_ID: ABORTABLE_ERROR with an epoch bump
  (``abortableErrorIfPossible``); the abort then skips EndTxn for an unknown mapping;
* a produce that fails for good (timeout, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE,
  INVALID_PRODUCER_EPOCH: KIP-588) goes to ABORTABLE_ERROR; only PRODUCER_FENCED is fatal
  (``TransactionManager.handleFailedBatch``; the abort's EndTxn then decides).

An abortable produce error outside a commit or abort requires an epoch bump: the abort
queues EndTxn and then an InitProducerId carrying the current id and epoch (KIP-360,
priority EPOCH_BUMP, after EndTxn), because the producer's sequence numbers may no longer
match the brokers'. A transaction to which no partition or offsets were ever added ends
locally, with no EndTxn (``transactionStarted``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from eosim.simulation.producer.transaction_manager import TransactionManager
from eosim.simulation.producer.transaction_states import ClientTransactionState, State
from eosim.simulation.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupMetadata,
    EndTxnRequest,
    EndTxnResponse,
    Errors,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TopicPartition,
    TxnOffsetCommitRequest,
)

# Kafka's TransactionManager.Priority: a lower number goes first.
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_OR_OFFSETS, END_TXN, EPOCH_BUMP = range(5)

# TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS (KAFKA-5477).
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20.0

RETRY = "retry"  # the handler asks for the same request again after a backoff
LOOKUP = "lookup"  # ... after finding the coordinator again

FATAL = frozenset(
    {
        Errors.PRODUCER_FENCED,
        Errors.INVALID_PRODUCER_EPOCH,
        Errors.INVALID_TXN_STATE,
        Errors.INVALID_TRANSACTION_TIMEOUT,
        Errors.TRANSACTIONAL_ID_NOT_FOUND,
    }
)
RETRIABLE = frozenset(
    {
        Errors.CONCURRENT_TRANSACTIONS,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.UNSTABLE_OFFSET_COMMIT,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
    }
)
LOOKUP_ERRORS = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})


def error_text(error: Errors, detail: str = "") -> str:
    return f"{error.exception_name}: {detail or error.name}"


@dataclass(eq=False)
class TxnRequest:
    """One queued coordinator request (Kafka's ``TxnRequestHandler``)."""

    priority: int
    name: str
    coordinator_type: str  # "transaction" or "group"
    coordinator_key: str
    build: Callable[[int], Any]  # correlation id -> request
    handle: Callable[[Any], str | None]  # response -> None (done), RETRY or LOOKUP
    order: int = 0
    not_before: float = 0.0
    commit: bool = False
    # Completes the application's result event (None, or the error) if the request fails.
    finish: Callable[[str | None], None] | None = None
    # The handler's own retry backoff when it is shorter than retry.backoff.ms (Kafka's
    # TxnRequestHandler.retryBackoffMs: the smaller of the two).
    backoff_ms: float | None = None


class Transactions:
    def __init__(
        self,
        env: simpy.Environment,
        transactional_id: str,
        timeout_ms: int,
        retry_backoff_ms: float,
        tm: TransactionManager,
        transaction_version: int,
        txn_offset_commit_v6: bool = False,
    ) -> None:
        self.env = env
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.tm = tm
        self.transaction_version = transaction_version
        # KIP-1319 (Kafka 4.4, the rule txn_offset_commit_v6): TxnOffsetCommit v6, which the
        # client sends only under transaction version 2 (v5 and later need it).
        self.txn_offset_commit_v6 = txn_offset_commit_v6 and transaction_version >= 2
        self.state = ClientTransactionState(transactional_id)
        self.coordinators: dict[tuple[str, str], str] = {}  # (type, key) -> node
        self.pending: list[TxnRequest] = []
        self.in_flight: TxnRequest | None = None
        self._order = 0
        self.partitions_in_txn: dict[TopicPartition, None] = {}
        self.new_partitions: dict[TopicPartition, None] = {}
        self.pending_partitions: dict[TopicPartition, None] = {}
        self.last_error: str | None = None
        self.epoch_bump_required = False
        # A partition or offsets were added: only then does ending it need an EndTxn.
        self.transaction_started = False
        self.wakeup: Callable[[], None] = lambda: None

    # -- queue -------------------------------------------------------------------------
    def _enqueue(self, request: TxnRequest) -> None:
        self._order += 1
        request.order = self._order
        self.pending.append(request)
        self.wakeup()

    def next_request(self, now: float, batches_incomplete: bool) -> TxnRequest | None:
        """The request the Sender should send now, if any (one in flight at a time)."""
        if self.new_partitions and self.state.state in (
            State.IN_TRANSACTION,
            State.COMMITTING_TRANSACTION,
        ):
            self._add_partitions_request()
        if self.in_flight is not None or not self.pending:
            return None
        # Strictly by priority, as Kafka's queue: a request backing off holds the rest.
        request = min(self.pending, key=lambda r: (r.priority, r.order))
        if request.not_before > now:
            return None
        state = self.state.state
        if state is State.FATAL_ERROR or (
            state is State.ABORTABLE_ERROR and request.priority != FIND_COORDINATOR
        ):
            # maybeTerminateRequestWithError: in an error state a request fails unsent.
            self.pending.remove(request)
            if request.finish is not None:
                request.finish(self.last_error)
            return self.next_request(now, batches_incomplete)
        if request.priority == END_TXN:
            if batches_incomplete:
                return None
            if not self.transaction_started:
                # Nothing was added to the transaction: it ends here, with no EndTxn.
                self.pending.remove(request)
                self._complete_transaction()
                if request.finish is not None:
                    request.finish(None)
                return self.next_request(now, batches_incomplete)
        key = (request.coordinator_type, request.coordinator_key)
        if request.priority == FIND_COORDINATOR or key in self.coordinators:
            return request
        self._find_coordinator(*key)
        return self.next_request(now, batches_incomplete)

    def next_wakeup(self, now: float) -> float:
        times = [r.not_before for r in self.pending if r.not_before > now]
        return min(times) - now if times else float("inf")

    def coordinator_node(self, request: TxnRequest) -> str | None:
        if request.priority == FIND_COORDINATOR:
            return None  # any broker
        return self.coordinators.get((request.coordinator_type, request.coordinator_key))

    def sent(self, request: TxnRequest) -> None:
        self.pending.remove(request)
        self.in_flight = request

    def on_response(self, request: TxnRequest, response: Any) -> None:
        self.in_flight = None
        outcome = request.handle(response)
        if outcome is None:
            return
        if outcome == LOOKUP:
            self.coordinators.pop((request.coordinator_type, request.coordinator_key), None)
        backoff = self.retry_backoff_ms
        if request.backoff_ms is not None:
            backoff = min(backoff, request.backoff_ms)
        request.not_before = self.env.now + backoff
        self._order += 1
        request.order = self._order
        self.pending.append(request)

    def on_disconnect(self, request: TxnRequest) -> None:
        """No answer (timeout or a dead connection): find the coordinator again, retry."""
        self.in_flight = None
        if request.priority != FIND_COORDINATOR:
            self.coordinators.pop((request.coordinator_type, request.coordinator_key), None)
        request.not_before = self.env.now + self.retry_backoff_ms
        self.pending.append(request)

    @staticmethod
    def _handler(
        on_success: Callable[[Any], None], on_error: Callable[[Errors], None]
    ) -> Callable[[Any], str | None]:
        """A response handler: success, a retry (after finding the coordinator again for
        NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE), or ``on_error`` for the rest."""

        def handle(response: Any) -> str | None:
            error = response.error
            if error is Errors.NONE:
                on_success(response)
                return None
            if error in LOOKUP_ERRORS:
                return LOOKUP
            if error in RETRIABLE:
                return RETRY
            on_error(error)
            return None

        return handle

    def _fail(self, error: Errors) -> None:
        """A non-retriable answer to a coordinator request: ABORTABLE_ERROR with an epoch
        bump for an unknown producer id mapping, FATAL_ERROR otherwise (a fenced epoch is
        reported as ProducerFencedException, as Kafka does). The 4.0 client treats an unknown
        mapping as fatal too (:attr:`unknown_mapping_is_fatal`)."""
        if error is Errors.UNKNOWN_PRODUCER_ID or (
            error is Errors.INVALID_PRODUCER_ID_MAPPING and not self.unknown_mapping_is_fatal
        ):
            self.abortable(error_text(error), bump=True)
        elif error in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED):
            self.fatal(error_text(Errors.PRODUCER_FENCED))
        else:
            self.fatal(error_text(error))

    def _result(self) -> tuple[simpy.Event, Callable[[str | None], None]]:
        """The application's result event and the function that completes it once."""
        result = self.env.event()

        def finish(error: str | None) -> None:
            if not result.triggered:
                result.succeed(error)

        return result, finish

    # -- FindCoordinator ---------------------------------------------------------------
    def _find_coordinator(self, key_type: str, key: str) -> None:
        def handle(response: FindCoordinatorResponse) -> str | None:
            if response.error is Errors.NONE and response.node is not None:
                self.coordinators[key_type, key] = response.node
                return None
            return RETRY

        self._enqueue(
            TxnRequest(
                FIND_COORDINATOR,
                "FindCoordinator",
                key_type,
                key,
                lambda cid: FindCoordinatorRequest(cid, key, key_type),
                handle,
            )
        )

    # -- errors ------------------------------------------------------------------------
    def fatal(self, message: str) -> None:
        if self.state.state is not State.FATAL_ERROR:
            self.last_error = message
            self.state.transition_to(State.FATAL_ERROR)
            self._fail_pending(message)

    def abortable(self, message: str, *, bump: bool | None = None) -> None:
        """Go to ABORTABLE_ERROR (Kafka's ``transitionToAbortableError``).

        ``bump``: whether the abort must bump the epoch. None is the rule for a failed batch
        (``maybeTransitionToErrorState``): bump unless a commit or abort is under way.
        While aborting, the state stays; the bump may still be required.
        """
        state = self.state.state
        if state is State.FATAL_ERROR:
            return
        if bump is None:
            bump = state not in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)
        if bump:
            self.epoch_bump_required = True
        if state in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION, State.ABORTABLE_ERROR):
            self.last_error = message
            if state is not State.ABORTABLE_ERROR:
                self.state.transition_to(State.ABORTABLE_ERROR)
            # A commit not yet sent cannot go out any more: it fails with this error.
            for request in [r for r in self.pending if r.priority == END_TXN and r.commit]:
                self.pending.remove(request)
                if request.finish is not None:
                    request.finish(message)

    def _fail_pending(self, message: str) -> None:
        for request in self.pending:
            if request.finish is not None:
                request.finish(message)
        self.pending.clear()

    @property
    def unknown_mapping_is_fatal(self) -> bool:
        """INVALID_PRODUCER_ID_MAPPING is fatal for the 4.0 client (transaction version 2);
        before, it is abortable with an epoch bump (``abortableErrorIfPossible``)."""
        return self.transaction_version >= 2

    @property
    def client_bump_required(self) -> bool:
        """The abort must be followed by a client-side epoch bump (InitProducerId with the
        current id and epoch, KIP-360): under transaction version 1 only; under version 2
        EndTxn bumps the epoch itself."""
        return self.epoch_bump_required and self.transaction_version < 2

    @property
    def is_fatal(self) -> bool:
        return self.state.state is State.FATAL_ERROR

    def _error_state_message(self) -> str:
        """What a transactional method raises in an error state: a fenced producer's own
        exception, otherwise a KafkaException whose cause is the error that caused the state
        (so a batch that expired is not mistaken for a commit that timed out)."""
        error = self.last_error or ""
        if error.startswith("ProducerFencedException"):
            return error
        return f"KafkaException: in an error state, caused by {error or 'an earlier error'}"

    def _fail_now(self, message: str) -> simpy.Event:
        event = self.env.event()
        event.succeed(message)
        return event

    # -- initTransactions --------------------------------------------------------------
    def init_transactions(self) -> simpy.Event:
        if self.state.state is not State.UNINITIALIZED:
            return self._fail_now(
                f"IllegalStateException: initTransactions in {self.state.state.value}"
            )
        self.state.transition_to(State.INITIALIZING)
        return self._init_producer_id()

    def _init_producer_id(self, bump: bool = False) -> simpy.Event:
        """InitProducerId: the first one, or (``bump``) an epoch bump after an abortable
        error, which carries the current producer id and epoch (KIP-360) so that the
        coordinator can tell this instance from a newer one and fence it if it is stale."""
        result, finish = self._result()
        pid, epoch = (self.tm.producer_id, self.tm.epoch) if bump else (-1, -1)

        def initialized(response: InitProducerIdResponse) -> None:
            self.tm.set_producer_id_and_epoch(response.producer_id, response.epoch)
            self.tm.reset_sequences()
            self.epoch_bump_required = False
            self.last_error = None
            self.state.transition_to(State.READY)
            finish(None)

        def failed(error: Errors) -> None:
            self._fail(error)
            finish(self.last_error)

        self._enqueue(
            TxnRequest(
                EPOCH_BUMP if bump else INIT_PRODUCER_ID,
                "InitProducerId",
                "transaction",
                self.transactional_id,
                lambda cid: InitProducerIdRequest(
                    cid, self.transactional_id, self.timeout_ms, pid, epoch
                ),
                self._handler(initialized, failed),
                finish=finish,
            )
        )
        return result

    # -- begin / send ------------------------------------------------------------------
    def begin(self) -> str | None:
        if self.state.state is not State.READY:
            return f"IllegalStateException: beginTransaction in {self.state.state.value}"
        self.state.transition_to(State.IN_TRANSACTION)
        self.partitions_in_txn.clear()
        self.new_partitions.clear()
        self.pending_partitions.clear()
        return None

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if tp in self.partitions_in_txn or tp in self.pending_partitions:
            return
        if self.transaction_version >= 2:
            # KIP-890 part 2: no AddPartitionsToTxn; the partition's leader adds it on the
            # first produce, so it may be drained at once and the transaction has started.
            self.partitions_in_txn[tp] = None
            self.transaction_started = True
            return
        if tp not in self.new_partitions:
            self.new_partitions[tp] = None
            self.wakeup()

    def is_partition_added(self, tp: TopicPartition) -> bool:
        return tp in self.partitions_in_txn

    def _add_partitions_request(self) -> None:
        partitions = tuple(self.new_partitions)
        self.pending_partitions.update(self.new_partitions)
        self.new_partitions.clear()
        pid, epoch = self.tm.producer_id, self.tm.epoch

        def added(_response: Any) -> None:
            for tp in partitions:
                self.pending_partitions.pop(tp, None)
                self.partitions_in_txn[tp] = None
            self.transaction_started = True

        def failed(error: Errors) -> None:
            for tp in partitions:
                self.pending_partitions.pop(tp, None)
            self._fail(error)

        handle = self._handler(added, failed)

        def first_add_backs_off_briefly(response: Any) -> str | None:
            # AddPartitionsToTxnHandler.maybeOverrideRetryBackoffMs: the first add of a
            # transaction answered CONCURRENT_TRANSACTIONS (the previous one is still
            # completing) is retried after 20 ms (ADD_PARTITIONS_RETRY_BACKOFF_MS, KAFKA-5477).
            first = response.error is Errors.CONCURRENT_TRANSACTIONS and not self.partitions_in_txn
            request.backoff_ms = ADD_PARTITIONS_RETRY_BACKOFF_MS if first else None
            return handle(response)

        request = TxnRequest(
            ADD_PARTITIONS_OR_OFFSETS,
            "AddPartitionsToTxn",
            "transaction",
            self.transactional_id,
            lambda cid: AddPartitionsToTxnRequest(
                cid, self.transactional_id, pid, epoch, partitions
            ),
            first_add_backs_off_briefly,
        )
        self._enqueue(request)

    # -- sendOffsetsToTransaction ------------------------------------------------------
    def send_offsets_to_transaction(
        self,
        offsets: tuple[tuple[TopicPartition, int], ...],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> simpy.Event:
        """``sendOffsetsToTransaction``: the consumer's positions join the transaction. A
        group id alone is ``new ConsumerGroupMetadata(groupId)`` (no member, no generation).
        The group coordinator checks the member and generation (KIP-447): a member it no
        longer has makes the transaction abortable (CommitFailedException)."""
        meta = (
            ConsumerGroupMetadata(group_metadata)
            if isinstance(group_metadata, str)
            else group_metadata
        )
        group = meta.group_id
        if self.state.state is not State.IN_TRANSACTION:
            return self._fail_now(
                self.last_error
                or f"IllegalStateException: sendOffsetsToTransaction in {self.state.state.value}"
            )
        result, finish = self._result()
        pid, epoch = self.tm.producer_id, self.tm.epoch

        def failed(error: Errors) -> None:
            self._fail(error)
            finish(self.last_error)

        def offset_commit_failed(error: Errors) -> None:
            """``TxnOffsetCommitHandler``: the group's refusals are abortable (since v6,
            KIP-1319, GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH too, which the coordinator
            answered as ILLEGAL_GENERATION before)."""
            if error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION) or (
                self.txn_offset_commit_v6
                and error in (Errors.GROUP_ID_NOT_FOUND, Errors.STALE_MEMBER_EPOCH)
            ):
                self.abortable(
                    "CommitFailedException: Transaction offset Commit failed due to consumer "
                    f"group metadata mismatch: {error.name}",
                    bump=False,
                )
                finish(self.last_error)
            elif error in (Errors.FENCED_INSTANCE_ID, Errors.TRANSACTION_ABORTABLE):
                self.abortable(error_text(error), bump=False)
                finish(self.last_error)
            else:
                failed(error)

        def offsets_added(_response: Any) -> None:
            self.transaction_started = True
            commit_offsets()

        def commit_offsets() -> None:
            self._enqueue(
                TxnRequest(
                    ADD_PARTITIONS_OR_OFFSETS,
                    "TxnOffsetCommit",
                    "group",
                    group,
                    lambda cid: TxnOffsetCommitRequest(
                        cid,
                        self.transactional_id,
                        group,
                        pid,
                        epoch,
                        offsets,
                        meta.member_id,
                        meta.generation_id,
                        meta.group_instance_id,
                    ),
                    self._handler(lambda _r: finish(None), offset_commit_failed),
                    finish=finish,
                )
            )

        if self.transaction_version >= 2:
            # TxnOffsetCommit v5 goes straight to the group coordinator, which adds the
            # offsets partition to the transaction itself (no AddOffsetsToTxn).
            self.transaction_started = True
            commit_offsets()
            return result
        self._enqueue(
            TxnRequest(
                ADD_PARTITIONS_OR_OFFSETS,
                "AddOffsetsToTxn",
                "transaction",
                self.transactional_id,
                lambda cid: AddOffsetsToTxnRequest(cid, self.transactional_id, pid, epoch, group),
                self._handler(offsets_added, failed),
                finish=finish,
            )
        )
        return result

    # -- commit / abort ----------------------------------------------------------------
    def commit(self) -> simpy.Event:
        state = self.state.state
        if state is State.ABORTABLE_ERROR or state is State.FATAL_ERROR:
            return self._fail_now(self._error_state_message())
        if state is not State.IN_TRANSACTION:
            return self._fail_now(f"IllegalStateException: commitTransaction in {state.value}")
        self.state.transition_to(State.COMMITTING_TRANSACTION)
        return self._begin_completing(commit=True)

    def abort(self) -> simpy.Event:
        state = self.state.state
        if state is State.FATAL_ERROR:
            return self._fail_now(self._error_state_message())
        if state not in (State.IN_TRANSACTION, State.ABORTABLE_ERROR):
            return self._fail_now(f"IllegalStateException: abortTransaction in {state.value}")
        self.state.transition_to(State.ABORTING_TRANSACTION)
        self.new_partitions.clear()
        return self._begin_completing(commit=False)

    def _begin_completing(self, commit: bool) -> simpy.Event:
        """Kafka's ``beginCompletingTransaction``: queue EndTxn (skipped when the producer id
        mapping is unknown to the coordinator, which would refuse it) and, when the epoch
        must be bumped (transaction version 1), an InitProducerId with the current id and
        epoch after it; the application waits for the last of them."""
        if self.new_partitions:
            self._add_partitions_request()
        bump = self.client_bump_required
        unknown_mapping = (self.last_error or "").startswith(
            Errors.INVALID_PRODUCER_ID_MAPPING.exception_name
        )
        if not unknown_mapping:
            result = self._end_txn(commit)
            if not bump:
                return result
        return self._init_producer_id(bump=True)

    def _complete_transaction(self) -> None:
        """The transaction ended: READY, or INITIALIZING while the epoch bump is pending."""
        if self.client_bump_required:
            self.state.transition_to(State.INITIALIZING)
        elif self.state.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION):
            self.state.transition_to(State.READY)
        self.last_error = None
        self.epoch_bump_required = False
        self.transaction_started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.partitions_in_txn.clear()

    def _end_txn(self, commit: bool) -> simpy.Event:
        result, finish = self._result()
        pid, epoch = self.tm.producer_id, self.tm.epoch

        def ended(response: EndTxnResponse) -> None:
            if self.transaction_version >= 2 and response.epoch >= 0:
                self.tm.set_producer_id_and_epoch(response.producer_id, response.epoch)
                self.tm.reset_sequences()
            self._complete_transaction()
            finish(None)

        def failed(error: Errors) -> None:
            self._fail(error)
            finish(self.last_error)

        self._enqueue(
            TxnRequest(
                END_TXN,
                "EndTxn",
                "transaction",
                self.transactional_id,
                lambda cid: EndTxnRequest(cid, self.transactional_id, pid, epoch, commit),
                self._handler(ended, failed),
                commit=commit,
                finish=finish,
            )
        )
        return result
