"""The ``eosim`` command line: a thin layer over :mod:`eosim.api`.

Exit codes: 0 when expectations hold (or, for ``check``, no anomaly is found), 1 when they
do not, 2 on bad input (including a scenario a real cluster cannot run, or Java or Maven
missing for one), 3 when the history had nothing to check (``run`` and ``check``: the verdict is
unknown), 4 when a real cluster could not carry the run out. Every error is one line on stderr,
without a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import click

from eosim import __version__, api
from eosim.analysis.anomalies import KINDS
from eosim.analysis.checks import end_notes, transactional_ops
from eosim.analysis.cycle_checker import cycles_judged
from eosim.analysis.expect import ExpectResult, parse_expectation
from eosim.analysis.explain import describe
from eosim.analysis.history import History, HistoryError
from eosim.real import RealError
from eosim.simulation import ScenarioError
from eosim.simulation.config import ConfigException

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_REAL_FAILED = 0, 1, 2, 3, 4


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT


class RealFailure(click.ClickException):
    """A real cluster that could not carry a run out (exit 4)."""

    exit_code = EXIT_REAL_FAILED


def target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--target and the options of a real Kafka (run, sweep)."""
    f = click.option(
        "--kafka-home",
        envvar="KAFKA_HOME",
        type=click.Path(file_okay=False),
        help="A Kafka distribution to use instead of fetching one (default: $KAFKA_HOME).",
    )(f)
    f = click.option(
        "--kafka-version",
        default=None,
        metavar="VERSION",
        help=f"Kafka version to fetch with Maven (default: {api.DEFAULT_KAFKA_VERSION}).",
    )(f)
    return click.option(
        "--target",
        type=click.Choice(["model", "kafka"]),
        default="model",
        show_default=True,
        help="Run on the model, or on a local Apache Kafka cluster (see README, Real Kafka).",
    )(f)


def open_target(name: str, kafka_version: str | None, kafka_home: str | None) -> Any:
    """The target, or one line on what is missing (exit 2)."""
    if name == "model":
        return api.target("model")
    from eosim.real.install import InstallError

    try:
        return api.target(name, kafka_version=kafka_version, kafka_home=kafka_home)
    except InstallError as exc:
        raise BadInput(f"--target kafka: {exc}") from None


def refuse_on(target: Any, scenario: Any, where: str) -> None:
    """A scenario the target cannot run: one line (exit 2)."""
    refusals = target.refusals(scenario) if hasattr(target, "refusals") else []
    if refusals:
        more = f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""
        raise BadInput(f"{where}: {refusals[0]}{more}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eosim")
def cli() -> None:
    """Simulate Kafka producers under faults and check delivery guarantees."""


@cli.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a value.")
def validate(scenario: str, overrides: tuple[str, ...]) -> None:
    """Check a scenario file without running it."""
    s = _load(scenario, overrides)
    click.echo(
        f"{scenario}: ok ({s.name}: {len(s.producers)} producer(s), {len(s.faults)} fault spec(s))"
    )
    for w in [*s.warnings(), *api.expectation_warnings(s)]:
        click.echo(f"warning    {w}")


