r"""Validated MJCF scenes with known answers, for :mod:`diffsim.engines.mjx`.

Each scene is an MJCF file beside this module (:func:`path`) and, where the scene has a
decision variable, the loss the tests, the benchmark and the README use:

``free_flight``
    a ball thrown with no contact; MuJoCo's Euler is semi-implicit Euler, so
    :math:`∂x_T/∂v_0 = T h` exactly (the article's [[1, T h], [0, 1]]).
``wall``
    the article's wall in 3-D: launch at 45° with speed v₀ toward a target 10 m away over a
    2 m wall at 6 m. Clearing it, the ball lands at :math:`v_0^2/g` (to 1 % at h = 0.01 s);
    hitting it, it drops at its foot (x ≈ 5.8 m): a plateau, then a cliff.
    :func:`wall_loss` is :math:`(x_{land} − 10)^2`.
``pushing``
    Suh et al.'s pushing: a position-servoed finger pushes a box with friction toward
    x = 0.8 m; the decision variable is the finger's final target. Short of the box the
    loss is flat (zero exact gradient). :func:`pushing_loss`.
``cartpole``
    a cart-pole without contact: smooth, the exact gradient is to be trusted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

SCENES: dict[str, str] = {
    "free_flight": "a ball in free flight (no contact): ∂x_T/∂v0 = T h",
    "wall": "the article's wall in 3-D: launch at 45°, 2 m wall at 6 m, target at 10 m",
    "pushing": "Suh et al.'s pushing: a servoed finger pushes a box with friction to x = 0.8",
    "cartpole": "a cart-pole without contact: smooth, gradients to be trusted",
}
"""Scene name → what it is. Each has an MJCF file ``<name>.xml`` here."""

WALL_STEPS = 180
"""Horizon of the wall scene (1.8 s at h = 0.01 s: every throw up to 12 m/s has landed)."""
WALL_TARGET = 10.0
"""The wall scene's target x, m."""
G = 9.81

PUSHING_STEPS = 100
"""Horizon of the pushing scene (1 s at h = 0.01 s)."""
PUSHING_TARGET = 0.8
"""Where the box (initially at x = 0.5 m) is to end, m."""
PUSHING_RAMP = 0.6
"""The finger's target moves linearly to θ over this fraction of the horizon, then holds."""
PUSHING_TOLERANCE = 0.02
"""A push succeeds when the box ends within this distance of the target, m."""


def path(name: str) -> str:
    """The MJCF file of scene ``name`` (one of :data:`SCENES`).

    Raises:
        ValueError: unknown ``name`` (the message lists the scenes).
    """
    if name not in SCENES:
        raise ValueError(f"scene must be one of {', '.join(SCENES)}, got {name!r}")
    return str(Path(__file__).with_name(f"{name}.xml"))


def launch_velocity(v0: ArrayLike) -> Array:
    """The wall scene's initial ``qvel`` (6,): speed v₀ at 45° in the x–z plane."""
    c = jnp.asarray(v0) / math.sqrt(2.0)
    z = jnp.zeros_like(c)
    return jnp.stack([c, z, c, z, z, z])


def wall_landing_x(qpos: Array) -> Array:
    """Landing x from a wall trajectory's ``qpos`` (T + 1, 7): where the ball's centre first
    comes back down through the launch height z = 0, interpolated linearly inside the step;
    the final x if it never does (a ball resting on the wall's top)."""
    x, z = qpos[:, 0], qpos[:, 2]
    below = z[1:] < 0
    landed = jnp.any(below)
    k = jnp.argmax(below) + 1
    x0, x1, z0, z1 = x[k - 1], x[k], z[k - 1], z[k]
    dz = jnp.where(landed, z0 - z1, 1.0)
    return jnp.where(landed, x0 + (x1 - x0) * z0 / dz, x[-1])


def wall_loss(step: Any, *, num_steps: int = WALL_STEPS, target: float = WALL_TARGET):
    """The wall scene's loss of the launch speed: :math:`L(v_0) = (x_{land} − 10)^2`."""

    def loss(v0: Array) -> Array:
        traj = step.simulate({"qvel0": launch_velocity(v0)}, num_steps, trajectory=True)
        return (wall_landing_x(traj.qpos) - target) ** 2

    return loss


def pushing_controls(theta: ArrayLike, num_steps: int = PUSHING_STEPS) -> Array:
    """The finger's target positions (num_steps, 1): from 0 linearly to θ over the first
    :data:`PUSHING_RAMP` of the horizon, then held."""
    t = jnp.arange(1, num_steps + 1) / (PUSHING_RAMP * num_steps)
    return (jnp.asarray(theta) * jnp.minimum(t, 1.0))[:, None]


def pushing_loss(step: Any, *, num_steps: int = PUSHING_STEPS, target: float = PUSHING_TARGET):
    """The pushing scene's loss of the finger's final target θ (m):
    :math:`L(θ) = (x_{box,T} − 0.8)^2` (``qpos[1]`` is the box's x)."""
    box0 = float(step.mj_model.body("box").pos[0])

    def loss(theta: Array) -> Array:
        sT = step.simulate({"ctrl": pushing_controls(theta, num_steps)}, num_steps)
        return (sT.qpos[1] + box0 - target) ** 2

    return loss


__all__ = [
    "PUSHING_RAMP",
    "PUSHING_STEPS",
    "PUSHING_TARGET",
    "PUSHING_TOLERANCE",
    "SCENES",
    "WALL_STEPS",
    "WALL_TARGET",
    "launch_velocity",
    "path",
    "pushing_controls",
    "pushing_loss",
    "wall_landing_x",
    "wall_loss",
]
