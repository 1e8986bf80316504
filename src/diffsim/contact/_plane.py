"""The plane a contact acts on — a half-space boundary or a thin, bounded obstacle
(:class:`Plane`, :class:`Extent`) — where a step crosses it (:func:`crossing`), and the
helpers every contact shares to read its parameters (:func:`param`, :func:`check_param`).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_finite, check_in_range, check_int, check_positive, is_concrete
from .._coords import Coords, along, dot


def param(value: Any, theta: Any) -> Any:
    """A contact parameter: ``theta[value]`` when ``value`` is a string, else ``value``.

    Examples:
        >>> from diffsim.contact._plane import param
        >>> param("e", {"e": 0.8}), param(0.5, {"e": 0.8})  # a θ key, or the value itself
        (0.8, 0.5)
    """
    if isinstance(value, str):
        try:
            return theta[value]
        except (KeyError, TypeError, IndexError):
            raise ValueError(
                f"contact parameter refers to theta[{value!r}], which theta does not have"
            ) from None
    return value


def check_param(name: str, value: Any, lo: float | None = None, hi: float | None = None) -> Any:
    """Validate a concrete contact parameter (strings, i.e. θ keys, are checked by name only).

    Examples:
        >>> from diffsim.contact._plane import check_param
        >>> check_param("e", "e"), round(float(check_param("e", 0.8, 0.0, 1.0)), 6)
        ('e', 0.8)
    """
    if isinstance(value, str):
        return value
    if lo is not None and hi is not None:
        check_in_range(name, value, lo, hi)
    elif lo == 0.0:
        check_in_range(name, value, 0.0, float("inf"))
    else:
        check_positive(name, value)
    return jnp.asarray(value)


def check_plane(plane: Any) -> Plane:
    """Return ``plane``, or raise ``TypeError`` naming ``plane`` unless it is a :class:`Plane`
    (every contact model checks this first: its other checks read the plane).

    Examples:
        >>> from diffsim.contact import Plane
        >>> from diffsim.contact._plane import check_plane
        >>> check_plane(Plane.ground()).thin
        False
    """
    if not isinstance(plane, Plane):
        raise TypeError(
            f"plane must be a diffsim.contact.Plane (e.g. Plane.ground() or "
            f"Plane.wall(6.0, height=2.0)), got {plane!r} ({type(plane).__name__})"
        )
    return plane


def safe_div(num, den, fallback=0.0):
    """``num / den`` with a finite value *and gradient* where ``den == 0`` (double where).

    Examples:
        >>> import jax
        >>> from diffsim.contact._plane import safe_div
        >>> float(safe_div(1.0, 0.0)), float(jax.grad(safe_div, argnums=1)(1.0, 0.0))  # no NaN
        (0.0, 0.0)
    """
    zero = den == 0
    safe_den = jnp.where(zero, 1.0, den)
    return jnp.where(zero, fallback, num / safe_den)


def impact_fraction(gap0, gap1):
    r"""Fraction :math:`s^* = g_0 / (g_0 - g_1) \in [0, 1]` of the step at which the linearly
    interpolated gap :math:`g(s) = g_0 + s (g_1 - g_0)` reaches zero.

    Safe at :math:`g_0 = g_1` (value 0, finite gradient): the double-where pattern. At the
    ends of the interval (an impact exactly on a step boundary, :math:`s^* = 0` or 1) the
    gradient is the full one of :math:`g_0/(g_0 - g_1)`: ``jnp.clip`` would halve it there
    (its ``max``/``min`` split a tie's gradient), which would make the impact time's
    derivative half the truth.

    Examples:
        >>> from diffsim.contact import impact_fraction
        >>> round(float(impact_fraction(0.3, -0.1)), 6), float(impact_fraction(0.2, 0.2))  # g0 = g1
        (0.75, 0.0)
    """
    s = safe_div(gap0, gap0 - gap1)
    return jnp.where(s < 0.0, 0.0, jnp.where(s > 1.0, 1.0, s))


def _static_normal(normal: Any) -> tuple[float, ...]:
    try:
        if isinstance(normal, str | bytes) or normal is None:
            raise TypeError
        arr = np.asarray(normal, dtype=float)
    except (TypeError, ValueError, jax.errors.TracerArrayConversionError):
        raise TypeError(
            f"normal must be concrete numbers (the plane's orientation is configuration, "
            f"not a parameter), got {normal!r}"
        ) from None
    if not np.all(np.isfinite(arr)) or not np.any(arr):
        raise ValueError(f"normal must be finite and non-zero, got {arr.tolist()!r}")
    return tuple(float(a) for a in arr.ravel())


def _coords(x: Any) -> Coords:
    return x if isinstance(x, Coords) else Coords.split(x)


def _weights_for(vector: tuple[float, ...], c: Coords, what: str) -> tuple[float, ...]:
    """The static weights ``vector`` matched to the coordinates of ``c`` (a scalar vector is
    repeated for every coordinate)."""
    n = c.parts[0].size if c.flat else len(c)
    if len(vector) == 1 and n > 1:
        return vector * n
    if n != len(vector):
        raise ValueError(f"{what} has {len(vector)} entries but the position has {n}")
    return vector


def _optional_array(value: Any) -> Any:
    return None if value is None else check_finite("extent bound", value)


class Extent(eqx.Module):
    r"""One bound of a thin plane's extent: :math:`lo \le t·x \le hi` on the plane.

    Attributes:
        direction: the static direction t (shape of a position, like a plane's normal),
            normally tangent to the plane (the wall's height axis).
        lo: lower bound on :math:`t·x`, or ``None`` (unbounded below). An array, so it
            may be traced and differentiated.
        hi: upper bound, or ``None`` (unbounded above).

    The bounds are closed: a crossing exactly at ``hi`` is inside (a ball that reaches a
    wall exactly at its top is stopped).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Extent, Plane
        >>> wall = Plane((-1.0, 0.0), -6.0, Extent((0.0, 1.0), hi=2.0))  # x = 6, up to y = 2 m
        >>> [bool(wall.within(Coords.split(jnp.array([6.0, y])))) for y in (1.0, 3.0)]
        [True, False]
    """

    direction: tuple[float, ...] = eqx.field(static=True, converter=_static_normal)
    lo: Any = eqx.field(converter=_optional_array, default=None)
    hi: Any = eqx.field(converter=_optional_array, default=None)

    def __check_init__(self):
        if self.lo is None and self.hi is None:
            raise ValueError("an Extent needs at least one bound, lo or hi")
        for name in ("lo", "hi"):
            value = getattr(self, name)
            if value is not None and is_concrete(value) and not np.all(np.isfinite(value)):
                raise ValueError(f"extent bound {name} must be finite (or None), got {value!r}")
        if (
            self.lo is not None
            and self.hi is not None
            and is_concrete(self.lo)
            and is_concrete(self.hi)
            and np.any(np.asarray(self.lo) > np.asarray(self.hi))
        ):
            raise ValueError(f"extent needs lo <= hi, got lo={self.lo!r}, hi={self.hi!r}")

    def coordinate(self, x):
        """:math:`t·x`, per body."""
        c = _coords(x)
        return dot(_weights_for(self.direction, c, "extent direction"), c)

    def margin(self, x):
        r"""Signed distance inside the bounds along t: :math:`\min(t·x - lo,\ hi - t·x)`
        over the bounds given (positive inside, negative outside)."""
        tx = self.coordinate(x)
        if self.lo is None:
            return self.hi - tx
        if self.hi is None:
            return tx - self.lo
        return jnp.minimum(tx - self.lo, self.hi - tx)


class Plane(eqx.Module):
    r"""The plane :math:`\{x : n·x = c\}`; the free side is :math:`n·x > c`.

    **Half-space** (no ``extent``, the default): the plane bounds a solid, everything with
    :math:`n·x < c` is inside it (the ground). Contacts detect a step that ends inside
    (the naive rule) or that crosses the plane (time of impact).

    **Thin** (with an ``extent``): a bounded patch of the plane — a wall of finite height,
    a fence. It has no inside: a body on its far side is simply past it. Contacts meet it
    only when a step *crosses* the plane from the free side at a point within every bound
    of the extent (:func:`crossing`); there is no half-space fallback, so a ball that flew
    over a wall and comes down behind it is never touched. Like every plane it is one-sided
    (it stops bodies coming from :math:`n·x > c`); for the other face add a second plane
    with the opposite normal.

    Attributes:
        normal: unit normal n (shape of a position, or a scalar for 1-D states). It is
            configuration, kept as static Python floats: the gap is then a sum over the
            non-zero coordinates only (``y - c`` for the ground), as a hand-written step
            would compute it.
        offset: c in metres (an array: differentiable, e.g. a wall's position).
        extent: a tuple of :class:`Extent` bounds (empty: a half-space).

    ``Plane.ground(dim)`` is y = 0 with normal +y (the last axis), ``Plane.wall(x, dim)`` is
    a vertical wall at x approached from the left (normal −x): a half-space, or with
    ``height=H`` a thin wall of height H.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Plane
        >>> ground = Plane.ground(2)
        >>> float(ground.gap(jnp.array([3.0, -0.25])))  # 25 cm into the ground
        -0.25
        >>> wall = Plane.wall(6.0, height=2.0)
        >>> wall.thin, float(wall.gap(jnp.array([5.0, 1.0])))  # 1 m before the wall
        (True, 1.0)
    """

    normal: tuple[float, ...] = eqx.field(static=True, converter=_static_normal, default=1.0)
    offset: Any = eqx.field(converter=lambda c: check_finite("offset", c), default=0.0)
    extent: tuple[Extent, ...] = eqx.field(
        converter=lambda e: e if isinstance(e, tuple) else (e,), default=()
    )

    def __check_init__(self):
        for e in self.extent:
            if not isinstance(e, Extent):
                raise TypeError(f"extent must be Extent bounds, got {e!r}")
            if len(e.direction) != len(self.normal):
                raise ValueError(
                    f"extent direction has {len(e.direction)} entries but the normal has "
                    f"{len(self.normal)}"
                )

    @property
    def thin(self) -> bool:
        """True for a thin (bounded) plane: contacts only where a step crosses it."""
        return bool(self.extent)

    @classmethod
    def ground(cls, dim: int = 1, height: float = 0.0) -> Plane:
        """The ground y = height (last coordinate); ``dim = 1`` for scalar states."""
        check_int("dim", dim, minimum=1)
        return cls(tuple(1.0 if i == dim - 1 else 0.0 for i in range(dim)), height)

    @classmethod
    def wall(
        cls,
        x: float,
        dim: int = 2,
        *,
        height: float | None = None,
        bottom: float | None = None,
    ) -> Plane:
        """A vertical wall at the first coordinate = x, hit from the left (normal −x).

        Without ``height``: a half-space (everything right of x is solid). With
        ``height=H`` (and optionally ``bottom``): a **thin** wall covering
        ``bottom <= y <= H`` on the last coordinate (``bottom=None``: down through the
        ground, which its own contact handles) — a ball crossing x above H passes.
        """
        check_int("dim", dim, minimum=1)
        normal = tuple(-1.0 if i == 0 else 0.0 for i in range(dim))
        if height is None and bottom is None:
            return cls(normal, -jnp.asarray(x))
        if dim < 2:
            raise ValueError(f"a wall with a height needs dim >= 2, got dim={dim}")
        up = tuple(1.0 if i == dim - 1 else 0.0 for i in range(dim))
        return cls(normal, -jnp.asarray(x), (Extent(up, bottom, height),))

    def _weights(self, c: Coords) -> tuple[float, ...]:
        return _weights_for(self.normal, c, "plane normal")

    def within(self, x):
        """True where ``x`` lies within every bound of the extent (always, for a
        half-space). Closed bounds."""
        inside = True
        for e in self.extent:
            inside = inside & (e.margin(x) >= 0)
        return inside

    def margin(self, x):
        """Signed distance of ``x`` inside the extent: the smallest :meth:`Extent.margin`
        (positive inside, negative outside). Thin planes only."""
        if not self.extent:
            raise ValueError("margin needs a thin plane (a Plane with an extent)")
        margins = [e.margin(x) for e in self.extent]
        m = margins[0]
        for mi in margins[1:]:
            m = jnp.minimum(m, mi)
        return m

    def gap(self, x):
        """Signed distance :math:`n·x - c` (m); negative means penetration."""
        c = _coords(x)
        return dot(self._weights(c), c) - self.offset

    def normal_velocity(self, v):
        """:math:`n·v` (m/s); negative means approaching the plane."""
        c = _coords(v)
        return dot(self._weights(c), c)

    def set_normal(self, x: Coords, value) -> Coords:
        r"""``x`` moved along n so that :math:`n·x` equals ``value`` (per body).

        For an axis-aligned plane this sets one coordinate (exactly, no rounding), as a
        hand-written step would.
        """
        w = self._weights(x)
        nonzero = [i for i, wi in enumerate(w) if wi != 0.0]
        if not x.flat and len(nonzero) == 1 and abs(w[nonzero[0]]) == 1.0:
            i = nonzero[0]
            parts = list(x.parts)
            parts[i] = jnp.broadcast_to(value if w[i] == 1.0 else -value, jnp.shape(parts[i]))
            return x.like(parts)
        return along(w, (value - dot(w, x)) / sum(wi * wi for wi in w), x)

    def push(self, x: Coords, s) -> Coords:
        r""":math:`x + s\,n` for a scalar (per body) ``s``, coordinate-wise."""
        return along(self._weights(x), s, x)


def crossing(plane: Plane, x0: Coords, x1: Coords, *, within_extent: bool = True):
    """``(crossed, s, x_c)``: the step crossed the plane from its free side, at fraction
    ``s`` of the step (linear interpolation of the gap, finite at the switch points), at
    position ``x_c``.

    On a thin plane ``crossed`` also requires ``x_c`` to lie within the extent (closed
    bounds); ``within_extent=False`` drops that test (the smoothed thin contacts weigh it
    instead, :func:`edge_weights`).

    A step that ends exactly on the plane (:math:`g_1 = 0`, moving towards it) has crossed
    it, at ``s = 1``: the impact is resolved in the step where it happens, not left to the
    next one (a step that stays on the plane, :math:`g_0 = g_1 = 0`, has not).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane, crossing
        >>> crossed, s, x_c = crossing(Plane.ground(2), Coords.split(jnp.array([0.0, 0.3])),
        ...                            Coords.split(jnp.array([0.4, -0.1])))
        >>> bool(crossed), round(float(s), 6), [round(float(c), 4) for c in x_c.stack()]
        (True, 0.75, [0.3, 0.0])
    """
    g0, g1 = plane.gap(x0), plane.gap(x1)
    s = impact_fraction(g0, g1)
    x_c = x0 + s * (x1 - x0)
    crossed = (g0 >= 0) & (g1 <= 0) & (g1 < g0)
    if plane.thin and within_extent:
        crossed = crossed & plane.within(x_c)
    return crossed, s, x_c
