"""BrokerLifecycleManager: how a broker process starts, registers, catches up and serves.

A KRaft broker that starts (the first time, or after a crash or a power loss) does not take up
where its previous process left off. Kafka's ``BrokerServer.startup`` and
``BrokerLifecycleManager`` go through these states (``BrokerState``):

* **STARTING.** The process starts (``cluster.broker_startup``: the JVM, the log manager, the
  raft client; with the resource model's ``startup`` block, CPU work on the broker's host
  instead, :class:`StartupWork`, which a busy host stretches). It then, at the same time,
  registers with the controller (``BrokerRegistrationRequest`` with a new incarnation and,
  after an unclean shutdown, previous broker epoch -1) and replays the metadata log. The
  controller refuses the registration while the previous incarnation's session is alive
  (DUPLICATE_BROKER_REGISTRATION); the broker retries after an exponential backoff (100 ms
  doubling up to ``broker.session.timeout.ms``, 2% jitter). Once it has replayed the metadata
  log, its first publish applies it: its replicas take the roles the metadata gives them
  (followers start fetching) and its coordinators load. With the ``startup`` block the first
  publish first takes its own CPU (``BrokerMetadataPublisher.initializeManagers``: the log
  manager loads the logs), and the latest snapshot heard meanwhile is the one applied.
* **RECOVERY.** Registered, and the controller says it has replayed the log past its
  registration. It asks to be unfenced (its heartbeats stop asking to stay fenced once the
  first publish is done).
* **RUNNING.** Unfenced: only now does the broker accept connections
  (``SocketServer.enableRequestProcessing`` comes last in ``BrokerServer.startup``). Until
  then, clients and followers that connect to it are refused, so a restarted broker never
  serves a log it lost part of while the controller still names it leader: by the time it
  can register, the controller has fenced its previous incarnation and moved its leaderships.

Heartbeats go one at a time (``BrokerLifecycleManager.scheduleNextCommunication``): the next
is sent ``broker.heartbeat.interval.ms`` after the answer to the last (10 ms while STARTING),
and at once after a registration or when the broker becomes ready to unfence. One that gets
no answer times out after min(``controller.socket.timeout.ms``, the interval) (the heartbeat
channel's request and retry timeout, ``NodeToControllerChannelManagerImpl``), and the next
goes an interval after that. So the cadence drifts with each answer's round trip, and a lost
heartbeat leaves a gap of two intervals, not one. A paused process sends what fell due when
it resumes. The brokers of the initial cluster started at unknown moments before the run: each
one's first heartbeat falls at a phase drawn from its own stream (``broker-heartbeat:<name>``).

A broker that finds a gap in the metadata it hears, or learns from a heartbeat answer that it
is behind, fetches a snapshot (the raft fetch of the metadata log never skips a record).

Extending it: a new step of a broker's start belongs here, as a state or a condition on the
move to the next state; the broker asks :attr:`serving` before it accepts a request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import simpy

from eosim.simulation.coordinator.coordinator_timer import SimpyCoordinatorTimer
from eosim.simulation.exponential_backoff import ExponentialBackoff
from eosim.simulation.network import Network
from eosim.simulation.protocol import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Errors,
    MetadataFetchRequest,
)
from eosim.simulation.rng import RandomStream
from eosim.simulation.state_change import DISABLED, StateChangeLog

# The key of the one scheduled heartbeat (BrokerLifecycleManager's "communication" event).
_COMMUNICATION = "communication"


class BrokerState(Enum):
    """Kafka's ``org.apache.kafka.metadata.BrokerState`` (the states eosim uses)."""

    NOT_RUNNING = "NOT_RUNNING"
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"


