"""KafkaConsumer with manually assigned partitions: fetch, positions and committed offsets.

The consumer fetches from each assigned partition's leader at its position, with
``isolation.level`` read_committed (the broker stops at the last stable offset; aborted
transactions are skipped with the aborted-transactions list; control records are never
returned, but the position moves past them) or read_uncommitted. Committed offsets live with
the group coordinator, found with FindCoordinator; ``committed()`` asks for *stable* offsets
(KIP-447) and so waits while a transaction's offsets are pending. Groups are not rebalanced:
partitions are assigned by the application (a listed departure in docs/model.md).
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

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = dict.fromkeys(partitions, 0)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    # -- fetching ----------------------------------------------------------------------
    def poll(self) -> Process:
        """One round of fetches to every leader; returns the records, in partition order."""
        by_leader: dict[str, list[tuple[TopicPartition, int]]] = {}
        for tp, position in self.positions.items():
            by_leader.setdefault(self.metadata.leader(tp), []).append((tp, position))
        waits = []
        for leader, parts in by_leader.items():
            request = FetchRequest(self.client.next_correlation_id(), tuple(parts), self.isolation)
            waits.append((parts, self.client.send(leader, request)))
        out: list[ConsumerRecord] = []
        for parts, event in waits:
            response = yield event
            if not isinstance(response, FetchResponse):
                continue
            asked = dict(parts)
            for tp, part in response.partitions:
                if part.error is not Errors.NONE or self.positions.get(tp) != asked[tp]:
                    continue
                self.end_offsets[tp] = (
                    part.last_stable_offset
                    if self.isolation == "read_committed"
                    else part.log_end_offset
                )
                if self.isolation == "read_committed":
                    records, position = read_committed(part.batches, part.aborted)
                else:
                    records, position = read_uncommitted(part.batches)
                start = self.positions[tp]
                out.extend((tp, offset, value) for offset, value in records if offset >= start)
                if position is not None and position > start:
                    self.positions[tp] = position
        return out

    def caught_up(self) -> bool:
        """Every partition's position has reached the end the last fetch reported."""
        return all(
            tp in self.end_offsets and pos >= self.end_offsets[tp]
            for tp, pos in self.positions.items()
        )

    # -- committed offsets -------------------------------------------------------------
    def _find_coordinator(self) -> Process:
        assert self.group is not None
        brokers = self.metadata.brokers
        i = 0
        while self.coordinator is None:
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
            yield from self._find_coordinator()
            assert self.coordinator is not None
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
        return dict(response.offsets)

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> Process:
        """Commit ``offsets`` (default: the current positions); returns the error or None."""
        assert self.group is not None
        group = self.group
        chosen = tuple((offsets if offsets is not None else self.positions).items())
        response = yield from self._coordinator_call(
            lambda cid: OffsetCommitRequest(cid, group, chosen)
        )
        return None if response.error is Errors.NONE else response.error.name

    def close(self) -> None:
        self.client.close()
