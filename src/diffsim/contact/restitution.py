"""Hard and smoothed restitution impulses at a plane: :math:`v_n^+ = -e\\,v_n^-`."""

from __future__ import annotations

from typing import Any, Literal

import equinox as eqx
import jax.numpy as jnp

from .._checks import check_choice
from .._coords import Coords, where
from ._impact import with_h
from ._plane import Plane, check_param, check_plane, crossing, param
from ._switches import blend, edge_weights, naive_contact, smoothed_contact
from .base import PlaneEventContact, _check_event_mode


class Restitution(PlaneEventContact):
    r"""A restitution impulse at a plane: the normal velocity flips, :math:`v_n^+ = -e v_n^-`.

    Three variants, chosen by the static ``toi`` and whether ``smoothing`` is given:

    * **naive** (``toi=False``): when the free step ends inside the plane (:math:`g_1 < 0`)
      while approaching (:math:`v_n < 0`), reflect the end-of-step velocity and project the
      position back onto the plane. The impact time is lost: the state after the step does
      not depend on *where inside the step* the ball hit, so gradients with respect to the
      initial conditions are wrong (see :mod:`diffsim.systems.bouncing_ball`).
    * **time of impact** (``toi=True``): the impact is located inside the step
      (:func:`~diffsim.contact.locate_impact`): by default at the root α of the gap after the
      integrator's own partial step of length α h (``location="substep"``: safeguarded
      Newton, derivative by the implicit-function theorem), or at the chord
      :math:`α = g_0/(g_0 - g_1)` with position and velocity interpolated linearly
      (``location="linear"``). The velocity is reflected there and the integrator runs the
      rest of the step, :math:`(1 - α) h`. The state moves smoothly with the impact time
      and its gradient is the true one, to the integrator's order with ``"substep"`` (to
      round-off for velocity Verlet under constant gravity, however many bounces; first
      order for semi-implicit Euler), exact for constant velocity and first order under
      gravity with ``"linear"``, whose error, though, does not fall with h for a scheme of
      higher order (the chord misplaces the impact by O(h²) per bounce).
    * **smoothed** (``smoothing=τ`` in metres): the switch becomes a sigmoid and the
      projection a softplus,

      .. math::
          w = σ(-g_1/τ)\,σ(-v_n h/τ),\quad v^+ = v - (1 + e)\,w\,v_n n,\quad
          x^+ = x + τ\,\mathrm{softplus}(-g_1/τ)\,σ(-v_n h/τ)\,n,

      which tends to the naive model as τ → 0 and is smooth for τ > 0.

    A step that starts inside the plane falls back to the naive rule. One impact per step.

    **Thin planes** (a :class:`Plane` with an extent): only a step that crosses the plane
    within the extent is an impact, for every variant (no half-space fallback). With
    ``smoothing=τ`` the impulse is weighted by :math:`w = σ(m(x_c)/τ)`, m the signed margin
    of the crossing point inside the extent: with ``toi=True`` the bounced step (reflected
    at the crossing, then the rest of the step) and the free step are blended,
    :math:`s^+ = s_{bounce} + (1 - w)(s_1 - s_{bounce})` — for an acceleration that does
    not depend on v and semi-implicit Euler with ``location="linear"`` the same as
    reflecting the fraction w of the velocity at the crossing, and w = 0 is the free step
    exactly for any integrator; without ``toi``, the naive correction of the end state is
    weighted the same way.

    Attributes:
        plane: the :class:`Plane` (ground or wall).
        e: coefficient of restitution in [0, 1] (or a key of θ).
        toi: locate the impact inside the step (static).
        smoothing: temperature τ > 0 in metres (a number or an array, which may be
            traced), or ``None`` for the hard switch.
        location: how ``toi`` locates the impact (static): ``"substep"`` (root of the
            integrator's partial step, the default) or ``"linear"`` (the chord).
        position: the naive rule's position correction (static): ``"project"`` puts the
            body on the plane; ``"reflect"`` mirrors the penetration depth out of it
            (:math:`g^+ = -g_1`, the rule of many particle codes and of ``benchmarks/``).

    Examples:
        >>> from diffsim import rollout
        >>> from diffsim.contact import Plane, Restitution, WithContact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> import jax
        >>> free = SemiImplicitEuler(lambda x, v, th: 0.0 * x, h=0.01)
        >>> def y_T(y0, toi):  # from y0 at −1 m/s onto the ground, height at 2 s
        ...     step = WithContact(free, Restitution(Plane.ground(), e=0.8, toi=toi))
        ...     return rollout(step, (y0, -1.0), {"g": 0.0}, 200, trajectory=False)[0]
        >>> [round(float(jax.grad(y_T)(1.0, toi)), 4) + 0.0 for toi in (True, False)]  # exact: −e
        [-0.8, 0.0]
    """

    plane: Plane
    e: Any = 1.0
    toi: bool = eqx.field(static=True, default=False)
    smoothing: Any = None
    position: Literal["project", "reflect"] = eqx.field(static=True, default="project")
    location: Literal["substep", "linear"] = eqx.field(static=True, default="substep")

    def __check_init__(self):
        check_plane(self.plane)
        check_param("e", self.e, 0.0, 1.0)
        _check_event_mode(self.toi, self.smoothing, self.plane.thin, self.location)
        check_choice("position", self.position, ("project", "reflect"))

    def _reflect(self, v: Coords, e) -> Coords:
        vn = self.plane.normal_velocity(v)
        return self.plane.set_normal(v, jnp.where(vn < 0, -e * vn, vn))

    def resolve(self, integrator, state0, state1, theta, u):
        x0, _ = state0
        x1, v1 = state1
        e = param(self.e, theta)
        if self.smoothing is not None and self.plane.thin:
            return self._resolve_thin_smoothed(integrator, state0, state1, theta, u, e)
        if self.smoothing is not None:
            x, w = smoothed_contact(self.plane, x1, v1, integrator.h, self.smoothing)
            return x, self.plane.push(v1, -(1 + e) * w * self.plane.normal_velocity(v1))
        hit, x_proj = naive_contact(self.plane, x1, v1, self.position == "reflect", x0=x0)
        x_out = where(hit, x_proj, x1)
        v_out = where(hit, self.plane.set_normal(v1, -e * self.plane.normal_velocity(v1)), v1)
        if not self.toi:
            return x_out, v_out
        imp = self.locate(integrator, state0, state1, theta, u)
        rest = with_h(integrator, (1 - imp.fraction) * integrator.h)
        x_r, v_r = rest.step_coords(imp.x, self._reflect(imp.v, e), theta, u)
        return where(imp.crossed, x_r, x_out), where(imp.crossed, v_r, v_out)

    def _resolve_thin_smoothed(self, integrator, state0, state1, theta, u, e):
        x0, _ = state0
        x1, v1 = state1
        if self.toi:  # the bounce at the crossing and the free step, weighted
            imp = self.locate(integrator, state0, state1, theta, u, within_extent=False)
            _, keep = edge_weights(self.plane, imp.x, self.smoothing)
            rest = with_h(integrator, (1 - imp.fraction) * integrator.h)
            x_r, v_r = rest.step_coords(imp.x, self._reflect(imp.v, e), theta, u)
            return (
                where(imp.crossed, blend(keep, x_r, x1), x1),
                where(imp.crossed, blend(keep, v_r, v1), v1),
            )
        crossed, _, x_c = crossing(self.plane, x0, x1, within_extent=False)
        _, keep = edge_weights(self.plane, x_c, self.smoothing)
        target = self.plane.offset
        if self.position == "reflect":
            target = target - self.plane.gap(x1)
        x_hit = self.plane.set_normal(x1, target)
        v_hit = self.plane.set_normal(v1, -e * self.plane.normal_velocity(v1))
        return (
            where(crossed, blend(keep, x_hit, x1), x1),
            where(crossed, blend(keep, v_hit, v1), v1),
        )
