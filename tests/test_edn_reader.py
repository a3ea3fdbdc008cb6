"""eosim.analysis.edn_reader, the fast EDN reader of Jepsen histories: it reads what
edn_format reads, to the same values, types and printed text, or gives up; and
`parse_jepsen_history` gives the same History, lines and errors with it as without it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import edn_format
import pytest
from edn_format import ImmutableDict, ImmutableList, Keyword, Symbol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eosim.analysis import edn_reader, jepsen
from eosim.analysis.checks import check_history
from eosim.analysis.edn_reader import GiveUp, read_forms
from eosim.analysis.history import History, HistoryError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def typed(value: Any) -> Any:
    """`value` with every type spelled out (1 and True and 1.0, -0.0 and 0.0, a vector and a
    list, differ), maps' and sets' contents in their iteration order."""
    if isinstance(value, float):
        return ("float", repr(value), math.copysign(1, value))
    if isinstance(value, (Keyword, Symbol)):
        return (type(value).__name__, value.name)
    if isinstance(value, (ImmutableDict, dict)):
        return (type(value).__name__, [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, (ImmutableList, tuple, frozenset)):
        return (type(value).__name__, [typed(v) for v in value])
    return (type(value).__name__, repr(value))  # None, bool, int, str (and a tag's value)


def assert_reads_alike(text: str) -> None:
    expected = edn_format.loads_all(text)
    got = edn_reader.loads_all(text)
    assert got == expected
    assert [typed(v) for v in got] == [typed(v) for v in expected]
    assert [edn_format.dumps(v) for v in got] == [edn_format.dumps(v) for v in expected]


READ_ALIKE = [
    "",
    "   \n ,,, \n",
    "; only a comment",
    "{:a 1} ; a trailing comment",
    "nil true false",
    "[nil true false nil]",
    "0 -0 +0 7 -7 +7 123456789012345678901234567890 -98765432109876543210",
    "0N 5N -5N 12345678901234567890N",
    "1.5 -1.5 +1.5 0.0 -0.0 00.5 1e3 1E3 1e+3 1e-3 -2.5e-3 1.5E10 1e999 -1e999 5e-324",
    ":a :send :type :jepsen.history/x :a-b :a.b/c-d :3 :a? :a! :*a* :<=> :_ :a$%&",
    "a b-c a.b/c - + . .. -a +a --5 +-1 / a/b * ! _ ? $ % & = < > nil/x true/false +/x",
    '"" "a" "a b" "with, commas" "semi;colon" "hash #{} #inst" "[brackets] {x}"',
    r'"esc \" \\ \n \t \r \b \f \a \v \' end"',
    r'"\u00e9 \u0041\u20AC \ud83d\ude00 \uD800 \u0000"',
    '"raw unicode é ü 日本語 😀" "tab\tinside"',
    '"multi\nline\n\nstring"',
    "{} [] () #{}",
    "{:a {}} [[]] (()) #{#{}} [{} () #{}]",
    "{:a [1 (2)] :b #{1 2 3} :c nil :d a/b :e 1.5}",
    "{1 :a true :b 1.0 :c}",  # equal keys: the first key object, the last value
    "#{1 true 1.0 0 false}",
    "{[1 2] :vector-key (1 2) :list-key {:a 1} :map-key #{1} :set-key}",
    "[1,2,3] , {:a,1,:b,2}",
    "[1\t2\t3]",
    "{:type :invoke, :f :send, :value [[:send 3 12]], :time 123456, :process 4, :index 17}",
    "{:type :ok, :f :poll, :value [[:poll {3 [[44 11] [45 12]], 5 [[2 7]]}]], :process 4}",
    "{:type :info, :f :start-partition, :value nil, :process :nemesis, :time 1}",
    "{:a 1}\n{:b 2}\n\n{:c 3}\n",
    "[{:a 1}\n {:b 2}]",
    "[1 2 3]",
    "a[1]b(2)c{:d 3}",
    '"a"b"c"d',
    "1;comment\n2",
    "[1 2 ; a comment inside\n 3]",
    "(" * 60 + ")" * 60,
]


@pytest.mark.parametrize("text", READ_ALIKE)
def test_reads_what_edn_format_reads(text):
    assert_reads_alike(text)
    read_forms(text)  # read by the reader itself, not given up on


def test_both_tokenizers_read_alike():
    """The quick tokenizer (no strings, comments or #) and the general one give the same."""
    text = "{:a [1 (2)], :b -3.5}\n[:x\ty]\n\n(nil)"
    quick = [t for chunk in edn_reader._quick_tokens(text) for t in chunk]
    general = [t for chunk in edn_reader._regex_tokens(text) for t in chunk]
    assert [t.replace("\x00", "\n") for t in quick] == [t for t in general if t]
    assert edn_reader.loads_all(text) == edn_reader.loads_all(text + " ;c")


def test_keywords_and_symbols_are_shared():
    a, b = edn_reader.loads_all("[:k s] [:k s]")
    assert a[0] is b[0] and a[1] is b[1]


def test_lines_of_forms():
    text = '{:a 1}\n\n[1\n2] "x\ny" 3\n;c\n:k'
    assert [(s, e) for s, e, _ in read_forms(text)] == [(1, 1), (3, 4), (4, 5), (5, 5), (7, 7)]


def test_top_maps_by_keyword_names():
    """With `keyword_names`, a top-level map holds its keyword keys by name (others dropped),
    and no Keyword is hashed; nested maps are edn_format's."""
    text = '{:a {:b 1}, "s" 2, 3 4, :n/k [5]}\n[{:c 1}]'
    (top_map, _), (vector, _) = [
        (v, s) for s, _, v in read_forms(text, plain_top_maps=True, keyword_names=True)
    ]
    assert top_map == {"a": edn_format.loads("{:b 1}"), "n/k": [5]}
    assert type(top_map["a"]) is ImmutableDict
    assert vector == edn_format.loads("[{:c 1}]") and type(vector[0]) is ImmutableDict


def test_plain_top_maps():
    (top,) = [v for _, _, v in read_forms("{:a {:b 1}}", plain_top_maps=True)]
    assert type(top) is dict and type(top[Keyword("a")]) is ImmutableDict
    assert top == edn_format.loads("{:a {:b 1}}")


def test_long_texts_are_read_in_chunks(monkeypatch):
    """A chunk ends at a newline; a string running past a chunk's end is read whole."""
    monkeypatch.setattr(edn_reader, "CHUNK", 16)
    text = "".join(f'{{:i {i} :s "a\nb {i}"}}\n' for i in range(30)) + "[1\n2\n3]\n"
    assert_reads_alike(text)
    quick = "".join(f"{{:i {i}, :v [[:send 1 {i}]]}}\n" for i in range(30))
    assert_reads_alike(quick)
    assert [s for s, _, _ in read_forms(quick)] == list(range(1, 31))


GIVES_UP = [
    # read differently by edn_format's lexer than a word would be
    "12abc",
    "007",
    "1.5.3",
    ":a/b/c",
    "/a",
    "a/",
    ".5",
    "-5a",
    "0x1F",
    "0X1",
    # outside the subset
    "1/2",
    "1.5M",
    "1M",
    "1.",
    r"\a",
    r"\newline",
    "#_ 1 2",
    "^{:a 1} [1]",
    "##Inf",
    '#inst "2020-01-01T00:00:00Z"',
    '#uuid "c3c8b6a4-3c9f-4b0a-9a3e-3f1c2a8b9d10"',
    "#jepsen.history.Op{:a 1}",
    "#:ns{:a 1}",
    "#foo [1]",
    "a#b",
    "a:b",
    "::a",
    ":",
    "@a",
    "'a",
    "~a",
    ":é",
    "é",
    r'"\x41"',
    r'"\101"',
    r'"\q"',
    r'"\N{BULLET}"',
    r'"\U0001F600"',
    r'"\u00zz"',
    # whitespace edn_format does not take
    "{:a 1}\r\n",
    "1\x0c2",
    "1\u00a02",
    "\ufeff{:a 1}",
    "1\x002",
    # malformed
    "{:a}",
    "[1 2",
    "]",
    "{1 2]",
    "(1 2}",
    '"abc',
    '"abc\\\n"',
    "{:a " + "[" * 70 + "]" * 70 + "}",
    "1" * 5000,
]


@pytest.mark.parametrize("text", GIVES_UP)
def test_gives_up_outside_the_subset(text):
    with pytest.raises(GiveUp):
        read_forms(text)


# -- random values of the subset, printed by edn_format ---------------------------------------

NAME = st.from_regex(r"[A-Za-z*!_?$%&=<>][A-Za-z0-9.*+!\-_?$%&=<>]{0,6}", fullmatch=True)
NAMES = st.one_of(NAME, st.builds(lambda a, b: f"{a}/{b}", NAME, NAME))
ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    NAMES.map(Keyword),
    NAMES.filter(lambda n: n not in ("nil", "true", "false")).map(Symbol),
)
HASHABLE = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(ImmutableList),
        st.lists(inner, max_size=4).map(tuple),
        st.frozensets(inner, max_size=4),
    ),
    max_leaves=8,
)
VALUES = st.recursive(
    ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(ImmutableList),
        st.lists(inner, max_size=5).map(tuple),
        st.frozensets(HASHABLE, max_size=4),
        st.dictionaries(HASHABLE, inner, max_size=4).map(ImmutableDict),
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VALUES, max_size=3), st.sampled_from([" ", "\n", ", ", " ;c\n"]))
def test_random_values_read_alike(values, separator):
    text = separator.join(edn_format.dumps(v) for v in values)
    read_forms(text)  # never gives up on what edn_format prints of the subset
    assert_reads_alike(text)


