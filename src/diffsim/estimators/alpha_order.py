"""The alpha-order batched gradient (AoBG) of Suh, Simchowitz, Zhang & Tedrake (2022)."""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_bool
from .._sharding import check_devices, device_mesh
from .._sigma import DEFAULT_SIGMA, check_sigma
from ._common import as_count, call_args, positive_field, samples_field
from ._mixing import bernstein_radius as bernstein_radius
from ._mixing import choose_alpha as choose_alpha
from ._noise import Noise, noise_for
from .base import (
    ANTITHETIC,
    NUM_SAMPLES,
    SIGMA,
    Cost,
    GradientEstimate,
    Loss,
    Option,
    SmoothingEstimator,
    make_result,
    mean_and_stats,
)
from .zeroth_order import zeroth_cost


@eqx.filter_jit
def _alpha(noise: Noise, theta, key, num_samples, gamma, delta, R, antithetic, mesh):
    # independent sample sets: the two means must not share noise
    k0, k1 = jax.random.split(key)
    g0, evals0 = noise.zeroth_rows(theta, k0, num_samples, antithetic, mesh)
    g1 = noise.first_rows(theta, k1, num_samples, mesh)
    x, unravel = noise.flat(theta)
    m0, se0, var0 = mean_and_stats(g0)
    m1, se1, var1 = mean_and_stats(g1)
    n0 = g0.shape[0]
    eps = bernstein_radius(var0, n0, x.shape[0], jnp.asarray(delta, x.dtype), R)
    gap = jnp.sqrt(jnp.sum((m1 - m0) ** 2))
    alpha = choose_alpha(var0, var1, eps, gap, gamma)
    mean = alpha * m1 + (1 - alpha) * m0
    se = jnp.hypot(alpha * se1, (1 - alpha) * se0)  # no squares: finite for finite samples
    return make_result(
        unravel,
        mean,
        se,
        loss_evaluations=evals0,
        grad_evaluations=num_samples,
        sigma_used=noise.largest_sigma(theta),
        alpha=alpha,
        epsilon=eps,
        bias_gap=gap,
        zeroth_variance=var0,
        first_variance=var1,
        variance=alpha**2 * var1 + (1 - alpha) ** 2 * var0,
    )


