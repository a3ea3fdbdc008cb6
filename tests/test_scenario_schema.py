"""Scenario validation: every error names its path, and the closest valid key or range."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosim.simulation.scenario import (
    ConsumerSettings,
    ScenarioError,
    load_scenario,
    parse_duration_ms,
    parse_scenario,
    resolve,
)

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
name: s
cluster:
  brokers: 2
  topics: [{name: events, partitions: 3}]
producers:
  - name: p
    config: {acks: all}
    workload: {topic: events, records: 10}
"""


def error_for(text: str, *overrides: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(text, "s.yaml", overrides)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_good_scenario_loads():
    s = parse_scenario(GOOD, "s.yaml")
    assert s.topic_partitions() == {"events": 3}
    assert s.broker_names() == ["broker-0", "broker-1"]


def test_unknown_top_level_key_suggests_the_closest():
    msg = error_for(GOOD + "faultz: []\n")
    assert "faultz" in msg and "did you mean 'faults'" in msg and msg.startswith("s.yaml:9:")


def test_unknown_nested_key_names_the_path():
    msg = error_for(GOOD.replace("records: 10", "records: 10, rat: 5"))
    assert "producers[0].workload.rat" in msg and "'rate'" in msg


def test_unknown_kafka_key_suggests_the_kafka_name():
    msg = error_for(GOOD.replace("{acks: all}", "{ack: all}"))
    assert "producers[0].config.ack" in msg and "'acks'" in msg


def test_out_of_range_names_the_range():
    msg = error_for(GOOD, "cluster.brokers=0")
    assert "cluster.brokers" in msg and "greater than or equal to 1" in msg


def test_wrong_type():
    msg = error_for(GOOD, "producers.0.workload.records=many")
    assert "producers[0].workload.records" in msg


def test_unknown_topic_and_partition():
    assert "unknown topic 'nope'" in error_for(GOOD, "producers.0.workload.topic=nope")
    assert "must be in [0, 2]" in error_for(GOOD, "producers.0.workload.partition=3")


def test_fault_needs_a_known_node_and_a_time():
    fault = "faults:\n  - {kind: crash, nodes: [broker-9], at: 1s, duration: 1s}\n"
    assert "unknown node 'broker-9'" in error_for(GOOD + fault)
    fault = "faults:\n  - {kind: crash, nodes: [broker-1], duration: 1s}\n"
    assert "exactly one of 'at'" in error_for(GOOD + fault)


def test_expect_condition_syntax():
    assert "is not a condition" in error_for(GOOD + "expect: {duplicate: 'lots'}\n")


def test_invalid_yaml_names_the_line():
    msg = error_for(GOOD + "  bad: [unclosed\n")
    assert msg.startswith("s.yaml:") and "invalid YAML" in msg


def test_yaml_must_be_a_mapping():
    assert "mapping" in error_for("- just\n- a list\n")


def test_unsafe_yaml_tags_are_refused():
    assert "invalid YAML" in error_for("!!python/object/apply:os.system ['true']\n")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        (250, 250.0),
        ("250ms", 250.0),
        ("1.5s", 1500.0),
        ("2m", 120_000.0),
        ("1h", 3_600_000.0),
        ("7d", 604_800_000.0),
    ],
)
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


def test_bad_duration():
    with pytest.raises(ValueError):
        parse_duration_ms("soon")


@pytest.mark.parametrize("version", ["4.0", "3.9"])
def test_kafka_version_given_as_a_number(version):
    # `--set kafka.version=4.0` and `version: 4.0` in YAML arrive as floats.
    s = parse_scenario(GOOD, "s.yaml", [f"kafka.version={version}"])
    assert s.kafka.version == version
    assert "kafka.version" in error_for(GOOD, "kafka.version=3.0")


def test_cleanup_intervals_must_be_positive():
    assert "transaction_abort_check_interval" in error_for(
        GOOD, "cluster.transaction_abort_check_interval=0"
    )
    assert "transactional_id_cleanup_interval" in error_for(
        GOOD, "cluster.transactional_id_cleanup_interval=0"
    )


APPS = """\
name: s
cluster:
  topics: [{name: in, partitions: 5}, {name: out, partitions: 2}]
producers:
  - {name: p, config: {acks: 1}, workload: {topic: in, records: 10}}
transactional_producers:
  - {name: t, workload: {topic: out, transactions: 1}}
  - {name: u, config: {transactional.id: shared}, workload: {topic: out, transactions: 1}}
processors:
  - {name: a, input: {topic: in, group: g}, output: {topic: out}}
  - name: b
    input: {topic: in, group: g, isolation: read_uncommitted}
    output: {topic: out}
    transactional: false
    commit: auto
    auto_commit_interval: 2s
  - {name: sink, input: {topic: in}, output: {store: append}, transactional: false}
consumers:
  - {name: r, topic: out, isolation: read_uncommitted}
"""


