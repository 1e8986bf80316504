"""The doctor's checks of a fit and the remedies they lead to (for :class:`Act`): the check
of the exact Jacobian, multiple shooting over the longest windows it trusts, the smoothed
Jacobian, and the probes around θ̂ at the scale of its intervals.

Each check takes the :class:`Tally` of the evaluations run so far and returns it updated
(the result's ``rollout_equivalents`` counts them)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._matrix_free import _second_over_first_along, directional_trusted, scaled_directions
from ._parameters import Parameter
from ._problem import (
    SMOOTHING_DRAWS,
    SMOOTHING_SCALE,
    _costs,
    _exact_residuals,
    _jacobian,
    _Problem,
    _Projected,
    _smoothed,
    _smoothed_along,
    _without_smoothing,
)
from ._recording import Recording
from ._shooting import _default_starts, _shooting_problem
from ._statistics import _covariance, _scaled_svd, _t_quantile, _theta_block, _unidentified

MIN_AUTO_WINDOW = 5
"""The shortest window the fit's own switch to multiple shooting tries, in steps."""

PROBE_WIDTHS = (-2.0, -1.0, 1.0, 2.0)
"""Where a fit with ``trust="act"`` looks around θ̂ for a lower cost: each parameter moved
alone by these multiples of its 95 % interval's half-width (4·p rollouts). The intervals are
the Jacobian's promise that the cost rises that far out; a residual with steps (a contact
event that moves from one time step to the next as θ changes) can hold Levenberg–Marquardt
on a step's edge, where the Jacobian of each smooth piece sees a minimum and the data do
not."""

PROBE_GAIN = 1e-3
"""The relative decrease of the cost at a probe that counts as lower (and it must exceed
100·ε of the data's ‖y‖²: below that the costs differ by rounding)."""

PROBE_RESTARTS = 4
"""How many times at most a fit starts again from a lower probe."""

NONLINEARITY = 0.5
"""How far from linear the residuals may be, at :data:`SMOOTHING_SCALE` along each
parameter, for the fit's own switch to multiple shooting to take a window length:
‖r(θ+δ) + r(θ−δ) − 2r(θ)‖ ≤ NONLINEARITY·‖r(θ+δ) − r(θ−δ)‖ (the second difference against the
first: a Gauss–Newton step of that size is predicted by the Jacobian)."""


class Tally(NamedTuple):
    """The evaluations the doctor's checks and the probes ran, beyond the fits' own."""

    checks: int = 0
    """The doctor's checks of the exact Jacobian (10·p rollouts and a Jacobian each)."""
    rollouts: int = 0
    """Other rollouts: the probes and their Jacobians, the nonlinearity tests."""


class Posed(NamedTuple):
    """The problem a fit solves and, with multiple shooting, its window starts' first guess
    (flat) and their scale."""

    problem: _Problem
    extra0: Any = None
    extra_scale: Any = None


class RemedyKind(enum.Enum):
    """What a remedy changes before the next fit."""

    SHOOTING = "multiple shooting over windows whose exact Jacobian the doctor trusts"
    SMOOTHED = "the smoothed Jacobian"
    SHORTER_WINDOWS = "shorter windows, after windows that did not converge"
    EXACT = "the exact Jacobian again, where the doctor trusts it"
    PROBE = "a fit from a lower probe around the estimate"


class Remedy(NamedTuple):
    """The next fit: its problem, and its start (physical θ; ``None``: the last estimate)."""

    kind: RemedyKind
    posed: Posed
    start: np.ndarray | None = None


@eqx.filter_jit
def _second_over_first(problem: _Problem, x):
    p = len(problem.params)
    sig = SMOOTHING_SCALE * jnp.where(x[:p] != 0, jnp.abs(x[:p]), 1.0)

    def ratio(j):
        d = jnp.zeros_like(x).at[j].set(sig[j])
        rp, rm = problem.exact_residuals(x + d), problem.exact_residuals(x - d)
        r0 = problem.exact_residuals(x)
        return jnp.linalg.norm(rp + rm - 2 * r0) / jnp.linalg.norm(rp - rm)

    return jax.vmap(ratio)(jnp.arange(p))


