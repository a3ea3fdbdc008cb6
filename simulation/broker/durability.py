"""What of a partition's log survives a power loss: Kafka's flush policy and the page cache.

Kafka writes appends to the page cache and leaves fsync to its flush policy:
``log.flush.interval.messages`` (flush once the log end is that many records past the last
flush, ``UnifiedLog.append``) and ``log.flush.interval.ms`` (``LogManager.flushDirtyLogs``).
Both default to never (Long.MAX_VALUE), so by default Kafka relies on replication and on the
operating system, which writes dirty pages back on its own some time after they were dirtied
(on Linux ``vm.dirty_expire_centisecs``, 30 s, checked every ``dirty_writeback_centisecs``;
here one delay, ``os_writeback_ms``). A process crash keeps the page cache; a power loss keeps
only what was flushed or written back, so a correlated power loss can lose records that every
replica had acknowledged.

Pure logic: the broker reports appends and time, and asks what is durable.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

NEVER = None


@dataclass(slots=True)
class LogDurability:
    flush_interval_messages: int | None = NEVER
    flush_interval_ms: float | None = NEVER
    os_writeback_ms: float = 30_000.0
    flushed_end: int = 0  # Kafka's recovery point: everything below it is on disk
    last_flush_ms: float = 0.0
    # (log end after the append, time) of appends not yet flushed, oldest first
    _pending: deque[tuple[int, float]] = field(default_factory=deque)

    def appended(self, log_end_offset: int, now: float) -> None:
        """Records were appended up to ``log_end_offset`` (exclusive)."""
        self._pending.append((log_end_offset, now))
        interval = self.flush_interval_messages
        if interval is not None and log_end_offset - self.flushed_end >= interval:
            self.flush(log_end_offset, now)

    def tick(self, log_end_offset: int, now: float) -> None:
        """The periodic flusher: flush if ``log.flush.interval.ms`` has passed."""
        if (
            self.flush_interval_ms is not None
            and log_end_offset > self.flushed_end
            and now - self.last_flush_ms >= self.flush_interval_ms
        ):
            self.flush(log_end_offset, now)

    def flush(self, log_end_offset: int, now: float) -> None:
        self.flushed_end = max(self.flushed_end, log_end_offset)
        self.last_flush_ms = now
        while self._pending and self._pending[0][0] <= self.flushed_end:
            self._pending.popleft()

    def durable_end(self, now: float) -> int:
        """The log end a power loss at ``now`` leaves: flushed, or written back by the OS."""
        end = self.flushed_end
        for offset, at in self._pending:
            if now - at < self.os_writeback_ms:
                break
            end = max(end, offset)
        return end

    def truncated(self, log_end_offset: int) -> None:
        """The log was truncated (as a follower, or after a power loss) to ``log_end_offset``."""
        self.flushed_end = min(self.flushed_end, log_end_offset)
        self._pending = deque((o, t) for o, t in self._pending if o <= log_end_offset)
