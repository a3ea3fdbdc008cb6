"""Lost writes split by the broker fault that lost them: a calibration's validation row (case 1:
which leader's death lost acknowledged writes, on the model and on Kafka).

    python benchmarks/split_losses.py RESULTS/kafka [--variant 1] [--model] [--set PATH=VALUE]

Reads a real sweep's kept histories (``histories/variant=V/run-*.jsonl``) and, with
``--model``, runs the model for the same seeds and parameters (plus each ``--set``, e.g.
``cluster.resources.preset=calibration-host``). A lost write is an acknowledged send of a
partition that the partition's final log does not hold; it is filed under the first broker
fault (crash, pause, power loss) that started after its acknowledgement: the fault that lost
it. Prints, per fault of the schedule (by its order), the runs with a loss there and the
records lost, on each side. Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path

from eosim.analysis.history import History, history_from_recorder, load_history
from eosim.analysis.timings import FAILOVER_FAULTS


def losses_by_fault(history: History) -> dict[int, int]:
    """Lost acknowledged writes per broker fault (its index among the history's broker fault
    starts, in time order)."""
    starts = sorted(
        float(f["time"])
        for f in history.faults
        if f.get("phase") == "start"
        and f.get("fault") in FAILOVER_FAULTS
        and any(str(t).startswith("broker-") for t in f.get("targets") or [])
    )
    logged = {key: {r.value for r in records} for key, records in history.logs.items()}
    out: dict[int, int] = defaultdict(int)
    for send in history.sends:
        if send.outcome != "ok" or send.partition is None or send.complete_time is None:
            continue
        log = logged.get((send.topic, send.partition))
        if log is None or send.value in log:
            continue
        out[bisect_left(starts, send.complete_time)] += 1
    return dict(out)


def _summary(per_run: list[dict[int, int]]) -> dict[int, tuple[int, int]]:
    faults = sorted({i for run in per_run for i in run})
    return {
        i: (sum(1 for run in per_run if run.get(i)), sum(run.get(i, 0) for run in per_run))
        for i in faults
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="A real sweep's results directory.")
    parser.add_argument("--variant", type=int, default=None, help="Only this variant.")
    parser.add_argument("--model", action="store_true", help="Also run the model.")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args(argv)
    root = Path(args.results)
    manifest = json.loads((root / "manifest.json").read_text())
    folders = sorted((root / "histories").glob("variant=*"))
    for folder in folders:
        variant = int(folder.name.split("=", 1)[1])
        if args.variant is not None and variant != args.variant:
            continue
        paths = sorted(folder.glob("run-*.jsonl"))
        kafka = [losses_by_fault(load_history(p)) for p in paths]
        print(f"variant {variant}: {manifest['variants'][variant]['params']} ({len(paths)} runs)")
        for i, (runs, records) in _summary(kafka).items():
            print(f"  kafka  fault {i}: {runs} run(s), {records} record(s) lost")
        if args.model:
            model = [_model_run(manifest, variant, int(p.stem[4:]), args.overrides) for p in paths]
            for i, (runs, records) in _summary(model).items():
                print(f"  model  fault {i}: {runs} run(s), {records} record(s) lost")
    return 0


def _model_run(manifest: dict, variant: int, run: int, extra: list[str]) -> dict[int, int]:
    from eosim.analysis.sweep.plan import render, run_seed
    from eosim.simulation import run_scenario
    from eosim.simulation.scenario import parse_scenario

    params = manifest["variants"][variant]["params"]
    sets = [*manifest.get("set", []), *(f"{k}={render(v)}" for k, v in params.items()), *extra]
    scenario = parse_scenario(manifest["scenario_yaml"], manifest["scenario"], sets)
    seed = run_seed(manifest["seed"], variant, run)
    return losses_by_fault(history_from_recorder(run_scenario(scenario, seed).history))


if __name__ == "__main__":
    sys.exit(main())
