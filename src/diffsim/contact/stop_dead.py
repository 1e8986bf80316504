"""The inelastic "stop dead" contact of the article's wall: all velocity vanishes."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp

from .._coords import where
from .base import (
    EventContact,
    Plane,
    blend,
    crossing,
    edge_weights,
    naive_contact,
    smoothed_contact,
    with_h,
)
from .restitution import _check_mode


class StopDead(EventContact):
    r"""Perfectly inelastic, sticking contact: on impact the body stops, :math:`v^+ = 0`.

    * naive (``toi=False``): a step ending inside the plane while approaching is projected
      back onto the plane and its velocity zeroed;
    * ``toi=True``: the body stops at the interpolated impact point
      :math:`x_0 + s^*(x_1 - x_0)`, :math:`s^* = g_0/(g_0 - g_1)`, put exactly on the plane
      (its normal coordinate is the plane's, so it does not depend on the initial
      conditions), so its rest position moves smoothly with the initial conditions;
    * ``smoothing=τ`` (metres) on a half-space: :math:`v^+ = (1 - w) v`,
      :math:`w = σ(-g_1/τ)σ(-v_n h/τ)`, position pushed out by
      :math:`τ\,\mathrm{softplus}(-g_1/τ)`; tends to naive as τ → 0.

    **Sticking.** A body that starts the step exactly on the plane (gap 0, where a stop put
    it) within its extent and whose free step keeps it on the plane (gap 0 again: motion
    along the plane, e.g. falling down a vertical wall) stays where it is with
    :math:`v^+ = 0`. Steps that leave the plane (gap > 0) are free; steps into it are
    stops as above.

    **Thin planes** (a :class:`Plane` with an extent, e.g. ``Plane.wall(6, height=2)``):
    only a step that crosses the plane within the extent stops (no half-space fallback: a
    ball past the wall is never touched). Hard: at the crossing point with ``toi=True``,
    at the end position projected onto the plane without. With ``smoothing=τ`` the crossing
    is located as for ``toi`` and the edge of the extent is smoothed instead: with
    :math:`w = σ(m(x_c)/τ)`, m the signed margin of the crossing point inside the extent
    (:math:`H - y_c` for a wall of height H), the body keeps the fraction :math:`1 - w` of
    its velocity. With ``toi=True`` this happens at the crossing, at fraction s* of the
    step, :math:`(x_c, v_c) → (x_c, (1 - w) v_c)`, and the integrator runs the rest of the
    step, :math:`(1 - s^*) h` (continuous when the crossing moves from one step to the
    next; w = 0 reproduces the free step exactly for semi-implicit Euler); without it the
    end of the step is blended, :math:`x^+ = x_{hit} + (1 - w)(x_1 - x_{hit})`,
    :math:`v^+ = (1 - w) v_1`. A body crossing just below the top keeps a little of its
    motion, one crossing just over it loses a little; as τ → 0 it tends to the hard thin
    contact (up to the rest of the stopping step, which the stopped body spends in free
    fall along the plane, and the sticking, which the smoothed contact does not do).

    Attributes:
        plane: the :class:`Plane`.
        toi: locate the impact inside the step (static).
        smoothing: temperature τ > 0 in metres (a number or an array, which may be
            traced), or ``None``.
    """

    plane: Plane
    toi: bool = eqx.field(static=True, default=False)
    smoothing: Any = None

    def __check_init__(self):
        _check_mode(self.toi, self.smoothing, self.plane.thin)

    def resolve(self, integrator, state0, state1, theta, u):
        x0, v0 = state0
        x1, v1 = state1
        plane = self.plane
        if self.smoothing is not None and plane.thin:
            crossed, s, x_c = crossing(plane, x0, x1, within_extent=False)
            _, keep = edge_weights(plane, x_c, self.smoothing)
            if self.toi:  # weighted stop at the crossing, then the rest of the step
                v_c = v0 + s * (v1 - v0)
                rest = with_h(integrator, (1 - s) * integrator.h)
                x_r, v_r = rest.step_coords(
                    plane.set_normal(x_c, plane.offset), keep * v_c, theta, u
                )
                return where(crossed, x_r, x1), where(crossed, v_r, v1)
            x_hit = plane.set_normal(x1, plane.offset)
            return where(crossed, blend(keep, x_hit, x1), x1), where(crossed, keep * v1, v1)
        if self.smoothing is not None:
            x, w = smoothed_contact(plane, x1, v1, integrator.h, self.smoothing)
            return x, (1 - w) * v1
        hit, x_proj = naive_contact(plane, x1, v1, x0=x0)
        x_out = where(hit, x_proj, x1)
        stopped = jnp.logical_or(hit, False)
        if self.toi:
            crossed, _, x_c = crossing(plane, x0, x1)
            x_out = where(crossed, plane.set_normal(x_c, plane.offset), x_out)
            stopped = stopped | crossed
        stick = (plane.gap(x0) == 0) & (plane.gap(x1) == 0) & plane.within(x0)
        x_out = where(stick, x0, x_out)
        stopped = stopped | stick
        return x_out, v1._map(lambda p: jnp.where(stopped, jnp.zeros_like(p), p))
