"""Central finite differences: a check, one coordinate at a time."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from .._policy import rollouts_per_call
from .._sharding import BASIS_CHUNK, basis_map
from ._common import call_args, positive_field, warn_resolution
from .base import Cost, Estimator, GradientEstimate, Loss, Option, flatten_loss, make_result


@eqx.filter_jit
def _central(loss: Loss, theta: Any, step: Array) -> GradientEstimate:
    f, x, unravel = flatten_loss(loss, theta)
    d = x.shape[0]
    h = jnp.asarray(step, x.dtype)
    fp = basis_map(lambda e: f(x + e), d, h, x.dtype)  # at most BASIS_CHUNK rows at once
    fm = basis_map(lambda e: f(x - e), d, h, x.dtype)
    g = (fp - fm) / (2 * h)
    calls = 2 * d * rollouts_per_call(loss)  # in rollouts, as every count
    return make_result(unravel, g, jnp.zeros_like(g), loss_evaluations=calls, grad_evaluations=0)


class FiniteDifference(Estimator):
    r"""Central differences :math:`∂_i L ≈ (L(θ + δ e_i) − L(θ − δ e_i)) / (2δ)`.

    Truncation error O(δ²) on smooth losses; across a jump within δ it returns
    ΔL/(2δ), large. ``2 d`` loss evaluations for ``d`` parameters (vmapped, at most 1,024
    at once); the key is ignored.

    Args:
        step: δ, finite and > 0 (default 1e-3, a compromise for float32).

    Raises:
        ValueError: ``step`` not finite or <= 0.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.estimators import FiniteDifference
        >>> fd = FiniteDifference(step=1e-3)
        >>> r = fd(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]))  # no key needed
        >>> [round(float(g), 3) for g in r.estimate], int(r.loss_evaluations)
        ([2.0, -4.0], 4)
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0)
        >>> round(float(fd(step, jnp.asarray(0.0)).estimate), 1)  # ΔL / (2δ) across the jump
        500.0
    """

    label = "central finite differences"
    short_label = "FD"
    summary = "central differences, one coordinate at a time: a check"
    options = (
        Option("step", "δ, the finite-difference step", float, "θ's units", 0.0, None, True),
    )
    diagnostic = True

    step: Array = eqx.field(converter=lambda v: positive_field("step", v), default=1e-3)

    def __call__(self, loss: Loss, theta: Any, key: Array | None = None) -> GradientEstimate:
        theta = call_args(theta, key, randomized=False)
        warn_resolution("step", self.step, theta)
        return _central(loss, theta, self.step)

    def cost(self, dim: int) -> Cost:
        """``2 d`` loss evaluations, ``d`` at a time (one ``vmap`` per sign), at most
        :data:`~diffsim._sharding.BASIS_CHUNK` when d is larger (chunks in a ``lax.map``)."""
        return Cost(2 * dim, 0, min(dim, BASIS_CHUNK))
