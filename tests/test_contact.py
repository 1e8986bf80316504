"""Contact models: hard, time-of-impact, smoothed; finite gradients at switch points."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import central_fd
from diffsim import rollout, rollout_jacobian
from diffsim.contact import (
    Coords,
    Extent,
    PenaltySpring,
    Plane,
    Restitution,
    StopDead,
    WithContact,
    crossing,
    impact_fraction,
    naive_contact,
)
from diffsim.integrators import INTEGRATORS, SemiImplicitEuler


def _free(h=0.1, g=0.0, cls=SemiImplicitEuler):
    return cls(lambda x, v, th: -g * jnp.ones_like(x), h=h)


def _s(y, v):
    return (jnp.asarray(y, jnp.float64), jnp.asarray(v, jnp.float64))


def test_toi_restitution_exact_for_constant_velocity():
    # hits at 0.03 s, then rises at e|v| for the remaining 0.07 s
    step = WithContact(_free(0.1), Restitution(Plane.ground(), e=0.5, toi=True))
    y, v = step(_s(0.03, -1.0), {})
    assert float(y) == pytest.approx(0.5 * 0.07, abs=1e-14)
    assert float(v) == pytest.approx(0.5, abs=1e-14)


def test_naive_restitution_projects_and_reflects():
    step = WithContact(_free(0.1), Restitution(Plane.ground(), e=0.5))
    y, v = step(_s(0.03, -1.0), {})
    assert float(y) == 0.0 and float(v) == pytest.approx(0.5)
    # moving away from the plane inside it: untouched
    y, v = step(_s(-0.5, 1.0), {})
    assert float(y) == pytest.approx(-0.4) and float(v) == 1.0


def test_stop_dead_toi_stops_at_impact_point():
    step = WithContact(_free(0.1), StopDead(Plane.ground(), toi=True))
    y, v = step(_s(0.03, -1.0), {})
    assert float(y) == pytest.approx(0.0, abs=1e-15) and float(v) == 0.0
    # a vertical wall in 2-D at x = 6, hit from the left
    step2 = WithContact(
        SemiImplicitEuler(lambda x, v, th: jnp.zeros_like(x), h=0.1),
        StopDead(Plane.wall(6.0), toi=True),
    )
    x, vv = step2((jnp.array([5.95, 1.0]), jnp.array([1.0, 1.0])), {})
    np.testing.assert_allclose(x, [6.0, 1.05], atol=1e-12)
    np.testing.assert_array_equal(vv, [0.0, 0.0])


def test_impact_fraction_double_where():
    s, g = jax.value_and_grad(lambda a: impact_fraction(a, a))(0.0)
    assert float(s) == 0.0 and np.isfinite(float(g))
    assert float(impact_fraction(0.3, -0.1)) == pytest.approx(0.75)


@pytest.mark.parametrize(
    "contact",
    [
        Restitution(Plane.ground(), e=0.7),
        Restitution(Plane.ground(), e=0.7, toi=True),
        Restitution(Plane.ground(), e=0.7, smoothing=1e-3),
        StopDead(Plane.ground()),
        StopDead(Plane.ground(), toi=True),
        StopDead(Plane.ground(), smoothing=1e-3),
        PenaltySpring(Plane.ground(), k=1e4, c=10.0),
        PenaltySpring(Plane.ground(), k=1e4, c=10.0, smoothing=1e-3),
    ],
    ids=lambda c: f"{type(c).__name__}-toi={getattr(c, 'toi', None)}-tau={c.smoothing}",
)
def test_gradients_finite_exactly_at_switch_points(contact):
    step = WithContact(_free(0.1, g=9.81), contact)
    J = jax.jacfwd(lambda s: jnp.stack(step((s[0], s[1]), {})))
    Jr = jax.jacrev(lambda s: jnp.stack(step((s[0], s[1]), {})))
    # start on the plane; end exactly on the plane; no motion at all; grazing
    h, g = 0.1, 9.81
    for y, v in [(0.0, -1.0), (g * h * h, 0.0), (0.0, g * h), (0.0, 0.0), (0.05, -0.5)]:
        s = jnp.array([y, v], jnp.float64)
        assert np.all(np.isfinite(np.asarray(J(s)))), (y, v)
        assert np.all(np.isfinite(np.asarray(Jr(s)))), (y, v)


@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_composes_with_every_integrator(name):
    free = _free(0.01, g=9.81, cls=INTEGRATORS[name])
    step = WithContact(free, Restitution(Plane.ground(), e="e", toi=True))
    s0, theta = _s(1.0, 0.0), {"e": jnp.asarray(0.9)}
    y, _ = rollout(step, s0, theta, 300)
    assert float(y.min()) > -1e-3  # never sinks into the ground
    # back up to about e² = 0.81 of the drop height (O(h) off for the first-order schemes)
    assert float(y[50:130].max()) == pytest.approx(0.81, abs=0.05)
    J_ad, _ = rollout_jacobian(step, s0, theta, 100, method="autodiff")
    J_pr, _ = rollout_jacobian(step, s0, theta, 100, method="product")
    np.testing.assert_allclose(J_ad, J_pr, rtol=1e-8, atol=1e-10)


def test_toi_rollout_gradient_matches_fd():
    step = WithContact(_free(0.01, g=9.81), Restitution(Plane.ground(), e="e", toi=True))

    def f(p):
        yT, vT = rollout(step, (p[0], p[1]), {"e": p[2]}, 60, trajectory=False)
        return jnp.stack([yT, vT])

    p = jnp.array([0.5, -1.0, 0.8])
    J = jax.jacfwd(f)(p)
    np.testing.assert_allclose(J, central_fd(f, p, eps=1e-6), rtol=1e-6, atol=1e-8)


def _one_step(contact, y, v, h=0.01, g=9.81):
    step = WithContact(_free(h, g=g), contact)
    return jnp.stack(step(_s(y, v), {}))


@pytest.mark.parametrize(
    "make",
    [
        lambda t: Restitution(Plane.ground(), e=0.6, smoothing=t),
        lambda t: StopDead(Plane.ground(), smoothing=t),
        lambda t: PenaltySpring(Plane.ground(), k=1e3, c=5.0, smoothing=t),
    ],
    ids=["restitution", "stop_dead", "penalty"],
)
def test_smoothed_tends_to_hard_as_tau_to_zero(make):
    hard = make(None)
    # states on both sides of the switch, away from it
    states = [(0.2, -1.0), (0.005, -1.0), (-0.01, -0.5), (-0.02, 0.3), (0.3, 0.5)]
    taus = [1e-2, 1e-3, 1e-4, 1e-5]
    errs = []
    for tau in taus:
        e = max(
            float(jnp.max(jnp.abs(_one_step(make(tau), *s) - _one_step(hard, *s)))) for s in states
        )
        errs.append(e)
    assert errs[-1] < 1e-6
    assert all(b <= a for a, b in itertools.pairwise(errs))
    # smooth: the derivative of the smoothed step w.r.t. y is continuous across the switch
    tau = 1e-3
    dy = jax.vmap(jax.grad(lambda y: _one_step(make(tau), y, -1.0)[1]))(
        jnp.linspace(-0.02, 0.03, 501)
    )
    assert np.all(np.isfinite(np.asarray(dy)))
    assert np.max(np.abs(np.diff(np.asarray(dy)))) < 0.2 * (np.ptp(np.asarray(dy)) + 1e-12) + 1e-9


def test_penalty_force_values():
    c = PenaltySpring(Plane.ground(), k=100.0, c=2.0, mass=4.0)
    assert float(c.accel(jnp.asarray(-0.1), jnp.asarray(-1.0), {})) == pytest.approx((10 + 2) / 4)
    assert float(c.accel(jnp.asarray(0.1), jnp.asarray(-1.0), {})) == 0.0
    ck = PenaltySpring(Plane.ground(), k="k")
    assert float(ck.accel(jnp.asarray(-0.1), jnp.asarray(0.0), {"k": 50.0})) == pytest.approx(5.0)


def test_parameters_from_theta_get_gradients():
    step = WithContact(_free(0.1), Restitution(Plane.ground(), e="e", toi=True))
    g = jax.grad(lambda e: step(_s(0.03, -1.0), {"e": e})[0])(0.5)
    assert float(g) == pytest.approx(0.07)  # y = e |v| (h - t*)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Restitution(Plane.ground(), e=1.5), "e"),
        (lambda: Restitution(Plane.ground(), e=float("nan")), "e"),
        (lambda: Restitution(Plane.ground(), e=0.5, toi=True, smoothing=0.1), "smoothing"),
        (lambda: Restitution(Plane.ground(), smoothing=-1.0), "smoothing"),
        (lambda: PenaltySpring(Plane.ground(), k=-1.0), "k"),
        (lambda: PenaltySpring(Plane.ground(), c=-1.0), "c"),
        (lambda: StopDead(Plane.ground(), smoothing=0.0), "smoothing"),
    ],
)
def test_bad_parameters(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_bad_wrapping_and_missing_theta_key():
    with pytest.raises(TypeError, match="integrator"):
        WithContact(lambda s, p: s, Restitution(Plane.ground()))
    with pytest.raises(TypeError, match="contacts"):
        WithContact(_free(), "ground")
    step = WithContact(_free(), Restitution(Plane.ground(), e="e"))
    with pytest.raises(ValueError, match="theta"):
        step(_s(0.01, -1.0), {})


# --- thin planes: a wall of finite height (x = 6, height 2) ------------------------------

WALL = Plane.wall(6.0, height=2.0)


def _flat(h=0.1, g=0.0):
    """2-D free flight, gravity g along −y (θ is ignored; rollouts pass {"g": g})."""
    return SemiImplicitEuler(lambda x, v, th: jnp.stack([0.0 * x[0], -g + 0.0 * x[1]]), h=h)


G_THETA = {"g": jnp.asarray(9.81)}


def _s2(p, v):
    return (jnp.asarray(p, jnp.float64), jnp.asarray(v, jnp.float64))


THIN_VARIANTS = [
    StopDead(WALL),
    StopDead(WALL, toi=True),
    StopDead(WALL, toi=True, smoothing=0.01),
    StopDead(WALL, smoothing=0.01),
    Restitution(WALL, e=0.5),
    Restitution(WALL, e=0.5, toi=True),
    Restitution(WALL, e=0.5, toi=True, smoothing=0.01),
    Restitution(WALL, e=0.5, smoothing=0.01),
]
THIN_IDS = [f"{type(c).__name__}-toi={c.toi}-tau={c.smoothing}" for c in THIN_VARIANTS]


def test_thin_wall_geometry():
    assert WALL.thin and not Plane.wall(6.0).thin and not Plane.ground(2).thin
    (e,) = WALL.extent
    assert e.direction == (0.0, 1.0) and e.lo is None and float(e.hi) == 2.0
    p = jnp.array([6.0, 1.5])
    assert bool(WALL.within(p)) and float(WALL.margin(p)) == pytest.approx(0.5)
    assert not bool(WALL.within(jnp.array([6.0, 2.5])))
    assert bool(WALL.within(jnp.array([6.0, 2.0])))  # closed: exactly at the top is inside
    # a fence between heights 1 and 3, in 3-D (up is the last axis)
    fence = Plane.wall(2.0, 3, height=3.0, bottom=1.0)
    assert float(fence.margin(jnp.array([2.0, 5.0, 1.5]))) == pytest.approx(0.5)
    assert not bool(fence.within(jnp.array([2.0, 0.0, 0.5])))


def test_thin_wall_stops_below_the_top_at_the_crossing_point():
    step = WithContact(_flat(0.1), StopDead(WALL, toi=True))
    x, v = step(_s2([5.95, 1.0], [1.0, 1.0]), {})  # crosses x = 6 at s = 0.5, y = 1.05
    np.testing.assert_allclose(x, [6.0, 1.05], atol=1e-12)
    assert float(x[0]) == 6.0  # exactly on the wall
    np.testing.assert_array_equal(v, [0.0, 0.0])
    # time of impact on a thin wall: reflect at the crossing, fly back for the rest
    step = WithContact(_flat(0.1), Restitution(WALL, e=1.0, toi=True))
    x, v = step(_s2([5.95, 1.0], [1.0, 0.0]), {})
    np.testing.assert_allclose(x, [5.95, 1.0], atol=1e-12)
    np.testing.assert_allclose(v, [-1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("contact", THIN_VARIANTS, ids=THIN_IDS)
def test_thin_wall_over_the_top_and_beyond_are_untouched(contact):
    step = WithContact(_flat(0.1, g=9.81), contact)
    free = _flat(0.1, g=9.81)
    cases = [
        ([5.95, 2.5], [1.0, 0.0]),  # crosses above the top
        ([6.5, 1.5], [0.5, -3.0]),  # beyond the wall, descending below its top
        ([6.02, 0.5], [1.0, -1.0]),  # just past it, low
        ([5.0, 1.0], [1.0, 0.0]),  # in front of it, not reaching it
    ]
    for p, v in cases:
        got = step(_s2(p, v), {})
        want = free(_s2(p, v), {})
        for a, b in zip(got, want):
            np.testing.assert_allclose(
                a, b, rtol=0, atol=1e-9 * (contact.smoothing is None) + 1e-12
            )


def test_half_space_wall_would_stop_a_ball_behind_it():
    # the reason for thin planes: the half-space rule catches a ball that is past the wall
    behind = _s2([6.5, 1.5], [0.5, -3.0])
    x, v = WithContact(_flat(0.1), StopDead(Plane.wall(6.0)))(behind, {})
    assert float(x[0]) == 6.0 and float(v[0]) == 0.0
    x, v = WithContact(_flat(0.1), StopDead(WALL))(behind, {})
    assert float(x[0]) == pytest.approx(6.55) and float(v[0]) == 0.5


def test_thin_wall_crossing_and_naive_switch():
    def c(*a):
        return Coords.split(jnp.asarray(a, jnp.float64))

    x0, x1 = c(5.9, 1.0), c(6.1, 3.0)  # crosses x = 6 at y = 2 (the top)
    crossed, s, x_c = crossing(WALL, x0, x1)
    assert bool(crossed) and float(s) == pytest.approx(0.5)
    np.testing.assert_allclose(x_c.stack(), [6.0, 2.0])
    crossed, _, _ = crossing(WALL, x0, c(6.1, 3.2))  # at y = 2.1: over
    assert not bool(crossed)
    assert bool(crossing(WALL, x0, c(6.1, 3.2), within_extent=False)[0])
    hit, x_proj = naive_contact(WALL, x1, c(1.0, 10.0), x0=x0)
    assert bool(hit) and float(x_proj.stack()[0]) == 6.0
    assert not bool(naive_contact(WALL, c(6.1, 3.2), c(1.0, 10.0), x0=x0)[0])
    with pytest.raises(ValueError, match="x0"):
        naive_contact(WALL, x1, c(1.0, 10.0))


def test_stop_dead_sticks_to_the_thin_wall():
    # hits the wall under gravity, then stays where it hit (does not slide down the face)
    step = WithContact(_flat(1 / 240, g=9.81), (StopDead(WALL, toi=True),))
    traj, vel = rollout(step, _s2([5.0, 1.0], [4.0, 2.0]), G_THETA, 200)
    hit = int(np.argmax(np.asarray(traj[:, 0]) == 6.0))
    assert hit > 0
    np.testing.assert_array_equal(traj[hit:, 0], 6.0)
    np.testing.assert_array_equal(traj[hit:, 1], traj[hit, 1])
    np.testing.assert_array_equal(vel[hit:], 0.0)


def _wall_flight(contact, h=1 / 240, steps=480):
    step = WithContact(_flat(h, g=9.81), (contact, StopDead(Plane.ground(2), toi=True)))

    def f(p):  # (x0, vx0, vy0) -> final position
        s0 = (jnp.stack([p[0], jnp.zeros_like(p[0])]), jnp.stack([p[1], p[2]]))
        x, _ = rollout(step, s0, G_THETA, steps, trajectory=False)
        return x

    return f


@pytest.mark.parametrize(
    "p, stopped",
    [
        ([4.01, 6.0, 4.0], True),  # hits the wall low: stops at x = 6
        ([4.01, 6.0, 8.0], False),  # clears it (y = 2.11 at the wall) and lands beyond
        ([0.0, 3.0, 3.0], False),  # lands short of it
    ],
)
def test_thin_wall_gradients_match_finite_differences(p, stopped):
    # off the switches: x0 = 4.01 keeps the wall crossing off a step boundary (x0 = 4,
    # vx = 6 reaches it at t = 1/3 s = 80 steps exactly, where the interpolating chord,
    # and with it the derivative of the discrete model, changes: a legitimate kink)
    f = _wall_flight(StopDead(WALL, toi=True))
    p = jnp.asarray(p, jnp.float64)
    x = f(p)
    assert (float(x[0]) == 6.0) == stopped
    if not stopped:  # landed, exactly on the ground, beyond the wall or short of it
        assert float(x[1]) == 0.0 and (float(x[0]) > 6.0) == (float(p[2]) > 5.0)
    J = jax.jacfwd(f)(p)
    Jr = jax.jacrev(f)(p)
    np.testing.assert_allclose(J, Jr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(J, central_fd(f, p, eps=1e-6), rtol=1e-5, atol=1e-7)
    if stopped:  # the stop point is on the wall: its x does not move at all
        np.testing.assert_array_equal(J[0], 0.0)
        assert float(J[1, 2]) > 0  # launched steeper, it hits higher


def test_smoothed_thin_wall_gradients_match_finite_differences():
    # near the top, where the smoothed edge acts: the weight varies with the crossing height
    f = _wall_flight(StopDead(WALL, toi=True, smoothing=0.1))
    for p in ([4.01, 6.0, 5.2], [4.01, 6.0, 5.5]):
        p = jnp.asarray(p, jnp.float64)
        J = jax.jacfwd(f)(p)
        assert np.all(np.isfinite(np.asarray(J)))
        np.testing.assert_allclose(J, central_fd(f, p, eps=1e-6), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("contact", THIN_VARIANTS, ids=THIN_IDS)
def test_thin_wall_gradients_finite_exactly_at_switch_points(contact):
    step = WithContact(_flat(0.1, g=0.0), contact)

    def f(s):
        x, v = step((s[:2], s[2:]), {})
        return jnp.concatenate([x, v])

    cases = [
        [5.9, 1.0, 1.0, 10.0],  # crosses exactly at the top (y_c = 2)
        [6.0, 1.0, 1.0, 0.0],  # starts on the wall
        [5.9, 1.0, 1.0, 0.0],  # ends exactly on the wall
        [6.0, 1.0, 0.0, 0.0],  # at rest on the wall
        [5.9, 1.0, 0.0, 0.0],  # no motion
    ]
    for c in cases:
        s = jnp.asarray(c, jnp.float64)
        assert np.all(np.isfinite(np.asarray(jax.jacfwd(f)(s)))), c
        assert np.all(np.isfinite(np.asarray(jax.jacrev(f)(s)))), c


def test_smoothed_thin_wall_tends_to_hard_and_weights_the_edge():
    def run(tau, p, v):
        contact = StopDead(WALL, toi=True, smoothing=tau)
        return jnp.concatenate(WithContact(_flat(0.1), contact)(_s2(p, v), {}))

    hard = StopDead(WALL, toi=True)
    states = [([5.95, 1.0], [1.0, 0.0]), ([5.95, 2.5], [1.0, 0.0]), ([5.95, 1.8], [1.0, 0.0])]
    errs = []
    for tau in (0.1, 0.03, 0.01, 0.003):
        errs.append(
            max(
                float(
                    jnp.max(
                        jnp.abs(
                            run(tau, p, v)
                            - jnp.concatenate(WithContact(_flat(0.1), hard)(_s2(p, v), {}))
                        )
                    )
                )
                for p, v in states
            )
        )
    assert all(b < a for a, b in itertools.pairwise(errs)) and errs[-1] < 1e-12
    # at the top exactly the ball keeps half its speed, at the crossing point
    out = run(0.1, [5.95, 2.0], [1.0, 0.0])
    np.testing.assert_allclose(out, [6.025, 2.0, 0.5, 0.0], atol=1e-12)


def test_smoothing_may_be_traced():
    def final_x(tau):
        step = WithContact(_flat(0.1), StopDead(WALL, toi=True, smoothing=tau))
        return step(_s2([5.95, 1.9], [1.0, 0.0]), {})[0][0]

    v, g = jax.jit(jax.value_and_grad(final_x))(0.1)
    assert float(v) == pytest.approx(float(final_x(0.1)), abs=1e-15)
    assert np.isfinite(float(g)) and float(g) > 0  # a softer edge lets more through


def test_thin_wall_batched_step_matches_single():
    step = WithContact(_flat(0.1, g=9.81), StopDead(WALL, toi=True))
    p = jnp.array([[5.95, 1.0], [5.95, 2.5], [6.5, 1.5]])
    v = jnp.array([[1.0, 1.0], [1.0, 0.0], [0.5, -3.0]])
    xb, vb = jax.vmap(step, in_axes=(0, None))((p, v), {})
    for i in range(3):
        x1, v1 = step((p[i], v[i]), {})
        np.testing.assert_array_equal(xb[i], x1)
        np.testing.assert_array_equal(vb[i], v1)


def test_penalty_spring_between_two_bodies_with_a_kinematic_one():
    # pusher (coordinate 0, kinematic) and box (coordinate 1): gap x_b − x_p
    c = PenaltySpring(Plane((-1.0, 1.0), 0.0), k=100.0, mass=2.0, kinematic=(0,))
    a = c.accel(jnp.array([0.3, 0.2]), jnp.zeros(2), {})
    np.testing.assert_allclose(a, [0.0, 100.0 * 0.1 / 2.0])
    assert np.all(np.asarray(c.accel(jnp.array([0.1, 0.2]), jnp.zeros(2), {})) == 0.0)
    both = PenaltySpring(Plane((-1.0, 1.0), 0.0), k=100.0, mass=2.0)
    np.testing.assert_allclose(both.accel(jnp.array([0.3, 0.2]), jnp.zeros(2), {}), [-5.0, 5.0])


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Extent((0.0, 1.0)), "bound"),
        (lambda: Extent((0.0, 1.0), lo=2.0, hi=1.0), "lo <= hi"),
        (lambda: Extent((0.0, 1.0), hi=float("inf")), "finite"),
        (lambda: Plane.wall(6.0, 1, height=2.0), "dim"),
        (lambda: Plane((1.0, 0.0), 0.0, Extent((0.0, 0.0, 1.0), hi=1.0)), "entries"),
        (lambda: PenaltySpring(WALL), "half-space"),
        (lambda: PenaltySpring(Plane.ground(2), kinematic=(2,)), "kinematic"),
        (lambda: StopDead(Plane.ground(), toi=True, smoothing=0.1), "smoothing"),
        (lambda: StopDead(WALL, toi=True, smoothing=0.0), "smoothing"),
    ],
)
def test_bad_thin_planes(build, match):
    with pytest.raises(ValueError, match=match):
        build()
