"""The estimator interface and the result every estimator returns.

An estimator is a strategy object (an ``eqx.Module``) with one method,
``estimator(loss, theta, key) -> GradientEstimate``: given a scalar JAX loss ``L(θ)`` over a
pytree θ and a PRNG key it returns an estimate of a gradient — of ``L`` itself for
:class:`Exact` and :class:`FiniteDifference`, of the Gaussian-smoothed loss
:math:`F(θ) = \\mathbb E_{w\\sim N(0, σ^2 I)} L(θ + w)` for the randomized estimators.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, PyTree

from .._checks import check_finite_tree

Loss = Callable[[Any], Any]
"""A scalar loss ``L(θ)``: a pure JAX function of a pytree θ returning a scalar."""


class GradientEstimate(eqx.Module):
    """A gradient estimate with its uncertainty and its cost. All fields are arrays, so a
    stack of estimates (e.g. an optimisation history) is again a ``GradientEstimate``.

    Attributes:
        estimate: the gradient estimate, a pytree like θ.
        std_error: per-component standard error of ``estimate`` (like θ); 0 for the
            deterministic estimators (exact, finite differences).
        num_loss_evals: loss (forward simulation) evaluations used.
        num_grad_evals: gradient (forward + backward) evaluations used.
        variance: trace of the per-sample covariance of the samples averaged into
            ``estimate`` (σ̂² = 1/(N−1) Σ‖g_i − ḡ‖²); for AoBG the variance of one
            α-mixed sample, α²σ̂₁² + (1−α)²σ̂₀²; NaN for deterministic estimators.
        zeroth_variance: σ̂₀², the ZoBG per-sample variance (AoBG only; NaN otherwise).
        first_variance: σ̂₁², the FoBG per-sample variance (AoBG only; NaN otherwise).
        alpha: the weight α on the first-order part (AoBG; 1 for FoBG, 0 for ZoBG, NaN for
            exact and finite differences).
        epsilon: ε, the Bernstein confidence radius of the ZoBG mean (AoBG only).
        bias_gap: B = ‖ḡ¹ − ḡ⁰‖, the gap between the first- and zeroth-order means
            (AoBG only).
    """

    estimate: PyTree[Array]
    std_error: PyTree[Array]
    num_loss_evals: Array
    num_grad_evals: Array
    variance: Array
    zeroth_variance: Array
    first_variance: Array
    alpha: Array
    epsilon: Array
    bias_gap: Array

    @property
    def num_evals(self) -> Array:
        """Simulator evaluations: loss evaluations plus gradient evaluations."""
        return self.num_loss_evals + self.num_grad_evals


def make_result(
    unravel: Callable[[Array], Any],
    estimate: Array,
    std_error: Array,
    *,
    num_loss_evals: int,
    num_grad_evals: int,
    variance: Any = jnp.nan,
    zeroth_variance: Any = jnp.nan,
    first_variance: Any = jnp.nan,
    alpha: Any = jnp.nan,
    epsilon: Any = jnp.nan,
    bias_gap: Any = jnp.nan,
) -> GradientEstimate:
    """Build a :class:`GradientEstimate` from flat vectors (internal helper)."""
    dt = estimate.dtype

    def scalar(v: Any) -> Array:
        return jnp.asarray(v, dt)

    return GradientEstimate(
        estimate=unravel(estimate),
        std_error=unravel(std_error),
        num_loss_evals=jnp.asarray(num_loss_evals, jnp.int32),
        num_grad_evals=jnp.asarray(num_grad_evals, jnp.int32),
        variance=scalar(variance),
        zeroth_variance=scalar(zeroth_variance),
        first_variance=scalar(first_variance),
        alpha=scalar(alpha),
        epsilon=scalar(epsilon),
        bias_gap=scalar(bias_gap),
    )


def flatten_loss(loss: Loss, theta: Any) -> tuple[Callable[[Array], Array], Array, Callable]:
    """``(f, x, unravel)`` with ``x = ravel(θ)`` and ``f(x) = L(unravel(x))`` a scalar.

    Raises:
        TypeError: ``loss`` is not callable or does not return a scalar.
        ValueError: θ has a non-finite leaf.
    """
    if not callable(loss):
        raise TypeError(f"loss must be a callable L(theta) -> scalar, got {loss!r}")
    check_finite_tree("theta", theta)
    theta = jax.tree_util.tree_map(jnp.asarray, theta)
    x, unravel = ravel_pytree(theta)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))

    def f(y: Array) -> Array:
        return jnp.asarray(loss(unravel(y))).astype(y.dtype)

    out = jax.eval_shape(f, x)
    if out.shape != ():
        raise TypeError(f"loss must return a scalar, got shape {out.shape}")
    return f, x, unravel


def mean_and_stats(samples: Array) -> tuple[Array, Array, Array]:
    """Sample mean, per-component standard error and per-sample variance (trace).

    For samples ``g_i`` (rows): ``ḡ``, ``sqrt(diag Ĉ / N)`` and ``σ̂² = tr Ĉ`` with
    ``Ĉ = 1/(N−1) Σ (g_i − ḡ)(g_i − ḡ)ᵀ``.
    """
    n = samples.shape[0]
    mean = jnp.mean(samples, axis=0)
    var_c = jnp.sum((samples - mean) ** 2, axis=0) / (n - 1)
    return mean, jnp.sqrt(var_c / n), jnp.sum(var_c)


class Estimator(eqx.Module):
    """Abstract gradient estimator: ``estimator(loss, theta, key) -> GradientEstimate``.

    Subclasses are final ``eqx.Module`` s whose physical options (σ, step δ, γ) are array
    fields — so ``eqx.tree_at`` can anneal them inside ``jit`` — and whose counts are static.
    """

    @abc.abstractmethod
    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        """Estimate the gradient of ``loss`` at ``theta`` using randomness from ``key``."""
        raise NotImplementedError
