# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""The adapter's step against MuJoCo C's ``mj_step`` from the same states."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import ArrayLike

from ..._checks import check_int
from ._fields import MjxState

# the step is typed as Any here: this module sits below ``_step`` (which imports it), so
# naming MjxStep would close an import circle inside the package
MjxStep = Any

COMPARE_STEPS = 100
"""Steps of MuJoCo C's trajectory :meth:`MjxStep.compare_with_mujoco` compares along by
default (``load(compare=True)``)."""

COMPARE_TOLERANCE = 1e-4
"""MJX's model is called different from MuJoCo C's (:attr:`MujocoGap.differs`) where one
step's velocity differs from ``mj_step``'s by more than this share of the largest change of
velocity in one step along the compared trajectory (and by more than 1e-9 in absolute
terms). Both stop their solvers at ``opt.tolerance`` (1e-8 by default). Measured over
:data:`COMPARE_STEPS` steps (float64): where the models agree the gap was 3e-15 (half_cheetah)
to 1e-7 (the pushing scene's box coming to rest: solver noise); on the ant, whose capsule
feet MJX's collision gives other contact frames, 8.3e-3 (|Δqvel| 0.066 on landing)."""

MAX_COMPARE_STEPS = 10_000


class MujocoGap(NamedTuple):
    """The adapter's step against MuJoCo C's ``mj_step`` from the same states
    (:meth:`MjxStep.compare_with_mujoco`).

    Attributes:
        steps: how many states were compared.
        qpos: the largest |Δqpos| of one step over them.
        qvel: the largest |Δqvel| of one step over them.
        qvel_change: the largest change of qvel in one of MuJoCo's steps, the scale.
        worst_step: the state (0-based step of C's trajectory) with the largest |Δqvel|.

    Example:
        >>> from diffsim.engines import mjx, scenes
        >>> gap = mjx.load(scenes.path("free_flight")).compare_with_mujoco(5)
        >>> gap.steps, gap.differs, gap.qvel < 1e-12, gap.relative < mjx.COMPARE_TOLERANCE
        (5, False, True, True)
        >>> mjx.COMPARE_STEPS  # what load(model, compare=True) compares along
        100
    """

    steps: int
    qpos: float
    qvel: float
    qvel_change: float
    worst_step: int

    @property
    def relative(self) -> float:
        """The largest |Δqvel| over the largest change of qvel in one of MuJoCo's steps
        (0 when neither moves). The scale is the trajectory's, not the worst step's own: a
        body at rest changes by nothing in a step, and the solvers' stopping noise there
        (1e-9 on a box resting on the floor) is no difference of models."""
        if self.qvel == 0.0:
            return 0.0
        return self.qvel / max(self.qvel_change, 1e-30)

    @property
    def differs(self) -> bool:
        """Whether MJX's model is not MuJoCo C's along the compared states
        (:data:`COMPARE_TOLERANCE`)."""
        return self.qvel > 1e-9 and self.relative > COMPARE_TOLERANCE

    def __str__(self) -> str:
        verdict = "differs from" if self.differs else "matches"
        return (
            f"MJX's step {verdict} mj_step over {self.steps} step(s) of MuJoCo C's trajectory "
            f"from the initial state: max |Δqvel| {self.qvel:.3g} "
            f"(at step {self.worst_step}; {self.relative:.3g} of the largest change in one step, "
            f"{self.qvel_change:.3g}), "
            f"max |Δqpos| {self.qpos:.3g}"
        )


def mujoco_difference(
    step: MjxStep, state: MjxState | None = None, u: ArrayLike | None = None
) -> dict[str, float]:
    """One step of the adapter against one ``mj_step`` of MuJoCo C from the same state
    (default: the initial state) and controls (:meth:`MjxStep.mujoco_difference`)."""
    state = MjxState(*step.initial_state()) if state is None else state
    ctrl = np.zeros(step.nu) if u is None else np.asarray(u, dtype=float)
    d = mujoco.MjData(step.mj_model)
    d.qpos[:], d.qvel[:], d.act[:] = state.qpos, state.qvel, state.act
    d.qacc_warmstart[:] = state.qacc_warmstart
    d.ctrl[:] = ctrl
    mujoco.mj_step(step.mj_model, d)
    starts = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], state)
    gap = _gap(step, starts, ctrl[None], d.qpos[None], d.qvel[None])
    return {"qpos": gap.qpos, "qvel": gap.qvel, "qvel_change": gap.qvel_change}


def compare_with_mujoco(step: MjxStep, num_steps: int = COMPARE_STEPS) -> MujocoGap:
    """The adapter's step against ``mj_step`` along MuJoCo C's own trajectory
    (:meth:`MjxStep.compare_with_mujoco`)."""
    num_steps = check_int("num_steps", num_steps, minimum=1, maximum=MAX_COMPARE_STEPS)
    d = mujoco.MjData(step.mj_model)
    rows: list[tuple[np.ndarray, ...]] = []
    for _ in range(num_steps + 1):
        rows.append((d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.qacc_warmstart.copy()))
        mujoco.mj_step(step.mj_model, d)
    qpos, qvel, act, warm = (np.stack(col) for col in zip(*rows))
    starts = MjxState(*(jnp.asarray(x[:-1]) for x in (qpos, qvel, act, warm)))
    return _gap(step, starts, np.zeros((num_steps, step.nu)), qpos[1:], qvel[1:])


def _gap(step: MjxStep, starts: MjxState, ctrl, qpos_c, qvel_c) -> MujocoGap:
    """One vmapped adapter step from each of ``starts`` against C's next states."""
    ours = jax.jit(jax.vmap(lambda s, c: step(s, None, c)))(starts, jnp.asarray(ctrl))
    dv = np.max(np.abs(np.asarray(ours.qvel) - qvel_c), axis=1, initial=0.0)
    worst = int(np.argmax(dv))
    return MujocoGap(
        steps=len(dv),
        qpos=float(np.max(np.abs(np.asarray(ours.qpos) - qpos_c), initial=0.0)),
        qvel=float(dv[worst]),
        qvel_change=float(np.max(np.abs(qvel_c - np.asarray(starts.qvel)), initial=0.0)),
        worst_step=worst,
    )
