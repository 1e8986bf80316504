"""The MJX adapter on a model zoo people know: gymnasium's MuJoCo models, checked against
MuJoCo C.

Every gymnasium MuJoCo model loads unchanged (RK4, the PGS solver and fluid forces are run
or mapped, and ``step.report`` says how). In float64, at states reached by simulating the
model in MuJoCo C with random controls until contacts are active, the adapter's step is
compared with ``mj_step``, its one-step Jacobian with central differences of ``mj_step``
(``mjd_transitionFD`` for the Euler models; it refuses RK4, so for those the same central
differences are taken here, through ``mj_integratePos`` / ``mj_differentiatePos`` as it
does) and its T-step rollout Jacobian with central differences of T repeated ``mj_step``.

Tolerances, from the finite differences' own error: central differences with step
ε = 1e-6 err by ε²/6·|f'''| (≈ 1e-13 here) plus round-off ≈ 1e-16·|f|/ε ≈ 1e-10·|f|; the
reference model runs its constraint solver to ``opt.iterations`` (``tolerance = 0``: the
converged solution, whose derivative the adapter computes; at MuJoCo's default 1e-8 the
solver's stopping noise, divided by ε, would dominate). So Jacobians must agree to
1e-7 relative to their largest entry (measured: 1e-10 to 1e-9, printed on failure), and the
forward step to 1e-9 (both converge to the same solution within the solver tolerance).

The zoo comes from the ``zoo`` extra (``gymnasium``, which scripts/_setup.sh installs); only
its XML files are read. Tests that compile a model are slow (scripts/test-slow): MJX
programs take 15-90 s to compile on CPU.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from diffsim.engines import mjx, scenes
from diffsim.engines.control import gymnasium_model
from diffsim.engines.mjx._integrate import quat_mul
from diffsim.engines.mjx._load import mj_model_from

mujoco_mjx = mjx.mjx  # MuJoCo MJX (imported quietly by the adapter)


MODELS = [
    "inverted_pendulum",
    "inverted_double_pendulum",
    "reacher",
    "pusher",
    "swimmer",
    "hopper",
    "half_cheetah",
    "walker2d",
    "ant",
    "humanoid",
]

# simulated time (steps of mj_step with random controls) after which contacts are active
CONTACT_STEPS = {
    "hopper": 100,
    "half_cheetah": 60,
    "walker2d": 100,
    "ant": 40,
    "humanoid": 60,
    "reacher": 30,  # no contacts: a planar arm (checked: ncon == 0)
}

EPS = 1e-6
JAC_RTOL = 1e-7
JAC_RTOL_MJX = 1e-6
"""Against central differences of MJX's own model (the ant): MJX's solver, even at tolerance
0, ends where its line search (``ls_tolerance``) leaves it, and that stopping noise, divided
by ε = 1e-6, is what the finite differences carry (measured on the ant's A: 2.5e-6 against
entries up to 16.9, i.e. 1.5e-7 relative; MuJoCo C's Newton reached 1e-10 to 1e-8 relative)."""
STEP_ATOL = 1e-9

BOUNCE_RK4 = """
<mujoco>
  <option timestep="0.005" integrator="RK4"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>
"""


def zoo(name: str) -> str:
    return gymnasium_model(name)  # raises, saying how to install gymnasium, without it


def load_mj(name: str) -> mujoco.MjModel:
    with pytest.warns(UserWarning, match="settotalmass") if name == "half_cheetah" else _nothing():
        return mj_model_from(zoo(name))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------------------------------
# loading: every model of the zoo, unchanged, with a report
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_every_zoo_model_loads_unchanged_and_reports_what_it_maps(name):
    m = load_mj(name)
    before = (int(m.opt.integrator), int(m.opt.solver), float(m.opt.timestep))
    step = mjx.load(m)
    assert (int(m.opt.integrator), int(m.opt.solver), float(m.opt.timestep)) == before
    assert (step.nq, step.nv, step.nu) == (m.nq, m.nv, m.nu)
    report = "\n".join(step.report)
    if int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4):
        assert "integrator RK4" in report
    if int(m.opt.solver) == int(mujoco.mjtSolver.mjSOL_PGS):
        assert "solver PGS" in report and "Newton" in report
    if name in ("ant", "humanoid"):
        assert "quaternions" in report
    # gymnasium's hopper and walker2d (thighs, knees) and pusher (elbow, wrist) start on a
    # range end (checked against the model: qpos0 equals jnt_range's end to 1e-9)
    ends = [
        m.joint(j).name
        for j in range(m.njnt)
        if m.jnt_limited[j]
        and m.jnt_type[j] in (2, 3)
        and np.min(np.abs(m.jnt_range[j] - m.qpos0[m.jnt_qposadr[j]])) <= 1e-9
    ]
    assert bool(ends) == (name in ("hopper", "walker2d", "pusher")), ends
    on_limit = [line for line in step.report if line.startswith("joints starting on an end")]
    assert on_limit == ([f"joints starting on an end of their range (qpos0): {', '.join(ends)} "
                         "— a limit constraint switches on there, so derivatives from the "
                         "initial state are one-sided (diffsim.diagnose flags the kink)"]
                        if ends else [])  # fmt: skip


