"""`offset_rewind` (eosim.analysis.group_checker): each of its two findings on a history that
has it and on close ones that do not, and the `group` lines it reads."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from histories import Builder

from eosim.analysis.checks import ALL_ANOMALIES, GROUP_ANOMALIES, check_history
from eosim.analysis.explain import describe
from eosim.analysis.group_checker import check_groups
from eosim.analysis.history import History, HistoryError, parse_history
from eosim.cli import main


def rewind(history: History) -> Any:
    return check_groups(history)["offset_rewind"]


def test_offset_rewind_is_one_of_every_check() -> None:
    assert GROUP_ANOMALIES == ("offset_rewind",)
    assert set(GROUP_ANOMALIES) <= set(ALL_ANOMALIES)
    assert check_history(Builder().history()).anomalies["offset_rewind"].count == 0


# -- a lower offset accepted after a higher one ------------------------------------------------


def test_a_lower_commit_after_a_higher_one_completed_is_a_rewind() -> None:
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 5)])
    h.commit("b/0", 1, [("in", 0, 3)])
    found = rewind(h.parsed())
    assert found.count == 1
    example = found.examples[0]
    assert example["reasons"] == ["rewind"]
    assert (example["process"], example["offset"], example["earlier"]["offset"]) == ("b/0", 3, 5)
    assert "committed in-0 at 3 in group g" in describe("offset_rewind", example)


@pytest.mark.parametrize(
    ("offset", "error", "overlaps"),
    [
        (5, None, False),  # the same offset again: not backwards
        (7, None, False),  # forwards
        (3, "CommitFailedException: ...", False),  # refused: never written
        (3, None, True),  # invoked before the higher one completed: not ordered
    ],
)
def test_no_rewind_without_an_accepted_lower_commit_ordered_after(
    offset: int, error: str | None, overlaps: bool
) -> None:
    h = Builder()
    done = h.commit("a/0", 1, [("in", 0, 5)])
    h.commit("b/0", 1, [("in", 0, offset)], error=error, invoked=done - 0.5 if overlaps else None)
    assert rewind(h.parsed()).count == 0


def test_commits_of_other_partitions_and_groups_are_not_compared() -> None:
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 5)])
    h.commit("b/0", 1, [("in", 1, 3)])
    h.commit("c/0", 1, [("in", 0, 3)], group="other")
    assert rewind(h.parsed()).count == 0


def test_a_failed_higher_commit_does_not_make_a_lower_one_a_rewind() -> None:
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 5)], error="REBALANCE_IN_PROGRESS")
    h.commit("b/0", 1, [("in", 0, 3)])
    assert rewind(h.parsed()).count == 0


# -- a commit written by a member of an older generation --------------------------------------


def test_a_commit_of_an_old_generation_accepted_after_a_newer_assignment_is_flagged() -> None:
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 2)])
    h.assigned("b/0", 2, [("in", 0)])
    h.commit("a/0", 1, [("in", 0, 4)])  # a zombie of generation 1, forwards but stale
    found = rewind(h.parsed())
    assert found.count == 1
    example = found.examples[0]
    assert example["reasons"] == ["stale_generation"]
    assert example["newer"]["generation"] == 2
    assert "accepted though b/0 was assigned partitions in generation 2" in describe(
        "offset_rewind", example
    )


def test_a_stale_commit_that_also_rewinds_counts_once_with_both_reasons() -> None:
    h = Builder()
    h.assigned("b/0", 2, [("in", 0)])
    h.commit("b/0", 2, [("in", 0, 9)])
    h.commit("a/0", 1, [("in", 0, 4)])
    found = rewind(h.parsed())
    assert found.count == 1
    assert found.examples[0]["reasons"] == ["rewind", "stale_generation"]


@pytest.mark.parametrize(
    ("generation", "error", "overlaps"),
    [
        (2, None, False),  # the current generation
        (1, "CommitFailedException: ...", False),  # refused, as Kafka does
        (-1, None, False),  # no group management: no generation to judge
        (1, None, True),  # invoked before the new generation was seen
    ],
)
def test_no_stale_writer_without_an_accepted_commit_of_an_older_generation_after(
    generation: int, error: str | None, overlaps: bool
) -> None:
    h = Builder()
    seen = h.assigned("b/0", 2, [("in", 0)])
    h.commit(
        "a/0", generation, [("in", 0, 4)], error=error, invoked=seen - 0.5 if overlaps else None
    )
    assert rewind(h.parsed()).count == 0


def test_a_newer_generation_seen_only_through_a_refused_commit_does_not_count() -> None:
    """A refused commit proves nothing about the coordinator's generation."""
    h = Builder()
    h.commit("b/0", 2, [("in", 0, 1)], error="UNKNOWN_MEMBER_ID")
    h.commit("a/0", 1, [("in", 0, 4)])
    assert rewind(h.parsed()).count == 0


# -- the lines ------------------------------------------------------------------------------


