"""``benchmarks.difftaichi``: its pure helpers, and its taichi ports of DiffTaichi's examples
against diffsim at DiffTaichi's start (the ports need taichi, the ``bench`` extra).

The ports run in their own processes (taichi's fields are global to a process), in float64
here: what is compared is the model, not float32's rounding (the benchmark's table gives
the float32 start losses of both sides).
"""

import importlib.util
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import difftaichi as bench  # noqa: E402

from diffsim.systems import billiards  # noqa: E402
from diffsim.systems import mass_spring_robot as msr  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _taichi_available() -> bool:
    """Installed; with DIFFSIM_REQUIRE_PEERS=1 (scripts/test-slow) a missing taichi fails."""
    found = importlib.util.find_spec("taichi") is not None
    if not found and os.environ.get("DIFFSIM_REQUIRE_PEERS") == "1":
        raise RuntimeError("taichi is required (DIFFSIM_REQUIRE_PEERS=1) but missing")
    return found


# -- the pure helpers ---------------------------------------------------------------------


def test_summaries_and_first_reaching():
    assert bench.summarise([3.0, 1.0, 2.0, 10.0]) == (2.5, 1.0, 10.0)
    assert bench.fmt_range([0.5, -0.25, 0.125]) == "0.125 [-0.25, 0.5]"
    assert bench.first_reaching([5.0, 4.0, 4.5, 3.0, 2.0], 3.5) == 3
    assert bench.first_reaching([5.0, 4.0], 4.0) == 1  # at the target counts
    assert bench.first_reaching([5.0, 4.0], 1.0) is None


def test_last_json_line_skips_taichis_banner():
    out = '[Taichi] version 1.7.4\n[Taichi] Starting on arch=x64\n{"losses": [1.5]}\n'
    assert bench.last_json_line(out) == {"losses": [1.5]}
    with pytest.raises(ValueError, match="no JSON result"):
        bench.last_json_line("[Taichi] crashed\n")


def _run(losses, seconds=None, **extra):
    return {"losses": losses, "seconds": seconds or [9.0, 1.0, 3.0], **extra}


def test_table_reports_last_losses_timings_and_the_default_method():
    results = {
        "robot A/toi": {
            "taichi": [_run([-0.1, -0.2, -0.3]), _run([-0.1, -0.4, -0.5])],
            "diffsim": [
                _run(
                    [-0.1, -0.3, -0.6],
                    wall=2.0,
                    s_per_it=0.5,
                    decide={"losses": [-0.1, -0.35, -0.7], "evaluations": [3, 7, 9]},
                ),
                _run(
                    [-0.1, -0.2, -0.4],
                    wall=4.0,
                    s_per_it=0.5,
                    decide={"losses": [-0.1, -0.2, -0.3], "evaluations": [3, 7, 9]},
                ),
            ],
        },
        "meta": {"jax": "x", "taichi": "y"},
    }
    text = bench.table(results)
    row = next(line for line in text.splitlines() if line.startswith("| robot A "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["robot A (2 seeds)", "with", "3", "-0.4 [-0.5, -0.3]", "-0.5 [-0.6, -0.4]"]
    # DiffTaichi's s/it: each run's median after the first iteration (2.0), median of runs
    assert cells[6:9] == ["2", "0.5", "4×"]
    assert cells[9] == "13 / 3"  # whole runs: 9 + 1 + 3, median of 2.0 and 4.0
    # seed 0: DiffTaichi ends at -0.3, reached by the default method at iteration 1 after
    # 3 evaluations; seed 1: -0.5 never reached
    assert "1 iterations, 3 evaluations (1/2 reached); DiffTaichi: 2" in text


def test_robot_file_carries_the_robot_and_weights(tmp_path):
    robot = msr.Robot.builtin("A")
    theta = msr.controller_init(robot, jax.random.PRNGKey(3))
    data = np.load(bench.robot_file(robot, theta, tmp_path / "a.npz"))
    np.testing.assert_array_equal(data["points"], np.asarray(robot.points))
    np.testing.assert_array_equal(data["springs"], np.asarray(robot.springs()))
    for k, v in theta.items():
        np.testing.assert_array_equal(data[k], np.asarray(v))


# -- the taichi ports against diffsim -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.peers
def test_taichi_billiards_port_starts_at_diffsims_loss():
    """Without TOI, DiffTaichi's step is diffsim's ``billiards_step(toi=False)``: the same
    loss and gradient at DiffTaichi's start (float64: 1e-9 relative, measured 3e-13). With
    TOI the schemes differ — DiffTaichi's impact time is linearised, diffsim's exact — and
    the losses agree to 1 % (0.045416 against 0.045656, as tests/test_billiards.py's numpy
    port of DiffTaichi's finds)."""
    if not _taichi_available():
        pytest.skip("taichi not installed (pip install -e '.[bench]')")
    theta0 = {k: jnp.asarray(v, jnp.float64) for k, v in billiards.THETA0.items()}
    for toi in (False, True):
        port = bench.taichi_billiards(toi, iterations=1, f64=True)
        loss, grad = jax.value_and_grad(billiards.billiards_loss)(theta0, toi)
        if toi:
            assert port["losses"][0] == pytest.approx(0.045416, rel=1e-4)
            assert port["losses"][0] == pytest.approx(float(loss), rel=1e-2)
        else:
            assert port["losses"][0] == pytest.approx(float(loss), rel=1e-9)
            for k in ("x", "v"):
                np.testing.assert_allclose(port["grad0"][k], grad[k], rtol=1e-7, atol=1e-10)


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.parametrize("toi", [False, True])
def test_taichi_robot_port_starts_at_diffsims_loss(toi):
    """Robot A from the same weights: the same loss after 681 steps (float64). Rounding
    differs (atomic adds in any order, the centre's sum); with TOI a point resting on the
    ground can cross DiffTaichi's 1e-4 m/s speed threshold on one side and not the other,
    which moves it by at most h·1e-4 = 4e-7 m, hence atol 2e-6 (measured 3e-7 with TOI,
    3e-9 without)."""
    if not _taichi_available():
        pytest.skip("taichi not installed (pip install -e '.[bench]')")
    robot = msr.Robot.builtin("A")
    loss, theta0 = msr.problem(robot, jax.random.PRNGKey(0), toi=toi)
    port = bench.taichi_robot(robot, theta0, toi, iterations=1, f64=True)
    assert port["losses"][0] == pytest.approx(float(loss(theta0)), abs=2e-6)


def test_the_guides_table_is_the_records():
    """docs/guides/difftaichi.md shows the table docs/records/difftaichi.txt recorded."""
    record = (ROOT / "docs" / "records" / "difftaichi.txt").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guides" / "difftaichi.md").read_text(encoding="utf-8")
    rows = [line for line in record.splitlines() if line.startswith("| ")]
    assert len(rows) >= 4  # the header, and billiards with and without TOI at least
    for row in rows:
        assert row in guide, row
