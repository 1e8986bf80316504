"""The benchmark runs and the frameworks' gradients agree (no timed assertions).

Needs only diffsim, JAX, NumPy and gcc; Warp, Taichi and PyTorch are checked when the bench
extras are installed.
"""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _harness  # noqa: E402

CORE = ["diffsim", "jax", "numpy"] + (["compiled-C"] if shutil.which("gcc") else [])
PEERS = {"warp": "warp", "taichi": "taichi", "torch": "torch"}


def _available(name: str) -> bool:
    return importlib.util.find_spec(PEERS[name]) is not None


@pytest.mark.parametrize("name", [*CORE[1:], *PEERS])
def test_gradient_agrees_with_diffsim(name):
    if name in PEERS and not _available(name):
        pytest.skip(f"{name} not installed (pip install -e '.[bench]')")
    n, steps = 256, 300
    _, ref = _harness.make_impl("diffsim", n, steps).gradient()
    impl = _harness.make_impl(name, n, steps)
    if not getattr(impl, "has_gradient", True):
        loss = impl.forward()
        ds_loss = _harness.make_impl("diffsim", n, steps).forward()
        assert loss == pytest.approx(ds_loss, rel=1e-3)
        return
    _, g = impl.gradient()
    agree = _harness.gradient_agreement(np.asarray(g), np.asarray(ref))
    # a grazing contact may flip in a framework that rounds y + vy h differently
    assert agree["balls_differing"] <= n // 50
    assert agree["max_rel_diff_agreeing"] < 1e-3


def test_quick_run_in_process():
    from benchmarks.__main__ import run

    out = run(
        [
            "--quick",
            "--sizes",
            "1,64",
            "--steps",
            "60",
            "--rounds",
            "2",
            "--frameworks",
            ",".join(CORE),
            "--no-estimators",
        ],
        log=lambda s: None,
    )
    assert [c["n"] for c in out["cases"]] == [1, 64]
    for case in out["cases"]:
        assert set(case["rows"]) == set(CORE)
        for name in CORE:
            row = case["rows"][name]
            assert row["forward_s"] > 0 and row["forward_ratio_to_diffsim"] > 0
            if name != "numpy":
                assert row["gradient_agreement"]["balls_differing"] == 0
        assert case["floor"]["gradient"]["floor_s"] > 0


def test_diffsim_bench_cli_quick_json():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "diffsim",
            "bench",
            "--quick",
            "--json",
            "--no-long-horizon",
            "--frameworks",
            ",".join(CORE),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    out = json.loads(proc.stdout)
    assert {c["n"] for c in out["cases"]} == {1, 512}
    assert "estimators" in out


def test_diffsim_bench_without_benchmarks_folder(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from diffsim.cli import _bench, app

    monkeypatch.setattr(_bench, "_candidate_roots", lambda: [str(tmp_path)])
    result = CliRunner().invoke(app, ["bench", "--quick"])
    assert result.exit_code == 2
    assert "benchmarks/" in result.output
