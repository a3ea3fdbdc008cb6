"""ConsumerCoordinator: a subscribed consumer's membership of a classic group (client side).

Kafka 4.1.1's ``AbstractCoordinator``, ``ConsumerCoordinator`` and ``Heartbeat``
(``clients/.../consumer/internals/``), for the classic protocol with its two rebalance protocols
(EAGER: range, roundrobin; COOPERATIVE: cooperative-sticky alone, KIP-429):

* **Member state** (:class:`MemberState`): UNJOINED, PREPARING_REBALANCE once a JoinGroup is
  sent, COMPLETING_REBALANCE once it is answered (the heartbeat thread is enabled then and its
  timers restart), STABLE once the SyncGroup is answered. The :class:`Generation` (generation
  id, member id, protocol) changes only with a JoinGroup answer; errors reset it, keeping the
  member id for ILLEGAL_GENERATION and dropping it for UNKNOWN_MEMBER_ID and
  FENCED_INSTANCE_ID (``resetStateAndGeneration``).
* **Joining** runs inside ``poll()`` (``joinGroupIfNeeded`` with a zero timer, as the classic
  consumer's poll calls it): ``onJoinPrepare`` first sends an asynchronous auto-commit of the
  positions (under EAGER the partitions are marked pending revocation, KAFKA-14196) and waits
  for its answer across polls, at most the rebalance timeout; then revokes every partition
  (EAGER; COOPERATIVE keeps them and goes on fetching), or calls them lost when the generation
  was reset. Then JoinGroup (its request timeout is the rebalance timeout plus 5 s), naming the
  partitions the member owns and their generation, and SyncGroup chained to its answer: the
  leader runs the assignor over the members' subscriptions. The exchange goes on between polls
  (Kafka's heartbeat thread polls the network too); only a poll applies the assignment
  (``onJoinComplete``): under COOPERATIVE, onPartitionsRevoked for the owned partitions no
  longer assigned, and a rejoin at once (the next round gives them away); then the
  partitions, a restarted auto-commit timer, onPartitionsAssigned for the added ones.
  Nothing commits the revoked partitions' progress since onJoinPrepare's commit: that is the
  application's to do in onPartitionsRevoked.
* **The heartbeat thread** checks, in order: the coordinator is unknown (look it up, back off
  ``retry.backoff.ms``); the session timer expired without a successful heartbeat (mark the
  coordinator unknown); the poll timer (``max.poll.interval.ms`` since the last poll) expired
  (``maybeLeaveGroup``: a dynamic member sends LeaveGroup, a static one does not; both reset
  their generation and member id); a heartbeat is due (send it). Heartbeat answers:
  REBALANCE_IN_PROGRESS while STABLE asks for a rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
  and FENCED_INSTANCE_ID reset the generation (if it is still the one sent) and ask for a
  rejoin; FENCED_INSTANCE_ID is also fatal; NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (or
  no answer) mark the coordinator unknown. A failed heartbeat is retried after the
  exponential ``retry.backoff`` (``Heartbeat.failHeartbeat``).
* **Offset commits** carry the generation and member id while STABLE; otherwise they fail
  locally with RebalanceInProgressException (a rebalance is under way) or
  CommitFailedException. Answers follow ``OffsetCommitResponseHandler``: ILLEGAL_GENERATION
  and UNKNOWN_MEMBER_ID give CommitFailedException and reset the generation, unless the
  generation already moved on and the member is rejoining (RebalanceInProgressException);
  REBALANCE_IN_PROGRESS asks for a rejoin and gives RebalanceInProgressException.
* **A pause** (SIGSTOP, a long GC) freezes the heartbeat thread with the application thread:
  no heartbeat is sent, and neither timer is acted on until the process runs again.
* **Close**: a synchronous auto-commit (the owner does it), then the revocation, then
  LeaveGroup for a dynamic member (``internal.leave.group.on.close``).

Departures (docs/model.md): the heartbeat thread wakes exactly when its next timer is due
instead of every ``retry.backoff.ms``; the assignors modelled are range, roundrobin and
cooperative-sticky (not sticky); the consumer's connections have no handshake.

Extending it: a new group error is handled where Kafka handles it, in the ``_on_*`` answer
method of its request; a new listener callback is a method of :class:`RebalanceListener`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import simpy

from eosim.simulation.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNORS,
    RebalanceProtocol,
    Subscription,
    rebalance_protocol,
)
from eosim.simulation.consumer.exceptions import ConsumerException
from eosim.simulation.consumer.group_membership import (
    GroupMembership,
    RebalanceListener,
    SubscribedConsumer,
)
from eosim.simulation.protocol import (
    UNKNOWN_MEMBER_ID,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)

Process = Generator[simpy.Event, Any, Any]

# AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE: added to the rebalance timeout to give the
# JoinGroup's request timeout.
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5_000.0
# The answers that send a client to find its coordinator again.
COORDINATOR_GONE = (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE)
# Join errors after which joinGroupIfNeeded rejoins without backing off.
_REJOIN_AT_ONCE = (
    Errors.UNKNOWN_MEMBER_ID,
    Errors.ILLEGAL_GENERATION,
    Errors.REBALANCE_IN_PROGRESS,
    Errors.MEMBER_ID_REQUIRED,
)


class MemberState(Enum):
    """``AbstractCoordinator.MemberState``."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True, slots=True)
