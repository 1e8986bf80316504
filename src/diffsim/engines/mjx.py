# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
r"""MuJoCo models as diffsim steps, run by MuJoCo MJX (``pip install 'diffsim-jax[mjx]'``).

:func:`load` takes an MJCF file path, an MJCF XML string or a ``mujoco.MjModel`` and returns
an :class:`MjxStep`: a pure step ``step(state, theta[, u]) -> state`` that runs MJX's own
pipeline (``fwd_position`` … ``solve`` … the integrator, the stages of ``mjx.step``), so
every diffsim tool runs on it unchanged::

    step = mjx.load("robot.xml")
    traj = diffsim.rollout(step, step.initial_state(), {"geom_friction": f}, 200,
                           inputs=ctrl, checkpoint="sqrt")

**State** (:class:`MjxState`): ``qpos``, ``qvel``, ``act`` and ``qacc_warmstart`` (the
previous step's acceleration, which MuJoCo warm-starts its constraint solver from).

**θ** (``theta``): a dict naming the model fields to differentiate, e.g.
``{"geom_friction": ..., "body_mass": ...}`` with the field's full shape
(:data:`MODEL_FIELDS` lists the accepted names; ``"gravity"`` is ``opt.gravity``). Unknown
names and wrong shapes raise ``ValueError`` naming the field and the accepted ones. The
initial state and the control sequence are differentiated through
:meth:`MjxStep.simulate`, whose θ may also hold ``"qpos0"``, ``"qvel0"`` and ``"ctrl"``.
``u`` is the step's control vector ``ctrl`` (shape ``(nu,)``).

**Derivatives through the constraint solver.** MJX's solver is a ``lax.while_loop``
(iterate until the cost stops improving), which reverse mode cannot differentiate, and its
line search divides by zero-length search directions, which gives NaN tangents whenever no
constraint is active (free flight). This adapter does not differentiate the iterations at
all. The forward pass is MJX's own solve, untouched (converged to ``opt.tolerance``, or a
fixed number of Newton iterations with ``iterations=k``); the derivative is that of the
solution it converged to, by the implicit function theorem. With a pyramidal cone
MuJoCo's constraint cost is piecewise quadratic: at the solution :math:`a^*` with active
rows :math:`\mathcal A` (rows with :math:`J a^* - a_{ref} < 0`, equality rows, and
friction-loss rows in their quadratic zone),

.. math:: (M + J_{\mathcal A}^\top D_{\mathcal A} J_{\mathcal A})\, a
          = f_{smooth} + J_{\mathcal A}^\top D_{\mathcal A}\, a_{ref,\mathcal A} + J^\top f_{loss},

a linear system whose solution is :math:`a^*` and whose derivative (with respect to θ, the
state and the controls, through M, J, D, :math:`a_{ref}` and :math:`f_{smooth}`) is the
exact derivative of the solve wherever the active set does not change. The step returns
MJX's values exactly (a ``jax.custom_jvp`` whose primal is MJX's solution) with these
derivatives, so ``jax.grad``, ``jax.jvp``, ``jax.jacfwd`` and ``vmap`` all work and are
finite. Cost: nothing in the forward pass; one dense ``nv × nv`` solve per step in a
derivative. Accuracy: the derivative of the converged solution (what finite differences of
MuJoCo give, within the solver tolerance), never that of a truncated iteration.

``iterations=k`` replaces MJX's convergence loop by exactly k Newton iterations (warm
started from the previous step), for a fixed, batch-independent cost, and values only:
differentiating it raises ``ValueError``, because the one derivative the adapter has is that
of the converged solve, a different model, whose gradient can differ from that of the
k-iteration loss in sign and by orders of magnitude. Its accuracy cost, measured on the
pushing scene (box pushed for 1 s over four friction contacts): k = 1 moves the box's
final position by about 10 cm against the converged solve, k = 4 by less than 0.1 mm
(``tests/test_engines_mjx.py::test_fixed_iterations_match_the_converged_solve``). The
default (``None``) is the converged solve.

**What runs, and** :attr:`MjxStep.report`. MuJoCo's ``Euler`` and ``implicitfast`` are
MJX's own; ``RK4`` is MuJoCo's ``mj_RungeKutta`` (its tableau, four forward evaluations,
positions on the joint manifold) written over this adapter's forward dynamics, and
``implicit`` is MuJoCo's implicit-in-velocity step with the full derivative of the smooth
forces in velocity (forward-mode autodiff of MJX's velocity stages, which MJX itself
lacks). The ``PGS`` solver, which MJX lacks, is run as MJX's Newton solver: both converge
to the solution of the same convex problem, and the derivative is that of the solution.
Free and ball joints integrate their quaternion by MuJoCo's formula written to be smooth at
zero angular velocity (MJX's has a zero derivative there). ``step.report`` lists each of
these that applies to the model. Refused at :func:`load` with a ``ValueError`` naming the
MJCF option and the value to use: elliptic cones, ``noslip_iterations > 0`` (MJX has no
noslip pass), ``implicitfast`` with fluid forces, a ``timestep`` that is not finite or not
in (0, 1] s, a NaN in the MJCF, and whatever ``mjx.put_model`` does not implement (its
message is passed on). Every gymnasium MuJoCo model loads unchanged
(``tests/test_mujoco_zoo.py``, which checks the step and its Jacobians against MuJoCo C).
``load(model, compare=True)`` also steps the adapter from the first 100 states of MuJoCo
C's own trajectory and warns, with the size, where MJX's model (its collision, its contact
frames) is not MuJoCo C's (:class:`MujocoGap`). Changing ``body_mass`` or ``body_inertia``
through θ does not recompute MuJoCo's precomputed constants (``body_invweight0``, used to
scale contact softness), exactly as editing ``mjModel`` without ``mj_setConst``.

Pinned versions (the extra ``diffsim-jax[mjx]``): ``mujoco==3.17.0``, ``mujoco-mjx==3.17.0``
with ``jax`` 0.10.2.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import math
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import Array, ArrayLike

# MJX's optional Warp backend prints "Failed to import warp: ..." when importing it fails
# (it is not needed here: the adapter runs MJX's JAX implementation); keep imports quiet
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    from mujoco import mjx
    from mujoco.mjx._src import forward as _mjx_forward

from .._checks import check_in_range, check_int, is_concrete
from .._rollout import Checkpoint, rollout

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

STATE_FIELDS: dict[str, str] = {
    "qpos0": "initial joint positions (nq,)",
    "qvel0": "initial joint velocities (nv,) (a free joint: linear, then angular)",
    "ctrl": "control sequence (num_steps, nu)",
}
"""Further names :meth:`MjxStep.simulate`'s θ may hold: the initial state and controls."""

