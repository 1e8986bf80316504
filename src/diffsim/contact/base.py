"""The contact interface, the plane geometry, and the step wrapper ``WithContact``.

A contact model changes a free-flight step near a plane ``n·x = c`` (the ground, a wall).
A plane is either a **half-space** boundary (the default: everything with ``n·x < c`` is
inside the obstacle) or a **thin** obstacle, a bounded patch of the plane (a :class:`Plane`
with an ``extent``, e.g. ``Plane.wall(6.0, height=2.0)``): it has no inside, and a body meets
it only when a step *crosses* the plane at a point within the extent (see :func:`crossing`).
Two kinds of contact exist:

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
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_finite, check_in_range, check_int, check_positive, is_concrete
from .._coords import Coords, along, dot
from ..integrators.base import CoordinateAcceleration, Integrator, _unpack


def param(value: Any, theta: Any) -> Any:
    """A contact parameter: ``theta[value]`` when ``value`` is a string, else ``value``.

    Examples:
        >>> from diffsim.contact import param
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
        >>> from diffsim.contact import check_param
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
        >>> from diffsim.contact import Plane, check_plane
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
        >>> from diffsim.contact import safe_div
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


IMPACT_ITERATIONS = 2
"""Safeguarded Newton iterations of :func:`locate_impact` between its quadratic first guess
and its final (differentiated) Newton step. The guess is exact when the partial step's gap
is quadratic in its length (velocity Verlet, semi-implicit Euler, RK4 under a constant
acceleration), so there the iterations change nothing; under other forces the guess is off
by O(h³) relative and each iteration squares that."""


class Impact(NamedTuple):
    """Where inside a step a body met a plane (:func:`locate_impact`).

    Attributes:
        crossed: per body, True where the step crossed the plane from its free side (and,
            on a thin plane, within its extent).
        fraction: α in [0, 1], the impact time as a fraction of the step (per body).
        x, v: the state at the impact (:class:`Coords`).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Impact, Plane, locate_impact
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> free = SemiImplicitEuler(lambda x, v, th: jnp.zeros_like(x), h=1.0)
        >>> x0, v0 = jnp.array([0.0, 0.3]), jnp.array([0.0, -0.4])
        >>> x1, v1 = free((x0, v0), {"g": 0.0})
        >>> hit = locate_impact(Plane.ground(2), free, (Coords.split(x0), Coords.split(v0)),
        ...                     (Coords.split(x1), Coords.split(v1)), {"g": 0.0}, None)
        >>> isinstance(hit, Impact), bool(hit.crossed), round(float(hit.fraction), 4)
        (True, True, 0.75)
    """

    crossed: Any
    fraction: Any
    x: Coords
    v: Coords


def _partial_step(integrator: Integrator, alpha, x0: Coords, v0: Coords, theta, u):
    """The integrator's own step of length α h from ``(x0, v0)``."""
    return with_h(integrator, alpha * integrator.h).step_coords(x0, v0, theta, u)


