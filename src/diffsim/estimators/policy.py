r"""The estimators in the policy setting: noise on every step's action of a closed loop.

Given a :class:`diffsim.PolicyObjective` as the loss, :class:`FirstOrder`,
:class:`ZerothOrder`, :class:`AlphaOrder` and :class:`Auto` estimate the gradient of
:math:`F(θ) = \mathbb E_{x_1} \mathbb E_w V(x_1, w, θ)` with :math:`u_h = π(o_h, θ) + w_h`,
:math:`w_h \sim N(0, σ^2 I)` (σ in the action's units: a number, an array like one action,
or :class:`~diffsim.Relative`, a fraction of the objective's ``action_scale``). Every sample
draws its own initial state x₁ from the objective's sampler and the key:

* **FoBG**: :math:`∇_θ V(x_1^i, w^i, θ)`, autodiff through the closed loop, noise fixed
  (N gradient evaluations);
* **ZoBG**: :math:`\frac{1}{σ^2}(V(x_1^i, w^i, θ) − V(x_1^i, 0, θ)) \sum_h D_θπ(o_h^i, θ)^⊤
  w_h^i`, the policy's Jacobian along the noisy trajectory and the zero-noise rollout from the
  same x₁ as baseline (2N loss evaluations); antithetic pairs ±w from one x₁ average the two
  samples (3 per pair);
* **AoBG**: the two families from independent samples (initial states and noise), α by the
  same rule as for θ-noise (:func:`choose_alpha`, Bernstein ε over dim θ);
* **auto**: the doctor's evidence and decision (:mod:`diffsim.estimators._evidence`:
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

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from .._policy import PolicyObjective
from .._sharding import sample_map
from .._sigma import sigma_vector
from . import _evidence as ev
from .alpha_order import bernstein_radius, choose_alpha
from .base import GradientEstimate, make_result, mean_and_stats

LADDER_STATES = 8
"""Initial states the auto estimator's finite-difference ladder evaluates the noise-free cost
at (the first ones of its first-order family): 1 + 2·7·8 rollouts each."""


def action_sigma(sigma: Any, obj: PolicyObjective, action_shape: tuple[int, ...]) -> Array:
    """σ as one array of the action's shape: a number, an array like the action, or
    :class:`~diffsim.Relative` (that fraction of ``obj.action_scale``)."""
    dtype = jnp.result_type(float)
    template = jnp.broadcast_to(jnp.asarray(obj.action_scale, dtype), action_shape)
    return sigma_vector(sigma, template).reshape(action_shape)


def prepare(obj: PolicyObjective, theta: Any, sigma: Any) -> tuple[Array, tuple[int, ...]]:
    """Check the objective's structure at θ and resolve σ: ``(σ, action_shape)``."""
    shape = obj.check(theta)
    return action_sigma(sigma, obj, shape), shape


def _draw(obj, key, n, shape, dtype):
    ks, kz = jax.random.split(key)
    return obj.sample_states(ks, n), jax.random.normal(kz, (n, obj.horizon, *shape), dtype)


def first_samples(obj, theta, sig, key, n, mesh):
    """N FoBG samples: rows of ∇_θ V (flat) and of ∂V/∂ū (flat, ū = the action offsets),
    one reverse pass each."""
    x, _ = ravel_pytree(theta)
    states, z = _draw(obj, key, n, sig.shape, x.dtype)

    def one(args):
        s0, zz = args
        gt, gw = jax.grad(lambda th, w: obj.value(th, s0, w), argnums=(0, 1))(theta, sig * zz)
        return ravel_pytree(gt)[0], gw.ravel().astype(x.dtype)

    return sample_map(one, (states, z), mesh), states


def zeroth_samples(obj, theta, sig, key, n, antithetic, mesh):
    r"""ZoBG samples: rows of the θ-gradient (flat), of the ū-gradient (flat, σ-scaled
    coordinates: ``(V − V₀) z/σ̄``) and the loss changes V − V₀; and the loss evaluations
    they cost."""
    x, _ = ravel_pytree(theta)
    sbar = jnp.max(sig)
    count = n // 2 if antithetic else n
    states, z = _draw(obj, key, count, sig.shape, x.dtype)

    def score(obs, weights):
        return ravel_pytree(obj.score(theta, obs, weights))[0]

    def one(args):
        s0, zz = args
        base = obj.value(theta, s0)
        vp, _, obs_p = obj.trajectory(theta, s0, sig * zz)
        dp = vp - base
        if not antithetic:
            return dp * score(obs_p, zz / sig), dp * zz.ravel() / sbar, dp[None]
        vm, _, obs_m = obj.trajectory(theta, s0, -sig * zz)
        dm = vm - base
        g = 0.5 * (dp * score(obs_p, zz / sig) - dm * score(obs_m, zz / sig))
        return g, 0.5 * (vp - vm) * zz.ravel() / sbar, jnp.stack([dp, dm])

    g_theta, g_u, changes = sample_map(one, (states, z), mesh)
    return g_theta, g_u, changes.ravel(), 3 * count if antithetic else 2 * count


