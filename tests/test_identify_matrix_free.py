"""``diffsim.identify``'s matrix-free path (``solver="matrix_free"``, chosen by ``"auto"``
above ``MATRIX_FREE_ABOVE`` unknowns): Levenberg–Marquardt with J·v by ``jvp``, Jᵀ·w by
``vjp`` and the inner solve by Lineax's CG; the doctor's check and the smoothed Jacobian
along random directions; intervals for named parameters by CG solves.

The fits are checked against the dense path on a small problem (the same estimate and
intervals), against the truth on a 200-parameter lattice, and by the rollouts they spend at
p = 20 and p = 200 (a count the result reports, not a time).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("optimistix")
pytest.importorskip("lineax")

from diffsim import Recording, identify
from diffsim.identification import (
    DENSE_JACOBIAN_BYTES,
    FULL_COVARIANCE_MAX,
    MATRIX_FREE_ABOVE,
    SOLVERS,
    Parameter,
    simulate_recording,
)
from diffsim.systems import nonlinear_spring

H = 0.01


def lattice_step(s, th):
    """A row of unit masses, each on its own spring to the ground (stiffness ``g[i]``, the
    fitted parameters) and tied to its neighbours by springs of known stiffness ``kappa``
    (free ends); semi-implicit Euler. The data see each g[i] through its own mass, so the
    conditioning of JᵀJ does not grow with the row's length."""
    x, v = s
    lap = jnp.concatenate([x[1:], x[-1:]]) + jnp.concatenate([x[:1], x[:-1]]) - 2 * x
    v = v + H * (-th["g"] * x + th["kappa"] * lap)
    return (x + H * v, v)


def lattice(n: int, T: int = 60, seed: int = 0):
    """θ (g[i] uniform in [20, 40] N/m), a noise-free recording of T steps from random
    displacements, and a start with every g[i] off by up to ±20 %."""
    rng = np.random.default_rng(seed)
    theta = {"g": jnp.asarray(rng.uniform(20.0, 40.0, n)), "kappa": jnp.array(5.0)}
    x0 = 0.1 * rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)
    rec = simulate_recording(lattice_step, (jnp.asarray(x0), jnp.zeros(n)), theta, T)
    start = dict(theta, g=theta["g"] * jnp.asarray(rng.uniform(0.8, 1.2, n)))
    params = [Parameter("g", i, lower=0.0) for i in range(n)]
    return theta, rec, start, params


def noisy_spring():
    """The damped spring (k = 4, c = 0.3) recorded over 400 steps with Gaussian noise of
    σ = 0.01 on positions and velocities (seed 0), and a start 40 % off."""
    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=0.0, c=0.3, x0=1.0)
    rec = simulate_recording(sys.step, sys.s0, sys.theta, 400)
    rng = np.random.default_rng(0)
    signals = {k: np.asarray(v) + 0.01 * rng.standard_normal(np.shape(v)) for k, v in
               rec.signals.items()}  # fmt: skip
    rec = Recording(rec.s0, signals)
    start = dict(sys.theta, k=jnp.array(2.5), c=jnp.array(0.8))
    return sys, rec, start


def test_matrix_free_fit_matches_the_dense_one_on_a_small_problem():
    """Noisy data (the minimum has a residual): both paths reach the same estimate (1e-8
    relative) and the same standard errors and covariance (1e-6 relative: the matrix-free
    ones are CG solves of JᵀJ to 1e-10, the dense ones an SVD)."""
    sys, rec, start = noisy_spring()
    bounds = {"k": (0, 20), "c": (0, 5)}
    fits = [
        identify(sys.step, rec, start, "k, c", bounds=bounds, trust="off", rtol=1e-12,
                 atol=1e-12, solver=solver)
        for solver in ("dense", "matrix_free")
    ]  # fmt: skip
    dense, free = fits
    assert dense.converged and free.converged, (dense.message, free.message)
    assert dense.jacobian_mode == "forward-mode"
    assert free.jacobian_mode.startswith("matrix-free")
    for n in ("k", "c"):
        assert abs(free.theta[n] - dense.theta[n]) <= 1e-8 * abs(dense.theta[n])
        assert free.std_error[n] == pytest.approx(dense.std_error[n], rel=1e-6)
        assert free.interval_low[n] == pytest.approx(dense.interval_low[n], rel=1e-6)
    assert free.covariance is not None and dense.covariance is not None  # p <= FULL_COVARIANCE_MAX
    np.testing.assert_allclose(free.covariance, dense.covariance, rtol=1e-6)
    assert dense.std_error["k"] > 1e-4  # the noise is seen: the comparison can fail
    assert free.singular_values == () and free.unidentifiable == ()


