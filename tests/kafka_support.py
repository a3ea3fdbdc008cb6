"""What the tests that run a real Kafka share: the fetched Kafka, or a one-line skip."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from eosim.real.install import KafkaInstall, find_install, requirements_missing

KAFKA_VERSION = "4.1.1"


def installed_kafka() -> KafkaInstall:
    """The Kafka ``eosim kafka install`` fetched; without it (or without Java or Maven) the
    test skips, in one line saying what is missing. (EOSIM_REQUIRE_KAFKA turns that skip
    into a failure: tests/conftest.py.)"""
    missing = requirements_missing()
    if missing:
        pytest.skip(missing)
    install = find_install(KAFKA_VERSION, None, None)
    if install is None:
        pytest.skip(f"Kafka {KAFKA_VERSION} is not fetched: run eosim kafka install")
    return install


@contextmanager
def kafka_target(workdir: Path, network: Any = None) -> Iterator[Any]:
    """A :class:`KafkaTarget` on the fetched Kafka (started on first use, stopped after)."""
    from eosim.real.target import KafkaTarget

    install = installed_kafka()
    extra = {} if network is None else {"network": network}
    with KafkaTarget(install, workdir, **extra) as target:
        yield target
