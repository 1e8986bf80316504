"""The three routes to rollout Jacobians agree, on nonlinear systems, and match FD."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from conftest import INTEGRATORS, central_fd
from diffsim import adjoint_vjp, forward_sensitivity, rollout, rollout_jacobian, step_jacobian
from diffsim.systems import nonlinear_spring, pendulum

SYSTEMS = {
    "pendulum": lambda integ: pendulum(
        h=0.02, damping=0.3, angle0=2.0, omega0=0.5, integrator=integ
    ),
    "nonlinear_spring": lambda integ: nonlinear_spring(
        h=0.01, c=0.2, x0=1.2, v0=-0.3, integrator=integ
    ),
}
METHODS = ("autodiff", "product", "forward", "adjoint")


def _fd_rollout_jacobians(sys, T):
    s_flat, unravel_s = ravel_pytree(sys.s0)
    p_flat, unravel_p = ravel_pytree(sys.theta)

    def final(sf, pf):
        return ravel_pytree(rollout(sys.step, unravel_s(sf), unravel_p(pf), T, trajectory=False))[0]

    return central_fd(lambda sf: final(sf, p_flat), s_flat), central_fd(
        lambda pf: final(s_flat, pf), p_flat
    )


@pytest.mark.parametrize("system", sorted(SYSTEMS))
@pytest.mark.parametrize("integrator", sorted(INTEGRATORS))
def test_all_routes_agree_with_each_other_and_with_finite_differences(system, integrator):
    sys = SYSTEMS[system](INTEGRATORS[integrator])
    T = 150
    results = {m: rollout_jacobian(sys.step, sys.s0, sys.theta, T, method=m) for m in METHODS}
    ref_s, ref_p = results["autodiff"]
    # the map is genuinely nonlinear here: the Jacobian is far from the identity
    assert np.linalg.norm(np.asarray(ref_s) - np.eye(2)) > 0.1
    for m in METHODS[1:]:
        np.testing.assert_allclose(results[m][0], ref_s, rtol=1e-9, atol=1e-11, err_msg=m)
        np.testing.assert_allclose(results[m][1], ref_p, rtol=1e-9, atol=1e-11, err_msg=m)
    fd_s, fd_p = _fd_rollout_jacobians(sys, T)
    np.testing.assert_allclose(ref_s, fd_s, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ref_p, fd_p, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("integrator", sorted(INTEGRATORS))
def test_analytic_step_jacobian_equals_autodiff_step_jacobian(integrator):
    sys = SYSTEMS["nonlinear_spring"](INTEGRATORS[integrator])
    state = (jnp.asarray(0.7), jnp.asarray(-1.3))
    A_auto, B_auto = step_jacobian(sys.step, state, sys.theta)
    A_an, B_an = sys.step.jacobian(state, sys.theta)
    np.testing.assert_allclose(A_an, A_auto, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(B_an, B_auto, rtol=1e-12, atol=1e-14)


def test_vector_state_with_autodiff_acceleration_jacobian():
    # two coupled nonlinear oscillators; no accel_jacobian given: the integrator
    # differentiates the acceleration only (never the rollout)
    from diffsim.integrators import VelocityVerlet

    def accel(x, v, th):
        return -th["k"] * jnp.sin(x) + th["coupling"] * (x[::-1] - x) - 0.1 * v

    step = VelocityVerlet(accel, h=0.02)
    s0 = (jnp.array([0.3, -1.0]), jnp.array([0.0, 0.5]))
    th = {"k": jnp.array([4.0, 2.0]), "coupling": jnp.asarray(0.7)}
    ref = rollout_jacobian(step, s0, th, 80, method="autodiff")
    for m in METHODS[1:]:
        got = rollout_jacobian(step, s0, th, 80, method=m)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-9, atol=1e-12)
    assert ref[0].shape == (4, 4) and ref[1].shape == (4, 3)


def test_routes_agree_with_per_step_inputs():
    from diffsim.integrators import SemiImplicitEuler

    def accel(x, v, th, u):
        return -th["k"] * x**3 + u

    def accel_jac(x, v, th, u):
        n = x.size
        return (
            jnp.diag(jnp.atleast_1d(-3 * th["k"] * x**2)),
            jnp.zeros((n, n)),
            jnp.atleast_2d(-(x**3)).reshape(n, 1),
        )

    step = SemiImplicitEuler(accel, h=0.05, accel_jacobian=accel_jac)
    T = 60
    u = jnp.sin(jnp.linspace(0, 3, T))
    s0 = (jnp.asarray(0.5), jnp.asarray(0.0))
    th = {"k": jnp.asarray(2.0)}
    ref = rollout_jacobian(step, s0, th, T, inputs=u, method="autodiff")
    for m in METHODS[1:]:
        got = rollout_jacobian(step, s0, th, T, inputs=u, method=m)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-10)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-10)


def test_adjoint_vjp_is_the_gradient_of_a_loss_of_the_final_state():
    sys = SYSTEMS["pendulum"](INTEGRATORS["rk4"])
    T = 120

    def loss(s0, th):
        x, v = rollout(sys.step, s0, th, T, trajectory=False)
        return (x - 0.3) ** 2 + 0.5 * v**2

    g_s0, g_th = jax.grad(loss, argnums=(0, 1))(sys.s0, sys.theta)
    xT, vT = rollout(sys.step, sys.s0, sys.theta, T, trajectory=False)
    cot = (2 * (xT - 0.3), vT)
    a_s0, a_th = adjoint_vjp(sys.step, sys.s0, sys.theta, T, cot)
    np.testing.assert_allclose(ravel_pytree(a_s0)[0], ravel_pytree(g_s0)[0], rtol=1e-10)
    np.testing.assert_allclose(ravel_pytree(a_th)[0], ravel_pytree(g_th)[0], rtol=1e-10)


def test_forward_sensitivity_with_user_supplied_jacobian():
    # a plain function step (not an integrator) with a hand-written Jacobian:
    # the logistic-like map s' = s + h r s (1 - s), θ = r
    h = 0.1

    def step(s, r):
        return s + h * r * s * (1 - s)

    def jac(s, r):
        return jnp.reshape(1 + h * r * (1 - 2 * s), (1, 1)), jnp.reshape(h * s * (1 - s), (1, 1))

    ref = rollout_jacobian(step, 0.1, 2.0, 40)
    fwd = forward_sensitivity(step, 0.1, 2.0, 40, step_jacobian=jac)
    adj = rollout_jacobian(step, 0.1, 2.0, 40, method="adjoint", step_jacobian=jac)
    for got in (fwd, adj):
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-10)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-10)


def test_analytic_routes_need_a_jacobian_and_check_its_shape():
    step = lambda s, p: s * p  # noqa: E731
    with pytest.raises(ValueError, match="step_jacobian"):
        rollout_jacobian(step, 1.0, 0.5, 3, method="forward")
    bad = lambda s, p: (jnp.eye(2), jnp.eye(2))  # noqa: E731
    with pytest.raises(ValueError, match=r"shape \(1, 1\)"):
        rollout_jacobian(step, 1.0, 0.5, 3, method="adjoint", step_jacobian=bad)
    with pytest.raises(ValueError, match="method must be one of"):
        rollout_jacobian(step, 1.0, 0.5, 3, method="reverse")
