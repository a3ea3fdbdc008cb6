"""Property-based fuzzing of every input eosim reads, through the command line.

Scenario files (random bytes, random text, and documents built from the schema's own key
paths with wrong types and out-of-range values), ``--set``/``--seed`` arguments, history
files for ``eosim check`` (random lines and mutated lines of a real history) and the sweep's
``--runs``/``--grid``/``--vary``/``--seed`` arguments. Whatever the input, eosim answers with
a result or with exit code 2 and exactly one line on stderr that names the input, never a
traceback, and a refused input writes no file.

The CLI runs in-process (``eosim.cli.main``) with a fixed hypothesis seed (``derandomize``)
and no example database, so a CI run is deterministic. The sweep never starts Spark: its
arguments go to ``build_plan``, the validation ``eosim sweep`` does before Spark starts,
and only arguments it refuses reach the command itself.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import shutil
import signal
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from eosim import api
from eosim.analysis.checks import ALL_ANOMALIES
from eosim.analysis.sweep.plan import SweepPlan, VarySpec
from eosim.analysis.sweep.runner import SweepError, build_plan
from eosim.cli import main
from eosim.simulation.config import BROKER_KEYS, PRODUCER_KEYS, TOPIC_KEYS
from eosim.simulation.probe import POINTS
from eosim.simulation.rules import ProtocolRules
from eosim.simulation.scenario import Cluster, Scenario, Topic

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# A small scenario with every kind of application and fault, so that every key path of the
# schema exists in it (list items at index 0).
BASE: dict[str, Any] = yaml.safe_load(
    """
name: fuzz
duration: 5s
cluster:
  brokers: 2
  config: {replica.lag.time.max.ms: 1000, log.flush.interval.messages: 50}
  os_writeback: 1s
  topics:
    - {name: in, partitions: 2, replication_factor: 2, config: {min.insync.replicas: 1}}
    - {name: out, partitions: 2}
kafka: {rules: {truncation: leader_epoch}}
network: {request_loss: 0.01, response_loss: 0.01}
producers:
  - name: src
    config: {acks: all, request.timeout.ms: 500}
    workload: {topic: in, records: 20, rate: 200, keys: 3}
transactional_producers:
  - name: tx
    config: {transaction.timeout.ms: 2000}
    workload: {topic: out, transactions: 4, size: 2, rate: 40, abort_probability: 0.3}
processors:
  - name: app
    input: {topic: in, group: g}
    output: {topic: out}
    config: {transaction.timeout.ms: 2000}
consumers:
  - {name: reader, topic: out, isolation: read_committed}
faults:
  - {kind: crash, nodes: [app], rate: 2, start: 100ms, end: 1s, duration: {min: 10ms, max: 50ms}}
  - {kind: crash_at, point: producer.before_end_txn, nodes: [app], duration: 50ms}
  - {kind: partition, groups: [[src], [broker-0]], at: 200ms, duration: 100ms}
  - {kind: delay, links: [[tx, broker-1]], at: 200ms, duration: 300ms, extra_latency: 50ms}
  - {kind: loss, probability: 0.3, at: 300ms, duration: 100ms}
  - {kind: pause, nodes: [app], at: 400ms, duration: 200ms}
  - {kind: power_loss, nodes: [broker-1], at: 500ms, duration: 100ms}
  - {kind: pause, nodes: [controller], at: 600ms, duration: 100ms}
