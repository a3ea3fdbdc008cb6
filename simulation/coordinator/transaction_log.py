"""The transaction log (``__transaction_state``) records: one per state change.

Each record is the full metadata of one transactional.id after a change, and the last
record per id wins. In a run the records are batches of the replicated
``__transaction_state`` partitions (:mod:`eosim.simulation.coordinator.runtime` appends them);
:class:`TransactionLog` is a plain list of them for tests of the coordinator's logic alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eosim.simulation.coordinator.transaction_state import TransactionState

TRANSACTION_STATE_PARTITIONS = 50


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit integer (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value, with Integer.MIN_VALUE mapped to 0."""
    return 0 if n == -(2**31) else abs(n)


def partition_for(key: str, partitions: int = TRANSACTION_STATE_PARTITIONS) -> int:
    """The ``__transaction_state`` (or ``__consumer_offsets``) partition of an id."""
    return kafka_abs(java_string_hash(key)) % partitions


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """What Kafka's ``TransactionLog.valueToBytes`` writes: producer id and epoch, timeout,
    state, partitions and timestamps. Not the last producer epoch (the record has no field
    for it) and not the previous or next producer id (the fields exist but are left unset),
    so a coordinator that loads the log does not know them."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: tuple[tuple[str, int], ...]
    started_ms: float | None
    time: float


def latest_records(
    records: Iterable[TransactionLogRecord], partition: int | None = None
) -> dict[str, TransactionLogRecord]:
    """The latest record of every transactional.id (of one partition, if given)."""
    latest: dict[str, TransactionLogRecord] = {}
    for r in records:
        if partition is None or partition_for(r.transactional_id) == partition:
            latest[r.transactional_id] = r
    return latest


class TransactionLog:
    def __init__(self) -> None:
        self.records: list[TransactionLogRecord] = []

    def append(self, record: TransactionLogRecord) -> None:
        self.records.append(record)

    def load(self, partition: int | None = None) -> dict[str, TransactionLogRecord]:
        """The latest record of every transactional.id (of one partition, if given)."""
        return latest_records(self.records, partition)
