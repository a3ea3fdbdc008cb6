"""Wire-level vocabulary shared by clients and brokers: error codes and request types.

Names follow Kafka's ``Errors`` enum and request classes so that a reader can map every
branch of the model to the Kafka code path it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

# The record vocabulary (Kafka's common.record) is re-exported: requests speak it.
from eosim.simulation.records import MAX_SEQUENCE as MAX_SEQUENCE
from eosim.simulation.records import NO_PRODUCER_EPOCH as NO_PRODUCER_EPOCH
from eosim.simulation.records import NO_PRODUCER_ID as NO_PRODUCER_ID
from eosim.simulation.records import NO_SEQUENCE, AbortedTransaction, LogBatch, increment_sequence

TopicPartition = tuple[str, int]

MAX_EPOCH = 2**15 - 1


class Errors(Enum):
    """The subset of Kafka's error codes the model can produce, with retriability."""

    NONE = (0, False)
    OFFSET_OUT_OF_RANGE = (1, False)
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
    TRANSACTIONAL_ID_NOT_FOUND = (105, False)
    UNKNOWN_TOPIC_OR_PARTITION = (3, True)
    UNSTABLE_OFFSET_COMMIT = (88, True)
    # A marker from a coordinator older than the last one seen for the producer (KIP-98).
    TRANSACTION_COORDINATOR_FENCED = (52, False)
    # KIP-890: the partition is not in the producer's transaction; abort and carry on.
    TRANSACTION_ABORTABLE = (120, False)
    NOT_ENOUGH_REPLICAS = (19, True)
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, True)
    INVALID_REQUEST = (42, False)
    # A batch larger than the topic's segment.bytes (UnifiedLog.append).
    RECORD_LIST_TOO_LARGE = (18, False)
    # DeleteRecords on an internal topic.
    INVALID_TOPIC_EXCEPTION = (17, False)
    # Leader epochs (KIP-320): a request names an older epoch than the replica's, or a newer
    # one it has not heard of yet.
    FENCED_LEADER_EPOCH = (74, True)
    UNKNOWN_LEADER_EPOCH = (76, True)
    # AlterPartition: the partition epoch the leader named is not the controller's.
    INVALID_UPDATE_VERSION = (95, False)
    INELIGIBLE_REPLICA = (107, False)
    OPERATION_NOT_ATTEMPTED = (55, False)
    NEW_LEADER_ELECTED = (108, False)
    # ListOffsets while a new leader's high watermark has not yet reached its epoch's start.
    OFFSET_NOT_AVAILABLE = (78, True)
    # A broker registering while its previous incarnation's session is still alive.
    DUPLICATE_BROKER_REGISTRATION = (101, True)
    STALE_BROKER_EPOCH = (77, False)
    # What Kafka answers when a handler throws (an IllegalStateException, say).
    UNKNOWN_SERVER_ERROR = (-1, False)
    # Consumer groups (Errors.java: codes and retriability; all non-retriable).
    ILLEGAL_GENERATION = (22, False)
    INCONSISTENT_GROUP_PROTOCOL = (23, False)
    UNKNOWN_MEMBER_ID = (25, False)
    INVALID_SESSION_TIMEOUT = (26, False)
    REBALANCE_IN_PROGRESS = (27, False)
    INVALID_GROUP_ID = (24, False)
    GROUP_ID_NOT_FOUND = (69, False)
    MEMBER_ID_REQUIRED = (79, False)
    FENCED_INSTANCE_ID = (82, False)
    FENCED_MEMBER_EPOCH = (110, False)
    UNRELEASED_INSTANCE_ID = (111, False)
    UNSUPPORTED_ASSIGNOR = (112, False)
    STALE_MEMBER_EPOCH = (113, False)

    def __init__(self, code: int, retriable: bool) -> None:
        self.code = code
        self.retriable = retriable

    @property
    def exception_name(self) -> str:
        return _EXCEPTION_NAMES.get(self, "KafkaException")


