"""ConsumerMembershipManager: a subscribed consumer's membership of a KIP-848 consumer group
(``group.protocol=consumer``, the ``AsyncKafkaConsumer``).

Kafka 4.1.1's ``AbstractMembershipManager``, ``ConsumerMembershipManager``,
``AbstractHeartbeatRequestManager`` and the rebalance part of ``CommitRequestManager``
(``clients/.../consumer/internals/``). Two threads share the member:

* **The network thread** (a SimPy process) sends ConsumerGroupHeartbeat: at once while JOINING,
  ACKNOWLEDGING or LEAVING, else every heartbeat interval the coordinator gave, one in
  flight at a time. It watches the poll timer: when ``max.poll.interval.ms`` passes without a
  ``poll()``, the member sends a leave heartbeat (epoch -1) and becomes STALE; its partitions
  are lost (``onPartitionsLost``) and it rejoins on the next ``poll()``. Answers:
  FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID fence the member (partitions lost, then it rejoins
  with epoch 0); NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE send it to find the
  coordinator; no answer backs off (``retry.backoff.ms``, exponential); an assignment that
  differs from the member's starts a reconciliation.
* **The application thread** runs in ``poll()``: the poll timer restarts, a STALE member
  rejoins, the rebalance listener's callbacks run (they are queued by the network thread and
  only ``poll()`` runs them), and, with auto-commit, the reconciliation starts here
  (``maybeReconcile(canCommit=true)`` on the PollEvent), before any new fetch.

**Reconciliation** (``AbstractMembershipManager.maybeReconcile``): the partitions to revoke are
marked pending revocation (nothing more is fetched or returned from them); with auto-commit,
a synchronous commit of every consumed position, retried on STALE_MEMBER_EPOCH with the latest
epoch until the rebalance timeout (and the reconciliation goes on even if it fails); then
``onPartitionsRevoked``, the revoked partitions leave the subscription, the new ones join it
and ``onPartitionsAssigned`` runs; the member then ACKNOWLEDGES the new assignment in its next
heartbeat. Without auto-commit the reconciliation starts on the network thread as soon as the
assignment arrives, and its callbacks wait for the next ``poll()``.

**Commits** name the member id and its latest member epoch (from the last heartbeat answer);
the coordinator refuses any other epoch (STALE_MEMBER_EPOCH, a CommitFailedException for
commitSync). ``groupMetadata()`` is the epoch as of the application's last ``poll()``.

The rule ``consumer_auto_commit_app_thread`` (KAFKA-18641's fix, Kafka 4.0.0): the periodic
auto-commit runs on the application's poll, of the positions of then. False is 3.7 to 3.9: the
network thread auto-commits on its own timer the positions of records the last ``poll()``
returned, which the application may still be processing.

The rule ``consumer_reconciles_in_poll`` (KAFKA-20106 and KAFKA-20332, Kafka 4.3.0): every
reconciliation, with or without auto-commit, starts from the application thread's ``poll()``
(``maybeReconcile(invokedByPoll)``), at its start or on any pass of its loop, so the network
thread neither marks partitions for revocation nor changes the assignment between two polls;
and partitions lost (fenced, or left on the poll timeout) stop being fetched, and their fetched
records returned, at once, before ``onPartitionsLost`` runs in the next ``poll()``. False is
4.2 and before (above).

A heartbeat carries the owned partitions only when they changed since the last one (or in a
full heartbeat: joining, or after an error), as Kafka's ``SentFields`` does; the coordinator
reads a heartbeat without them as still owning the partitions it waits for.

Departures (docs/model.md): topics are named, not identified;
static membership and regular-expression subscriptions are not modelled; the network thread
wakes when its next timer is due instead of polling every ``retry.backoff.ms``.

To extend: a new heartbeat error is handled in :meth:`_on_heartbeat_response` where Kafka's
``onErrorResponse`` handles it; a new member state is a :class:`MemberState` with its
transitions in the methods named after Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from enum import Enum
from typing import Any

import simpy

from eosim.simulation.consumer.consumer_coordinator import (
    COORDINATOR_GONE,
    CommitFailedException,
    Generation,
    GroupException,
    GroupRebalanceConfig,
    GroupRequestException,
)
from eosim.simulation.consumer.group_membership import (
    GroupMembership,
    RebalanceListener,
    SubscribedConsumer,
)
from eosim.simulation.protocol import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Errors,
    TopicPartition,
)

Process = Generator[simpy.Event, Any, Any]

LEAVE_GROUP_MEMBER_EPOCH = -1


class MemberState(Enum):
    """``internals/MemberState``."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"