def _substep_fraction(plane: Plane, integrator: Integrator, x0, v0, theta, u, g0, g1, iterations):
    r"""The root α of :math:`f(α) = \mathrm{gap}(x(α h))` on [0, 1], ``x(α h)`` the integrator's
    partial step, with the implicit-function-theorem derivative.

    The iterations run on values cut from the graph (``stop_gradient``). The first guess
    is the root in [0, 1] of the quadratic through :math:`f(0) = g_0`,
    :math:`f'(0) = h\,v_n` (any consistent scheme starts at the body's velocity) and
    :math:`f(1) = g_1` — exact when the partial step is quadratic in its length (a constant
    acceleration with the usual schemes), the chord :math:`g_0/(g_0 - g_1)` for constant
    velocity. Then safeguarded Newton, keeping the bracket :math:`f(lo) > 0 \ge f(hi)` and
    bisecting wherever the Newton step leaves it or the slope vanishes. A last Newton step
    :math:`α^* = α_K - f(α_K)/f'(α_K)` is taken with f live and :math:`f'(α_K)` frozen, so
    :math:`dα^* = -\partial f/f'`, the implicit-function derivative at the root (exact
    once :math:`f(α_K) = 0` to round-off, whatever the iterations did). Wherever the step
    crossed nothing the iterations stay in [0, 1] and the divisions are guarded (double
    where): values and gradients are finite, and discarded.
    """
    frozen = jax.lax.stop_gradient((integrator, x0, v0, theta, u, g0, g1))
    f_integrator, f_x0, f_v0, f_theta, f_u, f_g0, f_g1 = frozen

    def gap_and_slope(alpha):
        def gap(a):
            return plane.gap(_partial_step(f_integrator, a, f_x0, f_v0, f_theta, f_u)[0])

        return jax.jvp(gap, (alpha,), (jnp.ones_like(alpha),))

    # the quadratic q(α) = g0 + d0 α + c α², q(1) = g1, and its first root in [0, 1] in the
    # cancellation-free form 2 g0 / (-d0 + √(d0² - 4 c g0))
    d0 = f_integrator.h * plane.normal_velocity(f_v0)
    c = f_g1 - f_g0 - d0
    root = jnp.sqrt(jnp.maximum(d0 * d0 - 4 * c * f_g0, 0.0))
    alpha = safe_div(2 * f_g0, root - d0)
    alpha = jnp.where(alpha < 0.0, 0.0, jnp.where(alpha > 1.0, 1.0, alpha))
    lo, hi = jnp.zeros_like(alpha), jnp.ones_like(alpha)
    for _ in range(iterations):
        f, df = gap_and_slope(alpha)
        above = f > 0
        lo, hi = jnp.where(above, alpha, lo), jnp.where(above, hi, alpha)
        newton = alpha - safe_div(f, df)
        ok = (f == 0) | ((df != 0) & (newton >= lo) & (newton <= hi))
        alpha = jnp.where(ok, newton, 0.5 * (lo + hi))
    _, df = gap_and_slope(alpha)
    f = plane.gap(_partial_step(integrator, alpha, x0, v0, theta, u)[0])
    alpha = alpha - safe_div(f, df)
    # the where pattern of impact_fraction: the full gradient at an end (no clip tie)
    return jnp.where(alpha < 0.0, 0.0, jnp.where(alpha > 1.0, 1.0, alpha))


def locate_impact(
    plane: Plane,
    integrator: Integrator,
    state0: tuple[Coords, Coords],
    state1: tuple[Coords, Coords],
    theta: Any,
    u: Any = None,
    *,
    location: str = "substep",
    within_extent: bool = True,
    iterations: int = IMPACT_ITERATIONS,
) -> Impact:
    r"""Where inside the free step ``state0 -> state1`` the body met the plane.

    The step crossed the plane when it starts on its free side and ends on or beyond it,
    :math:`g_0 \ge 0 \ge g_1,\ g_1 < g_0` (gaps at the ends of the step); one impact per
    step. The impact fraction α and state depend on ``location``:

    * ``"substep"`` (the default): α is the root of the gap after the integrator's *own*
      partial step of length α h, :math:`\mathrm{gap}(x(αh)) = 0`, found from a quadratic
      first guess (exact under a constant acceleration) by :data:`IMPACT_ITERATIONS`
      safeguarded Newton iterations and one differentiated Newton step whose derivative is
      the implicit-function theorem's,
      :math:`dα = -\partial_p g / (dg/dα)`; the state at impact is that partial step. The
      impact is then located to the integrator's order: exactly, to round-off, for a
      scheme exact in free flight (velocity Verlet under constant gravity).
    * ``"linear"``: the chord :math:`α = g_0/(g_0 - g_1)` of the gap and the linear
      interpolation of position and velocity (exact for constant velocity, first order
      otherwise; cheaper: no extra partial steps).

    On a thin plane ``crossed`` also requires the impact point to lie within the extent
    (``within_extent=False`` drops that test: the smoothed thin contacts weigh it instead).

    Args:
        plane: the :class:`Plane`.
        integrator: the free-flight integrator that took the step (its ``h`` is the step).
        state0, state1: ``(x, v)`` at the start and end of the free step (:class:`Coords`).
        theta, u: the step's parameters and control (for the partial steps).
        location: ``"substep"`` or ``"linear"`` (static).
        within_extent: test the extent of a thin plane (static).
        iterations: Newton iterations before the final step (static, >= 0).

    Returns:
        An :class:`Impact` ``(crossed, fraction, x, v)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane, locate_impact
        >>> from diffsim.integrators import VelocityVerlet
        >>> free = VelocityVerlet(lambda x, v, th: -9.81 + 0.0 * x, h=0.5)
        >>> s0 = (Coords.split(jnp.asarray([1.0])), Coords.split(jnp.asarray([0.0])))
        >>> s1 = free.step_coords(*s0, {}, None)
        >>> imp = locate_impact(Plane.ground(), free, s0, s1, {})
        >>> round(float(imp.fraction) * 0.5, 6)  # the exact fall time √(2 / 9.81) s
        0.451524
    """
    x0, v0 = state0
    x1, v1 = state1
    if location == "linear":
        crossed, s, x_c = crossing(plane, x0, x1, within_extent=within_extent)
        return Impact(crossed, s, x_c, v0 + s * (v1 - v0))
    if location != "substep":
        raise ValueError(f"location must be 'substep' or 'linear', got {location!r}")
    g0, g1 = plane.gap(x0), plane.gap(x1)
    crossed = (g0 >= 0) & (g1 <= 0) & (g1 < g0)
    alpha = _substep_fraction(plane, integrator, x0, v0, theta, u, g0, g1, iterations)
    x_c, v_c = _partial_step(integrator, alpha, x0, v0, theta, u)
    if plane.thin and within_extent:
        crossed = crossed & plane.within(x_c)
    return Impact(crossed, alpha, x_c, v_c)