# -- random token soup: either the same as edn_format, or give up -----------------------------

FRAGMENTS = [
    "{", "}", "[", "]", "(", ")", "#{", "#", "#_", "#inst", "^", ":a", ":a/b", ":a/b/c", ":",
    "a", "a/", "/", "/a", "-", "+", ".", ".5", "-1", "+1", "1", "0", "007", "12abc", "1.5",
    "1e3", "1.", "0x1", "1N", "1M", "1/2", "nil", "true", "false", "nil/x", '"s"', '"a\\nb"',
    '"\\q"', '"', '"x\ny"', ";c", "\\a", "é", ":é", "\r", "\x0b", "\u00a0", ",",
]  # fmt: skip
SOUP = st.lists(
    st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(["", " ", "", ",", "\n", "\t"])),
    max_size=14,
).map(lambda parts: "".join(f + s for f, s in parts))


# Balanced forms of words in the subset, joined without whitespace as often as not (`:a` then
# `1` is `:a1`, `-` then `1` is `-1`, `1` then `.5` is `1.5`): the reader must cut them as
# edn_format's lexer does.
WORDS = [
    ":a", ":a/b", "a", "a/b", "-", "+", ".", "/", "1", "0", "-1", ".5", "e3", "1.5", "N", "M",
    "nil", "true", "x", "?", '"s"', '"a\\nb"', '"\\u00e9"', "#{", ";c\n",
]  # fmt: skip
SEPARATORS = st.sampled_from(["", "", " ", ",", "\n"])
BALANCED = st.recursive(
    st.tuples(st.sampled_from(WORDS), SEPARATORS).map("".join),
    lambda inner: st.tuples(
        st.sampled_from(["[]", "()", "{}", "#{}"]), st.lists(inner, max_size=4), SEPARATORS
    ).map(lambda t: t[0][:-1] + "".join(t[1]) + t[0][-1] + t[2]),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(BALANCED, max_size=4).map("".join))
