"""KafkaConsumer with manually assigned partitions: fetch, positions and committed offsets.

The consumer fetches from each assigned partition's leader at its position, with
``isolation.level`` read_committed (the broker stops at the last stable offset; aborted
transactions are skipped with the aborted-transactions list; control records are never
returned, but the position moves past them) or read_uncommitted. It has at most one fetch in
flight per leader, and a leader holds a fetch that finds nothing to return until it does, or
``fetch.max.wait.ms`` (500 ms) has passed. Committed offsets live with
the group coordinator, found with FindCoordinator; ``committed()`` asks for *stable* offsets
(KIP-447) and so waits while a transaction's offsets are pending. Offsets are committed by
the application (``commit()``) or, with ``auto_commit_interval_ms`` (``enable.auto.commit``),
by ``poll()`` itself: at most once per interval, asynchronously, the positions the poll starts
from, which cover every record earlier polls returned. An asynchronous commit is tried once and
never retried, as in Kafka's ConsumerCoordinator (a retried commit could land after a later
one and move the group's offsets back); a retriable failure brings the next auto-commit
forward to ``retry.backoff.ms``. Groups are not rebalanced: partitions are assigned by the
application (a listed departure in docs/model.md).

Positions follow Kafka's ``SubscriptionState``. An assigned partition has no position until
the application seeks (say to its group's committed offset). ``poll()`` then applies
``auto.offset.reset`` to the partitions still without one: ``latest`` (Kafka's default) or
``earliest`` mark them for reset, and a ListOffsets request to each leader (timestamp LATEST
or EARLIEST) returns the position: the log start offset, or the end a consumer of that
isolation level may read to (the last stable offset under read_committed, else the high
watermark). A failed or refused ListOffsets is retried after ``retry.backoff.ms``. With
``none`` the poll raises :class:`NoOffsetForPartitionException` to the application. A fetch
answered OFFSET_OUT_OF_RANGE at the current position resets the partition the same way, or,
with ``none``, raises :class:`OffsetOutOfRangeException` (after the records the same poll
already collected are returned, as Kafka's FetchCollector does).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import Any, NamedTuple

import simpy

from eosim.simulation.consumer.consumer_coordinator import (
    COORDINATOR_GONE,
    ConsumerCoordinator,
    Generation,
    GroupException,
    GroupRebalanceConfig,
    RebalanceListener,
)
from eosim.simulation.consumer.consumer_membership_manager import ConsumerMembershipManager
from eosim.simulation.consumer.exceptions import ConsumerException
from eosim.simulation.consumer.fetcher import read_committed, read_uncommitted
from eosim.simulation.consumer.network_client import ConsumerNetworkClient
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.metadata import ClientMetadata, ClusterMetadata
from eosim.simulation.network import Network
from eosim.simulation.protocol import (
    EARLIEST_TIMESTAMP,
    INVALID_METADATA_ERRORS,
    LATEST_TIMESTAMP,
    ConsumerGroupMetadata,
    Errors,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartition,
)
from eosim.simulation.rng import RandomStream

ConsumerRecord = tuple[TopicPartition, int, str]  # (partition, offset, value)
Process = Generator[simpy.Event, Any, Any]

OFFSET_RESET_STRATEGIES = ("latest", "earliest", "none")


class CommitAttempt(NamedTuple):
    """One offset commit as its consumer saw it, for a :attr:`KafkaConsumer.commit_observer`:
    when the application (or auto-commit) asked for it, the offsets, who the OffsetCommit
    named (member id and generation; "" and -1 outside group management), whether it was
    asynchronous, and how it ended: None when the coordinator accepted it, else the error
    (a refusal, a local failure before anything was sent, or no answer)."""

    invoked: float
    offsets: tuple[tuple[TopicPartition, int], ...]
    member_id: str
    generation: int
    asynchronous: bool
    error: str | None


_RESET_TIMESTAMPS = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP}


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)


class NoOffsetForPartitionException(ConsumerException):
    """Partitions without a position, and ``auto.offset.reset=none``."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        self.partitions = partitions
        super().__init__(f"no position and auto.offset.reset=none for {_names(partitions)}")


