"""Impact location at the integrator's order (issue 11, item 4).

The time-of-impact contacts locate the impact on the integrator's own partial step
(:func:`diffsim.contact.locate_impact`). Velocity Verlet is exact in free flight under
constant gravity, so with it a bouncing ball's final state and Jacobian must equal the
event-driven exact solution (:func:`diffsim.systems.bouncing_ball_event_driven`, autodiff of a
closed form: parabolas joined at impact times found by quadratic roots) to round-off, for any
h and any number of bounces; with semi-implicit Euler they converge at first order. The same
holds for ``StopDead`` and the wall of ``projectile_wall``.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffsim import rollout, systems
from diffsim.contact import Coords, Plane, Restitution, StopDead, WithContact, locate_impact
from diffsim.integrators import RK4, Integrator, SemiImplicitEuler, VelocityVerlet
from diffsim.systems import _bouncing_ball as bb
from diffsim.systems import _bouncing_ball_events as bbe
from diffsim.systems import projectile_wall as pw

G = 9.81
KEYS = ("y0", "vy0", "e")


def _gravity(x, v, th):
    return -th["g"] * jnp.ones_like(x)


def _ball(
    y0,
    vy0,
    e,
    *,
    h,
    t,
    integrator: type[Integrator] = VelocityVerlet,
    location: Literal["substep", "linear"] = "substep",
):
    """Final (y, vy) after round(t / h) steps and its Jacobian in (y0, vy0, e), 2 x 3."""
    n = round(t / h)
    contact = Restitution(Plane.ground(), e="e", toi=True, location=location)
    step = WithContact(integrator(_gravity, h=h), contact)

    def f(p):
        s = rollout(step, (p[0], p[1]), {"e": p[2], "g": jnp.asarray(G)}, n, trajectory=False)
        return jnp.stack(s)

    p = jnp.asarray([y0, vy0, e], jnp.float64)
    return jax.jit(f)(p), jax.jit(jax.jacfwd(f))(p), n * h


def _exact(y0, vy0, e, t):
    s = jnp.stack(systems.bouncing_ball_event_driven(y0, vy0, e, G, t))
    J = bbe.bouncing_ball_event_driven_jacobian(y0, vy0, e, G, t)
    rows = [[J[f"d{q}_d{k}"] for k in KEYS] for q in ("y", "vy")]
    return s, jnp.asarray(rows)


def _impact_times(y0, vy0, e, n):
    w = math.sqrt(vy0**2 + 2 * G * y0)
    t = [(vy0 + w) / G]
    for k in range(1, n):
        t.append(t[-1] + 2 * e**k * w / G)
    return t


# --- the reference ------------------------------------------------------------------------


def test_event_driven_reference_agrees_with_the_one_bounce_closed_form():
    y0, vy0, e, t = 1.0, -1.0, 0.8, 0.6  # one bounce (at 0.367 s) before t
    ts, t2 = (float(a) for a in bb.bouncing_ball_bounce_window(y0, vy0, e, G))
    assert ts < t < t2
    s, J = _exact(y0, vy0, e, t)
    one = bb.bouncing_ball_closed_form(y0, vy0, e, G, t)
    D = bb.bouncing_ball_derivatives_closed_form(y0, vy0, e, G, t)
    np.testing.assert_allclose(s, one, rtol=1e-13, atol=1e-14)
    for i, k in enumerate(KEYS):
        assert float(J[0, i]) == pytest.approx(float(D[f"dy_d{k}"]), rel=1e-12, abs=1e-13)
        assert float(J[1, i]) == pytest.approx(float(D[f"dvy_d{k}"]), rel=1e-12, abs=1e-13)


def test_event_driven_reference_is_the_bouncing_ball():
    # before and after each impact: on the ground, the velocity flipped and scaled by e
    y0, vy0, e = 1.2, -1.0, 0.95
    eps = 1e-7
    for t in _impact_times(y0, vy0, e, 4):
        y_a, v_a = systems.bouncing_ball_event_driven(y0, vy0, e, G, t - eps)
        y_b, v_b = systems.bouncing_ball_event_driven(y0, vy0, e, G, t + eps)
        assert abs(float(y_a)) < 1e-6 and abs(float(y_b)) < 1e-6
        assert float(v_b) == pytest.approx(-e * float(v_a), rel=1e-5)
    # launched upward it first rises to its apex: v0^2 / 2g above y0
    y, v = systems.bouncing_ball_event_driven(0.5, 2.0, 0.9, G, 2.0 / G)
    assert float(y) == pytest.approx(0.5 + 4.0 / (2 * G), abs=1e-13) and abs(float(v)) < 1e-14


# --- velocity Verlet: exact, for any h, through many bounces --------------------------------

CASES = [
    # (y0, vy0, e, T): four bounces (the user's case, e = 0.95, 3.5 s), seven bounces
    (1.2, -1.0, 0.95, 3.5),
    (1.0, 0.5, 0.8, 3.0),
]


@pytest.mark.parametrize("case", CASES, ids=["four bounces", "seven bounces"])
@pytest.mark.parametrize("h", [0.05, 0.013, 1 / 240, 1e-3])
def test_verlet_bounces_match_the_event_driven_solution(case, h):
    y0, vy0, e, T = case
    bounces = sum(t < T - 0.05 for t in _impact_times(y0, vy0, e, 20))
    assert bounces >= 4
    s, J, t = _ball(y0, vy0, e, h=h, t=T)
    s_ex, J_ex = _exact(y0, vy0, e, t)
    np.testing.assert_allclose(s, s_ex, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(J, J_ex, rtol=1e-9, atol=1e-9)


def test_verlet_reverse_mode_is_the_same_exact_gradient():
    y0, vy0, e, T, h = 1.2, -1.0, 0.95, 3.5, 0.013
    n = round(T / h)
    step = WithContact(VelocityVerlet(_gravity, h=h), Restitution(Plane.ground(), e="e", toi=True))

    def y_T(p):
        return rollout(step, (p[0], p[1]), {"e": p[2], "g": G}, n, trajectory=False)[0]

    g = jax.grad(y_T)(jnp.asarray([y0, vy0, e]))
    _, J_ex = _exact(y0, vy0, e, n * h)
    np.testing.assert_allclose(g, J_ex[0], rtol=1e-9, atol=1e-9)


def test_the_users_four_bounce_case_has_the_right_sign():
    # y0 = 1.2 m, v0 = -1 m/s, e = 0.95, T = 3.5 s, h = 1e-3: four impacts. The linear
    # location gave ∂y_T/∂y0 = +0.130 with semi-implicit Euler (truth -0.0738) and an error
    # of 5.6 % of it with velocity Verlet that did not fall with h
    y0, vy0, e, T, h = 1.2, -1.0, 0.95, 3.5, 1e-3
    _, J_ex = _exact(y0, vy0, e, T)
    assert float(J_ex[0, 0]) < -0.07 and float(J_ex[0, 2]) == pytest.approx(3.2548, abs=1e-4)
    _, J, _ = _ball(y0, vy0, e, h=h, t=T)
    assert float(J[0, 0]) == pytest.approx(float(J_ex[0, 0]), rel=1e-9)
    assert float(J[0, 2]) == pytest.approx(float(J_ex[0, 2]), rel=1e-9)
    _, J_lin, _ = _ball(y0, vy0, e, h=h, t=T, location="linear")
    assert abs(float(J_lin[0, 0] - J_ex[0, 0])) > 1e-3  # the old location's error
    _, J_sie, _ = _ball(y0, vy0, e, h=h, t=T, integrator=SemiImplicitEuler)
    # semi-implicit Euler's own first-order error (its flights drift by ~0.01 s per bounce
    # at this h) still flips the sign near the fourth bounce
    assert float(J_sie[0, 0]) > 0


# --- semi-implicit Euler: first order -------------------------------------------------------


@pytest.mark.slow
def test_semi_implicit_euler_converges_at_first_order():
    y0, vy0, e, T = 1.2, -1.0, 0.95, 3.5
    errs = []
    for h in (1e-3, 5e-4, 2.5e-4):
        s, J, t = _ball(y0, vy0, e, h=h, t=T, integrator=SemiImplicitEuler)
        s_ex, J_ex = _exact(y0, vy0, e, t)
        errs.append((float(jnp.max(jnp.abs(s - s_ex))), float(jnp.max(jnp.abs(J - J_ex)))))
    for (s0, j0), (s1, j1) in itertools.pairwise(errs):
        # first order: the error halves with h (measured ratios 2.00 and 1.97-2.02)
        assert 1.8 < s0 / s1 < 2.2
        assert 1.8 < j0 / j1 < 2.2


# --- finite gradients where nothing happens, and at the ends of the step ------------------


def _one_step(integrator, contact):
    step = WithContact(integrator, contact)

    def f(p):
        return jnp.stack(step((p[0], p[1]), {"e": p[2], "g": p[3]}))

    return f


@pytest.mark.parametrize("integrator", [SemiImplicitEuler, VelocityVerlet, RK4])
@pytest.mark.parametrize("contact", ["restitution", "stop_dead"])
def test_gradients_finite_without_an_impact(integrator, contact):
    c = (
        Restitution(Plane.ground(), e="e", toi=True)
        if contact == "restitution"
        else StopDead(Plane.ground(), toi=True)
    )
    f = _one_step(integrator(_gravity, h=0.1), c)
    # high above the ground; at rest without gravity (a constant gap: zero slope); rising
    for p in ([5.0, -1.0, 0.8, G], [1.0, 0.0, 0.8, 0.0], [0.0, 1.0, 0.8, G]):
        p = jnp.asarray(p)
        free = jnp.stack(integrator(_gravity, h=0.1)((p[0], p[1]), {"g": p[3]}))
        np.testing.assert_allclose(f(p), free, rtol=0, atol=1e-15)
        for J in (jax.jacfwd(f)(p), jax.jacrev(f)(p)):
            assert bool(jnp.all(jnp.isfinite(J)))


@pytest.mark.parametrize("y0, alpha", [(0.125, 1.0), (0.0, 0.0), (0.0625, 0.5)])
def test_impact_at_the_ends_of_the_step_has_the_full_gradient(y0, alpha):
    # g = 0: the ball at y0 moving at -1 m/s hits at y0 / h of the step (h = 0.125) and
    # ends at y = -e (v0 h + y0), v = -e v0: ∂y/∂y0 = -e, ∂y/∂v0 = -e h, ∂y/∂e = -(v0 h + y0)
    h, e = 0.125, 0.8
    f = _one_step(VelocityVerlet(_gravity, h=h), Restitution(Plane.ground(), e="e", toi=True))
    p = jnp.asarray([y0, -1.0, e, 0.0])
    np.testing.assert_allclose(f(p), [-e * (-h + y0), e], rtol=0, atol=1e-15)
    want = [-e, -e * h, -(-h + y0)]
    for J in (jax.jacfwd(f)(p), jax.jacrev(f)(p)):
        np.testing.assert_allclose(J[0, :3], want, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(J[1, :3], [0.0, -e, 1.0], rtol=1e-14, atol=1e-15)
    s0 = (Coords.split(p[:1]), Coords.split(p[1:2]))
    free = VelocityVerlet(_gravity, h=h)
    th = {"g": 0.0}
    imp = locate_impact(Plane.ground(), free, s0, free.step_coords(*s0, th, None), th)
    assert bool(imp.crossed) and float(imp.fraction) == alpha


@pytest.mark.parametrize("integrator", [VelocityVerlet, RK4])
def test_locate_impact_is_the_root_of_the_partial_step(integrator):
    # a non-quadratic gap (a cubic spring plus gravity, RK4): the gap after the partial step
    # to the located fraction vanishes, and α's derivative is the implicit-function one,
    # checked by central differences of the located fraction
    free = integrator(lambda x, v, th: -th["k"] * x**3 - G + 0.0 * v, h=0.2)

    def fraction(y0, k):
        s0 = (Coords.split(jnp.reshape(y0, (1,))), Coords.split(jnp.asarray([-0.4])))
        s1 = free.step_coords(*s0, {"k": k}, None)
        imp = locate_impact(Plane.ground(), free, s0, s1, {"k": k})
        return imp.fraction, Plane.ground().gap(imp.x)

    y0, k = jnp.asarray(0.06), jnp.asarray(40.0)
    a, gap = fraction(y0, k)
    assert 0 < float(a) < 1 and abs(float(gap)) < 1e-15
    grad = jax.grad(lambda y, q: fraction(y, q)[0], argnums=(0, 1))(y0, k)
    for i, d in enumerate((1e-6, 1e-3)):
        args = [y0, k]
        hi, lo = list(args), list(args)
        hi[i], lo[i] = args[i] + d, args[i] - d
        fd = (fraction(*hi)[0] - fraction(*lo)[0]) / (2 * d)
        assert float(grad[i]) == pytest.approx(float(fd), rel=1e-6, abs=1e-10)


# --- StopDead and the wall -------------------------------------------------------------------


def _landing(integrator, h, v0, angle=0.9):
    """Final position of a ball launched from (0, 0.3) at speed v0 (any shape), stopped
    dead where it lands, and its derivative in v0."""
    step = WithContact(
        integrator(lambda x, v, th: jnp.stack([0.0 * th["g"], -th["g"]]), h=h),
        StopDead(Plane.ground(2), toi=True),
    )
    n = math.ceil(2.0 / h)

    def f(v):
        s0 = (
            jnp.stack([0.0 * v, 0.3 + 0.0 * v]),
            v * jnp.stack([math.cos(angle), math.sin(angle)]),
        )
        return rollout(step, s0, {"g": G}, n, trajectory=False)[0]

    v0 = jnp.asarray(v0, jnp.float64)
    batched = jnp.vectorize(lambda v: jnp.stack([f(v), jax.jacfwd(f)(v)]), signature="()->(2,2)")
    out = jax.jit(batched)(v0)
    return out[..., 0, :], out[..., 1, :]


def _landing_exact(v0, angle=0.9):
    vx, vy = v0 * math.cos(angle), v0 * math.sin(angle)
    t = (vy + math.sqrt(vy**2 + 2 * G * 0.3)) / G
    dt = (math.sin(angle) + (vy * math.sin(angle)) / math.sqrt(vy**2 + 2 * G * 0.3)) / G
    return vx * t, math.cos(angle) * t + vx * dt


@pytest.mark.parametrize("h", [0.05, 0.013, 1 / 240])
def test_stop_dead_verlet_lands_exactly(h):
    v0 = (3.0, 7.5)
    p, dp = _landing(VelocityVerlet, h, v0)
    for i, v in enumerate(v0):
        x, dx = _landing_exact(v)
        np.testing.assert_allclose(p[i], [x, 0.0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dp[i], [dx, 0.0], rtol=1e-10, atol=1e-12)


def test_stop_dead_semi_implicit_euler_first_order():
    x, dx = _landing_exact(7.5)
    hs = (0.01, 0.005, 0.0025, 0.00125)
    errs = [
        (abs(float(p[0]) - x), abs(float(dp[0]) - dx))
        for p, dp in (_landing(SemiImplicitEuler, h, 7.5) for h in hs)
    ]
    # the landing x: first order, the error halves with h (measured ratios 2.00)
    for (a0, _), (a1, _) in itertools.pairwise(errs):
        assert 1.9 < a0 / a1 < 2.1
    # its derivative: first order too, with an oscillating constant. The partial step to
    # the landing sits g h² α(1 - α)/2 above semi-implicit Euler's own parabola, whose
    # derivative in v0 is O(h) and changes with the fraction α where the landing falls
    # (measured error / h: 0.88, 0.53, 0.93, 0.62)
    for h, (_, b) in zip(hs, errs):
        assert b < 1.2 * h
    assert errs[-1][1] < errs[0][1] / 4


def _wall_flight(integrator, h, v0):
    """The projectile_wall composition (thin wall + ground, stop dead, toi) on another
    integrator: final position and its derivative in v0."""
    wall = StopDead(Plane.wall(pw.WALL_X, 2, height=pw.WALL_HEIGHT), toi=True)
    ground = StopDead(Plane.ground(2), toi=True)
    step = WithContact(
        integrator(lambda x, v, th: jnp.stack([0.0 * th["g"], -th["g"]]), h=h), (wall, ground)
    )
    n = pw.num_steps_for(h)

    def f(v):
        return rollout(step, pw.launch_state(v), {"g": jnp.asarray(pw.G)}, n, trajectory=False)[0]

    v0 = jnp.asarray(v0, jnp.float64)
    batched = jnp.vectorize(lambda v: jnp.stack([f(v), jax.jacfwd(f)(v)]), signature="()->(2,2)")
    out = jax.jit(batched)(v0)
    return out[..., 0, :], out[..., 1, :]


@pytest.mark.parametrize("h", [0.05, 0.013, pw.DEFAULT_H])
def test_projectile_wall_with_verlet_is_exact(h):
    # short of the wall, stopped on it (at the parabola's height there), over it
    v0 = (7.0, 8.0, 11.0)
    p, dp = _wall_flight(VelocityVerlet, h, v0)
    for i, v in enumerate(jnp.asarray(v0)):
        if pw.plateau_bounds()[0] < float(v) < pw.plateau_bounds()[1]:
            want = [pw.WALL_X, float(pw.wall_height_at(v))]
            dwant = [0.0, float(jax.grad(pw.wall_height_at)(v))]
        else:
            want = [float(pw.free_range(v)), 0.0]
            dwant = [float(jax.grad(pw.free_range)(v)), 0.0]
        np.testing.assert_allclose(p[i], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dp[i], dwant, rtol=1e-10, atol=1e-12)
