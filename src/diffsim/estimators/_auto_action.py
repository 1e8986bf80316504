r"""The ``auto`` estimator with noise on every step's action of a closed loop
(:class:`~diffsim.estimators._noise.ActionNoise`).

The doctor's evidence, rounds and decision (:func:`~diffsim.estimators._rounds.run_rounds`
with an :class:`~diffsim.estimators._samplers.ActionSampler`: σ widened ×4 when nothing
moves within the default σ, N doubled while a statistic is undecided; the same statistics
and thresholds as with noise on θ) from N/2 antithetic zeroth-order pairs, N first-order
samples, the noise-free gradient over the first chunk's pair states and the
finite-difference ladder of the noise-free cost along random directions of the per-step
action offsets ū ∈ R^{H×m} (in units of σ) over the first
:data:`~diffsim.estimators._samplers.LADDER_STATES` initial states. The estimate it returns
is in θ: where the evidence trusts first-order gradients (choice ``"exact"``), the
first-order estimate (α = 1: over random initial states no gradient has zero variance, and
those samples are already paid for); else AoBG's mix at a tolerated bias of the ZoBG mean's
standard error, or ZoBG.

The θ-gradient of a closed loop is the policy's Jacobian applied to the ū-gradient,
:math:`∇_θ V = \sum_h D_θπ(o_h, θ)^⊤ ∂V/∂ū_h`: a gradient through the actions is
trustworthy exactly when the one through θ is, which is why the evidence may live in ū.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from . import _evidence as ev
from ._rounds import run_rounds
from ._rows import action_first_rows, action_zeroth_rows
from ._samplers import ActionSampler
from .base import GradientEstimate, make_result, mean_and_stats


@eqx.filter_jit
def action_auto(obj, theta, key, sigma, n, max_samples, max_widen, thresholds, mesh,
                decided=None) -> GradientEstimate:  # fmt: skip
    """Auto in the policy setting; ``decided`` (a choice code, traced or not): the decision
    is given, so no ladder and no noise-free gradients are paid for — the two families and
    auto's own mix for that choice (``choice`` then reports it, ``z_gap`` NaN)."""
    sig, shape = sigma
    x, unravel = ravel_pytree(theta)
    dt = x.dtype
    sbar = jnp.max(sig)
    if decided is not None:
        k0, k1, _ = jax.random.split(key, 3)
        g0, _, _, evals0 = action_zeroth_rows(obj, theta, sig, k0, n, True, mesh)
        (g1, g1u), _ = action_first_rows(obj, theta, sig, k1, n, mesh)
        finite1 = jnp.all(jnp.isfinite(g1u))
        m0, se0, var0 = mean_and_stats(g0)
        m1, se1, var1 = mean_and_stats(jnp.where(finite1, g1, 0.0))
        choice = jnp.asarray(decided, jnp.int32)
        mix = ev.mix_by_choice(choice, m0, se0, var0, m1, se1, var1, finite1, dt)
        return make_result(
            unravel, mix.mean.astype(dt), mix.se.astype(dt), loss_evaluations=evals0,
            grad_evaluations=n, choice=choice, sigma_used=sbar, widenings=0, z_gap=jnp.nan,
            alpha=mix.alpha, bias_gap=mix.bias_gap, zeroth_variance=var0,
            first_variance=var1, variance=mix.variance,
        )  # fmt: skip
    sampler = ActionSampler(obj, (sig / sbar).astype(dt), shape)
    steps = jnp.asarray(np.asarray(ev.DEFAULT_REL_STEPS, float), dt)
    found = run_rounds(sampler, theta, key, sbar.astype(dt), steps, num_samples=n,
                       max_samples=max_samples, max_widen=max_widen, thresholds=thresholds,
                       mesh=mesh)  # fmt: skip
    e, rounds = found.evidence, found.widenings
    choice = ev.assess(e, thresholds)
    finite1 = e.finite_perturbed_gradients
    # trusted ("exact"): α = 1, the first-order estimate — over random initial states there
    # is no zero-variance gradient, and the first-order samples are already paid for
    mix = ev.mix_by_choice(
        choice, e.zeroth_mean, e.zeroth_se, e.zeroth_variance,
        jnp.where(finite1, e.first_mean, 0.0), jnp.where(finite1, e.first_se, 0.0),
        e.first_variance, finite1, dt,
    )  # fmt: skip
    losses, gradients = sampler.cost(rounds, n, e.num_samples, e.fd_excess.size)
    return make_result(
        unravel, mix.mean.astype(dt), mix.se.astype(dt), loss_evaluations=losses,
        grad_evaluations=gradients, choice=choice, sigma_used=e.sigma, widenings=rounds,
        z_gap=ev.relevant_gap(e, thresholds), alpha=mix.alpha, bias_gap=mix.bias_gap,
        zeroth_variance=e.zeroth_variance, first_variance=e.first_variance,
        variance=mix.variance,
    )  # fmt: skip