def _group(**fields: Any) -> str:
    line = {"kind": "group", "time": 5, "process": "a/0", "group": "g", "event": "commit"}
    line["offsets"] = [{"topic": "in", "partition": 0, "offset": 1}]
    line.update(fields)
    return json.dumps({k: v for k, v in line.items() if v is not ...})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"invoked": 6}, "group.invoked: 6 is after the line's time 5"),
        ({"offsets": ...}, "group.offsets: missing"),
        ({"generation": -2}, "group.generation: expected -1 or more"),
        ({"generation": "1"}, "group.generation: expected an integer or null"),
        ({"async": "yes"}, "group.async: expected a boolean"),
        ({"offsets": [{"topic": "in", "partition": 0}]}, "group.offsets[0].offset"),
        ({"event": None}, "group.event: expected a string"),
    ],
)
def test_a_malformed_group_line_names_its_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(HistoryError) as raised:
        parse_history([_group(**fields)], "h.jsonl")
    assert str(raised.value).startswith("h.jsonl:1: ")
    assert message in str(raised.value)


def test_a_commit_line_without_invoked_was_invoked_when_it_completed() -> None:
    history = parse_history([_group(), _group(event="assigned", offsets=..., time=7)])
    commit, assigned = history.group_events
    assert (commit.invoked, commit.error, commit.asynchronous) == (5.0, None, False)
    assert commit.offsets == {("in", 0): 1}
    assert assigned.event == "assigned" and assigned.offsets == {}


def test_commits_that_go_on_from_a_rewound_offset_are_not_rewinds_themselves() -> None:
    """Only the step back counts: after 9 then 4, the commits of 5 and 6 move forwards."""
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 9)])
    h.commit("b/0", 1, [("in", 0, 4)])
    h.commit("b/0", 1, [("in", 0, 5)])
    h.commit("b/0", 1, [("in", 0, 6)])
    found = rewind(h.parsed())
    assert found.count == 1
    assert found.examples[0]["offset"] == 4


def test_a_lower_commit_concurrent_with_the_next_one_leaves_it_unproven() -> None:
    """9 is followed by 4 (a rewind) and, overlapping it, by 6: the write just before 6 may
    have been 4's, so 6 is not provably a step back."""
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 9)])
    invoked = h.clock + 0.5
    h.commit("b/0", 1, [("in", 0, 4)])
    h.commit("c/0", 1, [("in", 0, 6)], invoked=invoked)
    found = rewind(h.parsed())
    assert [e["offset"] for e in found.examples] == [4]


def test_an_older_commit_followed_by_a_later_one_is_not_what_came_before() -> None:
    """9, then 3 (a rewind), then 5 invoked after both completed: the latest write before 5
    was 3's, not 9's."""
    h = Builder()
    h.commit("a/0", 1, [("in", 0, 9)])
    h.commit("a/0", 1, [("in", 0, 3)])
    h.commit("b/0", 1, [("in", 0, 5)])
    assert [e["offset"] for e in rewind(h.parsed()).examples] == [3]


def _moved_back_by_definition(commits: list[tuple[float, float, int]]) -> list[int]:
    """The docstring's definition, quadratic: indices of the commits (invoked, completed,
    offset) that moved the offset back."""
    out = []
    for b, (b_invoked, b_time, b_offset) in enumerate(commits):
        before = [c for c in commits if c[1] < b_invoked]
        if not before:
            continue
        last_invoked = max(c[0] for c in before)
        latest = [c for c in before if c[1] >= last_invoked]
        concurrent = [
            c for i, c in enumerate(commits) if i != b and c[0] < b_time and c[1] >= b_invoked
        ]
        if all(c[2] > b_offset for c in latest + concurrent):
            out.append(b)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_the_sweep_finds_exactly_what_the_definition_does(seed: int) -> None:
    rng = random.Random(seed)
    commits = []
    for _ in range(rng.randint(1, 25)):
        invoked = rng.uniform(0, 100)
        commits.append((invoked, invoked + rng.choice([0.5, 2, 10, 30]), rng.randint(0, 8)))
    h = Builder()
    for i, (invoked, time, offset) in enumerate(commits):
        h.records.append(
            {
                "kind": "group",
                "time": time,
                "process": f"p{i}",
                "group": "g",
                "event": "commit",
                "invoked": invoked,
                "offsets": [{"topic": "in", "partition": 0, "offset": offset}],
            }
        )
    found = check_groups(h.history())["offset_rewind"]
    expected = _moved_back_by_definition(commits)
    assert found.count == len(expected)
    shown = [e["process"] for e in found.examples]  # the first few, in line order
    assert shown == [f"p{i}" for i in expected][: len(shown)]


def _check_output(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    with pytest.raises(SystemExit):
        main(["check", str(path)])
    return capsys.readouterr().out


def test_eosim_check_says_offset_rewind_was_not_checked_without_group_commits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    h = Builder()
    h.assigned("a/0", 1, [("in", 0)])
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(h.lines()) + "\n")
    out = _check_output(capsys, path)
    assert "offset_rewind               -   not checked: no group commit lines" in out
    h.commit("a/0", 1, [("in", 0, 3)])
    path.write_text("\n".join(h.lines()) + "\n")
    assert "  offset_rewind               0\n" in _check_output(capsys, path)
