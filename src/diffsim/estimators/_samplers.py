r"""Where a round of evidence comes from: noise on θ, or on every step's action.

The rounds (:mod:`~diffsim.estimators._rounds`) fill one set of buffers
(:func:`~diffsim.estimators._evidence.draw`) and reduce them with one
:func:`~diffsim.estimators._evidence.statistics`, whatever the noise. A sampler provides
the two parts of a batch:

* ``fixed``: the sample-free part, paid once per round — L(θ), the noise-free gradient
  the smoothed ones are compared with, and the finite-difference ladder along random
  directions (in the space the noise lives in; with noise on θ, the gradient's own too);
* ``samples``: chunk i of the samples — zeroth-order rows (antithetic pairs), the same
  pairs without a control variate (``plain``), first-order rows, the first-order rows'
  norms where they are not taken in θ, and the loss changes of the pairs.

:class:`ThetaSampler` is the doctor's (noise on θ, in the σ-scaled coordinates y with
:math:`θ = θ_0 + s ⊙ y`); :class:`ActionSampler` is ``auto``'s in the policy setting
(noise on every step's action; statistics in θ, the ladder and the first-order norms in the
action offsets ū). Both draw chunk i from keys that depend on the round's key and i only, so
doubling N keeps the samples already drawn.
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from .._policy import PolicyObjective
from .._sharding import sample_map
from ._evidence import _directions
from ._rounds import round_cost
from ._rows import action_first_rows, action_zeroth_rows, first_order_samples
from .base import flatten_loss

LADDER_STATES = 8
"""Initial states the policy setting's finite-difference ladder evaluates the noise-free cost
at (the first ones of the first chunk's first-order family): 1 + 2·k·m rollouts each."""


def _ladder(f: Any, dim: int, key: Array, sigma: Array, rel_steps: Array, num_dir: int,
            dt: Any, mesh: Any, along: Array | None = None,
            ) -> tuple[Array, Array, Array, Array, Array]:  # fmt: skip
    """Central differences of ``f`` (of a vector of ``dim``) along ``num_dir`` unit
    directions at steps ``rel_steps · sigma``: coordinate axes when ``dim`` is at most
    ``num_dir``, else random directions — the last of them replaced by ``along``'s (the
    gradient's: the line test, :func:`~diffsim.estimators._evidence.line_gap`) when it is
    given and not 0. Returns ``(deltas, f(+δu), f(−δu), U, line)``, shapes (m,), (m, k),
    (m, k), (k, dim), () — ``line`` 1 when U's last row is ``along``'s direction."""
    U = _directions(dim, num_dir, key, dt)
    line = jnp.zeros((), dt)
    if along is not None and dim > num_dir:
        norm = jnp.linalg.norm(along)
        U = U.at[-1].set(jnp.where(norm > 0, along / jnp.where(norm > 0, norm, 1), U[-1]))
        line = (norm > 0).astype(dt)
    deltas = rel_steps.astype(dt) * sigma
    pts = deltas[:, None, None] * U[None, :, :]
    both = sample_map(f, jnp.concatenate([pts, -pts]).reshape(-1, dim), mesh)
    fp, fm = both.reshape(2, *pts.shape[:2])
    return deltas, fp, fm, U, line


class ThetaSampler(eqx.Module):
    """Evidence with noise on θ: :math:`f(y) = L(θ_0 + s ⊙ y)`, perturbations σ̄·z in y
    (isotropic), s = ``scale`` = σ/σ̄ per component of raveled θ. For one number σ, s = 1
    and the numbers are θ's exactly.

    Keys: ``(k_dir, k_samples) = split(key)``; chunk i from ``fold_in(k_samples, i)``."""

    loss: Any
    scale: Array
    own_norms: ClassVar[bool] = False

    def dims(self, theta: Any) -> tuple[int, int]:
        """(columns of a row, dimension of the ladder's space)."""
        d = self.scale.shape[0]
        return d, d

    def statistics_scale(self, theta: Any) -> Array:
        return self.scale

    def _f(self, theta: Any) -> tuple[Any, Array, Any]:
        f0, x0, _ = flatten_loss(self.loss, theta)
        return f0, x0, lambda y: f0(x0 + self.scale * y)

    def fixed(self, theta, key, sigma, rel_steps, num_dir, chunk, mesh) -> dict:
        del chunk
        f0, x0, f = self._f(theta)
        L0, g = jax.value_and_grad(f0)(x0)
        k_dir, _ = jax.random.split(key)
        gy = self.scale * g
        deltas, fp, fm, U, line = _ladder(f, x0.shape[0], k_dir, sigma, rel_steps, num_dir,
                                          x0.dtype, mesh, along=gy)  # fmt: skip
        return {"loss": L0, "grad": g, "deltas": deltas, "fd_plus": fp, "fd_minus": fm,
                "grad_along_directions": U @ gy, "line": line}  # fmt: skip

    def samples(self, theta, key, i, sigma, fx, chunk, mesh) -> tuple[Array, ...]:
        _, x0, f = self._f(theta)
        d = x0.shape[0]
        _, k_samples = jax.random.split(key)
        k0, k1 = jax.random.split(jax.random.fold_in(k_samples, i))
        # ZoBG in antithetic pairs with the exact gradient as control variate,
        # g = ((L(θ+σz) − L(θ−σz))/2 − σ zᵀ∇L(θ)) z/σ + ∇L(θ) (unbiased: E[zzᵀ] = I): the
        # even part of the loss (a bowl's curvature) cancels in the pair and the linear part
        # in the control variate, so for a smooth loss only O(σ²) is left; a jump's
        # contribution is untouched
        gy = self.scale * fx["grad"]
        z = jax.random.normal(k0, (chunk // 2, d), x0.dtype)
        fp, fm = sample_map(f, jnp.concatenate([sigma * z, -sigma * z]), mesh).reshape(2, -1)
        g0 = ((fp - fm) / 2 - sigma * (z @ gy))[:, None] * z / sigma + gy
        # the same pairs without the control variate: an estimate of the smoothed gradient
        # that does not lean on ∇L(θ), to test ∇L(θ) itself against
        plain = ((fp - fm) / 2)[:, None] * z / sigma
        g1 = first_order_samples(f, jnp.zeros_like(x0), sigma, k1, chunk, mesh)
        dL = jnp.concatenate([fp, fm]) - fx["loss"]
        return g0, plain, g1, jnp.zeros((chunk,), x0.dtype), dL

    def cost(self, widenings: Any, num_samples: int, used: Any, fd_points: int) -> tuple[Any, Any]:
        return round_cost(widenings, num_samples, used, fd_points)


class ActionSampler(eqx.Module):
    r"""Evidence with noise on every step's action of a closed loop, σ = ``shape_scale`` ·
    σ̄ per action component (σ̄ the round's σ).

    Every sample draws its own initial state. The statistics are taken in θ (few dimensions:
    in ū's H·m dimensions the norm of a noisy mean is mostly noise); the ladder (the noise-free
    cost over the first :data:`LADDER_STATES` states of the first chunk, along random
    directions of the action offsets ū in units of σ) and the first-order samples' norms
    (σ times a norm: the change a sample predicts) live in ū. The noise-free θ-gradient the
    smoothed ones are compared with is averaged over the first chunk's zeroth-order states —
    not the ladder's few, where one missed ball would look like a plateau of the whole task.
    The zeroth-order rows carry no control variate (no gradient here has zero variance), so
    ``plain`` is the zeroth-order rows.

    Keys: chunk i from ``key`` (i = 0) or ``fold_in(key, i)``, split in three (zeroth, first,
    ladder directions); the sample-free part uses chunk 0's.
    """

    objective: PolicyObjective
    shape_scale: Array
    action_shape: tuple[int, ...] = eqx.field(static=True)
    own_norms: ClassVar[bool] = True

    def dims(self, theta: Any) -> tuple[int, int]:
        return ravel_pytree(theta)[0].shape[0], self.objective.horizon * self.shape_scale.size

    def statistics_scale(self, theta: Any) -> Array:
        return jnp.ones_like(ravel_pytree(theta)[0])

    def _keys(self, key: Array, i: Any) -> Array:
        i = jnp.asarray(i)
        k = jax.lax.cond(i == 0, lambda: key, lambda: jax.random.fold_in(key, i))
        return jax.random.split(k, 3)

    def _ladder_scale(self) -> Array:
        return jnp.broadcast_to(self.shape_scale, (self.objective.horizon, *self.action_shape))

    def fixed(self, theta, key, sigma, rel_steps, num_dir, chunk, mesh) -> dict:
        obj = self.objective
        dt = ravel_pytree(theta)[0].dtype
        k0, k1, k_dir = self._keys(key, 0)
        scale = self._ladder_scale()
        num = min(chunk, LADDER_STATES)
        # the first chunk's first-order states (as action_first_rows draws them)
        ladder = jax.tree_util.tree_map(
            lambda a: a[:num], obj.sample_states(jax.random.split(k1)[0], chunk)
        )

        def cost_y(y):
            w = (scale.ravel() * y).reshape(scale.shape)
            return jnp.mean(jax.vmap(lambda s: obj.value(theta, s, w))(ladder)).astype(dt)

        L0, g_ladder = jax.value_and_grad(cost_y)(jnp.zeros(scale.size, dt))
        # random directions only: no line test (the estimate an "exact" decision returns
        # here is FoBG's over noisy actions and random states, never this noise-free
        # gradient; tennis trained by auto fell from 97 % to 60 % of balls returned with it)
        deltas, fp, fm, U, line = _ladder(cost_y, scale.size, k_dir, sigma, rel_steps, num_dir,
                                          dt, mesh)  # fmt: skip

        def noise_free(s0):
            return ravel_pytree(jax.grad(lambda th: obj.value(th, s0))(theta))[0].astype(dt)

        pair_states = obj.sample_states(jax.random.split(k0)[0], chunk // 2)
        g_exact = jnp.mean(sample_map(noise_free, pair_states, mesh), axis=0)
        return {"loss": L0, "grad": g_exact, "deltas": deltas, "fd_plus": fp, "fd_minus": fm,
                "grad_along_directions": U @ g_ladder, "line": line}  # fmt: skip

    def samples(self, theta, key, i, sigma, fx, chunk, mesh) -> tuple[Array, ...]:
        del fx
        obj = self.objective
        sig = self.shape_scale * sigma
        k0, k1, _ = self._keys(key, i)
        g0, _, changes, _ = action_zeroth_rows(obj, theta, sig, k0, chunk, True, mesh)
        (g1, g1u), _ = action_first_rows(obj, theta, sig, k1, chunk, mesh)
        norms = jnp.linalg.norm(g1u * self._ladder_scale().ravel(), axis=1)
        return g0, g0, g1, norms.astype(g1.dtype), changes

    def cost(self, widenings: Any, num_samples: int, used: Any, fd_points: int) -> tuple[Any, Any]:
        """Rollouts: per round the ladder (``num·(1 + 2·fd_points)``), ``num`` ladder
        gradients and N/2 noise-free gradients (the first chunk's), then 3 per zeroth-order
        pair (V₀, V(+w), V(−w)) and one gradient per first-order sample; each widened round
        paid its first chunk of ``num_samples``."""
        n = num_samples
        num = min(n, LADDER_STATES)
        fixed_l, fixed_g = num * (1 + 2 * fd_points), num + n // 2
        return ((fixed_l + 3 * (n // 2)) * widenings + fixed_l + 3 * (used // 2),
                (fixed_g + n) * widenings + fixed_g + used)  # fmt: skip
