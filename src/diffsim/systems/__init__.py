"""Ready-made systems: each gives a step, default state and parameters, and closed forms."""

from . import bouncing_ball as bouncing_ball
from . import mass_spring as mass_spring
from . import projectile_wall as projectile_wall
from . import stiff_contact as stiff_contact
from .base import System as System
from .double_pendulum import double_pendulum as double_pendulum
from .free_particle import free_particle as free_particle
from .oscillators import harmonic_oscillator as harmonic_oscillator
from .oscillators import nonlinear_spring as nonlinear_spring
from .oscillators import pendulum as pendulum
from .oscillators import pendulum_energy as pendulum_energy

__all__ = [
    "System",
    "bouncing_ball",
    "double_pendulum",
    "free_particle",
    "harmonic_oscillator",
    "mass_spring",
    "nonlinear_spring",
    "pendulum",
    "pendulum_energy",
    "projectile_wall",
    "stiff_contact",
]