@eqx.filter_jit
def policy_first(obj, theta, key, sigma, n, mesh, reports) -> GradientEstimate:
    sig, _ = sigma
    _, unravel = ravel_pytree(theta)
    (g, _), _ = first_samples(obj, theta, sig, key, n, mesh)
    mean, se, var = mean_and_stats(g)
    return make_result(unravel, mean, se, num_loss_evals=0, num_grad_evals=n, variance=var,
                       first_variance=var, alpha=1.0, sigma_used=jnp.max(sig),
                       reports=reports)  # fmt: skip


@eqx.filter_jit
def policy_zeroth(obj, theta, key, sigma, n, antithetic, mesh, reports) -> GradientEstimate:
    sig, _ = sigma
    _, unravel = ravel_pytree(theta)
    g, _, _, evals = zeroth_samples(obj, theta, sig, key, n, antithetic, mesh)
    mean, se, var = mean_and_stats(g)
    return make_result(unravel, mean, se, num_loss_evals=evals, num_grad_evals=0,
                       variance=var, zeroth_variance=var, alpha=0.0, sigma_used=jnp.max(sig),
                       reports=reports)  # fmt: skip


@eqx.filter_jit
def policy_alpha(
    obj, theta, key, sigma, n, gamma, delta, R, antithetic, mesh, reports
) -> GradientEstimate:
    sig, _ = sigma
    x, unravel = ravel_pytree(theta)
    k0, k1 = jax.random.split(key)  # independent families: states and noise
    g0, _, _, evals0 = zeroth_samples(obj, theta, sig, k0, n, antithetic, mesh)
    (g1, _), _ = first_samples(obj, theta, sig, k1, n, mesh)
    m0, se0, var0 = mean_and_stats(g0)
    m1, se1, var1 = mean_and_stats(g1)
    eps = bernstein_radius(var0, g0.shape[0], x.shape[0], jnp.asarray(delta, x.dtype), R)
    gap = jnp.sqrt(jnp.sum((m1 - m0) ** 2))
    alpha = choose_alpha(var0, var1, eps, gap, gamma)
    return make_result(
        unravel, alpha * m1 + (1 - alpha) * m0, jnp.hypot(alpha * se1, (1 - alpha) * se0),
        num_loss_evals=evals0, num_grad_evals=n,
        variance=alpha**2 * var1 + (1 - alpha) ** 2 * var0, zeroth_variance=var0,
        first_variance=var1, alpha=alpha, epsilon=eps, bias_gap=gap,
        sigma_used=jnp.max(sig), reports=reports,
    )  # fmt: skip


@eqx.filter_jit
def policy_auto(
    obj, theta, key, sigma, n, thresholds, mesh, reports, decided=None
) -> GradientEstimate:
    """Auto in the policy setting; ``decided`` (a choice code, traced or not): the decision
    is given, so no ladder and no noise-free gradients are paid for — the two families and
    auto's own mix for that choice (``choice`` then reports it, ``z_gap`` NaN)."""
    sig, shape = sigma
    x, unravel = ravel_pytree(theta)
    dt = x.dtype
    sbar = jnp.max(sig)
    scale = jnp.broadcast_to(sig / sbar, (obj.horizon, *shape))  # ū = scale ⊙ y
    k0, k1, k_dir = jax.random.split(key, 3)
    g0, _, changes, evals0 = zeroth_samples(obj, theta, sig, k0, n, True, mesh)
    (g1, g1u), states = first_samples(obj, theta, sig, k1, n, mesh)
    if decided is not None:
        finite1 = jnp.all(jnp.isfinite(g1u))
        m0, se0, var0 = mean_and_stats(g0)
        m1, se1, var1 = mean_and_stats(jnp.where(finite1, g1, 0.0))
        choice = jnp.asarray(decided, jnp.int32)
        mix = ev.mix_by_choice(choice, m0, se0, var0, m1, se1, var1, finite1, dt)
        return make_result(
            unravel, mix.mean.astype(dt), mix.se.astype(dt), num_loss_evals=evals0,
            num_grad_evals=n, variance=mix.variance, zeroth_variance=var0,
            first_variance=var1, alpha=mix.alpha, bias_gap=mix.bias_gap, sigma_used=sbar,
            choice=choice, z_gap=jnp.nan, widenings=0, reports=reports,
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
        num_loss_evals=evals0 + ladder_evals,
        num_grad_evals=n + num + n // 2,
        variance=mix.variance,
        zeroth_variance=var0, first_variance=var1, alpha=mix.alpha, bias_gap=mix.bias_gap,
        sigma_used=sbar, choice=choice, z_gap=ev.relevant_gap(e, thresholds), widenings=0,
        reports=reports,
    )  # fmt: skip