expect: {duplicate: 0}
"""
)


# -- the schema's key paths ------------------------------------------------------------------
def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _literals(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in _literals(arg)]


def schema_paths(
    model: type[BaseModel] = Scenario, prefix: tuple[str | int, ...] = ()
) -> list[tuple[str | int, ...]]:
    """Every key path of the schema, walked from the pydantic models; a list's items at 0,
    and the Kafka keys under ``config`` (the broker's under ``cluster.config``, the topic's
    under ``cluster.topics[].config``, the producer's elsewhere), the rules under
    ``kafka.rules`` and the anomalies under ``expect``."""
    paths: list[tuple[str | int, ...]] = []
    for name, field in model.model_fields.items():
        path = (*prefix, field.alias or name)
        paths.append(path)
        configs = {Cluster: BROKER_KEYS, Topic: TOPIC_KEYS}.get(model, PRODUCER_KEYS)
        leaves = {"config": list(configs), "rules": ProtocolRules.names()}
        leaves["expect"] = list(ALL_ANOMALIES)
        paths += [(*path, key) for key in leaves.get(name, [])]
        annotation = field.annotation
        listy = typing.get_origin(annotation) is list or any(
            typing.get_origin(a) is list for a in typing.get_args(annotation)
        )
        for sub in _models(annotation):
            paths += schema_paths(sub, (*path, 0) if listy else path)
    return paths


def schema_words(model: type[BaseModel] = Scenario) -> list[Any]:
    """Every literal value the schema names (``crash``, ``read_committed``, ...)."""
    words: list[Any] = []
    for field in model.model_fields.values():
        words += _literals(field.annotation)
        for sub in _models(field.annotation):
            words += schema_words(sub)
    return words


PATHS = schema_paths()
NAMES = ["src", "tx", "app", "reader", "broker-0", "broker-1", "broker-7", "controller", "in"]
NAMES += ["out", "g"]
# The values of the rules that take a name (kafka.rules.truncation) are not in the schema.
RULE_WORDS = ["leader_epoch", "high_watermark"]
WORDS = sorted({str(w) for w in schema_words()} | set(NAMES) | set(POINTS) | set(RULE_WORDS))
WORDS += ["", "all", "1s", "-1s", "0ms", "2.5m", "7d", "1e400", ">0", "<=1", "none", "\u2028"]
WORDS += ["never"]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 5, 2**31 - 1, 2**31, 2**63]),
    st.floats(),
    st.sampled_from([0.0, 0.5, 1.5, 1e-9, float("inf"), float("nan")]),
    st.text(max_size=8),
    st.sampled_from(WORDS),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.lists(st.lists(st.sampled_from(NAMES), max_size=2), max_size=2),
    st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=4)), SCALARS, max_size=3),
)

# Small values of the right shape, so that many documents stay valid and are run.
PLAUSIBLE = st.one_of(
    st.integers(0, 12),
    st.sampled_from([0.0, 0.001, 0.25, 1.0, 2.5]),
    st.booleans(),
    st.sampled_from(["0ms", "1ms", "20ms", "300ms", "2s", *NAMES, *WORDS]),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=2),
    st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2), min_size=1, max_size=2),
    st.fixed_dictionaries({"min": st.sampled_from(["1ms", "50ms"]), "max": st.just("80ms")}),
)


def _at(doc: Any, path: tuple[str | int, ...]) -> tuple[Any, Any] | None:
    """The container holding ``path``'s last key, creating mappings on the way, or None."""
    target = doc
    for part in path[:-1]:
        if isinstance(target, list) and isinstance(part, int) and part < len(target):
            target = target[part]
        elif isinstance(target, dict) and isinstance(part, str):
            if not isinstance(target.get(part), dict | list):
                target[part] = {}
            target = target[part]
        else:
            return None
    last = path[-1]
    if isinstance(target, dict) and isinstance(last, str):
        return target, last
    if isinstance(target, list) and isinstance(last, int) and last < len(target):
        return target, last
    return None


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """The base scenario with one to three keys set to random values or removed."""
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        # The schema walk names list items at 0; aim at any item of the base's lists.
        path = tuple(draw(st.integers(0, 5)) if isinstance(p, int) else p for p in path)
        found = _at(doc, path)
        if found is None:
            continue
        container, key = found
        if draw(st.integers(0, 9)) == 0:
            if isinstance(container, dict):
                container.pop(key, None)
        else:
            container[key] = draw(st.one_of(PLAUSIBLE, PLAUSIBLE, VALUES))
    return doc


# -- running the command line in-process ------------------------------------------------------
@contextlib.contextmanager
def inside(directory: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expired(_signum: int, _frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def eosim(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in an empty working directory; (exit code, stdout, stderr). Any exception
    other than the CLI's own exit is a crash and fails the test with its argv."""
    out, err = io.StringIO(), io.StringIO()
    work = Path(tempfile.mkdtemp(prefix="eosim-fuzz-"))
    try:
        with (
            inside(work),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            time_limit(10),
        ):
            try:
                main(list(argv))
            except SystemExit as exc:
                code = exc.code
            else:  # pragma: no cover - main() always exits
                code = 0
        left = sorted(p.name for p in work.iterdir())
    finally:
        shutil.rmtree(work)
    assert isinstance(code, int), (argv, code)
    if code == 2:
        assert left == [], (argv, left)
    return code, out.getvalue(), err.getvalue()


def refused(code: int, err: str, argv: tuple[str, ...], names: str = "") -> str:
    """Assert the one-line refusal; return the line."""
    assert code == 2, (argv, code, err)
    lines = err.splitlines()
    assert len(lines) == 1, (argv, err)
    assert lines[0].startswith("eosim: error: " + names), (argv, lines[0])
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def inputs() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="eosim-fuzz-inputs-") as d:
        yield Path(d)


# -- scenario files -------------------------------------------------------------------------
@settings(FUZZ, max_examples=60)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.text(alphabet="{}[]:,-&*!|>'\"%@#?\n\t name0123456789.", max_size=120).map(
            lambda t: t.encode("utf-8")
        ),
        st.sampled_from(
            [b"", b"\xff\xfe", b"name: x\n\x00", b"[" * 3000, b"{a: " * 3000, b"a: &a [*a]"]
        ),
    )
)
def test_random_bytes_are_refused_in_one_line(inputs, data):
    path = inputs / "bytes.yaml"
    path.write_bytes(data)
    for command in ("validate", "run"):
        argv = (
            (command, str(path), "--history", "h.jsonl")
            if command == "run"
            else (command, str(path))
        )
        code, out, err = eosim(*argv)
        refused(code, err, argv, str(path))
        assert out == ""


@settings(FUZZ, max_examples=300)
@given(doc=documents())
def test_schema_documents_validate_and_run_agree(inputs, doc):
    """validate refuses a document in one line naming the file, and run refuses it with the
    same line; or validate accepts it and run does not crash on it."""
    path = inputs / "doc.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _, err = eosim("validate", str(path))
    argv = ("run", str(path), "--history", "h.jsonl")
    event(f"validate exit {code}")
    if code == 2:
        line = refused(code, err, ("validate", str(path)), f"{path}:")
        run_code, _, run_err = eosim(*argv)
        assert refused(run_code, run_err, argv) == line
    else:
        assert code == 0, err
        run_code, _, run_err = eosim(*argv)
        assert run_code in (0, 1), (doc, run_err)


SET_PATHS = [".".join(str(p) for p in path) for path in PATHS]


@settings(FUZZ, max_examples=120)
@given(
    sets=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(SET_PATHS), st.text(max_size=12)),
            st.sampled_from(["=", "=", "", "==", "=["]),
            st.one_of(st.sampled_from(WORDS), st.text(max_size=10), VALUES.map(json.dumps)),
        ).map("".join),
        min_size=1,
        max_size=3,
    ),
    seed=st.one_of(st.none(), st.integers(-5, 2**70).map(str), st.text(max_size=5)),
)
def test_set_and_seed_arguments(sets, seed):
    scenario = str(ROOT / "scenarios" / "idempotent.yaml")
    args = [a for s in sets for a in ("--set", s)]
    code, _, err = eosim("validate", scenario, *args)
    if code != 0:
        refused(code, err, tuple(args))
    seed_args = [] if seed is None else ["--seed", seed]
    if code == 2 or (seed is not None and not seed.strip().isdigit()):
        # A run that would be refused (a bad --set, or a --seed that is not a number).
        argv = ("run", scenario, *args, *seed_args, "--history", "h.jsonl")
        run_code, _, run_err = eosim(*argv)
        line = refused(run_code, run_err, argv)
        if code == 2:
            assert line == err.strip() or "--seed" in line


