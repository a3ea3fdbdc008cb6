"""A broker: the composition root of one broker's parts, and its life (crash, restart, power
loss, pause). Its parts, each named after the Kafka class it mirrors:

* :class:`SocketServer` and :class:`KafkaRequestHandler` (:mod:`~eosim.simulation.broker.
  socket_server`): connections, muting, the one-at-a-time handler loop, held answers;
* :class:`KafkaApis` (:mod:`~eosim.simulation.broker.kafka_apis`): the dispatch by request
  type and the small requests, and one request handler per request path:
  :class:`ProduceRequestHandler`, :class:`FetchRequestHandler`,
  :class:`WriteTxnMarkersRequestHandler`; the controller's metadata goes to the
  :class:`BrokerMetadataPublisher`;
* :class:`ReplicaManager` (its replicas), :class:`BrokerLifecycleManager` (its life with the
  controller), :class:`LogManager` (retention), :class:`ProducerIdManager`, and the
  coordinator runtime the cluster builds for it (:class:`CoordinatorRuntime`, reached through
  the provider the broker is given).

A crash stops the broker at once: queued requests are dropped and every open connection is
reset (clients are told after one network hop, as a TCP reset would tell them). Logs survive
a process crash (the page cache outlives the process); a power loss keeps only what was
flushed or written back by the operating system at the moment the power went
(:mod:`eosim.simulation.broker.durability`). A restart is a new process
(:mod:`eosim.simulation.broker.lifecycle`): it recovers each partition's log and loads its
ProducerStateManager from the producer snapshot the recovery writes at the log end, which
keeps one batch per producer (so a retry of an earlier batch is then OUT_OF_ORDER_SEQUENCE,
as on Kafka), loses its producer-id block, and accepts no connection until it has registered
again, caught up with the metadata and been unfenced. A pause (GC, SIGSTOP) stops
request handling while requests keep arriving.

To add a part: build it in :meth:`Broker.__init__` from what it needs (passed to its
constructor, not set afterwards), stop and start it in :meth:`crash`, :meth:`restart`,
:meth:`pause` and :meth:`resume` if it has a life of its own, and test it through a broker
(tests/test_broker.py builds a standalone one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from eosim.simulation.broker.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    CoordinatorOf,
)
from eosim.simulation.broker.fetch_request_handler import FetchRequestHandler
from eosim.simulation.broker.kafka_apis import KafkaApis
from eosim.simulation.broker.lifecycle import BrokerLifecycleManager, LifecycleSettings
from eosim.simulation.broker.log import PartitionLog
from eosim.simulation.broker.log_manager import LogManager, LogManagerSettings
from eosim.simulation.broker.metadata_publisher import BrokerMetadataPublisher
from eosim.simulation.broker.partition import Partition, TopicSettings
from eosim.simulation.broker.produce_request_handler import (
    BROKER_REQUEST_TIMEOUT_MS,
    PartitionVerifier,
    ProduceRequestHandler,
)
from eosim.simulation.broker.producer_id_manager import ProducerIdBlockAllocator, ProducerIdManager
from eosim.simulation.broker.producer_state import ProducerStateManager
from eosim.simulation.broker.replica_manager import ReplicaManager, ReplicationSettings
from eosim.simulation.broker.request_handler_pool import BrokerThreads
from eosim.simulation.broker.socket_server import KafkaRequestHandler, SocketServer
from eosim.simulation.broker.write_txn_markers_request_handler import (
    WriteTxnMarkersRequestHandler,
)
from eosim.simulation.config import kafka_default
from eosim.simulation.coordinator.runtime import AddPartition, CoordinatorRuntime
from eosim.simulation.network import Message, Network
from eosim.simulation.probe import Probe
from eosim.simulation.protocol import TopicPartition
from eosim.simulation.rng import RandomStream
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.state_change import DISABLED, StateChangeLog

__all__ = ["Broker", "BrokerSettings", "PartitionVerifier"]


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    request_time_ms: float = 0.25
    # The most records one fetch returns for a partition (whole batches, at least one).
    fetch_max_records: int = 500
    # broker.heartbeat.interval.ms, and broker.session.timeout.ms (which caps the backoff of a
    # refused registration).
    heartbeat_interval_ms: float = float(kafka_default("broker.heartbeat.interval.ms"))
    session_timeout_ms: float = float(kafka_default("broker.session.timeout.ms"))
    # How long a restarted broker process takes to start (cluster.broker_startup).
    startup_ms: float = 2_000.0
    # How long after a crash its peers see its connections reset, drawn uniformly from
    # (low, high) per crash (cluster.crash_reset); (0, 0): at once.
    crash_reset_ms: tuple[float, float] = (0.0, 0.0)
    # add.partitions.to.txn.retry.backoff.ms and add.partitions.to.txn.retry.backoff.max.ms
    # (AddPartitionsToTxnConfig): a leader's own retries of an implicit add answered
    # CONCURRENT_TRANSACTIONS (rules.add_partitions_server_retry).
    add_partitions_retry_backoff_ms: float = float(
        kafka_default("add.partitions.to.txn.retry.backoff.ms")
    )
    add_partitions_retry_max_ms: float = float(
        kafka_default("add.partitions.to.txn.retry.backoff.max.ms")
    )

    def lifecycle(self) -> LifecycleSettings:
        return LifecycleSettings(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            session_timeout_ms=self.session_timeout_ms,
            startup_ms=self.startup_ms,
        )


class Broker:
    """One broker: its request handling (:class:`SocketServer`, :class:`KafkaRequestHandler`,
    :class:`KafkaApis` and the request handlers of each path), its replicas
    (:class:`ReplicaManager`), its coordinators and its life with the controller
    (registration and heartbeats, Kafka's ``BrokerLifecycleManager``). Built without a
    controller (``controller=None``) it leads the ``partitions`` it is given alone, for ever:
    the standalone broker of unit tests.

    ``coordinator``: this broker's coordinator runtime, asked for when needed (the cluster
    builds the runtimes after the brokers; None, or a provider answering None: none);
    ``hostable``: whether a partition the metadata names this broker a replica of is hosted
    yet (every one by default); ``state_log``: where its state changes are recorded (its
    life, its replicas' roles); ``coordinator_of``: where a transactional id's coordinator is
    in this broker's metadata cache, for its :class:`AddPartitionsToTxnManager` (None: the
    broker sends no AddPartitionsToTxn; ``add_partition``, when given, answers instead)."""

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        network: Network,
        partitions: list[TopicPartition],
        rules: ProtocolRules,
        allocator: ProducerIdBlockAllocator,
        settings: BrokerSettings,
        probe: Probe | None = None,
        verify_partition: PartitionVerifier | None = None,
        add_partition: AddPartition | None = None,
        *,
        replication: ReplicationSettings | None = None,
        topics: dict[str, TopicSettings] | None = None,
        controller: str | None = None,
        lifecycle_rng: RandomStream | None = None,
        isr_rng: RandomStream | None = None,
        heartbeat_rng: RandomStream | None = None,
        crash_reset_rng: RandomStream | None = None,
        log: LogManagerSettings | None = None,
        coordinator: Callable[[], CoordinatorRuntime | None] | None = None,
        hostable: Callable[[TopicPartition], bool] | None = None,
        state_log: StateChangeLog = DISABLED,
        threads: BrokerThreads | None = None,
        coordinator_of: CoordinatorOf | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.network = network
        self.rules = rules
        self.settings = settings
        self.producer_ids = ProducerIdManager(allocator)
        self.alive = True
        self.paused = False
        # The resource model's threads on this broker's host (None: unbounded, one request at
        # a time at settings.request_time_ms).
        self.threads = threads
        self.socket_server = SocketServer(
            env, name, network, self, settings.request_time_ms, threads
        )
        self.probe = probe or Probe()
        self._coordinator: Callable[[], CoordinatorRuntime | None] = (
            coordinator if coordinator is not None else _no_coordinator
        )
        log_settings = log if log is not None else LogManagerSettings()
        self._producer_id_expiration_ms = log_settings.producer_id_expiration_ms
        self.replica_manager = ReplicaManager(
            env,
            name,
            network,
            rules,
            replication if replication is not None else ReplicationSettings(),
            topics if topics is not None else {},
            self._new_state,
            lambda: self.alive and not self.paused,
            self.probe,
            self.socket_server.respond,
            isr_rng,
            hostable=hostable,
            state_log=state_log,
            on_internal_role=self._internal_role_changed,
            complete_work=threads.book_completion if threads is not None else None,
        )
        self.controller = controller
        self._crash_reset_rng = crash_reset_rng
        self.incarnation = 0
        # Whether the machine has power (a crashed process's machine keeps its page cache).
        self.powered = True
        self.state_log = state_log
        self.lifecycle: BrokerLifecycleManager | None = None
        if controller is not None:
            rm = self.replica_manager
            self.lifecycle = BrokerLifecycleManager(
                env,
                name,
                network,
                controller,
                settings.lifecycle(),
                lifecycle_rng,
                lambda: rm.metadata_offset,
                lambda: self.alive and not self.paused,
                heartbeat_rng,
                state_log=state_log,
                startup_work=threads,
            )
        for tp in partitions:
            self.replica_manager.lead_alone(tp)
        # KIP-890's requests to transaction coordinators (transaction version 2's adds), when
        # the broker knows where coordinators are; unit tests may pass ``add_partition`` instead.
        self.add_partitions_manager: AddPartitionsToTxnManager | None = None
        if coordinator_of is not None and add_partition is None:
            self.add_partitions_manager = AddPartitionsToTxnManager(
                env, name, network, coordinator_of, BROKER_REQUEST_TIMEOUT_MS
            )
            add_partition = self.add_partitions_manager.add  # type: ignore[assignment]
        server = self.socket_server
        rm = self.replica_manager
        self.apis = KafkaApis(
            name,
            self,
            server,
            rm,
            self.producer_ids,
            self._coordinator,
            self.lifecycle,
            ProduceRequestHandler(
                env,
                self,
                server,
                rm,
                rules,
                verify_partition,
                add_partition,
                settings.add_partitions_retry_backoff_ms,
                settings.add_partitions_retry_max_ms,
            ),
            FetchRequestHandler(server, rm, settings.fetch_max_records),
            WriteTxnMarkersRequestHandler(
                env, name, self, server, rm, self._coordinator, self.probe
            ),
            BrokerMetadataPublisher(rm, self.lifecycle),
            self.add_partitions_manager,
        )
        network.register(name, self.receive, client=False)
        self.request_handler = KafkaRequestHandler(env, self, server, self.apis, rm, threads)
        # The log flusher, retention and producer-id expiry (Kafka's LogManager and UnifiedLog
        # schedulers).
        self.log_manager = LogManager(
            env,
            lambda: self.replica_manager,
            log_settings,
            lambda: self.alive and not self.paused,
        )
        self.log_manager.start()

    def _new_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            self.rules.producer_state_cached_batches,
            self.rules.accept_unknown_producer_any_sequence,
            self.rules.producer_expiry_tracks_marker_timestamps,
            self._producer_id_expiration_ms,
            self.rules.producer_state_rebuilt_from_snapshots,
        )

    # -- replicas ---------------------------------------------------------------------------
    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        """Every replica this broker hosts."""
        return self.replica_manager.partitions

    @property
    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return {tp: p.log for tp, p in self.replica_manager.partitions.items()}

    @property
    def producer_state(self) -> dict[TopicPartition, ProducerStateManager]:
        return {tp: p.producer_state for tp, p in self.replica_manager.partitions.items()}

    # -- requests ----------------------------------------------------------------------------
    @property
    def coordinator(self) -> CoordinatorRuntime | None:
        """This broker's coordinator runtime (None: none)."""
        return self._coordinator()

    def _internal_role_changed(
        self, tp: TopicPartition, epoch: int | None, activated: bool
    ) -> None:
        """The local replica of an internal partition became leader at ``epoch`` or stopped
        leading (None): the coordinator runtime loads or unloads it (once there is one)."""
        coordinator = self._coordinator()
        if coordinator is not None:
            coordinator.role_changed(tp, epoch, activated)

    @property
    def registered(self) -> bool:
        return self.lifecycle is None or self.lifecycle.registered

    @property
    def serving(self) -> bool:
        """Whether the broker accepts connections: alive and, with a controller, RUNNING."""
        return self.alive and (self.lifecycle is None or self.lifecycle.serving)

    @property
    def requests_handled(self) -> int:
        """How many requests the request handler has taken."""
        return self.request_handler.requests_handled

    def receive(self, msg: Message) -> None:
        """What the network delivers: read by the socket server, which hands over answers to
        the broker's own requests and the controller's metadata for its own threads."""
        if self.socket_server.receive(msg):
            self.request_handler.own_thread(msg)

    def hold_current(self) -> Callable[[object], None]:
        """Hold the request being handled (its answer comes later, through the returned
        function; the connection stays muted until then)."""
        return self.socket_server.hold_current()

    # -- faults ------------------------------------------------------------------------
    def crash(self, *, sockets_linger: bool = True) -> None:
        """The process dies at once (kill -9). Its connections are reset after
        ``cluster.crash_reset`` (``sockets_linger=False``: at once, as a power loss does in
        the model, docs/model.md departure 17)."""
        if not self.alive:
            return
        self.alive = False
        self.state_log.record(self.name, "crash", incarnation=self.incarnation)
        if self.lifecycle is not None:
            self.lifecycle.stopped()
        self.replica_manager.shutdown()
        if self.add_partitions_manager is not None:
            self.add_partitions_manager.shutdown()
        coordinator = self.coordinator
        if coordinator is not None:
            coordinator.crash()
        self.paused = False
        self.request_handler.clear()
        delay = self._crash_reset_delay() if sockets_linger else 0.0
        if delay > 0.0:
            # The kernel tears the killed process down, its sockets last: until then its
            # connections stay open and take what is sent without answering it.
            self.socket_server.close_after(delay)
        else:
            self.socket_server.reset()

    def _crash_reset_delay(self) -> float:
        """How long the killed process's sockets outlive it (cluster.crash_reset)."""
        low, high = self.settings.crash_reset_ms
        if high <= 0.0:
            return 0.0
        if high == low or self._crash_reset_rng is None:
            return low
        return self._crash_reset_rng.uniform(low, high)

    def power_loss(self) -> None:
        """The machine loses power: the process dies and the page cache with it, so each log
        keeps only what was flushed or written back by now (cut at once: nothing is written
        back while the power is off). A broker already without power loses nothing more."""
        if not self.powered:
            return
        self.powered = False
        cut = self.log_manager.lose_page_cache()
        self.state_log.record(self.name, "power_loss", cut=cut)
        self.crash(sockets_linger=False)

    def restart(self) -> None:
        """The machine is up (again) and a new broker process starts: producer state rebuilt
        from the logs, a new producer-id block, and, with a controller, the start-up of
        :class:`BrokerLifecycleManager` (registration, catch-up, unfencing) before it serves."""
        if self.alive:
            return
        self.socket_server.reset_lingering()  # the old process is gone by now
        self.alive = True
        self.powered = True
        self.incarnation += 1
        self.state_log.record(self.name, "restart", incarnation=self.incarnation)
        if self.threads is not None:
            self.threads.jvm.restarted(self.env.now)  # a new, cold JVM
        self.producer_ids.reset()
        rm = self.replica_manager
        led = sorted(tp for tp, p in rm.partitions.items() if p.leader == self.name)
        self.log_manager.recover()
        if self.lifecycle is None:
            for tp in led:  # a standalone broker leads its partitions again at once
                rm.lead_alone(tp, rm.partitions[tp].leader_epoch)
        else:
            self.lifecycle.started(self.incarnation)
        coordinator = self.coordinator
        if coordinator is not None:
            coordinator.restart()
        self.socket_server.kick()

    def pause(self) -> None:
        self.paused = True
        if self.threads is not None:
            self.threads.jvm.paused(self.env.now)

    def resume(self) -> None:
        self.paused = False
        if self.threads is not None:
            self.threads.jvm.resumed(self.env.now)
        self.replica_manager.resumed()
        self.request_handler.handle_own_threads()
        if self.lifecycle is not None:
            self.lifecycle.resumed()
        self.socket_server.kick()
        self.replica_manager.wake_fetchers()


def _no_coordinator() -> CoordinatorRuntime | None:
    return None
