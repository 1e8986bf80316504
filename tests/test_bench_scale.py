"""``benchmarks.scale``: the family's parametrisation and gradient against central
differences and the chain rule, and the sweep's rows on a tiny instance."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import scale  # noqa: E402
from benchmarks import task as scale_task  # noqa: E402

jax.config.update("jax_enable_x64", True)

N, T = 4, 120  # 4 balls for 0.5 s: unpushed, two of them reach the floor (see below)


def test_gradient_matches_central_differences_and_the_chain_rule_of_the_pieces():
    """In float64: the reverse-mode gradient of the p = 8 loss against central differences
    (δ = 1e-6, rtol 1e-6), and against the p = N·T gradient summed over each θ_k's
    ball-steps (the parametrisation is a ball-major repeat), to 1e-12."""
    import diffsim

    coarse = scale.make_loss(8, N, T, jnp.float64)
    fine = scale.make_loss(N * T, N, T, jnp.float64)
    # the contact is in the problem: in free fall (θ = 0) two balls would pass the floor
    _, y0, _, vy0 = scale_task.initial_state(N)
    t = np.arange(T + 1) * scale_task.H
    lowest = (y0[:, None] + vy0[:, None] * t - scale_task.G * t**2 / 2).min(axis=1)
    assert np.sum(lowest < 0) == 2
    for theta in (jnp.zeros(8), jnp.asarray(np.random.default_rng(0).normal(0.0, 1.0, 8))):
        g = diffsim.value_and_grad(coarse, theta, mode="reverse").grad
        eye = jnp.eye(8) * 1e-6
        fd = jnp.array([(coarse(theta + e) - coarse(theta - e)) / 2e-6 for e in eye])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-10)
        fine_theta = jnp.repeat(theta, N * T // 8)
        gf = diffsim.value_and_grad(fine, fine_theta, mode="reverse").grad
        np.testing.assert_allclose(g, gf.reshape(8, -1).sum(axis=1), rtol=1e-12, atol=1e-15)
        assert float(coarse(theta)) == pytest.approx(float(fine(fine_theta)), rel=1e-14)


def test_bad_sizes_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="p must divide N·T = 480, got 7"):
        scale.make_loss(7, N, T)
    with pytest.raises(SystemExit):
        scale.main(["--sizes", "10,7"])
    with pytest.raises(SystemExit):
        scale.main(["--es-budget", "0"])


def test_extrapolation_is_linear_in_p_and_marked():
    rows = [{"p": 10, "x": 2.0}, {"p": 100, "x": 5.0}, {"p": 1000}, {"p": 10_000}]
    scale._extrapolated(rows, "x")
    assert [r["x"] for r in rows] == [2.0, 5.0, 50.0, 500.0]
    assert [bool(r.get("x_est")) for r in rows] == [False, False, True, True]


@pytest.mark.slow  # the doctor, optimize's default and an ES compiled on a tiny instance: ~1 min
def test_rows_on_a_tiny_instance():
    """The cost row runs every method below ``max_tangents`` and none above it; the target
    row's target is 90 % of the best decrease, each method's count is the first evaluation
    count at which its curve reached it, and FD + L-BFGS is L-BFGS's with 2p per gradient."""
    loss = scale.make_loss(24, N, T)
    row = scale.gradient_costs(24, 1, 24, loss=loss)
    assert {"reverse", "forward_mode", "central_fd", "doctor"} <= set(row)
    assert row["doctor_verdict"] in ("trusted", "untrusted", "inconclusive")
    assert row["doctor_evaluations"] > 0 and row["reverse_temp_bytes"] > 0
    assert "forward_mode" not in scale.gradient_costs(24, 1, 23, loss=loss)
    t = scale.to_target(24, 200, steps=10, loss=loss)
    assert t["target"] == pytest.approx(t["loss0"] - 0.9 * (t["loss0"] - t["best"]))
    for name, (spent, losses) in t["curves"].items():
        spent, losses = np.asarray(spent), np.asarray(losses)
        assert np.all(np.diff(spent) >= 0), name
        got = t["reached"][name]
        hit = np.nonzero(losses <= t["target"])[0]
        assert got == (int(spent[hit[0]]) if hit.size else None), name
    assert t["reached"]["exact + L-BFGS"] is not None  # the gradient is trusted here
    assert t["best"] < t["loss0"]
