"""eosim.real.cluster and eosim.real.netns: configs without Java; a real 3-broker cluster with
``-m kafka`` (one start for the module): serving, crash and restart, pause and resume, and a
partition and its heal when this machine has network namespaces."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from eosim.real import RealError, netns
from eosim.real.cluster import (
    _PATTERN,
    _TRACE_PATTERN,
    CONTROLLER_ID,
    ClusterError,
    RealCluster,
    node_id,
    node_properties,
    split_config,
    topic_configs,
)
from eosim.real.target import KafkaTarget
from eosim.simulation.faults import apply_fault, refusals
from eosim.simulation.scenario import Scenario


def _default_libs() -> Path:
    """EOSIM_KAFKA_LIBS, else the jars `eosim kafka install` fetched (as CI does), else the
    folder earlier versions of these tests used."""
    if "EOSIM_KAFKA_LIBS" in os.environ:
        return Path(os.environ["EOSIM_KAFKA_LIBS"])
    from eosim.real.install import find_install

    install = find_install("4.1.1", None, None)
    return install.libs if install is not None else Path("/tmp/kafkafetch/libs")


LIBS = _default_libs()


def _scenario(brokers: int = 3, config: Mapping[str, Any] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "real-cluster",
            "cluster": {
                "brokers": brokers,
                "config": dict(config or {}),
                "topics": [
                    {"name": "t", "partitions": 2, "replication_factor": min(3, brokers)},
                    {
                        "name": "u",
                        "partitions": 1,
                        "replication_factor": 1,
                        "config": {"min.insync.replicas": 1},
                    },
                ],
            },
            "producers": [{"name": "producer-0", "workload": {"topic": "t", "records": 10}}],
        }
    )


# --- configuration, no Java -------------------------------------------------------------------


def _addr(node: str) -> str:
    return {"controller": "10.0.0.100"}.get(node, f"10.0.0.{node_id(node)}")


PORTS = {"controller": 9093, "broker-0": 9092, "broker-1": 9092}


def test_broker_properties_take_the_scenario_configs_over_the_small_cluster_defaults() -> None:
    props = node_properties(
        "broker-1",
        2,
        {
            "min.insync.replicas": 2,
            "log.flush.interval.ms": None,
            "offsets.topic.replication.factor": 1,
        },
        _addr,
        PORTS,
        Path("/d"),
    )
    assert props["process.roles"] == "broker"
    assert props["node.id"] == "2"
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://10.0.0.2:9092"
    assert props["controller.quorum.voters"] == f"{CONTROLLER_ID}@10.0.0.100:9093"
    assert props["min.insync.replicas"] == "2"
    assert "log.flush.interval.ms" not in props  # None: Kafka's "never", left unset
    assert props["offsets.topic.replication.factor"] == "1"  # the scenario wins
    assert props["transaction.state.log.replication.factor"] == "2"  # min(3, brokers)
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["auto.create.topics.enable"] == "false"
    # Groups wait Kafka's initial rebalance delay, as the model's do.
    assert "group.initial.rebalance.delay.ms" not in props


def test_the_controller_is_node_100_with_the_scenario_configs_too() -> None:
    props = node_properties(
        "controller", 3, {"unclean.leader.election.enable": True}, _addr, PORTS, Path("/d")
    )
    assert props["process.roles"] == "controller"
    assert props["node.id"] == "100"
    assert props["listeners"] == "CONTROLLER://10.0.0.100:9093"
    assert "advertised.listeners" not in props
    # KRaft's controller elects leaders: it needs the unclean election default itself.
    assert props["unclean.leader.election.enable"] == "true"


def test_topic_level_broker_configs_move_onto_the_topics() -> None:
    broker, topic = split_config(
        {
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": False,
            "log.retention.ms": 60_000,
            "replica.lag.time.max.ms": 5_000,
        }
    )
    assert broker == {"replica.lag.time.max.ms": "5000"}
    assert topic == {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false",
        "retention.ms": "60000",
    }
    specs = topic_configs(_scenario(config={"min.insync.replicas": 2}))
    assert specs[0] == {
        "name": "t",
        "partitions": 2,
        "replication_factor": 3,
        "config": {"min.insync.replicas": "2"},
    }
    assert specs[1]["config"] == {"min.insync.replicas": "1"}  # the topic's own config wins


def test_a_cluster_serves_scenarios_with_the_same_brokers_and_broker_only_configs() -> None:
    base = _scenario(config={"replica.lag.time.max.ms": 5000, "min.insync.replicas": 2})
    cluster = RealCluster.for_scenario(base, LIBS, "/tmp/unused", network="loopback")
    assert cluster.config == {"replica.lag.time.max.ms": "5000"}
    assert cluster.compatible(base)
    assert cluster.compatible(_scenario(config={"replica.lag.time.max.ms": 5000}))
    assert not cluster.compatible(_scenario(config={"replica.lag.time.max.ms": 6000}))
    assert not cluster.compatible(_scenario(brokers=2, config={"replica.lag.time.max.ms": 5000}))
    assert not cluster.compatible(base, strict=True)  # min.insync.replicas was moved off


class _RecordingAdmin:
    """A TopicAdmin that records what it was asked and reports configs as given (or not)."""

    def __init__(self, report_configs: bool = True) -> None:
        self.asked: list[tuple[str, list[dict[str, Any]]]] = []
        self.report_configs = report_configs

    def recreate_topics(self, bootstrap: str, topics: Sequence[Mapping[str, Any]]) -> Any:
        self.asked.append(("recreate", [dict(t) for t in topics]))
        configs = {t["name"]: dict(t["config"]) if self.report_configs else {} for t in topics}
        return {"configs": configs}

    def place_internal(self, bootstrap: str, topics: Sequence[Mapping[str, Any]]) -> Any:
        self.asked.append(("place", [dict(t) for t in topics]))
        return {"reassigned": 0, "elected": 0}


def _led_as_asked(cluster: RealCluster, admin: _RecordingAdmin) -> None:
    """Make ``cluster.metadata`` answer that each partition is led by its first replica."""
    from eosim.real.cluster import ClusterMetadata, PartitionState

    def metadata(topics: Any = None, via: Any = None) -> ClusterMetadata:
        parts = {}
        for _, specs in admin.asked:
            for spec in specs:
                for p, replicas in enumerate(spec["assignment"]):
                    parts[(spec["name"], p)] = PartitionState(
                        spec["name"], p, 0, replicas[0], 0, tuple(replicas), tuple(replicas)
                    )
        return ClusterMetadata({}, 100, parts)

    cluster.metadata = metadata  # type: ignore[method-assign]


def test_topics_are_created_with_the_models_placement_and_configs() -> None:
    """Kafka places a new topic's replicas from a random broker; the real cluster asks for the
    model's placement (partition p on broker-p first), so that killing broker-0 kills the
    leader of the partitions the model's broker-0 leads, and it passes the topic's configs."""
    from eosim.real.cluster import model_assignment

    assert model_assignment(["broker-0", "broker-1", "broker-2"], "t", 4, 3) == [
        [1, 2, 3],
        [2, 3, 1],
        [3, 1, 2],
        [1, 2, 3],
    ]
    assert model_assignment(["broker-0", "broker-1", "broker-2"], "t", 2, 1) == [[1], [2]]
    admin = _RecordingAdmin()
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback", admin=admin)
    _led_as_asked(cluster, admin)
    cluster.recreate_topics(
        [
            {
                "name": "events",
                "partitions": 3,
                "replication_factor": 3,
                "config": {"min.insync.replicas": 2},
            }
        ]
    )
    ((kind, [spec]),) = admin.asked
    assert kind == "recreate"
    assert spec["assignment"] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert spec["config"] == {"min.insync.replicas": "2"}
    cluster.place_internal(["__transaction_state"])
    kind, [internal] = admin.asked[1]
    assert kind == "place" and internal["name"] == "__transaction_state"
    assert len(internal["assignment"]) == 50 and internal["assignment"][4] == [2, 3, 1]


def test_each_warm_up_leads_the_warm_up_topic_by_its_preferred_replicas_again() -> None:
    """A restarted broker leads none of the warm-up topic until the controller's 300 s
    preferred-leader tick, which then lands in the middle of a warm-up: the topic is created
    once per cluster, and every later warm-up first elects its preferred leaders."""
    from eosim.real.runner import WARMUP_TOPIC, ensure_warmup_topic

    admin = _RecordingAdmin()
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback", admin=admin)
    _led_as_asked(cluster, admin)
    ensure_warmup_topic(cluster)
    ensure_warmup_topic(cluster)
    assert [(kind, [t["name"] for t in specs]) for kind, specs in admin.asked] == [
        ("recreate", [WARMUP_TOPIC]),
        ("place", [WARMUP_TOPIC]),
    ]
    assert admin.asked[1][1][0]["assignment"] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def test_a_restarted_broker_serves_once_it_and_the_first_other_that_answers_list_it(
    monkeypatch,
) -> None:
    """A restarted broker counted as back only when the first live *process* among the others
    answered: in calibration case 4 broker-1 is still starting when broker-0 serves, so
    broker-0's ``served`` waited for broker-1's (both 26.5-36.8 s into the run, 10-26 s after
    broker-0's restart). Now the first other broker that answers decides, and with none
    answering the broker's own listing stands."""
    import eosim.real.cluster as real_cluster

    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback")
    cluster.log_binding = None
    alive = {"broker-0": True, "broker-1": True, "broker-2": False}
    listings: dict[str, tuple[int, ...] | None] = {"broker-0": (1,), "broker-1": None}
    monkeypatch.setattr(cluster, "_answers", lambda b: alive[b])

    def fetch(host, port, topics, timeout=None):
        asked = next(b for b in cluster.broker_names if cluster.ports[b] == port)
        listed = listings.get(asked)
        if listed is None:
            raise ConnectionRefusedError(f"{asked} is not listening yet")
        return real_cluster.ClusterMetadata({i: ("h", 1) for i in listed}, 1, {})

    monkeypatch.setattr(real_cluster, "fetch_metadata", fetch)
    assert cluster._serves("broker-0")  # broker-1 still starting, broker-2 down
    listings["broker-1"] = (2,)  # broker-1 answers and does not list broker-0 yet
    assert not cluster._serves("broker-0")
    listings["broker-1"] = (1, 2)
    assert cluster._serves("broker-0")
    listings["broker-0"] = (2,)  # broker-0 does not list itself: not unfenced
    assert not cluster._serves("broker-0")


def test_a_topic_config_kafka_did_not_take_is_an_error() -> None:
    """The admin once read ``configs`` where eosim wrote ``config``, and every real topic ran on
    the broker's defaults (min ISR 1, no unclean election) whatever the scenario said."""
    admin = _RecordingAdmin(report_configs=False)
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback", admin=admin)
    _led_as_asked(cluster, admin)
    topic = {"name": "events", "partitions": 1, "replication_factor": 3}
    with pytest.raises(
        ClusterError, match=r"events: min.insync.replicas is None on Kafka, not '2'"
    ):
        cluster.recreate_topics([{**topic, "config": {"min.insync.replicas": 2}}])
    cluster.recreate_topics([{**topic, "config": {}}])  # nothing asked, nothing to miss


def test_delete_records_asks_the_admin_for_each_partition_and_reports_each_answer() -> None:
    from eosim.real.cluster import ClusterMetadata, PartitionState

    asked: list[list[dict[str, Any]]] = []

    class Admin(_RecordingAdmin):
        def delete_records(self, bootstrap: str, records: Sequence[Mapping[str, Any]]) -> Any:
            asked.append([dict(r) for r in records])
            marks = [
                {"topic": "events", "partition": 0, "low_watermark": 7, "error": "NONE"},
                {
                    "topic": "events",
                    "partition": 1,
                    "low_watermark": -1,
                    "error": "OFFSET_OUT_OF_RANGE",
                },
            ]
            return {
                "low_watermarks": [
                    m for m in marks if m["partition"] in {r["partition"] for r in records}
                ]
            }

    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback", admin=Admin())
    parts = {("events", p): PartitionState("events", p, 0, 1, 0, (1,), (1,)) for p in (1, 0)}
    cluster.metadata = lambda topics=None, via=None: ClusterMetadata({}, 100, parts)  # type: ignore[method-assign]
    assert cluster.delete_records("events", None, -1) == [
        ("events-0", "NONE", 7),
        ("events-1", "OFFSET_OUT_OF_RANGE", -1),
    ]
    assert asked[0] == [
        {"topic": "events", "partition": 0, "offset": -1},
        {"topic": "events", "partition": 1, "offset": -1},
    ]
    assert cluster.delete_records("events", 0, 5) == [("events-0", "NONE", 7)]
    assert "delete_records" not in RealCluster.refuses


def test_the_request_log_is_at_debug_only_when_asked_for() -> None:
    """``request_log`` (benchmarks/real_request_log.py) turns Kafka's request logger to DEBUG,
    which logs every completed request with its times; a measured run keeps it at WARN."""
    quiet = RealCluster(LIBS, "/tmp/unused", 3, network="loopback").log4j()
    traced = RealCluster(LIBS, "/tmp/unused", 3, network="loopback", request_log=True).log4j()
    assert "logger.request.level = WARN" in quiet and "DEBUG" not in quiet
    assert "logger.request.level = DEBUG" in traced and "logger.request.level = WARN" not in traced
    # A trace's lines carry microseconds and the monotonic clock, the histories' clock.
    assert "pattern = [%d{yyyy-MM-dd HH:mm:ss,nnnnnn}] %p %m (%c) @%N%n" in traced
    assert "pattern = [%d] %p %m (%c)%n" in quiet
    assert traced.replace("DEBUG", "WARN").replace(_TRACE_PATTERN, _PATTERN) == quiet


def test_more_loggers_are_set_only_when_asked_for_and_checked() -> None:
    """``loggers`` (``real_request_log.py run --log``) adds Kafka loggers at levels of their
    own for a trace; a bad name or level is refused before anything starts."""
    quiet = RealCluster(LIBS, "/tmp/unused", 3, network="loopback").log4j()
    traced = RealCluster(
        LIBS,
        "/tmp/unused",
        3,
        network="loopback",
        loggers={"kafka.coordinator.transaction": "trace"},
    ).log4j()
    assert "extra" not in quiet
    assert traced.startswith(quiet)
    assert traced.endswith(
        "logger.extra0.name = kafka.coordinator.transaction\nlogger.extra0.level = TRACE\n"
    )
    for bad in ({"kafka.coordinator": "LOUD"}, {"kafka coordinator": "TRACE"}, {"": "DEBUG"}):
        with pytest.raises(ValueError, match="a logger's name and one of TRACE"):
            RealCluster(LIBS, "/tmp/unused", 3, network="loopback", loggers=bad)
        # ... and by the target that builds the cluster on its first run, when it is made
        with pytest.raises(ValueError, match="a logger's name and one of TRACE"):
            KafkaTarget(SimpleNamespace(), "/tmp/unused", loggers=bad)  # type: ignore[arg-type]


def test_refused_fault_kinds_give_one_line_each() -> None:
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network="loopback")
    lines = refusals(
        ["power_loss", "delay", "crash", "partition", "loss", "power_loss"],
        cluster.refuses,
        "kafka",
    )
    assert [line.split()[0] for line in lines] == ["power_loss", "delay", "partition", "loss"]
    assert all("\n" not in line and len(line) < 200 for line in lines)
    assert "unsynced writes" in lines[0]
    assert "no network namespaces here" in lines[1]
    with pytest.raises(ClusterError, match="power_loss faults cannot run"):
        cluster.power_loss("broker-0")
    with pytest.raises(ClusterError, match="delay faults cannot run on this cluster: no network"):
        cluster.disturb(["broker-0"], [], 100.0, 0.0)
    with pytest.raises(ClusterError, match="partition faults cannot run on this cluster"):
        cluster.partition([["broker-0"]])
    with pytest.raises(ValueError, match="not a node of this cluster"):
        cluster.crash("producer-0")