class Generation:
    """``AbstractCoordinator.Generation``."""

    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, UNKNOWN_MEMBER_ID, None)


@dataclass(frozen=True, slots=True)
class GroupRebalanceConfig:
    """``GroupRebalanceConfig`` with Kafka's defaults (``ConsumerConfig``): the rebalance
    timeout is ``max.poll.interval.ms``. ``group_instance_id`` makes the member static
    (KIP-345)."""

    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: float = 45_000.0
    heartbeat_interval_ms: float = 3_000.0
    rebalance_timeout_ms: float = 300_000.0
    retry_backoff_ms: float = 100.0
    retry_backoff_max_ms: float = 1_000.0
    leave_group_on_close: bool = True
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    # The rule consumer_pending_revocation (KAFKA-14196's fix; False reproduces the bug).
    pending_revocation: bool = True
    # The rule consumer_join_prepare_waits_for_commit (KAFKA-14024's fix; False is 3.2.0).
    join_prepare_waits_for_commit: bool = True
    # group.protocol: "classic" (this module) or "consumer" (KIP-848,
    # consumer_membership_manager); the session and the assignment are then the broker's.
    group_protocol: str = "classic"
    # The rule consumer_auto_commit_app_thread (KAFKA-18641's fix, consumer protocol only).
    auto_commit_app_thread: bool = True
    # The rule consumer_reconciles_in_poll (KAFKA-20106, KAFKA-20332: Kafka 4.3, consumer
    # protocol only): reconciliations run from poll() only, lost partitions stop at once.
    reconciles_in_poll: bool = False

    def __post_init__(self) -> None:
        if self.group_protocol not in ("classic", "consumer"):
            raise ValueError("group.protocol must be classic or consumer")
        if self.group_protocol == "consumer":
            return  # session.timeout.ms and the assignors are not the client's
        # Heartbeat's constructor refuses a heartbeat interval not below the session timeout.
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be below session.timeout.ms")
        rebalance_protocol(self.assignors)  # refuses unknown assignors and mixed protocols
        if self.assignors[0] not in ASSIGNORS:
            raise ValueError(
                f"assignor {self.assignors[0]!r} is not modelled (modelled: {', '.join(ASSIGNORS)})"
            )


class GroupException(ConsumerException):
    """A group error raised to the application by ``poll()`` or a commit."""


class CommitFailedException(GroupException):
    def __init__(self) -> None:
        super().__init__(
            "the commit cannot be completed: the group has rebalanced and assigned the "
            "partitions to another member"
        )


class RebalanceInProgressException(GroupException):
    pass


class FencedInstanceIdException(GroupException):
    pass


class GroupRequestException(GroupException):
    """A JoinGroup or SyncGroup refused with a non-retriable error that has no exception of
    its own here (INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, ...): ``poll()``
    raises it as Kafka's exception for that error (``joinGroupIfNeeded``)."""

    def __init__(self, error: Errors) -> None:
        self.error = error
        super().__init__(f"the group coordinator refused the member: {error.name}")

    def describe(self) -> str:
        return f"{self.error.exception_name}: {self}"


