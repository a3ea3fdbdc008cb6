"""One-line, human-readable descriptions of the checker's anomaly examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _at(d: dict[str, Any]) -> str:
    return f"{d['topic']}-{d['partition']}@{d['offset']}"


def describe(name: str, example: dict[str, Any]) -> str:
    """A sentence for one example of anomaly ``name`` (falls back to its keys)."""
    try:
        if "delta" in example and "kind" in example:
            return _order_pair(example)
        if name in ("G0", "G1c"):
            return _cycle(example)
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
        if name in _TXN:
            return _TXN[name](example)
        if name == "replica_divergence":
            return _replica_divergence(example)
        if name == "offset_rewrite":
            return _offset_rewrite(example)
        if name == "offset_rewind":
            return _offset_rewind(example)
    except (KeyError, TypeError, IndexError):
        pass
    return ", ".join(f"{k}={v}" for k, v in example.items())


def _op(op: dict[str, Any]) -> str:
    return f"op {op['id']} ({op['type']} {op['f']}, process {op['process']})"


def _order_pair(e: dict[str, Any]) -> str:
    """A Jepsen-style comparison of two positions in a key's version order
    (eosim.analysis.version_order): between two ops of a process, or within one op."""
    done = "read" if e["kind"] == "poll" else "sent"
    first, then = e["values"]
    where = f"{e['topic']}-{e['partition']}"
    if "ops" in e:
        before, after = e["ops"]
        text = (
            f"{_op(before)} {done} {first} last, then {_op(after)} {done} {then} first on "
            f"{where}: {e['delta']:+d} positions"
        )
    else:
        text = f"{_op(e['op'])} {done} {first} then {then} on {where}: {e['delta']:+d} positions"
    if e.get("skipped"):
        text += f", skipping {', '.join(map(str, e['skipped']))}"
    return text


def _cycle(e: dict[str, Any]) -> str:
    ops = e["cycle"]
    steps = []
    for a, b, step in zip(ops, ops[1:], e["steps"], strict=False):
        where = f"{step['topic']}-{step['partition']}"
        if step["type"] == "ww":
            steps.append(
                f"op {a['id']} sent {step['value']} to {where} before op {b['id']} sent "
                f"{step['value_after']}"
            )
        else:
            steps.append(f"op {b['id']} read {step['value']} from {where}, sent by op {a['id']}")
    return f"cycle of ok ops {', '.join(str(op['id']) for op in ops)}: " + "; ".join(steps)


def _txn(t: dict[str, Any]) -> str:
    return f"txn {t['id']} of {t['transactional_id']} ({t['outcome']}, {t['process']})"


def _ms(time: float | None) -> str:
    return "never" if time is None else f"{time:g} ms"


def _aborted_read(e: dict[str, Any]) -> str:
    why = "an ABORT marker" if e.get("marker") == "ABORT" else "its transaction aborted"
    isolation = e.get("isolation", "read_committed")
    return f"{e['process']} read {e['value']} at {_at(e)} ({isolation}), but {why}"


def _torn_transaction(e: dict[str, Any]) -> str:
    more = ", ..." if len(e["visible"]) + len(e["missing"]) < e["sends"] else ""
    return (
        f"{_txn(e)}, {e['sends']} values: {', '.join(e['visible'])} visible, "
        f"{', '.join(e['missing'])}{more} missing"
    )


def _precommitted_read(e: dict[str, Any]) -> str:
    writer = f" (written by {_txn(e['txns'][0])})" if e["txns"] else ""
    return (
        f"{e['process']} read {e['value']} at {_at(e)} at {_ms(e['time'])}, {e['reason']}{writer}"
    )


def _poll_skip(e: dict[str, Any]) -> str:
    first = e["skipped"][0]
    return (
        f"{e['process']} read {e['topic']}-{e['partition']} up to @{e['previous_last_offset']}, "
        f"then from @{e['first_offset']}, skipping {e['skipped_count']} record(s) "
        f"such as {first['value']}@{first['offset']}"
    )


def _nonmonotonic_poll(e: dict[str, Any]) -> str:
    return (
        f"{e['process']} read {e['topic']}-{e['partition']} up to @{e['previous_last_offset']}, "
        f"then again from @{e['first_offset']}"
    )


def _duplicate_processing(e: dict[str, Any]) -> str:
    text = (
        f"input {e['input']['value']} at {_at(e['input'])}: {e['ok_steps']} ok steps, "
        f"{e['steps_with_visible_output']} with visible outputs"
    )
    repeated = e["outputs_at_several_positions"]
    if repeated:
        where = ", ".join(_at(p) for p in repeated[0]["positions"])
        text += f"; output {repeated[0]['value']} at {where}"
    return text


def _lost_processing(e: dict[str, Any]) -> str:
    return (
        f"input {e['value']} at {_at(e['input'])} is below group {e['group']}'s committed "
        f"offset {e['committed_offset']}, but none of its {len(e['steps'])} step(s) "
        "committed its outputs"
    )


def _zombie_write(e: dict[str, Any]) -> str:
    fence = e["fence"]
    return (
        f"{e['value']} at {_at(e)} appended at {_ms(e['time'])} by producer {e['producer_id']} "
        f"epoch {e['epoch']}, fenced by epoch {fence['epoch']} at {_ms(fence['time'])}"
    )


def _hanging_transaction(e: dict[str, Any]) -> str:
    open_txns = ", ".join(
        f"producer {t['producer_id']} from @{t['first_offset']}" for t in e["open_transactions"]
    )
    return (
        f"{e['topic']}-{e['partition']} stable offset {e['lso']} < log end "
        f"{e['log_end_offset']}, open: {open_txns}"
    )


def _entry(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "nothing"
    if "marker" in entry:
        return f"a {entry['marker']} marker of producer {entry['producer_id']}"
    return str(entry["record"])


def _replica(r: dict[str, Any]) -> str:
    role = "leader" if r["leader"] else "follower"
    return (
        f"{r['broker']} ({role}, epoch {r['leader_epoch']}, high watermark "
        f"{r['high_watermark']}) has {_entry(r['entry'])}"
    )


def _replica_divergence(e: dict[str, Any]) -> str:
    first, second = e["replicas"]
    more = e["diverging_pairs"] - 1
    also = f"; {more} more diverging pair(s)" if more else ""
    return f"{_at(e)} below both high watermarks: {_replica(first)}, {_replica(second)}{also}"


def _offset_rewrite(e: dict[str, Any]) -> str:
    read, later = e["read"], e["later"]
    if later["source"] == "poll":
        then = f"{later['process']} read {later['value']} there at {_ms(later['time'])}"
    else:
        held = later.get("value")
        if held is None:
            held = f"a {later['marker']} marker"
        leader = f" (leader {later['leader']})" if later.get("leader") else ""
        then = f"the final log{leader} holds {held} there"
    return f"{read['process']} read {read['value']} at {_at(e)} at {_ms(read['time'])}, but {then}"


_TXN: dict[str, Callable[[dict[str, Any]], str]] = {
    "aborted_read": _aborted_read,
    "torn_transaction": _torn_transaction,
    "precommitted_read": _precommitted_read,
    "poll_skip": _poll_skip,
    "nonmonotonic_poll": _nonmonotonic_poll,
    "duplicate_processing": _duplicate_processing,
    "lost_processing": _lost_processing,
    "zombie_write": _zombie_write,
    "hanging_transaction": _hanging_transaction,
}


def _member(e: dict[str, Any]) -> str:
    """A commit's writer: its classic generation, or its KIP-848 member epoch."""
    if e.get("epoch") is not None:
        return f"{e['process']} (member epoch {e['epoch']})"
    return f"{e['process']} (generation {e['generation']})"


def _offset_rewind(e: dict[str, Any]) -> str:
    who = _member(e)
    parts = []
    if "earlier" in e:
        before = e["earlier"]
        parts.append(
            f"committed {e['topic']}-{e['partition']} at {e['offset']} in group {e['group']} "
            f"at {_ms(e['time'])}, after {_member(before)} had committed {before['offset']} "
            f"at {_ms(before['time'])}"
        )
    if "newer" in e:
        newer = e["newer"]
        what = "was assigned partitions" if newer["event"] == "assigned" else "had committed"
        parts.append(
            f"{'its' if parts else 'a'} commit in group {e['group']} (invoked "
            f"{_ms(e['invoked'])}) was accepted though {newer['process']} {what} in "
            f"generation {newer['generation']} at {_ms(newer['time'])}"
        )
    return f"{who} " + "; ".join(parts) if parts else who
