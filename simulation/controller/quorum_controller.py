"""The controller: broker liveness, leader election and the metadata every broker replays.

A KRaft controller quorum stands here as one node, ``controller``, that faults can crash,
pause or cut off (Kafka's ``QuorumController`` with its ``ClusterControlManager``,
``BrokerHeartbeatManager`` and ``ReplicationControlManager``):

* **Liveness.** Brokers heartbeat every ``broker.heartbeat.interval.ms`` (2 s). A broker not
  heard from for ``broker.session.timeout.ms`` (9 s) is fenced: it leaves every ISR (unless it
  is the last member) and a new leader is elected wherever it led
  (:mod:`eosim.simulation.controller.partition_change`). A restarted broker registers again, which
  is refused while its previous session is alive (DUPLICATE_BROKER_REGISTRATION), is sent the
  whole metadata, and is unfenced by its first heartbeat: partitions without a leader may
  then elect it.
* **AlterPartition**: a leader's ISR change is checked (leader epoch, partition epoch, the new
  members alive) and published.
* **Publishing**: every change goes to every broker as a numbered :class:`MetadataDelta`, over
  the network, so a broker cut off from the controller keeps acting on what it last heard.

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
from eosim.simulation.controller.partition_change import (
    NO_LEADER,
    PartitionRegistration,
    alter_isr,
    on_broker_fenced,
    on_broker_unfenced,
)
from eosim.simulation.network import Message, Network
from eosim.simulation.protocol import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    Errors,
    MetadataDelta,
    PartitionState,
    TopicPartition,
)
from eosim.simulation.request_channel import RequestChannel

# Called with (broker, fenced) whenever a broker is fenced or unfenced.
FenceListener = Callable[[str, bool], None]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    session_timeout_ms: float = 9_000.0
    request_time_ms: float = 0.1


class QuorumController:
    def __init__(
        self,
        env: simpy.Environment,
        network: Network,
        brokers: tuple[str, ...],
        registrations: dict[TopicPartition, PartitionRegistration],
        topics: dict[str, TopicSettings],
        settings: ControllerSettings | None = None,
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
        self.incarnation: dict[str, int] = dict.fromkeys(brokers, 0)
        self.last_heartbeat: dict[str, float] = dict.fromkeys(brokers, 0.0)
        self.offset = 0
        self.listeners: list[FenceListener] = []
        self.requests = RequestChannel(env, self, self.settings.request_time_ms)
        # Request type -> handler(sender, request), built once.
        self.handlers: dict[type, Callable[[str, Any], None]] = {
            BrokerHeartbeatRequest: self._heartbeat,
            BrokerRegistrationRequest: self._register,
            AlterPartitionRequest: self._alter_partition,
        }
        network.register(CONTROLLER, self.receive, client=False)
        env.process(self._loop())
        for broker in brokers:
            self._expect_heartbeat(broker)

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
        )

    def snapshot(self) -> dict[TopicPartition, PartitionState]:
        return {tp: self.state(tp) for tp in self.registrations}

    def fenced_brokers(self) -> frozenset[str]:
        return frozenset(b for b in self.brokers if self.fenced[b])

    def _alive(self, broker: object) -> bool:
        return not self.fenced.get(broker, True)  # type: ignore[arg-type]

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
    def _expect_heartbeat(self, broker: str) -> None:
        """Fence ``broker`` if nothing is heard from it within the session timeout."""
        heard = self.last_heartbeat[broker]
        timer = self.env.timeout(self.settings.session_timeout_ms)

        def check(_ev: simpy.Event) -> None:
            if self.last_heartbeat[broker] != heard or self.fenced[broker]:
                return
            if not self.alive or self.paused:
                return  # a stopped controller judges nobody; it restarts the clocks later
            self._fence(broker)

        timer.callbacks.append(check)

    def _heartbeat(self, broker: str, request: BrokerHeartbeatRequest) -> None:
        if request.incarnation != self.incarnation[broker]:
            self._reply(
                broker, BrokerHeartbeatResponse(request.correlation_id, Errors.STALE_BROKER_EPOCH)
            )
            return
        self.last_heartbeat[broker] = self.env.now
        self._expect_heartbeat(broker)
        if self.fenced[broker]:
            self._unfence(broker)
        self._reply(broker, BrokerHeartbeatResponse(request.correlation_id, Errors.NONE, False))

    def _register(self, broker: str, request: BrokerRegistrationRequest) -> None:
        if request.incarnation == self.incarnation[broker]:
            return  # a repeat of an accepted registration
        if not self.fenced[broker]:
            # ClusterControlManager.registerBroker: the old incarnation's session is alive.
            self._reply(
                broker,
                BrokerHeartbeatResponse(
                    request.correlation_id, Errors.DUPLICATE_BROKER_REGISTRATION
                ),
            )
            return
        self.incarnation[broker] = request.incarnation
        self.last_heartbeat[broker] = self.env.now
        self._expect_heartbeat(broker)
        # The new incarnation replays the metadata from the start, then hears it registered.
        self.network.send(
            CONTROLLER,
            broker,
            MetadataDelta(self.offset, self.snapshot(), True, self.fenced_brokers()),
            internal=True,
        )
        self._reply(broker, BrokerHeartbeatResponse(request.correlation_id, Errors.NONE, True))

    def _fence(self, broker: str) -> None:
        self._set_fenced(broker, True)

    def _unfence(self, broker: str) -> None:
        self._set_fenced(broker, False)

    def _set_fenced(self, broker: str, fenced: bool) -> None:
        """Fence or unfence ``broker``: each of its partitions changes as
        ``on_broker_fenced`` / ``on_broker_unfenced`` says, the changes (and the broker's new
        state) are published, and the listeners hear of it."""
        self.fenced[broker] = fenced
        change = on_broker_fenced if fenced else on_broker_unfenced
        changed = {}
        for tp in sorted(self.registrations):
            reg = self.registrations[tp]
            if broker not in reg.replicas:
                continue
            new = change(reg, broker, self._alive, self._unclean(tp))  # type: ignore[arg-type]
            if new is not reg:
                self.registrations[tp] = new
                changed[tp] = self.state(tp)
        self._publish(changed, force=True)
        for listener in self.listeners:
            listener(broker, fenced)

    def _unclean(self, tp: TopicPartition) -> bool:
        return self.topics.get(tp[0], TopicSettings()).unclean_leader_election_enable

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
            )
        if error != "NONE" or new is None:
            self._reply(broker, AlterPartitionResponse(request.correlation_id, tp, Errors[error]))
            return
        self.registrations[tp] = new
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
        self._kick()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self._fresh_sessions()
        self._kick()

    def _fresh_sessions(self) -> None:
        """A controller that becomes active again starts every unfenced broker's session
        afresh rather than fencing brokers for its own absence."""
        now = self.env.now
        for broker in self.brokers:
            if not self.fenced[broker]:
                self.last_heartbeat[broker] = now
                self._expect_heartbeat(broker)

    def _kick(self) -> None:
        self.requests.kick()
