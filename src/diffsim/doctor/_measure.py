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
from .._sharding import device_mesh, sample_map
from .._sigma import Relative, check_sigma, describe, is_scalar_sigma, sigma_vector
from ..estimators.alpha_order import bernstein_radius
from ..estimators.base import flatten_loss
from ..estimators.first_order import first_order_samples


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
        :func:`~diffsim.diagnose_rollout` measures it; the rules read it from
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
class Measurements:
    r"""Every number the rules decide on (numpy and Python scalars, no tracers).

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
    (``z_smoothed_nonzero``) and of their gap (``z_first_vs_zeroth``), the gap's norm and
    the Bernstein radius ε of the ZoBG mean. Sample tails: ρ (``stiffness_ratio``), the
    excess kurtosis of the FoBG norms, the largest loss change and sample gradient. Finite
    differences: per direction, the error over the rounding noise (``fd_excess``, (m, k))
    and the log–log slopes of the error between consecutive steps (``fd_slopes``,
    (m−1, k)). Flatness: the largest loss change at δ ≈ σ/10 against the median change at
    σ. ``num_samples``: N, the FoBG samples (and ZoBG loss evaluations) these statistics
    rest on. ``horizon``: set for a rollout.

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
        >>> list(m.as_dict())[:4]
        ['sigma', 'sigma_form', 'sigma_components', 'num_samples']
    """

    sigma: float
    eps: float
    loss: float
    grad: np.ndarray
    grad_norm: float
    all_finite: bool
    finite_loss: bool
    finite_gradient: bool
    finite_perturbed_losses: bool
    finite_perturbed_gradients: bool
    nonfinite_sample_gradients: int
    zeroth_mean: np.ndarray
    zeroth_se: np.ndarray
    first_mean: np.ndarray
    first_se: np.ndarray
    smoothed_grad_norm: float
    z_smoothed_nonzero: float
    z_first_vs_zeroth: float
    bias_gap: float
    epsilon: float
    stiffness_ratio: float
    first_kurtosis: float
    max_loss_change: float
    max_sample_grad: float
    grad_along_directions: np.ndarray
    fd_noise: np.ndarray
    fd_excess: np.ndarray
    fd_slopes: np.ndarray
    fd_slope_small_steps: float
    fd_over_grad: float
    local_change: float
    typical_change: float
    evaluations: dict[str, int]
    horizon: Horizon | None = None
    sigma_components: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(0))
    scale: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(0))
    sigma_form: str = ""
    num_samples: int = 0

    def as_dict(self) -> dict[str, Any]:
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
            "bias_gap": self.bias_gap,
            "epsilon": self.epsilon,
            "stiffness_ratio": self.stiffness_ratio,
            "first_kurtosis": self.first_kurtosis,
            "max_loss_change": self.max_loss_change,
            "fd_slope_small_steps": self.fd_slope_small_steps,
            "fd_over_grad": self.fd_over_grad,
            "local_change": self.local_change,
            "typical_change": self.typical_change,
            "grad_norm": self.grad_norm,
        }
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


def _directions(d: int, k: int, key, dtype):
    """Coordinate axes when d <= k, else k random unit directions."""
    if d <= k:
        return jnp.eye(d, dtype=dtype)
    u = jax.random.normal(key, (k, d), dtype)
    return u / jnp.linalg.norm(u, axis=1, keepdims=True)


