r"""A ball landing on a penalty-spring ground: stiff contact and what a fixed step misses.

State ``(y, vy)``, parameters ``θ = {"k", "c", "g", "m"}`` (N/m, N·s/m, m/s², kg). The
ground is a :class:`~diffsim.contact.PenaltySpring`: while :math:`y < 0` the ball feels
:math:`F = -k y - c v_y`. In contact it is an oscillator of frequency
:math:`ω = \sqrt{k/m}`; the contact lasts :math:`π/ω` seconds, and

* the derivative of the step, :math:`∂v'/∂y = -(k/m) h`, grows with k, and so does the
  rollout Jacobian :math:`∂s_T/∂s_0` through a bounce (:func:`stiff_contact_jacobian_norm`);
* semi-implicit Euler resolves the contact only while :math:`ωh < 2`; beyond that the
  contact lasts less than a step, a single step samples it (or none does), and the energy
  after the bounce is wrong — it blows up by orders of magnitude for
  :math:`k \gg 4m/h^2` (:func:`stiff_contact_bounce_report`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .._checks import Domain, check_float, check_in_range, check_int, check_positive
from .._jacobians import rollout_jacobian
from .._rollout import rollout
from ..contact import PenaltySpring, Plane, WithContact
from ..integrators import Integrator, SemiImplicitEuler, check_integrator_class
from .base import System


def _gravity(x, v, theta):
    return -theta["g"] * jnp.ones_like(x)


def stiff_contact_step(
    h: float = 1 / 240,
    *,
    smoothing: float | None = None,
    integrator: type[Integrator] = SemiImplicitEuler,
) -> WithContact:
    """Gravity plus a penalty ground whose k, c, m are read from θ.

    Examples:
        >>> from diffsim.systems import stiff_contact_step
        >>> step = stiff_contact_step(1 / 240)
        >>> y, v = step((1.0, 0.0), {"g": 9.81, "k": 1e4, "m": 1.0, "c": 0.0})
        >>> round(float(v), 4)  # one step of free fall: −g h
        -0.0409
    """
    check_positive("h", h)
    spring = PenaltySpring(Plane.ground(), k="k", c="c", mass="m", smoothing=smoothing)
    return WithContact(check_integrator_class(integrator)(_gravity, h=h), spring)


def stiff_contact(
    k: float = 1e4,
    *,
    c: float = 0.0,
    h: float = 1 / 240,
    y0: float = 1.0,
    vy0: float = 0.0,
    g: float = 9.81,
    mass: float = 1.0,
    smoothing: float | None = None,
) -> System:
    """The ball-on-penalty-ground system. Its loss is the final height.

    Example:
        >>> from diffsim import rollout
        >>> from diffsim.systems import stiff_contact
        >>> sys = stiff_contact(k=1e4)
        >>> y, v = rollout(sys.step, sys.s0, sys.theta, 240)
        >>> bool(y.min() < 0), round(float(y.min()), 2)  # sinks about v sqrt(m/k) = 4.4 cm (+ O(h))
        (True, -0.05)
    """
    check_positive("k", k)
    check_in_range("c", c, 0.0, float("inf"))
    check_positive("mass", mass)
    check_in_range("g", g, 0.0, float("inf"))
    theta = {
        "k": jnp.asarray(k),
        "c": jnp.asarray(c),
        "g": jnp.asarray(g),
        "m": jnp.asarray(mass),
    }
    s0 = (jnp.asarray(check_float("y0", y0)), jnp.asarray(check_float("vy0", vy0)))
    return System(
        "stiff_contact",
        stiff_contact_step(h, smoothing=smoothing),
        s0,
        theta,
        lambda s: s[0],
        domains=(
            ("k", Domain(0.0, open_lower=True, what="a stiffness")),
            ("c", Domain(0.0, what="a damping coefficient")),
            ("g", Domain(0.0, what="gravity (downward)")),
            ("m", Domain(0.0, open_lower=True, what="a mass")),
        ),
    )


def stiff_contact_energy(state, theta):
    """Energy per unit mass (J/kg): kinetic + gravity + spring while penetrating.

    Examples:
        >>> from diffsim.systems import stiff_contact, stiff_contact_energy
        >>> sys = stiff_contact(k=1e4, y0=1.0)
        >>> round(float(stiff_contact_energy(sys.s0, sys.theta)), 2)  # g y0, at rest
        9.81
    """
    y, v = state
    pen = jnp.maximum(-y, 0.0)
    return 0.5 * v**2 + theta["g"] * y + 0.5 * theta["k"] / theta["m"] * pen**2


def stiff_contact_jacobian_norm(
    k, *, h: float = 1 / 240, num_steps: int = 240, y0: float = 1.0, **kwargs
):
    r"""Spectral norm of the rollout Jacobian :math:`∂(y_T, v_T)/∂(y_0, v_0)` (autodiff).

    ``k`` may be an array: evaluated for each value (``vmap``).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import stiff_contact_jacobian_norm
        >>> n = stiff_contact_jacobian_norm(jnp.array([1e2, 1e6]))
        >>> bool(n[1] > 100 * n[0])  # a stiffer contact, a far larger Jacobian
        True
    """
    num_steps = check_int("num_steps", num_steps)
    sys = stiff_contact(h=h, y0=y0, **kwargs)

    def one(theta):
        J, _ = rollout_jacobian(sys.step, sys.s0, theta, num_steps, method="autodiff")
        return jnp.linalg.norm(J, 2)

    return _per_stiffness(sys, k, one)


def _per_stiffness(sys: System, k, fn):
    """``fn(θ)`` for θ = the system's parameters with each stiffness of ``k`` (``vmap``),
    every output leaf shaped like ``k``."""
    k = jnp.asarray(k, jnp.result_type(k, float))
    check_positive("k", k)
    out = jax.vmap(lambda kk: fn(dict(sys.theta, k=kk)))(k.ravel())
    return jax.tree_util.tree_map(lambda a: a.reshape(k.shape), out)


def stiff_contact_bounce_report(
    k, *, h: float = 1 / 240, num_steps: int = 480, y0: float = 1.0, **kwargs
):
    """What the fixed step makes of the contact, for each stiffness in ``k``.

    Returns a dict of arrays shaped like ``k``:
        ``energy_ratio``: energy at the end over energy at the start (1 if resolved, c=0);
        ``steps_in_contact``: how many sampled states are below the ground;
        ``contact_duration_steps``: the true contact duration π√(m/k) in steps;
        ``max_penetration``: deepest sampled penetration (m).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import stiff_contact_bounce_report
        >>> r = stiff_contact_bounce_report(jnp.array([1e2, 1e7]))
        >>> [round(float(d), 2) for d in r["contact_duration_steps"]]  # π√(m/k) / h
        [75.4, 0.24]
        >>> bool(r["energy_ratio"][1] > 10)  # unresolved: the bounce gains energy
        True
    """
    num_steps = check_int("num_steps", num_steps)
    sys = stiff_contact(h=h, y0=y0, **kwargs)

    def one(theta):
        y, v = rollout(sys.step, sys.s0, theta, num_steps)
        e0 = stiff_contact_energy((y[0], v[0]), theta)
        eT = stiff_contact_energy((y[-1], v[-1]), theta)
        return {
            "energy_ratio": eT / e0,
            "steps_in_contact": jnp.sum(y < 0),
            "contact_duration_steps": math.pi * jnp.sqrt(theta["m"] / theta["k"]) / h,
            "max_penetration": jnp.max(jnp.maximum(-y, 0.0)),
        }

    return _per_stiffness(sys, k, one)