_INT = mujoco.mjtIntegrator
_INTEGRATOR_NAMES = {
    int(_INT.mjINT_EULER): "Euler",
    int(_INT.mjINT_RK4): "RK4",
    int(_INT.mjINT_IMPLICIT): "implicit",
    int(_INT.mjINT_IMPLICITFAST): "implicitfast",
}
_MAX_ITERATIONS = int(np.iinfo(np.int32).max)
_MAX_TIMESTEP = 1.0
"""Largest ``opt.timestep`` accepted, s (MuJoCo models step in milliseconds; a step of a
second or more leaves any contact or joint dynamics unresolved and overflows to NaN)."""


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


def _parse(load: Callable[[], mujoco.MjModel], what: str) -> mujoco.MjModel:
    """Run MuJoCo's MJCF parser ``load`` with its warnings caught (MuJoCo prints them on
    stderr and appends them to ``MUJOCO_LOG.TXT`` in the working directory otherwise): a
    NaN in the XML is a ``ValueError``, other warnings become Python warnings."""
    caught: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(caught.append)
    try:
        model = load()
    except ValueError as err:
        raise ValueError(f"{what} could not be loaded: {err}") from None
    finally:
        mujoco.set_mju_user_warning(previous)
    for message in caught:
        if "NaN" in message:
            raise ValueError(f"{what} contains a NaN (MuJoCo: {message.strip()})")
        warnings.warn(f"MuJoCo, loading {what}: {message.strip()}", UserWarning, stacklevel=4)
    return model


def _mj_model(source: Any) -> mujoco.MjModel:
    """An ``MjModel`` from a path, an XML string or a model; ``ValueError`` naming the file
    and MuJoCo's parse error."""
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and not source.lstrip().startswith("<")
    ):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ValueError(f"MJCF file {path!r} not found")
        return _parse(lambda: mujoco.MjModel.from_xml_path(path), f"MJCF file {path!r}")
    if isinstance(source, str):
        return _parse(lambda: mujoco.MjModel.from_xml_string(source), "MJCF XML string")
    raise TypeError(
        f"model must be an MJCF file path, an MJCF XML string or a mujoco.MjModel, got {source!r}"
    )


def _check_options(mj_model: mujoco.MjModel) -> tuple[mujoco.MjModel, tuple[str, ...]]:
    """The model MJX is given (options it lacks mapped to what gives the same solution) and
    the report of what was mapped; ``ValueError`` naming the MJCF option for what MJX
    cannot run."""
    opt = mj_model.opt
    h = float(opt.timestep)
    if not (math.isfinite(h) and 0.0 < h <= _MAX_TIMESTEP):
        raise ValueError(
            f"<option timestep> must be finite and in (0, {_MAX_TIMESTEP:g}] s, got {h!r}"
        )
    integrator = int(opt.integrator)
    if integrator not in _INTEGRATOR_NAMES:
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


def _joints_on_a_range_end(mj_model: mujoco.MjModel) -> tuple[str, ...]:
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


def _quat_integrate(q: Array, w: Array, dt: float) -> Array:
    r"""MuJoCo's ``mju_quatIntegrate``: :math:`q ⊗ (\cos(θ/2), \hat w \sin(θ/2))` with
    :math:`θ = dt\,|w|`, normalized, written as a function of :math:`|w|^2` (a Taylor
    series near 0, the "double where" elsewhere) so its derivative is right at ω = 0."""
    s = jnp.dot(w, w)
    theta2 = s * dt * dt
    small = theta2 < 1e-4
    safe = jnp.where(small, 1.0, s)
    n = jnp.sqrt(safe)
    t2 = jnp.where(small, theta2, 1.0)
    c = jnp.where(small, 1.0 - t2 / 8.0 + t2 * t2 / 384.0, jnp.cos(0.5 * dt * n))
    k = jnp.where(small, 0.5 * dt * (1.0 - t2 / 24.0 + t2 * t2 / 1920.0), jnp.sin(0.5 * dt * n) / n)
    dq = jnp.concatenate([c[None], k * w])
    out = _quat_mul(q, dq)
    return out / jnp.sqrt(jnp.dot(out, out))


def _quat_mul(u: Array, v: Array) -> Array:
    return jnp.stack(
        [
            u[0] * v[0] - u[1] * v[1] - u[2] * v[2] - u[3] * v[3],
            u[0] * v[1] + u[1] * v[0] + u[2] * v[3] - u[3] * v[2],
            u[0] * v[2] - u[1] * v[3] + u[2] * v[0] + u[3] * v[1],
            u[0] * v[3] + u[1] * v[2] - u[2] * v[1] + u[3] * v[0],
        ]
    )


def _stop(tree: Any) -> Any:
    """``stop_gradient`` on the floating JAX arrays of an MJX pytree (numpy leaves, which
    MJX keeps static, are left alone)."""

    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating):
            return jax.lax.stop_gradient(x)
        return x

    return jax.tree_util.tree_map(leaf, tree)


def _active_set_solution(M, J, D, aref, qfrc_smooth, floss, active):
    """The constraint solve's linear system on a fixed active set (see the module
    docstring): ``(qacc, efc_force, qfrc_constraint)``."""
    w = D * active
    H = M + (J.T * w) @ J
    a = jnp.linalg.solve(H, qfrc_smooth + J.T @ (w * aref + floss))
    force = -w * (J @ a - aref) + floss
    return a, force, J.T @ force


