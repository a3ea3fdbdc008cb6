"""Dependency cycles between committed client ops (Adya's G0 and G1c, found as Jepsen's Kafka
checker finds them with Elle), for histories that keep their client ops whole
(`History.client_ops`, read from Jepsen).

The graph's nodes are the `ok` send, poll and txn ops. Its edges, from the version orders of
`eosim.analysis.version_order`:

* ww: T2 sent v2 to a key, the value just before v2 in the key's version order is v1 (v2
  placed at the offset T2 was told, else by its value), and T1 is the writer of v1 (the last
  op that sent it): T1 -> T2.
* wr: T2 read v from a key and T1 is the writer of v: T1 -> T2.

An edge to or from an op that did not complete `ok`, or through a value with no known writer,
is not drawn: the check never invents a dependency. Each strongly connected component with
more than one op is one cycle of each kind it holds:

* G0: a cycle of ww edges only (the component of the ww subgraph).
* G1c: a cycle with at least one wr edge (ww edges allowed).

Each example is one such cycle: its ops in order (the first repeated at the end, as Jepsen
prints it) and the step taken between each pair. Components and edges are taken in the ops'
history order, so the result is deterministic.

eosim's own histories (and a real cluster's, which share their format) keep no client ops;
:func:`transaction_ops` makes them from the history's writers: each `ok` send and txn op, and
each transaction of `ok` transactional `process` steps (the steps of one process with the same
`transaction` number, or a step alone without one), which reads its steps' inputs and writes
their outputs. A write is placed at the offset its op reports, else where the final `log`
line holds its value. Only ops that write are nodes: an op that only reads has no way out of
a cycle. With no txn op and no transactional step, no op writes two values or reads and
writes, so no cycle can exist and nothing is built.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx

from eosim.analysis.anomalies import names
from eosim.analysis.checker import Anomaly, aborted_offsets, first_markers_after
from eosim.analysis.history import ClientOp, History, MicroOp, paused_gc
from eosim.analysis.version_order import Analysis, op_summary, reads, writes

# Declared in eosim.analysis.anomalies.
CYCLE_ANOMALIES = names(check="cycle_checker")
DATA_FS = ("send", "poll", "txn")


def check_cycles(history: History) -> dict[str, Anomaly]:
    """Every name in `CYCLE_ANOMALIES`, with count 0 when absent (or not judged:
    :func:`cycles_judged`)."""
    anomalies = {name: Anomaly(name) for name in CYCLE_ANOMALIES}
    if not cycles_judged(history):
        return anomalies
    with paused_gc():
        if not history.client_ops:
            history = History(client_ops=transaction_ops(history))
        graph = dependency_graph(Analysis(history))
        _g0(graph, anomalies["G0"])
        _g1c(graph, anomalies["G1c"])
    return anomalies


def cycles_judged(history: History) -> bool:
    """Whether a cycle could be found in ``history``: it was read from Jepsen, or it holds a
    txn op or a transactional step (an op that writes two values, or reads and writes)."""
    return bool(
        history.client_ops
        or history.txns
        or any(step.transactional_id is not None for step in history.steps)
    )


def transaction_ops(history: History) -> list[ClientOp]:
    """The writing ops of an eosim history as client ops, `ok` ones only, in completion order
    (module docstring)."""
    placed = _log_positions(history)

    def where(topic: str | None, value: str) -> list[tuple[str, int, int]]:
        if topic is not None:
            found = placed.get(topic, {}).get(value)
            return [] if found is None else [(topic, *found)]
        return [(t, *at[value]) for t, at in sorted(placed.items()) if value in at][:1]

    made: list[tuple[float, int, ClientOp]] = []

    def add(op_id: int | None, process: str, f: str, time: float, mops: list[MicroOp]) -> None:
        if mops:
            op = ClientOp(0, op_id, process, "ok", f, time, mops)
            made.append((time, len(made), op))

    for send in history.sends:
        if send.outcome != "ok":
            continue
        if send.partition is not None and send.offset is not None:
            mop = MicroOp("send", send.topic, send.partition, send.offset, send.value, 0)
            add(send.id, send.process, "send", send.complete_time or send.invoke_time, [mop])
    for txn in history.txns:
        if txn.outcome != "ok":
            continue
        mops = []
        for write in txn.sends:
            if write.partition is not None and write.offset is not None:
                at = [(write.topic, write.partition, write.offset)]
            else:
                at = where(write.topic, write.value)
            mops += [MicroOp("send", t, p, o, write.value, len(mops)) for t, p, o in at]
        add(txn.id, txn.process, "txn", txn.complete_time or txn.invoke_time, mops)
    batches: dict[tuple[str, object], list[Any]] = {}
    for step in history.steps:
        if step.outcome == "ok" and step.transactional_id is not None:
            number = step.transaction if step.transaction is not None else ("op", step.id)
            batches.setdefault((step.process, number), []).append(step)
    for steps in batches.values():
        mops = []
        for step in steps:
            read = step.input
            mops.append(MicroOp("poll", read.topic, read.partition, read.offset, read.value, 0))
            for value in step.outputs:
                for t, p, o in where(step.output_topic, value):
                    mops.append(MicroOp("send", t, p, o, value, len(mops)))
        first = steps[0]
        add(first.id, first.process, "txn", first.complete_time or first.invoke_time, mops)
    made.sort(key=lambda entry: (entry[0], entry[1]))
    ops = []
    for position, (_time, _order, op) in enumerate(made):
        op.position = position
        ops.append(op)
    return ops


def _log_positions(history: History) -> dict[str, dict[str, tuple[int, int]]]:
    """topic -> value -> (partition, offset) of its first record in the final logs that no
    ABORT marker cancelled."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for (topic, partition), records in sorted(history.logs.items()):
        markers = history.markers.get((topic, partition), [])
        aborted = aborted_offsets(records, first_markers_after(records, markers))
        at = out.setdefault(topic, {})
        for record in records:
            if record.offset not in aborted:
                at.setdefault(record.value, (partition, record.offset))
    return out


