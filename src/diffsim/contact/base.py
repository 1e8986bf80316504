"""The contact bases: :class:`Contact` and its two kinds.

A contact model changes a free-flight step near a plane ``n·x = c`` (the ground, a wall;
:class:`~diffsim.contact.Plane`) or between bodies (:class:`~diffsim.contact.SphereContact`).
Two kinds exist:

* **event contacts** (:class:`EventContact`: restitution impulses, stop-dead, sphere
  collisions) take the free step ``s0 -> s1`` of any integrator and correct it where the
  step met a contact (:class:`PlaneEventContact` for those at a plane);
* **force contacts** (:class:`ForceContact`: penalty springs) add a force to the
  acceleration that the integrator integrates.

:class:`~diffsim.contact.WithContact` wraps an :class:`~diffsim.integrators.Integrator` with
any number of contacts into an ordinary step ``step(state, theta[, u])``, so
:func:`diffsim.rollout` and :func:`diffsim.rollout_jacobian` work unchanged. Contact
parameters (``e``, ``k``, ``c``, ...) are arrays, or a string naming a key of θ, so that
gradients with respect to them flow through ``theta`` (``Restitution(e="e")`` reads
``theta["e"]``).
"""

from __future__ import annotations

import abc
from typing import Literal

import equinox as eqx

from .._checks import check_bool, check_choice, check_positive
from .._coords import Coords
from ..integrators.base import Integrator
from ._impact import locate_impact
from ._plane import Plane, _coords


class Contact(eqx.Module):
    """Abstract base of every contact model.

    Examples:
        >>> from diffsim.contact import Contact, EventContact, ForceContact, PenaltySpring, StopDead
        >>> issubclass(StopDead, EventContact), issubclass(PenaltySpring, ForceContact)
        (True, True)
        >>> issubclass(EventContact, Contact) and issubclass(ForceContact, Contact)
        True
    """


class EventContact(Contact):
    """A contact that corrects a free step where it met the contact (crossed a plane, or
    brought two bodies together).

    ``resolve`` works on the coordinate view (:class:`~diffsim.contact.Coords`: one array
    per coordinate, with ``+``, ``-``, scaling and :func:`~diffsim.contact.where`), so that a
    batched step compiles to one loop, like a hand-written struct-of-arrays step.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import EventContact, Plane, Restitution, WithContact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> bounce = Restitution(Plane.ground(1), e=0.5, toi=True)
        >>> isinstance(bounce, EventContact)  # it corrects the free step that crossed the plane
        True
        >>> step = WithContact(SemiImplicitEuler(lambda x, v, th: 0.0 * x, h=1.0), bounce)
        >>> [round(float(c), 6) for c in step((jnp.array(0.3), jnp.array(-0.4)), {"g": 0.0})]
        [0.05, 0.2]
    """

    @abc.abstractmethod
    def resolve(
        self, integrator: Integrator, state0: tuple[Coords, Coords], state1, theta, u
    ) -> tuple[Coords, Coords]:
        """Given the free step ``state0 -> state1`` (coordinates), return the corrected
        ``(x', v')`` (coordinates)."""


class PlaneEventContact(EventContact):
    """An event contact at a :class:`~diffsim.contact.Plane`, which locates its impact
    with :func:`~diffsim.contact.locate_impact` (:class:`~diffsim.contact.Restitution`,
    :class:`~diffsim.contact.StopDead`).

    Examples:
        >>> from diffsim.contact import PlaneEventContact, Restitution, SphereContact
        >>> issubclass(Restitution, PlaneEventContact), issubclass(SphereContact, PlaneEventContact)
        (True, False)
    """

    plane: eqx.AbstractVar[Plane]
    location: eqx.AbstractVar[Literal["substep", "linear"]]
    """How a time-of-impact correction locates the impact: ``"substep"`` or ``"linear"``."""

    def locate(self, integrator, state0, state1, theta, u, within_extent: bool = True):
        """Where inside the free step the body met this contact's plane
        (:func:`~diffsim.contact.locate_impact` with the contact's ``plane`` and
        ``location``)."""
        return locate_impact(
            self.plane, integrator, state0, state1, theta, u,
            location=self.location, within_extent=within_extent,
        )  # fmt: skip


class ForceContact(Contact):
    """A contact that adds an acceleration ``a_c(x, v, θ)`` to the integrator's.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import ForceContact, PenaltySpring, Plane
        >>> spring = PenaltySpring(Plane.ground(1), k=100.0)
        >>> a = spring.accel(jnp.array(-0.01), jnp.array(0.0), {})  # k · 1 cm / 1 kg
        >>> isinstance(spring, ForceContact), float(a)
        (True, 1.0)
    """

    plane: eqx.AbstractVar[Plane]

    @abc.abstractmethod
    def accel_coords(self, x: Coords, v: Coords, theta) -> Coords:
        """Contact acceleration (m/s²) on the coordinate view."""

    def accel(self, x, v, theta):
        """Contact acceleration (m/s²), shaped like ``x`` (arrays in, arrays out)."""
        return self.accel_coords(_coords(x), _coords(v), theta).stack()


_LOCATIONS = ("substep", "linear")


def _check_event_mode(
    toi: bool, smoothing: float | None, thin: bool = False, location: str = "substep"
) -> None:
    """Check an event contact's mode: ``toi`` a bool, ``location`` one of
    ``"substep"``/``"linear"``, ``smoothing`` > 0 and, on a half-space, not with ``toi``."""
    check_bool("toi", toi)
    check_choice("location", location, _LOCATIONS)
    if smoothing is not None:
        check_positive("smoothing", smoothing)
        if toi and not thin:
            raise ValueError(
                "smoothing is a variant of the naive contact: pass toi=False with smoothing "
                f"(got toi=True, smoothing={smoothing!r}); only a thin plane (with an "
                "extent) combines them"
            )
