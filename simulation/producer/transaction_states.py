"""The client's transaction states (Kafka's ``TransactionManager.State``).

Each state names the states it may be entered from; ``FATAL_ERROR`` may be entered from any.
:class:`ClientTransactionState` tracks the current state and raises
:class:`~eosim.simulation.coordinator.transaction_state.IllegalStateTransition` on a transition the
table forbids.
"""

from __future__ import annotations

from enum import Enum

from eosim.simulation.coordinator.transaction_state import IllegalStateTransition


class State(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"

    def is_transition_valid(self, target: State) -> bool:
        if target is State.FATAL_ERROR:
            return True
        return self in _PREVIOUS[target]


_PREVIOUS: dict[State, frozenset[State]] = {
    State.UNINITIALIZED: frozenset({State.READY, State.ABORTABLE_ERROR}),
    State.INITIALIZING: frozenset({State.UNINITIALIZED, State.ABORTING_TRANSACTION}),
    State.READY: frozenset(
        {State.INITIALIZING, State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION}
    ),
    State.IN_TRANSACTION: frozenset({State.READY}),
    State.COMMITTING_TRANSACTION: frozenset({State.IN_TRANSACTION}),
    State.ABORTING_TRANSACTION: frozenset({State.IN_TRANSACTION, State.ABORTABLE_ERROR}),
    State.ABORTABLE_ERROR: frozenset(
        {
            State.IN_TRANSACTION,
            State.COMMITTING_TRANSACTION,
            State.ABORTABLE_ERROR,
            State.INITIALIZING,
        }
    ),
    State.FATAL_ERROR: frozenset(State),
}


class ClientTransactionState:
    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = State.UNINITIALIZED

    def transition_to(self, target: State) -> None:
        if not self.state.is_transition_valid(target):
            raise IllegalStateTransition(
                f"{self.transactional_id}: client {self.state.value} -> {target.value} is not "
                "a legal transition"
            )
        self.state = target