def test_clients_are_resolved_once_with_the_injected_transactional_ids():
    s = parse_scenario(APPS, "s.yaml")
    clients = resolve(s)
    assert clients is s.clients
    producers = clients.producers
    assert list(producers) == ["p", "t", "u", "a", "b"]  # a sink has no producer
    assert [producers[n].transactional_id for n in producers] == [None, "t", "shared", "a", None]
    assert not producers["p"].enable_idempotence and clients.warnings == [
        "p: idempotence was not set explicitly and is disabled because of acks"
    ]
    consumers = clients.consumers
    assert consumers["a"] == ConsumerSettings(
        "read_committed", "g", None, (("in", 0), ("in", 2), ("in", 4))
    )
    assert consumers["b"] == ConsumerSettings(
        "read_uncommitted", "g", 2000.0, (("in", 1), ("in", 3))
    )
    assert consumers["sink"].group == "sink" and len(consumers["sink"].partitions) == 5
    assert consumers["r"] == ConsumerSettings(
        "read_uncommitted", None, None, (("out", 0), ("out", 1))
    )


@pytest.mark.parametrize(
    ("override", "where"),
    [
        (
            "transactional_producers.0.config.acks=1",
            "transactional_producers[0].config.acks",
        ),
        (
            "processors.0.config.retries=0",
            "processors[0].config.retries",
        ),
        (
            "producers.0.config.transactional.id=p",
            "producers[0].config.transactional.id",
        ),
        (
            "processors.1.config.transactional.id=b",
            "processors[1].config.transactional.id",
        ),
    ],
)
def test_client_config_errors_name_the_application_path(override, where):
    """The value came from ``--set``, so the error names the ``--set``, not the line of the
    file that held the value before."""
    assert error_for(APPS, override).startswith(f"s.yaml (--set {override}): {where}: ")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("duration=.inf", "duration: expected a finite duration"),
        ("cluster.request_time_ms=.nan", "cluster.request_time_ms: input should be a finite"),
        ("producers.0.workload.rate=.inf", "producers[0].workload.rate"),
        ("kafka.rules.transaction_version=3", "kafka.rules.transaction_version: expected an"),
        ("kafka.rules.transaction_partition_verification=1", "expected true or false"),
    ],
)
def test_non_finite_numbers_and_bad_rule_values_are_refused(override, message):
    assert message in error_for(GOOD, override)


def test_deeply_nested_yaml_is_one_line():
    assert (
        error_for("name: " + "[" * 3000 + "]" * 3000) == "s.yaml: invalid YAML: nested too deeply"
    )


@pytest.mark.parametrize(
    "key", ["transaction_abort_check_interval", "transactional_id_cleanup_interval"]
)
def test_coordinator_intervals_are_kafka_int_milliseconds(key):
    """TransactionStateManagerConfig defines them as int ms, atLeast(1)."""
    assert f"cluster.{key}: input should be greater than or equal to 1" in error_for(
        GOOD, f"cluster.{key}=0.5"
    )
    assert "less than or equal to 2147483647" in error_for(GOOD, f"cluster.{key}=30d")


TRANSACTIONAL = """\
name: s
cluster:
  brokers: 2
  topics: [{name: events, partitions: 3}]
transactional_producers:
  - name: tx
    workload: {topic: events, transactions: 2, size: 2}
"""


def test_a_default_recovery_of_hours_is_refused_until_asked_for():
    """An abort check interval of hours would make the default recovery window (the longest
    transaction.timeout.ms plus two abort checks) simulate hours of a quiet cluster after a
    short run: refused in one line naming the key, unless `recovery:` asks for it; without
    transactional applications there is no recovery window to refuse."""
    message = error_for(TRANSACTIONAL, "cluster.transaction_abort_check_interval=2147483647")
    assert message == (
        "s.yaml (--set cluster.transaction_abort_check_interval=2147483647): "
        "cluster.transaction_abort_check_interval: 2147483647 ms gives a default recovery "
        "window (the longest transaction.timeout.ms plus two abort checks) of 1193.1 h, above "
        "the 1 h a scenario gets without asking; set recovery: to simulate it"
    ), message
    ok = ["cluster.transaction_abort_check_interval=2147483647", "recovery=2s"]
    assert parse_scenario(TRANSACTIONAL, "s.yaml", ok).recovery_ms() == 2_000
    plain = parse_scenario(GOOD, "s.yaml", ["cluster.transaction_abort_check_interval=500h"])
    assert plain.recovery_ms() == 0
    # Kafka's defaults: transaction.timeout.ms 60 s plus two 10 s checks.
    assert parse_scenario(TRANSACTIONAL, "s.yaml").recovery_ms() == 80_000


