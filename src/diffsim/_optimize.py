"""Gradient descent with any gradient estimator: an Optax optimizer inside one ``lax.scan``."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, PyTree

from ._checks import (
    INT32_MAX,
    as_arrays,
    as_used,
    check_int,
    check_key,
    check_positive,
    default_float,
    is_concrete,
)
from ._decide import Decide, concat_histories, decide_and_descend, smallest_budget
from ._descent import EstimatorDescent, descent_for, is_minimiser, needs_value_fn
from ._policy import rollouts_per_call
from ._results import RESULTS, status_of
from ._sigma import scale_sigma
from .estimators import Auto, Estimator, Exact, GradientEstimate
from .estimators._common import check_not_empty, check_sample_memory
from .estimators._noise import noise_for

Schedule = Callable[[Array], Array]
"""A schedule ``step -> value`` (any callable of the step index; Optax schedules work)."""

HISTORY_COPIES = 24
"""Arrays of θ's size :func:`optimize` keeps per step (θ, estimate, SE and the estimate's
scalar fields), for its up-front memory check."""
SIGMA_ANNEAL = 0.05
"""By default σ ends at this fraction of its start (:func:`optimize`'s ``sigma_anneal``)."""
ANNEAL_FRACTION = 0.6
"""σ anneals over this share of the steps, then holds."""
LR_FRACTION = 0.025
"""The default learning rate, as a fraction of θ₀'s largest magnitude (at least 1)."""
LR_END_FRACTION = 0.05
"""The default learning rate ends at this fraction of its start (cosine decay)."""


class OptimizeHistory(eqx.Module):
    """Per-iteration record of :func:`optimize` (leading axis ``steps``).

    Attributes:
        theta: θ_k, the iterate at which step k's gradient was estimated (like θ, stacked).
        loss: L(θ_k) (monitoring only: not counted in ``evaluations``).
        estimate: the :class:`GradientEstimate` of step k (every field stacked).
        evaluations: cumulative simulator evaluations (loss + gradient) after step k.
        loss_evaluations, grad_evaluations: the same, split into value-only loss
            evaluations (line-search trials of a backtracking search, zeroth-order samples)
            and value-and-gradient evaluations.
        sigma: σ_k used by the estimator (its largest component when σ is per component;
            NaN for estimators without σ).
        temperature: the smoothing temperature τ_k passed to the loss (NaN if none).

    Examples:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim import optimize
        >>> from diffsim.estimators import Exact
        >>> r = optimize(lambda t: (t - 3.0) ** 2, jnp.asarray(0.0), Exact(), steps=50,
        ...              key=jax.random.PRNGKey(0), optimizer=optax.sgd(0.1))
        >>> r.history.theta.shape, r.history.loss.shape, float(r.history.loss[0])
        ((50,), (50,), 9.0)
    """

    theta: PyTree[Array]
    loss: Array
    estimate: GradientEstimate
    evaluations: Array
    sigma: Array
    temperature: Array
    loss_evaluations: Array
    grad_evaluations: Array


class OptimizeResult(eqx.Module):
    """What :func:`optimize` returns.

    Attributes:
        theta: the final iterate θ_K (after ``steps`` updates).
        loss: L(θ_K).
        evaluations: total simulator evaluations used, in rollouts: a sampled
            estimator's sample is one, and a value or gradient of a
            :class:`~diffsim.policies.PolicyObjective` on its batch is one per episode
            (:func:`~diffsim.policies.rollouts_per_call`), so runs of every method compare.
        history: the :class:`OptimizeHistory` of all K steps.
        loss_evaluations, grad_evaluations: ``evaluations`` split into value-only loss
            evaluations and value-and-gradient evaluations (line-search trials included).
        steps_run: the steps that spent evaluations: ``steps`` unless a line-search or
            Optimistix method converged (or could decrease the loss no further) or the
            budget ran out first; later steps spend nothing and hold θ.
        rejected_at: the step whose line search reached a NaN or inf loss (θ held there
            and the run stopped), or -1.
        status: how the run ended, a :data:`~diffsim.RESULTS` item: ``completed`` (every
            step ran), ``converged`` (a line search or an Optimistix method converged or
            could lower the loss no further), ``budget``, ``non_finite`` (``rejected_at``),
            and for the default method also ``stalled`` and ``max_steps`` (its phases).
        decisions: what the default method (:class:`~diffsim.Decide`) decided and when:
            :class:`~diffsim.Decision` s (step, method, reason, evaluations so far); empty
            when an estimator or an optimizer was given.
        seconds: the call's wall time (compilation included, the result computed), or
            ``None`` when :func:`optimize` ran inside a ``jit`` or a ``vmap`` (nothing ran
            then to time).

    Examples:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim import optimize
        >>> from diffsim.estimators import Exact
        >>> r = optimize(lambda t: (t - 3.0) ** 2, jnp.asarray(0.0), Exact(), steps=200,
        ...              key=jax.random.PRNGKey(0), optimizer=optax.sgd(0.1))
        >>> round(float(r.theta), 4), round(float(r.loss), 8), int(r.evaluations)
        (3.0, 0.0, 200)
    """

    theta: PyTree[Array]
    loss: Array
    evaluations: Array
    history: OptimizeHistory
    loss_evaluations: Array
    grad_evaluations: Array
    steps_run: Array
    rejected_at: Array
    status: RESULTS
    decisions: tuple = eqx.field(static=True, default=())
    seconds: float | None = None  # a leaf (not static): results of several runs still stack


def _positive_in_loop(name: str, value: Any, dtype: Any) -> Array:
    """A schedule's value at step k, refused inside the loop unless finite and > 0."""
    value = jnp.asarray(value, dtype)
    if value.shape != ():
        raise ValueError(f"{name} must return a scalar for each step k, got shape {value.shape}")
    bad = ~jnp.isfinite(value) | (value <= 0)
    return eqx.error_if(value, bad, f"{name} must give values finite and > 0")


def _history_loss(loss, theta, held, go, reusable, dtype, known):
    """The loss at θ_k for the history (monitoring, not counted as an evaluation) and what
    the next step may reuse. It is read only where it is not known already: ``known``, the
    value a line search or a minimiser evaluated at θ_k anyway (NaN where not), and, once
    steps stop running (converged, stopped or over budget), the held θ's loss read once —
    not at every remaining step of the scan (an L-BFGS phase of 100 steps that converged in
    7 read the loss 93 times more; on a policy, each a batch of episodes). ``reusable``: the
    loss does not change with k (no temperature schedule)."""
    if not reusable:
        return jnp.asarray(loss(theta), dtype), held
    held_value, ok = held
    have = go & jnp.isfinite(known)
    given = jnp.where(have, known, held_value)
    value = jax.lax.cond(ok | have, lambda: given, lambda: jnp.asarray(loss(theta), dtype))
    return value, (value, ~go)


@eqx.filter_jit
def _optimize(
    loss, theta0, estimator, optimizer, steps, key, sigma_schedule, temp_schedule, callback,
    anneal=None, budget=None,
):  # fmt: skip
    theta0 = jax.tree_util.tree_map(jnp.asarray, theta0)
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(theta0), float)
    if optimizer is None:
        descent = EstimatorDescent(default_optimizer(theta0, steps))
    else:
        descent = descent_for(optimizer, estimator, theta0)
    sigma0 = estimator.smoothing_scale()  # None: no σ to record or anneal

    def largest_sigma(sigma: Any, theta: Any) -> Array:
        # recorded as one number: σ, or its largest component (for a policy objective, in
        # the action's units: its noise is on the actions)
        return noise_for(loss, theta, sigma).largest_sigma(theta).astype(dtype)

    def loss_at(temperature: Array) -> Callable[[Any], Array]:
        if temp_schedule is None:
            return loss
        return lambda th: loss(th, temperature)

    none = jnp.asarray(-1, jnp.int32)

    def body(carry, inputs):
        theta, opt_state, counts, plan, stops, held = carry
        k, step_key = inputs
        est, sigma = estimator, jnp.asarray(jnp.nan, dtype)
        if sigma0 is not None:
            sigma = largest_sigma(sigma0, theta)
            if sigma_schedule is not None:
                sigma = _positive_in_loop("sigma_schedule", sigma_schedule(k), dtype)
                est = estimator.with_sigma(sigma)
            elif anneal is not None:
                scaled = scale_sigma(sigma0, anneal(k))
                est = estimator.with_sigma(scaled)
                sigma = largest_sigma(scaled, theta)
        if temp_schedule is None:
            temp = jnp.asarray(jnp.nan, dtype)
        else:
            temp = _positive_in_loop("temperature_schedule", temp_schedule(k), dtype)
        loss_k = loss_at(temp)

        def run(theta, opt_state, counts, plan, stops):
            out = descent.step(loss_k, est, theta, opt_state, step_key)
            # θ and the optimizer's state keep their dtypes (a float32 θ with x64 on gets
            # float64 estimates, and Adam's moments would follow them)
            theta, opt_state = _like(out.theta, theta), _like(out.state, opt_state)
            r = out.estimate
            spent = (out.loss_evals, out.grad_evals)
            at = jnp.asarray(k, jnp.int32)
            stops = (stops[0] | out.done,
                     jnp.where((stops[1] < 0) & out.rejected, at, stops[1]))  # fmt: skip
            ran = jnp.asarray(spent[0] + spent[1] > 0, jnp.int32)
            counts = tuple(
                c + jnp.asarray(n, jnp.int32) for c, n in zip((*counts, 0), (*spent, ran))
            )
            value = jnp.asarray(jnp.nan if out.value is None else out.value, dtype)
            return theta, opt_state, counts, plan, stops, value, r

        def skip(theta, opt_state, counts, plan, stops):
            # the estimate's structure from the step's abstract trace: a NaN estimate,
            # no evaluations, and no choice (-1)
            shape = jax.eval_shape(run, theta, opt_state, counts, plan, stops)[-1]
            r = jax.tree_util.tree_map(_skipped, shape)
            if "choice" in r.stats:
                stats = {**r.stats, "choice": jnp.full_like(r.stats["choice"], -1)}
                r = dataclasses.replace(r, stats=stats)
            return theta, opt_state, counts, plan, stops, jnp.asarray(jnp.nan, dtype), r

        go = ~stops[0]
        if budget is not None:
            go = go & (counts[0] + counts[1] < budget)
        if budget is None and descent.deterministic is False:
            go = jnp.ones((), bool)
            new_theta, opt_state, counts, plan, stops, known, r = run(
                theta, opt_state, counts, plan, stops
            )
        else:
            new_theta, opt_state, counts, plan, stops, known, r = jax.lax.cond(
                go, run, skip, theta, opt_state, counts, plan, stops
            )
        evals = counts[0] + counts[1]
        value, held = _history_loss(loss_k, theta, held, go, temp_schedule is None, dtype,
                                    known)  # fmt: skip
        record = (theta, value, r, evals, sigma, temp, *counts[:2])
        if callback is not None:
            jax.debug.callback(callback, k + 1)
        return (new_theta, opt_state, counts, plan, stops, held), record

    zero = jnp.zeros((), jnp.int32)
    temp0 = jnp.asarray(jnp.nan, dtype) if temp_schedule is None else temp_schedule(0)
    held0 = (jnp.asarray(jnp.nan, dtype), jnp.zeros((), bool))
    init = (theta0, descent.init(loss_at(temp0), estimator, theta0), (zero, zero, zero),
            (), (jnp.zeros((), bool), none), held0)  # fmt: skip
    xs = (jnp.arange(steps), jax.random.split(key, steps))
    (theta, _, counts, _, stops, held), rec = jax.lax.scan(body, init, xs)
    if temp_schedule is None:
        final_temp = jnp.asarray(jnp.nan, dtype)
    else:
        final_temp = _positive_in_loop("temperature_schedule", temp_schedule(steps), dtype)
    history = OptimizeHistory(*rec)
    final, _ = _history_loss(loss_at(final_temp), theta, held, jnp.zeros((), bool),
                             temp_schedule is None, dtype, jnp.asarray(jnp.nan, dtype))  # fmt: skip
    loss_evals, grad_evals, steps_run = counts
    ended = RESULTS.where(steps_run < steps, RESULTS.budget, RESULTS.completed)
    status = RESULTS.where(stops[1] >= 0, RESULTS.non_finite,
                           RESULTS.where(stops[0], RESULTS.converged, ended))  # fmt: skip
    return OptimizeResult(theta, final, loss_evals + grad_evals, history, loss_evals, grad_evals,
                          steps_run, stops[1], status)  # fmt: skip


