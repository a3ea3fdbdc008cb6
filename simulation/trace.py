"""Message traces as plain records, for timelines and the shrinker.

The model's payloads are its own classes; this module is the one place that knows how to
describe them, so that ``analysis`` can draw a run without importing the model's protocol.
"""

from __future__ import annotations

from typing import Any

from eosim.simulation.network import TraceEvent
from eosim.simulation.protocol import (
    Disconnected,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)


def describe(payload: Any) -> tuple[str, str, list[str]]:
    """(kind, label, record values carried) of a message payload."""
    if isinstance(payload, ProduceRequest):
        parts, values = [], []
        for (topic, partition), data in payload.partitions:
            seq = ""
            if data.producer_id >= 0:
                seq = f" pid {data.producer_id} e{data.epoch}"
                seq += f" seq {data.base_sequence}-{data.last_sequence}"
            parts.append(f"{topic}-{partition}{seq} ({len(data.values)} rec)")
            values.extend(data.values)
        return "produce", f"Produce #{payload.correlation_id} " + ", ".join(parts), values
    if isinstance(payload, ProduceResponse):
        results = ", ".join(
            r.error.name if r.error.name != "NONE" else f"ok@{r.base_offset}"
            for r in payload.results
        )
        return "produce_response", f"ProduceResponse #{payload.correlation_id} {results}", []
    if isinstance(payload, InitProducerIdRequest):
        return "init", f"InitProducerId #{payload.correlation_id}", []
    if isinstance(payload, InitProducerIdResponse):
        return (
            "init_response",
            (f"InitProducerIdResponse #{payload.correlation_id} pid {payload.producer_id}"),
            [],
        )
    if isinstance(payload, Disconnected):
        return "reset", f"connection reset (gen {payload.generation})", []
    return "other", type(payload).__name__, []


def correlation_of(payload: Any) -> int | None:
    return getattr(payload, "correlation_id", None)


def trace_records(trace: list[TraceEvent]) -> list[dict[str, Any]]:
    out = []
    for e in trace:
        kind, label, values = describe(e.payload)
        out.append(
            {
                "time": round(e.time, 6),
                "event": e.event,
                "msg": e.msg_id,
                "src": e.src,
                "dst": e.dst,
                "kind": kind,
                "label": label,
                "values": values,
                "correlation": correlation_of(e.payload),
                "generation": e.generation,
                "connection": e.connection,
            }
        )
    return out


def lost_messages(trace: list[TraceEvent]) -> list[tuple[float, str, str]]:
    """(time, src, dst) of every message lost by a loss draw, in order."""
    return [(e.time, e.src, e.dst) for e in trace if e.event == "lost"]