SLIDING_BOX = """
<mujoco>
  <option timestep="0.002" cone="CONE"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1" friction="0.5"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
  </worldbody>
</mujoco>
"""


def test_the_elliptic_refusal_states_its_measured_consequence():
    # the numbers the refusal quotes, measured in MuJoCo C: a box sliding diagonally at
    # 1 m/s on friction 0.5 for 0.5 s (it stops) travels 7.2 cm with the pyramidal cone and
    # 5.0 cm with the elliptic one (the pyramid's facets bound each axis separately)
    def travel(cone: str) -> float:
        m = mujoco.MjModel.from_xml_string(SLIDING_BOX.replace("CONE", cone))
        d = mujoco.MjData(m)
        d.qvel[:2] = np.sqrt(0.5)
        for _ in range(250):
            mujoco.mj_step(m, d)
        assert np.max(np.abs(d.qvel)) < 1e-3  # at rest
        return float(np.hypot(*d.qpos[:2]))

    assert travel("pyramidal") == pytest.approx(0.072, abs=5e-4)
    assert travel("elliptic") == pytest.approx(0.050, abs=5e-4)
    with pytest.raises(ValueError, match=r"travels 7\.2 cm instead of 5\.0 cm"):
        mjx.load(SLIDING_BOX.replace("CONE", "elliptic"))


