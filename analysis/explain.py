"""One-line, human-readable descriptions of the checker's anomaly examples."""

from __future__ import annotations

from typing import Any


def _at(d: dict[str, Any]) -> str:
    return f"{d['topic']}-{d['partition']}@{d['offset']}"


def describe(name: str, example: dict[str, Any]) -> str:
    """A sentence for one example of anomaly ``name`` (falls back to its keys)."""
    try:
        if name == "duplicate":
            where = ", ".join(_at(p) for p in example["positions"])
            return f"{example['value']} landed {example['times_landed']} times: {where}"
        if name in ("lost_write", "unseen"):
            acked = "" if example.get("offset") is None else f" acked at offset {example['offset']}"
            what = (
                "missing from the " + example["missing_from"]
                if name == "lost_write"
                else ("never read")
            )
            return f"{example['value']} ({example['outcome']}, {example['process']}{acked}) {what}"
        if name == "nonmonotonic_send":
            return (
                f"{example['process']} sent {example['earlier_value']} then {example['value']}, "
                f"but they landed at {example['topic']}-{example['partition']}@"
                f"{example['earlier_offset']} and @{example['offset']}"
            )
        if name == "inconsistent_offsets":
            values = " vs ".join(
                f"{v['value']} ({', '.join(v['sources'])})" for v in example["values"]
            )
            return f"{_at(example)} holds {values}"
    except (KeyError, TypeError):
        pass
    return ", ".join(f"{k}={v}" for k, v in example.items())
