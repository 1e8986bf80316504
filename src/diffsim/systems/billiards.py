r"""DiffTaichi's billiards (Hu et al., ICLR 2020, ``examples/billiards.py``): a cue ball
into a triangle of ten, the cue's initial position and velocity optimised so that the last
ball of the triangle ends at a goal.

Eleven discs of radius 0.03 on a frictionless table (no walls), elastic impacts with
restitution e = 0.8 between every pair (:class:`~diffsim.contact.SphereContact`, equal
masses), steps of h = 0.003 s. The layout is DiffTaichi's: the cue ball at
:data:`CUE_X0` = (0.1, 0.5) moving at :data:`CUE_V0` = (0.3, 0) m/s, and four rows of the
triangle, ball (i, j) of row i = 0…3, j = 0…i at :math:`(0.5 + 2ri,\ 0.5 + 2rj - 0.7ri)`;
the target is the last ball (row 3, j = 3). DiffTaichi's ``steps = 1024`` states are
:math:`x_0 … x_{1023}`: :data:`NUM_STEPS` = 1,023 steps, and the loss is the squared
distance of the target to :data:`GOAL` = (0.9, 0.75) in the last,

.. math::
    L(x_{cue}, v_{cue}) = |x_{target}(t_{1023}) - (0.9, 0.75)|^2 .

The recipe is DiffTaichi's (:func:`train`): 200 steps of plain gradient descent with
learning rate 0.01 on the cue's initial x and v, from (0.1, 0.5) and (0.3, 0), here through
:func:`diffsim.optimize` with :class:`~diffsim.estimators.Exact` and ``optax.sgd(0.01)``.
:func:`landscape` is DiffTaichi's ``scan``: the loss over the angle of the cue's velocity
(speed 0.3 m/s), on :func:`scan_angles`.

**Time of impact.** DiffTaichi's step always corrects for the time of impact: a pair that
overlaps at the end of the free step gets its impulse and, in position, only for the time
after the impact (its ``x_inc``), with the impact time from the end-of-step overlap divided
by the normal speed (a linearisation). ``toi=True`` here locates each impact exactly
(:func:`~diffsim.contact.sphere_impact_fraction`: the relative motion is linear in free
flight), then flies the rest of the step; ``toi=False`` is DiffTaichi's step without its
``x_inc`` (the whole step flown with the new velocity, ``position="step"``), whose
state, and so whose gradient, does not see where inside the step the balls met.

Examples:
    >>> import jax.numpy as jnp
    >>> from diffsim.systems import billiards
    >>> x0, v0 = billiards.initial_state(jnp.array([0.1, 0.5]), jnp.array([0.3, 0.0]))
    >>> x0.shape, [round(float(c), 3) for c in x0[billiards.TARGET]]  # 11 balls; the target
    ((11, 2), [0.68, 0.617])
    >>> billiards.RADIUS, billiards.ELASTICITY, billiards.H, billiards.GOAL
    (0.03, 0.8, 0.003, (0.9, 0.75))
    >>> billiards.STEPS, billiards.NUM_STEPS, billiards.LAYERS, billiards.N_BALLS
    (1024, 1023, 4, 11)
    >>> billiards.CUE_X0, billiards.CUE_V0, billiards.CUE_SPEED, sorted(billiards.THETA0)
    ((0.1, 0.5), (0.3, 0.0), 0.3, ['v', 'x'])
    >>> billiards.LEARNING_RATE, billiards.ITERATIONS  # DiffTaichi's recipe
    (0.01, 200)
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from .._checks import check_bool, check_int, check_positive
from .._optimize import OptimizeResult, optimize
from .._rollout import rollout
from ..contact import SphereContact, WithContact
from ..estimators import Exact
from ..integrators import SemiImplicitEuler

RADIUS = 0.03
"""Radius of every ball (m)."""
ELASTICITY = 0.8
"""Coefficient of restitution of every impact."""
H = 0.003
"""Time step (s)."""
STEPS = 1024
"""DiffTaichi's ``steps``: the states x_0 … x_1023."""
NUM_STEPS = STEPS - 1
"""Steps of the rollout (1,023): the loss reads the state after the last."""
GOAL = (0.9, 0.75)
"""Where the target ball should end (m)."""
LAYERS = 4
"""Rows of the triangle."""
N_BALLS = 1 + (1 + LAYERS) * LAYERS // 2
"""The cue ball and the triangle: 11."""
TARGET = N_BALLS - 1
"""Index of the ball whose distance to :data:`GOAL` is the loss (the last of the triangle)."""
CUE_X0 = (0.1, 0.5)
"""The cue ball's initial position in DiffTaichi's recipe (m)."""
CUE_V0 = (0.3, 0.0)
"""The cue ball's initial velocity in DiffTaichi's recipe (m/s)."""
CUE_SPEED = 0.3
"""The cue's speed along :func:`landscape` (m/s)."""
LEARNING_RATE = 0.01
"""DiffTaichi's gradient-descent step."""
ITERATIONS = 200
"""DiffTaichi's number of gradient-descent iterations."""


def _triangle() -> np.ndarray:
    """The ten balls of the triangle, row by row (DiffTaichi's layout)."""
    rows = [(i, j) for i in range(LAYERS) for j in range(i + 1)]
    return np.array(
        [[i * 2 * RADIUS + 0.5, j * 2 * RADIUS + 0.5 - i * RADIUS * 0.7] for i, j in rows]
    )


