r"""What the doctor measures: one jitted batch of samples, and the statistics drawn from it.

:func:`measure` evaluates, for a scalar loss at θ, in one jitted and vmapped batch: the
exact gradient, directional central differences over a ladder of step sizes, and
independent first-order (FoBG) and zeroth-order (ZoBG) samples of the Gaussian-smoothed
gradient at scale σ. :func:`sensitivity_profile` adds what only a rollout shows: the norm
of the rollout Jacobian :math:`‖∂s_t/∂s_0‖_2` at every horizon t, from the library's
per-step Jacobians. Both return plain numbers (:class:`Measurements`, :class:`Horizon`);
the decisions are made from them by the rules (``_rules.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import as_arrays
from .._jacobians import _autodiff_step_jacobian
from .._rollout import call_step, rollout
from .._sharding import device_mesh
from .._sigma import (
    DEFAULT_SIGMA,
    Relative,
    check_sigma,
    describe,
    is_scalar_sigma,
    may_widen,
    sigma_vector,
    widened,
)
from ..estimators import _evidence as ev
from ..estimators._evidence import DEFAULT_REL_STEPS
from ..estimators._rounds import host_rounds
from ..estimators._samplers import ThetaSampler
from ..estimators._thresholds import Thresholds
from ..estimators.base import flatten_loss


@dataclasses.dataclass(frozen=True)
class Horizon:
    r"""How the rollout Jacobian :math:`∂s_t/∂s_0` grows with the horizon t.

    Attributes:
        horizons: the four horizons T/8, T/4, T/2, T.
        jacobian_norms: :math:`‖∂s_t/∂s_0‖_2` at those horizons.
        growth: G, the norm at T over the norm at T/8 (inf when not finite).
        rate: λ per step, the slope of :math:`\log‖∂s_t/∂s_0‖` over the second half.
        max_step: a, the largest single-step amplification :math:`\max_t ‖A_t‖_2`.
        concentration: c = log a / log G, the share of the growth one step explains.

    Example:
        :func:`~diffsim.doctor.diagnose_rollout` measures it; the rules read it from
        :attr:`Measurements.horizon`. Growth spread over many steps is chaos, growth that
        one step explains is stiffness:

        >>> import dataclasses, math, jax, jax.numpy as jnp
        >>> from diffsim.doctor import RULES, Horizon, Thresholds, measure
        >>> m = measure(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0))
        >>> th = Thresholds(4.0, 20.0, 10.0, chaos_growth=100.0, concentration_limit=0.5)
        >>> def flags(h):  # the flags these measurements raise with the horizon h
        ...     mh = dataclasses.replace(m, horizon=h)
        ...     return [f.name for f in (rule.test(mh, th) for rule in RULES) if f is not None]
        >>> spread = Horizon([100, 200, 400, 800], [2.0, 8.0, 1e2, 2e4], growth=1e4, rate=0.012,
        ...                  max_step=1.05, concentration=math.log(1.05) / math.log(1e4))
        >>> flags(spread)  # 10⁴-fold, no single step amplifies by more than 1.05
        ['chaos']
        >>> flags(dataclasses.replace(spread, max_step=1e3, concentration=0.75))
        ['stiffness']
    """

    horizons: list[int]
    jacobian_norms: list[float]
    growth: float
    rate: float
    max_step: float
    concentration: float


@dataclasses.dataclass(frozen=True)
class Discretization:
    r"""The gradient at the time step h against the gradient at h/2 (2T steps).

    Attributes:
        h: the step's time step (its largest value when it is an array).
        order: p, the integrator's order of accuracy.
        coarse_norm, fine_norm: ‖∇ at h‖ and ‖∇ at h/2‖.
        difference: ‖∇_h − ∇_{h/2}‖.
        relative_error: the error of ∇_h the two imply (Richardson, order p):
            :math:`\frac{2^p}{2^p − 1}‖∇_h − ∇_{h/2}‖ / ‖∇_{h/2}‖`.

    Example:
        >>> from diffsim.doctor import Discretization
        >>> d = Discretization(h=0.05, order=1, coarse_norm=1.6, fine_norm=1.3,
        ...                    difference=0.3, relative_error=2 * 0.3 / 1.3)
        >>> round(d.relative_error, 3)  # ∇_h is ~46 % off the limit h → 0
        0.462
    """

    h: float
    order: int
    coarse_norm: float
    fine_norm: float
    difference: float
    relative_error: float


@dataclasses.dataclass(frozen=True)
class Measurements:
    r"""Every number the rules decide on (numpy and Python scalars, no tracers): the
    evidence of the last sampling round (:class:`~diffsim.estimators._evidence.Evidence`,
    the statistics ``auto`` decides on, as numbers), read by name (``m.zeroth_mean`` is
    ``m.evidence.zeroth_mean``), plus what the doctor adds: σ as sampled
    (``sigma_components``, ``sigma_form``), the cost of every round (``evaluations``) and,
    for a rollout, the ``horizon`` and ``discretization`` checks.

    σ may differ per component (``sigma_components``, raveled like θ). The statistics are
    taken in the **scaled coordinates** :math:`y = (θ − θ_0)\,\bar σ/σ` (``scale`` =
    σ/σ̄, σ̄ = ``sigma`` the largest component), where the perturbations are isotropic
    with scale σ̄: norms, ``bias_gap``, ``epsilon``, ρ, the finite-difference ladder and
    its directions live there. For one number σ these coordinates are θ's own and every
    statistic is what it was for a scalar σ. Per-component vectors (``grad``,
    ``zeroth_mean``/``_se``, ``first_mean``/``_se``) are in θ's units.

    ``loss``, ``grad``, ``grad_norm``: L(θ), ∇L(θ) (raveled) and the norm of σ ⊙ ∇L / σ̄.
    The smoothed gradient: means and standard errors of the ZoBG (antithetic pairs) and
    FoBG samples, the largest significance of a non-zero ZoBG mean
    (``z_smoothed_nonzero``) and of their gap (``z_first_vs_zeroth``), of ∇L(θ) against the
    smoothed gradient estimated from the same pairs without the control variate, beyond ten
    times its norm (``z_exact_vs_smoothed``), the gap's norm and
    the Bernstein radius ε of the ZoBG mean. Sample tails: ρ (``stiffness_ratio``), the
    excess kurtosis of the FoBG norms, the largest loss change and sample gradient. Finite
    differences: per direction, the error over the rounding noise (``fd_excess``, (m, k))
    and the log–log slopes of the error between consecutive steps (``fd_slopes``,
    (m−1, k)); the change of slope at θ, 0 when there is no kink (``fd_kink``,
    :func:`~diffsim.estimators._evidence.fd_kink`); above 8 parameters the ladder's last
    direction is the gradient's own, and ``line_gap`` is how far the loss's slope along it
    stays from ‖∇L‖, 0 where it follows it (:func:`~diffsim.estimators._evidence.line_gap`).
    Flatness: the largest loss change at
    δ ≈ σ/10 against the median change at σ. ``num_samples``: N, the FoBG samples (and
    ZoBG loss evaluations) these statistics rest on. ``horizon``: set for a rollout.

    Example:
        A step 0.5σ away: the exact gradient is 0 and the loss flat at θ, yet the smoothed
        gradient is far from 0 — what the ``plateau`` rule reads:

        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import Measurements, measure
        >>> step = lambda t: jnp.where(t >= 0.0, 1.0, 0.0)
        >>> m = measure(step, jnp.asarray(0.05), jax.random.PRNGKey(0), sigma=0.1)
        >>> isinstance(m, Measurements), m.num_samples, m.grad_norm, m.local_change
        (True, 256, 0.0, 0.0)
        >>> m.z_smoothed_nonzero > 4, m.all_finite, m.horizon is None
        (True, True, True)
        >>> list(m.to_dict())[:4]
        ['sigma', 'sigma_form', 'sigma_components', 'num_samples']
    """

    evidence: ev.Evidence
    evaluations: dict[str, int]
    sigma_components: np.ndarray
    sigma_form: str = ""
    horizon: Horizon | None = None
    discretization: Discretization | None = None

    def __getattr__(self, name: str) -> Any:
        # the statistics, by name (only called for names that are not fields)
        if name.startswith("__") or name == "evidence":
            raise AttributeError(name)
        try:
            return getattr(self.evidence, name)
        except AttributeError:
            raise AttributeError(f"Measurements has no statistic {name!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """The measurements a :class:`~diffsim.Diagnosis` reports, by name."""
        out: dict[str, Any] = {
            "sigma": self.sigma,
            "sigma_form": self.sigma_form,
            "sigma_components": self.sigma_components,
            "num_samples": self.num_samples,
            "loss": self.loss,
            "grad": self.grad,
            "zeroth_mean": self.zeroth_mean,
            "zeroth_se": self.zeroth_se,
            "first_mean": self.first_mean,
            "first_se": self.first_se,
            "z_smoothed_nonzero": self.z_smoothed_nonzero,
            "z_first_vs_zeroth": self.z_first_vs_zeroth,
            "z_exact_vs_smoothed": self.z_exact_vs_smoothed,
            "bias_gap": self.bias_gap,
            "epsilon": self.epsilon,
            "stiffness_ratio": self.stiffness_ratio,
            "first_kurtosis": self.first_kurtosis,
            "max_loss_change": self.max_loss_change,
            "fd_slope_small_steps": self.fd_slope_small_steps,
            "fd_over_grad": self.fd_over_grad,
            "fd_kink": self.fd_kink,
            "local_change": self.local_change,
            "typical_change": self.typical_change,
            "grad_norm": self.grad_norm,
        }
        dz = self.discretization
        if dz is not None:
            out.update(discretization_error=dz.relative_error, time_step=dz.h,
                       grad_at_half_step_norm=dz.fine_norm)  # fmt: skip
        h = self.horizon
        if h is not None:
            out.update(
                horizons=h.horizons,
                jacobian_norms=h.jacobian_norms,
                jacobian_growth=h.growth,
                lyapunov_rate_per_step=h.rate,
                max_step_amplification=h.max_step,
            )
        return out


MIN_SIGMA_SPACINGS = 64
"""σ must be at least this many float spacings of θ's components (in θ's dtype): below
it, θ + σw rounds to a handful of values and the zeroth-order samples are rounding noise
(at σ below one spacing all exactly 0, with standard error 0), which the doctor would read
as a disagreement with the first-order samples."""


def check_resolves(name: str, sigma: Any, x: Any) -> None:
    """Raise ``ValueError`` when perturbations of scale ``sigma`` (one number, or one per
    component of raveled ``x``) are below what ``x``'s dtype resolves at each component's
    magnitude (:data:`MIN_SIGMA_SPACINGS` spacings)."""
    dtype = np.dtype(x.dtype)
    mags = np.abs(np.asarray(x, dtype)).reshape(-1)
    sig = np.broadcast_to(np.asarray(sigma, np.float64).reshape(-1), mags.shape)
    if np.ndim(sigma) == 0:  # one σ: against the largest component, as it always was
        mags = np.full(mags.shape, mags.max() if mags.size else 0.0, dtype)
    least = MIN_SIGMA_SPACINGS * np.spacing(mags).astype(np.float64)
    bad = np.flatnonzero(sig < least)
    if bad.size == 0:
        return
    i = int(bad[0])
    where = "" if np.ndim(sigma) == 0 else f" (component {i} of raveled theta)"
    big, spacing = float(mags[i]), float(np.spacing(mags[i]))
    raise ValueError(
        f"{name} must be >= {least[i]:.3g}{where} to perturb theta in {dtype} (|theta| up to "
        f"{big:.4g}, float spacing {spacing:.3g}: smaller perturbations round back to "
        f"theta), got {float(sig[i]):g}"
        + ("; or use float64 (jax.config.update('jax_enable_x64', True))"
           if dtype.itemsize < 8 else "")
    )  # fmt: skip


SIGMA_FRACTION = 0.05
"""The default σ is this fraction of each component's magnitude (:func:`default_sigma`)."""


