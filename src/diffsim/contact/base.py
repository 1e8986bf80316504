"""The contact interface, the plane geometry, and the step wrapper ``WithContact``.

A contact model changes a free-flight step near a plane ``n·x = c`` (the ground, a wall).
Two kinds exist:

* **event contacts** (:class:`EventContact`: restitution impulses, stop-dead) take the free
  step ``s0 -> s1`` of any integrator and correct it when the step crossed the plane;
* **force contacts** (:class:`ForceContact`: penalty springs) add a force to the
  acceleration that the integrator integrates.

:class:`WithContact` wraps an :class:`~diffsim.integrators.Integrator` with any number of
contacts into an ordinary step ``step(state, theta[, u])``, so :func:`diffsim.rollout` and
:func:`diffsim.rollout_jacobian` (``"autodiff"``/``"product"``) work unchanged.

Contact parameters (``e``, ``k``, ``c``, ...) are arrays, or a string naming a key of θ, so
that gradients with respect to them flow through ``theta`` (``Restitution(e="e")`` reads
``theta["e"]``).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .._checks import check_in_range, check_positive
from ..integrators.base import Integrator, _unpack


def param(value: Any, theta: Any) -> Any:
    """A contact parameter: ``theta[value]`` when ``value`` is a string, else ``value``."""
    if isinstance(value, str):
        try:
            return theta[value]
        except (KeyError, TypeError, IndexError):
            raise ValueError(
                f"contact parameter refers to theta[{value!r}], which theta does not have"
            ) from None
    return value


def check_param(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> Any:
    """Validate a concrete contact parameter (strings, i.e. θ keys, are checked by name only)."""
    if isinstance(value, str):
        return value
    if lo is not None and hi is not None:
        check_in_range(name, value, lo, hi)
    elif lo == 0.0:
        check_in_range(name, value, 0.0, float("inf"))
    else:
        check_positive(name, value)
    return jnp.asarray(value)


def safe_div(num, den, fallback=0.0):
    """``num / den`` with a finite value *and gradient* where ``den == 0`` (double where)."""
    zero = den == 0
    safe_den = jnp.where(zero, 1.0, den)
    return jnp.where(zero, fallback, num / safe_den)


def impact_fraction(gap0, gap1):
    r"""Fraction :math:`s^* = g_0 / (g_0 - g_1) \in [0, 1]` of the step at which the linearly
    interpolated gap :math:`g(s) = g_0 + s (g_1 - g_0)` reaches zero.

    Safe at :math:`g_0 = g_1` (value 0, finite gradient): the double-where pattern.
    """
    return jnp.clip(safe_div(gap0, gap0 - gap1), 0.0, 1.0)


class Plane(eqx.Module):
    r"""The half-space boundary :math:`\{x : n·x = c\}`; the free side is :math:`n·x > c`.

    Attributes:
        normal: unit normal n (shape of a position, or a scalar for 1-D states).
        offset: c in metres.

    ``Plane.ground(dim)`` is y = 0 with normal +y (the last axis), ``Plane.wall(x, dim)`` is
    a vertical wall at x approached from the left (normal −x).
    """

    normal: Any = eqx.field(converter=jnp.asarray, default=1.0)
    offset: Any = eqx.field(converter=jnp.asarray, default=0.0)

    def __check_init__(self):
        if not jnp.issubdtype(jnp.result_type(self.normal), jnp.number):
            raise TypeError(f"normal must be numeric, got {self.normal!r}")

    @classmethod
    def ground(cls, dim: int = 1, height: float = 0.0) -> Plane:
        """The ground y = height (last coordinate); ``dim = 1`` for scalar states."""
        n = 1.0 if dim == 1 else jnp.zeros(dim).at[-1].set(1.0)
        return cls(n, height)

    @classmethod
    def wall(cls, x: float, dim: int = 2) -> Plane:
        """A vertical wall at the first coordinate = x, hit from the left (normal −x)."""
        n = jnp.zeros(dim).at[0].set(-1.0)
        return cls(n, -x)

    def gap(self, x):
        """Signed distance :math:`n·x - c` (m); negative means penetration."""
        return jnp.sum(self.normal * x) - self.offset

    def normal_velocity(self, v):
        """:math:`n·v` (m/s); negative means approaching the plane."""
        return jnp.sum(self.normal * v)


def smoothed_contact(plane: Plane, x1, v1, h, tau):
    r"""The smoothed switch shared by the event contacts, at the end-of-step state.

    Returns ``(x, w)``: the position pushed out of the plane by a softplus
    :math:`τ\,\mathrm{softplus}(-g/τ)` (gated by approach speed) and the contact weight
    :math:`w = σ(-g/τ)\,σ(-v_n h/τ)` in (0, 1), which tends to the hard switch as τ → 0.
    """
    g1 = plane.gap(x1)
    wv = jax.nn.sigmoid(-plane.normal_velocity(v1) * h / tau)
    w = jax.nn.sigmoid(-g1 / tau) * wv
    return x1 + tau * jax.nn.softplus(-g1 / tau) * wv * plane.normal, w


def naive_contact(plane: Plane, x1, v1):
    """``(hit, x_projected)``: penetrating and approaching at the end of the step, and the
    end position projected back onto the plane (the naive impulse's correction)."""
    g1 = plane.gap(x1)
    hit = (g1 < 0) & (plane.normal_velocity(v1) < 0)
    return hit, x1 - jnp.minimum(g1, 0.0) * plane.normal


def crossing(plane: Plane, x0, x1):
    """``(crossed, s, x_c)``: the step crossed the plane, at fraction ``s`` of the step
    (linear interpolation of the gap, finite at the switch points), at position ``x_c``."""
    g0, g1 = plane.gap(x0), plane.gap(x1)
    s = impact_fraction(g0, g1)
    return (g0 >= 0) & (g1 < 0), s, x0 + s * (x1 - x0)


class Contact(eqx.Module):
    """Abstract base of every contact model."""

    plane: eqx.AbstractVar[Plane]


class EventContact(Contact):
    """A contact that corrects a free step that crossed the plane."""

    @abc.abstractmethod
    def resolve(self, integrator: Integrator, state0, state1, theta, u) -> tuple[Any, Any]:
        """Given the free step ``state0 -> state1``, return the corrected ``(x', v')``."""


class ForceContact(Contact):
    """A contact that adds an acceleration ``a_c(x, v, θ)`` to the integrator's."""

    @abc.abstractmethod
    def accel(self, x, v, theta):
        """Contact acceleration (m/s²), shaped like ``x``."""


class _AccelWithContacts:
    """``a(x, v, θ[, u]) + Σ a_c(x, v, θ)`` — built inside the step, never hashed."""

    def __init__(self, base, forces):
        self.base = base
        self.forces = forces

    def __call__(self, x, v, theta, *u):
        a = jnp.broadcast_to(jnp.asarray(self.base(x, v, theta, *u)), jnp.shape(x))
        for f in self.forces:
            a = a + f.accel(x, v, theta)
        return a


def with_h(integrator: Integrator, h) -> Integrator:
    """The same integrator with step ``h`` (may be traced, even 0: no re-validation)."""
    return eqx.tree_at(lambda i: i.h, integrator, jnp.asarray(h, jnp.result_type(integrator.h)))


class WithContact(eqx.Module):
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

    @property
    def h(self):
        return self.integrator.h

    def free_integrator(self) -> Integrator:
        """The integrator with the force contacts folded into its acceleration."""
        forces = tuple(c for c in self.contacts if isinstance(c, ForceContact))
        if not forces:
            return self.integrator
        accel = _AccelWithContacts(self.integrator.accel, forces)
        # the analytic accel Jacobian no longer applies: let the integrator jacfwd `accel`
        return dataclasses.replace(self.integrator, accel=accel, accel_jacobian=None)

    def __call__(self, state, theta, u: Any = None):
        x0, v0 = _unpack(state)
        integ = self.free_integrator()
        x1, v1 = integ((x0, v0), theta, u)
        for c in self.contacts:
            if isinstance(c, EventContact):
                x1, v1 = c.resolve(integ, (x0, v0), (x1, v1), theta, u)
        return x1, v1

    def jacobian(self, state, theta, u: Any = None):
        """Per-step Jacobians by autodiff of one step (the contact switch is piecewise)."""
        from jax.flatten_util import ravel_pytree

        s_flat, unravel_s = ravel_pytree(state)
        p_flat, unravel_p = ravel_pytree(theta)

        def f(sf, pf):
            return ravel_pytree(self(unravel_s(sf), unravel_p(pf), u))[0]

        return jax.jacfwd(f, argnums=(0, 1))(s_flat, p_flat)
