"""What a power loss keeps: Kafka's flush settings and the OS page-cache write-back."""

from __future__ import annotations

from eosim.simulation.broker.durability import LogDurability


def test_by_default_only_what_the_os_wrote_back_survives():
    d = LogDurability()  # Kafka's defaults: never flush
    d.appended(10, 1_000)
    d.appended(20, 20_000)
    assert d.durable_end(25_000) == 0  # nothing 30 s old yet
    assert d.durable_end(31_000) == 10  # the first append has been written back
    assert d.durable_end(60_000) == 20


def test_flush_interval_messages_one_makes_every_append_durable():
    d = LogDurability(flush_interval_messages=1)
    d.appended(10, 1_000)
    d.appended(11, 1_001)
    assert d.durable_end(1_001) == 11


def test_flush_interval_messages_counts_from_the_last_flush():
    """UnifiedLog.append: flush once logEndOffset - recoveryPoint >= the interval."""
    d = LogDurability(flush_interval_messages=100)
    d.appended(60, 1)
    assert d.durable_end(2) == 0
    d.appended(120, 3)
    assert d.durable_end(4) == 120
    d.appended(200, 5)
    assert d.durable_end(6) == 120


def test_flush_interval_ms_flushes_on_the_periodic_check():
    d = LogDurability(flush_interval_ms=1_000)
    d.appended(10, 100)
    d.tick(10, 500)
    assert d.durable_end(600) == 0
    d.tick(10, 1_000)
    assert d.durable_end(1_001) == 10


def test_truncation_forgets_what_is_gone():
    d = LogDurability(flush_interval_messages=1)
    d.appended(10, 1)
    d.truncated(4)
    assert d.durable_end(2) == 4
