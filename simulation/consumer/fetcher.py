"""The consumer's read_committed filter over fetched batches (Kafka's ``Fetcher`` logic).

Walking the batches in offset order: every aborted transaction whose first offset is at or
below a batch's last offset joins the aborted set (they arrive with the fetch response).
A transactional data batch of a producer in that set is skipped. An ABORT marker removes its
producer from the set. Control records are never returned, but the position moves past them.
"""

from __future__ import annotations

from eosim.simulation.records import AbortedTransaction, LogBatch


def read_committed(
    batches: list[LogBatch], aborted: list[AbortedTransaction]
) -> tuple[list[tuple[int, str]], int | None]:
    """(offset, value) of the records a read_committed consumer returns, and the offset after
    the last batch consumed (None when nothing was fetched)."""
    pending = sorted(aborted, key=lambda a: a.first_offset)
    aborted_producers: set[int] = set()
    out: list[tuple[int, str]] = []
    position = None
    for batch in batches:
        while pending and pending[0].first_offset <= batch.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        position = batch.last_offset + 1
        if batch.control is not None:
            if batch.control == "ABORT":
                aborted_producers.discard(batch.producer_id)
            continue
        if batch.transactional and batch.producer_id in aborted_producers:
            continue
        out.extend((batch.base_offset + i, v) for i, v in enumerate(batch.values))
    return out, position


def read_uncommitted(batches: list[LogBatch]) -> tuple[list[tuple[int, str]], int | None]:
    out: list[tuple[int, str]] = []
    position = None
    for batch in batches:
        position = batch.last_offset + 1
        if batch.control is None:
            out.extend((batch.base_offset + i, v) for i, v in enumerate(batch.values))
    return out, position
