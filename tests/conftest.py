"""Fixtures shared by the test modules: one SparkSession for every Spark test."""

from __future__ import annotations

import math
import os
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs Java, Maven and the fetched Kafka")


@pytest.fixture(autouse=True)
def _jit_need_not_settle(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `kafka` test judges behaviour, not latency: a real run's warm-up load stops after
    its first slice instead of waiting for the brokers' JIT to settle (tests/test_warmth.py
    and test_real_referee.py judge the wait)."""
    if request.node.get_closest_marker("kafka") is None:
        return
    from eosim.real import runner

    monkeypatch.setattr(runner, "JIT_SETTLED_MS_PER_S", math.inf)


@pytest.fixture(scope="session")
def spark():
    """One embedded Spark for the whole run: 2 threads, each task may fail up to 3 times."""
    from eosim.analysis.sweep.engine import preflight, session_conf

    preflight(None)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2,3]").appName("eosim-tests")
    for key, value in session_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """Where the real Kafka must be there (CI sets EOSIM_REQUIRE_KAFKA=1), a `kafka` test
    that skipped fails instead, with its skip reason."""
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and os.environ.get("EOSIM_REQUIRE_KAFKA") == "1"
        and item.get_closest_marker("kafka") is not None
    ):
        report.outcome = "failed"
        report.longrepr = f"EOSIM_REQUIRE_KAFKA=1 but the test skipped: {report.longrepr}"
