"""Spark for sweeps: embedded by default, a real cluster when asked.

With no ``--master`` the sweep runs on ``local[*]`` inside this process, and Java 17 is the
only prerequisite. ``--master spark://host:7077`` (or launching under ``spark-submit``) uses
a real cluster unchanged. Workers run the interpreter that started the sweep
(``PYSPARK_PYTHON``), so a virtual environment just works locally. A cluster's workers need
eosim installed at the same version.

Only the DataFrame API is used (``spark.range`` -> ``mapInArrow``, whose tasks write their
chunks of runs as Parquet themselves and return partial aggregates), so the same code runs
where RDDs are unavailable (Spark Connect).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

LOG4J = Path(__file__).with_name("log4j2.properties")
# Lines the JVM and Spark print on every start, which say nothing to a sweep's user: the JVM's
# note on the incubator module Spark enables, and Spark's note on its default log level (it
# prints that for any PySpark driver, whatever its log4j configuration says).
JVM_NOISE = re.compile(
    r"WARNING: Using incubator modules|Setting default log level to|"
    r"To adjust logging level use sc\.setLogLevel"
)


class EngineError(ValueError):
    """Spark cannot be started or reached (one line, for the user)."""


def check_java() -> str:
    """The Java major version; raises :class:`EngineError` when Java 17+ is missing."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    advice = "install Java 17 (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    if not java or not Path(java).exists():
        raise EngineError(f"Java was not found; sweeps run on Spark, which needs it: {advice}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"cannot run {java}: {exc}; {advice}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise EngineError(f"cannot tell the version of {java}; {advice}")
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < 17:
        raise EngineError(f"Java {major} found at {java}; Spark needs 17 or newer: {advice}")
    return str(major)


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Fail fast when a standalone master cannot be reached."""
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError):
            continue
    raise EngineError(f"--master {master}: cannot reach the Spark master")


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def preflight(master: str | None) -> None:
    """Checks that fail fast, before anything is written: Java, and the master if any."""
    check_java()
    if master is not None:
        check_master(master)


class _StderrFilter:
    """Copies the JVM's standard error to ours, less :data:`JVM_NOISE`; :meth:`mute` drops
    everything, for an interrupted sweep whose shutdown only produces tracebacks."""

    def __init__(self, stream: Any) -> None:
        self.muted = False
        self._stream = stream
        threading.Thread(target=self._copy, name="jvm-stderr", daemon=True).start()

    def _copy(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if self.muted or JVM_NOISE.search(line):
                continue
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):  # our stderr is gone
                pass

    def mute(self) -> None:
        self.muted = True


_jvm_stderr: _StderrFilter | None = None


def _launch_gateway(options: dict[str, str]) -> None:
    """Start the JVM as PySpark would, but with its standard error through a filter.

    PySpark launches the JVM on the first SparkContext and keeps it for the process; once
    launched here, ``getOrCreate`` uses it. Under ``spark-submit`` the JVM already exists.
    """
    global _jvm_stderr
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or under_spark_submit():
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(key, value)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    _jvm_stderr = _StderrFilter(gateway.proc.stderr)
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def silence_shutdown() -> None:
    """Drop what the JVM and Py4J print from now on (an interrupted sweep shutting down)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    if _jvm_stderr is not None:
        _jvm_stderr.mute()


def start_session(master: str | None, app_name: str) -> tuple[Any, float]:
    """A SparkSession and the seconds it took to start (after :func:`preflight`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    started = time.perf_counter()
    from pyspark.sql import SparkSession

    options = {"spark.app.name": app_name}
    if master is not None:
        options["spark.master"] = master
    elif not under_spark_submit():
        options["spark.master"] = "local[*]"
    options.update(session_conf())
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    try:
        _launch_gateway(options)
        spark = builder.getOrCreate()
    except Exception as exc:  # Spark reports start-up failures with many exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(f"Spark did not start: {first}") from None
    spark.sparkContext.setLogLevel("ERROR")
    warm_up(spark)
    return spark, time.perf_counter() - started


def _import_eosim(batches: Any) -> Any:
    import eosim.analysis.outcome
    import eosim.analysis.sweep.task  # noqa: F401

    yield from batches


def warm_up(spark: Any) -> None:
    """Start the Python workers and import eosim in them, before the first chunk.

    This makes the first chunk as fast as the others, and a cluster whose workers cannot
    import eosim fails here with one clear line instead of deep inside the first chunk.
    """
    n = default_partitions(spark)
    try:
        spark.range(0, n, numPartitions=n).mapInArrow(_import_eosim, "id bigint").count()
    except Exception as exc:  # the failure arrives wrapped in several Spark/Py4J layers
        text = str(exc)
        hint = "is eosim installed, at the same version, for the workers' Python?"
        first = next((ln for ln in text.splitlines() if "Error" in ln), text[:200])
        raise EngineError(f"Spark workers cannot run eosim ({first.strip()}); {hint}") from None


def session_conf() -> dict[str, str]:
    return {
        "spark.pyspark.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        # The driver JVM (in local mode also the executor) moves a few small rows per task:
        # its C2 compiler and parallel collector only burn the CPU the Python workers need
        # (1.9 s against 0.54 s of JVM CPU in a 1,000-run local[2] sweep, see
        # docs/performance.md).
        "spark.driver.extraJavaOptions": (
            f"-Dlog4j2.configurationFile=file:{LOG4J} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        ),
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }


def default_partitions(spark: Any) -> int:
    """Tasks per job: four per core, so that the last tasks of a job leave little idle."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism) * 4)
    except Exception:  # Spark Connect has no SparkContext
        return 16


def run_job(spark: Any, runner: Any, result_ddl: str, items: int, partitions: int) -> list[Any]:
    """Feed ids [0, items) to ``runner`` (``mapInArrow``) in ``partitions`` tasks (at most one
    per item) and collect its small result rows. The runner writes the runs' results itself."""
    n = max(1, min(partitions, items))
    return spark.range(0, items, numPartitions=n).mapInArrow(runner, result_ddl).collect()
