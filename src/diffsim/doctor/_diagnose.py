r"""The gradient doctor: can the gradient at θ be trusted, why not, and what to use instead.

Two tools:

* :func:`check_grad` — autodiff against central finite differences over several step
  sizes, with a pass/fail verdict per component (the basic check every engine should ship).
* :func:`diagnose` — for any scalar JAX loss over a pytree θ, measures, in one jitted and
  vmapped batch, the exact gradient, directional finite differences over a ladder of step
  sizes, and independent first-order (FoBG) and zeroth-order (ZoBG) samples of the
  Gaussian-smoothed gradient at scale σ (``_measure.py``); :func:`diagnose_rollout` adds
  what only a rollout shows: the growth of the rollout Jacobian with the horizon. From
  these the rules (``_rules.py``, one per flag) raise flags, each with the evidence that
  triggered it:

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
                  degree 2 would give 64-fold); the rate λ is the slope of its logarithm
                  over the second half of the horizon.

The samples are drawn sequentially: N = ``num_samples`` first, then doubled (fresh samples
joining the old, one compiled program for every round) while any flag's statistic is
undecided — between ``z_clear`` ("clearly no") and ``z_threshold`` ("clearly yes") — and
the budget ``max_samples`` is not spent. The verdict is ``"trusted"`` (no flag, nothing
undecided), ``"untrusted"`` (a flag) or ``"inconclusive"`` (no flag, but a statistic still
undecided when the budget is spent; the report gives its evidence and the samples that
would decide it). The cost is stated: ``1 + 2·k·m + N`` loss and ``1 + N`` gradient
evaluations for k directions, m step sizes and the N samples used.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import as_arrays, check_in_range, check_int, check_key
from .._rollout import prepare, rollout
from .._sigma import Relative, describe
from .._step import as_step
from .._types import Inputs
from ..estimators import _evidence as ev
from ..estimators._common import check_not_empty, check_sample_memory
from ..estimators._evidence import CHOICES
from ..estimators._rounds import sample_sizes
from ..estimators.auto import chosen_estimator
from ..estimators.base import flatten_loss
from ._measure import (
    DEFAULT_REL_STEPS,
    Discretization,
    Measurements,
    horizon_growth,
    resolve_sigma,
    sample,
    sensitivity_profile,
)
from ._rules import Flag, Thresholds, decide, growth_of, recommend, undecided

Verdict = Literal["trusted", "untrusted", "inconclusive"]
VERDICTS: tuple[str, ...] = ("trusted", "untrusted", "inconclusive")
"""Every verdict the doctor gives, in the order of its colours (green, red, amber)."""

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

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import GradCheck, check_grad
        >>> gc = check_grad(lambda t: jnp.sum(jnp.sin(t)), jnp.array([0.0, 1.0]))
        >>> isinstance(gc, GradCheck), gc.ok, gc.evaluations  # 5 steps, 2 components
        (True, True, {'loss': 20, 'grad': 1})
        >>> [round(float(g), 3) for g in gc.autodiff]  # cos θ
        [1.0, 0.54]
        >>> wrong = lambda t: t**2 + jax.lax.stop_gradient(t)  # a gradient missing a term
        >>> bad = check_grad(wrong, jnp.asarray(0.5))
        >>> bad.ok, float(bad.autodiff[0]), round(float(bad.finite_differences[0, 0]), 3)
        (False, 1.0, 2.0)
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
def _check_grad_jit(loss, theta, steps, gradient):
    f, x, _ = flatten_loss(loss, theta)
    g = jax.grad(f)(x) if gradient is None else ravel_pytree(gradient)[0].astype(x.dtype)
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
    gradient: Any = None,
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
        gradient: the gradient to check, a pytree shaped like ``theta`` (e.g. one you
            computed in forward mode, or in another program); default ``jax.grad(loss)``.
            Given, the check compiles only the loss (batched over the differences).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.doctor import check_grad
        >>> check_grad(lambda t: jnp.sin(t["a"]) * t["b"], {"a": 0.3, "b": 2.0}).ok
        True
        >>> check_grad(lambda t: t["a"] ** 2, {"a": 3.0}, gradient={"a": 5.0}).ok
        False
    """
    if not callable(loss):
        raise TypeError(f"loss must be a callable L(theta) -> scalar, got {loss!r}")
    # checked (and integers promoted) before the jit, where θ is only a tracer
    theta = as_arrays("theta", theta, floating=True)
    try:
        steps_arr = np.asarray(steps, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"steps must be a non-empty sequence of numbers > 0, got {steps!r}"
        ) from None
    if (
        steps_arr.ndim != 1
        or steps_arr.size == 0
        or not np.all(np.isfinite(steps_arr))
        or not np.all(steps_arr > 0)
    ):
        raise ValueError(f"steps must be a non-empty sequence of numbers > 0, got {steps!r}")
    check_in_range("atol", atol, 0.0, float("inf"))
    if rtol is not None:
        check_in_range("rtol", rtol, 0.0, float("inf"))
    if gradient is not None:
        # not refused when non-finite: a NaN component fails its check, as jax.grad's would
        gradient = jax.tree_util.tree_map(lambda a: jnp.asarray(a) * 1.0, gradient)
        if jax.tree_util.tree_structure(gradient) != jax.tree_util.tree_structure(theta) or any(
            jnp.shape(a) != jnp.shape(b)
            for a, b in zip(jax.tree_util.tree_leaves(gradient), jax.tree_util.tree_leaves(theta))
        ):
            raise ValueError(
                "gradient must have theta's structure and shapes "
                f"({jax.tree_util.tree_structure(theta)}), got "
                f"{jax.tree_util.tree_structure(gradient)}"
            )
    g, fd, deltas = _check_grad_jit(loss, theta, jnp.asarray(steps_arr), gradient)
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
        evaluations={"loss": int(fd.size * 2), "grad": 1 if gradient is None else 0},
    )


