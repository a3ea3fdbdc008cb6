"""The model's import graph: no cycles among ``eosim.simulation`` modules, and the model never
reaches up into ``eosim.analysis`` (the checkers) or the API and command line above.
(tests/test_packaging.py runs the import-linter contract that layers the whole package.)

The graph is read from the source with ``ast``, so it counts every import a module makes:
at its top, inside functions and under ``if TYPE_CHECKING:`` alike (a cycle that only the
type checker sees is still two modules that cannot be understood apart).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "simulation"


def _module_name(path: Path) -> str:
    """The installed name: ``simulation/broker/log.py`` is ``eosim.simulation.broker.log``."""
    parts = ["eosim", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_names(name: str, path: Path) -> set[str]:
    """Every module name ``path`` imports (``from a.b import c`` gives ``a.b.c`` when that
    is a module, else ``a.b``), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in MODULES else base)
    return out


def import_graph() -> dict[str, list[str]]:
    """Module -> the ``simulation`` modules it imports (sorted)."""
    return {
        name: sorted(m for m in imported_names(name, path) if m in MODULES and m != name)
        for name, path in MODULES.items()
    }


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_no_import_cycle_among_simulation_modules() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_sees_type_checking_imports(tmp_path: Path) -> None:
    """The checker itself: an import under TYPE_CHECKING is an edge of the graph."""
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from eosim.simulation.b import X\n"
    )
    module = tmp_path / "a.py"
    module.write_text(source)
    edges = imported_names("eosim.simulation.a", module)
    assert "eosim.simulation.b" in edges
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"a": ["b"], "b": []}) is None


def test_protocol_imports_nothing_from_broker_or_producer() -> None:
    """The wire vocabulary is shared by clients and brokers; it depends on neither."""
    graph = import_graph()
    for name in ("eosim.simulation.protocol", "eosim.simulation.records"):
        inside = [
            m
            for m in graph[name]
            if m.startswith(("eosim.simulation.broker", "eosim.simulation.producer"))
        ]
        assert inside == [], f"{name} imports {inside}"


def test_simulation_never_imports_analysis_or_cli() -> None:
    offenders = sorted(
        f"{name} imports {m}"
        for name, path in MODULES.items()
        for m in imported_names(name, path)
        if m.split(".")[0] in ("analysis", "simulation")
        or m == "eosim"
        or (m.startswith("eosim.") and not m.startswith("eosim.simulation"))
    )
    assert offenders == []


def test_every_request_type_has_a_handler() -> None:
    """Each request of the wire vocabulary is named in the broker's dispatch table or in its
    coordinator runtime's, and an unknown one is refused by name."""
    import dataclasses

    from conformance.cluster import Cluster

    import eosim.simulation.protocol as protocol

    requests = sorted(
        (
            c
            for name, c in vars(protocol).items()
            if name.endswith("Request") and isinstance(c, type)
        ),
        key=lambda cls: cls.__name__,
    )
    assert requests and all(dataclasses.is_dataclass(cls) for cls in requests)
    cluster = Cluster()
    broker = cluster.brokers["broker-0"]
    assert broker.coordinator is not None
    unhandled = [
        cls.__name__
        for cls in requests
        if cls not in broker.apis.handlers
        and cls not in broker.coordinator.handlers
        and cls not in cluster.controller.handlers
    ]
    assert unhandled == []

    class Unknown:
        pass

    with pytest.raises(TypeError, match="broker-0: unexpected request Unknown"):
        broker.apis.handle(Unknown())


def test_application_kinds_cover_every_application_list_of_a_scenario() -> None:
    """Every list of applications a scenario declares is a registered kind (the runner
    builds nothing outside the registry), and a list cannot be registered twice."""
    from eosim.simulation.applications import KINDS, ApplicationKind, register
    from eosim.simulation.scenario import Scenario

    fields = [k.field for k in KINDS]
    assert sorted(fields) == ["consumers", "processors", "producers", "transactional_producers"]
    assert all(f in Scenario.model_fields for f in fields)

    class Again(ApplicationKind):
        field = "producers"

    with pytest.raises(ValueError, match="already registered"):
        register(Again())
    assert [k.field for k in KINDS] == fields


def test_a_run_is_a_cluster_and_applications_driven_phase_by_phase() -> None:
    """``run_scenario`` is the phases of :class:`Run` in order: driving them by hand gives
    the same history; the nemesis's targets are the cluster's brokers, then the source and
    pipeline applications (readers are not targets), and the controller."""
    from eosim.simulation import load_scenario, run_scenario
    from eosim.simulation.runner import Run

    scenario = load_scenario(str(ROOT / "scenarios" / "transactional-pipeline.yaml"))
    run = Run(scenario, 2, trace=False)
    targets = list(run.faults.nodes)
    brokers = list(run.cluster.metadata.brokers)
    writers = [
        a.name
        for kind in ("transactional_producers", "processors", "producers")
        for a in getattr(scenario, kind)
    ]
    assert targets[: len(brokers)] == brokers
    assert sorted(targets) == sorted([*brokers, "controller", *writers])
    assert not {c.name for c in scenario.consumers} & set(targets)
    for phase in (run.run_workload, run.heal, run.settle, run.recover):
        phase()
    run.abandon_open_operations()
    run.drain()
    result = run.collect(0.0)
    assert result.history.digest() == run_scenario(scenario, 2).history.digest()