def test_random_balanced_forms_read_alike_or_give_up(text):
    test_random_token_soup_reads_alike_or_gives_up.hypothesis.inner_test(text)


def edn_result(text: str) -> Any:
    try:
        return ("ok", edn_format.loads_all(text))
    except Exception as exc:  # any error edn_format raises: the reader must give up
        return ("error", type(exc).__name__)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SOUP)
def test_random_token_soup_reads_alike_or_gives_up(text):
    expected = edn_result(text)
    try:
        got = edn_reader.loads_all(text)
    except GiveUp:
        return
    assert expected[0] == "ok", (text, expected)
    assert [typed(v) for v in got] == [typed(v) for v in expected[1]]
    assert [edn_format.dumps(v) for v in got] == [edn_format.dumps(v) for v in expected[1]]


OP_LINES = [
    "{:type :invoke, :f :send, :value [[:send 0 1]], :process 0}",
    "{:type :ok, :f :send, :value [[:send 0 [0 1]]], :process 0}",
    "{:type :invoke, :f :poll, :value [[:poll]], :process 1}",
    "{:type :ok, :f :poll, :value [[:poll {0 [[0 1]]}]], :process 1}",
    "{:a 1} {:b 2}",
    "[{:a 1} {:b 2}]",
    "[{:a 1}",
    "{:b 2}]",
    "{:type :ok,",
    ":f :poll}",
    "; a comment",
    "   ",
    "",
    "1",
    '"a',
    'b"',
    '{:c #inst "2020-01-01"}',
    "(",
    ")",
    '{:a "}',  # with the next, one map whose string holds a newline
    '{"}',
]


