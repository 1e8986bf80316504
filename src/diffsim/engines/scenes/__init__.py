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

Examples:
    >>> from diffsim.engines import scenes
    >>> list(scenes.SCENES)
    ['free_flight', 'wall', 'pushing', 'cartpole']
    >>> scenes.WALL_STEPS, scenes.WALL_TARGET, scenes.G
    (180, 10.0, 9.81)
    >>> scenes.PUSHING_STEPS, scenes.PUSHING_TARGET, scenes.PUSHING_RAMP, scenes.PUSHING_TOLERANCE
    (100, 0.8, 0.6, 0.02)
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

    Examples:
        >>> import pathlib
        >>> from diffsim.engines import scenes
        >>> pathlib.Path(scenes.path("wall")).name, pathlib.Path(scenes.path("wall")).is_file()
        ('wall.xml', True)
    """
    if name not in SCENES:
        raise ValueError(f"scene must be one of {', '.join(SCENES)}, got {name!r}")
    return str(Path(__file__).with_name(f"{name}.xml"))


def launch_velocity(v0: ArrayLike) -> Array:
    """The wall scene's initial ``qvel`` (6,): speed v₀ at 45° in the x–z plane.

    Examples:
        >>> from diffsim.engines import scenes
        >>> [round(float(c), 4) for c in scenes.launch_velocity(2.0)]  # (vx, vy, vz, ωx, ωy, ωz)
        [1.4142, 0.0, 1.4142, 0.0, 0.0, 0.0]
    """
    c = jnp.asarray(v0) / math.sqrt(2.0)
    z = jnp.zeros_like(c)
    return jnp.stack([c, z, c, z, z, z])


def wall_landing_x(qpos: Array) -> Array:
    """Landing x from a wall trajectory's ``qpos`` (T + 1, 7): where the ball's centre first
    comes back down through the launch height z = 0, interpolated linearly inside the step;
    the final x if it never does (a ball resting on the wall's top).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.engines import scenes
        >>> qpos = jnp.zeros((3, 7)).at[:, 0].set(jnp.array([8.0, 9.0, 10.0]))
        >>> qpos = qpos.at[:, 2].set(jnp.array([0.5, 0.25, -0.25]))  # down through z = 0 at step 2
        >>> float(scenes.wall_landing_x(qpos))
        9.5
    """
    x, z = qpos[:, 0], qpos[:, 2]
    below = z[1:] < 0
    landed = jnp.any(below)
    k = jnp.argmax(below) + 1
    x0, x1, z0, z1 = x[k - 1], x[k], z[k - 1], z[k]
    dz = jnp.where(landed, z0 - z1, 1.0)
    return jnp.where(landed, x0 + (x1 - x0) * z0 / dz, x[-1])


def wall_loss(step: Any, *, num_steps: int = WALL_STEPS, target: float = WALL_TARGET):
    """The wall scene's loss of the launch speed: :math:`L(v_0) = (x_{land} − 10)^2`.

    Examples:
        >>> from diffsim.engines import mjx, scenes
        >>> loss = scenes.wall_loss(mjx.load(scenes.path("wall")))  # compiles on its first call
        >>> callable(loss)
        True
    """

    def loss(v0: Array) -> Array:
        traj = step.simulate({"qvel0": launch_velocity(v0)}, num_steps, trajectory=True)
        return (wall_landing_x(traj.qpos) - target) ** 2

    return loss


def pushing_controls(theta: ArrayLike, num_steps: int = PUSHING_STEPS) -> Array:
    """The finger's target positions (num_steps, 1): from 0 linearly to θ over the first
    :data:`PUSHING_RAMP` of the horizon, then held.

    Examples:
        >>> from diffsim.engines import scenes
        >>> u = scenes.pushing_controls(0.6)
        >>> u.shape, round(float(u[29, 0]), 4), round(float(u[-1, 0]), 4)  # ramp, then held
        ((100, 1), 0.3, 0.6)
    """
    t = jnp.arange(1, num_steps + 1) / (PUSHING_RAMP * num_steps)
    return (jnp.asarray(theta) * jnp.minimum(t, 1.0))[:, None]


def pushing_loss(step: Any, *, num_steps: int = PUSHING_STEPS, target: float = PUSHING_TARGET):
    """The pushing scene's loss of the finger's final target θ (m):
    :math:`L(θ) = (x_{box,T} − 0.8)^2` (``qpos[1]`` is the box's x).

    Examples:
        >>> from diffsim.engines import mjx, scenes
        >>> loss = scenes.pushing_loss(mjx.load(scenes.path("pushing")))  # loss(final target)
        >>> callable(loss)
        True
    """
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
