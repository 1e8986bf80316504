"""Optimising the wall demo's launch speed with any gradient estimator, and the
Gaussian-smoothed loss the randomized estimators see (a shared recipe for the CLI, the web
page, the comparison study and the tests).

Examples:
    >>> from diffsim.systems import wall_study as ws
    >>> r = ws.RECIPE
    >>> r.sigma, r.sigma_end, r.anneal_fraction, r.samples, r.steps
    (0.7, 0.02, 0.6, 8, 300)
    >>> r.lr, r.lr_end_fraction, r.tolerance_x
    (0.2, 0.05, 0.05)
    >>> ws.TABLE_STEP
    0.005
    >>> ws.SIGMA_MAX  # the widest σ the CLI and the page accept: (23 − 14) / 6 m/s
    1.5
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from .._checks import check_positive
from .._optimize import OptimizeResult, cosine_anneal, optimize
from .._sigma import is_scalar_sigma, sigma_vector
from ..estimators import Estimator
from . import projectile_wall as pw
from .base import System


class Recipe(NamedTuple):
    """The wall study's optimisation recipe (:func:`optimize_wall`'s defaults), shared by the
    CLI's ``optimize``, the web page, the comparison study and the tests: read it as
    :data:`RECIPE`.

    Example:
        >>> from diffsim.systems.wall_study import Recipe
        >>> Recipe(steps=100).steps, Recipe().lr  # a shorter run, the same step size
        (100, 0.2)
    """

    sigma: float = 0.7
    """Initial σ (m/s): wide enough to see past the plateau (width 1.73 m/s)."""
    sigma_end: float = 0.02
    """σ at the end of annealing: small enough that the jump term no longer shifts the
    minimum."""
    anneal_fraction: float = 0.6
    """σ anneals (cosine) over the first 60 % of the steps, then stays at ``sigma_end``."""
    samples: int = 8
    """Samples per gradient estimate."""
    steps: int = 300
    """Iterations of the descent."""
    lr: float = 0.2
    """Adam's initial learning rate (m/s per step), cosine-decayed to ``lr_end_fraction`` of
    it."""
    lr_end_fraction: float = 0.05
    """The learning rate at the end, as a fraction of ``lr``."""
    tolerance_x: float = 0.05
    """Success: landing within 5 cm of the target (m)."""


RECIPE = Recipe()
"""The recipe every client of the study uses (see :class:`Recipe`)."""

TABLE_STEP = 0.005
"""Spacing (m/s) of :func:`loss_table`'s v₀ grid."""
_TABLE_V_MAX = 23.0
"""Top of :func:`loss_table`'s grid (m/s): 14 m/s + 6 σ for σ up to 1.5 m/s."""
SIGMA_MAX = (_TABLE_V_MAX - pw.V0_MAX) / 6
"""The widest σ (m/s) for launches up to :data:`~diffsim.systems.projectile_wall.V0_MAX`:
the samples v₀ + σw stay on :func:`loss_table`'s grid (and within the speeds the wall's
rollout is sized for) to 6 σ. The CLI and the page accept σ up to it."""


def wall_system(v0: Any = 8.0, *, h: float = pw.DEFAULT_H, smoothing: Any = None) -> System:
    """The wall demo as a :class:`System`: state ``((x, y), (vx, vy))`` launched from the
    origin at ``v0`` m/s and 45°, ``θ = {"g": 9.81}``, step :func:`projectile_wall.wall_step`
    (``h`` s; ``smoothing`` τ in m or ``None``); loss ``(x_T − 10)²`` of the final state.

    Roll it out for :func:`projectile_wall.num_steps_for` steps to land (the functions of
    :mod:`diffsim.systems.projectile_wall` do exactly this).

    Examples:
        >>> from diffsim.systems.wall_study import wall_system
        >>> sys = wall_system(8.0)
        >>> {name: round(float(v), 2) for name, v in sys.theta.items()}
        {'g': 9.81}
    """
    check_positive("h", h)
    dtype = jnp.result_type(float)
    return System(
        "projectile_wall",
        pw.wall_step(h, smoothing=smoothing),
        pw.launch_state(jnp.asarray(v0, dtype)),
        {"g": jnp.asarray(pw.G, dtype)},
        loss=lambda s: (s[0][0] - pw.TARGET) ** 2,
    )


def _model_loss(model: str) -> Callable[[Array], Array]:
    """The wall loss ``(landing x − 10)²`` of v0 for ``model``: the time-stepped simulator
    (``"stepped"``, :func:`projectile_wall.loss`) or the closed form (``"closed"``)."""
    if model == "stepped":
        return pw.loss
    if model == "closed":
        return pw.loss_closed_form
    raise ValueError(f"model must be 'stepped' or 'closed', got {model!r}")


