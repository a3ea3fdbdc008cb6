"""TransactionCoordinator decisions, the transaction log, and coordinator placement."""

from __future__ import annotations

import itertools

import pytest

from simulation.coordinator.transaction_coordinator import TransactionCoordinator
from simulation.coordinator.transaction_log import (
    TransactionLog,
    java_string_hash,
    kafka_abs,
    partition_for,
)
from simulation.coordinator.transaction_state import TransactionState as S
from simulation.protocol import Errors
from simulation.rules import VERSIONS

TP1, TP2 = ("out", 0), ("out", 1)


def coordinator(version: str = "4.0") -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(TransactionLog(), lambda: next(ids), VERSIONS[version])


def begin(c: TransactionCoordinator, txn="tx", now=0.0):
    r = c.init_producer_id(txn, 60_000, now)
    assert r.error is Errors.NONE
    assert c.add_partitions(txn, r.producer_id, r.epoch, [TP1, TP2], now) is Errors.NONE
    return r.producer_id, r.epoch


def test_java_string_hash_and_placement():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("") == 0
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5
    assert 0 <= partition_for("my-transactional-id") < 50


def test_init_creates_then_bumps_the_epoch():
    c = coordinator()
    first = c.init_producer_id("tx", 60_000, 0.0)
    again = c.init_producer_id("tx", 60_000, 1.0)
    assert (first.producer_id, first.epoch) == (1000, 0)
    assert (again.producer_id, again.epoch) == (1000, 1)
    assert c.init_producer_id("tx", 900_001, 2.0).error is Errors.INVALID_TRANSACTION_TIMEOUT


def test_add_partitions_checks_producer_id_and_epoch():
    c = coordinator()
    pid, epoch = begin(c)
    assert c.transactions["tx"].state is S.ONGOING
    assert c.add_partitions("tx", pid + 1, epoch, [TP1], 1.0) is Errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", pid, epoch - 1, [TP1], 1.0) is Errors.PRODUCER_FENCED


def test_init_during_an_open_transaction_fences_and_aborts_it():
    c = coordinator()
    pid, epoch = begin(c)
    r = c.init_producer_id("tx", 60_000, 5.0)
    meta = c.transactions["tx"]
    assert r.error is Errors.CONCURRENT_TRANSACTIONS
    assert set(r.abort_markers) == {TP1, TP2}
    assert meta.state is S.PREPARE_ABORT and meta.epoch == epoch + 1
    # The zombie (old epoch) is fenced.
    assert c.end_txn("tx", pid, epoch, True, 6.0).error is Errors.PRODUCER_FENCED
    assert c.init_producer_id("tx", 60_000, 6.0).error is Errors.CONCURRENT_TRANSACTIONS
    c.complete("tx", 7.0)
    retry = c.init_producer_id("tx", 60_000, 8.0)
    assert retry.error is Errors.NONE and retry.epoch > epoch + 1


def test_end_txn_rules():
    c = coordinator()
    pid, epoch = begin(c)
    r = c.end_txn("tx", pid, epoch, True, 1.0)
    assert r.error is Errors.NONE and set(r.markers) == {TP1, TP2}
    assert c.end_txn("tx", pid, epoch, True, 2.0).error is Errors.CONCURRENT_TRANSACTIONS
    assert c.end_txn("tx", pid, epoch, False, 2.0).error is Errors.INVALID_TXN_STATE
    c.complete("tx", 3.0)
    assert c.transactions["tx"].state is S.COMPLETE_COMMIT
    # A retry of the same outcome after completion succeeds (the response may have been lost).
    retry = c.end_txn("tx", pid, epoch, True, 4.0)
    assert retry.error is Errors.NONE and retry.markers == ()
    assert c.end_txn("tx", pid, epoch, False, 4.0).error is Errors.INVALID_TXN_STATE


@pytest.mark.parametrize(("version", "stale_end_ends_next"), [("3.9", True), ("4.0", False)])
def test_stale_end_txn_and_transaction_versions(version, stale_end_ends_next):
    c = coordinator(version)
    pid, epoch = begin(c)
    assert c.end_txn("tx", pid, epoch, True, 1.0).error is Errors.NONE
    c.complete("tx", 2.0)
    meta = c.transactions["tx"]
    assert meta.epoch == (epoch + 1 if version == "4.0" else epoch)
    # The next transaction starts with the coordinator's current epoch.
    assert c.add_partitions("tx", pid, meta.epoch, [TP1], 3.0) is Errors.NONE
    # A delayed duplicate of the first transaction's EndTxn(commit) arrives now.
    stale = c.end_txn("tx", pid, epoch, True, 4.0)
    if stale_end_ends_next:  # TV1: it commits the second transaction prematurely
        assert stale.error is Errors.NONE and stale.markers == (TP1,)
        assert meta.state is S.PREPARE_COMMIT
    else:  # TV2: the epoch names the transaction, so the stale request is fenced
        assert stale.error is Errors.PRODUCER_FENCED
        assert meta.state is S.ONGOING


def test_timeouts_and_failover_from_the_log():
    c = coordinator()
    begin(c, "slow", now=0.0)
    pid, epoch = begin(c, "fast", now=50_000.0)
    assert c.expired(70_000.0) == ["slow"]
    assert c.end_txn("fast", pid, epoch, True, 60_000.0).error is Errors.NONE
    successor = TransactionCoordinator(c.log, lambda: 9999, VERSIONS["4.0"])
    successor.load()
    assert successor.transactions["slow"].state is S.ONGOING
    assert successor.transactions["fast"].state is S.PREPARE_COMMIT
    assert set(successor.transactions["fast"].partitions) == {TP1, TP2}