# -- history files ---------------------------------------------------------------------------
@functools.cache
def history_lines() -> list[str]:
    """The lines of a real, small transactional history."""
    with tempfile.TemporaryDirectory(prefix="eosim-fuzz-history-") as d:
        path = Path(d) / "real.jsonl"
        code, _, err = eosim_keep(
            "run",
            str(ROOT / "scenarios" / "transactional-pipeline.yaml"),
            "--set",
            "producers.0.workload.records=30",
            "--history",
            str(path),
        )
        assert code in (0, 1), err
        return with_replicas(path.read_text(encoding="utf-8").splitlines())


def with_replicas(lines: list[str]) -> list[str]:
    """The history as if its partitions had two replicas each: every `log` line gains `leader`
    and `high_watermark`, and a `replica` line per replica follows the `log` lines (the follower
    one record behind), so that mutations reach the replication fields too."""
    out, replicas = [], []
    for text in lines:
        record = json.loads(text)
        if record.get("kind") == "log":
            entries = [*record["records"], *record.get("markers", [])]
            end = 1 + max((e["offset"] for e in entries), default=-1)
            record |= {"leader": "broker-0", "high_watermark": end}
            for broker, lag in (("broker-0", 0), ("broker-1", 1)):
                kept = [e for e in record["records"] if e["offset"] < end - lag]
                markers = [m for m in record.get("markers", []) if m["offset"] < end - lag]
                replicas.append(
                    {
                        "kind": "replica",
                        "topic": record["topic"],
                        "partition": record["partition"],
                        "broker": broker,
                        "leader": lag == 0,
                        "leader_epoch": 1,
                        "high_watermark": max(end - lag, 0),
                        "log_end_offset": max(end - lag, 0),
                        "records": kept,
                        "markers": markers,
                    }
                )
            text = json.dumps(record)
        out.append(text)
    return out + [json.dumps(r) for r in replicas]


