"""What the resource model's background costs as its bursts shorten: CPU seconds of one model
run of the standard benchmark without the resource model, and with it at each
``background.burst_ms``, the scenarios taken in turn each round (so that the machine's drift
falls on all of them alike).

    python benchmarks/bench_background.py [--rounds 5] [--bursts 40,1,0.2] [--presets NAME,...]

Prints one line per scenario: the rounds' CPU seconds, their minimum and median, and each's
ratio to the standard run's (issue 35 allows the resource model 1.3). The minimum is the
steadier figure on a shared machine, whose noise only ever adds. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from eosim.simulation import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bursts", default="40,1,0.2", help="background.burst_ms values")
    parser.add_argument(
        "--presets", default="", help="Presets to run as they are (each with its own burst)."
    )
    args = parser.parse_args(argv)
    try:
        bursts = [float(b) for b in args.bursts.split(",")]
    except ValueError:
        print(f"--bursts: not a comma-separated list of numbers: {args.bursts!r}", file=sys.stderr)
        return 2
    scenarios = {"standard": load_scenario(ROOT / "standard.yaml")}
    for burst in bursts:
        scenarios[f"resources, burst {burst:g} ms"] = load_scenario(
            ROOT / "standard-resources.yaml", [f"cluster.resources.background.burst_ms={burst}"]
        )
    for preset in filter(None, args.presets.split(",")):
        scenarios[f"preset {preset}"] = load_scenario(
            ROOT / "standard-resources.yaml", [f"cluster.resources.preset={preset}"]
        )
    seconds: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(args.rounds):
        for name, scenario in scenarios.items():
            start = time.process_time()
            run_scenario(scenario)
            seconds[name].append(time.process_time() - start)
    low, mid = min(seconds["standard"]), statistics.median(seconds["standard"])
    for name, values in seconds.items():
        least, median = min(values), statistics.median(values)
        rounds = " ".join(f"{v:.2f}" for v in values)
        print(
            f"{name:28} {rounds}  min {least:.2f} s ({least / low:.2f}x)"
            f"  median {median:.2f} s ({median / mid:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