def default_sigma(x: Any) -> Relative:
    r"""The doctor's default σ at raveled θ ``x``: ``Relative(0.05, floor)``, i.e.
    :math:`σ_i = 0.05 \max(|θ_i|, \text{floor})`, with the floor the smallest non-zero
    :math:`|θ_i|` (1 when θ is all zero).

    Each component is perturbed by 5 % of its own size, so a damping of 0.2 beside a
    stiffness of 4 moves by 0.01, not by 0.2 (its whole value: the samples then reach
    negative damping). A component at zero has no size of its own; it borrows the
    smallest one θ shows, so it is never perturbed more than any non-zero component and
    cannot dwarf a small parameter (a floor tied to ‖θ‖∞ would give the damping beside a
    stiffness of 10⁴ a σ of several units). For one number θ ≠ 0 this is 0.05·|θ|; for an
    all-zero θ, 0.05.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.doctor import default_sigma
        >>> x = jnp.array([4.0, 0.2, 0.0])  # a stiffness, a damping, a parameter at 0
        >>> [round(float(s), 4) for s in default_sigma(x).resolve(x)]
        [0.2, 0.01, 0.01]
    """
    del x  # the floor is resolved against θ itself (Relative with floor=None)
    return DEFAULT_SIGMA


def resolve_sigma(sigma: Any, theta: Any) -> tuple[np.ndarray, str]:
    """σ in any of its forms (``None``: :func:`default_sigma`) as the per-component vector
    at θ (raveled, θ's dtype), checked finite, > 0 and resolvable (:func:`check_resolves`),
    and a short description of its form.

    Raises:
        ValueError: a σ ≤ 0, not finite, below θ's resolution, or a pytree σ that does not
            match θ.
    """
    theta = as_arrays("theta", theta, floating=True)
    x, _ = ravel_pytree(theta)
    if sigma is None:
        sigma = default_sigma(x)
        form = f"default: {describe(sigma)}"
    else:
        sigma = check_sigma("sigma", sigma)
        form = describe(sigma)
    vec = np.asarray(sigma_vector(sigma, theta))
    if vec.size and not (np.all(np.isfinite(vec)) and np.all(vec > 0)):
        bad = int(np.flatnonzero(~(np.isfinite(vec) & (vec > 0)))[0])
        raise ValueError(
            f"sigma must be finite and > 0 in {vec.dtype} for every component of theta, got "
            f"{float(vec[bad]):g} for component {bad} of raveled theta"
        )
    check_resolves("sigma", vec if not is_scalar_sigma(sigma) else float(vec.max()), x)
    return vec, form


