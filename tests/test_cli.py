"""The command line: outputs, exit codes, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from histories import Builder

from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.txn_checker import TXN_ANOMALIES
from eosim.analysis.version_order import INTERNAL_ANOMALIES
from eosim.cli import main

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "producers.0.workload.records=300"]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def scenario(name: str) -> str:
    return str(ROOT / "scenarios" / f"{name}.yaml")


def test_run_json_has_the_documented_fields(capsys):
    code, out, err = run_cli(capsys, "run", scenario("idempotent"), "--seed", "3", "--json", *SMALL)
    assert code == 0, err
    data = json.loads(out)
    for key in ("scenario", "seed", "sim_time_s", "events", "counts", "anomalies", "expect"):
        assert key in data
    assert set(data["counts"]) == {"sent", "acked", "failed", "indeterminate", "errored"}
    assert data["expect"]["met"] is True and data["expect"]["failures"] == []
    assert data["seed"] == 3 and data["counts"]["sent"] == 300


def test_unmet_expectation_exits_1(capsys):
    code, out, _ = run_cli(capsys, "run", scenario("idempotent"), "--set", "expect.acked=0", *SMALL)
    assert code == 1
    assert "EXPECTATIONS NOT MET" in out


def test_run_writes_history_that_check_reads(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    code, out, _ = run_cli(
        capsys, "run", scenario("at-least-once"), "--history", str(history), "--seed", "2"
    )
    assert code == 0 and history.exists()
    code, out, _ = run_cli(capsys, "check", str(history), "--json")
    result = json.loads(out)
    assert code == 1  # the at-least-once history has duplicates
    assert result["anomalies"]["duplicate"] > 0 and result["examples"]["duplicate"]


def test_check_clean_history_exits_0(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    run_cli(capsys, "run", scenario("idempotent"), "--history", str(history), *SMALL)
    code, out, _ = run_cli(capsys, "check", str(history))
    assert code == 0 and "duplicate" in out


def write_lines(path: Path, builder: Builder) -> str:
    path.write_text("\n".join(builder.lines()) + "\n")
    return str(path)


def anomaly_lines(out: str) -> dict[str, int | None]:
    """The `name  count` rows under `anomalies` (None for a check shown as not checked)."""
    rows = out.split("anomalies\n", 1)[1].splitlines()
    found: dict[str, int | None] = {}
    for row in rows:
        parts = row.split()
        if (
            not row.startswith("  ")
            or len(parts) < 2
            or not (parts[1].isdigit() or parts[1] == "-")
        ):
            break
        found[parts[0]] = None if parts[1] == "-" else int(parts[1])
    return found


def test_check_reports_a_torn_transaction_and_exits_1(capsys, tmp_path):
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.txn("p/0", "tx", ["c"], "fail")
    h.log("t", 0, ["a"])
    path = write_lines(tmp_path / "torn.jsonl", h)

    code, out, err = run_cli(capsys, "check", path)

    assert code == 1, err
    assert "txns       2 transactions (1 committed, 1 aborted, 0 unknown)\n" in out
    rows = anomaly_lines(out)
    # a transactional history shows every check but the within-op ones of histories read from
    # Jepsen; its transactions' cycles are judged (G0, G1c)
    shown = [name for name in ALL_ANOMALIES if name not in INTERNAL_ANOMALIES]
    assert list(rows) == shown
    # No replica lines nor group commits: replica_divergence and offset_rewind are shown as
    # not checked (None), not as 0.
    not_checked = ("replica_divergence", "offset_rewind")
    assert rows == {
        name: None if name in not_checked else int(name == "torn_transaction") for name in shown
    }
    assert "e.g. txn 0 of tx (ok, p/0), 2 values: a visible, b missing" in out

    code, out, _ = run_cli(capsys, "check", path, "--json")
    data = json.loads(out)
    assert code == 1 and list(data["anomalies"]) == list(ALL_ANOMALIES)
    assert data["anomalies"]["torn_transaction"] == 1 and data["examples"]["torn_transaction"]


def test_check_whole_transactions_exit_0(capsys, tmp_path):
    h = Builder()
    h.txn("p/0", "tx", ["a", "b"], "ok")
    h.log("t", 0, ["a", "b"])
    code, out, _ = run_cli(capsys, "check", write_lines(tmp_path / "whole.jsonl", h))
    assert code == 0
    # the within-op checks of histories read from Jepsen are left out of an eosim history's
    # table; a history with transactions has its cycles judged
    shown = [name for name in ALL_ANOMALIES if name not in INTERNAL_ANOMALIES]
    not_checked = {"replica_divergence": None, "offset_rewind": None}
    assert anomaly_lines(out) == dict.fromkeys(shown, 0) | not_checked


def test_check_without_transactions_sums_up_the_transactional_checks(capsys, tmp_path):
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.poll("c/0", [("t", 0, 0, "a")])
    h.poll("c/0", [("t", 0, 0, "a")])  # a re-read: nonmonotonic_poll, shown although plain
    h.log("t", 0, ["a"])
    code, out, _ = run_cli(capsys, "check", write_lines(tmp_path / "plain.jsonl", h))
    assert code == 1
    assert "txns" not in out
    rows = anomaly_lines(out)
    assert list(rows) == [
        "duplicate",
        "lost_write",
        "nonmonotonic_send",
        "inconsistent_offsets",
        "unseen",
        "nonmonotonic_poll",
        "offset_rewind",
        "replica_divergence",
        "offset_rewrite",
    ]
    assert rows["nonmonotonic_poll"] == 1
    quiet = len(TXN_ANOMALIES) - 1
    assert f"({quiet} transactional checks found nothing: no txn or process ops)" in out
    # No replica lines: the replica check had nothing to compare, which is not "0 found".
    assert rows["replica_divergence"] is None
    assert "not checked: no replica lines in the history" in out
    # Nor had the group check, without commits of a consumer group.
    assert rows["offset_rewind"] is None
    assert "not checked: no group commit lines in the history" in out


def test_check_counts_replica_divergence_when_the_history_has_replica_lines(capsys, tmp_path):
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.log("t", 0, ["a"], leader="broker-0", high_watermark=1)
    h.replica("t", 0, "broker-0", ["a"], leader=True)
    h.replica("t", 0, "broker-1", ["a"])
    code, out, _ = run_cli(capsys, "check", write_lines(tmp_path / "rf.jsonl", h))
    assert code == 0 and anomaly_lines(out)["replica_divergence"] == 0, out
    assert "not checked: no replica lines" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "no-such.yaml"], "no such file, and no shipped scenario of that name"),
        (["run", "SCEN", "--seed", "-4"], "--seed"),
        (["run", "SCEN", "--set", "producers.0.config.acks=7"], "acks"),
        (["run", "SCEN", "--set", "producers.0.config.enable.idempotance=true"], "did you mean"),
        (["run", "SCEN", "--set", "producers.nobody.config.acks=1"], "no item 'nobody'"),
        (["run", "SCEN", "--set", "expect.duplicates=0"], "did you mean 'duplicate'"),
        (["run", "SCEN", "--bogus"], "--bogus"),
        (["validate", "SCEN", "--set", "network.request_loss=1.5"], "network.request_loss"),
        (["check", "no-such.jsonl"], "cannot read"),
        (["sweep", "SCEN", "--runs", "0"], "--runs must be at least 1"),
        (["sweep", "SCEN", "--runs", "2", "--grid", "network.respons_loss=0,1"], "did you mean"),
        (["sweep", "SCEN", "--runs", "2", "--grid", "network.response_loss="], "empty value"),
        (["sweep", "SCEN", "--runs", "2", "--master", "spark://127.0.0.1:9"], "cannot reach"),
        # Each of these used to pass the sweep's checks and fail inside a Spark task.
        (["sweep", "SCEN", "--runs", "2", "--grid", "expect.dupe=0,1"], "did you mean 'duplicate'"),
        (
            [
                "sweep",
                "SCEN",
                "--runs",
                "2",
                "--vary",
                "producers.0.workload.records=uniform(9,20)",
            ],
            "a draw of 13.2016",
        ),
        (
            ["sweep", "SCEN", "--runs", "2", "--vary", "network.request_loss=normal(0.01,0.01)"],
            "a draw of -0.049999999999999996 (mean - 6 sd) is invalid",
        ),
        (["sweep", "SCEN", "--runs", "2", "--vary", "producers.0.config.acks=choice(all,7)"], "7"),
        (["sweep", "SCEN", "--runs", "2", "--vary", "seed=normal(1,-1)"], "sigma"),
        (["sweep", "SCEN", "--runs", "2", "--vary", "seed=randint(0,1" + "0" * 30 + ")"], "64-bit"),
        (["validate", "SCEN", "--set", "a\x1eb=1"], "a\\x1eb"),
        (["validate", "SCEN", "--set", "description=" + "[" * 2000], "cannot read value"),
        (["replay", "no-such-dir", "--run", "0:0"], "no manifest.json"),
        (["report", "no-such-dir"], "no manifest.json"),
        (["shrink", "SCEN", "--seed", "1", "--anomaly", "dupes"], "unknown"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # a sweep that got past its checks would write results/ here
    argv = [scenario("idempotent") if a == "SCEN" else a for a in argv]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message in lines[0]
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_bad_history_file_names_the_line(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"kind": "op", "id": 1, "type": "invoke", "f": "send", "process": "p", '
        '"time": 0, "value": {"topic": "t", "value": "a"}}\n{not json\n'
    )
    code, _, err = run_cli(capsys, "check", str(bad))
    assert code == 2 and ":2:" in err and len(err.strip().splitlines()) == 1


def test_bad_input_leaves_existing_history_untouched(capsys, tmp_path):
    history = tmp_path / "h.jsonl"
    history.write_text("precious\n")
    code, _, _ = run_cli(
        capsys,
        "run",
        scenario("idempotent"),
        "--history",
        str(history),
        "--set",
        "producers.0.config.acks=7",
    )
    assert code == 2
    assert history.read_text() == "precious\n"


def test_history_into_missing_directory_is_bad_input(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "run", scenario("idempotent"), "--history", str(tmp_path / "no" / "h.jsonl")
    )
    assert code == 2 and "does not exist" in err


def test_validate_ok(capsys):
    code, out, _ = run_cli(capsys, "validate", scenario("at-least-once"))
    assert code == 0 and "ok" in out


def test_sweep_refuses_another_sweeps_output_untouched(capsys, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    manifest = out / "manifest.json"
    manifest.write_text(
        json.dumps(
            {"format": "eosim-sweep", "sweep_id": "other", "command": "eosim sweep other.yaml"}
        )
    )
    before = manifest.read_bytes()
    code, _, err = run_cli(
        capsys, "sweep", scenario("idempotent"), "--runs", "2", "--out", str(out)
    )
    assert code == 2 and "another sweep" in err and len(err.strip().splitlines()) == 1
    assert manifest.read_bytes() == before and sorted(out.iterdir()) == [manifest]


# Inputs that `eosim run` used to reach only inside the run (a traceback and exit 1) while
# `eosim validate` accepted them. Both commands now refuse each one the same way.
CONFIG_ERRORS = [
    (
        "hanging-transaction",
        "transactional_producers.0.config.acks=1",
        "transactional_producers[0].config.acks: Invalid value 1 for configuration acks",
    ),
    (
        "hanging-transaction",
        "transactional_producers.0.config.enable.idempotence=false",
        "transactional_producers[0].config.enable.idempotence",
    ),
    (
        "hanging-transaction",
        "transactional_producers.0.config.linger.ms=soon",
        "transactional_producers[0].config.linger.ms",
    ),
    ("transactional-pipeline", "processors.0.config.retries=0", "processors[0].config.retries"),
    (
        "transactional-pipeline",
        "processors.0.config.max.in.flight.requests.per.connection=6",
        "processors[0].config.max.in.flight.requests.per.connection",
    ),
    ("pipeline-at-least-once", "processors.0.config.acks=7", "processors[0].config.acks"),
    (
        "pipeline-at-least-once",
        "processors.0.config.transactional.id=app",
        "processors[0].config.transactional.id: Kafka's send() throws IllegalStateException",
    ),
    (
        "idempotent",
        "producers.0.config.transactional.id=x",
        "producers[0].config.transactional.id: Kafka's send() throws IllegalStateException",
    ),
    (
        "transactional-pipeline",
        "processors.0.config.max.block.ms=0",
        "processors[0].config.max.block.ms: Invalid value 0",
    ),
    ("idempotent", "kafka.rules.transaction_version=7", "kafka.rules.transaction_version"),
    ("idempotent", "kafka.rules.producer_state_cached_batches=0", "producer_state_cached_batches"),
    ("idempotent", "kafka.rules.linger_ms_default=soon", "kafka.rules.linger_ms_default"),
    (
        "idempotent",
        "kafka.rules.transaction_partition_verification=maybe",
        "kafka.rules.transaction_partition_verification: expected true or false",
    ),
    ("idempotent", "settle=.nan", "settle: expected a finite duration"),
    ("idempotent", "network.latency.median_ms=.inf", "network.latency.median_ms"),
]


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(("name", "override", "message"), CONFIG_ERRORS)
def test_validate_finds_every_config_error_run_would_hit(
    capsys, tmp_path, monkeypatch, command, name, override, message
):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, command, scenario(name), "--set", override)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"eosim: error: {scenario(name)} (--set {override}): ")
    assert message in lines[0]
    assert "Traceback" not in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_a_transactional_id_given_by_the_config_is_still_allowed(capsys):
    """A transactional application may name its own transactional.id."""
    code, _, err = run_cli(
        capsys,
        "validate",
        scenario("hanging-transaction"),
        "--set",
        "transactional_producers.0.config.transactional.id=other",
    )
    assert code == 0, err


@pytest.mark.parametrize("command", ["validate", "run", "sweep"])
def test_a_binary_scenario_file_is_one_line(capsys, tmp_path, command):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"name: x\ncluster: \xff\xfe\x00\n")
    extra = ["--runs", "1"] if command == "sweep" else []
    code, _, err = run_cli(capsys, command, str(path), *extra)
    assert code == 2
    assert err.strip().splitlines() == [
        f"eosim: error: {path}:2: not UTF-8 text: invalid start byte at byte 17"
    ]


def test_a_deeply_nested_history_line_is_one_line(capsys, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 5000 + "]" * 5000 + "\n")
    code, _, err = run_cli(capsys, "check", str(path))
    assert code == 2
    assert err.strip().splitlines() == [
        f"eosim: error: {path}:1: line: invalid JSON: nested too deeply"
    ]


MIN_ISR_ABOVE_RF = """\
name: min-isr-above-rf
cluster:
  brokers: 3
  config: {min.insync.replicas: 3}
  topics:
    - {name: a, partitions: 1, replication_factor: 2, config: {min.insync.replicas: 4}}
    - {name: b, partitions: 1, replication_factor: 2}
    - {name: c, partitions: 1, replication_factor: 3}
    - {name: d, partitions: 1, replication_factor: 1, config: {min.insync.replicas: 1}}
