""":class:`WithContact`: an integrator and its contacts as one ordinary step, and
:func:`with_h` (the same integrator at another step).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._coords import Coords
from .._step import AbstractStep
from ..integrators.base import CoordinateAcceleration, Integrator, _unpack
from ._plane import _coords
from .base import Contact, EventContact, ForceContact


class _AccelWithContacts(CoordinateAcceleration):
    """``a(x, v, θ[, u]) + Σ a_c(x, v, θ)`` — built inside the step, never hashed."""

    def __init__(self, base, forces):
        self.base = base
        self.forces = forces

    def __call__(self, x, v, theta, *u):
        return self.on_coords(_coords(x), _coords(v), theta, u[0] if u else None).stack()

    def on_coords(self, x: Coords, v: Coords, theta, u) -> Coords:
        base = self.base(x.stack(), v.stack(), theta, *(() if u is None else (u,)))
        a = x.like(_coords(jnp.broadcast_to(jnp.asarray(base), jnp.shape(x.stack()))).parts)
        for f in self.forces:
            a = a + f.accel_coords(x, v, theta)
        return a


class WithContact(AbstractStep):
    r"""An integrator step with contacts: ``step(state, theta[, u]) -> state``.

    Force contacts are added to the acceleration; then the free step is taken; then each
    event contact corrects it in order. State is ``(x, v)`` as for integrators.

    Attributes:
        integrator: any :class:`~diffsim.integrators.Integrator`.
        contacts: a tuple of :class:`Contact` (or a single one).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> from diffsim.contact import Restitution, WithContact, Plane
        >>> free = SemiImplicitEuler(lambda x, v, th: 0.0 * x, h=0.1)
        >>> step = WithContact(free, Restitution(Plane.ground(), e=0.5, toi=True))
        >>> x1, v1 = step((jnp.asarray(0.05), jnp.asarray(-1.0)), {})
        >>> round(float(x1), 6), round(float(v1), 6)  # hits at 0.05 s, rises 0.5 m/s for 0.05 s
        (0.025, 0.5)
    """

    integrator: Integrator
    contacts: tuple = eqx.field(converter=lambda c: c if isinstance(c, tuple) else (c,))

    def __check_init__(self):
        if not isinstance(self.integrator, Integrator):
            raise TypeError(f"integrator must be a diffsim Integrator, got {self.integrator!r}")
        for c in self.contacts:
            if not isinstance(c, Contact):
                raise TypeError(f"contacts must be Contact models, got {c!r}")

    # the doctor leaves contact steps to its jump and stiffness flags: a stepped contact
    # moves its onset with h by construction (see diffsim.doctor's halve_time_step)
    time_step_refinable: ClassVar[bool] = False
    has_jacobian: ClassVar[bool] = True

    @property
    def h(self):
        return self.integrator.h

    # a property where integrators declare a class variable: the order is the integrator's
    @property
    def order(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        """The integrator's order of accuracy."""
        return self.integrator.order

    def free_integrator(self) -> Integrator:
        """The integrator with the force contacts folded into its acceleration."""
        forces = tuple(c for c in self.contacts if isinstance(c, ForceContact))
        if not forces:
            return self.integrator
        accel = _AccelWithContacts(self.integrator.accel, forces)
        # the analytic accel Jacobian no longer applies: let the integrator jacfwd `accel`
        return dataclasses.replace(self.integrator, accel=accel, accel_jacobian=None)

    def __call__(self, state, theta, u: Any = None):
        x, v = _unpack(state)
        x0, v0 = Coords.split(x), Coords.split(v)
        integ = self.free_integrator()
        x1, v1 = integ.step_coords(x0, v0, theta, u)
        for c in self.contacts:
            if isinstance(c, EventContact):
                x1, v1 = c.resolve(integ, (x0, v0), (x1, v1), theta, u)
        return x1.stack(), v1.stack()

    def jacobian(self, state, theta, u: Any = None):
        """Per-step Jacobians by autodiff of one step (the contact switch is piecewise)."""
        from jax.flatten_util import ravel_pytree

        s_flat, unravel_s = ravel_pytree(state)
        p_flat, unravel_p = ravel_pytree(theta)

        def f(sf, pf):
            return ravel_pytree(self(unravel_s(sf), unravel_p(pf), u))[0]

        return jax.jacfwd(f, argnums=(0, 1))(s_flat, p_flat)
