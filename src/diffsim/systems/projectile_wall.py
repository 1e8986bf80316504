"""The article's demo: a projectile launched at 45° toward a target, over a wall.

Canonical numbers (``DESIGN.md``): g = 9.81 m/s², launch angle 45°, launcher at the origin,
wall at x = 6 m of height 2 m, target at x = 10 m. Clear the wall and fly on to the range
R = v₀² sin 2α / g; hit it and stop dead at the wall. Loss = (x − target)².

This module holds the closed form; the time-stepped simulator builds on it.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

G = 9.81
ANGLE = math.pi / 4
WALL_X = 6.0
WALL_HEIGHT = 2.0
TARGET = 10.0


def wall_height_at(v0, *, g=G, angle=ANGLE, wall_x=WALL_X):
    r"""Height of the free-flight parabola at the wall: :math:`x\tanα - g x^2/(2v_0^2\cos^2α)`."""
    v0 = jnp.asarray(v0)
    # double-where: v0 = 0 would divide by zero; keep its gradient finite
    safe = jnp.where(v0 == 0, 1.0, v0)
    y = wall_x * math.tan(angle) - g * wall_x**2 / (2 * safe**2 * math.cos(angle) ** 2)
    return jnp.where(v0 == 0, -jnp.inf, y)


def free_range(v0, *, g=G, angle=ANGLE):
    r"""Range on flat ground with no wall: :math:`R = v_0^2 \sin 2α / g`."""
    return jnp.asarray(v0) ** 2 * math.sin(2 * angle) / g


def clears_wall_closed_form(v0, *, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """True when the ball passes over the wall (it reaches the wall above its top)."""
    reaches = free_range(v0, g=g, angle=angle) > wall_x
    return reaches & (wall_height_at(v0, g=g, angle=angle, wall_x=wall_x) > wall_height)


def landing_x_closed_form(v0, *, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """Where the ball ends: R if it lands short of the wall or clears it, else the wall."""
    R = free_range(v0, g=g, angle=angle)
    blocked = (R > wall_x) & ~clears_wall_closed_form(
        v0, g=g, angle=angle, wall_x=wall_x, wall_height=wall_height
    )
    return jnp.where(blocked, jnp.asarray(wall_x, R.dtype), R)


def loss_closed_form(v0, *, target=TARGET, **kwargs):
    """(landing x − target)²."""
    return (landing_x_closed_form(v0, **kwargs) - target) ** 2


def plateau_bounds(*, g=G, angle=ANGLE, wall_x=WALL_X, wall_height=WALL_HEIGHT):
    """``(v_short, v_clear)``: the plateau is ``v_short < v0 < v_clear`` (≈ 7.67, 9.396)."""
    v_short = math.sqrt(wall_x * g / math.sin(2 * angle))
    v_clear = math.sqrt(
        g * wall_x**2 / (2 * math.cos(angle) ** 2 * (wall_x * math.tan(angle) - wall_height))
    )
    return v_short, v_clear


def optimal_v0(*, g=G, angle=ANGLE, target=TARGET):
    """Speed whose range hits the target: √(target g / sin 2α) ≈ 9.905 m/s."""
    return math.sqrt(target * g / math.sin(2 * angle))


# --- the time-stepped simulator ------------------------------------------------------------
#
# Semi-implicit Euler on the 2-D state (x, y, vx, vy) under gravity, h = 1/240 s by default.
# One lax.scan with a fixed number of steps (long enough for the longest flight considered)
# records two events, each located *inside* its step by linear interpolation of the
# step's straight-line segment (time-of-impact correction):
#
# * the landing, where y crosses 0:      s = y_k / (y_k - y_{k+1}),  R_h = x_k + s (x_{k+1} - x_k)
# * the wall crossing, where x crosses 6: s = (6 - x_k) / (x_{k+1} - x_k),  y_w = y_k + s (...)
#
# Both are smooth functions of v0, so autodiff gives their true derivatives. The contact
# switch is then applied to them: the ball that reaches the wall below its top stops dead
# at x = 6, a constant (gradient exactly 0).

import functools  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from .._checks import check_in_range, check_positive, is_concrete  # noqa: E402
from ..contact.base import safe_div  # noqa: E402

DEFAULT_H = 1 / 240
V0_MAX = 14.0


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


def num_steps_for(h: float, v0=None, *, g: float = G, angle: float = ANGLE) -> int:
    r"""Number of steps that covers the flight of the fastest ball considered.

    Flight time :math:`2 v \sin α / g` for :math:`v = \max(14, v_0)` (14 m/s when v0 is
    traced), plus 5 % and two steps of margin.
    """
    v_max = V0_MAX
    if v0 is not None and is_concrete(v0):
        v_max = max(v_max, float(np.max(np.asarray(v0))))
    return math.ceil(1.05 * 2 * v_max * math.sin(angle) / g / h) + 2


def _free_step(x, y, vx, vy, h, g):
    vy1 = vy - g * h
    return x + h * vx, y + h * vy1, vx, vy1


@functools.partial(jax.jit, static_argnames=("num_steps",))
def _flight(v0, h, num_steps):
    """``(R_h, y_w)``: landing x ignoring the wall, and height at the wall crossing (0 if the
    ball lands first). Both interpolated inside their step."""
    dtype = v0.dtype
    h = jnp.asarray(h, dtype)
    vx0 = v0 * math.cos(ANGLE)
    vy0 = v0 * math.sin(ANGLE)
    zero = jnp.zeros((), dtype)
    false = jnp.zeros((), bool)

    def body(c, _):
        x, y, vx, vy, landed, R, crossed, yw = c
        x1, y1, vx1, vy1 = _free_step(x, y, vx, vy, h, G)
        land_now = ~landed & (y1 < 0)
        s_land = jnp.clip(safe_div(y, y - y1), 0.0, 1.0)
        R = jnp.where(land_now, x + s_land * (x1 - x), R)
        cross_now = ~landed & ~crossed & (x <= WALL_X) & (x1 > WALL_X)
        s_w = jnp.clip(safe_div(WALL_X - x, x1 - x), 0.0, 1.0)
        yw = jnp.where(cross_now, y + s_w * (y1 - y), yw)
        return (x1, y1, vx1, vy1, landed | land_now, R, crossed | cross_now, yw), None

    init = (zero, zero, vx0, vy0, false, zero, false, zero)
    (x, _, _, _, landed, R, crossed, yw), _ = jax.lax.scan(body, init, None, length=num_steps)
    R = jnp.where(landed, R, x)  # not landed within num_steps: last x (see num_steps_for)
    return R, jnp.where(crossed, yw, 0.0)


def _landing_from_events(R, yw, smoothing):
    x_blocked = jnp.minimum(R, WALL_X)  # short of the wall: R; reaching it: stop dead at 6
    if smoothing is None:
        clear = (R > WALL_X) & (yw > WALL_HEIGHT)
        return jnp.where(clear, R, x_blocked)
    # R - x_blocked is exactly 0 short of the wall, so the sigmoid only acts at the wall
    return x_blocked + jax.nn.sigmoid((yw - WALL_HEIGHT) / smoothing) * (R - x_blocked)


def landing_x(v0, *, h: float = DEFAULT_H, smoothing: float | None = None):
    r"""Where the time-stepped ball ends (m): its landing x, or the wall's x = 6 if blocked.

    Semi-implicit Euler with step h; the landing and the wall crossing are located inside
    their step by interpolation, so the result agrees with :func:`landing_x_closed_form` to
    about 0.2 % at h = 1/240 (worst off the cliff; the cliff itself moves by ~0.02 m/s).

    **Smoothing** (``smoothing = τ`` in metres): the hard switch "clears iff the height at
    the wall :math:`y_w` exceeds the wall height H" becomes a sigmoid,

    .. math:: x_τ = x_b + σ\big((y_w - H)/τ\big)\,(R_h - x_b),\qquad x_b = \min(R_h, 6),

    a smooth blend of "stopped at the wall" and "flew on to R_h". It tends to the hard model
    as τ → 0, is smooth in v0, and on the plateau its derivative is positive (the ball is
    partly "leaking" over the wall), so d loss/d v0 < 0 there: descent moves v0 toward the
    cliff and on into the basin.

    Args:
        v0: launch speed in m/s (>= 0); any shape (evaluated elementwise, ``vmap``-ed).
        h: time step in seconds (> 0, a Python float: it fixes the number of scan steps).
        smoothing: temperature τ in metres (> 0) or ``None`` for the hard wall.

    Returns:
        Landing x in metres, shaped like v0.

    Example:
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.landing_x(8.0)), 2), bool(pw.clears_wall(8.0))
        (6.0, False)
    """
    R, yw = _events(v0, h)
    return _landing_from_events(R, yw, _check_smoothing(smoothing))


def _events(v0, h):
    v0 = _check_v0(v0)
    h = _check_h(h)
    n = num_steps_for(h, v0)
    flight = jnp.vectorize(lambda v: _flight(v, h, n))
    return flight(v0)


def clears_wall(v0, *, h: float = DEFAULT_H):
    """True when the time-stepped ball reaches the wall above its top (bool array)."""
    R, yw = _events(v0, h)
    return (R > WALL_X) & (yw > WALL_HEIGHT)


def loss(v0, *, h: float = DEFAULT_H, smoothing: float | None = None, target: float = TARGET):
    r"""The article's loss :math:`(x - 10)^2` of the time-stepped (or smoothed) landing x.

    ``jax.grad(loss)(v0)`` is exactly 0 on the plateau (7.67 < v0 < 9.396), finite on both
    sides of the cliff, and :math:`2(R - 10)\,2v_0/g` in the basin. See :func:`landing_x`.

    Example:
        >>> import jax
        >>> from diffsim.systems import projectile_wall as pw
        >>> round(float(pw.loss(8.0)), 2), float(jax.grad(pw.loss)(8.0))
        (16.0, 0.0)
    """
    return (landing_x(v0, h=h, smoothing=smoothing) - target) ** 2


def smoothed_loss(v0, tau: float, *, h: float = DEFAULT_H, target: float = TARGET):
    """:func:`loss` with the sigmoid wall of temperature ``tau`` metres (> 0)."""
    check_positive("tau", tau)
    return loss(v0, h=h, smoothing=tau, target=target)


@functools.partial(jax.jit, static_argnames=("num_steps",))
def _trajectory(v0, h, num_steps):
    dtype = v0.dtype
    h = jnp.asarray(h, dtype)
    zero = jnp.zeros((), dtype)

    def body(c, _):
        x, y, vx, vy, done = c
        x1, y1, vx1, vy1 = _free_step(x, y, vx, vy, h, G)
        s_land = jnp.where(y1 < 0, jnp.clip(safe_div(y, y - y1), 0.0, 1.0), 2.0)
        crosses = (x <= WALL_X) & (x1 > WALL_X)
        s_w = jnp.clip(safe_div(WALL_X - x, x1 - x), 0.0, 1.0)
        yw = y + s_w * (y1 - y)
        blocked = ~done & crosses & (s_w <= s_land) & (yw <= WALL_HEIGHT)
        lands = ~done & ~blocked & (y1 < 0)
        xl = x + jnp.clip(s_land, 0.0, 1.0) * (x1 - x)
        xn = jnp.where(done, x, jnp.where(blocked, WALL_X, jnp.where(lands, xl, x1)))
        yn = jnp.where(done, y, jnp.where(blocked, yw, jnp.where(lands, 0.0, y1)))
        out = (xn, yn, vx1, vy1, done | blocked | lands)
        return out, (xn, yn)

    init = (zero, zero, v0 * math.cos(ANGLE), v0 * math.sin(ANGLE), jnp.zeros((), bool))
    _, (xs, ys) = jax.lax.scan(body, init, None, length=num_steps)
    return jnp.concatenate([zero[None], xs]), jnp.concatenate([zero[None], ys])


def trajectory(v0, *, h: float = DEFAULT_H, num_points: int | None = None):
    """The flight path ``(x, y)`` (m) at times ``0, h, 2h, ...``: the ball stops dead at
    the wall if blocked, and rests where it lands otherwise.

    Args:
        v0: launch speed in m/s (>= 0); any shape (the path gets a trailing time axis).
        h: time step in seconds (> 0).
        num_points: if given (>= 2), that many points evenly spaced in time over the
            whole scan (for drawing), always including the first and last.

    Returns:
        ``(x, y)``, each of shape ``v0.shape + (num_points or num_steps + 1,)``.
    """
    v0 = _check_v0(v0)
    h = _check_h(h)
    n = num_steps_for(h, v0)
    f = jnp.vectorize(lambda v: _trajectory(v, h, n), signature="()->(k),(k)")
    x, y = f(v0)
    if num_points is not None:
        from .._checks import check_int

        num_points = check_int("num_points", num_points, minimum=2)
        idx = np.round(np.linspace(0, n, num_points)).astype(int)
        x, y = jnp.take(x, idx, axis=-1), jnp.take(y, idx, axis=-1)
    return x, y
