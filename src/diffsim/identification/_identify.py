r"""System identification: fit θ so that a simulation reproduces recorded motion.

Given recorded trajectories — each an initial state :math:`s_0`, controls :math:`u_t` and
observed signals :math:`y_t` (positions, velocities, any function of the state) — and a
diffsim step :math:`s_{t+1} = f(s_t, θ, u_t)`, :func:`identify` solves the nonlinear least
squares problem

.. math:: \hat θ = \arg\min_θ \tfrac12 \sum_{r,t,i} \big(w_{rti}\,(g_i(s^r_t(θ)) -
          y^r_{ti})\big)^2

over a chosen subset of θ, with the **exact** Jacobian of the residuals through the rollout
(forward-mode autodiff through :func:`diffsim.rollout`: one tangent per fitted parameter,
through the contact models and MJX's constraint solver alike). The solver is Optimistix's
Levenberg–Marquardt, driven step by step inside one ``lax.while_loop`` so that the
iterates are kept. All recordings run as one ``vmap`` of the rollout.

**Bounds by reparametrisation, not clipping.** A parameter with a lower bound is
:math:`θ = lo + e^z`, with an upper bound :math:`θ = hi - e^z`, with both
:math:`θ = lo + (hi - lo)\,σ(z)`; an unbounded one :math:`θ = θ_0 + |θ_0| z`. The solver
works on z, so θ stays strictly inside its bounds.

**Uncertainty.** At :math:`\hat θ`, with J the Jacobian of the weighted residuals with
respect to the fitted parameters, N observed (non-missing) samples and p parameters,

.. math:: \hat σ^2 = \frac{\lVert r \rVert^2}{N - p},\qquad
          \mathrm{Cov}(\hat θ) = \hat σ^2 (J^\top J)^{-1},\qquad
          \hat θ_j \pm t_{0.975,\,N-p}\,\sqrt{\mathrm{Cov}_{jj}},

the Gauss–Newton (linearised) covariance: the 95 % intervals are exact for a model linear
in θ with independent Gaussian noise of equal variance after weighting (so a weight should
be 1/σ of its signal's noise), and asymptotically otherwise.

**Many parameters.** Above a hundred parameters (or a dense Jacobian over 1 GiB) the fit
runs matrix-free (``solver=``): J is never formed; its products come from ``jvp`` and
``vjp`` through the rollout, each Levenberg–Marquardt step is a CG solve, the doctor's
check and the smoothed Jacobian run along a fixed number of random directions, and the
intervals are those of the parameters named in ``intervals_for`` (one CG solve of
:math:`(J^\top J) x = e_i` each): a fit's rollouts follow the steps and CG's iterations, not p.

**Identifiability.** The singular values of the column-normalised Jacobian
:math:`J D` (:math:`D_{jj} = 1/\lVert J_{:j} \rVert`) measure how well the data pin each
direction of θ. A relative singular value below ``rank_rtol`` is a direction the data do
not see: before fitting, :func:`identify` raises :class:`NotIdentifiableError` naming the
parameters in it (at the start point the fit could not move along it); at the estimate the
result lists them in ``unidentifiable`` and reports their intervals as infinite.

**Missing samples.** NaN in an observed signal means "not measured": that sample gives no
residual and is not counted in N.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_in_range, check_int
from ._data import _Data, _stack, _Subset
from ._matrix_free import NUM_DIRECTIONS, check_intervals_for, choose_solver
from ._parameters import Parameter, resolve_parameters, with_starts
from ._problem import _exact_residuals, _jacobian, _Problem
from ._recording import Recording, Signals, check_recording, default_observe
from ._remedies import Checks, Posed, Tally
from ._result import IdentifyResult, SolverPath, summarise
from ._shooting import _shooting_problem
from ._solve import FitRun, fit_run
from ._statistics import (
    NotIdentifiableError,
    _check_finite_jacobian,
    _fmt,
    _scaled_svd,
    _theta_block,
    _unidentified,
)
from ._step_caps import step_size
from ._trust import MAX_REMEDIES, AbstractTrust, Decision, Finding, as_trust

FREE_SCALE_MIN = 1.0
"""A free parameter moves in units of ``max(|start|, FREE_SCALE_MIN)`` (its z-coordinate)."""


def identify(
    step: Callable[..., Any],
    recordings: Recording | Sequence[Recording],
    theta: Mapping[str, Any],
    parameters: str | Sequence[str | Parameter],
    *,
    observe: Callable[[Any], Signals] = default_observe,
    model: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    max_steps: int = 100,
    rtol: float | None = None,
    atol: float | None = None,
    rank_rtol: float | None = None,
    trust: str | AbstractTrust = "act",
    shooting: int | None = None,
    state_of: Callable[[Signals], Any] | None = None,
    continuity_weight: float | None = None,
    solver: str = "auto",
    intervals_for: Sequence[str] | None = None,
    num_directions: int = NUM_DIRECTIONS,
) -> IdentifyResult:
    r"""Fit ``parameters`` of θ so that ``step`` reproduces ``recordings`` (module docstring:
    the least-squares problem, the bounds, the intervals, identifiability).

    Args:
        step: the diffsim step ``step(state, theta[, u])`` (a system's step, a
            ``WithContact``, an ``MjxStep``, ...).
        recordings: one :class:`Recording` or several (of any lengths: shorter ones are
            padded with missing samples; all run as one ``vmap``).
        theta: the full θ, a dict: the fixed values and the default starts.
        parameters: what to fit: :class:`Parameter` objects or names as
            :func:`parse_parameters` reads them (``"k"``, ``"m[1]"``, ``"body_mass:box"``).
        observe: ``state -> {signal: vector}`` for the recorded signals (default
            :func:`default_observe`); signals it gives that a recording lacks are ignored.
        model: the ``mujoco.MjModel`` for ``field:element`` names.
        bounds: ``{name: (lower, upper)}`` for parameters given by name.
        max_steps: Levenberg–Marquardt steps at most (>= 1).
        rtol, atol: the solver's tolerances (Optimistix's Cauchy criterion on the step
            and the residual change); default 1e-8 in float64, 1e-5 in float32.
        rank_rtol: relative singular value below which a direction is not identified;
            default 10·√ε (1.5e-7 in float64, 3.5e-3 in float32).
        trust: what the fit does about the doctor's check of the exact Jacobian: a
            strategy, :class:`~diffsim.identification.Act` (default),
            :class:`~diffsim.identification.Report` or :class:`~diffsim.identification.Off`,
            or its name ``"act"``, ``"report"``, ``"off"``
            (:func:`diffsim.doctor.check_grad` of a fixed random projection :math:`c^\top r(θ)`
            against central finite differences: 10·p rollouts per check, the gradient
            :math:`c^\top J` from the fit's own Jacobian).
            ``"act"`` (default): checked at the start and at θ̂; where it is not trusted
            (a contact switch inside the difference step, a stiff or chaotic response)
            the fit switches — once — to multiple shooting with the longest windows
            (T/4, T/16, T/64 steps) whose Jacobian the doctor trusts, when the recordings
            give the window starts (``state_of``, or recorded ``qpos``) and
            ``shooting`` was not chosen, else to the smoothed Jacobian (each parameter's
            residuals smoothed by a Gaussian of :data:`SMOOTHING_SCALE` of its value,
            estimated from :data:`SMOOTHING_DRAWS` fixed antithetic draws); a fit that
            found it at θ̂ then runs again from θ̂. Where the exact Jacobian is
            rank-deficient at the start but the smoothed one is not (a plateau), it
            switches to the smoothed Jacobian instead of raising
            :class:`NotIdentifiableError`. Last, it probes the cost around θ̂ at the scale of
            the intervals it would report (each parameter alone at :data:`PROBE_WIDTHS` of
            its 95 % half-width: 4·p rollouts and a Jacobian): where a probe is lower by more
            than :data:`PROBE_GAIN` (θ̂ was held on a step of the residual, a contact event
            moving from one time step to the next), it fits again from there, at most
            :data:`PROBE_RESTARTS` times. The result's ``actions`` and ``message`` say what
            was done. ``"report"``: checked at θ̂ only, nothing changed.
            ``"off"``: no check (``jacobian_trusted`` is ``None``).
        shooting: multiple shooting with windows of this many steps (>= 1, fewer than
            the longest recording's T): each recording is cut into windows, every window
            after the first starts from a state fitted with θ, and continuity residuals
            (a window's end state minus the next one's start, times ``continuity_weight``)
            tie them together. For long or chaotic recordings, where one rollout over the
            whole recording has a landscape too rough to descend. The intervals are θ's
            with the start states as nuisance parameters (the θ block of the covariance).
        state_of: multiple shooting: ``state_of(row) -> state``, the state a recorded row
            ``{signal: vector}`` (one sample) implies, for the window starts' first guess.
            Default: the recorded ``qpos`` and ``qvel`` when ``observe`` is
            :func:`default_observe` and the recording holds ``qpos`` (its ``qvel``, or where
            none is recorded the backward difference of the positions, (q_t − q_{t−1})/h:
            exact for semi-implicit Euler); otherwise (and where a row has a missing
            sample) the simulation at the start θ, which on a chaotic system is far from the
            data by the later windows: pass ``state_of`` there. Fields a state type names
            in ``SOLVER_MEMORY`` (an MJX state's warm start) are neither fitted nor tied.
        continuity_weight: multiple shooting: the weight of the continuity residuals
            (state units); default 1000 × the mean weight of the data.
        solver: ``"auto"`` (default), ``"dense"`` or ``"matrix_free"``
            (:data:`~diffsim.identification.SOLVERS`). ``"dense"``: the Jacobian formed by
            forward mode (1 + p rollouts per step, p × residuals × 8 bytes), Optimistix's
            Levenberg–Marquardt, the doctor's check along each parameter (10·p rollouts).
            ``"matrix_free"`` (``diffsim.identification._matrix_free``): J·v by ``jvp``,
            Jᵀ·w by ``vjp`` of one linearisation per step, the step solved by Lineax's CG
            (4 + 2 × its iterations rollouts per step, at most
            :data:`~diffsim.identification.CG_MAX_STEPS` iterations), the doctor's check and
            the smoothed Jacobian along ``num_directions`` random directions (10·M + 2 and
            2·M rollouts), no rank test at the start and no probes around θ̂; memory one
            linearised rollout whatever p is. ``"auto"`` runs matrix-free above
            :data:`~diffsim.identification.MATRIX_FREE_ABOVE` (100) fitted parameters
            (shooting's window starts do not count) or where the dense Jacobian would exceed
            :data:`~diffsim.identification.DENSE_JACOBIAN_BYTES` (1 GiB), dense otherwise.
        intervals_for: names of fitted parameters whose intervals the matrix-free path
            computes (one CG solve of (JᵀJ) x = eᵢ each); the others' are NaN and
            ``covariance`` is ``None``. Not given, it computes all of them (and the
            covariance) up to :data:`~diffsim.identification.FULL_COVARIANCE_MAX` (100)
            parameters and none beyond. The dense path gives every interval.
        num_directions: the matrix-free path's random directions (>= 1; default
            :data:`~diffsim.identification.NUM_DIRECTIONS` = 16).

    Returns:
        :class:`IdentifyResult`.

    Raises:
        ValueError: an empty parameter set, unknown fields or names, bounds that exclude
            the start, ``solver`` not one of its names, ``solver="dense"`` beyond
            ``DENSE_JACOBIAN_BYTES`` (the message gives the estimate), ``intervals_for``
            naming a parameter not fitted (the message lists them), ``num_directions`` < 1,
            a start that is not finite, recordings whose shapes, signals or
            times do not match the step or each other, non-finite data, fewer observed
            samples than parameters. :class:`NotIdentifiableError` (a ``ValueError``) when
            the Jacobian at the start is rank-deficient: the message names the parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import identify
        >>> from diffsim.identification import simulate_recording
        >>> from diffsim.systems import nonlinear_spring
        >>> sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)
        >>> rec = simulate_recording(sys.step, sys.s0, sys.theta, 300)
        >>> start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
        >>> res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 10), "c": (0, 1)})
        >>> round(res.theta["k"], 6), round(res.theta["c"], 6)
        (4.0, 0.3)
    """
    t_start = time.perf_counter()
    recs = [recordings] if isinstance(recordings, Recording) else list(recordings)
    if not recs:
        raise ValueError("recordings must hold at least one Recording, got none")
    if not isinstance(theta, Mapping):
        raise ValueError(f"theta must be a dict of arrays, got {type(theta).__name__}")
    theta = {k: jnp.asarray(v) for k, v in theta.items()}
    for k, v in theta.items():
        if not bool(jnp.all(jnp.isfinite(v))):
            raise ValueError(f"theta[{k!r}] must be finite")
    params = resolve_parameters(parameters, theta, model, bounds)
    labels = [p.label for p in params]
    max_steps = check_int("max_steps", max_steps, minimum=1)
    num_directions = check_int("num_directions", num_directions, minimum=1)
    named = check_intervals_for(intervals_for, labels)
    strategy = as_trust(trust)
    dtype = jnp.result_type(float)
    eps = float(jnp.finfo(dtype).eps)
    for name, value in (("rtol", rtol), ("atol", atol), ("rank_rtol", rank_rtol)):
        if value is not None:
            check_in_range(name, value, 0.0, 1.0)
    rtol = (1e-8 if eps < 1e-10 else 1e-5) if rtol is None else float(rtol)
    atol = (1e-8 if eps < 1e-10 else 1e-5) if atol is None else float(atol)
    rank_rtol = 10 * math.sqrt(eps) if rank_rtol is None else float(rank_rtol)
    params = with_starts(params, theta)
    x0 = np.array([p.start for p in params], dtype=float)
    # a free (unbounded) parameter moves in units of its start's magnitude, at least 1: a
    # start near 0 has no magnitude to give (from 1e-300 every step was 1e-300 wide and the
    # fit stopped far from the minimum, confidently)
    scale = np.maximum(np.abs(x0), FREE_SCALE_MIN)

    data, T, N = _recorded(step, recs, observe, len(params), dtype)
    observe_recorded = _Subset(observe, tuple(data.observed))
    # the starts are data (x0 below), not part of the compiled program's cache key
    static_params = tuple(
        Parameter(p.field, p.index, None, p.lower, p.upper, p.label) for p in params
    )
    # a fitted field given as integers (theta={"g": jnp.array(10)}) is fitted as reals: set
    # into an integer array, every value would round and its derivative would be zero
    fitted = {p.field for p in params}
    theta = {
        k: jnp.asarray(v, dtype)
        if k in fitted and not jnp.issubdtype(jnp.asarray(v).dtype, jnp.inexact)
        else v
        for k, v in theta.items()
    }
    problem = _Problem(step, observe_recorded, static_params, T, theta, data)
    x0j = jnp.asarray(x0, dtype)
    posed = Posed(problem)
    if shooting is not None:
        posed = Posed(*_shooting_problem(
            problem, recs, shooting, state_of, continuity_weight, x0j, dtype
        ))  # fmt: skip
        n_extra = int(posed.extra0.shape[0])
        if N <= len(params) + n_extra:
            raise ValueError(
                f"shooting = {shooting}: the recordings hold {N} observed samples for "
                f"{len(params)} parameters and {n_extra} start-state entries: use longer windows"
            )
    n_data = int(sum(int(np.prod(o.shape)) for o in data.observed.values()))
    n_unknown = len(params) + (0 if posed.extra0 is None else int(posed.extra0.shape[0]))
    matrix_free = choose_solver(solver, len(params), n_unknown, n_data + n_unknown - len(params),
                                jnp.dtype(dtype).itemsize) == "matrix_free"  # fmt: skip
    checks = Checks(step, recs, observe, state_of, shooting, continuity_weight, params, labels,
                    N, n_data, rank_rtol, _rounding(data, dtype), dtype, posed.problem,
                    num_directions if matrix_free else None)  # fmt: skip

    def solve(posed: Posed, x_theta) -> FitRun:
        run = fit_run(posed.problem, params, x_theta, x0j, scale, posed.extra0,
                      posed.extra_scale, dtype, rtol, atol, max_steps, matrix_free)  # fmt: skip
        return _in_own_units(run, lambda ps, x, s: fit_run(
            posed.problem, ps, x, jnp.asarray(x, dtype), s, posed.extra0, posed.extra_scale,
            dtype, rtol, atol, max_steps, matrix_free), params, scale)  # fmt: skip

    r0, start = _at_start(strategy, checks, posed, x0)
    runs, posed, trusted, tally, actions = _fits(strategy, checks, posed, x0, start, solve)
    return summarise(
        runs,
        posed.problem,
        posed.extra0,
        data,
        params,
        x0,
        r0,
        trusted,
        tally,
        actions,
        rank_rtol,
        (rtol, atol, max_steps),
        t_start,
        SolverPath(matrix_free, named, checks.check_cost),
    )


MAX_RESCALES = 3
"""Solves again in the estimate's own units at most this many times (:func:`_in_own_units`)."""


