"""Smooth nonlinear test systems: pendulum, nonlinear (Duffing) spring, harmonic oscillator."""

from __future__ import annotations

import jax.numpy as jnp

from .._checks import Domain, check_finite, check_positive
from ..integrators import Integrator, SemiImplicitEuler, check_integrator_class
from .base import System


def _pendulum_accel(x, v, theta):
    return -theta["g_over_l"] * jnp.sin(x) - theta["damping"] * v


def _pendulum_accel_jacobian(x, v, theta):
    # theta raveled in key order: (damping, g_over_l)
    Ax = jnp.diag(jnp.atleast_1d(-theta["g_over_l"] * jnp.cos(x)))
    Av = -theta["damping"] * jnp.eye(jnp.size(x), dtype=Ax.dtype)
    At = jnp.stack([-jnp.ravel(v), -jnp.ravel(jnp.sin(x))], axis=1)
    return Ax, Av, At


def pendulum(
    h: float = 0.01,
    *,
    g_over_l: float = 9.81,
    damping: float = 0.0,
    angle0: float = 1.0,
    omega0: float = 0.0,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    r"""A pendulum :math:`\ddot φ = -(g/l)\sin φ - c\,\dot φ`, θ = {g_over_l, damping}.

    Energy per unit :math:`m l^2`: :math:`E = \dot φ^2/2 + (g/l)(1 - \cos φ)`.

    Examples:
        >>> from diffsim import rollout
        >>> from diffsim.systems import pendulum, pendulum_energy
        >>> sys = pendulum(h=0.01, angle0=1.0)
        >>> s = rollout(sys.step, sys.s0, sys.theta, 10_000, trajectory=False)
        >>> e0, eT = pendulum_energy(sys.s0, sys.theta), pendulum_energy(s, sys.theta)
        >>> abs(float(eT - e0)) < 0.02 * float(e0)  # semi-implicit Euler: bounded, no drift
        True
    """
    check_positive("h", h)
    step = check_integrator_class(integrator)(
        _pendulum_accel, h=h, accel_jacobian=_pendulum_accel_jacobian
    )
    theta = {
        "g_over_l": check_finite("g_over_l", g_over_l),
        "damping": check_finite("damping", damping),
    }
    s0 = (check_finite("angle0", angle0), check_finite("omega0", omega0))
    return System("pendulum", step, s0, theta)


def pendulum_energy(state, theta):
    """Energy per unit :math:`m l^2` of :func:`pendulum`.

    Examples:
        >>> from diffsim.systems import pendulum, pendulum_energy
        >>> sys = pendulum(g_over_l=9.81, angle0=0.0, omega0=2.0)
        >>> round(float(pendulum_energy(sys.s0, sys.theta)), 6)  # ω²/2 at the bottom
        2.0
    """
    x, v = state
    return 0.5 * v**2 + theta["g_over_l"] * (1 - jnp.cos(x))


def _duffing_accel(x, v, theta):
    return -(theta["k"] * x + theta["k3"] * x**3) / theta["m"] - theta["c"] * v / theta["m"]


def _duffing_accel_jacobian(x, v, theta):
    # theta raveled in key order: (c, k, k3, m)
    c, k, k3, m = theta["c"], theta["k"], theta["k3"], theta["m"]
    Ax = jnp.diag(jnp.atleast_1d(-(k + 3 * k3 * x**2) / m))
    Av = -(c / m) * jnp.eye(jnp.size(x), dtype=Ax.dtype)
    a = _duffing_accel(x, v, theta)
    At = jnp.stack(
        [-jnp.ravel(v) / m, -jnp.ravel(x) / m, -(jnp.ravel(x) ** 3) / m, -jnp.ravel(a) / m],
        axis=1,
    )
    return Ax, Av, At


def nonlinear_spring(
    h: float = 0.01,
    *,
    m: float = 1.0,
    k: float = 4.0,
    k3: float = 2.0,
    c: float = 0.0,
    x0: float = 1.0,
    v0: float = 0.0,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    r"""A mass on a hardening (Duffing) spring: :math:`m\ddot x = -k x - k_3 x^3 - c\dot x`.

    Examples:
        >>> from diffsim.systems import nonlinear_spring
        >>> sys = nonlinear_spring()
        >>> sorted(sys.theta)
        ['c', 'k', 'k3', 'm']
    """
    check_positive("h", h)
    check_positive("m", m)  # the acceleration divides by m
    step = check_integrator_class(integrator)(
        _duffing_accel, h=h, accel_jacobian=_duffing_accel_jacobian
    )
    theta = {
        "m": check_finite("m", m),
        "k": check_finite("k", k),
        "k3": check_finite("k3", k3),
        "c": check_finite("c", c),
    }
    s0 = (check_finite("x0", x0), check_finite("v0", v0))
    return System(
        "nonlinear_spring",
        step,
        s0,
        theta,
        domains=(("m", Domain(0.0, open_lower=True, what="a mass")),),
    )


def harmonic_oscillator(
    h: float = 0.01,
    *,
    omega: float = 1.0,
    x0: float = 1.0,
    v0: float = 0.0,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    r""":math:`\ddot x = -ω^2 x`; closed form :math:`x(t) = x_0\cos ωt + (v_0/ω)\sin ωt`.

    Examples:
        >>> import math
        >>> from diffsim import rollout
        >>> from diffsim.systems import harmonic_oscillator
        >>> sys = harmonic_oscillator(h=1e-3, omega=2.0)
        >>> x, v = rollout(sys.step, sys.s0, sys.theta, 1000, trajectory=False)
        >>> abs(float(x) - math.cos(2.0)) < 2e-3  # x(1 s) = cos(ω t)
        True
    """
    check_positive("h", h)
    step = check_integrator_class(integrator)(lambda x, v, th: -(th["omega"] ** 2) * x, h=h)
    return System(
        "harmonic_oscillator",
        step,
        (check_finite("x0", x0), check_finite("v0", v0)),
        {"omega": check_finite("omega", omega)},
    )