def dependency_graph(a: Analysis) -> nx.DiGraph:
    """Nodes: positions of `ok` data ops (attribute `op`). Edges: attribute `steps`, a dict
    from "ww"/"wr" to the first step explaining that kind of dependency."""
    graph = nx.DiGraph()
    committed = [op for op in a.ops if op.type == "ok" and op.f in DATA_FS]
    for op in committed:
        graph.add_node(op.position, op=op)

    def link(t1: ClientOp, t2: ClientOp, kind: str, step: dict[str, Any]) -> None:
        if t1.position == t2.position or t1.type != "ok" or not graph.has_node(t1.position):
            return
        if not graph.has_edge(t1.position, t2.position):
            graph.add_edge(t1.position, t2.position, steps={})
        graph.edges[t1.position, t2.position]["steps"].setdefault(kind, step)

    for op in committed:
        for key, placed in writes(op).items():
            order = a.order(key)
            for value, offset in placed:
                index = order.index((value, offset))
                if not index:  # unknown, or first in the order
                    continue
                earlier = order.by_index[index - 1]
                writer = a.writer_of.get(key, {}).get(earlier)
                if writer is not None:
                    step = {"type": "ww", "topic": key[0], "partition": key[1]}
                    link(writer, op, "ww", {**step, "value": earlier, "value_after": value})
        for key, placed in reads(op).items():
            for value, _ in placed:
                writer = a.writer_of.get(key, {}).get(value)
                if writer is not None:
                    step = {"type": "wr", "topic": key[0], "partition": key[1], "value": value}
                    link(writer, op, "wr", step)
    return graph


def _components(graph: nx.DiGraph) -> list[list[int]]:
    """Strongly connected components of more than one node, each sorted, in order of their
    first node."""
    found = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return sorted(found)


def _example(graph: nx.DiGraph, cycle: list[int], kinds: list[str]) -> dict[str, Any]:
    """`cycle` lists nodes n0 .. nk with n0 == nk; `kinds[i]` is the step n_i -> n_(i+1)."""
    steps = [
        graph.edges[u, v]["steps"][kind]
        for u, v, kind in zip(cycle, cycle[1:], kinds, strict=False)
    ]
    return {
        "cycle": [op_summary(graph.nodes[n]["op"]) for n in cycle],
        "steps": steps,
    }


def _g0(graph: nx.DiGraph, anomaly: Anomaly) -> None:
    ww = nx.DiGraph()
    ww.add_nodes_from(graph.nodes)
    ww.add_edges_from((u, v) for u, v, d in graph.edges(data=True) if "ww" in d["steps"])
    for component in _components(ww):
        inside = ww.subgraph(component)
        edges = nx.find_cycle(inside, source=component[0])
        cycle = [edges[0][0], *(v for _, v in edges)]
        anomaly.add({"type": "G0", **_example(graph, cycle, ["ww"] * len(edges))})


def _g1c(graph: nx.DiGraph, anomaly: Anomaly) -> None:
    for component in _components(graph):
        inside = graph.subgraph(component)
        wr_edges = sorted((u, v) for u, v, d in inside.edges(data=True) if "wr" in d["steps"])
        if not wr_edges:
            continue  # a ww-only component: G0
        u, v = wr_edges[0]
        back = nx.shortest_path(inside, v, u)
        cycle = [u, *back]
        kinds = ["wr"] + [
            "wr" if "wr" in inside.edges[x, y]["steps"] else "ww"
            for x, y in itertools.pairwise(back)
        ]
        anomaly.add({"type": "G1c", **_example(graph, cycle, kinds)})


__all__ = [
    "CYCLE_ANOMALIES",
    "check_cycles",
    "cycles_judged",
    "dependency_graph",
    "transaction_ops",
]
