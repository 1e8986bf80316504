"""Noise on every step's input: the paper's policy setting for a rollout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxtyping import Array

from .._checks import check_int
from .._rollout import rollout


def rollout_input_loss(
    step: Callable[..., Any],
    s0: Any,
    theta: Any,
    num_steps: int,
    cost: Callable[[Any, Any], Array],
    *,
    checkpoint: Any = None,
) -> Callable[[Any], Array]:
    r"""A loss of the per-step inputs ``u`` (leading axis T): ``L(u) = cost(traj, u)``.

    ``traj = rollout(step, s0, theta, T, inputs=u)`` with ``s_{t+1} = f(s_t, θ, u_t)``.
    Any estimator applied to ``L`` at nominal inputs ``ū`` perturbs *every* step's input
    independently, :math:`u_t = ū_t + w_t`, :math:`w_t \sim N(0, σ^2 I)` — the noise
    model of Suh et al. for open-loop controls — and returns ∂F/∂ū for
    :math:`F(ū) = \mathbb E_w L(ū + w)`, a pytree like ``u``.

    Args:
        step: ``step(state, theta, u) -> state``.
        s0: initial state (pytree).
        theta: fixed parameters of the step (pytree), not perturbed.
        num_steps: T >= 1.
        cost: ``cost(trajectory, u) -> scalar``; ``trajectory`` has leading axis T + 1
            (index t is s_t).
        checkpoint: passed to :func:`diffsim.rollout`.

    Returns:
        ``L(u)``, a pure function ready for any :class:`Estimator`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import Exact, rollout_input_loss
        >>> step = lambda s, th, u: s + th * u
        >>> L = rollout_input_loss(step, 0.0, 1.0, 3, lambda tr, u: tr[-1] ** 2)
        >>> Exact()(L, jnp.ones(3), jax.random.PRNGKey(0)).estimate.tolist()
        [6.0, 6.0, 6.0]
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    if not callable(cost):
        raise TypeError(f"cost must be callable cost(trajectory, u) -> scalar, got {cost!r}")

    def loss(u: Any) -> Array:
        traj = rollout(step, s0, theta, num_steps, inputs=u, checkpoint=checkpoint)
        return cost(traj, u)

    return loss