class LossTable(NamedTuple):
    """The wall loss tabulated on a uniform grid of launch speeds (see :func:`loss_table`).

    Examples:
        >>> from diffsim.systems.wall_study import loss_table
        >>> t = loss_table("closed", v_max=1.0, step=0.5)
        >>> t.v0.tolist(), [round(float(v), 2) for v in t.loss]
        ([0.0, 0.5, 1.0], [100.0, 99.49, 97.97])
    """

    v0: Array
    """The grid 0, Δ, 2Δ, … (m/s), shape (n,)."""
    loss: Array
    """The loss at each grid point, shape (n,)."""


def loss_table(
    model: str = "stepped", *, v_max: float = _TABLE_V_MAX, step: float = TABLE_STEP
) -> LossTable:
    """The wall loss at v₀ = 0, ``step``, 2 ``step``, …, ``v_max`` m/s, for
    :func:`gaussian_smoothed_loss` (one simulation per grid point, all in one call).

    Raises:
        ValueError: ``step`` or ``v_max`` not finite and > 0, or ``step > v_max``.

    Examples:
        >>> from diffsim.systems.wall_study import loss_table
        >>> t = loss_table("closed")
        >>> t.v0.shape, round(float(t.v0[1]), 6)
        ((4601,), 0.005)
    """
    check_positive("step", step)
    check_positive("v_max", v_max)
    if step > v_max:
        raise ValueError(f"step must be <= v_max, got step={step!r}, v_max={v_max!r}")
    n = round(float(v_max) / float(step)) + 1
    v0 = jnp.asarray(np.round(np.arange(n) * step, 9), jnp.result_type(float))
    return LossTable(v0, _model_loss(model)(v0))


def gaussian_smoothed_loss(v0: Any, sigma: Any, table: LossTable) -> Array:
    r"""The Gaussian-smoothed wall loss :math:`F_σ(v_0) = \mathbb E_{w\sim N(0,1)}\,L(v_0 + σw)`,
    the function whose gradient ZoBG, FoBG and AoBG estimate, by quadrature of ``table``.

    .. math:: F_σ(v_0) ≈ \frac{\sum_i φ\big((v_i - v_0)/σ\big)\,L(v_i)}
                             {\sum_i φ\big((v_i - v_0)/σ\big)}

    over the grid points :math:`v_i` of ``table`` (φ the standard normal density). The
    weights are normalised over the grid, so the result is a weighted mean of the tabulated
    losses; it is accurate when the grid covers :math:`v_0 ± 6σ` and its spacing is small
    next to σ (the default table: 5 mm/s on [0, 23] m/s, for σ ≥ 0.05 and v₀ ≤ 14 m/s).
    Differentiable in ``v0`` and ``sigma`` (``jax.grad`` gives the slope :math:`dF_σ/dv_0`);
    ``jit``/``vmap`` it freely: the table is an argument, so nothing recompiles.

    Args:
        v0: launch speed(s) in m/s, any shape.
        sigma: σ in m/s (> 0), a scalar.
        table: the tabulated loss, from :func:`loss_table`.

    Returns:
        :math:`F_σ` at each ``v0`` (shaped like ``v0``).

    Raises:
        ValueError: ``sigma`` not finite and > 0 (checked when concrete).

    Example:
        >>> from diffsim.systems import wall_study
        >>> table = wall_study.loss_table("closed", v_max=14.0, step=0.01)
        >>> F = wall_study.gaussian_smoothed_loss(8.5, 0.1, table)  # mid-plateau: L = 16
        >>> round(float(F), 6)
        16.0
    """
    check_positive("sigma", sigma)
    v0 = jnp.asarray(v0, jnp.result_type(table.v0.dtype, float))
    grid, values = table
    z = (grid - v0[..., None]) / sigma
    logw = -0.5 * z**2
    w = jnp.exp(logw - jnp.max(logw, axis=-1, keepdims=True))
    return jnp.sum(w * values, axis=-1) / jnp.sum(w, axis=-1)


class _CosineAdam(eqx.Module):
    lr: Array = eqx.field(converter=lambda v: jnp.asarray(v, jnp.result_type(float)))
    steps: int = eqx.field(static=True)

    def _adam(self) -> optax.GradientTransformation:
        return optax.adam(optax.cosine_decay_schedule(self.lr, self.steps, RECIPE.lr_end_fraction))

    def init(self, params: Any) -> optax.OptState:
        return self._adam().init(params)

    def update(
        self, updates: Any, state: optax.OptState, params: Any = None
    ) -> tuple[Any, optax.OptState]:
        return self._adam().update(updates, state, params)


