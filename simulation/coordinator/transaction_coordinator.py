"""TransactionCoordinator: the protocol decisions, as pure logic over the transaction log.

Each handler takes a request and the time, changes state only by writing to the
:class:`TransactionLog` first (as Kafka changes state only after the append succeeds),
and returns the answer. Writing markers to partitions is the caller's job: ``end_txn``
returns the partitions to mark, and ``complete`` is called once every marker is in.

Rules (``../shared/reference/kafka-protocol.md``):

* InitProducerId: a timeout above ``transaction.max.timeout.ms`` is refused; a pending
  Prepare* state answers CONCURRENT_TRANSACTIONS; an Ongoing transaction is fenced (epoch + 1)
  and aborted, and the client is told CONCURRENT_TRANSACTIONS so that its retry gets the
  bumped epoch; Empty and Complete* bump the epoch; an exhausted epoch gets a new producer id.
* AddPartitionsToTxn: wrong producer id -> INVALID_PRODUCER_ID_MAPPING, wrong epoch ->
  PRODUCER_FENCED, Prepare* -> CONCURRENT_TRANSACTIONS, else Ongoing.
* EndTxn: Ongoing -> PrepareCommit/PrepareAbort; a retry of the same outcome is success in
  Complete* and CONCURRENT_TRANSACTIONS in Prepare*; the opposite outcome is INVALID_TXN_STATE.
* Transaction version 2 bumps the epoch as every transaction ends (at Prepare*).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulation.coordinator.transaction_log import (
    TransactionLog,
    TransactionLogRecord,
    partition_for,
)
from simulation.coordinator.transaction_state import (
    TransactionMetadata,
    TransactionState,
)
from simulation.protocol import MAX_EPOCH, Errors, TopicPartition
from simulation.rules import ProtocolRules

S = TransactionState


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = -1
    epoch: int = -1
    # Partitions that need ABORT markers because an open transaction was fenced.
    abort_markers: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: Errors
    markers: tuple[TopicPartition, ...] = ()
    commit: bool = True


class TransactionCoordinator:
    def __init__(
        self,
        log: TransactionLog,
        next_producer_id: Callable[[], int],
        rules: ProtocolRules,
    ) -> None:
        self.log = log
        self.next_producer_id = next_producer_id
        self.rules = rules
        self.transactions: dict[str, TransactionMetadata] = {}

    # -- persistence ---------------------------------------------------------------------
    def _persist(self, meta: TransactionMetadata, target: TransactionState, now: float) -> None:
        """Write the new state to the log, then change it (illegal changes raise)."""
        if not meta.state.can_transition_to(target):
            meta.transition_to(target)  # raises IllegalStateTransition with the details
        self.log.append(
            TransactionLogRecord(
                meta.transactional_id,
                meta.producer_id,
                meta.epoch,
                meta.timeout_ms,
                target,
                tuple(meta.partitions),
                meta.started_ms,
                now,
                meta.last_end_epoch,
            )
        )
        meta.transition_to(target)
        meta.updated_ms = now

    def load(self, partition: int | None = None) -> list[TransactionMetadata]:
        """Rebuild state from the log (coordinator failover): every id, or one partition's.

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
                last_end_epoch=r.last_end_epoch,
                updated_ms=r.time,
            )
            for txn_id, r in self.log.load(partition).items()
            if r.state is not S.DEAD
        }
        if partition is None:
            self.transactions = loaded
        else:
            self.transactions.update(loaded)
        return [m for m in loaded.values() if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]

    def unload(self, partition: int) -> None:
        """Forget one partition's transactions (its leadership moved away)."""
        for txn_id in [t for t in self.transactions if partition_for(t) == partition]:
            del self.transactions[txn_id]

    # -- InitProducerId ------------------------------------------------------------------
    def init_producer_id(self, txn_id: str, timeout_ms: int, now: float) -> InitProducerIdResult:
        if timeout_ms > self.rules.transaction_max_timeout_ms or timeout_ms <= 0:
            return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(txn_id)
        if meta is None:
            meta = TransactionMetadata(txn_id, self.next_producer_id(), 0, timeout_ms)
            self.transactions[txn_id] = meta
            self._persist(meta, S.EMPTY, now)
            return InitProducerIdResult(Errors.NONE, meta.producer_id, meta.epoch)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
        if meta.state is S.ONGOING:
            markers = self.fence_and_abort(meta, now)
            return InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS, abort_markers=markers)
        meta.timeout_ms = timeout_ms
        self._bump_epoch(meta)
        self._persist(meta, S.EMPTY, now)
        return InitProducerIdResult(Errors.NONE, meta.producer_id, meta.epoch)

    def _bump_epoch(self, meta: TransactionMetadata) -> None:
        if meta.epoch >= MAX_EPOCH - 1:
            meta.producer_id, meta.epoch = self.next_producer_id(), 0
        else:
            meta.epoch += 1

    def fence_and_abort(self, meta: TransactionMetadata, now: float) -> tuple[TopicPartition, ...]:
        """Fence the open transaction's producer (epoch + 1) and start aborting it."""
        meta.epoch += 1
        meta.last_end_epoch = None
        self._persist(meta, S.PREPARE_EPOCH_FENCE, now)
        self._persist(meta, S.PREPARE_ABORT, now)
        return tuple(meta.partitions)

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
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return Errors.CONCURRENT_TRANSACTIONS
        if meta.state is not S.ONGOING:
            meta.partitions = []
            meta.started_ms = now
        for tp in partitions:
            if tp not in meta.partitions:
                meta.partitions.append(tp)
        self._persist(meta, S.ONGOING, now)
        return Errors.NONE

    # -- EndTxn --------------------------------------------------------------------------
    def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool, now: float) -> EndTxnResult:
        meta = self.transactions.get(txn_id)
        error = self._check_producer(meta, pid, epoch)
        retry_of_ended = (
            meta is not None
            and self.rules.transaction_version >= 2
            and meta.producer_id == pid
            and meta.last_end_epoch == epoch
            and meta.epoch == epoch + 1
            and meta.state
            in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        )
        if error is not Errors.NONE and not retry_of_ended:
            return EndTxnResult(error)
        assert meta is not None
        wanted_prepare = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        wanted_complete = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if meta.state is S.ONGOING and not retry_of_ended:
            meta.last_end_epoch = epoch
            if self.rules.transaction_version >= 2:
                # KIP-890 part 2: the epoch is bumped as the transaction ends, so the markers
                # fence the ended epoch on every partition.
                self._bump_epoch(meta)
            self._persist(meta, wanted_prepare, now)
            return EndTxnResult(Errors.NONE, tuple(meta.partitions), commit)
        if meta.state is wanted_complete:
            return EndTxnResult(Errors.NONE, (), commit)
        if meta.state is wanted_prepare:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        return EndTxnResult(Errors.INVALID_TXN_STATE)

    def complete(self, txn_id: str, now: float) -> None:
        """Every marker is written: move Prepare* to Complete*."""
        meta = self.transactions[txn_id]
        target = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        meta.partitions = []
        meta.started_ms = None
        self._persist(meta, target, now)

    def verify_partition(self, txn_id: str, pid: int, epoch: int, tp: TopicPartition) -> Errors:
        """KIP-890 part 1: is ``tp`` in the open transaction of this producer and epoch?"""
        meta = self.transactions.get(txn_id)
        if (
            meta is not None
            and meta.producer_id == pid
            and meta.epoch == epoch
            and meta.state is S.ONGOING
            and tp in meta.partitions
        ):
            return Errors.NONE
        return Errors.INVALID_TXN_STATE

    def marker_epoch(self, meta: TransactionMetadata) -> int:
        """The epoch the markers of the transaction ending now carry: the current one, which
        after a fence or (transaction version 2) at every end is the bumped epoch."""
        return meta.epoch

    def expire_transactional_ids(self, now: float, expiration_ms: float) -> list[str]:
        """Remove ids idle (Empty or Complete*) for longer than ``expiration_ms``."""
        expired = [
            txn_id
            for txn_id, meta in self.transactions.items()
            if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            and now - meta.updated_ms > expiration_ms
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
