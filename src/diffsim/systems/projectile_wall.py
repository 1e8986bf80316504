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
