"""The benchmark runs and the frameworks' gradients agree (no timed assertions).

Needs only diffsim, JAX, NumPy and gcc; Warp, Taichi and PyTorch are checked when the bench
extras are installed. Every framework's gradient is checked against diffsim's and against a
float64 NumPy reference (the hand adjoint of the task, :func:`reference_gradient`).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _harness, _report  # noqa: E402
from benchmarks.task import GH, X_TARGET, Y_TARGET, E, H, initial_state  # noqa: E402

CORE = ["diffsim", "jax", "numpy"] + (["compiled-C"] if shutil.which("gcc") else [])
PEERS = {"warp": "warp", "warp-tape": "warp", "taichi": "taichi", "torch": "torch"}

FLIPPED_MAX = 1 / 50
"""At most this fraction of balls may take a grazing contact differently from float64."""
RTOL, ATOL = 1e-4, 1e-4
"""Balls that take the same contacts as float64 agree with it to float32 rounding: the adjoint
is T ≤ 300 multiply-adds (~T · 6e-8 relative), and its seed 2 (y_T − 0.5) carries the
forward's rounding of y_T (~1e-5 absolute after 300 steps; measured 1.2e-5)."""


def reference_gradient(n: int, steps: int) -> tuple[float, np.ndarray]:
    """The task's loss and dL/dvy0 in float64: forward recording flags, then the adjoint."""
    x, y, vx, vy = (a.astype(np.float64) for a in initial_state(n))
    hits = np.zeros((steps, n), bool)
    for t in range(steps):
        vy = vy - GH
        x = x + vx * H
        y = y + vy * H
        hits[t] = (y < 0) & (vy < 0)
        y = np.where(hits[t], -y, y)
        vy = np.where(hits[t], -E * vy, vy)
    loss = float(np.sum((x - X_TARGET) ** 2 + (y - Y_TARGET) ** 2))
    ay, avy = 2 * (y - Y_TARGET), np.zeros(n)
    for t in reversed(range(steps)):
        ay = np.where(hits[t], -ay, ay)
        avy = np.where(hits[t], -E * avy, avy) + H * ay
    return loss, avy


def _check_against_reference(name: str, n: int, steps: int) -> None:
    loss_ref, g_ref = reference_gradient(n, steps)
    impl = _harness.make_impl(name, n, steps)
    if not getattr(impl, "has_gradient", True):
        assert impl.forward() == pytest.approx(loss_ref, rel=1e-3)
        return
    loss, g = impl.gradient()
    assert loss == pytest.approx(loss_ref, rel=1e-3)
    assert impl.forward() == pytest.approx(loss, rel=1e-5)
    g = np.asarray(g, np.float64)
    agree = _harness.gradient_agreement(g, g_ref)
    assert agree["balls_differing"] <= n * FLIPPED_MAX
    same = np.abs(g - g_ref) / np.maximum(np.abs(g_ref), 1e-3) <= 1e-3  # the harness's test
    np.testing.assert_allclose(g[same], g_ref[same], rtol=RTOL, atol=ATOL)


def _available(name: str) -> bool:
    """Installed; with DIFFSIM_REQUIRE_PEERS=1 (scripts/test-slow) a missing peer fails."""
    found = importlib.util.find_spec(PEERS[name]) is not None
    if not found and os.environ.get("DIFFSIM_REQUIRE_PEERS") == "1":
        raise RuntimeError(f"peer {name} is required (DIFFSIM_REQUIRE_PEERS=1) but missing")
    return found


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


@pytest.mark.parametrize("name", [*CORE, *PEERS])
def test_gradient_agrees_with_float64_reference(name):
    if name in PEERS and not _available(name):
        pytest.skip(f"{name} not installed (pip install -e '.[bench]')")
    _check_against_reference(name, 256, 300)


@pytest.mark.skipif(not shutil.which("gcc"), reason="no C compiler")
@pytest.mark.parametrize("n", [1, 7, 9, 20, 33, 100])
def test_compiled_tail_blocks_agree_with_reference(n):
    """Ball counts that are not a multiple of the 64-ball block use the 8/16/32-ball ones."""
    _check_against_reference("compiled-C", n, 300)


@pytest.mark.skipif(not shutil.which("gcc"), reason="no C compiler")
@pytest.mark.parametrize("steps", [1, 2, 31, 64])
def test_compiled_short_horizons_agree_with_reference(steps):
    _check_against_reference("compiled-C", 100, steps)


@pytest.mark.skipif(not _available("warp"), reason="warp not installed")
@pytest.mark.parametrize("steps", [1, 31, 32, 33])
def test_warp_fused_equals_warp_tape(steps):
    """The fused kernel's hand adjoint equals Warp's own reverse mode, to float32 rounding."""
    v1, g1 = _harness.make_impl("warp", 64, steps).gradient()
    v2, g2 = _harness.make_impl("warp-tape", 64, steps).gradient()
    assert v1 == pytest.approx(v2, rel=1e-6)
    np.testing.assert_allclose(g1, g2, rtol=1e-5, atol=1e-6)


def test_median_ci_order_statistics():
    xs = [float(v) for v in range(15, 0, -1)]
    lo, hi, cov = _harness.median_ci(xs)
    assert (lo, hi) == (4.0, 12.0)  # the 4th and 12th of 15: 96.5 % coverage
    assert cov == pytest.approx(0.9648, abs=1e-4)
    assert _harness.median_ci([2.0, 1.0, 3.0, 5.0, 4.0]) == (1.0, 5.0, 0.9375)
    assert _harness.median_ci([3.0]) == (3.0, 3.0, 0.0)
    st = _harness.summarize(xs)
    assert st["median"] == 8.0 and st["iqr"] == [4.5, 11.5] and st["n"] == 15


def test_formatting_keeps_only_supported_digits():
    assert _report.fmt_ratio({"median": 1.34, "ci": [1.21, 1.52]}) == "1.3 (1.2–1.5)"
    assert _report.fmt_ratio({"median": 2.345, "ci": [2.344, 2.346]}) == "2.35 (2.34–2.35)"
    assert _report.fmt_time({"median": 0.154, "ci": [0.15, 0.16]}) == "150 ms ±4%"
    assert _report.fmt_time({"median": 2.1e-5, "ci": [2e-5, 2.2e-5]}) == "21 µs ±5%"
    assert _report.fmt_sig(9.96) == "10" and _report.fmt_sig(0.0391) == "0.039"


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
            lo, hi = row["forward_stats_s"]["ci"]
            assert lo <= row["forward_s"] <= hi and row["forward_stats_s"]["n"] == 2
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
    from conftest import cli_runner
    from diffsim.cli import _bench, app

    monkeypatch.setattr(_bench, "_candidate_roots", lambda: [str(tmp_path)])
    result = cli_runner().invoke(app, ["bench", "--quick"])
    assert result.exit_code == 2
    assert "benchmarks/" in result.output
