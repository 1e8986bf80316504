"""Integrators: convergence order, energy behaviour over 10^5 steps, closed forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import INTEGRATORS, central_fd
from diffsim import rollout
from diffsim.integrators import ExplicitEuler, ImplicitEuler, SemiImplicitEuler, VelocityVerlet
from diffsim.systems import harmonic_oscillator, pendulum, pendulum_energy


def _oscillator_error(integrator, h, t_end=2.0, omega=2.0):
    sys = harmonic_oscillator(h=h, omega=omega, x0=1.0, v0=0.5, integrator=integrator)
    T = round(t_end / h)
    x, v = rollout(sys.step, sys.s0, sys.theta, T, trajectory=False)
    x_true = np.cos(omega * t_end) + 0.5 / omega * np.sin(omega * t_end)
    v_true = -omega * np.sin(omega * t_end) + 0.5 * np.cos(omega * t_end)
    return float(np.hypot(x - x_true, v - v_true))


@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_empirical_convergence_order(name):
    integ = INTEGRATORS[name]
    base = 0.1 if integ.order < 4 else 0.2
    hs = base / 2 ** np.arange(4)
    errs = np.array([_oscillator_error(integ, h) for h in hs])
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    # stated tolerance: within 0.15 of the theoretical order
    assert abs(slope - integ.order) < 0.15, (name, slope, errs)


@pytest.mark.slow
@pytest.mark.parametrize("integ", [SemiImplicitEuler, VelocityVerlet])
def test_symplectic_energy_bounded_over_1e5_steps(integ):
    # nonlinear pendulum, large amplitude, 10^5 steps: energy error stays O(h^p), no drift
    sys = pendulum(h=0.05, angle0=2.5, integrator=integ)
    xs, vs = rollout(sys.step, sys.s0, sys.theta, 100_000)
    E = pendulum_energy((xs, vs), sys.theta)
    rel = np.abs(np.asarray(E) - float(E[0])) / float(E[0])
    # modified-energy theory: |E_h - E| = O(h^p); constants measured on this problem
    # are ~1.3 h (Euler) and ~2 h² (Verlet), asserted with headroom
    h = 0.05
    assert rel.max() < (2 * h if integ.order == 1 else 4 * h * h), rel.max()
    # no secular drift: the last tenth is no worse than the first tenth
    assert rel[-10_000:].max() < 1.5 * rel[:10_000].max() + 1e-12


def test_explicit_euler_energy_grows_and_implicit_euler_decays():
    # on x'' = -x: explicit Euler multiplies energy by (1 + h²) per step exactly,
    # implicit Euler divides it by (1 + h²)
    h, T = 0.05, 2000
    for integ, factor in ((ExplicitEuler, (1 + h * h) ** T), (ImplicitEuler, (1 + h * h) ** -T)):
        sys = harmonic_oscillator(h=h, omega=1.0, x0=1.0, v0=0.0, integrator=integ)
        x, v = rollout(sys.step, sys.s0, sys.theta, T, trajectory=False)
        np.testing.assert_allclose(0.5 * (x**2 + v**2) / 0.5, factor, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_constant_acceleration_closed_form(name):
    # every scheme here integrates x'' = a exactly except the Euler ones, whose error is known
    h, a, T = 0.1, -2.0, 20
    integ = INTEGRATORS[name]
    step = integ(lambda x, v, th: th * jnp.ones_like(x), h=h)
    x, v = rollout(step, (0.0, 1.0), a, T, trajectory=False)
    t = T * h
    np.testing.assert_allclose(v, 1.0 + a * t, rtol=1e-12)
    exact = t + 0.5 * a * t * t
    offset = {
        "semi_implicit_euler": 0.5 * a * h * t,
        "explicit_euler": -0.5 * a * h * t,
        "implicit_euler": 0.5 * a * h * t,
    }.get(name, 0.0)
    np.testing.assert_allclose(x, exact + offset, rtol=1e-12)


@pytest.mark.slow  # the default suite's budget (10 min on 2 cores): measured ~30-45 s alone
def test_implicit_euler_solves_the_nonlinear_equation_and_its_ift_gradient():
    sys = pendulum(h=0.2, angle0=2.0, omega0=1.0, integrator=ImplicitEuler)
    x1, v1 = sys.step(sys.s0, sys.theta)
    # the step satisfies the backward-Euler equations to rounding
    a1 = -sys.theta["g_over_l"] * jnp.sin(x1)
    np.testing.assert_allclose(v1, sys.s0[1] + 0.2 * a1, atol=1e-13)
    np.testing.assert_allclose(x1, sys.s0[0] + 0.2 * v1, atol=1e-13)

    def f(z):
        out = sys.step((z[0], z[1]), {"g_over_l": z[2], "damping": z[3]})
        return jnp.stack(out)

    z = jnp.array([2.0, 1.0, 9.81, 0.0])
    np.testing.assert_allclose(jax.jacrev(f)(z), central_fd(f, z), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(jax.jacfwd(f)(z), central_fd(f, z), rtol=1e-7, atol=1e-9)
    # the derivative comes from lax.custom_root (implicit function theorem), not from
    # unrolled Newton iterations: the linearised program has no while loop in it
    jaxpr = jax.make_jaxpr(jax.linearize(f, z)[1])(z)
    assert "while" not in str(jaxpr)


@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_controls_enter_the_acceleration(name):
    # x'' = u with u constant: same as constant acceleration
    integ = INTEGRATORS[name]
    step = integ(lambda x, v, th, u: u * jnp.ones_like(x), h=0.1)
    traj_u = rollout(step, (0.0, 0.0), 0.0, 10, inputs=jnp.full(10, 3.0), trajectory=False)
    step_c = integ(lambda x, v, th: th * jnp.ones_like(x), h=0.1)
    traj_c = rollout(step_c, (0.0, 0.0), 3.0, 10, trajectory=False)
    np.testing.assert_allclose(traj_u, traj_c, rtol=1e-12)


def test_an_integrator_must_declare_its_order():
    from diffsim.integrators import ExplicitIntegrator

    class NoOrder(ExplicitIntegrator):
        def scheme(self, x, v, theta, u, Dtheta):
            return x + self.h * v, v

    with pytest.raises(TypeError, match="NoOrder must declare its order of accuracy"):
        NoOrder(lambda x, v, th: 0.0 * x, h=0.1)

    class Declared(NoOrder):
        order = 1

    x1, v1 = Declared(lambda x, v, th: 0.0 * x, h=0.1)((1.0, 2.0), {})
    assert float(x1) == pytest.approx(1.2) and float(v1) == 2.0
