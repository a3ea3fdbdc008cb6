"""The partitioner hashes keys exactly as Kafka's Java client does."""

from __future__ import annotations

import numpy as np
import pytest

from eosim.simulation.producer.partitioner import Partitioner, murmur2, partition_for_key
from eosim.simulation.rng import RandomStream

# Kafka's UtilsTest.testMurmur2 vectors.
VECTORS = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
]


@pytest.mark.parametrize(("text", "expected"), VECTORS)
def test_murmur2_matches_kafka(text, expected):
    assert murmur2(text.encode()) == expected


def test_partition_for_key_uses_the_positive_hash():
    assert partition_for_key("foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50


def _partitioner(batch_size=1000):
    return Partitioner(RandomStream(np.random.default_rng(0)), batch_size)


def test_keyed_records_always_go_to_the_same_partition():
    p = _partitioner()
    assert {p.partition("t", "k1", 6, 100) for _ in range(50)} == {partition_for_key("k1", 6)}


def test_null_keys_stick_until_batch_size_then_move():
    p = _partitioner(batch_size=1000)
    chosen = [p.partition("t", None, 1000, 100) for _ in range(30)]
    # 1000 bytes at 100 bytes a record: ten records per sticky partition.
    assert all(len(set(chosen[i : i + 10])) == 1 for i in range(0, 30, 10))
    assert len(set(chosen)) > 1


def test_ignore_keys_uses_sticky_partitioning():
    p = Partitioner(RandomStream(np.random.default_rng(0)), 10**6, ignore_keys=True)
    assert len({p.partition("t", f"k{i}", 100, 10) for i in range(20)}) == 1
