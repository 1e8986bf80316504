r"""Brax environments as diffsim steps (``pip install 'diffsim-jax[brax]'``).

:func:`wrap` takes a ``brax.envs.Env`` (or the name of a stock environment, e.g.
``"inverted_pendulum"``) and returns a :class:`BraxStep`, a pure step
``step(state, theta[, u]) -> state`` over Brax's own ``env.step``:

* with a ``policy`` (the analytic-policy-gradient setting): the action is
  ``policy(theta, state.obs)``, plus the per-step input ``u`` when one is given (the
  exploration noise of Suh et al.'s policy setting); θ is the policy's parameters;
* without one (open loop): the action is ``u``; θ is not used by Brax (pass
  :attr:`BraxStep.no_params`), and the action sequence is what is differentiated — with
  :func:`diffsim.estimators.rollout_input_loss` for instance.

The state is Brax's ``envs.State`` (``pipeline_state``, ``obs``, ``reward``, ``done``,
``metrics``, ``info``), which :func:`diffsim.rollout` carries through one ``lax.scan``; so
:func:`diffsim.rollout` (with ``checkpoint``), every estimator, :func:`diffsim.optimize`
and :func:`diffsim.diagnose` run on it unchanged. :meth:`BraxStep.loss` builds the usual
losses (negative return, or any cost of the trajectory).

Use a differentiable backend: Brax's ``"generalized"``, ``"positional"`` and ``"spring"``
pipelines are plain JAX; its ``"mjx"`` backend runs ``mjx.step``, whose constraint solver
is a ``while_loop`` that reverse mode cannot differentiate — :func:`wrap` refuses it for
that reason and points to :mod:`diffsim.engines.mjx`, which differentiates MJX's solve.

Pinned versions (the extra ``diffsim-jax[brax]``): ``brax==0.14.2`` (Python >= 3.11) with
``mujoco==3.17.0`` and ``jax`` 0.10.2.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

# Brax imports MuJoCo MJX, whose optional Warp backend prints "Failed to import warp: ..."
# when Warp is absent (not needed here): keep the import quiet
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    from brax import envs

from .._checks import check_int
from .._rollout import Checkpoint, rollout
from .._step import AbstractStep

Policy = Callable[[Any, Array], Array]
"""``policy(theta, obs) -> action``."""


def linear_policy(theta: dict[str, Array], obs: Array) -> Array:
    r"""The linear-tanh policy :math:`a = \tanh(W o + b)` (actions in [−1, 1], as Brax's
    stock environments expect); θ = ``{"W": (action_size, obs_size), "b": (action_size,)}``.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.engines import brax
        >>> from diffsim.engines.brax import Policy, linear_policy
        >>> theta = {"W": jnp.array([[1.0, 0.0, 0.0, 0.0]]), "b": jnp.array([0.5])}
        >>> obs = jnp.array([0.5, 0.0, 0.0, 0.0])
        >>> [round(float(a), 4) for a in linear_policy(theta, obs)]  # tanh(0.5 + 0.5)
        [0.7616]
        >>> bang_bang: Policy = lambda theta, obs: jnp.sign(theta["W"] @ obs)  # any policy
        >>> brax.wrap("inverted_pendulum", policy=bang_bang)
        BraxStep(InvertedPendulum, policy=yes)
    """
    return jnp.tanh(theta["W"] @ obs + theta["b"])


class BraxStep(AbstractStep):
    """A Brax environment as a diffsim step (see the module docstring). Build it with
    :func:`wrap`.

    Attributes:
        env: the ``brax.envs.Env``.
        policy: ``policy(theta, obs) -> action`` or ``None`` (open loop).
        h: the environment's control time step ``env.dt``, s.
        action_size, observation_size: sizes of the action and the observation.
        no_params: a θ for open-loop rollouts (Brax does not read it).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.engines import brax
        >>> step = brax.wrap("inverted_pendulum")  # with the linear-tanh policy
        >>> step, round(step.h, 3)
        (BraxStep(InvertedPendulum, policy=yes), 0.04)
        >>> theta = step.init_policy()
        >>> {k: v.shape for k, v in theta.items()}
        {'W': (1, 4), 'b': (1,)}
        >>> angle_cost = lambda traj: jnp.sum(traj.obs[:, 1] ** 2)  # the pole's angle, squared
        >>> loss = step.loss(5, jax.random.PRNGKey(0), cost=angle_cost)  # 5 steps, loss(θ)
        >>> grad = jax.grad(loss)(theta)
        >>> grad["W"].shape, bool(jnp.all(jnp.isfinite(grad["W"]))), bool(jnp.any(grad["b"] != 0))
        ((1, 4), True, True)
    """

    env: Any = eqx.field(static=True)
    policy: Policy | None
    h: Any = eqx.field(static=True)  # a float, s: the type of AbstractStep's h
    action_size: int = eqx.field(static=True)
    observation_size: int = eqx.field(static=True)

    def __init__(self, env: Any, policy: Policy | None) -> None:
        self.env = env
        self.policy = policy
        self.h = float(env.dt)
        self.action_size = int(env.action_size)
        self.observation_size = int(env.observation_size)

    @property
    def no_params(self) -> Array:
        """A θ for open-loop rollouts (Brax does not read it)."""
        return jnp.zeros(())

    def __repr__(self) -> str:
        name = type(self.env).__name__
        return f"BraxStep({name}, policy={'none' if self.policy is None else 'yes'})"

    def reset(self, key: Array) -> Any:
        """The environment's initial state for PRNG ``key`` (``env.reset``)."""
        return self.env.reset(key)

    def action(self, state: Any, theta: Any, u: Any = None) -> Array:
        """The action the step applies: ``policy(theta, obs) [+ u]``, or ``u``."""
        if self.policy is None:
            if u is None:
                raise ValueError(
                    "an open-loop BraxStep needs the action as u: pass inputs=(T, action_size) "
                    "to the rollout, or wrap the environment with a policy"
                )
            return jnp.asarray(u)
        a = self.policy(theta, state.obs)
        return a if u is None else a + u

    def __call__(self, state: Any, theta: Any, u: Any = None) -> Any:
        """``env.step(state, action(state, theta, u))``."""
        a = self.action(state, theta, u)
        if jnp.shape(a) != (self.action_size,):
            raise ValueError(
                f"the action must have shape (action_size,) = ({self.action_size},), "
                f"got {jnp.shape(a)}"
            )
        return self.env.step(state, a)

    def init_policy(self) -> dict[str, Array]:
        """A zero θ for :func:`linear_policy`: ``{"W": zeros, "b": zeros}``."""
        return {
            "W": jnp.zeros((self.action_size, self.observation_size)),
            "b": jnp.zeros((self.action_size,)),
        }

    def loss(
        self,
        num_steps: int,
        key: Array,
        *,
        cost: Callable[[Any], Array] | None = None,
        checkpoint: Checkpoint = None,
    ) -> Callable[..., Array]:
        """A loss of θ (closed loop) or of the actions (open loop, shape (T, action_size)).

        ``cost(trajectory) -> scalar`` of the trajectory of states (leading axis T + 1,
        index t is s_t); default: the negative return :math:`-\\sum_t r_t`.

        Returns:
            With a policy, ``loss(theta)``; without one, ``loss(actions)``.
        """
        num_steps = check_int("num_steps", num_steps, minimum=1)
        if cost is not None and not callable(cost):
            raise TypeError(f"cost must be callable cost(trajectory) -> scalar, got {cost!r}")
        cost = cost if cost is not None else (lambda traj: -jnp.sum(traj.reward[1:]))
        s0 = self.reset(key)

        if self.policy is None:

            def open_loop(actions: Array) -> Array:
                traj = rollout(
                    self, s0, self.no_params, num_steps, inputs=actions, checkpoint=checkpoint
                )
                return cost(traj)

            return open_loop

        def closed_loop(theta: Any) -> Array:
            return cost(rollout(self, s0, theta, num_steps, checkpoint=checkpoint))

        return closed_loop


