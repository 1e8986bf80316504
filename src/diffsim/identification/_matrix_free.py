r"""The matrix-free path of :func:`diffsim.identify`: Levenberg–Marquardt whose Jacobian is
never formed, the doctor's check and the smoothed Jacobian along a fixed number of random
directions, and the intervals of the parameters a user names.

**The solve.** At each step the residuals are linearised once (``jax.linearize``: one
rollout that keeps its tangent program); :math:`J v` is that program (a forward-mode pass,
about one rollout), :math:`J^\top w` its transpose (``jax.linear_transpose``: a reverse pass).
The Levenberg–Marquardt step :math:`(J^\top J + λ I)\,δ = -J^\top r` is solved by Lineax's
conjugate gradients (at most :data:`CG_MAX_STEPS` products with :math:`J^\top J`, each one
:math:`J v` and one :math:`J^\top w`); a trial rollout at :math:`z + δ` and the gain ratio
against the linear model accept it or raise λ (Nielsen's update). The unknowns are the same
z as the dense path's (bounds by reparametrisation). A step costs
:math:`4 + 2\,n_\mathrm{CG}` rollout equivalents, whatever p is.

**Intervals.** The diagonal of :math:`(J^\top J)^{-1}` for the named parameters, one CG
solve of :math:`(S J^\top J S)\,y = e_i` each (S the parameters' scales:
:math:`[(J^\top J)^{-1}]_{ii} = S_{ii}^2 y_i`), at most :data:`INTERVAL_CG_MAX_STEPS`
products; the full covariance (p solves) only up to :data:`FULL_COVARIANCE_MAX` parameters.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._problem import _Problem

SOLVERS = ("auto", "dense", "matrix_free")
"""The names :func:`diffsim.identify`'s ``solver=`` accepts."""

MATRIX_FREE_ABOVE = 100
"""``solver="auto"`` runs matrix-free above this many fitted parameters (multiple shooting's
window starts do not count: many, but the dense path fits them well, and CG converges slowly
on the stiff continuity constraints they bring) ..."""

DENSE_JACOBIAN_BYTES = 2**30
"""... or where the dense Jacobian (residuals × unknowns × the float's bytes) would exceed
this (1 GiB); ``solver="dense"`` is refused beyond it, with the estimate."""

NUM_DIRECTIONS = 16
"""Random directions of the matrix-free path's check of the exact Jacobian and of its
smoothed Jacobian (``num_directions=``)."""

CG_MAX_STEPS = 100
"""Conjugate-gradient iterations at most per Levenberg–Marquardt step (an inexact Newton
step where CG has not converged: the gain ratio still decides whether it is taken)."""

INTERVAL_CG_MAX_STEPS = 500
"""Conjugate-gradient iterations at most per named interval (an interval whose solve has
not converged is reported as infinite, and the message says so)."""

FULL_COVARIANCE_MAX = 100
"""The matrix-free path forms the full covariance (one CG solve per parameter) only up to
this many fitted parameters, and only when ``intervals_for`` is not given; beyond it the
result holds the intervals of ``intervals_for``'s parameters and ``covariance`` is
``None``."""

CG_RTOL = 1e-10
"""The conjugate-gradient solves' relative tolerance (float64; 1e-5 in float32)."""