def test_delay_runs_with_namespaces_and_is_refused_in_one_line_without_a_delayer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if this machine had namespaces (nothing is set up until start()).
    monkeypatch.setattr(netns, "_probe", None)
    monkeypatch.setattr(netns, "_delay_probe", None)
    net = netns.Network(prefix="eosd", subnet="10.78.0")
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network=net)
    assert "delay" not in cluster.refuses
    assert refusals(["delay", "loss", "partition"], cluster.refuses, "kafka") == []
    # Namespaces, but no iptables-nft (or no NFQUEUE): delay alone is refused, saying why.
    monkeypatch.setattr(netns, "_delay_probe", "no 'iptables-nft' command on the PATH")
    cluster = RealCluster(LIBS, "/tmp/unused", 3, network=net)
    (line,) = refusals(["delay", "loss", "partition"], cluster.refuses, "kafka")
    assert line == (
        "delay faults cannot run on kafka: packets cannot be queued to a delayer here "
        "(no 'iptables-nft' command on the PATH)"
    )
    with pytest.raises(ClusterError, match="delay faults cannot run on this cluster: packets"):
        cluster.disturb(["broker-0"], [], 100.0, 0.0)


def test_a_second_network_of_one_prefix_is_refused_before_it_touches_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # setup() deletes the namespaces and bridge of its prefix that it finds: run while a sweep
    # ran, a real-cluster test once tore the sweep's cluster down. The machine's lock stops it
    # before any command runs, naming the holder; the kernel's lock goes with its holder.
    commands: list[list[str]] = []
    monkeypatch.setattr(netns, "_run", lambda cmd, stdin=None: commands.append(list(cmd)) or "")
    prefix = f"eoslock{os.getpid()}"
    first = netns.Network(prefix=prefix, subnet="10.79.0")
    second = netns.Network(prefix=prefix, subnet="10.79.0")
    first.setup(["broker-0"])
    assert commands
    commands.clear()
    with pytest.raises(netns.NetnsError) as refused:
        second.setup(["broker-0"])
    assert str(refused.value) == (
        f"another eosim real cluster (pid {os.getpid()}) uses the network namespaces "
        f"{prefix}-* on this machine: run one at a time (lock {netns.lock_path(prefix)})"
    )
    assert commands == []
    assert isinstance(refused.value, RealError)  # the CLI's one line, not a traceback
    first.teardown()
    second.setup(["broker-0"])  # free once the first is torn down
    second.teardown()
    netns.lock_path(prefix).unlink()


