r"""Tennis (Suh et al. 2022, §5.2): a paddle returns a ball, steered by a linear policy.

The state is seven numbers, the ball's position and velocity and the paddle's pose,
``(b_x, b_y, v_x, v_y, p_x, p_y, φ)``; the action is the paddle's velocity
``(ṗ_x, ṗ_y, φ̇)`` (it is kinematic: it moves as commanded, whatever it hits). The ball flies
without gravity, its velocity damped by 0.999 per step. The paddle is a box of
half-width 0.8 m and half-height 0.05 m; the ball (radius
0.15 m) bounces off its top face with restitution 0.8, at the
**time of impact** within the step: with n the face's normal and g(τ) = n·(b − p) − (hh + r)
+ τ n·(v − ṗ) the gap along the step, a ball above the face (g(0) >= 0) that reaches it
within the step (g(h) < 0) hits at τ* = g(0)/(−ġ) when its centre is within the half-width
there; its velocity relative to the paddle's contact point loses its normal part ×(1 + e),
and it flies the rest of the step, h − τ*, with the new velocity. The time of impact makes
the bounce a smooth function of θ; whether the ball meets the paddle at all is not — the
cliff at the paddle's edge that first-order gradients cannot see.

The task: a linear policy ``u = Θ x`` (Θ ∈ R^{3×7}) over H = 200 steps of
h = 0.05 s, from Gaussian initial states (:func:`initial_state`), minimising the
terminal cost ``(x − x*)ᵀ Q (x − x*)`` toward the ball at (0, 2.5) at rest
(Q = 100·diag(1, 1, 0.1, 0.1, 0, 0, 0)) plus ``1e-3 |u|²`` per step. A ball is
**returned** when it ends within 0.5 m of the target.

Examples:
    >>> import jax.numpy as jnp
    >>> from diffsim.systems import tennis
    >>> x = jnp.array([0.0, 2.0, 0.0, -1.0, 0.0, 0.0, 0.0])  # the ball above a level paddle
    >>> [round(float(v), 4) for v in tennis.tennis_step(x, None, jnp.zeros(3))[:4]]
    [0.0, 1.95, 0.0, -0.999]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_int, check_key
from .._policy import PolicyObjective, linear_policy

_H = 0.05
_HORIZON = 200
_RESTITUTION = 0.8
_DAMPING = 0.999
_HALF_WIDTH = 0.8
_HALF_HEIGHT = 0.05
_RADIUS = 0.15
_TARGET = (0.0, 2.5)
_Q_DIAG = (100.0, 100.0, 10.0, 10.0, 0.0, 0.0, 0.0)
_R = 1e-3
_SIGMA = 0.01
_RETURN_RADIUS = 0.5

_BALL_MEAN = (0.0, 2.0, 0.0, -1.0)
"""The initial ball's mean position and velocity."""
_BALL_SD = (0.3, 0.1, 0.1, 0.1)
"""Standard deviations of the initial ball's position and velocity (independent)."""


def tennis_step(x: Array, params: object, u: Array) -> Array:
    """One step of h = 0.05 s (see the module docstring): the paddle moves by ``h·u``, the
    ball flies, bouncing off the paddle's top face at the time of impact."""
    del params
    b, v, p, phi = x[0:2], x[2:4], x[4:6], x[6]
    vp, omega = u[0:2], u[2]
    n = jnp.stack([-jnp.sin(phi), jnp.cos(phi)])
    t = jnp.stack([jnp.cos(phi), jnp.sin(phi)])
    rel = b - p
    g0 = n @ rel - (_HALF_HEIGHT + _RADIUS)
    rate = n @ (v - vp)
    g1 = g0 + _H * rate
    safe = jnp.where(rate < 0, rate, -1.0)
    tau = jnp.clip(g0 / -safe, 0.0, _H)
    s = t @ (rel + tau * (v - vp))  # where along the face the ball meets it
    hit = (g0 >= 0) & (g1 < 0) & (jnp.abs(s) <= _HALF_WIDTH)
    arm = s * t + _HALF_HEIGHT * n  # contact point relative to the paddle's centre
    v_contact = vp + omega * jnp.stack([-arm[1], arm[0]])
    vn = n @ (v - v_contact)
    bounced = v - (1 + _RESTITUTION) * jnp.minimum(vn, 0.0) * n
    b_new = jnp.where(hit, b + tau * v + (_H - tau) * bounced, b + _H * v)
    v_new = _DAMPING * jnp.where(hit, bounced, v)
    return jnp.concatenate([b_new, v_new, p + _H * vp, (phi + _H * omega)[None]])


def initial_state(key: Array) -> Array:
    """A Gaussian initial state: the ball around (0, 2, 0, −1) (sd (0.3, 0.1, 0.1, 0.1)),
    the paddle at rest at the origin, level."""
    ball = jnp.asarray(_BALL_MEAN) + jnp.asarray(_BALL_SD) * jax.random.normal(key, (4,))
    return jnp.concatenate([ball, jnp.zeros(3, ball.dtype)])


def stage_cost(x: Array, u: Array) -> Array:
    """``1e-3 |u|²``: the effort of one step."""
    return _R * jnp.sum(u**2)


def terminal_cost(x: Array) -> Array:
    """``(x − x*)ᵀ Q (x − x*)`` toward the ball at (0, 2.5), at rest."""
    goal = jnp.zeros(7, x.dtype).at[0:2].set(jnp.asarray(_TARGET, x.dtype))
    return jnp.sum(jnp.asarray(_Q_DIAG, x.dtype) * (x - goal) ** 2)


def objective(*, num_states: int = 64, key: Array | None = None, horizon: int = _HORIZON,
              truncate: int | None = None) -> PolicyObjective:  # fmt: skip
    """The tennis task as a :class:`~diffsim.policies.PolicyObjective` of Θ (shape ``(3, 7)``):
    ``objective(Θ)`` is the noise-free cost over ``num_states`` initial states of ``key``.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import tennis
        >>> obj = tennis.objective(num_states=8)
        >>> theta0 = jnp.zeros((3, 7))  # the paddle stays where it is
        >>> obj.check(theta0), bool(obj(theta0) > 100.0)  # the balls fly off too fast
        ((3,), True)
    """
    check_int("horizon", horizon, minimum=1)
    if key is None:
        key = jax.random.PRNGKey(0)
    check_key("key", key)
    return PolicyObjective(
        tennis_step, linear_policy, initial_state, stage_cost, horizon,
        terminal_cost=terminal_cost, num_states=num_states, key=key, truncate=truncate,
    )  # fmt: skip


def returned(objective: PolicyObjective, theta: Array, key: Array, num: int = 200) -> Array:
    """The fraction of ``num`` initial states of ``key`` (held out: not the training keys)
    whose ball the noise-free policy Θ returns to within 0.5 m of the
    target."""
    states = objective.sample_states(key, num)

    def one(s):
        _, traj, _ = objective.trajectory(theta, s)
        end = traj[-1, 0:2]
        return jnp.linalg.norm(end - jnp.asarray(_TARGET, end.dtype)) <= _RETURN_RADIUS

    return jnp.mean(jax.vmap(one)(states))