@cli.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=click.IntRange(min=0), help="Seed (default: the scenario's).")
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a value.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--history",
    "history_path",
    type=click.Path(dir_okay=False),
    help="Write the history (JSON Lines).",
)
@click.option("--timeline", is_flag=True, help="Print a timeline around each anomaly.")
@click.option(
    "--svg", "svg_dir", type=click.Path(file_okay=False), help="Also write timelines as SVG here."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show the simulated time on stderr as the run goes "
    "(default: when stderr is a terminal; never with --json).",
)
@target_options
def run(
    scenario: str,
    seed: int | None,
    overrides: tuple[str, ...],
    as_json: bool,
    history_path: str | None,
    timeline: bool,
    svg_dir: str | None,
    progress: bool | None,
    target: str,
    kafka_version: str | None,
    kafka_home: str | None,
) -> None:
    """Run a scenario once and check its history.

    With --target kafka the scenario runs on a local Apache Kafka cluster (fetched with Maven
    on first use): the same faults at the same moments as the model's run of that seed, the
    same checks on the history its clients write."""
    s = _load(scenario, overrides)
    if history_path is not None:
        _check_writable(history_path)
    trace = timeline or svg_dir is not None
    if trace and target != "model":
        raise BadInput(
            "--timeline and --svg draw the model's messages; a run on a real cluster has none "
            "(write its history with --history and read it with eosim check)"
        )
    where = open_target(target, kafka_version, kafka_home)
    show = not as_json and (sys.stderr.isatty() if progress is None else progress)
    line = ProgressLine(sys.stderr, s.duration) if show else None
    try:
        refuse_on(where, s, scenario)
        outcome = api.run(
            s,
            seed,
            source=scenario,
            overrides=overrides,
            trace=trace,
            progress=line,
            target=where,
        )
    except RealError as exc:
        raise RealFailure(f"--target {target}: {exc}") from None
    finally:
        if line is not None:
            line.close()
        if hasattr(where, "close"):
            where.close()
    if history_path is not None:
        try:
            api.write_history(outcome.run, history_path)
        except OSError as exc:
            raise BadInput(
                f"--history {history_path}: cannot write: {exc.strerror or exc}"
            ) from None
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), separators=(",", ":")))
    else:
        _print_summary(outcome, history_path)
    if trace:
        _emit_timelines(api.timelines(outcome), svg_dir, f"seed-{outcome.run.seed}", as_json)
    if outcome.run.invalid:
        sys.exit(EXIT_REAL_FAILED)  # a real run whose faults or drain were not proven
    sys.exit(_exit_code(outcome.check.unknown, outcome.expect.met))


@cli.command()
@click.argument("results", type=click.Path(file_okay=False))
@click.option("--run", "run_id", required=True, metavar="VARIANT:RUN", help="The run to replay.")
@click.option(
    "--svg",
    "svg_dir",
    type=click.Path(file_okay=False),
    help="Where to write SVG timelines (default: RESULTS/timelines).",
)
def replay(results: str, run_id: str, svg_dir: str | None) -> None:
    """Re-run one run of a sweep, confirm its outcome, and draw its anomalies."""
    from eosim.analysis.sweep.replay import ReplayError, describe_params
    from eosim.analysis.sweep.replay import replay as do_replay

    try:
        r = do_replay(results, run_id)
    except ReplayError as exc:
        raise BadInput(str(exc)) from None
    click.echo(f"run        {r.variant}:{r.run} of {results}, seed {r.seed}")
    click.echo(f"params     {describe_params(r.params)}")
    if r.mismatches:
        for m in r.mismatches:
            click.echo(f"MISMATCH   {m}")
        click.echo("eosim: error: the replay did not reproduce the recorded outcome", err=True)
        sys.exit(EXIT_FAILED)
    click.echo("replay     identical to the recorded outcome (history digest matches)")
    _print_txns(r.outcome.history)
    _print_anomalies(r.outcome.check.anomalies, r.outcome.history)
    target = svg_dir or str(Path(results) / "timelines")
    _emit_timelines(api.timelines(r.outcome), target, f"run-{r.variant}-{r.run}", False)
    click.echo(f"command    {r.command}")


