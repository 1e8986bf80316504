"""Stiff pushing built from the library: references, the old step, gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import central_fd
from diffsim import rollout
from diffsim.contact import PenaltySpring, WithContact
from diffsim.integrators import SemiImplicitEuler
from diffsim.systems import pushing


def _box_final(u, k, *, h=pushing.H, pusher_first=False):
    """Independent references, written out: the box's final position.

    ``pusher_first=False``: semi-implicit Euler of pusher and box, the force at the
    positions at the start of the step (what ``push_loss`` computes).
    ``pusher_first=True``: the hand-written step ``push_loss`` used before it was built
    from the library (move the pusher, then the force at its new position).
    """
    m, c = pushing.MASS, pushing.DAMPING
    xp, xb, vb = 0.0, pushing.BOX_X0, 0.0
    for ut in np.asarray(u, float):
        if pusher_first:
            xp = xp + ut * h
        f = k * max(xp - xb, 0.0)
        vb = vb + h * (f - c * vb) / m
        xb = xb + h * vb
        if not pusher_first:
            xp = xp + ut * h
    return xb


def _loss_from(xb, u, h=pushing.H):
    return (xb - pushing.TARGET) ** 2 + pushing.EFFORT * h * float(np.sum(np.asarray(u) ** 2))


def _controls(seed=0, n=pushing.NUM_STEPS):
    rng = np.random.default_rng(seed)
    return jnp.asarray(0.5 + 0.3 * rng.standard_normal(n))


@pytest.mark.parametrize("k", [10.0, 100.0, 1e3, 1e4])
def test_push_loss_matches_the_written_out_reference(k):
    for u in (pushing.initial_controls(speed=0.5), _controls(1), _controls(2)):
        want = _loss_from(_box_final(u, k), u)
        assert float(pushing.push_loss(u, k)) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_built_from_the_library_with_a_kinematic_pusher():
    step = pushing.push_step()
    assert isinstance(step, WithContact) and isinstance(step.integrator, SemiImplicitEuler)
    (spring,) = step.contacts
    assert isinstance(spring, PenaltySpring) and spring.kinematic == (0,)
    assert spring.plane.normal == (-1.0, 1.0)
    # the pusher goes exactly where its velocities take it, whatever the contact force
    u = _controls(3)
    x, v = rollout(step, pushing.initial_state(), {"k": jnp.asarray(1e4)}, u.shape[0], inputs=u)
    np.testing.assert_allclose(x[1:, 0], pushing.H * np.cumsum(u), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(v[1:, 0], u, rtol=1e-12, atol=1e-14)
    assert float(x[-1, 1]) > pushing.BOX_X0  # and the box was pushed


@pytest.mark.parametrize("k", [100.0, 1e3, 1e4])
def test_old_hand_written_step_converges_to_the_same_motion(k):
    # the update order changed (module docstring): the box's final position differs by
    # O(h) — at most 1.5 cm at the default h — and the difference halves with h
    u0 = 0.5
    diffs = []
    for h in (pushing.H, pushing.H / 2, pushing.H / 4):
        n = round(0.5 / h)
        u = jnp.full((n,), u0)
        x_new = _box_final(u, k, h=h)
        loss = float(pushing.push_loss(u, k, h=h))
        assert loss == pytest.approx(_loss_from(x_new, u, h), rel=1e-12)
        diffs.append(abs(x_new - _box_final(u, k, h=h, pusher_first=True)))
    assert diffs[0] < 0.015
    assert 0.4 < diffs[1] / diffs[0] < 0.6 and 0.4 < diffs[2] / diffs[1] < 0.6


@pytest.mark.parametrize("k", [10.0, 1e3])
def test_gradient_matches_finite_differences(k):
    u = _controls(4, n=20)
    g = jax.grad(pushing.push_loss)(u, k)
    fd = central_fd(lambda w: jnp.atleast_1d(pushing.push_loss(w, k)), u, eps=1e-6)[0]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)
    # and with respect to the stiffness, which the library reads from θ
    dk = jax.grad(pushing.push_loss, argnums=1)(u, k)
    fdk = (pushing.push_loss(u, k * (1 + 1e-6)) - pushing.push_loss(u, k * (1 - 1e-6))) / (2e-6 * k)
    assert float(dk) == pytest.approx(float(fdk), rel=1e-5, abs=1e-12)


def test_jit_vmap_grad():
    us = jnp.stack([_controls(s) for s in range(4)])
    f = jax.jit(jax.vmap(jax.value_and_grad(pushing.push_loss), in_axes=(0, None)))
    values, grads = f(us, 1e3)
    for i in range(4):
        assert float(values[i]) == pytest.approx(float(pushing.push_loss(us[i], 1e3)), rel=1e-12)
        np.testing.assert_allclose(grads[i], jax.grad(pushing.push_loss)(us[i], 1e3), rtol=1e-10)


def test_initial_controls_and_bad_input():
    u = pushing.initial_controls(7, speed=0.25)
    assert u.shape == (7,) and np.all(np.asarray(u) == 0.25)
    with pytest.raises(ValueError, match="k"):
        pushing.push_loss(u, 0.0)
    with pytest.raises(ValueError, match="num_steps"):
        pushing.initial_controls(0)
    with pytest.raises(ValueError, match="h"):
        pushing.push_step(h=-0.01)
