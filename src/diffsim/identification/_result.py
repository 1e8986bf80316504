"""What :func:`diffsim.identify` returns (:class:`IdentifyResult`), and how it is summarised
from the fits it ran."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from .._results import RESULTS, status_name, status_of
from ._data import _Data
from ._matrix_free import FULL_COVARIANCE_MAX, variances
from ._parameters import Parameter
from ._problem import SMOOTHING_DRAWS, _exact_residuals, _jacobian, _Problem, is_smoothed
from ._remedies import Tally
from ._solve import FitRun
from ._statistics import _covariance, _scaled_svd, _t_quantile, _theta_block, _unidentified


@dataclass(frozen=True)
class IdentifyResult:
    """What :func:`identify` found: a small core (the estimates, their uncertainty, the fit's
    residual, how it ended and what it cost) and ``stats``, the rest of what the fit
    measured and did. A stat is read as ``r.stats["iterations"]`` or ``r.iterations``.

    Attributes:
        names: the fitted parameters' names.
        theta: ``{name: estimate}``; ``theta_full``: θ with the estimates put in.
        std_error, interval_low, interval_high: standard errors and 95 % intervals
            (``inf`` / ``∓inf`` for a parameter the data do not determine).
        residual: the root mean square of the weighted residuals at θ̂.
        status: how it ended, a :data:`~diffsim.RESULTS` item: ``converged``
            (Levenberg–Marquardt met its tolerances within ``max_steps``), ``max_steps`` or
            ``non_finite`` (the simulation went non-finite; the last finite iterate is
            reported). ``converged`` (a property) says whether it is ``converged``.
        message: why it stopped, with what the fit did on the way.
        evaluations: rollouts (of all recordings) with their Jacobians (one per step, one
            at the start and one at θ̂ of each solve); ``rollout_equivalents``:
            evaluations × (1 + p + #starts) (one per forward-mode tangent; the smoothed
            Jacobian adds 2·M·p rollouts), plus 10·p + 1 + p + #starts for each of the
            doctor's checks (its differences and the exact Jacobian it checks), plus, for
            each probe around θ̂ (``trust="act"``), its Jacobian and its rollouts.
            Matrix-free: per solver step 4 rollout equivalents (the linearisation, Jᵀr, Jδ,
            the trial; the smoothed Jacobian adds 2·M) and 2 per product with JᵀJ in its
            conjugate gradients, 10·M + 2 per check, 2 per product of the interval solves.
        seconds: the wall time.
        stats: the rest, by name:

            * ``start``: ``{name: start}``; ``residual_start``: the residual RMS there;
              ``residual_per_signal``: ``{signal: RMS}`` at θ̂; ``cost``: ½‖r‖² at θ̂;
              ``num_samples``: N, observed samples; ``iterations``: solver steps;
            * ``covariance``: (p, p), in the parameters' units; ``None`` where the
              matrix-free solver did not form it (beyond ``FULL_COVARIANCE_MAX``
              parameters, or with ``intervals_for``: then only the named parameters have
              intervals, the others NaN, and ``message`` says so);
            * ``singular_values``: relative singular values of the column-normalised
              Jacobian (empty on the matrix-free path, which forms no Jacobian);
              ``unidentifiable``: names of parameters the data do not determine at θ̂;
            * ``jacobian_mode``: how the Jacobian was computed; ``jacobian_trusted``:
              whether the doctor's finite-difference check agreed with the exact Jacobian
              at θ̂ (``None``: not checked); ``jacobian``: ``"exact"`` or ``"smoothed"``,
              the Jacobian the last solve and the intervals used;
            * ``actions``: what the fit did because the doctor did not trust the exact
              Jacobian (``trust="act"``): switched to multiple shooting or to the smoothed
              Jacobian, where and why, or fitted again from a lower probe around θ̂;
            * ``windows``: shooting windows per recording; ``continuity_defect``: the
              largest gap between windows;
            * ``history``: ``{"cost": (k,), "theta": (k, p)}``: the accepted iterates.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import RESULTS, identify
        >>> from diffsim.identification import simulate_recording, Parameter
        >>> step = lambda s, th: (s[0] + 0.1 * s[1], s[1] - 0.1 * th["c"] * s[1])
        >>> rec = simulate_recording(step, (0.0, 1.0), {"c": jnp.array(0.5)}, 20)
        >>> res = identify(step, rec, {"c": jnp.array(1.0)}, [Parameter("c", lower=0.0)])
        >>> round(res.theta["c"], 6), res.converged, bool(res.status == RESULTS.converged)
        (0.5, True, True)
        >>> res.iterations == res.stats["iterations"] > 0
        True
    """

    names: tuple[str, ...]
    theta: dict[str, float]
    theta_full: Any
    std_error: dict[str, float]
    interval_low: dict[str, float]
    interval_high: dict[str, float]
    residual: float
    status: RESULTS
    message: str
    evaluations: int
    rollout_equivalents: int
    seconds: float
    stats: dict[str, Any] = field(repr=False)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: a stat by its name (``r.iterations``)
        stats = self.__dict__.get("stats", {})
        if name in stats:
            return stats[name]
        raise AttributeError(f"'IdentifyResult' object has no attribute or stat {name!r}")

    @property
    def converged(self) -> bool:
        """Whether Levenberg–Marquardt met its tolerances within ``max_steps``."""
        return bool(self.status == RESULTS.converged)

    def __repr__(self) -> str:
        lines = [
            f"IdentifyResult({'converged' if self.converged else 'NOT converged'}: "
            f"{self.message.split('; ')[0]}; {self.iterations} iterations, "
            f"{self.evaluations} evaluations, "
            f"{self.seconds:.2f} s)",
            f"  residual RMS {self.residual:.4g} (start {self.residual_start:.4g}), "
            f"N = {self.num_samples}",
        ]
        for n in self.names:
            lines.append(
                f"  {n:>20s} = {self.theta[n]:.6g} ± {self.std_error[n]:.3g}   "
                f"95% [{self.interval_low[n]:.6g}, {self.interval_high[n]:.6g}]"
                f"   (start {self.start[n]:.6g})"
            )
        if self.unidentifiable:
            lines.append(f"  not identifiable from these data: {', '.join(self.unidentifiable)}")
        lines += [f"  {line}" for line in self.trust_notes]
        if self.windows > 1:
            lines.append(
                f"  multiple shooting: {self.windows} windows per recording, largest "
                f"continuity defect {self.continuity_defect:.3g}"
            )
        return "\n".join(lines)

    @property
    def trust_notes(self) -> tuple[str, ...]:
        """What the doctor found and the fit did about it, one line each (``repr`` and
        ``diffsim identify`` print them)."""
        notes = tuple(f"the doctor: {a}" for a in self.actions)
        if self.jacobian_trusted is False:
            notes += (
                "the exact Jacobian at the estimate disagrees with central finite differences: "
                + (
                    "the intervals come from the smoothed Jacobian the fit used"
                    if self.jacobian == "smoothed"
                    else "the intervals rest on a Jacobian the doctor does not trust"
                ),
            )
        return notes

    def to_dict(self) -> dict[str, Any]:
        """The result as plain numbers and lists (what ``diffsim identify --json`` prints)."""
        return {
            "parameters": list(self.names),
            "theta": [self.theta[n] for n in self.names],
            "std_error": [self.std_error[n] for n in self.names],
            "interval_low": [self.interval_low[n] for n in self.names],
            "interval_high": [self.interval_high[n] for n in self.names],
            "start": [self.start[n] for n in self.names],
            "residual": self.residual,
            "residual_start": self.residual_start,
            "residual_per_signal": self.residual_per_signal,
            "num_samples": self.num_samples,
            "singular_values": list(self.singular_values),
            "unidentifiable": list(self.unidentifiable),
            "converged": self.converged,
            "status": status_name(self.status),
            "message": self.message,
            "iterations": self.iterations,
            "evaluations": self.evaluations,
            "rollout_equivalents": self.rollout_equivalents,
            "jacobian_trusted": self.jacobian_trusted,
            "windows": self.windows,
            "continuity_defect": self.continuity_defect,
            "actions": list(self.actions),
            "jacobian": self.jacobian,
            "method": "Levenberg-Marquardt ("
            + (
                "matrix-free, lineax CG"
                if self.jacobian_mode.startswith("matrix")
                else "optimistix"
            )
            + "), "
            + (
                "smoothed Jacobian (zeroth-order, Gaussian)"
                if self.jacobian == "smoothed"
                else f"exact {self.jacobian_mode} Jacobian"
            )
            + (f", multiple shooting ({self.windows} windows)" if self.windows > 1 else ""),
            "seconds": self.seconds,
        }


class SolverPath(NamedTuple):
    """How :func:`summarise` gets the statistics at the estimate."""

    matrix_free: bool = False
    named: tuple[int, ...] | None = None
    """``intervals_for``'s parameters (positions), ``None`` when not given."""
    check_cost: int = 0
    """Rollout equivalents of one check of the exact Jacobian, beyond its Jacobian."""


