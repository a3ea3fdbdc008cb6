"""Jepsen Kafka histories (EDN): the reader (eosim.analysis.jepsen) and `eosim check FILE.edn`.

The fixtures are written by hand in the op format of Jepsen's Kafka workload
(jepsen.tests.kafka, its namespace docstring) and its checker tests (kafka_test.clj)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import run_cli

from eosim.analysis.checks import check_history
from eosim.analysis.history import HistoryError
from eosim.analysis.jepsen import is_edn, load_jepsen_history, parse_jepsen_history

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def found(history_text_or_path: str | Path) -> dict[str, int]:
    if isinstance(history_text_or_path, Path):
        history = load_jepsen_history(history_text_or_path)
    else:
        history = parse_jepsen_history(history_text_or_path)
    result = check_history(history)
    return {name: a.count for name, a in result.anomalies.items() if a.count}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("clean", {}),
        ("duplicate", {"duplicate": 1}),
        # the poll of offsets 0 and 2 skips the acknowledged 11 at 1 (Jepsen's int-poll-skip)
        ("lost-write", {"lost_write": 1, "int_poll_skip": 1}),
        ("nonmonotonic-send", {"nonmonotonic_send": 1}),
    ],
)
def test_each_fixture_gets_its_classification(name, expected):
    assert found(FIXTURES / f"jepsen-kafka-{name}.edn") == expected


@pytest.mark.parametrize(
    ("name", "verdict", "code"),
    [
        ("clean", "no anomalies", 0),
        ("duplicate", "anomalies found: duplicate", 1),
        ("lost-write", "anomalies found: lost_write, int_poll_skip", 1),
    ],
)
def test_check_command_reads_edn(capsys, name, verdict, code):
    path = str(FIXTURES / f"jepsen-kafka-{name}.edn")
    got, out, err = run_cli(capsys, "check", path)
    assert (got, err) == (code, "")
    assert out.splitlines()[-1] == f"verdict    {verdict}"


def test_check_expect_works_on_edn(capsys):
    path = str(FIXTURES / "jepsen-kafka-duplicate.edn")
    code, out, _ = run_cli(capsys, "check", path, "--expect", "duplicate=1", "--expect", "acked=3")
    assert code == 0 and out.splitlines()[-1] == "verdict    expectations met"


def test_edn_is_recognised_by_content(tmp_path):
    path = tmp_path / "history.txt"
    path.write_text((FIXTURES / "jepsen-kafka-duplicate.edn").read_text())
    assert is_edn(path)
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_text('{"kind": "op", "type": "invoke"}\n')
    assert not is_edn(jsonl)


def test_conversion_of_the_clean_history():
    h = load_jepsen_history(FIXTURES / "jepsen-kafka-clean.edn")
    sends = [(s.process, s.partition, s.value, s.outcome, s.offset) for s in h.sends]
    assert sends == [
        ("0", 0, "1", "ok", 0),
        ("0", 1, "2", "ok", 0),
        ("0", 0, "3", "ok", 1),
        ("0", 0, "4", "fail", None),
        ("2", 1, "5", "ok", 2),  # the send of a :txn op
        ("0", 1, "6", "info", None),
    ]
    assert {s.topic for s in h.sends} == {"jepsen"}
    assert h.sends[0].invoke_time == 3.0 and h.sends[0].complete_time == 4.0  # ns -> ms
    assert h.sends[0].id == 2  # the invocation's :index
    polled = [(p.process, [(r.partition, r.offset, r.value) for r in p.records]) for p in h.polls]
    assert polled[0] == ("1", [(0, 0, "1"), (0, 1, "3"), (1, 0, "2")])
    # process 3 dropped key 0 by assigning [1], then took it back: a new session of key 0
    assert polled[-1] == ("3/1", [(0, 0, "1")])


RESEEK = """
{:type :invoke, :process 3, :f :assign, :value [0]}
{:type :ok, :process 3, :f :assign, :value [0]}
{:type :invoke, :process 3, :f :poll, :value [[:poll]]}
{:type :ok, :process 3, :f :poll, :value [[:poll {0 [[0 1] [1 3]]}]]}
%s
{:type :invoke, :process 3, :f :assign, :value [0], :seek-to-beginning? true}
{:type :ok, :process 3, :f :assign, :value [0], :seek-to-beginning? true}
{:type :invoke, :process 3, :f :poll, :value [[:poll]]}
{:type :ok, :process 3, :f :poll, :value [[:poll {0 [[0 1]]}]]}
"""


def test_an_assignment_without_a_key_resets_its_poll_position():
    """As Jepsen's poll-skip+nonmonotonic-cases-per-process: an assign keeps the last reads
    of the keys it names only. Re-polling offset 0 is nonmonotonic unless key 0 was left out of
    an assignment in between."""
    assert found(RESEEK % "") == {"nonmonotonic_poll": 1}
    dropped = (
        "{:type :invoke, :process 3, :f :assign, :value [1]}\n"
        "{:type :ok, :process 3, :f :assign, :value [1]}"
    )
    assert found(RESEEK % dropped) == {}
    failed = (
        "{:type :invoke, :process 3, :f :assign, :value [1]}\n"
        "{:type :fail, :process 3, :f :assign, :value [1]}"
    )
    assert found(RESEEK % failed) == {"nonmonotonic_poll": 1}


def test_a_vector_of_ops_and_keyword_keys_as_in_jepsens_tests():
    """kafka_test.clj's g1a-test: a failed send of 2 to :x, read by an ok poll."""
    text = """[{:index 0, :time 0, :type :invoke, :process 0, :f :send,
                 :value [[:send :x 2] [:send :y 3]]}
                {:index 1, :time 1, :type :fail, :process 0, :f :send,
                 :value [[:send :x 2] [:send :y 3]]}
                {:index 2, :time 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
                {:index 3, :time 3, :type :ok, :process 1, :f :poll,
                 :value [[:poll {:x [[0 2]]}]]}]"""
    h = parse_jepsen_history(text)
    assert [(s.topic, s.partition) for s in h.sends] == [(":x", 0), (":y", 0)]
    assert found(text) == {"aborted_read": 1}


