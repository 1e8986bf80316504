"""The Brax APG baseline of ``benchmarks.control`` (``benchmarks/_apg.py``): its Brax env is
diffsim's pendulum task, and a tiny APG training runs and returns finite numbers."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffsim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks package
pytest.importorskip("brax")
pytest.importorskip("mujoco.mjx")
pytest.importorskip("gymnasium")

from benchmarks import _apg

pytestmark = pytest.mark.slow  # MJX and Brax compile for minutes on 2 cores


def test_env_reward_and_observation_are_diffsims():
    env = _apg.make_env()
    obj = _apg._objective()
    step = obj.step
    reset, env_step = jax.jit(env.reset), jax.jit(env.step)
    diffsim_step = jax.jit(lambda s, u: step(s, obj.params, u))
    key = jax.random.PRNGKey(7)
    # the reset draws diffsim's initial state and observes it as diffsim does
    for k in jax.random.split(key, 3):
        s, s0 = reset(k), obj.initial_state(k)
        np.testing.assert_allclose(s.obs, obj.observe(s0), rtol=0, atol=1e-12)
        np.testing.assert_allclose(s.pipeline_state.qpos, s0.qpos, rtol=0, atol=0)
    # random states within the limits (none active), random actions: the reward is minus
    # diffsim's cost of the state before the step and its control, the next observation
    # diffsim's after its own step
    k_q, k_v, k_a = jax.random.split(key, 3)
    qs = jax.random.uniform(k_q, (4, 2), jnp.float64, -0.4, 0.4)
    vs = jax.random.uniform(k_v, (4, 2), jnp.float64, -0.5, 0.5)
    acts = jax.random.uniform(k_a, (4, 3, 1), jnp.float64, -1.0, 1.0)
    for q, v, a in zip(qs, vs, acts):
        ours = step.initial_state(q, v)
        ps = env.pipeline_init(q, v)
        state = reset(key).replace(pipeline_state=ps, obs=obj.observe(ps))
        np.testing.assert_allclose(state.obs, obj.observe(ours), rtol=0, atol=1e-12)
        for ak in a:
            u = _apg.ACTION_SCALE * ak
            state = env_step(state, ak)
            assert state.reward.dtype == jnp.float64
            assert abs(float(state.reward) + float(obj.cost(ours, u))) <= 1e-9
            ours = diffsim_step(ours, u)
            np.testing.assert_allclose(state.obs, obj.observe(ours), rtol=0, atol=1e-9)


def test_tiny_apg_training_is_finite_and_counts_its_steps():
    steps = 2 * _apg.NUM_ENVS * _apg.HORIZON_LENGTH  # two policy updates
    r = _apg.train_apg(0, steps, linear=True)
    assert r.steps == steps
    assert math.isfinite(r.loss) and r.loss > 0
    assert 0.0 <= r.score <= 1.0
    assert all(math.isfinite(t) and t >= 0 for t in (r.compile_s, r.run_s, r.total_s))


def test_tennis_env_return_is_minus_diffsims_cost():
    """The tennis env (diffsim's step as a Brax ``Env``): from the reset's initial state, an
    episode driven by a linear policy returns minus diffsim's V of that policy from that
    state (per-step costs and the terminal cost on the last step), to 1e-9 relative."""
    scale = _apg.TENNIS_ACTION_SCALE
    env = _apg.make_objective_env("tennis", scale)
    obj = diffsim.TASKS["tennis"].problem()[0]
    theta = 0.3 * jax.random.normal(jax.random.PRNGKey(1), (3, 7), jnp.float64)

    @jax.jit
    def episode(key):
        def one(state, _):
            action = diffsim.policies.linear_policy(state.obs, theta) / scale
            state = env.step(state, action)
            return state, state.reward

        s0 = env.reset(key)
        _, rewards = jax.lax.scan(one, s0, None, length=obj.horizon)
        return jnp.sum(rewards), s0.pipeline_state[0]

    for k in jax.random.split(jax.random.PRNGKey(4), 3):
        ret, x0 = episode(k)
        np.testing.assert_allclose(x0, obj.initial_state(k), rtol=0, atol=1e-15)
        v = float(obj.value(theta, x0))
        assert v > 1.0
        assert abs(float(ret) + v) <= 1e-9 * v
    assert (env.observation_size, env.action_size) == (7, 3)


def test_tiny_apg_training_on_tennis_is_finite():
    steps = 2 * 200 * _apg.HORIZON_LENGTH  # two policy updates of 200 envs
    r = _apg.train_apg(0, steps, linear=True, num_envs=200, task="tennis")
    assert r.steps == steps
    assert math.isfinite(r.loss) and r.loss > 0 and 0.0 <= r.score <= 1.0
