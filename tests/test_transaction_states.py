"""Both transaction state machines allow exactly the transitions of the reference."""

from __future__ import annotations

import itertools

import pytest

from eosim.simulation.coordinator.transaction_state import (
    IllegalStateTransition,
    TransactionMetadata,
    TransactionState,
)
from eosim.simulation.producer.transaction_states import ClientTransactionState, State

T = TransactionState
# The reference's table, written out as (from, to) pairs.
COORDINATOR_LEGAL = {
    (T.EMPTY, T.EMPTY),
    (T.COMPLETE_COMMIT, T.EMPTY),
    (T.COMPLETE_ABORT, T.EMPTY),
    (T.ONGOING, T.ONGOING),
    (T.EMPTY, T.ONGOING),
    (T.COMPLETE_COMMIT, T.ONGOING),
    (T.COMPLETE_ABORT, T.ONGOING),
    (T.ONGOING, T.PREPARE_COMMIT),
    (T.ONGOING, T.PREPARE_ABORT),
    (T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT),
    (T.PREPARE_COMMIT, T.COMPLETE_COMMIT),
    (T.PREPARE_ABORT, T.COMPLETE_ABORT),
    (T.EMPTY, T.DEAD),
    (T.COMPLETE_COMMIT, T.DEAD),
    (T.COMPLETE_ABORT, T.DEAD),
    (T.ONGOING, T.PREPARE_EPOCH_FENCE),
}
CLIENT_LEGAL = {
    (State.READY, State.UNINITIALIZED),
    (State.ABORTABLE_ERROR, State.UNINITIALIZED),
    (State.UNINITIALIZED, State.INITIALIZING),
    (State.ABORTING_TRANSACTION, State.INITIALIZING),
    (State.INITIALIZING, State.READY),
    (State.COMMITTING_TRANSACTION, State.READY),
    (State.ABORTING_TRANSACTION, State.READY),
    (State.READY, State.IN_TRANSACTION),
    (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION),
    (State.IN_TRANSACTION, State.ABORTING_TRANSACTION),
    (State.ABORTABLE_ERROR, State.ABORTING_TRANSACTION),
    (State.IN_TRANSACTION, State.ABORTABLE_ERROR),
    (State.COMMITTING_TRANSACTION, State.ABORTABLE_ERROR),
    (State.ABORTABLE_ERROR, State.ABORTABLE_ERROR),
    (State.INITIALIZING, State.ABORTABLE_ERROR),
} | {(s, State.FATAL_ERROR) for s in State}


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(T, T)))
def test_coordinator_transitions_match_the_reference(src, dst):
    meta = TransactionMetadata("tx", 1, 0, 60_000, state=src)
    if (src, dst) in COORDINATOR_LEGAL:
        meta.transition_to(dst)
        assert meta.state is dst and meta.history == [src]
    else:
        with pytest.raises(IllegalStateTransition, match=f"{src.value} -> {dst.value}"):
            meta.transition_to(dst)
        assert meta.state is src


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(State, State)))
def test_client_transitions_match_the_reference(src, dst):
    client = ClientTransactionState("tx")
    client.state = src
    if (src, dst) in CLIENT_LEGAL:
        client.transition_to(dst)
        assert client.state is dst
    else:
        with pytest.raises(IllegalStateTransition):
            client.transition_to(dst)
        assert client.state is src


def test_a_commit_walks_the_legal_path():
    meta = TransactionMetadata("tx", 1, 0, 60_000)
    for state in (T.ONGOING, T.PREPARE_COMMIT, T.COMPLETE_COMMIT, T.EMPTY):
        meta.transition_to(state)
    assert meta.history == [T.EMPTY, T.ONGOING, T.PREPARE_COMMIT, T.COMPLETE_COMMIT]