def _in_own_units(
    run: FitRun, resolve: Callable, params: Sequence[Parameter], scale: np.ndarray
) -> FitRun:
    """``run`` solved again from its estimate, in units of the estimate's magnitude, while
    a free parameter's estimate is over 10× smaller than the units it moved in.

    A free parameter moves from its start x₀ as x₀ + s·z with s = max(|x₀|, 1): from
    x₀ = 1e100 the representable values near the answer are 1e84 apart and the solver's
    tolerance (relative to s) is met long before it: the free particle's a = −9.81 came
    back as 0.0, "converged". From the estimate, in its own units, the fit ends where a
    start of the right scale does. The result keeps every solve's steps and history.
    """
    p = len(params)
    for _ in range(MAX_RESCALES):
        own = np.maximum(np.abs(run.x[:p]), FREE_SCALE_MIN)
        free = np.array([q.kind == "free" for q in params])
        if not run.finite or not np.any(free & (scale > 10 * own)):
            break
        scale = np.where(free, own, scale)
        restarted = [dataclasses.replace(q, start=float(x)) for q, x in zip(params, run.x[:p])]
        again = resolve(restarted, run.x[:p], scale)
        run = again._replace(
            steps=run.steps + again.steps,
            rollouts=run.rollouts + again.rollouts,
            theta_history=np.concatenate([run.theta_history, again.theta_history]),
            cost_history=np.concatenate([run.cost_history, again.cost_history]),
        )
    return run


