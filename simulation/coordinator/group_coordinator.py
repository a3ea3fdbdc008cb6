"""GroupCoordinator, offsets part: committed offsets and transactional offsets of groups.

A coordinator's :class:`OffsetStore` is what it has loaded from the ``__consumer_offsets``
partitions it leads, and what it applied since: the runtime appends every commit (and
every transaction marker) to the partition first and applies it here once it is
replicated (:meth:`GroupCoordinator.load` replays a partition's batches). A plain
OffsetCommit takes effect once written. A TxnOffsetCommit is kept *pending* under the
producer id until the transaction's marker reaches the group's ``__consumer_offsets``
partition: COMMIT makes the offsets the group's committed offsets, ABORT drops them. While
offsets are pending for a partition, an OffsetFetch that asks for stable offsets (KIP-447)
is answered UNSTABLE_OFFSET_COMMIT.

A TxnOffsetCommit from an epoch older than the newest one seen for its producer id is
fenced, as the append to ``__consumer_offsets`` would be. A marker is refused as the append of
a control batch to ``__consumer_offsets`` would refuse it: INVALID_PRODUCER_EPOCH for an older
producer epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch than the last
marker of that producer id.

Classic groups (membership, generations) live in one :class:`GroupMetadataManager` per loaded
``__consumer_offsets`` partition (Kafka's coordinator shard), kept in :attr:`GroupCoordinator.
shards` and made by :attr:`GroupCoordinator.make_shard` (set by the runtime, which gives each
shard a timer and a member-id stream). A shard exists only once a group request, an offset
commit or a loaded group record needs one. :meth:`GroupCoordinator.validate_offset_commit` is
``OffsetMetadataManager``'s validation, run before a commit is written; a commit that names no
member and no generation (``assign()`` consumers, EOS v1) is accepted by an Empty group as
before. To extend: a new group record type is replayed in :meth:`GroupCoordinator.load`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eosim.simulation.coordinator.consumer_group import ConsumerGroupRecord
from eosim.simulation.coordinator.directory import CONSUMER_OFFSETS_TOPIC
from eosim.simulation.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    GroupMetadataRecord,
)
from eosim.simulation.coordinator.transaction_log import TRANSACTION_STATE_PARTITIONS, partition_for
from eosim.simulation.protocol import Errors, TopicPartition
from eosim.simulation.records import LogBatch

OffsetsTuple = tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """An offset commit as a ``__consumer_offsets`` record holds it (the batch carries the
    producer id and epoch of a transactional one)."""

    group: str
    offsets: OffsetsTuple


def offsets_partition(group: str) -> tuple[str, int]:
    return CONSUMER_OFFSETS_TOPIC, partition_for(group, TRANSACTION_STATE_PARTITIONS)


@dataclass
class OffsetStore:
    """Durable ``__consumer_offsets`` contents."""

    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    # (group, producer id) -> offsets waiting for the transaction's marker
    pending: dict[tuple[str, int], dict[TopicPartition, int]] = field(default_factory=dict)
    producer_epochs: dict[int, int] = field(default_factory=dict)
    # producer id -> coordinator epoch of its last marker
    coordinator_epochs: dict[int, int] = field(default_factory=dict)


class GroupCoordinator:
    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        # __consumer_offsets partition -> its classic groups (made on first need)
        self.shards: dict[int, GroupMetadataManager] = {}
        self.make_shard: Callable[[int], GroupMetadataManager] | None = None

    # -- classic groups ---------------------------------------------------------------------
    def shard(self, partition: int) -> GroupMetadataManager:
        shard = self.shards.get(partition)
        if shard is None:
            assert self.make_shard is not None, "a group shard needs a runtime"
            shard = self.make_shard(partition)
            self.shards[partition] = shard
        return shard

    def validate_offset_commit(
        self,
        group: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        transactional: bool,
        checks_generation: bool = True,
        partitions: Iterable[TopicPartition] = (),
    ) -> Errors:
        """``OffsetMetadataManager.validateOffsetCommit`` / ``validateTransactionalOffsetCommit``
        (``OffsetMetadataManager.java:302-379``) for ``group``'s shard; ``partitions``: the
        committed ones."""
        return self.shard(offsets_partition(group)[1]).validate_offset_commit(
            group, member_id, instance_id, generation, transactional, checks_generation, partitions
        )

    def drop_shards(self, partition: int | None = None) -> list[GroupMetadataManager]:
        """Forget the shard of ``partition`` (every shard if None); the shards dropped."""
        keys = list(self.shards) if partition is None else [partition]
        return [s for k in keys if (s := self.shards.pop(k, None)) is not None]

    # -- the replicated path: check, write, then apply -------------------------------------
    def check_txn_commit(self, producer_id: int, epoch: int) -> Errors:
        known = self.store.producer_epochs.get(producer_id)
        return Errors.PRODUCER_FENCED if known is not None and epoch < known else Errors.NONE

    def apply_txn_commit(
        self, group: str, producer_id: int, epoch: int, offsets: OffsetsTuple
    ) -> None:
        known = self.store.producer_epochs.get(producer_id)
        if known is None or epoch > known:
            self.store.producer_epochs[producer_id] = epoch
        pending = self.store.pending.setdefault((group, producer_id), {})
        for tp, offset in offsets:
            pending[tp] = offset

    def apply_marker(
        self, partition: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        """A marker written to ``__consumer_offsets`` partition ``partition`` (checked by the
        partition's producer state before the append) settles the producer's offsets."""
        self.store.producer_epochs[producer_id] = max(
            epoch, self.store.producer_epochs.get(producer_id, epoch)
        )
        self.store.coordinator_epochs[producer_id] = coordinator_epoch
        self._settle(partition, producer_id, commit)

    def _settle(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker settles the producer's pending offsets of every group on ``partition``:
        COMMIT makes them the group's committed offsets, ABORT drops them."""
        for group, pid in list(self.store.pending):
            if pid != producer_id or offsets_partition(group)[1] != partition:
                continue
            offsets = self.store.pending.pop((group, pid))
            if commit:
                self.store.committed.setdefault(group, {}).update(offsets)

    def load(self, partition: int, batches: Iterable[LogBatch]) -> None:
        """Replay partition ``partition``'s batches (GroupMetadataManager's load, or the new
        coordinator's replay): commits, transactional commits kept pending under their
        producer id, and the markers that settle them."""
        self.unload(partition)
        for b in batches:
            if isinstance(b.payload, GroupMetadataRecord):
                self.shard(partition).replay(b.payload)
                continue
            if isinstance(b.payload, ConsumerGroupRecord):
                self.shard(partition).replay_consumer_group(b.payload)
                continue
            if b.control is not None:
                self.apply_marker(
                    partition, b.producer_id, b.epoch, b.control == "COMMIT", b.coordinator_epoch
                )
                continue
            record = b.payload
            if not isinstance(record, OffsetCommitRecord):
                continue
            if b.transactional:
                self.apply_txn_commit(record.group, b.producer_id, b.epoch, record.offsets)
            else:
                self.commit(record.group, record.offsets)

    def unload(self, partition: int) -> None:
        """Forget the groups of partition ``partition`` (its leadership moved away)."""
        store = self.store
        for group in [g for g in store.committed if offsets_partition(g)[1] == partition]:
            del store.committed[group]
        for key in [k for k in store.pending if offsets_partition(k[0])[1] == partition]:
            del store.pending[key]

    def commit(self, group: str, offsets: tuple[tuple[TopicPartition, int], ...]) -> Errors:
        committed = self.store.committed.setdefault(group, {})
        for tp, offset in offsets:
            committed[tp] = offset
        return Errors.NONE

    def txn_commit(
        self,
        group: str,
        producer_id: int,
        epoch: int,
        offsets: tuple[tuple[TopicPartition, int], ...],
    ) -> Errors:
        known = self.store.producer_epochs.get(producer_id)
        if known is not None and epoch < known:
            return Errors.PRODUCER_FENCED
        self.store.producer_epochs[producer_id] = epoch
        pending = self.store.pending.setdefault((group, producer_id), {})
        for tp, offset in offsets:
            pending[tp] = offset
        return Errors.NONE

    def fetch(
        self, group: str, partitions: tuple[TopicPartition, ...], require_stable: bool = True
    ) -> tuple[Errors, dict[TopicPartition, int]]:
        if require_stable:
            for (g, _pid), offsets in self.store.pending.items():
                if g == group and any(tp in offsets for tp in partitions):
                    return Errors.UNSTABLE_OFFSET_COMMIT, {}
        committed = self.store.committed.get(group, {})
        return Errors.NONE, {tp: committed[tp] for tp in partitions if tp in committed}

    def complete_txn(
        self,
        partition: int,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int = -1,
    ) -> Errors:
        """A COMMIT or ABORT marker reached ``__consumer_offsets`` partition ``partition``."""
        known = self.store.producer_epochs.get(producer_id)
        if known is not None and epoch < known:
            return Errors.INVALID_PRODUCER_EPOCH
        if self.store.coordinator_epochs.get(producer_id, -1) > coordinator_epoch:
            return Errors.TRANSACTION_COORDINATOR_FENCED
        self.store.producer_epochs[producer_id] = epoch
        self.store.coordinator_epochs[producer_id] = coordinator_epoch
        self._settle(partition, producer_id, commit)
        return Errors.NONE
