"""The first-order batched gradient (FoBG): pathwise / reparametrised."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array

from .._sharding import check_devices, device_mesh
from .._sigma import DEFAULT_SIGMA, check_sigma
from ._common import as_count, call_args, samples_field
from ._noise import Noise, noise_for
from ._rows import FORWARD_MODE_MAX_DIM as FORWARD_MODE_MAX_DIM
from ._rows import first_order_samples as first_order_samples
from .base import (
    NUM_SAMPLES,
    SIGMA,
    Cost,
    GradientEstimate,
    Loss,
    SmoothingEstimator,
    make_result,
    mean_and_stats,
)


@eqx.filter_jit
def _first(noise: Noise, theta, key, num_samples, mesh) -> GradientEstimate:
    g = noise.first_rows(theta, key, num_samples, mesh)
    _, unravel = noise.flat(theta)
    mean, se, var = mean_and_stats(g)
    return make_result(
        unravel,
        mean,
        se,
        loss_evaluations=0,
        grad_evaluations=num_samples,
        sigma_used=noise.largest_sigma(theta),
        variance=var,
    )


class FirstOrder(SmoothingEstimator):
    r"""FoBG: :math:`\hat g^1 = \frac1N \sum_i ∇L(θ + σ z_i)`, :math:`z_i \sim N(0, I)`.

    Unbiased for ∇F only when L is locally Lipschitz. Across a jump of size ΔL_j at t_j
    it misses the term :math:`\sum_j ΔL_j\, φ_σ(t_j − θ)` entirely — biased, possibly
    with zero sample variance (e.g. identically 0 for a Heaviside step). Under stiff
    contact its variance grows with the stiffness.

    Args:
        sigma: σ, the smoothing standard deviation in θ's units (finite, > 0; default
            :data:`diffsim.estimators.DEFAULT_SIGMA`, ``Relative(0.05)``: 5 % of each |θ_i|): a
            number, a pytree like θ (one scale per component) or
            :class:`~diffsim.estimators.Relative` (a fraction of each |θ_i|).
        num_samples: N, gradient evaluations (>= 2).
        devices: where the samples run (static): ``None`` (every device when there are
            several), a count, devices or a ``Mesh`` (:func:`diffsim.sharding.device_mesh`); the
            estimate is the one-device estimate to float rounding (same key).

    Raises:
        ValueError: σ <= 0 or not finite; ``num_samples < 2``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import FirstOrder
        >>> key = jax.random.PRNGKey(0)
        >>> r = FirstOrder(sigma=0.1, num_samples=64)(lambda t: jnp.sum(t**2),
        ...                                           jnp.array([1.0, -2.0]), key)
        >>> bool(jnp.all(jnp.abs(r.estimate - jnp.array([2.0, -4.0])) < 3 * r.std_error))
        True
        >>> int(r.grad_evaluations), r.reports
        (64, ('sigma_used', 'variance'))
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0)  # smoothed gradient at 0: 3.99
        >>> r = FirstOrder(sigma=0.1)(step, jnp.asarray(0.0), key)
        >>> float(r.estimate), float(r.std_error)  # blind to the jump, and sure of it
        (0.0, 0.0)
    """

    label = "FoBG (first order)"
    short_label = "FoBG"
    sharded = True
    summary = "average of exact gradients at perturbed θ: low variance, blind to jumps"
    options = (SIGMA, NUM_SAMPLES)
    reports = ("sigma_used", "variance")

    sigma: Any = eqx.field(
        converter=lambda v: check_sigma("sigma", v), default_factory=lambda: DEFAULT_SIGMA
    )
    num_samples: int = eqx.field(static=True, converter=as_count, default=32)
    devices: Any = eqx.field(static=True, converter=check_devices, default=None)

    def __check_init__(self) -> None:
        samples_field("num_samples", self.num_samples)

    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        theta = call_args(theta, key, randomized=True, num_samples=self.num_samples, copies=3)
        noise = noise_for(loss, theta, self.sigma)
        return _first(noise, theta, key, self.num_samples, device_mesh(self.devices))

    def cost(self, dim: int) -> Cost:
        """N gradients at perturbed θ, vmapped."""
        return Cost(0, self.num_samples, self.num_samples)
