r"""Control tasks on MuJoCo models people know, through the MJX adapter.

Gymnasium's MuJoCo models (the ``zoo`` extra), loaded unchanged by :func:`mjx.load
<diffsim.engines.mjx.load>` (their ``RK4`` integrator included), as losses of a decision θ
that every estimator and :func:`diffsim.optimize` take:

``reacher``
    the two-link arm of ``reacher.xml`` (h = 0.01 s) moves its fingertip to a target; the
    cost of a step is gymnasium's, ``|fingertip − target| + |u|²`` (its reward, negated).
    :func:`reacher_open_loop` is a trajectory optimisation: the controls of every step
    (H × 2, H = :data:`REACHER_HORIZON`) for one target (:data:`REACHER_TARGET`), from
    rest. The elbow's joint limit (±3 rad) is MuJoCo's constraint solver at work; the
    controls saturate at ±1 (MuJoCo clamps them: no gradient beyond).
``pendulum``
    ``inverted_pendulum.xml`` (h = 0.02 s, a motor on the cart): a linear policy
    Θ ∈ R^{1×5} over (x, φ, ẋ, φ̇, 1) balances the pole from tilts drawn uniformly in
    ±:data:`PENDULUM_TILT` rad (:func:`pendulum_objective`); cost φ² + 0.1 x² + 10⁻³ u² per
    step over H = :data:`PENDULUM_HORIZON` steps. A pole that falls comes to rest on its
    hinge's limit at ±90° — a contact with the limit, and a plateau of the cost, where the
    exact gradient of a fallen pole says nothing about catching it. :func:`balanced` scores
    a policy.

Examples:
    >>> from diffsim.engines import control
    >>> control.REACHER_HORIZON, control.REACHER_TARGET, control.PENDULUM_HORIZON
    (100, (0.1, 0.1), 100)
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_int, check_key
from .._policy import PolicyObjective, linear_policy
from .._rollout import rollout
from . import load_engine

ZOO = (
    "ant",
    "half_cheetah",
    "hopper",
    "humanoid",
    "inverted_double_pendulum",
    "inverted_pendulum",
    "pusher",
    "reacher",
    "swimmer",
    "walker2d",
)
"""The gymnasium MuJoCo models :func:`gymnasium_model` finds."""

REACHER_HORIZON = 100
"""Steps of a reacher rollout (1 s at h = 0.01 s)."""
REACHER_TARGET = (0.1, 0.1)
"""The open-loop reacher's target, m."""
PENDULUM_HORIZON = 100
"""Steps of a pendulum rollout (2 s at h = 0.02 s)."""
PENDULUM_TILT = 0.3
"""Initial tilts are drawn uniformly in ± this, rad."""
BALANCED = 0.1
"""A pole counts as balanced when it ends within this tilt, rad."""
HELD_OUT = 123
"""Seed of the held-out initial states a policy is scored on."""


def gymnasium_model(name: str) -> str:
    """The path of gymnasium's MuJoCo model ``name`` (one of :data:`ZOO`).

    Raises:
        ValueError: ``name`` not in :data:`ZOO`.
        ModuleNotFoundError: gymnasium is not installed (the message says how).

    Example:
        >>> from diffsim.engines.control import gymnasium_model
        >>> gymnasium_model("reacher").endswith("reacher.xml")
        True
    """
    if name not in ZOO:
        raise ValueError(f"name must be one of {', '.join(ZOO)}, got {name!r}")
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "gymnasium's MuJoCo models need gymnasium: pip install '.[zoo]' (from a clone)"
        )
    root = pathlib.Path(next(iter(spec.submodule_search_locations)))
    return str(root / "envs" / "mujoco" / "assets" / f"{name}.xml")


@functools.cache
def _load(name: str) -> Any:
    # the mjx extra, imported only when a task is built (ImportError: how to install it)
    return load_engine("mjx").load(gymnasium_model(name))


# -- reacher ---------------------------------------------------------------------------


def _reacher_points(step: Any, state: Any) -> tuple[Array, Array]:
    """The fingertip's and the target's (x, y), by one pass of MJX's forward kinematics
    (every step's cost reads both)."""
    xpos = load_engine("mjx").mjx.kinematics(step.model, step.data(state)).xpos
    return xpos[step.body_id("fingertip"), :2], xpos[step.body_id("target"), :2]


def _reacher_cost(step: Any, state: Any, u: Array) -> Array:
    tip, target = _reacher_points(step, state)
    return jnp.linalg.norm(tip - target) + jnp.sum(u**2)