def test_refusals_name_the_mjcf_option_and_the_value_to_use(tmp_path):
    def xml(option: str) -> str:
        return BOUNCE_RK4.replace('<option timestep="0.005" integrator="RK4"/>', option)

    with pytest.raises(ValueError, match=r"noslip_iterations='3'.*noslip_iterations='0'"):
        mjx.load(xml('<option noslip_iterations="3"/>'))
    with pytest.raises(ValueError, match=r"cone='elliptic'.*use cone='pyramidal'"):
        mjx.load(xml('<option cone="elliptic"/>'))
    for bad in ("-0.01", "0", "1e30"):
        with pytest.raises(ValueError, match=r"timestep> must be finite and in \(0, 1\] s"):
            mjx.load(xml(f'<option timestep="{bad}"/>'))
    with pytest.raises(ValueError, match=r"implicitfast.*fluid"):
        mjx.load(xml('<option integrator="implicitfast" density="1000"/>'))
    for it in (0, 10**10):
        with pytest.raises(ValueError, match=r"iterations must be an integer in \[1, 2147483647\]"):
            mjx.load(scenes.path("free_flight"), iterations=it)
    nan = tmp_path / "nan.xml"
    nan.write_text(BOUNCE_RK4.replace('pos="0 0 0.3"', 'pos="0 0 nan"'))
    with pytest.raises(ValueError, match=r"nan\.xml' contains a NaN"):
        mjx.load(str(nan))
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_nan_mjcf_is_one_error_and_nothing_on_stderr(tmp_path):
    nan = tmp_path / "nan.xml"
    nan.write_text(BOUNCE_RK4.replace('pos="0 0 0.3"', 'pos="0 0 nan"'))
    code = (
        "from diffsim.engines import mjx\n"
        "try:\n"
        f"    mjx.load({str(nan)!r})\n"
        "except ValueError as e:\n"
        "    print('refused')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "refused" and out.stderr == "", out.stderr


def test_importing_the_adapters_prints_nothing():
    # MJX prints "Failed to import warp" when its optional Warp backend is absent
    out = subprocess.run(
        [sys.executable, "-c", "import diffsim.engines.mjx, diffsim.engines.brax"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stdout + out.stderr


def test_body_id_of_a_non_string_is_a_type_error():
    step = mjx.load(scenes.path("free_flight"))
    for bad in (None, 3, b"ball"):
        with pytest.raises(TypeError, match="body must be a str"):
            step.body_id(bad)  # type: ignore[arg-type]


def test_initial_states_that_would_give_nan_are_refused():
    step = mjx.load(scenes.path("free_flight"))
    with pytest.raises(
        ValueError, match=r"qpos\[3:7\] is a joint's quaternion and must be nonzero"
    ):
        step.initial_state(qpos=[0.0] * 7)
    with pytest.raises(ValueError, match=r"qpos\[0\] must be finite"):
        step.initial_state(qpos=[float("nan")] * 7)
    with pytest.raises(ValueError, match=r"qvel\[0\] must be finite with \|qvel\| <= 1e\+10"):
        step.initial_state(qvel=[1e300, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="must be nonzero"):
        step.simulate({"qpos0": jnp.zeros(7)}, 5)


def test_fixed_iterations_refuse_derivatives_with_a_clear_message():
    step = mjx.load(BOUNCE_RK4.replace('pos="0 0 0.3"', 'pos="0 0 0.099"'), iterations=2)
    s0 = step.initial_state()

    def height(v):
        return step(s0._replace(qvel=s0.qvel.at[2].set(v)), None).qpos[2]

    for differentiate in (jax.grad, jax.jacfwd):
        with pytest.raises(ValueError, match=r"iterations=2 are refused.*iterations=None"):
            differentiate(height)(0.0)


def test_rotation_derivative_is_right_at_zero_angular_velocity():
    # one free-flight step rotates by the angle h ω0 about x, so ∂angle/∂ω0 = h, at ω0 = 0
    # and at 1e-12 as anywhere (MJX's own quaternion integration gives 0 there); forward
    # and reverse mode in one program
    step = mjx.load(scenes.path("free_flight"))
    s0 = step.initial_state()

    def angle(w):
        q = step(s0._replace(qvel=jnp.zeros(6).at[3].set(w)), None).qpos[3:7]
        return 2.0 * jnp.arctan2(q[1], q[0])

    both = jax.jit(lambda w: (jax.jacfwd(angle)(w), jax.grad(angle)(w)))
    for w in (0.0, 1e-12, 1e-3):
        for got in both(jnp.asarray(w)):
            assert float(got) == pytest.approx(step.h, rel=1e-12)


# ---------------------------------------------------------------------------------------
# against MuJoCo C, float64, contacts active
# ---------------------------------------------------------------------------------------


def _contact_data(m: mujoco.MjModel, steps: int, seed: int = 0) -> mujoco.MjData:
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        if m.nu:
            d.ctrl[:] = 0.3 * rng.uniform(-1, 1, m.nu) * m.actuator_ctrlrange[:, 1]
        mujoco.mj_step(m, d)
    return d


def _tangent(step: mjx.MjxStep, q_ref, q):
    """``q ⊖ q_ref`` in velocity coordinates: MuJoCo's ``mj_differentiatePos`` to first
    order (exactly its derivative at ``q = q_ref``): hinge/slide differences, free-joint
    position differences and ``2 vec(q_ref⁻¹ ⊗ q)`` for each quaternion."""
    out = jnp.zeros(step.nv, q.dtype)
    if step.joints.scalar_q:
        sq, sv = np.asarray(step.joints.scalar_q), np.asarray(step.joints.scalar_v)
        out = out.at[sv].set(q[sq] - q_ref[sq])

    def rot(a, b):
        return 2.0 * quat_mul(a * jnp.array([1.0, -1.0, -1.0, -1.0]), b)[1:]

    for qa, va in step.joints.free:
        out = out.at[va : va + 3].set(q[qa : qa + 3] - q_ref[qa : qa + 3])
        out = out.at[va + 3 : va + 6].set(rot(q_ref[qa + 3 : qa + 7], q[qa + 3 : qa + 7]))
    for qa, va in step.joints.ball:
        out = out.at[va : va + 3].set(rot(q_ref[qa : qa + 4], q[qa : qa + 4]))
    return out


class _C:
    """MuJoCo C from a fixed state, its solver run to convergence (tolerance 0)."""

    def __init__(self, m: mujoco.MjModel, d: mujoco.MjData):
        self.m = m
        self.qpos, self.qvel = d.qpos.copy(), d.qvel.copy()
        self.ctrl, self.warm = d.ctrl.copy(), d.qacc_warmstart.copy()

    def run(self, dx, du, steps: int):
        m, nv = self.m, self.m.nv
        d = mujoco.MjData(m)
        d.qpos[:] = self.qpos
        mujoco.mj_integratePos(m, d.qpos, dx[:nv], 1.0)
        d.qvel[:] = self.qvel + dx[nv:]
        d.ctrl[:] = self.ctrl + du
        d.qacc_warmstart[:] = self.warm
        for _ in range(steps):
            mujoco.mj_step(m, d)
        return d

    def jacobian(self, q_ref, steps: int, *, ctrl: bool = True):
        """Central differences (step EPS) of ``steps`` mj_step in (dqpos, dqvel) and ctrl."""
        m, nv, nu = self.m, self.m.nv, self.m.nu

        def out(dx, du):
            d = self.run(dx, du, steps)
            dq = np.zeros(nv)
            mujoco.mj_differentiatePos(m, dq, 1.0, q_ref, d.qpos)
            return np.concatenate([dq, d.qvel])

        cols = []
        for k in range(2 * nv):
            e = np.zeros(2 * nv)
            e[k] = EPS
            cols.append((out(e, 0.0) - out(-e, 0.0)) / (2 * EPS))
        A = np.stack(cols, axis=1)
        cols = []
        for k in range(nu if ctrl else 0):
            e = np.zeros(nu)
            e[k] = EPS
            cols.append((out(np.zeros(2 * nv), e) - out(np.zeros(2 * nv), -e)) / (2 * EPS))
        B = np.stack(cols, axis=1) if cols else np.zeros((2 * nv, 0))
        return A, B


def _reference(m: mujoco.MjModel) -> mujoco.MjModel:
    """MuJoCo C's model run to the converged solution the adapter differentiates: solver
    tolerance 0 (run to ``opt.iterations``) and, for PGS (humanoid), Newton, which converges
    to the same solution in those iterations where PGS does not (measured on the humanoid:
    PGS's 50 iterations stop 3.8e-6 from it in qvel)."""
    ref = copy.deepcopy(m)
    ref.opt.tolerance = 0.0
    if int(ref.opt.solver) == int(mujoco.mjtSolver.mjSOL_PGS):
        ref.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return ref


MJX_DIFFERS = {"ant": 0.25}
"""Models whose MJX model is not MuJoCo C's at the test state, and the bound on the step's
qvel gap to ``mj_step`` relative to the step's own change in qvel. The ant: MJX's
capsule–plane contact frame differs from MuJoCo C's (the friction pyramid is turned), and
one step's velocity differs by 17 % of its change (measured 0.0547 of 0.327). For these the
adapter is checked against MJX's own ``mjx.step`` (values) and its Jacobians against
central differences of its own step, MJX's model (float64, MJX's solver run to tolerance 0)."""


def _check(name, what, got, want, rtol=None):
    rtol = JAC_RTOL if rtol is None else rtol
    err = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    print(f"{name} {what}: max error {err:.3g}, largest entry {scale:.3g}")  # shown with -s
    assert err <= rtol * max(scale, 1.0), f"{name} {what}: max error {err:.3g}, scale {scale:.3g}"
    return err, scale


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONTACT_STEPS))
def test_step_and_one_step_jacobian_match_mujoco_c_in_contact(name):
    m = load_mj(name)
    d = _contact_data(m, CONTACT_STEPS[name])
    if name == "reacher":
        assert d.ncon == 0
    else:
        assert d.ncon > 0 and d.nefc > 0, f"{name}: no contact after {CONTACT_STEPS[name]} steps"
    step = mjx.load(m)
    c = _C(_reference(m), d)
    s0 = step.initial_state(c.qpos, c.qvel)._replace(qacc_warmstart=jnp.asarray(c.warm))
    nv = step.nv

    # the step at x = 0 and its Jacobian in one program
    def value_and_jac(x, u):
        o = step(s0, None, u)

        def g(x, u):
            s = s0._replace(qpos=step.integrate_pos(s0.qpos, x[:nv], 1.0), qvel=s0.qvel + x[nv:])
            s1 = step(s, None, u)
            return jnp.concatenate([_tangent(step, o.qpos, s1.qpos), s1.qvel])

        return o, jax.jacfwd(g, argnums=(0, 1))(x, u)

    s1, (JA, JB) = jax.jit(value_and_jac)(jnp.zeros(2 * nv), jnp.asarray(c.ctrl))
    d1 = c.run(np.zeros(2 * nv), 0.0, 1)  # MuJoCo C, converged
    mujoco.mj_step(m, dd := _copy_data(m, d))  # MuJoCo C as shipped (PGS: 50 iterations)
    gap = float(np.max(np.abs(np.asarray(s1.qvel) - d1.qvel)))
    shipped = float(np.max(np.abs(np.asarray(s1.qvel) - dd.qvel)))
    change = float(np.max(np.abs(d1.qvel - c.qvel)))
    print(
        f"{name} step vs converged mj_step: qpos "
        f"{np.max(np.abs(np.asarray(s1.qpos) - d1.qpos)):.3g}, qvel {gap:.3g} (as shipped: "
        f"{shipped:.3g}; the step changes qvel by {change:.3g}), ncon {d.ncon}"
    )
    assert shipped < 1e-4 * max(change, 1.0) or name in MJX_DIFFERS
    if name in MJX_DIFFERS:
        assert gap < MJX_DIFFERS[name] * change
        _check_against_mjx_itself(name, step, s0, jnp.asarray(c.ctrl), s1, JA, JB)
        return
    assert np.max(np.abs(np.asarray(s1.qpos) - d1.qpos)) < STEP_ATOL
    assert gap < STEP_ATOL
    if int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4):
        A, B = c.jacobian(np.asarray(s1.qpos), 1)  # mjd_transitionFD refuses RK4
    else:
        A = np.zeros((2 * nv, 2 * nv))
        B = np.zeros((2 * nv, m.nu))
        dref = _copy_data(c.m, d)
        mujoco.mjd_transitionFD(c.m, dref, EPS, True, A, B, None, None)
    _check(name, "A = ∂x'/∂x", np.asarray(JA), A)
    _check(name, "B = ∂x'/∂u", np.asarray(JB), B)


def _check_against_mjx_itself(name, step, s0, u, s1, JA, JB):
    """The adapter's step equals MJX's own ``mjx.step``, and its Jacobians central
    differences of its own step with MJX's solver run to tolerance 0 (MJX's model)."""
    m = step.model
    d = step.data(s0, u)
    d_mjx = jax.jit(mujoco_mjx.step)(m, d)
    assert np.max(np.abs(np.asarray(s1.qvel) - np.asarray(d_mjx.qvel))) < STEP_ATOL
    exact = mjx.load(_reference(step.mj_model))
    nv = step.nv

    def g(x, u):
        s = s0._replace(qpos=exact.integrate_pos(s0.qpos, x[:nv], 1.0), qvel=s0.qvel + x[nv:])
        o = exact(s, None, u)
        return jnp.concatenate([_tangent(exact, s1.qpos, o.qpos), o.qvel])

    gj = jax.jit(g)
    n, nu = 2 * nv, step.nu
    A = np.stack(
        [
            (np.asarray(gj(EPS * e, u)) - np.asarray(gj(-EPS * e, u))) / (2 * EPS)
            for e in jnp.eye(n)
        ],
        axis=1,
    )
    B = np.stack(
        [
            (np.asarray(gj(jnp.zeros(n), u + EPS * e)) - np.asarray(gj(jnp.zeros(n), u - EPS * e)))
            / (2 * EPS)
            for e in jnp.eye(nu)
        ],
        axis=1,
    )
    _check(name, "A = ∂x'/∂x against MJX's model", np.asarray(JA), A, JAC_RTOL_MJX)
    _check(name, "B = ∂x'/∂u against MJX's model", np.asarray(JB), B, JAC_RTOL_MJX)


def _copy_data(m, d):
    out = mujoco.MjData(m)
    out.qpos[:], out.qvel[:], out.ctrl[:] = d.qpos, d.qvel, d.ctrl
    out.qacc_warmstart[:] = d.qacc_warmstart
    return out


ROLLOUT_STEPS = {
    "hopper": 20,
    "half_cheetah": 10,
    "walker2d": 20,
    "ant": 10,
    "humanoid": 10,
    "reacher": 50,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ROLLOUT_STEPS))
