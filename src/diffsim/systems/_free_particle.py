"""The article's first system: a free particle under constant acceleration."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._checks import check_float, check_int, check_positive
from ..integrators import Integrator, SemiImplicitEuler, check_integrator_class
from .base import System


def _accel(x, v, theta):
    return theta["a"] * jnp.ones_like(x)


def _accel_jacobian(x, v, theta):
    n = jnp.size(x)
    z = jnp.zeros((n, n), jnp.result_type(x, float))
    return z, z, jnp.ones((n, 1), jnp.result_type(x, float))


def free_particle(
    h: float = 1 / 60,
    *,
    a: float = -9.81,
    x0: float = 0.0,
    v0: float = 1.0,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    """A particle with state ``(x, v)`` and constant acceleration ``theta = {"a": a}``.

    Args:
        h: time step in seconds (> 0).
        a: acceleration in m/s² (the parameter θ).
        x0, v0: default initial position (m) and velocity (m/s).
        integrator: integrator class (default: the article's semi-implicit Euler).

    Example:
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.1, a=0.0, v0=2.0)
        >>> [round(float(c), 6) for c in sys.step(sys.s0, sys.theta)]
        [0.2, 2.0]
    """
    check_positive("h", h)
    step = check_integrator_class(integrator)(_accel, h=h, accel_jacobian=_accel_jacobian)
    s0 = (jnp.asarray(check_float("x0", x0)), jnp.asarray(check_float("v0", v0)))
    return System("free_particle", step, s0, {"a": jnp.asarray(check_float("a", a))})


def free_particle_rollout_jacobian(num_steps: int, h: float) -> np.ndarray:
    """:math:`∂s_T/∂s_0 = J^T = [[1, T h], [0, 1]]` for semi-implicit Euler (any a).

    Examples:
        >>> from diffsim.systems import free_particle_rollout_jacobian
        >>> free_particle_rollout_jacobian(2, 0.5).tolist()  # [[1, T h], [0, 1]]
        [[1.0, 1.0], [0.0, 1.0]]
    """
    num_steps = check_int("num_steps", num_steps)
    check_positive("h", h)
    return np.array([[1.0, num_steps * h], [0.0, 1.0]])


def free_particle_parameter_jacobian(num_steps: int, h: float) -> np.ndarray:
    r""":math:`∂(x_T, v_T)/∂a = (h^2 T(T+1)/2,\ T h)` for semi-implicit Euler.

    Examples:
        >>> from diffsim.systems import free_particle_parameter_jacobian
        >>> free_particle_parameter_jacobian(2, 0.5).tolist()  # (h² T(T+1)/2, T h)
        [[0.75], [1.0]]
    """
    num_steps = check_int("num_steps", num_steps)
    check_positive("h", h)
    return np.array([[h * h * num_steps * (num_steps + 1) / 2], [num_steps * h]])