# ---------------------------------------------------------------------------------------
# diagnose
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The doctor's report.

    Attributes:
        verdict: ``"trusted"`` (no flags, nothing undecided: the exact gradient can be
            used), ``"untrusted"`` (flags raised) or ``"inconclusive"`` (no flags, but a
            statistic still undecided when the sample budget was spent).
        flags: the flags raised, each with its evidence.
        recommendation: what to use instead (or that the exact gradient is fine).
        exact_gradient_trusted: ``verdict == "trusted"``.
        evaluations: ``{"loss": ..., "grad": ..., "samples": N, "max_samples": budget}`` —
            the whole cost of the diagnosis, and the samples N it used of its budget.
        measurements: every number the flags were decided on.
        undecided: the flags neither raised nor ruled out when the sampling stopped (an
            inconclusive verdict's evidence).
        samples_to_decide: the samples that would decide them if the effect they measure is
            real (``None`` when nothing is undecided).
        choice: what to use, by name (``"exact"``, ``"mixed"``, ``"zeroth"``, ``"none"``;
            :data:`diffsim.estimators.CHOICES`) — for the same samples, exactly what
            :class:`~diffsim.estimators.Auto` returns; ``choice_code`` is its code.
        estimator: the configured estimator the doctor recommends (σ as used, N as drawn):
            ``Exact()`` when trusted, ``AlphaOrder`` for a jump or an undecided statistic,
            ``ZerothOrder`` for a plateau, stiffness, chaos or non-finite first-order
            samples; ``None`` when nothing can be estimated (a NaN loss) — so
            ``optimize(loss, θ, estimator=diagnose(loss, θ, key).estimator)`` is the
            one-line path (``None`` there means :class:`~diffsim.estimators.Auto`).
        sigma_used: σ as sampled (in the form given, widened when nothing moved within
            it); ``widenings``: how many times it grew ×4.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import VERDICTS, diagnose
        >>> VERDICTS
        ('trusted', 'untrusted', 'inconclusive')
        >>> d = diagnose(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0))
        >>> d.verdict in VERDICTS, d.exact_gradient_trusted, d.flags, d.samples_to_decide
        (True, True, (), None)
        >>> print(d)
        verdict: trusted
          no flags: the exact gradient agrees with every check
        recommendation: use the exact gradient (autodiff): it is trustworthy here
        estimator: Exact()
        cost: 157 loss + 129 gradient evaluations (128 of at most 2048 samples)
        >>> d.to_dict()["evaluations"]
        {'loss': 157, 'grad': 129, 'samples': 128, 'max_samples': 2048}
    """

    verdict: Verdict
    flags: tuple[Flag, ...]
    recommendation: str
    evaluations: dict[str, int]
    measurements: dict[str, Any]
    undecided: tuple[Flag, ...] = ()
    samples_to_decide: int | None = None
    choice: str = "exact"
    choice_code: int = 0
    estimator: Any = None
    sigma_used: Any = None
    widenings: int = 0

    @property
    def exact_gradient_trusted(self) -> bool:
        return self.verdict == "trusted"

    @property
    def flag_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.flags)

    @property
    def cost(self) -> str:
        """The cost in words: ``"157 loss + 129 gradient evaluations (128 of at most 2048
        samples)"`` (the counts are :attr:`evaluations`)."""
        return _cost_text(self.evaluations)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``verdict``, ``choice``, ``estimator`` (its text), ``sigma_used``,
        ``widenings``, ``flags``, ``recommendation``, ``evaluations``,
        ``evidence`` and ``messages`` (per flag), ``undecided`` (per undecided flag: its
        message and evidence), ``samples_to_decide`` and ``measurements``. Non-finite
        numbers stay as they are (the CLI's strict JSON writes them as ``null`` with a
        ``<key>_note``)."""
        return {
            "verdict": self.verdict,
            "choice": self.choice,
            "estimator": describe_estimator(self.estimator),
            "sigma_used": describe(self.sigma_used)
            if isinstance(self.sigma_used, Relative)
            else _jsonable(self.sigma_used),
            "widenings": self.widenings,
            "flags": list(self.flag_names),
            "recommendation": self.recommendation,
            "evaluations": dict(self.evaluations),
            "evidence": {f.name: _jsonable(dict(f.evidence)) for f in self.flags},
            "messages": {f.name: f.message for f in self.flags},
            "undecided": {
                f.name: {"message": f.message, "evidence": _jsonable(dict(f.evidence))}
                for f in self.undecided
            },
            "samples_to_decide": self.samples_to_decide,
            **(
                {"samples_to_decide_note": "the verdict is decided: no more samples needed"}
                if self.samples_to_decide is None
                else {}
            ),
            "measurements": _jsonable(self.measurements),
        }

    def __str__(self) -> str:
        lines = [f"verdict: {self.verdict}"]
        for f in self.flags:
            ev = ", ".join(f"{k}={_fmt(v)}" for k, v in f.evidence.items())
            lines.append(f"  [{f.name}] {f.message} ({ev})")
        for f in self.undecided:
            ev = ", ".join(f"{k}={_fmt(v)}" for k, v in f.evidence.items())
            lines.append(f"  [{f.name}?] undecided: {f.message} ({ev})")
        if not self.flags and not self.undecided:
            lines.append("  no flags: the exact gradient agrees with every check")
        lines.append(f"recommendation: {self.recommendation}")
        lines.append(f"estimator: {describe_estimator(self.estimator)}")
        lines.append(f"cost: {self.cost}")
        return "\n".join(lines)


def _cost_text(evaluations: dict[str, int]) -> str:
    """``"N loss + M gradient evaluations (n of at most b samples)"``.

    Example:
        >>> from diffsim.doctor._diagnose import _cost_text
        >>> _cost_text({"loss": 20, "grad": 1})  # a check_grad
        '20 loss + 1 gradient evaluations'
        >>> _cost_text({"loss": 157, "grad": 129, "samples": 128, "max_samples": 2048})
        '157 loss + 129 gradient evaluations (128 of at most 2048 samples)'
    """
    ev = evaluations
    text = f"{ev['loss']} loss + {ev['grad']} gradient evaluations"
    if "samples" in ev and "max_samples" in ev:
        text += f" ({ev['samples']} of at most {ev['max_samples']} samples)"
    return text


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


def _advice_sigma(m: Measurements) -> float | str:
    """σ as the advice states it: one number when every component has the same, else its
    form (``relative 0.05 (floor 0.2)``, ``per component``) and its range."""
    sig = m.sigma_components
    if sig.size == 0 or bool(np.all(sig == sig.flat[0])):
        return m.sigma
    return f"{m.sigma_form}, {float(sig.min()):.3g} to {float(sig.max()):.3g}"


def _report(
    m: Measurements, sigma_used: Any, widenings: int, thresholds: Thresholds, budget: int,
    extra: dict[str, int] | None = None,
) -> Diagnosis:  # fmt: skip
    pending = undecided(m, thresholds)
    flags = decide(m, thresholds)
    sigma = _advice_sigma(m)
    need = [int(f.evidence.get("samples_to_decide", 0)) for f in pending]
    to_decide = max(need) if need else None
    names = {f.name for f in flags}
    code = int(
        ev.choose(m, "non_finite" in names, "plateau" in names,
                  "jump" in names or "kink" in names,
                  "stiffness" in names, "chaos" in names, bool(pending))
    )  # fmt: skip
    estimator = chosen_estimator(code, sigma_used, m.num_samples)
    verdict: Verdict
    if flags:
        verdict, rec = "untrusted", recommend((f.name for f in flags), sigma)
    elif pending:
        names_p = ", ".join(f.name for f in pending)
        verdict = "inconclusive"
        rec = (
            f"undecided ({names_p}) after {m.num_samples} samples, the budget: diagnose again "
            f"with max_samples >= {to_decide} to decide; until then, the cautious choice: "
            + recommend((f.name for f in pending), sigma)
        )
    else:
        verdict, rec = "trusted", recommend((), sigma)
    evaluations = dict(m.evaluations, samples=m.num_samples, max_samples=budget, **(extra or {}))
    return Diagnosis(
        verdict=verdict,
        flags=flags,
        recommendation=rec,
        evaluations=evaluations,
        measurements=m.to_dict(),
        undecided=pending,
        samples_to_decide=to_decide,
        choice=CHOICES[code],
        choice_code=code,
        estimator=estimator,
        sigma_used=sigma_used,
        widenings=widenings,
    )


def describe_estimator(est: Any) -> str:
    """``ZerothOrder(sigma=0.4, num_samples=128)``, ``Exact()`` or ``none (...)``: an
    estimator as the recommendation names it."""
    if est is None:
        return "none (no estimator can average over NaN: fix the model first)"
    args = []
    for opt in type(est).options:
        if opt.name in ("sigma", "num_samples"):
            v = getattr(est, opt.name)
            text = describe(v) if opt.name == "sigma" else str(v)
            args.append(f"{opt.name}={text}")
    return f"{type(est).__name__}({', '.join(args)})"


def _check_thresholds(thresholds: Thresholds | None) -> Thresholds:
    """``thresholds``, default ``Thresholds()`` (which checks its own fields)."""
    if thresholds is None:
        return Thresholds()
    if not isinstance(thresholds, Thresholds):
        raise TypeError(f"thresholds must be a diffsim.doctor.Thresholds, got {thresholds!r}")
    return thresholds


def _measure_checked(
    loss, theta, key, *, sigma, num_samples, max_samples, rel_steps, num_directions,
    thresholds, devices=None,
) -> tuple[dict[str, Any], Thresholds, int]:  # fmt: skip
    """:func:`diagnose`'s argument checks; then what :func:`~._measure.sample` takes besides
    the loss, θ and the key, the thresholds and the budget (N doubled as often as
    ``max_samples`` allows: N, 2N, 4N, ..., and at least N)."""
    if not callable(loss):
        raise TypeError(f"loss must be a callable L(theta) -> scalar, got {loss!r}")
    # θ first, named, in the dtype the computation uses: the default σ is derived from it
    # (θ = 1e300 in float32 used to be reported as a bad σ)
    theta = as_arrays("theta", theta, floating=True)
    check_key("key", key)
    num_samples = check_int("num_samples", num_samples, minimum=16)
    max_samples = check_int("max_samples", max_samples, minimum=16)
    num_directions = check_int("num_directions", num_directions, minimum=1)
    try:
        steps = np.asarray(rel_steps, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"rel_steps must be numbers > 0, got {rel_steps!r}") from None
    if (
        not np.all(np.isfinite(steps))
        or steps.ndim != 1
        or steps.size < 3
        or not np.all(steps > 0)
        or np.any(np.diff(steps) >= 0)
    ):
        raise ValueError(
            f"rel_steps must be >= 3 strictly decreasing numbers > 0, got {rel_steps!r}"
        )
    thresholds = _check_thresholds(thresholds)
    chunk = num_samples + num_samples % 2
    budget = sample_sizes(chunk, max(max_samples, chunk))[-1]
    check_not_empty(theta)
    check_sample_memory("max_samples" if max_samples > num_samples else "num_samples", budget,
                        theta, 4)  # fmt: skip
    # resolves and checks σ against θ before anything is compiled
    resolve_sigma(sigma, theta)
    settings = dict(sigma=sigma, num_samples=chunk, max_samples=budget, thresholds=thresholds,
                    rel_steps=steps, num_directions=num_directions, devices=devices)  # fmt: skip
    return settings, thresholds, budget


def diagnose(
    loss: Callable[[Any], Any],
    theta: Any,
    key: jax.Array,
    *,
    sigma: Any = None,
    num_samples: int = 128,
    max_samples: int = 2048,
    rel_steps: Sequence[float] = DEFAULT_REL_STEPS,
    num_directions: int = 8,
    thresholds: Thresholds | None = None,
    devices: Any = None,
    half_step: HalfStep | None = None,
) -> Diagnosis:
    r"""Tell whether the exact gradient of ``loss`` at ``theta`` can be trusted.

    Args:
        loss: scalar JAX loss ``L(theta)``.
        theta: parameters (pytree), finite.
        key: PRNG key (the report is deterministic given it).
        sigma: smoothing scale σ of the perturbations, in θ's units: one number (> 0), a
            pytree like θ (one scale per component) or :class:`~diffsim.estimators.Relative`
            (a fraction of each |θ_i|). Default ``Relative(0.05, floor)``: 5 % of each
            component, a component at 0 taking the smallest non-zero |θ_i| as its size
            (:func:`~diffsim.doctor.default_sigma`). Flags describe the loss at this
            scale: a cliff 10σ away is not "near".
        num_samples: N, the first batch of samples per family (FoBG and ZoBG,
            independent), >= 16.
        max_samples: the budget: N doubles (fresh samples join the old) while a flag's
            statistic is undecided, up to the largest N·2^k within it.
        rel_steps: finite-difference steps as multiples of σ (decreasing, > 0).
        num_directions: directions for finite differences (coordinate axes when
            dim θ <= this, else random unit directions; in the σ-scaled coordinates).
        thresholds: what the flags are decided with (:class:`Thresholds`: ``z_threshold``
            for "non-zero" and "disagree", ``z_clear`` below which "clearly not" — between
            them more samples are drawn —, ``gap_tolerance``, ``stiffness_ratio``,
            ``stiffness_kurtosis``, and for rollouts ``chaos_growth``,
            ``concentration_limit``, ``discretization_tolerance``); default
            ``Thresholds()``, the values ``auto`` decides with.
        devices: where the samples run: ``None`` (every device JAX sees, when there are
            several), a count, devices or a ``jax.sharding.Mesh``
            (:func:`diffsim.sharding.device_mesh`).
        half_step: for a loss through a time-stepped simulation, the same loss at half
            the time step (:class:`HalfStep`): the ``discretization`` check of
            :func:`diagnose_rollout` (which builds it from the step) for a loss the user
            composed, e.g. from :meth:`diffsim.engines.mjx.MjxStep.with_time_step`.

    Returns:
        A :class:`Diagnosis`: verdict, flags with evidence, anything undecided with the
        samples that would decide it, recommendation, cost.

    Raises:
        ValueError: a σ that is not > 0, below θ's resolution or unlike θ; bad counts or
            thresholds.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import diagnose
        >>> d = diagnose(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(0))
        >>> d.verdict, d.evaluations["samples"]
        ('trusted', 128)
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0) + 0.1 * t
        >>> diagnose(step, jnp.array(0.02), jax.random.PRNGKey(0), sigma=0.1).flag_names
        ('jump',)
    """
    settings, thresholds, budget = _measure_checked(
        loss, theta, key, sigma=sigma, num_samples=num_samples, max_samples=max_samples,
        rel_steps=rel_steps, num_directions=num_directions, thresholds=thresholds,
        devices=devices,
    )  # fmt: skip
    if half_step is not None and not isinstance(half_step, HalfStep):
        raise TypeError(f"half_step must be a HalfStep or None, got {half_step!r}")
    m, sigma_used, widenings = sample(loss, theta, key, **settings)
    extra: dict[str, int] = {}
    if half_step is not None:
        thresholds = dataclasses.replace(thresholds, discretization_tolerance=half_step.tolerance)
        m = _with_half_step(m, extra, half_step, theta)
    return _report(m, sigma_used, widenings, thresholds, budget, extra or None)


@dataclasses.dataclass(frozen=True)
class HalfStep:
    r"""The same loss at half the time step, for :func:`diagnose`'s ``discretization``
    check (:func:`diagnose_rollout` builds one from its step).

    Attributes:
        loss: ``θ ↦ L`` through the simulation at h/2 over 2T steps (per-step inputs held
            for two half steps).
        order: p >= 1, the integrator's order of accuracy.
        h: the time step of ``diagnose``'s own loss, s.
        tolerance: the relative error of the gradient at h, in (0, 1], beyond which
            ``discretization`` is raised (Richardson: :math:`\frac{2^p}{2^p−1}‖∇_h −
            ∇_{h/2}‖ / \max(‖∇_h‖, ‖∇_{h/2}‖)`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import diagnose
        >>> from diffsim.doctor import HalfStep
        >>> def x_T(h, T):  # explicit Euler on x'' = −x, x(0) = 1, v(0) = v0, to t = 6
        ...     def loss(v0):
        ...         def f(s, _):
        ...             x, v = s
        ...             return (x + h * v, v - h * x), None
        ...         return jax.lax.scan(f, (1.0, v0), None, T)[0][0]
        ...     return loss
        >>> half = HalfStep(x_T(0.3, 20), order=1, h=0.6)  # h/2 over 2T steps
        >>> d = diagnose(x_T(0.6, 10), jnp.array(0.5), jax.random.PRNGKey(0), half_step=half)
        >>> d.flag_names, round(d.measurements["discretization_error"], 2)  # 142 % off
        (('discretization',), 1.42)
    """

    loss: Callable[[Any], Any]
    order: int
    h: float
    tolerance: float = 0.1

    def __post_init__(self) -> None:
        if not callable(self.loss):
            raise TypeError(f"HalfStep.loss must be a callable L(theta), got {self.loss!r}")
        object.__setattr__(self, "order", check_int("HalfStep.order", self.order, minimum=1))
        check_in_range("HalfStep.h", self.h, 0.0, float("inf"))
        if not self.h > 0:
            raise ValueError(f"HalfStep.h must be a finite number > 0, got {self.h!r}")
        check_in_range("HalfStep.tolerance", self.tolerance, 0.0, 1.0)
        if not self.tolerance > 0:
            raise ValueError(f"HalfStep.tolerance must be in (0, 1], got {self.tolerance!r}")
        object.__setattr__(self, "h", float(self.h))
        object.__setattr__(self, "tolerance", float(self.tolerance))


def _with_half_step(m: Measurements, extra: dict, half: HalfStep, var) -> Measurements:
    """``m`` with its gradient at h against the gradient at h/2; ``extra`` counts it."""
    dz = _discretization(m.grad, half.loss, var, half.order, half.h)
    m = dataclasses.replace(m, discretization=dz)
    extra["grad"] = m.evaluations["grad"] + 1
    extra["half_step_gradients"] = 1
    return m


def _diagnose_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` bound to :func:`diagnose`'s keywords, defaults filled in; a keyword
    ``diagnose`` does not take raises ``TypeError`` as a call would."""
    bound = inspect.signature(diagnose).bind(None, None, None, **options)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("loss", "theta", "key")}