def test_rollout_jacobian_matches_central_differences_of_mj_step(name):
    m = load_mj(name)
    d = _contact_data(m, CONTACT_STEPS[name])
    step = mjx.load(m)
    c = _C(_reference(m), d)
    T = ROLLOUT_STEPS[name]
    nv = step.nv

    def final(qvel0):
        sT = step.simulate(
            {"qpos0": jnp.asarray(c.qpos), "qvel0": qvel0},
            T,
            ctrl=jnp.tile(jnp.asarray(c.ctrl), (T, 1)),
        )
        return sT

    def value_and_jac(qvel0):
        sT = final(qvel0)

        def g(v):
            s = final(v)
            return jnp.concatenate([_tangent(step, sT.qpos, s.qpos), s.qvel])

        return sT, jax.jacfwd(g)(qvel0)

    sT, J = jax.jit(value_and_jac)(jnp.asarray(c.qvel))
    if name in MJX_DIFFERS:  # MJX's model is not MuJoCo C's here: central differences of it
        exact = mjx.load(_reference(m))

        def g_exact(v):
            s = exact.simulate(
                {"qpos0": jnp.asarray(c.qpos), "qvel0": v},
                T,
                ctrl=jnp.tile(jnp.asarray(c.ctrl), (T, 1)),
            )
            return jnp.concatenate([_tangent(exact, sT.qpos, s.qpos), s.qvel])

        gj, v0 = jax.jit(g_exact), jnp.asarray(c.qvel)
        A = np.stack(
            [
                (np.asarray(gj(v0 + EPS * e)) - np.asarray(gj(v0 - EPS * e))) / (2 * EPS)
                for e in jnp.eye(nv)
            ],
            axis=1,
        )
        _check(name, f"∂x_T/∂qvel0 (T = {T}) against MJX's model", np.asarray(J), A, JAC_RTOL_MJX)
        return
    A, _ = c.jacobian(np.asarray(sT.qpos), T, ctrl=False)
    _check(name, f"∂x_T/∂qvel0 (T = {T})", np.asarray(J), A[:, nv:])