producers:
  - name: p
    config: {acks: all}
    workload: {topic: a, records: 50, rate: 1000}
"""


def test_min_insync_replicas_above_the_replication_factor_is_warned_of(capsys, tmp_path):
    """Kafka accepts min.insync.replicas above a topic's replication factor, and since 3.7
    uses the replication factor instead (Partition.effectiveMinIsr), as the model does; before
    3.7 every acks=all write failed. validate said nothing: it warns now, for a topic's own
    value and for the broker default a topic takes, and run warns alike."""
    path = tmp_path / "s.yaml"
    path.write_text(MIN_ISR_ABOVE_RF)
    code, out, err = run_cli(capsys, "validate", str(path))
    assert code == 0 and err == ""
    warnings = [line for line in out.splitlines() if line.startswith("warning    ")]
    assert len(warnings) == 2, out
    assert warnings[0].startswith(
        "warning    cluster.topics.0.config.min.insync.replicas: 4 is above the replication "
        "factor of topic 'a' (2). Kafka accepts it; since 3.7 it uses min(4, 2) = 2 instead"
    )
    assert warnings[1].startswith(
        "warning    cluster.config.min.insync.replicas: 3 is above the replication factor of "
        "topic(s) 'b' (2), which take it."
    )
    assert all("before 3.7 every acks=all write failed" in w for w in warnings)
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 0 and [line for line in out.splitlines() if line in warnings] == warnings
    assert "sends      50 sent, 50 acked" in out  # acks=all works, with every replica in sync
    code, out, _ = run_cli(capsys, "run", str(path), "--json")
    assert [f"warning    {w}" for w in json.loads(out)["warnings"]] == warnings
    # At or below the replication factor: nothing to say.
    path.write_text(
        MIN_ISR_ABOVE_RF.replace("min.insync.replicas: 4", "min.insync.replicas: 2").replace(
            "config: {min.insync.replicas: 3}", "config: {}"
        )
    )
    code, out, _ = run_cli(capsys, "validate", str(path))
    assert code == 0 and "warning" not in out


def test_shipped_scenarios_are_taken_by_name_from_any_directory(capsys, tmp_path, monkeypatch):
    """`eosim run idempotent` works wherever it is typed; a path that exists wins over a
    name; an unknown name is one line listing close names, exit 2, for every command that
    takes a scenario."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "validate", "idempotent")
    assert code == 0 and out.startswith("idempotent: ok (idempotent:"), err
    code, out, _ = run_cli(capsys, "run", "at-least-once.yaml", *SMALL)
    assert code == 0 and "replay     eosim run at-least-once.yaml --seed 1" in out
    code, out, _ = run_cli(capsys, "run", "idempotent", "--json", *SMALL)
    assert code == 0 and json.loads(out)["replay"].startswith("eosim run idempotent --seed ")
    (tmp_path / "idempotent").write_text("name: mine\n")  # a file of that name wins, and fails
    code, _, err = run_cli(capsys, "validate", "idempotent")
    assert code == 2 and err.startswith("eosim: error: idempotent:")
    for command in (["validate"], ["run"], ["sweep", "--runs", "2"], ["shrink", "--seed", "1"]):
        code, out, err = run_cli(capsys, *command, "idempotnt")
        assert code == 2 and out == ""
        assert err.splitlines() == [
            "eosim: error: idempotnt: no such file, and no shipped scenario of that name; "
            "shipped scenarios with a close name: idempotent, idempotent-restart"
        ]
    code, _, err = run_cli(capsys, "run", "scenarios/idempotent.yaml")
    assert code == 2 and "the shipped scenario of that name is `eosim run idempotent`" in err


def test_scenarios_lists_and_copies_them(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "scenarios")
    lines = out.splitlines()
    names = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
    assert code == 0 and [line.split()[0] for line in lines] == names
    assert all(len(line) <= 100 for line in lines)
    assert (
        "idempotent-restart" in out and "An idempotent producer that crashes and restarts." in out
    )
    target = tmp_path / "mine"
    code, out, _ = run_cli(capsys, "scenarios", "copy", "idempotent", str(target))
    assert code == 0 and out == f"copied     idempotent -> {target / 'idempotent.yaml'}\n"
    copied = (target / "idempotent.yaml").read_bytes()
    assert copied == (ROOT / "scenarios" / "idempotent.yaml").read_bytes()
    (target / "idempotent.yaml").write_text("edited")
    code, _, err = run_cli(capsys, "scenarios", "copy", "idempotent", str(target))
    assert code == 2 and "exists" in err and (target / "idempotent.yaml").read_text() == "edited"
    code, _, err = run_cli(capsys, "scenarios", "copy", "idempotnt", str(target))
    assert code == 2 and "close names: idempotent" in err
