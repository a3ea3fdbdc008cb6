"""Timelines: the few messages, operations, faults and state changes that explain one anomaly.

Input is plain data: message trace records (see ``simulation/trace.py``), the history's
records, one anomaly example and, for a lost write, the run's state changes
(``eosim.simulation.trace.state_change_records``). The timeline keeps only what touches the
anomalous records: the requests that carried them, the responses to those requests, the
operations that sent them, the losses and resets on the same links, and the faults that
overlap. A lost write's timeline also tells what happened to the record's partition
(:mod:`eosim.analysis.partition_story`): elections, ISR changes, truncations, HW moves, the
faults, restarts and registrations of its replicas, with the events that decided the loss
marked and summed up at the top. It renders as text (one line per event) and as SVG (a lane
per node, messages as arrows, state changes as marks on their node's lane).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from eosim.analysis.anomalies import ANOMALY_KINDS, KINDS
from eosim.analysis.explain import example_value
from eosim.analysis.partition_story import PartitionStory, node_key, partition_story

MARGIN_MS = 2.0
# The anomalies whose timelines tell their partition's story (a lost record's), and those whose
# timelines show the processing steps and their consumer group's story (assignments,
# revocations, lost partitions, commits and their refusals): `AnomalyKind.story`.
PARTITION_STORIES = tuple(kind.name for kind in ANOMALY_KINDS if kind.story == "partition")
GROUP_STORIES = tuple(kind.name for kind in ANOMALY_KINDS if kind.story == "group")


@dataclass
class Row:
    time: float
    kind: str  # message | op | fault | state (a state change on node src) | gap
    src: str
    dst: str | None
    label: str
    # lost, dropped, held, ok, info, fail, start, stop; a fault's kind; a state change's event
    status: str = ""
    end_time: float | None = None
    highlight: bool = False
    # Why a state change decided the anomaly ("cuts offset 7"), or "".
    note: str = ""


@dataclass
class Timeline:
    anomaly: str
    values: list[str]
    lanes: list[str]
    rows: list[Row] = field(default_factory=list)
    # A lost record's partition and, one per line, the events that decided the loss
    # (PartitionStory.summary); empty for other anomalies.
    summary: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        """The head a lost write's timeline prints: its partition, then what decided the
        loss, or that no state change of the partition explains it."""
        if len(self.summary) == 1:
            return [*self.summary, f"({NOT_EXPLAINED})"]
        return self.summary

    def text(self) -> str:
        head = f"timeline of {self.anomaly} ({', '.join(self.values)})"
        lines = [head, "-" * len(head)]
        for i, line in enumerate(self.summary_lines()):
            lines.append(f"{('partition' if i == 0 else 'lost by' if i == 1 else ''):<11}{line}")
        if self.summary:
            lines.append("")
        for r in self.rows:
            mark = "*" if r.highlight else " "
            if r.kind in ("state", "gap"):
                mark = "!" if r.note else " "
                end = f" .. {r.end_time:.3f}" if r.end_time is not None else ""
                note = f"  <== {r.note}" if r.note else ""
                lines.append(f"{mark}{r.time:>12.3f}{end:<12} {r.src:<26} {r.label}{note}")
            elif r.kind == "message":
                arrow = f"{r.src} -> {r.dst}"
                status = f"  [{r.status}]" if r.status else ""
                end = f" .. {r.end_time:.3f}" if r.end_time is not None else ""
                lines.append(f"{mark}{r.time:>12.3f}{end:<12} {arrow:<26} {r.label}{status}")
            elif r.kind == "op":
                lines.append(f"{mark}{r.time:>12.3f}{'':<12} {r.src:<26} {r.label}")
            else:
                lines.append(f"!{r.time:>12.3f}{'':<12} {'FAULT ' + r.status:<26} {r.label}")
        return "\n".join(lines)

    def svg(self) -> str:
        """The timeline drawn as SVG: a lane per node, messages as arrows, ops as dots,
        faults as bands, state changes as squares on their node's lane (decisive ones as red
        diamonds on an amber band), the partition's summary under the title. The drawing is
        as wide as its lanes, or as its longest label where that reaches further
        (:func:`text_width`), so no label is cut."""
        lane_w, row_h, left = 220, 22, 110
        top = 60 + SUMMARY_LINE_H * len(self.summary_lines())
        lanes_width = left + lane_w * len(self.lanes) + 40
        height = top + row_h * (len(self.rows) + 1) + 20
        x = {lane: left + lane_w * i + lane_w // 2 for i, lane in enumerate(self.lanes)}
        right = float(lanes_width)  # the drawing's right edge, widened by labels
        body: list[str] = []

        def text(tx: float, y: float, content: str, attrs: str, size: int = FONT_SIZE) -> None:
            nonlocal right
            middle = 'text-anchor="middle"' in attrs
            width = text_width(content, size)
            right = max(right, (tx + width / 2 if middle else tx + width) + SVG_MARGIN)
            body.append(f'<text x="{tx}" y="{y}" {attrs}>{escape(content)}</text>')

        title = f"{self.anomaly}: {', '.join(self.values)}"
        text(10, 20, title, 'font-size="13" font-weight="bold"', 13)
        for i, line in enumerate(self.summary_lines()):
            head = "partition: " if i == 0 else "lost by: " if i == 1 else ""
            attrs = 'fill="#333"' if i == 0 else 'fill="#b00" font-weight="bold"'
            indent = 0 if i < 2 else text_width("lost by: ")  # under the first reason
            text(10 + indent, 38 + SUMMARY_LINE_H * i, head + line, attrs)
        for lane, lx in x.items():
            text(lx, top - 12, lane, 'text-anchor="middle" font-weight="bold"')
            body.append(
                f'<line x1="{lx}" y1="{top}" x2="{lx}" y2="{height - 10}" '
                'stroke="#bbb" stroke-dasharray="4 3"/>'
            )
        bands: list[tuple[int, str]] = []  # each band's place and colour, drawn once the
        # width is known
        for i, r in enumerate(self.rows):
            y = top + row_h * (i + 1)
            color = "#c00" if r.highlight else "#333"
            text(8, y + 4, f"{r.time:.3f}", 'fill="#666"')
            if r.kind == "message" and r.dst in x and r.src in x:
                x1, x2 = x[r.src], x[r.dst]
                if r.status in ("lost", "dropped"):
                    x2 = (x1 + x2) // 2
                marker = "h" if r.highlight else "a"
                body.append(
                    f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{color}" '
                    f'stroke-width="1.5" marker-end="url(#{marker})"/>'
                )
                if r.status in ("lost", "dropped"):
                    text(x2 + 4, y + 4, "✕", 'fill="#c00" font-weight="bold"')
                label = r.label + (f" [{r.status}]" if r.status else "")
                text(min(x1, x2) + 6, y - 4, label, f'fill="{color}"')
            elif r.kind == "op" and r.src in x:
                body.append(f'<circle cx="{x[r.src]}" cy="{y}" r="4" fill="{color}"/>')
                text(x[r.src] + 8, y + 4, r.label, f'fill="{color}"')
            elif r.kind == "state" and r.src in x:
                cx = x[r.src]
                label = r.label + (f" [until {r.end_time:.3f}]" if r.end_time is not None else "")
                if r.note:
                    bands.append((len(body), DECISIVE_BAND))
                    body.append(str(y))
                    body.append(
                        f'<polygon points="{cx},{y - 6} {cx + 6},{y} {cx},{y + 6} {cx - 6},{y}" '
                        'fill="#c00"/>'
                    )
                    text(cx + 10, y + 4, f"{label}  <== {r.note}", 'fill="#b00" font-weight="bold"')
                else:
                    body.append(
                        f'<rect x="{cx - 4}" y="{y - 4}" width="8" height="8" fill="#47a"/>'
                    )
                    text(cx + 10, y + 4, label, 'fill="#245"')
            elif r.kind in ("state", "gap"):
                text(left, y + 4, r.label, 'fill="#777" font-style="italic"')
            else:
                bands.append((len(body), FAULT_BAND))
                body.append(str(y))
                text(left, y + 4, f"FAULT {r.status}: {r.label}", 'fill="#900" font-weight="bold"')
        width = math.ceil(right)
        for at, fill in bands:
            y = int(body[at])
            body[at] = (
                f'<rect x="{left - 10}" y="{y - 9}" width="{width - left}" '
                f'height="16" fill="{fill}" opacity="0.6"/>'
            )
        head = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="monospace" font-size="{FONT_SIZE}">',
            '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="7" refY="3" '
            'orient="auto"><path d="M0,0 L7,3 L0,6 z" fill="#333"/></marker>'
            '<marker id="h" markerWidth="8" markerHeight="8" refX="7" refY="3" orient="auto">'
            '<path d="M0,0 L7,3 L0,6 z" fill="#c00"/></marker></defs>',
        ]
        return "\n".join([*head, *body, "</svg>"])


# The SVG's text: monospace at 11 px (the title at 13 px). A monospace glyph is about 0.6 em
# wide (DejaVu Sans Mono, Liberation Mono and Courier New: 0.60-0.62 em; bold the same);
# widths are reckoned at 0.62 em so that a label always fits, plus a margin at the right.
FONT_SIZE = 11
CHAR_EM = 0.62
SVG_MARGIN = 10
SUMMARY_LINE_H = 15
FAULT_BAND, DECISIVE_BAND = "#fdd", "#fde2a8"


def text_width(content: str, size: int = FONT_SIZE) -> float:
    """The width in pixels :meth:`Timeline.svg` reserves for ``content`` at ``size`` px."""
    return len(content) * size * CHAR_EM


def values_of(anomaly: str, example: dict[str, Any]) -> list[str]:
    """The record values the timeline of ``example`` follows (`AnomalyKind.values`; for a name
    the registry does not know, the example's "value")."""
    kind = KINDS.get(anomaly)
    if kind is None:
        return example_value(example)
    return kind.example_values(example)


def build(
    anomaly: str,
    example: dict[str, Any],
    trace: list[dict[str, Any]],
    history: list[dict[str, Any]],
    states: list[dict[str, Any]] | None = None,
) -> Timeline:
    """The timeline of one anomaly example. ``states`` are the run's state changes
    (``eosim.simulation.trace.state_change_records``): a lost write's timeline (one of
    :data:`PARTITION_STORIES`) tells its partition's story from them; other anomalies, and
    a timeline without them, show the record's own messages, operations and faults only.

    The phases, each a function below: choose the messages that carried the record's values
    and the responses to them, and the operations that sent them (and, for a group story,
    the processing steps); add the losses that explain dropped messages and the resets in
    the time window; turn the messages and operations into rows; add the group's or the
    partition's story, then the faults that overlap; order the rows and the lanes."""
    values = values_of(anomaly, example)
    wanted = set(values)
    carriers, chosen = _messages(trace, wanted)
    ops = _ops(history, wanted)
    steps = example.get("steps", []) if anomaly in GROUP_STORIES else []
    times = _times(chosen, ops, steps)
    if not times:
        return Timeline(anomaly, values, [])
    low, high = min(times) - MARGIN_MS, max(times) + MARGIN_MS
    _add_losses(chosen, trace)
    _add_resets(chosen, trace, carriers, low, high)
    times = _times(chosen, ops, steps)
    low, high = min(times) - MARGIN_MS, max(times) + MARGIN_MS
    rows = _message_rows(chosen, wanted) + _op_rows(ops)
    if anomaly in GROUP_STORIES:
        rows += _group_rows(example, steps, history, low, high)
    story = None
    if anomaly in PARTITION_STORIES and states:
        story = _story(example, ops, rows, states, low, high)
    rows += _fault_rows(history, story, low, high)
    if story is not None:
        rows += _story_rows(story)
    rows.sort(key=lambda r: (r.time, ROW_ORDER.get(r.kind, len(ROW_ORDER))))
    summary = story.summary() if story is not None else []
    return Timeline(anomaly, values, _lanes(rows, story), rows, summary)


# A message's trace record, by (message id, event): what the timeline draws.
_Chosen = dict[tuple[Any, str], dict[str, Any]]


def _messages(
    trace: list[dict[str, Any]], wanted: set[str]
) -> tuple[list[dict[str, Any]], _Chosen]:
    """The requests that carried the values, and those requests and every response to them
    by (message, event)."""
    carriers = [t for t in trace if wanted.intersection(t["values"])]
    # Requests that carried the values, and every response to them. A correlation id is
    # only unique on one connection: a client counts them from 1 again in each incarnation
    # (a new KafkaProducer), and so it does its connection generations, so a response is
    # paired by the connection it came back on as well (Kafka's NetworkClient likewise
    # correlates a response with the requests in flight on its own channel).
    keys = {(t["src"], t["dst"], t.get("connection"), t["correlation"]) for t in carriers}
    replies = [
        t
        for t in trace
        if t["correlation"] is not None
        and (t["dst"], t["src"], t.get("connection"), t["correlation"]) in keys
        and t["kind"].endswith("response")
    ]
    return carriers, {(t["msg"], t["event"]): t for t in carriers + replies}


def _ops(history: list[dict[str, Any]], wanted: set[str]) -> list[dict[str, Any]]:
    """The history's operations on the values."""
    return [
        h
        for h in history
        if h.get("kind") == "op"
        and isinstance(h.get("value"), dict)
        and h["value"].get("value") in wanted
    ]


def _times(chosen: _Chosen, ops: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[float]:
    """When the chosen messages, the operations and the processing steps happened."""
    times = [t["time"] for t in chosen.values()] + [h["time"] for h in ops]
    for step in steps:
        times += [t for t in (step.get("invoke_time"), step.get("complete_time")) if t is not None]
    return times


def _add_losses(chosen: _Chosen, trace: list[dict[str, Any]]) -> None:
    """Add to ``chosen`` the loss that explains each dropped message."""
    # A dropped message is explained by the loss that black-holed its connection: the last
    # loss on the same connection (either direction) before the drop.
    for t in list(chosen.values()):
        if t["event"] != "dropped" or t["generation"] is None:
            continue
        pair = {t["src"], t["dst"]}
        cause = None
        for u in trace:
            if u["time"] > t["time"]:
                break
            if (
                u["event"] == "lost"
                and {u["src"], u["dst"]} == pair
                and u["generation"] == t["generation"]
                and u.get("connection") == t.get("connection")
            ):
                cause = u
        if cause is not None:
            chosen[(cause["msg"], cause["event"])] = cause
            chosen.setdefault((cause["msg"], "send"), cause | {"event": "send"})


def _add_resets(
    chosen: _Chosen,
    trace: list[dict[str, Any]],
    carriers: list[dict[str, Any]],
    low: float,
    high: float,
) -> None:
    """Add to ``chosen`` the connection resets delivered to the sending clients while the
    records were in flight (between ``low`` and ``high``)."""
    clients = {t["src"] for t in carriers}
    for t in trace:
        if t["kind"] == "reset" and t["dst"] in clients and low <= t["time"] <= high:
            chosen[(t["msg"], t["event"])] = t


def _message_rows(chosen: _Chosen, wanted: set[str]) -> list[Row]:
    """A row per chosen message: from its send to its delivery, or to what became of it."""
    rows: list[Row] = []
    sends = {t["msg"]: t for t in chosen.values() if t["event"] == "send"}
    finals = {}
    for t in chosen.values():
        if t["event"] != "send":
            finals[t["msg"]] = t
    for msg_id, send in sends.items():
        final = finals.pop(msg_id, None)
        status = "" if final is None or final["event"] == "deliver" else final["event"]
        rows.append(
            Row(
                send["time"],
                "message",
                send["src"],
                send["dst"],
                send["label"],
                status,
                final["time"] if final and final["event"] == "deliver" else None,
                bool(wanted.intersection(send["values"])),
            )
        )
    for t in finals.values():  # a loss or drop whose send fell outside the selection
        rows.append(Row(t["time"], "message", t["src"], t["dst"], t["label"], t["event"]))
    return rows


def _op_rows(ops: list[dict[str, Any]]) -> list[Row]:
    """A row per operation on the values, on its client's lane."""
    rows = []
    for h in ops:
        v = h["value"]
        at = f" @{v.get('partition')}:{v['offset']}" if v.get("offset") is not None else ""
        error = f" ({h['error']})" if h.get("error") else ""
        node = h["process"].split("/")[0]
        rows.append(
            Row(
                h["time"],
                "op",
                node,
                None,
                f"{h['type']} send {v['value']}{at}{error}",
                h["type"],
                highlight=True,
            )
        )
    return rows


def _fault_rows(
    history: list[dict[str, Any]], story: PartitionStory | None, low: float, high: float
) -> list[Row]:
    """A row per fault that overlaps the window, and, for a partition's story, per later
    fault on its replicas until the story ends."""
    rows = []
    faults = [h for h in history if h.get("kind") == "fault" and h["phase"] == "start"]
    for h in faults:
        if h["time"] > high and (
            story is None or h["time"] > story.end or not _concerns(h, story.replicas)
        ):
            continue  # after the record's own rows: only faults on its partition's replicas
        stop = next(
            (
                f["time"]
                for f in history
                if f.get("kind") == "fault"
                and f["phase"] == "stop"
                and f["fault"] == h["fault"]
                and f["targets"] == h["targets"]
                and f["time"] >= h["time"]
            ),
            None,
        )
        if stop is not None and stop < low:
            continue
        what = (
            ", ".join(h["targets"])
            or " | ".join(",".join(g) for g in h.get("groups", []))
            or ", ".join(f"{a}->{b}" for a, b in h.get("links", []))
            or "all links"
        )
        until = f" until {stop:.3f}" if stop is not None else ""
        rows.append(Row(h["time"], "fault", what, None, f"{what}{until}", h["fault"]))
    return rows


def _story_rows(story: PartitionStory) -> list[Row]:
    """A row per event of the partition's story (an omitted stretch as a gap)."""
    return [
        Row(
            e.time,
            "gap" if e.event == "omitted" else "state",
            e.node,
            None,
            e.label,
            e.event,
            e.end_time,
            note=e.decisive,
        )
        for e in story.events
    ]


def _lanes(rows: list[Row], story: PartitionStory | None) -> list[str]:
    """A lane per node the rows name (faults and gaps name none), and per replica of the
    partition's story, in :func:`_lane_key` order."""
    lanes: list[str] = []
    for r in rows:
        for node in (r.src, r.dst):
            if node and node not in lanes and r.kind not in ("fault", "gap"):
                lanes.append(node)
    if story is not None:
        lanes += [b for b in story.replicas if b not in lanes]
    lanes.sort(key=_lane_key)
    return lanes


def _member_node(process: str) -> str:
    """The consumer node of a processor instance ("app-a/0" -> "app-a#0.consumer")."""
    return process.replace("/", "#") + ".consumer"


def _group_rows(
    example: dict[str, Any],
    steps: list[dict[str, Any]],
    history: list[dict[str, Any]],
    low: float,
    high: float,
) -> list[Row]:
    """The processing steps of the anomalous input (on their instance's consumer lane), and
    every ``group`` line between the first step and the last: who owned what when, whose
    commit was refused."""
    rows = []
    source = example.get("input", {}).get("value", "")
    for step in steps:
        node = _member_node(step["process"])
        outcome = step.get("outcome", "")
        end = step.get("complete_time")
        label = f"process {source} -> {', '.join(step.get('outputs', []))}: {outcome}"
        rows.append(Row(step["invoke_time"], "op", node, None, label, outcome, end, True))
    for h in history:
        if h.get("kind") != "group" or not low <= h["time"] <= high:
            continue
        rows.append(
            Row(h["time"], "state", _member_node(h["process"]), None, _group_label(h), h["event"])
        )
    return rows


def _group_label(line: dict[str, Any]) -> str:
    """One ``group`` line as a timeline label."""
    event = line["event"]
    epoch = (
        f" (member epoch {line['epoch']})"
        if "epoch" in line
        else f" (generation {line['generation']})"
        if "generation" in line
        else ""
    )
    parts = ",".join(f"{p['topic']}-{p['partition']}" for p in line.get("partitions", []))
    if event == "commit":
        offsets = ",".join(
            f"{o['topic']}-{o['partition']}@{o['offset']}" for o in line.get("offsets", [])
        )
        error = line.get("error")
        outcome = f" refused: {error.split(':')[0]}" if error else ""
        return f"{line['group']}: commit {offsets}{epoch}{outcome}"
    return f"{line['group']}: {event} [{parts}]{epoch}"


NOT_EXPLAINED = (
    "no state change of the partition cut the record's offset or elected a leader without it"
)

# At one time: faults first, then state changes, operations, messages.
ROW_ORDER = {"fault": 0, "state": 1, "gap": 1, "op": 2, "message": 3}


def _lane_key(node: str) -> tuple[int, tuple[str, int, str]]:
    """Clients first, then brokers in natural order, then the controller."""
    rank = 2 if node == "controller" else 1 if node.startswith("broker") else 0
    return rank, node_key(node)


def _concerns(fault: dict[str, Any], nodes: list[str]) -> bool:
    """Whether a fault touches any of ``nodes`` (a fault that names no node touches all)."""
    named = set(fault.get("targets") or [])
    named.update(n for g in fault.get("groups") or [] for n in g)
    named.update(n for link in fault.get("links") or [] for n in link)
    return not named or bool(named.intersection(nodes))


def _story(
    example: dict[str, Any],
    ops: list[dict[str, Any]],
    rows: list[Row],
    states: list[dict[str, Any]],
    low: float,
    high: float,
) -> PartitionStory | None:
    """The lost record's partition story: where the record is (the example's topic,
    partition and offset, else its acknowledgement's), when it was appended (the delivery
    of the last request that carried it before its acknowledgement) and acknowledged."""
    topic, partition, offset = example.get("topic"), example.get("partition"), example.get("offset")
    acks = [h for h in ops if h.get("type") == "ok"]
    for h in acks:
        v = h["value"]
        partition = v.get("partition") if partition is None else partition
        offset = v.get("offset") if offset is None else offset
    if topic is None or partition is None:
        return None
    if offset is not None and offset < 0:
        offset = None  # not known: an acks=0 send is answered without one (-1)
    acked = acks[-1]["time"] if acks else high
    delivered = [
        r.end_time
        for r in rows
        if r.kind == "message" and r.highlight and r.end_time is not None and r.end_time <= acked
    ]
    appended = max(delivered, default=low)
    sent = low + MARGIN_MS  # the record's first row
    return partition_story(states, topic, partition, offset, sent, appended, acked)
