"""Apache Kafka's jars and eosim's workload driver, ready to run.

Two sources of jars:

- an Apache Kafka distribution (``kafka_home`` or ``KAFKA_HOME``): its ``libs/`` folder, as the
  release tarball lays it out (``kafka_2.13-<version>.jar``, ``kafka-clients-<version>.jar`` and
  every dependency);
- Maven Central: a small pom in the cache directory naming ``org.apache.kafka:kafka_2.13`` and
  ``org.apache.kafka:kafka-clients`` of the version, plus ``log4j-slf4j-impl`` so the broker's
  SLF4J logging reaches Log4j 2 (Kafka 4.1's broker jars bring ``slf4j-api`` 1.7 and
  ``log4j-core`` 2.24 but no binding between them), resolved with
  ``mvn dependency:copy-dependencies`` into ``<cache>/libs``.

Then the driver (``real/driver/*.java``, package ``eosim.driver``) is compiled with ``javac``
against those jars into ``<cache>/driver``. A marker file, ``<cache>/install.json``, is written
last: without it nothing in the cache counts as installed, so an interrupted or failed install
never looks complete. A second :func:`install` with everything present only checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from eosim.real import RealError

DEFAULT_VERSION = "4.1.1"
# The SLF4J 1.7 binding for Log4j 2 whose version matches the log4j-core Kafka 4.1 depends on.
LOG4J_VERSION = "2.24.3"
MARKER = "install.json"
DRIVER_MAIN = "eosim.driver.EosimDriver"
# JVM flags for short-lived client processes (the driver): a small heap, a quick start.
CLIENT_JVM_FLAGS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")

Progress = Callable[[str], None]


class InstallError(RealError):
    """Kafka cannot be installed here; ``str()`` is one line saying what is missing."""


def gc_log_flag(path: Path | str) -> str:
    """The JVM flag that logs every collection and safepoint to ``path``, one line each (a few
    lines a second cost nothing measurable). Each line carries the wall clock, the JVM's
    uptime and ``timenanos``: ``System.nanoTime()``, which on Linux is CLOCK_MONOTONIC, the
    clock of the histories (History.java), so a pause can be placed on a run's time line to
    the microsecond (benchmarks/tail_pauses.py)."""
    return f"-Xlog:gc,safepoint:file={path}:time,uptime,timenanos,level,tags"


@dataclass(frozen=True)
class KafkaInstall:
    """A usable Kafka: every jar of the broker and the clients, and the compiled driver.

    ``libs`` holds every jar (a distribution's ``libs/`` or the cache's), ``driver`` the
    driver's compiled classes, ``java`` the java executable to run them with.
    """

    version: str
    libs: Path
    driver: Path
    java: str

    def classpath(self, with_driver: bool = False) -> str:
        """The JVM classpath: every jar of ``libs`` (and the driver's classes first)."""
        parts = [str(self.libs / "*")]
        if with_driver:
            parts.insert(0, str(self.driver))
        return os.pathsep.join(parts)

    def driver_command(self, spec: Path | str, gc_log: Path | str | None = None) -> list[str]:
        """The command that runs the driver on a spec file (with ``gc_log``, its JVM logs
        each garbage collection there)."""
        log = [gc_log_flag(gc_log)] if gc_log else []
        return [
            self.java,
            *CLIENT_JVM_FLAGS,
            *log,
            f"-Dlog4j2.configurationFile={config_file('log4j2-client.properties')}",
            "-cp",
            self.classpath(with_driver=True),
            DRIVER_MAIN,
            str(spec),
        ]


def config_file(name: str) -> Path:
    """A file shipped in this package (``*.properties``): its path on disk."""
    return Path(str(resources.files("eosim.real").joinpath(name)))


def default_cache_dir(version: str) -> Path:
    """``$XDG_CACHE_HOME/eosim/kafka/<version>``, or ``~/.cache/eosim/kafka/<version>``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eosim" / "kafka" / version


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` if there is one, else ``java`` on the PATH."""
    return _jdk_tool("java")


def _jdk_tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def requirements_missing() -> str | None:
    """What this machine lacks to install and run a real Kafka, in one line; None if nothing.

    Maven is needed only without a Kafka distribution (``KAFKA_HOME``).
    """
    if find_java() is None:
        return "java not found on PATH"
    if _jdk_tool("javac") is None:
        return "javac not found on PATH (a JDK, not a JRE, is needed to compile the driver)"
    if not os.environ.get("KAFKA_HOME") and shutil.which("mvn") is None:
        return "mvn not found on PATH"
    return None


def driver_sources() -> list[Path]:
    """The driver's Java sources shipped in this package, sorted."""
    folder = config_file("driver")
    return sorted(folder.glob("*.java"))


def _sources_digest(sources: list[Path]) -> str:
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode())
        h.update(b"\0")
        h.update(src.read_bytes())
    return h.hexdigest()


