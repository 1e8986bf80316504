"""What identification reads off a step and its state beyond ``step(state, theta[, u])``.

Every such read is here, one function per capability: what the step declares
(:class:`~diffsim.AbstractStep`) — the time step ``h`` (checked against a recording's times, and for
velocities from recorded positions), the MuJoCo model behind an MJX step (its position
coordinates), and the fields a state type names as solver memory (an MJX state's warm
start: neither fitted nor tied by multiple shooting), and whether a state is an MJX state
(it shows ``qpos`` and ``qvel``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import is_concrete
from .._step import as_step


def step_size(step: Any) -> float | None:
    """The step's concrete time step ``h`` (s), if it declares one."""
    h = as_step(step).h
    if h is None or not is_concrete(h) or np.ndim(h) != 0:
        return None
    return float(h)


def mujoco_model(step: Any) -> Any:
    """The ``mujoco.MjModel`` behind the step (an MJX step's ``mj_model``), else ``None``."""
    return as_step(step).mj_model


def has_qpos_qvel(state: Any) -> bool:
    """Whether the state shows MuJoCo's ``qpos`` and ``qvel`` fields (an MJX state)."""
    return hasattr(state, "qpos") and hasattr(state, "qvel")


def solver_memory(state: Any) -> tuple[str, ...]:
    """The fields the state's type names as solver memory (``SOLVER_MEMORY``), e.g. an MJX
    state's warm start: carried from step to step, but not part of the physical state."""
    return tuple(getattr(type(state), "SOLVER_MEMORY", ()))


def physical(state: Any) -> Any:
    """``state`` without its solver memory (those fields ``None``): what multiple shooting
    fits and asks to be continuous."""
    memory = solver_memory(state)
    return state._replace(**dict.fromkeys(memory)) if memory else state


def with_memory(state: Any, like: Any) -> Any:
    """``state`` (from :func:`physical`) with its solver memory taken from ``like``."""
    memory = solver_memory(state)
    return state._replace(**{f: getattr(like, f) for f in memory}) if memory else state