def summarise(
    runs: Sequence[FitRun],
    problem: _Problem,
    extra0: Any,
    data: _Data,
    params: Sequence[Parameter],
    x0: np.ndarray,
    r0: Any,
    trusted: bool | None,
    tally: Tally,
    actions: tuple[str, ...],
    rank_rtol: float,
    tolerances: tuple[float, float, int],
    t_start: float,
    path: SolverPath = SolverPath(),
) -> IdentifyResult:
    """The result of the fits ``runs`` (the last one's estimate, on ``problem``): the
    statistics at the estimate from its Jacobian (or, matrix-free, from CG solves), the
    message and the evaluations."""
    rtol, atol, max_steps = tolerances
    dtype = jnp.result_type(float)
    labels = [p.label for p in params]
    p_count = len(params)
    N = int(sum(int(jnp.sum(m)) for m in data.mask.values()))
    n_data = int(sum(int(np.prod(o.shape)) for o in data.observed.values()))
    last = runs[-1]
    x_hat, ok, finite, jac = last.x, last.converged, last.finite, last.jac
    k_total = sum(run.steps for run in runs)
    hist_theta = np.concatenate([run.theta_history for run in runs])
    hist_cost = np.concatenate([run.cost_history for run in runs])
    n_extra = 0 if extra0 is None else int(extra0.shape[0])
    dof = N - p_count - n_extra
    notes: list[str] = []
    if path.matrix_free:
        r, stats = _matrix_free_statistics(problem, x_hat, p_count, n_data, dof, path.named,
                                           labels, notes)  # fmt: skip
        (sv, bad, cov, se, products) = stats
    else:
        r, (sv, bad, cov, se) = _dense_statistics(problem, x_hat, p_count, n_data, dof, labels,
                                                  rank_rtol)  # fmt: skip
        products = 0
    x_hat = np.asarray(x_hat, dtype=float)
    defect = float(np.max(np.abs(r[n_data:]), initial=0.0)) / float(problem.continuity)
    r = r[:n_data] if n_extra else r  # the data's residuals (the defects are constraints)
    x_hat = x_hat[:p_count]
    tq = _t_quantile(dof)
    per_signal = {}
    offset = 0
    for key in data.observed:
        size = int(np.prod(data.observed[key].shape))
        m = int(jnp.sum(data.mask[key]))
        seg = r[offset : offset + size]
        per_signal[key] = float(np.sqrt(seg @ seg / max(m, 1)))
        offset += size
    smoothed_fit = is_smoothed(problem)
    if not finite:
        message = "the simulation went non-finite; the last finite iterate is reported"
        ok = False
    elif bool(ok):
        message = f"converged (rtol {rtol:g}, atol {atol:g})"
    else:
        message = f"did not converge in max_steps = {max_steps} steps; the last iterate is reported"
    if actions:
        message += "; " + "; ".join(actions)
    if trusted is False:
        message += (
            "; the exact Jacobian at the estimate disagrees with central finite differences "
            "(diffsim.doctor.check_grad)"
            + (
                ": the intervals come from the smoothed Jacobian the fit used"
                if smoothed_fit
                else ": the intervals rest on a Jacobian the doctor does not trust"
            )
        )
    message += "".join("; " + n for n in notes)
    names = tuple(labels)
    theta_full = problem.theta_of(jnp.asarray(x_hat, dtype))
    evaluations = k_total + 2 * len(runs)
    if path.matrix_free:
        # the solves' own count, the checks, the probes' and tests' rollouts, the residuals
        # and linearisation at θ̂ (2) and the interval solves' products (2 each)
        solves = sum(run.rollouts for run in runs)
        checks = tally.checks * path.check_cost
        rollout_equivalents = solves + checks + tally.rollouts + 2 + 2 * products
    else:
        # a Jacobian: one rollout and p + #starts tangents (exact), or 2·M·p rollouts (smoothed)
        per_jac = 1 + p_count + n_extra + (2 * SMOOTHING_DRAWS * p_count if smoothed_fit else 0)
        checks = tally.checks * (path.check_cost + 1 + p_count + n_extra)
        rollout_equivalents = evaluations * per_jac + checks + tally.rollouts
    return IdentifyResult(
        names=names,
        theta=dict(zip(names, map(float, x_hat))),
        theta_full=theta_full,
        std_error=dict(zip(names, map(float, se))),
        interval_low=dict(zip(names, map(float, x_hat - tq * se))),
        interval_high=dict(zip(names, map(float, x_hat + tq * se))),
        residual=float(np.sqrt(r @ r / N)),
        status=status_of("converged" if ok else "max_steps" if finite else "non_finite"),
        message=message,
        evaluations=evaluations,
        rollout_equivalents=int(rollout_equivalents),
        seconds=time.perf_counter() - t_start,
        stats={
            "start": dict(zip(names, map(float, x0))),
            "residual_start": float(np.sqrt(float(jnp.sum(r0[:n_data] ** 2)) / N)),
            "residual_per_signal": per_signal,
            "cost": 0.5 * float(r @ r),
            "num_samples": N,
            "iterations": k_total,
            "covariance": cov,
            "singular_values": tuple(float(s) for s in sv),
            "unidentifiable": bad,
            "jacobian_mode": JACOBIAN_MODES[jac],
            "jacobian_trusted": trusted,
            "jacobian": "smoothed" if smoothed_fit else "exact",
            "actions": tuple(actions),
            "windows": problem.num_windows,
            "continuity_defect": defect if n_extra else 0.0,
            "history": {"cost": hist_cost, "theta": hist_theta},
        },
    )