# --- a real cluster -------------------------------------------------------------------------

ADMIN_JAVA = """\
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.errors.TopicExistsException;

public class EosimTestAdmin {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        try (Admin admin = Admin.create(p)) {
            String name = a[1];
            Map<String, String> cfg = new HashMap<>();
            Map<Integer, List<Integer>> assign = new HashMap<>();
            for (int i = 4; i < a.length; i++) {
                String[] kv = a[i].split("=", 2);
                if (kv[0].equals("--assign")) {
                    String[] parts = kv[1].split(";");
                    for (int q = 0; q < parts.length; q++) {
                        List<Integer> ids = new ArrayList<>();
                        for (String id : parts[q].split(",")) ids.add(Integer.parseInt(id));
                        assign.put(q, ids);
                    }
                } else {
                    cfg.put(kv[0], kv[1]);
                }
            }
            if (admin.listTopics().names().get().contains(name)) {
                admin.deleteTopics(List.of(name)).all().get();
                while (admin.listTopics().names().get().contains(name)) Thread.sleep(100);
            }
            NewTopic topic = assign.isEmpty()
                ? new NewTopic(name, Integer.parseInt(a[2]), Short.parseShort(a[3]))
                : new NewTopic(name, assign);
            while (true) {
                try {
                    admin.createTopics(List.of(topic.configs(cfg))).all().get();
                    return;
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) throw e;
                    Thread.sleep(200);
                }
            }
        }
    }
}
"""