def test_a_value_read_in_one_key_does_not_hide_the_same_value_unread_in_another():
    """Jepsen's values are unique per key only: :x's 1 was read, :y's 1 never was (Jepsen's
    unseen reports {:y 1})."""
    text = """{:index 0, :type :invoke, :process 0, :f :send, :value [[:send :x 1] [:send :y 1]]}
{:index 1, :type :ok, :process 0, :f :send, :value [[:send :x [0 1]] [:send :y [0 1]]]}
{:index 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
{:index 3, :type :ok, :process 1, :f :poll, :value [[:poll {:x [[0 1]]}]]}"""
    result = check_history(parse_jepsen_history(text))
    assert {n: a.count for n, a in result.anomalies.items() if a.count} == {"unseen": 1}
    assert result.anomalies["unseen"].examples[0]["topic"] == ":y"
    both = text.replace("{:x [[0 1]]}", "{:x [[0 1]], :y [[0 1]]}")
    assert found(both) == {}


def test_integer_keys_are_partitions_of_one_topic_and_values_are_unique_per_partition():
    """Keys 0 and 1 are partitions 0 and 1 of topic jepsen; the 1 read from key 0 does not
    hide key 1's, and the same value at offset 0 of two keys is no duplicate."""
    text = """{:index 0, :type :invoke, :process 0, :f :send, :value [[:send 0 1] [:send 1 1]]}
{:index 1, :type :ok, :process 0, :f :send, :value [[:send 0 [0 1]] [:send 1 [0 1]]]}
{:index 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
{:index 3, :type :ok, :process 1, :f :poll, :value [[:poll {0 [[0 1]]}]]}"""
    history = parse_jepsen_history(text)
    assert [(s.topic, s.partition) for s in history.sends] == [("jepsen", 0), ("jepsen", 1)]
    result = check_history(history)
    assert {n: a.count for n, a in result.anomalies.items() if a.count} == {"unseen": 1}
    assert result.anomalies["unseen"].examples[0]["partition"] == 1
    assert found(text.replace("{0 [[0 1]]}", "{0 [[0 1]], 1 [[0 1]]}")) == {}


