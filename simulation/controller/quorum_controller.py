"""The controller: broker liveness, leader election and the metadata every broker replays.

A KRaft controller quorum stands here as one node, ``controller``, that faults can crash,
pause or cut off (Kafka's ``QuorumController`` with its ``ClusterControlManager``,
``BrokerHeartbeatManager`` and ``ReplicationControlManager``):

* **Liveness.** Brokers heartbeat every ``broker.heartbeat.interval.ms`` (2 s). A broker not
  heard from for ``broker.session.timeout.ms`` (9 s) is fenced by the periodic task
  ``maybeFenceStaleBroker`` (``ReplicationControlManager.maybeFenceOneStaleBroker``), which
  runs every session timeout / 8 (1.125 s) and fences one expired broker per run, running again
  10 ms later when it fenced one. So a broker is fenced up to 1.125 s after its session
  expired; the task's phase (the controller's activation) is drawn from the stream
  ``controller-fence-check``. A fenced broker leaves every ISR (unless it is the last member and
  eligible leader replicas are off) and a new leader is elected wherever it led
  (:mod:`eosim.simulation.controller.partition_change`).
* **Registration** (``ClusterControlManager.registerBroker``). A restarted broker is a new
  incarnation. Its registration is refused while the previous incarnation's session is alive
  (DUPLICATE_BROKER_REGISTRATION), so a broker that comes back within the session timeout
  waits until the controller has fenced its old self and moved its leaderships away. An
  accepted registration gets a new broker epoch and starts fenced. A broker that did not shut
  down cleanly (every crash and power loss: its ``previous_broker_epoch`` is -1) is, with
  eligible leader replicas on, removed from every ISR and ELR (KIP-966's unclean-shutdown
  handling, ``handleBrokerUncleanShutdown``): its log may have lost records it had
  acknowledged.
* **Unfencing** (``BrokerHeartbeatManager``): a fenced, registered broker is unfenced by a
  heartbeat that no longer asks to stay fenced and shows it has replayed the metadata log past
  its registration; partitions without a leader may then elect it.
* **AlterPartition**: a leader's ISR change is checked (leader epoch, partition epoch, the new
  members alive) and published.
* **Publishing**: every change goes to every broker as a numbered :class:`MetadataDelta`, over
  the network, so a broker cut off from the controller keeps acting on what it last heard; a
  broker that finds a gap in the numbers, or hears in a heartbeat answer that it is behind,
  fetches a snapshot (:class:`MetadataFetchRequest`), as the KRaft fetch of the metadata log
  never skips a record.

A crashed controller does nothing until it restarts (a quorum would elect another; with one
node the cluster runs on without one); on restart it gives every live broker a fresh session,
as a newly active controller does. The metadata itself is durable (the metadata log).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from eosim.simulation.broker.partition import TopicSettings
from eosim.simulation.config import kafka_default
from eosim.simulation.controller.partition_change import (
    NO_LEADER,
    ElectionPolicy,
    PartitionRegistration,
    alter_isr,
    on_broker_fenced,
    on_broker_unfenced,
    on_unclean_shutdown,
)
from eosim.simulation.coordinator.coordinator_timer import SimpyCoordinatorTimer
from eosim.simulation.network import Message, Network
from eosim.simulation.protocol import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Errors,
    MetadataDelta,
    MetadataFetchRequest,
    PartitionState,
    TopicPartition,
)
from eosim.simulation.request_channel import RequestChannel
from eosim.simulation.rng import RandomStream
from eosim.simulation.state_change import DISABLED, StateChangeLog

# Called with (broker, fenced) whenever a broker is fenced or unfenced.
FenceListener = Callable[[str, bool], None]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    session_timeout_ms: float = float(kafka_default("broker.session.timeout.ms"))
    request_time_ms: float = 0.1
    # KIP-966's eligible leader replicas (eligible.leader.replicas.version=1: on by default in
    # new 4.1+ clusters, off before).
    eligible_leader_replicas: bool = False

    @property
    def fence_check_period_ms(self) -> float:
        """``QuorumController.maybeFenceStaleBrokerPeriodNs``: session timeout / 8, at least
        1 ms."""
        return max(1.0, self.session_timeout_ms / 8)


# PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS: a periodic task that did something runs again
# this soon (maybeFenceStaleBroker fences one broker per run).
IMMEDIATE_PERIOD_MS = 10.0


class QuorumController:
    def __init__(
        self,
        env: simpy.Environment,
        network: Network,
        brokers: tuple[str, ...],
        registrations: dict[TopicPartition, PartitionRegistration],
        topics: dict[str, TopicSettings],
        settings: ControllerSettings | None = None,
        rng: RandomStream | None = None,
        state_log: StateChangeLog = DISABLED,
    ) -> None:
        self.env = env
        self.network = network
        self.brokers = brokers
        self.registrations = registrations
        self.topics = topics
        self.settings = settings if settings is not None else ControllerSettings()
        self.alive = True
        self.paused = False
        self.fenced: dict[str, bool] = dict.fromkeys(brokers, False)
        # The registered incarnation of each broker, its broker epoch, and the metadata offset
        # of its registration (a heartbeat is "caught up" once the broker has replayed past it).
        self.incarnation: dict[str, int] = dict.fromkeys(brokers, 0)
        self.broker_epoch: dict[str, int] = dict.fromkeys(brokers, 0)
        self.registration_offset: dict[str, int] = dict.fromkeys(brokers, 0)
        self.last_heartbeat: dict[str, float] = dict.fromkeys(brokers, 0.0)
        self.offset = 0
        self.listeners: list[FenceListener] = []
        self.state_log = state_log
        self.requests = RequestChannel(env, self, self.settings.request_time_ms)
        # Request type -> handler(sender, request), built once.
        self.handlers: dict[type, Callable[[str, Any], None]] = {
            BrokerHeartbeatRequest: self._heartbeat,
            BrokerRegistrationRequest: self._register,
            AlterPartitionRequest: self._alter_partition,
            MetadataFetchRequest: self._metadata_fetch,
        }
        network.register(CONTROLLER, self.receive, client=False)
        env.process(self._loop())
        # The fence check's phase: the controller became active at a moment no scenario fixes.
        period = self.settings.fence_check_period_ms
        self._tasks = SimpyCoordinatorTimer(env, lambda _result: None)
        self._paused_check_due = False
        self._schedule_fence_check(period if rng is None else rng.uniform(0.0, period))

    # -- state as brokers see it -----------------------------------------------------------
    def state(self, tp: TopicPartition) -> PartitionState:
        reg = self.registrations[tp]
        leader = None if reg.leader == NO_LEADER else reg.leader
        return PartitionState(
            reg.replicas,  # type: ignore[arg-type]
            reg.isr,  # type: ignore[arg-type]
            leader,  # type: ignore[arg-type]
            reg.leader_epoch,
            reg.partition_epoch,
            reg.elr,  # type: ignore[arg-type]
        )

    def snapshot(self) -> dict[TopicPartition, PartitionState]:
        return {tp: self.state(tp) for tp in self.registrations}

    def fenced_brokers(self) -> frozenset[str]:
        return frozenset(b for b in self.brokers if self.fenced[b])

    def _alive(self, broker: object) -> bool:
        return not self.fenced.get(broker, True)  # type: ignore[arg-type]

    def policy(self, tp: TopicPartition) -> ElectionPolicy:
        """The election rules of ``tp``'s topic: unclean election, ELR, effective min ISR."""
        topic = self.topics.get(tp[0], TopicSettings())
        replicas = len(self.registrations[tp].replicas)
        return ElectionPolicy(
            topic.unclean_leader_election_enable,
            self.settings.eligible_leader_replicas,
            min(topic.min_insync_replicas, replicas),
        )

    # -- the request loop ---------------------------------------------------------------------
    def receive(self, msg: Message) -> None:
        if not self.alive:
            return
        self.requests.put(msg)

    def _loop(self):  # type: ignore[no-untyped-def]
        while True:
            msg = yield from self.requests.take()
            handler = self.handlers.get(type(msg.payload))
            if handler is not None:
                handler(msg.src, msg.payload)

    def _reply(self, broker: str, response: object) -> None:
        self.network.send(CONTROLLER, broker, response, internal=True)

    # -- liveness -----------------------------------------------------------------------------
    def _schedule_fence_check(self, delay_ms: float) -> None:
        self._tasks.schedule("maybeFenceStaleBroker", delay_ms, self._maybe_fence_one_stale_broker)

    def _maybe_fence_one_stale_broker(self) -> None:
        """The ``maybeFenceStaleBroker`` task: fence one broker whose session has expired (the
        longest silent first), then run again soon; else again after the period."""
        if not self.alive:
            return  # a restart schedules the task again
        if self.paused:
            self._paused_check_due = True  # runs when the process continues
            return
        now = self.env.now
        timeout = self.settings.session_timeout_ms
        expired = [
            (self.last_heartbeat[b], i, b)
            for i, b in enumerate(self.brokers)
            if not self.fenced[b] and self.last_heartbeat[b] + timeout < now
        ]
        if expired:
            broker = min(expired)[2]
            self.state_log.record(CONTROLLER, "session_expired", broker=broker)
            self._fence(broker)
            self._schedule_fence_check(IMMEDIATE_PERIOD_MS)
        else:
            self._schedule_fence_check(self.settings.fence_check_period_ms)

    def _heartbeat(self, broker: str, request: BrokerHeartbeatRequest) -> None:
        """BrokerHeartbeatManager: keep the session; unfence a registered broker that no longer
        wants to be fenced and has replayed the metadata log past its registration."""
        if request.broker_epoch != self.broker_epoch[broker]:
            self._reply(
                broker, BrokerHeartbeatResponse(request.correlation_id, Errors.STALE_BROKER_EPOCH)
            )
            return
        self.last_heartbeat[broker] = self.env.now
        caught_up = request.metadata_offset >= self.registration_offset[broker]
        if self.fenced[broker] and not request.want_fence and caught_up:
            self._unfence(broker)
        self._reply(
            broker,
            BrokerHeartbeatResponse(
                request.correlation_id, Errors.NONE, self.fenced[broker], caught_up, self.offset
            ),
        )

    def _register(self, broker: str, request: BrokerRegistrationRequest) -> None:
        """ClusterControlManager.registerBroker."""
        if request.incarnation == self.incarnation[broker]:
            # A repeat of an accepted registration: the same broker epoch again.
            self._reply(
                broker,
                BrokerRegistrationResponse(
                    request.correlation_id, Errors.NONE, self.broker_epoch[broker]
                ),
            )
            return
        if not self.fenced[broker]:
            # The previous incarnation's session is alive.
            self.state_log.record(CONTROLLER, "registration_refused", broker=broker)
            self._reply(
                broker,
                BrokerRegistrationResponse(
                    request.correlation_id, Errors.DUPLICATE_BROKER_REGISTRATION
                ),
            )
            return
        unclean = request.previous_broker_epoch != self.broker_epoch[broker]
        self.incarnation[broker] = request.incarnation
        changed: dict[TopicPartition, PartitionState] = {}
        if unclean:
            for tp in sorted(self.registrations):
                reg = self.registrations[tp]
                if broker not in reg.replicas:
                    continue
                new = on_unclean_shutdown(reg, broker, self._alive, self.policy(tp))
                if new is not reg:
                    self._change(tp, new, "unclean_shutdown")
                    changed[tp] = self.state(tp)
        # The RegisterBrokerRecord (and the changes above) in one batch: its offset is the
        # new broker epoch. The new incarnation starts fenced.
        self._publish(changed, force=True)
        epoch = self.offset
        self.broker_epoch[broker] = epoch
        self.registration_offset[broker] = epoch
        self.state_log.record(
            CONTROLLER, "registered", broker=broker, broker_epoch=epoch, unclean=unclean
        )
        self.last_heartbeat[broker] = self.env.now
        self._reply(broker, BrokerRegistrationResponse(request.correlation_id, Errors.NONE, epoch))

    def _metadata_fetch(self, broker: str, request: MetadataFetchRequest) -> None:
        """A broker catching up on the metadata log gets all of it (a snapshot)."""
        self.network.send(
            CONTROLLER,
            broker,
            MetadataDelta(self.offset, self.snapshot(), True, self.fenced_brokers()),
            internal=True,
        )

    def _fence(self, broker: str) -> None:
        self._set_fenced(broker, True)

    def _unfence(self, broker: str) -> None:
        self._set_fenced(broker, False)

    def _set_fenced(self, broker: str, fenced: bool) -> None:
        """Fence or unfence ``broker``: each of its partitions changes as
        ``on_broker_fenced`` / ``on_broker_unfenced`` says, the changes (and the broker's new
        state) are published, and the listeners hear of it."""
        self.fenced[broker] = fenced
        self.state_log.record(CONTROLLER, "fenced" if fenced else "unfenced", broker=broker)
        change = on_broker_fenced if fenced else on_broker_unfenced
        changed = {}
        for tp in sorted(self.registrations):
            reg = self.registrations[tp]
            if broker not in reg.replicas:
                continue
            policy = self.policy(tp)
            new = change(reg, broker, self._alive, policy.unclean_allowed, policy)  # type: ignore[arg-type]
            if new is not reg:
                self._change(tp, new, "fenced" if fenced else "unfenced")
                changed[tp] = self.state(tp)
        self._publish(changed, force=True)
        for listener in self.listeners:
            listener(broker, fenced)

    def _change(self, tp: TopicPartition, new: PartitionRegistration, cause: str) -> None:
        """Store ``tp``'s new registration (and say what changed in the state-change log)."""
        old = self.registrations[tp]
        self.registrations[tp] = new
        if not self.state_log.enabled:
            return
        if new.leader != old.leader:
            self.state_log.record(
                CONTROLLER,
                "leader_elected" if new.leader != NO_LEADER else "offline",
                tp,
                leader=None if new.leader == NO_LEADER else new.leader,
                leader_epoch=new.leader_epoch,
                isr=list(new.isr),
                elr=list(new.elr),
                unclean=new.unclean,
                cause=cause,
            )
        elif new.isr != old.isr or new.elr != old.elr:
            self.state_log.record(
                CONTROLLER, "isr_changed", tp, isr=list(new.isr), elr=list(new.elr), cause=cause
            )

    # -- AlterPartition -------------------------------------------------------------------------
    def _alter_partition(self, broker: str, request: AlterPartitionRequest) -> None:
        tp = request.tp
        reg = self.registrations.get(tp)
        if reg is None:
            error, new = "UNKNOWN_TOPIC_OR_PARTITION", None
        else:
            error, new = alter_isr(
                reg,
                broker,  # type: ignore[arg-type]
                request.leader_epoch,
                request.partition_epoch,
                request.isr,  # type: ignore[arg-type]
                self._alive,
                self.policy(tp),
            )
        if error != "NONE" or new is None:
            self._reply(broker, AlterPartitionResponse(request.correlation_id, tp, Errors[error]))
            return
        self._change(tp, new, "alter_partition")
        self._publish({tp: self.state(tp)})
        self._reply(
            broker,
            AlterPartitionResponse(
                request.correlation_id,
                tp,
                Errors.NONE,
                new.leader_epoch,
                new.partition_epoch,
                new.isr,  # type: ignore[arg-type]
            ),
        )

    def _publish(self, changed: dict[TopicPartition, PartitionState], force: bool = False) -> None:
        if not changed and not force:
            return
        self.offset += 1
        delta = MetadataDelta(self.offset, changed, False, self.fenced_brokers())
        for broker in self.brokers:
            self.network.send(CONTROLLER, broker, delta, internal=True)

    # -- faults ------------------------------------------------------------------------------
    def crash(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.paused = False
        self.requests.clear()

    def restart(self) -> None:
        if self.alive:
            return
        self.alive = True
        self._fresh_sessions()
        # PeriodicTaskControlManager.activate: the tasks start again, a period from now.
        self._schedule_fence_check(self.settings.fence_check_period_ms)
        self._kick()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self._fresh_sessions()
        if self._paused_check_due:
            self._paused_check_due = False
            self._maybe_fence_one_stale_broker()
        self._kick()

    def _fresh_sessions(self) -> None:
        """A controller that becomes active again starts every unfenced broker's session
        afresh rather than fencing brokers for its own absence."""
        now = self.env.now
        for broker in self.brokers:
            if not self.fenced[broker]:
                self.last_heartbeat[broker] = now

    def _kick(self) -> None:
        self.requests.kick()
