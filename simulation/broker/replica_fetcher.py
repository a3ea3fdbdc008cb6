"""ReplicaFetcherManager: a broker's followers fetching from their leaders.

Mirrors Kafka's ``ReplicaFetcherManager`` (``AbstractFetcherManager``: one fetcher per leader
broker, partitions added and removed as roles change, the partitions that failed for good) and
``ReplicaFetcherThread`` / ``AbstractFetcherThread`` (the fetch loop, the handling of each
answer, truncation to the leader):

* **The fetch loop** (:class:`ReplicaFetcher`, one per follower broker and leader broker):
  a fetch names, per partition, the follower's log end, its last fetched epoch and the leader
  epoch it believes current; a partition that must still find where it diverged from its
  leader asks for the end of its latest epoch instead (OffsetsForLeaderEpoch, rule
  ``truncation: leader_epoch_kip101``). An unanswered fetch (``replica.socket.timeout.ms`` +
  ``replica.fetch.wait.max.ms``, or a reset connection) backs its partitions off for
  ``replica.fetch.backoff.ms`` and reconnects; an error for one partition backs off that
  partition alone.
* **Answers** (:meth:`ReplicaFetcherManager.on_replica_fetch_response`): data is appended
  (``processPartitionData``), the leader's HW and log start followed; a diverging epoch or an
  epoch end offset truncates the log where :func:`truncation_state` says
  (``truncateToEpochEndOffsets``); OFFSET_OUT_OF_RANGE cuts back to a shorter leader or starts
  again at the leader's log start (``fetchOffsetAndTruncate``); a batch that does not start at
  the follower's log end stops fetching the partition until its leadership changes
  (``markPartitionFailed``, in :attr:`ReplicaFetcherManager.failures`).

The broker's :class:`~eosim.simulation.broker.replica_manager.ReplicaManager` adds and removes
partitions as it makes followers and leaders (``addFetcherForPartitions``,
``removeFetcherForPartitions``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from eosim.simulation.broker.leader_epoch_cache import truncation_state
from eosim.simulation.broker.partition import Partition
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.network import Connection, Network
from eosim.simulation.protocol import (
    Disconnected,
    Errors,
    ReplicaFetchPartition,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from eosim.simulation.state_change import DISABLED, StateChangeLog


@dataclass(eq=False)
class ReplicaFetcher:
    """The fetcher of one follower broker from one leader broker (ReplicaFetcherThread)."""

    source: str
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    delayed_until: dict[TopicPartition, float] = field(default_factory=dict)
    conn: Connection | None = None
    generation: int = 0
    in_flight: int | None = None  # correlation id
    wakeup: simpy.Event | None = None
    process: Any = None


class ReplicaFetcherManager:
    """One broker's fetchers, one per leader broker it follows."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        replica_fetch_wait_max_ms: float,
        replica_fetch_backoff_ms: float,
        replica_socket_timeout_ms: float,
        partitions: dict[TopicPartition, Partition],
        new_state: Callable[[], ProducerStateManager],
        is_running: Callable[[], bool],
        next_correlation: Callable[[], int],
        *,
        state_log: StateChangeLog = DISABLED,
    ) -> None:
        """The ``replica_*`` configs are the broker's (``ReplicationSettings``);
        ``partitions``: the broker's replicas (the replica manager's own dict, read as it
        changes); ``new_state``: an empty producer state, for truncations; ``is_running``:
        whether the broker is up and not paused; ``next_correlation``: the broker's next
        correlation id for its own requests (one sequence with its AlterPartition requests)."""
        self.env = env
        self.broker = broker
        self.network = network
        self.replica_fetch_wait_max_ms = replica_fetch_wait_max_ms
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self.replica_socket_timeout_ms = replica_socket_timeout_ms
        self.partitions = partitions
        self.new_state = new_state
        self.is_running = is_running
        self.next_correlation = next_correlation
        self.state_log = state_log
        # Followers that stopped fetching for good: (partition, why), in order.
        self.failures: list[tuple[TopicPartition, str]] = []
        self._fetchers: dict[str, ReplicaFetcher] = {}
        self.generation = 0  # bumped by a crash: loops of the old incarnation stop

    # -- partitions in and out -----------------------------------------------------------
    def add_partition(self, leader: str, tp: TopicPartition) -> None:
        """Fetch ``tp`` from ``leader`` (addFetcherForPartitions), starting now if idle."""
        self._fetcher(leader).partitions[tp] = None
        self._wake_fetcher(leader)

    def _fetcher(self, source: str) -> ReplicaFetcher:
        fetcher = self._fetchers.get(source)
        if fetcher is None:
            fetcher = ReplicaFetcher(source)
            self._fetchers[source] = fetcher
            fetcher.process = self.env.process(self._fetch_loop(fetcher, self.generation))
        return fetcher

    def remove_partition(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` (removeFetcherForPartitions)."""
        for fetcher in self._fetchers.values():
            fetcher.partitions.pop(tp, None)
            fetcher.delayed_until.pop(tp, None)

    def _wake_fetcher(self, source: str) -> None:
        """Have an idle fetcher fetch now. A fetcher with a request in flight is left alone:
        its answer wakes it, and the next request takes the new partitions (waking it early
        would look like an unanswered request to the loop, and back every partition off)."""
        fetcher = self._fetchers.get(source)
        if (
            fetcher is not None
            and fetcher.in_flight is None
            and fetcher.wakeup is not None
            and not fetcher.wakeup.triggered
        ):
            fetcher.wakeup.succeed()

    def wake_fetchers(self) -> None:
        for source in sorted(self._fetchers):
            self._wake_fetcher(source)

    # -- the fetch loop (AbstractFetcherThread.doWork) -------------------------------------
    def _fetch_loop(self, fetcher: ReplicaFetcher, generation: int):  # type: ignore[no-untyped-def]
        env = self.env
        while generation == self.generation:
            now = env.now
            ready = [
                tp
                for tp in fetcher.partitions
                if fetcher.delayed_until.get(tp, 0.0) <= now
                and tp in self.partitions
                and self.partitions[tp].fetch_failed is None
            ]
            if not ready or not self.is_running():
                waits = [t - now for t in fetcher.delayed_until.values() if t > now]
                fetcher.wakeup = env.event()
                if waits and self.is_running():
                    yield env.any_of([fetcher.wakeup, env.timeout(min(waits))])
                else:
                    yield fetcher.wakeup
                continue
            parts = []
            for tp in ready:
                part = self.partitions[tp]
                query = part.epoch_cache.latest_epoch if part.truncating else None
                parts.append(
                    (
                        tp,
                        ReplicaFetchPartition(
                            part.log_end_offset,
                            part.last_fetched_epoch,
                            part.leader_epoch,
                            query,
                        ),
                    )
                )
            cid = self.next_correlation()
            if fetcher.conn is None or fetcher.conn.closed:
                fetcher.generation += 1
                fetcher.conn = self.network.connect(self.broker, fetcher.source, fetcher.generation)
            fetcher.in_flight = cid
            request = ReplicaFetchRequest(cid, self.broker, tuple(parts))
            fetcher.wakeup = env.event()
            self.network.send(self.broker, fetcher.source, request, fetcher.conn, internal=True)
            timeout = env.timeout(self.replica_socket_timeout_ms + self.replica_fetch_wait_max_ms)
            yield env.any_of([fetcher.wakeup, timeout])
            if generation != self.generation:
                return
            if fetcher.in_flight == cid:
                # No answer (timeout or a reset connection): back off, reconnect.
                fetcher.in_flight = None
                if fetcher.conn is not None:
                    fetcher.conn.close()
                    fetcher.conn = None
                backoff = env.now + self.replica_fetch_backoff_ms
                for tp in ready:
                    fetcher.delayed_until[tp] = backoff

    # -- answers (AbstractFetcherThread.processFetchRequest) --------------------------------
    def on_replica_fetch_response(
        self, src: str, msg_conn: Connection | None, response: ReplicaFetchResponse
    ) -> None:
        fetcher = self._fetchers.get(src)
        if (
            fetcher is None
            or fetcher.in_flight != response.correlation_id
            or msg_conn is not fetcher.conn
        ):
            return
        fetcher.in_flight = None
        now = self.env.now
        for tp, data in response.partitions:
            if tp not in fetcher.partitions:
                continue  # no longer following this leader
            part = self.partitions[tp]
            if part.fetch_failed is not None:
                continue
            if data.fetch_offset >= 0 and data.fetch_offset != part.log_end_offset:
                # The log moved since the fetch was sent (AbstractFetcherThread processes an
                # answer only for the offset it still fetches from).
                continue
            if data.error is Errors.NONE and data.epoch_end_offset is not None:
                if not part.truncating:
                    continue
                epoch, end = data.epoch_end_offset
                self._truncate_to_leader(part, epoch, end, "OffsetsForLeaderEpoch")
            elif data.error is Errors.NONE and data.diverging_epoch is not None:
                epoch, end = data.diverging_epoch
                self._truncate_to_leader(part, epoch, end, "diverging epoch")
            elif data.error is Errors.NONE:
                if part.truncating:
                    continue
                if data.batches and data.batches[0].base_offset != part.log_end_offset:
                    self._fail_fetch(
                        part,
                        f"the leader answered a fetch at {part.log_end_offset} with a batch "
                        f"from offset {data.batches[0].base_offset} (mid-batch: the logs "
                        "diverged where the follower cannot tell)",
                    )
                    continue
                part.append_as_follower(data.batches, data.high_watermark, now)
                part.fetched_epoch = part.leader_epoch
                part.follow_log_start(data.log_start_offset)
            elif data.error is Errors.OFFSET_OUT_OF_RANGE:
                if data.log_end_offset < part.log_end_offset:
                    # AbstractFetcherThread.fetchOffsetAndTruncate: the leader's log is
                    # shorter (an unclean election): cut back to it.
                    self.truncate(part, data.log_end_offset, "offset out of range")
                elif data.log_start_offset > part.log_end_offset:
                    # Everything this replica has was deleted on the leader: start again at
                    # its log start (AbstractFetcherThread.fetchOffsetAndTruncate).
                    part.truncate_fully_and_start_at(data.log_start_offset, self.new_state(), now)
            else:
                fetcher.delayed_until[tp] = now + self.replica_fetch_backoff_ms
        if fetcher.wakeup is not None and not fetcher.wakeup.triggered:
            fetcher.wakeup.succeed()

    def _truncate_to_leader(self, part: Partition, epoch: int, end: int, why: str) -> None:
        """Truncate on the leader's (epoch, end offset) by :func:`truncation_state`; done
        when it says so, else the next fetch asks again."""
        decision = truncation_state(
            part.epoch_cache, part.log_end_offset, part.high_watermark, epoch, end
        )
        self.truncate(part, decision.offset, f"{why} ({epoch}, {end})")
        part.truncating = not decision.complete and part.truncating

    def truncate(self, part: Partition, offset: int, reason: str) -> None:
        """Cut ``part``'s log back to ``offset`` (whole batches), saying why in the
        state-change log when that drops anything."""
        before = part.log_end_offset
        part.truncate_to(max(offset, 0), self.new_state(), self.env.now)
        if part.log_end_offset < before:
            self.state_log.record(
                self.broker,
                "truncated",
                part.tp,
                log_end_offset=before,
                to=part.log_end_offset,
                reason=reason,
            )

    def _fail_fetch(self, part: Partition, reason: str) -> None:
        """The follower cannot append what its leader sent: the partition stops fetching
        until its leadership changes (AbstractFetcherThread.markPartitionFailed), loudly."""
        part.fetch_failed = reason
        self.failures.append((part.tp, reason))
        self.state_log.record(self.broker, "fetch_failed", part.tp, reason=reason)

    def on_disconnected(self, payload: Disconnected) -> None:
        fetcher = self._fetchers.get(payload.node)
        if fetcher is None or fetcher.conn is None or fetcher.generation != payload.generation:
            return
        fetcher.conn.closed = True
        if (
            fetcher.in_flight is not None
            and fetcher.wakeup is not None
            and not fetcher.wakeup.triggered
        ):
            fetcher.wakeup.succeed()  # the loop sees the request unanswered and backs off

    def shutdown(self) -> None:
        """The broker crashed: every fetcher stops and its connection closes."""
        self.generation += 1
        for fetcher in self._fetchers.values():
            if fetcher.conn is not None:
                fetcher.conn.close()
            if fetcher.wakeup is not None and not fetcher.wakeup.triggered:
                fetcher.wakeup.succeed()
        self._fetchers = {}