def wrap(env: Any, *, policy: Policy | None = linear_policy, **env_kwargs: Any) -> BraxStep:
    """Make a Brax environment a diffsim step.

    Args:
        env: a ``brax.envs.Env`` or the name of a stock environment
            (``brax.envs.get_environment(env, **env_kwargs)``).
        policy: ``policy(theta, obs) -> action`` (default :func:`linear_policy`), or
            ``None`` for open-loop actions given as the step's input ``u``.
        **env_kwargs: passed to ``brax.envs.get_environment`` with a name (e.g.
            ``backend="positional"``).

    Raises:
        ValueError: an unknown environment name, or the ``"mjx"`` backend (its solver's
            ``while_loop`` cannot be reverse-differentiated; use :mod:`diffsim.engines.mjx`).
        TypeError: ``env`` is neither a name nor an environment; ``policy`` not callable.

    Example:
        >>> from diffsim.engines import brax
        >>> step = brax.wrap("inverted_pendulum")
        >>> (step.action_size, step.observation_size)
        (1, 4)
    """
    if isinstance(env, str):
        registered = sorted(envs._envs)  # pyright: ignore[reportAttributeAccessIssue]
        if env not in registered:
            raise ValueError(
                f"unknown Brax environment {env!r}; stock environments: {', '.join(registered)}"
            )
        env = envs.get_environment(env, **env_kwargs)
    elif env_kwargs:
        raise TypeError("env_kwargs are for building a stock environment by name")
    if not (callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None))):
        raise TypeError(f"env must be a brax.envs.Env or a stock environment name, got {env!r}")
    if getattr(env, "backend", None) == "mjx":
        raise ValueError(
            "Brax's 'mjx' backend runs mjx.step, whose constraint solver is a while_loop that "
            "reverse mode cannot differentiate: use backend='generalized' (or 'positional', "
            "'spring'), or load the MJCF with diffsim.engines.mjx, which differentiates MJX's "
            "solve"
        )
    if policy is not None and not callable(policy):
        raise TypeError(f"policy must be callable policy(theta, obs) -> action, got {policy!r}")
    return BraxStep(env, policy)


__all__ = ["BraxStep", "Policy", "linear_policy", "wrap"]