class StartupWork(Protocol):
    """The CPU a new broker process needs on its host before it goes on (the resource model's
    :class:`~eosim.simulation.broker.request_handler_pool.BrokerThreads`)."""

    def start_work(self, publish: bool, alive: Callable[[], bool]) -> simpy.Event | None:
        """An event that fires when the start up to registering (or, ``publish``, the first
        metadata publish) has had its CPU; None: the start is the fixed ``startup_ms`` and
        the publish free. Nothing fires once ``alive()`` is false."""
        ...


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    # broker.heartbeat.interval.ms
    heartbeat_interval_ms: float = 2_000.0
    # broker.session.timeout.ms: the cap of the registration backoff.
    session_timeout_ms: float = 9_000.0
    # From the machine being up to registering and fetching the metadata log.
    startup_ms: float = 2_000.0
    # How long a metadata fetch may go unanswered before it is sent again.
    metadata_fetch_timeout_ms: float = 2_000.0
    # BrokerLifecycleManager's resendExponentialBackoff: 100 ms doubling, 2% jitter.
    registration_backoff_ms: float = 100.0
    registration_backoff_jitter: float = 0.02
    # STARTING: the next heartbeat 10 ms after an answer that does not yet say caught up.
    catch_up_heartbeat_ms: float = 10.0
    # controller.socket.timeout.ms: with the interval, it bounds how long a heartbeat waits
    # for its answer (the heartbeat channel's timeouts are min(this, the interval)).
    controller_socket_timeout_ms: float = 30_000.0

    @property
    def heartbeat_timeout_ms(self) -> float:
        return min(self.controller_socket_timeout_ms, self.heartbeat_interval_ms)


