"""Ready-made systems: each gives a step, default state and parameters, and closed forms.

One convention for every system: its factory is exported here under the system's name
(``free_particle(...)``, ``bouncing_ball(...)``, ... each returns a :class:`System`), its
helpers under names that start with it (``bouncing_ball_final_state``, ``stiff_contact_energy``),
and the implementation modules are private. :data:`SYSTEMS` registers each system once —
factory, settings with units and ranges, presets, the problem the doctor examines, closed
forms (``SYSTEMS["bounce"].closed_forms["derivatives"]``) — and the CLI, the doctor, the
page and the tests read it.

Public modules built on these parts rather than systems with a factory:
``projectile_wall`` (the article's wall, closed form and time-stepped), ``wall_study``
(optimising over the wall, its smoothed loss), ``pushing`` and ``box_trajopt`` (trajectory
optimisation), ``tennis`` (a controller through contact: a paddle returning a ball) and
``billiards`` (DiffTaichi's billiards: contact between eleven balls),
``mass_spring_robot`` (DiffTaichi's walking robots and their controller) and
``battery`` (the doctor's validation battery and the presets ``diffsim diagnose --system``
examines).

This package is the catalogue: what is built from the library (systems, their registry,
studies, the battery). It sits above the estimators, ``optimize`` and the doctor and is
imported by none of them.

Examples:
    >>> from diffsim.systems import SYSTEMS, Problem, LossProblem, RolloutProblem
    >>> list(SYSTEMS)[:3]
    ['wall', 'bounce', 'stiff']
    >>> all(isinstance(spec.problem(), Problem) for spec in SYSTEMS.values())  # Problem: a union
    True
"""

from . import battery as battery
from . import billiards as billiards
from . import box_trajopt as box_trajopt
from . import mass_spring_robot as mass_spring_robot
from . import projectile_wall as projectile_wall
from . import pushing as pushing
from . import tennis as tennis
from . import wall_study as wall_study
from ._bouncing_ball import bouncing_ball as bouncing_ball
from ._bouncing_ball import bouncing_ball_final_state as bouncing_ball_final_state
from ._bouncing_ball import (
    bouncing_ball_final_state_jacobian as bouncing_ball_final_state_jacobian,
)
from ._bouncing_ball_events import bouncing_ball_event_driven as bouncing_ball_event_driven
from ._double_pendulum import double_pendulum as double_pendulum
from ._double_pendulum import double_pendulum_energy as double_pendulum_energy
from ._free_particle import free_particle as free_particle
from ._free_particle import free_particle_parameter_jacobian as free_particle_parameter_jacobian
from ._free_particle import free_particle_rollout_jacobian as free_particle_rollout_jacobian
from ._mass_spring import mass_spring as mass_spring
from ._mass_spring import mass_spring_drive as mass_spring_drive
from ._mass_spring import mass_spring_identify as mass_spring_identify
from ._mass_spring import mass_spring_observe as mass_spring_observe
from ._oscillators import harmonic_oscillator as harmonic_oscillator
from ._oscillators import nonlinear_spring as nonlinear_spring
from ._oscillators import pendulum as pendulum
from ._oscillators import pendulum_energy as pendulum_energy
from ._registry import SYSTEMS as SYSTEMS
from ._registry import LossProblem as LossProblem
from ._registry import Problem as Problem
from ._registry import RolloutProblem as RolloutProblem
from ._registry import Study as Study
from ._registry import SystemSpec as SystemSpec
from ._stiff_contact import stiff_contact as stiff_contact
from ._stiff_contact import stiff_contact_bounce_report as stiff_contact_bounce_report
from ._stiff_contact import stiff_contact_energy as stiff_contact_energy
from ._stiff_contact import stiff_contact_jacobian_norm as stiff_contact_jacobian_norm
from ._stiff_contact import stiff_contact_step as stiff_contact_step
from .base import System as System

__all__ = [
    "SYSTEMS",
    "LossProblem",
    "Problem",
    "RolloutProblem",
    "Study",
    "System",
    "SystemSpec",
    "battery",
    "billiards",
    "bouncing_ball",
    "bouncing_ball_event_driven",
    "bouncing_ball_final_state",
    "bouncing_ball_final_state_jacobian",
    "double_pendulum",
    "double_pendulum_energy",
    "free_particle",
    "free_particle_parameter_jacobian",
    "free_particle_rollout_jacobian",
    "harmonic_oscillator",
    "mass_spring",
    "mass_spring_drive",
    "mass_spring_identify",
    "mass_spring_observe",
    "mass_spring_robot",
    "nonlinear_spring",
    "pendulum",
    "pendulum_energy",
    "projectile_wall",
    "pushing",
    "stiff_contact",
    "stiff_contact_bounce_report",
    "stiff_contact_energy",
    "stiff_contact_jacobian_norm",
    "stiff_contact_step",
    "wall_study",
]
