"""Replaying one run of a sweep: same plan, same seed, and the outcome must match.

The manifest holds everything needed to rebuild the plan: the scenario text, overrides,
grid, vary specs and seed. Replay commands name the copy of the scenario's text the sweep
keeps beside its results (``scenario.yaml``) by its absolute path, wherever the directory is
now. The run's row holds the recorded outcome. A replay that does not reproduce it byte for
byte (history digest) is an error: it means the model or the environment changed since the
sweep ran.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from eosim.analysis.sweep.plan import GridAxis, SweepPlan, VarySpec, run_seed
from eosim.analysis.sweep.store import SCENARIO_COPY, SweepStore
from eosim.analysis.sweep.task import replay_command


class ReplayError(ValueError):
    """The run cannot be found or replayed (one line, for the user)."""


@dataclass
class Replay:
    variant: int
    run: int
    seed: int
    params: dict[str, Any]
    recorded: dict[str, Any]
    outcome: Any
    mismatches: list[str]
    command: str


def plan_from_manifest(manifest: dict[str, Any], root: str | Path | None = None) -> SweepPlan:
    """The sweep's plan, from its manifest. Its scenario is, for replay commands, the copy of
    the scenario's text in the results directory ``root`` by its absolute path (a sweep made
    before it kept that copy names the path it was run with)."""
    copy = Path(root) / SCENARIO_COPY if root is not None else None
    source = str(copy.resolve()) if copy is not None and copy.is_file() else None
    return SweepPlan(
        scenario_text=manifest["scenario_yaml"],
        scenario_source=source or manifest["scenario_path"],
        runs=manifest["runs_per_variant"],
        seed=manifest["seed"],
        grid=tuple(GridAxis(g["path"], tuple(g["values"])) for g in manifest["grid"]),
        vary=tuple(VarySpec.parse(v) for v in manifest["vary"]),
        base_overrides=tuple(manifest["set"]),
    )


def parse_run_id(text: str, plan: SweepPlan) -> tuple[int, int]:
    try:
        if ":" in text:
            v, r = (int(x) for x in text.split(":", 1))
        else:
            v, r = plan.locate(int(text))
    except ValueError:
        raise ReplayError(f"--run {text}: expected VARIANT:RUN or a run number") from None
    if not (0 <= v < len(plan.variants) and 0 <= r < plan.runs):
        raise ReplayError(
            f"--run {text}: no such run (variants 0-{len(plan.variants) - 1}, "
            f"runs 0-{plan.runs - 1})"
        )
    return v, r


def recorded_row(root: Path, variant: int, run: int) -> dict[str, Any]:
    runs_dir = SweepStore(root).runs_dir
    if not runs_dir.is_dir():
        raise ReplayError(f"{root}: the sweep has no committed runs")
    dataset = ds.dataset(runs_dir, format="parquet", partitioning="hive")
    table = dataset.to_table(filter=(ds.field("variant") == variant) & (ds.field("run") == run))
    if table.num_rows == 0:
        raise ReplayError(f"{root}: run {variant}:{run} has not been committed yet")
    return table.slice(0, 1).to_pylist()[0]


def replay(root: str | Path, run_id: str) -> Replay:
    from eosim.analysis import outcome as checked
    from eosim.analysis.checks import ALL_ANOMALIES, transactional_ops
    from eosim.simulation.scenario import parse_scenario

    root = Path(root)
    manifest = SweepStore(root).read_manifest() if root.is_dir() else None
    if manifest is None:
        raise ReplayError(f"{root}: not a sweep results directory (no manifest.json)")
    if manifest.get("target", "model") != "model":
        raise ReplayError(
            f"{root}: its runs ran on a real cluster ({manifest['target']}), which does not "
            "replay byte for byte; run the run's replay command (eosim run ... --target "
            f"{manifest['target']}) to run its seed's faults again"
        )
    plan = plan_from_manifest(manifest, root)
    variant, run = parse_run_id(run_id, plan)
    row = recorded_row(root, variant, run)
    params = plan.run_parameters(variant, run)
    seed = run_seed(plan.seed, variant, run)
    scenario = parse_scenario(plan.scenario_text, plan.scenario_source, plan.overrides(params))
    outcome = checked.run(scenario, seed, trace=True)
    got: dict[str, Any] = {name: a.count for name, a in outcome.check.anomalies.items()}
    got |= outcome.counts
    got["events"] = outcome.run.events
    got["txns"] = transactional_ops(outcome.history)
    got["history_sha256"] = outcome.run.history.digest()
    keys = [*ALL_ANOMALIES, "sent", "acked", "failed", "indeterminate", "errored", "txns", "events"]
    keys.append("history_sha256")
    mismatches = [
        f"{k}: recorded {row[k]!r}, replayed {got[k]!r}"
        for k in keys
        if k in row and row[k] is not None and row[k] != got[k]
    ]
    command = replay_command(plan, seed, params)
    return Replay(variant, run, seed, params, row, outcome, mismatches, command)


def describe_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True) if params else "{}"


def replay_commands(root: str | Path, manifest: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Set each row's ``replay`` (a failing run's: it has ``variant``, ``run`` and ``seed``)
    to its command as of the results directory's current place (:func:`plan_from_manifest`),
    for a report printed from anywhere; a row whose parameters cannot be rebuilt keeps the
    command it was recorded with."""
    try:
        plan = plan_from_manifest(manifest, root)
    except (KeyError, ValueError):
        return
    for row in rows:
        try:
            params = plan.run_parameters(int(row["variant"]), int(row["run"]))
        except (IndexError, KeyError, ValueError):
            continue
        row["replay"] = replay_command(plan, int(row["seed"]), params)
