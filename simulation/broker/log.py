"""An append-only partition log of record batches, transactional ones included.

The log is the ground truth a run ends with. It keeps whole batches, each with the producer
id, epoch and sequence range it was written with, so that a restarted broker can rebuild
:class:`~eosim.simulation.broker.producer_state.ProducerStateManager` from it as Kafka does.

Transactions leave three traces in a log:

* transactional data batches, which open a transaction for their producer at their offset;
* control batches (one COMMIT or ABORT marker record), which close it;
* the aborted-transaction index: (producer id, first offset, marker offset) for every
  aborted transaction, which read_committed consumers need to skip its records.

The last stable offset (LSO) is the first offset of the earliest transaction that is still
open, or whose marker the high watermark has not yet passed (ProducerStateManager's first
unstable offset keeps a completed transaction "unreplicated" until then), or the high
watermark (the log end when none is given) when there is none. read_committed fetches stop
there.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from eosim.simulation.records import NO_SEQUENCE, AbortedTransaction, ControlType, LogBatch

__all__ = ["AbortedTransaction", "ControlType", "LogBatch", "PartitionLog"]


class PartitionLog:
    """One replica's log of one topic partition."""

    __slots__ = (
        "aborted",
        "batches",
        "completed",
        "log_end_offset",
        "ongoing",
        "partition",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: list[LogBatch] = []
        self.log_end_offset = 0
        # producer id -> first offset of its open transaction (insertion-ordered)
        self.ongoing: dict[int, int] = {}
        self.aborted: list[AbortedTransaction] = []
        # (first offset, marker offset) of completed transactions whose marker the high
        # watermark may not have passed yet, in marker order (ProducerStateManager's
        # unreplicatedTxns).
        self.completed: deque[tuple[int, int]] = deque()

    def append(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        values: tuple[str, ...],
        now: float,
        transactional: bool = False,
        leader_epoch: int = 0,
    ) -> LogBatch:
        batch = LogBatch(
            self.log_end_offset,
            producer_id,
            epoch,
            base_sequence,
            values,
            now,
            transactional,
            leader_epoch=leader_epoch,
        )
        if transactional and producer_id not in self.ongoing:
            self.ongoing[producer_id] = batch.base_offset
        self.batches.append(batch)
        self.log_end_offset += len(values)
        return batch

    def append_marker(
        self,
        producer_id: int,
        epoch: int,
        control: ControlType,
        now: float,
        coordinator_epoch: int = -1,
        leader_epoch: int = 0,
    ) -> LogBatch:
        """Write a COMMIT or ABORT marker for the producer's open transaction, if any."""
        marker = LogBatch(
            self.log_end_offset,
            producer_id,
            epoch,
            NO_SEQUENCE,
            ("",),
            now,
            True,
            control,
            coordinator_epoch,
            leader_epoch,
        )
        self._append_control(marker)
        return marker

    def _append_control(self, marker: LogBatch) -> None:
        first = self.ongoing.pop(marker.producer_id, None)
        if first is not None:
            self.completed.append((first, marker.base_offset))
            if marker.control == "ABORT":
                self.aborted.append(
                    AbortedTransaction(marker.producer_id, first, marker.base_offset)
                )
        self.batches.append(marker)
        self.log_end_offset = marker.last_offset + 1

    def append_as_follower(self, batch: LogBatch) -> None:
        """Append a batch fetched from the leader, as it is (same offsets, producer fields and
        leader epoch: UnifiedLog.appendAsFollower). Batches are never changed once written, so
        the follower shares the leader's object."""
        if batch.base_offset != self.log_end_offset:
            raise ValueError(
                f"{self.topic}-{self.partition}: batch at {batch.base_offset} does not follow "
                f"the log end {self.log_end_offset}"
            )
        if batch.control is not None:
            self._append_control(batch)
            return
        if batch.transactional and batch.producer_id not in self.ongoing:
            self.ongoing[batch.producer_id] = batch.base_offset
        self.batches.append(batch)
        self.log_end_offset = batch.last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on (UnifiedLog.truncateTo), as a replica that
        becomes a follower, or a broker after a power loss, does. Whole batches go: one that
        holds ``offset`` goes entirely, so the log end may end up below ``offset``. Open
        transactions and the aborted-transaction index are rebuilt from what is left (a
        transaction whose marker was cut off is open again)."""
        keep = self._first_batch_at(offset)
        if keep == len(self.batches):
            return
        self.batches = self.batches[:keep]
        self.log_end_offset = self.batches[-1].last_offset + 1 if self.batches else 0
        self.ongoing = {}
        self.aborted = []
        self.completed = deque((f, m) for f, m in self.completed if m < self.log_end_offset)
        for b in self.batches:
            if b.control is None:
                if b.transactional and b.producer_id not in self.ongoing:
                    self.ongoing[b.producer_id] = b.base_offset
                continue
            first = self.ongoing.pop(b.producer_id, None)
            if b.control == "ABORT" and first is not None:
                self.aborted.append(AbortedTransaction(b.producer_id, first, b.base_offset))

    def last_stable_offset(self, high_watermark: int | None = None) -> int:
        """UnifiedLog.lastStableOffset: the first unstable offset (an open transaction's first
        offset, or that of a completed one whose marker is at or above the high watermark) if
        it is below the high watermark, else the high watermark (the log end without one)."""
        completed = self.completed
        if high_watermark is None:
            bound = self.log_end_offset
        else:
            bound = high_watermark
            while completed and completed[0][1] < bound:
                completed.popleft()  # ProducerStateManager.onHighWatermarkUpdated
        if not self.ongoing and not completed:
            return bound
        unstable = [f for f, m in completed if m >= bound]
        return min([bound, *self.ongoing.values(), *unstable])

    def fetch(
        self,
        offset: int,
        isolation: Literal["read_committed", "read_uncommitted"] | str,
        max_records: int | None = None,
        high_watermark: int | None = None,
    ) -> tuple[list[LogBatch], list[AbortedTransaction]]:
        """Batches at or after ``offset`` up to the isolation level's bound (whole batches,
        at least one, about ``max_records`` records), and (for read_committed) the aborted
        transactions that overlap them. Consumers read to the high watermark (read_committed:
        to the last stable offset, which never passes it); a follower (``"replica"``) reads
        to the log end."""
        if isolation == "read_committed":
            bound = self.last_stable_offset(high_watermark)
        elif high_watermark is None or isolation == "replica":
            bound = self.log_end_offset
        else:
            bound = high_watermark
        i = self._first_batch_at(offset)
        batches: list[LogBatch] = []
        taken = 0
        for b in self.batches[i:]:
            if b.base_offset >= bound or (
                max_records is not None and batches and taken >= max_records
            ):
                break
            batches.append(b)
            taken += len(b.values)
        if isolation != "read_committed" or not batches:
            return batches, []
        last = batches[-1].last_offset
        aborted = [a for a in self.aborted if a.first_offset <= last and a.last_offset >= offset]
        return batches, aborted

    def _first_batch_at(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= ``offset`` (binary search)."""
        lo, hi = 0, len(self.batches)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.batches[mid].last_offset < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def records(self) -> list[dict[str, object]]:
        """Every data record in offset order, as written to a history's ``log`` line.

        Control records are left out; their offsets show as gaps."""
        out: list[dict[str, object]] = []
        for b in self.batches:
            if b.control is not None:
                continue
            for i, value in enumerate(b.values):
                seq = NO_SEQUENCE if b.base_sequence == NO_SEQUENCE else b.base_sequence + i
                record: dict[str, object] = {
                    "offset": b.base_offset + i,
                    "value": value,
                    "producer_id": b.producer_id,
                    "epoch": b.epoch,
                    "sequence": seq,
                }
                if b.transactional:
                    record["transactional"] = True
                    record["time"] = round(b.append_time, 6)
                out.append(record)
        return out

    def markers(self) -> list[dict[str, object]]:
        """The control records, as a history ``log`` line's ``markers``."""
        return [
            {
                "offset": b.base_offset,
                "producer_id": b.producer_id,
                "type": b.control,
                "time": round(b.append_time, 6),
            }
            for b in self.batches
            if b.control is not None
        ]
