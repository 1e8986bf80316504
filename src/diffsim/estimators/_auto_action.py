r"""The ``auto`` estimator with noise on every step's action of a closed loop
(:class:`~diffsim.estimators._noise.ActionNoise`).

The doctor's evidence and decision (:mod:`diffsim.estimators._evidence`:
:func:`~diffsim.estimators._evidence.statistics` and
:func:`~diffsim.estimators._evidence.assess`, the same code and thresholds) from N/2
antithetic zeroth-order pairs, N first-order samples, the noise-free gradient over the
pairs' initial states (N/2 gradients) and the finite-difference ladder of the noise-free
cost along random directions of the per-step action offsets ū ∈ R^{H×m} (in units of σ)
over the first :data:`LADDER_STATES` initial states. Means, spreads and the first-/
zeroth-order gap are compared in θ (few dimensions: in ū's H·m dimensions the norm of a
noisy mean is mostly noise); the ladder and the first-order samples' tails live in ū,
where σ times a sample's norm is the change it predicts. The estimate it returns is in
θ: where the evidence trusts first-order gradients (choice ``"exact"``), the first-order
estimate (α = 1: over random initial states no gradient has zero variance, and those
samples are already paid for); else AoBG's mix at a tolerated bias of the ZoBG mean's
standard error, or ZoBG. It does not widen σ or double N (a pending statistic gives the mix).

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

from .._sharding import sample_map
from . import _evidence as ev
from ._rows import action_first_rows, action_zeroth_rows
from .base import GradientEstimate, make_result, mean_and_stats

LADDER_STATES = 8
"""Initial states the auto estimator's finite-difference ladder evaluates the noise-free cost
at (the first ones of its first-order family): 1 + 2·7·8 rollouts each."""


@eqx.filter_jit
def action_auto(obj, theta, key, sigma, n, thresholds, mesh, decided=None) -> GradientEstimate:
    """Auto in the policy setting; ``decided`` (a choice code, traced or not): the decision
    is given, so no ladder and no noise-free gradients are paid for — the two families and
    auto's own mix for that choice (``choice`` then reports it, ``z_gap`` NaN)."""
    sig, shape = sigma
    x, unravel = ravel_pytree(theta)
    dt = x.dtype
    sbar = jnp.max(sig)
    scale = jnp.broadcast_to(sig / sbar, (obj.horizon, *shape))  # ū = scale ⊙ y
    k0, k1, k_dir = jax.random.split(key, 3)
    g0, _, changes, evals0 = action_zeroth_rows(obj, theta, sig, k0, n, True, mesh)
    (g1, g1u), states = action_first_rows(obj, theta, sig, k1, n, mesh)
    if decided is not None:
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
    g1y = g1u * scale.ravel()

    # the ladder: the noise-free cost over the first states, along directions of y
    num = min(n, LADDER_STATES)
    ladder = jax.tree_util.tree_map(lambda a: a[:num], states)

    def cost_y(y):
        w = (scale.ravel() * y).reshape(scale.shape)
        return jnp.mean(jax.vmap(lambda s: obj.value(theta, s, w))(ladder)).astype(dt)

    dim = scale.size
    L0, g_ladder = jax.value_and_grad(cost_y)(jnp.zeros(dim, dt))
    U = ev._directions(dim, ev.NUM_DIRECTIONS, k_dir, dt)
    deltas = jnp.asarray(np.asarray(ev.DEFAULT_REL_STEPS, float), dt) * sbar
    pts = deltas[:, None, None] * U[None]
    both = sample_map(cost_y, jnp.concatenate([pts, -pts]).reshape(-1, dim), mesh)
    fp, fm = both.reshape(2, *pts.shape[:2])

    # the noise-free θ-gradient the smoothed ones are compared with (a plateau: ~0 while the
    # loss changes within σ), over the zeroth-order family's own initial states — not the
    # ladder's few, where one missed ball would look like a plateau of the whole task
    def noise_free(s0):
        return ravel_pytree(jax.grad(lambda th: obj.value(th, s0))(theta))[0].astype(dt)

    pair_states = obj.sample_states(jax.random.split(k0)[0], n // 2)
    g_exact = jnp.mean(sample_map(noise_free, pair_states, mesh), axis=0)
    fixed = {"loss": L0, "grad": g_exact, "deltas": deltas, "fd_plus": fp, "fd_minus": fm,
             "grad_along_directions": U @ g_ladder}  # fmt: skip
    # means, spreads and the gap in θ (where the estimate is returned, few dimensions); the
    # ladder and the first-order norms (σ times a norm: the change a sample predicts) in ū
    e = ev.statistics(fixed, g0, g1, changes, sbar, jnp.ones_like(x), g0,
                      first_norms=jnp.linalg.norm(g1y, axis=1))  # fmt: skip
    choice = ev.assess(e, thresholds)

    m0, se0, var0 = mean_and_stats(g0)
    finite1 = e.finite_perturbed_gradients
    m1, se1, var1 = mean_and_stats(jnp.where(finite1, g1, 0.0))
    # trusted ("exact"): α = 1, the first-order estimate — over random initial states there
    # is no zero-variance gradient, and the first-order samples are already paid for
    mix = ev.mix_by_choice(choice, m0, se0, var0, m1, se1, var1, finite1, dt)
    ladder_evals = num * (1 + fp.size + fm.size)
    return make_result(
        unravel, mix.mean.astype(dt), mix.se.astype(dt),
        loss_evaluations=evals0 + ladder_evals,
        grad_evaluations=n + num + n // 2,
        choice=choice, sigma_used=sbar, widenings=0, z_gap=ev.relevant_gap(e, thresholds),
        alpha=mix.alpha, bias_gap=mix.bias_gap, zeroth_variance=var0, first_variance=var1,
        variance=mix.variance,
    )  # fmt: skip