@pytest.mark.slow  # ~11 s: the default suite keeps the dense-vs-matrix-free comparison
def test_two_hundred_parameters_fitted_matrix_free_from_a_recording():
    """p = 200 (> MATRIX_FREE_ABOVE): ``solver="auto"`` runs matrix-free and reaches the
    truth from ±20 % off (noise-free: 1e-8 relative); the doctor's check along 16 random
    directions trusts the exact Jacobian; intervals only for the named parameters (the
    covariance is not formed beyond FULL_COVARIANCE_MAX)."""
    theta, rec, start, params = lattice(200)
    assert len(params) > MATRIX_FREE_ABOVE and len(params) > FULL_COVARIANCE_MAX
    res = identify(lattice_step, rec, start, params, intervals_for=("g[0]", "g[199]"))
    assert res.jacobian_mode.startswith("matrix-free") and res.converged, res.message
    g = np.asarray(res.theta_full["g"])
    assert np.max(np.abs(g - np.asarray(theta["g"])) / np.asarray(theta["g"])) < 1e-8
    assert res.jacobian_trusted is True
    assert np.isfinite(res.std_error["g[0]"]) and np.isfinite(res.std_error["g[199]"])
    assert np.isnan(res.std_error["g[1]"]) and res.covariance is None
    assert "intervals_for" in res.message


def _rollouts(n: int) -> tuple[int, int]:
    _, rec, start, params = lattice(n)
    res = identify(lattice_step, rec, start, params, solver="matrix_free",
                   intervals_for=("g[0]",))  # fmt: skip
    assert res.converged and res.jacobian_trusted, res.message
    return res.rollout_equivalents, res.iterations


@pytest.mark.slow
def test_the_rollouts_a_fit_spends_do_not_grow_with_p():
    """The whole fit — solves, the doctor's checks at the start and at θ̂, one interval —
    in rollout equivalents (the result's count: 4 per solver step, 2 per product with JᵀJ,
    10·16 + 2 per check): measured 500 at p = 20 and 606 at p = 200 (718 at p = 2000),
    within 1.5× while p grows 10×; the dense path's Jacobians alone would cost
    (steps + 2)·(1 + p) = 1608 at p = 200 (and its checks 2·10·p = 4000 more)."""
    r20, _ = _rollouts(20)
    r200, k200 = _rollouts(200)
    assert r200 <= 1.5 * r20, (r20, r200)
    assert r200 < (k200 + 2) * (1 + 200)


def _half_slope_spring():
    """A step whose derivative lacks half a term (value k·x, slope ½x), its recording at
    k = 4 and the start k = 3."""

    def step(s, th):
        k = 0.5 * th["k"] + 0.5 * jax.lax.stop_gradient(th["k"])  # value k, slope ½
        x, v = s
        v = v - H * (k * x + 0.3 * v)
        return (x + H * v, v)

    s0 = (jnp.array(1.0), jnp.array(0.0))
    return step, simulate_recording(step, s0, {"k": jnp.array(4.0)}, 300), {"k": jnp.array(3.0)}


def test_the_directional_check_finds_a_wrong_jacobian():
    """The matrix-free check (16 directions against central differences) does not trust
    the half-slope Jacobian at θ̂, like the dense check."""
    step, rec, start = _half_slope_spring()
    rep = identify(step, rec, start, "k", bounds={"k": (0, 20)}, solver="matrix_free",
                   trust="report")  # fmt: skip
    assert rep.jacobian_trusted is False and "does not trust" in rep.message