class ConsumerCoordinator(GroupMembership):
    protocol = "classic"
    config: GroupRebalanceConfig

    def __init__(
        self,
        consumer: SubscribedConsumer,
        config: GroupRebalanceConfig,
        topics: tuple[str, ...],
        listener: RebalanceListener | None = None,
    ) -> None:
        super().__init__(consumer, config, topics, listener)
        # The rebalance protocol every configured assignor supports (KIP-429).
        self.rebalance_protocol = rebalance_protocol(config.assignors)
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        # ConsumerCoordinator.groupMetadata: the generation of the last completed join, set
        # only in onJoinComplete. A member whose generation was reset since (thrown out,
        # left) still reports the old one, so its TxnOffsetCommit is refused (KIP-447).
        self.joined_generation = NO_GENERATION
        self.rejoin_needed = True
        self.needs_join_prepare = True
        self.failure: GroupException | None = None
        # The JoinGroup/SyncGroup exchange under way: its process and its result
        # (assignment, or the error it failed with).
        self._join: simpy.Process | None = None
        # onJoinPrepare's auto-commit, and when onJoinPrepare began (its timer).
        self._prepare_commit: simpy.Process | None = None
        self._prepare_started: float | None = None
        # When a JoinGroup that failed with a retriable error may be sent again.
        self._join_retry_at = 0.0
        # Heartbeat: timers as absolute times; the thread's wake-up event.
        now = self.env.now
        self.last_poll = now
        self.session_deadline = now + config.session_timeout_ms
        self.heartbeat_due = now
        self.heartbeat_attempts = 0
        self.heartbeat_enabled = False
        self.process = self.env.process(self._heartbeat_thread())

    # -- state ---------------------------------------------------------------------------
    @property
    def is_static(self) -> bool:
        return self.config.group_instance_id is not None

    def rebalance_in_progress(self) -> bool:
        return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    def generation_if_stable(self) -> Generation | None:
        return self.generation if self.state is MemberState.STABLE else None

    def request_rejoin(self) -> None:
        self.rejoin_needed = True

    def is_stable(self) -> bool:
        """A member of a stable generation, with no rejoin pending."""
        return self.state is MemberState.STABLE and not self.rejoin_needed

    def auto_commits_in_poll(self) -> bool:
        """The classic consumer auto-commits from poll() while its generation is stable."""
        return self.is_stable()

    def on_poll_start(self) -> None:
        """Nothing: the classic consumer's poll works through :meth:`poll` on every pass."""

    def _reset_state(self, reset_member_id: bool) -> None:
        """``resetStateAndGeneration``, as every caller of it in Kafka (``resetStateAndRejoin``)
        does it: onJoinPrepare runs again before the next JoinGroup, even when a join was
        under way, so that a COOPERATIVE member calls its partitions lost."""
        self.state = MemberState.UNJOINED
        self.needs_join_prepare = True
        if reset_member_id:
            self.generation = NO_GENERATION
        else:
            self.generation = Generation(-1, self.generation.member_id, None)

    def _reset_and_rejoin(self, reset_member_id: bool) -> None:
        self._reset_state(reset_member_id)
        self.request_rejoin()

    def _fenced(self) -> FencedInstanceIdException:
        return FencedInstanceIdException(
            f"group.instance.id {self.config.group_instance_id} was fenced"
        )

    # -- the coordinator -----------------------------------------------------------------
    @property
    def coordinator(self) -> str | None:
        return self.consumer.coordinator

    def mark_coordinator_unknown(self) -> None:
        self.consumer.coordinator = None

    def _coordinator_found(self) -> None:
        # The coordinator's discovery restarts the session timer.
        self.session_deadline = self.env.now + self.config.session_timeout_ms
        self._notify()

    # -- poll (the application thread) --------------------------------------------------
    def poll(self) -> list[simpy.Event]:
        """``ConsumerCoordinator.poll`` with a zero timer: note the poll, move the join along
        as far as it goes without waiting, apply a completed one. Returns the events the
        consumer's poll may wait on for progress. Raises a fatal group error."""
        if self.failure is not None:
            raise self.failure
        self._poll_heartbeat()
        if self.coordinator is None:
            return [self.lookup_coordinator()]
        waiting: list[simpy.Event] = []
        if self.rejoin_needed or self._join is not None:
            waiting = self._join_group_if_needed()
        return waiting

    def _poll_heartbeat(self) -> None:
        """``pollHeartbeat``: the poll timer restarts."""
        self.last_poll = self.env.now
        if self.env.now >= self.heartbeat_due:
            self._notify()

    def _join_group_if_needed(self) -> list[simpy.Event]:
        if self.coordinator is None and self._join is None:
            return [self.lookup_coordinator()]
        if self.needs_join_prepare:
            done, waiting = self._on_join_prepare()
            if not done:
                return waiting
            self.needs_join_prepare = False
        if self._join is None:
            if self.env.now < self._join_retry_at:
                return [self.env.timeout(self._join_retry_at - self.env.now)]
            self.state = MemberState.PREPARING_REBALANCE
            self._join = self.env.process(self._join_and_sync(self.generation))
            return [self._join]
        if not self._join.triggered:
            return [self._join]
        join, self._join = self._join, None
        outcome = join.value
        if isinstance(outcome, Errors):
            self.rejoin_needed = True
            if outcome not in _REJOIN_AT_ONCE:
                if not outcome.retriable:
                    # Not retriable: thrown to the application (FENCED_INSTANCE_ID is fatal).
                    if outcome is Errors.FENCED_INSTANCE_ID:
                        self.failure = self._fenced()
                        raise self.failure
                    raise GroupRequestException(outcome)
                self._join_retry_at = self.env.now + self.config.retry_backoff_ms
            return self._join_group_if_needed()
        if self.state is MemberState.STABLE and self.generation.generation_id >= 0:
            self._on_join_complete(outcome)
            self.needs_join_prepare = True
            if self.rejoin_needed:  # COOPERATIVE revoked partitions: the next round at once
                return self._join_group_if_needed()
            return []
        # The heartbeat thread reset the generation before the assignment was applied.
        self._reset_and_rejoin(True)
        return self._join_group_if_needed()

    def _on_join_prepare(self) -> tuple[bool, list[simpy.Event]]:
        """Auto-commit (waiting for it across polls, at most the rebalance timeout), then
        revoke. Returns whether it is done, and the events to wait on while it is not."""
        if not self.config.join_prepare_waits_for_commit:
            return self._on_join_prepare_kafka_14024(), []
        consumer = self.consumer
        if self._prepare_started is None:
            self._prepare_started = self.env.now
        if consumer.auto_commit and self._prepare_commit is None and consumer.assignment:
            # KAFKA-14196's fix; maybeMarkPartitionsPendingRevocation is EAGER's only.
            if self.config.pending_revocation and self._eager:
                consumer.mark_pending_revocation()
            self._prepare_commit = consumer.commit_async()
        commit = self._prepare_commit
        if commit is not None:
            expired = self.env.now >= self._prepare_started + self.config.rebalance_timeout_ms
            if not commit.triggered and not expired:
                return False, [commit]
            # A local refusal (a group exception: the generation was reset) is not retriable.
            failed = commit.value if commit.triggered else None
            retry = isinstance(failed, Errors) and failed.retriable
            self._prepare_commit = None
            if retry and not expired:
                # A retriable failure: commit again after retry.backoff.ms.
                return False, [self.env.timeout(self.config.retry_backoff_ms)]
        self._revoke_before_join()
        self._prepare_started = None
        return True, []

    def _on_join_prepare_kafka_14024(self) -> bool:
        """Kafka 3.2.0's onJoinPrepare (KAFKA-13310, before KAFKA-14024's fix): every call
        sends another asynchronous auto-commit and revokes what its protocol revokes, and it
        is done only when that commit is complete at once: nothing to commit, no coordinator
        known (the commit waits for the lookup), or refused locally. Under EAGER the second
        call finds nothing left to commit; under COOPERATIVE no call is ever done, so the
        member never rejoins and the coordinator drops it after the rebalance timeout."""
        consumer = self.consumer
        done = True
        if consumer.auto_commit and consumer.positions:
            refused = isinstance(self.commit_generation(), GroupException)
            done = refused or consumer.coordinator is None
            consumer.commit_async()
        self._revoke_before_join()
        return done

    @property
    def _eager(self) -> bool:
        return self.rebalance_protocol is RebalanceProtocol.EAGER

    def _revoke_before_join(self) -> None:
        """The end of ``onJoinPrepare``: a reset generation loses every partition; otherwise
        EAGER revokes every one, and COOPERATIVE only those of topics no longer subscribed
        (none here: a subscription never changes)."""
        consumer = self.consumer
        owned = sorted(consumer.assignment)
        if self.generation.generation_id < 0 or not self.generation.member_id:
            if owned and self.listener is not None:
                self.listener.on_partitions_lost(owned)
            consumer.assign_from_subscribed([])
        elif self._eager:
            if owned and self.listener is not None:
                self.listener.on_partitions_revoked(owned)
            consumer.assign_from_subscribed([])

    def _on_join_complete(self, assignment: list[TopicPartition]) -> None:
        consumer = self.consumer
        owned, assigned = set(consumer.assignment), set(assignment)
        added = sorted(assigned - owned)
        self.joined_generation = self.generation
        if not self._eager:
            revoked = sorted(owned - assigned)
            if revoked:
                # Revoked before the assignment changes, then a rejoin so that the next
                # round can give them to their new owner.
                if self.listener is not None:
                    self.listener.on_partitions_revoked(revoked)
                self.request_rejoin()
        consumer.restart_auto_commit_timer()
        consumer.assign_from_subscribed(sorted(assignment))
        if self.listener is not None:
            self.listener.on_partitions_assigned(added, self.generation.generation_id)

    # -- JoinGroup and SyncGroup ----------------------------------------------------------
    def _join_and_sync(self, sent: Generation) -> Process:
        """``sendJoinGroupRequest`` and the SyncGroup chained to its answer. Returns the
        member's assignment, or the error the exchange failed with."""
        coordinator = self.coordinator
        if coordinator is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        config = self.config
        request = JoinGroupRequest(
            self.client.next_correlation_id(),
            config.group_id,
            sent.member_id,
            config.group_instance_id,
            int(config.session_timeout_ms),
            int(config.rebalance_timeout_ms),
            tuple((name, self._subscription(sent)) for name in config.assignors),
            client_id=self.consumer.node,
        )
        timeout = max(
            self.client.request_timeout_ms,
            config.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS,
        )
        response = yield self.client.send(coordinator, request, timeout_ms=timeout)
        if response is None:
            self.mark_coordinator_unknown()
            return Errors.COORDINATOR_NOT_AVAILABLE
        assert isinstance(response, JoinGroupResponse)
        error = self._on_join_response(sent, response)
        if error is not None:
            return error
        generation = self.generation
        assignments: tuple[tuple[str, object], ...] = ()
        if response.leader == generation.member_id:
            assignments = self._assign(response)
        sync = SyncGroupRequest(
            self.client.next_correlation_id(),
            config.group_id,
            generation.member_id,
            config.group_instance_id,
            generation.generation_id,
            generation.protocol,
            assignments=assignments,
        )
        answer = yield self.client.send(coordinator, sync)
        if answer is None:
            self.mark_coordinator_unknown()
            return Errors.COORDINATOR_NOT_AVAILABLE
        assert isinstance(answer, SyncGroupResponse)
        return self._on_sync_response(generation, answer)

    def _subscription(self, sent: Generation) -> Subscription:
        """``metadata()``: the topics, the partitions owned now (none under EAGER, which has
        revoked them) and the generation they were owned in."""
        return Subscription(
            self.topics,
            self.config.group_instance_id,
            tuple(sorted(self.consumer.assignment)),
            sent.generation_id,
        )

    def _on_join_response(self, sent: Generation, response: JoinGroupResponse) -> Errors | None:
        error = response.error
        if error is Errors.NONE:
            if self.state is not MemberState.PREPARING_REBALANCE:
                return Errors.UNKNOWN_MEMBER_ID  # left the group meanwhile (UnjoinedGroupException)
            self.state = MemberState.COMPLETING_REBALANCE
            self.generation = Generation(
                response.generation, response.member_id, response.protocol_name
            )
            self._enable_heartbeat()
            return None
        unchanged = self.generation == sent
        if error is Errors.MEMBER_ID_REQUIRED:
            # KIP-394: rejoin at once with the id the coordinator gave.
            self.generation = Generation(-1, response.member_id, None)
        elif error is Errors.UNKNOWN_MEMBER_ID:
            if unchanged:
                self._reset_state(True)
        elif error in (Errors.ILLEGAL_GENERATION, Errors.FENCED_INSTANCE_ID):
            if unchanged:
                self._reset_state(error is not Errors.ILLEGAL_GENERATION)
        elif error in COORDINATOR_GONE:
            self.mark_coordinator_unknown()
        return error

    def _assign(self, response: JoinGroupResponse) -> tuple[tuple[str, object], ...]:
        """``onLeaderElected``: the group's protocol's assignor over the members'
        subscriptions and the topics' partition counts."""
        assert response.protocol_name is not None
        assignor = ASSIGNORS[response.protocol_name]
        subscriptions = {m.member_id: m.metadata for m in response.members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})  # type: ignore[attr-defined]
        counts = {t: self.consumer.metadata.topics.get(t, 0) for t in topics}
        result = assignor(counts, subscriptions)  # type: ignore[arg-type]
        return tuple((member, tuple(result[member])) for member in sorted(result))

    def _on_sync_response(self, sent: Generation, answer: SyncGroupResponse) -> object:
        error = answer.error
        if error is Errors.NONE:
            if self.generation != sent or self.state is not MemberState.COMPLETING_REBALANCE:
                return Errors.ILLEGAL_GENERATION  # cleared by the heartbeat thread: retry
            self.state = MemberState.STABLE
            self.rejoin_needed = False
            return list(answer.assignment or ())
        if error is Errors.REBALANCE_IN_PROGRESS:
            pass  # rejoin, keeping the generation
        elif error in (
            Errors.UNKNOWN_MEMBER_ID,
            Errors.ILLEGAL_GENERATION,
            Errors.FENCED_INSTANCE_ID,
        ):
            if self.generation == sent:
                self._reset_state(error is not Errors.ILLEGAL_GENERATION)
        elif error in COORDINATOR_GONE:
            self.mark_coordinator_unknown()
        return error

    # -- the heartbeat thread -------------------------------------------------------------
    def _enable_heartbeat(self) -> None:
        """``HeartbeatThread.enable``: both timers restart."""
        self.heartbeat_enabled = True
        now = self.env.now
        self.session_deadline = now + self.config.session_timeout_ms
        self.last_poll = now
        self._notify()

    def _heartbeat_thread(self) -> Process:
        config = self.config
        while not self.closed:
            while self.resumed is not None:
                yield self.resumed
            if self.closed:
                return
            if not self.heartbeat_enabled:
                yield from self._sleep(None)
                continue
            if (
                self.state in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE)
                or self.failure
            ):
                self.heartbeat_enabled = False
                continue
            now = self.env.now
            if self.coordinator is None:
                self.lookup_coordinator()
                yield from self._sleep(now + config.retry_backoff_ms)
            elif now >= self.session_deadline:
                self.mark_coordinator_unknown()
            elif now >= self.last_poll + config.rebalance_timeout_ms:
                self.maybe_leave_group()
            elif now < self.heartbeat_due:
                wake = min(
                    self.heartbeat_due,
                    self.session_deadline,
                    self.last_poll + config.rebalance_timeout_ms,
                )
                yield from self._sleep(wake)
            else:
                self._send_heartbeat()

    def _send_heartbeat(self) -> None:
        assert self.coordinator is not None
        now = self.env.now
        self.heartbeat_due = now + self.config.heartbeat_interval_ms
        sent = self.generation
        request = HeartbeatRequest(
            self.client.next_correlation_id(),
            self.config.group_id,
            sent.member_id,
            self.config.group_instance_id,
            sent.generation_id,
        )
        event = self.client.send(self.coordinator, request)
        event.callbacks.append(lambda ev: self._on_heartbeat_response(sent, ev.value))

    def _on_heartbeat_response(self, sent: Generation, response: Any) -> None:
        error = Errors.COORDINATOR_NOT_AVAILABLE if response is None else response.error
        succeeded = error is Errors.NONE
        if error in COORDINATOR_GONE:
            self.mark_coordinator_unknown()
        elif error is Errors.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self.request_rejoin()
            # It is valid to heartbeat while the group rebalances: the session goes on.
            succeeded = True
        elif error in (
            Errors.ILLEGAL_GENERATION,
            Errors.UNKNOWN_MEMBER_ID,
            Errors.FENCED_INSTANCE_ID,
        ):
            if self.generation == sent:
                self._reset_and_rejoin(error is not Errors.ILLEGAL_GENERATION)
                if error is Errors.FENCED_INSTANCE_ID:
                    self.failure = self._fenced()
            else:
                succeeded = True  # a stale generation's answer is ignored
        if succeeded:
            self.heartbeat_attempts = 0
            self.session_deadline = self.env.now + self.config.session_timeout_ms
        else:
            self.heartbeat_due = self.env.now + self.backoff.backoff(
                self.heartbeat_attempts, self.consumer.rng
            )
            self.heartbeat_attempts += 1
        self._notify()

    def maybe_leave_group(self) -> None:
        """A dynamic member with a member id and a known coordinator sends LeaveGroup (not
        waiting for the answer); every member resets its generation and will rejoin."""
        generation = self.generation
        if (
            self.config.leave_group_on_close
            and not self.is_static
            and self.coordinator is not None
            and self.state is not MemberState.UNJOINED
            and generation.member_id
        ):
            request = LeaveGroupRequest(
                self.client.next_correlation_id(),
                self.config.group_id,
                (LeaveGroupMember(generation.member_id),),
            )
            self.client.send(self.coordinator, request)
        self._reset_and_rejoin(True)
        self.heartbeat_enabled = False

    # -- commits ---------------------------------------------------------------------------
    def commit_generation(self) -> Generation | GroupException:
        """The generation an OffsetCommit carries, or the exception it fails with locally."""
        generation = self.generation_if_stable()
        if generation is not None:
            return generation
        if self.rebalance_in_progress():
            return RebalanceInProgressException(
                "the consumer is undergoing a rebalance; poll() completes it"
            )
        return CommitFailedException()

    def on_commit_error(self, sent: Generation, error: Errors) -> GroupException | None:
        """``OffsetCommitResponseHandler`` for the group errors; None for any other."""
        if error in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            if self.generation != sent and self.state is MemberState.PREPARING_REBALANCE:
                return RebalanceInProgressException("the member's generation is already stale")
            self._reset_and_rejoin(error is not Errors.ILLEGAL_GENERATION)
            return CommitFailedException()
        if error is Errors.REBALANCE_IN_PROGRESS:
            self.request_rejoin()
            return RebalanceInProgressException("the group is rebalancing")
        if error is Errors.FENCED_INSTANCE_ID:
            if self.generation == sent:
                self.failure = self._fenced()
                return self.failure
            if self.state is MemberState.PREPARING_REBALANCE:
                return RebalanceInProgressException("the member's old generation was fenced")
            return CommitFailedException()
        return None

    # -- pause, close ----------------------------------------------------------------------
    def close(self, leave: bool = True) -> None:
        """``onLeavePrepare`` and ``maybeLeaveGroup`` (the owner has auto-committed); the
        heartbeat thread stops. ``leave=False`` is a crash: nothing is sent."""
        if self.closed:
            return
        if leave:
            dropped = sorted(self.consumer.assignment)
            if dropped and self.listener is not None:
                if self.generation.generation_id < 0 or self.rebalance_in_progress():
                    self.listener.on_partitions_lost(dropped)
                else:
                    self.listener.on_partitions_revoked(dropped)
            self.maybe_leave_group()
        self.closed = True
        self.resume()
        self._notify()
