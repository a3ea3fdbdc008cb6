"""benchmarks/run_quantiles.py: a sweep's latency row read run by run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from support import benchmark_module

from eosim.analysis.stats import sketch

rq = benchmark_module("run_quantiles")


def _sweep(tmp_path: Path) -> Path:
    """Two runs of variant 0, one of them invalid, and one of variant 1."""
    for chunk, variant, valid, lags in (
        (0, 0, True, [1.0] * 90 + [50.0] * 10),
        (1, 0, False, [500.0] * 100),
        (2, 1, True, [2.0] * 100),
    ):
        folder = tmp_path / "runs" / f"chunk={chunk:05d}" / f"variant={variant}"
        folder.mkdir(parents=True)
        table = pd.DataFrame({"valid": [valid], "read_after_ack_sketch": [sketch(lags)]})
        table.to_parquet(folder / "part.parquet")
    return tmp_path


def test_each_valid_runs_quantiles_by_variant(tmp_path):
    runs = rq.per_run(_sweep(tmp_path), "read_after_ack_sketch", [0.5, 0.95])
    assert sorted(runs) == [0, 1]
    [(p50, p95)] = runs[0]  # the invalid run is left out
    assert p50 == pytest.approx(1.0, rel=0.02) and p95 == pytest.approx(50.0, rel=0.02)
    assert runs[1][0][0] == pytest.approx(2.0, rel=0.02)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert rq.main([str(tmp_path)]) == 2
    assert rq.main([str(_sweep(tmp_path)), "--column", "nosuch"]) == 2
    assert rq.main([str(tmp_path), "--quantiles", "2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "not a sweep's output" in err[0] and "nosuch" in err[1]
