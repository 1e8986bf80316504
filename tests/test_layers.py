"""The library's layers only point down (issue 25).

Every top-level module or package of ``src/diffsim`` sits on one layer; an import (read from
the source with ``ast``, relative imports resolved, imports inside functions included) may
reach its own layer or a lower one, never a higher one. The catalogue (``diffsim.systems``:
the systems, their registry, the studies, the doctor's battery and presets) sits above the
doctor, the estimators and ``optimize``; the shells (CLI, page, figures) and the flat
``diffsim`` namespace on top.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "diffsim"

LAYERS: list[set[str]] = [
    # foundations
    {
        "_types",
        "_cache",
        "_checks",
        "_coords",
        "_extras",
        "_options",
        "_results",
        "_sharding",
        "sharding",
        "_sigma",
        "_step",
    },
    # rollouts, derivatives
    {"_rollout", "_grad", "_jacobians", "_policy", "policies", "integrators"},
    {"contact", "engines"},  # models: contact, engine adapters
    {"estimators"},  # gradient estimators
    # tools over any loss
    {"_optimize", "_descent", "_decide", "_methods", "optimization", "doctor"},
    {"systems"},  # the catalogue: systems, registry, studies, battery, presets
    {"identification", "_tasks"},  # workflows
    {"plots", "app", "cli", "__init__", "__main__"},  # shells and the flat namespace
]


def _unit(module: str) -> str:
    """``diffsim.doctor._rules`` -> ``doctor``; ``diffsim`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the diffsim modules it imports, for every ``.py`` under ``root``
    (``from pkg import name`` points at the module ``pkg.name`` when there is one)."""
    paths = sorted(root.rglob("*.py"))
    modules = {_module_name(path, root) for path in paths}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        module = _module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{alias.name}" for alias in node.names]
                targets = [t for t in subs if t in modules]
                if len(targets) < len(subs):  # a name defined in ``target`` itself
                    targets.append(target)
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            edges[module].update(t for t in targets if t.split(".")[0] == "diffsim")
    return edges


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Each import from a lower layer to a higher one, and each unit on no layer."""
    layer = {unit: k for k, units in enumerate(LAYERS) for unit in units}
    found = []
    for module, targets in sorted(edges.items()):
        src = _unit(module)
        if src not in layer:
            found.append(f"{module}: {src!r} is on no layer (add it to LAYERS)")
            continue
        for target in sorted(targets):
            dst = _unit(target)
            if dst not in layer:
                found.append(f"{module} imports {target}: {dst!r} is on no layer")
            elif layer[dst] > layer[src]:
                found.append(f"{module} (layer {layer[src]}) imports {target} (layer {layer[dst]})")
    return found


def package_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among each package's own modules: for every package, its direct
    children (a subpackage's modules counted as the subpackage) and its ``__init__``, and
    the strongly connected components of more than one of them (Tarjan's algorithm), each
    sorted, in sorted order."""

    def child(package: str, module: str) -> str | None:
        """The node of ``package``'s graph that ``module`` belongs to, if any."""
        if module == package:
            return module
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1 :].split(".")[0]

    modules = set(edges) | {t for ts in edges.values() for t in ts}
    packages = {m.rpartition(".")[0] for m in modules if "." in m}
    found = []
    for package in sorted(packages):
        graph: dict[str, set[str]] = defaultdict(set)
        for module, targets in edges.items():
            src = child(package, module)
            if src is None:
                continue
            for target in targets:
                dst = child(package, target)
                if dst is not None and dst != src:
                    graph[src].add(dst)
        found += [c for c in _components(graph) if len(c) > 1]
    return sorted(found)


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_import_points_down_or_level():
    edges = import_graph()
    assert len(edges) > 80, len(edges)  # the whole tree was read
    assert not violations(edges), "\n".join(violations(edges))


def test_every_unit_of_the_tree_is_on_a_layer():
    units = {p.stem if p.is_file() else p.name for p in SRC.iterdir()}
    units = {u for u in units if not u.startswith(".") and u not in {"py", "__pycache__"}}
    units.discard("py.typed")
    placed = set().union(*LAYERS)
    assert units - placed == set(), units - placed
    assert placed - units == set(), placed - units


def test_the_doctor_and_the_tools_know_no_system():
    """The catalogue's own check: nothing below it imports ``diffsim.systems``."""
    below = [
        f"{m} -> {t}"
        for m, ts in import_graph().items()
        for t in ts
        if _unit(t) == "systems" and _unit(m) in {"doctor", "_optimize", "estimators", "engines"}
    ]
    assert not below, below


def test_the_checker_can_fail():
    """An upward import (the doctor's battery importing the systems, as it did), an import
    within a layer and a downward one, and a module on no layer."""
    edges = {
        "diffsim.doctor._battery": {"diffsim.systems", "diffsim.integrators"},
        "diffsim._optimize": {"diffsim.doctor"},
        "diffsim._newthing": {"diffsim._checks"},
    }
    found = violations(edges)
    assert found == [
        "diffsim._newthing: '_newthing' is on no layer (add it to LAYERS)",
        "diffsim.doctor._battery (layer 4) imports diffsim.systems (layer 5)",
    ], found


KNOWN_CYCLES: list[list[str]] = []
"""Cycles not yet removed; the check refuses any other."""


def test_no_package_imports_in_a_circle():
    """Within each package the modules form no import cycle (issue 48): a circle that the
    top-level layers cannot see (they count units, not a unit's modules)."""
    cycles = [c for c in package_cycles(import_graph()) if c not in KNOWN_CYCLES]
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_can_fail():
    """The estimators' old circle (base -> _evidence -> auto -> first_order -> policy ->
    base, each through an import inside a function or at the top) is reported, a chain
    that only points down is not, and an import of another package's modules is not."""
    p = "diffsim.estimators"
    edges = {
        f"{p}.base": {f"{p}._evidence", "diffsim._checks"},
        f"{p}._evidence": {f"{p}.auto"},
        f"{p}.auto": {f"{p}.first_order"},
        f"{p}.first_order": {f"{p}.policy", "diffsim._policy"},
        f"{p}.policy": {f"{p}.base"},
        f"{p}.exact": {f"{p}.base"},
        "diffsim.doctor._measure": {f"{p}.base", "diffsim.doctor._rules"},
        "diffsim.doctor._rules": {f"{p}.auto"},
    }
    names = ["_evidence", "auto", "base", "first_order", "policy"]
    assert package_cycles(edges) == [[f"{p}.{n}" for n in names]], package_cycles(edges)
    del edges[f"{p}.policy"]
    assert package_cycles(edges) == []
