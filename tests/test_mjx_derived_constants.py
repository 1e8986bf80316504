# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""A θ-edited MuJoCo model is the model MuJoCo compiles at θ (issue 47, item 0).

MuJoCo's compiler derives constants from the masses, inertias and armature at ``qpos0``
(``mj_setConst``: ``body_invweight0``, ``dof_invweight0``, ``tendon_invweight0``,
``actuator_acc0``, ``dof_M0``, ``body_subtreemass``); the MJX adapter recomputes them from θ
(``diffsim.engines.mjx._setconst``). Checked against MuJoCo C itself: the constants after
``mj_setConst`` on an edited ``mjModel`` (to 1e-10, float64; measured 1e-16 to 1e-11), their
derivative in the masses and inertias against central differences of ``mj_setConst`` (step
1e-6: truncation ε²/6·|f'''| plus round-off 1e-16·|f|/ε ≈ 1e-10 relative; tolerance 1e-6),
and a rollout through contact from a model loaded at one mass and stepped at another
against MuJoCo C compiled at the other (1e-8; measured 5e-15, where the constants left at
the loaded mass put the box 34 mm off).
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")  # the mjx extra (absent on the minimum versions)

import diffsim  # noqa: E402
from diffsim.engines import mjx  # noqa: E402
from diffsim.engines.mjx._setconst import DERIVED_FROM, derived_constants  # noqa: E402

diffsim.enable_compilation_cache()  # MJX compiles for 10-30 s: keep it between runs

FIELDS = ("body_subtreemass", "body_invweight0", "dof_invweight0", "dof_M0", "tendon_invweight0",
          "actuator_acc0")  # fmt: skip
"""The derived constants compared with MuJoCo C's ``mj_setConst``."""

BOX = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.1">
      <freejoint name="box"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <inertial pos="0 0 0" mass="MASS" diaginertia="0.0133 0.0133 0.0133"/>
    </body>
  </worldbody>
  <actuator><motor joint="box" gear="1 0 0 0 0 0"/></actuator>
</mujoco>
"""
"""The issue's scene: a 0.2 m box on a floor, pushed along x by a motor (mass and inertia
given apart, so a model compiled at another mass has the same inertia)."""

SLIDER_BOX = """
<mujoco>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.4"/>
      <body name="tip" pos="0.3 0 0">
        <joint name="ball" type="ball"/>
        <geom type="sphere" size="0.05" mass="0.2"/>
      </body>
    </body>
    <body name="box" pos="1 0 0.1">
      <joint name="x" type="slide" axis="1 0 0" armature="0.05"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
    <body name="post" pos="-1 0 0.2"><geom type="box" size="0.05 0.05 0.2" mass="3"/></body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="hinge" coef="0.5"/><joint joint="x" coef="1"/></fixed>
  </tendon>
  <actuator>
    <motor joint="hinge" gear="2"/>
    <motor tendon="t"/>
    <position joint="x" kp="10"/>
  </actuator>
</mujoco>
"""
"""Every branch of ``mj_setConst``'s formulas: a hinge arm with a ball-jointed tip (general
bodies, a ball joint's averaged dofs), a box on sliders only (a "simple" body, whose
constants MuJoCo takes as 1/mass, ignoring armature), a static body (zero), a tendon and
actuators on a joint, a tendon and a servo."""


def _mj(xml: str, mass: float = 2.0) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(xml.replace("MASS", str(mass)))


def _edited(mj: mujoco.MjModel, seed: int) -> dict[str, np.ndarray]:
    """Masses, inertias and armature of ``mj`` moved by 30-60 % (a θ), and gears."""
    rng = np.random.default_rng(seed)
    theta = {
        "body_mass": mj.body_mass * rng.uniform(0.6, 1.6, mj.nbody),
        "body_inertia": mj.body_inertia * rng.uniform(0.6, 1.6, (mj.nbody, 3)),
        "dof_armature": mj.dof_armature * rng.uniform(0.5, 2.0, mj.nv) + 0.02,
        "actuator_gear": mj.actuator_gear * rng.uniform(0.5, 2.0, (mj.nu, 1)),
    }
    theta["body_mass"][0] = theta["body_inertia"][0] = 0.0  # the world
    return theta


def _mujoco_c(mj: mujoco.MjModel, theta: dict[str, np.ndarray]) -> mujoco.MjModel:
    """A copy of ``mj`` with θ's fields written in and ``mj_setConst`` run: MuJoCo C's
    constants at θ."""
    out = copy.deepcopy(mj)
    for name, value in theta.items():
        getattr(out, name)[:] = value
    mujoco.mj_setConst(out, mujoco.MjData(out))
    return out


def _constants(step: mjx.MjxStep, theta) -> dict[str, np.ndarray]:
    """The derived constants (and stat) of ``step.model_with(theta)``, compiled."""

    def of(t):
        m = step.model_with(t)
        out = {f: getattr(m, f) for f in FIELDS}
        return dict(out, meaninertia=m.stat.meaninertia, meanmass=m.stat.meanmass)

    theta = {k: jnp.asarray(v) for k, v in theta.items()}
    return {k: np.asarray(v) for k, v in jax.jit(of)(theta).items()}


def _compare_with_setconst(mj: mujoco.MjModel, seed: int = 0) -> None:
    step = mjx.load(mj)
    theta = _edited(mj, seed)
    want = _mujoco_c(mj, theta)
    got = _constants(step, theta)
    for f in FIELDS:
        ref, loaded = getattr(want, f), getattr(mj, f)
        if ref.size == 0:
            continue
        scale = max(1.0, float(np.max(np.abs(ref))))
        err = float(np.max(np.abs(got[f].reshape(ref.shape) - ref)))
        assert err <= 1e-10 * scale, (f, err, scale)
        if f != "actuator_acc0" or mj.nu:
            # the edit moved every constant: comparing with the loaded ones would fail
            assert np.max(np.abs(ref - loaded)) > 1e-3 * scale, f


def test_box_constants_are_mj_setconst_s():
    """The issue's box: body_invweight0 = (0.37, …) at θ mass 2.7, not the loaded 0.5."""
    mj = _mj(BOX)
    step = mjx.load(mj)
    theta = step.theta("body_mass")
    theta["body_mass"] = theta["body_mass"].at[1].set(2.7)
    c = _constants(step, theta)
    assert mj.body_invweight0[1, 0] == pytest.approx(0.5)
    assert c["body_invweight0"][1, 0] == pytest.approx(1 / 2.7, abs=1e-12)
    compiled = _mj(BOX, 2.7)  # compiled at 2.7: the same constants, and the same stat
    for f in FIELDS:
        np.testing.assert_allclose(c[f], getattr(compiled, f), rtol=0, atol=1e-12)
    assert float(c["meaninertia"]) == pytest.approx(compiled.stat.meaninertia, abs=1e-12)
    assert float(c["meanmass"]) == pytest.approx(compiled.stat.meanmass, abs=1e-12)
    _compare_with_setconst(mj)


def test_every_branch_of_setconst_matches_mujoco_c():
    mj = _mj(SLIDER_BOX)
    assert list(mj.body_simple[1:4]) == [0, 0, 2]  # arm, tip general; the box simple
    assert mj.body_weldid[4] == 0  # the post is static
    for seed in range(2):
        _compare_with_setconst(mj, seed)


def test_a_theta_without_mass_fields_keeps_the_loaded_constants():
    """Friction, damping, solref, … enter no derived constant: the model's own arrays."""
    step = mjx.load(_mj(BOX))
    m = step.model_with(step.theta("geom_friction", "dof_damping", "geom_solref", "gravity"))
    assert m.body_invweight0 is step.model.body_invweight0
    assert set(DERIVED_FROM) == {"body_mass", "body_inertia", "dof_armature", "actuator_gear"}


def test_report_says_which_theta_fields_follow():
    step = mjx.load(_mj(SLIDER_BOX))
    follows = [line for line in step.report if line.startswith("θ follows MuJoCo exactly")]
    assert len(follows) == 1
    assert "body_mass, body_inertia, dof_armature, actuator_gear recompute" in follows[0]
    assert "geom_friction" in follows[0] and "enter no derived constant" in follows[0]
    # the servo has no damping: no dampratio caveat; with kv it gets one
    assert not [line for line in step.report if "dampratio" in line]
    damped = mjx.load(_mj(SLIDER_BOX.replace('kp="10"', 'kp="10" dampratio="1"')))
    (line,) = [line for line in damped.report if "dampratio" in line]
    assert "damped position actuators actuator 2" in line


def test_derivative_of_the_constants_is_mujoco_c_s_finite_difference():
    """∂(constants)/∂(masses, inertias) by forward mode against central differences of
    MuJoCo C's mj_setConst (ε = 1e-6)."""
    mj = _mj(SLIDER_BOX)
    step = mjx.load(mj)
    theta = {k: jnp.asarray(v) for k, v in _edited(mj, 3).items()}

    def flat(c) -> np.ndarray:
        return np.concatenate([np.ravel(c[f]) for f in FIELDS])

    def ours(t):
        m = step.model_with(t)
        return jnp.concatenate([jnp.ravel(getattr(m, f)) for f in FIELDS])

    jvp_of = jax.jit(lambda t, v: jax.jvp(ours, (t,), (v,))[1])
    for name, index in (("body_mass", (1,)), ("body_mass", (3,)), ("body_inertia", (2, 1)),
                        ("dof_armature", (0,))):  # fmt: skip
        tangent = {k: jnp.zeros_like(v) for k, v in theta.items()}
        tangent[name] = tangent[name].at[index].set(1.0)
        jvp = jvp_of(theta, tangent)
        eps = 1e-6

        def c_at(delta: float, name=name, index=index):
            t = {k: np.array(v) for k, v in theta.items()}
            t[name][index] += delta
            return flat({f: getattr(_mujoco_c(mj, t), f) for f in FIELDS})

        fd = (c_at(eps) - c_at(-eps)) / (2 * eps)
        scale = max(1.0, float(np.max(np.abs(fd))))
        assert np.max(np.abs(np.asarray(jvp) - fd)) <= 1e-6 * scale, (name, index)
        assert np.max(np.abs(fd)) > 1e-3, (name, index)  # the constants do move


def test_derived_constants_at_the_loaded_values_are_the_loaded_ones():
    mj = _mj(SLIDER_BOX)
    step = mjx.load(mj)
    c = jax.jit(lambda m: derived_constants(step.constants_plan, m, step.data_template))(step.model)
    for f in FIELDS:
        np.testing.assert_allclose(getattr(c, f), getattr(mj, f), rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_zoo_constants_are_mj_setconst_s():
    """gymnasium's half_cheetah (hinges, a planar root) and humanoid (a free root, tendons)
    with every mass, inertia, armature and gear moved."""
    import warnings

    from diffsim.engines.control import gymnasium_model

    pytest.importorskip("gymnasium")
    for name in ("half_cheetah", "humanoid"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # half_cheetah's deprecated settotalmass
            mj = mujoco.MjModel.from_xml_path(gymnasium_model(name))
        _compare_with_setconst(mj)


@pytest.mark.slow
def test_rollout_through_contact_at_a_theta_mass_is_mujoco_c_compiled_there():
    """The issue's measurement: the box loaded at 2.0 kg, stepped with θ body_mass = 2.7
    for 750 steps (h = 0.002) under a motor force rising to 40 N (it sits on its four
    corners, breaks away and slides: contact on 672 of the steps), against MuJoCo C
    compiled at 2.7. Measured: 5e-15 m (before: 34 mm, 5.8 mm at the end)."""
    T = 750
    ctrl = np.linspace(0.0, 40.0, T)[:, None]
    mj = _mj(BOX, 2.7)
    d = mujoco.MjData(mj)
    want, contacts = [d.qpos.copy()], 0
    for u in ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(mj, d)
        want.append(d.qpos.copy())
        contacts += d.ncon > 0
    assert contacts > 600 and want[-1][0] > 0.2  # through contact, and it slid

    step = mjx.load(_mj(BOX, 2.0))
    theta = step.theta("body_mass")
    theta["body_mass"] = theta["body_mass"].at[1].set(2.7)
    got = jax.jit(
        lambda t: step.simulate(dict(t, ctrl=jnp.asarray(ctrl)), T, trajectory=True).qpos
    )(theta)
    assert np.max(np.abs(np.asarray(got) - np.array(want))) < 1e-8


@pytest.mark.slow
def test_rollout_derivative_in_a_theta_mass_is_mujoco_c_s_finite_difference():
    """∂(qpos_T, qvel_T)/∂(θ mass) over 300 contact steps of the box (loaded at 2 kg, at θ
    mass 2.7 kg) against central differences (ε = 1e-6) of MuJoCo C compiled at 2.7 ± ε,
    its solver run to convergence (tolerance 0). The derivative carries the constants'
    (softer contacts for a lighter box); without them it is another model's. Measured:
    8e-10 against entries up to 2.6e-3 (3e-7 relative)."""
    T = 300
    ctrl = np.linspace(0.0, 40.0, 750)[:T, None]

    def mujoco_c(mass: float) -> np.ndarray:
        mj = _mj(BOX, mass)
        mj.opt.tolerance = 0.0
        d = mujoco.MjData(mj)
        for u in ctrl:
            d.ctrl[:] = u
            mujoco.mj_step(mj, d)
        return np.concatenate([d.qpos, d.qvel])

    step = mjx.load(_mj(BOX, 2.0))

    def final(mass):
        theta = step.theta("body_mass")
        theta["body_mass"] = theta["body_mass"].at[1].set(mass)
        s = step.simulate(dict(theta, ctrl=jnp.asarray(ctrl)), T)
        return jnp.concatenate([s.qpos, s.qvel])

    value, tangent = jax.jit(lambda x: jax.jvp(final, (x,), (1.0,)))(2.7)
    assert np.max(np.abs(np.asarray(value) - mujoco_c(2.7))) < 1e-8
    eps = 1e-6
    fd = (mujoco_c(2.7 + eps) - mujoco_c(2.7 - eps)) / (2 * eps)
    scale = float(np.max(np.abs(fd)))
    assert scale > 1e-3  # the mass moves the box
    assert np.max(np.abs(np.asarray(tangent) - fd)) < 1e-6 * scale