def test_a_run_of_more_records_than_max_records_is_refused_up_front():
    """A run holds every record until it ends: ten million records (about 3 GB at the
    peak) are refused in one line naming max_records, unless it is raised; the
    transactional producers' records count as transactions times their size."""
    message = error_for(TRANSACTIONAL, "transactional_producers.0.workload.transactions=2000000",
                        "transactional_producers.0.workload.size=5")  # fmt: skip
    assert message == (
        "s.yaml:1: max_records: the workloads write "
        "10,000,000 records, above max_records (5,000,000); a run holds every record in memory "
        "until it ends (about 300 bytes each at its peak, docs/performance.md): raise "
        "max_records to run it"
    ), message
    raised = [
        "transactional_producers.0.workload.transactions=2000000",
        "transactional_producers.0.workload.size=5",
        "max_records=10000000",
    ]
    assert parse_scenario(TRANSACTIONAL, "s.yaml", raised).records() == 10_000_000
    assert parse_scenario(TRANSACTIONAL, "s.yaml").records() == 4


def test_a_random_fault_drawn_more_than_a_million_times_is_refused():
    """Random faults are drawn before the run; 10^15 per second used to exhaust memory."""
    fault = (
        "faults:\n  - {kind: crash, nodes: [p], rate: RATE, start: 1s, end: 11s, duration: 1ms}\n"
    )
    parse_scenario(GOOD + fault.replace("RATE", "100000"), "s.yaml")  # 10^6: allowed
    msg = error_for(GOOD + fault.replace("RATE", "100001"))
    assert msg.startswith("s.yaml:10: faults[0].rate: would fire about 1e+06 times")
    assert "faults[0].rate" in error_for(GOOD + fault.replace("RATE", "1.0e15"))
    no_end = fault.replace(", end: 11s", "").replace("RATE", "10")
    assert "faults[0].rate" in error_for(GOOD + no_end, "duration=30d")


# -- replicated partitions: cluster.config, topics[].config, replication_factor, faults -------
REPLICATED = """\
name: s
cluster:
  brokers: 3
  config:
    replica.lag.time.max.ms: 10000
    log.flush.interval.ms: 1000
  topics:
    - name: events
      partitions: 3
      replication_factor: 3
      config:
        unclean.leader.election.enable: false
        min.insync.replicas: 2
producers:
  - name: p
    config: {acks: all}
    workload: {topic: events, records: 10}
"""