@jax.custom_jvp
def _solution(M, J, D, aref, qfrc_smooth, floss, active, a_star, force_star, qfrc_star):
    """MJX's solution ``(a*, force*, qfrc*)``, differentiated as the solution of the linear
    system of its active set (:func:`_active_set_solution`): nothing is added to the
    forward pass, one ``nv × nv`` solve to each derivative."""
    return a_star, force_star, qfrc_star


@_solution.defjvp
def _solution_jvp(primals, tangents):
    *inputs, active, a_star, force_star, qfrc_star = primals
    M, J, D, aref, qfrc_smooth, floss = inputs

    def linear(M, J, D, aref, qfrc_smooth, floss):
        return _active_set_solution(M, J, D, aref, qfrc_smooth, floss, active)

    _, dout = jax.jvp(linear, (M, J, D, aref, qfrc_smooth, floss), tuple(tangents[:6]))
    return (a_star, force_star, qfrc_star), dout


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _no_derivative(inputs: tuple, iterations: int) -> tuple:
    """``inputs`` unchanged; differentiating it raises ``ValueError`` (``iterations=k``)."""
    return inputs


@_no_derivative.defjvp
def _no_derivative_jvp(iterations, primals, tangents):
    raise ValueError(
        f"derivatives with iterations={iterations} are refused: its values come from "
        f"{iterations} Newton iteration(s) of the constraint solve, and the only derivative "
        "the adapter has is that of the converged solve, a different model (gradients of "
        "one would be silently wrong for the other). Load with iterations=None (the "
        "default) to differentiate, or use a zeroth-order estimator of this model"
    )


def _implicit_solve(
    m: mjx.Model, d: mjx.Data, sol: mjx.Data, iterations: int | None = None
) -> mjx.Data:
    """``d`` with MJX's constraint solution ``sol`` and its implicit-function derivative
    (see the module docstring); with ``iterations`` set, differentiating it raises."""
    impl: Any = d._impl
    simpl: Any = sol._impl
    J, D, aref = impl.efc_J, impl.efc_D, impl.efc_aref
    sg = jax.lax.stop_gradient
    a_star = sg(sol.qacc)
    jaref = sg(J) @ a_star - sg(aref)
    row = np.arange(J.shape[0])
    active = (jaref < 0) | (row < impl.ne + impl.nf)
    floss = jnp.zeros_like(D)
    if impl.nf:
        f = impl.efc_frictionloss
        r = 1.0 / sg(D + (D == 0.0) * mujoco.mjMINVAL)
        fs = sg(f)
        neg = (jaref <= -r * fs) & (fs > 0)
        pos = (jaref >= r * fs) & (fs > 0)
        active = active & ~neg & ~pos
        floss = neg * f - pos * f
    inputs = (mjx.full_m(m, d), J, D, aref, d.qfrc_smooth, floss)
    if iterations is not None:
        inputs = _no_derivative(inputs, iterations)
    qacc, force, qfrc = _solution(
        *inputs,
        active.astype(D.dtype),
        a_star,
        sg(simpl.efc_force),
        sg(sol.qfrc_constraint),
    )
    out = d.tree_replace({"qacc": qacc, "qfrc_constraint": qfrc, "_impl.efc_force": force})
    return cast(mjx.Data, out)


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

_MAX_COMPARE_STEPS = 10_000


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


