"""The inelastic "stop dead" contact of the article's wall: all velocity vanishes."""

from __future__ import annotations

from typing import Any, Literal

import equinox as eqx
import jax.numpy as jnp

from .._coords import where
from ._impact import with_h
from ._plane import Plane, check_plane, crossing
from ._switches import blend, edge_weights, naive_contact, smoothed_contact
from .base import PlaneEventContact, _check_event_mode


class StopDead(PlaneEventContact):
    r"""Perfectly inelastic, sticking contact: on impact the body stops, :math:`v^+ = 0`.

    * naive (``toi=False``): a step ending inside the plane while approaching is projected
      back onto the plane and its velocity zeroed;
    * ``toi=True``: the body stops at the impact point located inside the step
      (:func:`~diffsim.contact.locate_impact`: by default the integrator's own partial step
      to the root α of the gap, ``location="substep"``, exact for velocity Verlet under
      constant gravity; or the chord :math:`x_0 + α(x_1 - x_0)`,
      :math:`α = g_0/(g_0 - g_1)`, ``location="linear"``), put exactly on the plane (its
      normal coordinate is the plane's, so it does not depend on the initial conditions),
      so its rest position moves smoothly with the initial conditions; the rest of the
      step, :math:`(1 − α) h`, is then integrated from rest there, and kept when the forces
      pull the body off the plane within it (a spring: the time of impact is not rounded
      to whole steps, so the loss has no artificial plateau), else the body stays stopped;
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
    its motion. With ``toi=True`` the stopped step (stopped at the crossing, at fraction α
    of the step, then the rest of the step, :math:`(1 - α) h`, from rest) and the free step
    are blended, :math:`s^+ = s_{stop} + (1 - w)(s_1 - s_{stop})`: for an acceleration that
    does not depend on v and semi-implicit Euler with ``location="linear"`` the same as
    :math:`(x_c, v_c) → (x_c, (1 - w) v_c)` at the crossing, continuous when the crossing
    moves from one step to the next, and w = 0 is the free step exactly for any
    integrator; without it the end of the step is blended,
    :math:`x^+ = x_{hit} + (1 - w)(x_1 - x_{hit})`, :math:`v^+ = (1 - w) v_1`. A body
    crossing just below the top keeps a little of its motion, one crossing just over it
    loses a little; as τ → 0 it tends to the hard thin contact (up to the rest of the
    stopping step, which the stopped body spends in free fall along the plane, and the
    sticking, which the smoothed contact does not do).

    Attributes:
        plane: the :class:`Plane`.
        toi: locate the impact inside the step (static).
        smoothing: temperature τ > 0 in metres (a number or an array, which may be
            traced), or ``None``.
        location: how ``toi`` locates the impact (static): ``"substep"`` (the default) or
            ``"linear"``, as for :class:`~diffsim.contact.Restitution`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> from diffsim.contact import Plane, StopDead, WithContact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> step = WithContact(SemiImplicitEuler(lambda x, v, th: 0.0 * x, h=0.1),
        ...                    StopDead(Plane.wall(6.0, height=2.0), toi=True))
        >>> x, v = rollout(step, (jnp.array([5.0, 1.0]), jnp.array([4.0, 0.0])), {"g": 0.0}, 10,
        ...                trajectory=False)
        >>> [round(float(c), 6) for c in x], v.tolist()  # stopped dead where it hit the wall
        ([6.0, 1.0], [0.0, 0.0])
    """

    plane: Plane
    toi: bool = eqx.field(static=True, default=False)
    smoothing: Any = None
    location: Literal["substep", "linear"] = eqx.field(static=True, default="substep")

    def __check_init__(self):
        check_plane(self.plane)
        _check_event_mode(self.toi, self.smoothing, self.plane.thin, self.location)

    def resolve(self, integrator, state0, state1, theta, u):
        x0, _ = state0
        x1, v1 = state1
        plane = self.plane
        if self.smoothing is not None and plane.thin:
            if self.toi:  # the step stopped at the crossing and the free step, weighted
                imp = self.locate(integrator, state0, state1, theta, u, within_extent=False)
                _, keep = edge_weights(plane, imp.x, self.smoothing)
                rest = with_h(integrator, (1 - imp.fraction) * integrator.h)
                x_r, v_r = rest.step_coords(
                    plane.set_normal(imp.x, plane.offset), 0.0 * imp.v, theta, u
                )
                return (
                    where(imp.crossed, blend(keep, x_r, x1), x1),
                    where(imp.crossed, blend(keep, v_r, v1), v1),
                )
            crossed, _, x_c = crossing(plane, x0, x1, within_extent=False)
            _, keep = edge_weights(plane, x_c, self.smoothing)
            x_hit = plane.set_normal(x1, plane.offset)
            return where(crossed, blend(keep, x_hit, x1), x1), where(crossed, keep * v1, v1)
        if self.smoothing is not None:
            x, w = smoothed_contact(plane, x1, v1, integrator.h, self.smoothing)
            return x, (1 - w) * v1
        hit, x_proj = naive_contact(plane, x1, v1, x0=x0)
        x_out = where(hit, x_proj, x1)
        stopped = jnp.logical_or(hit, False)
        released = jnp.zeros((), bool)
        v_rest = v1
        if self.toi:
            imp = self.locate(integrator, state0, state1, theta, u)
            x_c = plane.set_normal(imp.x, plane.offset)
            # the rest of the step, (1 − α) h, from rest at the impact point: a force that
            # pulls the body off the plane (a spring) acts for it, so the time of impact is
            # not rounded to whole steps; one that presses it in leaves it stopped there
            rest = with_h(integrator, (1 - imp.fraction) * integrator.h)
            x_r, v_r = rest.step_coords(x_c, 0.0 * imp.v, theta, u)
            leaves = imp.crossed & (plane.gap(x_r) > 0)
            x_out = where(imp.crossed, where(leaves, x_r, x_c), x_out)
            stopped = (stopped | imp.crossed) & ~leaves
            released, v_rest = leaves, v_r
        stick = (plane.gap(x0) == 0) & (plane.gap(x1) == 0) & plane.within(x0)
        x_out = where(stick, x0, x_out)
        stopped = stopped | stick
        released = released & ~stick
        v_out = where(released, v_rest, v1)
        return x_out, v_out._map(lambda p: jnp.where(stopped, jnp.zeros_like(p), p))
