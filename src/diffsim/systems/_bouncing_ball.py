r"""A ball bouncing on the ground y = 0 with restitution e — where naive gradients go wrong.

State ``(y, vy)`` (m, m/s), parameters ``θ = {"g": g, "e": e}``, semi-implicit Euler plus a
:class:`~diffsim.contact.Restitution` at the ground, naive or with time-of-impact (TOI)
correction.

**Closed form (one bounce).** A ball at height :math:`y_0 > 0` with velocity :math:`v_0`
under gravity g ≥ 0 hits the ground at

.. math:: w = \sqrt{v_0^2 + 2 g y_0},\qquad t^* = \frac{2 y_0}{w - v_0}

(impact speed w; for g = 0, :math:`t^* = -y_0/v_0`), leaves with speed :math:`e w`, and
after :math:`τ = T - t^*` more seconds (before a second bounce)

.. math:: y_T = e w τ - \tfrac12 g τ^2,\qquad v_T = e w - g τ .

With :math:`∂t^*/∂y_0 = 1/w` and :math:`∂t^*/∂v_0 = t^*/w`:

.. math::
    \frac{∂y_T}{∂y_0} = -e + \frac{g τ (1 + e)}{w},\quad
    \frac{∂y_T}{∂v_0} = \frac{e v_0 τ}{w} - \frac{(e w - g τ)\,t^*}{w},\quad
    \frac{∂y_T}{∂e} = w τ,

    \frac{∂v_T}{∂y_0} = \frac{g(1 + e)}{w},\quad
    \frac{∂v_T}{∂v_0} = \frac{e v_0 + g t^*}{w},\quad \frac{∂v_T}{∂e} = w .

For g = 0: :math:`y_T = -e v_0 T - e y_0`, so :math:`∂y_T/∂y_0 = -e` and
:math:`∂y_T/∂v_0 = -e T`.

**The naive gradient.** The naive contact reflects the velocity and projects the ball back
onto the ground at the step where it is found below it. The state after that step no longer
depends on where inside the step the ball hit, so :math:`∂y_T/∂y_0 = 0` exactly instead of
:math:`-e + gτ(1+e)/w`: for the default ball (y0 = 1 m, v0 = −1 m/s, e = 0.8, g = 0, T =
2 s) the truth is −0.8 and the naive gradient 0, a 100 % error, whatever h. TOI correction
restores it (to round-off for g = 0, to O(h) under gravity).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._checks import Domain, check_finite, check_float, check_in_range, check_int, check_positive
from .._rollout import rollout
from ..contact import Plane, Restitution, WithContact
from ..integrators import Integrator, SemiImplicitEuler, check_integrator_class
from .base import System

_DOMAINS = (
    ("e", Domain(0.0, 1.0, what="a coefficient of restitution")),
    ("g", Domain(0.0, what="gravity (downward)")),
)
"""Where the bouncing ball's θ is physical (what :func:`bouncing_ball` accepts)."""


def _gravity(x, v, theta):
    return -theta["g"] * jnp.ones_like(x)


