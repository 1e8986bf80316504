"""``python -m benchmarks.gpu`` on the CPU: a smoke test of the accelerator benchmark.

It runs the benchmark in a subprocess with two forced host devices (so the ``sharded`` row
runs too) on tiny sizes, and checks that every number it reports is finite and positive and
that the gradients it reports for a few balls equal ``jax.grad`` of the same one-ball loss
(the task's composed public step), computed here independently from the task's initial
states — for the reverse-mode, forward-mode and sharded rows alike.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu  # noqa: E402
from benchmarks.task import initial_state  # noqa: E402

SIZES, STEPS = (64, 256), 60


pytestmark = pytest.mark.xdist_group("bench_gpu")  # one worker runs the benchmark


@pytest.fixture(scope="module")
def report() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.gpu",
        "--sizes",
        ",".join(map(str, SIZES)),
        "--steps",
        str(STEPS),
        "--rounds",
        "2",
        "--copy-mib",
        "8",
        "--json",
    ]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)


def test_numbers_are_finite(report):
    assert report["platform"] == "cpu" and report["local_devices"] == 2
    bw = report["bandwidth"]
    assert bw["reference_source"] == "measured" and bw["datasheet_Bps"] is None
    assert 1e8 < bw["measured_Bps"] < 1e13
    model = report["loop_model_bytes_per_ball_step"]
    assert 16 <= model["forward"] < model["gradient"] < 1e4  # at least the 4-float carry
    assert [s["n"] for s in report["sizes"]] == list(SIZES)
    for size in report["sizes"]:
        rows = size["rows"]
        assert set(rows) == {"vmap", "fwd-mode", "sharded"}
        for name, res in rows.items():
            modes = ("gradient",) if name == "fwd-mode" else ("forward", "gradient")
            for mode in modes:
                for key in (
                    "ball_steps_per_s",
                    "floor_fraction",
                    "effective_Bps",
                    "model_fraction",
                ):
                    v = res[f"{mode}_{key}"]
                    assert math.isfinite(v) and v > 0, (size["n"], name, mode, key, v)
                t = res[f"{mode}_time_s"]
                assert t["ci"][0] <= t["median"] <= t["ci"][1]
            assert res["grad_finite"]
        # the forward values of the sharded and one-device programs: a pure map, then a sum
        assert rows["sharded"]["forward_value"] == pytest.approx(
            rows["vmap"]["forward_value"], rel=1e-6
        )


def test_reported_gradients_equal_jax_grad(report):
    import jax
    import jax.numpy as jnp
    from benchmarks._jax_impls import ball_loss, ball_step

    one = ball_loss(ball_step(), STEPS)
    grad = jax.jit(jax.grad(one))
    for size in report["sizes"]:
        x0, y0, vx0, vy0 = initial_state(size["n"])
        idx = size["check_balls"]
        assert idx[0] == 0 and idx[-1] == size["n"] - 1
        want = np.array(
            [float(grad(*(jnp.asarray(a[i]) for a in (vy0, x0, y0, vx0)))) for i in idx]
        )
        assert np.all(np.abs(want) > 1e-3)  # not trivially zero
        for name, res in size["rows"].items():
            got = np.array(res["check_grad"])
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_datasheet_lookup():
    assert gpu.datasheet_gbps("NVIDIA H200") == 4800.0
    assert gpu.datasheet_gbps("NVIDIA GH200 480GB") == 4000.0
    assert gpu.datasheet_gbps("NVIDIA H100 80GB HBM3") == 3350.0
    assert gpu.datasheet_gbps("NVIDIA A100-SXM4-80GB") == 2039.0
    assert gpu.datasheet_gbps("NVIDIA A100-SXM4-40GB") == 1555.0
    assert gpu.datasheet_gbps("NVIDIA L40S") == 864.0
    assert gpu.datasheet_gbps("NVIDIA L4") == 300.0
    assert gpu.datasheet_gbps("cpu") is None
