"""Optimising the wall demo's launch speed with any gradient estimator (a shared recipe
for the CLI, the comparison study and the tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import optax
from jaxtyping import Array

from ..estimators import Estimator
from ..optimize import OptimizeResult, cosine_anneal, optimize
from . import projectile_wall as pw

SIGMA = 0.7
"""Default initial σ (m/s): wide enough to see past the plateau (width 1.73 m/s)."""
SIGMA_END = 0.02
"""σ at the end of annealing: small enough that the jump term no longer shifts the minimum."""
ANNEAL_FRACTION = 0.6
"""σ anneals (cosine) over the first 60 % of the steps, then stays at ``SIGMA_END``."""
SAMPLES = 8
STEPS = 300
LR = 0.2
"""Adam's initial learning rate (m/s per step), cosine-decayed to 5 % of it."""
LR_END_FRACTION = 0.05
TOLERANCE_X = 0.05
"""Success: landing within 5 cm of the target."""


def wall_loss(model: str = "stepped") -> Callable[[Array], Array]:
    """The wall loss ``(landing x − 10)²`` of v0: the time-stepped simulator
    (``"stepped"``, h = 1/240 s, when available) or the closed form (``"closed"``)."""
    if model == "stepped" and hasattr(pw, "loss"):
        return pw.loss
    if model in ("stepped", "closed"):
        return pw.loss_closed_form
    raise ValueError(f"model must be 'stepped' or 'closed', got {model!r}")


def wall_landing_x(model: str = "stepped") -> Callable[[Array], Array]:
    """Landing x (m) of v0 for the same model as :func:`wall_loss`."""
    if model == "stepped" and hasattr(pw, "landing_x"):
        return pw.landing_x
    if model in ("stepped", "closed"):
        return pw.landing_x_closed_form
    raise ValueError(f"model must be 'stepped' or 'closed', got {model!r}")


def optimize_wall(
    v0: Any,
    estimator: Estimator,
    *,
    key: Array,
    steps: int = STEPS,
    lr: float = LR,
    sigma: float | None = None,
    sigma_end: float = SIGMA_END,
    anneal: bool = True,
    model: str = "stepped",
    callback: Callable[[Array], None] | None = None,
) -> OptimizeResult:
    r"""Gradient descent on the launch speed from ``v0`` with ``estimator``.

    Adam with a cosine-decayed learning rate (``lr`` → 5 %), and — for estimators with σ —
    σ annealed by :func:`diffsim.optimize.cosine_anneal` from ``sigma`` (default: the
    estimator's own σ) to ``sigma_end`` over the first 60 % of the steps. Wide smoothing
    first lets the estimate feel the cliff from anywhere on the plateau; sharp smoothing
    at the end puts the minimum of :math:`F_σ` back on v₀* = √(10 g) ≈ 9.905 m/s (the
    cliff's jump term :math:`ΔL\,φ_σ(v_{clear} − v)` otherwise shifts it).

    ``vmap`` it over ``v0`` (and ``key``) to run many starts at once.
    """
    loss = wall_loss(model)
    optimizer = optax.adam(optax.cosine_decay_schedule(lr, steps, LR_END_FRACTION))
    schedule = None
    if anneal and hasattr(estimator, "sigma"):
        start = float(estimator.sigma) if sigma is None else sigma
        schedule = cosine_anneal(start, min(sigma_end, start), steps, ANNEAL_FRACTION)
    return optimize(
        loss,
        jnp.asarray(v0, dtype=jnp.result_type(float)),
        estimator,
        steps=steps,
        key=key,
        optimizer=optimizer,
        sigma_schedule=schedule,
        callback=callback,
    )