def _recorded(
    step: Any, recs: Sequence[Recording], observe: Callable, p: int, dtype: Any
) -> tuple[_Data, int, int]:
    """The recordings checked against the step and ``observe`` and stacked: the data, the
    longest T and N, the observed samples."""
    h = step_size(step)
    for i, r in enumerate(recs):
        check_recording(i, r, h)
    data, T = _stack(recs, dtype)
    N = int(sum(int(jnp.sum(m)) for m in data.mask.values()))
    if N <= p:
        raise ValueError(
            f"the recordings hold {N} observed samples for {p} parameters: at least "
            f"{p + 1} are needed (more to estimate the noise)"
        )
    # the signals observe gives must cover the recorded ones
    s0_one = jax.tree_util.tree_map(lambda a: a[0], data.s0)
    try:
        shown = jax.eval_shape(observe, s0_one)
    except TypeError as err:
        raise TypeError(f"observe could not be applied to the state: {err}") from err
    missing = [k for k in data.observed if k not in shown]
    if missing:
        raise ValueError(
            f"the recordings hold the signals {', '.join(missing)}, which observe does not give "
            f"(it gives {', '.join(shown) or 'none'}): pass observe=state -> {{signal: vector}}"
        )
    for k in data.observed:
        width = data.observed[k].shape[-1]
        if int(np.prod(shown[k].shape)) != width:
            raise ValueError(
                f"signal {k!r}: the recording has {width} columns, the model's state gives "
                f"{int(np.prod(shown[k].shape))}"
            )
    return data, T, N


