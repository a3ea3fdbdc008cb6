"""Partition choice for a record: explicit partition, key hash, or sticky for null keys.

Keyed records go to ``toPositive(murmur2(key)) % numPartitions`` exactly as Kafka's
``BuiltInPartitioner`` computes it, so a history can be compared with a real client's.
Null-key records stick to one partition until ``batch.size`` bytes have been produced to it,
then move to a partition drawn at random (Kafka 3.3+, without the adaptive load weighting).
"""

from __future__ import annotations

from eosim.simulation.rng import RandomStream


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed 32-bit integer."""
    m = 0x5BD1E995
    r = 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: str, num_partitions: int) -> int:
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % num_partitions


class Partitioner:
    """Per-producer partitioner state (the sticky partition of each topic)."""

    def __init__(self, rng: RandomStream, batch_size: int, ignore_keys: bool = False) -> None:
        self.rng = rng
        self.batch_size = max(batch_size, 1)
        self.ignore_keys = ignore_keys
        self._sticky: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes produced)

    def partition(self, topic: str, key: str | None, num_partitions: int, size: int) -> int:
        if key is not None and not self.ignore_keys:
            return partition_for_key(key, num_partitions)
        current = self._sticky.get(topic)
        if current is None or current[1] >= self.batch_size:
            current = (self.rng.integer(num_partitions), 0)
        partition, produced = current
        self._sticky[topic] = (partition, produced + size)
        return partition