def _resolve(
    version: str, cache_dir: Path | str | None, kafka_home: Path | str | None
) -> tuple[Path, Path | None]:
    """(cache directory, distribution home or None)."""
    home = kafka_home if kafka_home is not None else os.environ.get("KAFKA_HOME") or None
    if home is not None:
        home_path = Path(home).expanduser().resolve()
        if cache_dir is None:
            tag = hashlib.sha256(str(home_path).encode()).hexdigest()[:12]
            cache_dir = default_cache_dir(f"home-{tag}")
        return Path(cache_dir), home_path
    return Path(cache_dir) if cache_dir is not None else default_cache_dir(version), None


def _home_version(libs: Path) -> str | None:
    for jar in sorted(libs.glob("kafka-clients-*.jar")):
        m = re.fullmatch(r"kafka-clients-(\d[^-]*(?:-SNAPSHOT)?)\.jar", jar.name)
        if m:
            return m.group(1)
    return None


def find_install(
    version: str = DEFAULT_VERSION,
    cache_dir: Path | str | None = None,
    kafka_home: Path | str | None = None,
) -> KafkaInstall | None:
    """The install :func:`install` would return, if it is complete; no network, no compiling.

    Complete means: the marker file names this version and the current driver sources, the
    jars are there and the driver's classes are compiled.
    """
    cache, home = _resolve(version, cache_dir, kafka_home)
    java = find_java()
    marker = cache / MARKER
    if java is None or not marker.is_file():
        return None
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    libs = home / "libs" if home is not None else cache / "libs"
    driver = cache / "driver"
    want_version = _home_version(libs) if home is not None else version
    if (
        not isinstance(info, dict)
        or info.get("version") != want_version
        or info.get("libs") != str(libs)
        or info.get("driver_sha256") != _sources_digest(driver_sources())
        or not (libs / f"kafka-clients-{want_version}.jar").is_file()
        or not (driver / "eosim" / "driver" / "EosimDriver.class").is_file()
    ):
        return None
    return KafkaInstall(version=str(want_version), libs=libs, driver=driver, java=java)


def install(
    version: str = DEFAULT_VERSION,
    cache_dir: Path | str | None = None,
    kafka_home: Path | str | None = None,
    progress: Progress | None = None,
) -> KafkaInstall:
    """Kafka's jars (from ``kafka_home`` / ``KAFKA_HOME``, else Maven Central) and the driver
    compiled against them; raises :class:`InstallError` with one line when it cannot."""
    say = progress or (lambda _msg: None)
    found = find_install(version, cache_dir, kafka_home)
    if found is not None:
        say(f"kafka {found.version}: already installed ({found.libs})")
        return found
    cache, home = _resolve(version, cache_dir, kafka_home)
    java = find_java()
    if java is None:
        raise InstallError("java not found on PATH")
    javac = _jdk_tool("javac")
    if javac is None:
        raise InstallError("javac not found on PATH (a JDK, not a JRE, is needed)")
    cache.mkdir(parents=True, exist_ok=True)
    (cache / MARKER).unlink(missing_ok=True)
    if home is not None:
        libs = home / "libs"
        if not libs.is_dir():
            raise InstallError(f"{home}: no libs/ folder (not an Apache Kafka distribution)")
        found_version = _home_version(libs)
        if found_version is None:
            raise InstallError(f"{libs}: no kafka-clients-<version>.jar")
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise InstallError(f"{libs}: no kafka_2.13-<version>.jar (the broker)")
        version = found_version
        say(f"kafka {version}: using the distribution in {home}")
    else:
        libs = cache / "libs"
        _fetch(version, cache, libs, say)
    sources = driver_sources()
    if not sources:
        raise InstallError(f"{config_file('driver')}: no driver sources (*.java)")
    _compile(javac, sources, libs, cache / "driver", say)
    marker = {
        "version": version,
        "libs": str(libs),
        "driver_sha256": _sources_digest(sources),
    }
    tmp = cache / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=1) + "\n")
    tmp.replace(cache / MARKER)
    say(f"kafka {version}: installed ({libs})")
    return KafkaInstall(version=version, libs=libs, driver=cache / "driver", java=java)