_EXCEPTION_NAMES = {
    Errors.OFFSET_OUT_OF_RANGE: "OffsetOutOfRangeException",
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
    Errors.TRANSACTIONAL_ID_NOT_FOUND: "TransactionalIdNotFoundException",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    Errors.UNSTABLE_OFFSET_COMMIT: "UnstableOffsetCommitException",
    Errors.TRANSACTION_COORDINATOR_FENCED: "TransactionCoordinatorFencedException",
    Errors.TRANSACTION_ABORTABLE: "TransactionAbortableException",
    Errors.NOT_ENOUGH_REPLICAS: "NotEnoughReplicasException",
    Errors.INVALID_REQUEST: "InvalidRequestException",
    Errors.RECORD_LIST_TOO_LARGE: "RecordBatchTooLargeException",
    Errors.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    Errors.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "NotEnoughReplicasAfterAppendException",
    Errors.FENCED_LEADER_EPOCH: "FencedLeaderEpochException",
    Errors.UNKNOWN_LEADER_EPOCH: "UnknownLeaderEpochException",
    Errors.ILLEGAL_GENERATION: "IllegalGenerationException",
    Errors.INCONSISTENT_GROUP_PROTOCOL: "InconsistentGroupProtocolException",
    Errors.UNKNOWN_MEMBER_ID: "UnknownMemberIdException",
    Errors.INVALID_SESSION_TIMEOUT: "InvalidSessionTimeoutException",
    Errors.REBALANCE_IN_PROGRESS: "RebalanceInProgressException",
    Errors.INVALID_GROUP_ID: "InvalidGroupIdException",
    Errors.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    Errors.MEMBER_ID_REQUIRED: "MemberIdRequiredException",
    Errors.FENCED_INSTANCE_ID: "FencedInstanceIdException",
    Errors.FENCED_MEMBER_EPOCH: "FencedMemberEpochException",
    Errors.UNRELEASED_INSTANCE_ID: "UnreleasedInstanceIdException",
    Errors.UNSUPPORTED_ASSIGNOR: "UnsupportedAssignorException",
    Errors.STALE_MEMBER_EPOCH: "StaleMemberEpochException",
}

