"""Reading eosim JSON Lines histories: the line-by-line reader vs eosim.analysis.jsonl_reader.

    python benchmarks/bench_history_in.py [--history FILE] [--scenario YAML] [--seed 1]
                                          [--repeat 5] [--keep FILE]
                                          [--scanner compiled|arrow]

Writes the history of one run (default: the standard scenario, seed 1, about 200,000 ops) to a
temporary file, or reads ``--history``, and times ``load_history`` on it both ways in one
process, alternating (``FAST_READER`` False, then True, ``--repeat`` times each; the previous
result is dropped and collected before each run). Prints the medians and their ratio, then
asserts that both give the same History (every field, the send columns) and the same
``check_history`` result, and prints how long the checks take on each. ``--scanner`` picks
the fast reader's scanner (default: the C one, ``_jsonl_scan``, where it was built). Not a
test.

    python benchmarks/bench_history_in.py --all

instead compares the two readers on every shipped and calibration scenario's history, seeds 1
and 2 (the fast path taken for any number of send lines; with each scanner built here), and
says which took the fast path and which had their `log` and `replica` records read as columns
(``LogTable``).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from eosim.analysis import history as history_module
from eosim.analysis.checks import check_history
from eosim.analysis.columns import SendColumns, send_columns
from eosim.analysis.history import History, load_history
from eosim.simulation import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path, fast: bool) -> History:
    saved = history_module.FAST_READER
    history_module.FAST_READER = fast
    try:
        return load_history(path)
    finally:
        history_module.FAST_READER = saved


def same_history(old: History, new: History) -> None:
    a, b = SendColumns.of_sends(old.sends), send_columns(new.sends)
    for name in ("process", "topic", "partition", "value", "outcome", "offset", "error"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    for name in ("invoke_time", "complete_time"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    for name in History.__dataclass_fields__:
        assert getattr(old, name) == getattr(new, name), name


def compare_all() -> None:
    from eosim.analysis import jsonl_reader

    jsonl_reader.MIN_SEND_LINES = 1
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    paths += sorted((ROOT / "scenarios" / "calibration").glob("*.yaml"))
    from eosim.analysis.columns import LogTable

    fast_path = columns = 0
    for path in paths:
        for seed in (1, 2):
            run = run_scenario(load_scenario(path), seed)
            raw = ("\n".join(run.history.lines()) + "\n").encode()
            del run
            took = jsonl_reader.read_history(raw, "h") is not None
            fast_path += took
            with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
                handle.write(raw)
                handle.flush()
                old = load(Path(handle.name), False)
                for scanner in scanners():
                    jsonl_reader.SCANNER = scanner
                    assert (jsonl_reader.read_history(raw, "h") is not None) == took, scanner
                    new = load(Path(handle.name), True)
                    assert check_history(old).to_dict() == check_history(new).to_dict(), path
                    same_history(old, new)
            logs = [*new.logs.values(), *(replica.records for replica in new.replicas)]
            tables = sum(isinstance(records, LogTable) for records in logs)
            columns += bool(tables)
            print(
                f"{path.relative_to(ROOT)} {seed} same {'fast' if took else 'line by line'}, "
                f"records as columns in {tables} of {len(logs)} logs and replicas"
            )
    print(
        f"{2 * len(paths)} histories, the same on both paths (scanners: "
        f"{', '.join(scanners())}); {fast_path} took the fast path; "
        f"{columns} had records read as columns"
    )


def scanners() -> list[str]:
    """The fast reader's scanners built here (the C one is optional)."""
    from eosim.analysis import jsonl_reader

    return ["compiled", "arrow"] if jsonl_reader._jsonl_scan is not None else ["arrow"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=Path, help="a history file (default: run one)")
    parser.add_argument("--scenario", type=Path, default=ROOT / "benchmarks" / "standard.yaml")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="also write the run's history here")
    parser.add_argument("--all", action="store_true", help="compare on every scenario")
    parser.add_argument(
        "--scanner",
        choices=["compiled", "arrow"],
        help="the fast reader's scanner (default: the C one where it was built)",
    )
    args = parser.parse_args()
    if args.scanner:
        from eosim.analysis import jsonl_reader

        if args.scanner == "compiled" and jsonl_reader._jsonl_scan is None:
            parser.error("--scanner compiled: eosim.analysis._jsonl_scan was not built")
        jsonl_reader.SCANNER = args.scanner
    if args.all:
        compare_all()
        return

    with tempfile.TemporaryDirectory() as folder:
        path = args.history
        if path is None:
            path = args.keep or Path(folder) / "history.jsonl"
            run = run_scenario(load_scenario(args.scenario), args.seed)
            with open(path, "w", encoding="utf-8") as stream:
                run.history.write(stream)
            del run
        size = path.stat().st_size
        with open(path, "rb") as handle:
            lines = sum(1 for _ in handle)
        from eosim.analysis import jsonl_reader

        print(f"history: {path.name}, {lines} lines, {size / 1e6:.1f} MB")
        print(f"fast reader's scanner: {jsonl_reader.SCANNER}")

        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for fast in (False, True):
                gc.collect()  # the previous result is dropped already
                start = time.perf_counter()
                load(path, fast)
                times[fast].append(time.perf_counter() - start)
        old = load(path, False)
        new = load(path, True)

    rows = {}
    for fast, label in ((False, "line by line (old)"), (True, "jsonl_reader (new)")):
        rows[fast] = statistics.median(times[fast])
        spread = f"{min(times[fast]):.3f} - {max(times[fast]):.3f}"
        print(f"load_history, {label:20} median {rows[fast]:.3f} s  ({spread})")
    print(f"speed-up: {rows[False] / rows[True]:.1f}x (medians)")
    for history, label in ((old, "old"), (new, "new")):
        start = time.perf_counter()
        check_history(history)
        print(f"check_history on the {label} History: {time.perf_counter() - start:.3f} s")
    assert check_history(old).to_dict() == check_history(new).to_dict()
    same_history(old, new)
    print("same History and check result on both paths: yes")


if __name__ == "__main__":
    main()