def pom(version: str) -> str:
    """The pom whose dependencies are the broker, the clients and the logging binding."""
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-clients", version),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    ]
    lines = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>eosim</groupId><artifactId>kafka-fetch</artifactId><version>1</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{lines}\n  </dependencies>\n"
        "</project>\n"
    )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MAVEN_BOILERPLATE = re.compile(
    r"^(-> \[Help|To see the full|Re-run Maven|For more information|$|\[Help)"
)


def maven_error(output: str) -> str:
    """The line of Maven's output that says what went wrong (its last meaningful ``[ERROR]``
    line, without the help boilerplate Maven prints after it)."""
    meaningful = []
    for raw in output.splitlines():
        line = _ANSI.sub("", raw).strip()
        text = line.removeprefix("[ERROR]").strip()
        if line.startswith("[ERROR]") and not _MAVEN_BOILERPLATE.match(text):
            meaningful.append(text)
    if meaningful:
        # Maven's first ERROR line names the failed goal and the cause; later ones are hints.
        failed = [m for m in meaningful if m.startswith("Failed to execute goal")]
        return re.sub(r"\s*-> \[Help \d+\]$", "", (failed or meaningful)[-1])
    rest = [_ANSI.sub("", r).strip() for r in output.splitlines() if r.strip()]
    return rest[-1] if rest else "no output"


def _fetch(version: str, cache: Path, libs: Path, say: Progress) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InstallError("mvn not found on PATH (or set KAFKA_HOME to a Kafka distribution)")
    (cache / "pom.xml").write_text(pom(version))
    staging = cache / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    say(f"kafka {version}: resolving jars from Maven Central")
    proc = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(cache / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"mvn failed: {maven_error(proc.stdout + proc.stderr)}")
    for jar in (f"kafka_2.13-{version}.jar", f"kafka-clients-{version}.jar"):
        if not (staging / jar).is_file():
            shutil.rmtree(staging, ignore_errors=True)
            raise InstallError(f"mvn resolved no {jar}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.replace(libs)
    say(f"kafka {version}: {len(list(libs.glob('*.jar')))} jars in {libs}")


def javac_error(output: str) -> str:
    """The first error javac reports, on one line."""
    for line in output.splitlines():
        if "error:" in line:
            return line.strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def _compile(javac: str, sources: list[Path], libs: Path, out: Path, say: Progress) -> None:
    say(f"compiling the driver ({len(sources)} sources)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="driver.", dir=out.parent))
    proc = subprocess.run(
        [
            javac,
            "--release",
            "17",
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(staging),
            "-cp",
            str(libs / "*"),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallError(f"javac failed: {javac_error(proc.stdout + proc.stderr)}")
    shutil.rmtree(out, ignore_errors=True)
    staging.replace(out)


__all__ = [
    "CLIENT_JVM_FLAGS",
    "DEFAULT_VERSION",
    "DRIVER_MAIN",
    "InstallError",
    "KafkaInstall",
    "config_file",
    "default_cache_dir",
    "find_install",
    "find_java",
    "gc_log_flag",
    "install",
    "requirements_missing",
]
