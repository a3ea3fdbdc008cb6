"""KafkaConsumer with manually assigned partitions: fetch, positions and committed offsets.

The consumer fetches from each assigned partition's leader at its position, with
``isolation.level`` read_committed (the broker stops at the last stable offset; aborted
transactions are skipped with the aborted-transactions list; control records are never
returned, but the position moves past them) or read_uncommitted. Committed offsets live with
the group coordinator, found with FindCoordinator; ``committed()`` asks for *stable* offsets
(KIP-447) and so waits while a transaction's offsets are pending. Offsets are committed by
the application (``commit()``) or, with ``auto_commit_interval_ms`` (``enable.auto.commit``),
by ``poll()`` itself: at most once per interval, asynchronously, the positions the poll starts
from, which cover every record earlier polls returned. An asynchronous commit is tried once and
never retried, as in Kafka's ConsumerCoordinator (a retried commit could land after a later
one and move the group's offsets back); a retriable failure brings the next auto-commit
forward to ``retry.backoff.ms``. Groups are not rebalanced: partitions
are assigned by the application (a listed departure in docs/model.md).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from simulation.consumer.fetcher import read_committed, read_uncommitted
from simulation.consumer.network_client import ConsumerNetworkClient
from simulation.metadata import ClusterMetadata
from simulation.network import Network
from simulation.protocol import (
    Errors,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TopicPartition,
)

ConsumerRecord = tuple[TopicPartition, int, str]  # (partition, offset, value)
Process = Generator[simpy.Event, Any, Any]


class KafkaConsumer:
    def __init__(
        self,
        env: simpy.Environment,
        node: str,
        network: Network,
        metadata: ClusterMetadata,
        *,
        isolation: str = "read_committed",
        group: str | None = None,
        request_timeout_ms: float = 30_000.0,
        retry_backoff_ms: float = 100.0,
        host: str | None = None,
        auto_commit_interval_ms: float | None = None,
        poll_timeout_ms: float = 1_000.0,
    ) -> None:
        self.env = env
        self.node = node
        self.metadata = metadata
        self.isolation = isolation
        self.group = group
        self.retry_backoff_ms = retry_backoff_ms
        self.client = ConsumerNetworkClient(env, node, network, request_timeout_ms, host)
        self.positions: dict[TopicPartition, int] = {}
        self.coordinator: str | None = None
        self.end_offsets: dict[TopicPartition, int] = {}
        self._end_asked_at: dict[TopicPartition, float] = {}
        self.poll_timeout_ms = poll_timeout_ms
        # leader -> (what was asked, the answer's event); answers not yet returned by poll
        self._in_flight: dict[str, tuple[tuple[tuple[TopicPartition, int], ...], simpy.Event]] = {}
        self._answered: list[tuple[tuple[tuple[TopicPartition, int], ...], float, object]] = []
        self.auto_commit_interval_ms = auto_commit_interval_ms if group is not None else None
        self._next_auto_commit = env.now + (auto_commit_interval_ms or 0.0)
        self._lookups = 0

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = dict.fromkeys(partitions, 0)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        # An answer to a fetch from the old position is dropped by `_records`.

    # -- fetching ----------------------------------------------------------------------
    def poll(self) -> Process:
        """Fetch from every leader that has no fetch in flight, then wait (at most
        ``poll_timeout_ms``) until some fetch has answered; returns the records of every
        answer received, in arrival order. A leader that does not answer stalls only its own
        partitions, until ``request.timeout.ms`` gives up on it, as in Kafka's Fetcher."""
        self._maybe_auto_commit()
        by_leader: dict[str, list[tuple[TopicPartition, int]]] = {}
        for tp, position in self.positions.items():
            by_leader.setdefault(self.metadata.leader(tp), []).append((tp, position))
        for leader, parts in by_leader.items():
            if leader not in self._in_flight:
                self._fetch(leader, tuple(parts))
        if not self._answered and self._in_flight:
            waiting = [event for _parts, event in self._in_flight.values()]
            yield simpy.AnyOf(self.env, [*waiting, self.env.timeout(self.poll_timeout_ms)])
        answered, self._answered = self._answered, []
        out: list[ConsumerRecord] = []
        for parts, sent_at, response in answered:
            out.extend(self._records(parts, sent_at, response))
        return out

    def _fetch(self, leader: str, parts: tuple[tuple[TopicPartition, int], ...]) -> None:
        request = FetchRequest(self.client.next_correlation_id(), parts, self.isolation)
        event = self.client.send(leader, request)
        sent_at = self.env.now
        self._in_flight[leader] = (parts, event)

        def answered(ev: simpy.Event) -> None:
            if self._in_flight.get(leader, (None, None))[1] is ev:
                del self._in_flight[leader]
                self._answered.append((parts, sent_at, ev.value))

        event.callbacks.append(answered)

    def _records(
        self,
        parts: tuple[tuple[TopicPartition, int], ...],
        sent_at: float,
        response: object,
    ) -> list[ConsumerRecord]:
        if not isinstance(response, FetchResponse):
            return []
        asked = dict(parts)
        out: list[ConsumerRecord] = []
        for tp, part in response.partitions:
            if part.error is not Errors.NONE or self.positions.get(tp) != asked[tp]:
                continue  # an error, or the position moved (a seek) since it was asked
            self.end_offsets[tp] = (
                part.last_stable_offset
                if self.isolation == "read_committed"
                else part.log_end_offset
            )
            self._end_asked_at[tp] = sent_at
            if self.isolation == "read_committed":
                records, position = read_committed(part.batches, part.aborted)
            else:
                records, position = read_uncommitted(part.batches)
            start = self.positions[tp]
            out.extend((tp, offset, value) for offset, value in records if offset >= start)
            if position is not None and position > start:
                self.positions[tp] = position
        return out

    def caught_up(self, since: float | None = None) -> bool:
        """Every partition's position has reached the end the last fetch reported (and, with
        ``since``, that fetch was sent after ``since``)."""
        return all(
            tp in self.end_offsets
            and pos >= self.end_offsets[tp]
            and (since is None or self._end_asked_at[tp] > since)
            for tp, pos in self.positions.items()
        )

    # -- committed offsets -------------------------------------------------------------
    @property
    def auto_commit(self) -> bool:
        return self.auto_commit_interval_ms is not None

    def _maybe_auto_commit(self) -> None:
        interval = self.auto_commit_interval_ms
        if interval is None or self.env.now < self._next_auto_commit:
            return
        self._next_auto_commit = self.env.now + interval
        self.env.process(self._commit_async(dict(self.positions)))

    def _commit_async(self, offsets: dict[TopicPartition, int]) -> Process:
        """One attempt at committing ``offsets`` (after one coordinator lookup if none is
        known); a failure is not retried: the next auto-commit comes ``retry.backoff.ms``
        later, with the positions of then."""
        assert self.group is not None
        if self.coordinator is None:
            yield from self._lookup_coordinator()
        response = None
        if self.coordinator is not None and self.client.running:
            request = OffsetCommitRequest(
                self.client.next_correlation_id(), self.group, tuple(offsets.items())
            )
            response = yield self.client.send(self.coordinator, request)
            if response is None or response.error in (
                Errors.NOT_COORDINATOR,
                Errors.COORDINATOR_NOT_AVAILABLE,
            ):
                self.coordinator = None
        if response is None or response.error.retriable:
            self._next_auto_commit = self.env.now + self.retry_backoff_ms

    def _lookup_coordinator(self) -> Process:
        """One FindCoordinator, to the next broker in turn."""
        assert self.group is not None
        brokers = self.metadata.brokers
        broker = brokers[self._lookups % len(brokers)]
        self._lookups += 1
        request = FindCoordinatorRequest(self.client.next_correlation_id(), self.group, "group")
        response = yield self.client.send(broker, request)
        if response is not None and response.error is Errors.NONE:
            self.coordinator = response.node

    def _find_coordinator(self) -> Process:
        assert self.group is not None
        brokers = self.metadata.brokers
        i = 0
        while self.coordinator is None and self.client.running:
            broker = brokers[i % len(brokers)]
            i += 1
            request = FindCoordinatorRequest(self.client.next_correlation_id(), self.group, "group")
            response = yield self.client.send(broker, request)
            if response is not None and response.error is Errors.NONE:
                self.coordinator = response.node
            else:
                yield self.env.timeout(self.retry_backoff_ms)

    def _coordinator_call(self, build: Any) -> Process:
        """Send a request to the group coordinator until it answers without a retriable
        error; returns the response."""
        while True:
            if not self.client.running:
                return None  # closed (the process died): give up
            yield from self._find_coordinator()
            if self.coordinator is None:
                return None
            response = yield self.client.send(
                self.coordinator, build(self.client.next_correlation_id())
            )
            if response is None or response.error in (
                Errors.NOT_COORDINATOR,
                Errors.COORDINATOR_NOT_AVAILABLE,
            ):
                self.coordinator = None
            elif response.error in (
                Errors.COORDINATOR_LOAD_IN_PROGRESS,
                Errors.UNSTABLE_OFFSET_COMMIT,
            ):
                pass
            else:
                return response
            yield self.env.timeout(self.retry_backoff_ms)

    def committed(self) -> Process:
        """The group's committed offsets for the assigned partitions (stable ones)."""
        assert self.group is not None
        group, partitions = self.group, tuple(self.positions)
        response = yield from self._coordinator_call(
            lambda cid: OffsetFetchRequest(cid, group, partitions)
        )
        return {} if response is None else dict(response.offsets)

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> Process:
        """Commit ``offsets`` (default: the current positions); returns the error or None."""
        assert self.group is not None
        group = self.group
        chosen = tuple((offsets if offsets is not None else self.positions).items())
        response = yield from self._coordinator_call(
            lambda cid: OffsetCommitRequest(cid, group, chosen)
        )
        if response is None:
            return "ConsumerClosed"
        return None if response.error is Errors.NONE else response.error.name

    def close(self) -> None:
        self.client.close()
