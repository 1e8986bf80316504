r"""Stiff pushing (Suh et al. 2022): a kinematic pusher drives a box through a penalty spring.

State ``(x_p, x_b, v_b)``: pusher position, box position and velocity (m, m/s). The
decision is the pusher's velocity on each of the T steps, :math:`u_t`. Per step
(semi-implicit Euler, step h, box mass m, damping c):

.. math::
    f = k\,\max(x_p + u_t h - x_b, 0), \quad
    v_b ← v_b + h (f - c v_b)/m, \quad x_b ← x_b + h v_b, \quad x_p ← x_p + u_t h.

The contact force is continuous but its slope k grows with the stiffness: the FoBG
variance grows with k while the ZoBG variance does not (it only sees loss values).
Stable for :math:`h\sqrt{k/m} < 2`; the defaults (h = 0.01, m = 1) allow k up to 10⁴.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_int, check_positive

H = 0.01
NUM_STEPS = 50
MASS = 1.0
DAMPING = 10.0
BOX_X0 = 0.2
TARGET = 0.5
EFFORT = 1e-3


def push_step(
    state: tuple, k: Array, u: Array, *, h: float = H, mass: float = MASS, damping: float = DAMPING
) -> tuple:
    """One semi-implicit Euler step of pusher and box (see the module docstring)."""
    xp, xb, vb = state
    xp = xp + u * h
    f = k * jnp.maximum(xp - xb, 0.0)
    vb = vb + h * (f - damping * vb) / mass
    return (xp, xb + h * vb, vb)


def push_loss(
    u: Array, k: float, *, target: float = TARGET, effort: float = EFFORT, h: float = H
) -> Array:
    r"""Loss of the pusher velocities ``u`` (shape (T,)):
    :math:`(x_{b,T} - x^*)^2 + ε_u h \sum_t u_t^2`.

    Args:
        u: pusher velocity per step (m/s), shape (T,).
        k: contact stiffness (N/m, > 0).
        target: where the box should end (m).
        effort: weight of the control effort.
        h: time step (s).
    """
    check_positive("k", k)
    u = jnp.asarray(u)
    s0 = (jnp.zeros((), u.dtype), jnp.asarray(BOX_X0, u.dtype), jnp.zeros((), u.dtype))
    (_, xb, _), _ = jax.lax.scan(lambda s, ut: (push_step(s, k, ut, h=h), None), s0, u)
    return (xb - target) ** 2 + effort * h * jnp.sum(u**2)


def initial_controls(num_steps: int = NUM_STEPS, speed: float = 0.0) -> Array:
    """Constant pusher velocity on every step (the start of the trajectory optimisation)."""
    num_steps = check_int("num_steps", num_steps, minimum=1)
    return jnp.full((num_steps,), speed, dtype=jnp.result_type(float))
