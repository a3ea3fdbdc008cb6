"""`eosim check`: its verdict line, `--expect`, exit codes, and JSON shared with `eosim run`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from histories import Builder
from test_cli import anomaly_lines, run_cli, scenario, write_lines

from eosim.analysis.checks import ALL_ANOMALIES

SMALL = ["--set", "producers.0.workload.records=300"]


def duplicated(tmp_path: Path) -> str:
    """A history with one duplicate: `a` acknowledged once and in the log twice."""
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.send("p/0", "b", offset=2)
    h.log("t", 0, ["a", "a", "b"])
    return write_lines(tmp_path / "dup.jsonl", h)


def clean(tmp_path: Path) -> str:
    h = Builder()
    h.send("p/0", "a", offset=0)
    h.log("t", 0, ["a"])
    return write_lines(tmp_path / "clean.jsonl", h)


def verdict(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("verdict ")]
    assert len(lines) == 1, out
    return lines[0].split(None, 1)[1]


def test_check_prints_a_verdict_line(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "check", duplicated(tmp_path))
    assert code == 1 and verdict(out) == "anomalies found: duplicate"
    code, out, _ = run_cli(capsys, "check", clean(tmp_path))
    assert code == 0 and verdict(out) == "no anomalies"


@pytest.mark.parametrize(
    ("expect", "code", "said"),
    [
        (["duplicate=1"], 0, "expectations met"),
        (["duplicate=>0", "lost_write=0"], 0, "expectations met"),
        (["duplicate==1"], 0, "expectations met"),
        (["duplicate=0"], 1, "EXPECTATIONS NOT MET"),
        (["acked=<2"], 1, "EXPECTATIONS NOT MET"),
        (["acked=2", "sent=2"], 0, "expectations met"),
    ],
)
def test_check_expect_decides_the_exit_code(capsys, tmp_path, expect, code, said):
    argv = [a for e in expect for a in ("--expect", e)]
    got, out, err = run_cli(capsys, "check", duplicated(tmp_path), *argv)
    assert got == code, (out, err)
    assert verdict(out) == said
    block = out.split("expect\n", 1)[1].split("verdict")[0].splitlines()
    assert [row.split()[0] for row in block] == [e.split("=", 1)[0] for e in expect]

    got, out, _ = run_cli(capsys, "check", duplicated(tmp_path), *argv, "--json")
    data = json.loads(out)
    assert got == code and data["verdict"] == said
    assert data["expect"]["met"] is (code == 0)
    assert [c["key"] for c in data["expect"]["checked"]] == [e.split("=", 1)[0] for e in expect]


def test_check_expect_tolerating_anomalies_exits_0_where_plain_check_exits_1(capsys, tmp_path):
    path = duplicated(tmp_path)
    assert run_cli(capsys, "check", path)[0] == 1
    assert run_cli(capsys, "check", path, "--expect", "duplicate=>=0")[0] == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("dupe=0", "did you mean 'duplicate'"),
        ("duplicate", "expected name=value"),
        ("=0", "expected name=value"),
        ("duplicate=-1", "is not a condition"),
        ("duplicate=some", "is not a condition"),
    ],
)
def test_check_bad_expect_is_one_line_and_exit_2(capsys, tmp_path, value, message):
    code, out, err = run_cli(capsys, "check", clean(tmp_path), "--expect", value)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"eosim: error: --expect {value}: ")
    assert message in lines[0]


def test_check_expect_twice_is_bad_input(capsys, tmp_path):
    argv = ["--expect", "duplicate=0", "--expect", "duplicate=1"]
    code, _, err = run_cli(capsys, "check", clean(tmp_path), *argv)
    assert code == 2 and "already expected" in err


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "the file is empty"),
        ("\n\n", "no op, log or replica line"),
        ('{"kind": "meta", "scenario": "x"}\n', "no op, log or replica line"),
    ],
)
def test_a_history_without_lines_to_check_is_unknown_exit_3(capsys, tmp_path, content, reason):
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    code, out, err = run_cli(capsys, "check", str(path))
    assert (code, err) == (3, "")
    assert verdict(out) == f"UNKNOWN: nothing to check ({reason})"
    code, out, _ = run_cli(capsys, "check", str(path), "--json")
    data = json.loads(out)
    assert code == 3 and data["unknown"] == reason
    assert data["verdict"] == f"UNKNOWN: nothing to check ({reason})"


NOTHING = "no write was acknowledged and no record was read or logged"


def nothing_acknowledged(tmp_path: Path) -> str:
    """Every send failed or is unknown, nothing was read, and the final log is empty."""
    h = Builder()
    h.send("p/0", "a", "fail")
    h.send("p/0", "b", "info")
    h.log("t", 0, [])
    return write_lines(tmp_path / "nothing.jsonl", h)


def test_a_history_with_nothing_acknowledged_or_observed_is_unknown_not_clean(capsys, tmp_path):
    path = nothing_acknowledged(tmp_path)
    code, out, _ = run_cli(capsys, "check", path)
    assert code == 3 and verdict(out) == f"UNKNOWN: nothing to check ({NOTHING})"
    # An acknowledged write, or a record read or logged, is something to check.
    assert run_cli(capsys, "check", clean(tmp_path))[0] == 0
    h = Builder()
    h.poll("c/0", [("t", 0, 0, "x")])
    assert run_cli(capsys, "check", write_lines(tmp_path / "reads.jsonl", h))[0] == 0


def test_expectations_on_a_history_with_nothing_to_check_are_not_met(capsys, tmp_path):
    path = nothing_acknowledged(tmp_path)
    code, out, _ = run_cli(capsys, "check", path, "--expect", "lost_write=0", "--json")
    data = json.loads(out)
    assert code == 3
    assert data["expect"]["met"] is False
    assert data["expect"]["failures"] == [f"nothing to check: {NOTHING}"]
    assert data["verdict"] == f"UNKNOWN: nothing to check ({NOTHING})"


def test_run_of_a_scenario_that_acknowledged_nothing_is_unknown_exit_3(capsys, tmp_path):
    path = tmp_path / "dead.yaml"
    path.write_text(
        "name: dead\n"
        "cluster: {brokers: 1, topics: [{name: t, partitions: 1}]}\n"
        "producers:\n"
        "  - name: p\n"
        "    config: {delivery.timeout.ms: 2000, request.timeout.ms: 1000}\n"
        "    workload: {topic: t, records: 3, rate: 100}\n"
        "faults: [{kind: crash, nodes: [broker-0], at: 0ms, duration: 30s}]\n"
        "expect: {lost_write: 0}\n"
    )
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 3 and verdict(out) == f"UNKNOWN: nothing to check ({NOTHING})"
    code, out, _ = run_cli(capsys, "run", str(path), "--json")
    data = json.loads(out)
    assert code == 3 and data["unknown"] == NOTHING and data["expect"]["met"] is False


def test_check_json_has_the_fields_of_run_json(capsys, tmp_path):
    """The same names, the same shapes, the same values for a history written by the run."""
    history = tmp_path / "h.jsonl"
    code, out, _ = run_cli(
        capsys, "run", scenario("at-least-once"), "--history", str(history), "--json", *SMALL
    )
    assert code == 0
    ran = json.loads(out)
    code, out, _ = run_cli(capsys, "check", str(history), "--json")
    checked = json.loads(out)
    assert code == 1
    shared = ("anomalies", "examples", "notes", "cut_by_duration", "history_sha256")
    for key in shared:
        assert checked[key] == ran[key], key
    assert ran["examples"]["duplicate"] and list(checked["anomalies"]) == list(ALL_ANOMALIES)
    assert checked["history_sha256"] == hashlib.sha256(history.read_bytes()).hexdigest()
    # Both count the operations from the history, with one function.
    assert checked["counts"] == ran["counts"]
    assert set(checked["expect"]) == set(ran["expect"]) == {"met", "failures", "checked"}
    assert checked["verdict"] == "anomalies found: duplicate, nonmonotonic_send"
    assert ran["verdict"] == "expectations met"
    assert checked["history"] == str(history)


def test_check_text_lists_the_anomalies_before_the_verdict(capsys, tmp_path):
    _code, out, _ = run_cli(capsys, "check", duplicated(tmp_path))
    rows = anomaly_lines(out)
    assert rows["duplicate"] == 1 and sum(v or 0 for v in rows.values()) == 1
    assert out.rstrip().splitlines()[-1].startswith("verdict")


def test_json_times_name_their_unit(capsys):
    """Every time key of `run --json` ends in its unit, and the history's times are in ms."""
    _code, out, _ = run_cli(
        capsys, "run", scenario("at-least-once"), "--json", "--seed", "1", *SMALL
    )
    data = json.loads(out)
    assert "sim_time_s" in data and "wall_time_s" in data
    times = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if "time" in k.split("_") or k in ("start", "end", "at"):
                    times.append(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(data)
    assert times and all(k.endswith(("_s", "_ms")) for k in times), times
    example = data["examples"]["duplicate"][0]["sends"][0]
    assert "invoke_time_ms" in example and "complete_time_ms" in example


def test_run_json_faults_in_ms(capsys):
    _code, out, _ = run_cli(capsys, "run", scenario("idempotent-restart"), "--json", "--seed", "1")
    faults = json.loads(out)["faults"]
    assert faults and all({"start_ms", "end_ms"} <= set(f) for f in faults)
    assert not any({"start", "end"} & set(f) for f in faults)


def counted(tmp_path: Path) -> str:
    """Sends, transactions and processed inputs with every outcome: ok, fail, info (a
    timeout, a crash, the run's end, never completed), with and without errors."""
    h = Builder()
    h.send("p/0", "a", offset=0)  # acked
    h.send("p/0", "b", "fail")  # failed, errored (TimeoutException)
    c = h.send("p/0", "c", "info")  # indeterminate, errored (a disconnection)
    d = h.send("p/0", "d", "info")  # indeterminate: the process died
    h.send("p/0", "e", None)  # indeterminate: never completed
    f = h.send("p/1", "f", "info")  # indeterminate: the run ended
    h.txn("t/0", "tx", ["g"])  # acked
    g = h.txn("t/0", "tx", ["h"], "fail")  # failed, errored (an aborted transaction)
    s1 = h.step("app/0", ("in", 0, 0, "x"), ["x'"], "info")  # the processor crashed
    s2 = h.step("app/0", ("in", 0, 1, "y"), ["y'"], "info")  # errored: a fatal commit error
    errors = {
        c: "NetworkException: the connection was closed",
        d: "ProcessCrashed: the producer process died with the send outstanding",
        f: "RunEnded: still outstanding when the run's duration ran out",
        g: "AbortedByApplication: abortTransaction",
        s1: "ProcessCrashed: the processor died in the step",
        s2: "KafkaException: the client can no longer retry them",
    }
    for record in h.records:
        if record["type"] != "invoke" and record.get("id") in errors:
            record["error"] = errors[record["id"]]
    h.log("t", 0, ["a"])
    return write_lines(tmp_path / "counted.jsonl", h)


def test_one_function_counts_the_operations_of_a_history(tmp_path):
    from eosim.analysis.history import load_history, op_counts

    assert op_counts(load_history(counted(tmp_path))) == {
        "sent": 10,
        "acked": 2,
        "failed": 2,
        "indeterminate": 6,
        "errored": 4,
    }


def test_check_counts_as_run_does_errored_included(capsys, tmp_path):
    path = counted(tmp_path)
    code, out, _ = run_cli(capsys, "check", path, "--expect", "errored=4")
    assert "sends      10 sent, 2 acked, 2 failed, 6 indeterminate, 4 errored\n" in out
    assert code == 0 and verdict(out) == "expectations met"
    code, out, _ = run_cli(capsys, "check", path, "--expect", "errored=0")
    assert code == 1 and "errored                     0   got 4: NOT MET" in out


@pytest.mark.parametrize(
    "name", ["transactional-pipeline", "idempotent-restart", "at-least-once-chaos"]
)
def test_run_and_check_print_the_same_sends_line(capsys, tmp_path, name):
    """`eosim run` counted every operation its applications invoked (processed inputs too),
    `eosim check` only the history's sends, and without `errored`: on the transactional
    pipeline one said 4,034 sent, the other 2,000. Both now count from the history, with one
    function."""
    history = tmp_path / "h.jsonl"
    _, ran, _ = run_cli(capsys, "run", scenario(name), "--history", str(history))
    _, checked, _ = run_cli(capsys, "check", str(history))
    sends = [
        next(line for line in out.splitlines() if line.startswith("sends "))
        for out in (ran, checked)
    ]
    assert sends[0] == sends[1], sends
    assert "errored" in sends[1]
