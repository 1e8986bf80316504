"""Penalty-spring contact: a stiff spring and damper pushing out of the plane."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checks import check_positive
from .._coords import Coords
from .base import ForceContact, Plane, check_param, param


class PenaltySpring(ForceContact):
    r"""A spring–damper acting along the normal while the body penetrates the plane.

    With gap :math:`g = n·x - c`, penetration :math:`p = \max(-g, 0)` and normal velocity
    :math:`v_n = n·v`, the contact acceleration is

    .. math:: a_c = \frac{1}{m}\,\big(k\,p - c\,v_n\,[g < 0]\big)\,n .

    Its derivative :math:`∂a_c/∂x = -(k/m)\,n n^T` is huge for stiff k and lives only for the
    short time of contact, :math:`\sim π\sqrt{m/k}`, which a step of fixed h can miss
    (see :mod:`diffsim.systems.stiff_contact`).

    Smoothed (``smoothing=τ`` metres): :math:`p_τ = τ\,\mathrm{softplus}(-g/τ)` and the
    damper switch :math:`σ(-g/τ)`; both tend to the hard model as τ → 0, and the force is
    smooth (and slightly active above the plane, within a few τ).

    Attributes:
        plane: the :class:`Plane`.
        k: stiffness in N/m (> 0), or a key of θ.
        c: damping in N·s/m (>= 0), or a key of θ.
        mass: mass of the body in kg (> 0), or a key of θ.
        smoothing: τ in metres, or ``None`` for the hard switch (static).
    """

    plane: Plane
    k: Any = 1e4
    c: Any = 0.0
    mass: Any = 1.0
    smoothing: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_param("k", self.k)
        check_param("c", self.c, 0.0)
        check_param("mass", self.mass)
        if self.smoothing is not None:
            check_positive("smoothing", self.smoothing)

    def accel_coords(self, x: Coords, v: Coords, theta) -> Coords:
        k = param(self.k, theta)
        c = param(self.c, theta)
        m = param(self.mass, theta)
        g = self.plane.gap(x)
        vn = self.plane.normal_velocity(v)
        if self.smoothing is None:
            pen = jnp.maximum(-g, 0.0)
            on = (g < 0).astype(pen.dtype)
        else:
            tau = self.smoothing
            pen = tau * jax.nn.softplus(-g / tau)
            on = jax.nn.sigmoid(-g / tau)
        f = k * pen - c * vn * on
        return self.plane.push(x._map(jnp.zeros_like), f / m)