def bouncing_ball_step(
    h: float = 1e-3,
    *,
    toi: bool = True,
    smoothing: float | None = None,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> WithContact:
    """The step ``((y, vy), {"g", "e"}) -> (y', vy')``: gravity plus a ground restitution.

    Args:
        h: time step in seconds (> 0).
        toi: time-of-impact correction (``False``: the naive impulse).
        smoothing: temperature τ (m) of the smoothed naive contact, or ``None``.
        integrator: the free-flight integrator class.

    Examples:
        >>> from diffsim import rollout
        >>> from diffsim.systems._bouncing_ball import bouncing_ball_step
        >>> step = bouncing_ball_step(0.01, toi=True)
        >>> y, v = rollout(step, (1.0, -1.0), {"e": 0.8, "g": 0.0}, 200, trajectory=False)
        >>> round(float(y), 4), round(float(v), 4)  # bounced at t = 1 s, then 0.8 m/s for 1 s
        (0.8, 0.8)
    """
    check_positive("h", h)
    contact = Restitution(Plane.ground(), e="e", toi=toi, smoothing=smoothing)
    return WithContact(check_integrator_class(integrator)(_gravity, h=h), contact)


def bouncing_ball(
    h: float = 1e-3,
    *,
    y0: float = 1.0,
    vy0: float = -1.0,
    g: float = 9.81,
    e: float = 0.8,
    toi: bool = True,
    smoothing: float | None = None,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> System:
    """The bouncing ball as a :class:`System`; its loss is the final height ``y_T``.

    Example:
        >>> from diffsim import rollout
        >>> from diffsim.systems import bouncing_ball
        >>> sys = bouncing_ball(h=0.01, g=0.0)
        >>> yT, vT = rollout(sys.step, sys.s0, sys.theta, 200, trajectory=False)
        >>> round(float(yT), 4), round(float(vT), 4)  # -e vy0 T - e y0 = 1.6 - 0.8
        (0.8, 0.8)
    """
    check_in_range("e", e, 0.0, 1.0)
    check_in_range("g", g, 0.0, float("inf"))
    s0 = (jnp.asarray(check_float("y0", y0)), jnp.asarray(check_float("vy0", vy0)))
    theta = {"e": jnp.asarray(e), "g": jnp.asarray(g)}
    step = bouncing_ball_step(h, toi=toi, smoothing=smoothing, integrator=integrator)
    return System("bouncing_ball", step, s0, theta, loss=lambda s: s[0], domains=_DOMAINS)


def bouncing_ball_final_state(
    y0,
    vy0,
    e,
    g=0.0,
    *,
    h: float = 1e-3,
    num_steps: int = 2000,
    toi: bool = True,
    smoothing: float | None = None,
):
    """``(y_T, vy_T)`` after ``num_steps`` steps; differentiable in y0, vy0, e and g.

    Args:
        y0: initial height (m). vy0: initial velocity (m/s). e: restitution in [0, 1].
        g: gravity (m/s², >= 0). h: step (s, > 0). num_steps: T >= 1.
        toi, smoothing: the contact variant (see :class:`~diffsim.contact.Restitution`).

    Examples:
        >>> from diffsim.systems import bouncing_ball_final_state
        >>> [round(float(a), 4) for a in bouncing_ball_final_state(1.0, -1.0, 0.8)]
        [0.8, 0.8]
    """
    check_in_range("e", e, 0.0, 1.0)
    check_in_range("g", g, 0.0, float("inf"))
    check_int("num_steps", num_steps)
    check_finite("y0", y0)  # named here: the rollout would only know them as s0[0], s0[1]
    check_finite("vy0", vy0)
    step = bouncing_ball_step(h, toi=toi, smoothing=smoothing)
    s0 = (
        jnp.asarray(y0, jnp.result_type(y0, float)),
        jnp.asarray(vy0, jnp.result_type(vy0, float)),
    )
    theta = {"e": jnp.asarray(e, s0[0].dtype), "g": jnp.asarray(g, s0[0].dtype)}
    return rollout(step, s0, theta, num_steps, trajectory=False)


def bouncing_ball_final_state_jacobian(y0, vy0, e, g=0.0, **kwargs):
    """Autodiff derivatives of ``(y_T, vy_T)``: a dict with keys ``dy_dy0``, ``dy_dvy0``,
    ``dy_de``, ``dvy_dy0``, ``dvy_dvy0``, ``dvy_de`` (forward mode through the rollout).

    Examples:
        >>> from diffsim.systems import bouncing_ball_final_state_jacobian
        >>> toi = bouncing_ball_final_state_jacobian(1.0, -1.0, 0.8, toi=True)
        >>> naive = bouncing_ball_final_state_jacobian(1.0, -1.0, 0.8, toi=False)
        >>> round(float(toi["dy_dy0"]), 4), round(float(naive["dy_dy0"]), 4)  # truth: −e
        (-0.8, 0.0)
    """
    check_finite("y0", y0)  # checked before jacfwd turns them into tracers
    check_finite("vy0", vy0)
    check_in_range("e", e, 0.0, 1.0)
    check_in_range("g", g, 0.0, float("inf"))
    f = lambda a, b, c: jnp.stack(bouncing_ball_final_state(a, b, c, g, **kwargs))  # noqa: E731
    dtype = jnp.result_type(y0, vy0, e, float)
    args = [jnp.asarray(a, dtype) for a in (y0, vy0, e)]
    J = jax.jacfwd(f, argnums=(0, 1, 2))(*args)
    keys = ("y0", "vy0", "e")
    out = {f"dy_d{k}": J[i][0] for i, k in enumerate(keys)}
    out.update({f"dvy_d{k}": J[i][1] for i, k in enumerate(keys)})
    return out


def _impact(y0, vy0, g):
    """The impact speed w = √(vy0² + 2 g y0) and the time to the first impact, in the form
    without cancellation: (vy0 + w)/g rising, 2 y0/(w − vy0) falling (inf: never lands)."""
    w = jnp.sqrt(vy0**2 + 2 * g * y0)
    rising = vy0 > 0
    up = jnp.where(g > 0, (vy0 + w) / jnp.where(g > 0, g, 1.0), jnp.inf)
    down = 2 * y0 / jnp.where(rising, 1.0, w - vy0)
    return w, jnp.where(rising, up, down)


def bouncing_ball_closed_form(y0, vy0, e, g, t):
    """``(y(t), vy(t))`` in continuous time, valid for exactly one bounce before t.

    Examples:
        >>> from diffsim.systems._bouncing_ball import bouncing_ball_closed_form
        >>> [round(float(a), 4) for a in bouncing_ball_closed_form(1.0, -1.0, 0.8, 0.0, 2.0)]
        [0.8, 0.8]
    """
    w, ts = _impact(y0, vy0, g)
    tau = t - ts
    return e * w * tau - 0.5 * g * tau**2, e * w - g * tau


def bouncing_ball_bounce_window(y0, vy0, e, g):
    """``(t*, t2)``: first impact time, and the second one (``inf`` if none).

    Examples:
        >>> from diffsim.systems._bouncing_ball import bouncing_ball_bounce_window
        >>> [float(t) for t in bouncing_ball_bounce_window(1.0, -1.0, 0.8, 0.0)]  # no gravity
        [1.0, inf]
        >>> [float(t) for t in bouncing_ball_bounce_window(1.0, 1.0, 0.8, 0.0)]  # up: never lands
        [inf, inf]
    """
    w, ts = _impact(y0, vy0, g)
    t2 = jnp.where(g > 0, ts + 2 * e * w / jnp.where(g > 0, g, 1.0), jnp.inf)
    return ts, t2


def bouncing_ball_derivatives_closed_form(y0, vy0, e, g, t):
    """The analytic derivatives of :func:`bouncing_ball_closed_form` (see module docstring);
    same keys as :func:`bouncing_ball_final_state_jacobian`.

    Examples:
        >>> from diffsim.systems._bouncing_ball import bouncing_ball_derivatives_closed_form
        >>> d = bouncing_ball_derivatives_closed_form(1.0, -1.0, 0.8, 0.0, 2.0)
        >>> round(float(d["dy_dy0"]), 4), round(float(d["dy_dvy0"]), 4)
        (-0.8, -1.6)
    """
    w, ts = _impact(y0, vy0, g)
    tau = t - ts
    return {
        "dy_dy0": -e + g * tau * (1 + e) / w,
        "dy_dvy0": e * vy0 * tau / w - (e * w - g * tau) * ts / w,
        "dy_de": w * tau,
        "dvy_dy0": g * (1 + e) / w,
        "dvy_dvy0": (e * vy0 + g * ts) / w,
        "dvy_de": w,
    }