class OffsetOutOfRangeException(ConsumerException):
    """A fetch position outside the log, and ``auto.offset.reset=none``."""

    def __init__(self, offsets: dict[TopicPartition, int]) -> None:
        self.offsets = offsets
        where = ", ".join(f"{t}-{p} at {o}" for (t, p), o in offsets.items())
        super().__init__(f"fetch position out of range and auto.offset.reset=none: {where}")


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
        fetch_max_wait_ms: float = 500.0,
        auto_offset_reset: str = "latest",
        metadata_max_age_ms: float = 300_000.0,
        retry_backoff_max_ms: float = 1_000.0,
        metadata_rng: RandomStream | None = None,
        rng: RandomStream | None = None,
    ) -> None:
        if auto_offset_reset not in OFFSET_RESET_STRATEGIES:
            raise ValueError(f"auto.offset.reset must be one of {OFFSET_RESET_STRATEGIES}")
        self.env = env
        self.node = node
        # The consumer's metadata cache: partition leaders as this client believes them.
        self.metadata = ClientMetadata(
            metadata,
            metadata_max_age_ms,
            retry_backoff_ms,
            env.now,
            refresh_backoff_max_ms=retry_backoff_max_ms,
            jitter=metadata_rng,
        )
        self._metadata_request: simpy.Event | None = None
        self._metadata_asked = 0
        self.isolation = isolation
        self.group = group
        self.retry_backoff_ms = retry_backoff_ms
        # AbstractCoordinator.retryBackoff: the coordinator waits (finding it, synchronous
        # commits, fetching committed offsets) grow from retry.backoff.ms to
        # retry.backoff.max.ms, jittered from ``rng``, the consumer's own stream.
        self.retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self.rng = rng
        self.client = ConsumerNetworkClient(env, node, network, request_timeout_ms, host)
        self.auto_offset_reset = auto_offset_reset
        self.assignment: list[TopicPartition] = []
        # Partitions with a valid position (Kafka's FETCHING state).
        self.positions: dict[TopicPartition, int] = {}
        # Partitions awaiting a reset (AWAIT_RESET), with the strategy asked for; those whose
        # ListOffsets is in flight; and when a failed one may be retried.
        self._reset: dict[TopicPartition, str] = {}
        self._listing: dict[TopicPartition, simpy.Event] = {}
        self._reset_retry_at: dict[TopicPartition, float] = {}
        # Out-of-range fetch positions (with ``none``) to raise on the next poll.
        self._out_of_range: dict[TopicPartition, int] = {}
        self.coordinator: str | None = None
        self.end_offsets: dict[TopicPartition, int] = {}
        self._end_asked_at: dict[TopicPartition, float] = {}
        self.poll_timeout_ms = poll_timeout_ms
        # fetch.max.wait.ms (Kafka's default): a leader holds a fetch that finds nothing new
        # this long (fetch.min.bytes 1).
        self.fetch_max_wait_ms = fetch_max_wait_ms
        # leader -> (what was asked, the answer's event); answers not yet returned by poll
        self._in_flight: dict[str, tuple[tuple[tuple[TopicPartition, int], ...], simpy.Event]] = {}
        self._answered: list[tuple[tuple[tuple[TopicPartition, int], ...], float, object]] = []
        self.auto_commit_interval_ms = auto_commit_interval_ms if group is not None else None
        self._next_auto_commit = env.now + (auto_commit_interval_ms or 0.0)
        self._lookups = 0
        # subscribe(): the group membership, the partitions pending revocation (their
        # fetched data is not returned), and the committed offsets being fetched for newly
        # assigned partitions (with when a failed fetch may be retried).
        self.group_coordinator: ConsumerCoordinator | ConsumerMembershipManager | None = None
        self._pending_revocation: set[TopicPartition] = set()
        self._committed_fetch: simpy.Event | None = None
        self._committed_asked: tuple[TopicPartition, ...] = ()  # () while finding the coordinator
        self._committed_retry_at = 0.0
        self._committed_failures = 0
        # Told of every commit's outcome (the application records them in its history).
        self.commit_observer: Callable[[CommitAttempt], None] | None = None
        # A rebalance listener's callback that blocks (Kafka runs it inside poll()): until
        # it is done, poll() neither sets positions nor fetches.
        self._held: simpy.Event | None = None

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assign ``partitions``, none of which has a position yet (Kafka's INITIALIZING)."""
        self.assignment = list(partitions)
        self.positions = {}
        self._reset.clear()
        self._listing.clear()
        self._reset_retry_at.clear()
        self._out_of_range.clear()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        # A pending reset is cancelled: its ListOffsets answer is ignored on arrival.
        self._reset.pop(tp, None)
        self._listing.pop(tp, None)
        self._reset_retry_at.pop(tp, None)
        # An answer to a fetch from the old position is dropped by `_records`.

    # -- group membership (subscribe) ---------------------------------------------------
    def subscribe(
        self,
        topics: list[str],
        config: GroupRebalanceConfig,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Join ``config.group_id`` on the next poll: under the classic protocol the group's
        leader assigns the partitions of ``topics``; under the consumer protocol (KIP-848)
        the coordinator does."""
        assert self.group == config.group_id
        self.assignment = []
        if config.group_protocol == "consumer":
            self.group_coordinator = ConsumerMembershipManager(
                self, config, tuple(topics), listener
            )
        else:
            self.group_coordinator = ConsumerCoordinator(self, config, tuple(topics), listener)

    @property
    def subscribed(self) -> bool:
        return self.group_coordinator is not None

    def group_metadata(self) -> ConsumerGroupMetadata:
        """``groupMetadata()``, for ``sendOffsetsToTransaction``: the group, and a subscribed
        consumer's generation and member id as of its last completed join (-1 and "" before
        the first); Kafka does not clear them when the generation is reset."""
        assert self.group is not None
        group = self.group_coordinator
        if group is None:
            return ConsumerGroupMetadata(self.group)
        generation = group.joined_generation
        return ConsumerGroupMetadata(
            self.group,
            generation.generation_id,
            generation.member_id,
            group.config.group_instance_id,
        )

    def assign_from_subscribed(self, partitions: list[TopicPartition]) -> None:
        """``SubscriptionState.assignFromSubscribed``: partitions kept keep their positions."""
        kept = set(partitions)
        self.assignment = list(partitions)
        # A committed-offsets fetch asked under the old assignment is not used for the new
        # one (ConsumerCoordinator's PendingCommittedOffsetRequest.sameRequest: the same
        # partitions in the same generation).
        self._committed_fetch = None
        self._committed_asked = ()
        self.positions = {tp: off for tp, off in self.positions.items() if tp in kept}
        for pending in (self._reset, self._listing, self._reset_retry_at, self._out_of_range):
            for tp in [tp for tp in pending if tp not in kept]:
                del pending[tp]
        self._pending_revocation.clear()

    def mark_pending_revocation(self, partitions: list[TopicPartition] | None = None) -> None:
        """KAFKA-14196: no fetch is sent for, and no fetched data returned from, partitions
        about to be revoked (every assigned one by default)."""
        self._pending_revocation = set(self.assignment if partitions is None else partitions)

    def hold(self, event: simpy.Event) -> None:
        """A listener callback that takes time (``event`` fires when it is done): Kafka runs
        callbacks inside ``poll()``, so nothing is fetched, nor any position set from the
        committed offsets, until it returns."""
        self._held = event

    def restart_auto_commit_timer(self) -> None:
        if self.auto_commit_interval_ms is not None:
            self._next_auto_commit = self.env.now + self.auto_commit_interval_ms

    def pause(self) -> None:
        """The process is frozen: so is the heartbeat thread."""
        if self.group_coordinator is not None:
            self.group_coordinator.pause()

    def resume(self) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.resume()

    # -- fetching ----------------------------------------------------------------------
    def poll(self) -> Process:
        """Fetch from every leader that has no fetch in flight, then wait (at most
        ``poll_timeout_ms``) until some fetch has answered; returns the records of every
        answer received, in arrival order. A leader that does not answer stalls only its own
        partitions, until ``request.timeout.ms`` gives up on it, as in Kafka's Fetcher.
        Partitions without a position are reset first (``auto.offset.reset``); a position
        that arrives while the poll waits is fetched from in the same poll.

        Raises :class:`NoOffsetForPartitionException` or :class:`OffsetOutOfRangeException`
        with ``auto.offset.reset=none``."""
        group = self.group_coordinator
        if group is None:
            self._maybe_auto_commit()
        else:
            group.on_poll_start()
        deadline = self.env.now + self.poll_timeout_ms
        first = True
        while True:
            joining: list[simpy.Event] = []
            if group is not None:
                joining = group.poll()
                if group.auto_commits_in_poll():
                    self._maybe_auto_commit()
            held = self._held is not None and not self._held.triggered
            self._maybe_update_metadata()
            if not held:
                self._update_fetch_positions()
                self._raise_out_of_range()
                self._send_fetches()
            if self._answered:
                break
            waiting = [event for _parts, event in self._in_flight.values()]
            waiting += joining
            if held:
                assert self._held is not None
                waiting.append(self._held)
            if self._committed_fetch is not None and not self._committed_fetch.triggered:
                waiting.append(self._committed_fetch)
            waiting += _unique(self._listing.values())
            if self._metadata_request is not None:
                waiting.append(self._metadata_request)
            retry = self._next_reset_retry()
            if not waiting and retry is None:
                break
            remaining = self.poll_timeout_ms if first else deadline - self.env.now
            if retry is not None:
                remaining = min(remaining, retry - self.env.now)
            first = False
            yield simpy.AnyOf(self.env, [*waiting, self.env.timeout(remaining)])
            if self._answered or self.env.now >= deadline:
                break
        answered, self._answered = self._answered, []
        out: list[ConsumerRecord] = []
        for parts, sent_at, response in answered:
            out.extend(self._records(parts, sent_at, response))
        if self._out_of_range and not out:
            self._raise_out_of_range()
        return out

    def _maybe_update_metadata(self) -> None:
        """Send a metadata request when one is due and none is in flight (to the brokers in
        turn); the answer refreshes the cache."""
        now = self.env.now
        if self._metadata_request is not None or self.metadata.time_to_update(now) > 0:
            return
        brokers = self.metadata.brokers
        broker = brokers[self._metadata_asked % len(brokers)]
        self._metadata_asked += 1
        event = self.client.send(broker, MetadataRequest(self.client.next_correlation_id()))
        self._metadata_request = event

        def answered(ev: simpy.Event) -> None:
            if self._metadata_request is ev:
                self._metadata_request = None
            if isinstance(ev.value, MetadataResponse):
                self.metadata.update(ev.value.partitions, self.env.now)
            else:  # no answer before the timeout, or the connection closed
                self.metadata.failed(self.env.now)

        event.callbacks.append(answered)

    def _leader(self, tp: TopicPartition) -> str | None:
        leader = self.metadata.leader(tp)
        if leader is None:
            self.metadata.request_update()
        return leader

    def _send_fetches(self) -> None:
        by_leader: dict[str, list[tuple[TopicPartition, int]]] = {}
        for tp in self.assignment:
            if tp in self.positions and tp not in self._pending_revocation:
                leader = self._leader(tp)
                if leader is not None:
                    by_leader.setdefault(leader, []).append((tp, self.positions[tp]))
        for leader, parts in by_leader.items():
            if leader not in self._in_flight:
                self._fetch(leader, tuple(parts))

    # -- positions (SubscriptionState, OffsetFetcher) -----------------------------------
    def _update_fetch_positions(self) -> None:
        """Partitions with no position and no reset pending get the default reset strategy
        (or, with ``none``, the poll raises); then a ListOffsets goes to each leader for the
        partitions awaiting a reset that have none in flight and are past their backoff."""
        initializing = [
            tp for tp in self.assignment if tp not in self.positions and tp not in self._reset
        ]
        if initializing and self.subscribed:
            # refreshCommittedOffsetsIfNeeded: the group's committed offsets first (stable
            # ones, KIP-447); the partitions without one fall to auto.offset.reset.
            initializing = self._init_with_committed_offsets(initializing)
        if initializing:
            if self.auto_offset_reset == "none":
                raise NoOffsetForPartitionException(initializing)
            for tp in initializing:
                self._reset[tp] = self.auto_offset_reset
        by_leader: dict[str, list[tuple[TopicPartition, int]]] = {}
        for tp in self.assignment:
            strategy = self._reset.get(tp)
            if strategy is None or tp in self._listing:
                continue
            if self._reset_retry_at.get(tp, 0.0) > self.env.now:
                continue
            timestamp = _RESET_TIMESTAMPS[strategy]
            leader = self._leader(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append((tp, timestamp))
        for leader, parts in by_leader.items():
            self._list_offsets(leader, tuple(parts))

    def _init_with_committed_offsets(
        self, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        """Send an OffsetFetch for ``partitions`` unless one is in flight or backing off;
        returns the partitions it answered without a committed offset (to be reset)."""
        done = self._committed_fetch
        if (
            done is not None
            and self._committed_asked
            and set(self._committed_asked) != set(partitions)
        ):
            # ConsumerCoordinator.fetchCommittedOffsets: a pending fetch is used only for the
            # same partitions (sameRequest); the assignment changed since, so ask again.
            done = self._committed_fetch = None
        if done is not None and done.triggered:
            self._committed_fetch = None
            if not self._committed_asked:
                return []  # a coordinator lookup: the fetch goes out on the next pass
            response = done.value
            if isinstance(response, OffsetFetchResponse) and response.error is Errors.NONE:
                self._committed_failures = 0
                asked = set(self._committed_asked)
                missing = []
                for tp in partitions:
                    if tp not in asked:
                        continue
                    if tp in response.offsets:
                        self.positions[tp] = response.offsets[tp]
                    else:
                        missing.append(tp)
                return missing
            if response is None or (
                isinstance(response, OffsetFetchResponse) and response.error in COORDINATOR_GONE
            ):
                self.coordinator = None
            self._committed_retry_at = self.env.now + self.retry_backoff.backoff(
                self._committed_failures, self.rng
            )
            self._committed_failures += 1
            return []
        if done is None and self.env.now >= self._committed_retry_at:
            if self.coordinator is None:
                assert self.group_coordinator is not None
                self._committed_fetch = self.group_coordinator.lookup_coordinator()
                self._committed_asked = ()
                return []
            self._committed_asked = tuple(partitions)
            request = OffsetFetchRequest(
                self.client.next_correlation_id(), self.group or "", self._committed_asked
            )
            self._committed_fetch = self.client.send(self.coordinator, request)
        return []

    def _list_offsets(self, leader: str, parts: tuple[tuple[TopicPartition, int], ...]) -> None:
        request = ListOffsetsRequest(self.client.next_correlation_id(), parts, self.isolation)
        event = self.client.send(leader, request)
        asked = {tp: self._reset[tp] for tp, _timestamp in parts}
        for tp in asked:
            self._listing[tp] = event

        def answered(ev: simpy.Event) -> None:
            response = ev.value
            offsets: dict[TopicPartition, int] = {}
            if isinstance(response, ListOffsetsResponse):
                offsets = {tp: off for tp, err, off in response.partitions if err is Errors.NONE}
                if any(err in INVALID_METADATA_ERRORS for _tp, err, _off in response.partitions):
                    self.metadata.request_update()
            else:
                self.metadata.request_update()  # no answer: the leader may have moved
            for tp, strategy in asked.items():
                if self._listing.get(tp) is not ev:
                    continue  # a seek (or a new assignment) overtook this request
                del self._listing[tp]
                if self._reset.get(tp) != strategy:
                    continue
                if tp in offsets:
                    del self._reset[tp]
                    self._reset_retry_at.pop(tp, None)
                    self.positions[tp] = offsets[tp]
                else:
                    self._reset_retry_at[tp] = self.env.now + self.retry_backoff_ms

        event.callbacks.append(answered)

    def _next_reset_retry(self) -> float | None:
        """When the earliest partition waiting out a failed ListOffsets may retry."""
        times = [
            at
            for tp, at in self._reset_retry_at.items()
            if tp in self._reset and tp not in self._listing and at > self.env.now
        ]
        return min(times) if times else None

    def _raise_out_of_range(self) -> None:
        """Raise the out-of-range positions kept from the last fetch, unless a seek moved
        them since (then that answer is stale)."""
        stale, self._out_of_range = self._out_of_range, {}
        current = {tp: off for tp, off in stale.items() if self.positions.get(tp) == off}
        if current:
            raise OffsetOutOfRangeException(current)

    def _fetch(self, leader: str, parts: tuple[tuple[TopicPartition, int], ...]) -> None:
        request = FetchRequest(
            self.client.next_correlation_id(), parts, self.isolation, self.fetch_max_wait_ms
        )
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
            self.metadata.request_update()  # no answer: the leader may have moved
            return []
        asked = dict(parts)
        out: list[ConsumerRecord] = []
        for tp, part in response.partitions:
            if tp in self._pending_revocation:
                continue
            if self.positions.get(tp) != asked[tp]:
                continue  # the position moved (a seek or a reset) since it was asked
            if part.error is Errors.OFFSET_OUT_OF_RANGE:
                if self.auto_offset_reset == "none":
                    self._out_of_range[tp] = asked[tp]
                else:
                    del self.positions[tp]
                    self._reset[tp] = self.auto_offset_reset
                continue
            if part.error is not Errors.NONE:
                if part.error in INVALID_METADATA_ERRORS:
                    self.metadata.request_update()
                continue
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
            tp in self.positions
            and tp in self.end_offsets
            and self.positions[tp] >= self.end_offsets[tp]
            and (since is None or self._end_asked_at[tp] > since)
            for tp in self.assignment
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
        self.commit_async()

    def commit_async(self) -> simpy.Process:
        """An asynchronous commit of the positions (``allConsumed``): a process whose value
        is the error it failed with (an :class:`Errors` or a group exception), or None."""
        return self.env.process(self._commit_async(dict(self.positions)))

    def _commit_async(self, offsets: dict[TopicPartition, int]) -> Process:
        """One attempt at committing ``offsets`` (after one coordinator lookup if none is
        known); a failure is not retried: the next auto-commit comes ``retry.backoff.ms``
        later, with the positions of then. A subscribed consumer's commit carries its
        generation (and fails locally outside a stable group)."""
        assert self.group is not None
        invoked, chosen = self.env.now, tuple(offsets.items())
        if self.coordinator is None:
            yield from self._lookup_coordinator()
        member = self._committer()
        if isinstance(member, GroupException):
            self._observe(invoked, chosen, "", -1, True, member.describe())
            return member
        sent, member_id, generation, instance = member
        response = yield from self._send_offset_commit(chosen, member_id, generation, instance)
        outcome: Errors | GroupException | None
        if response is None or response.error.retriable:
            self._next_auto_commit = self.env.now + self.retry_backoff_ms
            outcome = Errors.COORDINATOR_NOT_AVAILABLE if response is None else response.error
        else:
            outcome = self._commit_outcome(sent, response.error)
        self._observe(invoked, chosen, member_id, generation, True, _error_name(outcome))
        return outcome

    def _send_offset_commit(
        self,
        offsets: tuple[tuple[TopicPartition, int], ...],
        member_id: str,
        generation: int,
        instance: str | None,
    ) -> Process:
        """One OffsetCommit to the known coordinator (none, and None returned, when no
        coordinator is known or the consumer is closed); a coordinator that does not answer
        or is no longer the group's is forgotten. Returns the response."""
        assert self.group is not None
        if self.coordinator is None or not self.client.running:
            return None
        request = OffsetCommitRequest(
            self.client.next_correlation_id(),
            self.group,
            offsets,
            member_id,
            generation,
            instance,
        )
        response = yield self.client.send(self.coordinator, request)
        if response is None or response.error in COORDINATOR_GONE:
            self.coordinator = None
        return response

    def _observe(
        self,
        invoked: float,
        offsets: tuple[tuple[TopicPartition, int], ...],
        member_id: str,
        generation: int,
        asynchronous: bool,
        error: str | None,
    ) -> None:
        if self.commit_observer is not None:
            attempt = CommitAttempt(invoked, offsets, member_id, generation, asynchronous, error)
            self.commit_observer(attempt)

    def _committer(self) -> tuple[Generation | None, str, int, str | None] | GroupException:
        """Who an OffsetCommit names: (generation sent, member id, generation id, instance id)
        for a subscribed consumer while its group is stable (else the exception its commit
        fails with locally); no member and generation -1 outside group management."""
        group = self.group_coordinator
        if group is None:
            return None, "", -1, None
        chosen = group.commit_generation()
        if isinstance(chosen, GroupException):
            return chosen
        instance = group.config.group_instance_id
        return chosen, chosen.member_id, chosen.generation_id, instance

    def _commit_outcome(
        self, sent: Generation | None, error: Errors
    ) -> Errors | GroupException | None:
        """An answered OffsetCommit's outcome: None, the group exception the coordinator's
        refusal becomes (``OffsetCommitResponseHandler``), or the error."""
        if error is Errors.NONE:
            return None
        if self.group_coordinator is not None and sent is not None:
            failed = self.group_coordinator.on_commit_error(sent, error)
            if failed is not None:
                return failed
        return error

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
        """AbstractCoordinator.ensureCoordinatorReady: FindCoordinator to the brokers in turn
        until one names the coordinator, backing off exponentially between failures."""
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
                yield self.env.timeout(self.retry_backoff.backoff(i - 1, self.rng))

    def _coordinator_call(self, build: Any) -> Process:
        """Send a request to the group coordinator until it answers without a retriable
        error; returns the response. Between attempts the wait grows exponentially
        (ConsumerCoordinator.commitOffsetsSync and fetchCommittedOffsets)."""
        attempts = 0
        while True:
            if not self.client.running:
                return None  # closed (the process died): give up
            yield from self._find_coordinator()
            if self.coordinator is None:
                return None
            response = yield self.client.send(
                self.coordinator, build(self.client.next_correlation_id())
            )
            if response is None or response.error in COORDINATOR_GONE:
                self.coordinator = None
            elif response.error in (
                Errors.COORDINATOR_LOAD_IN_PROGRESS,
                Errors.UNSTABLE_OFFSET_COMMIT,
            ):
                pass
            else:
                return response
            yield self.env.timeout(self.retry_backoff.backoff(attempts, self.rng))
            attempts += 1

    def committed(self) -> Process:
        """The group's committed offsets for the assigned partitions (stable ones)."""
        assert self.group is not None
        group, partitions = self.group, tuple(self.assignment)
        response = yield from self._coordinator_call(
            lambda cid: OffsetFetchRequest(cid, group, partitions)
        )
        return {} if response is None else dict(response.offsets)

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> Process:
        """Commit ``offsets`` (default: the current positions); returns the error or None.
        A subscribed consumer's commit carries its generation: outside a stable group it
        fails at once (RebalanceInProgressException or CommitFailedException), and the
        group's refusals become those exceptions (``describe()`` strings)."""
        assert self.group is not None
        group_id, invoked = self.group, self.env.now
        chosen = tuple((offsets if offsets is not None else self.positions).items())
        member = self._committer()
        if isinstance(member, GroupException):
            self._observe(invoked, chosen, "", -1, False, member.describe())
            return member.describe()
        sent, member_id, generation, instance = member
        response = yield from self._coordinator_call(
            lambda cid: OffsetCommitRequest(cid, group_id, chosen, member_id, generation, instance)
        )
        error = (
            "ConsumerClosed"
            if response is None
            else _error_name(self._commit_outcome(sent, response.error))
        )
        self._observe(invoked, chosen, member_id, generation, False, error)
        return error

    def commit_sync_before_rebalance(self, timeout_ms: float) -> Process:
        """``CommitRequestManager.maybeAutoCommitSyncBeforeRebalance`` (consumer protocol): a
        synchronous commit of every consumed position, retried with the latest positions and
        member epoch on STALE_MEMBER_EPOCH and retriable errors until ``timeout_ms`` has
        passed; returns the error it ended with, or None."""
        assert self.group is not None and self.group_coordinator is not None
        invoked = self.env.now
        deadline, attempts = invoked + timeout_ms, 0
        while True:
            chosen = tuple(self.positions.items())
            if not chosen:
                return None
            member = self._committer()
            assert not isinstance(member, GroupException)
            _sent, member_id, epoch, instance = member
            if self.coordinator is None:
                yield from self._lookup_coordinator()
            response = yield from self._send_offset_commit(chosen, member_id, epoch, instance)
            error = Errors.COORDINATOR_NOT_AVAILABLE if response is None else response.error
            self._observe(
                invoked,
                chosen,
                member_id,
                epoch,
                False,
                _error_name(None if error is Errors.NONE else error),
            )
            retry = error.retriable or error is Errors.STALE_MEMBER_EPOCH
            if error is Errors.NONE or not retry or not self.client.running:
                return None if error is Errors.NONE else error
            if self.env.now >= deadline:
                return error
            yield self.env.timeout(self.retry_backoff.backoff(attempts, self.rng))
            attempts += 1
            invoked = self.env.now

    def close(self, leave: bool = True) -> None:
        """Close the consumer (a subscribed one leaves its group first, as Kafka's close
        does); ``leave=False`` is a crash: nothing more is sent."""
        if self.group_coordinator is not None:
            self.group_coordinator.close(leave)
        self.client.close()


def _error_name(outcome: Errors | GroupException | None) -> str | None:
    """How a commit's outcome is told: None, a group exception's ``describe()``, an error's
    name."""
    if outcome is None:
        return None
    return outcome.describe() if isinstance(outcome, GroupException) else outcome.name


def _unique(events: Iterable[simpy.Event]) -> list[simpy.Event]:
    """Each event once, in first-seen order."""
    out: list[simpy.Event] = []
    for event in events:
        if not any(event is e for e in out):
            out.append(event)
    return out
