"""The registry of built-in systems: each one defined once, read by everything else.

A :class:`SystemSpec` holds a system's factory, the settings it is examined at (with units,
ranges and defaults), named presets, the scalar problem the gradient doctor examines
(:class:`LossProblem` or :class:`RolloutProblem`) and its closed forms. The CLI's
``--system`` choices, the doctor's presets and battery, the page and the examples read
:data:`SYSTEMS`; the parametrized tests run every entry. Adding a system is one file and one
entry here (``CONTRIBUTING.md``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import jax.numpy as jnp
from jaxtyping import Array

from .._options import Option
from . import projectile_wall as pw
from . import wall_study
from ._bouncing_ball import (
    bouncing_ball,
    bouncing_ball_bounce_window,
    bouncing_ball_closed_form,
    bouncing_ball_derivatives_closed_form,
)
from ._double_pendulum import double_pendulum, double_pendulum_energy
from ._free_particle import (
    free_particle,
    free_particle_parameter_jacobian,
    free_particle_rollout_jacobian,
)
from ._mass_spring import mass_spring, mass_spring_drive, mass_spring_observe
from ._oscillators import harmonic_oscillator, nonlinear_spring, pendulum, pendulum_energy
from ._stiff_contact import stiff_contact, stiff_contact_energy
from .base import System


@dataclasses.dataclass(frozen=True)
class LossProblem:
    """A scalar loss of θ at a point: ``loss(theta)``.

    Examples:
        >>> from diffsim.systems import SYSTEMS, LossProblem
        >>> p = SYSTEMS["wall"].problem(v0=8.0)
        >>> isinstance(p, LossProblem), float(p.loss(p.theta))
        (True, 16.0)
    """

    loss: Callable[[Any], Array]
    theta: Any


@dataclasses.dataclass(frozen=True)
class RolloutProblem:
    """A scalar loss of a rollout's final state: ``loss(s_T)`` after ``num_steps`` steps of
    ``system`` from its ``s0`` with its ``theta``, differentiated with respect to ``wrt``.

    Examples:
        >>> from diffsim.systems import SYSTEMS, RolloutProblem
        >>> p = SYSTEMS["stiff"].problem(k=1e5)
        >>> isinstance(p, RolloutProblem), p.num_steps, p.wrt
        (True, 240, 's0')
    """

    system: System
    num_steps: int
    loss: Callable[[Any], Array]
    wrt: Literal["s0", "theta"] = "s0"


Problem = LossProblem | RolloutProblem


@dataclasses.dataclass(frozen=True)
class Study:
    """A scalar loss of one parameter with its optimisation recipe, for ``diffsim estimate``
    and ``diffsim optimize``: ``optimize(theta0, estimator, *, key, steps, lr, callback)``
    returns an :class:`~diffsim.OptimizeResult`; success is ``|outcome(θ) − target| <=
    tolerance``.

    Examples:
        >>> from diffsim.systems import SYSTEMS
        >>> study = SYSTEMS["wall"].study
        >>> study.target, study.tolerance, float(study.loss(8.0))
        (10.0, 0.05, 16.0)
    """

    loss: Callable[[Any], Array]
    optimize: Callable[..., Any]
    outcome: Callable[[Any], Array]
    target: float
    tolerance: float


@dataclasses.dataclass(frozen=True)
class SystemSpec:
    """One registered system.

    Attributes:
        name: the registry key and the CLI's ``--system`` choice.
        title: a short description.
        factory: builds the :class:`System` (its keyword arguments are the physical
            parameters, with units in its docstring).
        settings: the :class:`~diffsim.estimators.Option` s :attr:`problem` takes (each with its
            ``default``; the same type as an estimator's options).
        problem: ``problem(**settings) -> LossProblem | RolloutProblem``, what the doctor
            (and ``diffsim diagnose --system``) examines; settings left out take their default.
        presets: named settings (``{"plateau": {"v0": 8.0}}``).
        closed_forms: known analytic results, by name.
        study: the :class:`Study` ``diffsim estimate``/``optimize`` run, or ``None``.

    Examples:
        >>> from diffsim.systems import SYSTEMS
        >>> spec = SYSTEMS["wall"]
        >>> spec.presets["plateau"], spec.defaults()
        ({'v0': 8.0}, {'v0': 8.0})
    """

    name: str
    title: str
    factory: Callable[..., System]
    settings: tuple[Option, ...]
    problem: Callable[..., Problem]
    presets: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    closed_forms: Mapping[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    study: Study | None = None

    def defaults(self) -> dict[str, Any]:
        """Each setting's default."""
        return {s.name: s.default for s in self.settings}

    def build(self, preset: str | None = None, **settings: Any) -> Problem:
        """The problem at ``preset``'s settings (if given) updated with ``settings``.

        Raises:
            ValueError: an unknown preset or setting, or a value the system refuses.
        """
        chosen: dict[str, Any] = {}
        if preset is not None:
            if preset not in self.presets:
                raise ValueError(
                    f"preset must be one of {', '.join(self.presets)} for {self.name}, "
                    f"got {preset!r}"
                )
            chosen.update(self.presets[preset])
        chosen.update(settings)
        known = {s.name for s in self.settings}
        unknown = set(chosen) - known
        if unknown:
            raise ValueError(
                f"{self.name} takes the settings {', '.join(sorted(known)) or 'none'}, "
                f"got {', '.join(sorted(unknown))}"
            )
        return self.problem(**chosen)


def _horizon(steps: int | None, default: int) -> int:
    return int(steps) if steps else default


STEPS = "steps"


def _steps(default: int) -> Option:
    return Option(STEPS, "rollout horizon T (0: the system's default)", int, "", 0, default=default)


# --- the problems each system is examined at ------------------------------------------------


def _height(s):
    return s[0]


def _cos_lower_angle(s):
    return jnp.cos(s[0][1])


def _final_angle_sq(s):
    return s[0] ** 2


def _miss_distance(s):
    return (s[0] - 1.0) ** 2


def _wall(v0: float = 8.0) -> Problem:
    """Projectile over the wall, d loss / d v0 at launch speed ``v0`` (m/s, in [4, 14])."""
    lo, hi = 4.0, pw.V0_MAX
    if not lo <= v0 <= hi:
        raise ValueError(f"v0 must be in [{lo}, {hi}] m/s, got {v0}")
    return LossProblem(pw.loss, jnp.asarray(v0))


def _bounce(toi: bool = True, steps: int | None = None) -> Problem:
    """Bouncing ball (h = 1/240), d y_T / d y0 over ``steps`` (default 240) steps."""
    return RolloutProblem(bouncing_ball(h=1 / 240, toi=toi), _horizon(steps, 240), _height)


def _stiff(k: float = 1e5, steps: int | None = None) -> Problem:
    """Penalty contact of stiffness ``k`` (N/m, > 0), d y_T / d y0 (default T = 240)."""
    if not (math.isfinite(k) and k > 0):
        raise ValueError(f"k must be finite and > 0, got {k}")
    return RolloutProblem(stiff_contact(k=k), _horizon(steps, 240), _height)


def _double_pendulum(steps: int | None = None) -> Problem:
    """Double pendulum, d cos(lower angle at T) / d s0 (default T = 800, 8 s: chaotic)."""
    return RolloutProblem(double_pendulum(), _horizon(steps, 800), _cos_lower_angle)


def _pendulum(steps: int | None = None) -> Problem:
    """Damped pendulum from 2.5 rad, d angle_T² / d s0 (default T = 1000)."""
    sys = pendulum(h=0.01, angle0=2.5, damping=0.1)
    return RolloutProblem(sys, _horizon(steps, 1000), _final_angle_sq)


def _free_particle(steps: int | None = None) -> Problem:
    """Free particle, d (x_T − 1)² / d s0 (default T = 120)."""
    return RolloutProblem(free_particle(h=1 / 60, v0=3.0), _horizon(steps, 120), _miss_distance)


def _nonlinear_spring(steps: int | None = None) -> Problem:
    """Duffing spring from x0 = 1.5 m, d x_T² / d s0 (default T = 2000)."""
    sys = nonlinear_spring(h=0.01, x0=1.5)
    return RolloutProblem(sys, _horizon(steps, 2000), _final_angle_sq)


def _harmonic_oscillator(steps: int | None = None) -> Problem:
    """Harmonic oscillator, d x_T² / d s0 (default T = 1000)."""
    return RolloutProblem(harmonic_oscillator(h=0.01), _horizon(steps, 1000), _final_angle_sq)


def _mass_spring(steps: int | None = None) -> Problem:
    """Identification of the chain's stiffnesses: d (mean squared position error) / d k at
    20 % off the truth, from ``steps`` (default 300) observed steps of the known drive."""
    sys = mass_spring(3)
    T = _horizon(steps, 300)
    inputs = mass_spring_drive(T, 0.01)
    observed = mass_spring_observe(sys, sys.theta, inputs)

    def identification_loss(k):
        return jnp.mean((mass_spring_observe(sys, dict(sys.theta, k=k), inputs) - observed) ** 2)

    return LossProblem(identification_loss, sys.theta["k"] * jnp.array([1.2, 0.8, 1.1]))


def _harmonic_closed_form(x0, v0, omega, t):
    """``(x(t), v(t))`` of :func:`harmonic_oscillator` in continuous time."""
    c, s = jnp.cos(omega * t), jnp.sin(omega * t)
    return x0 * c + v0 / omega * s, -x0 * omega * s + v0 * c


# --- the registry ---------------------------------------------------------------------------

_V0 = Option("v0", "launch speed", float, "m/s", 4.0, pw.V0_MAX, default=8.0)
_TOI = Option("toi", "time-of-impact correction", bool, default=True)
_K = Option("k", "penalty stiffness", float, "N/m", 0.0, default=1e5)

SYSTEMS: dict[str, SystemSpec] = dict(
    {
        s.name: s
        for s in (
            SystemSpec(
                "wall",
                "projectile over the wall (the article's demo)",
                wall_study.wall_system,
                (_V0,),
                _wall,
                presets={
                    "short": {"v0": 5.0},
                    "plateau": {"v0": 8.0},
                    "cliff": {"v0": 9.3},
                    "past-cliff": {"v0": 9.5},
                    "basin": {"v0": 11.0},
                },
                closed_forms={
                    "landing_x": pw.landing_x_closed_form,
                    "loss": pw.loss_closed_form,
                    "plateau_bounds": pw.plateau_bounds,
                    "optimal_v0": pw.optimal_v0,
                },
                study=Study(
                    pw.loss,
                    wall_study.optimize_wall,
                    pw.landing_x,
                    pw.TARGET,
                    wall_study.RECIPE.tolerance_x,
                ),
            ),
            SystemSpec(
                "bounce",
                "bouncing ball with restitution",
                bouncing_ball,
                (_TOI, _steps(240)),
                _bounce,
                presets={"toi": {"toi": True}, "naive": {"toi": False}},
                closed_forms={
                    "final_state": bouncing_ball_closed_form,
                    "derivatives": bouncing_ball_derivatives_closed_form,
                    "bounce_window": bouncing_ball_bounce_window,
                },
            ),
            SystemSpec(
                "stiff",
                "ball on a penalty-spring ground",
                stiff_contact,
                (_K, _steps(240)),
                _stiff,
                presets={"soft": {"k": 1e2}, "resolved": {"k": 1e4}, "unresolved": {"k": 1e6}},
                closed_forms={"energy": stiff_contact_energy},
            ),
            SystemSpec(
                "double-pendulum",
                "double pendulum (chaotic)",
                double_pendulum,
                (_steps(800),),
                _double_pendulum,
                presets={"short": {"steps": 50}},
                closed_forms={"energy": double_pendulum_energy},
            ),
            SystemSpec(
                "pendulum",
                "damped pendulum",
                pendulum,
                (_steps(1000),),
                _pendulum,
                closed_forms={"energy": pendulum_energy},
            ),
            SystemSpec(
                "free-particle",
                "particle under constant acceleration",
                free_particle,
                (_steps(120),),
                _free_particle,
                closed_forms={
                    "rollout_jacobian": free_particle_rollout_jacobian,
                    "parameter_jacobian": free_particle_parameter_jacobian,
                },
            ),
            SystemSpec(
                "nonlinear-spring",
                "hardening (Duffing) spring",
                nonlinear_spring,
                (_steps(2000),),
                _nonlinear_spring,
            ),
            SystemSpec(
                "harmonic-oscillator",
                "harmonic oscillator",
                harmonic_oscillator,
                (_steps(1000),),
                _harmonic_oscillator,
                closed_forms={"state": _harmonic_closed_form},
            ),
            SystemSpec(
                "mass-spring",
                "chain of masses and springs (system identification)",
                mass_spring,
                (_steps(300),),
                _mass_spring,
            ),
        )
    }
)
"""Every built-in system by name, in the order the CLI lists them."""