def initial_state(cue_x: Array, cue_v: Array) -> tuple[Array, Array]:
    """The table at t = 0: the cue ball at ``cue_x`` moving at ``cue_v``, the triangle at
    rest; positions and velocities of shape ``(11, 2)``, the cue ball first.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems.billiards import initial_state
        >>> x, v = initial_state(jnp.array([0.1, 0.5]), jnp.array([0.3, 0.0]))
        >>> [round(float(c), 3) for c in x[1]], round(float(v.sum()), 6)  # the apex; at rest
        ([0.5, 0.5], 0.3)
    """
    cue_x, cue_v = jnp.asarray(cue_x), jnp.asarray(cue_v)
    dtype = jnp.result_type(cue_x, cue_v, float)
    rest = jnp.asarray(_triangle(), dtype)
    x = jnp.concatenate([cue_x.astype(dtype)[None], rest])
    v = jnp.concatenate([cue_v.astype(dtype)[None], jnp.zeros_like(rest)])
    return x, v


def billiards_step(toi: bool = True, *, h: float = H) -> WithContact:
    """One step of the table: free flight (no forces) and the balls' impacts
    (:class:`~diffsim.contact.SphereContact` with DiffTaichi's radius and elasticity).

    Args:
        toi: locate each impact inside the step (DiffTaichi's scheme corrects for it too);
            ``False``: DiffTaichi's step without its time-of-impact term.
        h: time step (s), > 0.

    Example:
        >>> from diffsim.systems.billiards import billiards_step
        >>> billiards_step().contacts[0].toi, billiards_step(False).contacts[0].position
        (True, 'step')
    """
    check_bool("toi", toi)
    check_positive("h", h)
    contact = SphereContact(radius=RADIUS, e=ELASTICITY, toi=toi, position="step")
    return WithContact(SemiImplicitEuler(lambda x, v, theta: jnp.zeros_like(x), h=h), contact)


def billiards_loss(theta: Any, toi: bool = True, num_steps: int = NUM_STEPS) -> Array:
    r"""DiffTaichi's loss: :math:`|x_{target} - \mathrm{GOAL}|^2` after ``num_steps`` steps
    from the cue ball at ``theta["x"]`` moving at ``theta["v"]``.

    Args:
        theta: ``{"x": (2,), "v": (2,)}``, the cue ball's initial position and velocity.
        toi: locate impacts inside the step (:func:`billiards_step`).
        num_steps: steps of h = 0.003 s (>= 1; default DiffTaichi's 1,023).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems.billiards import THETA0, billiards_loss
        >>> round(float(billiards_loss(THETA0, num_steps=10)), 4)  # the triangle at rest yet
        0.0661
    """
    num_steps = check_int("num_steps", num_steps)
    x0, v0 = initial_state(theta["x"], theta["v"])
    x, _ = rollout(billiards_step(toi), (x0, v0), theta, num_steps, trajectory=False)
    return jnp.sum((x[TARGET] - jnp.asarray(GOAL, x.dtype)) ** 2)


THETA0 = {"x": np.asarray(CUE_X0), "v": np.asarray(CUE_V0)}
"""DiffTaichi's starting point: the cue ball at (0.1, 0.5) moving at (0.3, 0) m/s."""


def scan_angles(n: int = 1000, zoom: float = 1.0) -> Array:
    r"""DiffTaichi's ``scan`` angles (radians): :math:`α_i = ((i + 1/2)/n - 1/2)\,π\,z`,
    i = 0 … n − 1, symmetric about 0 over a range of π z.

    Example:
        >>> from diffsim.systems.billiards import scan_angles
        >>> [round(float(a), 4) for a in scan_angles(4, zoom=0.1)]
        [-0.1178, -0.0393, 0.0393, 0.1178]
    """
    n = check_int("n", n)
    check_positive("zoom", zoom)
    return (((jnp.arange(n) + 0.5) / n - 0.5) * math.pi * zoom).astype(float)


def landscape(angles: Array, toi: bool = True, num_steps: int = NUM_STEPS) -> Array:
    """The loss over the cue's angle (DiffTaichi's ``scan``): the cue ball from
    :data:`CUE_X0` at :data:`CUE_SPEED` in direction ``angle``, one loss per angle
    (vectorised over the angles).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems.billiards import landscape
        >>> landscape(jnp.array([0.0, 0.1]), num_steps=10).shape
        (2,)
    """

    def one(angle):
        v = CUE_SPEED * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        x = jnp.asarray(CUE_X0, v.dtype)
        return billiards_loss({"x": x, "v": v}, toi, num_steps)

    return jax.jit(jax.vmap(one))(jnp.asarray(angles))


def train(
    toi: bool = True,
    *,
    steps: int = ITERATIONS,
    learning_rate: float = LEARNING_RATE,
    num_steps: int = NUM_STEPS,
) -> OptimizeResult:
    """DiffTaichi's recipe through :func:`diffsim.optimize`: plain gradient descent
    (``optax.sgd``) with the exact gradient on the cue's initial x and v from
    :data:`THETA0`.

    Args:
        toi: locate impacts inside the step.
        steps: iterations (default DiffTaichi's 200).
        learning_rate: the step (default DiffTaichi's 0.01), > 0.
        num_steps: the rollout's steps (default 1,023).

    Returns:
        The :class:`~diffsim.OptimizeResult` (``result.history.loss``: the loss at each
        iteration's start).

    Example:
        >>> from diffsim.systems.billiards import train
        >>> r = train(steps=3, num_steps=200)  # short: the cue ball reaches the triangle
        >>> r.history.loss.shape
        (3,)
    """
    check_positive("learning_rate", learning_rate)
    return optimize(
        lambda theta: billiards_loss(theta, toi, num_steps),
        THETA0,
        Exact(),
        steps=steps,
        key=jax.random.PRNGKey(0),
        optimizer=optax.sgd(learning_rate),
    )