@dataclass(frozen=True, eq=False)
class Checks:
    """What the checks and remedies need of the fit being run: the step and recordings,
    the choices made for multiple shooting, and the problem before any remedy."""

    step: Any
    recs: Sequence[Recording]
    observe: Callable[[Any], Any]  # the user's observe (multiple shooting's default starts)
    state_of: Callable[[Any], Any] | None
    shooting: int | None  # the user's windows (None: the fit may choose them)
    continuity_weight: float | None
    params: tuple[Parameter, ...]
    labels: list[str]
    num_samples: int  # N, the observed samples
    num_data: int  # the data's residuals (before shooting's continuity defects)
    rank_rtol: float
    rounding: float  # costs closer than this are equal (100·ε of the data's ‖y‖²)
    dtype: Any
    single: _Problem  # the problem before any remedy: what shorter windows are cut from
    # the matrix-free path: the random directions of the check and the smoothed Jacobian
    # (None: the dense path, one column per parameter)
    directions: int | None = None

    @property
    def p(self) -> int:
        return len(self.params)

    @property
    def check_cost(self) -> int:
        """Rollout equivalents of one check of the exact Jacobian, beyond its Jacobian:
        10 per parameter (dense) or per direction (matrix-free; its gradient one reverse
        pass, counted 2)."""
        return 10 * self.p if self.directions is None else 10 * self.directions + 2

    def exact_trusted(self, prob: _Problem, x_all, tally: Tally) -> tuple[bool, Tally]:
        """The doctor's check (:func:`diffsim.doctor.check_grad`) of the exact Jacobian at x: θ's
        columns, through a fixed random projection of the residuals (shooting's starts
        held)."""
        from ..doctor import check_grad  # the doctor's own test, not a second one

        tally = tally._replace(checks=tally.checks + 1)
        if self.directions is not None:
            exact = _without_smoothing(prob)
            ok = directional_trusted(exact, x_all, self.p, self.directions, self.dtype)
            return ok, tally
        # the gradient checked is cᵀJ from the fit's own Jacobian program (compiled once per
        # problem): the check itself compiles only the rollout, batched over the differences
        r, J = _jacobian(_without_smoothing(prob), jnp.asarray(x_all, self.dtype))
        c = jax.random.normal(jax.random.key(0), (r.shape[0],), self.dtype)
        proj = _Projected(prob, c, jnp.asarray(x_all[self.p :], self.dtype))
        grad = c @ J[:, : self.p]
        ok = check_grad(proj, jnp.asarray(x_all[: self.p], self.dtype), gradient=grad).ok
        return bool(ok), tally

    def nearly_linear(self, prob: _Problem, x, tally: Tally) -> tuple[bool, Tally]:
        """Whether the residuals stay nearly linear :data:`SMOOTHING_SCALE` away along each
        parameter (:data:`NONLINEARITY`): 3·p rollouts; matrix-free, along each of the
        check's random directions (at that relative length): 3·M."""
        if self.directions is None:
            tally = tally._replace(rollouts=tally.rollouts + 3 * len(prob.params))
            r = np.asarray(_second_over_first(prob, x))
        else:
            tally = tally._replace(rollouts=tally.rollouts + 3 * self.directions)
            xa = jnp.asarray(x, self.dtype)
            V = SMOOTHING_SCALE * scaled_directions(xa[: self.p], int(xa.shape[0]),
                                                    self.directions, self.dtype)  # fmt: skip
            r = np.asarray(_second_over_first_along(prob, xa, V))
        return bool(np.all(np.isfinite(r)) and np.all(r <= NONLINEARITY)), tally

    def full_rank(self, prob: _Problem, x) -> bool:
        """Whether the Jacobian at x is finite and sees every fitted parameter (matrix-free:
        whether the residuals are finite; the rank is not tested there)."""
        if self.directions is not None:
            return bool(np.all(np.isfinite(np.asarray(_exact_residuals(prob, jnp.asarray(x))))))
        _, J = _jacobian(prob, jnp.asarray(x))
        sv, V = _scaled_svd(_theta_block(np.asarray(J), self.p))
        finite = bool(np.all(np.isfinite(np.asarray(J))))
        return finite and not _unidentified(sv, V, self.labels, self.rank_rtol)

    def plateau(
        self, prob: _Problem, x0, x0_all, unseen: Sequence[str]
    ) -> tuple[Posed, str] | None:
        """The smoothed Jacobian where the exact one is rank-deficient at the start but the
        smoothed one is not (a plateau: zero derivative where moving θ does change the
        data), with the action's text; ``None`` where it sees no more."""
        smoothed = _smoothed(prob, x0, self.dtype)
        _, Js = _jacobian(smoothed, x0_all)
        svs, Vs = _scaled_svd(_theta_block(np.asarray(Js), self.p))
        # a clear margin: smoothing itself decorrelates parameters that act only together
        # (m and k through k/m) by O(σ²) = 0.25 %, which must not count as identified
        clear = max(self.rank_rtol, SMOOTHING_SCALE)
        if not np.all(np.isfinite(np.asarray(Js))) or _unidentified(svs, Vs, self.labels, clear):
            return None
        return Posed(smoothed), (
            f"at the start the exact Jacobian does not see {', '.join(unseen)} (a plateau: "
            f"zero derivative, while the data change within {SMOOTHING_SCALE:.0%} of each "
            "parameter): switched to the smoothed Jacobian"
        )

    def shorter_windows(
        self, prob: _Problem, x_theta, where: str, below: int, tally: Tally
    ) -> tuple[tuple[Posed, str] | None, Tally]:
        """Multiple shooting with the longest windows, of T/4, T/16 and T/64 steps (and
        fewer than ``below``), whose exact Jacobian the doctor trusts and which stay nearly
        linear 5 % away — when the recordings give the window starts and the user chose no
        windows; ``None`` when none qualifies."""
        so = self.state_of or _default_starts(self.step, self.recs[0], self.observe)[0]
        if self.shooting is not None or so is None:
            return None, tally
        T_ = prob.num_steps
        for W in (T_ // 4, T_ // 16, T_ // 64):
            if W >= below:
                continue
            if W < MIN_AUTO_WINDOW:
                break
            x_theta_j = jnp.asarray(x_theta, self.dtype)
            shot, e0, es = _shooting_problem(
                prob, self.recs, W, self.state_of, self.continuity_weight, x_theta_j, self.dtype
            )
            if self.num_samples <= self.p + int(e0.shape[0]):
                break
            x_all = jnp.concatenate([x_theta_j, e0])
            trusted, tally = self.exact_trusted(shot, x_all, tally)
            if not trusted:
                continue
            linear, tally = self.nearly_linear(shot, x_all, tally)
            if linear:
                return (Posed(shot, e0, es), (
                    f"{where}: over windows of {W} steps the doctor trusts the exact Jacobian "
                    f"and it predicts the residuals {SMOOTHING_SCALE:.0%} away: switched to "
                    f"multiple shooting ({shot.num_windows} windows per recording)"
                )), tally  # fmt: skip
        return None, tally

    def switch(self, posed: Posed, x_theta, where: str, tally: Tally) -> tuple[Remedy, str, Tally]:
        """What the fit does when the doctor does not trust the exact Jacobian at x_theta:
        :meth:`shorter_windows`, else the smoothed Jacobian; with the action's text."""
        prob = posed.problem
        where = f"{where} the exact Jacobian disagrees with central finite differences"
        shot, tally = self.shorter_windows(
            prob, x_theta, where + " (diffsim.doctor.check_grad)", prob.num_steps, tally
        )
        if shot is not None:
            return Remedy(RemedyKind.SHOOTING, shot[0]), shot[1], tally
        e0 = None if prob.window is None else posed.extra0
        es = None if prob.window is None else posed.extra_scale
        smoothed = Posed(self.smoothed(prob, x_theta), e0, es)
        how = (
            f"each parameter's residuals smoothed by a Gaussian of {SMOOTHING_SCALE:.0%} of "
            f"its value, {SMOOTHING_DRAWS} antithetic draws"
            if self.directions is None
            else f"the residuals smoothed by a Gaussian of {SMOOTHING_SCALE:.0%} of each "
            f"parameter's value, along {self.directions} fixed random directions"
        )
        return Remedy(RemedyKind.SMOOTHED, smoothed), (
            f"{where} (diffsim.doctor.check_grad; e.g. a contact switch within the difference "
            "step, "
            f"a stiff or chaotic response): switched to the smoothed Jacobian ({how})"
        ), tally  # fmt: skip

    def smoothed(self, prob: _Problem, x_theta) -> _Problem:
        """``prob`` with the smoothed Jacobian: per parameter (dense), or along the random
        directions (matrix-free)."""
        if self.directions is None:
            return _smoothed(prob, x_theta, self.dtype)
        return _smoothed_along(prob, x_theta, self.dtype, self.directions)

    def probe(self, prob: _Problem, x_all, tally: Tally) -> tuple[tuple[Any, str] | None, Tally]:
        """The lowest of the cost at θ̂ and at :data:`PROBE_WIDTHS` of each parameter's 95 %
        half-width from it (inside its bounds; shooting's starts held): ``(θ, note)`` when
        a probe lowers the cost by more than :data:`PROBE_GAIN`, else ``None``. Not on the
        matrix-free path (its 4·p rollouts and dense intervals grow with p)."""
        if self.directions is not None:
            return None, tally
        p, dtype = self.p, self.dtype
        xa = jnp.asarray(x_all, dtype)
        r_, J_ = (np.asarray(a, dtype=float) for a in _jacobian(prob, xa))
        n_x = int(xa.shape[0])
        smoothing = 2 * SMOOTHING_DRAWS * p if prob.smooth_eps is not None else 0
        tally = tally._replace(rollouts=tally.rollouts + 1 + n_x + smoothing)
        dof_ = self.num_samples - n_x
        cov_ = _covariance(r_[: self.num_data], J_, p, dof_, self.rank_rtol)
        half = _t_quantile(dof_) * np.sqrt(np.maximum(np.diag(cov_), 0.0))
        x_np = np.asarray(x_all, dtype=float)
        points, moves = [], []
        for j, par in enumerate(self.params):
            for k in PROBE_WIDTHS:
                v = x_np[j] + k * half[j]
                if np.isfinite(v) and half[j] > 0 and par.lower < v < par.upper:
                    x = x_np.copy()
                    x[j] = v
                    points.append(x)
                    moves.append((j, k))
        if not points:
            return None, tally
        tally = tally._replace(rollouts=tally.rollouts + len(points))
        exact = _without_smoothing(prob)
        c = np.asarray(_costs(exact, jnp.asarray(np.stack(points), dtype)))
        c0 = float(np.sum(np.asarray(_exact_residuals(exact, xa)) ** 2))
        best = int(np.argmin(np.where(np.isfinite(c), c, np.inf)))
        drop = c0 - c[best]
        if not (np.isfinite(c[best]) and drop > PROBE_GAIN * c0 and drop > self.rounding):
            return None, tally
        j, k = moves[best]
        # the linearised residuals' prediction of the probe's cost: where it foresees most
        # of the drop the residual is smooth there and the solver only stopped short
        r0 = np.asarray(_exact_residuals(exact, xa), dtype=float)
        m = min(r0.shape[0], J_.shape[0])
        predicted = float(np.sum((r0[:m] + J_[:m, j] * (points[best][j] - x_np[j])) ** 2))
        if c0 - predicted >= 0.5 * drop:
            why = ("the solver stopped short of it (the linearised residuals predict this "
                   "drop: raise max_steps or lower rtol/atol)")  # fmt: skip
        else:
            why = (
                "the residual steps there, which its linearisation does not foresee, "
                "e.g. a contact event moving from one time step to the next as θ changes"
            )
        return (points[best][:p], (
            f"at the estimate {self.labels[j]} moved by {k:+g} of its 95 % half-widths "
            f"({x_np[j]:.8g} → {points[best][j]:.8g}) lowers the cost by "
            f"{1.0 - c[best] / c0:.1%}: the estimate was not a minimum at the scale of its "
            f"own intervals: {why}"
        )), tally  # fmt: skip
