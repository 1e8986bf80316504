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
    {"_types", "_checks", "_coords", "_extras", "_options", "_sharding", "sharding", "_sigma"},
    # rollouts, derivatives
    {"_rollout", "_grad", "_jacobians", "_policy", "policies", "integrators"},
    {"contact", "engines"},  # models: contact, engine adapters
    {"estimators"},  # gradient estimators
    {"_optimize", "doctor"},  # tools over any loss
    {"systems"},  # the catalogue: systems, registry, studies, battery, presets
    {"_identify", "_tasks"},  # workflows
    {"plots", "app", "cli", "__init__", "__main__"},  # shells and the flat namespace
]


def _unit(module: str) -> str:
    """``diffsim.doctor._rules`` -> ``doctor``; ``diffsim`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the diffsim modules it imports, for every ``.py`` under ``root``."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [target]
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