def _excess_kurtosis(a: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        return float("nan")  # no statistic on non-finite samples (non_finite says so)
    c = a - np.mean(a)
    sd = math.sqrt(float(np.mean(c**2)))
    if not (sd > 0 and math.isfinite(sd)):
        return 0.0 if sd == 0 else float("nan")
    return float(np.mean((c / sd) ** 4) - 3.0)  # standardised first: no overflow


@eqx.filter_jit
def _draw(loss, theta, key, scale, sigma, rel_steps, state, start, stop, chunk, num_dir, mesh):
    r"""Fill the sample buffers of ``state`` from chunk ``start`` to ``stop`` (traced, so
    every round of the sequential test reuses one compiled program), computing the
    sample-free part (L(θ), ∇L(θ), the finite-difference ladder) on the first call.

    Everything is evaluated in the scaled coordinates y, :math:`f(y) = L(θ_0 + s ⊙ y)`
    with ``s = scale`` = σ/σ̄, where the perturbations are σ̄·z, isotropic. For one number
    σ, s = 1 and :math:`θ_0 + 1·y` is θ_0 + y exactly: the same numbers as in θ.
    The samples (and the ladder's points) are evaluated over ``mesh`` when one is given
    (:func:`diffsim._sharding.sample_map`).
    """
    f0, x0, _ = flatten_loss(loss, theta)
    d = x0.shape[0]

    def f(y):
        return f0(x0 + scale * y)

    origin = jnp.zeros_like(x0)
    k_dir, k_samples = jax.random.split(key)

    def fixed(_):
        L0, g = jax.value_and_grad(f0)(x0)
        # directional central differences on a ladder of step sizes δ_j = s_j σ̄ (in y)
        U = _directions(d, num_dir, k_dir, x0.dtype)  # (k, d)
        deltas = rel_steps.astype(x0.dtype) * sigma  # (m,)
        pts = deltas[:, None, None] * U[None, :, :]
        both = sample_map(f, jnp.concatenate([pts, -pts]).reshape(-1, d), mesh)
        fp, fm = both.reshape(2, *pts.shape[:2])  # (m, k) each
        return {"loss": L0, "grad": g, "deltas": deltas, "fd_plus": fp, "fd_minus": fm,
                "grad_along_directions": U @ (scale * g)}  # fmt: skip

    fx = jax.lax.cond(start == 0, fixed, lambda _: state["fixed"], None)
    L0 = fx["loss"]
    pairs = chunk // 2

    def body(i, bufs):
        k0, k1 = jax.random.split(jax.random.fold_in(k_samples, i))
        # ZoBG in antithetic pairs with the exact gradient as control variate,
        # g = ((L(θ+σz) − L(θ−σz))/2 − σ zᵀ∇L(θ)) z/σ + ∇L(θ) (unbiased: E[zzᵀ] = I): the
        # even part of the loss (a bowl's curvature) cancels in the pair and the linear part
        # in the control variate, so for a smooth loss only O(σ²) is left, and the
        # chi-square-like spread of ∇L·z z, whose standard error is unreliable at small N,
        # is gone; a jump's contribution is untouched
        gy = scale * fx["grad"]
        z = jax.random.normal(k0, (pairs, d), x0.dtype)
        fp, fm = sample_map(f, jnp.concatenate([sigma * z, -sigma * z]), mesh).reshape(2, -1)
        g0 = ((fp - fm) / 2 - sigma * (z @ gy))[:, None] * z / sigma + gy
        g1 = first_order_samples(f, origin, sigma, k1, chunk, mesh)
        dL = jnp.concatenate([fp, fm]) - L0
        return {
            "zeroth": jax.lax.dynamic_update_slice(bufs["zeroth"], g0, (i * pairs, 0)),
            "first": jax.lax.dynamic_update_slice(bufs["first"], g1, (i * chunk, 0)),
            "loss_changes": jax.lax.dynamic_update_slice(
                bufs["loss_changes"], dL, (i * 2 * pairs,)
            ),
        }

    samples = {k: state[k] for k in ("zeroth", "first", "loss_changes")}
    samples = jax.lax.fori_loop(start, stop, body, samples)
    return dict(samples, fixed=fx)


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

DEFAULT_REL_STEPS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)
"""The finite-difference ladder, as multiples of σ."""


