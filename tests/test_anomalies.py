"""The anomaly registry (eosim.analysis.anomalies): every entry is judged by exactly one check,
every check returns exactly its registered names, and the schema, CLI, report, explain and
timeline cover every entry. Each entry has here one history that has it (HAS_IT); a history
without anything (an empty one) has none. An entry added without its pieces fails here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from histories import Builder
from test_checks import DESCRIBED, _history
from test_replication_checks import truncated_and_rewritten
from test_version_order import WRITES, poll, send, txn

from eosim.analysis import checks
from eosim.analysis.anomalies import (
    ANOMALY_KINDS,
    CHECK_MODULES,
    FAMILIES,
    KINDS,
    STORIES,
    names,
    report_order,
    version_order_names,
)
from eosim.analysis.checks import ALL_ANOMALIES, check_history
from eosim.analysis.explain import describe
from eosim.analysis.history import History
from eosim.analysis.jepsen import parse_jepsen_history
from eosim.analysis.report.data import GUARANTEES
from eosim.analysis.timeline import GROUP_STORIES, PARTITION_STORIES, values_of
from eosim.cli import _print_anomalies
from eosim.schema import scenario_schema


def _built(build: Callable[[Builder], Any]) -> Callable[[], History]:
    return lambda: _history(build)


def _jepsen(*ops: list[str]) -> Callable[[], History]:
    return lambda: parse_jepsen_history("\n".join(line for lines in ops for line in lines))


def _nonmonotonic_send(h: Builder) -> None:
    h.send("p/0", "a", offset=1)
    h.send("p/0", "b", offset=0)
    h.log("t", 0, ["b", "a"])


def _offset_rewind(h: Builder) -> None:
    h.commit("a/0", 1, [("in", 0, 5)])
    h.commit("b/0", 1, [("in", 0, 3)])


def _replica_divergence(h: Builder) -> None:
    h.replica("events", 0, "broker-1", ["a", "b", "c"], leader=True, leader_epoch=2)
    h.replica("events", 0, "broker-2", ["a", "x", "c"], leader_epoch=2, high_watermark=2)


G1C_FIRST = "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"
G1C_SECOND = "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]"
# name -> (a history that has it, a phrase of its first example's sentence)
HAS_IT: dict[str, tuple[Callable[[], History], str]] = {
    "duplicate": (
        _built(lambda h: (h.send("p/0", "a", offset=0), h.log("t", 0, ["a", "a"]))),
        "a landed 2 times: t-0@0, t-0@1",
    ),
    "lost_write": (
        _built(lambda h: (h.send("p/0", "a", offset=0), h.log("t", 0, []))),
        "a (ok, p/0 acked at offset 0) missing from the final log",
    ),
    "nonmonotonic_send": (_built(_nonmonotonic_send), "p/0 sent a then b, but they landed"),
    "inconsistent_offsets": (
        _built(lambda h: (h.send("p/0", "a", offset=0), h.log("t", 0, ["b"]))),
        "t-0@0 holds a (ack of send 0 by p/0) vs b (log)",
    ),
    "unseen": (_built(lambda h: h.send("p/0", "a", offset=0)), "a (ok, p/0 acked at offset 0)"),
    **{name: (_built(build), phrase) for name, build, phrase in DESCRIBED},
    "offset_rewind": (_built(_offset_rewind), "committed in-0 at 3 in group g"),
    "replica_divergence": (_built(_replica_divergence), "events-0@1 below both high watermarks"),
    "offset_rewrite": (
        lambda: truncated_and_rewritten(["z", "b"]).history(),
        "c/0 read a at t-0@1 at 6 ms, but the final log (leader broker-2) holds b there",
    ),
    "int_poll_skip": (
        _jepsen(
            send(0, 9, "ok", "[[:send 1 [0 :a]] [:send 1 [1 :b]]]"),
            poll(2, 1, "ok", "[[:poll {1 [[0 :a] [2 :c]]}]]"),
        ),
        "read :a then :c on jepsen-1: +2 positions, skipping :b",
    ),
    "int_nonmonotonic_poll": (
        _jepsen(WRITES, poll(2, 0, "ok", "[[:poll {1 [[0 :a] [1 :b]]} ] [:poll {1 [[1 :b]]}]]")),
        "read :b then :b on jepsen-1: +0 positions",
    ),
    "int_nonmonotonic_send": (
        _jepsen(send(0, 0, "ok", "[[:send 1 [1 :b]] [:send 1 [0 :a]]]")),
        "sent :b then :a on jepsen-1: -1 positions",
    ),
    "G0": (
        _jepsen(
            send(0, 0, "ok", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
            send(2, 1, "ok", "[[:send :x [1 :b]] [:send :y [0 :b]]]"),
        ),
        "cycle of ok ops 0, 2, 0: op 0 sent :a to :x-0 before op 2 sent :b",
    ),
    "G1c": (
        _jepsen(
            txn(0, 0, "ok", "txn", "[[:send :x :a] [:poll]]", G1C_FIRST),
            txn(2, 1, "ok", "txn", "[[:send :y :b] [:poll]]", G1C_SECOND),
        ),
        "cycle of ok ops 0, 2, 0: op 2 read :a from :x-0, sent by op 0",
    ),
}


def _found(module: str, history: History) -> dict[str, Any]:
    """What the check of ``module`` returns for ``history``: name -> Anomaly."""
    check = getattr(importlib.import_module(f"eosim.analysis.{module}"), CHECK_MODULES[module])
    result = check(history)
    return result.anomalies if module == "checker" else result


def _expected(module: str) -> tuple[str, ...]:
    return version_order_names() if module == "version_order" else names(check=module)


# -- the registry -------------------------------------------------------------------------------


def test_every_entry_is_declared_once_with_its_pieces() -> None:
    assert ALL_ANOMALIES == names() == tuple(KINDS)
    assert len(set(ALL_ANOMALIES)) == len(ANOMALY_KINDS)
    for kind in ANOMALY_KINDS:
        assert kind.family in FAMILIES, kind.name
        assert kind.check in CHECK_MODULES, kind.name
        assert kind.story in (None, *STORIES), kind.name
        assert callable(kind.describe), kind.name
        for text in (kind.guarantee, kind.description):
            assert text and "\n" not in text and text == text.strip(), kind.name
    assert len({kind.guarantee for kind in ANOMALY_KINDS}) == len(ANOMALY_KINDS)


def test_families_stay_together_in_their_order() -> None:
    families = [kind.family for kind in ANOMALY_KINDS]
    blocks = [f for i, f in enumerate(families) if i == 0 or families[i - 1] != f]
    assert blocks == [f for f in FAMILIES if f in families]
    assert names(family="jepsen") == checks.JEPSEN_ANOMALIES
    assert names(family="replication") == checks.REPLICATION_ANOMALIES
    # the report's order keeps the families and moves only ranked entries within them
    assert sorted(report_order()) == sorted(ALL_ANOMALIES)
    assert [KINDS[n].family for n in report_order()] == families


def test_every_entry_has_a_history_that_has_it() -> None:
    assert sorted(HAS_IT) == sorted(ALL_ANOMALIES)


# -- the checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module", list(CHECK_MODULES))
def test_each_check_returns_exactly_its_registered_names(module: str) -> None:
    for history in [History(), *(build() for build, _ in HAS_IT.values())]:
        found = _found(module, history)
        assert tuple(found) == _expected(module)
        assert all(anomaly.name == name for name, anomaly in found.items())


def test_every_entry_is_judged_by_exactly_one_check() -> None:
    for kind in ANOMALY_KINDS:
        judges = [m for m in CHECK_MODULES if kind.name in names(check=m)]
        assert judges == [kind.check]
        replaced = kind.name in version_order_names() and kind.check != "version_order"
        assert replaced == kind.from_version_order


@pytest.mark.parametrize("name", ALL_ANOMALIES)
def test_each_entry_is_found_in_its_history_and_read_as_a_sentence(name: str) -> None:
    build, phrase = HAS_IT[name]
    history = build()
    result = check_history(history)
    anomaly = result.anomalies[name]
    assert anomaly.count >= 1
    example = anomaly.examples[0]
    assert phrase in describe(name, example)
    values = values_of(name, example)
    assert isinstance(values, list) and all(isinstance(v, str) for v in values)
    # the check that judges it found it
    judge = "version_order" if history.client_ops and KINDS[name].from_version_order else None
    assert _found(judge or KINDS[name].check, history)[name].count == anomaly.count


def test_a_history_without_anything_has_no_anomaly() -> None:
    result = check_history(Builder().history())
    assert {name: a.count for name, a in result.anomalies.items()} == dict.fromkeys(
        ALL_ANOMALIES, 0
    )


def test_check_history_runs_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    for module, function in CHECK_MODULES.items():
        original = getattr(checks, function)

        def spy(*args: Any, _original: Any = original, _module: str = module, **kw: Any) -> Any:
            called.append(_module)
            return _original(*args, **kw)

        monkeypatch.setattr(checks, function, spy)
    check_history(HAS_IT["duplicate"][0]())
    assert sorted(set(called)) == sorted(CHECK_MODULES)
    called.clear()
    check_history(HAS_IT["G0"][0]())
    assert sorted(set(called)) == sorted(CHECK_MODULES)


# -- what shows them ----------------------------------------------------------------------------


def test_the_schema_takes_every_entry_as_an_expectation() -> None:
    schema = scenario_schema()["properties"]
    for block in ("expect", "expect_sweep"):
        assert set(ALL_ANOMALIES) <= set(schema[block]["properties"]), block
        assert set(ALL_ANOMALIES) <= set(schema[block]["propertyNames"]["enum"]), block


def test_the_report_titles_every_entry_by_its_guarantee() -> None:
    assert list(GUARANTEES) == list(report_order())
    assert all(GUARANTEES[kind.name] == kind.guarantee for kind in ANOMALY_KINDS)


def test_the_cli_prints_every_entry_found_with_its_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    anomalies = {}
    for name in ALL_ANOMALIES:
        build, _ = HAS_IT[name]
        anomalies[name] = check_history(build()).anomalies[name]
    _print_anomalies(anomalies, History())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "anomalies"
    for name, line in zip(ALL_ANOMALIES, lines[1:], strict=True):
        assert line.split()[0] == name
        assert line.endswith(f"e.g. {describe(name, anomalies[name].examples[0])}")


def test_timelines_tell_the_stories_the_registry_names() -> None:
    assert PARTITION_STORIES == ("lost_write",)
    assert GROUP_STORIES == ("duplicate_processing", "lost_processing")


def test_an_unknown_name_is_shown_by_its_keys() -> None:
    assert describe("nothing_such", {"a": 1, "b": "x"}) == "a=1, b=x"
    assert values_of("nothing_such", {"value": "v"}) == ["v"]
    assert values_of("nothing_such", {}) == []
    # a failing sentence falls back to the keys too
    assert describe("duplicate", {"value": "v"}) == "value=v"
