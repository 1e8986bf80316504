"""The MJX adapter's private-code boundary (issue 48).

``diffsim.engines.mjx._shim`` is the one module that touches MJX's private code
(``mujoco.mjx._src`` and ``Data._impl``). These tests pin the MuJoCo release it supports to
the ``mjx`` extra of ``pyproject.toml``, check that every private name it uses exists in the
installed MJX, and that no other module of ``src/`` mentions MJX's private code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "diffsim"
SHIM = SRC / "engines" / "mjx" / "_shim.py"


def _pinned_mujoco() -> str:
    """The MuJoCo version the ``mjx`` extra pins (``mjx = ["mujoco==X", ...]``)."""
    extra = re.search(r"^mjx = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert extra, "pyproject.toml has no mjx extra"
    pins = re.findall(r'"mujoco==([^"]+)"', extra.group(1))
    assert len(pins) == 1, extra.group(0)
    return pins[0]


def test_the_shim_supports_the_pinned_mujoco():
    pytest.importorskip("mujoco")
    import mujoco

    from diffsim.engines.mjx import _shim

    assert _shim.SUPPORTED_MUJOCO == _pinned_mujoco()
    assert mujoco.__version__ == _shim.SUPPORTED_MUJOCO, (
        f"MuJoCo {mujoco.__version__} is installed; the MJX adapter's private accesses "
        f"(diffsim/engines/mjx/_shim.py) are written against {_shim.SUPPORTED_MUJOCO}"
    )


def test_every_private_name_the_shim_uses_exists():
    pytest.importorskip("mujoco")
    from diffsim.engines import mjx, scenes
    from diffsim.engines.mjx import _shim

    forward = _shim._mjx_forward  # mujoco.mjx._src.forward, imported quietly by the shim
    for name in _shim.PRIVATE_FORWARD:
        assert callable(getattr(forward, name, None)), f"mujoco.mjx._src.forward.{name}"
    d = mjx.load(scenes.path("free_flight")).data_template
    impl = d._impl  # pyright: ignore[reportAttributeAccessIssue]
    for name in _shim.PRIVATE_DATA:
        assert hasattr(impl, name), f"mjx.Data._impl.{name}"
    rows = _shim.constraint_rows(d)
    assert rows.J.shape[0] == _shim.constraint_count(d)


def test_only_the_shim_touches_mjx_private_code():
    private = re.compile(r"mjx\._src|\._impl\b|[\"']_impl\.")
    offenders = [
        f"{path.relative_to(SRC.parent)}:{i}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SHIM
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert offenders == [], offenders
    assert private.search(SHIM.read_text())  # the pattern does find what the shim does
