"""The article's demo, time-stepped: agreement with the closed form and the pathologies."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffsim import rollout
from diffsim.contact import StopDead, WithContact
from diffsim.integrators import SemiImplicitEuler
from diffsim.systems import projectile_wall as pw

V_SHORT, V_CLEAR = pw.plateau_bounds()
GRAD = jax.jit(jax.vmap(jax.grad(pw.loss)))


def _cliff(h=pw.DEFAULT_H):
    """The time-stepped cliff (first v0 that clears the wall), by bisection."""
    lo, hi = 9.0, 9.6
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if bool(pw.clears_wall(mid, h=h)) else (mid, hi)
    return 0.5 * (lo + hi)


def test_canonical_numbers():
    assert V_SHORT == pytest.approx(7.67, abs=5e-3)
    assert V_CLEAR == pytest.approx(9.396, abs=1e-3)
    assert pw.optimal_v0() == pytest.approx(math.sqrt(98.1))


def test_simulated_optimum_lands_on_the_target_and_tends_to_the_closed_form():
    # the time-stepped ball lands on x = 10 (to the bisection's float precision, 1e-4 m in
    # float32), the loss there is ~0, and the root moves to √(10 g) at rate O(h)
    v = pw.simulated_optimal_v0()
    assert float(pw.landing_x(v)) == pytest.approx(10.0, abs=1e-4)
    assert v == pytest.approx(9.919, abs=1e-3)  # the README's optimize run converges here
    assert not bool(pw.landing_x(v - 1e-3) >= 10.0) and bool(pw.landing_x(v + 1e-3) > 10.0)
    gaps = [pw.simulated_optimal_v0(h=h) - pw.optimal_v0() for h in (1 / 240, 1 / 2400)]
    assert abs(gaps[1]) < abs(gaps[0]) / 5  # O(h): ten times smaller h, ~ten times closer
    assert abs(gaps[1]) < 2e-3


@pytest.mark.parametrize("target", [5.0, 30.0, -1.0, float("nan")])
def test_simulated_optimum_refuses_unreachable_targets(target):
    with pytest.raises(ValueError, match="target"):
        pw.simulated_optimal_v0(target=target)


def test_article_opening_state():
    assert float(pw.landing_x(8.0)) == 6.0
    assert float(pw.loss(8.0)) == 16.0
    assert not bool(pw.clears_wall(8.0))
    assert float(jax.grad(pw.loss)(8.0)) == 0.0


def _hand_written_landing_x(v0, h=pw.DEFAULT_H):
    """An independent reference: semi-implicit Euler written out over arrays of v0, the
    landing and the wall crossing located on the scheme's own partial step inside their
    step (a partial step of length τ from (y, v_y) ends at :math:`y + τ(v_y - gτ)`: the
    landing τ is that quadratic's root, in closed form), then the wall's rule (blocked:
    x = 6). The hand-written simulator this module used before it was built from the
    library, with the impact location the library now uses (it interpolated linearly)."""
    v0 = np.asarray(v0, float)
    x, y = np.zeros_like(v0), np.zeros_like(v0)
    vx, vy = v0 * math.cos(pw.ANGLE), v0 * math.sin(pw.ANGLE)
    landed, crossed = np.zeros(v0.shape, bool), np.zeros(v0.shape, bool)
    R, yw = np.zeros_like(v0), np.zeros_like(v0)
    for _ in range(pw.num_steps_for(h)):
        vy0, vy = vy, vy - pw.G * h
        x1, y1 = x + h * vx, y + h * vy
        land = ~landed & (y1 < 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            # G τ² - v_y τ - y = 0, the root in [0, h] in its cancellation-free form
            tau = 2 * y / (np.sqrt(np.maximum(vy0**2 + 4 * pw.G * y, 0.0)) - vy0)
            R = np.where(land, x + np.clip(tau, 0, h) * vx, R)
            cross = ~landed & ~crossed & (x <= pw.WALL_X) & (x1 > pw.WALL_X)
            tau_w = np.clip((pw.WALL_X - x) / vx, 0, h)
        yw = np.where(cross, y + tau_w * (vy0 - pw.G * tau_w), yw)
        landed, crossed, x, y = landed | land, crossed | cross, x1, y1
    clear = (R > pw.WALL_X) & (yw > pw.WALL_HEIGHT)
    return np.where(clear, R, np.minimum(R, pw.WALL_X))


def test_built_from_the_library():
    step = pw.wall_step()
    assert isinstance(step, WithContact) and isinstance(step.integrator, SemiImplicitEuler)
    wall, ground = step.contacts
    assert isinstance(wall, StopDead) and isinstance(ground, StopDead)
    assert wall.toi and ground.toi and wall.plane.thin and not ground.plane.thin
    # the public functions are rollouts of that step, as a user would compose them
    n = pw.num_steps_for(pw.DEFAULT_H)
    for v in (5.0, 8.0, 11.0):
        xT, vT = rollout(step, pw.launch_state(v), {"g": pw.G}, n, trajectory=False)
        assert float(xT[0]) == pytest.approx(float(pw.landing_x(v)), rel=1e-13, abs=1e-13)
        np.testing.assert_array_equal(vT, 0.0)  # at rest: landed or stopped on the wall


def test_agrees_with_an_independent_hand_written_simulator():
    v0 = np.linspace(4.0, 14.0, 201)
    np.testing.assert_allclose(
        np.asarray(pw.landing_x(jnp.asarray(v0))), _hand_written_landing_x(v0), rtol=0, atol=1e-9
    )


def test_landing_x_within_one_percent_of_closed_form_off_the_cliff():
    v0 = jnp.linspace(4.0, 14.0, 1001)
    sim = np.asarray(pw.landing_x(v0))
    exact = np.asarray(pw.landing_x_closed_form(v0))
    off_cliff = np.abs(np.asarray(v0) - V_CLEAR) > 0.05
    rel = np.abs(sim - exact) / exact
    assert rel[off_cliff].max() < 0.01
    # the cliff itself moves by less than 0.05 m/s
    assert abs(_cliff() - V_CLEAR) < 0.05
    # and the time step is what limits it: halving h halves the worst error
    sim2 = np.asarray(pw.landing_x(v0, h=pw.DEFAULT_H / 2))
    rel2 = np.abs(sim2 - exact) / exact
    assert rel2[off_cliff].max() < 0.6 * rel[off_cliff].max()


def test_clears_wall_agrees_with_closed_form_off_the_cliff():
    v0 = jnp.linspace(4.0, 14.0, 501)
    off = np.abs(np.asarray(v0) - V_CLEAR) > 0.05
    np.testing.assert_array_equal(
        np.asarray(pw.clears_wall(v0))[off], np.asarray(pw.clears_wall_closed_form(v0))[off]
    )


def test_gradient_exactly_zero_on_plateau():
    v0 = jnp.linspace(7.72, 9.38, 84)
    g = np.asarray(GRAD(v0))
    assert np.all(g == 0.0)
    assert np.all(np.asarray(pw.landing_x(v0)) == pw.WALL_X)


def test_cliff_jump_finite_gradients_and_fd_blowup():
    vc = _cliff()
    left, right = vc - 1e-6, vc + 1e-6
    jump = float(pw.loss(left) - pw.loss(right))
    assert 14.0 < jump < 16.0  # from 16 to about 1
    g = np.asarray(GRAD(jnp.array([left, right])))
    assert np.all(np.isfinite(g))
    assert g[0] == 0.0 and g[1] < 0
    # central differences straddling the cliff grow like 1/δ
    deltas = np.array([1e-2, 3e-3, 1e-3, 3e-4, 1e-4])
    fd = np.array([(pw.loss(vc + d) - pw.loss(vc - d)) / (2 * d) for d in deltas])
    slope = np.polyfit(np.log(deltas), np.log(np.abs(fd)), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.05)
    assert abs(fd[-1]) > 1e4


@pytest.mark.parametrize("v0", [4.5, 6.0, 7.0, 10.0, 11.5, 13.0, 14.0])
def test_basin_gradient_matches_fd_and_closed_form(v0):
    g = float(jax.grad(pw.loss)(v0))
    d = 1e-5
    fd = float((pw.loss(v0 + d) - pw.loss(v0 - d)) / (2 * d))
    assert g == pytest.approx(fd, rel=1e-5, abs=1e-7)
    x = float(pw.landing_x(v0))
    # the derivative of the stepped range is the closed form's 2 v0 / g (to O(h))
    assert g == pytest.approx(2 * (x - 10) * 2 * v0 / pw.G, rel=5e-3)
    R = v0**2 / pw.G
    if abs(R - 10) > 2:  # away from the optimum the O(h) shift of R is < 2 % of R - 10
        assert g == pytest.approx(2 * (R - 10) * 2 * v0 / pw.G, rel=0.02)


def test_gradient_finite_at_switch_points():
    # exactly at the landing-short/plateau kink and the cliff, and at v0 = 0
    pts = jnp.array([0.0, V_SHORT, V_CLEAR, _cliff(), 14.0])
    g = np.asarray(GRAD(pts))
    assert np.all(np.isfinite(g))
    for tau in (0.01, 0.3):
        gs = jax.vmap(jax.grad(lambda v, t=tau: pw.loss(v, smoothing=t)))(pts)
        assert np.all(np.isfinite(np.asarray(gs)))


def test_smoothed_loss_tends_to_hard_and_points_to_cliff_on_plateau():
    v0 = jnp.linspace(4.0, 14.0, 401)
    hard = np.asarray(pw.loss(v0))
    off = np.abs(np.asarray(v0) - _cliff()) > 0.3
    errs = [
        np.abs(np.asarray(pw.loss(v0, smoothing=t)) - hard)[off].max()
        for t in (0.3, 0.1, 0.03, 0.01)
    ]
    assert all(b < a for a, b in itertools.pairwise(errs))
    assert errs[-1] < 1e-6
    # on the plateau the smoothed gradient is negative: descent increases v0, toward the cliff
    plateau = jnp.linspace(7.75, 9.35, 33)
    for tau in (0.1, 0.5, 1.0):
        g = np.asarray(jax.vmap(jax.grad(lambda v, t=tau: pw.smoothed_loss(v, t)))(plateau))
        assert np.all(g < 0), tau


def test_smoothed_loss_is_smooth():
    # bounded second differences across the cliff (the hard loss has a jump of 15 there)
    v0 = np.linspace(9.0, 10.0, 201)
    dv = v0[1] - v0[0]
    for tau in (0.1, 0.5):
        f = np.asarray(pw.loss(jnp.asarray(v0), smoothing=tau))
        d2 = np.abs(np.diff(f, 2)) / dv**2
        assert d2.max() < 30 / tau**2


def test_smoothed_model_is_the_hard_one_short_of_the_wall_and_takes_a_traced_tau():
    short = jnp.linspace(4.0, V_SHORT - 0.05, 20)  # these balls never reach x = 6
    for tau in (0.1, 1.0):
        np.testing.assert_array_equal(pw.loss(short, smoothing=tau), pw.loss(short))
    # τ may be traced (annealed inside a jitted optimisation)
    value, (dv, dtau) = jax.jit(jax.value_and_grad(pw.smoothed_loss, argnums=(0, 1)))(8.5, 0.3)
    assert float(value) == pytest.approx(float(pw.smoothed_loss(8.5, 0.3)), rel=1e-12)
    assert float(dv) < 0 and np.isfinite(float(dtau))


def test_a_ball_that_clears_the_wall_is_never_stopped_behind_it():
    x, y = pw.trajectory(jnp.asarray(11.0))
    x, y = np.asarray(x), np.asarray(y)
    landed = int(np.argmax(y[1:] == 0.0)) + 1
    assert np.all(np.diff(x[:landed]) > 0)  # flies on past x = 6, descending, to the ground
    assert x[landed] > 12 and np.all(x[landed:] == x[landed]) and np.all(y[landed:] == 0.0)


def test_trajectory_stops_at_the_wall_and_lands():
    x, y = pw.trajectory(jnp.array([8.0, 11.0]), num_points=200)
    assert x.shape == (2, 200)
    assert float(x[0, -1]) == pw.WALL_X and 0 < float(y[0, -1]) < pw.WALL_HEIGHT
    assert float(x[1, -1]) == pytest.approx(float(pw.landing_x(11.0)), abs=1e-12)
    assert float(y[1, -1]) == 0.0
    assert np.all(np.asarray(y) >= 0)


def test_jit_vmap_grad_friendly_and_grad_of_vmap():
    v0 = jnp.array([5.0, 8.0, 11.0])
    a = jax.grad(lambda v: jnp.sum(pw.loss(v)))(v0)
    b = jax.vmap(jax.grad(pw.loss))(v0)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    jitted = jax.jit(pw.loss)
    np.testing.assert_allclose(jitted(v0), pw.loss(v0), rtol=1e-12)


def test_the_loss_is_the_same_function_traced_or_not(monkeypatch):
    """The horizon is a fact of the problem (h, v0_max), not of how v0 is passed: a number
    and a traced v0 run the same rollout (same number of scan steps), so value and gradient
    come from one function. (It sized a number's rollout for max(14, v0) and a traced one's
    for 24 m/s: 511 vs 874 steps at h = 1/240.)"""
    seen = []
    simulate = pw._simulate

    def spy(v0, h, tau, num_steps, smoothed, keep):
        seen.append(num_steps)
        return simulate(v0, h, tau, num_steps, smoothed, keep)

    monkeypatch.setattr(pw, "_simulate", spy)
    for v in (8.0, 11.0, 20.0):
        value = pw.loss(v)
        traced_value, grad = jax.value_and_grad(pw.loss)(v)
        assert float(traced_value) == float(value)
        assert np.isfinite(float(grad))
    assert set(seen) == {pw.num_steps_for(pw.DEFAULT_H)} == {874}
    # the bound is an argument: stated, it sizes both alike; a number above it is refused,
    # a traced one above it gives NaN (a ball still in flight), never a short landing
    seen.clear()
    assert (
        float(pw.loss(8.0, v0_max=pw.V0_MAX))
        == float(jax.jit(lambda v: pw.loss(v, v0_max=pw.V0_MAX))(8.0))
        == pytest.approx(16.0, abs=1e-12)
    )
    assert set(seen) == {pw.num_steps_for(pw.DEFAULT_H, pw.V0_MAX)} == {511}
    with pytest.raises(ValueError, match=r"^v0 must be <= v0_max = 24 m/s .* got 30"):
        pw.loss(30.0)
    assert np.isnan(float(jax.jit(pw.loss)(30.0)))
    far = float(pw.landing_x(30.0, v0_max=30.0))
    assert far == pytest.approx(float(pw.landing_x_closed_form(30.0)), rel=1e-2)
    with pytest.raises(ValueError, match="v0_max"):
        pw.trajectory(30.0)


def test_float32_default():
    jax.config.update("jax_enable_x64", False)
    try:
        out = pw.landing_x(jnp.float32(8.0))
        assert out.dtype == jnp.float32 and float(out) == 6.0
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"v0": -1.0}, "v0"),
        ({"v0": float("nan")}, "v0"),
        ({"v0": 8.0, "h": 0.0}, "h"),
        ({"v0": 8.0, "h": -0.01}, "h"),
        ({"v0": 8.0, "smoothing": -0.1}, "smoothing"),
        ({"v0": 8.0, "smoothing": float("inf")}, "smoothing"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pw.loss(**kwargs)
