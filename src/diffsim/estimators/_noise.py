r"""Where the smoothing noise goes: on θ, or on every step's action of a closed loop.

A randomized estimator combines sample rows — per-sample gradients of the smoothed loss,
first order (pathwise) or zeroth order (score function) — and does not care where the noise
that made them was put. A :class:`Noise` provides the rows; :func:`noise_for` chooses it,
once, from the loss:

* :class:`ParameterNoise` (any loss ``L(θ)``): :math:`F(θ) = \mathbb E_{w\sim N(0, σ^2 I)}
  L(θ + w)`, σ in θ's units;
* :class:`ActionNoise` (a :class:`diffsim.policies.PolicyObjective`): noise on every step's action,
  :math:`u_h = π(o_h, θ) + w_h`, σ in the action's units.

FoBG, ZoBG, AoBG and auto then combine the rows once, whatever the noise.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jaxtyping import Array

from .._checks import as_arrays
from .._policy import PolicyObjective
from .._sigma import sigma_vector
from ._auto_action import action_auto
from ._auto_parameter import parameter_auto
from ._common import warn_resolution
from ._rows import (
    action_first_rows,
    action_sigma,
    action_zeroth_rows,
    first_order_samples,
    zeroth_order_samples,
)
from .base import GradientEstimate, Loss, flatten_loss


class Noise(eqx.Module):
    """Where an estimator's noise goes, and the sample rows it gives (traceable methods, called
    inside the estimators' compiled programs).

    ``noise_free_gradient`` declares whether the gradient without noise, ∇L(θ), is an
    estimate with zero variance (noise on θ) or not (noise on the actions, over random
    initial states): what :class:`~diffsim.estimators.Auto` reuses for an "exact" decision.
    """

    noise_free_gradient: ClassVar[bool]

    @abc.abstractmethod
    def flat(self, theta: Any) -> tuple[Array, Callable[[Array], Any]]:
        """``(x, unravel)``: θ as one flat vector (the rows' columns) and its inverse."""

    @abc.abstractmethod
    def largest_sigma(self, theta: Any) -> Array:
        """The largest component of σ, the scale the samples are drawn at."""

    @abc.abstractmethod
    def first_rows(self, theta: Any, key: Array, num_samples: int, mesh: Mesh | None) -> Array:
        """N first-order (pathwise) per-sample gradients, one row each."""

    @abc.abstractmethod
    def zeroth_rows(
        self, theta: Any, key: Array, num_samples: int, antithetic: bool, mesh: Mesh | None
    ) -> tuple[Array, int]:
        """Zeroth-order (score-function) per-sample gradients (rows) and the loss
        evaluations they cost."""

    @abc.abstractmethod
    def auto(self, theta: Any, key: Array, auto: Any, mesh: Mesh | None,
             decided: Any = None) -> GradientEstimate:  # fmt: skip
        """The :class:`~diffsim.estimators.Auto` estimate ``auto`` makes with this noise;
        ``decided``: a choice code already made (action noise only: no evidence paid for)."""


class ParameterNoise(Noise):
    """Gaussian noise on θ: ``θ + σ ⊙ z`` with σ in any σ form (a number, a pytree like θ,
    :class:`~diffsim.estimators.Relative`), resolved against θ inside the compiled program.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators._noise import ParameterNoise, noise_for
        >>> noise = noise_for(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), 0.1)
        >>> isinstance(noise, ParameterNoise), noise.noise_free_gradient
        (True, True)
        >>> noise.first_rows(jnp.array([1.0, -2.0]), jax.random.PRNGKey(0), 8, None).shape
        (8, 2)
    """

    loss: Loss
    sigma: Any
    noise_free_gradient: ClassVar[bool] = True

    def flat(self, theta: Any) -> tuple[Array, Callable[[Array], Any]]:
        # as flatten_loss flattens θ (leaves promoted to floats), without tracing the loss
        return ravel_pytree(as_arrays("theta", theta, floating=True))

    def largest_sigma(self, theta: Any) -> Array:
        return jnp.max(sigma_vector(self.sigma, theta), initial=0.0)

    def first_rows(self, theta: Any, key: Array, num_samples: int, mesh: Mesh | None) -> Array:
        f, x, _ = flatten_loss(self.loss, theta)
        return first_order_samples(f, x, sigma_vector(self.sigma, theta), key, num_samples, mesh)

    def zeroth_rows(
        self, theta: Any, key: Array, num_samples: int, antithetic: bool, mesh: Mesh | None
    ) -> tuple[Array, int]:
        f, x, _ = flatten_loss(self.loss, theta)
        sig = sigma_vector(self.sigma, theta)
        return zeroth_order_samples(f, x, sig, key, num_samples, antithetic, mesh)

    def auto(self, theta: Any, key: Array, auto: Any, mesh: Mesh | None,
             decided: Any = None) -> GradientEstimate:  # fmt: skip
        n = auto.num_samples
        return parameter_auto(self.loss, theta, key, self.sigma, n, max(n, auto.max_samples),
                              auto.widen_rounds, auto.thresholds, mesh)  # fmt: skip


class ActionNoise(Noise):
    r"""Noise on every step's action of a :class:`diffsim.policies.PolicyObjective`.

    The estimators then estimate the gradient of
    :math:`F(θ) = \mathbb E_{x_1} \mathbb E_w V(x_1, w, θ)` with :math:`u_h = π(o_h, θ) + w_h`,
    :math:`w_h \sim N(0, σ^2 I)` (σ in the action's units: a number, an array like one action,
    or :class:`~diffsim.estimators.Relative`, a fraction of the objective's ``action_scale``). Every
    sample draws its own initial state x₁ from the objective's sampler and the key:

    * **FoBG**: :math:`∇_θ V(x_1^i, w^i, θ)`, autodiff through the closed loop, noise fixed
      (N gradient evaluations);
    * **ZoBG**: :math:`\frac{1}{σ^2}(V(x_1^i, w^i, θ) − V(x_1^i, 0, θ)) \sum_h D_θπ(o_h^i,
      θ)^⊤ w_h^i`, the policy's Jacobian along the noisy trajectory and the zero-noise rollout
      from the same x₁ as baseline (2N loss evaluations); antithetic pairs ±w from one x₁
      average the two samples (3 per pair);
    * **AoBG**: the two families from independent samples (initial states and noise), α by
      the same rule as for θ-noise (:func:`~diffsim.estimators.choose_alpha`, Bernstein ε
      over dim θ);
    * **auto**: the doctor's evidence and decision over both families, the noise-free
      gradients and a finite-difference ladder in the action offsets
      (:mod:`diffsim.estimators._auto_action`).

    Attributes:
        objective: the closed loop.
        sigma: σ resolved to one array of the action's shape.
        action_shape: the shape of one action (static).
    """

    objective: PolicyObjective
    sigma: Array
    action_shape: tuple[int, ...] = eqx.field(static=True)
    noise_free_gradient: ClassVar[bool] = False

    def flat(self, theta: Any) -> tuple[Array, Callable[[Array], Any]]:
        return ravel_pytree(theta)

    def largest_sigma(self, theta: Any) -> Array:
        return jnp.max(self.sigma)

    def first_rows(self, theta: Any, key: Array, num_samples: int, mesh: Mesh | None) -> Array:
        (g, _), _ = action_first_rows(self.objective, theta, self.sigma, key, num_samples, mesh)
        return g

    def zeroth_rows(
        self, theta: Any, key: Array, num_samples: int, antithetic: bool, mesh: Mesh | None
    ) -> tuple[Array, int]:
        g, _, _, evals = action_zeroth_rows(
            self.objective, theta, self.sigma, key, num_samples, antithetic, mesh
        )
        return g, evals

    def auto(self, theta: Any, key: Array, auto: Any, mesh: Mesh | None,
             decided: Any = None) -> GradientEstimate:  # fmt: skip
        n = auto.num_samples
        return action_auto(self.objective, theta, key, (self.sigma, self.action_shape), n,
                           max(n, auto.max_samples), auto.widen_rounds, auto.thresholds, mesh,
                           decided)  # fmt: skip


def noise_for(loss: Loss, theta: Any, sigma: Any) -> Noise:
    """The noise an estimator with smoothing scale ``sigma`` puts where ``loss`` wants it: on
    every step's action of a :class:`diffsim.policies.PolicyObjective` (its structure
    checked at θ, σ resolved in the action's units), else on θ (warning when σ is below θ's
    resolution).

    The one place the estimators tell a policy objective from a loss of θ.
    """
    if isinstance(loss, PolicyObjective):
        shape = loss.check(theta)
        return ActionNoise(loss, action_sigma(sigma, loss, shape), shape)
    warn_resolution("sigma", sigma, theta)
    return ParameterNoise(loss, sigma)