class _JavaTopicAdmin:
    """Kafka's Admin client through a tiny class compiled for these tests."""

    def __init__(self, classes: Path) -> None:
        self.classes = classes

    def recreate_topics(self, bootstrap: str, topics: Sequence[Mapping[str, Any]]) -> None:
        for t in topics:
            configs = [f"{k}={v}" for k, v in t["config"].items()]
            cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp"]
            cmd += [f"{LIBS}/*:{self.classes}", "EosimTestAdmin", bootstrap, t["name"]]
            cmd += [str(t["partitions"]), str(t["replication_factor"]), *configs]
            if "assignment" in t:
                cmd.append("--assign=" + ";".join(",".join(map(str, r)) for r in t["assignment"]))
            subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def _kafka_missing() -> str | None:
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "no java/javac on the PATH"
    if not list(LIBS.glob("kafka_2.13-*.jar")):
        return f"no Kafka jars in {LIBS} (set EOSIM_KAFKA_LIBS)"
    return None


def _until(what: str, check: Callable[[], bool], timeout: float = 40.0) -> float:
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)
    return time.monotonic() - began


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory):
    missing = _kafka_missing()
    if missing:
        pytest.skip(f"needs Java and the fetched Kafka: {missing}")
    classes = tmp_path_factory.mktemp("admin")
    (classes / "EosimTestAdmin.java").write_text(ADMIN_JAVA)
    subprocess.run(
        ["javac", "-cp", f"{LIBS}/*", "-d", str(classes), str(classes / "EosimTestAdmin.java")],
        check=True,
        timeout=120,
    )
    # A prefix and subnet of its own, so a cluster the owner runs at the same time is untouched.
    network: Any = (
        netns.Network(prefix="eosimt", subnet="10.79.0") if netns.available() else "loopback"
    )
    cluster = RealCluster(
        LIBS,
        tmp_path_factory.mktemp("cluster"),
        3,
        # Short timeouts, so a cut or stopped broker leaves the ISR within seconds.
        {
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 1000,
            "replica.lag.time.max.ms": 3000,
        },
        network=network,
        admin=_JavaTopicAdmin(classes),
    )
    try:
        took = cluster.start()
        print(
            f"\n3-broker cluster ({'netns' if cluster.net else 'loopback'}) started in {took:.1f} s"
        )
        cluster.recreate_topics(
            [{"name": "rf3", "partitions": 1, "replication_factor": 3, "config": {}}]
        )
        _until("rf3 has 3 in sync", lambda: _isr(cluster) == {1, 2, 3})
        yield cluster
    finally:  # also when the setup fails: no JVM or namespace left behind
        cluster.stop(graceful=False)


