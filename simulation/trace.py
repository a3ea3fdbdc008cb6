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
from eosim.simulation.state_change import StateChange


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


def _partition(tp: tuple[str, int] | None) -> str:
    return f"{tp[0]}-{tp[1]}" if tp is not None else ""


def _state_label(change: StateChange) -> str:
    """One line saying what a state change was, in Kafka's words."""
    d = change.detail
    tp = _partition(change.tp)
    event = change.event
    if event == "leader_elected":
        how = "unclean election" if d.get("unclean") else "election"
        isr = ",".join(d.get("isr", []))
        elr = f" ELR [{','.join(d['elr'])}]" if d.get("elr") else ""
        epoch = d.get("leader_epoch")
        return f"{tp}: {d.get('leader')} leads at epoch {epoch} ({how}; ISR [{isr}]{elr})"
    if event == "offline":
        isr = ",".join(d.get("isr", []))
        return f"{tp}: no leader (offline) at epoch {d.get('leader_epoch')}; ISR [{isr}]"
    if event == "isr_changed":
        elr = f" ELR [{','.join(d['elr'])}]" if d.get("elr") else ""
        return f"{tp}: ISR [{','.join(d.get('isr', []))}]{elr} ({d.get('cause')})"
    if event == "became_leader":
        return (
            f"{tp}: becomes leader at epoch {d.get('leader_epoch')}, log end "
            f"{d.get('log_end_offset')}, HW {d.get('high_watermark')}"
        )
    if event == "became_follower":
        return (
            f"{tp}: follows {d.get('leader')} at epoch {d.get('leader_epoch')}, log end "
            f"{d.get('log_end_offset')}"
        )
    if event == "truncated":
        return (
            f"{tp}: truncated from {d.get('log_end_offset')} to {d.get('to')} ({d.get('reason')})"
        )
    if event == "high_watermark":
        return f"{tp}: HW {d.get('high_watermark')}"
    if event == "fetch_failed":
        return f"{tp}: stops fetching: {d.get('reason')}"
    if event == "power_loss":
        cut = d.get("cut") or {}
        lost = ", ".join(f"{name} {a}->{b}" for name, (a, b) in sorted(cut.items()))
        return "power loss" + (f": page cache lost, logs cut {lost}" if lost else "")
    if event in ("fenced", "unfenced", "session_expired", "registration_refused"):
        words = {
            "fenced": "fences",
            "unfenced": "unfences",
            "session_expired": "session expired for",
            "registration_refused": "refuses to register",
        }[event]
        return f"{words} {d.get('broker')}"
    if event == "registered" and change.node == "controller":
        unclean = " after an unclean shutdown" if d.get("unclean") else ""
        return f"registers {d.get('broker')} (broker epoch {d.get('broker_epoch')}){unclean}"
    if event == "registered":
        return f"registered (broker epoch {d.get('broker_epoch')})"
    if event == "restart":
        return f"machine up, process {d.get('incarnation')} starting"
    if event == "process_started":
        return f"process {d.get('incarnation')} started: registers, replays the metadata"
    if event == "metadata_published":
        return "metadata replayed (first publish)"
    if event == "recovery":
        return "caught up with the metadata (RECOVERY)"
    if event == "running":
        return "unfenced: accepts connections (RUNNING)"
    if event == "crash":
        return f"process {d.get('incarnation')} dies"
    return f"{event} {tp}".strip()


def state_change_records(changes: list[StateChange]) -> list[dict[str, Any]]:
    """The run's state changes as plain records for timelines: time, node, event, the
    partition (``topic``/``partition``, or None), a one-line ``label`` and the details."""
    out = []
    for change in changes:
        tp = change.tp
        out.append(
            {
                "time": round(change.time, 6),
                "node": change.node,
                "event": change.event,
                "topic": tp[0] if tp is not None else None,
                "partition": tp[1] if tp is not None else None,
                "label": _state_label(change),
                "detail": dict(change.detail),
            }
        )
    return out
