"""AoBG's mixing rule: the Bernstein radius of the ZoBG mean and the α it allows.

Below :mod:`~diffsim.estimators._evidence` (auto's mix) and
:mod:`~diffsim.estimators.alpha_order` (AoBG), which both read it.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike


def bernstein_radius(
    s2: ArrayLike, num_samples: int, dim: int, delta: ArrayLike, R: ArrayLike
) -> Array:
    r"""The paper's Bernstein radius for the ZoBG mean:

    .. math:: ε = \sqrt{\frac{2 s^2 \log((d+1)/δ)}{N}} + \frac{2R}{3N}\log\frac{d+1}{δ},

    with s² the ZoBG per-sample variance (trace), d the dimension of θ, δ the failure
    probability and R a bound on ‖g_i − ḡ⁰‖.

    Example:
        >>> from diffsim.estimators import bernstein_radius
        >>> [round(float(bernstein_radius(4.0, n, 2, 0.05, 1.0)), 3) for n in (100, 400)]
        [0.6, 0.293]
    """
    log_term = jnp.log((dim + 1) / delta)
    return jnp.sqrt(2 * s2 * log_term / num_samples) + 2 * R / (3 * num_samples) * log_term


def choose_alpha(var0: Array, var1: Array, eps: Array, gap: Array, gamma: Array) -> Array:
    r"""α minimising :math:`α^2 σ̂_1^2 + (1−α)^2 σ̂_0^2` subject to :math:`ε + αB ≤ γ`.

    :math:`α_∞ = σ̂_0^2/(σ̂_0^2 + σ̂_1^2)`; α = 0 if ε > γ; α = α∞ if α∞ B ≤ γ − ε,
    else (γ − ε)/B. Both variances 0 gives α∞ = 1 (FoBG is then exact).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.estimators import choose_alpha
        >>> def alpha(eps, gap):  # σ̂₀² = 4, σ̂₁² = 1, γ = 1
        ...     args = (4.0, 1.0, eps, gap, 1.0)
        ...     return round(float(choose_alpha(*(jnp.asarray(a) for a in args))), 3)
        >>> alpha(0.1, 0.5)  # α∞ = 4 / (4 + 1): its bias 0.4 is within γ − ε
        0.8
        >>> alpha(0.1, 3.0)  # capped at (γ − ε) / B
        0.3
        >>> alpha(2.0, 0.5)  # ε > γ: ZoBG too uncertain to vouch for FoBG
        0.0
    """
    total = var0 + var1
    safe_total = jnp.where(total > 0, total, 1.0)
    alpha_inf = jnp.where(total > 0, var0 / safe_total, 1.0)
    slack = gamma - eps
    safe_gap = jnp.where(gap > 0, gap, 1.0)
    capped = jnp.where(alpha_inf * gap <= slack, alpha_inf, slack / safe_gap)
    return jnp.clip(jnp.where(eps > gamma, 0.0, capped), 0.0, 1.0)