def diagnose_rollout(
    step: Callable[..., Any],
    s0: Any,
    theta: Any,
    num_steps: int,
    loss: Callable[[Any], Any],
    key: jax.Array,
    *,
    wrt: Literal["theta", "s0"] = "theta",
    inputs: Inputs | None = None,
    discretization: bool = True,
    **options: Any,
) -> Diagnosis:
    r""":func:`diagnose` for ``loss(s_T)`` of a rollout, plus what only a rollout shows.

    The decision variable is ``theta`` or the initial state ``s0`` (``wrt``). Besides the
    checks of :func:`diagnose` on :math:`θ \mapsto \mathrm{loss}(s_T)`, one rollout along
    the trajectory (with ``inputs``) chains the library's per-step Jacobians
    :math:`A_t = ∂s_{t+1}/∂s_t` into :math:`∂s_t/∂s_0` at every t — the ``"product"`` route
    of :func:`diffsim.rollout_jacobian`, kept at every horizon. With
    :math:`G = ‖∂s_T/∂s_0‖_2 / ‖∂s_{T/8}/∂s_0‖_2`, :math:`a = \max_t ‖A_t‖_2` and the
    concentration :math:`c = \log a / \log G` (the share of the growth that one step
    accounts for):

    * ``chaos`` when G > ``chaos_growth`` (polynomial growth of degree 2 gives 64) and
      c < ``concentration_limit``: the growth is spread over the whole horizon, the
      signature of a positive Lyapunov exponent; the rate λ (per step) is the slope of
      :math:`\log‖∂s_t/∂s_0‖` over the second half;
    * ``stiffness`` when G > ``chaos_growth`` and c >= ``concentration_limit``: the growth
      comes from a few steps of a fast, barely resolved contact;
    * heavy-tailed first-order samples (see :func:`diagnose`) count as ``stiffness`` unless
      chaos explains them;
    * ``discretization`` (``discretization=True``, for a step with a time step: an
      :class:`~diffsim.integrators.Integrator`, a :class:`~diffsim.contact.WithContact`, or a
      step with ``with_time_step``; not contact steps): the gradient is computed again at
      h/2 over 2T steps
      (per-step inputs held for two half steps) and, with the integrator's order p, the
      error of the gradient at h is estimated as :math:`\frac{2^p}{2^p−1}‖∇_h − ∇_{h/2}‖ /
      ‖∇_{h/2}‖` (Richardson); beyond ``discretization_tolerance`` (10 %), and with no
      other flag explaining it, the gradient is smooth and reproducible but that of a
      different system than the one written down. Cost: one more gradient (2T steps).

    Args:
        step, s0, theta, num_steps: the rollout (see :func:`diffsim.rollout`), T >= 8.
        loss: scalar function of the final state ``s_T``.
        key: PRNG key.
        wrt: ``"theta"`` or ``"s0"``.
        inputs: optional per-step inputs, leading axis T (see :func:`diffsim.rollout`); they
            reach every step of the rollout and of its Jacobian.
        discretization: check the gradient at h/2 (``False``: skip the extra gradient).
        **options: passed to :func:`diagnose` (``sigma``, ``num_samples``, ``thresholds``,
            ...); the rollout's own thresholds are fields of :class:`Thresholds`:
            ``chaos_growth`` (G > 1, default 100), ``concentration_limit`` (in (0, 1),
            default 0.5) and ``discretization_tolerance`` (the relative error of the
            gradient at h, in (0, 1], beyond which ``discretization`` is raised; 0.1).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import diagnose_rollout
        >>> from diffsim.systems import double_pendulum
        >>> sys = double_pendulum()
        >>> d = diagnose_rollout(sys.step, sys.s0, sys.theta, 800,
        ...                      lambda s: jnp.cos(s[0][1]), jax.random.PRNGKey(0), wrt="s0")
        >>> d.flag_names
        ('chaos',)
    """
    num_steps = check_int("num_steps", num_steps, minimum=8)
    # the rollout's arguments, named as the user passed them (a bad s0 is "s0", not "theta")
    s0, theta, num_steps, inputs, _ = prepare(step, s0, theta, num_steps, inputs, floating=True)
    if wrt not in ("theta", "s0"):
        raise ValueError(f"wrt must be 'theta' or 's0', got {wrt!r}")
    if not callable(loss):
        raise TypeError(f"loss must be a callable loss(s_T) -> scalar, got {loss!r}")
    if not isinstance(discretization, bool):
        raise TypeError(f"discretization must be a bool (True or False), got {discretization!r}")

    def objective(var):
        s, p = (s0, var) if wrt == "theta" else (var, theta)
        return loss(rollout(step, s, p, num_steps, inputs=inputs, trajectory=False))

    var = theta if wrt == "theta" else s0
    if "half_step" in options:
        raise TypeError(
            "diagnose_rollout builds half_step from its step (discretization=True); "
            "pass half_step to diagnose instead"
        )
    opts = _diagnose_options(options)
    del opts["half_step"]
    settings, thresholds, budget = _measure_checked(objective, var, key, **opts)
    horizon = horizon_growth(*sensitivity_profile(step, s0, theta, num_steps, inputs))
    decided = growth_of(horizon, thresholds) is not None  # stiffness: the horizon's call
    m, sigma_used, widenings = sample(objective, var, key, stiffness_decided=decided,
                                      **settings)  # fmt: skip
    m = dataclasses.replace(m, horizon=horizon)
    extra = {"step_jacobians": num_steps}
    refined = halve_time_step(step) if discretization else None
    if refined is not None:
        fine_step, order, h = refined
        fine_inputs = None if inputs is None else jax.tree_util.tree_map(
            lambda u: jnp.repeat(u, 2, axis=0), inputs
        )  # fmt: skip

        def fine(var):
            s, p = (s0, var) if wrt == "theta" else (var, theta)
            return loss(rollout(fine_step, s, p, 2 * num_steps, inputs=fine_inputs,
                                trajectory=False))  # fmt: skip

        half = HalfStep(fine, order, h, float(thresholds.discretization_tolerance))
        m = _with_half_step(m, extra, half, var)
    return _report(m, sigma_used, widenings, thresholds, budget, extra)


