"""One Levenberg–Marquardt solve (Optimistix), driven step by step inside one
``lax.while_loop`` so that the iterates are kept; :class:`FitRun` is what it found."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._matrix_free import needed
from ._parameters import _from_z_all, _to_z
from ._problem import _exact_residuals, _Problem


class FitRun(NamedTuple):
    """What one Levenberg–Marquardt solve found."""

    x: np.ndarray
    """The estimate: physical θ, then (multiple shooting) the window starts."""
    steps: int
    """Solver steps taken."""
    converged: bool
    """Whether it met its tolerances within ``max_steps`` (and stayed finite)."""
    finite: bool
    """Whether the simulation stayed finite (else ``x`` is the last finite iterate)."""
    jac: str
    """``"fwd"`` or ``"bwd"``: how Optimistix differentiated the residuals."""
    theta_history: np.ndarray
    """(steps, p): θ at the accepted iterates."""
    cost_history: np.ndarray
    """(steps,): ½‖r‖² at the accepted iterates."""
    rollouts: int = 0
    """The matrix-free path: the rollout equivalents the solve spent (module
    ``_matrix_free``); the dense path's are counted from ``steps``."""


class _Fit(eqx.Module):
    problem: _Problem
    lo: Any
    hi: Any
    x0: Any
    scale: Any
    extra0: Any = None  # multiple shooting: the start states' initial guess (flat) ...
    extra_scale: Any = None  # ... and their scale
    # the matrix-free path differentiates the residuals exactly through the rollout (or
    # smoothed along random directions), never through the dense forward-mode Jacobian
    # the Optimistix path attaches
    matrix_free: bool = eqx.field(static=True, default=False)

    def physical(self, z):
        p = len(self.problem.params)
        theta = _from_z_all(tuple(q.kind for q in self.problem.params), self.lo, self.hi,
                            self.x0, self.scale, z[:p])  # fmt: skip
        if self.extra0 is None:
            return theta
        return jnp.concatenate([theta, self.extra0 + self.extra_scale * z[p:]])

    def residuals_z(self, z, args):
        x = self.physical(z)
        r = self.problem.matrix_free_residuals(x) if self.matrix_free else self.problem.residuals(x)
        return r, None


def _optimistix() -> Any:
    return needed("optimistix", "diffsim.identify")


@eqx.filter_jit
def _solve(fit: _Fit, z0, rtol: float, atol: float, max_steps: int, jac: str):
    optx = _optimistix()
    solver = optx.LevenbergMarquardt(rtol=rtol, atol=atol)
    fn = fit.residuals_z
    options = {"jac": jac}
    f_struct = jax.eval_shape(lambda z: fn(z, None)[0], z0)
    state = solver.init(fn, z0, None, options, f_struct, None, frozenset())
    hist_z = jnp.full((max_steps + 1, z0.shape[0]), jnp.nan, z0.dtype)
    hist_c = jnp.full((max_steps + 1,), jnp.nan, z0.dtype)

    dynamic, static = eqx.partition(state, eqx.is_array)  # the Jacobian's jaxpr is static

    def cond(carry):
        _, dyn, k, _, _ = carry
        st = eqx.combine(dyn, static)
        done, result = solver.terminate(fn, z0, None, options, st, frozenset())
        return (~done) & (result == optx.RESULTS.successful) & (k < max_steps)

    def body(carry):
        z, dyn, k, hz, hc = carry
        z, st, _ = solver.step(fn, z, None, options, eqx.combine(dyn, static), frozenset())
        cost = 0.5 * jnp.sum(st.f_info.residual**2)
        return z, eqx.filter(st, eqx.is_array), k + 1, hz.at[k].set(z), hc.at[k].set(cost)

    z, dynamic, k, hist_z, hist_c = jax.lax.while_loop(cond, body, (z0, dynamic, 0, hist_z, hist_c))
    state = eqx.combine(dynamic, static)
    done, result = solver.terminate(fn, z, None, options, state, frozenset())
    ok = done & (result == optx.RESULTS.successful)
    return z, k, ok, hist_z, hist_c


def fit_run(problem, params, x_theta, x0j, scale, extra0, extra_scale, dtype, rtol, atol,
            max_steps, matrix_free: bool = False) -> FitRun:  # fmt: skip
    """One Levenberg–Marquardt solve from physical θ ``x_theta`` (and shooting's starts at
    their guess): Optimistix's with the dense Jacobian, or the matrix-free one
    (``_matrix_free._lm``)."""
    p_count = len(params)
    n_extra = 0 if extra0 is None else int(extra0.shape[0])
    z0 = jnp.asarray([_to_z(p, float(x), s) for p, x, s in zip(params, x_theta, scale)], dtype)
    if n_extra:
        z0 = jnp.concatenate([z0, jnp.zeros(n_extra, dtype)])
    fit = _Fit(
        problem,
        jnp.asarray([p.lower if math.isfinite(p.lower) else 0.0 for p in params], dtype),
        jnp.asarray([p.upper if math.isfinite(p.upper) else 0.0 for p in params], dtype),
        x0j,
        jnp.asarray(scale, dtype),
        extra0,
        extra_scale,
    )
    rollouts = 0
    if matrix_free:
        from ._matrix_free import CG_MAX_STEPS, _lm

        jac = "matrix_free"
        z, k, ok, hist_z, hist_c, products = _lm(dataclasses.replace(fit, matrix_free=True), z0,
                                                 rtol, atol, max_steps, CG_MAX_STEPS)  # fmt: skip
        k = int(k)
        # r(z0) and λ's start (one product), then per step: the linearisation (with the
        # smoothed Jacobian's 2M rollouts), Jᵀr, Jδ and the trial; 2 per product with JᵀJ
        smooth = problem.smooth_directions
        per_step = 4 + (0 if smooth is None else 2 * int(smooth.shape[0]))
        rollouts = 2 + k * per_step + 2 * int(products)
    else:
        rows = int(jax.eval_shape(problem.exact_residuals, fit.physical(z0)).shape[0])
        # forward mode: one tangent per unknown beats one backward pass per residual
        jac = "fwd" if p_count + n_extra <= rows else "bwd"
        z, k, ok, hist_z, hist_c = _solve(fit, z0, rtol, atol, max_steps, jac)
        k = int(k)
    x_hat = np.asarray(fit.physical(z), dtype=float)
    hist_cost = np.asarray(hist_c[:k])
    finite = bool(np.all(np.isfinite(x_hat))) and (k == 0 or bool(np.isfinite(hist_cost[-1])))
    if finite:
        r_hat = _exact_residuals(problem, jnp.asarray(x_hat, dtype))
        finite = bool(jnp.all(jnp.isfinite(r_hat)))
    if not finite:  # never report NaN: the last finite iterate
        good = np.where(np.isfinite(hist_cost))[0]
        start = np.asarray(fit.physical(z0), dtype=float)
        x_hat = np.asarray(fit.physical(hist_z[good[-1]]), dtype=float) if good.size else start
    hist_theta = np.asarray(jax.vmap(fit.physical)(hist_z[:k]))[:, :p_count]
    return FitRun(x_hat, k, bool(ok) and finite, finite, jac, hist_theta, hist_cost, rollouts)
