"""The zeroth-order batched gradient (ZoBG): score function / REINFORCE."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array

from .._checks import check_bool
from .._sharding import check_devices, device_mesh
from .._sigma import DEFAULT_SIGMA, check_sigma
from ._common import as_count, call_args, samples_field
from ._noise import Noise, noise_for
from ._rows import zeroth_order_samples as zeroth_order_samples
from .base import (
    ANTITHETIC,
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
def _zeroth(noise: Noise, theta, key, num_samples, antithetic, mesh) -> GradientEstimate:
    g, evals = noise.zeroth_rows(theta, key, num_samples, antithetic, mesh)
    _, unravel = noise.flat(theta)
    mean, se, var = mean_and_stats(g)
    return make_result(
        unravel,
        mean,
        se,
        loss_evaluations=evals,
        grad_evaluations=0,
        sigma_used=noise.largest_sigma(theta),
        variance=var,
    )


class ZerothOrder(SmoothingEstimator):
    r"""ZoBG: an unbiased estimate of ∇F for :math:`F(θ) = \mathbb E L(θ + σ z)`.

    .. math:: \hat g^0 = \frac1N \sum_i \frac{L(θ + σ z_i) − L(θ)}{σ} z_i,
              \quad z_i \sim N(0, I),

    using the identity :math:`∇F(θ) = \mathbb E[L(θ + σz) z]/σ` (Stein) and the
    zero-noise baseline :math:`b = L(θ)`, which leaves the mean unchanged since
    :math:`\mathbb E z = 0`. Unbiased even where L jumps; its variance grows with the
    dimension and like 1/σ², not with the size of derivatives. With ``antithetic=True``
    the samples come in pairs ±z: :math:`(L(θ+σz) − L(θ−σz)) z / (2σ)`.

    Args:
        sigma: σ, the smoothing standard deviation in θ's units (finite, > 0; default
            :data:`diffsim.estimators.DEFAULT_SIGMA`, ``Relative(0.05)``: 5 % of each |θ_i|): a
            number, a pytree like θ (one scale per component) or
            :class:`~diffsim.estimators.Relative` (a fraction of each |θ_i|).
        num_samples: N, the number of perturbed loss evaluations (>= 2; even and >= 4
            with ``antithetic``).
        antithetic: use antithetic pairs (static).
        devices: where the samples run (static): ``None`` (every device when there are
            several), a count, devices or a ``Mesh`` (:func:`diffsim.sharding.device_mesh`); the
            estimate is the one-device estimate to float rounding (same key).

    Raises:
        ValueError: σ <= 0 or not finite; ``num_samples`` too small or odd when antithetic.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import ZerothOrder
        >>> key = jax.random.PRNGKey(0)
        >>> r = ZerothOrder(sigma=0.1, num_samples=256)(lambda t: jnp.sum(t**2),
        ...                                            jnp.array([1.0, -2.0]), key)
        >>> bool(jnp.all(jnp.abs(r.estimate - jnp.array([2.0, -4.0])) < 3 * r.std_error))
        True
        >>> int(r.loss_evaluations), int(r.grad_evaluations)  # N + 1 losses, no gradient
        (257, 0)
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0)  # smoothed gradient at 0: 3.99
        >>> paired = ZerothOrder(sigma=0.1, num_samples=1000, antithetic=True)
        >>> r = paired(step, jnp.asarray(0.0), key)
        >>> round(float(r.estimate)), round(float(r.std_error), 1)  # sees the jump
        (4, 0.1)
    """

    label = "ZoBG (zeroth order)"
    short_label = "ZoBG"
    sharded = True
    summary = "score-function estimate from loss values only: unbiased across jumps"
    options = (SIGMA, NUM_SAMPLES, ANTITHETIC)
    reports = ("sigma_used", "variance")

    sigma: Any = eqx.field(
        converter=lambda v: check_sigma("sigma", v), default_factory=lambda: DEFAULT_SIGMA
    )
    num_samples: int = eqx.field(static=True, converter=as_count, default=32)
    antithetic: bool = eqx.field(static=True, default=False)
    devices: Any = eqx.field(static=True, converter=check_devices, default=None)

    def __check_init__(self) -> None:
        check_bool("antithetic", self.antithetic)
        samples_field("num_samples", self.num_samples, minimum=4 if self.antithetic else 2)
        if self.antithetic and self.num_samples % 2:
            raise ValueError(
                f"num_samples must be even with antithetic=True, got {self.num_samples}"
            )

    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        theta = call_args(theta, key, randomized=True, num_samples=self.num_samples, copies=3)
        noise = noise_for(loss, theta, self.sigma)
        mesh = device_mesh(self.devices)
        return _zeroth(noise, theta, key, self.num_samples, self.antithetic, mesh)

    def cost(self, dim: int) -> Cost:
        """N perturbed losses, vmapped, and L(θ) unless antithetic."""
        return zeroth_cost(self.num_samples, self.antithetic)


def zeroth_cost(num_samples: int, antithetic: bool) -> Cost:
    """The ZoBG's N perturbed losses in one ``vmap`` (and L(θ) when not antithetic)."""
    return Cost(num_samples + (0 if antithetic else 1), 0, num_samples)
