"""What an MJX step's θ may name, and the state it carries (:class:`MjxState`)."""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Array

from ..._checks import Domain

MODEL_FIELDS: dict[str, str] = {
    "body_mass": "body masses (nbody,), kg",
    "body_inertia": "principal inertias (nbody, 3), kg m²",
    "geom_friction": "friction coefficients (ngeom, 3): sliding, torsional, rolling",
    "geom_solref": "contact softness (ngeom, 2): time constant s, damping ratio",
    "geom_solimp": "contact impedance (ngeom, 5)",
    "dof_damping": "joint damping (nv,), N s/m or N m s/rad",
    "dof_armature": "armature inertia (nv,)",
    "dof_frictionloss": "dry joint friction (nv,)",
    "jnt_stiffness": "joint spring stiffness (njnt,)",
    "qpos_spring": "joint spring rest positions (nq,)",
    "actuator_gainprm": "actuator gain parameters (nu, 10), e.g. a position servo's kp",
    "actuator_biasprm": "actuator bias parameters (nu, 10)",
    "actuator_gear": "actuator gears (nu, 6)",
    "gravity": "gravity (3,), m/s² (opt.gravity)",
}
"""Model fields θ may name (for :meth:`MjxStep.__call__`), with what they hold."""

_NONNEG = ("body_mass", "body_inertia", "geom_friction", "dof_damping", "dof_armature",
           "dof_frictionloss", "jnt_stiffness")  # fmt: skip
MODEL_DOMAINS: dict[str, Domain] = {
    name: Domain(0.0, what=f"{name} that MuJoCo's compiler accepts") for name in _NONNEG
}
"""Where a model field is physical: what MuJoCo's compiler accepts, for the fields whose
every entry has one range (:meth:`MjxStep.check_physical`)."""

STATE_FIELDS: dict[str, str] = {
    "qpos0": "initial joint positions (nq,)",
    "qvel0": "initial joint velocities (nv,) (a free joint: linear, then angular)",
    "ctrl": "control sequence (num_steps, nu)",
}
"""Further names :meth:`MjxStep.simulate`'s θ may hold: the initial state and controls."""


class MjxState(NamedTuple):
    """The state an :class:`MjxStep` carries from step to step.

    Attributes:
        qpos: joint positions (nq,) (a free joint: position, then a unit quaternion).
        qvel: joint velocities (nv,).
        act: actuator activations (na,).
        qacc_warmstart: the previous step's accelerations (nv,), where MuJoCo's constraint
            solver starts; its derivative does not reach the next state (see the module
            docstring).

    Example:
        >>> import jax
        >>> from diffsim.engines import mjx, scenes
        >>> step = mjx.load(scenes.path("free_flight"))  # a 1 kg ball, h = 0.01 s, no contact
        >>> s0 = step.initial_state(qvel=[1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        >>> s0._fields
        ('qpos', 'qvel', 'act', 'qacc_warmstart')
        >>> s0.qpos.tolist()  # the position, then a unit quaternion
        [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        >>> s1 = jax.jit(step)(s0, None)  # semi-implicit Euler: v += g h, then x += v h
        >>> [round(float(v), 4) for v in s1.qvel[:3]], [round(float(x), 4) for x in s1.qpos[:3]]
        ([1.0, 0.0, -0.0981], [0.01, 0.0, -0.001])
    """

    qpos: Array
    qvel: Array
    act: Array
    qacc_warmstart: Array

    SOLVER_MEMORY = ("qacc_warmstart",)
    """Fields that are the solver's memory, not the physical state: multiple shooting
    (:func:`diffsim.identify`) neither fits them at a window start nor asks them to be
    continuous across windows."""
