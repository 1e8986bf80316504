"""The inelastic "stop dead" contact of the article's wall: all velocity vanishes."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._coords import where
from .base import EventContact, Plane, crossing, naive_contact, smoothed_contact
from .restitution import _check_mode


class StopDead(EventContact):
    r"""Perfectly inelastic, sticking contact: on impact the body stops, :math:`v^+ = 0`.

    * naive (``toi=False``): a step ending inside the plane while approaching is projected
      back onto the plane and its velocity zeroed;
    * ``toi=True``: the body stops at the interpolated impact point
      :math:`x_0 + s^*(x_1 - x_0)`, :math:`s^* = g_0/(g_0 - g_1)`, so its rest position moves
      smoothly with the initial conditions;
    * ``smoothing=τ`` (metres): :math:`v^+ = (1 - w) v`, :math:`w = σ(-g_1/τ)σ(-v_n h/τ)`,
      position pushed out by :math:`τ\,\mathrm{softplus}(-g_1/τ)`; tends to naive as τ → 0.

    Attributes:
        plane: the :class:`Plane`.
        toi: locate the impact inside the step (static).
        smoothing: temperature τ > 0 in metres, or ``None`` (static).
    """

    plane: Plane
    toi: bool = eqx.field(static=True, default=False)
    smoothing: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        _check_mode(self.toi, self.smoothing)

    def resolve(self, integrator, state0, state1, theta, u):
        x0, _v0 = state0
        x1, v1 = state1
        if self.smoothing is not None:
            x, w = smoothed_contact(self.plane, x1, v1, integrator.h, self.smoothing)
            return x, (1 - w) * v1
        hit, x_proj = naive_contact(self.plane, x1, v1)
        x_out = where(hit, x_proj, x1)
        stopped = jnp.logical_or(hit, False)
        if self.toi:
            crossed, _, x_c = crossing(self.plane, x0, x1)
            x_out = where(crossed, x_c, x_out)
            stopped = stopped | crossed
        return x_out, v1._map(lambda p: jnp.where(stopped, jnp.zeros_like(p), p))
