"""LeaderEpochFileCache: which leader epoch wrote which offsets, and where a follower truncates.

Every replica keeps, per partition, the start offset of each leader epoch it has log data
for (KIP-101). A leader answers OffsetsForLeaderEpoch with :meth:`LeaderEpochCache.end_offset_for`;
a follower compares the answer with its own cache and truncates to the last offset both logs
agree on (:func:`truncation_state`, KIP-101 with KIP-279's iteration over diverging epochs).
Before leader epochs, a follower truncated to its own high watermark instead, which can lose
or diverge committed records on a double failure.

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

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget epochs that start at or after it
        (an undefined offset changes nothing)."""
        if end_offset < 0:
            return
        while self.start_offsets and self.start_offsets[-1] >= end_offset:
            self.epochs.pop()
            self.start_offsets.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (retention, DeleteRecords): epochs that
        ended before it go; the one it falls in now starts there
        (LeaderEpochFileCache.truncateFromStart). An undefined offset changes nothing."""
        if start_offset < 0:
            return
        keep_from = bisect.bisect_right(self.start_offsets, start_offset) - 1
        if keep_from < 0:
            return  # before the first epoch's start: nothing to clear
        del self.epochs[:keep_from]
        del self.start_offsets[:keep_from]
        self.start_offsets[0] = start_offset


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    """Where a follower cuts its log, and whether that settles it (else it asks again)."""

    offset: int
    complete: bool


def truncation_state(
    follower: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> OffsetTruncationState:
    """Where a follower truncates on the leader's (epoch, end offset) answer for its epoch
    (AbstractFetcherThread.getOffsetTruncationState), the one rule of every truncation by
    leader epochs: an OffsetsForLeaderEpoch answer (KIP-101, KIP-279) or a fetch answer's
    diverging epoch (KIP-595).

    * No end offset: the leader does not know the epoch; fall back to the follower's high
      watermark.
    * No epoch in the answer (KIP-101 before KIP-279): min(leader's end, own log end), done.
    * Otherwise look up the leader's epoch locally: with no entry at or below it,
      min(leader's end, own log end); with an older epoch than the leader's, the logs diverged
      inside it: cut to where that local epoch ends and ask again; with the same epoch,
      min(leader's end, own end of the epoch, own log end), done.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(min(follower_high_watermark, follower_log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader_end_offset, follower_log_end_offset), True)
    epoch, end = follower.end_offset_for(leader_epoch, follower_log_end_offset)
    if end == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(min(leader_end_offset, follower_log_end_offset), True)
    if epoch != leader_epoch:
        return OffsetTruncationState(min(end, follower_log_end_offset), False)
    return OffsetTruncationState(min(end, leader_end_offset, follower_log_end_offset), True)


def truncation_offset(
    follower: LeaderEpochCache,
    follower_log_end_offset: int,
    follower_high_watermark: int,
    leader_end_offset_for: Callable[[int], tuple[int, int]],
) -> int:
    """Where a follower ends up after asking OffsetsForLeaderEpoch until it is done (KIP-279),
    each step by :func:`truncation_state`; ``leader_end_offset_for(epoch)`` is the leader's
    answer. The model makes the same steps one answer at a time; this is their fixed point,
    for tests."""
    offset = follower_log_end_offset
    cache = LeaderEpochCache(list(follower.epochs), list(follower.start_offsets))
    for _ in range(len(follower.epochs) + 2):
        leader_epoch, leader_end = leader_end_offset_for(cache.latest_epoch)
        state = truncation_state(cache, offset, follower_high_watermark, leader_epoch, leader_end)
        offset = min(offset, state.offset)
        cache.truncate_from_end(offset)
        if state.complete:
            return offset
    return offset