def default_sigma(x: Any) -> Relative:
    r"""The doctor's default σ at raveled θ ``x``: ``Relative(0.05, floor)``, i.e.
    :math:`σ_i = 0.05 \max(|θ_i|, \text{floor})`, with the floor the smallest non-zero
    :math:`|θ_i|` (1 when θ is all zero).

    Each component is perturbed by 5 % of its own size, so a damping of 0.2 beside a
    stiffness of 4 moves by 0.01, not by 0.2 (its whole value: the samples then reach
    negative damping). A component at zero has no size of its own; it borrows the
    smallest one θ shows, so it is never perturbed more than any non-zero component and
    cannot dwarf a small parameter (a floor tied to ‖θ‖∞ would give the damping beside a
    stiffness of 10⁴ a σ of several units). For one number θ ≠ 0 this is 0.05·|θ|, the
    former default for |θ| >= 1; for an all-zero θ, 0.05 (the former default).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.doctor import default_sigma
        >>> x = jnp.array([4.0, 0.2, 0.0])  # a stiffness, a damping, a parameter at 0
        >>> [round(float(s), 4) for s in default_sigma(x).resolve(x)]
        [0.2, 0.01, 0.01]
    """
    mags = np.abs(np.asarray(x, np.float64)).reshape(-1)
    nonzero = mags[mags > 0]
    tiny = float(np.finfo(np.dtype(x.dtype)).tiny) / SIGMA_FRACTION
    floor = max(float(nonzero.min()), tiny) if nonzero.size else 1.0
    return Relative(SIGMA_FRACTION, floor=floor)


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