def test_ops_without_a_process_are_read_as_the_one_process_nil():
    """kafka_test.clj's version-orders-test writes its ops without :process (nor :index,
    :time or invocations): they are accepted, as one process `nil`, and judged."""
    text = """{:type :ok, :f :txn, :value [[:poll {:x [[0 :a] [1 :b]]}]]}
{:type :info, :f :txn, :value [[:send :x [1 :c]] [:send :x [3 :b]] [:send :x [4 :d]]]}"""
    history = parse_jepsen_history(text)
    assert {op.process for op in history.client_ops} == {"nil"}
    assert found(text) == {"inconsistent_offsets": 1, "duplicate": 1, "lost_write": 1}
    paired = """{:type :invoke, :f :send, :value [[:send :x :a]]}
{:type :ok, :f :send, :value [[:send :x [0 :a]]]}
{:type :invoke, :process nil, :f :poll, :value [[:poll]]}
{:type :ok, :process nil, :f :poll, :value [[:poll {:x [[0 :a]]}]]}"""
    history = parse_jepsen_history(paired)
    assert [(op.process, op.type, op.f) for op in history.client_ops] == [
        ("nil", "ok", "send"),
        ("nil", "ok", "poll"),
    ]
    assert found(paired) == {}


def test_a_process_that_is_neither_an_integer_nor_nil_is_bad_input():
    with pytest.raises(HistoryError, match=":process: expected an integer or nil"):
        parse_jepsen_history('{:type :ok, :process "p", :f :poll, :value [[:poll]]}')


def test_a_history_of_assignments_only_is_unknown(capsys, tmp_path):
    """kafka_test.clj's empty-history-test: Jepsen's checker refuses to call it valid; eosim
    answers unknown (nothing to check), exit 3, not "no anomalies"."""
    path = tmp_path / "empty.edn"
    path.write_text(
        "{:index 0, :time 0, :type :invoke, :process 0, :f :assign, :value [:x]}\n"
        "{:index 1, :time 1, :type :ok, :process 0, :f :assign, :value [:x]}\n"
    )
    code, out, err = run_cli(capsys, "check", str(path))
    assert (code, err) == (3, "")
    assert out.splitlines()[-1] == (
        "verdict    UNKNOWN: nothing to check "
        "(no write was acknowledged and no record was read or logged)"
    )


