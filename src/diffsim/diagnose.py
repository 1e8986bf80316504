r"""The gradient doctor: can the gradient at θ be trusted, why not, and what to use instead.

Two tools:

* :func:`check_grad` — autodiff against central finite differences over several step
  sizes, with a pass/fail verdict per component (the basic check every engine should ship).
* :func:`diagnose` — for any scalar JAX loss over a pytree θ, measures, in one jitted and
  vmapped batch, the exact gradient, directional finite differences over a ladder of step
  sizes, and independent first-order (FoBG) and zeroth-order (ZoBG) samples of the
  Gaussian-smoothed gradient at scale σ; :func:`diagnose_rollout` adds what only a rollout
  shows: the growth of the rollout Jacobian with the horizon. From these it raises flags,
  each with the evidence that triggered it:

  ``non_finite``  NaN or inf in the loss, the gradient, or any perturbed evaluation.
  ``plateau``     the exact gradient is (near) zero and the loss is locally flat, yet the
                  smoothed gradient is significantly non-zero (|ḡ⁰| > z·SE): the loss
                  changes within σ but autodiff cannot see it.
  ``jump``        FoBG and ZoBG disagree beyond their confidence bound
                  (|ḡ¹ − ḡ⁰| > z·SE, componentwise; the AoBG bias gap B against ε), or
                  central differences grow like 1/δ as δ shrinks: a discontinuity.
  ``stiffness``   rare, huge first-order samples: per-sample gradients far larger than the
                  loss changes they should explain (ρ = max‖∇L(θ+σw)‖·σ / max|ΔL|) with
                  heavy tails (excess kurtosis), i.e. empirical bias with low apparent
                  variance — an enormous, short-lived derivative.
  ``chaos``       the rollout Jacobian's norm grows exponentially with the horizon (more
                  than ``chaos_growth``-fold between T/8 and T, where polynomial growth of
                  degree 2 would give 64-fold); the rate λ is fitted from four horizons.

The report recommends an estimator or fix and says whether the exact gradient can be
trusted (no flags). Its cost is fixed and stated: ``1 + 2·k·m + N`` loss and ``1 + N``
gradient evaluations for k directions, m step sizes and N samples per family.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ._checks import check_int, check_positive
from ._rollout import rollout
from .estimators.alpha_order import bernstein_radius
from .estimators.base import flatten_loss, mean_and_stats
from .estimators.first_order import first_order_samples
from .estimators.zeroth_order import zeroth_order_samples

FLAGS: tuple[str, ...] = ("non_finite", "plateau", "jump", "stiffness", "chaos")

# ---------------------------------------------------------------------------------------
# check_grad
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GradCheck:
    """Autodiff against central finite differences, per component of raveled θ.

    Attributes:
        autodiff: the autodiff gradient (d,).
        finite_differences: central differences (m, d), one row per step size.
        steps: the step sizes δ (m,), absolute.
        abs_error: ``min_j |fd_j − autodiff|`` per component (d,).
        rel_error: that error over ``max(|autodiff|, |fd|, atol)`` (d,).
        passed: per-component verdict, ``abs_error <= atol + rtol·|autodiff|`` (d,).
        ok: all components passed.
        evaluations: loss evaluations (2·m·d) and gradient evaluations (1).
    """

    autodiff: np.ndarray
    finite_differences: np.ndarray
    steps: np.ndarray
    abs_error: np.ndarray
    rel_error: np.ndarray
    passed: np.ndarray
    ok: bool
    evaluations: dict[str, int]

    def __str__(self) -> str:
        lines = [f"check_grad: {'PASS' if self.ok else 'FAIL'}"]
        lines.append(f"{'i':>4} {'autodiff':>14} {'best FD':>14} {'rel err':>10}  verdict")
        best = np.argmin(np.abs(self.finite_differences - self.autodiff), axis=0)
        for i, ad in enumerate(self.autodiff):
            fd = self.finite_differences[best[i], i]
            verdict = "ok" if self.passed[i] else "MISMATCH"
            lines.append(f"{i:>4} {ad:>14.6g} {fd:>14.6g} {self.rel_error[i]:>10.2e}  {verdict}")
        return "\n".join(lines)


@eqx.filter_jit
def _check_grad_jit(loss, theta, steps):
    f, x, _ = flatten_loss(loss, theta)
    g = jax.grad(f)(x)
    d = x.shape[0]
    eye = jnp.eye(d, dtype=x.dtype)
    scale = jnp.maximum(1.0, jnp.abs(x))
    deltas = steps[:, None] * scale[None, :]  # (m, d)
    plus = x[None, None, :] + deltas[..., None] * eye[None]
    minus = x[None, None, :] - deltas[..., None] * eye[None]
    fp = jax.vmap(jax.vmap(f))(plus)
    fm = jax.vmap(jax.vmap(f))(minus)
    return g, (fp - fm) / (2 * deltas), deltas


def check_grad(
    loss: Callable[[Any], Any],
    theta: Any,
    *,
    steps: Sequence[float] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5),
    rtol: float | None = None,
    atol: float = 1e-6,
) -> GradCheck:
    r"""Compare the autodiff gradient of ``loss`` at ``theta`` with central differences.

    For each component i and relative step :math:`s_j`, :math:`δ_{ij} = s_j \max(1, |θ_i|)`
    and :math:`\mathrm{fd}_{ij} = (L(θ + δ_{ij} e_i) − L(θ − δ_{ij} e_i)) / 2δ_{ij}`. A
    component passes when the best step agrees: :math:`\min_j |\mathrm{fd}_{ij} − g_i| ≤
    \mathrm{atol} + \mathrm{rtol}\,|g_i|` — truncation error falls with δ and rounding error
    grows, so one of several steps lands between them.

    Args:
        loss: scalar loss ``L(theta)``.
        theta: parameters (pytree), finite.
        steps: relative step sizes (each > 0).
        rtol: relative tolerance; default 1e-5 in float64, 2e-2 in float32.
        atol: absolute tolerance (>= 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import check_grad
        >>> check_grad(lambda t: jnp.sin(t["a"]) * t["b"], {"a": 0.3, "b": 2.0}).ok
        True
    """
    steps_arr = np.asarray(steps, dtype=float)
    if steps_arr.ndim != 1 or steps_arr.size == 0 or not np.all(steps_arr > 0):
        raise ValueError(f"steps must be a non-empty sequence of numbers > 0, got {steps!r}")
    if atol < 0 or not math.isfinite(atol):
        raise ValueError(f"atol must be finite and >= 0, got {atol}")
    g, fd, deltas = _check_grad_jit(loss, theta, jnp.asarray(steps_arr))
    g, fd, deltas = np.asarray(g), np.asarray(fd), np.asarray(deltas)
    if rtol is None:
        rtol = 1e-5 if g.dtype == np.float64 else 2e-2
    err = np.abs(fd - g[None, :])
    err = np.where(np.isfinite(err), err, np.inf)
    abs_error = err.min(axis=0)
    denom = np.maximum(np.maximum(np.abs(g), np.abs(fd).min(axis=0)), atol)
    passed = abs_error <= atol + rtol * np.abs(g)
    passed &= np.isfinite(g)
    return GradCheck(
        autodiff=g,
        finite_differences=fd,
        steps=deltas,
        abs_error=abs_error,
        rel_error=abs_error / np.where(denom > 0, denom, 1.0),
        passed=passed,
        ok=bool(np.all(passed)),
        evaluations={"loss": int(fd.size * 2), "grad": 1},
    )


# ---------------------------------------------------------------------------------------
# diagnose
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Flag:
    """One reason not to trust the exact gradient, with the numbers that raised it."""

    name: str
    message: str
    evidence: dict[str, float]


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The doctor's report.

    Attributes:
        verdict: ``"trusted"`` (no flags: the exact gradient can be used) or ``"untrusted"``.
        flags: the flags raised, each with its evidence.
        recommendation: what to use instead (or that the exact gradient is fine).
        exact_gradient_trusted: ``verdict == "trusted"``.
        evaluations: ``{"loss": ..., "grad": ...}`` — the whole cost of the diagnosis.
        measurements: every number the flags were decided on.
    """

    verdict: Literal["trusted", "untrusted"]
    flags: tuple[Flag, ...]
    recommendation: str
    evaluations: dict[str, int]
    measurements: dict[str, Any]

    @property
    def exact_gradient_trusted(self) -> bool:
        return self.verdict == "trusted"

    @property
    def flag_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.flags)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``verdict``, ``flags``, ``recommendation``, ``evaluations``,
        ``evidence`` (per flag) and ``measurements``."""
        return {
            "verdict": self.verdict,
            "flags": list(self.flag_names),
            "recommendation": self.recommendation,
            "evaluations": dict(self.evaluations),
            "evidence": {f.name: dict(f.evidence) for f in self.flags},
            "messages": {f.name: f.message for f in self.flags},
            "measurements": _jsonable(self.measurements),
        }

    def __str__(self) -> str:
        lines = [f"verdict: {self.verdict}"]
        for f in self.flags:
            ev = ", ".join(f"{k}={_fmt(v)}" for k, v in f.evidence.items())
            lines.append(f"  [{f.name}] {f.message} ({ev})")
        if not self.flags:
            lines.append("  no flags: the exact gradient agrees with every check")
        lines.append(f"recommendation: {self.recommendation}")
        lines.append(
            f"cost: {self.evaluations['loss']} loss + {self.evaluations['grad']} gradient "
            "evaluations"
        )
        return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.ndarray, jax.Array)):
        return np.asarray(obj, dtype=float).tolist()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    return obj


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
def _measure(loss, theta, key, sigma, num_samples, rel_steps, num_directions):
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
    m1, se1, var1 = mean_and_stats(g1)
    # the loss changes the ZoBG samples saw: recover them from g0 = ΔL z / σ
    z0 = jax.random.normal(k0, (num_samples, d), x.dtype)
    dL = jax.vmap(f)(x + sigma * z0) - L0
    norms1 = jnp.linalg.norm(g1, axis=1)
    return {
        "loss": L0,
        "grad": g,
        "directions": U,
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
        "first_var": var1,
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


def diagnose(
    loss: Callable[[Any], Any],
    theta: Any,
    key: jax.Array,
    *,
    sigma: float | None = None,
    num_samples: int = 256,
    rel_steps: Sequence[float] = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001),
    num_directions: int = 8,
    z_threshold: float = 4.0,
    stiffness_ratio: float = 20.0,
    stiffness_kurtosis: float = 10.0,
) -> Diagnosis:
    r"""Tell whether the exact gradient of ``loss`` at ``theta`` can be trusted.

    Args:
        loss: scalar JAX loss ``L(theta)``.
        theta: parameters (pytree), finite.
        key: PRNG key (the report is deterministic given it).
        sigma: smoothing scale σ of the perturbations, in θ's units (> 0); default
            ``0.05·max(1, ‖θ‖∞)``. Flags describe the loss at this scale: a cliff 10σ
            away is not "near". σ is the same for every component, so give θ comparable
            units (e.g. log-stiffness beside positions) or pass σ yourself.
        num_samples: N samples per family (FoBG and ZoBG, independent), >= 16.
        rel_steps: finite-difference steps as multiples of σ (decreasing, > 0).
        num_directions: directions for finite differences (coordinate axes when
            dim θ <= this, else random unit directions).
        z_threshold: significance, in standard errors, for "non-zero" and "disagree".
        stiffness_ratio: ρ above which per-sample gradients are "far larger than the loss
            changes they should explain".
        stiffness_kurtosis: excess kurtosis of the per-sample gradient norms above which
            their tails are "heavy".

    Returns:
        A :class:`Diagnosis`: verdict, flags with evidence, recommendation, cost.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import diagnose
        >>> diagnose(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0)).verdict
        'trusted'
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0) + 0.1 * t
        >>> diagnose(step, jnp.array(0.02), jax.random.PRNGKey(0), sigma=0.1).flag_names
        ('jump',)
    """
    num_samples = check_int("num_samples", num_samples, minimum=16)
    num_directions = check_int("num_directions", num_directions, minimum=1)
    steps = np.asarray(rel_steps, dtype=float)
    if steps.ndim != 1 or steps.size < 3 or not np.all(steps > 0) or np.any(np.diff(steps) >= 0):
        raise ValueError(
            f"rel_steps must be >= 3 strictly decreasing numbers > 0, got {tuple(rel_steps)!r}"
        )
    _, x, _ = flatten_loss(loss, theta)
    if sigma is None:
        sigma = 0.05 * max(1.0, float(jnp.max(jnp.abs(x))))
    check_positive("sigma", sigma)
    for name, v in (
        ("z_threshold", z_threshold),
        ("stiffness_ratio", stiffness_ratio),
        ("stiffness_kurtosis", stiffness_kurtosis),
    ):
        check_positive(name, v)
    raw = _measure(
        loss, theta, key, jnp.asarray(sigma, x.dtype), num_samples, jnp.asarray(steps),
        num_directions,
    )  # fmt: skip
    m = jax.tree_util.tree_map(np.asarray, raw)
    return _decide(
        m, float(sigma), num_samples, x.shape[0], z_threshold, stiffness_ratio,
        stiffness_kurtosis,
    )  # fmt: skip


def _decide(m, sigma, n, d, z_thr, rho_thr, kurt_thr):
    flags: list[Flag] = []
    eps = float(np.finfo(m["grad"].dtype).eps)
    L0 = float(m["loss"])
    meas: dict[str, Any] = {
        "sigma": sigma,
        "loss": L0,
        "grad": m["grad"],
        "zeroth_mean": m["zeroth_mean"],
        "zeroth_se": m["zeroth_se"],
        "first_mean": m["first_mean"],
        "first_se": m["first_se"],
    }

    # --- non-finite ---------------------------------------------------------------------
    if not bool(m["all_finite"]):
        where = [
            name
            for name, ok in (
                ("loss", np.isfinite(m["loss"])),
                ("gradient", np.all(np.isfinite(m["grad"]))),
                ("perturbed losses", np.all(np.isfinite(m["fd_plus"]))
                 and np.all(np.isfinite(m["fd_minus"]))
                 and np.all(np.isfinite(m["loss_changes"]))),
                ("perturbed gradients", np.all(np.isfinite(m["first_norms"]))),
            )
            if not ok
        ]  # fmt: skip
        flags.append(
            Flag(
                "non_finite",
                f"NaN or inf in the {', '.join(where)}",
                {
                    "finite_loss": bool(np.isfinite(m["loss"])),
                    "finite_gradient": bool(np.all(np.isfinite(m["grad"]))),
                    "nonfinite_sample_gradients": int(np.sum(~np.isfinite(m["first_norms"]))),
                },
            )
        )

    g = m["grad"]
    gnorm = float(np.linalg.norm(g))
    m0, se0, m1, se1 = m["zeroth_mean"], m["zeroth_se"], m["first_mean"], m["first_se"]
    with np.errstate(divide="ignore", invalid="ignore"):
        z_smooth = np.where(se0 > 0, np.abs(m0) / se0, np.where(np.abs(m0) > 0, np.inf, 0.0))
        comb = np.sqrt(se0**2 + se1**2)
        z_gap = np.where(comb > 0, np.abs(m1 - m0) / comb, np.where(m1 != m0, np.inf, 0.0))
    z_smooth_max = float(np.nanmax(z_smooth))
    z_gap_max = float(np.nanmax(z_gap))
    m0norm = float(np.linalg.norm(m0))
    bias_gap = float(np.linalg.norm(m1 - m0))
    dL = m["loss_changes"]
    # the paper's Bernstein radius of the ZoBG mean, with R the largest observed deviation
    epsilon = float(bernstein_radius(float(m["zeroth_var"]), n, d, 0.05, float(m["zeroth_R"])))
    meas.update(
        z_smoothed_nonzero=z_smooth_max,
        z_first_vs_zeroth=z_gap_max,
        bias_gap=bias_gap,
        epsilon=epsilon,
    )

    # --- stiffness: huge per-sample gradients that the loss changes do not explain -------
    max_dL = float(np.max(np.abs(dL))) if dL.size else 0.0
    norms = m["first_norms"]
    max_norm = float(np.max(norms)) if np.all(np.isfinite(norms)) else float("inf")
    rho = max_norm * sigma / max(max_dL, eps * (1 + abs(L0)) * 16)
    kurt = float(m["first_kurtosis"])
    heavy = rho > rho_thr and kurt > kurt_thr
    meas.update(stiffness_ratio=rho, first_kurtosis=kurt, max_loss_change=max_dL)
    if heavy:
        flags.append(
            Flag(
                "stiffness",
                "rare, huge first-order samples: per-sample gradients far exceed what the "
                "loss changes within σ allow, with heavy tails (FoBG's empirical bias)",
                {"stiffness_ratio": rho, "first_kurtosis": kurt, "max_sample_grad": max_norm},
            )
        )

    # --- jump: FoBG and ZoBG disagree, or FD grows like 1/δ ---------------------------------
    fd = m["fd"]  # (m, k)
    deltas = m["deltas"]
    ad = m["grad_along_directions"]
    noise = 16 * eps * (abs(L0) + 1) / deltas[:, None]
    excess = np.abs(fd - ad[None, :]) - noise
    with np.errstate(divide="ignore", invalid="ignore"):
        logf = np.log(np.maximum(np.abs(fd - ad[None, :]).astype(np.float64), 1e-300))
        slopes = np.diff(logf, axis=0) / np.diff(np.log(deltas))[:, None]  # (m-1, k)
    # 1/δ growth down to the smallest steps, far above rounding and above the gradient
    fd_jump = (
        np.all(slopes[-2:] < -0.8, axis=0)
        & (excess[-1] > 10 * (np.abs(ad) + gnorm * 1e-3 + noise[-1]))
    )  # fmt: skip
    tail = np.mean(slopes[-2:], axis=0)
    fd_slope = float(np.min(tail[np.isfinite(tail)])) if np.any(np.isfinite(tail)) else 0.0
    meas.update(fd_slope_small_steps=fd_slope, fd_over_grad=float(np.max(excess[-1])))
    disagree = z_gap_max > z_thr and not heavy
    if disagree or bool(np.any(fd_jump)):
        flags.append(
            Flag(
                "jump",
                "a discontinuity within σ: "
                + ("first- and zeroth-order estimates disagree beyond their standard errors"
                   if disagree else "central differences grow like 1/δ as δ shrinks"),
                {"z_first_vs_zeroth": z_gap_max, "bias_gap": bias_gap, "epsilon": epsilon,
                 "fd_slope": fd_slope},
            )
        )  # fmt: skip

    # --- plateau: exact gradient ~0, locally flat, but the smoothed gradient is not --------
    fp, fm = m["fd_plus"], m["fd_minus"]
    # flatness at δ = σ/10 compared with the typical change at σ (a smooth minimum changes
    # by (δ/σ)² ≈ 1e-2 of it; a plateau by rounding only)
    j = int(np.argmin(np.abs(deltas / sigma - 0.1)))
    local = float(np.max(np.abs(np.concatenate([fp[j], fm[j]]) - L0)))
    typical = float(np.median(np.abs(dL))) if dL.size else 0.0
    flat = local <= 1e-4 * typical + 16 * eps * (abs(L0) + 1)
    tiny_grad = gnorm <= 0.05 * m0norm
    meas.update(local_change=local, typical_change=typical, grad_norm=gnorm)
    changes = max_dL > 1e-6 * (abs(L0) + 1)
    if tiny_grad and flat and (z_smooth_max > z_thr or changes):
        flags.append(
            Flag(
                "plateau",
                "the exact gradient is ~0 and the loss is locally flat, but it changes within "
                "σ (the smoothed gradient sees what autodiff cannot)",
                {"grad_norm": gnorm, "smoothed_grad_norm": m0norm, "z_smoothed": z_smooth_max,
                 "local_change": local, "max_loss_change": max_dL},
            )
        )  # fmt: skip

    order = {name: i for i, name in enumerate(FLAGS)}
    flags.sort(key=lambda f: order[f.name])
    n_loss = 1 + 2 * fd.size + int(m["num_zeroth_loss_evals"])
    evals = {"loss": n_loss, "grad": 1 + n}
    return Diagnosis(
        verdict="untrusted" if flags else "trusted",
        flags=tuple(flags),
        recommendation=recommend(tuple(f.name for f in flags), sigma),
        evaluations=evals,
        measurements=meas,
    )


def recommend(flags: Sequence[str], sigma: float) -> str:
    """What to use, given the flags raised (at smoothing scale σ)."""
    flags = set(flags)
    if not flags:
        return "use the exact gradient (autodiff): it is trustworthy here"
    parts = []
    if "non_finite" in flags:
        parts.append(
            "fix the non-finite values first: guard switch points with the double-where "
            "pattern and check the model's domain; no estimator can average over NaN"
        )
    if "chaos" in flags:
        parts.append(
            "shorten the horizon (or optimise over shorter windows, e.g. multiple shooting): "
            f"sensitivities grow exponentially; else zeroth-order with σ = {sigma:.3g}, whose "
            "variance does not grow with the Jacobian"
        )
    if "jump" in flags:
        parts.append(
            f"use the alpha-order estimator (or zeroth-order) with σ = {sigma:.3g}: "
            "first-order samples miss the jump; or smooth the contact analytically with a "
            "temperature comparable to σ"
        )
    if "plateau" in flags and "jump" not in flags:
        parts.append(
            f"use zeroth-order or alpha-order with σ = {sigma:.3g} (or analytic smoothing): "
            "the exact gradient is 0 here but the smoothed loss slopes"
        )
    elif "plateau" in flags:
        parts.append("the exact gradient is 0 on this plateau: do not follow it")
    if "stiffness" in flags:
        parts.append(
            f"use zeroth-order (or alpha-order) with σ = {sigma:.3g}: its variance does not "
            "grow with stiffness; or soften the contact (lower k, smooth penalty) or shrink h"
        )
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------
# the rollout-aware variant
# ---------------------------------------------------------------------------------------


@eqx.filter_jit
def _sensitivity_profile(step, s0, theta, num_steps):
    """One scan: per-step Jacobians A_t (autodiff of one step) and the running product
    S_t = A_t S_{t-1} = ∂s_t/∂s_0. Returns (‖S_t‖₂ for t = 1..T, ‖A_t‖₂ for t = 0..T-1)."""
    s_flat, unravel = ravel_pytree(s0)
    n = s_flat.shape[0]

    def flat_step(sf):
        return ravel_pytree(step(unravel(sf), theta))[0]

    def body(carry, _):
        sf, S = carry
        A = jax.jacfwd(flat_step)(sf)
        S = A @ S
        return (flat_step(sf), S), (jnp.linalg.norm(S, 2), jnp.linalg.norm(A, 2))

    init = (s_flat, jnp.eye(n, dtype=s_flat.dtype))
    _, (norms, step_norms) = jax.lax.scan(body, init, None, length=num_steps)
    return norms, step_norms


def diagnose_rollout(
    step: Callable[..., Any],
    s0: Any,
    theta: Any,
    num_steps: int,
    loss: Callable[[Any], Any],
    key: jax.Array,
    *,
    wrt: Literal["theta", "s0"] = "theta",
    chaos_growth: float = 100.0,
    concentration_limit: float = 0.5,
    **options: Any,
) -> Diagnosis:
    r""":func:`diagnose` for ``loss(s_T)`` of a rollout, plus what only a rollout shows.

    The decision variable is ``theta`` or the initial state ``s0`` (``wrt``). Besides the
    checks of :func:`diagnose` on :math:`θ \mapsto \mathrm{loss}(s_T)`, one scan along the
    trajectory computes every per-step Jacobian :math:`A_t = ∂s_{t+1}/∂s_t` and the running
    product :math:`∂s_t/∂s_0`. With :math:`G = ‖∂s_T/∂s_0‖_2 / ‖∂s_{T/8}/∂s_0‖_2` and
    :math:`a = \max_t ‖A_t‖_2` and the concentration :math:`c = \log a / \log G` (the share
    of the growth that one step accounts for):

    * ``chaos`` when G > ``chaos_growth`` (polynomial growth of degree 2 gives 64) and
      c < ``concentration_limit``: the growth is spread over the whole horizon, the
      signature of a positive Lyapunov exponent; the rate λ (per step) is the slope of
      :math:`\log‖∂s_t/∂s_0‖` over the second half;
    * ``stiffness`` when G > ``chaos_growth`` and c >= ``concentration_limit``: the growth
      comes from a few steps of a fast, barely resolved contact;
    * heavy-tailed first-order samples (see :func:`diagnose`) count as ``stiffness`` unless
      chaos explains them.

    Args:
        step, s0, theta, num_steps: the rollout (see :func:`diffsim.rollout`), T >= 8.
        loss: scalar function of the final state ``s_T``.
        key: PRNG key.
        wrt: ``"theta"`` or ``"s0"``.
        chaos_growth: growth factor G (> 1) beyond which the horizon is too long for
            first-order gradients.
        concentration_limit: share of the growth, in (0, 1), that one step may explain for
            the growth to count as chaos rather than stiffness.
        **options: passed to :func:`diagnose` (``sigma``, ``num_samples``, ...).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import diagnose_rollout
        >>> from diffsim.systems import double_pendulum
        >>> sys = double_pendulum()
        >>> d = diagnose_rollout(sys.step, sys.s0, sys.theta, 800,
        ...                      lambda s: jnp.cos(s[0][1]), jax.random.PRNGKey(0), wrt="s0")
        >>> d.flag_names
        ('chaos',)
    """
    num_steps = check_int("num_steps", num_steps, minimum=8)
    if wrt not in ("theta", "s0"):
        raise ValueError(f"wrt must be 'theta' or 's0', got {wrt!r}")
    if (
        isinstance(chaos_growth, bool)
        or not isinstance(chaos_growth, (int, float))
        or not (chaos_growth > 1)
    ):
        raise ValueError(f"chaos_growth must be a number > 1, got {chaos_growth!r}")
    if not (isinstance(concentration_limit, (int, float)) and 0 < concentration_limit < 1):
        raise ValueError(f"concentration_limit must be in (0, 1), got {concentration_limit!r}")
    if not callable(loss):
        raise TypeError(f"loss must be a callable loss(s_T) -> scalar, got {loss!r}")

    def objective(var):
        s, p = (s0, var) if wrt == "theta" else (var, theta)
        return loss(rollout(step, s, p, num_steps, trajectory=False))

    var = theta if wrt == "theta" else s0
    diag = diagnose(objective, var, key, **options)

    s0_arr = jax.tree_util.tree_map(jnp.asarray, s0)
    theta_arr = jax.tree_util.tree_map(jnp.asarray, theta)
    norms, step_norms = map(np.asarray, _sensitivity_profile(step, s0_arr, theta_arr, num_steps))
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
    extra: list[Flag] = []
    grows = not np.isfinite(growth) or growth > chaos_growth
    evidence = {
        "growth_T8_to_T": growth,
        "rate_per_step": rate,
        "max_step_amplification": max_step,
        "concentration": concentration,
        "jacobian_norm_T": at[-1],
    }
    if grows and concentration < concentration_limit:
        extra.append(
            Flag(
                "chaos",
                f"∂s_T/∂s_0 grows {growth:.3g}-fold from T/8 to T, spread over many steps (the "
                f"largest single step explains {100 * concentration:.0f}% of it): exponential "
                f"sensitivity, λ ≈ {rate:.3g} per step",
                evidence,
            )
        )
    elif grows:
        extra.append(
            Flag(
                "stiffness",
                f"∂s_T/∂s_0 grows {growth:.3g}-fold and a single step amplifies by {max_step:.3g} "
                f"({100 * concentration:.0f}% of the growth): a fast contact the step barely "
                "resolves",
                evidence,
            )
        )
    flags = list(diag.flags)
    if extra:
        # the horizon evidence explains heavy first-order tails: keep one flag, with both
        flags = [f for f in flags if f.name != "stiffness"] + extra
    order = {name: i for i, name in enumerate(FLAGS)}
    flags.sort(key=lambda f: order[f.name])
    meas = {
        **diag.measurements,
        "horizons": horizons,
        "jacobian_norms": at,
        "jacobian_growth": growth,
        "lyapunov_rate_per_step": rate,
        "max_step_amplification": max_step,
    }
    return Diagnosis(
        verdict="untrusted" if flags else "trusted",
        flags=tuple(flags),
        recommendation=recommend(tuple(f.name for f in flags), float(diag.measurements["sigma"])),
        evaluations=dict(diag.evaluations, step_jacobians=num_steps),
        measurements=meas,
    )
