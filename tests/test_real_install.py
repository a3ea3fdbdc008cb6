"""eosim.real.install: Kafka's jars (Maven Central or KAFKA_HOME) and the compiled driver.

The unmarked tests fake the tools on an empty PATH; the ``kafka`` ones run the real Maven and
javac (Maven's local repository ~/.m2 makes a second fetch quick).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from eosim.real.install import (
    MARKER,
    InstallError,
    find_install,
    install,
    javac_error,
    maven_error,
    pom,
    requirements_missing,
)

MISSING = requirements_missing()
needs_kafka = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

MAVEN_FAILURE = """\x1b[0m\x1b[0m[ERROR] Failed to execute goal on project kafka-fetch: Could not \
resolve dependencies for project eosim:kafka-fetch:pom:1: Could not find artifact \
org.apache.kafka:kafka_2.13:jar:0.0.1 in central (https://repo.maven.apache.org/maven2) -> [Help 1]
[ERROR] \x20
[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.
[ERROR] Re-run Maven using the -X switch to enable full debug logging.
[ERROR] \x20
[ERROR] For more information about the errors and possible solutions, please read the following \
articles:
[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/DependencyResolutionException
"""


def _tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH of our own (no java, javac, mvn) and no JAVA_HOME / KAFKA_HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return bin_dir


def test_no_java_is_one_line(fake_path: Path, tmp_path: Path) -> None:
    assert requirements_missing() == "java not found on PATH"
    with pytest.raises(InstallError) as err:
        install(cache_dir=tmp_path / "k")
    assert str(err.value) == "java not found on PATH"


def test_no_maven_is_one_line_and_nothing_is_marked_installed(
    fake_path: Path, tmp_path: Path
) -> None:
    _tool(fake_path, "java", "exit 0")
    _tool(fake_path, "javac", "exit 0")
    assert requirements_missing() == "mvn not found on PATH"
    cache = tmp_path / "k"
    with pytest.raises(InstallError) as err:
        install(cache_dir=cache)
    assert str(err.value).startswith("mvn not found on PATH")
    assert "\n" not in str(err.value)
    assert not (cache / MARKER).exists()
    assert find_install(cache_dir=cache) is None


def test_maven_failure_names_its_cause(fake_path: Path, tmp_path: Path) -> None:
    _tool(fake_path, "java", "exit 0")
    _tool(fake_path, "javac", "exit 0")
    failure = tmp_path / "mvn-output.txt"
    failure.write_text(MAVEN_FAILURE)
    _tool(fake_path, "mvn", f"/bin/cat {failure}\nexit 1")
    cache = tmp_path / "k"
    with pytest.raises(InstallError) as err:
        install(version="0.0.1", cache_dir=cache)
    message = str(err.value)
    assert message.startswith("mvn failed: Failed to execute goal on project kafka-fetch:")
    assert message.endswith("(https://repo.maven.apache.org/maven2)")
    assert "\n" not in message
    assert not (cache / MARKER).exists()
    assert not (cache / "libs").exists()


def test_kafka_home_without_libs(fake_path: Path, tmp_path: Path) -> None:
    _tool(fake_path, "java", "exit 0")
    _tool(fake_path, "javac", "exit 0")
    home = tmp_path / "kafka"
    home.mkdir()
    with pytest.raises(InstallError, match=r"no libs/ folder \(not an Apache Kafka"):
        install(kafka_home=home, cache_dir=tmp_path / "k")


def test_javac_failure_gives_its_first_error(fake_path: Path, tmp_path: Path) -> None:
    _tool(fake_path, "java", "exit 0")
    _tool(
        fake_path,
        "javac",
        "echo 'Produce.java:3: error: cannot find symbol' >&2\n"
        "echo 'Txn.java:9: error: another' >&2\nexit 1",
    )
    home = tmp_path / "kafka"
    (home / "libs").mkdir(parents=True)
    for jar in ("kafka-clients-4.1.1.jar", "kafka_2.13-4.1.1.jar"):
        (home / "libs" / jar).write_bytes(b"")
    cache = tmp_path / "k"
    with pytest.raises(InstallError) as err:
        install(kafka_home=home, cache_dir=cache)
    assert str(err.value) == "javac failed: Produce.java:3: error: cannot find symbol"
    assert not (cache / MARKER).exists()
    assert not (cache / "driver").exists()


def test_kafka_home_comes_from_the_environment(
    fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool(fake_path, "java", "exit 0")
    _tool(fake_path, "javac", "exit 0")
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path / "nowhere"))
    assert requirements_missing() is None  # no Maven needed with a distribution
    with pytest.raises(InstallError, match="nowhere: no libs/ folder"):
        install(cache_dir=tmp_path / "k")


def test_maven_error_without_error_lines_is_the_last_line() -> None:
    assert maven_error("downloading\nsomething broke\n\n") == "something broke"
    assert maven_error("") == "no output"


def test_javac_error_without_error_lines() -> None:
    assert javac_error("javac: invalid flag: -x\n") == "javac: invalid flag: -x"


def test_pom_names_broker_clients_and_the_logging_binding() -> None:
    text = pom("4.1.1")
    for artifact in ("kafka_2.13", "kafka-clients", "log4j-slf4j-impl"):
        assert f"<artifactId>{artifact}</artifactId>" in text
    assert text.count("<version>4.1.1</version>") == 2


@pytest.mark.kafka
@needs_kafka
def test_install_from_maven_then_only_checks(tmp_path: Path) -> None:
    cache = tmp_path / "kafka"
    got = install("4.1.1", cache_dir=cache)
    assert got.version == "4.1.1"
    jars = {p.name for p in got.libs.glob("*.jar")}
    assert {"kafka_2.13-4.1.1.jar", "kafka-clients-4.1.1.jar", "log4j-slf4j-impl-2.24.3.jar"} <= (
        jars
    )
    assert (got.driver / "eosim" / "driver" / "EosimDriver.class").is_file()
    marker = cache / MARKER
    assert json.loads(marker.read_text())["version"] == "4.1.1"
    before = marker.stat().st_mtime_ns
    said: list[str] = []
    start = time.monotonic()
    again = install("4.1.1", cache_dir=cache, progress=said.append)
    assert time.monotonic() - start < 1.0
    assert again == got
    assert marker.stat().st_mtime_ns == before
    assert said == [f"kafka 4.1.1: already installed ({got.libs})"]
    assert find_install("4.1.1", cache_dir=cache) == got


@pytest.mark.kafka
@needs_kafka
def test_install_from_a_distribution(tmp_path: Path) -> None:
    """A KAFKA_HOME laid out as the release tarball (libs/ with every jar): the driver is
    compiled against it into the cache, the jars stay where they are."""
    fetched = install()
    home = tmp_path / "kafka_2.13-4.1.1"
    home.mkdir()
    os.symlink(fetched.libs, home / "libs")
    got = install(kafka_home=home, cache_dir=tmp_path / "cache")
    assert got.version == "4.1.1"
    assert got.libs == home.resolve() / "libs"
    assert (got.driver / "eosim" / "driver" / "Produce.class").is_file()
    assert find_install(kafka_home=home, cache_dir=tmp_path / "cache") == got


@pytest.mark.kafka
@needs_kafka
def test_maven_that_cannot_resolve_leaves_nothing_installed(tmp_path: Path) -> None:
    cache = tmp_path / "kafka"
    with pytest.raises(InstallError) as err:
        install("0.0.1", cache_dir=cache)
    assert str(err.value).startswith("mvn failed: Failed to execute goal")
    assert "kafka_2.13:jar:0.0.1" in str(err.value)
    assert not (cache / MARKER).exists()
