"""TransactionCoordinator: the protocol decisions, as pure logic over the transaction log.

Each handler takes a request and the time, changes state only by writing to the
:class:`TransactionLog` first (as Kafka changes state only after the append succeeds),
and returns the answer. Writing markers to partitions is the caller's job: ``end_txn``
returns the partitions to mark, and ``complete`` is called once every marker is in.

Rules, each read from Kafka's ``TransactionCoordinator`` and ``TransactionMetadata``:

* InitProducerId (``handleInitProducerId`` / ``prepareInitProducerIdTransit``): a timeout
  above ``transaction.max.timeout.ms`` is refused. A caller that names its producer id and
  epoch (KIP-360) is fenced unless the id is the current one, or the metadata was just
  created, or the id is the previous one and its epoch is exhausted. Prepare* answers
  CONCURRENT_TRANSACTIONS. Ongoing is fenced (epoch + 1, kept in memory even if the
  PrepareAbort cannot be written, and then not bumped again by the next fence) and aborted,
  answered CONCURRENT_TRANSACTIONS so that the retry gets a fresh epoch; at epoch 32767 the
  fence is refused (UNKNOWN_SERVER_ERROR, Kafka's answer to the IllegalStateException). Empty and
  Complete* bump the epoch (``prepareIncrementProducerEpoch``): no expected epoch -> bump and
  forget the last epoch; expected == current (or no current) -> bump and remember the old
  one as the last epoch; expected == last epoch -> the retry of a bump that succeeded, answer
  the current epoch; anything else -> PRODUCER_FENCED. An exhausted epoch (32766) gets a new
  producer id at epoch 0 (``prepareProducerIdRotation``).
* AddPartitionsToTxn: wrong producer id -> INVALID_PRODUCER_ID_MAPPING, wrong epoch ->
  PRODUCER_FENCED, Prepare* -> CONCURRENT_TRANSACTIONS, partitions already in the open
  transaction -> success without a write, else Ongoing.
* EndTxn (``endTransaction``): Ongoing -> PrepareCommit/PrepareAbort; a retry of the same
  outcome is success in Complete* and CONCURRENT_TRANSACTIONS in Prepare*; the opposite
  outcome is INVALID_TXN_STATE. Transaction version 2 bumps the epoch at Prepare*, so a retry
  is recognised by ``current epoch == request epoch + 1``; an exhausted epoch keeps the old
  producer id (at epoch 32767) through Prepare*, so that the markers close its transaction,
  and switches to a new producer id at Complete*.
* Verification (KIP-890 part 1, ``handleVerifyPartitionsInTransaction``): wrong producer id ->
  INVALID_PRODUCER_ID_MAPPING, wrong epoch -> PRODUCER_FENCED, Prepare* ->
  CONCURRENT_TRANSACTIONS, a partition not in the transaction -> TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eosim.simulation.coordinator.transaction_log import (
    TransactionLog,
    TransactionLogRecord,
    partition_for,
)
from eosim.simulation.coordinator.transaction_state import (
    TransactionMetadata,
    TransactionState,
)
from eosim.simulation.protocol import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    Errors,
    TopicPartition,
)
from eosim.simulation.rules import ProtocolRules

S = TransactionState
PREPARE_STATES = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
COMPLETE_STATES = (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH
    # Partitions that need ABORT markers because an open transaction was fenced.
    abort_markers: tuple[TopicPartition, ...] = ()
    # An open transaction was fenced: the fence's epoch (every lower epoch is fenced).
    fenced_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: Errors
    markers: tuple[TopicPartition, ...] = ()
    commit: bool = True
    # On success: the producer id and epoch the coordinator holds after the request.
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class FenceResult:
    error: Errors
    markers: tuple[TopicPartition, ...] = ()
    # The fence's epoch, now in memory whether or not its PrepareAbort is written.
    fenced_epoch: int | None = None


class TransactionCoordinator:
    def __init__(
        self,
        log: TransactionLog | None,
        next_producer_id: Callable[[], int],
        rules: ProtocolRules,
    ) -> None:
        self.log = log
        self.next_producer_id = next_producer_id
        self.rules = rules
        self.transactions: dict[str, TransactionMetadata] = {}
        # Called with the metadata and its record just before a write is applied (the
        # coordinator runtime appends the record to its partition and reverts on failure).
        self.before_write: Callable[[TransactionMetadata, TransactionLogRecord], None] | None = None

    @property
    def epoch_bump_per_transaction(self) -> bool:
        """Transaction version 2 (``TransactionVersion.supportsEpochBump``)."""
        return self.rules.transaction_version >= 2

    # -- persistence ---------------------------------------------------------------------
    def _persist(
        self, meta: TransactionMetadata, target: TransactionState, now: float, **changes: object
    ) -> None:
        """Write the metadata with ``changes`` in state ``target`` to the log, then apply
        them (illegal state changes raise)."""
        if not meta.state.can_transition_to(target):
            meta.transition_to(target)  # raises IllegalStateTransition with the details
        view = {
            "producer_id": meta.producer_id,
            "epoch": meta.epoch,
            "timeout_ms": meta.timeout_ms,
            "partitions": meta.partitions,
            "started_ms": meta.started_ms,
            **changes,
        }
        record = TransactionLogRecord(
            meta.transactional_id,
            view["producer_id"],  # type: ignore[arg-type]
            view["epoch"],  # type: ignore[arg-type]
            view["timeout_ms"],  # type: ignore[arg-type]
            target,
            tuple(view["partitions"]),  # type: ignore[arg-type]
            view["started_ms"],  # type: ignore[arg-type]
            now,
        )
        if self.log is not None:
            self.log.append(record)
        if self.before_write is not None:
            self.before_write(meta, record)
        for name, value in changes.items():
            setattr(meta, name, value)
        meta.transition_to(target)
        meta.updated_ms = now

    def load(self, partition: int | None = None) -> list[TransactionMetadata]:
        """Rebuild state from the shared log (every id, or one partition's); see
        :meth:`load_records`."""
        assert self.log is not None
        return self.load_records(self.log.load(partition), partition)

    def load_records(
        self, latest: dict[str, TransactionLogRecord], partition: int | None = None
    ) -> list[TransactionMetadata]:
        """Rebuild state from the latest record of each id (coordinator failover).

        Only what the log records comes back: the last producer epoch and the previous and
        next producer ids start unset, as in Kafka's ``TransactionLog.readTxnRecordValue``.
        Returns the loaded transactions that are in PrepareCommit or PrepareAbort: their
        markers must be written again."""
        loaded = {
            txn_id: TransactionMetadata(
                r.transactional_id,
                r.producer_id,
                r.epoch,
                r.timeout_ms,
                r.state,
                list(r.partitions),
                r.started_ms,
                updated_ms=r.time,
            )
            for txn_id, r in latest.items()
            if r.state is not S.DEAD
        }
        if partition is None:
            self.transactions = loaded
        else:
            self.transactions.update(loaded)
        return [m for m in loaded.values() if m.state in PREPARE_STATES]

    def unload(self, partition: int) -> None:
        """Forget one partition's transactions (its leadership moved away)."""
        for txn_id in [t for t in self.transactions if partition_for(t) == partition]:
            del self.transactions[txn_id]

    # -- InitProducerId ------------------------------------------------------------------
    def init_producer_id(
        self,
        txn_id: str,
        timeout_ms: int,
        now: float,
        expected: tuple[int, int] | None = None,
    ) -> InitProducerIdResult:
        """``expected``: the caller's (producer id, epoch) when it asks for a bump (KIP-360)."""
        if timeout_ms > self.rules.transaction_max_timeout_ms or timeout_ms <= 0:
            return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(txn_id)
        if meta is None:
            # Kept in memory at epoch -1 until the bump below is written.
            meta = TransactionMetadata(
                txn_id, self.next_producer_id(), NO_PRODUCER_EPOCH, timeout_ms, updated_ms=now
            )
            self.transactions[txn_id] = meta
        if expected is not None and not self._valid_expected_producer_id(meta, expected):
            return InitProducerIdResult(Errors.PRODUCER_FENCED)
        if meta.state in PREPARE_STATES:
            return InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
        if meta.state is S.ONGOING:
            fence = self.fence_and_abort(meta, now)
            if fence.error is not Errors.NONE:
                return InitProducerIdResult(fence.error)
            return InitProducerIdResult(
                Errors.CONCURRENT_TRANSACTIONS,
                abort_markers=fence.markers,
                fenced_epoch=fence.fenced_epoch,
            )
        if meta.state not in (S.EMPTY, *COMPLETE_STATES):
            raise RuntimeError(f"{txn_id}: InitProducerId in state {meta.state.value}")
        expected_epoch = None if expected is None else expected[1]
        if meta.epoch_exhausted and expected_epoch in (None, meta.epoch):
            # prepareProducerIdRotation
            changes: dict[str, object] = {
                "producer_id": self.next_producer_id(),
                "epoch": 0,
                "last_producer_epoch": NO_PRODUCER_EPOCH if expected is None else meta.epoch,
            }
        else:
            if meta.epoch_exhausted:
                # prepareIncrementProducerEpoch throws IllegalStateException.
                return InitProducerIdResult(Errors.UNKNOWN_SERVER_ERROR)
            bumped = meta.epoch + 1
            if expected_epoch is None:
                epochs = (bumped, NO_PRODUCER_EPOCH)
            elif meta.epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.epoch:
                epochs = (bumped, meta.epoch)
            elif expected_epoch == meta.last_producer_epoch:
                epochs = (meta.epoch, meta.last_producer_epoch)  # a retry of a bump that succeeded
            else:
                return InitProducerIdResult(Errors.PRODUCER_FENCED)
            changes = {"epoch": epochs[0], "last_producer_epoch": epochs[1]}
        self._persist(
            meta,
            S.EMPTY,
            now,
            timeout_ms=timeout_ms,
            partitions=[],
            started_ms=None,
            previous_producer_id=meta.producer_id,
            **changes,
        )
        return InitProducerIdResult(Errors.NONE, meta.producer_id, meta.epoch)

    @staticmethod
    def _valid_expected_producer_id(meta: TransactionMetadata, expected: tuple[int, int]) -> bool:
        """``isValidProducerId``: the metadata was just created, or the caller names the current
        producer id, or the previous one with an exhausted epoch (a retried rotation)."""
        pid, epoch = expected
        return (
            meta.epoch == NO_PRODUCER_EPOCH
            or pid == meta.producer_id
            or (pid == meta.previous_producer_id and epoch >= MAX_EPOCH - 1)
        )

    def fence_and_abort(self, meta: TransactionMetadata, now: float) -> FenceResult:
        """Fence the open transaction's producer and start aborting it: Kafka's
        ``prepareFenceProducerEpoch`` (epoch + 1, refused at 32767; no bump if an earlier
        fence's write failed, ``hasFailedEpochFence``) followed by an abort that is not from
        the client (``endTransaction``). That abort puts the fenced epoch into the in-memory
        metadata at once, outside the write, so it stays there, still fencing the producer, if
        the PrepareAbort cannot be written (the caller then calls :meth:`fence_failed`).
        Under transaction version 2 the abort bumps the epoch once more, as every end of a
        transaction does (``prepareAbortOrCommit``): the markers carry epoch + 2. If that
        second bump would pass 32767, ``prepareTransitionTo`` throws with the fenced epoch
        already in memory; nothing is written and the transaction stays Ongoing."""
        if meta.epoch >= MAX_EPOCH:
            return FenceResult(Errors.UNKNOWN_SERVER_ERROR)
        fenced = meta.epoch if meta.has_failed_epoch_fence else meta.epoch + 1
        meta.epoch, meta.last_producer_epoch = fenced, NO_PRODUCER_EPOCH
        if self.epoch_bump_per_transaction:
            if fenced >= MAX_EPOCH:
                return FenceResult(Errors.UNKNOWN_SERVER_ERROR)
            epoch, last = fenced + 1, fenced
        else:
            epoch, last = fenced, NO_PRODUCER_EPOCH
        self._persist(
            meta,
            S.PREPARE_ABORT,
            now,
            epoch=epoch,
            last_producer_epoch=last,
            next_producer_id=NO_PRODUCER_ID,
        )
        return FenceResult(Errors.NONE, tuple(meta.partitions), fenced)

    @staticmethod
    def fence_failed(meta: TransactionMetadata) -> None:
        """The PrepareAbort of a fence could not be written (the coordinator still owns the
        id): the fenced epoch stays in memory, and the next fence does not bump it again
        (``TransactionCoordinator.endTransaction`` sets ``hasFailedEpochFence``)."""
        meta.has_failed_epoch_fence = True

    # -- AddPartitionsToTxn --------------------------------------------------------------
    def _check_producer(self, meta: TransactionMetadata | None, pid: int, epoch: int) -> Errors:
        if meta is None or meta.producer_id != pid:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if meta.epoch != epoch:
            return Errors.PRODUCER_FENCED
        return Errors.NONE

    def add_partitions(
        self, txn_id: str, pid: int, epoch: int, partitions: list[TopicPartition], now: float
    ) -> Errors:
        meta = self.transactions.get(txn_id)
        error = self._check_producer(meta, pid, epoch)
        if error is not Errors.NONE:
            return error
        assert meta is not None
        if meta.state in (*PREPARE_STATES, S.PREPARE_EPOCH_FENCE):
            return Errors.CONCURRENT_TRANSACTIONS
        if meta.state is S.ONGOING and all(tp in meta.partitions for tp in partitions):
            return Errors.NONE  # already in the transaction: answered without a write
        ongoing = meta.state is S.ONGOING
        merged = list(meta.partitions) if ongoing else []
        for tp in partitions:
            if tp not in merged:
                merged.append(tp)
        started = meta.started_ms if ongoing else now
        self._persist(meta, S.ONGOING, now, partitions=merged, started_ms=started)
        return Errors.NONE

    # -- EndTxn --------------------------------------------------------------------------
    def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool, now: float) -> EndTxnResult:
        meta = self.transactions.get(txn_id)
        if meta is None:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        tv2 = self.epoch_bump_per_transaction
        # A retry of an EndTxn that exhausted the epoch: the id has switched at Complete*.
        retry_on_overflow = (
            tv2 and meta.previous_producer_id == pid and epoch == MAX_EPOCH - 1 and meta.epoch == 0
        )
        retry_on_epoch_bump = tv2 and meta.epoch == epoch + 1
        if not tv2 or meta.state in (S.ONGOING, S.EMPTY):
            valid_epoch = epoch == meta.epoch
        elif meta.state in PREPARE_STATES:
            valid_epoch = retry_on_epoch_bump
        else:
            valid_epoch = retry_on_epoch_bump or retry_on_overflow
        if meta.producer_id != pid and not retry_on_overflow:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        wanted_prepare = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        wanted_complete = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if meta.state is S.ONGOING:
            changes: dict[str, object] = {}
            if tv2:
                # KIP-890 part 2: the epoch is bumped as the transaction ends, so the markers
                # fence the ended epoch on every partition. An exhausted epoch goes to 32767
                # under the old producer id; the new id takes over at Complete*.
                next_pid = self.next_producer_id() if meta.epoch_exhausted else NO_PRODUCER_ID
                changes = {
                    "epoch": meta.epoch + 1,
                    "last_producer_epoch": meta.epoch,
                    "next_producer_id": next_pid,
                }
            self._persist(meta, wanted_prepare, now, **changes)
            return EndTxnResult(
                Errors.NONE, tuple(meta.partitions), commit, meta.producer_id, meta.epoch
            )
        if meta.state is wanted_complete:
            return EndTxnResult(Errors.NONE, (), commit, meta.producer_id, meta.epoch)
        if meta.state is wanted_prepare:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        return EndTxnResult(Errors.INVALID_TXN_STATE)

    def complete(self, txn_id: str, now: float) -> None:
        """Every marker is written: move Prepare* to Complete* (``prepareComplete``, which also
        clears ``hasFailedEpochFence``)."""
        meta = self.transactions[txn_id]
        meta.has_failed_epoch_fence = False
        target = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        changes: dict[str, object] = {}
        if self.epoch_bump_per_transaction:
            overflowed = meta.next_producer_id != NO_PRODUCER_ID
            changes = {
                "producer_id": meta.next_producer_id if overflowed else meta.producer_id,
                "epoch": 0 if overflowed else meta.epoch,
                "last_producer_epoch": meta.epoch,
                "previous_producer_id": meta.producer_id,
                "next_producer_id": NO_PRODUCER_ID,
            }
        self._persist(meta, target, now, partitions=[], started_ms=None, **changes)

    def verify_partition(self, txn_id: str, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """KIP-890 part 1: is ``tp`` in the open transaction of this producer and epoch?"""
        return self.verify_against(self.transactions.get(txn_id), pid, epoch, tp)

    @staticmethod
    def verify_against(
        meta: TransactionMetadata | None, pid: int, epoch: int, tp: TopicPartition
    ) -> Errors:
        """:meth:`verify_partition` against ``meta`` (the state before a write in flight:
        ``handleVerifyPartitionsInTransaction`` reads what has been persisted)."""
        if meta is None or meta.producer_id != pid:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if meta.epoch != epoch:
            return Errors.PRODUCER_FENCED
        if meta.state in PREPARE_STATES:
            return Errors.CONCURRENT_TRANSACTIONS
        return Errors.NONE if tp in meta.partitions else Errors.TRANSACTION_ABORTABLE

    def marker_epoch(self, meta: TransactionMetadata) -> int:
        """The epoch the markers of the transaction ending now carry: the current one, which
        after a fence or (transaction version 2) at every end is the bumped epoch."""
        return meta.epoch

    def expire_transactional_ids(self, now: float, expiration_ms: float) -> list[str]:
        """Remove ids (Empty or Complete*) last updated ``expiration_ms`` ago or earlier
        (``TransactionStateManager.shouldExpire``: lastUpdate <= now - expiration)."""
        expired = [
            txn_id
            for txn_id, meta in self.transactions.items()
            if meta.state in (S.EMPTY, *COMPLETE_STATES) and now - meta.updated_ms >= expiration_ms
        ]
        for txn_id in expired:
            self._persist(self.transactions[txn_id], S.DEAD, now)
            del self.transactions[txn_id]
        return expired

    # -- timeouts ------------------------------------------------------------------------
    def expired(self, now: float) -> list[str]:
        """Ongoing transactions older than their timeout (the periodic check's candidates)."""
        return [
            txn_id
            for txn_id, meta in self.transactions.items()
            if meta.state is S.ONGOING
            and meta.started_ms is not None
            and now - meta.started_ms > meta.timeout_ms
        ]