def _isr(cluster: RealCluster, via: str | None = None) -> set[int]:
    return set(cluster.metadata(["rf3"], via=via).partitions[("rf3", 0)].isr)


@pytest.mark.kafka
def test_a_three_broker_cluster_serves(kafka: RealCluster) -> None:
    meta = kafka.metadata()
    assert sorted(meta.brokers) == [1, 2, 3]
    assert kafka.bootstrap().count(",") == 2
    assert kafka.leaders(["rf3"])[("rf3", 0)] in kafka.broker_names
    for name in ["controller", *kafka.broker_names]:
        assert "Kafka Server started" in (kafka.work_dir / name / "server.log").read_text()


@pytest.mark.kafka
def test_a_crashed_broker_leaves_the_isr_and_rejoins_after_restart(kafka: RealCluster) -> None:
    end = apply_fault("crash", ["broker-2"], [], [], 0.0, 0.0, kafka)
    assert kafka.pid("broker-2") is None
    left = _until("broker-2 (id 3) leaves the ISR", lambda: 3 not in _isr(kafka))
    began = time.monotonic()
    end()  # restart: returns once the JVM is spawned
    kafka.wait_ready(["broker-2"])
    _until("the ISR is back to 3", lambda: _isr(kafka) == {1, 2, 3})
    print(
        f"\ncrash: out of the ISR after {left:.1f} s; back {time.monotonic() - began:.1f} s "
        "after the restart"
    )


