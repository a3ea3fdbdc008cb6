"""An append-only partition log of record batches.

The log is the ground truth a run ends with. It keeps whole batches, each with the producer
id, epoch and sequence range it was written with, so that a restarted broker can rebuild
:class:`~simulation.broker.producer_state.ProducerStateManager` from it as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulation.protocol import NO_SEQUENCE, increment_sequence


@dataclass(slots=True)
class LogBatch:
    base_offset: int
    producer_id: int
    epoch: int
    base_sequence: int
    values: tuple[str, ...]
    append_time: float

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.values) - 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, len(self.values) - 1)


class PartitionLog:
    """The leader's log for one topic partition."""

    __slots__ = ("batches", "log_end_offset", "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: list[LogBatch] = []
        self.log_end_offset = 0

    def append(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        values: tuple[str, ...],
        now: float,
    ) -> LogBatch:
        batch = LogBatch(self.log_end_offset, producer_id, epoch, base_sequence, values, now)
        self.batches.append(batch)
        self.log_end_offset += len(values)
        return batch

    def records(self) -> list[dict[str, object]]:
        """Every record in offset order, as written to a history's ``log`` line."""
        out: list[dict[str, object]] = []
        for b in self.batches:
            for i, value in enumerate(b.values):
                seq = NO_SEQUENCE if b.base_sequence == NO_SEQUENCE else b.base_sequence + i
                out.append(
                    {
                        "offset": b.base_offset + i,
                        "value": value,
                        "producer_id": b.producer_id,
                        "epoch": b.epoch,
                        "sequence": seq,
                    }
                )
        return out