def optimize(
    loss: Callable[..., Array],
    theta0: PyTree[Array],
    estimator: Estimator | None = None,
    *,
    steps: int = 300,
    key: Array,
    optimizer: optax.GradientTransformation | None = None,
    sigma_schedule: Schedule | None = None,
    sigma_anneal: float | None = SIGMA_ANNEAL,
    temperature_schedule: Schedule | None = None,
    callback: Callable[[Array], None] | None = None,
    budget: int | None = None,
    method: Decide | None = None,
) -> OptimizeResult:
    r"""Minimise ``loss`` from ``theta0`` with gradients from ``estimator``.

    Each of the K = ``steps`` iterations draws a fresh key, estimates the gradient
    :math:`\hat g_k` at θ_k and applies one Optax update,
    :math:`θ_{k+1} = θ_k + \mathrm{update}(\hat g_k)`. The loop is a single ``lax.scan``
    under ``jit``; the result is deterministic given ``key``, and ``optimize`` can itself
    be ``vmap``-ed over starting points.

    Annealing: ``sigma_schedule(k)`` replaces the estimator's σ at step k through
    :meth:`~diffsim.estimators.Estimator.with_sigma` (so it is ignored by estimators without
    σ: exact, finite differences); ``temperature_schedule(k)`` gives a
    smoothing temperature τ_k and the loss is then called as ``loss(θ, τ_k)`` — an
    analytically smoothed model annealed toward the hard one.

    Args:
        loss: scalar ``L(θ)`` (or ``L(θ, τ)`` with a temperature schedule).
        theta0: starting point, a pytree of arrays (finite).
        estimator: any :class:`diffsim.estimators.Estimator`; default
            :class:`~diffsim.estimators.Auto` (the exact gradient where it can be trusted,
            else first- and zeroth-order samples mixed as the evidence says).
        steps: number of iterations K >= 1 (default 300).
        key: PRNG key.
        optimizer: an Optax ``GradientTransformation``; default :func:`default_optimizer`:
            Adam whose learning rate starts at 2.5 % of θ₀'s largest magnitude (at least
            0.025) and is cosine-decayed to 5 % of that over the K steps — the recipe the
            CLI and the page use (0.2 m/s per step from the wall's v₀ = 8).
        sigma_schedule: optional ``k -> σ_k`` (e.g. ``optax.exponential_decay``); it
            replaces ``sigma_anneal``.
        sigma_anneal: by default the estimator's σ (in its own form: a number, a pytree or
            :class:`~diffsim.estimators.Relative`) is multiplied by a cosine factor from 1 to
            ``sigma_anneal`` (0.05) over the first 60 % of the steps and held there: wide
            smoothing first feels a cliff from anywhere on a plateau, sharp smoothing at the
            end puts the minimum back where the unsmoothed loss has it. ``None`` (or 1)
            keeps σ fixed.
        temperature_schedule: optional ``k -> τ_k``.
        callback: optional host function called with the number of completed steps
            after each one (``jax.debug.callback``, unordered — ordered effects are not
            supported on several devices — so calls may arrive out of order; e.g. to
            advance a progress bar).
        budget: optional simulator-evaluation budget (loss + gradient evaluations in
            rollouts, as ``evaluations`` counts them; >= 1): a step runs only while fewer have been
            spent, so the run stops within one step's cost of it (as an evolution strategy
            stops after the generation that reaches its budget) — to compare estimators at
            equal simulator cost. Skipped steps are not run (``lax.cond``): θ is held, and
            their history rows hold it, 0 evaluations and a NaN estimate. The default
            method's checks never overrun it: one whose worst case does not fit what is
            left is cut (fewer widenings of σ) or not run, and the run stops saying so.

    Returns:
        :class:`OptimizeResult` with the final θ, its loss, the evaluations used and the
        per-step :class:`OptimizeHistory`.

    Integer leaves of ``theta0`` are promoted to the default float dtype.

    Raises:
        ValueError / TypeError: ``steps < 1``; ``theta0`` non-finite (in its dtype: ``1e300``
            is refused in float32) or not numbers; ``estimator`` not an :class:`Estimator`;
            ``loss`` not callable; ``key`` not a PRNG key; ``optimizer`` not an Optax
            ``GradientTransformation``; a schedule that is not callable or gives a value
            that is not a finite scalar > 0 (σ_k, τ_k).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import optax
        >>> from diffsim import optimize
        >>> from diffsim.estimators import Exact
        >>> r = optimize(lambda t: (t - 3.0) ** 2, jnp.asarray(0.0), Exact(), steps=200,
        ...              key=jax.random.PRNGKey(0), optimizer=optax.sgd(0.1))
        >>> round(float(r.theta), 4), int(r.evaluations)
        (3.0, 200)
    """
    steps = check_int("steps", steps, minimum=1, maximum=INT32_MAX)
    if not callable(loss):
        raise TypeError(f"loss must be callable, got {loss!r}")
    if optimizer is not None:
        optimizer = _check_optimizer(optimizer)
    default = estimator is None and optimizer is None
    default = default and sigma_schedule is None and temperature_schedule is None
    if method is not None and not default:
        raise ValueError(
            "method is the default optimize's strategy: give it without an estimator, an "
            "optimizer or a schedule (they choose the descent themselves)"
        )
    if method is not None and not isinstance(method, Decide):
        raise TypeError(f"method must be a diffsim.Decide (or None), got {method!r}")
    if estimator is None:  # a line search or a minimiser descends on the exact gradient
        exact = optimizer is not None and (
            is_minimiser(optimizer) or needs_value_fn(optimizer, theta0)
        )
        estimator = Exact() if exact else Auto()
    if not isinstance(estimator, Estimator):
        raise TypeError(f"estimator must be a diffsim.estimators.Estimator, got {estimator!r}")
    # θ as the loop carries it: checked in its dtype, integer leaves promoted to floats
    # (an int32 θ would swallow every update: optimize(loss, 0, ...) never moved)
    theta0 = as_arrays("theta0", theta0, floating=True)
    check_not_empty(theta0)
    # the history keeps θ, the loss and every estimate's fields per step
    check_sample_memory("steps", steps, theta0, copies=HISTORY_COPIES)
    check_key("key", key)
    if optimizer is not None:
        descent_for(optimizer, estimator, theta0)  # refuses a line search with a sampler
    for name, fn in (
        ("sigma_schedule", sigma_schedule),
        ("temperature_schedule", temperature_schedule),
        ("callback", callback),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable (or None), got {fn!r}")
    if sigma_schedule is not None and estimator.smoothing_scale() is not None:
        _check_schedule("sigma_schedule", sigma_schedule, steps, estimator.smoothing_scale())
    anneal = None
    if sigma_anneal is not None:
        check_positive("sigma_anneal", sigma_anneal)
        end = float(sigma_anneal)
        if end > 1:
            raise ValueError(f"sigma_anneal must be in (0, 1], got {end!r}")
        if sigma_schedule is None and end < 1:
            anneal = _Anneal(jnp.asarray(end), max(ANNEAL_FRACTION * steps, 1.0))
    # optimizer None: default_optimizer, built inside the jit (its learning rate follows
    # θ₀, which may be traced; one compiled program for every θ₀)
    if temperature_schedule is not None:
        _check_schedule("temperature_schedule", temperature_schedule, steps + 1, None)
    cap = None  # an array, not a static int: another budget reuses the compiled run
    if budget is not None:
        cap = jnp.asarray(check_int("budget", budget, minimum=1, maximum=INT32_MAX), jnp.int32)
    if default and budget is not None:
        dim = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(theta0))
        least = smallest_budget(method or Decide(), dim, rollouts_per_call(loss))
        if int(budget) < least:
            raise ValueError(
                f"budget must leave room for one decision and one step of the default method "
                f"(at least {least} evaluations for {dim} parameters: the check's samples "
                f"and one gradient), got {budget}"
            )
    start = time.perf_counter()
    if default:
        result = _decided(loss, theta0, method or Decide(), steps, key, callback, budget)
        _check_diverged(result)
        return _timed(result, start)
    try:
        result = _optimize(
            loss,
            theta0,
            estimator,
            optimizer,
            steps,
            key,
            sigma_schedule,
            temperature_schedule,
            callback,
            anneal,
            cap,
        )
        _check_diverged(result)
        return _timed(result, start)
    except eqx.EquinoxRuntimeError as err:  # a schedule value refused inside the loop
        for name in ("sigma_schedule", "temperature_schedule"):
            if name in str(err):
                raise ValueError(
                    f"{name} must give values finite and > 0 (a value that was not stopped "
                    "the optimisation loop)"
                ) from None
        raise