@pytest.mark.slow
def test_rk4_ball_at_the_step_where_contact_is_made():
    # an RK4 ball dropped on a plane: the step in which MuJoCo first detects the contact
    m = mj_model_from(BOUNCE_RK4)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    while not d.ncon:  # the first state at which MuJoCo detects the contact
        mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)
    step = mjx.load(m)
    c = _C(_reference(m), d)
    s0 = step.initial_state(c.qpos, c.qvel)._replace(qacc_warmstart=jnp.asarray(c.warm))
    nv = step.nv

    def value_and_jac(x):
        o = step(s0, None)

        def g(x):
            s = s0._replace(qpos=step.integrate_pos(s0.qpos, x[:nv], 1.0), qvel=s0.qvel + x[nv:])
            s1 = step(s, None)
            return jnp.concatenate([_tangent(step, o.qpos, s1.qpos), s1.qvel])

        return o, jax.jacfwd(g)(x)

    s1, J = jax.jit(value_and_jac)(jnp.zeros(2 * nv))
    d1 = c.run(np.zeros(2 * nv), 0.0, 1)
    assert np.max(np.abs(np.asarray(s1.qvel) - d1.qvel)) < STEP_ATOL
    assert abs(float(s1.qvel[2]) - float(d.qvel[2])) > 1e-3  # the contact acts in this step
    A, _ = c.jacobian(np.asarray(s1.qpos), 1, ctrl=False)
    _check("ball", "A", np.asarray(J), A)


