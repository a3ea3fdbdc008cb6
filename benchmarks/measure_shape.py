"""The measurement's shape on the model beside Kafka: per load, the requests the clients sent,
their CPU and the latencies, from a measurement (``python -m eosim.analysis.measure``, its
``measure.json``) and from the model run on the same shape with a preset's resources
(docs/calibration.md, "The clients' CPU per request and per answer").

    python benchmarks/measure_shape.py [--measure results/measure/measure.json]
        [--preset calibration-host] [--loads 3000,1000,6000,2000] [--set PATH=VALUE ...]

``--set`` changes the preset's resources block for the model's side (``scheduler.wakeup_ms=0``).
Only the client costs, the request counts and the latencies are printed: what the fit does not
target (the fit sets costs per request; how many requests each side sends is the model's).
Not a test: each load is one model run of 15 s of workload, a few seconds to a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eosim.analysis.history import history_from_recorder
from eosim.analysis.measure import _measure_scenario, _q
from eosim.analysis.timings import ack_latencies, read_after_ack_latencies
from eosim.simulation.resources import load_preset
from eosim.simulation.runner import Run
from eosim.simulation.scenario import ScenarioError, apply_override


def kafka_row(load: dict[str, Any]) -> dict[str, float | None]:
    brokers = load["brokers"].values()
    client = load["client"]
    return {
        "produce requests": sum(b["requests"].get("Produce", {}).get("count", 0) for b in brokers),
        "consumer fetches": sum(
            b["requests"].get("FetchConsumer", {}).get("count", 0) for b in brokers
        ),
        "producer CPU ms": client["client_cpu_ms"].get("producer", 0.0),
        "reader CPU ms": client["client_cpu_ms"].get("reader", 0.0),
        "produce p50 ms": client["produce_p50_ms"],
        "ack to read p50 ms": client["read_after_ack_p50_ms"],
    }


def model_row(rate: float, resources: dict[str, Any]) -> dict[str, float | None]:
    from eosim.simulation import network as net

    counts = {"ProduceRequest": 0, "FetchResponse": 0}
    send, deliver = net.Network.send, net.Network._hand_over

    def counting_send(self, src, dst, payload, *args, **kwargs):  # type: ignore[no-untyped-def]
        if type(payload).__name__ == "ProduceRequest":
            counts["ProduceRequest"] += 1
        return send(self, src, dst, payload, *args, **kwargs)

    def counting_deliver(self, msg):  # type: ignore[no-untyped-def]
        if type(msg.payload).__name__ == "FetchResponse" and msg.dst == "reader":
            counts["FetchResponse"] += 1
        return deliver(self, msg)

    net.Network.send, net.Network._hand_over = counting_send, counting_deliver  # type: ignore[method-assign]
    try:
        run = Run(_measure_scenario(rate, resources), 1, False)
        run.run_workload()
    finally:
        net.Network.send, net.Network._hand_over = send, deliver  # type: ignore[method-assign]
    assert run.machines is not None
    history = history_from_recorder(run.history)
    # Kafka's counts are over the measurement's 15 s window (the load runs 20 s and the
    # window opens 3 s in); the model's workload is those 15 s of records, start to end.
    jvms = run.machines.jvms
    return {
        "produce requests": float(counts["ProduceRequest"]),
        "consumer fetches": float(counts["FetchResponse"]),
        "producer CPU ms": jvms["producer-0"].worked_ms,
        "reader CPU ms": jvms["reader"].worked_ms,
        "produce p50 ms": _q(sorted(ack_latencies(history)), 0.5),
        "ack to read p50 ms": _q(sorted(read_after_ack_latencies(history)), 0.5),
        "workload s": run.env.now / 1000.0,
    }


def _cells(row: dict[str, float | None]) -> str:
    """A row's values as table cells ("-" for a latency with no data)."""
    return " | ".join("-" if v is None else f"{v:,.4g}" for v in row.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", default="results/measure/measure.json")
    parser.add_argument("--preset", default="calibration-host")
    parser.add_argument("--loads", default=None, help="records/s; default: the measurement's")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    args = parser.parse_args(argv)
    try:
        data = json.loads(Path(args.measure).read_text())
        resources = load_preset(args.preset)
        for item in args.set:
            apply_override(resources, item)
        _measure_scenario(1.0, resources)  # a bad setting: one line here, not mid-table
    except (OSError, ValueError, ScenarioError) as exc:
        print(f"measure_shape: {exc}", file=sys.stderr)
        return 2
    by_rate = {load["client"]["rate"]: load for load in data["loads"]}
    rates = [float(r) for r in args.loads.split(",")] if args.loads else list(by_rate)
    print("| records/s | side | " + " | ".join(kafka_row(data["loads"][0])) + " | workload s |")
    print("|---" * 9 + "|")
    for rate in rates:
        if rate in by_rate:
            print(f"| {rate:,.0f} | Kafka | {_cells(kafka_row(by_rate[rate]))} | 15 |")
        print(f"| {rate:,.0f} | model | {_cells(model_row(rate, resources))} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