def read_ops(text: str, fast: bool) -> Any:
    saved = jepsen.FAST_READER
    jepsen.FAST_READER = fast
    try:
        return ("ok", list(jepsen._read_ops(text, "soup")))
    except HistoryError as exc:
        return ("error", str(exc))
    finally:
        jepsen.FAST_READER = saved


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(OP_LINES), max_size=7))
def test_random_lines_give_the_same_lines_and_errors(lines):
    """_read_ops pairs each form with the same line, or fails with the same message, fast
    reader or not: one op a line, several a line, forms across lines, a vector of ops."""
    text = "\n".join(lines)
    slow = read_ops(text, fast=False)
    fast = read_ops(text, fast=True)
    if slow[0] == "ok" and fast[0] == "ok":
        assert tops(fast[1]) == tops(slow[1])
    else:
        assert fast == slow
    if fast[0] == "ok":
        assert [(n, typed(top(op))) for n, op in fast[1]] == [
            (n, typed(top(op))) for n, op in slow[1]
        ]


def top(op: Any) -> Any:
    """A top-level map as the fast reader gives it to the converter: a dict of its keyword
    keys by name (edn_format's ImmutableDict is converted so by `_Converter._op`)."""
    if isinstance(op, ImmutableDict):
        return {k.name: v for k, v in op.items() if type(k) is Keyword}
    return op