class MjxStep:
    """A MuJoCo model as a diffsim step ``step(state, theta[, u]) -> state`` (see the module
    docstring). Build it with :func:`load`.

    Attributes:
        mj_model: the ``mujoco.MjModel``.
        model: the ``mjx.Model`` the step runs.
        h: the time step (``opt.timestep``), s.
        iterations: ``None`` (MJX's convergence loop) or a fixed Newton iteration count.
        nq, nv, nu, na: sizes of ``qpos``, ``qvel``, ``ctrl`` and ``act``.
        report: what the adapter runs differently from MuJoCo C and MJX's ``mjx.step``
            (integrator, solver, quaternion integration, ``iterations``), one line each.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.engines import mjx, scenes
        >>> from diffsim.engines.mjx import MODEL_FIELDS, STATE_FIELDS
        >>> step = mjx.load(scenes.path("free_flight"))
        >>> step
        MjxStep(nq=7, nv=6, nu=0, h=0.01, iterations=None)
        >>> MODEL_FIELDS["gravity"], [round(float(g), 2) for g in step.theta("gravity")["gravity"]]
        ('gravity (3,), m/s² (opt.gravity)', [0.0, 0.0, -9.81])
        >>> list(STATE_FIELDS)  # what simulate's θ may name besides MODEL_FIELDS
        ['qpos0', 'qvel0', 'ctrl']
        >>> def x_T(v0):  # the ball's x after T = 20 steps, thrown along x at v0
        ...     return step.simulate({"qvel0": jnp.zeros(6).at[0].set(v0)}, 20).qpos[0]
        >>> round(float(jax.jacfwd(x_T)(1.0)), 4)  # ∂x_T/∂v0 = T h exactly
        0.2
    """

    def __init__(self, mj_model: mujoco.MjModel, iterations: int | None) -> None:
        if mj_model.nv == 0:
            raise ValueError(
                "the model has no degrees of freedom (nv = 0): nothing in it moves, so there "
                "is nothing to simulate or differentiate; give a body a joint (e.g. "
                "<freejoint/>, or <joint type='hinge'/>)"
            )
        given, report = _check_options(mj_model)
        try:
            self.model = mjx.put_model(given)
        except NotImplementedError as err:
            raise ValueError(
                f"MJX cannot run this model: {err} is not implemented in MJX"
            ) from None
        self.mj_model = mj_model
        self.iterations = iterations
        self.h = float(mj_model.opt.timestep)
        self.nq, self.nv, self.nu, self.na = mj_model.nq, mj_model.nv, mj_model.nu, mj_model.na
        self._data = mjx.make_data(self.model)
        self._integrator = _INTEGRATOR_NAMES[int(mj_model.opt.integrator)]
        # joints, for integrating positions: hinge/slide (one coordinate) gathered at once
        types = np.asarray(mj_model.jnt_type)
        qadr, vadr = np.asarray(mj_model.jnt_qposadr), np.asarray(mj_model.jnt_dofadr)
        scalar = (types == int(mujoco.mjtJoint.mjJNT_HINGE)) | (
            types == int(mujoco.mjtJoint.mjJNT_SLIDE)
        )
        self._scalar_q, self._scalar_v = qadr[scalar], vadr[scalar]
        self._free = [(int(q), int(v)) for q, v, t in zip(qadr, vadr, types) if t == 0]
        self._ball = [(int(q), int(v)) for q, v, t in zip(qadr, vadr, types) if t == 1]
        if self._free or self._ball:
            report += (
                "free and ball joints: quaternions integrated by MuJoCo's formula, written to "
                "be smooth at zero angular velocity (MJX's has a zero derivative there)",
            )
        on_limit = _joints_on_a_range_end(mj_model)
        if on_limit:
            report += (
                f"joints starting on an end of their range (qpos0): {', '.join(on_limit)} — "
                "a limit constraint switches on there, so derivatives from the initial state "
                "are one-sided (diffsim.diagnose flags the kink)",
            )
        if iterations is not None:
            report += (
                f"iterations={iterations}: {iterations} Newton iteration(s) per step (values "
                "only: derivatives are refused, see load)",
            )
        self.mujoco_gap: MujocoGap | None = None
        """:meth:`compare_with_mujoco`'s result when :func:`load` ran it, else ``None``."""
        self.report: tuple[str, ...] = report
        """What the adapter changed or approximated against MuJoCo C, and where the model's
        derivatives are one-sided (joints starting on a range end), one line each (empty:
        nothing; MJX's own pipeline runs the model)."""

    @property
    def time_step(self) -> float:
        """``opt.timestep``, s (what the doctor's ``discretization`` check halves)."""
        return self.h

    @property
    def order(self) -> int:
        """The integrator's order of accuracy: 4 for RK4, 1 for Euler and the implicit ones."""
        return 4 if self._integrator == "RK4" else 1

    def with_time_step(self, h: float) -> MjxStep:
        """The same model at time step ``h`` (a copy of ``mj_model`` with ``opt.timestep =
        h``; the same ``iterations``): :func:`diffsim.diagnose_rollout` runs it over 2T steps
        at h/2 to tell whether the gradient at h is that of the model written down.

        Raises:
            ValueError: ``h`` not a finite number in (0, 1] s.
        """
        check_in_range("h", h, 0.0, _MAX_TIMESTEP)
        if not h > 0:
            raise ValueError(f"h must be in (0, {_MAX_TIMESTEP:g}] s, got {h!r}")
        model = copy.deepcopy(self.mj_model)
        model.opt.timestep = float(h)
        return MjxStep(model, self.iterations)

    def __repr__(self) -> str:
        return (
            f"MjxStep(nq={self.nq}, nv={self.nv}, nu={self.nu}, h={self.h:g}, "
            f"iterations={self.iterations})"
        )

    # -- θ ------------------------------------------------------------------------------

    def field_shape(self, name: str) -> tuple[int, ...]:
        """Shape of model field ``name`` (one of :data:`MODEL_FIELDS`)."""
        value = self.model.opt.gravity if name == "gravity" else getattr(self.model, name)
        return tuple(np.shape(value))

    def theta(self, *names: str) -> dict[str, Array]:
        """The model's current values of the fields ``names``: a θ to start from.

        Raises:
            ValueError: a name not in :data:`MODEL_FIELDS` (the message lists them).
        """
        self.check_theta(dict.fromkeys(names))
        out = {}
        for name in names:
            value = self.model.opt.gravity if name == "gravity" else getattr(self.model, name)
            out[name] = jnp.asarray(value)
        return out

    def check_theta(self, theta: Any, *, extra: Mapping[str, str] | None = None) -> None:
        """Raise ``ValueError`` unless ``theta`` is a dict of known fields with their
        model shapes (values ``None`` are not shape-checked)."""
        accepted = dict(MODEL_FIELDS, **(extra or {}))
        if theta is None:
            return
        if not isinstance(theta, Mapping):
            raise ValueError(
                f"theta must be a dict naming model fields ({', '.join(accepted)}), "
                f"got {type(theta).__name__}"
            )
        for name, value in theta.items():
            if name not in accepted:
                hint = (
                    " (the initial state and controls go through step.simulate's theta or "
                    "step.initial_state)"
                    if name in STATE_FIELDS
                    else ""
                )
                raise ValueError(
                    f"theta names an unknown field {name!r}{hint}; accepted fields: "
                    f"{', '.join(accepted)}"
                )
            if value is None:
                continue
            if name in MODEL_FIELDS:
                want = self.field_shape(name)
            elif name == "qpos0":
                want = (self.nq,)
            elif name == "qvel0":
                want = (self.nv,)
            else:
                want = (-1, self.nu)
            got = tuple(np.shape(value))
            if len(got) != len(want) or any(w not in (-1, g) for w, g in zip(want, got)):
                shown = "(num_steps, nu=" + str(self.nu) + ")" if name == "ctrl" else str(want)
                raise ValueError(
                    f"theta[{name!r}] must have shape {shown} ({accepted[name]}), got {got}"
                )

    def model_with(self, theta: Mapping[str, ArrayLike] | None) -> mjx.Model:
        """The ``mjx.Model`` with the fields named in ``theta`` replaced."""
        self.check_theta(theta)
        if not theta:
            return self.model
        fields = {k: jnp.asarray(v) for k, v in theta.items() if k != "gravity"}
        m = self.model.replace(**fields) if fields else self.model
        if "gravity" in theta:
            m = m.replace(opt=m.opt.replace(gravity=jnp.asarray(theta["gravity"])))
        return m

    # -- state --------------------------------------------------------------------------

    def initial_state(self, qpos: ArrayLike | None = None, qvel: ArrayLike | None = None):
        """The model's initial state (``qpos0``, zero velocity), or the given ``qpos`` /
        ``qvel`` (shapes ``(nq,)``, ``(nv,)``), as an :class:`MjxState`.

        Raises:
            ValueError: a wrong shape; a concrete ``qpos`` or ``qvel`` with an entry that is
                not finite or exceeds MuJoCo's ``mjMAXVAL`` (1e10, where ``mj_step`` resets
                an unstable simulation), or a free/ball joint quaternion of zero norm.
        """
        for name, value, size in (("qpos", qpos, "nq"), ("qvel", qvel, "nv")):
            n = getattr(self, size)
            if value is not None and np.shape(value) != (n,):
                raise ValueError(
                    f"{name} must have shape ({n},) (the model's {size}), got {np.shape(value)}"
                )
        self.check_theta({"qpos0": qpos, "qvel0": qvel}, extra=STATE_FIELDS)
        for name, value in (("qpos", qpos), ("qvel", qvel)):
            if value is None or not is_concrete(value):
                continue
            arr = np.asarray(value, dtype=float)
            bad = ~np.isfinite(arr) | (np.abs(arr) > mujoco.mjMAXVAL)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"{name}[{i}] must be finite with |{name}| <= {mujoco.mjMAXVAL:g} "
                    f"(MuJoCo's mjMAXVAL), got {arr[i]!r}"
                )
            if name == "qpos":
                for q in [a + 3 for a, _ in self._free] + [a for a, _ in self._ball]:
                    if float(np.dot(arr[q : q + 4], arr[q : q + 4])) < mujoco.mjMINVAL:
                        raise ValueError(
                            f"qpos[{q}:{q + 4}] is a joint's quaternion and must be nonzero "
                            f"(a rotation, e.g. [1, 0, 0, 0]), got {arr[q : q + 4].tolist()}"
                        )
        d = self._data
        return MjxState(
            qpos=d.qpos if qpos is None else jnp.asarray(qpos, d.qpos.dtype),
            qvel=d.qvel if qvel is None else jnp.asarray(qvel, d.qvel.dtype),
            act=d.act,
            qacc_warmstart=jnp.zeros_like(d.qvel),
        )

    def data(self, state: MjxState, u: ArrayLike | None = None) -> mjx.Data:
        """MJX ``Data`` holding ``state`` (and controls ``u``), as the step starts from."""
        d = self._data.replace(
            qpos=state.qpos, qvel=state.qvel, act=state.act, qacc_warmstart=state.qacc_warmstart
        )
        if u is not None:
            d = d.replace(ctrl=jnp.asarray(u))
        return d

    # -- the step -----------------------------------------------------------------------

    def _solve(self, m: mjx.Model, d: mjx.Data) -> mjx.Data:
        m, d = _stop(m), _stop(d)
        if self.iterations is None:
            return mjx.solve(m, d)
        one = m.replace(opt=m.opt.replace(iterations=1))

        def newton(_, dk):
            dk = mjx.solve(one, dk)
            return dk.replace(qacc_warmstart=dk.qacc)

        return jax.lax.fori_loop(0, self.iterations, newton, d)

    def forward(self, m: mjx.Model, d: mjx.Data) -> mjx.Data:
        """MJX's forward dynamics (``mjx.forward``) with the differentiable solve."""
        d = mjx.fwd_position(m, d)
        d = mjx.sensor_pos(m, d)
        d = mjx.fwd_velocity(m, d)
        d = mjx.sensor_vel(m, d)
        d = mjx.fwd_actuation(m, d)
        d = mjx.fwd_acceleration(m, d)
        if d._impl.efc_J.shape[0] == 0:  # pyright: ignore[reportAttributeAccessIssue]
            return d.replace(qacc=d.qacc_smooth)
        d = _implicit_solve(m, d, self._solve(m, d), self.iterations)
        return mjx.sensor_acc(m, d)

    def __call__(
        self, state: MjxState, theta: Mapping[str, ArrayLike] | None, u: ArrayLike | None = None
    ) -> MjxState:
        """One MJX step: ``forward`` then the model's integrator (``mjx.step``'s stages).

        Args:
            state: an :class:`MjxState`.
            theta: ``None``, ``{}`` or a dict of model fields (:data:`MODEL_FIELDS`).
            u: controls ``ctrl`` (nu,), or ``None`` (the model's zero controls).

        Raises:
            ValueError: unknown field names or wrong shapes in ``theta``; ``u`` of a shape
                other than ``(nu,)``.
        """
        m = self.model_with(theta)
        if u is not None and tuple(np.shape(u)) != (self.nu,):
            raise ValueError(f"u (ctrl) must have shape (nu,) = ({self.nu},), got {np.shape(u)}")
        d = self.data(state, u)
        if self._integrator == "RK4":  # its four stages run the forward dynamics
            return self._rk4(m, d)
        return self.integrate(m, self.forward(m, d))

    def integrate_pos(self, qpos: Array, qvel: Array, dt: float) -> Array:
        """MuJoCo's ``mj_integratePos``: ``qpos`` advanced by ``qvel`` over ``dt`` (hinge and
        slide joints add, free and ball joints rotate their quaternion), smooth at zero
        angular velocity."""
        out = qpos
        if self._scalar_q.size:
            out = out.at[self._scalar_q].add(dt * qvel[self._scalar_v])
        for q, v in self._free:
            out = out.at[q : q + 3].add(dt * qvel[v : v + 3])
            out = out.at[q + 3 : q + 7].set(
                _quat_integrate(qpos[q + 3 : q + 7], qvel[v + 3 : v + 6], dt)
            )
        for q, v in self._ball:
            out = out.at[q : q + 4].set(_quat_integrate(qpos[q : q + 4], qvel[v : v + 3], dt))
        return out

    def integrate(self, m: mjx.Model, d: mjx.Data) -> MjxState:
        """The model's integrator from ``d`` after :meth:`forward`: the next state (RK4
        runs :meth:`forward` again at its later stages)."""
        if self._integrator == "RK4":
            return self._rk4(m, d)
        if self._integrator == "implicit":
            qacc = self._implicit_qacc(m, d)
            act = _mjx_forward._next_activation(m, d, d.act_dot)
            qvel = d.qvel + self.h * qacc
            return MjxState(self.integrate_pos(d.qpos, qvel, self.h), qvel, act, d.qacc)
        # MJX's own Euler (damping implicit) and implicitfast; positions integrated here
        d1 = (mjx.euler if self._integrator == "Euler" else mjx.implicit)(m, d)
        qpos = self.integrate_pos(d.qpos, d1.qvel, self.h)
        return MjxState(qpos, d1.qvel, d1.act, d1.qacc_warmstart)

    def _implicit_qacc(self, m: mjx.Model, d: mjx.Data) -> Array:
        """MuJoCo's ``mjINT_IMPLICIT`` acceleration: ``(M − h ∂f/∂v)⁻¹ (f + qfrc_constraint)``
        with ``f = qfrc_smooth`` and ``∂f/∂v`` its full derivative in velocity (forward-mode
        autodiff of MJX's velocity, actuation and acceleration stages)."""

        def smooth_force(qvel):
            dv = mjx.fwd_velocity(m, d.replace(qvel=qvel))
            dv = mjx.fwd_actuation(m, dv)
            return mjx.fwd_acceleration(m, dv).qfrc_smooth

        dfdv = jax.jacfwd(smooth_force)(d.qvel)
        H = mjx.full_m(m, d) - self.h * dfdv
        return jnp.linalg.solve(H, d.qfrc_smooth + d.qfrc_constraint)

    def _rk4(self, m: mjx.Model, d0: mjx.Data) -> MjxState:
        """MuJoCo's ``mj_RungeKutta`` (classical RK4 on ``(qpos, qvel, act)``, positions on
        the joint manifold) with this adapter's forward dynamics. All four stages are one
        ``lax.scan`` whose body runs :meth:`forward`, so a step traces the forward dynamics
        once. Stage i starts from ``d0`` advanced by ``h a_i`` times stage i − 1's
        derivatives (``a = 0, 1/2, 1/2, 1``: MuJoCo's tableau is diagonal)."""
        h = self.h
        a = np.array([0.0, 0.5, 0.5, 1.0])
        b = np.array([1.0, 2.0, 2.0, 1.0]) / 6.0
        zero = (jnp.zeros_like(d0.qvel), jnp.zeros_like(d0.qvel), jnp.zeros_like(d0.act))

        def stage(carry, ab):
            (kqvel, kqacc, kact_dot), sums = carry
            ai, bi = ab[0], ab[1]
            qpos = self.integrate_pos(d0.qpos, ai * kqvel, h)
            qvel = d0.qvel + (ai * h) * kqacc
            act = d0.act + (ai * h) * kact_dot
            d = self.forward(m, d0.replace(qpos=qpos, qvel=qvel, act=act))
            k = (d.qvel, d.qacc, d.act_dot)
            sums = tuple(x + bi * y for x, y in zip(sums, k))
            return (k, sums), (d.qacc, d.actuator_length)

        ab = jnp.asarray(np.stack([a, b], axis=1), dtype=d0.qvel.dtype)
        (_, (vsum, asum, act_dot)), (qacc, length) = jax.lax.scan(stage, (zero, zero), ab)
        act = _mjx_forward._next_activation(m, d0.replace(actuator_length=length[0]), act_dot)
        qvel = d0.qvel + h * asum
        return MjxState(self.integrate_pos(d0.qpos, vsum, h), qvel, act, qacc[0])

    def mujoco_difference(
        self, state: MjxState | None = None, u: ArrayLike | None = None
    ) -> dict[str, float]:
        """One step of this adapter against one ``mj_step`` of MuJoCo C from the same
        state (default: the initial state) and controls: where MJX's model (its collision,
        its solver's stopping point) differs from MuJoCo's, with the size.

        Returns:
            ``{"qpos": max |Δqpos|, "qvel": max |Δqvel|, "qvel_change": max |qvel' − qvel|}``
            (the last is the step's own change, the scale to read the others against).
        """
        state = self.initial_state() if state is None else state
        ctrl = np.zeros(self.nu) if u is None else np.asarray(u, dtype=float)
        d = mujoco.MjData(self.mj_model)
        d.qpos[:], d.qvel[:], d.act[:] = state.qpos, state.qvel, state.act
        d.qacc_warmstart[:] = state.qacc_warmstart
        d.ctrl[:] = ctrl
        mujoco.mj_step(self.mj_model, d)
        starts = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], state)
        gap = self._gap(starts, ctrl[None], d.qpos[None], d.qvel[None])
        return {"qpos": gap.qpos, "qvel": gap.qvel, "qvel_change": gap.qvel_change}

    def compare_with_mujoco(self, num_steps: int = COMPARE_STEPS) -> MujocoGap:
        """The adapter's step against ``mj_step`` along MuJoCo C's own trajectory: MuJoCo C
        simulates ``num_steps`` steps from the initial state (``qpos0``, zero velocity and
        controls: the model falls, lands and settles under gravity, so contacts are made),
        and one adapter step from each of those states (one compiled, vmapped step) is
        compared with C's next state. The largest gaps and the step where they occur, and
        whether MJX's model is MuJoCo's there (:attr:`MujocoGap.differs`); :func:`load`
        runs it with ``compare=n``. Compiling the step costs seconds (5-10 s on the
        zoo's models, on a CPU).

        Raises:
            ValueError: ``num_steps`` not an integer in [1, 10,000].
        """
        num_steps = check_int("num_steps", num_steps, minimum=1, maximum=_MAX_COMPARE_STEPS)
        d = mujoco.MjData(self.mj_model)
        rows: list[tuple[np.ndarray, ...]] = []
        for _ in range(num_steps + 1):
            rows.append((d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.qacc_warmstart.copy()))
            mujoco.mj_step(self.mj_model, d)
        qpos, qvel, act, warm = (np.stack(col) for col in zip(*rows))
        starts = MjxState(*(jnp.asarray(x[:-1]) for x in (qpos, qvel, act, warm)))
        return self._gap(starts, np.zeros((num_steps, self.nu)), qpos[1:], qvel[1:])

    def _gap(self, starts: MjxState, ctrl, qpos_c, qvel_c) -> MujocoGap:
        """One vmapped adapter step from each of ``starts`` against C's next states."""
        ours = jax.jit(jax.vmap(lambda s, c: self(s, None, c)))(starts, jnp.asarray(ctrl))
        dv = np.max(np.abs(np.asarray(ours.qvel) - qvel_c), axis=1, initial=0.0)
        worst = int(np.argmax(dv))
        return MujocoGap(
            steps=len(dv),
            qpos=float(np.max(np.abs(np.asarray(ours.qpos) - qpos_c), initial=0.0)),
            qvel=float(dv[worst]),
            qvel_change=float(np.max(np.abs(qvel_c - np.asarray(starts.qvel)), initial=0.0)),
            worst_step=worst,
        )

    # -- rollouts -----------------------------------------------------------------------

    def split(self, theta: Mapping[str, ArrayLike] | None) -> tuple[MjxState, dict, Any]:
        """``(s0, model_theta, ctrl)`` from a θ that may also name ``qpos0``, ``qvel0`` and
        ``ctrl`` (:data:`STATE_FIELDS`).

        Raises:
            TypeError: θ is not a mapping of names to values (``None`` is none).
        """
        if theta is not None and not isinstance(theta, Mapping):
            raise TypeError(
                "theta must be a dict naming model fields (MODEL_FIELDS) or qpos0, qvel0, "
                f"ctrl, or None, got {type(theta).__name__} {theta!r}"
            )
        theta = dict(theta or {})
        self.check_theta(theta, extra=STATE_FIELDS)
        s0 = self.initial_state(theta.pop("qpos0", None), theta.pop("qvel0", None))
        ctrl = theta.pop("ctrl", None)
        return s0, theta, ctrl

    def simulate(
        self,
        theta: Mapping[str, ArrayLike] | None,
        num_steps: int,
        *,
        ctrl: ArrayLike | None = None,
        trajectory: bool = False,
        checkpoint: Checkpoint = None,
    ) -> MjxState:
        """Roll the model out from the state and with the controls θ names.

        θ may name model fields (:data:`MODEL_FIELDS`) and ``qpos0``, ``qvel0``, ``ctrl``
        (:data:`STATE_FIELDS`): the pytree to differentiate. ``ctrl`` (num_steps, nu) given
        as a keyword is used when θ does not name it. The rollout is
        :func:`diffsim.rollout` (one ``lax.scan``).

        Returns:
            ``s_T`` (an :class:`MjxState`), or the trajectory (leading axis T + 1).
        """
        num_steps = check_int("num_steps", num_steps, minimum=1)
        s0, params, ctrl_theta = self.split(theta)
        # diffsim.rollout wants a θ with a leaf: the model's own gravity changes nothing
        params = params or self.theta("gravity")
        ctrl = ctrl_theta if ctrl_theta is not None else ctrl
        if ctrl is not None:
            self.check_theta({"ctrl": ctrl}, extra=STATE_FIELDS)
            if np.shape(ctrl)[0] != num_steps:
                raise ValueError(
                    f"ctrl must have shape (num_steps={num_steps}, nu={self.nu}), "
                    f"got {np.shape(ctrl)}"
                )
        return rollout(
            self,
            s0,
            params,
            num_steps,
            inputs=ctrl,
            trajectory=trajectory,
            checkpoint=checkpoint,
        )

    # -- bodies -------------------------------------------------------------------------

    def body_id(self, name: str) -> int:
        """The index of body ``name``; ``ValueError`` listing the bodies if there is none,
        ``TypeError`` if ``name`` is not a ``str``."""
        if not isinstance(name, str):
            raise TypeError(f"body must be a str (a body's name), got {name!r}")
        i = mujoco.mj_name2id(self.mj_model, mujoco.mjtObj.mjOBJ_BODY, name)
        if i < 0:
            names = [self.mj_model.body(k).name for k in range(1, self.mj_model.nbody)]
            raise ValueError(f"no body named {name!r}; bodies: {', '.join(names) or 'none'}")
        return int(i)

    def free_body(self) -> str | None:
        """The name of the first body with a free joint (``None`` if there is none)."""
        for j in range(self.mj_model.njnt):
            if int(self.mj_model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
                return self.mj_model.body(int(self.mj_model.jnt_bodyid[j])).name
        return None

    def free_joint_qvel(self, body: str) -> slice:
        """The slice of ``qvel`` holding the linear velocity of ``body``'s free joint."""
        b = self.body_id(body)
        for j in range(self.mj_model.njnt):
            if int(self.mj_model.jnt_bodyid[j]) == b and int(self.mj_model.jnt_type[j]) == int(
                mujoco.mjtJoint.mjJNT_FREE
            ):
                adr = int(self.mj_model.jnt_dofadr[j])
                return slice(adr, adr + 3)
        raise ValueError(f"body {body!r} has no free joint")

    def body_position(
        self, state: MjxState, body: str, theta: Mapping[str, ArrayLike] | None = None
    ) -> Array:
        """World position (3,) of ``body`` in ``state`` (MJX forward kinematics)."""
        b = self.body_id(body)
        d = mjx.kinematics(self.model_with(theta), self.data(state))
        return d.xpos[..., b, :]

    def reach_loss(
        self,
        num_steps: int,
        wrt: str = "qvel0",
        *,
        body: str | None = None,
        target: Any = None,
    ) -> ReachLoss:
        """The loss ``diffsim diagnose --mjcf`` examines: ``‖p_T − target‖²`` of ``body``'s
        position after ``num_steps`` steps from :meth:`initial_state`, as a function of the
        initial velocities (``wrt="qvel0"``), positions (``"qpos0"``) or the controls
        (``"ctrl"``, shape (num_steps, nu)).

        Args:
            num_steps: T >= 1.
            wrt: ``"qvel0"``, ``"qpos0"`` or ``"ctrl"``.
            body: a body's name (default: the first body with a free joint).
            target: (3,) metres (default: the body's initial position).

        Raises:
            ValueError: ``wrt`` or ``num_steps`` out of range; no body named ``body`` (the
                message lists them); no free body when ``body`` is not given; no actuators
                with ``wrt="ctrl"``; ``target`` not three finite numbers.

        Example:
            >>> import diffsim
            >>> from diffsim.engines import mjx, scenes
            >>> r = mjx.load(scenes.path("free_flight")).reach_loss(5, body="ball")
            >>> float(r.loss(r.x0)) > 0  # at rest it falls away from where it started
            True
        """
        return _reach_loss(self, num_steps, wrt, body, target)


class ReachLoss(NamedTuple):
    """:meth:`MjxStep.reach_loss`: ``loss(x) = ‖p_T(x) − target‖²`` of one body after T
    steps, the point ``x0`` it is examined at, and the same loss at half the time step over
    2T steps (the doctor's discretization check).

    Example:
        >>> from diffsim.engines import mjx, scenes
        >>> r = mjx.load(scenes.path("free_flight")).reach_loss(5)
        >>> r.body, r.wrt, r.x0.shape, r.target.shape
        ('ball', 'qvel0', (6,), (3,))
    """

    loss: Callable[[Array], Array]
    x0: Array
    half_step_loss: Callable[[Array], Array]
    body: str
    wrt: str
    target: Array


def _reach_loss(
    step: MjxStep, num_steps: int, wrt: str, body: str | None, target: Any
) -> ReachLoss:
    num_steps = check_int("num_steps", num_steps, minimum=1)
    if wrt not in ("qvel0", "qpos0", "ctrl"):
        raise ValueError(f"wrt must be 'qvel0', 'qpos0' or 'ctrl', got {wrt!r}")
    if body is None:
        body = step.free_body()
        if body is None:
            raise ValueError("the model has no body with a free joint: name one (body=...)")
    step.body_id(body)
    s0 = step.initial_state()
    dtype = s0.qpos.dtype
    if target is None:
        goal = step.body_position(s0, body)
    else:
        goal = jnp.asarray(target, dtype)
        if goal.shape != (3,) or not bool(jnp.all(jnp.isfinite(goal))):
            raise ValueError(f"target must be three finite numbers (metres), got {target!r}")
    if wrt == "ctrl":
        if step.nu == 0:
            raise ValueError("the model has no actuators: wrt='ctrl' has nothing to differentiate")
        x0 = jnp.zeros((num_steps, step.nu), dtype)
    else:
        x0 = s0.qpos if wrt == "qpos0" else s0.qvel

    def loss_at(at: MjxStep, n: int) -> Callable[[Array], Array]:
        def loss(x: Array) -> Array:  # controls held for n / num_steps steps each
            x = jnp.repeat(x, n // num_steps, axis=0) if wrt == "ctrl" else x
            sT = at.simulate({wrt: x}, n)
            return jnp.sum((at.body_position(sT, body) - goal) ** 2)

        return loss

    half = loss_at(step.with_time_step(step.h / 2), 2 * num_steps)
    return ReachLoss(loss_at(step, num_steps), x0, half, body, wrt, goal)


def load(model: Any, *, iterations: int | None = None, compare: bool | int = False) -> MjxStep:
    """Build a diffsim step from a MuJoCo model, run by MJX.

    Args:
        model: an MJCF file path (``str`` or ``os.PathLike``), an MJCF XML string (starting
            with ``<``) or a ``mujoco.MjModel``.
        iterations: ``None`` (default): MJX's constraint solver runs to convergence
            (``opt.iterations``, ``opt.tolerance``); an integer k >= 1: exactly k Newton
            iterations per step, warm-started (fixed cost; see the module docstring for
            its accuracy), k <= 2**31 − 1; values only: differentiating a step loaded
            with ``iterations=k`` raises ``ValueError``.
        compare: ``False`` (default): nothing more; ``True`` or a number of steps n:
            :meth:`MjxStep.compare_with_mujoco` over the first n steps of MuJoCo C's own
            trajectory from the initial state (``True``: :data:`COMPARE_STEPS`), its result
            kept as ``step.mujoco_gap`` and added to ``step.report``, and a
            ``UserWarning`` with the size when MJX's model differs from MuJoCo C's there.
            It compiles one step (5-10 s on a CPU for the zoo's models), which is why it is
            not the default; ``diffsim diagnose --mjcf`` runs it.

    Returns:
        :class:`MjxStep`, callable as ``step(state, theta[, u])``.

    Raises:
        ValueError: a missing file, MJCF that MuJoCo cannot parse or that contains a NaN
            (the message names the file and gives MuJoCo's error); an option MJX cannot run
            (the message names the MJCF option and the value to use; see the module
            docstring); a model with no degrees of freedom (``nv = 0``: nothing moves);
            ``iterations`` out of range. MuJoCo's other parse warnings (e.g.
            deprecated attributes) become Python ``UserWarning``s instead of lines on stderr.
        TypeError: ``model`` of another type.

    Example:
        >>> import diffsim
        >>> from diffsim.engines import mjx, scenes
        >>> step = mjx.load(scenes.path("free_flight"))
        >>> sT = diffsim.rollout(step, step.initial_state(), step.theta("gravity"), 10,
        ...                      trajectory=False)
        >>> sT.qpos.shape
        (7,)
    """
    if iterations is not None:
        iterations = check_int("iterations", iterations, minimum=1, maximum=_MAX_ITERATIONS)
    if compare is not False:
        compare = COMPARE_STEPS if compare is True else compare
        compare = check_int("compare", compare, minimum=0, maximum=_MAX_COMPARE_STEPS)
    step = MjxStep(_mj_model(model), iterations)
    if compare:
        gap = step.compare_with_mujoco(int(compare))
        step.mujoco_gap = gap
        step.report += (str(gap),)
        if gap.differs:
            warnings.warn(
                f"{gap}: MJX's model (its collision, its contact frames) is not MuJoCo C's "
                "here, so values and derivatives are MJX's model's, not what finite "
                "differences of MuJoCo C give",
                UserWarning,
                stacklevel=2,
            )
    return step


__all__ = [
    "COMPARE_STEPS",
    "COMPARE_TOLERANCE",
    "MODEL_FIELDS",
    "STATE_FIELDS",
    "MjxState",
    "MjxStep",
    "MujocoGap",
    "ReachLoss",
    "load",
]