def test_replicated_scenario_loads_with_its_configs():
    s = parse_scenario(REPLICATED, "s.yaml")
    topic = s.cluster.topics[0]
    assert s.replication_factors() == {"events": 3}
    assert s.cluster.topic_config(topic).min_insync_replicas == 2
    assert s.cluster.broker_config().log_flush_interval_ms == 1000


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # unknown keys: the closest known one
        (
            "min.insync.replicas: 2",
            "min.insync.replica: 2",
            "s.yaml:13: cluster.topics[0].config.min.insync.replica: unknown key "
            "'min.insync.replica'; did you mean 'min.insync.replicas'?",
        ),
        (
            "replica.lag.time.max.ms: 10000",
            "replica.lag.time.ms: 10000",
            "s.yaml:5: cluster.config.replica.lag.time.ms: unknown key 'replica.lag.time.ms'; "
            "did you mean 'replica.lag.time.max.ms'?",
        ),
        # a broker config under a topic
        (
            "min.insync.replicas: 2",
            "replica.lag.time.max.ms: 2",
            "s.yaml:13: cluster.topics[0].config.replica.lag.time.max.ms: "
            "'replica.lag.time.max.ms' is a broker config, not a topic config: "
            "set it in cluster.config",
        ),
        # bad values: the key's own path and line, Kafka's ConfigException text
        (
            "min.insync.replicas: 2",
            "min.insync.replicas: 0",
            "s.yaml:13: cluster.topics[0].config.min.insync.replicas: Invalid value 0 for "
            "configuration min.insync.replicas: value must be in [1, 2147483647]",
        ),
        (
            "unclean.leader.election.enable: false",
            "unclean.leader.election.enable: maybe",
            "s.yaml:12: cluster.topics[0].config.unclean.leader.election.enable: Invalid value "
            "maybe for configuration unclean.leader.election.enable: expected true or false",
        ),
        (
            "log.flush.interval.ms: 1000",
            "log.flush.interval.messages: abc",
            "s.yaml:6: cluster.config.log.flush.interval.messages: Invalid value abc for "
            "configuration log.flush.interval.messages: expected an integer in "
            "[1, 9223372036854775807]",
        ),
        (
            "log.flush.interval.ms: 1000",
            "min.insync.replicas: 0",
            "s.yaml:6: cluster.config.min.insync.replicas: Invalid value 0 for configuration "
            "min.insync.replicas: value must be in [1, 2147483647]",
        ),
        # replication factor
        (
            "replication_factor: 3",
            "replication_factor: 0",
            "s.yaml:10: cluster.topics[0].replication_factor: input should be greater than or "
            "equal to 1",
        ),
        (
            "replication_factor: 3",
            "replication_factor: 4",
            "s.yaml:10: cluster.topics[0].replication_factor: 4 is more than the 3 broker(s)",
        ),
        # relations between broker configs
        (
            "log.flush.interval.ms: 1000",
            "broker.heartbeat.interval.ms: 9000",
            "s.yaml:6: cluster.config.broker.heartbeat.interval.ms: 9000 must be below "
            "broker.session.timeout.ms (9000), or every broker is fenced between heartbeats",
        ),
        (
            "log.flush.interval.ms: 1000",
            "broker.session.timeout.ms: 1500",
            "s.yaml:6: cluster.config.broker.session.timeout.ms: 1500 must be above "
            "broker.heartbeat.interval.ms (2000)",
        ),
        (
            "log.flush.interval.ms: 1000",
            "replica.fetch.wait.max.ms: 20000",
            "s.yaml:6: cluster.config.replica.fetch.wait.max.ms: 20000 must be at most "
            "replica.lag.time.max.ms (10000); Kafka refuses to start a broker otherwise",
        ),
        (
            "log.flush.interval.ms: 1000",
            "replica.socket.timeout.ms: 400",
            "s.yaml:6: cluster.config.replica.socket.timeout.ms: 400 must be at least "
            "replica.fetch.wait.max.ms (500)",
        ),
    ],
)
def test_replication_config_errors_name_the_key_and_its_line(old, new, expected):
    assert old in REPLICATED
    assert error_for(REPLICATED.replace(old, new)) == expected


def test_replica_fetch_wait_may_equal_the_lag_time_and_socket_timeout():
    """KafkaConfig.validateValues requires replica.fetch.wait.max.ms <= replica.socket.timeout.ms
    and <= replica.lag.time.max.ms (equal is allowed)."""
    config = (
        "config: {replica.fetch.wait.max.ms: 10000, replica.socket.timeout.ms: 10000, "
        "replica.lag.time.max.ms: 10000}"
    )
    parse_scenario(GOOD.replace("brokers: 2", f"brokers: 2\n  {config}"), "s.yaml")


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            "{kind: power_loss, nodes: [p], at: 1s, duration: 1s}",
            "faults[0].nodes: power_loss applies to brokers only, not 'p'",
        ),
        (
            "{kind: power_loss, nodes: [broker-0, controller], at: 1s, duration: 1s}",
            "faults[0].nodes: power_loss applies to brokers only, not 'controller'",
        ),
        (
            "{kind: power_loss, nodes: [broker-0], groups: [[broker-1]], at: 1s, duration: 1s}",
            "faults[0]: 'groups' applies to partition faults only",
        ),
        (
            "{kind: crash, nodes: [controler], at: 1s, duration: 1s}",
            "faults[0]: unknown node 'controler'; did you mean 'controller'?",
        ),
    ],
)
def test_power_loss_and_controller_fault_errors(fault, expected):
    assert error_for(REPLICATED + f"faults:\n  - {fault}\n") == f"s.yaml:19: {expected}"


