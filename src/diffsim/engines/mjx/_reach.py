"""The loss ``diffsim diagnose --mjcf`` examines: a body's reach after T steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
from jaxtyping import Array

from ..._checks import INT32_MAX, check_int

# the step is typed as Any here: this module sits below ``_step`` (which imports it), so
# naming MjxStep would close an import circle inside the package
MjxStep = Any


class ReachLoss(NamedTuple):
    """:meth:`MjxStep.reach_loss`: ``loss(x) = ‖p_T(x) − target‖²`` of one body after T
    steps, the point ``x0`` it is examined at, and the same loss at half the time step over
    2T steps (the doctor's discretization check).

    Example:
        >>> from diffsim.engines import mjx, scenes
        >>> r = mjx.load(scenes.path("free_flight")).reach_loss(5)
        >>> r.body, r.wrt, r.x0.shape, r.target.shape
        ('ball', 'qvel0', (6,), (3,))
    """

    loss: Callable[[Array], Array]
    x0: Array
    half_step_loss: Callable[[Array], Array]
    body: str
    wrt: str
    target: Array


def reach_loss(step: MjxStep, num_steps: int, wrt: str, body: str | None, target: Any) -> ReachLoss:
    """:meth:`MjxStep.reach_loss` (its arguments and the errors it raises)."""
    num_steps = check_int("num_steps", num_steps, minimum=1)
    if num_steps > INT32_MAX // 2:  # its half-step twin runs 2 · num_steps (int32 counter)
        raise ValueError(f"num_steps must be at most {INT32_MAX // 2}, got {num_steps}")
    if wrt not in ("qvel0", "qpos0", "ctrl"):
        raise ValueError(f"wrt must be 'qvel0', 'qpos0' or 'ctrl', got {wrt!r}")
    if body is None:
        body = step.free_body()
        if body is None:
            raise ValueError("the model has no body with a free joint: name one (body=...)")
    step.body_id(body)
    s0 = step.initial_state()
    dtype = s0.qpos.dtype
    if target is None:
        goal = step.body_position(s0, body)
    else:
        goal = jnp.asarray(target, dtype)
        if goal.shape != (3,) or not bool(jnp.all(jnp.isfinite(goal))):
            raise ValueError(f"target must be three finite numbers (metres), got {target!r}")
    if wrt == "ctrl":
        if step.nu == 0:
            raise ValueError("the model has no actuators: wrt='ctrl' has nothing to differentiate")
        x0 = jnp.zeros((num_steps, step.nu), dtype)
    else:
        x0 = s0.qpos if wrt == "qpos0" else s0.qvel

    def loss_at(at: MjxStep, n: int) -> Callable[[Array], Array]:
        def loss(x: Array) -> Array:  # controls held for n / num_steps steps each
            x = jnp.repeat(x, n // num_steps, axis=0) if wrt == "ctrl" else x
            sT = at.simulate({wrt: x}, n)
            return jnp.sum((at.body_position(sT, body) - goal) ** 2)

        return loss

    half = loss_at(step.with_time_step(step.h / 2), 2 * num_steps)
    return ReachLoss(loss_at(step, num_steps), x0, half, body, wrt, goal)
