r"""The least-squares problem: the weighted residuals (with multiple shooting's windows and
continuity defects), their forward-mode Jacobian, and the smoothed Jacobian the fit may use
instead."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._rollout import rollout
from ._data import _Data
from ._parameters import Parameter
from ._step_caps import physical, with_memory

SMOOTHING_SCALE = 0.05
"""The smoothed Jacobian's Gaussian, as a fraction of each parameter's value (its scale for
a parameter at 0): the doctor's default σ (:func:`diffsim.doctor.default_sigma`)."""

SMOOTHING_DRAWS = 16
"""Antithetic draws per parameter of the smoothed Jacobian."""


class _Problem(eqx.Module):
    step: Any  # a pytree (an eqx.Module step) or an opaque callable: filter_jit sorts it
    observe: Any
    params: tuple[Parameter, ...] = eqx.field(static=True)
    num_steps: int = eqx.field(static=True)
    base: Any  # θ with the fixed values
    data: _Data
    # multiple shooting: windows of `window` steps, whose start states (after the first) are
    # unknowns after θ's in x; `unravel` maps a flat state back to the step's pytree
    window: int | None = eqx.field(static=True, default=None)
    unravel: Any = eqx.field(static=True, default=None)
    continuity: Any = 1.0
    # a smoothed Jacobian (the fit's remedy when the doctor does not trust the exact one):
    # θ's columns are the Gaussian-smoothed residuals' Jacobian, estimated from the fixed
    # antithetic draws `smooth_eps` (p, M) at the scales `smooth_sigma` (p,)
    smooth_eps: Any = None
    smooth_sigma: Any = None
    # the matrix-free path's smoothed Jacobian: along the fixed random directions
    # `smooth_directions` (M, p) at the scales `smooth_sigma` (p,)
    smooth_directions: Any = None

    def theta_of(self, x):
        # one scatter per field, not one per parameter: a fit of thousands of entries of one
        # field traces (and compiles) a single update
        theta = dict(self.base)
        for field, (js, index) in _scatter_plan(self.params).items():
            value = x[js] if index is not None else x[js[-1]]
            theta[field] = (
                jnp.asarray(theta[field]).at[index if index is not None else ()].set(value)
            )
        return theta

    @property
    def num_windows(self) -> int:
        return 1 if self.window is None else -(-self.num_steps // self.window)

    def _windows(self, theta, s0, u, starts):
        """One recording's windows from s0 and the flat starts (K − 1, n): the predicted
        observations (T, ·) and the continuity defects (K − 1, n)."""
        W, K = self.window, self.num_windows
        assert W is not None
        flat0, _ = ravel_pytree(physical(s0))
        first = jnp.concatenate([flat0[None], starts])  # (K, n)
        pad = K * W - self.num_steps
        u = jax.tree_util.tree_map(
            lambda a: jnp.concatenate([a, jnp.zeros((pad,) + a.shape[1:], a.dtype)]).reshape(
                (K, W) + a.shape[1:]
            ),
            u,
        )

        def window(flat, uk):
            start = with_memory(self.unravel(flat), s0)
            traj = rollout(self.step, start, theta, W, inputs=uk, include_initial=False)
            end = jax.tree_util.tree_map(lambda a: a[-1], traj)
            return jax.vmap(self.observe)(traj), ravel_pytree(physical(end))[0]

        pred, ends = jax.vmap(window, in_axes=(0, None if u is None else 0))(first, u)
        pred = {k: v.reshape((K * W,) + v.shape[2:])[: self.num_steps] for k, v in pred.items()}
        return pred, ends[:-1] - starts

    def residuals(self, x):
        """Weighted residuals (masked samples 0), one flat vector, for physical values x
        (then, with shooting, the continuity defects times ``continuity``); differentiated
        exactly, or through :meth:`smoothed_jacobian` in θ's columns when smoothing is set."""
        if self.smooth_eps is None:
            # the rows, counted without tracing the rollout again: the observed samples,
            # and with shooting one continuity defect per start-state entry
            rows = sum(int(np.prod(v.shape)) for v in self.data.observed.values())
            rows += x.shape[0] - len(self.params) if self.window is not None else 0
            if x.shape[0] <= rows:
                return _forward_mode(self.exact_residuals)(x)
            return self.exact_residuals(x)
        p = len(self.params)
        return _with_theta_columns(self.exact_residuals, p,
                                   lambda x, dt: self.smoothed_jacobian(x) @ dt)(x)  # fmt: skip

    def matrix_free_residuals(self, x):
        r"""The residuals as the matrix-free path differentiates them: exactly (``jvp`` and
        ``vjp`` through the rollout), or, with ``smooth_directions`` set, with θ's columns
        of the Jacobian smoothed along the random directions: :math:`J_s v = \frac1M
        \sum_i Δ_i\, ε_i^\top (v / σ)`, :math:`Δ_i = \tfrac12 (r(x + σ ε_i) - r(x - σ
        ε_i))` — 2M rollouts per linearisation, whatever p is; an estimate of rank M whose
        expectation is the Gaussian-smoothed residuals' Jacobian (exact for a response
        linear in θ, in expectation)."""
        if self.smooth_directions is None:
            return self.exact_residuals(x)
        p = len(self.params)
        E, sig = self.smooth_directions, self.smooth_sigma

        def along_directions(x, dt):
            def half_difference(e):
                d = jnp.zeros_like(x).at[:p].set(sig * e)
                return 0.5 * (self.exact_residuals(x + d) - self.exact_residuals(x - d))

            diffs = jax.vmap(half_difference)(E)  # (M, rows)
            return diffs.T @ (E @ (dt / sig)) / E.shape[0]

        return _with_theta_columns(self.exact_residuals, p, along_directions)(x)

    def smoothed_jacobian(self, x):
        r"""θ's columns of the smoothed residuals' Jacobian: column j is the slope of the
        residuals along θ_j over Gaussian offsets of scale σ_j,

        .. math:: J_{:j} = \frac{\sum_i \big(r(θ + σ_jε_{ji}e_j) - r(θ - σ_jε_{ji}e_j)\big)\,
                  ε_{ji}}{2σ_j \sum_i ε_{ji}^2},

        over fixed draws ε (p, M) (common random numbers: the same draws at every θ, so the
        fit sees one deterministic Jacobian field). In expectation the derivative of the
        residuals smoothed along θ_j (the zeroth-order estimate, normalised by the draws'
        own second moment), exact for a response linear or quadratic in θ_j; one
        parameter at a time, so a parameter with no effect gets an exactly zero column,
        not the others' sampling noise."""
        p = len(self.params)
        eps, sig = self.smooth_eps, self.smooth_sigma

        def column(j, e_j, s_j):
            def diff(e):
                d = jnp.zeros_like(x).at[j].set(s_j * e)
                return (self.exact_residuals(x + d) - self.exact_residuals(x - d)) * e

            return jnp.sum(jax.vmap(diff)(e_j), axis=0) / (2 * s_j * jnp.sum(e_j**2))

        return jax.vmap(column, out_axes=1)(jnp.arange(p), eps, sig)

    def exact_residuals(self, x):
        p = len(self.params)
        theta = self.theta_of(x[:p])
        in_axes = (0, None if self.data.inputs is None else 0)
        defects = None
        if self.window is None:

            def one(s0, u):
                traj = rollout(self.step, s0, theta, self.num_steps, inputs=u,
                               include_initial=False)  # fmt: skip
                return jax.vmap(self.observe)(traj)

            pred = jax.vmap(one, in_axes=in_axes)(self.data.s0, self.data.inputs)
        else:
            R = jax.tree_util.tree_leaves(self.data.s0)[0].shape[0]
            starts = x[p:].reshape(R, self.num_windows - 1, -1)
            pred, defects = jax.vmap(
                lambda s0, u, st: self._windows(theta, s0, u, st), in_axes=in_axes + (0,)
            )(self.data.s0, self.data.inputs, starts)
        out = []
        for k in self.data.observed:
            d = self.data
            diff = (jnp.asarray(pred[k]).reshape(d.observed[k].shape) - d.observed[k]) * d.weights[
                k
            ]
            out.append(jnp.where(d.mask[k], diff, 0.0).ravel())
        if defects is not None:
            out.append(self.continuity * defects.ravel())
        return jnp.concatenate(out)


def _scatter_plan(params: tuple[Parameter, ...]) -> dict[str, tuple[np.ndarray, Any]]:
    """``{field: (positions in x, index)}``: where each field's fitted entries go, as one
    integer-array index per field (``None`` for a scalar field). An entry fitted under two
    names takes the later one's value, as one ``.at[].set`` per parameter in order did."""
    plan: dict[str, dict[tuple[int, ...], int]] = {}
    for j, p in enumerate(params):
        idx = p.index if isinstance(p.index, tuple) else (p.index,)
        plan.setdefault(p.field, {})[idx] = j
    out: dict[str, tuple[np.ndarray, Any]] = {}
    for field, where in plan.items():
        idx, js = list(where), list(where.values())
        ndim = len(idx[0])
        index = tuple(np.array([i[d] for i in idx], dtype=np.int64) for d in range(ndim))
        out[field] = (np.asarray(js, dtype=np.int64), index if ndim else None)
    return out


def _forward_mode(f: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    """``f`` whose derivative is always its forward-mode Jacobian: a ``custom_jvp`` whose
    rule builds ``J`` with one tangent per column of x (``vmap`` of ``jvp``) and returns
    ``J @ dx``. Reverse mode (Optimistix's ``Jᵀr``, the doctor's gradient) then transposes
    that product, not the rollout, so no program of the fit holds the rollout's transpose,
    which compiles several times slower than its tangent on MuJoCo models (half_cheetah,
    T = 100: 55 s → 26 s for the fit's program). Used when x (the fitted parameters and
    shooting's start states) has no more entries than the residuals."""

    @jax.custom_jvp
    def g(x):
        return f(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        y, J = _value_and_jacfwd(f, x)
        return y, J @ dx

    return g


def _value_and_jacfwd(f: Callable[[jax.Array], jax.Array], x: jax.Array):
    """``(f(x), J)``: one linearization, J's columns its tangents along each unit vector."""
    y, lin = jax.linearize(f, x)
    return y, jax.vmap(lin, out_axes=1)(jnp.eye(x.shape[0], dtype=x.dtype))


@eqx.filter_jit
def _jacobian(problem: _Problem, x):
    return _value_and_jacfwd(problem.residuals, x)


@eqx.filter_jit
def _exact_residuals(problem: _Problem, x):
    """The residuals at x, compiled once per problem structure (called eagerly, the
    rollout's ``scan`` would be traced and compiled again on every fit)."""
    return problem.exact_residuals(x)


def _smoothed(problem: _Problem, x_theta, dtype) -> _Problem:
    """``problem`` fitted with the smoothed Jacobian in θ's columns: column j the derivative
    of the residuals smoothed along θ_j by N(0, σ_j²), σ_j = :data:`SMOOTHING_SCALE`·|θ_j| at
    the point it is switched on (fixed draws: common random numbers)."""
    x = np.asarray(x_theta, dtype=float)
    sigma = SMOOTHING_SCALE * np.where(x != 0, np.abs(x), 1.0)
    eps = jax.random.normal(jax.random.key(1), (len(problem.params), SMOOTHING_DRAWS), dtype)
    return dataclasses.replace(problem, smooth_eps=eps, smooth_sigma=jnp.asarray(sigma, dtype))


def _without_smoothing(problem: _Problem) -> _Problem:
    """``problem`` with its exact Jacobian (the smoothed one switched off)."""
    return dataclasses.replace(problem, smooth_eps=None, smooth_sigma=None, smooth_directions=None)


def _smoothed_along(problem: _Problem, x_theta, dtype, num_directions: int) -> _Problem:
    """``problem`` with the matrix-free path's smoothed Jacobian
    (:meth:`_Problem.matrix_free_residuals`): ``num_directions`` fixed Gaussian directions,
    σ_j = :data:`SMOOTHING_SCALE`·|θ_j| at the point it is switched on."""
    x = np.asarray(x_theta, dtype=float)
    sigma = SMOOTHING_SCALE * np.where(x != 0, np.abs(x), 1.0)
    E = jax.random.normal(jax.random.key(1), (num_directions, len(problem.params)), dtype)
    return dataclasses.replace(problem, smooth_directions=E, smooth_sigma=jnp.asarray(sigma, dtype))


def is_smoothed(problem: _Problem) -> bool:
    """Whether ``problem`` fits with a smoothed Jacobian (either path's)."""
    return problem.smooth_eps is not None or problem.smooth_directions is not None


class _Projected(eqx.Module):
    """``x -> c·r(x)``: a scalar whose gradient is ``Jᵀc``, for the doctor's check."""

    problem: _Problem
    c: Any
    tail: Any = None  # multiple shooting: the start states, held

    def __call__(self, x):
        if self.tail is not None and self.tail.shape[0]:
            x = jnp.concatenate([x, self.tail])
        return jnp.dot(self.c, self.problem.exact_residuals(x))


@eqx.filter_jit
def _costs(problem: _Problem, X):
    """‖r(x)‖² at each row of X: one ``lax.map`` (a scan of the rollout, compiled like one)."""
    return jax.lax.map(lambda x: jnp.sum(problem.exact_residuals(x) ** 2), X)


def _with_theta_columns(exact, p, theta_jvp):
    """``exact`` (residuals of x = (θ's p entries, shooting's start states)) with its
    derivative along θ replaced: the product of a tangent with θ's columns is
    ``theta_jvp(x, dθ)``; the start states' columns stay exact."""

    @jax.custom_jvp
    def r(x):
        return exact(x)

    @r.defjvp
    def r_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        dy = theta_jvp(x, dx[:p])
        if x.shape[0] > p:  # shooting's start states: their exact columns
            dy = dy + jax.jvp(exact, (x,), (dx.at[:p].set(0.0),))[1]
        return exact(x), dy

    return r
