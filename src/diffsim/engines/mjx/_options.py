# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""What MJX can run of a MuJoCo model's options, and what the adapter maps or reports."""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np

_INT = mujoco.mjtIntegrator
INTEGRATOR_NAMES = {
    int(_INT.mjINT_EULER): "Euler",
    int(_INT.mjINT_RK4): "RK4",
    int(_INT.mjINT_IMPLICIT): "implicit",
    int(_INT.mjINT_IMPLICITFAST): "implicitfast",
}
MAX_ITERATIONS = int(np.iinfo(np.int32).max)
MAX_TIMESTEP = 1.0
"""Largest ``opt.timestep`` accepted, s (MuJoCo models step in milliseconds; a step of a
second or more leaves any contact or joint dynamics unresolved and overflows to NaN)."""


def check_options(mj_model: mujoco.MjModel) -> tuple[mujoco.MjModel, tuple[str, ...]]:
    """The model MJX is given (options it lacks mapped to what gives the same solution) and
    the report of what was mapped; ``ValueError`` naming the MJCF option for what MJX
    cannot run."""
    opt = mj_model.opt
    h = float(opt.timestep)
    if not (math.isfinite(h) and 0.0 < h <= MAX_TIMESTEP):
        raise ValueError(
            f"<option timestep> must be finite and in (0, {MAX_TIMESTEP:g}] s, got {h!r}"
        )
    integrator = int(opt.integrator)
    if integrator not in INTEGRATOR_NAMES:
        raise ValueError(
            f"<option integrator> {integrator} is not supported: use 'Euler', 'RK4', "
            "'implicit' or 'implicitfast'"
        )
    if int(opt.cone) != int(mujoco.mjtCone.mjCONE_PYRAMIDAL):
        raise ValueError(
            "<option cone='elliptic'> is not supported (the adapter differentiates the "
            "pyramidal cone's piecewise-quadratic solve): use cone='pyramidal', MuJoCo's "
            "default (the friction cone becomes a pyramid of 2·(condim−1) facets; measured "
            "in MuJoCo C, a box sliding diagonally at 1 m/s with friction 0.5 travels 7.2 cm "
            "instead of 5.0 cm before it stops)"
        )
    if int(opt.noslip_iterations) > 0:
        raise ValueError(
            f"<option noslip_iterations='{int(opt.noslip_iterations)}'> is not supported: "
            "MJX has no noslip pass; use noslip_iterations='0' (MuJoCo's default)"
        )
    density, viscosity = float(opt.density), float(opt.viscosity)
    fluid = density > 0 or viscosity > 0 or bool(np.any(opt.wind))
    if fluid and integrator == int(_INT.mjINT_IMPLICITFAST):
        raise ValueError(
            "<option integrator='implicitfast'> with fluid forces (density, viscosity or "
            "wind) is not supported by MJX: use integrator='implicit', 'RK4' or 'Euler'"
        )
    given = copy.deepcopy(mj_model)
    report: list[str] = []
    if integrator == int(_INT.mjINT_RK4):
        report.append(
            "integrator RK4: MuJoCo's RK4 (its tableau, four forward evaluations per step) "
            "run by the adapter over MJX's forward dynamics"
        )
    elif integrator == int(_INT.mjINT_IMPLICIT):
        report.append(
            "integrator implicit: MuJoCo's implicit-in-velocity step, with the derivative "
            "of the smooth forces in velocity (damping, actuators, fluid, Coriolis and "
            "centrifugal) by forward-mode autodiff of MJX's velocity stage (MJX lacks it)"
        )
        given.opt.integrator = _INT.mjINT_EULER
    if int(opt.solver) == int(mujoco.mjtSolver.mjSOL_PGS):
        report.append(
            "solver PGS: MJX has no PGS; its Newton solver computes the same converged "
            f"solution of the same convex problem (to opt.tolerance = {opt.tolerance:g}), and "
            "the derivative is that of the converged solution with any solver"
        )
        given.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return given, tuple(report)


def joints_on_a_range_end(mj_model: mujoco.MjModel) -> tuple[str, ...]:
    """Names of the limited hinge and slide joints whose ``qpos0`` is an end of their range
    (to 1e-9): a limit that switches on at the initial state."""
    out = []
    for j in range(mj_model.njnt):
        if not mj_model.jnt_limited[j] or int(mj_model.jnt_type[j]) not in (
            int(mujoco.mjtJoint.mjJNT_HINGE),
            int(mujoco.mjtJoint.mjJNT_SLIDE),
        ):
            continue
        q = float(mj_model.qpos0[mj_model.jnt_qposadr[j]])
        if min(abs(q - r) for r in mj_model.jnt_range[j]) <= 1e-9:
            out.append(mj_model.joint(j).name or f"joint {j}")
    return tuple(out)
