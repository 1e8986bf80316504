"""diffsim.engines.mjx: MuJoCo models as diffsim steps, and the validated scenes.

Every diffsim tool runs on an MJX model unchanged (rollout with checkpointing, the Jacobian
routes, every estimator, optimize, diagnose, diagnose_rollout), and the numbers are checked
against closed forms (free flight, the wall's range), MuJoCo's own ``mjx.step`` and float64
central differences. MJX compiles slowly on CPU: the tests that compile a contact scene are
marked slow (scripts/test-slow); a persistent compilation cache (below) makes reruns cheap.

MuJoCo is a test requirement (scripts/_setup.sh installs the ``mjx`` extra): if it is
missing this module fails to import, loudly. Only the minimum-versions job, whose oldest
JAX the pinned MJX does not support, leaves these files out (scripts/test-minimum).
"""

from __future__ import annotations

import math
import pathlib
import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import optax
import pytest
from mujoco import mjx as mujoco_mjx

import diffsim
from conftest import central_fd
from diffsim.engines import mjx, scenes
from diffsim.estimators import AlphaOrder, Exact, make_estimator

_enable_x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64  # type: ignore[attr-defined]

KEY = jax.random.PRNGKey(0)

# MJX programs take 10-30 s to compile on CPU: keep them between runs (only programs that
# took more than a second to compile are stored)
diffsim.enable_compilation_cache()  # MJX compiles for 10-30 s: keep it between runs

BOUNCE = """
<mujoco>
  <option timestep="0.01" integrator="Euler"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>
"""


# ---------------------------------------------------------------------------------------
# loading and θ: clear errors, before anything compiles
# ---------------------------------------------------------------------------------------


def test_load_accepts_path_xml_string_and_mjmodel():
    path = scenes.path("free_flight")
    from_xml = mjx.load(open(path).read())
    from_model = mjx.load(mujoco.MjModel.from_xml_path(path))
    for step in (mjx.load(path), from_xml, from_model):
        assert (step.nq, step.nv, step.nu) == (7, 6, 0)
        assert step.h == pytest.approx(0.01)