def reacher_state(step: Any, target: Any, qpos: Any = None, qvel: Any = None) -> Any:
    """A reacher state with the target at ``target`` (x, y), the arm at ``qpos`` (2,) and
    ``qvel`` (2,) (default: the model's initial pose, at rest)."""
    q0 = step.initial_state().qpos
    q = q0.at[2:4].set(jnp.asarray(target, q0.dtype))
    if qpos is not None:
        q = q.at[0:2].set(jnp.asarray(qpos, q0.dtype))
    v = jnp.zeros_like(q0[: step.nv])
    if qvel is not None:
        v = v.at[0:2].set(jnp.asarray(qvel, v.dtype))
    return step.initial_state(q, v)


def reacher_open_loop(horizon: int = REACHER_HORIZON, target: Any = REACHER_TARGET) -> Any:
    """The open-loop reacher: ``loss(u)`` of the controls ``u`` (horizon × 2), the summed
    cost of one rollout from rest toward ``target``. Needs the ``mjx`` and ``zoo`` extras.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.engines import control
        >>> loss = control.reacher_open_loop(horizon=5)
        >>> round(float(loss(jnp.zeros((5, 2)))), 3)  # 5 steps with the tip 0.149 m off target
        0.743
    """
    horizon = check_int("horizon", horizon, minimum=1)
    step = _load("reacher")
    s0 = reacher_state(step, target)
    params = step.theta("gravity")

    def loss(u: Array) -> Array:
        def body(carry: Any, p: Any, uk: Array) -> Any:
            x, total = carry
            return step(x, p, uk), total + _reacher_cost(step, x, uk)

        init = (s0, jnp.zeros((), s0.qpos.dtype))
        _, total = rollout(body, init, params, horizon, inputs=u, trajectory=False)
        return total

    return loss


# -- pendulum --------------------------------------------------------------------------


def _pendulum_observe(state: Any) -> Array:
    one = jnp.ones((1,), state.qpos.dtype)
    return jnp.concatenate([state.qpos, state.qvel, one])


def _pendulum_cost(state: Any, u: Array) -> Array:
    x, phi = state.qpos[0], state.qpos[1]
    return phi**2 + 0.1 * x**2 + 1e-3 * jnp.sum(u**2)


def _pendulum_initial(step: Any, key: Array) -> Any:
    k_x, k_phi = jax.random.split(key)
    dt = step.initial_state().qpos.dtype
    x = jax.random.uniform(k_x, (), dt, -0.1, 0.1)
    phi = jax.random.uniform(k_phi, (), dt, -PENDULUM_TILT, PENDULUM_TILT)
    return step.initial_state(jnp.stack([x, phi]), jnp.zeros((2,), dt))


def pendulum_objective(*, num_states: int = 16, key: Array | None = None,
                       horizon: int = PENDULUM_HORIZON) -> PolicyObjective:  # fmt: skip
    """Balancing gymnasium's inverted pendulum as a :class:`~diffsim.policies.PolicyObjective` of a
    linear policy Θ (1 × 5) from random tilts (see the module docstring).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.engines import control
        >>> obj = control.pendulum_objective(num_states=2, horizon=3)
        >>> obj.check(jnp.zeros((1, 5)))  # the action: the cart's motor
        (1,)
    """
    horizon = check_int("horizon", horizon, minimum=1)
    key = jax.random.PRNGKey(0) if key is None else key
    check_key("key", key)
    step = _load("inverted_pendulum")
    return PolicyObjective(
        step,
        linear_policy,
        functools.partial(_pendulum_initial, step),
        _pendulum_cost,
        horizon,
        params=step.theta("gravity"),
        observe=_pendulum_observe,
        num_states=num_states,
        key=key,
    )


def balanced(objective: PolicyObjective, theta: Array, key: Array | None = None,
             num: int = 100) -> Array:  # fmt: skip
    """The fraction of ``num`` held-out initial tilts (of ``key``, default
    :data:`HELD_OUT`) whose pole ends within :data:`BALANCED` rad of upright under the
    noise-free policy Θ."""
    key = jax.random.PRNGKey(HELD_OUT) if key is None else key
    states = objective.sample_states(key, num)

    def one(s: Any) -> Array:
        _, traj, _ = objective.trajectory(theta, s)
        return jnp.abs(traj.qpos[-1, 1]) <= BALANCED

    return jnp.mean(jax.vmap(one)(states))


__all__ = [
    "ZOO",
    "balanced",
    "gymnasium_model",
    "pendulum_objective",
    "reacher_open_loop",
    "reacher_state",
]