def eosim_keep(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        st.text(max_size=6),
        st.sampled_from(
            ["op", "log", "replica", "meta", "offsets", "fence", "lso", "fault", "send", "txn"]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def history_files(draw: st.DrawFn, real: list[str]) -> bytes:
    lines = list(real)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.integers(0, 7))
        if how == 0:
            lines[i] = draw(st.text(max_size=30))
        elif how == 7:
            lines[i] = draw(st.sampled_from(["[" * 5000 + "]" * 5000, '{"kind":' * 3000, "NaN"]))
        elif how == 1:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif how == 2:
            lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
        elif how == 3:
            del lines[i]
            if not lines:
                lines = [""]
        elif how == 4:
            lines[i] = json.dumps(draw(JSON))
        else:
            try:
                record = json.loads(lines[i])
            except (ValueError, RecursionError):
                continue
            if not isinstance(record, dict) or not record:
                continue
            key = draw(st.sampled_from(sorted(record)))
            if how == 5:
                record[key] = draw(JSON)
            else:
                inner = record[key]
                if isinstance(inner, dict) and inner:
                    inner[draw(st.sampled_from(sorted(inner)))] = draw(JSON)
                elif isinstance(inner, list) and inner:
                    inner[draw(st.integers(0, len(inner) - 1))] = draw(JSON)
                else:
                    del record[key]
            lines[i] = json.dumps(record)
    data = "\n".join(lines).encode("utf-8")
    if draw(st.integers(0, 19)) == 0:
        data += draw(st.binary(min_size=1, max_size=8))
    return data


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_history_files_are_checked_or_refused_in_one_line(inputs, data):
    path = inputs / "h.jsonl"
    path.write_bytes(data.draw(history_files(history_lines())))
    for argv in (("check", str(path)), ("check", str(path), "--json")):
        code, _out, err = eosim(*argv)
        if code == 2:
            refused(code, err, argv, f"{path}:")
        else:
            assert code in (0, 1) and err == "", (argv, err)


# -- sweep arguments -------------------------------------------------------------------------
SWEPT = st.sampled_from(
    [
        "producers.0.workload.records",
        "producers.0.workload.rate",
        "producers.0.workload.keys",
        "producers.producer-0.config.acks",
        "producers.0.config.linger.ms",
        "producers.0.config.enable.idempotence",
        "network.request_loss",
        "cluster.brokers",
        "seed",
        "name",
        "expect.duplicate",
        "expect.bogus",
        "nothing.here",
    ]
)
SWEEP_PATHS = st.one_of(SWEPT, SWEPT, SWEPT, st.sampled_from(SET_PATHS), st.text(max_size=6))
SMALL = st.one_of(
    st.integers(-3, 20).map(str),
    st.sampled_from([-1.5, 0.25, 0.5, 2.5, 1e-300]).map(repr),
    st.sampled_from(["0", "1", "all", "true", "null"]),
)
NUMBER = st.one_of(
    SMALL,
    SMALL,
    st.integers(-(2**70), 2**70).map(str),
    st.floats().map(repr),
    st.sampled_from([".inf", "-.inf", ".nan", "1e400", "", "x", " ", "(", "a,b"]),
)


@st.composite
def grid_args(draw: st.DrawFn) -> str:
    """Mostly well-formed ``path=v1,v2`` (so that some plans are accepted), some not."""
    path = draw(SWEEP_PATHS)
    values = ",".join(draw(st.lists(NUMBER, min_size=1, max_size=3)))
    if draw(st.integers(0, 7)) == 0:
        return draw(st.sampled_from([path, f"{path}=", f"{path}={values},", f"={values}"]))
    return f"{path}={values}"


@st.composite
def vary_args(draw: st.DrawFn) -> str:
    """Mostly well-formed ``path=dist(a,b)`` (so that some plans are accepted), some not."""
    path = draw(SWEEP_PATHS)
    dist = draw(st.sampled_from(["uniform", "loguniform", "normal", "randint", "choice"]))
    if dist == "choice":
        args = draw(st.lists(NUMBER, min_size=1, max_size=3))
    else:
        a, b = draw(NUMBER), draw(NUMBER)
        args = [a, b] if draw(st.booleans()) else [b, a]
    text = f"{path}={dist}({','.join(args)})"
    if draw(st.integers(0, 7)) == 0:
        return draw(
            st.sampled_from([text[:-1], f"{path}=zipf(1,2)", f"{path}={dist}()", f"={dist}(1,2)"])
        )
    return text


@settings(FUZZ, max_examples=300)
@given(
    runs=st.sampled_from([1, 1, 1, 2, 3, 0, -1]),
    grid=st.lists(grid_args(), max_size=2),
    vary=st.lists(vary_args(), min_size=1, max_size=2),
    seed=st.one_of(st.none(), st.integers(0, 2**70)),
    sets=st.lists(
        st.sampled_from(["producers.0.workload.records=10", "expect.acked=10", "seed=x"]),
        max_size=1,
    ),
)
def test_sweep_arguments_are_refused_before_spark_or_every_run_is_valid(
    runs, grid, vary, seed, sets
):
    scenario = str(ROOT / "scenarios" / "idempotent.yaml")
    try:
        plan, _ = build_plan(scenario, runs, grid, vary, seed, sets)
    except SweepError:
        event("plan refused")
        argv = ("sweep", scenario, "--runs", str(runs), "--out", "results")
        argv += tuple(a for g in grid for a in ("--grid", g))
        argv += tuple(a for v in vary for a in ("--vary", v))
        argv += tuple(a for s in sets for a in ("--set", s))
        argv += () if seed is None else ("--seed", str(seed))
        code, _, err = eosim(*argv)
        refused(code, err, argv)
        return
    # Accepted: every run the sweep would start must be a valid scenario.
    event("plan accepted")
    assert isinstance(plan, SweepPlan)
    for variant in range(len(plan.variants)):
        for run in range(min(plan.runs, 3)):
            params = plan.run_parameters(variant, run)
            api.parse(plan.scenario_text, scenario, plan.overrides(params))


NUMERIC = st.one_of(
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(-3, 20),
    st.sampled_from([-1.5, 0.0, 0.25, 0.5, 2.5, 1e-300, 10**20, -(10**20), 1e300]),
).map(repr)


@st.composite
def well_formed_vary(draw: st.DrawFn) -> str:
    path = draw(SWEPT)
    dist = draw(st.sampled_from(["uniform", "loguniform", "normal", "randint", "choice"]))
    if dist == "choice":
        args = draw(
            st.lists(st.one_of(NUMERIC, NUMERIC, st.sampled_from(["all", "x"])), min_size=1)
        )
    else:
        args = sorted([draw(NUMERIC), draw(NUMERIC)], key=float)
    return f"{path}={dist}({','.join(args[:4])})"


@settings(FUZZ, max_examples=400)
@given(
    grid=st.lists(
        st.builds(lambda p, vs: f"{p}={','.join(vs)}", SWEPT, st.lists(NUMERIC, min_size=1)),
        max_size=1,
    ),
    vary=st.lists(well_formed_vary(), min_size=1, max_size=2),
)
def test_an_accepted_sweep_only_starts_valid_runs(grid, vary):
    """What build_plan accepts, every run of the sweep can parse: a sweep refuses a bad
    --grid or --vary before Spark starts, not in a Spark task."""
    scenario = str(ROOT / "scenarios" / "idempotent.yaml")
    try:
        plan, _ = build_plan(scenario, 4, grid, vary, 1, [])
    except SweepError:
        event("plan refused")
        return
    event("plan accepted")
    for variant in range(len(plan.variants)):
        for run in range(plan.runs):
            params = plan.run_parameters(variant, run)
            api.parse(plan.scenario_text, scenario, plan.overrides(params))


# -- what the fuzzer found, pinned ---------------------------------------------------------
@pytest.mark.parametrize(
    "point", ["producer.before_end_txn", "producer.after_end_txn_sent", "producer.after_commit"]
)
def test_crash_at_a_point_the_writer_passes_itself(point):
    """A crash_at fault on a transactional producer at a point its own process passes used
    to make SimPy refuse the process interrupting itself (RuntimeError, a traceback)."""
    scenario = api.parse(
        f"""
name: t
cluster: {{brokers: 2, topics: [{{name: out, partitions: 2}}]}}
transactional_producers:
  - {{name: tx, workload: {{topic: out, transactions: 6, size: 2, rate: 20}}}}
consumers: [{{name: r, topic: out}}]
faults:
  - {{kind: crash_at, point: {point}, nodes: [tx], occurrence: 2, duration: 50ms}}
""",
        "t.yaml",
    )
    outcome = api.run(scenario, 1)
    assert [f.kind for f in outcome.run.faults] == ["crash"]
    assert outcome.run.counts["sent"] == 6
    assert [op.process for op in outcome.history.txns][-1] == "tx/1"  # it restarted
    assert not any(a.count for a in outcome.check.anomalies.values())


def test_a_loguniform_draw_stays_within_its_bounds():
    """exp(log(3)) is 3.0000000000000004: a loguniform(3,3) draw on an integer setting
    used to fail in a Spark task."""
    spec = VarySpec.parse("producers.0.workload.records=loguniform(3,3)")
    rng = np.random.default_rng(0)
    assert {spec.draw(rng) for _ in range(20)} == {3.0}
