"""How :func:`diffsim.optimize` takes one step: the descent methods behind its loop.

A descent method turns the loss at θ_k into θ_{k+1} and says what that cost. Three kinds:

* :class:`EstimatorDescent` — any gradient estimator and a first-order Optax optimizer
  (Adam, SGD, ...): one estimate, one update. Works with every estimator, stochastic ones
  included.
* :class:`LineSearchDescent` — an Optax optimizer whose ``update`` needs the loss's value,
  gradient and the loss itself (``value``, ``grad``, ``value_fn``): ``optax.lbfgs`` and
  anything built on ``scale_by_zoom_linesearch`` / ``scale_by_backtracking_linesearch``.
  The gradient is the exact one (autodiff), the line search evaluates the loss itself, and
  every evaluation it spends is counted from the line search's own state.
* :class:`OptimistixDescent` — an Optimistix minimiser (``optx.BFGS``, ``optx.NonlinearCG``,
  ...) stepped by hand (``init``/``step``/``terminate``), one value-and-gradient evaluation
  per step, stopping when the minimiser's own tolerances are met.

Counting: a *loss evaluation* is one rollout for the value alone, a *gradient evaluation*
one value-and-gradient (the unit of :class:`~diffsim.estimators.Exact`); a call of a
:class:`~diffsim.policies.PolicyObjective` on its batch counts once per episode
(:func:`~diffsim.policies.rollouts_per_call`). Line-search and
minimiser steps stop spending once converged: later steps are skipped, as a budget skips
them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from ._policy import rollouts_per_call
from .estimators import Estimator, GradientEstimate
from .estimators.base import make_result


class DescentStep(NamedTuple):
    """One step's outcome: the next iterate and what it cost.

    Attributes:
        theta: θ_{k+1}.
        state: the method's state after the step.
        estimate: the gradient used at θ_k (a :class:`GradientEstimate`).
        loss_evals: value-only loss evaluations spent by the step (int32).
        grad_evals: value-and-gradient evaluations spent by the step (int32).
        done: the method has converged (or can make no further progress): later steps are
            skipped and spend nothing.
        rejected: the step was refused because the loss it reached was NaN or inf; θ is
            held (and ``done`` is set).
        value: L(θ_k) where the step evaluated it anyway (a line search, a minimiser),
            which the history then reads instead of evaluating it again; ``None`` where
            it did not (an estimator's step).
    """

    theta: Any
    state: Any
    estimate: GradientEstimate
    loss_evals: Array
    grad_evals: Array
    done: Array
    rejected: Array
    value: Any = None


class Descent(eqx.Module):
    """A way of descending: ``init`` its state at θ₀, then ``step`` from θ_k.

    ``deterministic`` methods use the loss's exact gradient and its value (a line search,
    a quasi-Newton model) and refuse a stochastic estimator.
    """

    deterministic: ClassVar[bool] = False

    @abc.abstractmethod
    def init(self, loss: Any, estimator: Estimator, theta: Any) -> Any:
        """The method's state at θ₀ (the estimator's own state included, if it has one)."""

    @abc.abstractmethod
    def step(self, loss: Any, estimator: Estimator, theta: Any, state: Any, key: Array
             ) -> DescentStep:  # fmt: skip
        """One step from θ (its gradient, the update and the evaluations spent)."""


def _int(v: Any) -> Array:
    return jnp.asarray(v, jnp.int32)


def _exact_estimate(grad: Any, grad_evals: Any) -> GradientEstimate:
    """The exact gradient as a :class:`GradientEstimate` (zero standard error)."""
    flat, unravel = ravel_pytree(grad)
    return make_result(unravel, flat, jnp.zeros_like(flat), loss_evaluations=0,
                       grad_evaluations=grad_evals)  # fmt: skip


class EstimatorDescent(Descent):
    """An estimator's gradient and a first-order Optax update (Adam, SGD, schedules).

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim._descent import EstimatorDescent
        >>> from diffsim.estimators import Exact
        >>> d = EstimatorDescent(optax.sgd(0.25))
        >>> loss = lambda t: (t - 2.0) ** 2
        >>> state = d.init(loss, Exact(), jnp.asarray(0.0))
        >>> out = d.step(loss, Exact(), jnp.asarray(0.0), state, jax.random.PRNGKey(0))
        >>> float(out.theta), int(out.grad_evals)
        (1.0, 1)
    """

    optimizer: optax.GradientTransformation

    def init(self, loss: Any, estimator: Estimator, theta: Any) -> Any:
        return self.optimizer.init(theta), estimator.init(theta)

    def step(self, loss, estimator, theta, state, key):
        opt_state, est_state = state
        # the estimator's own state: auto's decision, reused for ``decide_every`` steps
        r, est_state = estimator.update(loss, theta, key, est_state)
        updates, opt_state = self.optimizer.update(r.estimate, opt_state, theta)
        new = optax.apply_updates(theta, updates)
        state = opt_state, est_state
        false = jnp.zeros((), bool)
        return DescentStep(new, state, r, _int(r.loss_evaluations), _int(r.grad_evaluations),
                           false, false)  # fmt: skip


def _valued_in(loss: Callable[..., Any], dtype: Any) -> Callable[..., Any]:
    def cast(theta):
        return jnp.asarray(loss(theta), dtype)

    return cast


class LineSearchDescent(Descent):
    """An Optax optimizer with a line search (``optax.lbfgs()``, ...), on the exact gradient.

    The value and gradient at θ_k come from the line search's last trial when its state
    keeps them (``optax.value_and_grad_from_state``: no evaluation), else from one
    value-and-gradient evaluation; the line search's trials are counted from its state's
    ``num_linesearch_steps`` (each a value-and-gradient evaluation, or a value alone for a
    backtracking search that does not store gradients).

    Converged (``done``) when the gradient is exactly zero, the step leaves θ unchanged, or
    the loss's decrease falls below ``ftol`` relative to its size; a step whose loss is NaN
    or inf is rejected and θ held.

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim._descent import LineSearchDescent
        >>> from diffsim.estimators import Exact
        >>> d = LineSearchDescent(optax.lbfgs())
        >>> loss = lambda t: jnp.sum((t - 2.0) ** 2)
        >>> theta = jnp.zeros(2)
        >>> out = d.step(loss, Exact(), theta, d.init(loss, Exact(), theta),
        ...              jax.random.PRNGKey(0))
        >>> # L-BFGS's first step has length 1 along −∇L; one evaluation at θ₀, one trial
        >>> [round(v, 6) for v in out.theta.tolist()], int(out.grad_evals)
        ([0.707107, 0.707107], 2)
    """

    optimizer: optax.GradientTransformationExtraArgs
    ftol: float = 0.0
    deterministic: ClassVar[bool] = True

    def init(self, loss, estimator, theta):
        state = self.optimizer.init(theta)
        # some Optax versions start a counter in another dtype than ``update`` returns it
        # (0.2.4: num_linesearch_steps int64 weak, then int32): start in update's dtypes, so
        # the state's type is the same on every step of the loop
        # … and the value in the loss's own dtype (a float32 θ may give a float64 loss)
        value = jnp.zeros((), jax.eval_shape(loss, theta).dtype)
        after = jax.eval_shape(
            lambda s: self.optimizer.update(theta, s, theta, value=value, grad=theta,
                                            value_fn=loss)[1], state)  # fmt: skip
        return jax.tree_util.tree_map(lambda a, b: jnp.asarray(a, b.dtype), state, after)

    def step(self, loss, estimator, theta, state, key):
        stored = optax.tree_utils.tree_get(state, "value")
        have_grad = optax.tree_utils.tree_get(state, "grad") is not None
        # the loss's value in the dtype the state keeps it in (a float32 loss with x64 on:
        # Optax's state holds a float64 value, and its line search's branches must agree)
        f = loss if stored is None else _valued_in(loss, stored.dtype)
        if stored is not None and have_grad:
            value, grad = optax.value_and_grad_from_state(f)(theta, state=state)
            first = _int(~jnp.isfinite(stored))  # the state held no value yet (θ₀)
        else:
            value, grad = jax.value_and_grad(f)(theta)
            first = _int(1)
        updates, new_state = self.optimizer.update(
            grad, state, theta, value=value, grad=grad, value_fn=f
        )
        trials = _int(optax.tree_utils.tree_get(new_state, "num_linesearch_steps", 0))
        new = optax.apply_updates(theta, updates)
        new_value = optax.tree_utils.tree_get(new_state, "value")
        flat_new, _ = ravel_pytree(new)
        rejected = ~jnp.isfinite(value) | ~jnp.all(jnp.isfinite(flat_new))
        hold = rejected
        if new_value is not None:  # the loss the line search reached: finite and no higher
            rejected = rejected | ~jnp.isfinite(new_value)
            hold = rejected | (new_value > value)
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(hold, a, b), theta, new)
        new_state = jax.tree_util.tree_map(lambda a, b: jnp.where(hold, a, b), state, new_state)
        flat_g, _ = ravel_pytree(grad)
        flat_u, _ = ravel_pytree(updates)
        still = jnp.all(flat_g == 0) | jnp.all(flat_u == 0)
        if new_value is not None:
            drop = value - new_value
            still = still | (drop <= self.ftol * jnp.maximum(jnp.abs(value), 1.0))
        per_call = rollouts_per_call(loss)  # counted in rollouts: a policy's batch is many
        value_only = jnp.zeros((), jnp.int32) if have_grad else trials * per_call
        grad_evals = (first + (trials if have_grad else 0)) * per_call
        return DescentStep(new, new_state, _exact_estimate(grad, grad_evals), value_only,
                           grad_evals, still | hold, rejected, value)  # fmt: skip


class OptimistixDescent(Descent):
    """An Optimistix minimiser (``optx.BFGS(rtol, atol)``, ``optx.NonlinearCG``, ...),
    stepped by hand: one value-and-gradient evaluation per step, ``done`` when the
    minimiser's ``terminate`` says so (its ``rtol``/``atol``).

    Example:
        >>> import jax, jax.numpy as jnp, optimistix as optx
        >>> from diffsim._descent import OptimistixDescent
        >>> from diffsim.estimators import Exact
        >>> d = OptimistixDescent(optx.BFGS(rtol=1e-8, atol=1e-8))
        >>> loss = lambda t: jnp.sum((t - 2.0) ** 2)
        >>> theta, state = jnp.zeros(2), d.init(loss, Exact(), jnp.zeros(2))
        >>> for k in range(6):
        ...     out = d.step(loss, Exact(), theta, state, jax.random.PRNGKey(0))
        ...     theta, state = out.theta, out.state
        >>> [round(v, 6) for v in theta.tolist()]
        [2.0, 2.0]
    """

    solver: Any
    deterministic: ClassVar[bool] = True

    @staticmethod
    def _fn(loss):
        return lambda y, args: (loss(y), None)

    def init(self, loss, estimator, theta):
        leaves = jax.tree_util.tree_leaves(theta)
        f_struct = jax.ShapeDtypeStruct((), jnp.result_type(*leaves))
        return self.solver.init(self._fn(loss), theta, None, {}, f_struct, None, frozenset())

    def step(self, loss, estimator, theta, state, key):
        fn = self._fn(loss)
        done, _ = self.solver.terminate(fn, theta, None, {}, state, frozenset())

        def advance(theta, state):
            new, new_state, _ = self.solver.step(fn, theta, None, {}, state, frozenset())
            return new, new_state

        new, new_state = jax.lax.cond(done, lambda t, s: (t, s), advance, theta, state)
        per_call = rollouts_per_call(loss)
        spent = _int(~done) * per_call  # the minimiser's own evaluation
        kept = _evaluation_at_theta(state, new_state)
        if kept is not None:  # L(θ_k) and ∇L(θ_k) as the minimiser evaluated them
            value, grad = kept
        else:  # a minimiser that keeps no gradient (Nelder–Mead): one more, counted
            value, grad = jax.value_and_grad(loss)(theta)
            spent = spent + per_call
        bad = ~jnp.isfinite(value)
        return DescentStep(new, new_state, _exact_estimate(grad, spent), _int(0), spent,
                           done | bad, bad, value)  # fmt: skip


def _evaluation_at_theta(state: Any, new_state: Any) -> tuple[Any, Any] | None:
    """(L(θ_k), ∇L(θ_k)) from an Optimistix minimiser's state (``f_info``: the value and
    gradient at the iterate it returned last, θ_k; on its first step, which evaluates θ_0
    itself, the state it returns), or ``None`` for a minimiser that keeps no gradient."""
    import optimistix as optx

    kinds = (optx.FunctionInfo.EvalGrad, optx.FunctionInfo.EvalGradHessian,
             optx.FunctionInfo.EvalGradHessianInv)  # fmt: skip
    before, after = getattr(state, "f_info", None), getattr(new_state, "f_info", None)
    first = getattr(state, "first_step", None)
    if not (isinstance(before, kinds) and isinstance(after, kinds) and first is not None):
        return None
    value = jnp.where(first, after.f, before.f)
    grad = jax.tree_util.tree_map(lambda b, a: jnp.where(first, a, b), before.grad, after.grad)
    return value, grad


def needs_value_fn(optimizer: Any, theta: Any) -> bool:
    """Whether an Optax optimizer's ``update`` needs ``value``, ``grad`` and ``value_fn``
    (a line search): its update is traced (``jax.eval_shape``, nothing runs) without them.

    Example:
        >>> import jax.numpy as jnp, optax
        >>> from diffsim._descent import needs_value_fn
        >>> needs_value_fn(optax.lbfgs(), jnp.zeros(2)), needs_value_fn(optax.adam(0.1),
        ...                                                             jnp.zeros(2))
        (True, False)
    """
    if not isinstance(optimizer, optax.GradientTransformationExtraArgs):
        return False
    try:
        jax.eval_shape(lambda t: optimizer.update(t, optimizer.init(t), t), theta)
    except TypeError as err:
        return "value_fn" in str(err) or "value" in str(err)
    return False


def is_minimiser(optimizer: Any) -> bool:
    """An Optimistix minimiser (imported only when Optimistix is installed)."""
    try:
        import optimistix as optx
    except ImportError:  # pragma: no cover - optimistix is a core dependency
        return False
    return isinstance(optimizer, optx.AbstractMinimiser)


def descent_for(optimizer: Any, estimator: Estimator, theta: Any) -> Descent:
    """The :class:`Descent` an ``optimizer`` asks for, refusing one that needs the loss's
    value with an estimator that cannot give it.

    Raises:
        TypeError: a line-search optimizer or an Optimistix minimiser with a randomized
            (stochastic) estimator — it has no value function a line search can trust.
    """
    if is_minimiser(optimizer):
        method = OptimistixDescent(optimizer)
    elif needs_value_fn(optimizer, theta):
        method = LineSearchDescent(optimizer)
    else:
        return EstimatorDescent(optimizer)
    if estimator.randomized or estimator.smoothing:
        name = type(optimizer).__name__ if is_minimiser(optimizer) else "this Optax optimizer"
        raise TypeError(
            f"optimizer: {name} needs the loss's value, its gradient and the loss itself "
            "(value, grad, value_fn) for a line search, which a stochastic estimator "
            f"({type(estimator).__name__}) cannot give; use estimator=Exact() (or None) with "
            "it, or a first-order optimizer (optax.adam(...)) with the estimator"
        )
    return method
