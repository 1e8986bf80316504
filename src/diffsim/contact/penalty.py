"""Penalty-spring contact: a stiff spring and damper pushing out of the plane."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive
from .._coords import Coords, along
from ._plane import Plane, check_param, check_plane, param
from .base import ForceContact


def _kinematic(indices: Any) -> tuple[int, ...]:
    """``kinematic`` as a tuple of ints: an int or a sequence of ints, nothing else (a string
    or a float index is refused, not converted)."""
    if isinstance(indices, int | np.integer) and not isinstance(indices, bool):
        indices = (indices,)
    if isinstance(indices, str | bytes) or not isinstance(indices, tuple | list | range):
        raise TypeError(f"kinematic must be a tuple of coordinate indices, got {indices!r}")
    out = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int | np.integer):
            raise TypeError(f"kinematic must be a tuple of integer indices, got {indices!r}")
        out.append(int(i))
    return tuple(out)


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

    **Two bodies.** A plane in relative coordinates couples two bodies: for positions
    ``(x_a, x_b)`` the normal ``(-1, +1)`` makes the gap :math:`x_b - x_a` and the force push
    them apart. Coordinates listed in ``kinematic`` are driven bodies (infinite mass, e.g. a
    pusher whose velocity is a control): the force does not act on them.

    The plane must be a half-space (a thin plane has no inside to penetrate).

    Attributes:
        plane: the :class:`Plane`.
        k: stiffness in N/m (> 0), or a key of θ.
        c: damping in N·s/m (>= 0), or a key of θ.
        mass: mass of the body in kg (> 0), or a key of θ.
        smoothing: τ in metres (> 0; a number or an array, which may be traced: anneal it
            inside a jitted optimisation), or ``None`` for the hard switch.
        kinematic: indices of position coordinates the force does not act on (static).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> from diffsim.contact import PenaltySpring, Plane, WithContact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> gravity = lambda x, v, th: -th["g"] + 0.0 * x
        >>> spring = PenaltySpring(Plane.ground(), k=1e4)
        >>> step = WithContact(SemiImplicitEuler(gravity, h=1e-3), spring)
        >>> y, v = rollout(step, (0.5, 0.0), {"g": 9.81}, 500, trajectory=False)
        >>> bool(v > 0), bool(y > -0.01)  # bounced back up, after a millimetre-scale penetration
        (True, True)
    """

    plane: Plane
    k: Any = 1e4
    c: Any = 0.0
    mass: Any = 1.0
    smoothing: Any = None
    kinematic: tuple[int, ...] = eqx.field(static=True, converter=_kinematic, default=())

    def __check_init__(self):
        check_plane(self.plane)
        check_param("k", self.k)
        check_param("c", self.c, 0.0)
        check_param("mass", self.mass)
        if self.smoothing is not None:
            check_positive("smoothing", self.smoothing)
        if self.plane.thin:
            raise ValueError(
                "PenaltySpring needs a half-space plane: a thin plane (with an extent) has no "
                "inside to penetrate"
            )
        n = len(self.plane.normal)
        for i in self.kinematic:
            if i < 0 or (n > 1 and i >= n):
                raise ValueError(f"kinematic index {i} out of range for a normal of size {n}")

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
        zeros = x._map(jnp.zeros_like)
        if not self.kinematic:
            return self.plane.push(zeros, f / m)
        w = tuple(0.0 if i in self.kinematic else wi for i, wi in enumerate(self.plane._weights(x)))
        return along(w, f / m, zeros)