# Errors that say the client's metadata is stale (Kafka's InvalidMetadataException family):
# a client that sees one asks for fresh metadata before it retries.
INVALID_METADATA_ERRORS = frozenset(
    {
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


@dataclass(slots=True)
class BatchData:
    """The part of a producer batch that travels on the wire (immutable per attempt)."""

    producer_id: int
    epoch: int
    base_sequence: int
    values: tuple[str, ...]
    transactional: bool = False
    # The batch's max timestamp (CreateTime, set by the producer; None: the leader's clock)
    # and its size in bytes (None: estimated from the values).
    timestamp: float | None = None
    size_bytes: int | None = None

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
    # The client's own batch objects (its ProducerBatch), in the same order: opaque to the
    # wire and never read by brokers, so typed loosely to keep this module client-agnostic.
    batches: list[Any] = field(default_factory=list)
    transactional_id: str | None = None
    # How long the leader may hold an acks=all answer for replication (the producer's
    # request.timeout.ms, sent as the request's timeout).
    timeout_ms: float = 30_000.0


@dataclass(slots=True)
class PartitionResponse:
    error: Errors
    base_offset: int = -1
    # The partition's log start offset (PartitionResponse.logStartOffset): the leader's, on
    # answers from a partition it leads; 0 where eosim's broker does not fill it in; -1
    # (unknown) on errors the client makes up itself (a timeout, a disconnection).
    log_start_offset: int = 0


@dataclass(slots=True)
class ProduceResponse:
    correlation_id: int
    results: list[PartitionResponse]


@dataclass(slots=True)
class InitProducerIdRequest:
    correlation_id: int
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    # KIP-360: the caller's current producer id and epoch when it asks for an epoch bump
    # (both NO_PRODUCER_ID / NO_PRODUCER_EPOCH for a new producer).
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class InitProducerIdResponse:
    correlation_id: int
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class ApiVersionsRequest:
    """The first request a Kafka client sends on a new connection (NetworkClient's
    CHECKING_API_VERSIONS state); nothing else goes on the connection until it is answered."""

    correlation_id: int


@dataclass(slots=True)
class ApiVersionsResponse:
    correlation_id: int
    error: Errors = Errors.NONE


@dataclass(slots=True)
class TcpConnect:
    """A client opening a TCP connection (its SYN). The broker's host answers it, not the
    broker process: a paused broker's kernel accepts, a host with no listener refuses."""

    node: str
    generation: int


@dataclass(slots=True)
class TcpAccepted:
    """The host's answer to :class:`TcpConnect` (its SYN-ACK): the connection is open."""

    node: str
    generation: int


@dataclass(slots=True)
class Disconnected:
    """Delivered to a client when its connection to ``node`` is reset (e.g. the broker died).
    ``connection``: the connection's number (unique in the run; 0: not said)."""

    node: str
    generation: int
    connection: int = 0


# -- transactions and consumer groups -------------------------------------------------------
CoordinatorType = str  # "transaction" or "group"


@dataclass(slots=True)
class FindCoordinatorRequest:
    correlation_id: int
    key: str
    key_type: CoordinatorType


@dataclass(slots=True)
class FindCoordinatorResponse:
    correlation_id: int
    error: Errors
    node: str | None = None


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    correlation_id: int
    transactional_id: str
    producer_id: int
    epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class AddOffsetsToTxnRequest:
    correlation_id: int
    transactional_id: str
    producer_id: int
    epoch: int
    group: str


@dataclass(slots=True)
class EndTxnRequest:
    correlation_id: int
    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool


@dataclass(slots=True)
class EndTxnResponse:
    correlation_id: int
    error: Errors
    # Transaction version 2: the epoch the client continues with after this transaction.
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH


# A member id the client does not know yet (JoinGroupRequest.UNKNOWN_MEMBER_ID), and the
# generation of a request that names none (OffsetCommitRequest.DEFAULT_GENERATION_ID).
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Kafka's ``ConsumerGroupMetadata``: what ``KafkaConsumer.groupMetadata()`` hands to
    ``sendOffsetsToTransaction`` (KIP-447), so that the group coordinator can fence a
    TxnOffsetCommit of a member it no longer has. ``ConsumerGroupMetadata(group)`` names no
    member nor generation (a consumer without group management)."""

    group_id: str
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


@dataclass(slots=True)
class TxnOffsetCommitRequest:
    """``member_id``/``generation``/``instance_id`` are the consumer group metadata passed to
    sendOffsetsToTransaction (KIP-447); their defaults are ``new ConsumerGroupMetadata(group)``,
    which a classic group accepts in any state (``ClassicGroup.validateOffsetCommit``)."""

    correlation_id: int
    transactional_id: str
    group: str
    producer_id: int
    epoch: int
    offsets: tuple[tuple[TopicPartition, int], ...]
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = NO_GENERATION
    instance_id: str | None = None


@dataclass(slots=True)
class OffsetCommitRequest:
    """The defaults (no member, generation -1) are a consumer outside group management
    (``assign()``), accepted while its group is Empty."""

    correlation_id: int
    group: str
    offsets: tuple[tuple[TopicPartition, int], ...]
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = NO_GENERATION
    instance_id: str | None = None


# -- the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ---------------
# A protocol a member supports: (name, metadata), the metadata opaque to the coordinator.
GroupProtocol = tuple[str, object]


@dataclass(slots=True)
class JoinGroupRequest:
    """``protocols`` in the member's order of preference (its vote, ``ClassicGroupMember.vote``).
    ``client_id`` prefixes a dynamic member's generated id (``ClassicGroup.generateMemberId``)."""

    correlation_id: int
    group: str
    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[GroupProtocol, ...]
    protocol_type: str = "consumer"
    client_id: str = ""
    # The JoinGroup version: from 4 a new dynamic member must come back with the id the
    # coordinator gives it (KIP-394, ``requiresKnownMemberId``); from 9 a rejoining static
    # leader may skip the assignment (``supportsSkippingAssignment``). 9 is the latest.
    version: int = 9


@dataclass(slots=True)
class JoinGroupMember:
    """A member as the leader's JoinGroup answer lists it, with its chosen protocol's
    metadata."""

    member_id: str
    instance_id: str | None
    metadata: object


@dataclass(slots=True)
class JoinGroupResponse:
    correlation_id: int
    error: Errors
    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = NO_GENERATION
    protocol_name: str | None = None
    protocol_type: str | None = None
    leader: str | None = None
    # Filled for the leader only.
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncGroupRequest:
    """``assignments``: (member id, assignment), sent by the leader only."""

    correlation_id: int
    group: str
    member_id: str
    instance_id: str | None
    generation: int
    protocol_name: str | None = None
    protocol_type: str | None = "consumer"
    assignments: tuple[tuple[str, object], ...] = ()


@dataclass(slots=True)
class SyncGroupResponse:
    correlation_id: int
    error: Errors
    assignment: object = None
    protocol_name: str | None = None
    protocol_type: str | None = None


@dataclass(slots=True)
class HeartbeatRequest:
    correlation_id: int
    group: str
    member_id: str
    instance_id: str | None
    generation: int


@dataclass(slots=True)
class HeartbeatResponse:
    correlation_id: int
    error: Errors


@dataclass(slots=True)
class LeaveGroupMember:
    member_id: str
    instance_id: str | None = None


@dataclass(slots=True)
class LeaveGroupResponse:
    """``error`` is the request's own error; ``members`` each member's
    (member id, instance id, error)."""

    correlation_id: int
    error: Errors
    members: tuple[tuple[str, str | None, Errors], ...] = ()


# -- the consumer group protocol (KIP-848) -------------------------------------------------
@dataclass(slots=True)
class ConsumerGroupHeartbeatRequest:
    """``ConsumerGroupHeartbeatRequest``: epoch 0 joins, -1 leaves. A field left None (-1 for
    the rebalance timeout) is unchanged since the last heartbeat; a full request (joining, or
    after an error) sets them all. The member id is the client's own (KIP-1082, Kafka 4.0)."""

    correlation_id: int
    group: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topics: tuple[str, ...] | None = None
    owned: tuple[TopicPartition, ...] | None = None
    client_id: str = ""


@dataclass(slots=True)
class ConsumerGroupHeartbeatResponse:
    """``assignment`` is None when unchanged since the member's last heartbeat."""

    correlation_id: int
    error: Errors
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None


@dataclass(slots=True)
class LeaveGroupRequest:
    correlation_id: int
    group: str
    members: tuple[LeaveGroupMember, ...]


@dataclass(slots=True)
class OffsetFetchRequest:
    correlation_id: int
    group: str
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class OffsetFetchResponse:
    correlation_id: int
    error: Errors
    offsets: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(slots=True)
class FetchRequest:
    correlation_id: int
    partitions: tuple[tuple[TopicPartition, int], ...]  # (partition, fetch offset)
    isolation: str  # "read_committed" or "read_uncommitted"
    # fetch.max.wait.ms: how long the leader may hold a fetch that finds nothing to return
    # (fetch.min.bytes is Kafka's default, 1: any record or marker answers it); 0 answers at
    # once.
    max_wait_ms: float = 0.0


@dataclass(slots=True)
class FetchPartition:
    error: Errors
    batches: list[LogBatch] = field(default_factory=list)
    aborted: list[AbortedTransaction] = field(default_factory=list)
    last_stable_offset: int = -1
    log_end_offset: int = -1


@dataclass(slots=True)
class FetchResponse:
    correlation_id: int
    partitions: list[tuple[TopicPartition, FetchPartition]]


# ListOffsets' special timestamps: the log start offset, and the end a consumer may read to
# (the last stable offset under read_committed, else the high watermark).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


@dataclass(slots=True)
class ListOffsetsRequest:
    correlation_id: int
    partitions: tuple[tuple[TopicPartition, int], ...]  # (partition, timestamp)
    isolation: str  # "read_committed" or "read_uncommitted"


@dataclass(slots=True)
class ListOffsetsResponse:
    correlation_id: int
    partitions: list[tuple[TopicPartition, Errors, int]]  # (partition, error, offset)


@dataclass(slots=True)
class ErrorResponse:
    """The answer to a request whose only result is an error code."""

    correlation_id: int
    error: Errors


@dataclass(slots=True)
class WriteTxnMarkersRequest:
    correlation_id: int
    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class WriteTxnMarkersResponse:
    correlation_id: int
    producer_id: int
    results: list[tuple[TopicPartition, Errors]]


@dataclass(frozen=True, slots=True)
class TxnAddEntry:
    """One transaction of a broker's AddPartitionsToTxn (v4+, ``AddPartitionsToTxnTransaction``):
    add ``partitions`` to it (``verify_only``: only ask whether they are in it, KIP-890 part 1)."""

    transactional_id: str
    producer_id: int
    epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool = False


@dataclass(slots=True)
class AddPartitionsToTxnBrokerRequest:
    """AddPartitionsToTxn sent by a broker's AddPartitionsToTxnManager to a transaction
    coordinator (``AddPartitionsToTxnRequest.Builder.forBroker``): the transactions the leader
    (or group coordinator) has waiting for that coordinator, one entry each."""

    correlation_id: int
    transactions: tuple[TxnAddEntry, ...]


@dataclass(slots=True)
class AddPartitionsToTxnBrokerResponse:
    """The coordinator's answer: one error per transactional id (Kafka answers per partition;
    the model's entries are added or refused whole)."""

    correlation_id: int
    results: tuple[tuple[str, Errors], ...]


# -- metadata ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """What a metadata response says of one partition: its leader (None while offline),
    leader epoch and replicas (broker names)."""

    leader: str | None
    leader_epoch: int
    replicas: tuple[str, ...] = ()
    isr: tuple[str, ...] = ()


@dataclass(slots=True)
class MetadataRequest:
    correlation_id: int


@dataclass(slots=True)
class MetadataResponse:
    correlation_id: int
    partitions: dict[TopicPartition, PartitionLeader]


# -- replication (broker to broker) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    """One partition of a follower's fetch: where its log ends, the leader epoch of its last
    batch (KIP-595's lastFetchedEpoch, so the leader can tell a diverged log), and the leader
    epoch it believes current (KIP-320)."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    # Before KIP-595 (truncation rule ``leader_epoch_kip101``): a follower that has just
    # become one first asks OffsetsForLeaderEpoch for this epoch (its latest) and fetches
    # nothing; the leader answers in ``epoch_end_offset``.
    epoch_query: int | None = None


@dataclass(slots=True)
class ReplicaFetchRequest:
    correlation_id: int
    replica: str
    partitions: tuple[tuple[TopicPartition, ReplicaFetchPartition], ...]


@dataclass(slots=True)
class ReplicaFetchData:
    error: Errors
    batches: list[LogBatch] = field(default_factory=list)
    high_watermark: int = -1
    log_end_offset: int = -1
    # When the follower's log diverged from the leader's: the leader's (epoch, end offset)
    # for the follower's last fetched epoch (FetchResponse.divergingEpoch).
    diverging_epoch: tuple[int, int] | None = None
    # The offset this answer is for (the fetch offset of the request).
    fetch_offset: int = -1
    # The answer to an OffsetsForLeaderEpoch query: (epoch, end offset), the epoch -1 where
    # the protocol does not return it (KIP-101 before KIP-279).
    epoch_end_offset: tuple[int, int] | None = None
    # The leader's log start offset (FetchResponse.PartitionData.logStartOffset).
    log_start_offset: int = 0


@dataclass(slots=True)
class ReplicaFetchResponse:
    correlation_id: int
    partitions: list[tuple[TopicPartition, ReplicaFetchData]]


# -- the controller (KRaft) -----------------------------------------------------------------
# The controller's node name: the address brokers send to, and a fault target in scenarios.
CONTROLLER = "controller"


@dataclass(slots=True)
class BrokerRegistrationRequest:
    """BrokerLifecycleManager's registration of a (new) broker process. ``incarnation`` names
    the process (Kafka's incarnation id, new at every start); ``previous_broker_epoch`` is the
    epoch a clean shutdown left in its log directories, -1 after an unclean one (KIP-966)."""

    correlation_id: int
    broker: str
    incarnation: int
    previous_broker_epoch: int = -1


@dataclass(slots=True)
class BrokerRegistrationResponse:
    correlation_id: int
    error: Errors
    broker_epoch: int = -1


@dataclass(slots=True)
class BrokerHeartbeatRequest:
    """A registered broker's heartbeat: its broker epoch, how far it has replayed the
    metadata log, and whether it wants to stay fenced (true until its first metadata has been
    published: BrokerLifecycleManager's ``readyToUnfence``)."""

    correlation_id: int
    broker: str
    broker_epoch: int
    metadata_offset: int = -1
    want_fence: bool = False


@dataclass(slots=True)
class BrokerHeartbeatResponse:
    correlation_id: int
    error: Errors
    fenced: bool = True
    # Whether the broker has replayed the metadata log past its own registration.
    caught_up: bool = False
    # The controller's latest metadata offset (a broker further behind fetches a snapshot;
    # stands for the KRaft fetch of the metadata log, which never skips a record).
    metadata_offset: int = -1


@dataclass(slots=True)
class MetadataFetchRequest:
    """A broker's fetch of the metadata log (KRaft's Fetch of ``__cluster_metadata`` by the
    broker's raft client), answered with a snapshot :class:`MetadataDelta`: how a starting
    broker catches up before its first publish, and how a broker that missed records (lost
    on the network) catches up again."""

    correlation_id: int
    broker: str


@dataclass(slots=True)
class AlterPartitionRequest:
    correlation_id: int
    broker: str
    tp: TopicPartition
    leader_epoch: int
    partition_epoch: int
    isr: tuple[str, ...]


@dataclass(slots=True)
class AlterPartitionResponse:
    correlation_id: int
    tp: TopicPartition
    error: Errors
    # The registration as it now stands (on NONE), for the leader to adopt.
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition's registration as the controller publishes it (PartitionRecord /
    PartitionChangeRecord): replicas, ISR and leader by broker name (leader None: offline)."""

    replicas: tuple[str, ...]
    isr: tuple[str, ...]
    leader: str | None
    leader_epoch: int
    partition_epoch: int
    # Eligible leader replicas (KIP-966): out of the ISR but safe to elect while it is empty.
    elr: tuple[str, ...] = ()


@dataclass(slots=True)
class MetadataDelta:
    """The controller's published changes, in order (the metadata log as a broker replays
    it); ``snapshot`` replaces everything the broker knew (a restarted broker's catch-up)."""

    offset: int
    partitions: dict[TopicPartition, PartitionState]
    snapshot: bool = False
    # The brokers fenced as of this delta (BrokerRegistrationChangeRecord's fenced flag).
    fenced: frozenset[str] = frozenset()


Request = ProduceRequest | InitProducerIdRequest
Response = ProduceResponse | InitProducerIdResponse
Payload = Any
