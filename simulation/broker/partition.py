"""Partition: one replica of a topic partition on one broker (Kafka's ``kafka.cluster.Partition``).

The leader's half is what this module decides: the in-sync replica set (ISR), the high
watermark (HW), and whether a write with ``acks=all`` may be answered. Followers fetch from
the leader; each fetch updates the leader's view of that follower (``ReplicaState``, as
Kafka's ``Replica.updateFetchStateOrThrow``), which can move the HW and bring the follower
back into the ISR. A follower that stops catching up for ``replica.lag.time.max.ms`` is
dropped from it.

The rules, each from Kafka's ``Partition``:

* HW = the smallest log end offset among the leader and every replica of the maximal ISR (or
  caught up and about to join it); it never moves back (``maybeIncrementLeaderHW``). Since
  KIP-966 (3.7) it does not move at all while the ISR is smaller than ``min.insync.replicas``
  (rule ``hw_advances_under_min_isr``, false in both presets).
* A follower is caught up if its log end equals the leader's, or it was fully caught up
  within the last ``replica.lag.time.max.ms`` (``ReplicaState.isCaughtUp``); the ISR shrinks
  to the caught-up ones (``maybeShrinkIsr``) and a follower whose log end reached the HW and
  the leader epoch's start offset joins it again (``maybeExpandIsr``). Both changes go to the
  controller (AlterPartition) and take effect once it accepts them; until then the maximal
  ISR (current plus joining) counts for the HW and for ``acks=all``.
* ``acks=all``: refused before the append with NOT_ENOUGH_REPLICAS when the ISR is smaller
  than ``min.insync.replicas`` (``appendRecordsToLeader``); once the HW passes the batch it is
  answered, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR has meanwhile shrunk below the
  minimum (``checkEnoughReplicasReachOffset``).

Pure logic with no SimPy; the broker owns the logs and the clock and calls in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulation.protocol import Errors


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one follower (Kafka's ``ReplicaState``)."""

    log_end_offset: int = 0
    last_fetch_leader_log_end_offset: int = 0
    # Never fetched, never caught up: Kafka starts these at 0 on a wall clock, long ago; the
    # simulated clock starts at 0, so "long ago" is minus infinity here.
    last_fetch_time_ms: float = float("-inf")
    last_caught_up_time_ms: float = float("-inf")

    def reset_for_new_leader(self, now: float, leader_end_offset: int, in_sync: bool) -> None:
        """Replica.resetReplicaState when this broker becomes leader: a follower in the ISR is
        taken as caught up now, any other as never; its log end is unknown until it fetches."""
        self.log_end_offset = -1
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now
        self.last_caught_up_time_ms = now if in_sync else float("-inf")

    def is_caught_up(self, leader_end_offset: int, now: float, max_lag_ms: float) -> bool:
        return (
            leader_end_offset == self.log_end_offset
            or now - self.last_caught_up_time_ms <= max_lag_ms
        )

    def update_fetch_state(self, fetch_offset: int, now: float, leader_end_offset: int) -> None:
        """Replica.updateFetchStateOrThrow: a fetch at ``fetch_offset`` arrived at ``now``."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = now


@dataclass(slots=True)
class LeaderState:
    """What a partition's leader holds beyond its log: ISR, HW and its followers' states."""

    broker: int
    replicas: tuple[int, ...]
    leader_epoch: int
    isr: frozenset[int]
    epoch_start_offset: int
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: float = 30_000.0
    hw_advances_under_min_isr: bool = False
    high_watermark: int = 0
    # An AlterPartition in flight: the ISR it asks for (Kafka's PendingPartitionChange).
    pending_isr: frozenset[int] | None = None
    followers: dict[int, ReplicaState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.replicas:
            if r != self.broker:
                self.followers.setdefault(r, ReplicaState())

    # -- ISR ------------------------------------------------------------------------------
    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR as the HW and acks=all see it while a change is in flight: the union."""
        return self.isr if self.pending_isr is None else self.isr | self.pending_isr

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    def out_of_sync_replicas(self, leader_end_offset: int, now: float) -> list[int]:
        """getOutOfSyncReplicas: ISR followers not caught up within the lag time."""
        if self.pending_isr is not None:
            return []
        return sorted(
            r
            for r in self.isr
            if r != self.broker
            and not self.followers[r].is_caught_up(
                leader_end_offset, now, self.replica_lag_time_max_ms
            )
        )

    def isr_to_expand(self, follower: int) -> bool:
        """needsExpandIsr: a follower outside the ISR whose log end reached the HW and the
        current leader epoch's start offset."""
        if self.pending_isr is not None or follower in self.isr:
            return False
        leo = self.followers[follower].log_end_offset
        return leo >= self.high_watermark and leo >= self.epoch_start_offset

    def propose_isr(self, isr: frozenset[int]) -> None:
        """An AlterPartition is sent with ``isr``; it applies when the controller accepts."""
        self.pending_isr = isr

    def isr_committed(self, isr: frozenset[int] | None) -> None:
        """The controller answered: ``isr`` now stands (None: the change was refused)."""
        if isr is not None:
            self.isr = isr
        self.pending_isr = None

    # -- high watermark --------------------------------------------------------------------
    def maybe_increment_high_watermark(self, leader_end_offset: int, now: float) -> bool:
        """maybeIncrementLeaderHW; True if the HW moved."""
        if self.is_under_min_isr and not self.hw_advances_under_min_isr:
            return False
        new_hw = leader_end_offset
        maximal = self.maximal_isr
        for r in sorted(self.followers):
            state = self.followers[r]
            joining = state.is_caught_up(leader_end_offset, now, self.replica_lag_time_max_ms)
            if state.log_end_offset < new_hw and (r in maximal or joining):
                new_hw = state.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def follower_fetched(
        self, follower: int, fetch_offset: int, leader_end_offset: int, now: float
    ) -> bool:
        """A follower's fetch at ``fetch_offset``: update its state, maybe the HW (True if
        it moved). The caller checks :meth:`isr_to_expand` afterwards."""
        self.followers[follower].update_fetch_state(fetch_offset, now, leader_end_offset)
        return self.maybe_increment_high_watermark(leader_end_offset, now)

    # -- acks=all --------------------------------------------------------------------------
    def append_error(self, required_acks: int) -> Errors:
        """appendRecordsToLeader's check before the append."""
        if required_acks == -1 and len(self.isr) < self.effective_min_isr:
            return Errors.NOT_ENOUGH_REPLICAS
        return Errors.NONE

    def replicated(self, required_offset: int) -> Errors | None:
        """checkEnoughReplicasReachOffset for a batch ending before ``required_offset``:
        None while waiting, else the answer for an acks=all produce."""
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) >= self.effective_min_isr:
            return Errors.NONE
        return Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
