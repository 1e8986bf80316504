"""rollout: scan semantics, pytrees, inputs, checkpointing, jit caching, vmap, grad."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import tree_allclose
from diffsim import checkpoint_segments, rollout
from diffsim.systems import free_particle, pendulum


def test_trajectory_matches_closed_form_of_semi_implicit_euler():
    # x_T = x0 + T h v0 + a h² T(T+1)/2, v_T = v0 + T h a (semi-implicit Euler, exactly)
    h, a, x0, v0, T = 0.01, -9.81, 0.5, 3.0, 250
    sys = free_particle(h=h, a=a, x0=x0, v0=v0)
    xs, vs = rollout(sys.step, sys.s0, sys.theta, T)
    t = np.arange(T + 1)
    np.testing.assert_allclose(xs, x0 + t * h * v0 + a * h * h * t * (t + 1) / 2, rtol=1e-12)
    np.testing.assert_allclose(vs, v0 + t * h * a, rtol=1e-12)


def test_final_state_and_trajectory_options_agree():
    sys = pendulum()
    traj = rollout(sys.step, sys.s0, sys.theta, 37)
    no_init = rollout(sys.step, sys.s0, sys.theta, 37, include_initial=False)
    final = rollout(sys.step, sys.s0, sys.theta, 37, trajectory=False)
    assert traj[0].shape == (38,) and no_init[0].shape == (37,)
    assert tree_allclose(jax.tree_util.tree_map(lambda a: a[-1], traj), final)
    assert tree_allclose(jax.tree_util.tree_map(lambda a: a[1:], traj), no_init)


def test_pytree_state_and_params():
    def step(s, p):
        return {"pos": s["pos"] + p["dt"] * s["vel"], "vel": s["vel"] * p["decay"]}

    s0 = {"pos": jnp.zeros(3), "vel": jnp.array([1.0, 2.0, 3.0])}
    p = {"dt": 0.1, "decay": 0.5}
    out = rollout(step, s0, p, 4, trajectory=False)
    # pos_T = dt * vel0 * (1 + 0.5 + 0.25 + 0.125)
    np.testing.assert_allclose(out["pos"], 0.1 * np.array([1, 2, 3]) * 1.875, rtol=1e-12)
    np.testing.assert_allclose(out["vel"], np.array([1, 2, 3]) / 16, rtol=1e-12)


def test_inputs_are_applied_in_order():
    step = lambda s, p, u: s * p + u  # noqa: E731
    u = jnp.arange(1.0, 6.0)
    traj = rollout(step, 0.0, 2.0, 5, inputs=u)
    expected = [0.0]
    for ut in np.arange(1.0, 6.0):
        expected.append(expected[-1] * 2 + ut)
    np.testing.assert_allclose(traj, expected)


@pytest.mark.parametrize("checkpoint", [None, 1, 7, 10, "sqrt", "recursive", (3, 4)])
def test_checkpointing_changes_nothing_but_memory(checkpoint):
    sys = pendulum(damping=0.1)
    T = 103  # prime: exercises the remainder segments

    def loss(s0, theta):
        xs, vs = rollout(sys.step, s0, theta, T, checkpoint=checkpoint)
        return jnp.sum(xs**2) + jnp.sum(vs)

    ref = jax.grad(
        lambda s, p: (
            jnp.sum(rollout(sys.step, s, p, T)[0] ** 2) + jnp.sum(rollout(sys.step, s, p, T)[1])
        ),
        argnums=(0, 1),
    )(sys.s0, sys.theta)
    got = jax.grad(loss, argnums=(0, 1))(sys.s0, sys.theta)
    assert tree_allclose(got, ref, rtol=1e-10)
    traj = rollout(sys.step, sys.s0, sys.theta, T, checkpoint=checkpoint)
    assert tree_allclose(traj, rollout(sys.step, sys.s0, sys.theta, T), rtol=1e-12)


def test_checkpoint_segments_schedules():
    assert checkpoint_segments(100, None) == ()
    assert checkpoint_segments(100, "sqrt") == (10,)
    assert checkpoint_segments(100, 5) == (5,)
    levels = checkpoint_segments(10**6, "recursive")
    assert len(levels) >= 3 and all(k >= 2 for k in levels)
    with pytest.raises(ValueError, match="checkpoint"):
        checkpoint_segments(100, "binomial")
    with pytest.raises(ValueError, match="checkpoint"):
        checkpoint_segments(100, 0)


def test_checkpointing_reduces_saved_residuals():
    # Reverse-mode memory is what the backward pass keeps: count the bytes of the
    # residuals saved by jax.vjp's linearisation (jaxpr constants of the vjp function).
    sys = pendulum()
    T = 4096

    def saved_bytes(checkpoint):
        f = lambda p: rollout(sys.step, sys.s0, p, T, trajectory=False, checkpoint=checkpoint)[0]  # noqa: E731
        _, vjp = jax.vjp(f, sys.theta)
        leaves = jax.tree_util.tree_leaves(vjp)
        return sum(int(np.prod(getattr(x, "shape", ()))) * 8 for x in leaves if hasattr(x, "shape"))

    plain, sqrt = saved_bytes(None), saved_bytes("sqrt")
    assert sqrt * 10 < plain, (plain, sqrt)


def test_compiled_once_per_shape():
    traces = []

    def step(s, p):
        traces.append(1)  # runs only while tracing
        return s * p

    rollout(step, jnp.ones(3), 0.5, 10)
    n = len(traces)
    rollout(step, jnp.full(3, 2.0), 0.25, 10)
    assert len(traces) == n
    rollout(step, jnp.ones(4), 0.5, 10)  # new shape: a new trace is expected
    assert len(traces) > n


def test_vmap_over_s0_and_theta_and_grad_of_vmap():
    sys = pendulum()
    angles = jnp.linspace(0.1, 1.5, 5)
    gl = jnp.linspace(5.0, 12.0, 5)

    def final_angle(a0, g):
        th = {"g_over_l": g, "damping": jnp.asarray(0.0)}
        return rollout(sys.step, (a0, jnp.asarray(0.0)), th, 50, trajectory=False)[0]

    batched = jax.vmap(final_angle)(angles, gl)
    single = jnp.stack([final_angle(a, g) for a, g in zip(angles, gl)])
    np.testing.assert_allclose(batched, single, rtol=1e-12)
    g_of_v = jax.grad(lambda a: jnp.sum(jax.vmap(final_angle)(a, gl)))(angles)
    v_of_g = jax.vmap(jax.grad(final_angle), in_axes=(0, 0))(angles, gl)
    np.testing.assert_allclose(g_of_v, v_of_g, rtol=1e-10)