def _decided(loss, theta0, method, steps, key, callback, budget) -> OptimizeResult:
    """The default run: :class:`Decide`'s phases as one result."""

    def run(loss, theta, estimator, optimizer, n, key, cap, progress):
        cap = jnp.asarray(max(min(cap, INT32_MAX), 0), jnp.int32)
        return _optimize(loss, theta, estimator, optimizer, n, key, None, None, progress,
                         None, cap)  # fmt: skip

    ran = decide_and_descend(run, method, loss, theta0, key, steps, budget, callback)
    if not ran.results:  # nothing ran: the check alone
        reason = ran.decisions[-1].reason if ran.decisions else "no steps or budget left"
        raise ValueError(
            f"optimize: the default method took no step from theta0: {reason}; the budget "
            "must leave room for a check and a step"
        )
    last = ran.results[-1]
    loss_evals = ran.check_loss_evals + sum(int(p.loss_evaluations) for p in ran.results)
    grad_evals = ran.check_grad_evals + sum(int(p.grad_evaluations) for p in ran.results)
    rejected = [s + int(p.rejected_at) for s, p in zip(ran.step_before, ran.results)
                if int(p.rejected_at) >= 0]  # fmt: skip
    return OptimizeResult(
        ran.theta,
        jnp.asarray(ran.loss, last.loss.dtype),
        jnp.asarray(loss_evals + grad_evals, jnp.int32),
        concat_histories(
            [p.history for p in ran.results],
            ran.spent_before,
            [int(p.steps_run) for p in ran.results],
        ),
        jnp.asarray(loss_evals, jnp.int32),
        jnp.asarray(grad_evals, jnp.int32),
        jnp.asarray(sum(int(p.steps_run) for p in ran.results), jnp.int32),
        jnp.asarray(rejected[0] if rejected else -1, jnp.int32),
        status_of("non_finite" if rejected else ran.status),
        ran.decisions,
    )


