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
history order, so the result is deterministic. eosim's own histories record no client ops
(their transactions' reads are not kept with them), so there both counts are 0.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx

from eosim.analysis.checker import Anomaly
from eosim.analysis.history import ClientOp, History, paused_gc
from eosim.analysis.version_order import Analysis, op_summary, reads, writes

CYCLE_ANOMALIES = ("G0", "G1c")
DATA_FS = ("send", "poll", "txn")


def check_cycles(history: History) -> dict[str, Anomaly]:
    """Every name in `CYCLE_ANOMALIES`, with count 0 when absent."""
    anomalies = {name: Anomaly(name) for name in CYCLE_ANOMALIES}
    if not history.client_ops:
        return anomalies
    with paused_gc():
        graph = dependency_graph(Analysis(history))
        _g0(graph, anomalies["G0"])
        _g1c(graph, anomalies["G1c"])
    return anomalies


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


__all__ = ["CYCLE_ANOMALIES", "check_cycles", "dependency_graph"]