def wall_optimizer(lr: Any = RECIPE.lr, steps: int = RECIPE.steps) -> optax.GradientTransformation:
    """Adam with the learning rate cosine-decayed from ``lr`` to 5 % of it over ``steps``
    (``optax.adam(optax.cosine_decay_schedule(lr, steps, 0.05))``), built so that ``lr`` is
    an array leaf of the optimizer's pytree (its ``init`` and ``update`` are Equinox bound
    methods) and only ``steps`` is static: :func:`diffsim.optimize` traces ``lr``, so every
    learning rate reuses one compiled descent (the web page's Optimize button), no cache.

    Examples:
        >>> import jax
        >>> from diffsim.systems.wall_study import wall_optimizer
        >>> a, b = wall_optimizer(0.2, 300), wall_optimizer(0.1, 300)
        >>> jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)  # one program
        True
        >>> sorted({round(float(x), 6) for x in jax.tree_util.tree_leaves(a)})  # lr, traced
        [0.2]
    """
    adam = _CosineAdam(lr, int(steps))
    return optax.GradientTransformation(adam.init, adam.update)


def optimize_wall(
    v0: Any,
    estimator: Estimator,
    *,
    key: Array,
    steps: int = RECIPE.steps,
    lr: float = RECIPE.lr,
    sigma: float | None = None,
    sigma_end: float = RECIPE.sigma_end,
    anneal: bool = True,
    model: str = "stepped",
    temperature: float | None = None,
    callback: Callable[[Array], None] | None = None,
) -> OptimizeResult:
    r"""Gradient descent on the launch speed from ``v0`` with ``estimator``.

    Adam with a cosine-decayed learning rate (``lr`` → 5 %), and — for estimators with σ —
    σ annealed by :func:`diffsim.optimization.cosine_anneal` from ``sigma`` (default: the
    estimator's own σ) to ``sigma_end`` over the first 60 % of the steps. Wide smoothing
    first lets the estimate feel the cliff from anywhere on the plateau; sharp smoothing
    at the end puts the minimum of :math:`F_σ` back on v₀* = √(10 g) ≈ 9.905 m/s (the
    cliff's jump term :math:`ΔL\,φ_σ(v_{clear} − v)` otherwise shifts it).

    With ``temperature=τ₀`` (metres) the descent is on the sigmoid-wall model
    :func:`diffsim.systems.projectile_wall.smoothed_loss` instead, its temperature annealed
    from τ₀ to ``sigma_end`` by the same schedule (``model="stepped"`` only).

    The schedule and the optimizer are built so that a second run with another ``v0``,
    ``lr``, σ₀ or τ₀ reuses the compiled code (:func:`diffsim.optimization.cosine_anneal`,
    :func:`wall_optimizer`).
    ``vmap`` it over ``v0`` (and ``key``) to run many starts at once.

    Examples:
        >>> import jax
        >>> from diffsim.estimators import AlphaOrder
        >>> from diffsim.systems.wall_study import optimize_wall
        >>> r = optimize_wall(8.0, AlphaOrder(sigma=0.7, num_samples=8), key=jax.random.PRNGKey(0))
        >>> round(float(r.theta), 1)  # from the plateau to v0* ≈ 9.905
        9.9
    """
    theta0 = jnp.asarray(v0, dtype=jnp.result_type(float))
    optimizer = wall_optimizer(lr, int(steps))
    schedule = None
    own_sigma = estimator.smoothing_scale()  # None for estimators without σ
    if own_sigma is not None and not is_scalar_sigma(own_sigma):
        # σ relative to θ (auto's default): annealed from its value at the start
        own_sigma = jnp.max(sigma_vector(own_sigma, theta0))
    if anneal and own_sigma is not None:
        start = own_sigma if sigma is None else sigma
        schedule = cosine_anneal(
            start, jnp.minimum(sigma_end, start), steps, RECIPE.anneal_fraction
        )
    temperature_schedule = None
    if temperature is not None:
        if model != "stepped":
            raise ValueError(f"temperature needs model='stepped', got model={model!r}")
        check_positive("temperature", temperature)
        tau_end = jnp.minimum(sigma_end, temperature) if anneal else temperature
        loss = pw.smoothed_loss
        temperature_schedule = cosine_anneal(temperature, tau_end, steps, RECIPE.anneal_fraction)
    else:
        loss = _model_loss(model)
    return optimize(
        loss,
        theta0,
        estimator,
        steps=steps,
        key=key,
        optimizer=optimizer,
        sigma_schedule=schedule,
        sigma_anneal=None,  # σ as this function's schedule says (fixed when anneal=False)
        temperature_schedule=temperature_schedule,
        callback=callback,
    )
