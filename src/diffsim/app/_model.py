"""What the demo page shows, as compiled compositions of library calls.

Every number on the page comes from here, and everything here is a call into
:mod:`diffsim.systems.projectile_wall`, :mod:`diffsim.estimators` or
:func:`diffsim.optimize`: the page holds no copy of the physics. The functions are
``jit``-compiled once (see :func:`warm_up`) with the user's choices (v₀, σ, τ) as traced
arguments, so moving a slider never recompiles.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from ..diagnose import Diagnosis, diagnose
from ..estimators import AlphaOrder, Exact, FirstOrder, ZerothOrder
from ..optimize import optimize
from ..systems import projectile_wall as pw

V0_MIN, V0_MAX, V0_STEP = 4.0, 14.0, 0.01
"""The slider's range and step (m/s)."""
V0_DEFAULT = 8.0
SIGMA_MIN, SIGMA_MAX, SIGMA_DEFAULT = 0.05, 1.5, 1.0
"""Range and default of σ (m/s), the Gaussian smoothing of the randomized estimators."""
TAU_MIN, TAU_MAX, TAU_DEFAULT = 0.01, 2.0, 0.3
"""Range and default of τ (m), the temperature of the sigmoid-wall model."""

NUM_SAMPLES = 32
"""Samples per randomized estimate (N for ZoBG and FoBG, N of each for AoBG)."""
OPT_STEPS = 150
"""Gradient-descent iterations of one Optimize run."""
OPT_LEARNING_RATE = 0.05
"""Adam's step size (m/s per step, roughly: Adam normalises the gradient)."""
SIGMA_DECAY, SIGMA_FLOOR = 0.97, 0.02
"""Annealing of σ (and τ) during Optimize: σ_k = max(σ₀ · 0.97^k, 0.02)."""
TARGET_TOLERANCE = 0.05
"""An Optimize run is "on target" when it lands within 5 cm of x = 10 m."""

# The Gaussian-smoothed curve F(v) = E L(v + σw) is a quadrature of the library's loss
# sampled every 5 mm/s on [0, 23] m/s (v ± 6σ at the largest σ); the drawn curve is every
# second sample of the same array, so the loss is simulated once, at start-up.
_QUAD_GRID = np.round(np.arange(4601) * 0.005, 6)
_CURVE_INDEX = np.arange(800, 2801, 2)
CURVE_V0 = _QUAD_GRID[_CURVE_INDEX]
"""v₀ values at which the loss curves are drawn (4 to 14 m/s, 0.01 m/s apart)."""
TRAJECTORY_POINTS = 256

ESTIMATOR_LABELS: dict[str, str] = {
    "exact": "exact (autodiff)",
    "zeroth": "ZoBG (zeroth order)",
    "first": "FoBG (first order)",
    "alpha": "AoBG (alpha order)",
    "smoothed": "smoothed model (τ)",
}
"""Names of the gradients shown at the current v₀, in display order."""
OPTIMIZE_CHOICES: tuple[str, ...] = ("alpha", "zeroth", "first", "exact", "smoothed")

_KEY_GRADIENTS = 0
_KEY_OPTIMIZE = 1
_KEY_DOCTOR = 2
DOCTOR_SAMPLES = 256
"""Samples per family for the gradient doctor on the page (as in the CLI)."""


class Point(NamedTuple):
    """The simulation at one v₀: the article's readouts and the flight path."""

    v0: float
    landing_x: float
    loss: float
    clears_wall: bool
    path_x: np.ndarray
    path_y: np.ndarray


class Gradients(NamedTuple):
    """Each estimator's d loss/d v₀ at one v₀ (display order of ``ESTIMATOR_LABELS``)."""

    v0: float
    names: tuple[str, ...]
    estimate: np.ndarray
    std_error: np.ndarray
    num_evals: np.ndarray
    alpha: float
    """AoBG's weight α on its first-order part."""
    smoothed_slope: float
    """dF/dv₀ of the Gaussian-smoothed loss F (quadrature): what ZoBG, FoBG, AoBG estimate."""
    smoothed_value: float
    """F(v₀), where the randomized estimators' slopes are anchored."""
    temperature_value: float
    """L_τ(v₀), the sigmoid-wall model's loss, where its slope is anchored."""


class OptimizeRun(NamedTuple):
    """One Optimize run: the iterates and the final readouts (hard, time-stepped model)."""

    estimator: str
    theta: np.ndarray
    """θ_0 … θ_K (K + 1 values: the start, every iterate and the final one)."""
    loss: np.ndarray
    """The hard loss L(θ_k) at each of them (where they sit on the curve)."""
    final: Point
    evaluations: int


class InputError(ValueError):
    """A value from the page that the demo cannot use; the message is shown on the page."""


def _parse_number(name: str, value: Any, lo: float, hi: float, unit: str) -> float:
    if isinstance(value, bool) or value is None:
        raise InputError(f"{name} must be a number in [{lo:g}, {hi:g}] {unit}, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        shown = value if len(repr(value)) < 40 else repr(value)[:37] + "..."
        raise InputError(
            f"{name} must be a number in [{lo:g}, {hi:g}] {unit}, got {shown!r}"
        ) from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise InputError(f"{name} must be a number in [{lo:g}, {hi:g}] {unit}, got {x:g}")
    return x


def parse_v0(value: Any) -> float:
    """The launch speed from the page, as a float in [4, 14] m/s.

    Raises:
        InputError: ``value`` is not a finite number in range (None, text, NaN, ±inf).
    """
    return _parse_number("v₀", value, V0_MIN, V0_MAX, "m/s")


def parse_sigma(value: Any) -> float:
    """σ from the page, in [0.05, 2] m/s. Raises :class:`InputError` otherwise."""
    return _parse_number("σ", value, SIGMA_MIN, SIGMA_MAX, "m/s")


def parse_tau(value: Any) -> float:
    """τ from the page, in [0.01, 2] m. Raises :class:`InputError` otherwise."""
    return _parse_number("τ", value, TAU_MIN, TAU_MAX, "m")


def parse_estimator(value: Any) -> str:
    """The Optimize estimator's name. Raises :class:`InputError` for an unknown one."""
    if value not in OPTIMIZE_CHOICES:
        raise InputError(f"estimator must be one of {', '.join(OPTIMIZE_CHOICES)}, got {value!r}")
    return str(value)


# --- compiled compositions -------------------------------------------------------------


@jax.jit
def _point(v0: Array):
    x, y = pw.trajectory(v0, num_points=TRAJECTORY_POINTS)
    return pw.landing_x(v0), pw.loss(v0), pw.clears_wall(v0), x, y


def _smoothed_loss(v0: Array, tau: Array) -> Array:
    """The sigmoid-wall model's loss, ``L_τ(v₀)`` (one stable function object for ``jit``)."""
    return pw.smoothed_loss(v0, tau)


def _gaussian_weights(v: Array, sigma: Array, grid: Array) -> Array:
    # normalised Gaussian quadrature weights of N(v, σ²) on the grid (rows: v)
    logw = -0.5 * ((grid[None, :] - v[:, None]) / sigma) ** 2
    w = jnp.exp(logw - jnp.max(logw, axis=1, keepdims=True))
    return w / jnp.sum(w, axis=1, keepdims=True)


def _gaussian_smoothed(v: Array, sigma: Array, grid: Array, loss_on_grid: Array) -> Array:
    r""":math:`F(v) = \mathbb E_{w\sim N(0,1)} L(v + σw)` by quadrature of the library's loss
    sampled on ``grid``; ``v`` a 1-D array."""
    return _gaussian_weights(v, sigma, grid) @ loss_on_grid


@jax.jit
def _curves(sigma: Array, tau: Array, grid: Array, loss_on_grid: Array, v: Array):
    return _gaussian_smoothed(v, sigma, grid, loss_on_grid), _smoothed_loss(v, tau)


@jax.jit
def _gradients(v0, sigma, tau, key, grid, loss_on_grid):
    k0, k1, k2 = jax.random.split(key, 3)
    results = [
        Exact()(pw.loss, v0, key),
        ZerothOrder(sigma=sigma, num_samples=NUM_SAMPLES)(pw.loss, v0, k0),
        FirstOrder(sigma=sigma, num_samples=NUM_SAMPLES)(pw.loss, v0, k1),
        AlphaOrder(sigma=sigma, num_samples=NUM_SAMPLES)(pw.loss, v0, k2),
        Exact()(lambda v: _smoothed_loss(v, tau), v0, key),
    ]

    def F(v):
        return _gaussian_smoothed(v[None], sigma, grid, loss_on_grid)[0]

    F_v, dF = jax.value_and_grad(F)(v0)
    return (
        jnp.stack([r.estimate for r in results]),
        jnp.stack([r.std_error for r in results]),
        jnp.stack([r.num_evals for r in results]),
        results[3].alpha,
        dF,
        F_v,
        _smoothed_loss(v0, tau),
    )


class _Decay(eqx.Module):
    """The annealing schedule k ↦ max(s₀ · 0.97^k, 0.02); s₀ is an array, so a new σ₀ or
    τ₀ does not recompile :func:`optimize`."""

    start: Array

    def __call__(self, k: Array) -> Array:
        return jnp.maximum(self.start * SIGMA_DECAY**k, SIGMA_FLOOR)


# one optimizer object for every run: optimize() is compiled per optimizer identity
_OPTIMIZER = optax.adam(OPT_LEARNING_RATE)


def _estimator_for(name: str, sigma: float):
    if name == "exact" or name == "smoothed":
        return Exact()
    cls = {"zeroth": ZerothOrder, "first": FirstOrder, "alpha": AlphaOrder}[name]
    return cls(sigma=sigma, num_samples=NUM_SAMPLES)


class DemoModel:
    """The library calls behind the page, compiled once and shared by all callbacks.

    The hard loss is sampled once on a fine grid (for the curve and for the quadrature of
    the Gaussian-smoothed loss); everything else is computed per request by compiled
    functions whose inputs are traced, so no user choice triggers a recompilation.
    """

    def __init__(self) -> None:
        self.curve_v0 = CURVE_V0
        self.plateau = pw.plateau_bounds()
        self.optimal_v0 = pw.optimal_v0()
        self._grid_lock = threading.Lock()
        self._sampled: tuple[Array, Array] | None = None
        # set = compiled (or nothing to wait for); cleared while a background warm-up runs
        self._compiled: dict[str, threading.Event] = {
            stage: threading.Event()
            for stage in ("point", "curves", "gradients", "doctor", "optimize")
        }
        for event in self._compiled.values():
            event.set()

    def _loss_grid(self) -> tuple[Array, Array]:
        """The quadrature grid and the library's loss on it (simulated once)."""
        with self._grid_lock:
            if self._sampled is None:
                grid = jnp.asarray(_QUAD_GRID)
                self._sampled = (grid, pw.loss(grid))
            return self._sampled

    @property
    def curve_loss(self) -> np.ndarray:
        """The hard (time-stepped) loss on :data:`CURVE_V0`."""
        return np.asarray(self._loss_grid()[1])[_CURVE_INDEX]

    def point(self, v0: float) -> Point:
        """Landing x, loss, whether the ball clears the wall, and the flight path at v₀."""
        x, loss, clears, px, py = _point(jnp.asarray(v0, jnp.result_type(float)))
        return Point(float(v0), float(x), float(loss), bool(clears), np.asarray(px), np.asarray(py))

    @functools.lru_cache(maxsize=64)  # noqa: B019  (one model per process)
    def curves(self, sigma: float, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """``(F_σ, L_τ)`` on :data:`CURVE_V0`: the Gaussian-smoothed loss and the
        sigmoid-wall model's loss."""
        dt = jnp.result_type(float)
        F, L_tau = _curves(
            jnp.asarray(sigma, dt),
            jnp.asarray(tau, dt),
            *self._loss_grid(),
            jnp.asarray(self.curve_v0),
        )
        return np.asarray(F), np.asarray(L_tau)

    def gradients(self, v0: float, sigma: float, tau: float) -> Gradients:
        """Every estimator's d loss/d v₀ at v₀ (fixed key: the estimates vary smoothly as
        v₀ moves), with standard errors, costs, and the smoothed loss's slope."""
        dt = jnp.result_type(float)
        out = _gradients(
            jnp.asarray(v0, dt),
            jnp.asarray(sigma, dt),
            jnp.asarray(tau, dt),
            jax.random.PRNGKey(_KEY_GRADIENTS),
            *self._loss_grid(),
        )
        est, se, evals, alpha, dF, F_v, L_tau = (np.asarray(o) for o in out)
        return Gradients(
            float(v0),
            tuple(ESTIMATOR_LABELS),
            est,
            se,
            evals,
            float(alpha),
            float(dF),
            float(F_v),
            float(L_tau),
        )

    def doctor(self, v0: float, sigma: float) -> Diagnosis:
        """The gradient doctor's verdict at v₀ for smoothing scale σ (:func:`diagnose` on
        the hard loss; fixed key, so the verdict does not flicker as v₀ moves)."""
        dt = jnp.result_type(float)
        return diagnose(
            pw.loss,
            jnp.asarray(v0, dt),
            jax.random.PRNGKey(_KEY_DOCTOR),
            sigma=float(sigma),
            num_samples=DOCTOR_SAMPLES,
        )

    def optimize(self, v0: float, estimator: str, sigma: float, tau: float) -> OptimizeRun:
        """Gradient descent (Adam, :data:`OPT_STEPS` steps) from v₀ with ``estimator``.

        The randomized estimators start at σ and anneal it toward 0.02 m/s; ``"smoothed"``
        descends the sigmoid-wall model with τ annealed the same way; ``"exact"`` descends
        the hard loss with autodiff (and stays put on the plateau).
        """
        dt = jnp.result_type(float)
        theta0 = jnp.asarray(v0, dt)
        key = jax.random.PRNGKey(_KEY_OPTIMIZE)
        est = _estimator_for(estimator, sigma)
        if estimator == "smoothed":
            r = optimize(
                _smoothed_loss,
                theta0,
                est,
                steps=OPT_STEPS,
                key=key,
                optimizer=_OPTIMIZER,
                temperature_schedule=_Decay(jnp.asarray(tau, dt)),
            )
        else:
            r = optimize(
                pw.loss,
                theta0,
                est,
                steps=OPT_STEPS,
                key=key,
                optimizer=_OPTIMIZER,
                sigma_schedule=None if estimator == "exact" else _Decay(jnp.asarray(sigma, dt)),
            )
        theta = np.concatenate([np.asarray(r.history.theta), np.asarray(r.theta)[None]])
        final_v0 = float(r.theta)
        if not V0_MIN - 5 <= final_v0 <= V0_MAX + 5 or not math.isfinite(final_v0):
            raise InputError(f"the descent left the range of the demo (v₀ = {final_v0:g})")
        loss = np.asarray(pw.loss(jnp.asarray(theta)))
        return OptimizeRun(estimator, theta, loss, self.point(final_v0), int(r.evaluations))

    def warm_up(self, *, background: bool = False) -> None:
        """Compile and run every function once, cheapest and most needed first: the
        readouts, the curves, the estimators, then :func:`optimize` with AoBG.

        With ``background=True`` this runs in a daemon thread and returns at once; a request
        that needs a stage not yet compiled waits for it (:meth:`wait_until_compiled`), so
        the page is usable as soon as the readouts are compiled.
        """
        if not background:
            self._warm()
            return
        for event in self._compiled.values():
            event.clear()
        threading.Thread(target=self._warm, name="diffsim-warm-up", daemon=True).start()

    def _warm(self) -> None:
        stages = [
            ("point", lambda: self.point(V0_DEFAULT)),
            ("curves", lambda: self.curves(SIGMA_DEFAULT, TAU_DEFAULT)),
            ("gradients", lambda: self.gradients(V0_DEFAULT, SIGMA_DEFAULT, TAU_DEFAULT)),
            ("doctor", lambda: self.doctor(V0_DEFAULT, SIGMA_DEFAULT)),
            # the default estimator only: the others compile on their first run
            ("optimize", lambda: self.optimize(V0_DEFAULT, "alpha", SIGMA_DEFAULT, TAU_DEFAULT)),
        ]
        try:
            for stage, fn in stages:
                fn()
                self._compiled[stage].set()
        finally:  # never leave a request waiting forever, even if a stage failed
            for event in self._compiled.values():
                event.set()

    def wait_until_compiled(self, stage: str, timeout: float = 300.0) -> bool:
        """Block until the warm-up compiled ``stage`` (``"point"``, ``"curves"``,
        ``"gradients"``, ``"doctor"`` or ``"optimize"``); True if it did within ``timeout``
        seconds."""
        return self._compiled[stage].wait(timeout)
