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
frames) is not MuJoCo C's (:class:`MujocoGap`).

**A θ-edited model is the model MuJoCo compiles at θ.** MuJoCo's compiler derives constants
from the masses, inertias, armature and gears at ``qpos0`` (``mj_setConst``):
``body_invweight0``, ``dof_invweight0`` and ``tendon_invweight0``, which scale the solver's
regularisation and so how soft every contact, limit and friction-loss row is, and
``actuator_acc0``, ``dof_M0``, ``body_subtreemass``, ``stat.meaninertia``. A θ naming
``body_mass``, ``body_inertia``, ``dof_armature`` or ``actuator_gear`` has them recomputed, as
``mj_setConst`` does and differentiably in θ, from MJX's kinematics and composite inertia at
``qpos0`` (nothing when θ names none of these). Its cost, measured on gymnasium's
half_cheetah over 100 steps on a CPU: the forward rollout unchanged (10.6 ms with it, 11.7 without:
the recomputation depends on θ alone, and XLA hoists it out of the loop), the reverse-mode
gradient 1.7× (91 to 152 ms; it compiles in 70 s instead of 40 s), because each step
differentiates the constants again.
Measured: the constants equal MuJoCo C's to 1e-13 of their size on gymnasium's humanoid
(``tests/test_mjx_derived_constants.py``), and a box loaded at 2 kg and stepped at θ mass
2.7 kg through 750 contact steps is MuJoCo C compiled at 2.7 kg to 5e-15 m (34 mm off with
the loaded constants). The other fields (friction, solref, solimp, damping, friction loss,
stiffness, ``qpos_spring``, gains, biases, gravity) enter no derived constant. θ's
``body_mass`` is the body's mass alone: it leaves ``body_inertia`` as it is (an MJCF geom's
``mass`` scales both). What θ does not reach, each listed in ``step.report`` where the model
has it: a position actuator's ``dampratio``, which the compiler turns into a damping once,
from the loaded masses; explicit contact pairs, whose friction and softness the compiler
copies from the geoms; tendon spring lengths taken from ``qpos_spring``; muscles' length
ranges.

Pinned versions (the extra ``diffsim-jax[mjx]``): ``mujoco==3.17.0``, ``mujoco-mjx==3.17.0``
with ``jax`` 0.10.2.
"""

from __future__ import annotations

from ._compare import COMPARE_STEPS as COMPARE_STEPS
from ._compare import COMPARE_TOLERANCE as COMPARE_TOLERANCE
from ._compare import MujocoGap as MujocoGap
from ._fields import MODEL_FIELDS as MODEL_FIELDS
from ._fields import STATE_FIELDS as STATE_FIELDS
from ._fields import MjxState as MjxState
from ._load import load as load
from ._load import mj_model_from as mj_model_from
from ._reach import ReachLoss as ReachLoss

# MuJoCo MJX as the adapter imported it (without its Warp probe's prints), as before the
# split: tests and benchmarks use ``diffsim.engines.mjx.mjx``
from ._shim import mjx as mjx
from ._step import MjxStep as MjxStep

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
    "mj_model_from",
]