def _rounding(data: _Data, dtype: Any) -> float:
    """Costs closer than this to each other are rounding: 100·ε of the data's own ‖y‖²."""
    return (
        100
        * float(jnp.finfo(dtype).eps)
        * sum(
            float(jnp.sum(jnp.where(data.mask[k], data.observed[k] * data.weights[k], 0.0) ** 2))
            for k in data.observed
        )
    )


def _at_start(strategy: AbstractTrust, checks: Checks, posed: Posed, x0: np.ndarray):
    """The residuals at the start, and what the strategy does there (:class:`Act`: a remedy
    where the doctor does not trust the exact Jacobian, or on a plateau, where the exact
    Jacobian does not see a parameter that moves the data).

    Raises:
        ValueError: the simulation or its Jacobian at the start is not finite.
        NotIdentifiableError: the Jacobian at the start is rank-deficient (and no remedy).
    """
    p = checks.p
    x0_all = jnp.asarray(x0, checks.dtype)
    if posed.extra0 is not None:
        x0_all = jnp.concatenate([x0_all, posed.extra0])
    n_extra = int(x0_all.shape[0]) - p
    labels_all = checks.labels + [f"window start [{i}]" for i in range(n_extra)]
    if checks.directions is not None:
        # matrix-free: the residuals only (the rank is not tested: it needs the p columns)
        r0 = _exact_residuals(posed.problem, x0_all)
        if not bool(jnp.all(jnp.isfinite(r0))):
            raise ValueError("the simulation at the start gives non-finite observations: change it")
        sv0, bad0 = np.ones(0), ()
    else:
        r0, J0 = _jacobian(posed.problem, x0_all)
        _check_finite_jacobian(r0, J0, labels_all)
        sv0, V0 = _scaled_svd(_theta_block(np.asarray(J0), p))
        bad0 = _unidentified(sv0, V0, checks.labels, checks.rank_rtol)
    finding = Finding(None, x0_all, x0, None, posed, (), bad0)
    decision = strategy.next_remedy(finding, checks, Tally())
    if bad0 and decision.remedy is None:
        raise NotIdentifiableError(
            f"the recordings do not determine {', '.join(bad0)} at the start (relative "
            f"singular values of the column-normalised Jacobian {_fmt(sv0)}, threshold "
            f"{checks.rank_rtol:.2g}): a parameter with no effect on the observed signals, or "
            f"several that only act together; fix one of them, record other signals, or "
            f"excite the system differently",
            bad0,
            tuple(sv0),
        )
    return r0, decision