def halve_time_step(step: Any) -> tuple[Any, int, float] | None:
    """``(the step at h/2, its order, h)`` for a step that declares
    ``time_step_refinable`` (an :class:`~diffsim.integrators.Integrator`, an MJX step; not
    a contact step: those are left to the jump and stiffness flags); ``None`` for any
    other step."""
    declared = as_step(step)
    # contact steps declare time_step_refinable = False: a stepped contact moves its onset
    # with h by construction, and time-of-impact restitution with semi-implicit Euler
    # changed its gradient by more than 10 % at h/2 on the held-out battery (a false
    # alarm), so the flag is not raised for contact
    if not declared.time_step_refinable or declared.h is None:
        return None
    h = declared.h
    return declared.with_time_step(h / 2), declared.order, float(h)


HALF_STEP_FORWARD_MAX_DIM = 16
"""Up to this many parameters the gradient at h/2 is taken in forward mode (``jax.jacfwd``,
d tangents in one pass), above it in reverse mode. The half-step rollout is a new program
(its step is a new step), so its compile time counts: on the MJX wall scene (T = 100, d = 6,
float64) ``jacfwd`` compiled in 19 s and ran in 54 ms where ``grad`` took 32 s and 63 ms."""


@eqx.filter_jit
def _fine_gradient(fine, var):
    f, x, _ = flatten_loss(fine, var)
    return jax.jacfwd(f)(x) if x.shape[0] <= HALF_STEP_FORWARD_MAX_DIM else jax.grad(f)(x)


def _discretization(grad_h, fine, var, order: int, h: float) -> Discretization:
    """The gradient at h (``grad_h``, the doctor's own ∇L(θ), raveled) against the one at
    h/2 (``fine``, the only new program compiled)."""
    g_h = np.asarray(grad_h, np.float64)
    g_half = np.asarray(_fine_gradient(fine, var), np.float64)
    diff = float(np.linalg.norm(g_h - g_half))
    fine_norm, coarse_norm = float(np.linalg.norm(g_half)), float(np.linalg.norm(g_h))
    gain = 2.0**order / (2.0**order - 1.0)
    # relative to the larger of the two (a gradient that vanishes at h/2 is 100 % off, not ∞)
    ref = max(fine_norm, coarse_norm)
    rel = gain * diff / ref if ref > 0 else 0.0
    return Discretization(h, int(order), coarse_norm, fine_norm, diff, float(rel))
