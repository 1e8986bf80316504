"""The exact gradient by autodiff: what a naive differentiable simulator returns."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._policy import rollouts_per_call
from ._common import call_args
from .base import Cost, Estimator, GradientEstimate, Loss, flatten_loss, make_result


@eqx.filter_jit
def _exact(loss: Loss, theta: Any) -> GradientEstimate:
    f, x, unravel = flatten_loss(loss, theta)
    g = jax.grad(f)(x)
    # one gradient of the loss: on a policy objective, one per episode of its batch
    calls = rollouts_per_call(loss)
    return make_result(unravel, g, jnp.zeros_like(g), loss_evaluations=0, grad_evaluations=calls)


class Exact(Estimator):
    """∇L(θ) by reverse-mode autodiff; the key is ignored.

    On a plateau (the wall demo's 7.67 < v₀ < 9.396) this is exactly 0 and gradient
    descent never moves; at a jump it is the one-sided derivative and says nothing of the
    jump. ``std_error`` is 0, one gradient evaluation (on a
    :class:`~diffsim.policies.PolicyObjective`, one per initial state of its batch: every
    count is in rollouts, :func:`~diffsim.policies.rollouts_per_call`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> r = Exact()(lambda t: jnp.sum(t**2), jnp.array([1.0, 2.0]), jax.random.PRNGKey(0))
        >>> r.estimate.tolist()
        [2.0, 4.0]
    """

    label = "exact (autodiff)"
    short_label = "exact"
    summary = "∇L(θ) by autodiff: what a naive differentiable simulator returns"

    def __call__(self, loss: Loss, theta: Any, key: Array | None = None) -> GradientEstimate:
        return _exact(loss, call_args(theta, key, randomized=False))

    def cost(self, dim: int) -> Cost:
        """One gradient evaluation (of a loss whose call is one rollout)."""
        return Cost(0, 1, 1)
