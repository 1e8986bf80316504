"""The documentation site's contracts that need no build: every public namespace has a
reference page, every public name an example that runs (doctests run under
``--doctest-modules``), and the page's concept links point at pages that exist.
``bash scripts/docs`` builds the site itself, strictly, executing the tutorials."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pathlib
import re
from types import ModuleType

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# every public namespace, and the reference page that renders it with mkdocstrings
NAMESPACES = {
    "diffsim": "diffsim.md",
    "diffsim.integrators": "integrators.md",
    "diffsim.contact": "contact.md",
    "diffsim.systems": "systems.md",
    "diffsim.systems.projectile_wall": "systems.md",
    "diffsim.systems.wall_study": "systems.md",
    "diffsim.systems.pushing": "systems.md",
    "diffsim.systems.billiards": "systems.md",
    "diffsim.systems.mass_spring_robot": "systems.md",
    "diffsim.estimators": "estimators.md",
    "diffsim.doctor": "doctor.md",
    "diffsim.optimization": "optimization.md",
    "diffsim.policies": "policies.md",
    "diffsim.sharding": "sharding.md",
    "diffsim.engines": "engines.md",
    "diffsim.engines.mjx": "engines.md",
    "diffsim.engines.brax": "engines.md",
    "diffsim.engines.scenes": "engines.md",
    "diffsim.plots": "plots.md",
}
ENGINE_MODULES = {"diffsim.engines.mjx": "mujoco", "diffsim.engines.brax": "brax"}

# Public names whose docstrings lack a runnable example, each with the reason. The test
# fails when this list and the library disagree, in either direction, so adding an example
# means removing its name here. A listed name the library does not have (yet) is ignored.
WITHOUT_EXAMPLE: frozenset[str] = frozenset(
    {
        # its only argument is the path: it always computes the whole ten-step convergence
        # study (10 to 15 s on a CPU), too slow for the default doctests; its data has an
        # example (impact_convergence_data), and `diffsim plot impact` draws it
        "diffsim.plots.impact_figure",
    }
)


def _module(name: str) -> ModuleType:
    if name in ENGINE_MODULES:
        pytest.importorskip(ENGINE_MODULES[name])
    return importlib.import_module(name)


def _defined_here(mod: ModuleType) -> set[str]:
    """Names a module binds itself at top level (assignments, defs, classes), not imports."""
    tree = ast.parse(inspect.getsource(mod))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _public(mod: ModuleType) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:  # a module without __all__: what it defines, not what it imports
        names = sorted(n for n in _defined_here(mod) if not n.startswith("_"))
    return [n for n in names if not inspect.ismodule(getattr(mod, n)) and n != "__version__"]


def _documented_object(obj: object) -> bool:
    """A function (also behind a decorator such as ``functools.lru_cache``) or a class —
    not a type alias such as ``Callable[[Array], Array]`` (``inspect.isclass`` says True
    for those on Python 3.10): an alias is data, exemplified by its namespace's examples."""
    if getattr(obj, "__origin__", None) is not None:  # a generic alias
        return False
    return inspect.isfunction(inspect.unwrap(obj)) or inspect.isclass(obj)  # type: ignore[arg-type]


def _doctest_text(mod: ModuleType) -> str:
    """Every ``>>>`` line in the module's docstring and its public objects' docstrings."""
    docs = [inspect.getdoc(mod) or ""]
    for n in _public(mod):
        obj = getattr(mod, n)
        if _documented_object(obj):
            docs.append(inspect.getdoc(obj) or "")
    return "\n".join(line for d in docs for line in d.splitlines() if ">>>" in line)


def _lacks_example(mod: ModuleType, name: str, doctests: str) -> bool:
    obj = getattr(mod, name)
    if _documented_object(obj):
        own = inspect.getdoc(obj) or ""
        if obj.__doc__ is None or (inspect.isclass(obj) and own == inspect.getdoc(type(obj))):
            return True
        return ">>>" not in own
    # data (registries, constants, type aliases): an example of the namespace uses it
    return re.search(rf"\b{re.escape(name)}\b", doctests) is None


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
def test_every_public_namespace_has_a_reference_entry(namespace):
    page = (DOCS / "reference" / NAMESPACES[namespace]).read_text()
    assert re.search(rf"^::: {re.escape(namespace)}$", page, flags=re.M), namespace


def test_every_public_name_has_an_example():
    missing, public = set(), set()
    for namespace in sorted(NAMESPACES):
        if (
            namespace in ENGINE_MODULES
            and importlib.util.find_spec(ENGINE_MODULES[namespace]) is None
        ):
            continue  # the engine is not installed here (scripts/test installs it)
        mod = _module(namespace)
        doctests = _doctest_text(mod)
        public |= {f"{namespace}.{n}" for n in _public(mod)}
        missing |= {f"{namespace}.{n}" for n in _public(mod) if _lacks_example(mod, n, doctests)}
    assert sorted(missing - WITHOUT_EXAMPLE) == [], "public names without an example"
    assert sorted((WITHOUT_EXAMPLE & public) - missing) == [], "these have examples: drop them"


def test_page_concept_links_point_at_site_pages():
    pytest.importorskip("dash")
    from diffsim.app._layout import CONCEPT_LINKS

    for _title, path, source in CONCEPT_LINKS:
        src = ROOT / source
        assert src.is_file(), source
        assert src.relative_to(DOCS).with_suffix("").as_posix() + "/" == path, (path, source)


# --- the built tutorials keep their figures (issue 24) ------------------------------------


def _check_figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_figures", DOCS / "_ext/check_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_figure_check_counts_code_calls_and_embedded_images(tmp_path):
    cf = _check_figures()
    script = (
        "# %% [markdown]\n# call plt.show() to draw\n"
        "# %%\nimport matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n"
        "# plt.show()  (a comment)\n"
        "# %%\nfor _ in range(1):\n    plt.show( )\n"
    )
    assert cf.shows_in(script) == 2
    img = '<img alt="No description has been provided for this image" src="data:image/png;base64,iVBO">'
    assert cf.images_in(f"<div>{img}</div><img src='x.png'>{img}") == 2
    tutorials, site = tmp_path / "tutorials", tmp_path / "site"
    tutorials.mkdir()
    (tutorials / "a.py").write_text(script)
    (tutorials / "b.py").write_text(script)
    (tutorials / "c.py").write_text(script)
    for name, images in (("a", 2), ("b", 1)):
        (site / name).mkdir(parents=True)
        (site / name / "index.html").write_text(img * images)
    problems = cf.check(tutorials, site)
    # a: both figures; b: one lost (the Agg backend drew nothing); c: never built
    assert len(problems) == 2
    assert "1 images for 2 plt.show()" in problems[0] and "b.py" in problems[0]
    assert "missing" in problems[1] and "c.py" in problems[1]
    assert cf.main([str(tutorials), str(site)]) == 1


def test_every_tutorial_draws_and_the_docs_build_checks_it():
    cf = _check_figures()
    for script in sorted((DOCS / "tutorials").glob("*.py")):
        assert cf.shows_in(script.read_text()) >= 1, script
    build = (ROOT / "scripts/docs").read_text()
    assert "check_figures.py" in build and "unset MPLBACKEND" in build
