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

from .._checks import check_positive
from .._jacobians import _autodiff_step_jacobian
from .._rollout import call_step, rollout
from ..estimators.alpha_order import bernstein_radius
from ..estimators.base import flatten_loss, mean_and_stats
from ..estimators.first_order import first_order_samples
from ..estimators.zeroth_order import zeroth_order_samples


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
    """

    horizons: list[int]
    jacobian_norms: list[float]
    growth: float
    rate: float
    max_step: float
    concentration: float


@dataclasses.dataclass(frozen=True)
class Measurements:
    """Every number the rules decide on (numpy and Python scalars, no tracers).

    ``loss``, ``grad``, ``grad_norm``: L(θ), ∇L(θ) (raveled) and its norm. The smoothed
    gradient: means and standard errors of the ZoBG and FoBG samples, the largest
    significance of a non-zero ZoBG mean (``z_smoothed_nonzero``) and of their gap
    (``z_first_vs_zeroth``), the gap's norm and the Bernstein radius ε of the ZoBG mean.
    Sample tails: ρ (``stiffness_ratio``), the excess kurtosis of the FoBG norms, the
    largest loss change and sample gradient. Finite differences: per direction, the error
    over the rounding noise (``fd_excess``, (m, k)) and the log–log slopes of the error
    between consecutive steps (``fd_slopes``, (m−1, k)). Flatness: the largest loss change
    at δ ≈ σ/10 against the median change at σ. ``horizon``: set for a rollout.
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

    def as_dict(self) -> dict[str, Any]:
        """The measurements a :class:`~diffsim.Diagnosis` reports, by name."""
        out: dict[str, Any] = {
            "sigma": self.sigma,
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


def _excess_kurtosis(a):
    c = a - jnp.mean(a, axis=0)
    sd = jnp.sqrt(jnp.mean(c**2, axis=0))
    u = c / jnp.where(sd > 0, sd, 1.0)  # standardise first: no overflow in float32
    return jnp.where(sd > 0, jnp.mean(u**4, axis=0) - 3.0, 0.0)


@eqx.filter_jit
def _sample(loss, theta, key, sigma, num_samples, rel_steps, num_directions):
    f, x, _ = flatten_loss(loss, theta)
    d = x.shape[0]
    k_dir, k0, k1 = jax.random.split(key, 3)
    L0, g = jax.value_and_grad(f)(x)

    # directional central differences on a ladder of step sizes δ_j = s_j σ
    U = _directions(d, num_directions, k_dir, x.dtype)  # (k, d)
    deltas = rel_steps.astype(x.dtype) * sigma  # (m,)
    pts = x[None, None, :] + deltas[:, None, None] * U[None, :, :]
    pts_m = x[None, None, :] - deltas[:, None, None] * U[None, :, :]
    fp = jax.vmap(jax.vmap(f))(pts)  # (m, k)
    fm = jax.vmap(jax.vmap(f))(pts_m)
    fd = (fp - fm) / (2 * deltas[:, None])
    ad_dir = U @ g  # (k,)

    # independent first- and zeroth-order samples of the σ-smoothed gradient
    g0, n_zo = zeroth_order_samples(f, x, sigma, k0, num_samples, False)
    g1 = first_order_samples(f, x, sigma, k1, num_samples)
    m0, se0, var0 = mean_and_stats(g0)
    zeroth_R = jnp.max(jnp.linalg.norm(g0 - m0, axis=1))
    m1, se1, _ = mean_and_stats(g1)
    # the loss changes the ZoBG samples saw: recover them from g0 = ΔL z / σ
    z0 = jax.random.normal(k0, (num_samples, d), x.dtype)
    dL = jax.vmap(f)(x + sigma * z0) - L0
    norms1 = jnp.linalg.norm(g1, axis=1)
    return {
        "loss": L0,
        "grad": g,
        "deltas": deltas,
        "fd": fd,
        "fd_plus": fp,
        "fd_minus": fm,
        "grad_along_directions": ad_dir,
        "zeroth_mean": m0,
        "zeroth_se": se0,
        "zeroth_var": var0,
        "zeroth_R": zeroth_R,
        "first_mean": m1,
        "first_se": se1,
        "first_norms": norms1,
        "first_kurtosis": _excess_kurtosis(norms1),
        "loss_changes": dL,
        "all_finite": jnp.isfinite(L0)
        & jnp.all(jnp.isfinite(g))
        & jnp.all(jnp.isfinite(fp))
        & jnp.all(jnp.isfinite(fm))
        & jnp.all(jnp.isfinite(g1))
        & jnp.all(jnp.isfinite(dL)),
        "num_zeroth_loss_evals": n_zo,
    }


MIN_SIGMA_SPACINGS = 64
"""σ must be at least this many float spacings of θ's largest component (in θ's dtype):
below it, θ + σw rounds to a handful of values and the zeroth-order samples are rounding
noise (at σ below one spacing all exactly 0, with standard error 0), which the doctor would
read as a disagreement with the first-order samples."""


def check_resolves(name: str, sigma: float, x: Any) -> None:
    """Raise ``ValueError`` when perturbations of scale ``sigma`` are below what ``x``'s
    dtype resolves at its magnitude (:data:`MIN_SIGMA_SPACINGS` spacings)."""
    big = float(jnp.max(jnp.abs(x))) if x.size else 0.0
    dtype = np.dtype(x.dtype)
    least = MIN_SIGMA_SPACINGS * float(np.spacing(dtype.type(big)))
    if sigma < least:
        raise ValueError(
            f"{name} must be >= {least:.3g} to perturb theta in {dtype} (|theta| up to "
            f"{big:.4g}, float spacing {float(np.spacing(dtype.type(big))):.3g}: smaller "
            f"perturbations round back to theta), got {sigma:g}"
            + ("; or use float64 (jax.config.update('jax_enable_x64', True))"
               if dtype.itemsize < 8 else "")
        )  # fmt: skip


def measure(
    loss: Callable[[Any], Any],
    theta: Any,
    key: jax.Array,
    *,
    sigma: float | None,
    num_samples: int,
    rel_steps: np.ndarray,
    num_directions: int,
) -> Measurements:
    """Sample the loss around θ (one jitted batch) and reduce the samples to statistics.

    The arguments are those of :func:`~diffsim.diagnose` (counts and steps already checked);
    ``sigma=None`` resolves to ``0.05·max(1, ‖θ‖∞)``. Cost: ``1 + 2·k·m + N`` loss and
    ``1 + N`` gradient evaluations.

    Raises:
        ValueError: σ is not finite and > 0; θ has a non-finite leaf.
        TypeError: ``loss`` is not callable or not scalar.
    """
    _, x, _ = flatten_loss(loss, theta)
    if sigma is None:
        sigma = 0.05 * max(1.0, float(jnp.max(jnp.abs(x))))
    check_positive("sigma", sigma, x.dtype)  # in the dtype the samples use
    sigma = float(sigma)
    check_resolves("sigma", sigma, x)
    n, d = num_samples, x.shape[0]
    raw = _sample(
        loss, theta, key, jnp.asarray(sigma, x.dtype), num_samples, jnp.asarray(rel_steps),
        num_directions,
    )  # fmt: skip
    m = jax.tree_util.tree_map(np.asarray, raw)
    eps = float(np.finfo(m["grad"].dtype).eps)
    L0 = float(m["loss"])
    g = m["grad"]
    gnorm = float(np.linalg.norm(g))

    # the smoothed gradient: is the ZoBG mean non-zero, do FoBG and ZoBG agree?
    m0, se0, m1, se1 = m["zeroth_mean"], m["zeroth_se"], m["first_mean"], m["first_se"]
    with np.errstate(divide="ignore", invalid="ignore"):
        z_smooth = np.where(se0 > 0, np.abs(m0) / se0, np.where(np.abs(m0) > 0, np.inf, 0.0))
        comb = np.sqrt(se0**2 + se1**2)
        z_gap = np.where(comb > 0, np.abs(m1 - m0) / comb, np.where(m1 != m0, np.inf, 0.0))
    dL = m["loss_changes"]
    # the paper's Bernstein radius of the ZoBG mean, with R the largest observed deviation
    epsilon = float(bernstein_radius(float(m["zeroth_var"]), n, d, 0.05, float(m["zeroth_R"])))

    # sample tails: per-sample gradients against the loss changes they should explain
    max_dL = float(np.max(np.abs(dL))) if dL.size else 0.0
    norms = m["first_norms"]
    max_norm = float(np.max(norms)) if np.all(np.isfinite(norms)) else float("inf")
    rho = max_norm * sigma / max(max_dL, eps * (1 + abs(L0)) * 16)

    # finite differences against the exact directional derivative, above rounding noise
    fd = m["fd"]  # (m, k)
    deltas = m["deltas"]
    ad = m["grad_along_directions"]
    noise = 16 * eps * (abs(L0) + 1) / deltas
    excess = np.abs(fd - ad[None, :]) - noise[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        logf = np.log(np.maximum(np.abs(fd - ad[None, :]).astype(np.float64), 1e-300))
        slopes = np.diff(logf, axis=0) / np.diff(np.log(deltas))[:, None]  # (m-1, k)
    tail = np.mean(slopes[-2:], axis=0)
    fd_slope = float(np.min(tail[np.isfinite(tail)])) if np.any(np.isfinite(tail)) else 0.0

    # flatness at δ = σ/10 compared with the typical change at σ (a smooth minimum changes
    # by (δ/σ)² ≈ 1e-2 of it; a plateau by rounding only)
    fp, fm = m["fd_plus"], m["fd_minus"]
    j = int(np.argmin(np.abs(deltas / sigma - 0.1)))
    local = float(np.max(np.abs(np.concatenate([fp[j], fm[j]]) - L0)))
    typical = float(np.median(np.abs(dL))) if dL.size else 0.0

    return Measurements(
        sigma=sigma,
        eps=eps,
        loss=L0,
        grad=g,
        grad_norm=gnorm,
        all_finite=bool(m["all_finite"]),
        finite_loss=bool(np.isfinite(m["loss"])),
        finite_gradient=bool(np.all(np.isfinite(g))),
        finite_perturbed_losses=bool(
            np.all(np.isfinite(fp)) and np.all(np.isfinite(fm)) and np.all(np.isfinite(dL))
        ),
        finite_perturbed_gradients=bool(np.all(np.isfinite(norms))),
        nonfinite_sample_gradients=int(np.sum(~np.isfinite(norms))),
        zeroth_mean=m0,
        zeroth_se=se0,
        first_mean=m1,
        first_se=se1,
        smoothed_grad_norm=float(np.linalg.norm(m0)),
        z_smoothed_nonzero=float(np.nanmax(z_smooth)),
        z_first_vs_zeroth=float(np.nanmax(z_gap)),
        bias_gap=float(np.linalg.norm(m1 - m0)),
        epsilon=epsilon,
        stiffness_ratio=rho,
        first_kurtosis=float(m["first_kurtosis"]),
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
        evaluations={"loss": 1 + 2 * fd.size + int(m["num_zeroth_loss_evals"]), "grad": 1 + n},
    )


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