@cli.command()
@click.argument("history", type=click.Path(dir_okay=False))
@click.option(
    "--expect",
    "expectations",
    multiple=True,
    metavar="NAME=VALUE",
    help="What must hold, as in a scenario's expect: block (duplicate=0, 'acked=>0').",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(history: str, expectations: tuple[str, ...], as_json: bool) -> None:
    """Check a history file (from eosim or a real cluster) for anomalies.

    Exit 0 when every --expect holds (without --expect: when no anomaly is found), 1 when
    not, 2 on bad input, 3 when the history has nothing to check (unknown)."""
    expect: dict[str, str] = {}
    for text in expectations:
        try:
            name, condition = parse_expectation(text, api.NOT_IN_A_HISTORY)
        except ValueError as exc:
            raise BadInput(f"--expect {text}: {exc}") from None
        if name in expect:
            raise BadInput(f"--expect {text}: {name} is already expected ({expect[name]})")
        expect[name] = condition
    try:
        checked = api.check(history, expect)
    except HistoryError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"{history}: cannot read: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(checked.to_dict(), separators=(",", ":")))
    else:
        result = checked.check
        c = result.counts
        click.echo(f"history    {history}")
        _print_sends(c)
        _print_txns(checked.history)
        _print_notes(result.notes, checked.history)
        _print_anomalies(result.anomalies, checked.history)
        if checked.expected:
            _print_expect(checked.expect)
        click.echo(f"verdict    {checked.verdict}")
    sys.exit(_exit_code(checked.check.unknown, checked.expect.met))


def _exit_code(unknown: str | None, met: bool) -> int:
    """3 when there was nothing to check, else 0 when the expectations were met, else 1."""
    if unknown is not None:
        return EXIT_UNKNOWN
    return EXIT_OK if met else EXIT_FAILED


@cli.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--runs", "-n", type=int, required=True, help="Runs per variant.")
@click.option("--grid", multiple=True, metavar="PATH=V1,V2,...", help="A swept parameter.")
@click.option("--vary", multiple=True, metavar="PATH=DIST", help="A parameter drawn per run.")
@click.option("--seed", type=click.IntRange(min=0), help="Sweep seed (default: the scenario's).")
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a value.")
@click.option("--master", help="Spark master URL (default: embedded local[*]).")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory.")
@click.option("--partitions", type=int, help="Spark tasks per chunk.")
@click.option("--chunk-runs", type=click.IntRange(min=1), help="Runs per resumable chunk.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option(
    "--expect",
    "expectations",
    multiple=True,
    metavar="NAME=VALUE",
    help="What the sweep must show, as in a scenario's expect_sweep: block "
    "('duplicate=<1e-4/record', 'duplicate=<1%/runs', duplicate=0).",
)
@target_options
def sweep(
    scenario: str,
    runs: int,
    grid: tuple[str, ...],
    vary: tuple[str, ...],
    seed: int | None,
    overrides: tuple[str, ...],
    master: str | None,
    out: str | None,
    partitions: int | None,
    chunk_runs: int | None,
    quiet: bool,
    expectations: tuple[str, ...],
    target: str,
    kafka_version: str | None,
    kafka_home: str | None,
) -> None:
    """Run a scenario many times on Spark and aggregate a reliability table.

    With --target kafka the runs go to a local Apache Kafka cluster one after another (they
    share it), into the same results layout, without Spark.

    Exit 0 when every variant meets the scenario's expect: and the sweep's expect_sweep:
    (with --expect) is met, 1 when not (an inconclusive rate included), 2 on bad input."""
    from eosim.analysis.sweep import SweepError, run_sweep

    if runs <= 0:
        raise BadInput(f"--runs must be at least 1, got {runs}")
    expect = _sweep_expectations(expectations)
    command = " ".join(shlex.quote(a) for a in ["eosim", *sys.argv[1:]])
    where = open_target(target, kafka_version, kafka_home)
    try:
        result = run_sweep(
            _scenario_file(scenario),
            runs,
            grid=grid,
            vary=vary,
            seed=seed,
            overrides=overrides,
            master=master,
            out=out,
            partitions=partitions,
            chunk_runs=chunk_runs,
            quiet=quiet,
            command=command,
            expect=expect,
            target=where if target != "model" else None,
        )
    except SweepError as exc:
        raise BadInput(str(exc)) from None
    except RealError as exc:
        raise RealFailure(f"--target {target}: {exc}") from None
    finally:
        if hasattr(where, "close"):
            where.close()
    _print_sweep(result)
    sys.exit(EXIT_OK if result.met else EXIT_FAILED)


def _sweep_expectations(expectations: tuple[str, ...]) -> dict[str, str]:
    """``--expect NAME=CONDITION`` options as name -> condition, each checked."""
    expect: dict[str, str] = {}
    for text in expectations:
        try:
            name, condition = parse_expectation(text, sweep=True)
        except ValueError as exc:
            raise BadInput(f"--expect {text}: {exc}") from None
        if name in expect:
            raise BadInput(f"--expect {text}: {name} is already expected ({expect[name]})")
        expect[name] = condition
    return expect


def _print_sweep(result: Any) -> None:
    """A finished sweep's summary line, table, results directory and verdict."""
    from eosim.analysis.sweep.runner import format_table
    from eosim.analysis.sweep.verdict import verdict_lines

    resumed = (
        f", resumed {result.resumed_chunks} committed chunk(s)" if result.resumed_chunks else ""
    )
    click.echo(
        f"sweep {result.sweep_id}: {result.total_runs} runs in {result.wall_s:.1f} s "
        f"(Spark start-up {result.spark_startup_s:.1f} s{resumed})"
    )
    click.echo(format_table(result))
    click.echo(f"results    {result.out}")
    if result.sweep_verdict is not None:
        for line in verdict_lines(result.sweep_verdict):
            click.echo(f"sweep      {line}")
        click.echo(f"verdict    {sweep_verdict_text(result)}")
    else:
        click.echo(
            f"verdict    {'every variant meets expect' if result.met else 'EXPECTATIONS NOT MET'}"
        )


def sweep_verdict_text(result: Any) -> str:
    """The sweep's last line when it has an ``expect_sweep:``: both judgements."""
    runs = "every variant meets expect" if result.runs_met else "expect NOT MET"
    verdict = result.sweep_verdict.verdict
    return f"{runs}; expect_sweep {verdict if verdict == 'met' else verdict.upper()}"


@cli.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=click.IntRange(min=0), required=True, help="The failing seed.")
@click.option("--anomaly", help="The anomaly to keep (default: the first one found).")
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a value.")
@click.option("--out", type=click.Path(dir_okay=False), help="Where to write the shrunk YAML.")
def shrink(
    scenario: str, seed: int, anomaly: str | None, overrides: tuple[str, ...], out: str | None
) -> None:
    """Shrink a failing run to a minimal scenario with an explicit fault schedule."""
    from eosim.analysis.shrink import ShrinkError
    from eosim.analysis.shrink import shrink as do_shrink

    _load(scenario, overrides)
    try:
        result = do_shrink(
            _scenario_file(scenario),
            seed,
            anomaly,
            overrides,
            log=lambda m: click.echo(f"shrink     {m}"),
        )
    except ShrinkError as exc:
        raise BadInput(str(exc)) from None
    name = result.scenario["name"]
    target = Path(out) if out else Path("results") / "shrunk" / f"{name}-seed{seed}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(result.yaml(), encoding="utf-8")
    os.replace(tmp, target)
    click.echo(
        f"result     {result.anomaly} x{result.count} with {result.end_faults} of "
        f"{result.start_faults} faults and {result.end_records} of {result.start_records} records"
    )
    click.echo(f"runs       {result.runs} simulations")
    click.echo(f"scenario   {target}")
    click.echo(f"replay     eosim run {target} --timeline")