def _numbers(e: ev.Evidence) -> ev.Evidence:
    """The evidence as numbers: Python scalars (bool, int, float) and numpy arrays."""

    def num(v: Any) -> Any:
        a = np.asarray(v)
        if a.ndim:
            return a
        if a.dtype == np.bool_:
            return bool(a)
        return int(a) if np.issubdtype(a.dtype, np.integer) else float(a)

    return jax.tree_util.tree_map(num, e)


def sample(
    loss: Callable[[Any], Any], theta: Any, key: jax.Array, *, sigma: Any, num_samples: int,
    max_samples: int, thresholds: Thresholds, rel_steps: Any = DEFAULT_REL_STEPS,
    num_directions: int = 8, devices: Any = None, stiffness_decided: bool = False,
    widen: bool = True,
) -> tuple[Measurements, Any, int]:  # fmt: skip
    """The doctor's samples around θ, in the rounds ``auto`` draws, by the same rule
    (:func:`~diffsim.estimators._rounds.host_rounds`: σ widened ×4 when nothing moves
    within the default σ, N = ``num_samples`` doubled up to ``max_samples`` while a
    statistic is undecided; the loss's batch compiled once and reused by every round),
    reduced to :class:`Measurements`.

    Returns ``(measurements, σ as used, widenings)``: σ in the form given (``None``: the
    default, :func:`default_sigma`), times 4 per widening; ``measurements.evaluations``
    counts every round. ``widen=False``: σ is never widened.
    """
    _, x, _ = flatten_loss(loss, theta)  # checks loss and θ (named) first
    sig, form = resolve_sigma(sigma, theta)
    spec = DEFAULT_SIGMA if sigma is None else check_sigma("sigma", sigma)
    max_widen = ev.MAX_WIDEN if widen and may_widen(spec) else 0  # a σ the user gives is kept
    chunk = max(2, int(num_samples) // 2 * 2)
    sbar = float(sig.max()) if x.shape[0] else 1.0
    sampler = ThetaSampler(loss, jnp.asarray(sig / np.asarray(sbar, sig.dtype), x.dtype))
    found = host_rounds(
        sampler, theta, key, jnp.asarray(sbar, x.dtype),
        jnp.asarray(np.asarray(rel_steps, float), x.dtype),
        num_samples=chunk, max_samples=max(chunk, int(max_samples)), max_widen=max_widen,
        thresholds=thresholds, num_directions=int(num_directions), mesh=device_mesh(devices),
        stiffness_decided=stiffness_decided,
    )  # fmt: skip
    e, r = _numbers(found.evidence), int(found.widenings)
    factor = ev.WIDEN**r
    losses, grads = sampler.cost(r, chunk, e.num_samples, int(np.asarray(e.fd_excess).size))
    if r:
        form = f"{form} × {factor:g} (widened {r}×: nothing moved within the σ asked for)"
    m = Measurements(
        evidence=e, evaluations={"loss": losses, "grad": grads},
        sigma_components=(sig * np.asarray(factor, sig.dtype)).astype(sig.dtype),
        sigma_form=form,
    )  # fmt: skip
    return m, (widened(spec, factor) if r else spec), r


def measure(
    loss: Callable[[Any], Any],
    theta: Any,
    key: jax.Array,
    *,
    sigma: Any = None,
    num_samples: int = 256,
    rel_steps: Any = DEFAULT_REL_STEPS,
    num_directions: int = 8,
    devices: Any = None,
) -> Measurements:
    """Sample the loss around θ (one batch) and reduce the samples to statistics.

    The arguments are those of :func:`~diffsim.diagnose` (counts and steps already checked);
    ``sigma`` is a number, a pytree like θ, :class:`~diffsim.estimators.Relative`, or ``None``
    (:func:`default_sigma`). N = ``num_samples`` FoBG samples and N/2 antithetic ZoBG pairs.
    Cost: ``1 + 2·k·m + N`` loss and ``1 + N`` gradient evaluations (N rounded down to
    even). :func:`~diffsim.diagnose` draws its samples in rounds (:func:`sample`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import measure
        >>> m = measure(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0),
        ...             sigma=0.1)
        >>> m.num_samples, m.evaluations  # 1 + 2·2·7 + 256 losses, 1 + 256 gradients
        (256, {'loss': 285, 'grad': 257})
        >>> [round(float(g), 3) for g in m.grad], [round(float(g), 3) for g in m.zeroth_mean]
        ([2.0, -4.0], [2.0, -4.0])

    Raises:
        ValueError: σ is not finite and > 0, below θ's resolution, or a pytree unlike θ;
            θ has a non-finite leaf.
        TypeError: ``loss`` is not callable or not scalar.
    """
    chunk = max(2, int(num_samples) // 2 * 2)
    m, _, _ = sample(
        loss, theta, key, sigma=sigma, num_samples=chunk, max_samples=chunk,
        thresholds=Thresholds(), rel_steps=rel_steps, num_directions=num_directions,
        devices=devices, widen=False,
    )  # fmt: skip
    return m


# ---------------------------------------------------------------------------------------
# the rollout Jacobian along the horizon
# ---------------------------------------------------------------------------------------


class _WithSensitivity(eqx.Module):
    r"""``step`` lifted to carry its sensitivity: :math:`(s_t, S_t, ·) \mapsto
    (s_{t+1}, A_t S_t, A_t)` with :math:`A_t = ∂s_{t+1}/∂s_t` the library's per-step
    Jacobian (the one ``rollout_jacobian(..., method="product")`` chains), so
    :math:`S_t = ∂s_t/∂s_0`. A rollout of it is the product route, kept at every t."""

    step: Callable[..., Any]

    def __call__(self, carry, theta, u=None):
        s, S, _ = carry
        A, _ = _autodiff_step_jacobian(self.step, s, theta, u)
        return call_step(self.step, s, theta, u), A @ S, A


@jax.jit
def _spectral_norms(S, A):
    return jnp.linalg.norm(S, 2, axis=(-2, -1)), jnp.linalg.norm(A, 2, axis=(-2, -1))


def sensitivity_profile(
    step: Callable[..., Any], s0: Any, theta: Any, num_steps: int, inputs: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Norms of the rollout Jacobian at every horizon, and of every step's Jacobian.

    One rollout (:func:`diffsim.rollout`, so per-step ``inputs`` reach the step) of the
    state together with :math:`S_t = ∂s_t/∂s_0 = A_{t-1} \cdots A_0`, the per-step
    Jacobians :math:`A_t` coming from :mod:`diffsim._jacobians` — at t = T the product is
    ``rollout_jacobian(step, s0, theta, T, method="product", inputs=inputs)[0]``.

    Returns:
        ``(‖S_t‖₂ for t = 1..T, ‖A_t‖₂ for t = 0..T-1)``, both of shape (T,).
    """
    s_flat, _ = ravel_pytree(s0)
    eye = jnp.eye(s_flat.shape[0], dtype=s_flat.dtype)
    carry0 = (s0, eye, eye)
    _, S, A = rollout(
        _WithSensitivity(step), carry0, theta, num_steps, inputs=inputs, include_initial=False
    )
    norms, step_norms = _spectral_norms(S, A)
    return np.asarray(norms), np.asarray(step_norms)


def horizon_growth(norms: np.ndarray, step_norms: np.ndarray) -> Horizon:
    """Growth, rate and concentration of the rollout Jacobian from its profile."""
    num_steps = norms.shape[0]
    horizons = [max(1, num_steps // 8), num_steps // 4, num_steps // 2, num_steps]
    at = [float(norms[t - 1]) for t in horizons]
    growth = at[-1] / max(at[0], 1e-300) if np.isfinite(at[-1]) else float("inf")
    half = np.arange(num_steps // 2, num_steps)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = float(np.polyfit(half, np.log(np.maximum(norms[half], 1e-300)), 1)[0])
    max_step = float(np.max(step_norms))
    # share of the growth that the single most amplifying step accounts for
    log_growth = math.log(growth) if np.isfinite(growth) and growth > 1 else float("inf")
    concentration = math.log(max(max_step, 1.0)) / log_growth if log_growth > 0 else 0.0
    return Horizon(horizons, at, growth, rate, max_step, concentration)
