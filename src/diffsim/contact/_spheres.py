r"""Contact between bodies: restitution impulses between N spheres, every pair at once
(:class:`SphereContact`), and where inside a step two spheres met
(:func:`sphere_impact_fraction`).
"""

from __future__ import annotations

from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_choice, check_positive
from .._coords import Coords
from ._plane import check_param, param, safe_div
from .base import EventContact, _check_event_mode


def _safe_norm(d):
    """|d| along the last axis, with a finite gradient at d = 0 (double where)."""
    s = jnp.sum(d * d, axis=-1)
    pos = s > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1.0)), 0.0)


def sphere_impact_fraction(d0, d1, radius_sum):
    r"""Where inside a step two spheres met: ``(crossed, α)``.

    The relative position :math:`d = x_i - x_j` is taken to move linearly across the step,
    :math:`d(α) = d_0 + α (d_1 - d_0)` — exact whenever the two bodies' relative
    acceleration vanishes within the step (free flight, or a uniform field such as
    gravity, for every scheme of :mod:`diffsim.integrators`), first order otherwise. The
    impact is the first root in [0, 1] of :math:`|d(α)| = R`, R the sum of the radii,

    .. math::
        α = \frac{2c}{-b + \sqrt{b^2 - 4ac}},\quad a = |Δ|^2,\ b = 2 d_0·Δ,\
        c = |d_0|^2 - R^2,\ Δ = d_1 - d_0,

    (the cancellation-free form of the smaller root), so its derivative is the exact one
    of the root. ``crossed`` is True where the step starts apart (:math:`c \ge 0`),
    approaches (:math:`b < 0`) and reaches the contact distance within the step — also a
    pass-through that ends apart again (a tunnelling step), which the end-of-step test of
    the naive contact misses. Grazing contacts (:math:`b^2 - 4ac → 0`) have an unbounded
    derivative: the true one of a contact that barely happens.

    Args:
        d0, d1: relative positions at the start and end of the step, shape ``(..., d)``.
        radius_sum: :math:`r_i + r_j` (broadcast against ``d0[..., 0]``).

    Returns:
        ``(crossed, alpha)``, each shaped like ``d0[..., 0]``; α is finite (and its
        gradient too) where nothing was crossed, and meaningless there.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import sphere_impact_fraction
        >>> hit, a = sphere_impact_fraction(jnp.array([-1.0, 0.0]), jnp.array([0.0, 0.0]), 0.5)
        >>> bool(hit), float(a)  # head-on from 1 m apart: touching at 0.5 m, half-way
        (True, 0.5)
    """
    delta = d1 - d0
    a = jnp.sum(delta * delta, axis=-1)
    b = 2 * jnp.sum(d0 * delta, axis=-1)
    c = jnp.sum(d0 * d0, axis=-1) - radius_sum**2
    disc = b * b - 4 * a * c
    # > 0, not >= 0: a pair at rest relative to each other has disc = 0, where √ has an
    # infinite derivative (NaN once multiplied by a zero cotangent); a contact exactly
    # grazing (disc = 0 with motion) is a measure-zero event, counted as a miss
    real = disc > 0
    root = jnp.where(real, jnp.sqrt(jnp.where(real, disc, 1.0)), 0.0)
    alpha = safe_div(2 * c, root - b)
    crossed = (c >= 0) & (b < 0) & real & (alpha <= 1.0)
    return crossed, jnp.where(alpha < 0.0, 0.0, jnp.where(alpha > 1.0, 1.0, alpha))


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The N(N-1)/2 pairs i < j, as two static index arrays."""
    i, j = np.triu_indices(n, 1)
    return i.astype(np.int32), j.astype(np.int32)


class SphereContact(EventContact):
    r"""Restitution impulses between N spheres (2-D discs or 3-D balls), every pair at once.

    The state's positions and velocities are arrays of shape ``(N, d)`` (one row per
    sphere). After the free step of the integrator, every pair (i, j) that met gets the
    impulse of a restitution collision along the line of centres
    :math:`n = (x_i - x_j)/|x_i - x_j|`: with the relative normal velocity
    :math:`v_n = n·(v_i - v_j) < 0` (approaching),

    .. math::
        J = -\frac{(1 + e)\,v_n}{1/m_i + 1/m_j},\quad
        v_i \mathrel{+}= \frac{J}{m_i} n,\quad v_j \mathrel{-}= \frac{J}{m_j} n,

    which conserves momentum for every e and kinetic energy for e = 1 (equal masses:
    :math:`v_i \mathrel{+}= -\tfrac{1+e}{2} v_n n`, DiffTaichi's billiards). Three variants,
    chosen like :class:`~diffsim.contact.Restitution`'s:

    * **naive** (``toi=False``): a pair that overlaps at the end of the free step
      (:math:`|d_1| < r_i + r_j`) while approaching gets the impulse there, from the
      end-of-step velocities. ``position="keep"`` leaves the positions (the impulse at the
      step end: the pair separates over the next steps); ``position="step"`` flies the
      whole step with the new velocity, :math:`x \mathrel{+}= h\,Δv` (DiffTaichi's
      billiards without its TOI term). Either way the state after the step does not
      depend on where inside the step the spheres met.
    * **time of impact** (``toi=True``): the impact fraction α of each pair is located
      inside the step (:func:`sphere_impact_fraction`: the root of
      :math:`|d_0 + α(d_1 - d_0)| = r_i + r_j`), the impulse computed there from the
      velocities at impact (linearly interpolated, exact under a constant acceleration)
      and the rest of the step flown with the new velocity: :math:`v \mathrel{+}= Δv`,
      :math:`x \mathrel{+}= (1 - α) h\,Δv`. For an acceleration that does not depend on
      the velocity this *is* the integrator's rest of the step (every scheme adds
      :math:`τΔv` to x and nothing else to v over a remaining time τ); the impact is
      exact, to round-off, wherever the pair's relative acceleration vanishes (free
      flight, uniform gravity), first order otherwise. A pair that starts the step
      overlapping falls back to the naive rule.
    * **smoothed** (``smoothing=τ`` in metres, with ``toi=False``): the naive switch
      becomes :math:`w = σ(-g_1/τ)\,σ(-v_n h/τ)`, :math:`g_1 = |d_1| - r_i - r_j`, and the
      impulse is :math:`wJ`, as :func:`~diffsim.contact.smoothed_contact` does at a plane
      (tending to the naive model as τ → 0; every pair contributes, however far apart).

    **Simultaneous impacts** are resolved jointly, in one Jacobi sweep: every pair's
    impulse is computed from the same free step and the impulses are summed per sphere
    (as DiffTaichi does), so the result does not depend on any order of the pairs. A
    sphere in several contacts within one step (a break shot's triangle) then gets the
    sum; momentum is conserved exactly, kinetic energy only to the extent the contacts
    do not interact within the step. One impact per pair per step.

    **Cost** grows as N²: the N(N-1)/2 pairs are index arrays built once at trace time
    and every per-pair quantity is computed on all of them together (``vmap``), then
    scattered back per sphere. That is cheapest up to a few hundred spheres (about 10⁵
    pairs per step); beyond that, or for spheres that meet few neighbours, a neighbour
    list (a cell grid rebuilt every few steps, O(N)) would take over; not provided.

    Attributes:
        radius: the spheres' radius (a number > 0, or one per sphere, shape ``(N,)``),
            configuration, not a parameter.
        e: coefficient of restitution in [0, 1] (or a key of θ).
        mass: the spheres' masses, shape ``(N,)`` (> 0, or a key of θ), or ``None`` for
            equal masses.
        toi: locate each pair's impact inside the step (static).
        smoothing: temperature τ > 0 in metres, or ``None`` for the hard switch.
        position: the naive rule's position update (static): ``"keep"`` or ``"step"``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import SphereContact, WithContact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> free = SemiImplicitEuler(lambda x, v, th: jnp.zeros_like(x), h=1.0)
        >>> step = WithContact(free, SphereContact(radius=0.25, e=1.0, toi=True))
        >>> x = jnp.array([[0.0, 0.0], [1.0, 0.0]])  # 1 m apart, the first at 1 m/s
        >>> v = jnp.array([[1.0, 0.0], [0.0, 0.0]])
        >>> x1, v1 = step((x, v), {})  # touch at 0.5 s: the first stops, the second goes on
        >>> x1.tolist(), v1.tolist()
        ([[0.5, 0.0], [1.5, 0.0]], [[0.0, 0.0], [1.0, 0.0]])
    """

    radius: Any
    e: Any = 1.0
    mass: Any = None
    toi: bool = eqx.field(static=True, default=False)
    smoothing: Any = None
    position: Literal["keep", "step"] = eqx.field(static=True, default="keep")

    def __check_init__(self):
        check_positive("radius", self.radius)
        if jnp.ndim(self.radius) > 1:
            raise ValueError(
                f"radius must be a number or one per sphere (shape (N,)), got shape "
                f"{jnp.shape(self.radius)}"
            )
        check_param("e", self.e, 0.0, 1.0)
        if self.mass is not None:
            check_param("mass", self.mass)
        _check_event_mode(self.toi, self.smoothing)
        check_choice("position", self.position, ("keep", "step"))

    def _check_state(self, x) -> tuple[int, int]:
        if jnp.ndim(x) != 2 or jnp.shape(x)[1] not in (2, 3) or jnp.shape(x)[0] < 2:
            raise ValueError(
                "SphereContact needs positions of shape (N, d), N >= 2 spheres in d = 2 or 3 "
                f"dimensions, got shape {jnp.shape(x)}"
            )
        n, d = jnp.shape(x)
        for name, value in (("radius", self.radius), ("mass", self.mass)):
            if value is not None and not isinstance(value, str) and jnp.ndim(value) == 1:
                if jnp.shape(value)[0] != n:
                    raise ValueError(
                        f"{name} has {jnp.shape(value)[0]} entries for {n} spheres: give one "
                        "per sphere (shape (N,)) or a single number"
                    )
        return n, d

    def resolve(self, integrator, state0, state1, theta, u):
        x0, v0 = (c.stack() for c in state0)
        x1, v1 = (c.stack() for c in state1)
        n, _ = self._check_state(x1)
        i, j = _pairs(n)
        e = param(self.e, theta)
        inv = (
            jnp.ones(n, jnp.result_type(x1)) if self.mass is None else 1.0 / param(self.mass, theta)
        )
        inv = jnp.broadcast_to(inv, (n,))
        radius = jnp.broadcast_to(jnp.asarray(self.radius, jnp.result_type(x1)), (n,))
        h = integrator.h
        pair = jax.vmap(
            lambda d0, d1, w0, w1, rs, inv_i, inv_j: self._pair(
                d0, d1, w0, w1, rs, inv_i, inv_j, e, h
            )
        )
        impulse, after = pair(
            x0[i] - x0[j], x1[i] - x1[j], v0[i] - v0[j], v1[i] - v1[j],
            radius[i] + radius[j], inv[i], inv[j],
        )  # fmt: skip
        # per sphere: Σ over its pairs, +J n on i and -J n on j, divided by its mass
        dv = jnp.zeros_like(v1).at[i].add(impulse).at[j].add(-impulse) * inv[:, None]
        dx = jnp.zeros_like(x1).at[i].add(after[:, None] * impulse)
        dx = dx.at[j].add(-after[:, None] * impulse) * inv[:, None]
        return Coords.split(x1 + dx), Coords.split(v1 + dv)

    def _pair(self, d0, d1, w0, w1, radius_sum, inv_i, inv_j, e, h):
        """One pair's impulse vector J n (on i; -J n on j) and the time τ it acts for
        within the step (the position moves by τ Δv)."""
        tau_naive = h if self.position == "step" else 0.0
        dist1 = _safe_norm(d1)
        n1 = d1 / jnp.where(dist1 > 0, dist1, 1.0)
        vn1 = jnp.dot(n1, w1)
        scale = -(1 + e) / (inv_i + inv_j)
        if self.smoothing is not None:
            tau = self.smoothing
            w = jax.nn.sigmoid(-(dist1 - radius_sum) / tau) * jax.nn.sigmoid(-vn1 * h / tau)
            return w * scale * vn1 * n1, jnp.asarray(tau_naive, d1.dtype)
        hit = (dist1 < radius_sum) & (vn1 < 0)
        impulse = jnp.where(hit, scale * vn1, 0.0) * n1
        if not self.toi:
            return impulse, jnp.asarray(tau_naive, d1.dtype)
        crossed, alpha = sphere_impact_fraction(d0, d1, radius_sum)
        d_c = d0 + alpha * (d1 - d0)
        dist_c = _safe_norm(d_c)
        n_c = d_c / jnp.where(dist_c > 0, dist_c, 1.0)
        vn_c = jnp.dot(n_c, w0 + alpha * (w1 - w0))
        hit_c = crossed & (vn_c < 0)
        impulse_c = jnp.where(hit_c, scale * vn_c, 0.0) * n_c
        after = jnp.where(crossed, (1 - alpha) * h, tau_naive)
        return jnp.where(crossed, impulse_c, impulse), after
