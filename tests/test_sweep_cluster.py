"""The sweep CLI as a user runs it: a killed driver resumes; a real standalone cluster."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyspark
import pytest
from test_sweep_spark import GRID, SCENARIO, SMALL, rows

from eosim.analysis.sweep import run_sweep

CLI = [sys.executable, "-m", "eosim.cli", "sweep", SCENARIO, "--quiet"]
# Enough runs that the sweep is still running, seconds after its first chunk commits, when the
# test kills or interrupts it: the aggregation is no longer a long tail that would take the
# signal (it takes well under a second since the tasks return partial aggregates), and a
# 9-run sweep could finish between the first commit and the signal.
RUNS = 120
ARGS = ["--runs", str(RUNS), "--chunk-runs", "6", *(f"--grid={g}" for g in GRID)]
ARGS += [f"--set={s}" for s in SMALL]


def local_reference(spark, out: Path) -> pd.DataFrame:
    run_sweep(
        SCENARIO, RUNS, grid=GRID, overrides=SMALL, chunk_runs=6, out=out, quiet=True, spark=spark
    )
    return rows(out)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_killed_driver_resumes_without_redoing_work(spark, tmp_path):
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*CLI, *ARGS, "--out", str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    first_chunk = out / "runs" / "chunk=00000"
    try:
        wait_for(lambda: committed(first_chunk) or proc.poll() is not None, 240, "chunk 0")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert first_chunk.exists(), proc.stderr.read().decode()[-2000:]
    kept = {p: p.stat().st_mtime_ns for p in first_chunk.rglob("*.parquet")}
    assert not (out / "aggregate.parquet").exists()  # the sweep had not finished

    again = subprocess.run(
        [*CLI, *ARGS, "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert again.returncode in (0, 1), again.stderr[-2000:]
    assert "resumed" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in first_chunk.rglob("*.parquet")} == kept
    pd.testing.assert_frame_equal(rows(out), local_reference(spark, tmp_path / "reference"))


def test_ctrl_c_prints_one_line_and_the_sweep_resumes_without_jvm_noise(spark, tmp_path):
    out = tmp_path / "interrupted"
    proc = subprocess.Popen(
        [*CLI, *ARGS, "--out", str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_chunk = out / "runs" / "chunk=00000"
    try:
        wait_for(lambda: committed(first_chunk) or proc.poll() is not None, 240, "chunk 0")
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert [line for line in err.splitlines() if line.strip()] == ["eosim: aborted"], err[-3000:]
    assert first_chunk.exists() and not (out / "aggregate.parquet").exists()

    again = subprocess.run(
        [*CLI, *ARGS, "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert again.returncode in (0, 1), again.stderr[-2000:]
    # Chunk 0, perhaps more, was committed before Ctrl-C (asserted above: no aggregate.parquet).
    assert re.search(r"resumed [1-9][0-9]* committed chunk", again.stdout), again.stdout
    for noise in ("incubator modules", "Setting default log level", "sc.setLogLevel"):
        assert noise not in again.stderr
    assert again.stderr == ""
    pd.testing.assert_frame_equal(rows(out), local_reference(spark, tmp_path / "reference"))


def committed(chunk: Path) -> bool:
    return any(chunk.rglob("*.parquet"))


def test_ctrl_c_on_a_small_sweep_keeps_the_runs_that_finished(spark, tmp_path):
    """With the default chunking, a sweep of a few hundred runs commits them a few at a time:
    Ctrl-C keeps every chunk that had finished, and the same command resumes from them. (With
    one chunk per job of up to 400 runs, Ctrl-C used to discard every run of such a sweep.)"""
    out = tmp_path / "small"
    args = ["--runs", str(RUNS), *(f"--grid={g}" for g in GRID), *(f"--set={s}" for s in SMALL)]
    proc = subprocess.Popen(
        [*CLI, *args, "--out", str(out)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = out / "runs"
    try:
        wait_for(lambda: committed(runs) or proc.poll() is not None, 240, "a first chunk")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    kept = {p: p.stat().st_mtime_ns for p in runs.rglob("*.parquet")}
    # At least the first chunk was kept, and the sweep had not finished.
    assert 1 <= len(pd.read_parquet(runs)) < 2 * RUNS, "Ctrl-C kept no finished run"
    assert not (out / "aggregate.parquet").exists()

    again = subprocess.run(
        [*CLI, *args, "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert again.returncode in (0, 1), again.stderr[-2000:]
    assert f"resumed {len(kept)} committed chunk(s)" in again.stdout, again.stdout
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    reference = tmp_path / "reference"
    run_sweep(SCENARIO, RUNS, grid=GRID, overrides=SMALL, out=reference, quiet=True, spark=spark)
    pd.testing.assert_frame_equal(rows(out), rows(reference))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_standalone_cluster_gives_the_local_results(spark, tmp_path):
    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=env,
        stdout=(logs / "master.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        wait_for(lambda: _listening(port), 120, "the Spark master")
        worker = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{port}",
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(tmp_path / "work"),
            ],
            env=env,
            stdout=(logs / "worker.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_for(
            lambda: "Successfully registered" in (logs / "worker.log").read_text(),
            120,
            "the worker to register",
        )
        out = tmp_path / "cluster"
        done = subprocess.run(
            [*CLI, *ARGS, "--out", str(out), "--master", f"spark://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert done.returncode in (0, 1), done.stderr[-3000:]
        pd.testing.assert_frame_equal(rows(out), local_reference(spark, tmp_path / "reference"))
    finally:
        for proc in (worker, master):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        for proc in (worker, master):
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
