"""How to show one example of an anomaly: a one-line sentence, and the record values its
timeline follows. Each anomaly's entry in `eosim.analysis.anomalies` names its functions here
(`AnomalyKind.describe`, `AnomalyKind.values`); :func:`describe` looks them up there."""

from __future__ import annotations

from typing import Any


def _at(d: dict[str, Any]) -> str:
    return f"{d['topic']}-{d['partition']}@{d['offset']}"


def describe(name: str, example: dict[str, Any]) -> str:
    """A sentence for one example of anomaly ``name`` (falls back to its keys): a
    version-order comparison as such (`eosim.analysis.version_order`), any other example by
    its anomaly's `AnomalyKind.describe`."""
    # The registry names this module's functions, so it is imported when first needed.
    from eosim.analysis.anomalies import KINDS

    try:
        if "delta" in example and "kind" in example:
            return order_pair(example)
        kind = KINDS.get(name)
        if kind is not None:
            return kind.describe(example)
    except (KeyError, TypeError, IndexError):
        pass
    return ", ".join(f"{k}={v}" for k, v in example.items())


def duplicate(example: dict[str, Any]) -> str:
    where = ", ".join(_at(p) for p in example["positions"])
    return f"{example['value']} landed {example['times_landed']} times: {where}"


def _acked(example: dict[str, Any]) -> str:
    acked = "" if example.get("offset") is None else f" acked at offset {example['offset']}"
    return f"{example['value']} ({example['outcome']}, {example['process']}{acked})"


def lost_write(example: dict[str, Any]) -> str:
    return f"{_acked(example)} missing from the {example['missing_from']}"


def unseen(example: dict[str, Any]) -> str:
    return f"{_acked(example)} never read"


def nonmonotonic_send(example: dict[str, Any]) -> str:
    return (
        f"{example['process']} sent {example['earlier_value']} then {example['value']}, "
        f"but they landed at {example['topic']}-{example['partition']}@"
        f"{example['earlier_offset']} and @{example['offset']}"
    )


def inconsistent_offsets(example: dict[str, Any]) -> str:
    values = " vs ".join(f"{v['value']} ({', '.join(v['sources'])})" for v in example["values"])
    return f"{_at(example)} holds {values}"


def _op(op: dict[str, Any]) -> str:
    return f"op {op['id']} ({op['type']} {op['f']}, process {op['process']})"


def order_pair(e: dict[str, Any]) -> str:
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


def cycle(e: dict[str, Any]) -> str:
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


def aborted_read(e: dict[str, Any]) -> str:
    why = "an ABORT marker" if e.get("marker") == "ABORT" else "its transaction aborted"
    isolation = e.get("isolation", "read_committed")
    return f"{e['process']} read {e['value']} at {_at(e)} ({isolation}), but {why}"


def torn_transaction(e: dict[str, Any]) -> str:
    more = ", ..." if len(e["visible"]) + len(e["missing"]) < e["sends"] else ""
    return (
        f"{_txn(e)}, {e['sends']} values: {', '.join(e['visible'])} visible, "
        f"{', '.join(e['missing'])}{more} missing"
    )


def precommitted_read(e: dict[str, Any]) -> str:
    writer = f" (written by {_txn(e['txns'][0])})" if e["txns"] else ""
    return (
        f"{e['process']} read {e['value']} at {_at(e)} at {_ms(e['time'])}, {e['reason']}{writer}"
    )


def poll_skip(e: dict[str, Any]) -> str:
    first = e["skipped"][0]
    return (
        f"{e['process']} read {e['topic']}-{e['partition']} up to @{e['previous_last_offset']}, "
        f"then from @{e['first_offset']}, skipping {e['skipped_count']} record(s) "
        f"such as {first['value']}@{first['offset']}"
    )


def nonmonotonic_poll(e: dict[str, Any]) -> str:
    return (
        f"{e['process']} read {e['topic']}-{e['partition']} up to @{e['previous_last_offset']}, "
        f"then again from @{e['first_offset']}"
    )


def duplicate_processing(e: dict[str, Any]) -> str:
    text = (
        f"input {e['input']['value']} at {_at(e['input'])}: {e['ok_steps']} ok steps, "
        f"{e['steps_with_visible_output']} with visible outputs"
    )
    repeated = e["outputs_at_several_positions"]
    if repeated:
        where = ", ".join(_at(p) for p in repeated[0]["positions"])
        text += f"; output {repeated[0]['value']} at {where}"
    return text


def lost_processing(e: dict[str, Any]) -> str:
    return (
        f"input {e['value']} at {_at(e['input'])} is below group {e['group']}'s committed "
        f"offset {e['committed_offset']}, but none of its {len(e['steps'])} step(s) "
        "committed its outputs"
    )


def zombie_write(e: dict[str, Any]) -> str:
    fence = e["fence"]
    return (
        f"{e['value']} at {_at(e)} appended at {_ms(e['time'])} by producer {e['producer_id']} "
        f"epoch {e['epoch']}, fenced by epoch {fence['epoch']} at {_ms(fence['time'])}"
    )


def hanging_transaction(e: dict[str, Any]) -> str:
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


def replica_divergence(e: dict[str, Any]) -> str:
    first, second = e["replicas"]
    more = e["diverging_pairs"] - 1
    also = f"; {more} more diverging pair(s)" if more else ""
    return f"{_at(e)} below both high watermarks: {_replica(first)}, {_replica(second)}{also}"


def offset_rewrite(e: dict[str, Any]) -> str:
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


def _member(e: dict[str, Any]) -> str:
    """A commit's writer: its classic generation, or its KIP-848 member epoch."""
    if e.get("epoch") is not None:
        return f"{e['process']} (member epoch {e['epoch']})"
    return f"{e['process']} (generation {e['generation']})"


def offset_rewind(e: dict[str, Any]) -> str:
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


# The record values a timeline follows for one example (`AnomalyKind.values`); an anomaly
# without such a function follows its example's "value", if any (:func:`example_value`).


def example_value(example: dict[str, Any]) -> list[str]:
    return [example["value"]] if "value" in example else []


def nonmonotonic_send_values(example: dict[str, Any]) -> list[str]:
    return [example["earlier_value"], example["value"]]


def inconsistent_offsets_values(example: dict[str, Any]) -> list[str]:
    return [v["value"] for v in example.get("values", [])]


def torn_transaction_values(example: dict[str, Any]) -> list[str]:
    return [*example.get("visible", []), *example.get("missing", [])]


def poll_skip_values(example: dict[str, Any]) -> list[str]:
    return [r["value"] for r in example.get("skipped", [])]


def duplicate_processing_values(example: dict[str, Any]) -> list[str]:
    values = [r["value"] for r in example.get("outputs_at_several_positions", [])]
    for step in example.get("steps", []):
        values += [v for v in step.get("visible_outputs", []) if v not in values]
    return values


def offset_rewrite_values(example: dict[str, Any]) -> list[str]:
    later = example["later"].get("value")
    return [example["read"]["value"], *([] if later is None else [later])]


def replica_divergence_values(example: dict[str, Any]) -> list[str]:
    entries = [r["entry"] for r in example.get("replicas", [])]
    return [e["record"] for e in entries if e is not None and "record" in e]