@pytest.mark.slow
def test_a_wrong_jacobian_is_replaced_by_the_smoothed_one_along_directions():
    """``trust="act"``: the check fails at the start, so the fit switches to the smoothed
    Jacobian along 4 random directions and reaches the truth (noise-free; 1e-5 relative)."""
    step, rec, start = _half_slope_spring()
    act = identify(step, rec, start, "k", bounds={"k": (0, 20)}, solver="matrix_free",
                   num_directions=4)  # fmt: skip
    assert act.jacobian == "smoothed" and "4 fixed random directions" in act.actions[0]
    assert act.converged and abs(act.theta["k"] - 4.0) < 4e-5, act


def test_the_smoothed_jacobian_along_directions_is_its_closed_form_on_a_linear_response():
    """Residuals linear in θ (a constant acceleration a and a drag-free offset b): the
    central differences are exact, so J_s = J·diag(σ)·(EᵀE/M)·diag(1/σ) (E the draws): the
    matrix-free path's product J_s·v against that closed form (1e-9)."""
    import diffsim
    from diffsim.identification._data import _stack, _Subset
    from diffsim.identification._problem import _jacobian, _Problem, _smoothed_along

    def step(s, th):
        x, v = s
        return (x + H * v + H * th["b"], v + H * th["a"])

    theta = {"a": jnp.array(-2.0), "b": jnp.array(0.5)}
    rec = simulate_recording(step, (jnp.array(0.5), jnp.array(1.0)), theta, 50)
    data, T = _stack([rec], jnp.float64)
    params = (Parameter("a", (), -2.0), Parameter("b", (), 0.5))
    problem = _Problem(step, _Subset(diffsim.identification.default_observe, ("qpos", "qvel")), params, T,
                       theta, data)  # fmt: skip
    x = jnp.array([-1.5, 0.7])
    _, J = _jacobian(problem, x)
    smooth = _smoothed_along(problem, x, jnp.float64, 3)
    E, sig = smooth.smooth_directions, smooth.smooth_sigma
    v = jnp.array([0.3, -1.1])
    _, Jv = jax.jvp(smooth.matrix_free_residuals, (x,), (v,))
    expected = J @ (sig * ((E.T @ E / 3) @ (v / sig)))
    np.testing.assert_allclose(Jv, expected, rtol=1e-9, atol=1e-12)
    assert float(jnp.max(jnp.abs(Jv - J @ v))) > 1e-3  # rank 3 of 2: not J itself


def test_bad_input_names_the_argument():
    sys, rec, start = noisy_spring()
    b = {"k": (0, 20), "c": (0, 5)}
    with pytest.raises(ValueError, match="solver must be one of 'auto', 'dense', 'matrix_free'"):
        identify(sys.step, rec, start, "k, c", bounds=b, solver="qr")
    with pytest.raises(ValueError, match=r"intervals_for names 'm'.*fitted: k, c"):
        identify(sys.step, rec, start, "k, c", bounds=b, intervals_for=("k", "m"))
    with pytest.raises(TypeError, match="intervals_for must be a sequence"):
        identify(sys.step, rec, start, "k, c", bounds=b, intervals_for=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_directions must be an integer >= 1, got 0"):
        identify(sys.step, rec, start, "k, c", bounds=b, num_directions=0)
    assert SOLVERS == ("auto", "dense", "matrix_free")


def test_a_dense_jacobian_beyond_memory_is_refused_with_its_estimate():
    """2000 parameters over 4·10⁵ residuals: 6.4 GB > DENSE_JACOBIAN_BYTES; ``solver="dense"``
    is refused before any rollout is compiled, in one line with the estimate."""
    n, T = 2000, 100
    theta = {"g": jnp.full(n, 30.0), "kappa": jnp.array(5.0)}
    s0 = (jnp.full(n, 0.1), jnp.zeros(n))
    signals = {"qpos": np.zeros((T + 1, n)), "qvel": np.zeros((T + 1, n))}
    rec = Recording(s0, signals)
    params = [Parameter("g", i, lower=0.0) for i in range(n)]
    need = 2 * T * n * n * 8
    assert need > DENSE_JACOBIAN_BYTES
    with pytest.raises(ValueError, match=rf"solver='dense'.*= {need / 2**30:.3g} GiB"):
        identify(lattice_step, rec, theta, params, solver="dense")
