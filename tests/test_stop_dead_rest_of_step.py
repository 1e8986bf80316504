"""Issue 22, item 6: ``StopDead(toi=True)`` integrates the rest of the step after the stop.

A unit mass on a spring x'' = −x launched from x = 0 at v₀ > 1 hits a wall at x = 1, stops
dead, and the spring pulls it back: x(T) = cos(T h − t_c) with t_c = asin(1/v₀). Before the
fix the stopped step ended at the wall with v = 0, so t_c was rounded to whole steps: x_T
was flat in v₀ between impact steps (jax.grad exactly 0) and jumped at each boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffsim
from diffsim.contact import Plane, StopDead, WithContact
from diffsim.integrators import SemiImplicitEuler, VelocityVerlet

H, T = 0.01, 150


def _closed(v0):
    return np.cos(T * H - np.arcsin(1.0 / v0))


def _d_closed(v0):  # d/dv0 cos(TH − asin(1/v0)) = −sin(TH − t_c) / (v0² √(1 − 1/v0²))
    return -np.sin(T * H - np.arcsin(1.0 / v0)) / (v0**2 * np.sqrt(1 - 1 / v0**2))


@pytest.mark.parametrize(("integrator", "tol"), [(VelocityVerlet, 1e-4), (SemiImplicitEuler, 2e-2)])
def test_time_of_impact_is_not_rounded_to_whole_steps(integrator, tol):
    step = WithContact(
        integrator(lambda x, v, th: -th["k"] * x, h=H), StopDead(Plane.wall(1.0, dim=1), toi=True)
    )

    def loss(v0):
        return diffsim.rollout(step, (jnp.asarray(0.0), v0), {"k": 1.0}, T, trajectory=False)[0]

    vs = np.linspace(1.990, 2.002, 13)  # the range, where the loss used to be flat
    xs = np.array([float(loss(jnp.asarray(v))) for v in vs])
    # against the closed form (O(h) for semi-implicit Euler, O(h²) for Verlet)
    np.testing.assert_allclose(xs, _closed(vs), atol=tol)
    assert np.all(np.diff(xs) < 0)  # strictly decreasing: no plateau, no jump
    for v in (1.995, 2.0, 2.3):
        g = float(jax.grad(loss)(jnp.asarray(v)))
        assert g == pytest.approx(_d_closed(v), rel=10 * tol, abs=tol)


def test_a_force_into_the_plane_still_stops_the_body():
    """Gravity toward the wall: the rest of the step would push into it, so the body stays
    stopped on the plane with v = 0 (the stop the article's wall makes)."""
    step = WithContact(
        VelocityVerlet(lambda x, v, th: th["g"] + 0.0 * x, h=H),
        StopDead(Plane.wall(1.0, dim=1), toi=True),
    )
    xT, vT = diffsim.rollout(step, (jnp.asarray(0.0), jnp.asarray(1.0)), {"g": 5.0}, 60,
                             trajectory=False)  # fmt: skip
    assert float(xT) == 1.0 and float(vT) == 0.0
