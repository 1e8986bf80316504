r"""A double pendulum: the smallest chaotic system, where long-horizon gradients explode.

Two unit point masses on massless rods of unit length, angles from the vertical
:math:`q = (φ_1, φ_2)`, state ``(q, q̇)``, parameters ``θ = {"g": g}``. Equations of motion
(masses :math:`m_1 = m_2 = 1`, lengths :math:`l_1 = l_2 = 1`, :math:`Δ = φ_1 - φ_2`):

.. math::
    \ddot φ_1 = \frac{-3g\sin φ_1 - g\sin(φ_1 - 2φ_2)
                     - 2\sin Δ\,(\dot φ_2^2 + \dot φ_1^2\cos Δ)}{3 - \cos 2Δ},\qquad
    \ddot φ_2 = \frac{2\sin Δ\,(2\dot φ_1^2 + 2g\cos φ_1 + \dot φ_2^2\cos Δ)}{3 - \cos 2Δ}.

Its largest Lyapunov exponent at large swings is positive: the rollout Jacobian grows
exponentially with the horizon, so first-order gradients of long rollouts are useless.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .._checks import check_finite, check_positive
from ..integrators import RK4, Integrator, check_integrator_class
from .base import System


def _accel(q, qd, theta):
    g = theta["g"]
    p1, p2 = q[0], q[1]
    w1, w2 = qd[0], qd[1]
    d = p1 - p2
    den = 3 - jnp.cos(2 * d)
    a1 = (-3 * g * jnp.sin(p1) - g * jnp.sin(p1 - 2 * p2)
          - 2 * jnp.sin(d) * (w2**2 + w1**2 * jnp.cos(d))) / den  # fmt: skip
    a2 = 2 * jnp.sin(d) * (2 * w1**2 + 2 * g * jnp.cos(p1) + w2**2 * jnp.cos(d)) / den
    return jnp.stack([a1, a2])


def double_pendulum_energy(state, theta):
    """Total energy :math:`T + V` (unit masses and lengths).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import double_pendulum_energy
        >>> rest = (jnp.zeros(2), jnp.zeros(2))  # hanging at rest: V = −2g − g
        >>> round(float(double_pendulum_energy(rest, {"g": 9.81})), 2)
        -29.43
    """
    q, qd = state
    g = theta["g"]
    p1, p2 = q[..., 0], q[..., 1]
    w1, w2 = qd[..., 0], qd[..., 1]
    kinetic = w1**2 + 0.5 * w2**2 + w1 * w2 * jnp.cos(p1 - p2)
    potential = -2 * g * jnp.cos(p1) - g * jnp.cos(p2)
    return kinetic + potential


def double_pendulum(
    h: float = 0.01,
    *,
    g: float = 9.81,
    angles0: tuple[float, float] = (2.0, 2.5),
    rates0: tuple[float, float] = (0.0, 0.0),
    integrator: type[Integrator] = RK4,
) -> System:
    """A double pendulum (default: RK4, h = 0.01 s, released from large angles: chaotic).

    Example:
        >>> from diffsim.systems import double_pendulum
        >>> sys = double_pendulum()
        >>> [a.shape for a in sys.step(sys.s0, sys.theta)]
        [(2,), (2,)]
    """
    check_positive("h", h)
    step = check_integrator_class(integrator)(_accel, h=h)
    s0 = tuple(
        jnp.asarray(_pair(name, value), dtype=float)
        for name, value in (("angles0", angles0), ("rates0", rates0))
    )
    return System("double_pendulum", step, s0, {"g": check_finite("g", g)})


def _pair(name: str, value: Any) -> Any:
    """Two finite numbers (the two links), checked in the float dtype the state uses."""
    if np.shape(value) != (2,):
        raise ValueError(f"{name} must be two numbers (one per link), got {value!r}")
    return check_finite(name, value)