def _like(new: Any, old: Any) -> Any:
    """``new`` with each array leaf cast to the dtype of ``old``'s leaf there."""
    return jax.tree_util.tree_map(
        lambda a, b: jnp.asarray(a, b.dtype) if hasattr(b, "dtype") else a, new, old
    )


def _skipped(leaf: Any) -> Array:
    """A skipped step's estimate field: NaN where it is a float, 0 where an integer."""
    fill = jnp.nan if jnp.issubdtype(leaf.dtype, jnp.inexact) else 0
    return jnp.full(leaf.shape, fill, leaf.dtype)


class _Anneal(eqx.Module):
    """The factor σ_k/σ_0: cosine from 1 to ``end`` over ``span`` steps, then ``end``."""

    end: Array
    span: float = eqx.field(static=True)

    def __call__(self, k: Array) -> Array:
        t = jnp.minimum(jnp.asarray(k) / self.span, 1.0)
        return self.end + 0.5 * (1 - self.end) * (1 + jnp.cos(jnp.pi * t))


def default_optimizer(theta0: Any, steps: int) -> optax.GradientTransformation:
    """:func:`optimize`'s default: Adam with the learning rate cosine-decayed from
    2.5 % of θ₀'s largest magnitude (at least 0.025) to 5 % of that over ``steps``.

    Example:
        >>> import jax.numpy as jnp, optax
        >>> from diffsim.optimization import default_optimizer
        >>> opt = default_optimizer(jnp.asarray(8.0), 300)  # the wall's recipe: lr 0.2
        >>> state = opt.init(jnp.asarray(8.0))
        >>> update, _ = opt.update(jnp.asarray(-3.0), state)
        >>> round(float(update), 4)  # Adam's first step is the learning rate
        0.2
    """
    big = jnp.ones(())
    for v in jax.tree_util.tree_leaves(theta0):
        v = jnp.abs(jnp.asarray(v))
        if v.size:
            big = jnp.maximum(big, jnp.max(v))
    lr = LR_FRACTION * big  # traceable: built inside optimize's jit, θ₀ may be a tracer
    decay = optax.cosine_decay_schedule(1.0, int(steps), alpha=LR_END_FRACTION)
    return optax.adam(lambda k: lr * decay(k))


