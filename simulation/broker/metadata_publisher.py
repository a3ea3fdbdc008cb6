"""How a broker takes in the controller's metadata: Kafka's ``BrokerMetadataPublisher`` (with
the ``MetadataLoader`` in front of it), which replays each metadata delta into the
``ReplicaManager`` (``applyDelta``: roles, leaders, ISR) and tells the
``BrokerLifecycleManager`` when a starting broker has caught up (its first publish may wait
for its CPU first: :meth:`BrokerLifecycleManager.hold_first_publish`).
A standalone broker (no controller, no lifecycle) applies every delta it is sent.
"""

from __future__ import annotations

from eosim.simulation.broker.lifecycle import BrokerLifecycleManager
from eosim.simulation.broker.replica_manager import ReplicaManager
from eosim.simulation.protocol import MetadataDelta


class BrokerMetadataPublisher:
    """Replays the controller's metadata into ``replica_manager`` (see the module docstring)."""

    def __init__(
        self, replica_manager: ReplicaManager, lifecycle: BrokerLifecycleManager | None
    ) -> None:
        self.replica_manager = replica_manager
        self.lifecycle = lifecycle

    def on_delta(self, delta: MetadataDelta) -> None:
        """Replay the controller's metadata (the broker's metadata publisher). A starting
        broker applies nothing until a snapshot brings it up to date (its first publish); a
        broker that finds a record missing fetches a snapshot rather than skip it."""
        rm = self.replica_manager
        lifecycle = self.lifecycle
        if lifecycle is not None and not delta.snapshot:
            if not lifecycle.published:
                return
            if delta.offset > rm.metadata_offset + 1:
                lifecycle.fetch_metadata()
                return
        if (
            lifecycle is not None
            and delta.snapshot
            and not lifecycle.published
            and lifecycle.hold_first_publish(lambda: self._apply(delta))
        ):
            return  # the first publish loads the logs first
        self._apply(delta)

    def _apply(self, delta: MetadataDelta) -> None:
        self.replica_manager.apply_metadata(
            delta.offset, delta.partitions, delta.snapshot, delta.fenced
        )
        if self.lifecycle is not None and delta.snapshot:
            self.lifecycle.snapshot_applied()
