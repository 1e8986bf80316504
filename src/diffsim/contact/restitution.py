"""Hard and smoothed restitution impulses at a plane: :math:`v_n^+ = -e\\,v_n^-`."""

from __future__ import annotations

from typing import Any, Literal

import equinox as eqx
import jax.numpy as jnp

from .._checks import check_positive
from .._coords import Coords, where
from .base import (
    EventContact,
    Plane,
    blend,
    check_param,
    crossing,
    edge_weights,
    naive_contact,
    param,
    smoothed_contact,
    with_h,
)


def _check_mode(toi: bool, smoothing: float | None, thin: bool = False) -> None:
    if smoothing is not None:
        check_positive("smoothing", smoothing)
        if toi and not thin:
            raise ValueError(
                "smoothing is a variant of the naive contact: pass toi=False with smoothing "
                f"(got toi=True, smoothing={smoothing!r}); only a thin plane (with an "
                "extent) combines them"
            )


class Restitution(EventContact):
    r"""A restitution impulse at a plane: the normal velocity flips, :math:`v_n^+ = -e v_n^-`.

    Three variants, chosen by the static ``toi`` and whether ``smoothing`` is given:

    * **naive** (``toi=False``): when the free step ends inside the plane (:math:`g_1 < 0`)
      while approaching (:math:`v_n < 0`), reflect the end-of-step velocity and project the
      position back onto the plane. The impact time is lost: the state after the step does
      not depend on *where inside the step* the ball hit, so gradients with respect to the
      initial conditions are wrong (see :mod:`diffsim.systems.bouncing_ball`).
    * **time of impact** (``toi=True``): the gap is interpolated linearly over the step,
      :math:`g(s) = g_0 + s(g_1 - g_0)`, the impact fraction is :math:`s^* = g_0/(g_0 - g_1)`;
      position and velocity are interpolated to :math:`s^*`, the velocity is reflected there,
      and the integrator runs the rest of the step, :math:`(1 - s^*) h`. The state now moves
      smoothly with the impact time, and its gradient is the true one (exact for constant
      velocity, O(h) under gravity).
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
    of the crossing point inside the extent: with ``toi=True`` the velocity at the
    crossing becomes :math:`v_c + w\,(v_c^{refl} - v_c)` and the rest of the step is
    integrated; without, the naive correction of the end state is weighted the same way.

    Attributes:
        plane: the :class:`Plane` (ground or wall).
        e: coefficient of restitution in [0, 1] (or a key of θ).
        toi: locate the impact inside the step (static).
        smoothing: temperature τ > 0 in metres (a number or an array, which may be
            traced), or ``None`` for the hard switch.
        position: the naive rule's position correction (static): ``"project"`` puts the
            body on the plane; ``"reflect"`` mirrors the penetration depth out of it
            (:math:`g^+ = -g_1`, the rule of many particle codes and of ``benchmarks/``).
    """

    plane: Plane
    e: Any = 1.0
    toi: bool = eqx.field(static=True, default=False)
    smoothing: Any = None
    position: Literal["project", "reflect"] = eqx.field(static=True, default="project")

    def __check_init__(self):
        check_param("e", self.e, 0.0, 1.0)
        _check_mode(self.toi, self.smoothing, self.plane.thin)
        if self.position not in ("project", "reflect"):
            raise ValueError(f"position must be 'project' or 'reflect', got {self.position!r}")

    def _reflect(self, v: Coords, e) -> Coords:
        vn = self.plane.normal_velocity(v)
        return self.plane.set_normal(v, jnp.where(vn < 0, -e * vn, vn))

    def resolve(self, integrator, state0, state1, theta, u):
        x0, v0 = state0
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
        crossed, s, x_c = crossing(self.plane, x0, x1)
        v_c = self._reflect(v0 + s * (v1 - v0), e)
        rest = with_h(integrator, (1 - s) * integrator.h)
        x_r, v_r = rest.step_coords(x_c, v_c, theta, u)
        return where(crossed, x_r, x_out), where(crossed, v_r, v_out)

    def _resolve_thin_smoothed(self, integrator, state0, state1, theta, u, e):
        x0, v0 = state0
        x1, v1 = state1
        crossed, s, x_c = crossing(self.plane, x0, x1, within_extent=False)
        _, keep = edge_weights(self.plane, x_c, self.smoothing)
        if self.toi:  # the weighted impulse at the crossing, then the rest of the step
            v_c = v0 + s * (v1 - v0)
            rest = with_h(integrator, (1 - s) * integrator.h)
            x_r, v_r = rest.step_coords(x_c, blend(keep, self._reflect(v_c, e), v_c), theta, u)
            return where(crossed, x_r, x1), where(crossed, v_r, v1)
        target = self.plane.offset
        if self.position == "reflect":
            target = target - self.plane.gap(x1)
        x_hit = self.plane.set_normal(x1, target)
        v_hit = self.plane.set_normal(v1, -e * self.plane.normal_velocity(v1))
        return (
            where(crossed, blend(keep, x_hit, x1), x1),
            where(crossed, blend(keep, v_hit, v1), v1),
        )
