"""The loopback Kafka cluster the real-cluster benchmarks run on (not a benchmark itself)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eosim.real.cluster import RealCluster
from eosim.real.install import find_install, requirements_missing


@contextmanager
def loopback_cluster(prefix: str, brokers: int = 3) -> Iterator[RealCluster | None]:
    """A started ``brokers``-broker Kafka 4.1.1 (the one ``eosim kafka install`` fetched) on
    loopback, in a scratch directory named from ``prefix`` that goes with it; None, with the
    reason on standard error, when Kafka or Java is missing."""
    missing = requirements_missing()
    install = None if missing else find_install("4.1.1", None, None)
    if install is None:
        print(missing or "Kafka 4.1.1 is not fetched: run eosim kafka install", file=sys.stderr)
        yield None
        return
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with RealCluster(install.libs, work, brokers, network="loopback") as cluster:
            yield cluster
    finally:
        shutil.rmtree(work, ignore_errors=True)
