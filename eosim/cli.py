"""The ``eosim`` command line: a thin layer over :mod:`eosim.api`.

Exit codes: 0 when expectations hold (or, for ``check``, no anomaly is found), 1 when they
do not, 2 on bad input. Every bad-input error is one line on stderr, without a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from analysis.explain import describe
from analysis.history import HistoryError
from eosim import __version__, api
from simulation import ScenarioError
from simulation.config import ConfigException

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT


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
def run(
    scenario: str,
    seed: int | None,
    overrides: tuple[str, ...],
    as_json: bool,
    history_path: str | None,
) -> None:
    """Run a scenario once and check its history."""
    s = _load(scenario, overrides)
    if history_path is not None:
        _check_writable(history_path)
    outcome = api.run(s, seed, source=scenario, overrides=overrides)
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
    sys.exit(EXIT_OK if outcome.expect.met else EXIT_FAILED)


@cli.command()
@click.argument("history", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(history: str, as_json: bool) -> None:
    """Check a history file (from eosim or a real cluster) for anomalies."""
    try:
        _, result = api.check_file(history)
    except HistoryError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"{history}: cannot read: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), separators=(",", ":")))
    else:
        c = result.counts
        click.echo(f"history    {history}")
        click.echo(
            f"sends      {c['sent']} sent, {c['acked']} acked, {c['failed']} failed, "
            f"{c['indeterminate']} indeterminate"
        )
        _print_anomalies(result.anomalies)
    found = any(a.count for a in result.anomalies.values())
    sys.exit(EXIT_FAILED if found else EXIT_OK)


# -- helpers -------------------------------------------------------------------------------
def _load(path: str, overrides: tuple[str, ...]) -> Any:
    try:
        return api.load(path, overrides)
    except (ScenarioError, ConfigException) as exc:
        raise BadInput(str(exc)) from None


def _check_writable(path: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise BadInput(f"--history {path}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"--history {path}: directory {str(parent)!r} is not writable")


def _print_anomalies(anomalies: dict[str, Any]) -> None:
    click.echo("anomalies")
    for name, a in anomalies.items():
        line = f"  {name:<22}{a.count:>7}"
        if a.count and a.examples:
            line += f"   e.g. {describe(name, a.examples[0])}"
        click.echo(line)


def _print_summary(outcome: api.Outcome, history_path: str | None) -> None:
    r = outcome.run
    c = r.counts
    click.echo(f"scenario   {r.scenario} (seed {r.seed})")
    click.echo(f"simulated  {r.sim_time_s:.3f} s, {r.events:,} events, {r.wall_time_s:.2f} s wall")
    click.echo(
        f"sends      {c['sent']} sent, {c['acked']} acked, {c['failed']} failed, "
        f"{c['indeterminate']} indeterminate"
    )
    if r.faults:
        kinds: dict[str, int] = {}
        for f in r.faults:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        click.echo("faults     " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    for w in r.warnings:
        click.echo(f"warning    {w}")
    _print_anomalies(outcome.check.anomalies)
    if outcome.expect.checked:
        click.echo("expect")
        for item in outcome.expect.checked:
            mark = "met" if item["met"] else "NOT MET"
            click.echo(f"  {item['key']:<22}{item['expected']!s:>7}   got {item['actual']}: {mark}")
    click.echo(f"verdict    {'expectations met' if outcome.expect.met else 'EXPECTATIONS NOT MET'}")
    if history_path:
        click.echo(f"history    {history_path}")
    click.echo(f"replay     {outcome.command}")


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
        message = exc.format_message().splitlines()[0] if exc.format_message() else str(exc)
        click.echo(f"eosim: error: {message}", err=True)
        sys.exit(exc.exit_code if isinstance(exc, BadInput) else EXIT_BAD_INPUT)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