def _timed(result: OptimizeResult, start: float) -> OptimizeResult:
    """``result`` with its wall time since ``start`` (once its arrays are computed); as it
    is inside a user's ``jit`` or ``vmap``, where nothing has run."""
    if not all(is_concrete(v) for v in jax.tree_util.tree_leaves(result)):
        return result
    jax.block_until_ready(result)
    return dataclasses.replace(result, seconds=time.perf_counter() - start)


def _check_diverged(result: OptimizeResult) -> None:
    """A run whose θ or loss became NaN or inf is an error naming the first bad step, not
    a silent NaN result; a run that ends finite after non-finite losses on the way is
    returned with a warning naming those steps (concrete results only: inside a user's
    ``jit`` nothing to check)."""
    leaves = jax.tree_util.tree_leaves((result.theta, result.loss, result.history.loss))
    if not all(is_concrete(v) for v in leaves):
        return
    hist = result.history
    per_step = jnp.isfinite(hist.loss)
    for v in jax.tree_util.tree_leaves(hist.theta):
        per_step = per_step & jnp.all(jnp.isfinite(v.reshape(v.shape[0], -1)), axis=1)
    bad = np.flatnonzero(~np.asarray(per_step))
    final = jax.tree_util.tree_leaves((result.theta, result.loss))
    if all(bool(jnp.all(jnp.isfinite(v))) for v in final):
        if bad.size:
            steps = ", ".join(str(int(k)) for k in bad[:5]) + (" …" if bad.size > 5 else "")
            warnings.warn(
                f"optimize: the loss or theta was NaN or inf at {bad.size} of "
                f"{hist.loss.shape[0]} steps (steps {steps}) and finite again at the end: "
                "the history holds those values; check the loss's domain there",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    first = int(bad[0]) if bad.size else int(hist.loss.shape[0])
    at = f"at step {first}" if bad.size else "after the last step"
    good = None if first == 0 else jax.tree_util.tree_map(lambda v: v[first - 1], hist.theta)
    kept = (
        f"; the last good theta (step {first - 1}, loss {float(hist.loss[first - 1]):.6g}) is "
        "this error's .theta"
        if good is not None
        else ""
    )
    raise DivergedError(
        f"optimize diverged: theta or the loss became NaN or inf {at} of {hist.loss.shape[0]} "
        "(a learning rate too large for this loss, or a loss that is NaN there); use a "
        f"smaller learning rate (optimizer=optax.adam(...)) or check the loss's domain{kept}",
        good,
    )


class DivergedError(FloatingPointError):
    """:func:`optimize` stopped: θ or the loss became NaN or inf. ``theta`` is the last
    iterate whose θ and loss were finite (``None`` when the first already was not).

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim import DivergedError, optimize
        >>> from diffsim.estimators import Exact
        >>> try:  # log θ from 0.25, steps of 1 × its slope: θ₁ = −3.75, log θ₁ = NaN
        ...     optimize(jnp.log, jnp.asarray(0.25), Exact(), optimizer=optax.sgd(1.0),
        ...              steps=3, key=jax.random.PRNGKey(0))
        ... except DivergedError as err:
        ...     float(err.theta), isinstance(err, FloatingPointError)
        (0.25, True)
    """

    def __init__(self, message: str, theta: Any) -> None:
        super().__init__(message)
        self.theta = theta


def _check_optimizer(optimizer: Any) -> optax.GradientTransformation:
    """The optimizer, or ``TypeError`` naming ``optimizer`` and what is accepted."""
    if optimizer is None:
        return optax.adam(0.05)
    if is_minimiser(optimizer):
        return optimizer
    init = getattr(optimizer, "init", None)
    update = getattr(optimizer, "update", None)
    if isinstance(optimizer, str) or not (callable(init) and callable(update)):
        hint = (
            f" (for the optimizer named {optimizer!r} pass optax.{optimizer}(learning_rate))"
            if isinstance(optimizer, str) and callable(getattr(optax, optimizer, None))
            else ""
        )
        raise TypeError(
            "optimizer must be an optax.GradientTransformation (e.g. optax.adam(0.05), "
            f"optax.sgd(0.1)) or None for optax.adam(0.05), got {optimizer!r}{hint}"
        )
    return optimizer


def _check_schedule(name: str, schedule: Schedule, length: int, like: Any) -> None:
    """Evaluate ``schedule`` at k = 0..length-1 (vectorised, outside the loop) and refuse
    values that are not finite and > 0 in the dtype the loop uses, or not scalars (``like``:
    the estimator's σ, whose shape the values must have). A schedule that cannot be
    evaluated on an array of steps is checked inside the loop instead."""
    dtype = default_float()
    try:
        values = jax.vmap(lambda k: jnp.asarray(schedule(k)))(jnp.arange(length))
    except TypeError as err:
        if "not callable" in str(err) or "positional argument" in str(err):
            raise TypeError(f"{name} must be a callable k -> value: {err}") from None
        return  # not vmappable (Python control flow on k): checked in the loop
    except Exception:
        return
    if values.shape[1:] != ():
        raise ValueError(
            f"{name} must return a scalar for each step k (one value for every component of "
            f"theta), got shape {values.shape[1:]}"
        )
    if not jnp.issubdtype(values.dtype, jnp.number) or jnp.issubdtype(
        values.dtype, jnp.complexfloating
    ):
        raise TypeError(f"{name} must return real numbers, got dtype {values.dtype}")
    arr = np.asarray(values)
    bad = ~np.isfinite(arr) | ~(arr > 0)
    if not bad.any():
        bad = ~(as_used(name, arr, dtype) > 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"{name} must give values finite and > 0, got {float(arr[k])!r} at step k={k}"
        )


def cosine_anneal(
    start: ArrayLike, end: ArrayLike, num_steps: int, fraction: float = 1.0
) -> Schedule:
    r"""A cosine schedule from ``start`` to ``end`` over the first ``fraction`` of
    ``num_steps`` steps, then held at ``end``:
    :math:`s_k = e + \tfrac12 (s - e)(1 + \cos(π \min(k / (f K), 1)))`.

    Use it for σ (smooth widely first, then sharpen to the true minimiser) or for a
    smoothing temperature. ``start`` and ``end`` are arrays of the schedule (an Equinox
    module), not constants of the compiled code: :func:`optimize` with another start reuses
    its compiled run, and ``start`` may be traced (a schedule per θ₀ under ``vmap``).

    Raises:
        ValueError: ``start`` or ``end`` not finite and > 0, ``num_steps < 1``, or
            ``fraction`` outside (0, 1].

    Examples:
        >>> from diffsim.optimization import Schedule, cosine_anneal
        >>> sigma: Schedule = cosine_anneal(0.7, 0.02, 100, fraction=0.5)
        >>> [round(float(sigma(k)), 3) for k in (0, 25, 50, 99)]
        [0.7, 0.36, 0.02, 0.02]
    """
    check_positive("start", start)
    check_positive("end", end)
    num_steps = check_int("num_steps", num_steps, minimum=1)
    if not (0 < fraction <= 1):
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    dtype = jnp.result_type(float)
    return _CosineAnneal(
        jnp.asarray(start, dtype), jnp.asarray(end, dtype), max(fraction * num_steps, 1.0)
    )


class _CosineAnneal(eqx.Module):
    start: Array
    end: Array
    span: float = eqx.field(static=True)  # f K, the steps over which it anneals (>= 1)

    def __call__(self, k: Array) -> Array:
        t = jnp.minimum(jnp.asarray(k) / self.span, 1.0)
        return self.end + 0.5 * (self.start - self.end) * (1 + jnp.cos(jnp.pi * t))
