"""The history digest of every shipped and calibration scenario's runs: the proof that a change
which should not change the model's behaviour did not.

    python benchmarks/history_digests.py [--seeds 1,2] [--out FILE]

Prints one line per run, ``<scenario file> <seed> <history sha256> <events>``, in a fixed
order. Run it in two trees (each with its own virtualenv, docs/performance.md says how) and
compare the outputs with ``diff``: identical lines mean identical histories. Not a test: it
runs every scenario (a few minutes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eosim.simulation import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent


def scenario_files() -> list[Path]:
    return sorted((ROOT / "scenarios").glob("*.yaml")) + sorted(
        (ROOT / "scenarios" / "calibration").glob("*.yaml")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2", help="Seeds, comma-separated.")
    parser.add_argument("--out", help="Write the lines here as well.")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = []
    for path in scenario_files():
        scenario = load_scenario(path)
        for seed in seeds:
            run = run_scenario(scenario, seed)
            line = f"{path.relative_to(ROOT)} {seed} {run.history.digest()} {run.events}"
            print(line, flush=True)
            lines.append(line)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
