"""AlterPartitionManager: a leader's ISR changes and their AlterPartition requests.

Mirrors Kafka's ``AlterPartitionManager`` (one AlterPartition in flight per partition, sent to
the controller, its answer handled as ``Partition.handleAlterPartitionError`` does) and the
``isr-expiration`` task that ``ReplicaManager.startup`` schedules (``maybeShrinkIsr``):

* **Shrink**: every ``replica.lag.time.max.ms / 2`` a leader drops followers that have not
  caught up within ``replica.lag.time.max.ms`` (:meth:`AlterPartitionManager._isr_expiration`,
  which also sends again an AlterPartition unanswered for the controller request timeout).
* **Expand**: a follower whose log reaches the HW joins again; the replica manager asks for it
  when it serves that follower's fetch (``Partition.maybeExpandIsr``), through
  :meth:`AlterPartitionManager.alter_isr`.
* **Answers** (:meth:`AlterPartitionManager.on_alter_partition_response`): accepted applies the
  ISR; refused returns to the committed ISR, waits for metadata, or is retried.

Each change takes effect only when the controller accepts it; until then the leader counts
the maximal ISR (:class:`~eosim.simulation.broker.partition.LeaderState`). New leadership or
new metadata for a partition ends whatever was in flight for it (:meth:`clear`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from eosim.simulation.broker.partition import Partition
from eosim.simulation.network import Network
from eosim.simulation.protocol import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    Errors,
    TopicPartition,
)
from eosim.simulation.rng import RandomStream

# Partition.handleAlterPartitionError: the controller says the change was not applied ...
_ALTER_NOT_APPLIED = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})
# ... or the leader's state is out of date and only new metadata can settle it.
_ALTER_AWAIT_METADATA = frozenset(
    {
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NEW_LEADER_ELECTED,
    }
)


class AlterPartitionManager:
    """One broker's ISR changes: the expiration task and the AlterPartitions in flight."""

    def __init__(
        self,
        env: simpy.Environment,
        broker: str,
        network: Network,
        replica_lag_time_max_ms: float,
        controller_request_timeout_ms: float,
        partitions: dict[TopicPartition, Partition],
        is_running: Callable[[], bool],
        next_correlation: Callable[[], int],
        isr_changed: Callable[[Partition], None],
        isr_rng: RandomStream | None = None,
    ) -> None:
        """``partitions``: the broker's replicas (the replica manager's own dict, read as it
        changes); ``is_running``: whether the broker is up and not paused;
        ``next_correlation``: the broker's next correlation id for its own requests;
        ``isr_changed``: told when an answer changed a partition's ISR (its HW and the
        requests waiting on it may move); ``isr_rng``: draws the phase of the ISR expiration
        task (see :meth:`_isr_expiration`; None: no phase)."""
        self.env = env
        self.broker = broker
        self.network = network
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # How long an AlterPartition may go unanswered before it is sent again.
        self.controller_request_timeout_ms = controller_request_timeout_ms
        self.partitions = partitions
        self.is_running = is_running
        self.next_correlation = next_correlation
        self.isr_changed = isr_changed
        self.isr_rng = isr_rng
        self._alter_in_flight: dict[TopicPartition, tuple[int, float]] = {}
        self._isr_task_started = False
        self.generation = 0  # bumped by a crash: the old task stops

    def clear(self, tp: TopicPartition) -> None:
        """New leadership or metadata for ``tp``: forget its AlterPartition in flight."""
        self._alter_in_flight.pop(tp, None)

    # -- ISR shrink: the isr-expiration task ----------------------------------------------
    def start_isr_expiration(self) -> None:
        if self._isr_task_started:
            return
        self._isr_task_started = True
        self.env.process(self._isr_expiration())

    def _isr_expiration(self):  # type: ignore[no-untyped-def]
        """Kafka's ``isr-expiration`` task (ReplicaManager.startup schedules maybeShrinkIsr
        every ``replica.lag.time.max.ms / 2`` from the broker's start), so a follower that
        stopped fetching leaves the ISR between 1 and 1.5 times ``replica.lag.time.max.ms``
        after its last catch-up, depending on where the task's period happens to fall. The
        broker's start is not part of a scenario (a real cluster started long before the run,
        or restarted a startup time before it leads again), so the task's phase is drawn,
        uniform over one period, each time the task starts."""
        interval = self.replica_lag_time_max_ms / 2
        generation = self.generation
        phase = interval * self.isr_rng.random() if self.isr_rng is not None else 0.0
        first = True
        while generation == self.generation:
            yield self.env.timeout(phase if first and phase > 0.0 else interval)
            first = False
            if generation != self.generation:
                return
            if not self.is_running():
                continue
            now = self.env.now
            for tp in sorted(self.partitions):
                part = self.partitions[tp]
                state = part.leader_state
                if state is None:
                    continue
                out = state.out_of_sync_replicas(part.log_end_offset, now)
                if out:
                    self.alter_isr(part, state.isr - set(out))  # type: ignore[arg-type]
                else:
                    self._resend_stale_alter(part)

    # -- AlterPartition -----------------------------------------------------------------
    def alter_isr(self, part: Partition, isr: frozenset[Any]) -> None:
        """Propose ``isr`` for ``part`` to the controller, unless a change is pending."""
        state = part.leader_state
        assert state is not None
        if state.pending_isr is not None:
            return
        state.propose_isr(isr)
        self._send_alter(part)

    def _send_alter(self, part: Partition) -> None:
        state = part.leader_state
        assert state is not None and state.pending_isr is not None
        ordered = tuple(r for r in part.replicas if r in state.pending_isr)
        correlation = self.next_correlation()
        self._alter_in_flight[part.tp] = (correlation, self.env.now)
        request = AlterPartitionRequest(
            correlation,
            self.broker,
            part.tp,
            part.leader_epoch,
            part.partition_epoch,
            ordered,
        )
        self.network.send(self.broker, CONTROLLER, request, internal=True)

    def _resend_stale_alter(self, part: Partition) -> None:
        sent = self._alter_in_flight.get(part.tp)
        if sent is not None and self.env.now - sent[1] >= self.controller_request_timeout_ms:
            self._send_alter(part)

    def on_alter_partition_response(self, response: AlterPartitionResponse) -> None:
        """The controller's answer (Partition.handleAlterPartitionError for errors): accepted
        applies the ISR; OPERATION_NOT_ATTEMPTED and INELIGIBLE_REPLICA (the controller says
        the change was not applied) return to the committed ISR; FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION and
        NEW_LEADER_ELECTED leave the change pending until new metadata replaces it; anything
        else is retried."""
        sent = self._alter_in_flight.get(response.tp)
        if sent is None or sent[0] != response.correlation_id:
            return
        part = self.partitions.get(response.tp)
        if part is None or part.leader_state is None:
            del self._alter_in_flight[response.tp]
            return
        error = response.error
        if error is Errors.NONE:
            del self._alter_in_flight[response.tp]
            if response.leader_epoch == part.leader_epoch:
                part.partition_epoch = response.partition_epoch
                part.leader_state.isr_committed(frozenset(response.isr))
            else:
                part.leader_state.isr_committed(None)
        elif error in _ALTER_NOT_APPLIED:
            del self._alter_in_flight[response.tp]
            part.leader_state.isr_committed(None)
        elif error in _ALTER_AWAIT_METADATA:
            # Stays pending (the in-flight entry too, so it is not sent again): the next
            # metadata for this partition settles it.
            self._alter_in_flight[response.tp] = (sent[0], float("inf"))
            return
        else:
            self._send_alter(part)  # retried
            return
        self.isr_changed(part)

    def shutdown(self) -> None:
        """The broker crashed: nothing in flight, and the task stops (it starts again when
        the broker next leads a replicated partition)."""
        self.generation += 1
        self._alter_in_flight = {}
        self._isr_task_started = False
