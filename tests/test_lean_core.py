"""The core installs lean and the shells hold to the public API (issue 25).

``import diffsim`` and the library's work (rollouts, gradients, the doctor, an estimator)
run with the extras' modules made unimportable; each shell without its extra answers with
one line naming the pip command; and ``cli/``, ``app/``, ``benchmarks/`` and ``examples/``
import nothing private from the library (checked on their source, by ``ast``).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import diffsim

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "diffsim"

# a meta-path finder that makes these modules (and their submodules) fail to import, as in an
# environment where the extra was never installed
_BLOCK = """
import sys
BLOCKED = set({blocked!r})
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
"""
SHELL_MODULES = ("typer", "rich", "click", "matplotlib", "dash", "plotly", "flask", "werkzeug")


def _run_without(blocked, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    program = _BLOCK.format(blocked=sorted(blocked)) + code
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_library_works_without_any_extra():
    """Rollout, exact gradient, the doctor and an estimator with every shell module absent;
    the rollout and its gradient checked against the closed form of semi-implicit Euler
    under gravity (x_T = T h v₀ − g h² T(T+1)/2)."""
    code = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import diffsim
from diffsim.integrators import SemiImplicitEuler
from diffsim.estimators import FirstOrder
step = SemiImplicitEuler(lambda x, v, th: -th["g"], h=0.01)
def height(v0):
    xT, vT = diffsim.rollout(step, (0.0, v0), {"g": 9.81}, 100, trajectory=False)
    return xT
# semi-implicit Euler: v_k = v0 - k g h, x_T = h sum_{k=1..T} v_k = T h v0 - g h^2 T(T+1)/2
T, h, g = 100, 0.01, 9.81
expected = T * h * 3.0 - g * h * h * T * (T + 1) / 2
value, grad = jax.value_and_grad(height)(3.0)
assert abs(float(value) - expected) < 1e-12, (float(value), expected)
assert abs(float(grad) - T * h) < 1e-12, float(grad)
loss = lambda v0: (height(v0) - 1.0) ** 2
est = FirstOrder(sigma=0.1, num_samples=8)(loss, jnp.asarray(3.0), jax.random.PRNGKey(0))
assert jnp.isfinite(est.estimate)
report = diffsim.diagnose(loss, 3.0, jax.random.PRNGKey(0))
assert report.verdict == "trusted", report.verdict
absent = [m for m in sys.modules if m.split(".")[0] in BLOCKED]
assert not absent, absent
print("ok", diffsim.EXTRAS["cli"][1])
"""
    done = _run_without(SHELL_MODULES, code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ('typer', 'rich')")


@pytest.mark.parametrize(
    ("extra", "blocked", "code"),
    [
        ("cli", ("typer",), "from diffsim.cli import main; main()"),
        ("plots", ("matplotlib",), "from diffsim.plots import stiff_figure; stiff_figure('x.png')"),
        ("demo", ("dash",), "import diffsim.app"),
        # the command runs; the page it serves needs the demo extra (exit status 1)
        ("demo", ("dash", "plotly"), "from diffsim.cli import main; main()"),
    ],
)
def test_a_missing_extra_is_one_line_naming_its_pip_command(extra, blocked, code, tmp_path):
    argv = "import sys; sys.argv = ['diffsim', 'demo', '--no-browser']\n"
    done = _run_without(blocked, argv + code)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert f"pip install 'diffsim-jax[{extra}]'" in lines[-1], done.stderr[-2000:]
    assert f"pip install '.[{extra}]'" in lines[-1]
    if "main()" in code:  # the command prints exactly one line, no traceback
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("error: ")
    else:  # the library raises diffsim.MissingExtraError (an ImportError)
        assert lines[-1].startswith("diffsim._extras.MissingExtraError: ")


def test_require_extra_names_the_accepted_extras():
    with pytest.raises(ValueError, match="extra must be one of cli, plots, demo, got 'gui'"):
        diffsim.require_extra("gui")
    for extra in diffsim.EXTRAS:  # this environment has them all (the test extra)
        diffsim.require_extra(extra)


def test_the_extras_in_pyproject_are_the_ones_the_library_checks():
    tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11 (the main job runs it)")

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    core = {r.split(">")[0].split("=")[0].split(";")[0].strip() for r in project["dependencies"]}
    for extra, (_, modules) in diffsim.EXTRAS.items():
        names = {r.split(">")[0].split("=")[0] for r in extras[extra]}
        assert names == set(modules), (extra, names)
        assert not core & set(modules), (extra, core)
    assert extras["all"] == ["diffsim-jax[cli,plots,demo]"]
    assert "diffsim-jax[all]" in extras["test"]


# --- the shells import only the public API ------------------------------------------------


def _private_imports(path: Path, package: tuple[str, ...]) -> list[str]:
    """Imports in ``path`` that reach a private module or name of ``diffsim`` outside the
    file's own package ``package`` (``("diffsim", "cli")`` for ``src/diffsim/cli/x.py``; a
    module outside ``src`` has ``()``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [(alias.name.split("."), []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = list(package[: len(package) - (node.level - 1)])
                module = base + (node.module.split(".") if node.module else [])
            else:
                module = (node.module or "").split(".")
            targets = [(module, [alias.name for alias in node.names])]
        else:
            continue
        for module, names in targets:
            if not module or module[0] != "diffsim":
                continue
            if len(package) > 1 and tuple(module[: len(package)]) == package:
                continue  # the shell's own package: its private modules are its own
            private = [p for p in module[1:] if p.startswith("_")]
            private += [n for n in names if n.startswith("_") and n != "__version__"]
            if private:
                line = ast.get_source_segment(path.read_text(), node) or ""
                found.append(f"{path}:{node.lineno}: {line}")
    return found


def _shell_files():
    for folder, package in (
        (SRC / "cli", ("diffsim", "cli")),
        (SRC / "app", ("diffsim", "app")),
        (ROOT / "benchmarks", ()),
        (ROOT / "examples", ()),
    ):
        for path in sorted(folder.rglob("*.py")):
            yield path, package


def test_the_shells_import_only_the_public_api():
    files = list(_shell_files())
    assert len(files) > 30, len(files)
    found = [hit for path, package in files for hit in _private_imports(path, package)]
    assert not found, "\n".join(found)


def test_the_private_import_check_can_fail(tmp_path):
    """The checker itself: each kind of private reach is caught, own-package imports not."""
    cases = {
        "from .._jacobians import Method": True,
        "from ..estimators._evidence import CHOICES": True,
        "import diffsim._sharding": True,
        "from diffsim.app import _guard": True,
        "from diffsim import _tasks": True,
        "from ._common import app": False,  # the shell's own private module
        "from .. import TASKS, __version__": False,
        "from ..estimators import CHOICES": False,
        "import numpy._core": False,
    }
    for source, private in cases.items():
        path = tmp_path / "probe.py"
        path.write_text(source + "\n")
        hits = _private_imports(path, ("diffsim", "cli"))
        assert bool(hits) == private, (source, hits)


def test_importing_diffsim_leaves_the_devices_to_choose():
    """``import diffsim`` builds no array (nothing starts JAX's backend), so a user can still
    choose the devices afterwards: ``jax_num_cpu_devices`` set after the import takes effect
    (3 CPU devices), as ``diffsim --devices`` and ``initialize_distributed`` need. (A task
    that built its robot at import broke both.)"""
    code = """
import diffsim
import jax
if "jax_num_cpu_devices" not in jax.config.values:
    print("no jax_num_cpu_devices")  # older JAX: only XLA_FLAGS, before the import
else:
    jax.config.update("jax_num_cpu_devices", 3)
    print(len(jax.devices()))
"""
    out = _run_without((), code)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.strip() == "no jax_num_cpu_devices":
        pytest.skip("this JAX has no jax_num_cpu_devices option")
    assert out.stdout.strip() == "3"
