# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
r"""MuJoCo models as diffsim steps, run by MuJoCo MJX (``pip install 'diffsim-jax[mjx]'``).

:func:`load` takes an MJCF file path, an MJCF XML string or a ``mujoco.MjModel`` and returns
an :class:`MjxStep`: a pure step ``step(state, theta[, u]) -> state`` that runs MJX's own
pipeline (``fwd_position`` … ``solve`` … ``euler``/``implicit``, the stages of
``mjx.step``), so every diffsim tool runs on it unchanged::

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
started from the previous step), for a fixed, batch-independent cost. Its accuracy cost,
measured on the pushing scene (box pushed for 1 s over four friction contacts): k = 1 moves
the box's final position by about 10 cm against the converged solve, k = 4 by less than
0.1 mm (``tests/test_engines_mjx.py::test_fixed_iterations_match_the_converged_solve``).
The default (``None``) is the converged solve.

Supported: MuJoCo's ``Euler`` and ``implicitfast`` integrators, the pyramidal friction cone
(MuJoCo's default). ``RK4`` and elliptic cones are refused at :func:`load` with a
``ValueError``. Changing ``body_mass`` or ``body_inertia`` through θ does not recompute
MuJoCo's precomputed constants (``body_invweight0``, used to scale contact softness),
exactly as editing ``mjModel`` without ``mj_setConst``.

Pinned versions (the extra ``diffsim-jax[mjx]``): ``mujoco==3.17.0``, ``mujoco-mjx==3.17.0``
with ``jax`` 0.10.2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import Array, ArrayLike
from mujoco import mjx

from .._checks import check_int
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

_INTEGRATORS = {
    int(mujoco.mjtIntegrator.mjINT_EULER): mjx.euler,
    int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST): mjx.implicit,
}


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
        try:
            return mujoco.MjModel.from_xml_path(path)
        except ValueError as err:
            raise ValueError(f"MJCF file {path!r} could not be loaded: {err}") from None
    if isinstance(source, str):
        try:
            return mujoco.MjModel.from_xml_string(source)
        except ValueError as err:
            raise ValueError(f"MJCF XML string could not be loaded: {err}") from None
    raise TypeError(
        f"model must be an MJCF file path, an MJCF XML string or a mujoco.MjModel, got {source!r}"
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


def _implicit_solve(m: mjx.Model, d: mjx.Data, sol: mjx.Data) -> mjx.Data:
    """``d`` with MJX's constraint solution ``sol`` and its implicit-function derivative
    (see the module docstring)."""
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
    qacc, force, qfrc = _solution(
        mjx.full_m(m, d),
        J,
        D,
        aref,
        d.qfrc_smooth,
        floss,
        active.astype(D.dtype),
        a_star,
        sg(simpl.efc_force),
        sg(sol.qfrc_constraint),
    )
    out = d.tree_replace({"qacc": qacc, "qfrc_constraint": qfrc, "_impl.efc_force": force})
    return cast(mjx.Data, out)


class MjxStep:
    """A MuJoCo model as a diffsim step ``step(state, theta[, u]) -> state`` (see the module
    docstring). Build it with :func:`load`.

    Attributes:
        mj_model: the ``mujoco.MjModel``.
        model: the ``mjx.Model`` the step runs.
        h: the time step (``opt.timestep``), s.
        iterations: ``None`` (MJX's convergence loop) or a fixed Newton iteration count.
        nq, nv, nu, na: sizes of ``qpos``, ``qvel``, ``ctrl`` and ``act``.

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
        integrator = int(mj_model.opt.integrator)
        if integrator not in _INTEGRATORS:
            raise ValueError(
                f"integrator {mujoco.mjtIntegrator(integrator).name.removeprefix('mjINT_')} is "
                "not supported: use integrator='Euler' (semi-implicit Euler) or 'implicitfast' "
                "in <option>"
            )
        if int(mj_model.opt.cone) != int(mujoco.mjtCone.mjCONE_PYRAMIDAL):
            raise ValueError(
                "cone='elliptic' is not supported: use MuJoCo's default cone='pyramidal'"
            )
        self.mj_model = mj_model
        self.model = mjx.put_model(mj_model)
        self.iterations = iterations
        self.h = float(mj_model.opt.timestep)
        self.nq, self.nv, self.nu, self.na = mj_model.nq, mj_model.nv, mj_model.nu, mj_model.na
        self._data = mjx.make_data(self.model)
        self._integrate = _INTEGRATORS[integrator]

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
        ``qvel`` (shapes ``(nq,)``, ``(nv,)``), as an :class:`MjxState`."""
        self.check_theta({"qpos0": qpos, "qvel0": qvel}, extra=STATE_FIELDS)
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
        d = _implicit_solve(m, d, self._solve(m, d))
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
        d = self.forward(m, self.data(state, u))
        d = self._integrate(m, d)
        return MjxState(d.qpos, d.qvel, d.act, d.qacc_warmstart)

    # -- rollouts -----------------------------------------------------------------------

    def split(self, theta: Mapping[str, ArrayLike] | None) -> tuple[MjxState, dict, Any]:
        """``(s0, model_theta, ctrl)`` from a θ that may also name ``qpos0``, ``qvel0`` and
        ``ctrl`` (:data:`STATE_FIELDS`)."""
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
        """The index of body ``name``; ``ValueError`` listing the bodies if there is none."""
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


def load(model: Any, *, iterations: int | None = None) -> MjxStep:
    """Build a diffsim step from a MuJoCo model, run by MJX.

    Args:
        model: an MJCF file path (``str`` or ``os.PathLike``), an MJCF XML string (starting
            with ``<``) or a ``mujoco.MjModel``.
        iterations: ``None`` (default): MJX's constraint solver runs to convergence
            (``opt.iterations``, ``opt.tolerance``); an integer k >= 1: exactly k Newton
            iterations per step, warm-started (fixed cost; see the module docstring for
            its accuracy). Derivatives are those of the solution either way.

    Returns:
        :class:`MjxStep`, callable as ``step(state, theta[, u])``.

    Raises:
        ValueError: a missing file or MJCF that MuJoCo cannot parse (the message names the
            file and gives MuJoCo's error); an unsupported integrator or cone.
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
        iterations = check_int("iterations", iterations, minimum=1)
    return MjxStep(_mj_model(model), iterations)


__all__ = ["MODEL_FIELDS", "STATE_FIELDS", "MjxState", "MjxStep", "load"]
