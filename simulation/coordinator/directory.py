"""Where a coordinator key lives: the internal topics and the partition of each key.

A transactional.id is coordinated by the leader of ``__transaction_state`` partition
``abs(hash(id)) % 50``, and a consumer group by the leader of ``__consumer_offsets`` partition
``abs(hash(group)) % 50`` (``TransactionStateManager.partitionFor``,
``GroupCoordinatorService.partitionFor``; 50 is the default of
``transaction.state.log.num.partitions`` and ``offsets.topic.num.partitions``). Both topics are
replicated partitions like any other: who leads them is the controller's decision, published
in its metadata, and the coordinators follow (see :mod:`eosim.simulation.coordinator.runtime`).
"""

from __future__ import annotations

from eosim.simulation.coordinator.transaction_log import TRANSACTION_STATE_PARTITIONS, partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
INTERNAL_PARTITIONS = TRANSACTION_STATE_PARTITIONS
InternalPartition = tuple[str, int]


def internal_partition(key: str, key_type: str) -> InternalPartition:
    topic = TRANSACTION_STATE_TOPIC if key_type == "transaction" else CONSUMER_OFFSETS_TOPIC
    return topic, partition_for(key, INTERNAL_PARTITIONS)


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS
