"""What the demo page shows, as compiled compositions of library calls.

Every number on the page comes from here, and everything here is a call into
:mod:`diffsim.systems.projectile_wall`, :mod:`diffsim.systems.wall_study`,
:mod:`diffsim.estimators`, :func:`diffsim.diagnose` or :func:`diffsim.optimize` (through
:func:`diffsim.systems.wall_study.optimize_wall`, the recipe ``diffsim optimize`` runs):
the page holds no copy of the physics and no numerics of its own. The functions are
``jit``-compiled once (see :func:`warm_up`) with the user's choices (v₀, σ, τ) as traced
arguments, so moving a slider never recompiles.
"""

from __future__ import annotations

import math
import threading
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .. import optimize
from ..doctor import Diagnosis, diagnose
from ..estimators import ESTIMATORS, Auto, Estimator, Exact, make_estimator
from ..systems import projectile_wall as pw
from ..systems import wall_study

V0_MIN, V0_MAX, V0_STEP = 4.0, pw.V0_MAX, 0.01
"""The slider's range and step (m/s): up to the fastest launch the wall's rollout is sized
for."""
V0_DEFAULT = 8.0
SIGMA_MIN, SIGMA_MAX, SIGMA_DEFAULT = 0.05, wall_study.SIGMA_MAX, 1.0
"""Range and default of σ (m/s), the Gaussian smoothing of the randomized estimators."""
TAU_MIN, TAU_MAX, TAU_DEFAULT = 0.01, 2.0, 0.3
"""Range and default of τ (m), the temperature of the sigmoid-wall model."""

NUM_SAMPLES = 32
"""Samples per randomized estimate shown at v₀ (N for ZoBG and FoBG, N of each for AoBG)."""
# Optimize is `diffsim optimize`'s recipe, wall_study.optimize_wall, with its settings
OPT_STEPS = wall_study.RECIPE.steps
"""Gradient-descent iterations of one Optimize run (as ``diffsim optimize``)."""
OPT_LEARNING_RATE = wall_study.RECIPE.lr
"""Adam's initial step size, cosine-decayed (as ``diffsim optimize``)."""
OPT_SAMPLES = wall_study.RECIPE.samples
"""Samples per estimate during Optimize (as ``diffsim optimize``)."""
SIGMA_END = wall_study.RECIPE.sigma_end
"""σ (and τ) at the end of the annealing during Optimize."""
TARGET_TOLERANCE = wall_study.RECIPE.tolerance_x
"""An Optimize run is "on target" when it lands within 5 cm of x = 10 m."""

# The loss is tabulated once (wall_study.loss_table: every 5 mm/s on [0, 23] m/s) for the
# Gaussian-smoothed curve; the drawn hard curve is every second entry of the same table.
_CURVE_INDEX = np.arange(
    round(V0_MIN / wall_study.TABLE_STEP), round(V0_MAX / wall_study.TABLE_STEP) + 1, 2
)
CURVE_V0 = np.round(_CURVE_INDEX * wall_study.TABLE_STEP, 6)
"""v₀ values at which the loss curves are drawn (4 to 14 m/s, 0.01 m/s apart)."""
TRAJECTORY_POINTS = 256

SMOOTHED = "smoothed"
"""The page's one gradient that is not a registered estimator: the exact gradient of the
sigmoid-wall model (analytic smoothing, temperature τ)."""
PAGE_ESTIMATORS: tuple[str, ...] = tuple(
    name for name, cls in ESTIMATORS.items() if not cls.diagnostic
)
"""The registered estimators the page shows (all but the diagnostic ones: finite
differences are a check, not a gradient to descend with), in registry order."""
ESTIMATOR_LABELS: dict[str, str] = {
    **{name: ESTIMATORS[name].label for name in PAGE_ESTIMATORS},
    SMOOTHED: "smoothed model (τ)",
}
"""Names of the gradients shown at the current v₀, in display order, with their labels."""
SHORT_LABELS: dict[str, str] = {
    **{name: ESTIMATORS[name].short_label for name in PAGE_ESTIMATORS},
    SMOOTHED: "smoothed τ",
}
"""Short names for the gradient figure's axis."""
DECIDE = "decide"
"""The page's Optimize choice that is a method, not an estimator: the default
:func:`diffsim.optimize` (:class:`diffsim.Decide`), as ``diffsim optimize`` runs it."""
OPTIMIZE_LABELS: dict[str, str] = {
    DECIDE: "default: the doctor decides (L-BFGS where trusted)",
    **ESTIMATOR_LABELS,
}
"""The Optimize choices with their labels: the default method, then each gradient with
the paper's Adam recipe."""
OPTIMIZE_CHOICES: tuple[str, ...] = tuple(OPTIMIZE_LABELS)
OPTIMIZE_DEFAULT = DECIDE

_KEY_GRADIENTS = 0
_KEY_OPTIMIZE = 0  # `diffsim optimize`'s default --seed
_KEY_DOCTOR = 2
DOCTOR_SAMPLES = 256
"""Samples per family for the gradient doctor on the page (as in the CLI), and for the
auto row, which draws the doctor's batch: one verdict, one choice."""
AUTO = "auto"
AUTO_BUDGET = int(Auto().max_samples)
"""The auto row's sample budget (its default), which the doctor's panel gets too."""


class Point(NamedTuple):
    """The simulation at one v₀: the article's readouts and the flight path."""

    v0: float
    landing_x: float
    loss: float
    clears_wall: bool
    path_x: np.ndarray
    path_y: np.ndarray


class Gradients(NamedTuple):
    """Each estimator's d loss/d v₀ at one v₀ (arrays in the order of ``names``, the
    display order of ``ESTIMATOR_LABELS``; look one up with :meth:`index_of`)."""

    v0: float
    names: tuple[str, ...]
    estimate: np.ndarray
    std_error: np.ndarray
    evaluations: np.ndarray
    alpha: np.ndarray
    """Each estimate's weight α on first-order samples (AoBG's choice; 1 for FoBG, 0 for
    ZoBG, NaN where it does not apply)."""
    choice: np.ndarray
    """Each estimate's choice code (auto's: what the doctor recommends; −1 for the others)."""
    smoothed_slope: float
    """dF/dv₀ of the Gaussian-smoothed loss F (quadrature): what ZoBG, FoBG, AoBG estimate."""
    smoothed_value: float
    """F(v₀), where the randomized estimators' slopes are anchored."""
    temperature_value: float
    """L_τ(v₀), the sigmoid-wall model's loss, where its slope is anchored."""

    def index_of(self, name: str) -> int:
        """Position of estimator ``name`` (a key of ``ESTIMATOR_LABELS``) in the arrays."""
        return self.names.index(name)


class OptimizeRun(NamedTuple):
    """One Optimize run: the iterates and the final readouts (hard, time-stepped model)."""

    estimator: str
    """The Optimize choice (a key of ``OPTIMIZE_LABELS``)."""
    theta: np.ndarray
    """θ_0 … θ_K (K + 1 values: the start, every iterate and the final one)."""
    loss: np.ndarray
    """The hard loss L(θ_k) at each of them (where they sit on the curve)."""
    final: Point
    evaluations: int
    decisions: tuple = ()
    """The default method's :class:`diffsim.Decision` s (empty for an estimator's run)."""


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
    """σ from the page, in [:data:`SIGMA_MIN`, :data:`SIGMA_MAX`] = [0.05, 1.5] m/s. Raises
    :class:`InputError` otherwise."""
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


def _smoothed_loss(v0: Array, tau: Any) -> Array:
    """The sigmoid-wall model's loss, ``L_τ(v₀)`` (one stable function object for ``jit``).

    ``tau`` is traced here (an array), which ``pw.smoothed_loss`` accepts although its
    signature says ``float``; ``Any`` keeps the checker from holding that against us."""
    return pw.smoothed_loss(v0, tau)


@jax.jit
def _curves(sigma: Array, tau: Array, table: wall_study.LossTable, v: Array):
    return wall_study.gaussian_smoothed_loss(v, sigma, table), _smoothed_loss(v, tau)