JACOBIAN_MODES = {
    "fwd": "forward-mode",
    "bwd": "reverse-mode",
    "matrix_free": "matrix-free (jvp and vjp, conjugate gradients)",
}


def _dense_statistics(problem, x_hat, p, n_data, dof, labels, rank_rtol):
    """The residuals at θ̂ and ``(singular values, unidentified, covariance, standard
    errors)`` from the Jacobian there (infinite errors for what the data do not see)."""
    xa = jnp.asarray(x_hat, jnp.result_type(float))
    r, J = (np.asarray(a, dtype=float) for a in _jacobian(problem, xa))
    sv, V = _scaled_svd(_theta_block(J, p))
    bad = _unidentified(sv, V, labels, rank_rtol)
    cov = _covariance(r[:n_data], J, p, dof, rank_rtol)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    return r, (sv, bad, cov, np.where([n in bad for n in labels], np.inf, se))


def _matrix_free_statistics(problem, x_hat, p, n_data, dof, named, labels, notes):
    """The residuals at θ̂ and, matrix-free, ``(singular values, unidentified, covariance,
    standard errors, products)``: the named parameters' variances by CG (all of θ's, and the
    covariance, up to :data:`FULL_COVARIANCE_MAX` parameters when none are named); NaN for
    the others."""
    xa = jnp.asarray(x_hat)
    r = np.asarray(_exact_residuals(problem, xa), dtype=float)
    s2 = float(r[:n_data] @ r[:n_data]) / dof
    which = named
    if which is None:
        which = tuple(range(p)) if p <= FULL_COVARIANCE_MAX else ()
        if not which:
            notes.append(
                f"the matrix-free solver formed no covariance (p = {p} > FULL_COVARIANCE_MAX "
                f"= {FULL_COVARIANCE_MAX}): name the parameters whose intervals you want in "
                "intervals_for"
            )
    elif len(which) < p:
        notes.append(
            f"intervals for {len(which)} named parameter(s) (intervals_for); the others' "
            "are NaN and the covariance was not formed"
        )
    se = np.full(p, np.nan)
    cov, products = None, 0
    if which:
        scale = np.where(np.abs(np.asarray(x_hat)) > 0, np.abs(np.asarray(x_hat)), 1.0)
        var = variances(problem, xa, scale, which, p)
        products = var.products
        se[list(which)] = np.sqrt(s2 * np.maximum(var.diagonal, 0.0))
        if var.block is not None:
            cov = s2 * var.block
        unsolved = [labels[i] for i, d in zip(which, var.diagonal) if not np.isfinite(d)]
        if unsolved:
            notes.append(
                "the interval solves (conjugate gradients) did not converge for "
                f"{', '.join(unsolved)}: their intervals are reported infinite (a direction "
                "the data barely see)"
            )
    return r, ((), (), cov, se, products)
