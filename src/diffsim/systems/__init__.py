"""Ready-made systems: each gives a step, default state and parameters, and closed forms."""

from .base import System as System
from .free_particle import free_particle as free_particle
from .oscillators import harmonic_oscillator as harmonic_oscillator
from .oscillators import nonlinear_spring as nonlinear_spring
from .oscillators import pendulum as pendulum
from .oscillators import pendulum_energy as pendulum_energy

__all__ = ["System", "free_particle", "harmonic_oscillator", "nonlinear_spring", "pendulum", "pendulum_energy"]