def estimator_for(name: str, sigma: Any, num_samples: int) -> Estimator:
    """The estimator behind page name ``name`` (a key of ``ESTIMATOR_LABELS``), built as
    ``diffsim estimate``/``diffsim optimize`` build it (σ and N go to the estimators that
    declare them); ``"smoothed"`` is the exact gradient (of the sigmoid-wall model)."""
    if name == SMOOTHED:
        return Exact()
    cls = ESTIMATORS[name]
    given = {"sigma": sigma, "num_samples": num_samples}
    return make_estimator(name, **{k: v for k, v in given.items() if cls.takes(k)})


@jax.jit
def _gradients(v0: Array, sigma: Array, tau: Array, key: Array, table: wall_study.LossTable):
    randomized = [n for n in PAGE_ESTIMATORS if ESTIMATORS[n].randomized]
    keys: dict[str, Array] = dict(zip(randomized, jax.random.split(key, len(randomized))))
    # auto draws the doctor's batch (its key, its N): its choice is the doctor's panel's
    keys[AUTO] = jax.random.PRNGKey(_KEY_DOCTOR)
    results = {}
    for name in ESTIMATOR_LABELS:
        loss = (lambda v: _smoothed_loss(v, tau)) if name == SMOOTHED else pw.loss
        n = DOCTOR_SAMPLES if name == AUTO else NUM_SAMPLES
        est = estimator_for(name, sigma, n)
        results[name] = est(loss, v0, keys.get(name, key))
    F_v, dF = jax.value_and_grad(wall_study.gaussian_smoothed_loss)(v0, sigma, table)
    dt = jnp.result_type(v0)
    stacked = {f: jnp.stack([getattr(r, f) for r in results.values()])
               for f in ("estimate", "std_error", "evaluations")}  # fmt: skip
    # α and auto's choice where an estimator computed them (NaN / −1 where not)
    stacked["alpha"] = jnp.stack([jnp.asarray(r.stats.get("alpha", jnp.nan), dt)
                                  for r in results.values()])  # fmt: skip
    stacked["choice"] = jnp.stack([jnp.asarray(r.stats.get("choice", -1), jnp.int32)
                                   for r in results.values()])  # fmt: skip
    return stacked, dF, F_v, _smoothed_loss(v0, tau)


CURVES_KEPT = 64
"""How many (σ, τ) curve pairs a :class:`DemoModel` keeps."""


