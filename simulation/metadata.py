"""Cluster metadata: topics, partition counts and partition leaders.

Leadership is static until replication lands: partition ``p`` of every topic is led by
broker ``p % brokers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulation.protocol import TopicPartition


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: tuple[str, ...]
    topics: dict[str, int]

    def leader(self, tp: TopicPartition) -> str:
        return self.brokers[tp[1] % len(self.brokers)]

    def partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, n in self.topics.items() for p in range(n)]

    def partitions_led_by(self, broker: str) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if self.leader(tp) == broker]
