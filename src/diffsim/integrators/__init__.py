"""Integrators: step builders over (x, v) states for ``x'' = a(x, v, θ[, u])``.

Each is an ``equinox.Module`` that is a pure step ``step((x, v), theta[, u])`` and has an
analytic per-step ``.jacobian``. ``INTEGRATORS`` maps each scheme's name to its class (the
registry the CLI and the parametrized tests read).

Examples:
    >>> from diffsim.integrators import INTEGRATORS
    >>> [(name, cls.order) for name, cls in INTEGRATORS.items()]  # doctest: +NORMALIZE_WHITESPACE
    [('semi_implicit_euler', 1), ('explicit_euler', 1), ('velocity_verlet', 2), ('rk4', 4),
     ('implicit_euler', 1)]

    ``Acceleration`` is the type of ``a(x, v, theta[, u])``, ``AccelerationJacobian`` that
    of its optional analytic derivatives ``(∂a/∂x, ∂a/∂v, ∂a/∂θ)``:

    >>> import jax.numpy as jnp
    >>> from diffsim.integrators import Acceleration, AccelerationJacobian, SemiImplicitEuler
    >>> spring: Acceleration = lambda x, v, th: -th["k"] * x
    >>> spring_jacobian: AccelerationJacobian = lambda x, v, th: (
    ...     -th["k"] * jnp.eye(1), jnp.zeros((1, 1)), -jnp.reshape(x, (1, 1)))
    >>> step = SemiImplicitEuler(spring, h=0.1, accel_jacobian=spring_jacobian)
    >>> A, B = step.jacobian((jnp.ones(1), jnp.zeros(1)), {"k": 4.0})
    >>> [[round(float(c), 4) for c in row] for row in A]
    [[0.96, 0.1], [-0.4, 1.0]]
"""

from . import base as _base
from .base import Acceleration as Acceleration
from .base import AccelerationJacobian as AccelerationJacobian
from .base import CoordinateAcceleration as CoordinateAcceleration
from .base import ExplicitIntegrator as ExplicitIntegrator
from .base import Integrator as Integrator
from .base import Lin as Lin
from .base import check_integrator_class as check_integrator_class
from .explicit import RK4 as RK4
from .explicit import ExplicitEuler as ExplicitEuler
from .explicit import SemiImplicitEuler as SemiImplicitEuler
from .explicit import VelocityVerlet as VelocityVerlet
from .implicit import ImplicitEuler as ImplicitEuler

INTEGRATORS: dict[str, type[Integrator]] = {
    "semi_implicit_euler": SemiImplicitEuler,
    "explicit_euler": ExplicitEuler,
    "velocity_verlet": VelocityVerlet,
    "rk4": RK4,
    "implicit_euler": ImplicitEuler,
}
_base.SCHEMES[:] = [cls.__name__ for cls in INTEGRATORS.values()]  # for base's messages

__all__ = [
    "INTEGRATORS",
    "RK4",
    "Acceleration",
    "AccelerationJacobian",
    "CoordinateAcceleration",
    "ExplicitEuler",
    "ExplicitIntegrator",
    "ImplicitEuler",
    "Integrator",
    "Lin",
    "SemiImplicitEuler",
    "VelocityVerlet",
    "check_integrator_class",
]