def test_unseen_leaves_out_exactly_the_writes_the_version_orders_call_lost():
    """eosim's unseen and its lost ok writes make up Jepsen's unseen (every value an ok op
    sent that no ok op polled). a, acknowledged at 0, was read at 5 by a failed poll only: its
    last index is past what ok polls reached, so it is not lost, and it is unseen."""
    text = """{:index 0, :type :invoke, :process 0, :f :send, :value [[:send :x :a]]}
{:index 1, :type :ok, :process 0, :f :send, :value [[:send :x [0 :a]]]}
{:index 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
{:index 3, :type :fail, :process 1, :f :poll, :value [[:poll {:x [[5 :a]]}]]}
{:index 4, :type :invoke, :process 2, :f :poll, :value [[:poll]]}
{:index 5, :type :ok, :process 2, :f :poll, :value [[:poll {:x [[2 :b]]}]]}"""
    assert found(text) == {"duplicate": 1, "unseen": 1}
    # a, acknowledged without an offset, was read at 0 by a failed poll only, below b, which
    # an ok poll read: lost, and so not unseen as well.
    text = """{:index 0, :type :invoke, :process 0, :f :send, :value [[:send :x :a] [:send :x :b]]}
{:index 1, :type :ok, :process 0, :f :send, :value [[:send :x :a] [:send :x [1 :b]]]}
{:index 2, :type :invoke, :process 1, :f :poll, :value [[:poll]]}
{:index 3, :type :fail, :process 1, :f :poll, :value [[:poll {:x [[0 :a]]}]]}
{:index 4, :type :invoke, :process 2, :f :poll, :value [[:poll]]}
{:index 5, :type :ok, :process 2, :f :poll, :value [[:poll {:x [[1 :b]]}]]}"""
    assert found(text) == {"lost_write": 1}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("{:type :ok, :f :poll}\n{:type :ok, :f :send, :value [}\n", 2, "invalid EDN"),
        ("{:type :ok, :process 0, :f :poll, :value [[:poll\n", 1, "unexpected end of input"),
        ("{:type :done, :process 0, :f :poll}\n", 1, ":type: expected :invoke"),
        ("{:type :ok, :process 0, :f :send, :value [[:get 1]]}\n", 1, "expected [:send k v]"),
        ("{:type :ok, :process 0, :f :send, :value [[:send 1 [x 2]]]}\n", 1, "offset"),
        ("{:type :ok, :process 0, :f :poll, :value [[:poll {1 [[0]]}]]}\n", 1, "[offset value]"),
        ("{:type :ok, :process 0, :f :poll, :value #foo [1]}\n", 1, "invalid EDN"),
        ("[" * 5000 + "]" * 5000 + "\n", 1, "expected an EDN map"),
    ],
)
def test_malformed_edn_is_one_line_and_exit_2(capsys, tmp_path, text, line, message):
    path = tmp_path / "bad.edn"
    path.write_text(text)
    with pytest.raises(HistoryError) as exc:
        load_jepsen_history(path)
    assert exc.value.line == line and message in str(exc.value)
    code, out, err = run_cli(capsys, "check", str(path))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"eosim: error: {path}:{line}: ")


def test_check_shows_the_poll_checks_a_jepsen_history_is_judged_by(capsys):
    """poll_skip, nonmonotonic_poll, precommitted_read and aborted_read are judged from a
    Jepsen history's polls, so they are listed, not summed up as 'found nothing: no txn ops'."""
    from test_cli import anomaly_lines

    _code, out, _ = run_cli(capsys, "check", str(FIXTURES / "jepsen-kafka-clean.edn"))
    rows = anomaly_lines(out)
    for name in ("poll_skip", "nonmonotonic_poll", "precommitted_read", "aborted_read"):
        assert rows[name] == 0, out
    assert "(5 transactional checks found nothing" in out


@pytest.mark.parametrize("name", ["clean", "duplicate", "lost-write", "nonmonotonic-send"])
def test_reading_in_one_pass_gives_the_lines_reading_line_by_line_gives(name):
    """The one-pass reader (edn_format builds a lexer and parser per call, so a call per line
    was most of the reading time) pairs forms with the same line numbers."""
    from eosim.analysis.jepsen import _read_ops, _read_ops_by_line

    text = (FIXTURES / f"jepsen-kafka-{name}.edn").read_text()
    fast = list(_read_ops(text, "x"))
    # The fast reader's op maps hold their keyword keys by name, as the converter reads them.
    by_line = [(n, {k.name: v for k, v in op.items()}) for n, op in _read_ops_by_line(text, "x")]
    assert fast == by_line
    assert [n for n, _ in fast] == [
        i for i, line in enumerate(text.split("\n"), 1) if line.strip().startswith("{")
    ]


def test_two_forms_on_a_line_fall_back_to_exact_lines():
    from eosim.analysis.jepsen import _read_ops

    text = "{:a 1} {:b 2}\n\n{:c 3}\n"
    assert [n for n, _ in _read_ops(text, "x")] == [1, 1, 3]
