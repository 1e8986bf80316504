"""Control tasks on gymnasium's MuJoCo models (``diffsim.engines.control``), through MJX.

Checked against MuJoCo C (the closed loop run by ``mj_step`` with the same policy and cost),
a closed form (the reacher's fingertip from its link lengths) and central differences; the
pendulum's policy trained by the task's recipe balances held-out poles. Slow: each MJX
program compiles for 15-90 s on 2 cores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from diffsim import TASKS
from diffsim.engines import control
from diffsim.policies import PolicyObjective

pytestmark = pytest.mark.slow


def _c_closed_loop(theta: np.ndarray, qpos: np.ndarray, horizon: int) -> float:
    """The pendulum's cost by MuJoCo C: ``mj_step`` (its RK4) with u = Θ·(qpos, qvel, 1)."""
    m = mujoco.MjModel.from_xml_path(control.gymnasium_model("inverted_pendulum"))
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    total = 0.0
    for _ in range(horizon):
        u = theta @ np.concatenate([d.qpos, d.qvel, [1.0]])
        total += d.qpos[1] ** 2 + 0.1 * d.qpos[0] ** 2 + 1e-3 * float(u @ u)
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
    return total


@pytest.mark.parametrize(
    ("gain", "falls"),
    [(np.array([[1.0, 20.0, 1.0, 2.0, 0.0]]), False), (np.zeros((1, 5)), True)],
)
def test_pendulum_closed_loop_is_mujoco_cs(gain, falls):
    """V(x₁, 0, Θ) of the objective equals MuJoCo C's closed loop from the same tilts:
    to 1e-9 relative while the pole stays clear of its hinge's limits (no constraint: the
    same RK4 arithmetic), to 1e-6 when it falls onto them (the limit is solved to MuJoCo's
    tolerance 1e-8 by both solvers, from different iterates)."""
    obj = control.pendulum_objective()
    for tilt in (-0.25, 0.1, 0.3):
        qpos = np.array([0.05, tilt])
        s0 = obj.step.initial_state(jnp.asarray(qpos), jnp.zeros(2))
        ours = float(obj.value(jnp.asarray(gain), s0))
        c = _c_closed_loop(gain, qpos, control.PENDULUM_HORIZON)
        assert ours == pytest.approx(c, rel=1e-6 if falls else 1e-9)
        _, traj, _ = obj.trajectory(jnp.asarray(gain), s0)
        fallen = abs(float(traj.qpos[-1, 1])) > 1.5
        assert fallen == falls


def test_pendulum_policy_gradient_is_central_differences():
    """The exact gradient of the objective (16 tilts, through the converged constraint
    solve) along three random directions of Θ equals central differences (ε = 1e-5:
    truncation ~1e-10 relative) to 1e-6."""
    obj = control.pendulum_objective()
    theta = jnp.asarray([[0.5, 12.0, 0.8, 1.5, 0.0]])
    f = jax.jit(lambda t: obj(t))
    g = jax.jit(jax.grad(lambda t: obj(t)))(theta)
    for k in range(3):
        v = jax.random.normal(jax.random.PRNGKey(k), theta.shape)
        fd = (f(theta + 1e-5 * v) - f(theta - 1e-5 * v)) / 2e-5
        assert float(jnp.vdot(g, v)) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_reacher_fingertip_is_the_two_link_closed_form_and_gradient_is_fd():
    """The open-loop reacher's cost reads the fingertip by MJX's kinematics: at rest it is
    at (0.1 + 0.11, 0), so L(0) = H·|(0.21, 0) − (0.1, 0.1)| exactly; and after a rollout
    the tip is at the two-link forward kinematics of the joint angles (links 0.1 and 0.11
    m) to 1e-12. The gradient of L(u) equals central differences (ε = 1e-6) to 1e-6."""
    loss = jax.jit(control.reacher_open_loop(horizon=30))
    assert float(loss(jnp.zeros((30, 2)))) == pytest.approx(30 * np.hypot(0.11, 0.1), rel=1e-12)
    step = control._load("reacher")
    s = control.reacher_state(step, control.REACHER_TARGET, qpos=[0.4, -1.2])
    tip = np.asarray(step.body_position(s, "fingertip"))[:2]
    a, b = 0.4, 0.4 - 1.2
    expect = [0.1 * np.cos(a) + 0.11 * np.cos(b), 0.1 * np.sin(a) + 0.11 * np.sin(b)]
    np.testing.assert_allclose(tip, expect, atol=1e-12)
    u = 0.3 * jax.random.normal(jax.random.PRNGKey(0), (30, 2))
    g = jax.jit(jax.grad(loss))(u)
    for i, j in [(0, 0), (10, 1), (25, 0)]:
        e = jnp.zeros_like(u).at[i, j].set(1e-6)
        fd = (loss(u + e) - loss(u - e)) / 2e-6
        assert float(g[i, j]) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_pendulum_task_trains_a_balancing_policy():
    """The task's recipe (FoBG, σ = 0.3, N = 16, 100 steps of Adam 0.3) from Θ = 0, where
    every held-out pole falls, balances at least 80 % of them (measured 85 % with this key,
    85-100 % over keys 0-2) and cuts the cost below 2 % of the start's (measured 0.9-1.0
    from 159.6)."""
    task = TASKS["pendulum"]
    loss, theta0 = task.build()
    assert isinstance(loss, PolicyObjective)
    assert float(control.balanced(loss, theta0)) == 0.0
    r = task.train("first", key=jax.random.PRNGKey(0))
    assert float(control.balanced(loss, r.theta)) >= 0.8
    assert float(r.loss) < 0.02 * float(loss(theta0))
