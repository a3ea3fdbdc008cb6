"""RecordAccumulator: per-partition queues of batches waiting for the Sender.

``send()`` appends a record to the last batch of its partition's deque, or opens a new batch
when that one is full. A batch becomes *ready* when it is full, when ``linger.ms`` has
passed since it was created, when a flush is under way, or when ``buffer.memory`` is
exhausted. A batch being retried waits out its backoff, unless its partition's leader has
changed since its last attempt (KAFKA-15415, Kafka 3.7+, so both modelled versions: a retry to
a new leader goes at once). The Sender drains at most one batch
per partition per request, and the accumulator's memory, counted in ``batch.size`` units as
Kafka's BufferPool does, is returned when a batch completes.

A retried batch goes back into its deque. For an idempotent producer it goes in sequence
order, so retries leave in the order they were first sent. For a plain producer it goes at
the head, which is how ``max.in.flight > 1`` without idempotence reorders records.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat

from eosim.simulation.protocol import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TopicPartition

RECORD_OVERHEAD = 8  # bytes per record beyond key and value (varint headers)
BATCH_OVERHEAD = 61  # bytes of a v2 record batch header


# A record's callback: (value, partition, offset or -1, error or None, whether the record may
# have been written). The batch passes the value and its partition, so that one callback can
# serve many records (a run may hold every record it sends outstanding at once). A callback
# may also offer ``succeeded(values, partition, base_offset)`` and
# ``failed(values, partition, error, maybe_written)``: a batch whose records all have it then
# completes them in one call, in place of one call per record (offsets base_offset,
# base_offset + 1, ...; -1 throughout when base_offset is -1).
RecordCallback = Callable[[str, int, int, str | None, bool], None]


@dataclass(slots=True, eq=False)
class ProducerBatch:
    tp: TopicPartition
    created_ms: float
    # The records as columns: their values, in order, and their callbacks, kept only once
    # two differ (until then every record's callback is ``shared_callback``). A record's key
    # and size matter only until it is appended (its partition, the batch's size).
    values: list[str] = field(default_factory=list)
    callbacks: list[RecordCallback] | None = None
    size: int = BATCH_OVERHEAD
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    attempts: int = 0
    last_attempt_ms: float = 0.0
    retry_backoff_ms: float = 0.0
    sequence_has_been_reset: bool = False
    # Re-enqueued at least once (Kafka's ``inRetry``).
    in_retry: bool = False
    # Some attempt's fate is unknown (it timed out or its connection dropped), so the batch
    # may have been written. Attempts answered with an error were not appended.
    fate_unknown: bool = False
    done: bool = False
    in_flight: bool = False
    full: bool = False
    # The partition's leader epoch as the batch last saw it, and its attempt count when it
    # first saw that epoch (ProducerBatch.currentLeaderEpoch, attemptsWhenLeaderLastChanged).
    current_leader_epoch: int | None = None
    attempts_when_leader_last_changed: int = 0
    # The first record's callback: every record's while ``callbacks`` is None.
    shared_callback: RecordCallback | None = None

    @property
    def record_count(self) -> int:
        return len(self.values)

    def add(self, value: str, size: int, callback: RecordCallback) -> None:
        """Add a record (``RecordAccumulator.append`` does the same on its hot path, and
        decides whether the batch has room)."""
        values = self.values
        if not values:
            self.shared_callback = callback
        elif self.callbacks is not None:
            self.callbacks.append(callback)
        elif callback is not self.shared_callback:
            self.callbacks = [self.shared_callback] * len(values) + [callback]  # type: ignore[list-item]
        values.append(value)
        self.size += size

    def _callbacks(self) -> Iterable[RecordCallback]:
        if self.callbacks is not None:
            return self.callbacks
        return repeat(self.shared_callback, len(self.values))  # type: ignore[arg-type]

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def maybe_update_leader_epoch(self, leader_epoch: int | None) -> None:
        """ProducerBatch.maybeUpdateLeaderEpoch: remember a higher leader epoch, and at which
        attempt it was first seen."""
        if leader_epoch is not None and (
            self.current_leader_epoch is None or self.current_leader_epoch < leader_epoch
        ):
            self.attempts_when_leader_last_changed = self.attempts
            self.current_leader_epoch = leader_epoch

    @property
    def leader_changed_for_the_ongoing_retry(self) -> bool:
        """ProducerBatch.hasLeaderChangedForTheOngoingRetry: a retry whose partition got a new
        leader since the last attempt went out. Kafka counts re-enqueues and eosim counts sends,
        which agree while a batch waits in its queue (the only time this is asked)."""
        return self.attempts >= 1 and self.attempts == self.attempts_when_leader_last_changed

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.base_sequence = base_sequence

    def reset_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        self.set_producer_state(producer_id, epoch, base_sequence)
        self.sequence_has_been_reset = True

    def complete(self, base_offset: int) -> bool:
        """Succeed every record; False if the batch was already completed (e.g. expired)."""
        if self.done:
            return False
        self.done = True
        partition = self.tp[1]
        if self.callbacks is None:
            succeeded = getattr(self.shared_callback, "succeeded", None)
            if succeeded is not None:
                succeeded(self.values, partition, base_offset)
                return True
        for i, (value, callback) in enumerate(zip(self.values, self._callbacks(), strict=True)):
            callback(value, partition, base_offset + i if base_offset >= 0 else -1, None, True)
        return True

    def fail(self, error: str) -> bool:
        """Fail every record. It may have been written only if an attempt's fate is unknown:
        a batch never sent, or whose every attempt was answered with an error, was not."""
        if self.done:
            return False
        self.done = True
        partition = self.tp[1]
        if self.callbacks is None:
            failed = getattr(self.shared_callback, "failed", None)
            if failed is not None:
                failed(self.values, partition, error, self.fate_unknown)
                return True
        for value, callback in zip(self.values, self._callbacks(), strict=True):
            callback(value, partition, -1, error, self.fate_unknown)
        return True


class RecordAccumulator:
    def __init__(
        self,
        batch_size: int,
        linger_ms: float,
        buffer_memory: int,
        delivery_timeout_ms: float,
        idempotent: bool,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.delivery_timeout_ms = delivery_timeout_ms
        self.idempotent = idempotent
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.used_memory = 0
        self.flushing = 0
        self.incomplete = 0  # batches created and not yet completed

    # -- append ------------------------------------------------------------------------
    def has_room_for(self, size: int) -> bool:
        return self.used_memory + max(self.batch_size, size + BATCH_OVERHEAD) <= self.buffer_memory

    def append(
        self, tp: TopicPartition, value: str, size: int, callback: RecordCallback, now: float
    ) -> bool:
        """Append a record of ``size`` bytes; True when this made a batch ready (a new or a
        full batch)."""
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = deque()
        if dq:
            last = dq[-1]
            # Only the tail batch takes records, and only until it has been drained once
            # (given a sequence: `has_sequence`, spelt out on this path taken once per record).
            if not last.full and last.base_sequence == NO_SEQUENCE:
                total = last.size + size
                if total <= self.batch_size:
                    # ProducerBatch.add, spelt out.
                    if last.callbacks is not None:
                        last.callbacks.append(callback)
                    elif callback is not last.shared_callback:
                        last.callbacks = [last.shared_callback] * len(last.values) + [callback]  # type: ignore[list-item]
                    last.values.append(value)
                    last.size = total
                    # Full once a record of the same size would no longer fit.
                    full = last.full = total + size > self.batch_size
                    return full
                last.full = True
        batch = ProducerBatch(tp, now)
        batch.add(value, size, callback)
        self.used_memory += max(self.batch_size, batch.size)
        self.incomplete += 1
        dq.append(batch)
        return True

    def deallocate(self, batch: ProducerBatch) -> None:
        self.used_memory -= max(self.batch_size, batch.size)
        self.incomplete -= 1

    # -- readiness ---------------------------------------------------------------------
    def ready(
        self,
        now: float,
        sendable: Callable[[TopicPartition], bool],
        leader_epoch: Callable[[TopicPartition], int | None] | None = None,
    ) -> tuple[list, float]:
        """Partitions whose head batch may be drained now, and the delay until the next.
        ``leader_epoch``: each partition's leader epoch in the client's metadata; a retried
        head whose partition's leader changed since its last attempt does not wait out its
        backoff (RecordAccumulator.shouldBackoff)."""
        ready: list[TopicPartition] = []
        next_delay = float("inf")
        exhausted = not self.has_room_for(0)
        for tp, dq in self.batches.items():
            if not dq:
                continue
            head = dq[0]
            if leader_epoch is not None:
                head.maybe_update_leader_epoch(leader_epoch(tp))
            if head.attempts > 0:
                wait = head.last_attempt_ms + head.retry_backoff_ms - now
                if wait > 0 and not head.leader_changed_for_the_ongoing_retry:
                    next_delay = min(next_delay, wait)
                    continue
                if sendable(tp):
                    ready.append(tp)
                continue
            full = len(dq) > 1 or head.full
            waited = now - head.created_ms
            if full or waited >= self.linger_ms or self.flushing or exhausted:
                if sendable(tp):
                    ready.append(tp)
            else:
                next_delay = min(next_delay, self.linger_ms - waited)
        return ready, next_delay

    def pop_head(self, tp: TopicPartition) -> ProducerBatch:
        return self.batches[tp].popleft()

    def head(self, tp: TopicPartition) -> ProducerBatch | None:
        dq = self.batches.get(tp)
        return dq[0] if dq else None

    # -- retries and expiry ------------------------------------------------------------
    def reenqueue(self, batch: ProducerBatch, now: float, backoff_ms: float) -> None:
        batch.last_attempt_ms = now
        batch.retry_backoff_ms = backoff_ms
        batch.in_retry = True
        batch.in_flight = False
        dq = self.batches.setdefault(batch.tp, deque())
        if not self.idempotent or not batch.has_sequence:
            dq.appendleft(batch)
            return
        # Insert in sequence order ahead of batches that have no sequence yet.
        index = 0
        for index, queued in enumerate(dq):  # noqa: B007
            if not queued.has_sequence or queued.base_sequence > batch.base_sequence:
                break
        else:
            index = len(dq)
        dq.insert(index, batch)

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches past ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        limit = self.delivery_timeout_ms
        for dq in self.batches.values():
            while dq and now - dq[0].created_ms >= limit:
                expired.append(dq.popleft())
        return expired

    def next_expiry_delay(self, now: float) -> float:
        heads = [dq[0].created_ms for dq in self.batches.values() if dq]
        if not heads:
            return float("inf")
        return max(0.0, min(heads) + self.delivery_timeout_ms - now)

    def abort_all(self) -> list[ProducerBatch]:
        out = [b for dq in self.batches.values() for b in dq]
        self.batches.clear()
        return out

    def abort_undrained(self) -> list[ProducerBatch]:
        """Remove every batch that has never been sent (a transaction is being aborted).
        Batches waiting for a retry were sent and stay: their outcome must be learned."""
        out: list[ProducerBatch] = []
        for tp in list(self.batches):
            dq = self.batches[tp]
            keep = deque(b for b in dq if b.attempts > 0)
            out.extend(b for b in dq if b.attempts == 0)
            if keep:
                self.batches[tp] = keep
            else:
                del self.batches[tp]
        return out
