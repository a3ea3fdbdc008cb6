"""TransactionCoordinatorHandlers: the transaction coordinator's requests and their writes.

Mirrors the request-handling half of Kafka's ``TransactionCoordinator`` (core,
``kafka.coordinator.transaction``): its ``handle*`` methods and the callbacks they give
``TransactionStateManager.appendTransactionToLog``, the marker sending that follows
(``TransactionMarkerChannelManager.addTxnMarkersToSend``, ``tryAppendToLog``), and the two
scheduled tasks. It holds

* InitProducerId (``handleInitProducerId``): a fence is reported once its PrepareAbort is
  replicated, and the markers of the aborted transaction are written then;
* AddPartitionsToTxn and AddOffsetsToTxn (``handleAddPartitionsToTransaction``), from a client
  or, under transaction version 2, from a leader or group coordinator (KIP-890 part 2:
  :meth:`add_partitions`, asked by a broker's AddPartitionsToTxnManager in a request of its
  own, :class:`AddPartitionsToTxnBrokerRequest`); KIP-890 part 1's verification
  (:meth:`verify_partition`, ``handleVerifyPartitionsInTransaction``) against the state before
  a write in flight;
* EndTxn (``handleEndTransaction``): once Prepare* is replicated, the markers (through the
  runtime's :class:`TransactionMarkerChannelManager`), then Complete* once every partition
  accepted them, tried again while the log is not available;
* the timed-out abort (``abortTimedOutTransactions``, every ``abort_check_interval_ms``) and
  transactional.id expiry (``TransactionStateManager.removeExpiredTransactionalIds``, every
  ``expiration_check_interval_ms``), which the runtime schedules.

The decisions themselves are :class:`TransactionCoordinator`'s (pure logic,
:mod:`transaction_coordinator`); the log, the pending ids, loading and the acks=all writes are
the :class:`CoordinatorRuntime`'s (:meth:`CoordinatorRuntime.decide` runs a decision and
returns its writes, :meth:`CoordinatorRuntime.write` appends one and reverts it if it fails).

To add a transaction request: write a handler ``_<name>(request) -> response | None`` (None:
the answer is held, given later through :meth:`CoordinatorRuntime.answer`) that checks
:meth:`CoordinatorRuntime.partition_error` and :meth:`CoordinatorRuntime.pending_error`, runs
its decision through :meth:`CoordinatorRuntime.decide` and writes it with
:meth:`CoordinatorRuntime.write`; name it in :meth:`TransactionCoordinatorHandlers.
dispatch_table`, and test it in ``tests/conformance/test_transaction_coordinator_test.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from eosim.simulation.coordinator.directory import internal_partition
from eosim.simulation.coordinator.group_coordinator import offsets_partition
from eosim.simulation.coordinator.runtime import CoordinatorRuntime, Done, Handler
from eosim.simulation.coordinator.transaction_state import TransactionMetadata
from eosim.simulation.coordinator.transaction_state import TransactionState as S
from eosim.simulation.protocol import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBrokerRequest,
    AddPartitionsToTxnBrokerResponse,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    EndTxnResponse,
    ErrorResponse,
    Errors,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TopicPartition,
)


class TransactionCoordinatorHandlers:
    """The transaction requests of one broker's coordinator (see the module docstring)."""

    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        # The runtime's, never replaced: its clock, name, settings, probe, transactions and
        # marker channel.
        self.env = runtime.env
        self.node = runtime.node
        self.settings = runtime.settings
        self.probe = runtime.probe
        self.txn = runtime.txn
        self.markers = runtime.markers

    def dispatch_table(self) -> dict[type, Handler]:
        """Request type -> bound handler (the runtime merges it into its own table)."""
        return {
            InitProducerIdRequest: self._init_producer_id,
            AddPartitionsToTxnRequest: self._add_partitions_to_txn,
            AddPartitionsToTxnBrokerRequest: self._add_partitions_for_broker,
            AddOffsetsToTxnRequest: self._add_offsets_to_txn,
            EndTxnRequest: self._end_txn,
        }

    def _add_partitions_to_txn(self, request: AddPartitionsToTxnRequest) -> object | None:
        return self._add_to_txn(request, request.partitions)

    def _add_partitions_for_broker(self, request: AddPartitionsToTxnBrokerRequest) -> object | None:
        """A broker's AddPartitionsToTxn (v4+, KafkaApis.handleAddPartitionsToTxnRequest):
        each transaction added (or, ``verify_only``, verified) on its own, and one answer once
        every one of them has its error."""
        entries = request.transactions
        cid = request.correlation_id

        def start(answer: Callable[[object], None]) -> None:
            errors: dict[str, Errors] = {}

            def answered(txn_id: str) -> Done:
                def done(error: Errors) -> None:
                    errors[txn_id] = error
                    if len(errors) == len(entries):
                        results = tuple(
                            (e.transactional_id, errors[e.transactional_id]) for e in entries
                        )
                        answer(AddPartitionsToTxnBrokerResponse(cid, results))

                return done

            for e in entries:
                done = answered(e.transactional_id)
                if e.verify_only:
                    verdicts = (
                        self.verify_partition(e.transactional_id, e.producer_id, e.epoch, tp)
                        for tp in e.partitions
                    )
                    done(next((v for v in verdicts if v is not Errors.NONE), Errors.NONE))
                else:
                    self.add_partitions(
                        e.transactional_id, e.producer_id, e.epoch, e.partitions, done
                    )

        return self.runtime.answer(start)

    def _add_offsets_to_txn(self, request: AddOffsetsToTxnRequest) -> object | None:
        """AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition, as Kafka does."""
        return self._add_to_txn(request, (offsets_partition(request.group),))

    def _add_to_txn(
        self,
        request: AddPartitionsToTxnRequest | AddOffsetsToTxnRequest,
        partitions: tuple[TopicPartition, ...],
    ) -> object | None:
        cid = request.correlation_id
        return self.runtime.answer(
            lambda answer: self.add_partitions(
                request.transactional_id,
                request.producer_id,
                request.epoch,
                partitions,
                lambda error: answer(ErrorResponse(cid, error)),
            )
        )

    def add_partitions(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: tuple[TopicPartition, ...],
        on_done: Done,
    ) -> None:
        """AddPartitionsToTxn (from a client, or from a leader or group coordinator adding a
        partition for a transaction version 2 client); ``on_done`` gets the answer once the
        change is written (at once if nothing is written)."""
        error = self.runtime.partition_error(internal_partition(txn_id, "transaction"))
        before = self.runtime.pending_before(txn_id)
        if error is Errors.NONE and before is not None:
            # TransactionCoordinator.handleAddPartitionsToTransaction: producer id, epoch,
            # then pendingTransitionInProgress.
            error = self.txn._check_producer(before, pid, epoch)
            if error is Errors.NONE:
                error = Errors.CONCURRENT_TRANSACTIONS
        if error is not Errors.NONE:
            on_done(error)
            return
        error, writes = self.runtime.decide(
            lambda: self.txn.add_partitions(txn_id, pid, epoch, list(partitions), self.env.now)
        )
        if not writes:
            on_done(error)
            return
        self.runtime.write(writes[0], on_done)

    def verify_partition(self, txn_id: str, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """KIP-890 part 1 against what is persisted (the state before a write in flight)."""
        error = self.runtime.partition_error(internal_partition(txn_id, "transaction"))
        if error is not Errors.NONE:
            return error
        before = self.runtime.pending_before(txn_id)
        if before is not None:
            return self.txn.verify_against(before, pid, epoch, tp)
        return self.txn.verify_partition(txn_id, pid, epoch, tp)

    def _init_producer_id(self, request: InitProducerIdRequest) -> object | None:
        txn_id = request.transactional_id
        assert txn_id is not None
        cid = request.correlation_id
        # KafkaApis.handleInitProducerIdRequest: both or neither of producer id and epoch.
        named = (request.producer_id != NO_PRODUCER_ID, request.epoch != NO_PRODUCER_EPOCH)
        if named[0] != named[1]:
            return InitProducerIdResponse(cid, Errors.INVALID_REQUEST)
        expected = (request.producer_id, request.epoch) if named[0] else None
        error = self.runtime.partition_error(internal_partition(txn_id, "transaction"))
        if error is Errors.NONE:
            error = self.runtime.pending_error(txn_id)
        if error is not Errors.NONE:
            return InitProducerIdResponse(cid, error)
        before = self.txn.transactions.get(txn_id)
        old = (before.producer_id, before.epoch) if before is not None else None
        result, writes = self.runtime.decide(
            lambda: self.txn.init_producer_id(
                txn_id, request.transaction_timeout_ms, self.env.now, expected
            )
        )
        if not writes:
            return InitProducerIdResponse(cid, result.error, result.producer_id, result.epoch)
        meta = writes[0].meta

        def start(answer: Callable[[object], None]) -> None:
            def written(error: Errors) -> None:
                if error is not Errors.NONE:
                    if result.fenced_epoch is not None:
                        self.txn.fence_failed(meta)
                    answer(InitProducerIdResponse(cid, error))
                    return
                if result.fenced_epoch is not None:
                    self._fenced(meta, meta.producer_id, result.fenced_epoch)
                elif old is not None and (meta.producer_id, meta.epoch) != old:
                    self._fenced(meta, old[0], old[1] + 1)
                if result.abort_markers:
                    self.write_markers(meta)
                answer(InitProducerIdResponse(cid, result.error, result.producer_id, result.epoch))

            self.runtime.write(writes[0], written)

        return self.runtime.answer(start)

    def _fenced(self, meta: TransactionMetadata, pid: int, epoch: int) -> None:
        """Every epoch of ``pid`` below ``epoch`` is fenced from now on (a fence under
        transaction version 2 bumps twice; the second bump fences nothing more)."""
        if self.runtime.on_fence is not None:
            self.runtime.on_fence(meta.transactional_id, pid, epoch, self.env.now)

    def _end_txn(self, request: EndTxnRequest) -> object | None:
        cid = request.correlation_id
        txn_id = request.transactional_id
        error = self.runtime.partition_error(internal_partition(txn_id, "transaction"))
        if error is Errors.NONE:
            error = self.runtime.pending_error(txn_id)
        if error is not Errors.NONE:
            return EndTxnResponse(cid, error)
        result, writes = self.runtime.decide(
            lambda: self.txn.end_txn(
                txn_id, request.producer_id, request.epoch, request.commit, self.env.now
            )
        )
        if result.error is not Errors.NONE or not writes:
            return EndTxnResponse(cid, result.error, result.producer_id, result.epoch)
        meta = writes[0].meta
        generation = self.runtime.generation

        def start(answer: Callable[[object], None]) -> None:
            def written(error: Errors) -> None:
                if error is not Errors.NONE:
                    answer(EndTxnResponse(cid, error))
                    return
                self.probe.hit("coordinator.prepare_persisted", self.node)
                if generation != self.runtime.generation:
                    return  # crashed at the probe point: no answer
                self.write_markers(meta)
                if generation != self.runtime.generation:
                    return
                answer(EndTxnResponse(cid, Errors.NONE, result.producer_id, result.epoch))

            self.runtime.write(writes[0], written)

        return self.runtime.answer(start)

    # -- markers -----------------------------------------------------------------------
    def write_markers(self, meta: TransactionMetadata) -> None:
        """Send the markers of ``meta``'s Prepare* transaction, stamped with the coordinator
        epoch its partition is loaded at; Complete* follows once every partition accepted
        them (after a replicated Prepare*, and for each Prepare* transaction a load finds)."""
        txn_id = meta.transactional_id
        commit = meta.state is S.PREPARE_COMMIT
        partition = internal_partition(txn_id, "transaction")
        generation = self.runtime.generation
        coordinator_epoch = self.runtime.loaded_epoch(partition)
        assert coordinator_epoch is not None  # markers are written only while loaded

        def done() -> None:
            if generation != self.runtime.generation or not self.runtime.alive:
                return
            current = self.txn.transactions.get(txn_id)
            if current is not meta or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            if self.runtime.loaded_epoch(partition) != coordinator_epoch:
                return  # the next leader completes it when it loads
            self._complete(meta, coordinator_epoch)

        self.markers.send_markers(
            txn_id,
            meta.producer_id,
            self.txn.marker_epoch(meta),
            commit,
            coordinator_epoch,
            tuple(meta.partitions),
            done,
        )
        self.probe.hit("coordinator.markers_sent", self.node)

    def _complete(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Write Complete* (TransactionMarkerChannelManager.tryAppendToLog): tried again
        while the log is not available, left to the next leader when leadership moved."""
        txn_id = meta.transactional_id
        partition = internal_partition(txn_id, "transaction")
        generation = self.runtime.generation
        _result, writes = self.runtime.decide(lambda: self.txn.complete(txn_id, self.env.now))

        def written(error: Errors) -> None:
            if error is Errors.NONE:
                self.probe.hit("coordinator.complete_persisted", self.node)
            elif error is Errors.COORDINATOR_NOT_AVAILABLE:
                timer = self.env.timeout(self.settings.marker_retry_backoff_ms)
                timer.callbacks.append(lambda _ev: retry())

        def retry() -> None:
            if (
                generation != self.runtime.generation
                or self.runtime.loaded_epoch(partition) != coordinator_epoch
            ):
                return
            self.runtime.drop_pending(txn_id)
            if self.txn.transactions.get(txn_id) is meta and meta.state in (
                S.PREPARE_COMMIT,
                S.PREPARE_ABORT,
            ):
                self._complete(meta, coordinator_epoch)

        # TransactionMarkerChannelManager.tryAppendToLog runs on the TxnMarkerSenderThread.
        self.runtime.write(writes[0], written, retry_unavailable=True, deferred=True)

    # -- periodic work -----------------------------------------------------------------
    def abort_timed_out_transactions(self) -> None:
        """``TransactionCoordinator.abortTimedOutTransactions``: fence and abort every Ongoing
        transaction open longer than its timeout (the runtime runs it every
        ``abort_check_interval_ms``)."""
        if not self.runtime.alive:
            return
        for txn_id in self.txn.expired(self.env.now):
            if self.runtime.is_pending(txn_id):
                continue  # abortTimedOutTransactions skips a pending transition
            meta = self.txn.transactions[txn_id]
            if (
                self.runtime.partition_error(internal_partition(txn_id, "transaction"))
                is not Errors.NONE
            ):
                continue
            fence, writes = self.runtime.decide(
                lambda meta=meta: self.txn.fence_and_abort(meta, self.env.now)
            )
            if fence.error is not Errors.NONE:
                # The epoch cannot be bumped (32767): Kafka's prepareFenceProducerEpoch (or,
                # under transaction version 2, the abort's bump) throws, which ends this round
                # of TransactionCoordinator.abortTimedOutTransactions; the transaction stays
                # Ongoing and is tried again at the next check.
                return

            def written(
                error: Errors,
                meta: TransactionMetadata = meta,
                fenced: int | None = fence.fenced_epoch,
            ) -> None:
                if error is not Errors.NONE:
                    # The fenced epoch stays in memory; the next round fences at it again.
                    self.txn.fence_failed(meta)
                    return
                assert fenced is not None
                self._fenced(meta, meta.producer_id, fenced)
                self.write_markers(meta)

            # abortTimedOutTransactions runs on the coordinator's scheduler thread.
            self.runtime.write(writes[0], written, deferred=True)
            if not self.runtime.alive:
                return

    def remove_expired_transactional_ids(self) -> None:
        """``TransactionStateManager.removeExpiredTransactionalIds``: write a Dead record for
        every id that is not pending and idle for ``transactional_id_expiration_ms`` (the
        runtime runs it every ``expiration_check_interval_ms``)."""
        if not self.runtime.alive:
            return
        runtime = self.runtime
        candidates = {t: m for t, m in self.txn.transactions.items() if not runtime.is_pending(t)}
        everything = self.txn.transactions
        self.txn.transactions = candidates
        try:
            _expired, writes = self.runtime.decide(
                lambda: self.txn.expire_transactional_ids(
                    self.env.now, self.settings.transactional_id_expiration_ms
                )
            )
        finally:
            for txn_id in list(everything):
                if not runtime.is_pending(txn_id) and txn_id not in candidates:
                    del everything[txn_id]
            self.txn.transactions = everything
        for write in writes:
            # removeExpiredTransactionalIds runs on the scheduler thread.
            self.runtime.write(write, lambda _error: None, deferred=True)
