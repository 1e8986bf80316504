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
    PenaltySpring,
    Plane,
    Restitution,
    StopDead,
    WithContact,
    impact_fraction,
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