class AlphaOrder(SmoothingEstimator):
    r"""AoBG: :math:`\hat g^α = α \hat g^1 + (1 − α) \hat g^0` from independent FoBG and
    ZoBG sample sets (N each), α chosen per call:

    - :math:`α_∞ = σ̂_0^2 / (σ̂_0^2 + σ̂_1^2)` minimises the variance
      :math:`α^2 σ̂_1^2 + (1−α)^2 σ̂_0^2` (σ̂_k² the per-sample variances, traces);
    - the bias constraint :math:`ε + αB ≤ γ` with :math:`B = ‖\hat g^1 − \hat g^0‖`
      and ε the Bernstein radius of the ZoBG mean (:func:`bernstein_radius`) caps α:
      α = 0 when ε > γ (ZoBG too uncertain to vouch for FoBG), α = α∞ when
      α∞B ≤ γ − ε, otherwise (γ − ε)/B.

    So FoBG is used where it agrees with the unbiased ZoBG (smooth regions: low variance)
    and is dropped where it disagrees (a jump FoBG cannot see).

    Args:
        sigma: σ, the smoothing standard deviation in θ's units (finite, > 0; default
            :data:`diffsim.estimators.DEFAULT_SIGMA`, ``Relative(0.05)``: 5 % of each |θ_i|): a
            number, a pytree like θ (one scale per component) or
            :class:`~diffsim.estimators.Relative` (a fraction of each |θ_i|).
        num_samples: N per family (>= 2): N gradient and N + 1 loss evaluations.
        gamma: γ, the tolerated error of the estimate in gradient units (> 0; default
            1.0). Scale it with the loss: it is compared with ‖ḡ¹ − ḡ⁰‖.
        delta: δ, the failure probability of the Bernstein bound, in (0, 1) (default 0.05).
        R: a bound on ‖g_i − ḡ⁰‖ for the ZoBG samples, > 0 (the paper's L; default 1.0).
        antithetic: antithetic ZoBG samples (static; N even, >= 4).
        devices: where the samples run (static): ``None`` (every device when there are
            several), a count, devices or a ``Mesh`` (:func:`diffsim.sharding.device_mesh`); the
            estimate is the one-device estimate to float rounding (same key).

    Raises:
        ValueError: a non-positive or non-finite σ, γ, R; δ outside (0, 1); N < 2.

    The result reports ``alpha``, ``epsilon``, ``bias_gap`` (B) and both per-sample
    variances.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import AlphaOrder
        >>> key = jax.random.PRNGKey(0)
        >>> r = AlphaOrder(sigma=0.1, num_samples=64, gamma=10.0)(lambda t: jnp.sum(t**2),
        ...                                                       jnp.array([1.0, -2.0]), key)
        >>> round(float(r.alpha), 2)  # smooth: the low-variance FoBG samples are kept
        1.0
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0)  # smoothed gradient at 0: 3.99
        >>> r = AlphaOrder(sigma=0.1, num_samples=256)(step, jnp.asarray(0.0), key)
        >>> float(r.alpha), bool(abs(r.estimate - 3.99) < 3 * r.std_error)  # FoBG dropped
        (0.0, True)
    """

    label = "AoBG (alpha order)"
    short_label = "AoBG"
    sharded = True
    summary = "α·FoBG + (1 − α)·ZoBG, α chosen per call from the sample variances"
    options = (
        SIGMA,
        NUM_SAMPLES,
        Option("gamma", "γ, the tolerated error in gradient units", float, "grad", 0.0, None, True),
        Option("delta", "δ, failure probability of the Bernstein bound", float, "", 0.0, 1.0, True),
        Option("R", "bound on ‖g_i − ḡ⁰‖ for the ZoBG samples", float, "grad", 0.0, None, True),
        ANTITHETIC,
    )
    reports = (
        "sigma_used", "alpha", "epsilon", "bias_gap", "zeroth_variance", "first_variance",
        "variance",
    )  # fmt: skip

    sigma: Any = eqx.field(
        converter=lambda v: check_sigma("sigma", v), default_factory=lambda: DEFAULT_SIGMA
    )
    num_samples: int = eqx.field(static=True, converter=as_count, default=32)
    gamma: Array = eqx.field(converter=lambda v: positive_field("gamma", v), default=1.0)
    delta: float = eqx.field(static=True, default=0.05)
    R: Array = eqx.field(converter=lambda v: positive_field("R", v), default=1.0)
    antithetic: bool = eqx.field(static=True, default=False)
    devices: Any = eqx.field(static=True, converter=check_devices, default=None)

    def __check_init__(self) -> None:
        check_bool("antithetic", self.antithetic)
        samples_field("num_samples", self.num_samples, minimum=4 if self.antithetic else 2)
        if self.antithetic and self.num_samples % 2:
            raise ValueError(
                f"num_samples must be even with antithetic=True, got {self.num_samples}"
            )
        d = self.delta
        if (
            isinstance(d, bool)
            or not isinstance(d, (int, float))
            or not (math.isfinite(d) and 0 < d < 1)
        ):
            raise ValueError(f"delta must be a failure probability in (0, 1), got {d!r}")

    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        theta = call_args(theta, key, randomized=True, num_samples=self.num_samples, copies=6)
        noise = noise_for(loss, theta, self.sigma)
        return _alpha(noise, theta, key, self.num_samples, self.gamma, self.delta, self.R,
                      self.antithetic, device_mesh(self.devices))  # fmt: skip

    def cost(self, dim: int) -> Cost:
        """The ZoBG's and the FoBG's samples (independent sets, both held for the mix)."""
        zeroth = zeroth_cost(self.num_samples, self.antithetic)
        n = self.num_samples
        return Cost(zeroth.loss_evaluations, n, zeroth.batch + n)