@cli.command()
@click.argument("results", type=click.Path(file_okay=False))
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Report file (default: RESULTS/report.FORMAT)."
)
@click.option(
    "--format", "fmt", type=click.Choice(["html", "md"]), default="html", show_default=True
)
def report(results: str, out: str | None, fmt: str) -> None:
    """Write a reliability report of a finished sweep."""
    from eosim.analysis.report import ReportError, write_report

    try:
        path = write_report(results, out, fmt)
    except ReportError as exc:
        raise BadInput(str(exc)) from None
    click.echo(f"report     {path}")


@cli.group(invoke_without_command=True)
@click.pass_context
def scenarios(ctx: click.Context) -> None:
    """List the scenarios shipped with eosim (any command takes one by name: `eosim run
    idempotent`), or copy one to edit it (`eosim scenarios copy NAME [DIR]`)."""
    if ctx.invoked_subcommand is None:
        list_scenarios(max(80, shutil.get_terminal_size((100, 24)).columns))


def list_scenarios(width: int) -> None:
    """One line per shipped scenario: its name and its description's first sentence, cut to
    ``width`` characters."""
    shipped = api.shipped_scenarios()
    if not shipped:
        raise BadInput("no shipped scenarios found beside this eosim")
    column = max(len(name) for name in shipped) + 2
    for name, path in shipped.items():
        text = api.describe_scenario(path)
        room = width - column
        if len(text) > room:
            text = text[: room - 1].rsplit(" ", 1)[0] + "…"
        click.echo(f"{name:<{column}}{text}".rstrip())


@scenarios.command("copy")
@click.argument("name")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def copy_scenario(name: str, directory: str) -> None:
    """Copy shipped scenario NAME into DIRECTORY (default: here) as NAME.yaml, to edit and run;
    an existing file is never overwritten."""
    try:
        target = api.copy_scenario(name, directory)
    except api.UnknownScenario as exc:
        raise BadInput(str(exc)) from None
    except FileExistsError as exc:
        raise BadInput(f"{exc.filename}: exists; copy into another directory") from None
    except OSError as exc:
        raise BadInput(f"{directory}: cannot write: {exc.strerror or exc}") from None
    click.echo(f"copied     {name} -> {target}")