def needed(module: str, what: str) -> Any:
    """``module`` (Optimistix, or Lineax which comes with it), imported when a fit runs:
    they need Python >= 3.11, and on 3.10 the rest of diffsim works and the fit says what
    to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # pragma: no cover - Python 3.10 / not installed
        raise ImportError(
            f"{what} needs {module} (with optimistix, Python >= 3.11): pip install "
            f"'optimistix>=0.1.0' ({err})"
        ) from None


def _lineax() -> Any:
    return needed("lineax", "diffsim.identify's matrix-free solver")


def choose_solver(solver: str, p: int, unknowns: int, rows: int, itemsize: int) -> str:
    """``"dense"`` or ``"matrix_free"`` for ``solver=`` (:data:`SOLVERS`): ``"auto"`` runs
    matrix-free above :data:`MATRIX_FREE_ABOVE` fitted parameters (p) or where the dense
    Jacobian (rows × unknowns × itemsize bytes) exceeds :data:`DENSE_JACOBIAN_BYTES`.

    Raises:
        ValueError: another name; ``"dense"`` where the Jacobian would not fit (the message
            gives the estimate).

    Example:
        >>> from diffsim.identification._matrix_free import choose_solver
        >>> choose_solver("auto", 6, 6, 600, 8), choose_solver("auto", 2000, 2000, 600, 8)
        ('dense', 'matrix_free')
    """
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(map(repr, SOLVERS))}, got {solver!r}")
    need = rows * unknowns * itemsize
    if solver == "dense" and need > DENSE_JACOBIAN_BYTES:
        raise ValueError(
            f"solver='dense': the Jacobian would hold {rows} residuals × {unknowns} unknowns × "
            f"{itemsize} bytes = {need / 2**30:.3g} GiB, over the limit of "
            f"{DENSE_JACOBIAN_BYTES / 2**30:g} GiB: use solver='matrix_free' (or 'auto')"
        )
    if solver == "auto":
        big = p > MATRIX_FREE_ABOVE or need > DENSE_JACOBIAN_BYTES
        return "matrix_free" if big else "dense"
    return solver


def check_intervals_for(intervals_for: Any, labels: list[str]) -> tuple[int, ...] | None:
    """The positions of ``intervals_for``'s names among the fitted parameters (``None``: not
    given).

    Raises:
        ValueError: a name that is not a fitted parameter (the message lists them).
        TypeError: not a sequence of names.
    """
    if intervals_for is None:
        return None
    names = [intervals_for] if isinstance(intervals_for, str) else intervals_for
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise TypeError(
            f"intervals_for must be a sequence of fitted parameters' names, got {intervals_for!r}"
        )
    unknown = [n for n in names if n not in labels]
    if unknown:
        shown = ", ".join(labels[:20]) + (f", … ({len(labels)} in all)" if len(labels) > 20 else "")
        raise ValueError(
            f"intervals_for names {', '.join(map(repr, unknown))}, which are not fitted "
            f"parameters; fitted: {shown}"
        )
    return tuple(dict.fromkeys(labels.index(n) for n in names))


def _cg_rtol(dtype: Any) -> float:
    return CG_RTOL if jnp.finfo(dtype).eps < 1e-10 else 1e-5


def _cg(b, max_steps: int, forcing: Any = 0.0) -> Any:
    """Lineax's CG for right-hand side b: converged where the residual and the last update
    are below ``max(forcing, CG_RTOL)`` of max|b| and of the solution (an absolute floor: a
    relative test alone never passes on b's zero entries)."""
    rtol = jnp.maximum(forcing, _cg_rtol(b.dtype))
    return _lineax().CG(rtol=rtol, atol=rtol * jnp.max(jnp.abs(b)), max_steps=max_steps)


def _directions(num: int, p: int, dtype: Any) -> jax.Array:
    """Fixed Gaussian draws (num, p): the same at every point (common random numbers)."""
    return jax.random.normal(jax.random.key(2), (num, p), dtype)


@eqx.filter_jit
def _lm(fit: Any, z0, rtol: float, atol: float, max_steps: int, cg_max_steps: int):
    """Levenberg–Marquardt on ``fit.residuals_z`` with CG inner solves (module docstring):
    the estimate, the steps, whether it converged, the iterates and costs, and the products
    with JᵀJ the CG solves ran."""
    lx = _lineax()
    fn = lambda z: fit.residuals_z(z, None)[0]  # noqa: E731
    eps = float(jnp.finfo(z0.dtype).eps)
    r0 = fn(z0)
    # λ starts at 1e-3 of JᵀJ's mean diagonal, estimated as ‖Jε‖²/n (ε ~ N(0, I): its
    # expectation is the trace): one product, not p
    _, jeps = jax.jvp(fn, (z0,), (jax.random.normal(jax.random.key(3), z0.shape, z0.dtype),))
    lam0 = 1e-3 * jnp.sum(jeps**2) / z0.shape[0]
    lam0 = jnp.where(jnp.isfinite(lam0) & (lam0 > 0), lam0, 1.0)
    hist_z = jnp.full((max_steps + 1, z0.shape[0]), jnp.nan, z0.dtype)
    hist_c = jnp.full((max_steps + 1,), jnp.nan, z0.dtype)

    def cond(c):
        return ~c["done"] & (c["k"] < max_steps)

    def body(c):
        z, cost, lam = c["z"], c["cost"], c["lam"]
        r, lin = jax.linearize(fn, z)
        lin_t = jax.linear_transpose(lin, z)
        g = lin_t(r)[0]
        op = lx.FunctionLinearOperator(lambda v: lin_t(lin(v))[0] + lam * v,
                                       jax.eval_shape(lambda: z),
                                       tags=lx.positive_semidefinite_tag)  # fmt: skip
        # inexact Newton (Eisenstat–Walker's forcing term): far from the minimum a rough
        # step does as well as an exact one; the tolerance tightens as the gradient falls
        g0 = jnp.where(c["k"] == 0, jnp.max(jnp.abs(g)), c["g0"])
        forcing = jnp.minimum(0.1, jnp.max(jnp.abs(g)) / jnp.where(g0 > 0, g0, 1.0))
        sol = lx.linear_solve(op, -g, _cg(-g, cg_max_steps, forcing), throw=False)
        d = jnp.where(jnp.all(jnp.isfinite(sol.value)), sol.value, jnp.zeros_like(z))
        n_cg = sol.stats["num_steps"]
        jd = lin(d)
        pred = -(g @ d + 0.5 * jd @ jd)  # the linear model's decrease of ½‖r‖²
        r_new = fn(z + d)
        cost_new = 0.5 * r_new @ r_new
        gain = (cost - cost_new) / jnp.where(pred > 0, pred, 1.0)
        accept = jnp.isfinite(cost_new) & (pred > 0) & (gain > 1e-4)
        small = (jnp.max(jnp.abs(d)) <= atol + rtol * jnp.max(jnp.abs(z))) & (
            jnp.abs(cost - cost_new) <= atol + rtol * cost
        )
        # nothing left to gain: the linear model predicts no decrease above rounding
        flat = ~accept & (pred <= 10 * eps * cost)
        nielsen = jnp.maximum(1 / 3, 1 - (2 * gain - 1) ** 3)
        z_next = jnp.where(accept, z + d, z)
        cost_next = jnp.where(accept, cost_new, cost)
        k = c["k"]
        return {
            "z": z_next,
            "cost": cost_next,
            "lam": jnp.where(accept, lam * nielsen, lam * c["nu"]),
            "nu": jnp.where(accept, 2.0, 2.0 * c["nu"]),
            "k": k + 1,
            "g0": g0,
            "done": (accept & small) | flat | ~jnp.isfinite(lam),
            "ok": (accept & small) | flat,
            # each CG iteration one product (lineax recomputes the residual with one more
            # every 10th: stabilise_every)
            "products": c["products"] + n_cg + n_cg // 10,
            "hz": c["hz"].at[k].set(z_next),
            "hc": c["hc"].at[k].set(cost_next),
        }

    carry = {
        "z": z0, "cost": 0.5 * r0 @ r0, "lam": lam0, "nu": jnp.asarray(2.0, z0.dtype),
        "k": 0, "g0": jnp.zeros((), z0.dtype), "done": jnp.asarray(False),
        "ok": jnp.asarray(False), "products": 0, "hz": hist_z, "hc": hist_c,
    }  # fmt: skip
    c = jax.lax.while_loop(cond, body, carry)
    return c["z"], c["k"], c["ok"], c["hz"], c["hc"], c["products"]


class _AlongDirections(eqx.Module):
    """``α -> cᵀ r(x + Σ α_i v_i)``: the projected residuals along the directions V (rows),
    whose gradient at 0 is ``V Jᵀc`` (the doctor's check of the exact Jacobian, matrix-free)."""

    problem: _Problem
    c: Any
    x: Any
    V: Any  # (M, len(x)): zero in shooting's start states

    def __call__(self, alpha):
        return jnp.dot(self.c, self.problem.exact_residuals(self.x + alpha @ self.V))


def scaled_directions(x_theta, n_all: int, num: int, dtype: Any) -> jax.Array:
    """(num, n_all): unit Gaussian directions in θ's relative units (each parameter scaled
    by max(1, |θ_j|), like the doctor's steps), zero in shooting's start states."""
    x = jnp.asarray(x_theta, dtype)
    p = x.shape[0]
    e = _directions(num, p, dtype)
    v = e / jnp.linalg.norm(e, axis=1, keepdims=True) * jnp.maximum(1.0, jnp.abs(x))
    return jnp.zeros((num, n_all), dtype).at[:, :p].set(v)


@eqx.filter_jit
def _projected_gradient(problem: _Problem, x, c, V):
    """``V Jᵀc`` by one reverse pass (``jax.vjp``), not p tangents."""
    _, pull = jax.vjp(problem.exact_residuals, x)
    return V @ pull(c)[0]


def directional_trusted(problem: _Problem, x_all, p: int, num: int, dtype: Any) -> bool:
    """The doctor's check (:func:`diffsim.doctor.check_grad`) of the exact Jacobian along
    ``num`` fixed random directions of θ: the directional derivatives :math:`c^\\top J v_i`
    (one reverse pass) against central differences along each :math:`v_i` (10·num
    rollouts), whatever p is."""
    from ..doctor import check_grad  # the doctor's own test, not a second one

    x = jnp.asarray(x_all, dtype)
    rows = int(jax.eval_shape(problem.exact_residuals, x).shape[0])
    c = jax.random.normal(jax.random.key(0), (rows,), dtype)
    V = scaled_directions(x[:p], int(x.shape[0]), num, dtype)
    grad = _projected_gradient(problem, x, c, V)
    along = _AlongDirections(problem, c, x, V)
    return bool(check_grad(along, jnp.zeros(num, dtype), gradient=grad).ok)


@eqx.filter_jit
def _second_over_first_along(problem: _Problem, x, V):
    """:data:`NONLINEARITY`'s ratio along each direction (row of V): 3 rollouts each."""

    def ratio(v):
        rp, rm = problem.exact_residuals(x + v), problem.exact_residuals(x - v)
        r0 = problem.exact_residuals(x)
        return jnp.linalg.norm(rp + rm - 2 * r0) / jnp.linalg.norm(rp - rm)

    return jax.vmap(ratio)(V)


class Variances(NamedTuple):
    """The diagonal of (JᵀJ)⁻¹ the interval solves found."""

    diagonal: np.ndarray
    """(len(which),) [(JᵀJ)⁻¹]_ii in the unknowns' units; ``inf`` where a solve did not
    converge."""
    block: np.ndarray | None
    """The θ block of (JᵀJ)⁻¹ when every θ column was solved (the full covariance)."""
    products: int
    """Products with JᵀJ the solves ran."""


@eqx.filter_jit
def _inverse_columns(problem: _Problem, x, scale, which, max_steps: int):
    lx = _lineax()
    fn = problem.matrix_free_residuals
    _, lin = jax.linearize(fn, x)
    lin_t = jax.linear_transpose(lin, x)
    op = lx.FunctionLinearOperator(lambda v: scale * lin_t(lin(scale * v))[0],
                                   jax.eval_shape(lambda: x),
                                   tags=lx.positive_semidefinite_tag)  # fmt: skip

    def column(i):
        e = jnp.zeros_like(x).at[i].set(1.0)
        sol = lx.linear_solve(op, e, _cg(e, max_steps), throw=False)
        n = sol.stats["num_steps"]
        return scale * sol.value * scale[i], sol.result == lx.RESULTS.successful, n + n // 10

    return jax.lax.map(column, which)


def variances(problem: _Problem, x_all, scale, which: tuple[int, ...], p: int) -> Variances:
    """[(JᵀJ)⁻¹]_ii for the unknowns ``which`` by CG (module docstring), and the θ block
    when ``which`` is all of θ's p columns."""
    x = jnp.asarray(x_all)
    which_j = jnp.asarray(which, dtype=jnp.int32)
    cols, ok, n = _inverse_columns(problem, x, jnp.asarray(scale, x.dtype), which_j,
                                   INTERVAL_CG_MAX_STEPS)  # fmt: skip
    cols, ok = np.asarray(cols, dtype=float), np.asarray(ok)
    idx = np.asarray(which)
    diag = np.where(ok & np.isfinite(cols[np.arange(len(which)), idx]),
                    cols[np.arange(len(which)), idx], math.inf)  # fmt: skip
    block = None
    if tuple(which) == tuple(range(p)) and bool(np.all(ok)):
        b = cols[:, :p]
        block = 0.5 * (b + b.T)
    return Variances(diag, block, int(np.sum(np.asarray(n))))
