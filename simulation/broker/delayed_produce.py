"""DelayedProduce: acks=all requests a leader holds until their partitions are replicated.

Mirrors Kafka's ``DelayedProduce`` and the ``DelayedOperationPurgatory[DelayedProduce]`` that
``ReplicaManager.appendRecords`` parks it in (keyed by partition). It holds a produce or a
marker write (:class:`DelayedWrite`, one status per partition, Kafka's
``ProducePartitionStatus``) until every partition is answered:

* replicated: the partition's high watermark passed the write (``Partition.
  checkEnoughReplicasReachOffset``: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
  below ``min.insync.replicas`` meanwhile), checked whenever the partition's high watermark may
  have moved (:meth:`DelayedProducePurgatory.check_and_complete`);
* NOT_LEADER_OR_FOLLOWER when leadership moves away (:meth:`DelayedProducePurgatory.fail_waits`);
* REQUEST_TIMED_OUT after the request's timeout (when the broker is paused then, on resume:
  :class:`~eosim.simulation.broker.delayed_operation.ExpiredOperationReaper`).

The broker's :class:`~eosim.simulation.broker.replica_manager.ReplicaManager` creates the
waits (``wait_for_replication``) and says when a partition's high watermark may have moved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from eosim.simulation.broker.delayed_operation import ExpiredOperationReaper
from eosim.simulation.broker.partition import Partition
from eosim.simulation.protocol import Errors, TopicPartition


@dataclass(eq=False, slots=True)
class _Wait:
    """One partition of a request waiting for replication (DelayedProduce's status)."""

    tp: TopicPartition
    required_offset: int
    error: Errors | None = None  # None while waiting


@dataclass(eq=False, slots=True)
class DelayedWrite:
    """An acks=all request (produce or markers) parked until every partition is answered."""

    waits: list[_Wait]
    on_complete: Callable[[dict[TopicPartition, Errors]], None]
    done: bool = False


class DelayedProducePurgatory:
    """One broker's acks=all requests waiting for replication, by partition."""

    def __init__(
        self,
        env: simpy.Environment,
        leader_partition: Callable[[TopicPartition], Partition | None],
        is_running: Callable[[], bool],
        reaper: ExpiredOperationReaper,
    ) -> None:
        """``leader_partition``: this broker's replica of a partition if it leads it, else
        None; ``is_running``: whether the broker is up and not paused; ``reaper``: where
        expiries wait while the broker is paused."""
        self.env = env
        self.leader_partition = leader_partition
        self.is_running = is_running
        self.reaper = reaper
        self._delayed: dict[TopicPartition, list[DelayedWrite]] = {}
        self.generation = 0  # bumped by a crash: timers of the old incarnation do nothing

    def wait_for_replication(
        self,
        waits: list[tuple[TopicPartition, int]],
        timeout_ms: float,
        on_complete: Callable[[dict[TopicPartition, Errors]], None],
    ) -> None:
        """Answer through ``on_complete`` once every ``(partition, end offset)`` is
        replicated, refused, or ``timeout_ms`` passed (DelayedProduce)."""
        delayed = DelayedWrite([_Wait(tp, offset) for tp, offset in waits], on_complete)
        for wait in delayed.waits:
            self._check_wait(wait)
        if self._try_complete(delayed):
            return
        for wait in delayed.waits:
            if wait.error is None:
                self._delayed.setdefault(wait.tp, []).append(delayed)
        generation = self.generation

        def expire(_ev: simpy.Event | None = None) -> None:
            if generation != self.generation or delayed.done:
                return
            if not self.is_running():
                # Paused: expired when the process runs again (DelayedOperation.run, from
                # the frozen reaper).
                self.reaper.defer(expire)
                return
            for wait in delayed.waits:
                if wait.error is None:
                    wait.error = Errors.REQUEST_TIMED_OUT
            self._try_complete(delayed)

        self.env.timeout(timeout_ms).callbacks.append(expire)

    def _check_wait(self, wait: _Wait) -> None:
        if wait.error is not None:
            return
        part = self.leader_partition(wait.tp)
        if part is None:
            wait.error = Errors.NOT_LEADER_OR_FOLLOWER
            return
        assert part.leader_state is not None
        answer = part.leader_state.replicated(wait.required_offset)
        if answer is not None:
            wait.error = answer

    def _try_complete(self, delayed: DelayedWrite) -> bool:
        if delayed.done or any(w.error is None for w in delayed.waits):
            return delayed.done
        delayed.done = True
        delayed.on_complete({w.tp: w.error for w in delayed.waits})  # type: ignore[misc]
        return True

    def check_and_complete(self, tp: TopicPartition) -> None:
        """``tp``'s high watermark (or ISR) may have moved: answer the waits it completes
        (DelayedOperationPurgatory.checkAndComplete)."""
        waiting = self._delayed.get(tp)
        if not waiting:
            return
        for delayed in list(waiting):
            for wait in delayed.waits:
                if wait.tp == tp:
                    self._check_wait(wait)
            self._try_complete(delayed)
        self._delayed[tp] = [d for d in waiting if not d.done]

    def fail_waits(self, tp: TopicPartition, error: Errors) -> None:
        """Answer every wait on ``tp`` with ``error`` (its leadership moved away)."""
        for delayed in self._delayed.pop(tp, []):
            for wait in delayed.waits:
                if wait.tp == tp and wait.error is None:
                    wait.error = error
            self._try_complete(delayed)

    def shutdown(self) -> None:
        """The broker crashed: every wait is gone, unanswered, and its timer does nothing."""
        self.generation += 1
        self._delayed = {}
