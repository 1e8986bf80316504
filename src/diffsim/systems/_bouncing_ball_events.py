r"""The bouncing ball's exact, event-driven solution under constant gravity, for many bounces.

Between impacts the ball flies on a parabola; at each impact its velocity flips and shrinks,
:math:`v^+ = -e v^-`. Starting at height :math:`y_0 \ge 0` with velocity :math:`v_0` under
gravity g > 0, the first impact comes at

.. math:: w = \sqrt{v_0^2 + 2 g y_0},\qquad t_1 = \frac{2 y_0}{w - v_0}\ (v_0 \le 0),
    \quad t_1 = \frac{v_0 + w}{g}\ (v_0 > 0),

with impact speed w (the first form avoids cancellation). The k-th impact speed is
:math:`e^{k-1} w`, each flight in between lasts :math:`2 e^k w / g`, so

.. math:: t_{k+1} = t_k + \frac{2 e^k w}{g},

and after the last impact :math:`t_n \le T` the ball rises at :math:`u = e^n w`:
:math:`y_T = u τ - \tfrac12 g τ^2,\ v_T = u - g τ`, :math:`τ = T - t_n`. Every step of this
is a closed form, so autodiff of it (in float64) gives the exact Jacobian of the final state
with respect to :math:`y_0, v_0, e, g` — an implementation independent of the time-stepped
simulator, which it is the reference for (:mod:`diffsim.contact`'s impact location).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._checks import check_int


def bouncing_ball_event_driven(y0, vy0, e, g, t, *, max_bounces: int = 32):
    r"""``(y(t), vy(t))`` of the bouncing ball, exactly, through up to ``max_bounces``
    impacts (event-driven: parabolas joined at the impact times; see the module docstring).

    Differentiable (autodiff through the closed form) in every argument, away from the
    instants where an impact falls exactly at ``t``. ``jit``/``vmap``-friendly: the number
    of impacts before t is counted, not looped over.

    Args:
        y0: initial height (m, >= 0). vy0: initial velocity (m/s). e: restitution in
            [0, 1]. g: gravity (m/s², > 0). t: time (s, >= 0).
        max_bounces: the most impacts considered (static, >= 1); impacts beyond it are
            ignored, so choose it above the number that happen before t.

    Returns:
        ``(y, vy)`` at time t.

    Example:
        >>> from diffsim.systems import bouncing_ball_event_driven
        >>> y, v = bouncing_ball_event_driven(1.0, 0.0, 0.5, 9.81, 1.0)  # two bounces
        >>> round(float(y), 4), round(float(v), 4)
        (0.0613, 0.1563)
    """
    check_int("max_bounces", max_bounces)
    y0, vy0, e, g, t = jnp.broadcast_arrays(*(jnp.asarray(a, float) for a in (y0, vy0, e, g, t)))
    w = jnp.sqrt(vy0**2 + 2 * g * y0)
    # double where: each form of t1 is safe on the side where it is used
    falling = vy0 <= 0
    den = jnp.where(falling, w - vy0, 1.0)
    t1 = jnp.where(falling, 2 * y0 / jnp.where(den == 0, 1.0, den), (vy0 + w) / g)
    k = jnp.arange(max_bounces, dtype=w.dtype)  # impact k + 1 leaves at e^(k+1) w
    launch = w[..., None] * e[..., None] ** (k + 1)
    flights = 2 * launch / g[..., None]
    times = t1[..., None] + jnp.concatenate(
        [jnp.zeros_like(flights[..., :1]), jnp.cumsum(flights[..., :-1], axis=-1)], axis=-1
    )
    n = jnp.sum(times <= t[..., None], axis=-1)  # impacts before t (piecewise constant)
    last = jnp.clip(n - 1, 0, max_bounces - 1)[..., None]
    t_n = jnp.take_along_axis(times, last, axis=-1)[..., 0]
    u = jnp.take_along_axis(launch, last, axis=-1)[..., 0]
    tau = t - t_n
    y_free = y0 + vy0 * t - 0.5 * g * t**2
    v_free = vy0 - g * t
    y_bounced = u * tau - 0.5 * g * tau**2
    v_bounced = u - g * tau
    flying = n == 0
    return jnp.where(flying, y_free, y_bounced), jnp.where(flying, v_free, v_bounced)


def bouncing_ball_event_driven_jacobian(y0, vy0, e, g, t, *, max_bounces: int = 32):
    """The exact derivatives of :func:`bouncing_ball_event_driven` (forward-mode autodiff
    of the closed form): a dict with keys ``dy_dy0``, ``dy_dvy0``, ``dy_de``, ``dvy_dy0``,
    ``dvy_dvy0``, ``dvy_de`` (scalars in, scalars out).

    Examples:
        >>> from diffsim.systems._bouncing_ball_events import bouncing_ball_event_driven_jacobian
        >>> d = bouncing_ball_event_driven_jacobian(1.0, -1.0, 0.8, 0.0, 2.0)
        >>> round(float(d["dy_dy0"]), 6), round(float(d["dy_dvy0"]), 6)
        (-0.8, -1.6)
    """

    def f(a, b, c):
        return jnp.stack(bouncing_ball_event_driven(a, b, c, g, t, max_bounces=max_bounces))

    args = [jnp.asarray(a, float) for a in (y0, vy0, e)]
    J = jax.jacfwd(f, argnums=(0, 1, 2))(*args)
    keys = ("y0", "vy0", "e")
    out = {f"dy_d{k}": J[i][0] for i, k in enumerate(keys)}
    out.update({f"dvy_d{k}": J[i][1] for i, k in enumerate(keys)})
    return out