def test_load_refuses_missing_file_bad_xml_and_unsupported_options(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        mjx.load(str(tmp_path / "nope.xml"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body><geom type='sphere'/></body></mujoco>")
    with pytest.raises(ValueError, match=r"bad\.xml.*could not be loaded: .*XML") as err:
        mjx.load(str(bad))
    assert "Error" in str(err.value)  # MuJoCo's own parse error is passed on
    with pytest.raises(TypeError, match="MJCF file path"):
        mjx.load(42)
    rk4 = BOUNCE.replace('integrator="Euler"', 'integrator="RK4"')
    assert "integrator RK4" in "\n".join(mjx.load(rk4).report)  # loaded, and reported
    elliptic = BOUNCE.replace('integrator="Euler"', 'integrator="Euler" cone="elliptic"')
    with pytest.raises(ValueError, match="elliptic"):
        mjx.load(elliptic)
    with pytest.raises(ValueError, match="iterations"):
        mjx.load(BOUNCE, iterations=0)
    # an empty model, or one where nothing moves: named, with what to add
    for empty in ("<mujoco/>", "<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"):
        with pytest.raises(ValueError, match=r"no degrees of freedom \(nv = 0\).*joint"):
            mjx.load(empty)


def test_theta_unknown_names_and_wrong_shapes_name_the_field():
    step = mjx.load(scenes.path("pushing"))
    s0 = step.initial_state()
    with pytest.raises(ValueError, match=r"unknown field 'geom_frction'.*geom_friction"):
        step(s0, {"geom_frction": jnp.ones((3, 3))}, jnp.zeros(1))
    with pytest.raises(ValueError, match=r"theta\['geom_friction'\] must have shape \(3, 3\)"):
        step(s0, {"geom_friction": jnp.ones(3)}, jnp.zeros(1))
    with pytest.raises(ValueError, match=r"'qvel0'.*step\.simulate"):
        step(s0, {"qvel0": jnp.ones(3)}, jnp.zeros(1))
    with pytest.raises(ValueError, match=r"theta\['qvel0'\] must have shape \(3,\)"):
        step.simulate({"qvel0": jnp.ones(6)}, 5)
    with pytest.raises(ValueError, match=r"ctrl.*\(num_steps=5, nu=1\)"):
        step.simulate({"ctrl": jnp.ones((4, 1))}, 5)
    with pytest.raises(ValueError, match=r"u \(ctrl\) must have shape \(nu,\) = \(1,\)"):
        step(s0, {}, jnp.zeros(2))
    with pytest.raises(
        ValueError, match=r"^qpos must have shape \(3,\) \(the model.s nq\), got \(2,\)"
    ):
        step.initial_state(qpos=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"^qvel must have shape \(3,\) \(the model.s nv\)"):
        step.initial_state(qvel=jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match="no body named 'hand'; bodies: finger, box"):
        step.body_id("hand")
    assert set(step.theta("geom_friction", "gravity")) == {"geom_friction", "gravity"}
    with pytest.raises(ValueError, match="accepted fields: body_mass"):
        step.theta("mass")


# ---------------------------------------------------------------------------------------
# free flight: the closed-form rollout Jacobian, to float32 round-off
# ---------------------------------------------------------------------------------------


@pytest.mark.slow  # the default suite's budget (10 min on 2 cores): measured ~30-45 s alone
def test_free_flight_rollout_jacobian_is_semi_implicit_euler():
    """∂(x_T, v_T)/∂(x_0, v_0) = [[I, T h I], [0, I]] for the ball's linear coordinates,
    by the autodiff route, in float32: T h = 0.5 to float32 round-off (T·eps)."""
    T = 50
    with _enable_x64(False):
        step = mjx.load(scenes.path("free_flight"))
        s0 = step.initial_state(qvel=jnp.array([3.0, 0.5, 4.0, 0.0, 0.0, 0.0]))
        J, _ = diffsim.rollout_jacobian(step, s0, step.theta("gravity"), T)
        J = np.asarray(J)
    assert J.dtype == np.float32
    # raveled MjxState order: qpos (7), qvel (6), act (0), qacc_warmstart (6)
    x, v = slice(0, 3), slice(7, 10)
    Th = T * 0.01
    tol = 4 * T * np.finfo(np.float32).eps
    np.testing.assert_allclose(J[x, x], np.eye(3), atol=tol)
    np.testing.assert_allclose(J[x, v], Th * np.eye(3), atol=tol)
    np.testing.assert_allclose(J[v, x], np.zeros((3, 3)), atol=tol)
    np.testing.assert_allclose(J[v, v], np.eye(3), atol=tol)


# ---------------------------------------------------------------------------------------
# MJX itself: the step is mjx.step, with derivatives that finite differences confirm
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("scene", ["wall", "pushing"])
def test_step_is_mjx_step(scene):
    """50 steps of the adapter and of ``mjx.step`` agree to float64 round-off (in contact:
    the ball against the floor, the finger against the box)."""
    step = mjx.load(scenes.path(scene))
    if scene == "wall":
        s0 = step.initial_state(qvel=scenes.launch_velocity(8.0))
        u = None
    else:
        s0 = step.initial_state()
        u = jnp.full((50, 1), 0.7)
    ours = diffsim.rollout(step, s0, step.theta("gravity"), 50, inputs=u, trajectory=False)

    m = step.model
    d = mujoco_mjx.make_data(m).replace(qpos=s0.qpos, qvel=s0.qvel)

    def body(d, ut):
        if ut is not None:
            d = d.replace(ctrl=ut)
        return mujoco_mjx.step(m, d), None

    dT, _ = jax.jit(lambda d: jax.lax.scan(body, d, u, length=50))(d)
    np.testing.assert_allclose(ours.qpos, dT.qpos, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.qvel, dT.qvel, rtol=1e-9, atol=1e-8)


@pytest.mark.slow
def test_contact_gradients_match_float64_central_differences():
    """Through contact (the finger pushing the box: box–floor friction, finger–box normal
    force), reverse- and forward-mode derivatives of the box's final position with respect
    to the push, the friction and the servo gain match float64 central differences."""
    step = mjx.load(scenes.path("pushing"))
    T = 60

    def box_x(p):
        theta = {"geom_friction": step.model.geom_friction.at[:, 0].set(p[1])}
        theta["actuator_gainprm"] = step.model.actuator_gainprm.at[0, 0].set(p[2])
        theta["actuator_biasprm"] = step.model.actuator_biasprm.at[0, 1].set(-p[2])
        theta["ctrl"] = scenes.pushing_controls(p[0], T)
        return step.simulate(theta, T).qpos[1:2]

    p = jnp.array([0.7, 0.5, 100.0])
    rev = jax.jacrev(box_x)(p)
    fwd = jax.jacfwd(box_x)(p)
    fd = central_fd(box_x, p, eps=1e-5)
    assert np.all(np.isfinite(rev)) and np.all(np.abs(rev) > 1e-4)
    np.testing.assert_allclose(fwd, rev, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rev, fd, rtol=2e-4, atol=1e-7)


def test_reverse_mode_through_free_flight_is_finite_and_exact():
    """No constraint active in the step MJX would have solved (the wall scene's ball in the
    air): MJX's own solver gives NaN tangents there; the adapter's derivative is exact."""
    step = mjx.load(scenes.path("free_flight"))

    def z_T(v0):
        return step.simulate({"qvel0": jnp.zeros(6).at[2].set(v0)}, 10).qpos[2]

    assert float(jax.grad(z_T)(2.0)) == pytest.approx(10 * 0.01, rel=1e-12)


# ---------------------------------------------------------------------------------------
# the wall in 3-D
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wall():
    step = mjx.load(scenes.path("wall"))
    return step, scenes.wall_loss(step)


@pytest.mark.slow
def test_wall_clears_and_lands_at_the_range(wall):
    step, _ = wall

    def landing(v0):
        traj = step.simulate(
            {"qvel0": scenes.launch_velocity(v0)}, scenes.WALL_STEPS, trajectory=True
        )
        return scenes.wall_landing_x(traj.qpos)

    v0 = jnp.array([6.0, 7.0, 9.7, 9.905, 10.5, 11.5, 12.0])
    x = np.asarray(jax.jit(jax.vmap(landing))(v0))
    R = np.asarray(v0) ** 2 / 9.81
    np.testing.assert_allclose(x, R, rtol=0.02)  # before the wall and over it
    blocked = np.asarray(jax.jit(jax.vmap(landing))(jnp.array([8.0, 8.5, 9.0, 9.3])))
    np.testing.assert_allclose(blocked, 5.82, atol=0.06)  # dropped at the wall's foot


@pytest.mark.slow
def test_wall_doctor_untrusted_where_blocked_trusted_in_the_basin(wall):
    _, loss = wall
    # v0 = 9.3: blocked, 0.15 m/s below the cliff (σ = 0.465 by default); FoBG samples
    # that clip the wall's top edge are huge: the doctor flags them
    blocked = diffsim.diagnose(loss, jnp.asarray(9.3), KEY)
    assert blocked.verdict == "untrusted", str(blocked)
    assert {"plateau", "jump", "stiffness"} & set(blocked.flag_names), blocked.flag_names
    basin = diffsim.diagnose(loss, jnp.asarray(11.0), KEY, sigma=0.05)
    assert basin.verdict == "trusted", str(basin)


@pytest.mark.slow
def test_wall_alpha_order_with_defaults_reaches_the_target_from_a_blocked_start(wall):
    """AoBG with diffsim's defaults (σ = 0.1, N = 32, γ = 1, optimize's Adam(0.05)) from
    v₀ = 9.35 m/s (blocked: landing x ≈ 5.8 m) reaches v₀* = √(10 g) (landing within 2 %
    of 10 m); the exact gradient from the same start stays on the plateau."""
    _, loss = wall
    start = jnp.asarray(9.35)
    aobg = diffsim.optimize(loss, start, AlphaOrder(), steps=60, key=KEY)
    assert float(aobg.theta) == pytest.approx(math.sqrt(10 * 9.81), rel=0.02)
    assert float(aobg.loss) < 0.2**2
    exact = diffsim.optimize(loss, start, Exact(), steps=60, key=KEY)
    assert float(exact.theta) < 9.45 and float(exact.loss) > 16.0


# ---------------------------------------------------------------------------------------
# every diffsim tool on an MJX model: the cart-pole (smooth) and the pushing scene (contact)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cartpole():
    step = mjx.load(scenes.path("cartpole"))
    T = 60
    ctrl = jnp.sin(jnp.linspace(0.0, 3.0, T))[:, None]

    def loss(theta):
        sT = step.simulate(dict(theta, ctrl=ctrl), T)
        return sT.qpos[1] ** 2 + 0.1 * sT.qpos[0] ** 2

    theta = {"qvel0": jnp.array([0.3, 0.5]), "dof_damping": jnp.array([0.1, 0.02])}
    return step, T, ctrl, loss, theta


@pytest.mark.slow
def test_cartpole_gradient_matches_float64_central_differences_and_doctor_trusts_it(cartpole):
    _, _, _, loss, theta = cartpole
    g = diffsim.value_and_grad(loss, theta, mode="reverse")
    flat = jnp.concatenate([theta["dof_damping"], theta["qvel0"]])

    def f(p):
        return loss({"dof_damping": p[:2], "qvel0": p[2:]})

    fd = central_fd(f, flat, eps=1e-6)[0]
    ad = jnp.concatenate([g.grad["dof_damping"], g.grad["qvel0"]])
    np.testing.assert_allclose(ad, fd, rtol=1e-6, atol=1e-9)
    # forward mode (few parameters) gives the same numbers
    fwd = diffsim.value_and_grad(loss, theta, mode="forward")
    for k in theta:
        np.testing.assert_allclose(fwd.grad[k], g.grad[k], rtol=1e-10, atol=1e-12)
    d = diffsim.diagnose(loss, theta, KEY, num_samples=32)
    assert d.verdict == "trusted", str(d)
    check = diffsim.doctor.check_grad(loss, theta)
    assert check.ok, str(check)


@pytest.mark.slow
def test_cartpole_value_and_grad_auto_picks_forward_for_a_long_rollout(cartpole):
    """``mode="auto"``: two parameters and a long rollout (residuals above the threshold):
    forward mode, with the same gradient as reverse mode."""
    step, _, _, _, _ = cartpole
    T = 2000

    def loss(qvel0):
        return step.simulate({"qvel0": qvel0}, T).qpos[1] ** 2

    auto = diffsim.value_and_grad(loss, jnp.array([0.3, 0.5]))
    assert auto.mode == "forward", auto.reason
    rev = diffsim.value_and_grad(loss, jnp.array([0.3, 0.5]), mode="reverse")
    np.testing.assert_allclose(auto.grad, rev.grad, rtol=1e-8)


@pytest.mark.slow
def test_cartpole_rollout_checkpoint_jacobian_routes_and_diagnose_rollout(cartpole):
    step, T, ctrl, _, _ = cartpole
    s0 = step.initial_state(qvel=jnp.array([0.3, 0.5]))
    th = {"dof_damping": jnp.array([0.1, 0.02])}
    plain = diffsim.rollout(step, s0, th, T, inputs=ctrl)
    for ck in (None, 8, "sqrt", "recursive"):
        traj = diffsim.rollout(step, s0, th, T, inputs=ctrl, checkpoint=ck)
        np.testing.assert_allclose(traj.qpos, plain.qpos, rtol=0, atol=1e-12)

    def cost(s, p):
        return diffsim.rollout(step, s, p, T, inputs=ctrl, checkpoint="sqrt", trajectory=False)

    g_ck = jax.grad(lambda p: cost(s0, p).qpos[1])(th)
    g_plain = jax.grad(
        lambda p: diffsim.rollout(step, s0, p, T, inputs=ctrl, trajectory=False).qpos[1]
    )(th)
    np.testing.assert_allclose(g_ck["dof_damping"], g_plain["dof_damping"], rtol=1e-10)
    Ja, Pa = diffsim.rollout_jacobian(step, s0, th, T, inputs=ctrl, method="autodiff")
    Jp, Pp = diffsim.rollout_jacobian(step, s0, th, T, inputs=ctrl, method="product")
    np.testing.assert_allclose(Ja, Jp, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(Pa, Pp, rtol=1e-8, atol=1e-10)
    d = diffsim.doctor.diagnose_rollout(
        step, s0, th, T, lambda s: s.qpos[1] ** 2, KEY, inputs=ctrl, num_samples=32
    )
    assert d.verdict == "trusted", str(d)


@pytest.fixture(scope="module")
def pushing():
    step = mjx.load(scenes.path("pushing"))
    return step, scenes.pushing_loss(step)


@pytest.mark.slow
def test_pushing_every_estimator_and_optimize(pushing):
    """The estimators run on the MJX pushing loss (finite estimates); the exact estimate is
    jax.grad; ZoBG and FoBG agree within their standard errors (plus 10 % of the gradient,
    for FoBG's bias at σ = 0.1); optimize with AoBG halves the loss from θ = 0.9. (Auto runs
    on an MJX scene in test_one_verdict; 'fd' and auto compile MJX's solver for minutes more
    and add no engine-specific code path.)"""
    _, loss = pushing
    theta = jnp.asarray(0.7)
    g = float(jax.grad(loss)(theta))
    results = {}
    for name in ("exact", "zeroth", "first"):
        r = make_estimator(name)(loss, theta, KEY)
        assert np.isfinite(float(r.estimate)), name
        results[name] = r
    assert float(results["exact"].estimate) == pytest.approx(g, rel=1e-10)
    # no comparison of central differences here: over 100 steps the box–floor contact set
    # switches within ±1e-5 of θ = 0.7 (the loss jumps; the contact gradients are checked
    # against central differences over 60 steps, where it does not)
    z, f = results["zeroth"], results["first"]
    gap = abs(float(z.estimate) - float(f.estimate))
    assert gap < 4 * math.hypot(float(z.std_error), float(f.std_error)) + 0.1 * abs(g)
    r = diffsim.optimize(
        loss, jnp.asarray(0.9), AlphaOrder(), steps=40, key=KEY, optimizer=optax.adam(0.03)
    )
    assert float(r.loss) < 0.5 * float(loss(jnp.asarray(0.9)))


@pytest.mark.slow
def test_pushing_plateau_doctor_flags_it_and_exact_gradient_is_zero(pushing):
    _, loss = pushing
    theta = jnp.asarray(0.3)  # the finger stops short of the box
    assert float(jax.grad(loss)(theta)) == 0.0
    d = diffsim.diagnose(loss, theta, KEY, sigma=0.1, num_samples=64)
    assert d.verdict == "untrusted" and "plateau" in d.flag_names, str(d)


@pytest.mark.slow
def test_pushing_diagnose_rollout_and_rollout_jacobian_in_contact(pushing):
    step, _ = pushing
    T = 60
    ctrl = scenes.pushing_controls(0.7, T)
    s0 = step.initial_state()
    th = {"geom_friction": step.model.geom_friction}
    Ja, Pa = diffsim.rollout_jacobian(step, s0, th, T, inputs=ctrl, method="autodiff")
    Jp, Pp = diffsim.rollout_jacobian(step, s0, th, T, inputs=ctrl, method="product")
    assert np.all(np.isfinite(Ja)) and np.all(np.isfinite(Pa))
    np.testing.assert_allclose(Ja, Jp, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(Pa, Pp, rtol=1e-7, atol=1e-9)
    d = diffsim.doctor.diagnose_rollout(
        step, s0, th, T, lambda s: (s.qpos[1] - 0.3) ** 2, KEY, inputs=ctrl, num_samples=32
    )
    assert d.verdict in ("trusted", "untrusted")
    assert d.evaluations["step_jacobians"] == T


@pytest.mark.slow
def test_fixed_iterations_match_the_converged_solve(pushing):
    """``iterations=4`` (exactly four Newton iterations per step) moves the box's final
    position by less than 1e-4 m against MJX's converged solve (measured: one iteration moves
    it by about 10 cm: four box-floor contacts with friction need more). Its derivatives are
    refused (they would be those of the converged solve, not of the k-iteration model)."""
    _, loss = pushing
    x_conv = float(loss(jnp.asarray(0.7)))
    fixed = scenes.pushing_loss(mjx.load(scenes.path("pushing"), iterations=4))
    x_k = float(fixed(jnp.asarray(0.7)))
    assert abs(math.sqrt(x_k) - math.sqrt(x_conv)) < 1e-4
    with pytest.raises(ValueError, match=r"iterations=4 are refused"):
        jax.grad(fixed)(jnp.asarray(0.7))


@pytest.mark.slow
def test_readme_mujoco_example_is_five_lines_and_runs(capsys):
    readme = pathlib.Path(__file__).resolve().parents[1] / "README.md"
    section = readme.read_text().split("## Your own MuJoCo model")[1].split("\n## ")[0]
    match = re.search(r"```py\n(.*?)```", section, flags=re.S)
    assert match is not None
    block = match.group(1)
    assert len(block.strip().splitlines()) == 5
    exec(compile(block, str(readme), "exec"), {})
    assert "verdict:" in capsys.readouterr().out


def test_d12_mjx_simulate_names_a_theta_that_is_not_a_mapping():
    step = mjx.load(scenes.path("free_flight"))
    with pytest.raises(TypeError, match=r"^theta must be a dict naming model fields"):
        step.simulate([1.0], 5)  # type: ignore[arg-type]


_SPRING_PENDULUM = """
<mujoco>
  <option timestep="{h}" integrator="{integrator}"/>
  <worldbody>
    <body>
      <joint name="hinge" type="hinge" axis="0 1 0" stiffness="100"/>
      <geom type="sphere" size="0.05" mass="1" pos="0 0 -0.5"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("h", "integrator", "flagged"),
    [(0.05, "Euler", True), (0.05, "RK4", True), (0.01, "RK4", False)],
)
def test_mjx_discretization_flag_follows_opt_timestep(h, integrator, flagged):
    """A hinge spring (ω ≈ 20 rad/s) over 2 s, θ = its stiffness: at h = 0.05 s semi-implicit
    Euler (ωh = 1) runs at 20.9 rad/s, a phase error of ~1.9 rad by t = 2 s, so the gradient
    at h is that of another system and ``discretization`` is raised. RK4 (order 4) at
    ωh = 1 loses ~0.7 % of the amplitude per step (|R| ≈ 1 − (ωh)⁶/144): measured 27 % off,
    raised too. At h = 0.01 s (RK4, ωh = 0.2) it is not (Euler at h = 0.002 s is not
    either: measured, left out for its 3,000 steps of compile and run).
    ``with_time_step`` copies the model at h/2."""
    step = mjx.load(_SPRING_PENDULUM.format(h=h, integrator=integrator))
    assert (step.time_step, step.order) == (h, 4 if integrator == "RK4" else 1)
    fine = step.with_time_step(h / 2)
    assert fine.h == h / 2 and step.h == h  # a copy: the original keeps its time step
    T = round(2.0 / h)
    s0 = step.initial_state(qvel=jnp.array([1.0]))
    th = step.theta("jnt_stiffness")
    d = diffsim.doctor.diagnose_rollout(
        step, s0, th, T, lambda s: s.qpos[0], KEY, num_samples=16, max_samples=16
    )
    assert d.measurements["time_step"] == h and d.evaluations["half_step_gradients"] == 1
    assert ("discretization" in d.flag_names) == flagged, str(d)
    assert (d.measurements["discretization_error"] > 0.1) == flagged, str(d)


SLIDER_ON_ITS_LIMIT = """
<mujoco model="slider-on-its-limit">
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body name="slider">
      <joint name="x" type="slide" axis="1 0 0" limited="true" range="0 1"/>
      <geom type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_load_reports_joints_starting_on_a_range_end():
    """The slider starts at x = 0, its range's lower end: the load report names it; with
    the range moved off qpos0 (and for an unlimited joint) there is no such line."""
    line = [r for r in mjx.load(SLIDER_ON_ITS_LIMIT).report if r.startswith("joints starting")]
    assert line == [
        "joints starting on an end of their range (qpos0): x — a limit constraint switches "
        "on there, so derivatives from the initial state are one-sided (diffsim.diagnose "
        "flags the kink)"
    ]
    for xml in (
        SLIDER_ON_ITS_LIMIT.replace('range="0 1"', 'range="-1 1"'),
        SLIDER_ON_ITS_LIMIT.replace('limited="true" range="0 1"', ""),
    ):
        assert not [r for r in mjx.load(xml).report if r.startswith("joints starting")]


@pytest.mark.slow
def test_the_doctor_flags_a_joint_starting_on_its_limit():
    """Issue 23: a joint that starts exactly on its limit (as gymnasium's hopper and
    walker2d do at reset) has one-sided derivatives. A slider at its lower limit x = 0,
    loss x_T after T = 20 steps (h = 0.01) as a function of the initial velocity v: moving
    away is free (slope T·h = 0.2, what the adapter returns at v = 0), moving into the limit
    is stopped by MuJoCo's soft constraint (slope ≈ 0.027, from L(−1e-3) = 2.68e-5). The
    doctor raises ``kink`` with the change of slope (0.2 − 0.027 ≈ 0.227, to 2 %), and at
    v = 0.5, 5σ off the limit, trusts the same gradient."""
    with _enable_x64():
        step = mjx.load(SLIDER_ON_ITS_LIMIT)

        def loss(v):
            return step.simulate({"qvel0": v}, 20).qpos[0]

        assert any(
            line.startswith("joints starting on an end of their range (qpos0): ")
            and "one-sided" in line
            for line in step.report
        ), step.report
        at = jnp.array([0.0])
        assert abs(float(jax.grad(loss)(at)[0]) - 0.2) < 1e-9  # one side, by itself
        d = diffsim.diagnose(loss, at, jax.random.key(0), sigma=0.1)
        assert d.flag_names == ("kink",), d
        assert abs(d.measurements["fd_kink"] - 0.227) < 0.02 * 0.227, d.measurements["fd_kink"]
        assert diffsim.diagnose(loss, jnp.array([0.5]), jax.random.key(0), sigma=0.1).verdict == (
            "trusted"
        )
