r"""Stiff pushing (Suh et al. 2022): a kinematic pusher drives a box through a penalty spring.

Built from the library's parts (:func:`push_step`): the state is the pair of bodies
``((x_p, x_b), (v_p, v_b))`` — pusher and box positions and velocities (m, m/s) — stepped by
``WithContact(SemiImplicitEuler(accel, h), PenaltySpring(plane, k="k", mass=m,
kinematic=(0,)))`` and rolled out by :func:`diffsim.rollout` with the controls as per-step
inputs. The contact plane lives in relative coordinates, normal ``(−1, +1)``: its gap is
:math:`x_b - x_p` and its force :math:`f = k\,\max(x_p - x_b, 0)` pushes the box; the pusher
is kinematic (listed in ``kinematic``: the force does not act on it). The decision is the
pusher's velocity on each of the T steps, :math:`u_t`: the pusher's acceleration
:math:`(u_t - v_p)/h` sets its velocity to :math:`u_t` in one step (exactly, for
semi-implicit Euler), so it moves by :math:`u_t h`. The box feels the contact and a
damping :math:`-c\,v_b`. Per step, with box mass m:

.. math::
    f = k\,\max(x_p - x_b, 0), \quad
    v_b ← v_b + h (f - c v_b)/m, \quad x_b ← x_b + h v_b, \quad x_p ← x_p + u_t h.

**Discretisation.** This is semi-implicit Euler of the two-body system: the force uses the
positions at the start of the step. The hand-written step this module used before moved the
pusher first and evaluated the force at its *end-of-step* position :math:`x_p + u_t h`
(the pusher one step ahead of the box). Both are first order and converge to the same
motion; their difference halves with h (``tests/test_pushing.py``), and this one is the
closer of the two to the h → 0 limit at the default h (k = 10³ N/m, u = 0.5 m/s: the box
ends at 0.2427 m, the limit is ≈ 0.2418 m, the old step gave 0.2507 m).

The contact force is continuous but its slope k grows with the stiffness: the FoBG
variance grows with k while the ZoBG variance does not (it only sees loss values).
Stable for :math:`h\sqrt{k/m} < 2`; the defaults (h = 0.01, m = 1) allow k up to 10⁴.

Examples:
    >>> from diffsim.systems import pushing as push
    >>> push.H, push.NUM_STEPS, push.MASS, push.DAMPING
    (0.01, 50, 1.0, 10.0)
    >>> push.BOX_X0, push.TARGET, push.EFFORT
    (0.2, 0.5, 0.001)
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
from jaxtyping import Array

from .._checks import check_finite, check_float, check_in_range, check_int, check_positive
from .._rollout import rollout
from ..contact import PenaltySpring, Plane, WithContact
from ..integrators import SemiImplicitEuler

H = 0.01
NUM_STEPS = 50
MASS = 1.0
DAMPING = 10.0
BOX_X0 = 0.2
TARGET = 0.5
EFFORT = 1e-3


@dataclasses.dataclass(frozen=True)
class _Drive:
    """The acceleration ``((u - v_p)/h, -c v_b/m)``: the pusher's velocity servo (it reaches
    the commanded velocity u in one step) and the box's damping. A frozen dataclass, so
    that equal parameters hash equal and compiled rollouts are reused."""

    h: float
    mass: float
    damping: float

    def __call__(self, x, v, theta, u):
        return jnp.stack([(u - v[0]) / self.h, -self.damping * v[1] / self.mass])


def push_step(*, h: float = H, mass: float = MASS, damping: float = DAMPING) -> WithContact:
    """The step ``(((x_p, x_b), (v_p, v_b)), {"k": k}, u) -> ...`` (see the module docstring):
    semi-implicit Euler with a penalty spring of stiffness ``theta["k"]`` between pusher and
    box, the pusher kinematic with velocity ``u``.

    Args:
        h: time step in seconds (> 0).
        mass: box mass in kg (> 0).
        damping: box damping in N·s/m (>= 0).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> from diffsim.systems import pushing as push
        >>> u = jnp.full(50, 0.8)  # the pusher reaches the box at 0.25 s
        >>> x, v = rollout(push.push_step(), push.initial_state(), {"k": 1000.0}, 50,
        ...                inputs=u, trajectory=False)
        >>> round(float(x[0]), 3), bool(x[1] > push.BOX_X0)  # pusher at 0.8 · 0.5 s; box moved
        (0.4, True)
    """
    check_positive("h", h)
    check_positive("mass", mass)
    check_in_range("damping", damping, 0.0, float("inf"))
    contact = PenaltySpring(Plane((-1.0, 1.0), 0.0), k="k", mass=mass, kinematic=(0,))
    drive = _Drive(float(h), float(mass), float(damping))
    return WithContact(SemiImplicitEuler(drive, h=h), contact)


def initial_state(dtype=None) -> tuple[Array, Array]:
    """``((0, BOX_X0), (0, 0))``: pusher at the origin, box at rest at 0.2 m.

    Examples:
        >>> from diffsim.systems import pushing as push
        >>> [[round(float(c), 6) for c in a] for a in push.initial_state()]
        [[0.0, 0.2], [0.0, 0.0]]
    """
    dtype = jnp.result_type(float) if dtype is None else dtype
    return jnp.asarray([0.0, BOX_X0], dtype), jnp.zeros(2, dtype)


def push_loss(
    u: Array, k: float, *, target: float = TARGET, effort: float = EFFORT, h: float = H
) -> Array:
    r"""Loss of the pusher velocities ``u`` (shape (T,)):
    :math:`(x_{b,T} - x^*)^2 + ε_u h \sum_t u_t^2`, the box's final position from a
    :func:`diffsim.rollout` of :func:`push_step` with ``u`` as the per-step inputs.

    Args:
        u: pusher velocity per step (m/s), shape (T,).
        k: contact stiffness (N/m, > 0; may be traced).
        target: where the box should end (m).
        effort: weight of the control effort.
        h: time step (s).

    Examples:
        >>> import jax
        >>> from diffsim.systems import pushing as push
        >>> u = push.initial_controls(speed=0.8)
        >>> g = jax.grad(push.push_loss)(u, 1000.0)
        >>> g.shape, bool(g.sum() < 0)  # push faster: the box ends short of 0.5 m
        ((50,), True)
    """
    check_positive("k", k)
    check_positive("h", h)
    u = check_finite("u", u)
    if u.ndim != 1 or u.shape[0] < 1:
        raise ValueError(
            f"u must have shape (T,) with T >= 1 (one velocity per step), got {u.shape}"
        )
    check_finite("target", target)
    check_finite("effort", effort)
    x_T, _ = rollout(
        push_step(h=h),
        initial_state(u.dtype),
        {"k": jnp.asarray(k, u.dtype)},
        u.shape[0],
        inputs=u,
        trajectory=False,
    )
    return (x_T[1] - target) ** 2 + effort * h * jnp.sum(u**2)


def initial_controls(num_steps: int = NUM_STEPS, speed: float = 0.0) -> Array:
    """Constant pusher velocity on every step (the start of the trajectory optimisation).

    Examples:
        >>> from diffsim.systems import pushing as push
        >>> u = push.initial_controls(speed=0.5)
        >>> u.shape, float(u[0])
        ((50,), 0.5)
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    speed = check_float("speed", speed)
    return jnp.full((num_steps,), speed, dtype=jnp.result_type(float))