def edge_weights(plane: Plane, x_c: Coords, tau):
    r"""``(w, 1 - w)``: the smoothed "within the extent" switch of a thin plane at the
    crossing point, :math:`w = σ(m(x_c)/τ)` with m the signed margin inside the extent
    (:meth:`Plane.margin`), τ in metres. Both weights are computed directly (no
    cancellation in :math:`1 - w` when w is close to 1). As τ → 0, w tends to the hard
    test :meth:`Plane.within` away from the edge.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, Plane, edge_weights
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
        >>> from diffsim.contact import Coords, blend
        >>> hit, free = Coords.split(jnp.array([0.0, 0.0])), Coords.split(jnp.array([2.0, 4.0]))
        >>> [float(c) for c in blend(0.25, hit, free).stack()]
        [0.5, 1.0]
    """
    return hit + w_keep * (free - hit)


class Contact(eqx.Module):
    """Abstract base of every contact model.

    Examples:
        >>> from diffsim.contact import Contact, EventContact, ForceContact, PenaltySpring, StopDead
        >>> issubclass(StopDead, EventContact), issubclass(PenaltySpring, ForceContact)
        (True, True)
        >>> issubclass(EventContact, Contact) and issubclass(ForceContact, Contact)
        True
    """

    plane: eqx.AbstractVar[Plane]


class EventContact(Contact):
    """A contact that corrects a free step that crossed the plane.

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

    def locate(self, integrator, state0, state1, theta, u, within_extent: bool = True):
        """Where inside the free step the body met this contact's plane
        (:func:`locate_impact` with the contact's ``plane`` and ``location``)."""
        plane, location = getattr(self, "plane"), getattr(self, "location")  # noqa: B009
        return locate_impact(
            plane, integrator, state0, state1, theta, u,
            location=location, within_extent=within_extent,
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

    @abc.abstractmethod
    def accel_coords(self, x: Coords, v: Coords, theta) -> Coords:
        """Contact acceleration (m/s²) on the coordinate view."""

    def accel(self, x, v, theta):
        """Contact acceleration (m/s²), shaped like ``x`` (arrays in, arrays out)."""
        return self.accel_coords(_coords(x), _coords(v), theta).stack()


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


def with_h(integrator: Integrator, h) -> Integrator:
    """The same integrator with step ``h`` (may be traced, even 0: no re-validation).

    Examples:
        >>> from diffsim.contact import with_h
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> round(float(with_h(SemiImplicitEuler(lambda x, v, th: -x, h=0.1), 0.05).h), 6)
        0.05
    """
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
