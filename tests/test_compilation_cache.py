"""The persistent compilation cache the CLI turns on (issue 47 item 2), in fresh processes:
JAX reads its cache settings once per process, so each case runs in its own."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

CLI = """
import jax
from diffsim.cli import app
from typer.testing import CliRunner
out = CliRunner().invoke(app, ["bounce", "--e", "0.5"])
assert out.exit_code == 0, out.output
print("CACHE=" + str(jax.config.jax_compilation_cache_dir))
"""

LIBRARY = """
import jax, jax.numpy as jnp
import diffsim
d = diffsim.enable_compilation_cache(min_compile_seconds=0.0)
jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.ones(7)).block_until_ready()
print("CACHE=" + str(d))
"""


def _run(code: str, cache: str) -> str:
    env = dict(os.environ, DIFFSIM_JAX_CACHE=cache, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("CACHE=")[-1].strip()


@pytest.mark.slow  # a fresh Python process per case: ~4 s each
@pytest.mark.parametrize("cache", ["DIR", "off"])
def test_the_cli_turns_the_cache_on_unless_told_off(tmp_path, cache):
    where = str(tmp_path / "jax-cache") if cache == "DIR" else cache
    got = _run(CLI, where)
    assert got == (where if cache == "DIR" else "None")


def test_enable_compilation_cache_writes_the_compiled_program(tmp_path):
    """A program compiled after the call is on disk (JAX writes one entry per program)."""
    where = tmp_path / "jax-cache"
    got = _run(LIBRARY, str(where))
    if got == "None" and jax.__version__.startswith("0.4."):  # the minimum versions' JAX
        pytest.skip("JAX 0.4's cache imports etils.epath, broken without importlib_resources")
    assert got == str(where)
    assert any(where.iterdir()), "no cache entry written"
