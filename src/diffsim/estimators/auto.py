r"""The ``auto`` estimator: the exact gradient where it can be trusted, and otherwise the
right mix of first- and zeroth-order samples — decided per call, from evidence it reports.

One call, one compiled batch (no Python loop over samples):

1. **σ to the scale of θ.** σ is :class:`~diffsim.Relative` by default (5 % of each
   component, with a floor), or any σ form the other estimators take.
2. **Widen σ on a plateau.** When ∇L(θ) predicts no change over σ (zero to rounding) and
   the zeroth-order mean of N perturbed losses at σ is not significantly non-zero, nothing
   within σ points anywhere: σ grows ×4 and fresh samples are drawn, up to ``max_widen``
   times (``lax.while_loop``: only the rounds needed are paid for, N losses each). A
   widened round whose losses are NaN or inf (σ reached outside the model's domain) is
   dropped for the last finite one.
3. **The doctor's tests at the final σ.** ∇L(θ) against the zeroth-order mean of step 2:
   *trusted* when they differ by at most ``z_threshold`` standard errors in every
   component, σ was not widened and everything is finite — the exact gradient is then
   returned, and the call cost N + 1 losses and one gradient, ZoBG's price. Otherwise
   (``lax.cond``: only then) N first-order samples ∇L(θ + σ⊙z), independent of the
   zeroth-order ones as AoBG's, and:

   * the first-/zeroth-order gap in combined standard errors (``z_gap``; Suh et al.'s bias
     test, scale-free: the tolerated gap is the statistical resolution of the two means);
   * *tails*: the first-order samples are far larger than the loss changes within σ explain
     (ρ = max‖σ⊙g¹ᵢ‖ / max|ΔL| > ``stiffness_ratio``) with heavy tails (excess kurtosis of
     ‖σ⊙g¹ᵢ‖ > ``stiffness_kurtosis``): FoBG's empirical bias under stiff contact.

4. **The choice** (``choice``, with the evidence):

   ====  ==========  ===============================================================
   code  name        when, and what is returned
   ====  ==========  ===============================================================
   0     exact       trusted (above): ∇L(θ) (zero variance)
   1     mixed       otherwise, without heavy tails: :math:`α ĝ^1 + (1 − α) ĝ^0` with
                     AoBG's rule at a tolerated bias of ‖SE(ĝ⁰)‖: the minimum-variance
                     α∞ when α∞B ≤ ‖SE(ĝ⁰)‖, else ‖SE(ĝ⁰)‖/B — so a real jump (B ≫ SE)
                     gets α ≈ 0 and a false alarm (B ≈ SE) the minimum variance
   2     zeroth      σ widened on a plateau and the first-order samples see no slope
                     (FoBG is blind there by construction): ZoBG, unbiased
   3     zeroth      heavy first-order tails (stiffness): ZoBG, whose variance does not
                     grow with the stiffness
   4     none        the loss or its zeroth-order samples are non-finite: NaN, never a
                     number
   5     zeroth      some first-order samples are non-finite (a gradient leaves the
                     model's domain within σ): ZoBG from the finite loss samples
   ====  ==========  ===============================================================

   Falsely distrusting the exact gradient costs variance (code 1 is then the
   minimum-variance mix); falsely trusting it costs bias. So ``z_threshold`` (2) is lower
   than the doctor's (4).

Cost per call: ``N·r + 1`` loss evaluations for r sampling rounds (r = 1 unless σ was
widened) and one gradient evaluation, plus N when the exact gradient is not trusted; the
estimate reports what the call needed (under ``vmap`` both branches of the ``lax.cond``
run, as XLA does for any batched branch).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np
from jaxtyping import Array

from .._sharding import check_devices, device_mesh, sample_map
from .._sigma import Relative, check_sigma, describe, sigma_vector
from ._common import as_count, call_args, positive_field, samples_field, warn_resolution
from .alpha_order import choose_alpha
from .base import (
    SIGMA,
    GradientEstimate,
    Loss,
    Option,
    SmoothingEstimator,
    flatten_loss,
    make_result,
    mean_and_stats,
)
from .first_order import first_order_samples

CHOICES: tuple[str, ...] = ("exact", "mixed", "zeroth", "zeroth", "none", "zeroth")
"""The name of each ``choice`` code (see the module docstring)."""

REASONS: tuple[str, ...] = (
    "the exact gradient agrees with the zeroth-order (smoothed, unbiased) estimate within σ: "
    "it is trustworthy",
    "the exact gradient is not vouched for (the first-/zeroth-order gap, a widened σ, or a "
    "non-finite ∇L(θ)): first- and zeroth-order samples mixed, the first-order share "
    "capped so that its bias stays within the zeroth-order mean's standard error",
    "the loss is flat within the σ asked for (a plateau) and the first-order samples see no "
    "slope at the widened σ: zeroth order, unbiased",
    "rare, huge first-order samples with heavy tails (stiff contact): zeroth order, whose "
    "variance does not grow with the stiffness",
    "the loss or its zeroth-order samples are NaN or inf: no estimate",
    "some first-order samples are NaN or inf (a gradient leaves the model's domain within "
    "σ): zeroth order from the finite loss samples",
)
"""Why each ``choice`` code was taken."""

WIDEN = 4.0
"""σ grows by this factor per widening round on a plateau."""


def _excess_kurtosis(v: Array) -> Array:
    c = v - jnp.mean(v)
    m2 = jnp.mean(c**2)
    return jnp.where(m2 > 0, jnp.mean(c**4) / jnp.where(m2 > 0, m2, 1.0) ** 2 - 3.0, 0.0)


def per_component_threshold(z: Array, dim: int) -> Array:
    r"""The per-component z that keeps the chance of a false alarm in *any* of ``dim``
    components at that of one component at ``z`` (Bonferroni): :math:`Φ^{-1}(1 − \bar Φ(z)/d)`
    — 2 for one parameter, 3.3 for 50 (the pushing controls), so a smooth loss in many
    dimensions is still trusted."""
    tail = jax.scipy.special.ndtr(-z) / dim
    return jnp.maximum(z, -jax.scipy.special.ndtri(tail))


@eqx.filter_jit
def _auto(loss, theta, key, sigma, num_samples, max_widen, z_threshold, ratio, kurtosis, mesh):
    f, x, unravel = flatten_loss(loss, theta)
    s0 = sigma_vector(sigma, theta)
    dt = x.dtype
    n, d = num_samples, x.shape[0]
    z_threshold = per_component_threshold(jnp.asarray(z_threshold, dt), d)
    L0 = f(x)
    eps = jnp.finfo(dt).eps
    tol = 16 * eps * (jnp.abs(L0) + 1)
    k_widen, k1 = jax.random.split(key)

    def draw(r):  # round r: N perturbed losses at σ·WIDEN^r
        z = jax.random.normal(jax.random.fold_in(k_widen, r), (n, d), dt)
        s = s0 * jnp.asarray(WIDEN, dt) ** r
        return z, s, sample_map(f, x + s * z, mesh)

    g_exact = jax.grad(f)(x)
    # the exact gradient predicts no change over σ (zero to rounding): a plateau, unless
    # the zeroth-order samples see a significant slope within σ
    exact_flat = jnp.sum(jnp.abs(s0 * g_exact)) <= tol

    def no_slope(z, s, fz):
        m, se, _ = mean_and_stats((fz - L0)[:, None] * z / s)
        return jnp.all(jnp.abs(m) <= z_threshold * se)

    def finite(fz):
        return jnp.all(jnp.isfinite(fz))

    def cond(c):
        r, z, s, fz = c[:4]
        return (r < max_widen) & exact_flat & no_slope(z, s, fz) & finite(fz)

    def body(c):
        r = c[0] + 1
        return (r, *draw(r), *c[1:4])

    first = draw(0)
    rounds, z, s, fz, zp, sp, fzp = jax.lax.while_loop(
        cond, body, (jnp.asarray(0, jnp.int32), *first, *first)
    )
    # a widened round that left the loss's domain (NaN or inf) is dropped: the last
    # finite round is used, and the extra round's evaluations are still counted
    paid = rounds
    back = (rounds > 0) & ~finite(fz)
    z, s, fz = (jnp.where(back, a, b) for a, b in ((zp, z), (sp, s), (fzp, fz)))
    rounds = jnp.where(back, rounds - 1, rounds)
    widened = rounds > 0

    dL = fz - L0
    g0 = dL[:, None] * z / s
    m0, se0, var0 = mean_and_stats(g0)
    finite0 = jnp.all(jnp.isfinite(g0)) & jnp.isfinite(L0)
    finite_exact = jnp.all(jnp.isfinite(g_exact))
    # ∇L(θ) against the zeroth-order mean (a plateau's 0 against a slope, a jump's
    # one-sided derivative against the smoothed one, a stiff derivative against the
    # loss changes it should explain)
    dev = jnp.abs(g_exact - m0)
    z_exact = jnp.max(
        jnp.where(se0 > 0, dev / jnp.where(se0 > 0, se0, 1.0), jnp.where(dev > 0, jnp.inf, 0.0))
    )
    trusted = (z_exact <= z_threshold) & ~widened & finite_exact & finite0
    # the first-order family only when the exact gradient is not vouched for (lax.cond:
    # a trusted call costs N + 1 losses and one gradient, as much as ZoBG alone)
    g1 = jax.lax.cond(
        trusted,
        lambda: jnp.zeros((n, d), dt),
        lambda: first_order_samples(f, x, s, k1, n, mesh),
    )
    m1, se1, var1 = mean_and_stats(g1)

    # the first-/zeroth-order gap in combined standard errors, componentwise
    comb = jnp.sqrt(se0**2 + se1**2)
    gap = jnp.abs(m1 - m0)
    z_comp = jnp.where(
        comb > 0, gap / jnp.where(comb > 0, comb, 1.0), jnp.where(gap > 0, jnp.inf, 0.0)
    )
    z_gap = jnp.where(trusted, jnp.nan, jnp.max(z_comp))
    # tails: per-sample first-order changes over σ against the loss changes observed
    norms = jnp.sqrt(jnp.sum((s * g1) ** 2, axis=1))
    rho = jnp.max(norms) / jnp.maximum(jnp.max(jnp.abs(dL)), tol)
    heavy = (rho > ratio) & (_excess_kurtosis(norms) > kurtosis)

    finite1 = jnp.all(jnp.isfinite(g1))
    # after widening, does the first-order family see a slope at all?
    slope = jnp.any(jnp.abs(m1) > z_threshold * se1) | jnp.any((se1 == 0) & (m1 != 0))
    choice = jnp.select(
        [trusted, ~finite0, ~finite1, heavy, widened & ~slope],
        [0, 4, 5, 3, 2],
        1,
    ).astype(jnp.int32)

    # AoBG's rule with the tolerated bias γ − ε = ‖SE of the ZoBG mean‖: the first-order
    # share adds at most the zeroth-order mean's own standard error of bias
    B = jnp.sqrt(jnp.sum((m1 - m0) ** 2))
    se0_norm = jnp.sqrt(jnp.sum(se0**2))
    alpha_mix = choose_alpha(var0, var1, jnp.zeros((), dt), B, se0_norm)
    alpha = jnp.select(
        [choice == 0, choice == 1, choice == 4], [jnp.ones((), dt), alpha_mix, jnp.nan], 0.0
    ).astype(dt)
    m1 = jnp.where(finite1, m1, 0.0)  # α = 0 then: keep 0·NaN out of the mix
    se1 = jnp.where(finite1, se1, 0.0)
    mixed = alpha * m1 + (1 - alpha) * m0
    estimate = jnp.where(choice == 0, g_exact, jnp.where(choice == 4, jnp.nan, mixed))
    se = jnp.where(
        choice == 0, jnp.zeros_like(se0), jnp.sqrt(alpha**2 * se1**2 + (1 - alpha) ** 2 * se0**2)
    )
    return make_result(
        unravel,
        estimate.astype(dt),
        se.astype(dt),
        num_loss_evals=n * (paid + 1) + 1,
        num_grad_evals=jnp.where(trusted, 1, n + 1),
        variance=jnp.where(choice == 0, 0.0, alpha**2 * var1 + (1 - alpha) ** 2 * var0),
        zeroth_variance=var0,
        first_variance=var1,
        alpha=alpha,
        bias_gap=B,
        sigma_used=jnp.max(s),
        choice=choice,
        z_gap=z_gap,
        widenings=rounds,
        reports=Auto.reports,
    )


class Auto(SmoothingEstimator):
    r"""The estimator that needs no expertise: exact where the doctor's tests trust it,
    otherwise first- and zeroth-order samples mixed as the evidence says (see the module
    :mod:`diffsim.estimators.auto` for the algorithm and the choices).

    Args:
        sigma: the smoothing scale to test at and to smooth with, in any σ form (a number, a
            pytree like θ, :class:`~diffsim.Relative`); default ``Relative(0.05,
            floor=0.1)``: 5 % of each component's magnitude (0.005 for a component near 0).
        num_samples: N per family (>= 4; the tests' power grows with it): N first-order
            samples and N loss samples per round.
        max_widen: how many times σ may grow ×4 on a plateau (>= 0, static; default 2:
            up to 16 × the σ asked for, 80 % of |θ| under the default).
        z_threshold: significance, in standard errors, of the tests for one parameter
            (default 2); with d parameters each component is tested at
            :func:`per_component_threshold` so the call's false-alarm rate stays that of one.
        stiffness_ratio, stiffness_kurtosis: the heavy-tail test (as the doctor's).
        devices: where the samples run (static): ``None`` (every device when there are
            several), a count, devices or a ``Mesh`` (:func:`diffsim.device_mesh`); the
            estimate is the one-device estimate to float rounding (same key).

    The estimate reports ``choice`` (its code; :data:`CHOICES`, :data:`REASONS`, and
    :func:`describe_choice` in words), ``sigma_used``, ``widenings``, ``z_gap``, ``alpha``,
    ``bias_gap`` and both per-sample variances.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import Auto, describe_choice
        >>> r = Auto()(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(1))
        >>> r.estimate.tolist(), describe_choice(r).split(":")[0]
        ([2.0, -4.0], 'exact')
        >>> step = lambda t: jnp.where(t > 1.0, 1.0, 0.0)  # flat at 0.5, a jump at 1
        >>> r = Auto()(step, jnp.asarray(0.5), jax.random.PRNGKey(1))
        >>> int(r.widenings) > 0, float(r.estimate) > 0
        (True, True)
    """

    label = "auto (exact where trusted, else mixed)"
    short_label = "auto"
    sharded = True
    summary = (
        "exact gradient where the smoothed loss vouches for it, else the unbiased or "
        "minimum-variance mix; σ relative to θ, widened on plateaus"
    )
    options = (
        SIGMA,
        Option("num_samples", "N, samples per family", int, "", 4),
    )
    reports = (
        "choice",
        "sigma_used",
        "widenings",
        "z_gap",
        "alpha",
        "bias_gap",
        "zeroth_variance",
        "first_variance",
    )

    sigma: Any = eqx.field(
        converter=lambda v: check_sigma("sigma", v), default_factory=lambda: Relative(0.05, 0.1)
    )
    num_samples: int = eqx.field(static=True, converter=as_count, default=32)
    max_widen: int = eqx.field(static=True, converter=as_count, default=2)
    z_threshold: Array = eqx.field(
        converter=lambda v: positive_field("z_threshold", v), default=2.0
    )
    stiffness_ratio: Array = eqx.field(
        converter=lambda v: positive_field("stiffness_ratio", v), default=20.0
    )
    stiffness_kurtosis: Array = eqx.field(
        converter=lambda v: positive_field("stiffness_kurtosis", v), default=10.0
    )

    devices: Any = eqx.field(static=True, converter=check_devices, default=None)

    def __check_init__(self) -> None:
        samples_field("num_samples", self.num_samples, minimum=4)
        if isinstance(self.max_widen, bool) or not isinstance(self.max_widen, int | np.integer):
            raise TypeError(f"max_widen must be an integer in [0, 20], got {self.max_widen!r}")
        if not 0 <= self.max_widen <= 20:
            raise ValueError(f"max_widen must be an integer in [0, 20], got {self.max_widen}")

    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        theta = call_args(theta, key, randomized=True)
        warn_resolution("sigma", self.sigma, theta)
        return _auto(
            loss,
            theta,
            key,
            self.sigma,
            self.num_samples,
            self.max_widen,
            self.z_threshold,
            self.stiffness_ratio,
            self.stiffness_kurtosis,
            device_mesh(self.devices),
        )

    def describe_sigma(self) -> str:
        """σ in words (``relative 0.05 (floor 0.1)``, a number, or ``per component``)."""
        return describe(self.sigma)


def describe_choice(estimate: GradientEstimate) -> str:
    """What an :class:`Auto` estimate chose and why, in words (concrete estimates only):
    ``"<name>: <reason> (z = …, σ = …, α = …)"``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import Auto, FiniteDifference, describe_choice
        >>> step = lambda t: jnp.where(t > 1.0, 1.0, 0.0)  # flat at 0.5, a jump at 1
        >>> text = describe_choice(Auto()(step, jnp.asarray(0.5), jax.random.PRNGKey(0)))
        >>> text.split(":")[0], "σ = 0.4 after 2 widening(s)" in text
        ('zeroth', True)
        >>> describe_choice(FiniteDifference()(step, jnp.asarray(0.5)))
        Traceback (most recent call last):
        ...
        ValueError: describe_choice needs an estimate made by the auto estimator
    """
    code = int(np.asarray(estimate.choice))
    if not 0 <= code < len(CHOICES):
        raise ValueError("describe_choice needs an estimate made by the auto estimator")
    z = float(np.asarray(estimate.z_gap))
    alpha = float(np.asarray(estimate.alpha))
    sigma = float(np.asarray(estimate.sigma_used))
    widen = int(np.asarray(estimate.widenings))
    extra = f"z = {z:.3g}, σ = {sigma:.3g}" + (f" after {widen} widening(s)" if widen else "")
    if np.isfinite(alpha):
        extra += f", α = {alpha:.3g}"
    return f"{CHOICES[code]}: {REASONS[code]} ({extra})"
