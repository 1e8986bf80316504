"""The ``auto`` estimator with noise on θ: the doctor's procedure inside one compiled graph.

See :mod:`diffsim.estimators.auto` for the choices and the cost.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._sigma import sigma_vector
from . import _evidence as ev
from ._rounds import run_rounds
from ._samplers import ThetaSampler
from .base import GradientEstimate, flatten_loss, make_result


@eqx.filter_jit
def parameter_auto(
    loss, theta, key, sigma, num_samples, max_samples, max_widen, thresholds, mesh
) -> GradientEstimate:
    """Auto with noise on θ: the doctor's evidence in its rounds (:func:`run_rounds`: σ
    widened ×4 on a dead-flat plateau, N doubled while a statistic is undecided), its
    choice and that estimate."""
    _, x, unravel = flatten_loss(loss, theta)
    dt = x.dtype
    n, d = num_samples, x.shape[0]
    sig = sigma_vector(sigma, theta)
    sbar = jnp.max(sig) if d else jnp.ones((), dt)
    steps = jnp.asarray(np.asarray(ev.DEFAULT_REL_STEPS, float), dt)
    sampler = ThetaSampler(loss, sig / sbar)
    found = run_rounds(sampler, theta, key, sbar, steps, num_samples=n,
                       max_samples=max_samples, max_widen=max_widen, thresholds=thresholds,
                       mesh=mesh)  # fmt: skip
    e, rounds = found.evidence, found.widenings
    choice = ev.assess(e, thresholds)

    finite1 = e.finite_perturbed_gradients
    var1 = e.first_variance
    mix = ev.mix_by_choice(
        choice, e.zeroth_mean, e.zeroth_se, e.zeroth_variance,
        jnp.where(finite1, e.first_mean, 0.0), jnp.where(finite1, e.first_se, 0.0), var1,
        finite1, dt,
    )  # fmt: skip
    exact = choice == ev.EXACT
    estimate = jnp.where(exact, e.grad, mix.mean)
    se = jnp.where(exact, jnp.zeros_like(mix.se), mix.se)
    losses, gradients = sampler.cost(rounds, n, e.num_samples, e.fd_excess.size)
    return make_result(
        unravel,
        estimate.astype(dt),
        se.astype(dt),
        loss_evaluations=losses,
        grad_evaluations=gradients,
        choice=choice,
        sigma_used=e.sigma,
        widenings=rounds,
        z_gap=ev.relevant_gap(e, thresholds),
        alpha=mix.alpha,
        bias_gap=mix.bias_gap,
        zeroth_variance=e.zeroth_variance,
        first_variance=var1,
        variance=jnp.where(exact, 0.0, mix.variance),
    )