class Sampler:
    """The doctor's samples around θ, drawn in rounds that reuse one compiled program.

    ``extend(n)`` draws samples until N = n (a multiple of ``chunk``, at most
    ``capacity``); ``measurements()`` reduces the N drawn so far to :class:`Measurements`.
    The buffers have the fixed shape of ``capacity``: the first call compiles, every later
    round (and every later θ of the same structure) reuses the program.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import Sampler
        >>> s = Sampler(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0),
        ...             sigma=0.1, chunk=32, capacity=128)
        >>> s.extend(32); s.num_samples
        32
        >>> s.extend(64); s.num_samples  # 32 fresh samples join the first 32
        64
        >>> m = s.measurements()
        >>> m.num_samples, [round(float(g), 3) for g in m.zeroth_mean]  # exact on a bowl
        (64, [2.0, -4.0])
        >>> s.extend(1000); s.num_samples  # at most the capacity
        128
    """

    def __init__(
        self, loss: Callable[[Any], Any], theta: Any, key: jax.Array, *, sigma: Any,
        chunk: int, capacity: int, rel_steps: Any = DEFAULT_REL_STEPS,
        num_directions: int = 8, devices: Any = None,
    ) -> None:  # fmt: skip
        _, x, _ = flatten_loss(loss, theta)  # checks loss and θ (named) first
        self._sig, self._form = resolve_sigma(sigma, theta)
        d = x.shape[0]
        self.sigma = float(self._sig.max()) if d else 1.0
        self._scale = (self._sig / np.asarray(self.sigma, self._sig.dtype)).astype(x.dtype)
        self.chunk, self.capacity = int(chunk), int(capacity)
        if self.chunk < 2 or self.chunk % 2 or self.capacity % self.chunk:
            raise ValueError(
                f"capacity {capacity} must be a multiple of chunk {chunk}, an even number >= 2"
            )
        self._args = (loss, theta, key)
        self._steps = jnp.asarray(np.asarray(rel_steps, dtype=float), x.dtype)
        self._k = int(num_directions)
        self.mesh = device_mesh(devices)
        m, k = self._steps.shape[0], d if d <= self._k else self._k
        dt = x.dtype
        zeros = jnp.zeros
        self._state = {
            "zeroth": zeros((self.capacity // 2, d), dt),
            "first": zeros((self.capacity, d), dt),
            "loss_changes": zeros((self.capacity,), dt),
            "fixed": {"loss": zeros((), dt), "grad": zeros((d,), dt),
                      "deltas": zeros((m,), dt), "fd_plus": zeros((m, k), dt),
                      "fd_minus": zeros((m, k), dt), "grad_along_directions": zeros((k,), dt)},
        }  # fmt: skip
        self.num_chunks = 0

    @property
    def num_samples(self) -> int:
        return self.num_chunks * self.chunk

    def extend(self, n: int) -> None:
        """Draw fresh samples until N = ``n`` (rounded up to whole chunks, at most the
        capacity); the samples drawn already are kept."""
        stop = min(-(-int(n) // self.chunk), self.capacity // self.chunk)
        if stop <= self.num_chunks:
            return
        loss, theta, key = self._args
        self._state = _draw(
            loss, theta, key, jnp.asarray(self._scale), jnp.asarray(self.sigma, self._scale.dtype),
            self._steps, self._state, jnp.asarray(self.num_chunks), jnp.asarray(stop),
            self.chunk, self._k, self.mesh,
        )  # fmt: skip
        self.num_chunks = stop

    def measurements(self) -> Measurements:
        """The statistics of the samples drawn so far (at least one round)."""
        if self.num_chunks == 0:
            raise ValueError("no samples drawn yet: call extend(n) first")
        pairs = self.num_chunks * (self.chunk // 2)
        n = self.num_samples
        st = jax.tree_util.tree_map(np.asarray, self._state)
        return _statistics(
            st["fixed"], st["zeroth"][:pairs], st["first"][:n], st["loss_changes"][: 2 * pairs],
            self.sigma, self._sig, self._scale, self._form,
        )  # fmt: skip


def _mean_and_stats(g: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    n = g.shape[0]
    mean = np.mean(g, axis=0)
    var_c = np.sum((g - mean) ** 2, axis=0) / max(n - 1, 1)
    return mean, np.sqrt(var_c / n), float(np.sum(var_c))


def _statistics(fx, g0, g1, dL, sigma, sig_vec, scale, form) -> Measurements:
    eps = float(np.finfo(fx["grad"].dtype).eps)
    L0 = float(fx["loss"])
    g = fx["grad"]  # θ's units
    with np.errstate(all="ignore"):
        gy = scale * g  # the gradient in the scaled coordinates
        gnorm = float(np.linalg.norm(gy))
        n, d = g1.shape
        pairs = g0.shape[0]

        # the smoothed gradient: is the ZoBG mean non-zero, do FoBG and ZoBG agree? (the
        # z-statistics are per component: the same in θ and in the scaled coordinates)
        m0, se0, var0 = _mean_and_stats(g0)
        m1, se1, _ = _mean_and_stats(g1)
        z_smooth = np.where(se0 > 0, np.abs(m0) / se0, np.where(np.abs(m0) > 0, np.inf, 0.0))
        comb = np.sqrt(se0**2 + se1**2)
        z_gap = np.where(comb > 0, np.abs(m1 - m0) / comb, np.where(m1 != m0, np.inf, 0.0))
        # the paper's Bernstein radius of the ZoBG mean, R the largest observed deviation
        dev = np.linalg.norm(g0 - m0, axis=1)
        R = float(np.max(dev)) if dev.size else 0.0
        epsilon = float(bernstein_radius(var0, pairs, d, 0.05, R))

        # sample tails: per-sample gradients against the loss changes they should explain
        max_dL = float(np.max(np.abs(dL))) if dL.size else 0.0
        norms = np.linalg.norm(g1, axis=1)
        max_norm = float(np.max(norms)) if np.all(np.isfinite(norms)) else float("inf")
        rho = max_norm * sigma / max(max_dL, eps * (1 + abs(L0)) * 16)

        # finite differences against the exact directional derivative, above rounding noise
        fp, fm, deltas = fx["fd_plus"], fx["fd_minus"], fx["deltas"]
        fd = (fp - fm) / (2 * deltas[:, None])  # (m, k)
        ad = fx["grad_along_directions"]
        noise = 16 * eps * (abs(L0) + 1) / deltas
        excess = np.abs(fd - ad[None, :]) - noise[:, None]
        logf = np.log(np.maximum(np.abs(fd - ad[None, :]).astype(np.float64), 1e-300))
        slopes = np.diff(logf, axis=0) / np.diff(np.log(deltas))[:, None]  # (m-1, k)
        tail = np.mean(slopes[-2:], axis=0)
        ok = np.isfinite(tail)
        fd_slope = float(np.min(tail[ok])) if np.any(ok) else 0.0

        # flatness at δ = σ/10 against the typical change at σ (a smooth minimum changes by
        # (δ/σ)² ≈ 1e-2 of it; a plateau by rounding only)
        j = int(np.argmin(np.abs(deltas / sigma - 0.1)))
        local = float(np.max(np.abs(np.concatenate([fp[j], fm[j]]) - L0)))
        typical = float(np.median(np.abs(dL))) if dL.size else 0.0

    to_theta = np.where(scale > 0, scale, 1.0)  # ∂/∂θ_i = (∂/∂y_i) / s_i
    finite_perturbed = bool(
        np.all(np.isfinite(fp)) and np.all(np.isfinite(fm)) and np.all(np.isfinite(dL))
    )
    return Measurements(
        sigma=sigma,
        eps=eps,
        loss=L0,
        grad=g,
        grad_norm=gnorm,
        all_finite=bool(
            np.isfinite(L0)
            and np.all(np.isfinite(g))
            and finite_perturbed
            and np.all(np.isfinite(g1))
        ),
        finite_loss=bool(np.isfinite(L0)),
        finite_gradient=bool(np.all(np.isfinite(g))),
        finite_perturbed_losses=finite_perturbed,
        finite_perturbed_gradients=bool(np.all(np.isfinite(norms))),
        nonfinite_sample_gradients=int(np.sum(~np.isfinite(norms))),
        zeroth_mean=m0 / to_theta,
        zeroth_se=se0 / to_theta,
        first_mean=m1 / to_theta,
        first_se=se1 / to_theta,
        smoothed_grad_norm=float(np.linalg.norm(m0)),
        z_smoothed_nonzero=float(np.nanmax(z_smooth)) if d else 0.0,
        z_first_vs_zeroth=float(np.nanmax(z_gap)) if d else 0.0,
        bias_gap=float(np.linalg.norm(m1 - m0)),
        epsilon=epsilon,
        stiffness_ratio=rho,
        first_kurtosis=_excess_kurtosis(norms),
        max_loss_change=max_dL,
        max_sample_grad=max_norm,
        grad_along_directions=ad,
        fd_noise=noise,
        fd_excess=excess,
        fd_slopes=slopes,
        fd_slope_small_steps=fd_slope,
        fd_over_grad=float(np.max(excess[-1])),
        local_change=local,
        typical_change=typical,
        evaluations={"loss": 1 + 2 * fd.size + dL.size, "grad": 1 + n},
        sigma_components=sig_vec,
        scale=scale,
        sigma_form=form,
        num_samples=n,
    )


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
    """Sample the loss around θ (one jitted batch) and reduce the samples to statistics.

    The arguments are those of :func:`~diffsim.diagnose` (counts and steps already checked);
    ``sigma`` is a number, a pytree like θ, :class:`~diffsim.Relative`, or ``None``
    (:func:`default_sigma`). N = ``num_samples`` FoBG samples and N/2 antithetic ZoBG pairs.
    Cost: ``1 + 2·k·m + N`` loss and ``1 + N`` gradient evaluations (N rounded down to
    even). :func:`~diffsim.diagnose` draws its samples in rounds through :class:`Sampler`.

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
    s = Sampler(loss, theta, key, sigma=sigma, chunk=chunk, capacity=chunk,
                rel_steps=rel_steps, num_directions=num_directions, devices=devices)  # fmt: skip
    s.extend(chunk)
    return s.measurements()


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
