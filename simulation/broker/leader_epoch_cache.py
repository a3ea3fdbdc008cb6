"""LeaderEpochFileCache: which leader epoch wrote which offsets, and where a follower truncates.

Every replica keeps, per partition, the start offset of each leader epoch it has log data
for (KIP-101). A leader answers OffsetsForLeaderEpoch with :meth:`LeaderEpochCache.end_offset_for`;
a follower that becomes a follower again compares the answer with its own cache and truncates
to the last offset both logs agree on (:func:`truncation_offset`, KIP-101 with KIP-279's
iteration over diverging epochs). Before leader epochs, a follower truncated to its own high
watermark instead, which can lose or diverge committed records on a double failure; the rule
``kafka.rules.truncation`` picks one (``"leader_epoch"`` or ``"high_watermark"``).

Pure logic, no SimPy, so every rule is unit-tested directly (tests/test_replication_logic.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(slots=True)
class LeaderEpochCache:
    """(epoch, start offset) pairs, both strictly increasing."""

    epochs: list[int] = field(default_factory=list)
    start_offsets: list[int] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """A batch of ``epoch`` is appended at ``start_offset`` (LeaderEpochFileCache.assign).

        Nothing changes for the latest epoch at a later offset. Otherwise entries of this or
        a later epoch, or starting at or after ``start_offset``, can no longer be right and
        are dropped, so epochs and offsets both keep increasing.
        """
        if self.epochs and epoch == self.epochs[-1] and start_offset >= self.start_offsets[-1]:
            return
        kept = [
            (e, s)
            for e, s in zip(self.epochs, self.start_offsets, strict=True)
            if e < epoch and s < start_offset
        ]
        self.epochs = [e for e, _ in kept] + [epoch]
        self.start_offsets = [s for _, s in kept] + [start_offset]

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """LeaderEpochFileCache.endOffsetFor: the largest epoch <= ``requested_epoch`` this
        log has, and the offset where that epoch ended (the next epoch's start, or the log
        end for the latest epoch). Undefined for an epoch later than any, or none known."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self.epochs, requested_epoch)
        if higher == len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than every epoch here: it ended where the first one starts.
            return requested_epoch, self.start_offsets[0]
        return self.epochs[higher - 1], self.start_offsets[higher]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log's head below ``start_offset`` was deleted (LeaderEpochFileCache.
        truncateFromStart): epochs that start at or below it go, except the last of them,
        which now starts at ``start_offset``."""
        gone = bisect.bisect_right(self.start_offsets, start_offset)
        if gone == 0:
            return
        epoch = self.epochs[gone - 1]
        self.epochs[:gone] = [epoch]
        self.start_offsets[:gone] = [start_offset]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget epochs that start at or after it."""
        while self.start_offsets and self.start_offsets[-1] >= end_offset:
            self.epochs.pop()
            self.start_offsets.pop()


def truncation_offset(
    follower: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
    leader_end_offset_for: Callable[[int], tuple[int, int]],
) -> int:
    """Where a replica that becomes a follower truncates its log, by leader epochs.

    ``leader_end_offset_for(epoch)`` is the leader's OffsetsForLeaderEpoch answer. As in
    AbstractFetcherThread (KIP-279): ask for the follower's latest epoch; if the leader knows
    that epoch, keep min(leader's end, follower's end); if the leader answers an older epoch,
    the logs diverged inside it: look that epoch up locally and ask again, until the epochs
    agree. With no epoch the leader recognises, fall back to the follower's high watermark.
    """
    epoch = follower.latest_epoch
    offset = follower_log_end_offset
    for _ in range(len(follower.epochs) + 1):
        leader_epoch, leader_end = leader_end_offset_for(epoch)
        if leader_epoch == UNDEFINED_EPOCH or leader_end == UNDEFINED_EPOCH_OFFSET:
            return min(follower_high_watermark, follower_log_end_offset)
        follower_epoch, follower_end = follower.end_offset_for(
            leader_epoch, follower_log_end_offset
        )
        if follower_end == UNDEFINED_EPOCH_OFFSET:
            return min(follower_high_watermark, follower_log_end_offset)
        offset = min(leader_end, follower_end, follower_log_end_offset)
        if follower_epoch == leader_epoch:
            return offset
        epoch = follower_epoch  # diverged earlier: resolve the older epoch next
    return offset
