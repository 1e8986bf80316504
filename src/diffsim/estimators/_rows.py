r"""The sample rows the randomized estimators average: per-sample gradients of the smoothed
loss, first order (pathwise) and zeroth order (score function), for the two kinds of noise.

* parameter noise, θ + σ ⊙ z: :func:`first_order_samples`, :func:`zeroth_order_samples`;
* action noise, :math:`u_h = π(o_h, θ) + w_h` on every step of a
  :class:`diffsim.policies.PolicyObjective`: :func:`action_first_rows`, :func:`action_zeroth_rows`
  (every sample draws its own initial state from the objective's sampler).

:mod:`~diffsim.estimators._noise` wraps each kind in a :class:`~diffsim.estimators._noise.Noise`
object; the estimators combine its rows.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jaxtyping import Array

from .._policy import PolicyObjective
from .._sharding import sample_map
from .._sigma import sigma_vector

FORWARD_MODE_MAX_DIM = 2
"""Up to this many parameters the per-sample gradients are taken in forward mode
(``jax.jacfwd``): d tangent passes cost less than one reverse pass, which has to store and
replay a rollout's residuals (on ``projectile_wall``: 2.9× instead of 4.5× a forward)."""


def first_order_samples(
    f: Any, x: Array, sigma: Array, key: Array, num_samples: int, mesh: Mesh | None = None
) -> Array:
    """Per-sample FoBG gradients ``∇f(x + σ z_i)`` (rows), vmapped (over ``mesh`` when one
    is given); forward mode for ``dim θ <= FORWARD_MODE_MAX_DIM``, reverse mode otherwise
    (same values)."""
    z = jax.random.normal(key, (num_samples, x.shape[0]), x.dtype)
    grad = jax.jacfwd(f) if x.shape[0] <= FORWARD_MODE_MAX_DIM else jax.grad(f)
    return sample_map(grad, x + jnp.asarray(sigma, x.dtype) * z, mesh)


def zeroth_order_samples(
    f: Any,
    x: Array,
    sigma: Array,
    key: Array,
    num_samples: int,
    antithetic: bool,
    mesh: Mesh | None = None,
) -> tuple[Array, int]:
    r"""Per-sample ZoBG gradients (rows) and the loss evaluations they cost.

    Plain: ``g_i = (f(x + σ ⊙ z_i) − f(x)) z_i / σ`` with ``z_i ~ N(0, I)`` (N + 1 evals).
    Antithetic: ``g_i = (f(x + σ ⊙ z_i) − f(x − σ ⊙ z_i)) z_i / (2σ)`` over N/2 pairs (N
    evals). ``σ`` is a scalar or one scale per component (shape ``x.shape``): the Stein
    identity then reads :math:`∂_i F = \mathbb E[L(x + σ ⊙ z) z_i] / σ_i`. The perturbed
    losses are evaluated over ``mesh`` (:func:`diffsim.sharding.device_mesh`) when one is given.
    """
    sigma = jnp.asarray(sigma, x.dtype)
    if antithetic:
        z = jax.random.normal(key, (num_samples // 2, x.shape[0]), x.dtype)
        fp, fm = sample_map(f, jnp.concatenate([x + sigma * z, x - sigma * z]), mesh).reshape(2, -1)
        return ((fp - fm) / 2)[:, None] * z / sigma, num_samples
    z = jax.random.normal(key, (num_samples, x.shape[0]), x.dtype)
    fz = sample_map(f, x + sigma * z, mesh)
    return (fz - f(x))[:, None] * z / sigma, num_samples + 1


def action_sigma(sigma: Any, obj: PolicyObjective, action_shape: tuple[int, ...]) -> Array:
    """σ as one array of the action's shape: a number, an array like the action, or
    :class:`~diffsim.estimators.Relative` (that fraction of ``obj.action_scale``)."""
    dtype = jnp.result_type(float)
    template = jnp.broadcast_to(jnp.asarray(obj.action_scale, dtype), action_shape)
    return sigma_vector(sigma, template).reshape(action_shape)


def _draw(obj, key, n, shape, dtype):
    ks, kz = jax.random.split(key)
    return obj.sample_states(ks, n), jax.random.normal(kz, (n, obj.horizon, *shape), dtype)


def action_first_rows(obj, theta, sig, key, n, mesh):
    """N FoBG samples: rows of ∇_θ V (flat) and of ∂V/∂ū (flat, ū = the action offsets),
    one reverse pass each."""
    x, _ = ravel_pytree(theta)
    states, z = _draw(obj, key, n, sig.shape, x.dtype)

    def one(args):
        s0, zz = args
        gt, gw = jax.grad(lambda th, w: obj.value(th, s0, w), argnums=(0, 1))(theta, sig * zz)
        return ravel_pytree(gt)[0], gw.ravel().astype(x.dtype)

    return sample_map(one, (states, z), mesh), states


def action_zeroth_rows(obj, theta, sig, key, n, antithetic, mesh):
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