@pytest.mark.kafka
def test_a_paused_broker_is_fenced_and_comes_back_on_resume(kafka: RealCluster) -> None:
    end = apply_fault("pause", ["broker-1"], [], [], 0.0, 0.0, kafka)
    try:
        pid = kafka.pid("broker-1")
        assert pid is not None
        # Stopped when pause returns (it failed in CI when it returned on sending SIGSTOP).
        assert Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "T"
        _until("broker-1 (id 2) leaves the ISR", lambda: 2 not in _isr(kafka))
    finally:
        end()  # a failure above must not leave the module's cluster paused
    assert Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "T"
    _until("the ISR is back to 3", lambda: _isr(kafka) == {1, 2, 3})


@pytest.mark.kafka
def test_a_partitioned_broker_drops_out_and_heal_restores_it(kafka: RealCluster) -> None:
    if kafka.net is None:
        pytest.skip(f"needs network namespaces and nft: {netns.unavailable_reason()}")
    end = apply_fault("partition", ["broker-0"], [], [], 0.0, 0.0, kafka)
    try:
        # The others (and the controller) lose broker-0: its session expires and it is fenced.
        _until(
            "broker-0 (id 1) is fenced and out of the ISR",
            lambda: (
                1 not in _isr(kafka, via="broker-1")
                and 1 not in kafka.metadata((), via="broker-1").brokers
            ),
        )
    finally:
        end()
    _until("the ISR is back to 3", lambda: _isr(kafka, via="broker-1") == {1, 2, 3})


