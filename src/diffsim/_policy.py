r"""Closed-loop control: a policy called every step of a rollout, and the objective the
estimators smooth with noise on every step's action — the policy setting of Suh et al.

A policy is a pure function ``π(obs, θ) -> u``. A :class:`PolicyObjective` rolls it out
from initial states drawn by a sampler, with noise ``w_h`` added to each step's action:

.. math:: u_h = π(o(x_h), θ) + w_h, \quad x_{h+1} = f(x_h, p, u_h), \quad
          V(x_1, w, θ) = \sum_{h=1}^{H} c(x_h, u_h) + c_T(x_{H+1}),

and the estimators of :mod:`diffsim.estimators` given a ``PolicyObjective`` as the loss
estimate the gradient of :math:`F(θ) = \mathbb E_{x_1} \mathbb E_w V(x_1, w, θ)`,
:math:`w_h \sim N(0, σ^2 I)` (σ in the action's units): the first-order one by autodiff
through the closed loop with the noise held fixed, the zeroth-order one by the paper's
score function :math:`\frac1{σ^2}(V(x_1, w, θ) − V(x_1, 0, θ)) \sum_h D_θπ(o(x_h), θ)^⊤ w_h`
along the noisy trajectory, with the zero-noise rollout from the same initial state as
baseline (``ESTIMATORS.md``, Def. 2.3–2.4 of the paper).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from ._checks import INT32_MAX, check_int, check_key, is_concrete
from ._rollout import rollout


def _flat_obs(state: Any) -> Array:
    """The default observation: every leaf of the state, raveled into one vector."""
    return ravel_pytree(state)[0]


class PolicyObjective(eqx.Module):
    r"""The expected cost of a policy over a distribution of initial states, with noise on
    every step's action (see the module docstring); pass it as the loss to any estimator
    or to :func:`diffsim.optimize`.

    Called as a loss, ``objective(θ)`` is the noise-free cost averaged over ``num_states``
    initial states drawn once from ``key`` (fixed: a deterministic function of θ, what
    :class:`~diffsim.estimators.Exact`, finite differences and ``optimize``'s loss history
    see). The smoothing estimators (FoBG, ZoBG, AoBG, auto) draw fresh initial states from
    the key they are called with — one per sample, so each ``optimize`` iteration sees its
    own — and perturb the actions, not θ.

    Args:
        step: ``step(state, params, u) -> state``, the system (any diffsim step, a
            ``WithContact`` step, an ``MjxStep`` or a Brax step taking per-step inputs).
        policy: ``policy(obs, theta) -> u``, a pure function (:func:`linear_policy`,
            :func:`mlp_policy`, or your own); ``u`` has one fixed shape, the action's.
        initial_state: ``initial_state(key) -> state``, the sampler of x₁ (a constant
            state: ``lambda key: s0``).
        cost: ``cost(state, u) -> scalar``, the cost of one step (state x_h, action u_h).
        horizon: H, the number of steps (integer in [1, 2³¹ − 1]).
        terminal_cost: ``terminal_cost(state) -> scalar`` on x_{H+1} (default: none).
        params: the step's fixed parameters (default ``None``).
        observe: ``observe(state) -> obs`` (default: every leaf of the state, raveled).
        action_scale: the size of a typical action (a number or an array like ``u``,
            > 0; default 1): a :class:`~diffsim.estimators.Relative` σ is that fraction of it.
        num_states: how many initial states ``objective(θ)`` averages over (>= 1).
        key: the PRNG key of those initial states.
        truncate: gradients flow through at most this many steps of the dynamics (the
            state's derivative is cut every ``truncate`` steps, as Brax APG and SHAC
            truncate long horizons; default ``None``: the whole horizon). Values are
            unchanged; only first-order gradients see it.
        checkpoint: rematerialisation schedule for reverse mode (:func:`diffsim.rollout`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.policies import PolicyObjective, linear_policy
        >>> step = lambda x, p, u: x + 0.1 * u  # a point steered by its velocity
        >>> obj = PolicyObjective(step, linear_policy, lambda key: jnp.ones(1),
        ...                       cost=lambda x, u: jnp.sum(x**2), horizon=10)
        >>> theta = jnp.zeros((1, 1))  # u = θ x: the point stays where it is
        >>> float(obj(theta)), obj.check(theta)  # the cost, and the action's shape
        (10.0, (1,))
        >>> round(float(obj(-jnp.ones((1, 1)))), 4)  # u = −x: x² shrinks by 0.81 a step
        4.6233
    """

    step: Callable[..., Any] = eqx.field(static=True)
    policy: Callable[..., Any] = eqx.field(static=True)
    initial_state: Callable[..., Any] = eqx.field(static=True)
    cost: Callable[..., Any] = eqx.field(static=True)
    horizon: int = eqx.field(static=True)
    terminal_cost: Callable[..., Any] | None = eqx.field(static=True, default=None)
    params: Any = None
    observe: Callable[..., Any] | None = eqx.field(static=True, default=None)
    action_scale: Any = 1.0
    num_states: int = eqx.field(static=True, default=16)
    key: Array = eqx.field(default_factory=lambda: jax.random.PRNGKey(0))
    truncate: int | None = eqx.field(static=True, default=None)
    checkpoint: Any = eqx.field(static=True, default=None)

    def __check_init__(self) -> None:
        for name in ("step", "policy", "initial_state", "cost"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name} must be callable, got {getattr(self, name)!r}")
        for name in ("terminal_cost", "observe"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be callable or None, got {value!r}")
        check_int("horizon", self.horizon, minimum=1, maximum=INT32_MAX)
        check_int("num_states", self.num_states, minimum=1, maximum=INT32_MAX)
        if self.truncate is not None:
            check_int("truncate", self.truncate, minimum=1, maximum=INT32_MAX)
        check_key("key", self.key)
        scale = (
            np.asarray(self.action_scale)
            if all(is_concrete(a) for a in jax.tree_util.tree_leaves(self.action_scale))
            else None
        )
        if scale is not None and (
            scale.dtype.kind not in "iuf" or not np.all(np.isfinite(scale)) or np.any(scale <= 0)
        ):
            raise ValueError(f"action_scale must be finite and > 0, got {self.action_scale!r}")

    # -- shapes -------------------------------------------------------------------------

    def _obs(self, state: Any) -> Any:
        return _flat_obs(state) if self.observe is None else self.observe(state)

    def check(self, theta: Any) -> tuple[int, ...]:
        """Check the structure of everything at θ without running it (``jax.eval_shape``):
        the sampler returns a state the step maps to the same structure, the policy one
        array of floats, the costs scalars. Returns the action's shape.

        Raises:
            TypeError: naming ``initial_state``, ``policy``, ``step``, ``cost`` or
                ``terminal_cost`` and what it returned.
        """
        try:
            s = jax.eval_shape(self.initial_state, self.key)
        except Exception as err:
            raise TypeError(f"initial_state(key) failed: {err}") from None
        try:
            u = jax.eval_shape(lambda st, th: self.policy(self._obs(st), th), s, theta)
        except Exception as err:
            raise TypeError(f"policy(obs, theta) failed at an initial state: {err}") from None
        if not isinstance(u, jax.ShapeDtypeStruct) or not jnp.issubdtype(u.dtype, jnp.floating):
            raise TypeError(
                "policy must return one array of floats (the action u), got "
                f"{jax.tree_util.tree_map(lambda a: (a.shape, str(a.dtype)), u)}"
            )
        try:
            s1 = jax.eval_shape(self.step, s, self.params, u)
        except Exception as err:
            raise TypeError(
                f"step(state, params, u) failed with u of shape {u.shape} (the policy's "
                f"output): {err}"
            ) from None
        same = jax.tree_util.tree_structure(s1) == jax.tree_util.tree_structure(s) and all(
            a.shape == b.shape
            for a, b in zip(jax.tree_util.tree_leaves(s1), jax.tree_util.tree_leaves(s))
        )
        if not same:
            raise TypeError(
                "step must return a state like initial_state(key)'s: got "
                f"{jax.tree_util.tree_map(lambda a: a.shape, s1)}, expected "
                f"{jax.tree_util.tree_map(lambda a: a.shape, s)}"
            )
        c = jax.eval_shape(self.cost, s, u)
        if getattr(c, "shape", None) != ():
            raise TypeError(f"cost(state, u) must return a scalar, got shape {c.shape}")
        if self.terminal_cost is not None:
            c = jax.eval_shape(self.terminal_cost, s)
            if getattr(c, "shape", None) != ():
                raise TypeError(f"terminal_cost(state) must return a scalar, got shape {c.shape}")
        return tuple(u.shape)

    # -- rollouts -----------------------------------------------------------------------

    def trajectory(self, theta: Any, s0: Any, noise: Any = None) -> tuple[Array, Any, Any]:
        """One closed-loop rollout from ``s0`` with per-step action noise ``noise``
        (leading axis H, each row like an action; ``None``: none).

        Returns:
            ``(V, states, observations)``: the cost V (per-step costs plus the terminal
            cost), the states x₁ … x_{H+1} (leading axis H + 1) and the observations the
            policy saw at x₁ … x_H (leading axis H).
        """
        if noise is None:
            u_struct = jax.eval_shape(lambda th: self.policy(self._obs(s0), th), theta)
            noise = jnp.zeros((self.horizon, *u_struct.shape), u_struct.dtype)
        cut = self.truncate

        def closed(carry: Any, th: Any, w: Array) -> Any:
            x, total, t = carry
            u = self.policy(self._obs(x), th) + w
            c = jnp.asarray(self.cost(x, u), total.dtype)
            nxt = self.step(x, self.params, u)
            if cut is not None:  # the state's derivative cut every ``truncate`` steps
                at_cut = (t + 1) % cut == 0
                nxt = jax.tree_util.tree_map(
                    lambda a: jnp.where(at_cut, jax.lax.stop_gradient(a), a), nxt
                )
            return nxt, total + c, t + 1

        dt = jnp.result_type(*jax.tree_util.tree_leaves(s0), float)
        init = (s0, jnp.zeros((), dt), jnp.zeros((), jnp.int32))
        traj = rollout(closed, init, theta, self.horizon, inputs=noise, checkpoint=self.checkpoint)
        states, totals, _ = traj
        last = jax.tree_util.tree_map(lambda a: a[-1], states)
        value = totals[-1]
        if self.terminal_cost is not None:
            value = value + jnp.asarray(self.terminal_cost(last), dt)
        before = jax.tree_util.tree_map(lambda a: a[:-1], states)
        obs = jax.vmap(self._obs)(before)
        return value, states, obs

    def value(self, theta: Any, s0: Any, noise: Any = None) -> Array:
        """V(x₁ = ``s0``, w = ``noise``, θ): the cost of one closed-loop rollout."""
        return self.trajectory(theta, s0, noise)[0]

    def sample_states(self, key: Array, num: int) -> Any:
        """``num`` initial states from ``initial_state`` (leading axis ``num``)."""
        return jax.vmap(self.initial_state)(jax.random.split(key, num))

    def __call__(self, theta: Any) -> Array:
        """The noise-free cost averaged over the ``num_states`` initial states of ``key``."""
        states = self.sample_states(self.key, self.num_states)
        return jnp.mean(jax.vmap(lambda s: self.value(theta, s))(states))

    def score(self, theta: Any, obs: Any, weights: Array) -> Any:
        r""":math:`\sum_h D_θπ(o_h, θ)^⊤ \mathrm{weights}_h` (like θ), the policy's
        Jacobian along the observations ``obs`` (leading axis H) applied to per-step
        weights — one reverse pass through the policy alone, never through the dynamics."""
        _, vjp = jax.vjp(lambda th: jax.vmap(lambda o: self.policy(o, th))(obs), theta)
        return vjp(weights.astype(jnp.result_type(weights)))[0]


def rollouts_per_call(loss: Any) -> int:
    """The rollouts one call of ``loss`` simulates: a :class:`PolicyObjective`'s
    ``num_states`` (``objective(θ)`` averages that many episodes), 1 for any other loss.

    Every evaluation count diffsim reports is in rollouts: a sampled estimator's sample is
    one rollout, and a value or gradient of a policy objective on its batch is this many.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.policies import PolicyObjective, linear_policy, rollouts_per_call
        >>> obj = PolicyObjective(lambda x, p, u: x + u, linear_policy, lambda key: jnp.ones(1),
        ...                       cost=lambda x, u: jnp.sum(x**2), horizon=5, num_states=8)
        >>> rollouts_per_call(obj), rollouts_per_call(lambda t: t**2)
        (8, 1)
    """
    return int(loss.num_states) if isinstance(loss, PolicyObjective) else 1


def linear_policy(obs: Array, theta: Array) -> Array:
    """``u = Θ · obs``: the paper's linear feedback policy (Θ of shape ``(m, n)``).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.policies import linear_policy
        >>> linear_policy(jnp.array([1.0, 2.0]), jnp.array([[1.0, 0.5]])).tolist()
        [2.0]
    """
    return jnp.asarray(theta) @ jnp.ravel(obs)


def mlp_policy(
    key: Array, obs_size: int, action_size: int, *, width: int = 32, depth: int = 2,
    scale: float = 1.0,
) -> tuple[Callable[[Array, Any], Array], Any]:  # fmt: skip
    """An Equinox MLP as a policy: ``(policy, theta0)`` with ``theta0`` the MLP's arrays
    (what the estimators perturb and optimize updates) and ``policy(obs, θ)`` the MLP with
    those arrays, its output ``scale · tanh(·)`` (bounded actions).

    Args:
        key: PRNG key of the initial weights.
        obs_size, action_size: input and output sizes (>= 1).
        width, depth: hidden width (>= 1) and number of hidden layers (>= 0).
        scale: the largest action magnitude (> 0).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.policies import mlp_policy
        >>> policy, theta0 = mlp_policy(jax.random.PRNGKey(0), 4, 2, width=8)
        >>> u = policy(jnp.ones(4), theta0)
        >>> u.shape, bool(jnp.all(jnp.abs(u) < 1.0))
        ((2,), True)
    """
    check_key("key", key)
    for name, v, low in (("obs_size", obs_size, 1), ("action_size", action_size, 1),
                         ("width", width, 1), ("depth", depth, 0)):  # fmt: skip
        check_int(name, v, minimum=low, maximum=INT32_MAX)
    if not (isinstance(scale, int | float) and np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    mlp = eqx.nn.MLP(obs_size, action_size, width, depth, activation=jnp.tanh, key=key)
    params, static = eqx.partition(mlp, eqx.is_array)

    def policy(obs: Array, theta: Any) -> Array:
        return scale * jnp.tanh(eqx.combine(theta, static)(jnp.ravel(obs)))

    return policy, params
