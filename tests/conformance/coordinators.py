"""A TransactionCoordinator holding one transactional id in a given state, set up as Kafka's
coordinator tests construct their ``TransactionMetadata``."""

from __future__ import annotations

import itertools

from eosim.simulation.coordinator.transaction_coordinator import TransactionCoordinator
from eosim.simulation.coordinator.transaction_log import TransactionLog
from eosim.simulation.coordinator.transaction_state import TransactionMetadata, TransactionState
from eosim.simulation.protocol import TopicPartition
from eosim.simulation.rules import VERSIONS

NEW_PID = 9893


def coordinator_with(
    txn_id: str,
    pid: int,
    state: TransactionState = TransactionState.EMPTY,
    epoch: int = 1,
    last: int = -1,
    version: str = "3.9",
    partitions: tuple[TopicPartition, ...] = (),
    previous: int = -1,
    next_pid: int = -1,
    timeout_ms: int = 30_000,
) -> tuple[TransactionCoordinator, TransactionMetadata]:
    """``version``: "3.9" is Kafka's transaction version 0/1 (no epoch bump per transaction),
    "4.0" version 2. New producer ids are handed out from 9893 on."""
    ids = itertools.count(NEW_PID)
    c = TransactionCoordinator(TransactionLog(), lambda: next(ids), VERSIONS[version])
    meta = TransactionMetadata(
        txn_id,
        pid,
        epoch,
        timeout_ms,
        state,
        list(partitions),
        started_ms=1.0,
        updated_ms=100.0,
        previous_producer_id=previous,
        next_producer_id=next_pid,
        last_producer_epoch=last,
    )
    c.transactions[txn_id] = meta
    return c, meta
