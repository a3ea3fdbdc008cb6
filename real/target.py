"""Where a scenario runs: the model, or a real Kafka on this machine.

A target has a ``name`` (``model``, ``kafka``) and ``run(scenario, seed, trace, progress)``
returning a :class:`~eosim.simulation.runner.RunResult`; the checker above reads its history
the same way whichever ran it. :class:`KafkaTarget` keeps one cluster running across runs
(topics are recreated between runs) and starts a new one only when a scenario needs another
broker count or broker configuration. Use it as a context manager, so that its JVMs stop.

To add a target (a remote cluster, a container), implement :class:`Target` and give the
command line a name for it (``--target``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from eosim.simulation import run_scenario
from eosim.simulation.runner import Progress, RunResult
from eosim.simulation.scenario import Scenario

if TYPE_CHECKING:  # the real cluster's modules load only when a real run is asked for
    from eosim.real.cluster import RealCluster
    from eosim.real.install import KafkaInstall


class Target(Protocol):
    name: str

    def run(
        self,
        scenario: Scenario,
        seed: int,
        *,
        trace: bool = False,
        progress: Progress | None = None,
    ) -> RunResult: ...


class ModelTarget:
    """The model: a SimPy run, deterministic per seed."""

    name = "model"

    def run(
        self,
        scenario: Scenario,
        seed: int,
        *,
        trace: bool = False,
        progress: Progress | None = None,
    ) -> RunResult:
        return run_scenario(scenario, seed, trace=trace, progress=progress)


MODEL = ModelTarget()


class KafkaTarget:
    """Apache Kafka from ``install``, as a local cluster started on first use."""

    name = "kafka"

    def __init__(
        self,
        install: KafkaInstall,
        workdir: str | Path | None = None,
        *,
        keep: bool = False,
        network: Any = "auto",
        request_log: bool = False,
        loggers: Mapping[str, str] | None = None,
    ) -> None:
        self.install = install
        # RealCluster's ``request_log``: every node logs each request it completes (tracing),
        # and ``loggers``: more of Kafka's loggers at levels of their own.
        self.request_log = request_log
        self.loggers: dict[str, str] = {}
        if loggers:  # checked before anything is made, as RealCluster checks them
            from eosim.real.cluster import check_loggers

            self.loggers = check_loggers(loggers)
        # RealCluster's ``network``: "auto", "netns", "loopback", or a Network of its own
        # prefix and subnet (tests beside a cluster that uses the default ones).
        self.network = network
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="eosim-kafka-"))
        self.keep = keep
        self.cluster: RealCluster | None = None
        self.runs = 0

    def machine(self) -> dict[str, Any]:
        """The machine the cluster runs on (:func:`eosim.real.machine.fingerprint`)."""
        from eosim.real.machine import fingerprint

        return fingerprint()

    def refusals(self, scenario: Scenario) -> list[str]:
        """Why ``scenario`` cannot run here (empty: it can), without starting anything."""
        from eosim.real import netns
        from eosim.real.cluster import RealCluster, network_refuses
        from eosim.real.runner import refusals

        loopback = netns.unavailable_reason()
        if self.network == "loopback":
            loopback = "loopback was asked for"
        refuses = dict(RealCluster.refuses) | network_refuses(loopback)
        return refusals(scenario, refuses)

    def cluster_for(self, scenario: Scenario) -> RealCluster:
        from functools import partial

        from eosim.real import clients
        from eosim.real.cluster import ActionTopicAdmin, RealCluster

        if self.cluster is not None and not self.cluster.compatible(scenario):
            self.cluster.stop()
            self.cluster = None
        if self.cluster is None:
            index = len(list(self.workdir.glob("cluster-*")))
            self.cluster = RealCluster.for_scenario(
                scenario,
                self.install.libs,
                self.workdir / f"cluster-{index}",
                admin=ActionTopicAdmin(partial(clients.admin, self.install)),
                java=str(self.install.java),
                network=self.network,
                request_log=self.request_log,
                loggers=self.loggers,
            )
            self.cluster.start()
        return self.cluster

    def run(
        self,
        scenario: Scenario,
        seed: int,
        *,
        trace: bool = False,
        progress: Progress | None = None,
    ) -> RunResult:
        from eosim.real.runner import run_real

        cluster = self.cluster_for(scenario)
        self.runs += 1
        workdir = self.workdir / f"run-{self.runs:05d}"
        return run_real(scenario, seed, cluster, self.install, workdir, progress)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        if self._own_dir and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
