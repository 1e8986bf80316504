"""The article's demo: a projectile launched at 45° toward a target, over a wall.

Canonical numbers (the article's): g = 9.81 m/s², launch angle 45°, launcher at the origin,
wall at x = 6 m of height 2 m, target at x = 10 m. Clear the wall and fly on to the range
R = v₀² sin 2α / g; hit it and stop dead at the wall. Loss = (x − target)².

Two models of the same flight:

* the **closed form** (:func:`landing_x_closed_form`, :func:`loss_closed_form`, ...), the
  reference the time-stepped model is tested against;
* the **time-stepped simulator** (:func:`landing_x`, :func:`loss`, :func:`trajectory`, ...):
  a :func:`diffsim.rollout` of :func:`wall_step`, i.e. the library's parts composed as a
  user would — ``WithContact(SemiImplicitEuler(gravity, h), (StopDead(thin wall, toi=True),
  StopDead(ground, toi=True)))`` on the state ``((x, y), (vx, vy))``. The wall is a thin
  plane (``Plane.wall(6, height=2)``): the ball stops dead where its step crosses x = 6 below
  the top (the crossing point interpolated inside the step); a ball that crosses above the
  top flies on and is never touched again. The ground stops the ball where it lands,
  interpolated inside the step. The ball's final x is the landing x.

Examples:
    >>> import math
    >>> from diffsim.systems import projectile_wall as pw
    >>> pw.G, round(math.degrees(pw.ANGLE)), pw.WALL_X, pw.WALL_HEIGHT, pw.TARGET
    (9.81, 45, 6.0, 2.0, 10.0)
    >>> round(1 / pw.DEFAULT_H), pw.V0_MAX, pw.V0_ROLLOUT_MAX
    (240, 14.0, 24.0)
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import INT32_MAX, check_in_range, check_int, check_positive, is_concrete
from .._rollout import rollout
from ..contact import Plane, StopDead, WithContact
from ..integrators import SemiImplicitEuler

G = 9.81
ANGLE = math.pi / 4
WALL_X = 6.0
WALL_HEIGHT = 2.0
TARGET = 10.0


def wall_height_at(v0, *, g=G, angle=ANGLE, wall_x=WALL_X):
    r"""Height of the free-flight parabola at the wall: :math:`x\tanα - g x^2/(2v_0^2\cos^2α)`.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.wall_height_at(8.0)), 3)  # below the 2 m wall: it is hit
        0.482
    """
    v0 = jnp.asarray(v0)
    # double-where: v0 = 0 would divide by zero; keep its gradient finite
    safe = jnp.where(v0 == 0, 1.0, v0)
    y = wall_x * math.tan(angle) - g * wall_x**2 / (2 * safe**2 * math.cos(angle) ** 2)
    return jnp.where(v0 == 0, -jnp.inf, y)


def free_range(v0, *, g=G, angle=ANGLE):
    r"""Range on flat ground with no wall: :math:`R = v_0^2 \sin 2α / g`.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.free_range(8.0)), 3)  # v0² / g
        6.524
    """
    return jnp.asarray(v0) ** 2 * math.sin(2 * angle) / g


def clears_wall_closed_form(v0, *, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """True when the ball passes over the wall (it reaches the wall above its top).

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> bool(pw.clears_wall_closed_form(8.0)), bool(pw.clears_wall_closed_form(10.0))
        (False, True)
    """
    reaches = free_range(v0, g=g, angle=angle) > wall_x
    return reaches & (wall_height_at(v0, g=g, angle=angle, wall_x=wall_x) > wall_height)


def landing_x_closed_form(v0, *, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """Where the ball ends: R if it lands short of the wall or clears it, else the wall.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> float(pw.landing_x_closed_form(8.0)), round(float(pw.landing_x_closed_form(5.0)), 3)
        (6.0, 2.548)
    """
    R = free_range(v0, g=g, angle=angle)
    blocked = (R > wall_x) & ~clears_wall_closed_form(
        v0, g=g, angle=angle, wall_x=wall_x, wall_height=wall_height
    )
    return jnp.where(blocked, jnp.asarray(wall_x, R.dtype), R)


def loss_closed_form(v0, *, target=TARGET, **kwargs):
    """(landing x − target)².

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> float(pw.loss_closed_form(8.0)), round(float(pw.loss_closed_form(pw.optimal_v0())), 9)
        (16.0, 0.0)
    """
    return (landing_x_closed_form(v0, **kwargs) - target) ** 2


def plateau_bounds(*, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """``(v_short, v_clear)``: the plateau is ``v_short < v0 < v_clear`` (≈ 7.67, 9.396).

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> [round(v, 3) for v in pw.plateau_bounds()]
        [7.672, 9.396]
    """
    v_short = math.sqrt(wall_x * g / math.sin(2 * angle))
    v_clear = math.sqrt(
        g * wall_x**2 / (2 * math.cos(angle) ** 2 * (wall_x * math.tan(angle) - wall_height))
    )
    return v_short, v_clear


def optimal_v0(*, g=G, angle=ANGLE, target=TARGET):
    """Speed whose range hits the target: √(target g / sin 2α) ≈ 9.905 m/s.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(pw.optimal_v0(), 3)
        9.905
    """
    return math.sqrt(target * g / math.sin(2 * angle))


# --- the time-stepped simulator: library parts -------------------------------------------

DEFAULT_H = 1 / 240
V0_MAX = 14.0
"""The fastest launch of the demo (its slider's end, the CLI's accepted range)."""
V0_ROLLOUT_MAX = 24.0
"""The fastest launch the rollout of :func:`landing_x`, :func:`loss` and :func:`trajectory`
covers by default (their ``v0_max``): samples of the estimators around :data:`V0_MAX`, with
σ up to 1.5 m/s, stay below it with probability 1 − 3·10⁻¹². The horizon depends on this
bound only — never on v0 — so the loss is the same function of v0 whether v0 is a number or
traced (under ``jit``, ``grad``, ``vmap``). A number above the bound is refused; a traced
ball still in flight at the end gives NaN, never a position short of its landing."""


def _gravity(x, v, theta):
    g = theta["g"]
    return jnp.stack([jnp.zeros_like(g), -g])


def wall_step(h: Any = DEFAULT_H, *, smoothing: Any = None) -> WithContact:
    r"""The step ``(((x, y), (vx, vy)), {"g": g}) -> ...`` of the ball: semi-implicit Euler
    under gravity, then the thin wall and the ground as stop-dead contacts located inside
    the step (``toi=True``).

    With ``smoothing=τ`` (metres) the wall's edge is smoothed (see
    :class:`~diffsim.contact.StopDead` on thin planes): a ball crossing x = 6 at height
    :math:`y_c` is stopped with weight :math:`σ((H - y_c)/τ)` and keeps the rest of its
    motion, :math:`(1 - σ)` of its velocity and of the remainder of the step.

    Args:
        h: time step in seconds (> 0; may be traced).
        smoothing: τ in metres (> 0; may be traced) or ``None`` for the hard wall.

    Examples:
        >>> import diffsim
        >>> from diffsim.systems import projectile_wall as pw
        >>> pos, vel = diffsim.rollout(pw.wall_step(), pw.launch_state(8.0), {"g": pw.G}, 400,
        ...                            trajectory=False)
        >>> round(float(pos[0]), 2), float(vel[0])  # stopped dead on the wall
        (6.0, 0.0)
    """
    wall = StopDead(Plane.wall(WALL_X, 2, height=WALL_HEIGHT), toi=True, smoothing=smoothing)
    ground = StopDead(Plane.ground(2), toi=True)
    return WithContact(SemiImplicitEuler(_gravity, h=h), (wall, ground))


def launch_state(v0, *, angle=ANGLE):
    """``((0, 0), (v0 cos α, v0 sin α))``: the ball at the launcher (a scalar v0).

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> [[round(float(c), 4) for c in a] for a in pw.launch_state(2.0)]
        [[0.0, 0.0], [1.4142, 1.4142]]
    """
    v0 = jnp.asarray(v0)
    zero = jnp.zeros_like(v0)
    vel = jnp.stack([v0 * math.cos(angle), v0 * math.sin(angle)])
    return jnp.stack([zero, zero]), vel


def _check_v0(v0):
    check_in_range("v0", v0, 0.0, float("inf"))
    return jnp.asarray(v0, jnp.result_type(v0, float))


def _check_h(h):
    if not isinstance(h, (int, float, np.floating, np.integer)) or isinstance(h, bool):
        raise TypeError(f"h must be a finite number > 0 (a Python float), got {h!r}")
    check_positive("h", h)
    return float(h)


def _check_smoothing(smoothing):
    if smoothing is None:
        return None
    check_positive("smoothing", smoothing)
    return smoothing


def num_steps_for(
    h: float, v0_max: float = V0_ROLLOUT_MAX, *, g: float = G, angle: float = ANGLE
) -> int:
    r"""Number of steps that covers the flight of every launch up to ``v0_max`` m/s: flight
    time :math:`2 v_{max} \sin α / g`, plus 5 % and two steps of margin.

    The horizon of :func:`landing_x`, :func:`loss` and :func:`trajectory` (a static fact of
    the problem: it depends on ``h`` and ``v0_max``, never on v0 itself).

    Raises:
        ValueError: ``v0_max`` not finite and > 0, or the flight needs more than 2³¹ − 1
            steps (XLA's loop limit), naming ``v0_max`` and ``h``.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> pw.num_steps_for(1 / 240), pw.num_steps_for(1 / 240, pw.V0_MAX)
        (874, 511)
        >>> pw.num_steps_for(1e-12)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the flight at v0 up to 24 m/s with h = 1e-12 s needs 3.633e+12 steps to ...
    """
    check_positive("v0_max", v0_max)
    v_max = float(v0_max)
    steps = 1.05 * 2 * v_max * math.sin(angle) / g / h + 2
    if not steps <= INT32_MAX:
        raise ValueError(
            f"the flight at v0 up to {v_max:g} m/s with h = {h:g} s needs {steps:.4g} steps "
            f"to land, more than a rollout takes (2³¹ − 1 = {INT32_MAX}); use a smaller "
            f"v0_max or a larger h"
        )
    return math.ceil(steps)


def _check_covered(v0, v0_max: float) -> None:
    """A concrete v0 above ``v0_max`` would not land inside the rollout: refuse it."""
    if is_concrete(v0) and np.size(v0) and float(np.max(np.asarray(v0))) > v0_max:
        raise ValueError(
            f"v0 must be <= v0_max = {v0_max:g} m/s (the fastest launch the rollout is "
            f"sized for), got {float(np.max(np.asarray(v0))):g}; pass a larger v0_max"
        )


@functools.partial(jax.jit, static_argnames=("num_steps", "smoothed", "keep"))
def _simulate(v0, h, tau, num_steps, smoothed, keep):
    """The rollout of :func:`wall_step` from :func:`launch_state` (a scalar v0): the final
    position, or with ``keep`` the positions at every step (leading axis num_steps + 1).

    A ball still moving at the end has not landed (a traced v0 beyond the horizon of
    :func:`num_steps_for`): its final position is NaN, not a point in mid-air.
    """
    dtype = v0.dtype
    step = wall_step(jnp.asarray(h, dtype), smoothing=jnp.asarray(tau, dtype) if smoothed else None)
    theta = {"g": jnp.asarray(G, dtype)}
    pos, vel = rollout(step, launch_state(v0), theta, num_steps, trajectory=keep)
    if keep:
        return pos
    return pos * jnp.where(jnp.all(vel == 0), 1.0, jnp.nan).astype(dtype)  # NaN value and gradient


def _final_position(v0, h, smoothing, v0_max):
    v0 = _check_v0(v0)
    h = _check_h(h)
    n = num_steps_for(h, v0_max)
    _check_covered(v0, v0_max)
    smoothed = smoothing is not None
    tau = smoothing if smoothed else 0.0
    f = jnp.vectorize(lambda v: _simulate(v, h, tau, n, smoothed, False), signature="()->(k)")
    return f(v0)


def landing_x(
    v0, *, h: float = DEFAULT_H, smoothing: float | None = None, v0_max: float = V0_ROLLOUT_MAX
):
    r"""Where the time-stepped ball ends (m): its landing x, or the wall's x = 6 if blocked.

    The final x of a :func:`diffsim.rollout` of :func:`wall_step` (semi-implicit Euler with
    step h, stop-dead thin wall and ground, both located inside their step), long enough
    for the ball to land (:func:`num_steps_for`). It agrees with
    :func:`landing_x_closed_form` to about 0.2 % at h = 1/240 (worst off the cliff; the
    cliff itself moves by ~0.02 m/s). A blocked ball ends exactly at x = 6 (the contact puts
    it on the wall), so the gradient there is exactly 0.

    **Smoothing** (``smoothing = τ`` in metres): the wall's top edge is smoothed inside the
    simulation (:class:`~diffsim.contact.StopDead` on a thin plane). A ball crossing x = 6
    at height :math:`y_c` is stopped there with weight :math:`w = σ((H - y_c)/τ)` and keeps
    the fraction :math:`1 - w` of its velocity (and of the rest of its step); it then flies
    on, and lands, under the same physics. So on the plateau a ball "leaks" over the wall a
    little, more the closer it passes to the top: the landing x grows with v0 and
    d loss/d v0 < 0 there, which sends descent toward the cliff and into the basin; balls
    landing short of the wall are untouched, and as τ → 0 the model tends to the hard wall
    (off the cliff). It is smooth in v0 up to the O(h²) jitter of which step the crossing
    falls in.

    Args:
        v0: launch speed in m/s (>= 0); any shape (evaluated elementwise, ``vmap``-ed).
        h: time step in seconds (> 0, a Python float: it fixes the number of scan steps).
        smoothing: temperature τ in metres (> 0; may be traced) or ``None`` for the hard
            wall.
        v0_max: the fastest launch the rollout must cover (m/s, > 0; it fixes the number
            of steps, :func:`num_steps_for`, and nothing else: the result is the same
            function of v0 for a number and a traced v0). Default
            :data:`V0_ROLLOUT_MAX`; ``v0_max = V0_MAX`` (14) costs 0.7× as much when no
            launch is faster. A concrete v0 above it is refused; a traced one gives NaN.

    Returns:
        Landing x in metres, shaped like v0.

    Raises:
        ValueError: v0 negative or above ``v0_max``; ``h``, ``smoothing`` or ``v0_max``
            not finite and > 0.

    Example:
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.landing_x(8.0)), 2), bool(pw.clears_wall(8.0))
        (6.0, False)
    """
    return _final_position(v0, h, _check_smoothing(smoothing), v0_max)[..., 0]


@functools.partial(jax.jit, static_argnames=("h", "target"))
def _bisect_target(h: float, target: float):
    def gap(v):
        return landing_x(v, h=h, v0_max=V0_MAX) - target

    def halve(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        short = gap(mid) < 0  # blocked (x = 6) or landing short: the answer is above
        return jnp.where(short, mid, lo), jnp.where(short, hi, mid)

    dtype = jnp.result_type(float)
    lo, hi = jax.lax.fori_loop(
        0, 64, halve, (jnp.asarray(plateau_bounds()[1], dtype), jnp.asarray(V0_MAX, dtype))
    )
    return 0.5 * (lo + hi), gap(0.5 * (lo + hi))


def simulated_optimal_v0(*, h: float = DEFAULT_H, target: float = TARGET) -> float:
    """Speed at which the *time-stepped* ball lands on the target (m/s): ≈ 9.919 at h = 1/240.

    The root of ``landing_x(v0, h=h) = target`` past the cliff, by 64 bisections of
    [:func:`plateau_bounds`' clearing speed, :data:`V0_MAX`] in one compiled loop. It
    differs from the closed form :func:`optimal_v0` (9.905) by O(h): where an optimizer on
    :func:`loss` converges, not where the parabola's range hits the target.

    Raises:
        ValueError: ``h`` is not a finite number > 0, or ``target`` is not reached by a
            launch that clears the wall and is at most :data:`V0_MAX` (naming ``target``).

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> v = pw.simulated_optimal_v0()
        >>> round(v, 3), abs(float(pw.landing_x(v)) - 10.0) < 1e-4
        (9.919, True)
    """
    h = _check_h(h)
    check_positive("target", target)
    v, gap = _bisect_target(h, float(target))
    if not abs(float(gap)) < 1e-3:
        raise ValueError(
            f"target must be a landing x that a launch clearing the wall at v0 <= {V0_MAX:g} "
            f"m/s reaches (> {WALL_X:g} m), got {target!r} (gap {float(gap):.3g} m)"
        )
    return float(v)


def clears_wall(v0, *, h: float = DEFAULT_H, v0_max: float = V0_ROLLOUT_MAX):
    """True when the time-stepped ball passes over the wall (it lands beyond x = 6).

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> bool(pw.clears_wall(8.0)), bool(pw.clears_wall(10.0))
        (False, True)
    """
    return landing_x(v0, h=h, v0_max=v0_max) > WALL_X


def loss(
    v0,
    *,
    h: float = DEFAULT_H,
    smoothing: float | None = None,
    target: float = TARGET,
    v0_max: float = V0_ROLLOUT_MAX,
):
    r"""The article's loss :math:`(x - 10)^2` of the time-stepped (or smoothed) landing x.

    ``jax.grad(loss)(v0)`` is exactly 0 on the plateau (7.67 < v0 < 9.396), finite on both
    sides of the cliff, and :math:`2(R - 10)\,2v_0/g` in the basin. See :func:`landing_x`.

    The same function of v0 whether v0 is a number or traced: the rollout's horizon is
    :func:`num_steps_for` of ``h`` and ``v0_max`` alone.

    Example:
        >>> import jax
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.loss(8.0)), 2), float(jax.grad(pw.loss)(8.0))
        (16.0, 0.0)
        >>> float(jax.jit(pw.loss)(11.0)) == float(pw.loss(11.0))
        True
    """
    return (landing_x(v0, h=h, smoothing=smoothing, v0_max=v0_max) - target) ** 2


def smoothed_loss(
    v0, tau: float, *, h: float = DEFAULT_H, target: float = TARGET, v0_max: float = V0_ROLLOUT_MAX
):
    """:func:`loss` with the wall's edge smoothed at temperature ``tau`` metres (> 0).

    Examples:
        >>> import jax
        >>> from diffsim.systems import projectile_wall as pw
        >>> float(jax.grad(pw.smoothed_loss)(8.0, 0.3)) < 0  # off the plateau, toward the cliff
        True
    """
    check_positive("tau", tau)
    return loss(v0, h=h, smoothing=tau, target=target, v0_max=v0_max)


def trajectory(
    v0, *, h: float = DEFAULT_H, num_points: int | None = None, v0_max: float = V0_ROLLOUT_MAX
):
    """The flight path ``(x, y)`` (m) at times ``0, h, 2h, ...``: the rollout of
    :func:`wall_step`. A blocked ball stops dead on the wall where it hit it (and sticks
    there); otherwise it rests where it lands.

    Args:
        v0: launch speed in m/s (>= 0); any shape (the path gets a trailing time axis).
        h: time step in seconds (> 0).
        num_points: if given (>= 2), that many points evenly spaced in time over the
            whole scan (for drawing), always including the first and last.
        v0_max: the fastest launch the scan covers (m/s; :func:`num_steps_for`).

    Returns:
        ``(x, y)``, each of shape ``v0.shape + (num_points or num_steps + 1,)``.

    Examples:
        >>> from diffsim.systems import projectile_wall as pw
        >>> x, y = pw.trajectory(8.0, num_points=5)
        >>> x.shape, round(float(x[-1]), 2)
        ((5,), 6.0)
    """
    v0 = _check_v0(v0)
    h = _check_h(h)
    n = num_steps_for(h, v0_max)
    _check_covered(v0, v0_max)
    f = jnp.vectorize(lambda v: _simulate(v, h, 0.0, n, False, True), signature="()->(k,d)")
    path = f(v0)
    x, y = path[..., 0], path[..., 1]
    if num_points is not None:
        num_points = check_int("num_points", num_points, minimum=2)
        idx = np.round(np.linspace(0, n, num_points)).astype(int)
        x, y = jnp.take(x, idx, axis=-1), jnp.take(y, idx, axis=-1)
    return x, y