def _fits(
    strategy: AbstractTrust,
    checks: Checks,
    posed: Posed,
    x0: np.ndarray,
    start: Decision,
    solve: Callable[[Posed, Any], FitRun],
) -> tuple[tuple[FitRun, ...], Posed, bool | None, Tally, tuple[str, ...]]:
    """The fit, then a fit after each remedy the strategy finds (at most
    :data:`MAX_REMEDIES`): the runs, the problem the last one solved, the doctor's check at
    its estimate, the tally and the actions' text."""
    actions = (start.note,) if start.note else ()
    applied = (start.remedy.kind,) if start.remedy is not None else ()
    posed = posed if start.remedy is None else start.remedy.posed
    run, trusted, tally = _fit(strategy, checks, posed, np.asarray(x0, dtype=float),
                               start.tally, solve)  # fmt: skip
    runs = (run,)
    for _ in range(MAX_REMEDIES):
        x_theta = np.asarray(run.x[: checks.p], dtype=float)
        finding = Finding(run, run.x, x_theta, trusted, posed, applied)
        decision = strategy.next_remedy(finding, checks, tally)
        tally = decision.tally
        actions += (decision.note,) if decision.note else ()
        if (remedy := decision.remedy) is None:
            break
        applied += (remedy.kind,)
        posed = remedy.posed
        x_theta = x_theta if remedy.start is None else remedy.start
        run, trusted, tally = _fit(strategy, checks, posed, x_theta, tally, solve)
        runs += (run,)
    return runs, posed, trusted, tally, actions


def _fit(
    strategy: AbstractTrust,
    checks: Checks,
    posed: Posed,
    x_theta: np.ndarray,
    tally: Tally,
    solve: Callable[[Posed, Any], FitRun],
) -> tuple[FitRun, bool | None, Tally]:
    """One fit from θ ``x_theta``, and the doctor's check at its estimate (where the
    strategy checks there)."""
    n_extra = 0 if posed.extra0 is None else int(posed.extra0.shape[0])
    if checks.num_samples <= checks.p + n_extra:
        raise ValueError(
            f"shooting = {posed.problem.window}: the recordings hold {checks.num_samples} "
            f"observed samples for {checks.p} parameters and {n_extra} start-state entries: "
            "use longer windows"
        )
    run = solve(posed, x_theta)
    if not strategy.checks_estimate:
        return run, None, tally
    trusted, tally = checks.exact_trusted(posed.problem, run.x, tally)
    return run, trusted, tally
