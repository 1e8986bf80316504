"""Where inside a step the body met the plane: the time of impact, located on the
integrator's own partial step (:func:`locate_impact`) or linearly (:func:`impact_fraction`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .._coords import Coords
from ..integrators.base import Integrator
from ._plane import Plane, crossing, safe_div


def with_h(integrator: Integrator, h) -> Integrator:
    """The same integrator with step ``h`` (may be traced, even 0: no re-validation).

    Examples:
        >>> from diffsim.contact._impact import with_h
        >>> from diffsim.integrators import SemiImplicitEuler
        >>> round(float(with_h(SemiImplicitEuler(lambda x, v, th: -x, h=0.1), 0.05).h), 6)
        0.05
    """
    return eqx.tree_at(lambda i: i.h, integrator, jnp.asarray(h, jnp.result_type(integrator.h)))


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
