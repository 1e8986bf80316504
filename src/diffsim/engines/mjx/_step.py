# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
""":class:`MjxStep`: a MuJoCo model as an immutable diffsim step."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import Array, ArrayLike

from ..._checks import check_domains, check_in_range, check_int, is_concrete
from ..._rollout import Checkpoint, rollout
from ..._step import AbstractStep
from . import _compare, _integrate, _reach
from ._compare import COMPARE_STEPS, MujocoGap
from ._fields import MODEL_DOMAINS, MODEL_FIELDS, STATE_FIELDS, MjxState
from ._integrate import Joints
from ._options import INTEGRATOR_NAMES, MAX_TIMESTEP, check_options, joints_on_a_range_end
from ._reach import ReachLoss
from ._setconst import DERIVED_FROM, Plan, with_derived_constants
from ._shim import mjx


class _Held:
    """An object held by identity in a static field: MJX's models and data hold arrays,
    which neither hash nor compare as a jit cache key needs (two steps are the same key
    exactly when they hold the same objects, as when the step was a plain object)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class MjxStep(AbstractStep):
    """A MuJoCo model as a diffsim step ``step(state, theta[, u]) -> state`` (see the module
    docstring). Build it with :func:`load`.

    Attributes:
        mj_model: the ``mujoco.MjModel``.
        model: the ``mjx.Model`` the step runs.
        h: the time step (``opt.timestep``), s.
        iterations: ``None`` (MJX's convergence loop) or a fixed Newton iteration count.
        nq, nv, nu, na: sizes of ``qpos``, ``qvel``, ``ctrl`` and ``act``.
        report: what the adapter runs differently from MuJoCo C and MJX's ``mjx.step``
            (integrator, solver, quaternion integration, ``iterations``), one line each,
            where its derivatives are one-sided (joints starting on a range end), which θ
            fields step the model MuJoCo compiles at θ (:meth:`model_with`) and which
            compiled values of this model θ does not reach.
        mujoco_gap: :meth:`compare_with_mujoco`'s result when :func:`load` ran it, else
            ``None``.
        integrator: MuJoCo's integrator: ``"Euler"``, ``"RK4"``, ``"implicit"`` or
            ``"implicitfast"``.
        joints: where the joints' coordinates sit in ``qpos`` and ``qvel``.

    The step is immutable (an Equinox module whose fields are all static: MJX keeps
    static model data in numpy arrays, which must not be traced); :func:`load` builds it
    complete.

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

    held: _Held = eqx.field(static=True)
    iterations: int | None = eqx.field(static=True)
    h: Any = eqx.field(static=True)  # a float, s: the type of AbstractStep's h
    integrator: str = eqx.field(static=True)
    joints: Joints = eqx.field(static=True)
    report: tuple[str, ...] = eqx.field(static=True)
    mujoco_gap: MujocoGap | None = eqx.field(static=True)

    time_step_refinable: ClassVar[bool] = True
    solver_memory: ClassVar[tuple[str, ...]] = MjxState.SOLVER_MEMORY

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        iterations: int | None,
        *,
        mujoco_gap: MujocoGap | None = None,
    ) -> None:
        """Build the step of ``mj_model`` (see :func:`load`, which checks ``iterations``);
        ``mujoco_gap``, a :class:`MujocoGap` of this model, is kept and reported."""
        if mj_model.nv == 0:
            raise ValueError(
                "the model has no degrees of freedom (nv = 0): nothing in it moves, so there "
                "is nothing to simulate or differentiate; give a body a joint (e.g. "
                "<freejoint/>, or <joint type='hinge'/>)"
            )
        given, report = check_options(mj_model)
        try:
            model = mjx.put_model(given)
        except NotImplementedError as err:
            raise ValueError(
                f"MJX cannot run this model: {err} is not implemented in MJX"
            ) from None
        self.held = _Held((mj_model, model, mjx.make_data(model), Plan.of(mj_model)))
        self.iterations = iterations
        self.h = float(mj_model.opt.timestep)
        self.integrator = INTEGRATOR_NAMES[int(mj_model.opt.integrator)]
        self.joints = Joints.of(mj_model)
        self.report = report + _report(self.joints, mj_model, iterations, mujoco_gap)
        self.mujoco_gap = mujoco_gap

    @property
    def mj_model(self) -> mujoco.MjModel:
        """The ``mujoco.MjModel``."""
        return self.held.value[0]

    @property
    def model(self) -> mjx.Model:
        """The ``mjx.Model`` the step runs."""
        return self.held.value[1]

    @property
    def data_template(self) -> mjx.Data:
        """MJX ``Data`` of the model at its initial state, which :meth:`data` fills in."""
        return self.held.value[2]

    @property
    def constants_plan(self) -> Plan:
        """The model's structure MuJoCo's derived constants branch on (see
        :meth:`model_with`)."""
        return self.held.value[3]

    @property
    def nq(self) -> int:
        return self.mj_model.nq

    @property
    def nv(self) -> int:
        return self.mj_model.nv

    @property
    def nu(self) -> int:
        return self.mj_model.nu

    @property
    def na(self) -> int:
        return self.mj_model.na

    @property
    def time_step(self) -> float:
        """``opt.timestep``, s (what the doctor's ``discretization`` check halves)."""
        return self.h

    @property
    def order(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        """The integrator's order of accuracy: 4 for RK4, 1 for Euler and the implicit ones."""
        # a property where integrators declare a class variable: it is the model's choice
        return 4 if self.integrator == "RK4" else 1

    def with_time_step(self, h: float) -> MjxStep:
        """The same model at time step ``h`` (a copy of ``mj_model`` with ``opt.timestep =
        h``; the same ``iterations``): :func:`diffsim.doctor.diagnose_rollout` runs it over 2T steps
        at h/2 to tell whether the gradient at h is that of the model written down.

        Raises:
            ValueError: ``h`` not a finite number in (0, 1] s.
        """
        check_in_range("h", h, 0.0, MAX_TIMESTEP)
        if not h > 0:
            raise ValueError(f"h must be in (0, {MAX_TIMESTEP:g}] s, got {h!r}")
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

    def check_physical(self, theta: Mapping[str, Any] | None) -> None:
        """Raise ``ValueError`` naming the first entry of ``theta`` outside the range MuJoCo's
        compiler accepts for its field (:data:`MODEL_DOMAINS`: masses, inertias, friction,
        damping, armature, friction loss and joint stiffness >= 0); a model simulated there
        is not one MuJoCo would compile."""
        check_domains("theta", theta, MODEL_DOMAINS)

    def model_with(self, theta: Mapping[str, ArrayLike] | None) -> mjx.Model:
        """The ``mjx.Model`` with the fields named in ``theta`` replaced: the model MuJoCo
        compiles at those values. A θ naming a field MuJoCo's derived constants depend on
        (``body_mass``, ``body_inertia``, ``dof_armature``, ``actuator_gear``) has them
        recomputed at ``qpos0`` as ``mj_setConst`` does (``body_invweight0``,
        ``dof_invweight0``, ``tendon_invweight0``, which set how soft contacts, limits and
        friction loss are; ``actuator_acc0``, ``dof_M0``, ``body_subtreemass``,
        ``stat.meaninertia``, ``stat.meanmass``), differentiably in θ."""
        self.check_theta(theta)
        if not theta:
            return self.model
        fields = {k: jnp.asarray(v) for k, v in theta.items() if k != "gravity"}
        m = self.model.replace(**fields) if fields else self.model
        if "gravity" in theta:
            m = m.replace(opt=m.opt.replace(gravity=jnp.asarray(theta["gravity"])))
        if any(name in theta for name in DERIVED_FROM):
            m = with_derived_constants(self.constants_plan, m, self.data_template)
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
        for name, value, size, n in (("qpos", qpos, "nq", self.nq), ("qvel", qvel, "nv", self.nv)):
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
                for q in [a + 3 for a, _ in self.joints.free] + [a for a, _ in self.joints.ball]:
                    if float(np.dot(arr[q : q + 4], arr[q : q + 4])) < mujoco.mjMINVAL:
                        raise ValueError(
                            f"qpos[{q}:{q + 4}] is a joint's quaternion and must be nonzero "
                            f"(a rotation, e.g. [1, 0, 0, 0]), got {arr[q : q + 4].tolist()}"
                        )
        d = self.data_template
        return MjxState(
            qpos=d.qpos if qpos is None else jnp.asarray(qpos, d.qpos.dtype),
            qvel=d.qvel if qvel is None else jnp.asarray(qvel, d.qvel.dtype),
            act=d.act,
            qacc_warmstart=jnp.zeros_like(d.qvel),
        )

    def data(self, state: MjxState, u: ArrayLike | None = None) -> mjx.Data:
        """MJX ``Data`` holding ``state`` (and controls ``u``), as the step starts from."""
        d = self.data_template.replace(
            qpos=state.qpos, qvel=state.qvel, act=state.act, qacc_warmstart=state.qacc_warmstart
        )
        if u is not None:
            d = d.replace(ctrl=jnp.asarray(u))
        return d

    # -- the step ---------------------------------------------------------------------

    def forward(self, m: mjx.Model, d: mjx.Data) -> mjx.Data:
        """MJX's forward dynamics (``mjx.forward``) with the differentiable solve."""
        return _integrate.forward(self, m, d)

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
        if self.integrator == "RK4":  # its four stages run the forward dynamics
            return _integrate.rk4(self, m, d)
        return _integrate.integrate(self, m, _integrate.forward(self, m, d))

    def integrate_pos(self, qpos: Array, qvel: Array, dt: float) -> Array:
        """MuJoCo's ``mj_integratePos``: ``qpos`` advanced by ``qvel`` over ``dt`` (hinge and
        slide joints add, free and ball joints rotate their quaternion), smooth at zero
        angular velocity."""
        return _integrate.integrate_pos(self.joints, qpos, qvel, dt)

    def integrate(self, m: mjx.Model, d: mjx.Data) -> MjxState:
        """The model's integrator from ``d`` after :meth:`forward`: the next state (RK4
        runs :meth:`forward` again at its later stages)."""
        return _integrate.integrate(self, m, d)

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
        return _compare.mujoco_difference(self, state, u)

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
        return _compare.compare_with_mujoco(self, num_steps)

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
        return _reach.reach_loss(self, num_steps, wrt, body, target)


def _report(
    joints: Joints, mj_model: mujoco.MjModel, iterations: int | None, gap: MujocoGap | None
) -> tuple[str, ...]:
    """The lines of :attr:`MjxStep.report` after :func:`check_options`'s."""
    report: tuple[str, ...] = ()
    if joints.free or joints.ball:
        report += (
            "free and ball joints: quaternions integrated by MuJoCo's formula, written to "
            "be smooth at zero angular velocity (MJX's has a zero derivative there)",
        )
    on_limit = joints_on_a_range_end(mj_model)
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
    report += _theta_lines(mj_model)
    if gap is not None:
        report += (str(gap),)
    return report


def _theta_lines(mj: mujoco.MjModel) -> tuple[str, ...]:
    """Which θ fields step the model MuJoCo compiles at θ, and where this model keeps a
    value MuJoCo's compiler derived once from the loaded fields (those θ does not move)."""
    lines = (
        "θ follows MuJoCo exactly (the model stepped is the model compiled at θ): "
        f"{', '.join(DERIVED_FROM)} recompute MuJoCo's derived constants at qpos0 as "
        "mj_setConst does (body/dof/tendon invweight0, which set how soft contacts, limits "
        "and friction loss are, actuator_acc0, dof_M0, body_subtreemass); "
        f"{', '.join(n for n in MODEL_FIELDS if n not in DERIVED_FROM)} enter no derived "
        "constant",
    )
    gain, bias = np.asarray(mj.actuator_gainprm), np.asarray(mj.actuator_biasprm)
    servos = [
        mj.actuator(i).name or f"actuator {i}"
        for i in range(mj.nu)
        if gain[i, 0] != 0 and gain[i, 0] == -bias[i, 1] and bias[i, 2] < 0
    ]
    if servos:
        lines += (
            f"θ does not follow for the damped position actuators {', '.join(servos)}: a "
            "damping written as dampratio is converted once by MuJoCo's compiler, from the "
            "loaded masses, so θ masses, inertias, armature, gears or kp keep that damping "
            "(θ actuator_biasprm[:, 2] sets it, as -damping)",
        )
    if mj.npair:
        lines += (
            f"θ geom_friction, geom_solref and geom_solimp do not reach the model's {mj.npair} "
            "explicit contact pair(s) (<contact><pair>), whose parameters MuJoCo's compiler "
            "copies from the geoms once",
        )
    if mj.ntendon and np.any(np.asarray(mj.tendon_stiffness) != 0):
        lines += (
            "θ qpos_spring does not move the rest lengths of tendons with springs "
            "(tendon_lengthspring), which MuJoCo's compiler takes from qpos_spring once when "
            "the MJCF gives no springlength",
        )
    muscles = np.asarray(mj.actuator_gaintype) == int(mujoco.mjtGain.mjGAIN_MUSCLE)
    if np.any(muscles):
        lines += (
            "θ actuator_gear does not move the muscles' length ranges (actuator_lengthrange), "
            "which MuJoCo's compiler computes once from the loaded gears",
        )
    return lines
