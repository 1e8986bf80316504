"""The smoothing switches of contact: the naive (hard) and smoothed penetration tests,
and the weights and blend of a thin plane's smoothed edge.
"""

from __future__ import annotations

import jax

from .._coords import Coords
from ._plane import Plane, crossing


def smoothed_contact(plane: Plane, x1: Coords, v1: Coords, h, tau):
    r"""The smoothed switch shared by the event contacts on a half-space, at the
    end-of-step state.

    Returns ``(x, w)``: the position pushed out of the plane by a softplus
    :math:`τ\,\mathrm{softplus}(-g/τ)` (gated by approach speed) and the contact weight
    :math:`w = σ(-g/τ)\,σ(-v_n h/τ)` in (0, 1), which tends to the hard switch as τ → 0.
    A thin plane has no inside to smooth: see :func:`edge_weights`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane, smoothed_contact
        >>> x, w = smoothed_contact(Plane.ground(2), Coords.split(jnp.array([0.0, -0.01])),
        ...                         Coords.split(jnp.array([0.0, -1.0])), 0.01, 1e-3)
        >>> round(float(w), 3), abs(float(x.stack()[1])) < 1e-3  # in contact, pushed out
        (1.0, True)
    """
    if plane.thin:
        raise ValueError("smoothed_contact needs a half-space plane; thin planes use edge_weights")
    g1 = plane.gap(x1)
    wv = jax.nn.sigmoid(-plane.normal_velocity(v1) * h / tau)
    w = jax.nn.sigmoid(-g1 / tau) * wv
    return plane.push(x1, tau * jax.nn.softplus(-g1 / tau) * wv), w


def naive_contact(
    plane: Plane, x1: Coords, v1: Coords, mirror: bool = False, x0: Coords | None = None
):
    """``(hit, x_corrected)``: the naive rule's switch and the end position moved out of the
    plane (the naive impulse's correction): projected onto it, or with ``mirror``
    reflected (the penetration depth becomes a height above it).

    On a half-space the switch is "inside at the end of the step and approaching"; on a
    thin plane it is "the step crossed the plane within its extent, approaching", which
    needs the start of the step ``x0``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane, naive_contact
        >>> hit, x = naive_contact(Plane.ground(2), Coords.split(jnp.array([0.0, -0.01])),
        ...                        Coords.split(jnp.array([0.0, -1.0])), mirror=True)
        >>> bool(hit), [round(float(c), 4) for c in x.stack()]  # reflected: 1 cm above
        (True, [0.0, 0.01])
    """
    g1 = plane.gap(x1)
    approaching = plane.normal_velocity(v1) < 0
    if plane.thin:
        if x0 is None:
            raise ValueError("naive_contact on a thin plane needs the start of the step, x0")
        hit = crossing(plane, x0, x1)[0] & approaching
    else:
        hit = (g1 < 0) & approaching
    target = plane.offset - g1 if mirror else plane.offset
    return hit, plane.set_normal(x1, target)


def edge_weights(plane: Plane, x_c: Coords, tau):
    r"""``(w, 1 - w)``: the smoothed "within the extent" switch of a thin plane at the
    crossing point, :math:`w = σ(m(x_c)/τ)` with m the signed margin inside the extent
    (:meth:`Plane.margin`), τ in metres. Both weights are computed directly (no
    cancellation in :math:`1 - w` when w is close to 1). As τ → 0, w tends to the hard
    test :meth:`Plane.within` away from the edge.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane
        >>> from diffsim.contact._switches import edge_weights
        >>> wall = Plane.wall(6.0, height=2.0)
        >>> w, keep = edge_weights(wall, Coords.split(jnp.array([6.0, 2.0])), 0.1)  # at the top
        >>> float(w), float(keep)
        (0.5, 0.5)
    """
    m = plane.margin(x_c) / tau
    return jax.nn.sigmoid(m), jax.nn.sigmoid(-m)


def blend(w_keep, hit: Coords, free: Coords) -> Coords:
    """``hit + w_keep (free - hit)``: a contact's correction weighted by ``1 - w_keep``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords
        >>> from diffsim.contact._switches import blend
        >>> hit, free = Coords.split(jnp.array([0.0, 0.0])), Coords.split(jnp.array([2.0, 4.0]))
        >>> [float(c) for c in blend(0.25, hit, free).stack()]
        [0.5, 1.0]
    """
    return hit + w_keep * (free - hit)
