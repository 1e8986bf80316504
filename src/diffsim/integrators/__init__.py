"""Integrators: step builders over (x, v) states for ``x'' = a(x, v, θ[, u])``.

Each is an ``equinox.Module`` that is a pure step ``step((x, v), theta[, u])`` and has an
analytic per-step ``.jacobian``. ``INTEGRATORS`` maps each scheme's name to its class (the
registry the CLI and the parametrized tests read).
"""

from .base import Acceleration as Acceleration
from .base import AccelerationJacobian as AccelerationJacobian
from .base import CoordinateAcceleration as CoordinateAcceleration
from .base import ExplicitIntegrator as ExplicitIntegrator
from .base import Integrator as Integrator
from .base import Lin as Lin
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
]