def tops(pairs: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    return [(n, top(op)) for n, op in pairs]


# -- end to end ----------------------------------------------------------------------------


def parse(text: str, fast: bool) -> History:
    saved = jepsen.FAST_READER
    jepsen.FAST_READER = fast
    try:
        return jepsen.parse_jepsen_history(text, "x")
    finally:
        jepsen.FAST_READER = saved


def assert_same_history(text: str) -> None:
    old, new = parse(text, fast=False), parse(text, fast=True)
    assert check_history(new).to_dict() == check_history(old).to_dict()
    assert new.sends == old.sends
    assert new.polls == old.polls
    assert new.client_ops == old.client_ops
    assert new.ops == old.ops
    assert new.meta == old.meta


FIXTURE_NAMES = sorted(p.name for p in FIXTURES.glob("*.edn"))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixtures_give_the_same_history(name):
    text = (FIXTURES / name).read_text()
    read_forms(text)  # on the fast path
    assert_same_history(text)
    assert list(jepsen._read_ops(text, "x")) == tops(read_ops(text, fast=False)[1])


def test_fixtures_are_there():
    assert len(FIXTURE_NAMES) >= 4


def test_jepsens_own_cases_give_the_same_history():
    from test_jepsen_cases import CASES

    for case in CASES.values():
        assert_same_history("\n".join(case.ops))


SHAPES = {
    "vector of ops on one line": (
        "[{:type :invoke, :process 0, :f :send, :value [[:send :x 1]]} "
        "{:type :ok, :process 0, :f :send, :value [[:send :x [0 1]]]}]"
    ),
    "vector of ops across lines": (
        "\n[{:type :invoke, :process 0, :f :send, :value [[:send :x 1]]}\n"
        " {:type :ok, :process 0, :f :send, :value [[:send :x [0 1]]]}]\n"
    ),
    "a list of ops": "({:type :invoke, :process 0, :f :poll, :value [[:poll]]})",
    "an op across lines": (
        "{:type :invoke, :process 0, :f :send,\n :value [[:send 0 1]]}\n"
        "{:type :ok, :process 0, :f :send, :value [[:send 0 [0 1]]]}"
    ),
    "two ops a line": (
        "{:type :invoke, :process 0, :f :send, :value [[:send 0 1]]} "
        "{:type :ok, :process 0, :f :send, :value [[:send 0 [0 1]]]}"
    ),
    "comments and blank lines": (
        "; a history\n\n{:type :invoke, :process 0, :f :poll, :value [[:poll]]} ; invoked\n"
        "   \n{:type :ok, :process 0, :f :poll, :value [[:poll {0 [[0 1]]}]]}\n"
    ),
    "strings": (
        '{:type :invoke, :process 0, :f :send, :value [[:send "k" "v\\n"]]}\n'
        '{:type :info, :process 0, :f :send, :value [[:send "k" "v\\n"]], :error "time\nout"}'
    ),
    "a tag (edn_format reads it)": (
        '{:type :invoke, :process 0, :f :poll, :value [[:poll]], :at #inst "2020-01-01"}\n'
        "{:type :ok, :process 0, :f :poll, :value [[:poll {0 [[0 #uuid "
        '"c3c8b6a4-3c9f-4b0a-9a3e-3f1c2a8b9d10"]]}]]}'
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_history_shapes_give_the_same_history_and_lines(name):
    text = SHAPES[name]
    assert_same_history(text)
    fast, slow = read_ops(text, fast=True), read_ops(text, fast=False)
    assert fast[0] == slow[0] == "ok" and tops(fast[1]) == tops(slow[1])
    assert [n for n, _ in read_ops(text, fast=True)[1]] == [
        n for n, _ in read_ops(text, fast=False)[1]
    ]


def test_outside_the_subset_the_public_parse_falls_back():
    text = SHAPES["a tag (edn_format reads it)"]
    with pytest.raises(GiveUp):
        read_forms(text)
    assert [r.value for p in parse(text, fast=True).polls for r in p.records] == [
        '#uuid "c3c8b6a4-3c9f-4b0a-9a3e-3f1c2a8b9d10"'
    ]


BAD = [
    "{:type :ok, :f :poll}\n{:type :ok, :f :send, :value [}\n",
    "{:type :ok, :process 0, :f :poll, :value [[:poll\n",
    "{:type :done, :process 0, :f :poll}\n",
    "{:type :ok, :process 0, :f :send, :value [[:get 1]]}\n",
    "{:type :ok, :process 0, :f :send, :value [[:send 1 [x 2]]]}\n",
    "{:type :ok, :process 0, :f :poll, :value [[:poll {1 [[0]]}]]}\n",
    "{:type :ok, :process 0, :f :poll, :value #foo [1]}\n",
    "[" * 5000 + "]" * 5000 + "\n",
    "[" * 40 + "]" * 40 + "\n",
    "{:type :ok, :process 0, :f :poll}\r\n",
    '{:type :ok, :process "p", :f :poll, :value [[:poll]]}',
    "{:a 1}\n\n{:type :invoke, :process 0, :f :send, :value [[:send 0 1]]}\n"
    "{:type :invoke, :process 0, :f :send, :value [[:send 0 2]]}\n",
    "{:type :ok, :f :poll, :value [[:poll]]}\n{:type\n:ok}\n{:type :bad}",
    "[{:type :bad}]",
    "1 2",
    "{:type :ok, :process 0, :f :send, :value [[:send 1 [0 2]]]} ]",
    "{:type :ok, :process 0, :f :send, :value 12abc}",
]


@pytest.mark.parametrize("text", BAD)
def test_bad_input_gives_the_same_error(text):
    def error(fast: bool) -> str:
        with pytest.raises(HistoryError) as exc:
            parse(text, fast)
        return str(exc.value)

    assert error(fast=True) == error(fast=False)