@cli.command()
@click.option("--out", type=click.Path(dir_okay=False), help="Write it to this file instead.")
def schema(out: str | None) -> None:
    """Print the JSON Schema of scenario files (for editors and validators)."""
    from eosim.schema import schema_text

    text = schema_text()
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    click.echo(f"schema     {out}")


def _emit_timelines(timelines: list[Any], svg_dir: str | None, stem: str, quiet: bool) -> None:
    if svg_dir is not None:
        Path(svg_dir).mkdir(parents=True, exist_ok=True)
    for t in timelines:
        if not quiet:
            click.echo("")
            click.echo(t.text())
        if svg_dir is not None:
            path = Path(svg_dir) / f"{stem}-{t.anomaly}.svg"
            path.write_text(t.svg(), encoding="utf-8")
            if not quiet:
                click.echo(f"svg        {path}")


# -- helpers -------------------------------------------------------------------------------
PROGRESS_DELAY_S = 2.0  # a run shorter than this shows no progress
PROGRESS_INTERVAL_S = 0.25


class ProgressLine:
    """A run's progress on one line of a terminal, rewritten in place: simulated time against
    the scenario's ``duration`` and operations done. Silent for the first
    :data:`PROGRESS_DELAY_S` seconds; :meth:`close` erases it."""

    def __init__(
        self,
        stream: TextIO,
        duration_ms: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.duration_ms = duration_ms
        self.clock = clock
        self.started = clock()
        self.last = -float("inf")
        self.width = 0

    def __call__(self, now_ms: float, counts: dict[str, int]) -> None:
        t = self.clock()
        if t - self.started < PROGRESS_DELAY_S or t - self.last < PROGRESS_INTERVAL_S:
            return
        self.last = t
        done = counts["acked"] + counts["failed"] + counts["indeterminate"]
        share = f" ({100 * now_ms / self.duration_ms:.0f}%)" if now_ms <= self.duration_ms else ""
        text = (
            f"simulated {now_ms / 1000:,.1f} s of {self.duration_ms / 1000:,.6g} s{share}, "
            f"{counts['sent']:,} operations sent, {done:,} done, {t - self.started:.0f} s wall"
        )
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = max(self.width, len(text))

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _load(path: str, overrides: tuple[str, ...]) -> Any:
    """The scenario ``path`` names (a file, or a shipped scenario's name), loaded."""
    try:
        return api.load(_scenario_file(path), overrides)
    except (ScenarioError, ConfigException) as exc:
        raise BadInput(str(exc)) from None


def _scenario_file(text: str) -> str:
    """The file a SCENARIO argument names: a path that exists, else a shipped scenario's."""
    try:
        return api.find_scenario(text)
    except api.UnknownScenario as exc:
        raise BadInput(str(exc)) from None


def _check_writable(path: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise BadInput(f"--history {path}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"--history {path}: directory {str(parent)!r} is not writable")


def _print_txns(history: History) -> None:
    """One line on the transactions and process steps, if the history has any."""
    if not transactional_ops(history):
        return
    parts = []
    for what, ops in (("transactions", history.txns), ("process steps", history.steps)):
        if ops:
            outcomes = [op.outcome for op in ops]
            parts.append(
                f"{len(ops)} {what} ({outcomes.count('ok')} committed, "
                f"{outcomes.count('fail')} aborted, {outcomes.count('info')} unknown)"
            )
    click.echo("txns       " + ", ".join(parts))


def _group_commits(history: History) -> bool:
    return any(event.event == "commit" for event in history.group_events)


def _judged(name: str, history: History) -> bool:
    """Whether a Jepsen check judged ``history``: the within-op ones only a history read from
    Jepsen, the cycle ones any history where a cycle could be (a txn op or a transactional
    step)."""
    if KINDS[name].check == "cycle_checker":
        return cycles_judged(history)
    return bool(history.client_ops)


def _print_anomalies(anomalies: dict[str, Any], history: History) -> None:
    """Every anomaly with its count. Without txn or process ops in the history, the
    transactional checks that found nothing are summed up in one line (except those a Jepsen
    history's polls are judged by, which are shown); without replica lines
    (partitions of one replica, or a history from a real cluster), the replica checks say they
    had nothing to compare rather than 0, and so does the group check without `group` commit
    lines; the checks a history cannot have (the within-op ones without client ops, the
    cycle ones without transactions) are left out when they found nothing."""
    click.echo("anomalies")
    txn_ops = transactional_ops(history)
    quiet = 0
    for name, a in anomalies.items():
        kind = KINDS[name]  # how the registry (eosim.analysis.anomalies) declares it
        if not a.count and kind.family == "jepsen" and not _judged(name, history):
            continue
        judged = history.client_ops and kind.from_version_order  # from Jepsen's polls
        if not txn_ops and not a.count and kind.check == "txn_checker" and not judged:
            quiet += 1
            continue
        if not history.replicas and not a.count and kind.check == "replica_checker":
            click.echo(f"  {name:<22}{'-':>7}   not checked: no replica lines in the history")
            continue
        if not a.count and kind.check == "group_checker" and not _group_commits(history):
            click.echo(f"  {name:<22}{'-':>7}   not checked: no group commit lines in the history")
            continue
        line = f"  {name:<22}{a.count:>7}"
        if a.count and a.examples:
            line += f"   e.g. {describe(name, a.examples[0])}"
        click.echo(line)
    if quiet:
        click.echo(f"  ({quiet} transactional checks found nothing: no txn or process ops)")


def _print_expect(expect: ExpectResult) -> None:
    click.echo("expect")
    for item in expect.checked:
        mark = "met" if item["met"] else "NOT MET"
        got = item.get("got", item["actual"])
        click.echo(f"  {item['key']:<22}{item['expected']!s:>7}   got {got}: {mark}")


def _print_notes(notes: list[str], history: History) -> None:
    """The checker's notes; the one saying the run was cut by its duration is a warning: the
    verdict covers only the work done before the cut."""
    cut = end_notes(history)
    for note in notes:
        click.echo(f"{'warning' if note in cut else 'note':<11}{note}")


def _print_sends(c: dict[str, int]) -> None:
    """The ``sends`` line of ``run`` and ``check``: the applications' operations, counted from
    the history by one function (``eosim.analysis.history.op_counts``)."""
    click.echo(
        f"sends      {c['sent']} sent, {c['acked']} acked, {c['failed']} failed, "
        f"{c['indeterminate']} indeterminate, {c['errored']} errored"
    )


def _print_summary(outcome: api.Outcome, history_path: str | None) -> None:
    r = outcome.run
    c = outcome.counts
    click.echo(f"scenario   {r.scenario} (seed {r.seed})")
    real = r.history.meta.get("target")
    if real is not None:  # a real cluster's run: its time is the wall clock's
        version = r.history.meta.get("kafka_version", "")
        click.echo(
            f"ran on     {real} {version}: {r.sim_time_s:.3f} s from the workload's start, "
            f"{r.wall_time_s:.2f} s wall"
        )
    else:
        click.echo(
            f"simulated  {r.sim_time_s:.3f} s, {r.events:,} events, {r.wall_time_s:.2f} s wall"
        )
    _print_sends(c)
    _print_txns(outcome.history)
    if r.faults:
        kinds: dict[str, int] = {}
        for f in r.faults:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        click.echo("faults     " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    _print_notes(outcome.check.notes, outcome.history)
    for w in outcome.warnings:
        click.echo(f"warning    {w}")
    for reason in r.invalid:
        click.echo(f"invalid    {reason}")
    for limit in outcome.limits:
        click.echo(f"limit      {limit}")
    _print_anomalies(outcome.check.anomalies, outcome.history)
    if outcome.expect.checked:
        _print_expect(outcome.expect)
    click.echo(f"verdict    {outcome.verdict}")
    if history_path:
        click.echo(f"history    {history_path}")
    click.echo(f"replay     {outcome.command}")


@cli.group()
def kafka() -> None:
    """A real Apache Kafka beside the model (see README, Real Kafka)."""


@kafka.command("install")
@click.option(
    "--version",
    "kafka_version",
    default=None,
    metavar="VERSION",
    help=f"Kafka version to fetch (default: {api.DEFAULT_KAFKA_VERSION}).",
)
@click.option(
    "--kafka-home",
    envvar="KAFKA_HOME",
    type=click.Path(file_okay=False),
    help="Use this Kafka distribution instead of fetching one (default: $KAFKA_HOME).",
)
def kafka_install(kafka_version: str | None, kafka_home: str | None) -> None:
    """Fetch Kafka's broker and client jars with Maven (or take KAFKA_HOME's) and compile the
    workload driver against them. Run once; run and sweep --target kafka also do it."""
    from eosim.real.install import InstallError

    try:
        inst = api.kafka_install(
            kafka_version, kafka_home, progress=lambda m: click.echo(m, err=True)
        )
    except InstallError as exc:
        raise BadInput(str(exc)) from None
    click.echo(f"kafka      {inst.version}")
    click.echo(f"jars       {inst.libs}")
    click.echo(f"driver     {inst.driver}")


@cli.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--runs", "-n", type=click.IntRange(min=1), required=True, help="Runs per side.")
@click.option("--grid", multiple=True, metavar="PATH=V1,V2,...", help="A swept parameter.")
@click.option("--seed", type=click.IntRange(min=0), help="Sweep seed (default: the scenario's).")
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a value.")
@click.option(
    "--out", type=click.Path(file_okay=False), help="Output (default: results/NAME/calibration)."
)
@click.option("--master", help="Spark master URL for the model's runs (default: embedded).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
@click.option("--kafka-version", default=None, metavar="VERSION", help="Kafka version to fetch.")
@click.option(
    "--kafka-home", envvar="KAFKA_HOME", type=click.Path(file_okay=False), help="A Kafka to use."
)
@click.option(
    "--resources",
    default="calibration-host",
    show_default=True,
    metavar="PRESET|none",
    help="The resource model the model side runs with (the machine the real cluster runs on), "
    "unless the scenario sets cluster.resources; none: the unbounded model.",
)
@click.option(
    "--crash-reset",
    default=None,
    metavar="DURATION|RANGE|none",
    help="How long a killed broker's sockets outlive it on the model side, unless the scenario "
    "sets cluster.crash_reset (default: as measured on the calibration machine; none: at once).",
)
@click.option(
    "--kafka-as-is",
    is_flag=True,
    help="Neither run nor resume the Kafka side: compare the runs it has finished with the "
    "same runs of the model (a Kafka side cut short).",
)
@click.option(
    "--kafka-side",
    type=click.Path(file_okay=False),
    help="The Kafka side is this sweep, compared as it is (--kafka-as-is), not OUT/kafka: "
    "a side kept from the machine it ran on (calibration/MACHINE/CASE).",
)
def calibrate(
    scenario: str,
    runs: int,
    grid: tuple[str, ...],
    seed: int | None,
    overrides: tuple[str, ...],
    out: str | None,
    master: str | None,
    quiet: bool,
    kafka_version: str | None,
    kafka_home: str | None,
    resources: str,
    crash_reset: str | None,
    kafka_as_is: bool,
    kafka_side: str | None,
) -> None:
    """Run each variant N times on the model and N times on a real Kafka, with the same
    seeds' fault schedules, and write a calibration report: the anomalies, per-record rates
    and timings side by side, each row agreeing, disagreeing or inconclusive under an
    equivalence test with a stated margin; real runs that proved nothing are left out and
    counted.

    Exit 0 when no row disagrees, 1 when some do, 2 on bad input, 4 when the real cluster
    failed. Both sweeps resume like any sweep: the same command carries on."""
    from eosim.analysis.calibrate import (
        CALIBRATION_CRASH_RESET,
        CRASH_RESET_SET,
        RESOURCES_SET,
        VERSION_SET,
        CalibrationError,
        compare,
        write,
    )
    from eosim.analysis.sweep import SweepError, run_sweep
    from eosim.simulation.resources import preset_names
    from eosim.simulation.rules import preset_for

    path = _scenario_file(scenario)
    s = _load(path, overrides)
    if resources != "none" and resources not in preset_names():
        raise BadInput(
            f"--resources {resources}: no such preset "
            f"(shipped: {', '.join(preset_names()) or 'none'}, or none)"
        )
    sockets: str | None = None  # the model side's cluster.crash_reset, when calibrate sets it
    if "crash_reset" not in s.cluster.model_fields_set:
        sockets = CALIBRATION_CRASH_RESET if crash_reset is None else crash_reset
        if sockets == "none":
            sockets = None
        else:
            try:
                api.load(path, (*overrides, f"{CRASH_RESET_SET}{sockets}"))
            except (ScenarioError, ConfigException) as exc:
                raise BadInput(f"--crash-reset {sockets}: {exc}") from None
    root = Path(out) if out is not None else Path("results") / s.name / "calibration"
    kafka_dir = root / "kafka"
    if kafka_side is not None:
        kafka_as_is, kafka_dir = True, Path(kafka_side)
        if not (kafka_dir / "manifest.json").is_file():
            raise BadInput(f"--kafka-side {kafka_side}: not a sweep (no manifest.json)")
    elif kafka_as_is and not (kafka_dir / "manifest.json").is_file():
        raise BadInput(f"--kafka-as-is: no Kafka side at {kafka_dir}")
    command = " ".join(shlex.quote(a) for a in ["eosim", *sys.argv[1:]])
    common: dict[str, Any] = {
        "grid": grid,
        "seed": seed,
        "overrides": overrides,
        "quiet": quiet,
        "command": command,
    }
    where = open_target("kafka", kafka_version, kafka_home)
    try:
        refuse_on(where, s, scenario)
        model = dict(common)
        release = where.install.version
        preset = preset_for(release)
        if preset is None:
            raise BadInput(f"{scenario}: no kafka.version preset models Kafka {release}")
        if s.kafka.version != preset:
            if "version" in s.kafka.model_fields_set:
                raise BadInput(
                    f"{scenario}: kafka.version is {s.kafka.version}, the cluster is Kafka "
                    f"{release}: a calibration compares the model of the cluster's version "
                    f'(set kafka.version: "{preset}" or leave it out)'
                )
            model["overrides"] = (*model.get("overrides", overrides), f"{VERSION_SET}{preset}")
        if s.cluster.resources is not None:
            machine = "the scenario's resources"
        elif resources == "none":
            machine = "unbounded"
        else:
            machine = f"resources {resources}"
            model["overrides"] = (*model.get("overrides", overrides), f"{RESOURCES_SET}{resources}")
        if sockets is not None:
            model["overrides"] = (*model.get("overrides", overrides), f"{CRASH_RESET_SET}{sockets}")
            machine += f", crash_reset {sockets}"
        click.echo(
            f"model      {runs} run(s) per variant, Kafka {preset}'s rules, {machine} -> "
            f"{root / 'model'}",
            err=True,
        )
        run_sweep(path, runs, master=master, out=root / "model", **model)
        if kafka_as_is:
            click.echo(f"kafka      as it is, not run -> {kafka_dir}", err=True)
        else:
            click.echo(f"kafka      {runs} run(s) per variant -> {kafka_dir}", err=True)
            run_sweep(path, runs, master=master, out=kafka_dir, target=where, **common)
        cal = compare(root / "model", kafka_dir, common=kafka_as_is)
        written = write(cal, root)
    except (SweepError, CalibrationError) as exc:
        raise BadInput(str(exc)) from None
    except RealError as exc:
        raise RealFailure(f"kafka: {exc}") from None
    finally:
        where.close()
    for row in cal.rows:
        click.echo(
            f"{row.variant:<3} {row.measure:<38} model {row.model.text:<34} "
            f"kafka {row.kafka.text:<34} {row.verdict}"
        )
    for side in ("model", "kafka"):
        if n := cal.invalid_runs(side):
            reasons = ", ".join(f"{r} ({k})" for r, k in cal.invalid[side].items())
            click.echo(f"invalid    {side}: {n} run(s) left out: {reasons}")
    click.echo(f"report     {written[1]}")
    counts = cal.counts()
    click.echo(
        f"verdict    {counts['agree']} agree, {counts['disagree']} disagree, "
        f"{counts['inconclusive']} inconclusive"
    )
    sys.exit(EXIT_FAILED if counts["disagree"] else EXIT_OK)


def main(argv: list[str] | None = None) -> None:
    """Entry point: click's errors become one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="eosim", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("eosim: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"eosim: error: {one_line(exc.format_message() or str(exc))}", err=True)
        known = isinstance(exc, BadInput | RealFailure)
        sys.exit(exc.exit_code if known else EXIT_BAD_INPUT)
    sys.exit(EXIT_OK)


def one_line(message: str) -> str:
    """``message`` as one printable line: a control or separator character that came with
    the input it quotes (a newline in a --set, U+2028 in a path) is shown escaped."""
    return "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
        for c in message
    )


if __name__ == "__main__":
    main()
