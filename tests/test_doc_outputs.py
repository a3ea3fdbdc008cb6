"""The outputs README.md and docs/ show are what the commands print today.

Every ```text block whose first line is ``$ eosim run``, ``$ eosim shrink`` or ``$ eosim
sweep`` is run here (from the project's root, in-process) and its lines compared with what
the command prints. Only wall-clock times differ between runs, so they are left out of the
comparison; a ``...`` line stands for lines the doc leaves out, and a block ends at its next
``$`` line (another command, not run here).
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest

from eosim.cli import main

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("run", "shrink", "sweep")
# Wall-clock times and what only a fresh Spark prints.
_WALL = re.compile(r"\d[\d,.]* s wall|in \d[\d.]* s|\s*\(Spark start-up [\d.]+ s[^)]*\)")


def blocks() -> list[tuple[str, int, list[str], list[str]]]:
    """(file, line, argv, expected lines) of every runnable block, in a fixed order."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() != "```text" or i + 1 >= len(lines):
                continue
            first = lines[i + 1]
            argv = shlex.split(first[2:]) if first.startswith("$ eosim ") else []
            if len(argv) < 2 or argv[1] not in COMMANDS:
                continue
            body = []
            for later in lines[i + 2 :]:
                if later.startswith("```") or later.startswith("$ "):
                    break
                body.append(later)
            found.append((path.relative_to(ROOT).as_posix(), i + 2, argv[1:], body))
    return found


def normal(line: str) -> str:
    return _WALL.sub("", line).rstrip()


def matches(shown: list[str], printed: list[str]) -> str | None:
    """None when ``printed`` has ``shown``'s lines in order (``...``: any lines between);
    otherwise the first shown line not found where it should be."""
    at = 0
    skipping = False
    for want in shown:
        if want.strip() == "...":
            skipping = True
            continue
        want = normal(want)
        while at < len(printed) and normal(printed[at]) != want:
            if not skipping:
                return f"expected {want!r}, printed {printed[at]!r}"
            at += 1
        if at == len(printed):
            return f"not printed: {want!r}"
        at += 1
        skipping = False
    return None


BLOCKS = blocks()


def test_the_docs_have_runnable_blocks() -> None:
    """The collection finds the blocks (a README reshuffle must not silently empty it)."""
    assert sum(1 for f, *_ in BLOCKS if f == "README.md") >= 3
    assert any(argv[0] == "sweep" for _, _, argv, _ in BLOCKS)


def test_the_comparison_can_fail() -> None:
    printed = ["a", "b 1.2 s wall", "c"]
    assert matches(["a", "b 9 s wall", "c"], printed) is None
    assert matches(["a", "...", "c"], printed) is None
    assert matches(["a", "c"], printed) is not None  # a line left out without "..."
    assert matches(["a", "b 1.2 s wall", "d"], printed) is not None


@pytest.mark.parametrize(
    "where, argv, shown",
    [pytest.param(f"{f}:{n}", a, s, id=f"{f}:{n}") for f, n, a, s in BLOCKS],
)
def test_a_shown_output_is_what_the_command_prints(
    where: str,
    argv: list[str],
    shown: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(ROOT)
    if argv[0] == "sweep":
        import eosim.analysis.sweep as sweeps

        spark = request.getfixturevalue("spark")  # the suite's one session
        monkeypatch.setattr(sweeps, "run_sweep", functools.partial(sweeps.run_sweep, spark=spark))
        argv = [*argv, "--quiet"]
        shown = [line for line in shown if not line.startswith("results ")]
        argv += ["--out", str(tmp_path / "out")]
    if argv[0] == "shrink":
        argv = [*argv, "--out", str(tmp_path / "min.yaml")]
    if "--history" in argv:  # written where the test can throw it away
        i = argv.index("--history")
        argv[i + 1] = str(tmp_path / argv[i + 1])
    with pytest.raises(SystemExit):
        main(argv)
    printed = capsys.readouterr().out.splitlines()
    printed = [line for line in printed if not line.startswith("results ")]
    problem = matches(shown, printed)
    assert problem is None, f"{where}: {problem}\n--- printed:\n" + "\n".join(printed)