@pytest.mark.parametrize("kind", ["crash", "pause", "partition", "power_loss"])
def test_faults_on_the_controller_and_brokers_are_accepted(kind):
    node = "broker-1" if kind == "power_loss" else "controller"
    fault = f"faults:\n  - {{kind: {kind}, nodes: [{node}], at: 1s, duration: 1s}}\n"
    s = parse_scenario(REPLICATED + fault, "s.yaml")
    assert s.faults[0].nodes == [node]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "kafka.rules.truncation=foo",
            "kafka.rules.truncation: expected one of leader_epoch, leader_epoch_kip101, "
            "high_watermark",
        ),
        (
            "kafka.rules.hw_advances_under_min_isr=maybe",
            "kafka.rules.hw_advances_under_min_isr: expected true or false",
        ),
        ("cluster.os_writeback=-1", "cluster.os_writeback: a duration cannot be negative"),
        # A duration or a {min, max} range: the error is the one of the form written.
        ("cluster.crash_reset=-1", "cluster.crash_reset: a duration cannot be negative"),
        (
            "cluster.crash_reset={min: 50ms, max: 20ms}",
            "cluster.crash_reset: max must be at least min",
        ),
        ("cluster.crash_reset={min: 5ms}", "cluster.crash_reset.max: required key is missing"),
        (
            "cluster.coordinator_failover=true",
            "cluster.coordinator_failover: unknown key 'coordinator_failover'",
        ),
    ],
)
def test_replication_rules_and_durations_are_checked(override, expected):
    assert expected in error_for(REPLICATED, override)


def test_crash_reset_takes_a_duration_or_a_range():
    assert parse_scenario(GOOD, "s.yaml", ["cluster.crash_reset=40ms"]).cluster.crash_reset == 40
    ranged = parse_scenario(GOOD, "s.yaml", ["cluster.crash_reset={min: 20ms, max: 1s}"])
    assert (ranged.cluster.crash_reset.min, ranged.cluster.crash_reset.max) == (20, 1000)
    assert parse_scenario(GOOD, "s.yaml").cluster.crash_reset == 0
    # At its default the key is left out of the scenario's digest (and so of every history's).
    plain = parse_scenario(GOOD, "s.yaml").digest()
    assert parse_scenario(GOOD, "s.yaml", ["cluster.crash_reset=0"]).digest() == plain
    assert parse_scenario(GOOD, "s.yaml", ["cluster.crash_reset=40ms"]).digest() != plain


def test_set_overrides_reach_dotted_kafka_keys_of_the_cluster_and_its_topics():
    """apply_override matches a Kafka key with dots whole under cluster.config and
    cluster.topics[].config, whether or not the file has that mapping."""
    s = parse_scenario(
        GOOD,
        "s.yaml",
        [
            "cluster.brokers=3",
            "cluster.topics.0.replication_factor=3",
            "cluster.config.min.insync.replicas=2",
            "cluster.config.log.flush.interval.messages=1",
            "cluster.topics.events.config.unclean.leader.election.enable=true",
            "kafka.rules.truncation=high_watermark",
        ],
    )
    assert s.cluster.config == {"min.insync.replicas": 2, "log.flush.interval.messages": 1}
    assert s.cluster.topics[0].replication_factor == 3
    assert s.cluster.topics[0].config == {"unclean.leader.election.enable": True}
    assert s.protocol_rules().truncation == "high_watermark"
    assert "cluster.topics[0].replication_factor: 3 is more than the 2 broker(s)" in error_for(
        GOOD, "cluster.topics.0.replication_factor=3"
    )
    assert (
        "cluster.config.min.insync.replicas: Invalid value 0 for configuration "
        "min.insync.replicas" in error_for(GOOD, "cluster.config.min.insync.replicas=0")
    )


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        ("producers.0.config.acks=7", "producers[0].config.acks"),
        ("producers.producer-0.config.enable.idempotence=maybe", "enable.idempotence"),
        ("duration=-5", "duration"),
    ],
)
def test_an_error_in_an_overridden_value_names_the_set_not_a_line(override, shown):
    """The value came from --set, so the file's line (which holds the old value) would
    mislead; an error elsewhere in the file still names its line."""
    path = ROOT / "scenarios" / "idempotent.yaml"
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, [override])
    text = str(err.value)
    assert text.startswith(f"{path} (--set {override}): ")
    assert shown in text
    assert "\n" not in text


def test_an_error_outside_the_overridden_paths_still_names_its_line(tmp_path):
    text = (ROOT / "scenarios" / "idempotent.yaml").read_text().replace("acks: all", "acks: 7")
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=r"s\.yaml:\d+: producers\[0\]\.config\.acks"):
        load_scenario(tmp_path / "s.yaml", ["duration=30s"])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("broker-1", "s.yaml:6: producers[0].name: 'broker-1' is a broker's name"),
        ("controller", "s.yaml:6: producers[0].name: 'controller' is the controller's name"),
    ],
)
def test_an_application_cannot_take_a_node_name_of_the_cluster(name, expected):
    """An application named like a broker or the controller would share its network node
    and its fault target."""
    text = GOOD.replace("  - name: p\n", f"  - name: {name}\n", 1)
    assert f"name: {name}" in text
    assert error_for(text) == expected
