"""The default :func:`diffsim.optimize`: the doctor's evidence picks *how* to descend.

:class:`Decide` asks the evidence shared by the doctor and :class:`~diffsim.estimators.Auto`
whether the exact gradient can be trusted at θ, then

* **trusted** → L-BFGS with a zoom line search on the loss itself, on the exact gradient,
  until it converges, its line search can decrease the loss no further, or a trial loss is
  NaN or inf;
* **not trusted** (plateau, jump, stiffness) → a short phase of the estimator the evidence
  recommends (zeroth order on a plateau or with stiffness, AoBG's mix at a jump) at the
  evidence's σ, with Adam steps of a few σ;

and checks again when a phase ends without convergence: the L-BFGS phase's line search
failed or stopped where the gradient is exactly zero (a plateau), or a sampling phase has
taken its steps. It stops when L-BFGS converges where the gradient is not exactly zero,
or when the steps or the budget run out. Every decision is kept (:class:`Decision`), and
every evaluation is counted, the checks' included.

A policy (:class:`~diffsim.policies.PolicyObjective`) is a sample-average approximation:
called as a loss it averages one fixed batch of initial states, a deterministic function of
θ that an L-BFGS line search and its curvature pairs can use. The batch stays fixed within
a phase and is drawn afresh at each check after the first (``resample``): a run of several
phases then does not fit one batch, and each check sees states the phase before it did not
train on. The result's loss is the given objective's, on its own batch, at the final θ (one
more evaluation, counted).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._checks import check_int
from ._policy import PolicyObjective, rollouts_per_call
from .estimators import Auto, Exact, GradientEstimate
from .estimators.auto import chosen_estimator, describe_choice
from .estimators.base import STATS, with_stats

CONVERGED = 1e-6
"""An L-BFGS phase that ends on an exactly zero gradient converged if its last non-zero
gradient (largest component) was below this fraction of its first."""

STALLED = 1e-3
"""An L-BFGS phase that stops early (its line search found no decrease) with its last
gradient (largest component) above this fraction of its first stalled: maybe a kink or a
jump the line search met (the friction task's box sliding off), not a minimum; the check
decides (a flag: sample; none: stop)."""


NO_ROOM = "the budget left"
"""How the reason of a stop begins where the budget has no room for another check."""


class Decision(NamedTuple):
    """One decision of :class:`Decide`: at ``step`` (iterations before it) with
    ``evaluations`` spent, it chose ``method`` ("lbfgs", "zeroth", "mixed" or "stop") for
    ``reason`` (in words).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import optimize
        >>> r = optimize(lambda t: (t - 1.0) ** 2, jnp.asarray(0.0), key=jax.random.PRNGKey(0))
        >>> first = r.decisions[0]
        >>> first.step, first.method, first.reason
        (0, 'lbfgs', 'the exact gradient is trusted')
    """

    step: int
    method: str
    reason: str
    evaluations: int


class Decide(eqx.Module):
    """The default method of :func:`diffsim.optimize`: decide from the evidence, descend,
    check again when the descent stalls (see :mod:`diffsim._decide`).

    Args:
        check: the evidence's estimator (default ``Auto(num_samples=8, max_samples=8)``:
            on a 1-parameter loss a check costs about 23 loss and 9 gradient evaluations, on
            a d-parameter one ``1 + 14·min(d, 8) + 8`` and 9).
        phase_steps: steps of a sampling phase before the next check (>= 1).
        lbfgs_steps: the most steps of one L-BFGS phase (>= 1).
        max_phases: the most phases (checks) in one run (>= 1).
        step_in_sigma: a sampling phase's Adam learning rate, in units of the check's
            (largest) σ.
        resample: for a :class:`~diffsim.policies.PolicyObjective`, draw its batch of
            initial states afresh at each check after the first (see the module docstring);
            ``False`` keeps the objective's own batch throughout.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import optimize
        >>> r = optimize(lambda t: jnp.sum((t - 3.0) ** 2), jnp.ones(2),
        ...              key=jax.random.PRNGKey(0))
        >>> [round(v, 6) for v in r.theta.tolist()], [d.method for d in r.decisions]
        ([3.0, 3.0], ['lbfgs', 'stop'])
    """

    check: Auto = eqx.field(default_factory=lambda: Auto(num_samples=8, max_samples=8))
    phase_steps: int = eqx.field(static=True, default=10)
    lbfgs_steps: int = eqx.field(static=True, default=100)
    max_phases: int = eqx.field(static=True, default=16)
    step_in_sigma: float = eqx.field(static=True, default=1.0)
    resample: bool = eqx.field(static=True, default=True)

    def __check_init__(self) -> None:
        for name in ("phase_steps", "lbfgs_steps", "max_phases"):
            check_int(name, getattr(self, name), minimum=1, maximum=100_000)
        if not (isinstance(self.check, Auto)):
            raise TypeError(f"check must be a diffsim.estimators.Auto, got {self.check!r}")
        if not np.isfinite(self.step_in_sigma) or self.step_in_sigma <= 0:
            raise ValueError(f"step_in_sigma must be finite and > 0, got {self.step_in_sigma!r}")
        if not isinstance(self.resample, bool):
            raise TypeError(f"resample must be True or False, got {self.resample!r}")


class Phases(NamedTuple):
    """What :func:`decide_and_descend` ran: each phase's result, the evaluations spent
    and the step reached before it, the decisions, the checks' own evaluations, and the
    final θ (a sampling phase's lowest iterate) with the given loss there, and how the run
    ended (a :data:`~diffsim.RESULTS` name)."""

    results: list[Any]
    spent_before: list[int]
    step_before: list[int]
    decisions: tuple[Decision, ...]
    check_loss_evals: int
    check_grad_evals: int
    theta: Any
    loss: Any
    status: str = "completed"


def smallest_budget(method: Decide, dim: int, per_call: int = 1) -> int:
    """The fewest evaluations one decision and one step can take: a check without widening
    (its loss and gradient at θ, the finite-difference ladder, N samples of each family)
    and one gradient (``per_call`` rollouts: a policy objective's batch)."""
    cost = dataclasses.replace(method.check, max_widen=0, max_samples=method.check.num_samples)
    loss_evals, grad_evals, _ = cost.cost(dim)
    return loss_evals + grad_evals + per_call


def _check_cost(check: Auto, dim: int) -> int:
    cost = check.cost(dim)
    return cost.loss_evaluations + cost.grad_evaluations


def _cut(check: Auto, widen: int, samples: int) -> Auto:
    return dataclasses.replace(check, max_widen=widen, max_samples=samples)


def fitting_check(check: Auto, dim: int, left: int) -> Auto | None:
    """``check``, or where its worst case (every widening, every sample) would spend more
    than the ``left`` evaluations of a budget, the same check allowed fewer widenings and
    then no growth of its samples; ``None`` where even that does not fit. A check never
    overruns the budget.

    Example:
        >>> from diffsim import Decide
        >>> from diffsim._decide import fitting_check
        >>> check = Decide().check  # 8 samples, σ widened at most twice
        >>> fitting_check(check, 1, 1000) is check, fitting_check(check, 1, 40).max_widen
        (True, 0)
        >>> fitting_check(check, 1, 10) is None
        True
    """
    if _check_cost(check, dim) <= left:
        return check
    for widen in range(check.widen_rounds, -1, -1):
        for samples in sorted({check.max_samples, check.num_samples}, reverse=True):
            cut = _cut(check, widen, samples)
            if _check_cost(cut, dim) <= left:
                return cut
    return None


class _Offset:
    """A progress callback shifted by the steps of earlier phases (one object, so each
    phase's compiled loop is reused)."""

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self.callback, self.offset = callback, 0

    def __call__(self, k: Any) -> None:
        self.callback(self.offset + int(k))


def _plain(estimate: GradientEstimate) -> GradientEstimate:
    """An estimate with every stat (NaN, or −1 / 0, where its phase's estimator computed
    none), so phases' histories concatenate."""
    return with_stats(estimate, STATS)


def concat_histories(histories: list[Any], offsets: list[int], ran: list[int]) -> Any:
    """The phases' histories as one, evaluations made cumulative over the whole run."""
    parts = []
    for h, spent, n in zip(histories, offsets, ran):
        h = dataclasses.replace(h, estimate=_plain(h.estimate), evaluations=h.evaluations + spent)
        parts.append(jax.tree_util.tree_map(lambda a, n=n: a[:n], h))  # the steps that ran
    return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)


def _ran(result: Any) -> int:
    return int(result.steps_run)


# One optimizer object per configuration: ``optimize``'s compiled loop takes the optimizer
# as a static argument (its functions are compared by identity), so a fresh ``optax.lbfgs()``
# in every phase compiled the loop again in every phase and every call (6 s each).
_lbfgs = functools.cache(optax.lbfgs)
_adam = functools.lru_cache(maxsize=256)(optax.adam)


def decide_and_descend(run: Callable[..., Any], method: Decide, loss: Any, theta0: Any,
                       key: Any, steps: int, budget: int | None,
                       callback: Callable[[Any], None] | None
                       ) -> Phases:  # fmt: skip
    """Run ``method`` with ``run`` (``optimize``'s compiled loop) from θ₀. ``run(loss,
    theta, estimator, optimizer, steps, key, cap, callback)`` returns an
    :class:`~diffsim.OptimizeResult`."""
    cap = np.iinfo(np.int32).max if budget is None else int(budget)
    progress = None if callback is None else _Offset(callback)
    theta, value, k, spent = theta0, None, 0, 0
    decisions: list[Decision] = []
    phases: list[Any] = []
    offsets: list[int] = []
    starts: list[int] = []
    check_evals = [0, 0]
    last, idle = None, 0
    stopped = None  # the RESULTS name of a stop decision
    given = loss
    dim = sum(int(np.size(v)) for v in jax.tree_util.tree_leaves(theta0))
    least = _check_cost(_cut(method.check, 0, method.check.num_samples), dim)
    for _ in range(method.max_phases):
        if k >= steps or spent >= cap:
            break
        check = fitting_check(method.check, dim, cap - spent)
        if check is None:  # a check could overrun the budget: none runs
            decisions.append(Decision(k, "stop", f"{NO_ROOM} ({cap - spent} evaluations) is "
                                      f"less than one check's ({least})", spent))  # fmt: skip
            stopped = "budget"
            break
        key, k_check, k_run = jax.random.split(key, 3)
        if phases and method.resample and isinstance(given, PolicyObjective):
            batch = jax.random.fold_in(k_check, 1)  # the other draws stay as they were
            loss = eqx.tree_at(lambda o: o.key, given, batch)  # arrays: no recompile
        r = check(loss, theta, k_check)
        spent += int(r.loss_evaluations) + int(r.grad_evaluations)
        check_evals = [check_evals[0] + int(r.loss_evaluations),
                       check_evals[1] + int(r.grad_evaluations)]  # fmt: skip
        if spent >= cap:  # the check spent what was left: no phase can run
            decisions.append(Decision(k, "stop", "the budget was spent by the check", spent))
            stopped = "budget"
            break
        code = int(r.choice)
        forced = code == 0 and last == "plateau"
        if forced:  # trusted, yet L-BFGS met an exact zero there: sample
            code = 2
        elif code == 0 and last in ("lbfgs", "stalled"):  # stopped where it is trusted
            why = "converged" if last == "lbfgs" else "stalled (no decrease along it)"
            decisions.append(Decision(k, "stop", f"the exact gradient is trusted where "
                                      f"L-BFGS {why}", spent))  # fmt: skip
            stopped = "converged" if last == "lbfgs" else "stalled"
            break
        if code == 4:  # the evidence saw NaN or inf: no method can descend from here
            decisions.append(Decision(k, "stop", describe_choice(r), spent))
            stopped = "non_finite"
            break
        if code == 0:
            estimator, optimizer, n, last = Exact(), _lbfgs(), method.lbfgs_steps, "lbfgs"
            reason = "the exact gradient is trusted"
        else:
            sigma = jnp.max(jnp.asarray(r.sigma_used))
            estimator = chosen_estimator(code, r.sigma_used, method.check.num_samples)
            optimizer = _adam(float(method.step_in_sigma * sigma))
            n = method.phase_steps
            reason = _PLATEAU if forced else describe_choice(r)
            last = "mixed" if code == 1 else "zeroth"
        decisions.append(Decision(k, last, reason, spent))
        if progress is not None:
            progress.offset = k
        result = run(loss, theta, estimator, optimizer, min(n, steps - k), k_run,
                     cap - spent, progress)  # fmt: skip
        phases.append(result)
        offsets.append(spent)
        starts.append(k)
        spent += int(result.evaluations)
        k += _ran(result)
        theta, value = result.theta, result.loss
        if last != "lbfgs":  # a sampling phase goes on from its lowest loss (read: counted)
            theta, value, read, lowered = _lowest(result)
            read *= rollouts_per_call(loss)  # each read is a call of the loss: its rollouts
            spent += read
            check_evals[0] += read
            idle = 0 if lowered else idle + 1
            if idle == 2:
                decisions.append(Decision(k, "stop", "no progress: two sampling phases in a "
                                          "row found no lower loss", spent))  # fmt: skip
                stopped = "stalled"
                break
            continue
        ended = _lbfgs_end(result)
        if ended == "converged":
            decisions.append(Decision(k, "stop", "L-BFGS converged", spent))
            stopped = "converged"
            break
        last = {"steps": None, "flat": "plateau", "stalled": "stalled"}.get(ended, last)
    final = value
    if loss is not given and phases:  # the last phase's loss was on another batch
        final = given(theta)
        check_evals[0] += rollouts_per_call(given)
    if stopped is None:  # no stop decision: the steps, the budget or the phases ran out
        stopped = "completed" if k >= steps else "budget" if spent >= cap else "max_steps"
    return Phases(phases, offsets, starts, tuple(decisions), check_evals[0], check_evals[1],
                  theta, final, stopped)  # fmt: skip


_PLATEAU = (
    "the check finds no flag, but L-BFGS stopped where the exact gradient is exactly zero "
    "without converging: a plateau the check's samples did not show; zeroth order at the "
    "check's σ"
)
"""Why a sampling phase follows a check that trusts the gradient."""


def _lowest(result: Any) -> tuple[Any, Any, int, bool]:
    """A sampling phase's iterate of lowest finite loss (its history's iterates and its
    final θ; on ties the latest, so a phase that moves along a plateau goes on from where
    it got to), that loss, the loss evaluations the reading took (the iterates after the
    first), and whether the phase lowered the loss below its start."""
    n = _ran(result)
    losses = np.append(np.asarray(result.history.loss[:n]), float(result.loss))
    losses = np.where(np.isfinite(losses), losses, np.inf)
    best = len(losses) - 1 - int(np.argmin(losses[::-1]))
    lowered = bool(losses[best] < losses[0])
    if best == n or not np.isfinite(losses[best]):
        return result.theta, result.loss, n, lowered
    theta = jax.tree_util.tree_map(lambda a: a[best], result.history.theta)
    return theta, result.history.loss[best], n, lowered


def _lbfgs_end(result: Any) -> str:
    """How an L-BFGS phase ended: "rejected" (a trial loss NaN or inf), "flat" (the
    gradient was exactly zero from its start), "plateau" (it stopped where the gradient is
    exactly zero after descending), "steps" (it ran all its steps), "stalled" (it stopped
    early with the gradient above :data:`STALLED` of its first) or "converged"."""
    n = _ran(result)
    if int(result.rejected_at) >= 0:
        return "rejected"
    flat = jnp.concatenate(
        [jnp.reshape(leaf[:n], (n, -1)) for leaf in jax.tree_util.tree_leaves(
            result.history.estimate.estimate)], axis=1)  # fmt: skip
    norms = np.asarray(jnp.max(jnp.abs(flat), axis=1)) if n else np.zeros(0)
    if n == 0 or norms[-1] == 0:
        # an exact zero reached by converging (the gradient shrinking to rounding on the
        # way, as at a minimum) is a minimum; one reached at once after steps with a
        # real slope is a plateau the descent stepped onto
        moving = norms[norms > 0]
        if moving.size == 0:  # the gradient was exactly zero all along: it never descended
            return "flat"
        if moving[-1] > CONVERGED * moving[0]:
            return "plateau"
    if n == result.history.loss.shape[0]:
        return "steps"
    return "stalled" if norms[-1] > STALLED * norms[0] else "converged"