# isNotInGroup: answers to heartbeats sent before are ignored in these states.
_NOT_IN_GROUP = (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL, MemberState.STALE)
# shouldSkipHeartbeat
_SKIP_HEARTBEAT = _NOT_IN_GROUP
# shouldHeartbeatNow
_HEARTBEAT_NOW = (MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.LEAVING)
# MemberState.RECONCILING's valid previous states (canHandleNewAssignment)
_TAKES_ASSIGNMENT = (
    MemberState.STABLE,
    MemberState.JOINING,
    MemberState.ACKNOWLEDGING,
    MemberState.RECONCILING,
)


class ConsumerMembershipManager(GroupMembership):
    protocol = "consumer"
    config: GroupRebalanceConfig
    consumer: SubscribedConsumer

    def __init__(
        self,
        consumer: SubscribedConsumer,
        config: GroupRebalanceConfig,
        topics: tuple[str, ...],
        listener: RebalanceListener | None = None,
    ) -> None:
        super().__init__(consumer, config, topics, listener)
        # KIP-1082 (Kafka 4.0): the client makes its member id (a random UUID), once.
        bits = _bits(consumer.rng)
        self.member_id = str(uuid.UUID(int=bits, version=4))
        self.member_epoch = 0
        self.state = MemberState.UNSUBSCRIBED
        self._join_on_poll = True  # subscribe(): JOINING on the first poll
        # The assignment reconciled locally (what the member owns) and the latest target.
        self.current: frozenset[TopicPartition] = frozenset()
        # LocalAssignment.NONE: no assignment reconciled since joining (or since the last was
        # released); even an empty target then needs a reconciliation, and so an
        # onPartitionsAssigned call, as in Kafka.
        self._none = True
        self.target: frozenset[TopicPartition] | None = None
        # The local assignment's version (each reconciled or cleared assignment is a new one)
        # and the version the last heartbeat carried: owned partitions are sent only when
        # they changed (SentFields), and the coordinator reads a heartbeat without them as
        # still owning what it was revoking.
        self._current_version = 0
        self._sent_version: int | None = None
        self._reconciling = False
        self._rejoined_while_reconciling = False
        self._poll_timer_expired = False
        # Callbacks queued for the application thread: (name, partitions, then).
        self._callbacks: list[tuple[str, list[TopicPartition], Callable[[], None]]] = []
        # Rule consumer_reconciles_in_poll: what a poll() waiting on a reconciliation it
        # started wakes on (the reconciliation's next callback queued).
        self._step_ready: simpy.Event | None = None
        self.joined_generation = Generation(-1, "", None)
        self.failure: GroupException | None = None
        # Heartbeats: when the next is due, how many failed in a row, the interval the
        # coordinator gave (0 before its first answer), whether the next is a full one.
        self.heartbeat_due = self.env.now
        self.heartbeat_interval_ms = 0.0
        self.heartbeat_attempts = 0
        self._in_flight = False
        self._send_full = True
        self.last_poll = self.env.now
        self._next_auto_commit = self.env.now + (consumer.auto_commit_interval_ms or 0.0)
        self.process = self.env.process(self._network_thread())

    # -- what KafkaConsumer and the applications read ---------------------------------------
    @property
    def generation(self) -> Generation:
        return Generation(self.member_epoch, self.member_id, None)

    def is_stable(self) -> bool:
        return (
            self.state is MemberState.STABLE
            and self.target == self.current
            and not self._none
            and not self._reconciling
            and not self._callbacks
        )

    def auto_commits_in_poll(self) -> bool:
        return self.config.auto_commit_app_thread

    # -- the application thread ---------------------------------------------------------------
    def on_poll_start(self) -> None:
        """The PollEvent: the poll timer restarts, a STALE member rejoins, and with
        auto-commit a reconciliation may start (before new records are fetched)."""
        if self.failure is not None:
            raise self.failure
        self.last_poll = self.env.now
        if self._poll_timer_expired or self.state is MemberState.STALE:
            self._poll_timer_expired = False
            if self.state is MemberState.STALE and not self._callbacks:
                self._transition_to_joining()
        if self.state is MemberState.UNSUBSCRIBED and self._join_on_poll:
            self._join_on_poll = False
            self._transition_to_joining()
        self._maybe_reconcile(can_commit=True)
        self._notify()

    def poll(self) -> list[simpy.Event]:
        """Run the listener callbacks the network thread queued (``processBackgroundEvents``)
        and note the group metadata; returns the event that wakes the poll for more."""
        if self.failure is not None:
            raise self.failure
        if self.config.reconciles_in_poll:
            # KAFKA-20106: every pass of poll()'s loop (Kafka's poll event) may start the
            # reconciliation the network thread no longer starts itself.
            self._maybe_reconcile(can_commit=True)
        while self._callbacks:
            name, partitions, then = self._callbacks.pop(0)
            if self.listener is not None:
                if name == "revoked":
                    self.listener.on_partitions_revoked(partitions)
                elif name == "lost":
                    self.listener.on_partitions_lost(partitions)
                else:
                    self.listener.on_partitions_assigned(partitions, self.member_epoch)
            then()
        self.joined_generation = Generation(
            self.member_epoch if self.member_epoch > 0 else -1, self.member_id, None
        )
        # The application thread is not woken for a callback the network thread queues: it
        # runs it when its wait for fetched data ends, at most the heartbeat manager's
        # maximumTimeToWait later (the next heartbeat, or half the poll timer left).
        events = [self.env.timeout(self._maximum_time_to_wait())]
        if self.config.reconciles_in_poll and self._reconciling:
            # KAFKA-20106: the application thread goes on with the reconciliation it started
            # (its callbacks, the new assignment) as soon as its next step is ready.
            self._step_ready = self.env.event()
            events.append(self._step_ready)
        if self.consumer.coordinator is None:
            events.append(self.lookup_coordinator())
        return events

    def _maximum_time_to_wait(self) -> float:
        """``AbstractHeartbeatRequestManager.maximumTimeToWait`` (at least 1 ms here, so
        that a poll always moves time on)."""
        now = self.env.now
        poll_left = (self.last_poll + self.config.rebalance_timeout_ms - now) / 2
        heartbeat = self.heartbeat_interval_ms if self._in_flight else self.heartbeat_due - now
        if self.state in _HEARTBEAT_NOW and not self._in_flight:
            # Kafka answers 0 and the application loops once more, by which time the network
            # thread has sent that heartbeat and reset its timer to the interval.
            heartbeat = self.heartbeat_interval_ms
        return max(1.0, min(poll_left, heartbeat))

    def _queue(
        self,
        name: str,
        partitions: list[TopicPartition],
        then: Callable[[], None],
        step: bool = False,
    ) -> None:
        """A callback for the application thread. ``onPartitionsRevoked`` and ``Lost`` are not
        called for no partitions; ``onPartitionsAssigned`` always is. ``step``: a step of a
        reconciliation, which wakes a poll() that started it (rule
        ``consumer_reconciles_in_poll``)."""
        if name != "assigned" and not partitions:
            then()
            return
        self._callbacks.append((name, partitions, then))
        ready = self._step_ready
        if step and ready is not None and not ready.triggered:
            ready.succeed()

    # -- reconciliation -----------------------------------------------------------------------
    def _maybe_reconcile(self, can_commit: bool) -> None:
        """``can_commit``: called by the application thread's ``poll()``."""
        if self.state is not MemberState.RECONCILING or self.target is None:
            return
        if (self.target == self.current and not self._none) or self._reconciling:
            return
        if (self.consumer.auto_commit or self.config.reconciles_in_poll) and not can_commit:
            # Without auto-commit, 4.2 and before start it on the network thread at once;
            # KAFKA-20106 (4.3) waits for the poll in every case.
            return
        self._reconciling = True
        self._rejoined_while_reconciling = False
        target = self.target
        revoked = sorted(self.current - target)
        added = sorted(target - self.current)
        self.consumer.mark_pending_revocation(revoked)
        self.env.process(self._reconcile(target, revoked, added))

    def _reconcile(
        self,
        target: frozenset[TopicPartition],
        revoked: list[TopicPartition],
        added: list[TopicPartition],
    ) -> Process:
        if self.consumer.auto_commit and revoked:
            # signalReconciliationStarted: commit every consumed position first; proceed even
            # if that fails.
            yield from self.consumer.commit_sync_before_rebalance(self.config.rebalance_timeout_ms)
        if self._aborted():
            return
        done = self.env.event()
        kept = sorted(self.current - frozenset(revoked))

        def after_revoke() -> None:
            if self._aborted():
                done.succeed(False)
                return
            self.consumer.assign_from_subscribed(sorted(kept + added))
            self._queue("assigned", added, lambda: done.succeed(True), step=True)

        self._queue("revoked", revoked, after_revoke, step=True)
        applied = yield done
        if applied and not self._aborted():
            self._set_current(target)
            self.state = MemberState.ACKNOWLEDGING
            self._notify()
        self._reconciling = False

    def _aborted(self) -> bool:
        """``maybeAbortReconciliation``."""
        if self.state is not MemberState.RECONCILING or self._rejoined_while_reconciling:
            self._reconciling = False
            return True
        return False

    # -- transitions --------------------------------------------------------------------------
    def _set_current(self, assignment: frozenset[TopicPartition], none: bool = False) -> None:
        self.current = assignment
        self._none = none
        self._current_version += 1

    def _transition_to_joining(self) -> None:
        if self.state is MemberState.FATAL:
            return
        if self._reconciling:
            self._rejoined_while_reconciling = True
        self.member_epoch = 0
        self.target = None
        self.state = MemberState.JOINING
        self._send_full = True
        self._notify()

    def _release(self, then: Callable[[], None]) -> None:
        """``signalPartitionsLost`` then ``clearAssignment``."""
        lost = sorted(self.current | frozenset(self.consumer.assignment))
        if self.config.reconciles_in_poll:
            # KAFKA-20332 (4.3): lost partitions are no longer fetched, nor their fetched
            # records returned, from now on; onPartitionsLost waits for the next poll().
            self.consumer.mark_pending_revocation(lost)

        def cleared() -> None:
            self.consumer.assign_from_subscribed([])
            self._set_current(frozenset(), none=True)
            then()

        self._queue("lost", lost, cleared)

    def _transition_to_fenced(self) -> None:
        if self.state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING):
            self.state = MemberState.UNSUBSCRIBED
            return
        if self.state is MemberState.UNSUBSCRIBED:
            return
        self.state = MemberState.FENCED
        self.member_epoch = 0

        def rejoin() -> None:
            if self.state is MemberState.FENCED:
                self._transition_to_joining()

        self._release(rejoin)

    def _leave_on_poll_timeout(self) -> None:
        """``transitionToSendingLeaveGroup(true)`` and the leave heartbeat; then STALE."""
        self._poll_timer_expired = True
        self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
        self.state = MemberState.LEAVING
        self._send_heartbeat(leaving=True)
        self.state = MemberState.STALE

        def stale_released() -> None:
            if self.state is MemberState.STALE and not self._poll_timer_expired:
                self._transition_to_joining()

        self._release(stale_released)

    # -- the network thread -------------------------------------------------------------------
    def _network_thread(self) -> Process:
        while not self.closed:
            while self.resumed is not None:
                yield self.resumed
            if self.closed:
                return
            now = self.env.now
            if self.state in _SKIP_HEARTBEAT or self.failure is not None:
                yield from self._sleep(None)
                continue
            if self.consumer.coordinator is None:
                self.lookup_coordinator()
                yield from self._sleep(now + self.config.retry_backoff_ms)
                continue
            poll_deadline = self.last_poll + self.config.rebalance_timeout_ms
            if now >= poll_deadline and self.state is not MemberState.LEAVING:
                self._leave_on_poll_timeout()
                continue
            self._maybe_background_auto_commit()
            self._maybe_reconcile(can_commit=False)
            now_due = self.state in _HEARTBEAT_NOW and not self._in_flight
            if now_due or (now >= self.heartbeat_due and not self._in_flight):
                self._send_heartbeat()
                continue
            wake = poll_deadline
            if not self._in_flight:
                wake = min(wake, self.heartbeat_due)
            if not self.config.auto_commit_app_thread and self.consumer.auto_commit:
                wake = min(wake, self._next_auto_commit)
            yield from self._sleep(wake)

    def _maybe_background_auto_commit(self) -> None:
        """KAFKA-18641 (3.7-3.9): the network thread's own auto-commit timer."""
        if self.config.auto_commit_app_thread or not self.consumer.auto_commit:
            return
        interval = self.consumer.auto_commit_interval_ms
        if interval is None or self.env.now < self._next_auto_commit:
            return
        self._next_auto_commit = self.env.now + interval
        if self.state in (MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING):
            self.consumer.commit_async()

    def _send_heartbeat(self, leaving: bool = False) -> None:
        coordinator = self.consumer.coordinator
        if coordinator is None:
            return
        config = self.config
        full = self._send_full or self.state is MemberState.JOINING
        owned = None
        if full or self._sent_version != self._current_version:
            owned = tuple(sorted(self.current))
            self._sent_version = self._current_version
        request = ConsumerGroupHeartbeatRequest(
            self.client.next_correlation_id(),
            config.group_id,
            self.member_id,
            LEAVE_GROUP_MEMBER_EPOCH if leaving else self.member_epoch,
            None,
            int(config.rebalance_timeout_ms) if full else -1,
            self.topics if full else None,
            owned,
            client_id=self.consumer.node,
        )
        self._send_full = False
        self.heartbeat_due = self.env.now + self.heartbeat_interval_ms
        event = self.client.send(coordinator, request)
        if leaving:
            return  # the answer to a leave is ignored
        self._in_flight = True
        event.callbacks.append(lambda ev: self._on_heartbeat_response(ev.value))
        # onHeartbeatRequestGenerated
        if self.state is MemberState.ACKNOWLEDGING:
            if self.target == self.current:
                self.state = MemberState.STABLE
            else:
                self.state = MemberState.RECONCILING

    def _on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse | None) -> None:
        self._in_flight = False
        if self.closed:
            return
        if response is None:
            self.consumer.coordinator = None
            self._failed_attempt()
        elif response.error is Errors.NONE:
            self.heartbeat_attempts = 0
            if response.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = float(response.heartbeat_interval_ms)
            self.heartbeat_due = self.env.now + self.heartbeat_interval_ms
            self._on_heartbeat_success(response)
        elif response.error in COORDINATOR_GONE:
            self.consumer.coordinator = None
            self._send_full = True
            self.heartbeat_due = self.env.now
        elif response.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            self._failed_attempt()
        elif response.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self._send_full = True
            self.heartbeat_due = self.env.now
            self._transition_to_fenced()
        else:
            self.state = MemberState.FATAL
            self.failure = GroupRequestException(response.error)
        self._notify()

    def _failed_attempt(self) -> None:
        self._send_full = True
        self.heartbeat_due = self.env.now + self.backoff.backoff(
            self.heartbeat_attempts, self.consumer.rng
        )
        self.heartbeat_attempts += 1

    def _on_heartbeat_success(self, response: ConsumerGroupHeartbeatResponse) -> None:
        if self.state is MemberState.LEAVING or self.state in _NOT_IN_GROUP:
            return
        if response.member_epoch < 0:
            return
        self.member_epoch = response.member_epoch
        if response.assignment is None or self.state not in _TAKES_ASSIGNMENT:
            return
        self.target = frozenset(response.assignment)
        if self.target != self.current or self._none:
            self.state = MemberState.RECONCILING
            self._maybe_reconcile(can_commit=False)
        elif self.state in (MemberState.RECONCILING, MemberState.JOINING):
            self.state = MemberState.STABLE

    # -- commits -----------------------------------------------------------------------------
    def commit_generation(self) -> Generation | GroupException:
        """Who a commit names: the member id and its latest epoch (-1 outside the group)."""
        epoch = self.member_epoch if self.member_epoch > 0 else -1
        return Generation(epoch, self.member_id, None)

    def on_commit_error(self, sent: Generation, error: Errors) -> GroupException | None:
        """``OffsetCommitRequestState.onResponse``: UNKNOWN_MEMBER_ID and STALE_MEMBER_EPOCH
        fail a commitSync with CommitFailedException; the member state is left alone."""
        if error in (Errors.UNKNOWN_MEMBER_ID, Errors.STALE_MEMBER_EPOCH):
            return CommitFailedException()
        return None

    # -- close ---------------------------------------------------------------------------------
    def close(self, leave: bool = True) -> None:
        """``leaveGroupOnClose``: onPartitionsRevoked for what the member owns, then the leave
        heartbeat. ``leave=False`` is a crash: nothing is sent."""
        if self.closed:
            return
        if leave and self.state not in _NOT_IN_GROUP:
            self.state = MemberState.PREPARE_LEAVING
            owned = sorted(self.consumer.assignment)
            if owned and self.listener is not None:
                self.listener.on_partitions_revoked(owned)
            self.state = MemberState.LEAVING
            self._send_heartbeat(leaving=True)
        self.state = MemberState.UNSUBSCRIBED
        self.closed = True
        self.resume()
        self._notify()


def _bits(rng: Any) -> int:
    """128 bits from the consumer's seeded stream (a UUID the same in every process)."""
    bits = 0
    for _ in range(4):
        bits = (bits << 32) | (rng.integer(2**32) if rng is not None else 0)
    return bits
