"""The transaction coordinator's state machine for one transactional.id.

Kafka's ``TransactionState`` with exactly the legal transitions: each state names the states
it may be entered from. A transition the table does not allow is a simulator bug, so
:meth:`TransactionMetadata.transition_to` raises :class:`IllegalStateTransition` instead of
absorbing it. In Kafka a state changes only after its record is written to
``__transaction_state``; the coordinator model calls ``transition_to`` at that point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from eosim.simulation.protocol import MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID


class IllegalStateTransition(RuntimeError):
    """A state change the protocol forbids: always a bug in the model, never absorbed."""


class TransactionState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def valid_previous(self) -> frozenset[TransactionState]:
        return _PREVIOUS[self]

    def can_transition_to(self, target: TransactionState) -> bool:
        return self in target.valid_previous


S = TransactionState
_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``TransactionMetadata.isEpochExhausted``: a client never gets epoch 32767, so
    that the coordinator can always fence the producer once more."""
    return epoch >= MAX_EPOCH - 1


@dataclass
class TransactionMetadata:
    """What the coordinator knows about one transactional.id (Kafka's ``TransactionMetadata``).

    ``last_producer_epoch`` is the epoch before the last KIP-360 bump (NO_PRODUCER_EPOCH when a
    new instance initialised, or after a fence), so that a retried bump is told apart from a
    zombie's. ``previous_producer_id`` is the producer id before the last transition and
    ``next_producer_id`` the id a transaction version 2 transaction that exhausted the epoch
    switches to at Complete*. Kafka keeps these three in memory only: its transaction log
    record has no field for the last epoch and does not fill in the previous and next ids, so
    a coordinator that loads the log starts with all three unset.

    ``has_failed_epoch_fence`` is Kafka's ``hasFailedEpochFence`` (KAFKA-9666): a fence's
    epoch went into memory but its PrepareAbort could not be written, so the next fence uses
    that epoch again instead of bumping it once more. Memory only, like the three above;
    cleared when the transaction completes (``prepareComplete``).
    """

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: list[tuple[str, int]] = field(default_factory=list)
    started_ms: float | None = None
    updated_ms: float = 0.0
    history: list[TransactionState] = field(default_factory=list)
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    has_failed_epoch_fence: bool = False

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.epoch)

    def transition_to(self, target: TransactionState) -> None:
        if not self.state.can_transition_to(target):
            raise IllegalStateTransition(
                f"{self.transactional_id}: {self.state.value} -> {target.value} is not a "
                f"legal coordinator transition (allowed into {target.value} from: "
                f"{', '.join(sorted(s.value for s in target.valid_previous))})"
            )
        self.history.append(self.state)
        self.state = target