class DemoModel:
    """The library calls behind the page, compiled once and shared by all callbacks.

    The hard loss is tabulated once (:func:`diffsim.systems.wall_study.loss_table`, for the
    curve and for :func:`~diffsim.systems.wall_study.gaussian_smoothed_loss`); everything
    else is computed per request by compiled functions whose inputs are traced, so no user
    choice triggers a recompilation.
    """

    def __init__(self) -> None:
        self.curve_v0 = CURVE_V0
        self.plateau = pw.plateau_bounds()
        self.optimal_v0 = pw.optimal_v0()
        self.simulated_optimal_v0 = pw.simulated_optimal_v0()
        self._table_lock = threading.Lock()
        self._table: wall_study.LossTable | None = None
        # the last CURVES_KEPT (σ, τ) curves, oldest first (the slider's recent positions)
        self._curves: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        # set = compiled (or nothing to wait for); cleared while a background warm-up runs
        self._compiled: dict[str, threading.Event] = {
            stage: threading.Event()
            for stage in ("point", "curves", "gradients", "doctor", "optimize")
        }
        for event in self._compiled.values():
            event.set()

    def loss_table(self) -> wall_study.LossTable:
        """The library's loss tabulated for the smoothed curve (simulated once)."""
        with self._table_lock:
            if self._table is None:
                self._table = wall_study.loss_table()
            return self._table

    @property
    def curve_loss(self) -> np.ndarray:
        """The hard (time-stepped) loss on :data:`CURVE_V0`."""
        return np.asarray(self.loss_table().loss)[_CURVE_INDEX]

    def point(self, v0: float) -> Point:
        """Landing x, loss, whether the ball clears the wall, and the flight path at v₀."""
        x, loss, clears, px, py = _point(jnp.asarray(v0, jnp.result_type(float)))
        return Point(float(v0), float(x), float(loss), bool(clears), np.asarray(px), np.asarray(py))

    def curves(self, sigma: float, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """``(F_σ, L_τ)`` on :data:`CURVE_V0`: the Gaussian-smoothed loss and the
        sigmoid-wall model's loss (the last :data:`CURVES_KEPT` pairs are kept by this
        model, so dragging the slider back is instant)."""
        with self._table_lock:
            kept = self._curves.get((sigma, tau))
        if kept is not None:
            return kept
        dt = jnp.result_type(float)
        F, L_tau = _curves(
            jnp.asarray(sigma, dt),
            jnp.asarray(tau, dt),
            self.loss_table(),
            jnp.asarray(self.curve_v0, dt),
        )
        out = (np.asarray(F), np.asarray(L_tau))
        with self._table_lock:
            self._curves[(sigma, tau)] = out
            while len(self._curves) > CURVES_KEPT:
                del self._curves[next(iter(self._curves))]
        return out

    def gradients(self, v0: float, sigma: float, tau: float) -> Gradients:
        """Every estimator's d loss/d v₀ at v₀ (fixed key: the estimates vary smoothly as
        v₀ moves), with standard errors, costs, and the smoothed loss's slope."""
        dt = jnp.result_type(float)
        stacked, dF, F_v, L_tau = _gradients(
            jnp.asarray(v0, dt),
            jnp.asarray(sigma, dt),
            jnp.asarray(tau, dt),
            jax.random.PRNGKey(_KEY_GRADIENTS),
            self.loss_table(),
        )
        return Gradients(
            float(v0),
            tuple(ESTIMATOR_LABELS),
            np.asarray(stacked["estimate"]),
            np.asarray(stacked["std_error"]),
            np.asarray(stacked["evaluations"]),
            np.asarray(stacked["alpha"]),
            np.asarray(stacked["choice"]),
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
            max_samples=AUTO_BUDGET,  # auto's batches exactly: the same verdict and choice
        )

    def optimize(self, v0: float, estimator: str, sigma: float, tau: float) -> OptimizeRun:
        """Descent from v₀: with ``"decide"`` the default :func:`diffsim.optimize` (the
        doctor's evidence picks the method; ``page.optimize(v0, "decide", σ, τ)`` is
        ``diffsim optimize --v0 v0``); with an estimator ``diffsim optimize``'s Adam recipe,
        :func:`diffsim.systems.wall_study.optimize_wall` (Adam, :data:`OPT_STEPS` steps,
        cosine-decayed step size, :data:`OPT_SAMPLES` samples per estimate, key 0).

        The randomized estimators start at σ and anneal it (cosine) toward
        :data:`SIGMA_END`; ``"smoothed"`` descends the sigmoid-wall model with τ annealed
        the same way; ``"exact"`` descends the hard loss with autodiff (and stays put on the
        plateau). ``page.optimize(v0, "alpha", σ, τ)`` is ``diffsim optimize --v0 v0
        --estimator alpha --sigma σ``.
        """
        key = jax.random.PRNGKey(_KEY_OPTIMIZE)
        if estimator == DECIDE:  # `diffsim optimize --v0 v0` (σ and τ are not used)
            r = optimize(pw.loss, jnp.asarray(v0, jnp.result_type(float)), key=key,
                         steps=OPT_STEPS)  # fmt: skip
        else:
            r = wall_study.optimize_wall(
                v0,
                estimator_for(estimator, sigma, OPT_SAMPLES),
                key=key,
                temperature=tau if estimator == SMOOTHED else None,
            )
        theta = np.concatenate([np.asarray(r.history.theta), np.asarray(r.theta)[None]])
        final_v0 = float(r.theta)
        if not V0_MIN - 5 <= final_v0 <= V0_MAX + 5 or not math.isfinite(final_v0):
            raise InputError(f"the descent left the range of the demo (v₀ = {final_v0:g})")
        loss = np.asarray(pw.loss(jnp.asarray(theta)))
        return OptimizeRun(estimator, theta, loss, self.point(final_v0), int(r.evaluations),
                           tuple(r.decisions))  # fmt: skip

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
            (
                "optimize",
                lambda: self.optimize(V0_DEFAULT, OPTIMIZE_DEFAULT, SIGMA_DEFAULT, TAU_DEFAULT),
            ),
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
