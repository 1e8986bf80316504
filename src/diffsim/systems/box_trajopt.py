r"""The trajectory optimisations of Suh et al. (2022, §5.2): a pusher moves a box to a goal.

Two bodies on a line, a pusher (coordinate 1) and a box (coordinate 2), each of mass
0.1 kg; the decision is the force :math:`u_t` on the pusher at each of T steps of
h = 0.005 s. The state is ``((x_1, x_2), (v_1, v_2))``; the cost of a trajectory is
quadratic toward a goal state :math:`s^*` on every state :math:`s_0 … s_T` plus the effort:

.. math::
    V(u) = \sum_{t=0}^{T} (s_t - s^*)^T Q (s_t - s^*) + R \sum_{t=0}^{T-1} u_t^2,
    \qquad Q = \mathrm{diag}(0.1, 10, 0.1, 0.1),\; R = 1.

The constants are the paper's (its code, ``hjsuh94/alpha_gradient``: the "curling" and
"friction" examples), and so is the recipe: σ = 0.1 on each u_t, N = 10 samples, plain
gradient descent with a constant step.

**Pushing through a spring** (:func:`spring_push_step`): the two bodies touch when
:math:`x_2 - x_1 < 1` and a penalty spring of stiffness k pushes them apart, built from the
library's parts — ``WithContact(SemiImplicitEuler(drive, h), PenaltySpring(Plane((−1, 1),
1), k="k", mass=MASS))`` — with the velocities damped by a factor c each step
(:math:`v ← c\,v + h\,f/m`, the drive's acceleration :math:`(c-1)v/h + u/m`). From
:math:`s_0 = (0, 1, 0, 0)` (touching) to :math:`s^* = (1, 2, 0, 0)`: soft, k = 10 with
c = 0.998 over T = 400 steps, and stiff, k = 1000 with c = 0.99 over T = 200 (the box flies
off after each push). The paper's finding: the first-order gradient trains faster with the
soft spring, the zeroth-order one with the stiff spring (its FoBG variance grows with k).

**Carrying by friction** (:func:`friction_carry_step`): the box rides on the pusher while
:math:`|x_2 - x_1| < 0.1` m, dragged by a friction force
:math:`-\mathrm{clip}(μ (v_2 - v_1), ±μ v_s)` (μ = 1.8, slip-tolerance velocity
v_s = 0.1 m/s: a steep ramp, then saturated), from :math:`s_0 = 0` to
:math:`s^* = (2, 2, 0, 0)` over T = 400 steps. Once a push is hard enough that the box
slides off, no derivative of the trajectory sees the friction it lost: the first-order
gradient first descends, then degrades, where the zeroth-order one keeps descending.

Examples:
    >>> from diffsim.systems import box_trajopt as bt
    >>> bt.SOFT
    SpringPush(k=10.0, damping=0.998, num_steps=400)
    >>> bt.STIFF
    SpringPush(k=1000.0, damping=0.99, num_steps=200)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_finite, check_float, check_int, check_positive
from .._rollout import rollout
from ..contact import PenaltySpring, Plane, WithContact
from ..integrators import SemiImplicitEuler

_H = 0.005
_MASS = 0.1
_Q_DIAG = (0.1, 10.0, 0.1, 0.1)
_R = 1.0

_PUSH_START = (0.0, 1.0, 0.0, 0.0)
_PUSH_GOAL = (1.0, 2.0, 0.0, 0.0)
_PUSH_FORCE0 = 0.1
"""The starting force on every step (N), as in the paper."""

_FRICTION_MU = 1.8
_FRICTION_SLIP = 0.1
_FRICTION_WIDTH = 0.1
_FRICTION_START = (0.0, 0.0, 0.0, 0.0)
_FRICTION_GOAL = (2.0, 2.0, 0.0, 0.0)
_FRICTION_STEPS = 400


class SpringPush(NamedTuple):
    """One pushing task's constants: stiffness k (N/m), velocity damping factor per step c,
    horizon T.

    Example:
        >>> from diffsim.systems.box_trajopt import STIFF
        >>> STIFF.k, STIFF.num_steps
        (1000.0, 200)
    """

    k: float
    damping: float
    num_steps: int


SOFT = SpringPush(10.0, 0.998, 400)
STIFF = SpringPush(1000.0, 0.99, 200)


@dataclasses.dataclass(frozen=True)
class _DampedDrive:
    """``((c − 1) v_1/h + u/m, (c − 1) v_2/h)``: the force u on the pusher and both
    velocities scaled by c per step. Frozen, so equal constants reuse compiled rollouts."""

    h: float
    mass: float
    damping: float

    def __call__(self, x, v, theta, u):
        decay = (self.damping - 1.0) / self.h
        return jnp.stack([decay * v[0] + u / self.mass, decay * v[1]])


@dataclasses.dataclass(frozen=True)
class _FrictionDrive:
    """The force u on the pusher and the friction between pusher and box while they
    overlap: ``f = −clip(μ (v_2 − v_1), ±μ v_s)`` on the box, −f on the pusher, with
    μ = ``theta["mu"]``."""

    mass: float
    slip: float
    width: float

    def __call__(self, x, v, theta, u):
        mu = theta["mu"]
        on = (jnp.abs(x[1] - x[0]) < self.width).astype(v.dtype)
        cap = mu * self.slip
        f = -on * jnp.clip(mu * (v[1] - v[0]), -cap, cap)
        return jnp.stack([(u - f) / self.mass, f / self.mass])


def spring_push_step(damping: float = SOFT.damping, *, h: float = _H,
                     mass: float = _MASS) -> WithContact:  # fmt: skip
    """The pushing step ``(((x_1, x_2), (v_1, v_2)), {"k": k}, u) -> ...``: semi-implicit
    Euler with a penalty spring of stiffness ``theta["k"]`` between the bodies (rest
    distance 1 m) and velocities damped by ``damping`` per step.

    Args:
        damping: c, the factor each velocity keeps per step, in (0, 1].
        h: time step in seconds (> 0).
        mass: each body's mass in kg (> 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> from diffsim.systems import box_trajopt as bt
        >>> s0 = (jnp.array([0.0, 0.95]), jnp.zeros(2))  # 5 cm of overlap
        >>> (x, v) = rollout(bt.spring_push_step(), s0, {"k": 10.0}, 1, inputs=jnp.zeros(1),
        ...                  trajectory=False)
        >>> [round(float(c), 6) for c in v]  # ±h k p / m = ±0.005 · 10 · 0.05 / 0.1
        [-0.025, 0.025]
    """
    damping = check_float("damping", damping)
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping must be in (0, 1] (the velocity kept per step), got {damping}")
    check_positive("h", h)
    check_positive("mass", mass)
    contact = PenaltySpring(Plane((-1.0, 1.0), 1.0), k="k", mass=mass)
    return WithContact(SemiImplicitEuler(_DampedDrive(float(h), float(mass), float(damping)),
                                         h=h), contact)  # fmt: skip


def friction_carry_step(*, slip: float = _FRICTION_SLIP, h: float = _H,
                        mass: float = _MASS) -> SemiImplicitEuler:  # fmt: skip
    """The friction step ``(((x_1, x_2), (v_1, v_2)), {"mu": μ}, u) -> ...``: semi-implicit
    Euler with the force u on the pusher and the saturated friction between the bodies while
    they overlap (within 0.1 m); μ in N·s/m is the friction's slope.

    Args:
        slip: the slip velocity v_s in m/s where it saturates at μ v_s (> 0).
        h: time step in seconds (> 0).
        mass: each body's mass in kg (> 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> from diffsim.systems import box_trajopt as bt
        >>> s0 = (jnp.zeros(2), jnp.zeros(2))
        >>> (x, v) = rollout(bt.friction_carry_step(), s0, {"mu": 1.8}, 1, inputs=jnp.ones(1),
        ...                  trajectory=False)
        >>> [round(float(c), 6) for c in v]  # no slip yet, so no friction: 1 N · h / m
        [0.05, 0.0]
    """
    for name, value in (("slip", slip), ("h", h), ("mass", mass)):
        check_positive(name, value)
    drive = _FrictionDrive(float(mass), float(slip), _FRICTION_WIDTH)
    return SemiImplicitEuler(drive, h=h)


def _check_forces(u: Array) -> Array:
    u = check_finite("u", u)
    if u.ndim != 1 or u.shape[0] < 1:
        raise ValueError(f"u must have shape (T,) with T >= 1 (one force per step), got {u.shape}")
    return u


def _cost(step, theta, start, goal, u: Array) -> Array:
    dtype = u.dtype
    s0 = (jnp.asarray(start[:2], dtype), jnp.asarray(start[2:], dtype))
    x, v = rollout(step, s0, theta, u.shape[0], inputs=u, include_initial=True)
    err = jnp.concatenate([x, v], axis=-1) - jnp.asarray(goal, dtype)
    return jnp.sum(jnp.asarray(_Q_DIAG, dtype) * err**2) + _R * jnp.sum(u**2)


def spring_push_loss(u: Array, task: SpringPush = SOFT) -> Array:
    r"""The pushing cost :math:`V(u)` (see the module) of the forces ``u`` (shape (T,), N)
    with the constants of ``task`` (:data:`SOFT` or :data:`STIFF`; T is ``u``'s length).

    Example:
        >>> import jax
        >>> from diffsim.systems import box_trajopt as bt
        >>> u = bt.initial_forces(bt.SOFT)
        >>> round(float(bt.spring_push_loss(u, bt.SOFT)), 2)
        2374.89
        >>> g = jax.grad(bt.spring_push_loss)(u, bt.SOFT)
        >>> g.shape, bool(g[0] < 0)  # push harder at first: the box is short of its goal
        ((400,), True)
    """
    u = _check_forces(u)
    check_positive("task.k", task.k)
    theta = {"k": jnp.asarray(task.k, u.dtype)}
    return _cost(spring_push_step(task.damping), theta, _PUSH_START, _PUSH_GOAL, u)


def friction_carry_loss(u: Array, mu: float = _FRICTION_MU) -> Array:
    r"""The friction task's cost :math:`V(u)` of the forces ``u`` (shape (T,), N), from
    rest at the origin toward (2, 2, 0, 0), with friction slope ``mu`` (N·s/m, > 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import box_trajopt as bt
        >>> round(float(bt.friction_carry_loss(jnp.zeros(400))), 1)  # 401 · 40.4
        16200.4
    """
    u = _check_forces(u)
    check_positive("mu", mu)
    theta = {"mu": jnp.asarray(mu, u.dtype)}
    return _cost(friction_carry_step(), theta, _FRICTION_START, _FRICTION_GOAL, u)


def initial_forces(task: SpringPush | None = None) -> Array:
    """The paper's starting point: 0.1 N on every step of a pushing task, zero
    on every step of the friction task (``task=None``).

    Example:
        >>> from diffsim.systems import box_trajopt as bt
        >>> bt.initial_forces(bt.STIFF).shape, float(bt.initial_forces().sum())
        ((200,), 0.0)
    """
    if task is None:
        return jnp.zeros(_FRICTION_STEPS, jnp.result_type(float))
    n = check_int("task.num_steps", task.num_steps, minimum=1)
    return jnp.full((n,), _PUSH_FORCE0, jnp.result_type(float))