@pytest.mark.slow
def test_mujoco_difference_reports_the_gap_to_mj_step():
    # the RK4 ball resting in contact on the plane: MJX's model is MuJoCo's here
    step = mjx.load(BOUNCE_RK4.replace('pos="0 0 0.3"', 'pos="0 0 0.099"'))
    gap = step.mujoco_difference()
    assert set(gap) == {"qpos", "qvel", "qvel_change"}
    assert gap["qvel_change"] > 1e-3  # the step does something
    assert gap["qpos"] < STEP_ATOL and gap["qvel"] < STEP_ATOL, gap


@pytest.mark.slow
@pytest.mark.parametrize("name", ["half_cheetah", "ant"])
def test_load_compares_with_mj_step_and_warns_where_mjx_differs(name):
    # along MuJoCo C's first COMPARE_STEPS steps from the initial state (the model falls onto
    # the floor): half_cheetah's MJX model is MuJoCo's, the ant's is not (MJX's contact
    # frames on its capsule feet, MJX_DIFFERS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = mjx.load(load_mj(name), compare=True)
    gap = step.mujoco_gap
    assert gap is not None and gap.steps == mjx.COMPARE_STEPS
    assert str(gap) in step.report
    warned = [w for w in caught if "MJX's step differs from mj_step" in str(w.message)]
    assert gap.qvel_change > 1.0  # the landing: contacts act
    if name == "ant":
        assert gap.differs and len(warned) == 1
        assert gap.relative > 10 * mjx.COMPARE_TOLERANCE, gap  # measured 8.3e-3
    else:
        assert not gap.differs and not warned
        assert gap.qvel < STEP_ATOL, gap
    # the worst state's gap, independently: C's trajectory replayed to that step, then one
    # step of each from it (mujoco_difference)
    d = mujoco.MjData(step.mj_model)
    for _ in range(gap.worst_step):
        mujoco.mj_step(step.mj_model, d)
    at = mjx.MjxState(*(jnp.asarray(x) for x in (d.qpos, d.qvel, d.act, d.qacc_warmstart)))
    assert step.mujoco_difference(at)["qvel"] == pytest.approx(gap.qvel, rel=1e-6, abs=1e-12)


def test_load_refuses_a_bad_compare_naming_it():
    for bad in (-1, 10**6, 2.5):
        with pytest.raises((ValueError, TypeError), match="compare"):
            mjx.load(BOUNCE_RK4, compare=bad)


IMPLICIT = """
<mujoco>
  <option timestep="0.01" integrator="implicit" density="1.2" viscosity="0.02"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" mass="1"/>
      <body name="lower" pos="0.5 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="box" size="0.2 0.05 0.03" pos="0.2 0 0" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator><velocity joint="j2" kv="2"/></actuator>
</mujoco>
"""


@pytest.mark.slow
def test_implicit_integrator_matches_mj_step():
    # a double pendulum (Coriolis terms), joint damping, a velocity servo and fluid forces:
    # every term of MuJoCo's implicit velocity derivative
    step = mjx.load(IMPLICIT)
    assert any("integrator implicit" in line for line in step.report)
    gap = step.mujoco_difference(step.initial_state(qpos=[0.3, -0.8], qvel=[2.0, -3.0]), [0.5])
    print("implicit double pendulum vs mj_step:", gap)
    assert gap["qvel_change"] > 1e-2
    assert gap["qpos"] < STEP_ATOL and gap["qvel"] < STEP_ATOL, gap