@pytest.mark.kafka
def test_loss_rules_are_one_table_that_heal_removes(kafka: RealCluster) -> None:
    if kafka.net is None:
        pytest.skip(f"needs network namespaces and nft: {netns.unavailable_reason()}")
    handle = kafka.disturb(["broker-2"], [("broker-0", "broker-1")], 0.0, 0.25)

    def tables(node: str) -> str:
        cmd = [*kafka.net.command_prefix(node), "nft", "list", "ruleset"]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    try:
        assert "numgen random mod 1000000 < 250000" in tables("broker-2")
        assert "ip daddr" in tables("broker-0")
        assert tables("broker-1") == ""
    finally:
        kafka.heal(handle)
    assert tables("broker-2") == tables("broker-0") == ""
    kafka.heal(handle)  # twice: nothing


def test_a_node_that_fails_to_format_is_one_clear_error(tmp_path: Path) -> None:
    cluster = RealCluster(LIBS, tmp_path / "c", 1, network="loopback", java="false")
    with pytest.raises(ClusterError) as err:
        cluster.start()
    assert str(err.value).startswith("controller: kafka.tools.StorageTool format failed (exit 1)")
    assert "\n" not in str(err.value)


@pytest.mark.kafka
def test_a_broker_that_exits_at_start_is_named_with_its_log_tail(tmp_path: Path) -> None:
    missing = _kafka_missing()
    if missing:
        pytest.skip(f"needs Java and the fetched Kafka: {missing}")
    # The broker's port taken: its socket server cannot bind and kafka.Kafka exits.
    bad = RealCluster(LIBS, tmp_path / "bad", 1, network="loopback", start_timeout=60)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", bad.ports["broker-0"]))
        taken.listen()
        with pytest.raises(ClusterError) as err:
            bad.start()
    first = str(err.value).splitlines()[0]
    assert first.startswith("broker-0 exited (code 1) before it served (")
    assert "Socket server failed to bind" in first
    assert f"; log {bad.work_dir}/broker-0/server.log" in first
    assert all(n.process is None for n in bad.nodes.values())


def test_metadata_v7_is_read_from_the_wire() -> None:
    """fetch_metadata against a canned MetadataResponse v7 (brokers, controller, one topic)."""
    import struct
    import threading

    from eosim.real.cluster import fetch_metadata

    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    def ints(*values: int) -> bytes:
        return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)

    body = struct.pack(">ii", 1, 0)  # correlation id, throttle
    body += struct.pack(">i", 2)
    body += struct.pack(">i", 1) + s("h1") + struct.pack(">i", 9092) + struct.pack(">h", -1)
    body += struct.pack(">i", 3) + s("h3") + struct.pack(">i", 9094) + struct.pack(">h", -1)
    body += s("cid") + struct.pack(">i", 3)
    body += struct.pack(">i", 1) + struct.pack(">h", 0) + s("t") + b"\x00"
    body += struct.pack(">i", 1) + struct.pack(">hiii", 0, 0, 3, 7)
    body += ints(1, 2, 3) + ints(3, 1) + ints(2)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seen: list[bytes] = []

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            seen.append(conn.recv(size))
            conn.sendall(struct.pack(">i", len(body)) + body)

    thread = threading.Thread(target=answer)
    thread.start()
    meta = fetch_metadata("127.0.0.1", server.getsockname()[1], ["t"])
    thread.join()
    server.close()
    assert seen[0][:4] == struct.pack(">hh", 3, 7)  # Metadata, version 7
    assert meta.brokers == {1: ("h1", 9092), 3: ("h3", 9094)}
    assert meta.controller == 3
    state = meta.partitions[("t", 0)]
    assert (state.leader, state.leader_epoch, state.replicas, state.isr) == (
        3,
        7,
        (1, 2, 3),
        (3, 1),
    )


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """StorageTool reads an id that starts with '-' as an option and the format fails: one
    random id in 64 does (URL-safe base64 of a first byte 0xF8-0xFB). new_cluster_id draws
    again, as Kafka's Uuid.randomUuid does."""
    import uuid

    from eosim.real import cluster

    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(cluster.uuid, "uuid4", lambda: next(drawn))
    text = cluster.new_cluster_id()
    assert text == "AQEBAQEBAQEBAQEBAQEBAQ" and not text.startswith("-")
