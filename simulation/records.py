"""Record batches as they sit in a partition log and travel in fetch responses.

This is the vocabulary the broker's log, the wire (:mod:`eosim.simulation.protocol`) and the
consumer share, as Kafka's ``org.apache.kafka.common.record`` package is: the producer-id,
epoch and sequence sentinels of a batch header, sequence arithmetic, a written batch
(:class:`LogBatch`) and an entry of the aborted-transaction index
(:class:`AbortedTransaction`). It imports nothing else from the model, so any module may
import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
# RecordBatch.NO_TIMESTAMP is -1 on Kafka's wall clock, i.e. long ago; the simulated clock starts
# at 0, so "long ago" is minus infinity here.
NO_TIMESTAMP = float("-inf")

# The size of a batch on disk, as the producer estimates it (RecordAccumulator): a v2 batch
# header, and per record its key and value plus the varint framing (the same numbers as
# eosim.simulation.producer.accumulator). A control batch holds one record with a 4-byte key
# (version, type) and a 6-byte value (version, coordinator epoch): EndTransactionMarker.
BATCH_OVERHEAD_BYTES = 61
RECORD_OVERHEAD_BYTES = 8
CONTROL_BATCH_BYTES = BATCH_OVERHEAD_BYTES + RECORD_OVERHEAD_BYTES + 4 + 6

ControlType = Literal["COMMIT", "ABORT"]


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence arithmetic as in Kafka: after 2147483647 comes 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def batch_size(values: tuple[str, ...]) -> int:
    """The size of a batch of ``values`` with no key, when nobody said how large its records
    were (a batch appended by a test, or by a coordinator): header plus values plus framing."""
    return BATCH_OVERHEAD_BYTES + sum(len(v) + RECORD_OVERHEAD_BYTES for v in values)


@dataclass(slots=True)
class LogBatch:
    base_offset: int
    producer_id: int
    epoch: int
    base_sequence: int
    values: tuple[str, ...]
    append_time: float
    transactional: bool = False
    control: ControlType | None = None
    # A control batch's EndTransactionMarker carries the coordinator epoch that wrote it.
    coordinator_epoch: int = -1
    # The leader epoch of the leader that appended it (the batch header's
    # partitionLeaderEpoch), which followers' leader-epoch caches are built from.
    leader_epoch: int = 0
    # What a record of an internal topic holds (a transaction log record, an offset commit):
    # set by the coordinator that appends it, before anyone else sees the batch, and never
    # changed after, so replicas share it as they share the batch.
    payload: object = None
    # The batch's max timestamp (RecordBatch.maxTimestamp): the producer's CreateTime for a
    # produced batch, the leader's clock for a marker or a coordinator's record. Segments roll
    # and are retained by it, and a producer's state expires from it.
    timestamp: float = NO_TIMESTAMP
    # The batch's size in bytes (RecordBatch.sizeInBytes): segment.bytes and retention.bytes
    # count these.
    size_bytes: int = 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.values) - 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, len(self.values) - 1)


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker
