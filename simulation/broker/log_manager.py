"""LogManager: a broker's housekeeping of its logs: retention, producer-id expiry, DeleteRecords,
flushing, and what a power loss or a restart finds on disk.

Kafka's ``LogManager`` runs ``kafka-log-retention`` every ``log.retention.check.interval.ms``
(5 minutes), the first time ``log.initial.task.delay.ms`` (30 s) after start-up: every log that
is not compacted has ``UnifiedLog.deleteOldSegments`` applied, leader and follower replicas
alike, each bounded by its own high watermark (see
:meth:`~eosim.simulation.broker.log.PartitionLog.delete_old_segments`). Each ``UnifiedLog``
schedules ``PeriodicProducerExpirationCheck`` every ``producer.id.expiration.check.interval.ms``
(10 minutes), which forgets the producers idle for ``producer.id.expiration.ms`` (1 day) with
no transaction open on the partition (``ProducerStateManager.removeExpiredProducers``); eosim
runs one such check per broker for all its replicas, at the same times.

DeleteRecords (``ReplicaManager.deleteRecords``, ``Partition.deleteRecordsOnLeader``) moves a
partition leader's log start up to an offset (-1: the high watermark); an offset above the high
watermark is OFFSET_OUT_OF_RANGE. Followers learn the new log start from their fetches.

The log flusher (``kafka-log-flusher``, ``flushDirtyLogs``) runs every
``log.flush.scheduler.interval.ms`` (never by default) and flushes each log whose
``log.flush.interval.ms`` has passed (:class:`~eosim.simulation.broker.durability.LogDurability`
holds each log's flush rules). A power loss cuts every log back to
what was flushed or written back by the operating system (:meth:`LogManager.lose_page_cache`);
a restart recovers every log and its producer state (:meth:`LogManager.recover`, Kafka's
``loadLogs`` after an unclean shutdown).

A broker that is down or paused does nothing; its checks go on at the same times once it is
back (Kafka's scheduler starts again with the initial delay after a restart).

With Kafka's defaults a check costs a few comparisons per partition: nothing is worked out
about a log's segments unless a segment could be deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.config import kafka_default
from eosim.simulation.protocol import Errors, TopicPartition

# DeleteRecordsRequest.HIGH_WATERMARK: delete up to the high watermark.
HIGH_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class LogManagerSettings:
    """Broker configs of log housekeeping, Kafka's defaults (milliseconds)."""

    log_retention_check_interval_ms: float = float(kafka_default("log.retention.check.interval.ms"))
    # log.initial.task.delay.ms (an internal config): the first retention check.
    log_initial_task_delay_ms: float = float(kafka_default("log.initial.task.delay.ms"))
    producer_id_expiration_ms: float = float(kafka_default("producer.id.expiration.ms"))
    producer_id_expiration_check_interval_ms: float = float(
        kafka_default("producer.id.expiration.check.interval.ms")
    )


class LogManager:
    """One broker's log housekeeping, driven by two SimPy timers."""

    def __init__(
        self,
        env: simpy.Environment,
        replicas: Callable[[], ReplicaManager],
        settings: LogManagerSettings,
        is_running: Callable[[], bool],
    ) -> None:
        """``replicas``: the broker's replica manager (asked each time: a restart may
        replace it); ``is_running``: whether the broker is up and not paused."""
        self.env = env
        self.replicas = replicas
        self.settings = settings
        self.is_running = is_running
        # Segments deleted and producer ids expired so far (for tests and curious readers).
        self.segments_deleted = 0
        self.producers_expired = 0

    def start(self) -> None:
        self._start_flusher()
        s = self.settings
        self.env.process(
            self._every(
                s.log_initial_task_delay_ms, s.log_retention_check_interval_ms, self.cleanup_logs
            )
        )
        interval = s.producer_id_expiration_check_interval_ms
        self.env.process(self._every(interval, interval, self.remove_expired_producers))

    def _every(self, delay: float, period: float, task: Callable[[], None]):  # type: ignore[no-untyped-def]
        yield self.env.timeout(delay)
        while True:
            if self.is_running():
                task()
            yield self.env.timeout(period)

    # -- the periodic tasks ------------------------------------------------------------
    def cleanup_logs(self) -> None:
        """LogManager.cleanupLogs: retention on every log this broker hosts."""
        now = self.env.now
        partitions = self.replicas().partitions
        for tp in sorted(partitions):
            part = partitions[tp]
            log = part.log
            before = log.log_start_offset
            self.segments_deleted += log.delete_old_segments(
                now, part.high_watermark, part.producer_state
            )
            if log.log_start_offset > before:
                # The deleted head's epochs leave the leader-epoch cache with it.
                part.epoch_cache.truncate_from_start(log.log_start_offset)

    def remove_expired_producers(self) -> None:
        """UnifiedLog.removeExpiredProducers on every log this broker hosts; the state kept
        for the deleted head (Kafka's producer snapshots) expires alike."""
        now = self.env.now
        expiration = self.settings.producer_id_expiration_ms
        partitions = self.replicas().partitions
        for tp in sorted(partitions):
            part = partitions[tp]
            state = part.producer_state
            if not state.producers:
                continue
            ongoing = part.log.ongoing
            self.producers_expired += len(state.remove_expired_producers(now, expiration, ongoing))
            head = part.log.head_state
            if head is not None:
                for pid in [
                    pid
                    for pid, entry in head.producers.items()
                    if state.is_expired(entry, now, expiration, ongoing)
                ]:
                    del head.producers[pid]

    # -- durability: flushing, power loss, recovery ------------------------------------------
    def _start_flusher(self) -> None:
        """The log flusher (``kafka-log-flusher``, LogManager.flushDirtyLogs, every
        log.flush.scheduler.interval.ms: never by default)."""
        interval = self.replicas().settings.log_flush_scheduler_interval_ms
        if interval is None:
            return

        def loop():  # type: ignore[no-untyped-def]
            while True:
                yield self.env.timeout(interval)
                if not self.is_running():
                    continue
                now = self.env.now
                partitions = self.replicas().partitions
                for tp in sorted(partitions):
                    part = partitions[tp]
                    part.durability.tick(part.log_end_offset, now)

        self.env.process(loop())

    def lose_page_cache(self) -> dict[str, list[int]]:
        """The machine lost power: each replica's log is cut back, now, to what was flushed or
        written back by the operating system (what a restart will find on disk). Returns the
        cuts, ``"topic-partition" -> [old log end, new log end]``, of the logs that lost
        records."""
        now = self.env.now
        replicas = self.replicas()
        cut: dict[str, list[int]] = {}
        for tp in sorted(replicas.partitions):
            part = replicas.partitions[tp]
            before = part.log_end_offset
            # Deleted segments stay deleted: the log restarts no lower than its start
            # (LogLoader opens an empty segment at the checkpointed log start).
            durable = max(part.durability.durable_end(now), part.log.log_start_offset)
            if durable < before:
                part.truncate_to(durable, replicas.new_state(), now)
                if part.log_end_offset < before:
                    cut[f"{tp[0]}-{tp[1]}"] = [before, part.log_end_offset]
            part.durability.flush(part.log_end_offset, now)
        return cut

    def recover(self) -> None:
        """Restart after a crash (always an unclean shutdown: LogManager.loadLogs recovers
        every log): each replica's log is recovered and its producer state loaded from the
        snapshot written at its end, one batch per producer (:meth:`Partition.recover`); its
        high watermark is at most its log end."""
        now = self.env.now
        replicas = self.replicas()
        for tp in sorted(replicas.partitions):
            replicas.partitions[tp].recover(replicas.new_state(), now)

    # -- DeleteRecords ---------------------------------------------------------------------
    def delete_records(self, tp: TopicPartition, offset: int) -> Errors:
        """Partition.deleteRecordsOnLeader: move the leader's log start up to ``offset``
        (HIGH_WATERMARK: the high watermark). NOT_LEADER_OR_FOLLOWER if this broker does not
        lead ``tp``, OFFSET_OUT_OF_RANGE for an offset below 0 or above the high watermark
        (UnifiedLog.maybeIncrementLogStartOffset), INVALID_TOPIC_EXCEPTION for an internal
        topic. Followers move theirs when their fetches tell them."""
        part = self.replicas().leader_partition(tp)
        if part is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if not part.log.config.delete:
            return Errors.INVALID_TOPIC_EXCEPTION
        hw = part.high_watermark
        target = hw if offset == HIGH_WATERMARK else offset
        if target < 0 or target > hw:
            return Errors.OFFSET_OUT_OF_RANGE
        part.increment_log_start_offset(target)
        return Errors.NONE
