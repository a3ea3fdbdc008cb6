"""Wire-level vocabulary shared by clients and brokers: error codes and request types.

Names follow Kafka's ``Errors`` enum and request classes so that a reader can map every
branch of the model to the Kafka code path it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.producer.accumulator import ProducerBatch

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence arithmetic as in Kafka: after 2147483647 comes 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


class Errors(Enum):
    """The subset of Kafka's error codes the model can produce, with retriability."""

    NONE = (0, False)
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False)
    DUPLICATE_SEQUENCE_NUMBER = (46, False)
    INVALID_PRODUCER_EPOCH = (47, False)
    INVALID_TXN_STATE = (48, False)
    UNKNOWN_PRODUCER_ID = (59, False)
    INVALID_PRODUCER_ID_MAPPING = (49, False)
    INVALID_TRANSACTION_TIMEOUT = (50, False)
    CONCURRENT_TRANSACTIONS = (51, True)
    PRODUCER_FENCED = (90, False)
    NOT_COORDINATOR = (16, True)
    COORDINATOR_LOAD_IN_PROGRESS = (14, True)
    NOT_LEADER_OR_FOLLOWER = (6, True)
    REQUEST_TIMED_OUT = (7, True)
    NETWORK_EXCEPTION = (13, True)
    COORDINATOR_NOT_AVAILABLE = (15, True)

    def __init__(self, code: int, retriable: bool) -> None:
        self.code = code
        self.retriable = retriable

    @property
    def exception_name(self) -> str:
        return _EXCEPTION_NAMES.get(self, "KafkaException")


_EXCEPTION_NAMES = {
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "OutOfOrderSequenceException",
    Errors.DUPLICATE_SEQUENCE_NUMBER: "DuplicateSequenceException",
    Errors.INVALID_PRODUCER_EPOCH: "InvalidProducerEpochException",
    Errors.INVALID_TXN_STATE: "InvalidTxnStateException",
    Errors.UNKNOWN_PRODUCER_ID: "UnknownProducerIdException",
    Errors.NOT_LEADER_OR_FOLLOWER: "NotLeaderOrFollowerException",
    Errors.REQUEST_TIMED_OUT: "TimeoutException",
    Errors.NETWORK_EXCEPTION: "NetworkException",
    Errors.COORDINATOR_NOT_AVAILABLE: "CoordinatorNotAvailableException",
    Errors.INVALID_PRODUCER_ID_MAPPING: "InvalidPidMappingException",
    Errors.INVALID_TRANSACTION_TIMEOUT: "InvalidTxnTimeoutException",
    Errors.CONCURRENT_TRANSACTIONS: "ConcurrentTransactionsException",
    Errors.PRODUCER_FENCED: "ProducerFencedException",
    Errors.NOT_COORDINATOR: "NotCoordinatorException",
    Errors.COORDINATOR_LOAD_IN_PROGRESS: "CoordinatorLoadInProgressException",
}


@dataclass(slots=True)
class BatchData:
    """The part of a producer batch that travels on the wire (immutable per attempt)."""

    producer_id: int
    epoch: int
    base_sequence: int
    values: tuple[str, ...]
    transactional: bool = False

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, len(self.values) - 1)


@dataclass(slots=True)
class ProduceRequest:
    correlation_id: int
    acks: int
    partitions: list[tuple[TopicPartition, BatchData]]
    # The client-side batch objects, in the same order; brokers never read them.
    batches: list[ProducerBatch] = field(default_factory=list)


@dataclass(slots=True)
class PartitionResponse:
    error: Errors
    base_offset: int = -1


@dataclass(slots=True)
class ProduceResponse:
    correlation_id: int
    results: list[PartitionResponse]


@dataclass(slots=True)
class InitProducerIdRequest:
    correlation_id: int
    transactional_id: str | None = None


@dataclass(slots=True)
class InitProducerIdResponse:
    correlation_id: int
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class Disconnected:
    """Delivered to a client when its connection to ``node`` is reset (e.g. the broker died)."""

    node: str
    generation: int


Request = ProduceRequest | InitProducerIdRequest
Response = ProduceResponse | InitProducerIdResponse
Payload = Any