class BrokerLifecycleManager:
    """One broker's life with the controller (see the module docstring).

    ``metadata_offset`` tells how far the broker has replayed the metadata log;
    ``running`` whether the process can act now (alive and not paused)."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        controller: str,
        settings: LifecycleSettings,
        rng: RandomStream | None,
        metadata_offset: Callable[[], int],
        running: Callable[[], bool],
        heartbeat_rng: RandomStream | None = None,
        *,
        state_log: StateChangeLog = DISABLED,
        startup_work: StartupWork | None = None,
    ) -> None:
        self.env = env
        self.startup_work = startup_work
        # The first publish is waiting for its CPU, and the snapshot it will apply then (the
        # latest heard). A dead process's work never ends (StartupWork's alive()).
        self._publishing = False
        self._held: Callable[[], None] | None = None
        self.broker = broker
        self.network = network
        self.controller = controller
        self.settings = settings
        self.rng = rng
        self.metadata_offset = metadata_offset
        self.running = running
        self.state_log = state_log
        # A broker of the initial cluster is registered, caught up and unfenced.
        self.state = BrokerState.RUNNING
        self.incarnation = 0
        self.broker_epoch = 0
        self.registered = True
        self.published = True  # the first metadata publish is done
        self._failed_attempts = 0
        self._correlation = 0
        self._fetch_sent_at: float | None = None
        # The heartbeat in flight (its correlation id), the scheduled communication (Kafka's
        # deferred "communication" event: a newer schedule replaces it), and Kafka's
        # nextSchedulingShouldBeImmediate.
        self._in_flight: int | None = None
        self._timer = SimpyCoordinatorTimer(env, lambda _result: None)
        self._due = False  # fell due while the process was paused
        self._next_immediate = False
        self._timeout_due: int | None = None  # a heartbeat timed out while paused
        # BrokerLifecycleManager.resendExponentialBackoff.
        self._resend_backoff = ExponentialBackoff(
            settings.registration_backoff_ms,
            settings.session_timeout_ms,
            jitter=settings.registration_backoff_jitter,
        )
        interval = settings.heartbeat_interval_ms
        phase = interval if heartbeat_rng is None else heartbeat_rng.uniform(0.0, interval)
        self._schedule(phase)

    @property
    def serving(self) -> bool:
        """Whether the broker accepts connections (RUNNING)."""
        return self.state is BrokerState.RUNNING

    # -- a process's life ------------------------------------------------------------------
    def stopped(self) -> None:
        """The process died (a crash or a power loss)."""
        self.state = BrokerState.NOT_RUNNING
        self.registered = False
        self.published = False
        self._publishing = False
        self._held = None
        self._fetch_sent_at = None
        self._in_flight = None
        self._timer.cancel(_COMMUNICATION)  # nothing scheduled survives the process
        self._due = False
        self._timeout_due = None
        self._next_immediate = False

    def resumed(self) -> None:
        """The paused process runs again: what fell due meanwhile goes now."""
        if self._timeout_due is not None:
            correlation, self._timeout_due = self._timeout_due, None
            self._heartbeat_timed_out(correlation)
        if self._due:
            self._due = False
            self._communicate()

    def started(self, incarnation: int) -> None:
        """The machine is up and a new process ``incarnation`` starts."""
        self.state = BrokerState.STARTING
        self.incarnation = incarnation
        self.broker_epoch = -1
        self._failed_attempts = 0
        work = self._work(False, incarnation)
        timer = work if work is not None else self.env.timeout(self.settings.startup_ms)
        timer.callbacks.append(lambda _ev: self._initialised(incarnation))

    def _work(self, publish: bool, incarnation: int) -> simpy.Event | None:
        if self.startup_work is None:
            return None

        def alive() -> bool:
            return self.incarnation == incarnation and self.state is not BrokerState.NOT_RUNNING

        return self.startup_work.start_work(publish, alive)

    def _initialised(self, incarnation: int) -> None:
        if incarnation != self.incarnation or self.state is not BrokerState.STARTING:
            return
        self.state_log.record(self.broker, "process_started", incarnation=incarnation)
        self._register(incarnation)
        self.fetch_metadata()

    # -- the metadata log -------------------------------------------------------------------
    def fetch_metadata(self) -> None:
        """Fetch the metadata log (a snapshot), and again if no answer comes in time."""
        if self.state is BrokerState.NOT_RUNNING:
            return
        now = self.env.now
        if (
            self._fetch_sent_at is not None
            and now - self._fetch_sent_at < self.settings.metadata_fetch_timeout_ms
        ):
            return  # one in flight
        self._fetch_sent_at = now
        self._correlation += 1
        self.network.send(
            self.broker,
            self.controller,
            MetadataFetchRequest(self._correlation, self.broker),
            internal=True,
        )
        incarnation = self.incarnation
        timer = self.env.timeout(self.settings.metadata_fetch_timeout_ms)
        timer.callbacks.append(lambda _ev: self._fetch_timed_out(incarnation))

    def _fetch_timed_out(self, incarnation: int) -> None:
        if incarnation == self.incarnation and self._fetch_sent_at is not None:
            self._fetch_sent_at = None
            self.fetch_metadata()

    def hold_first_publish(self, apply: Callable[[], None]) -> bool:
        """A snapshot came to a broker that has not published yet: whether its first publish
        waits for its CPU (:class:`StartupWork`). If so, ``apply`` (applying this snapshot)
        runs once that is done, unless a later snapshot's replaced it meanwhile."""
        if self._publishing:
            self._held = apply
            return True
        work = self._work(True, self.incarnation)
        if work is None:
            return False
        self._publishing, self._held = True, apply
        work.callbacks.append(lambda _ev: self._first_publish_ready())
        return True

    def _first_publish_ready(self) -> None:
        apply, self._held = self._held, None
        self._publishing = False
        if apply is not None:
            apply()

    def snapshot_applied(self) -> None:
        """A snapshot of the metadata log was applied (for a starting broker: its first
        publish)."""
        self._fetch_sent_at = None
        if not self.published:
            self.published = True
            self.state_log.record(self.broker, "metadata_published", incarnation=self.incarnation)
            if self.state is BrokerState.RECOVERY:
                self._heartbeat_soon()  # ready to unfence: say so now

    # -- registration -----------------------------------------------------------------------
    def _register(self, incarnation: int) -> None:
        if (
            incarnation != self.incarnation
            or self.registered
            or self.state is BrokerState.NOT_RUNNING
        ):
            return
        if not self.running():
            # A paused process sends nothing; try again when the backoff is over.
            self._retry_registration(incarnation)
            return
        self._correlation += 1
        self.network.send(
            self.broker,
            self.controller,
            BrokerRegistrationRequest(self._correlation, self.broker, incarnation),
            internal=True,
        )
        # An answer that never comes (lost, or the controller is down) counts as a failure
        # once the backoff has passed.
        self._retry_registration(incarnation)

    def _retry_registration(self, incarnation: int) -> None:
        delay = self._resend_backoff.backoff(self._failed_attempts, self.rng)
        self._failed_attempts += 1
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _ev: self._register(incarnation))

    def on_registration_response(self, response: BrokerRegistrationResponse) -> None:
        if self.registered or self.state is BrokerState.NOT_RUNNING:
            return
        if response.error is not Errors.NONE:
            return  # the pending retry sends it again
        self.registered = True
        self.broker_epoch = response.broker_epoch
        self._failed_attempts = 0
        self.state_log.record(self.broker, "registered", broker_epoch=response.broker_epoch)
        self._schedule(0.0)  # at once, as Kafka does after a registration

    # -- heartbeats -------------------------------------------------------------------------
    def _schedule(self, delay_ms: float) -> None:
        """scheduleNextCommunication: the next heartbeat ``delay_ms`` from now (at once if
        one was asked for while another was in flight); replaces what was scheduled."""
        if self._next_immediate:
            delay_ms = 0.0
        self._next_immediate = False
        self._due = False
        self._timer.schedule(_COMMUNICATION, delay_ms, self._communicate)

    def _communicate(self) -> None:
        """CommunicationEvent: send a heartbeat, unless one is in flight (then the next goes
        as soon as its answer comes)."""
        if not self.registered:
            return
        if self.state is BrokerState.NOT_RUNNING:
            return
        if not self.running():
            self._due = True  # a stopped process runs its timers when it resumes
            return
        if self._in_flight is not None:
            self._next_immediate = True
            return
        self._send_heartbeat()

    def _send_heartbeat(self) -> None:
        self._correlation += 1
        correlation = self._correlation
        self._in_flight = correlation
        timer = self.env.timeout(self.settings.heartbeat_timeout_ms)
        timer.callbacks.append(lambda _ev: self._heartbeat_timed_out(correlation))
        self.network.send(
            self.broker,
            self.controller,
            BrokerHeartbeatRequest(
                self._correlation,
                self.broker,
                self.broker_epoch,
                self.metadata_offset(),
                want_fence=not self.published,
            ),
            internal=True,
        )

    def _heartbeat_timed_out(self, correlation: int) -> None:
        """No answer within the channel's timeout: the next heartbeat goes an interval later
        (scheduleNextCommunicationAfterFailure). A paused process notices when it resumes."""
        if self._in_flight != correlation:
            return
        if not self.running():
            self._timeout_due = correlation
            return
        self._in_flight = None
        self._schedule(self.settings.heartbeat_interval_ms)

    def on_heartbeat_response(self, response: BrokerHeartbeatResponse) -> bool:
        """Handle a heartbeat answer; True when the broker just became RUNNING."""
        if not self.registered or response.correlation_id != self._in_flight:
            return False  # an answer to a heartbeat that timed out, or of an older process
        self._in_flight = None
        interval = self.settings.heartbeat_interval_ms
        if response.error is Errors.STALE_BROKER_EPOCH:
            # The controller no longer knows this registration: register again.
            self.registered = False
            self._failed_attempts = 0
            self._register(self.incarnation)
            return False
        if response.error is not Errors.NONE:
            self._schedule(interval)
            return False
        if response.metadata_offset > self.metadata_offset():
            self.fetch_metadata()
        if self.state is BrokerState.STARTING:
            if response.caught_up:
                self.state = BrokerState.RECOVERY
                self.state_log.record(self.broker, "recovery")
            self._schedule(self.settings.catch_up_heartbeat_ms)
            return False
        self._schedule(interval)
        if self.state is BrokerState.RECOVERY and not response.fenced:
            self.state = BrokerState.RUNNING
            self.state_log.record(self.broker, "running")
            return True
        return False

    def _heartbeat_soon(self) -> None:
        """setReadyToUnfence: the next heartbeat at once (once the one in flight is answered)."""
        if self.registered and self.state is not BrokerState.RUNNING:
            self._schedule(0.0)
