"""diffsim.value_and_grad: forward and reverse mode agree with each other and with finite
differences, the mode is chosen from the parameters per system, bad input is named."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffsim
from diffsim.contact import Plane, Restitution, WithContact
from diffsim.integrators import SemiImplicitEuler

STEP = WithContact(
    SemiImplicitEuler(lambda x, v, th: jnp.stack([0.0 * th["g"], -th["g"]]), h=0.01),
    Restitution(Plane.ground(2), e=0.8, toi=True),
)


def ball_loss(theta, p0):
    """Final height after 1 s of a ball thrown with velocity theta["v0"] (bounces once)."""
    pT, _ = diffsim.rollout(STEP, (p0, theta["v0"]), {"g": theta["g"]}, 100, trajectory=False)
    return (pT[0] - 1.0) ** 2 + pT[1] ** 2


def test_forward_equals_reverse_equals_finite_differences():
    theta = {"v0": jnp.array([0.7, 1.3]), "g": jnp.asarray(9.81)}
    p0 = jnp.array([0.0, 1.0])
    fwd = diffsim.value_and_grad(ball_loss, theta, p0, mode="forward")
    rev = diffsim.value_and_grad(ball_loss, theta, p0, mode="reverse")
    assert (fwd.mode, rev.mode) == ("forward", "reverse")
    assert float(fwd.value) == pytest.approx(float(ball_loss(theta, p0)), rel=1e-12)
    for k in theta:
        np.testing.assert_allclose(fwd.grad[k], rev.grad[k], rtol=1e-10, atol=1e-12)
    eps = 1e-6
    for k, i in (("v0", 0), ("v0", 1), ("g", None)):
        e = jnp.zeros_like(theta[k]) if i is None else jnp.zeros(2).at[i].set(eps)
        e = e + eps if i is None else e
        up = {**theta, k: theta[k] + e}
        dn = {**theta, k: theta[k] - e}
        fd = (ball_loss(up, p0) - ball_loss(dn, p0)) / (2 * eps)
        got = fwd.grad[k] if i is None else fwd.grad[k][i]
        assert float(got) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_auto_picks_reverse_for_small_residuals_and_many_parameters():
    few = diffsim.value_and_grad(lambda t: jnp.sum(t**2), jnp.ones(3))
    many = diffsim.value_and_grad(lambda t: jnp.sum(jnp.sin(t) ** 2), jnp.ones(40))
    assert few.mode == "reverse" and "MiB of residuals" in few.reason
    assert many.mode == "reverse" and "40 parameters" in many.reason
    np.testing.assert_allclose(few.grad, 2 * np.ones(3))
    np.testing.assert_allclose(many.grad, np.sin(2.0) * np.ones(40))


def test_auto_picks_forward_when_reverse_would_store_large_residuals():
    # reverse mode keeps cos(t k) and k for 2**20 values of k: 16 MiB in float64
    k = jnp.arange(2**20, dtype=jnp.float64) / 2**20

    def loss(t):
        return jnp.sum(jnp.sin(t * k))

    res = diffsim.value_and_grad(loss, jnp.asarray(0.5))
    assert res.mode == "forward" and "16 MiB of residuals" in res.reason
    assert float(res.grad) == pytest.approx(float(jnp.sum(k * jnp.cos(0.5 * k))), rel=1e-12)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_inside_jit_and_vmap_it_is_the_same_gradient_and_mode(mode):
    """Called under the caller's ``jax.jit`` (and ``vmap``), the mode is still chosen while
    tracing: the gradient is the one computed outside, to the last bit, by the same mode."""
    theta = {"v0": jnp.array([0.7, 1.3]), "g": jnp.asarray(9.81)}
    p0 = jnp.array([0.0, 1.0])
    outside = diffsim.value_and_grad(ball_loss, theta, p0, mode=mode)
    modes = []

    @jax.jit
    def inside(t, p):
        g = diffsim.value_and_grad(ball_loss, t, p, mode=mode)
        modes.append(g.mode)  # a Python string: known while tracing
        return g.value, g.grad

    value, grad = inside(theta, p0)
    assert modes == [outside.mode] and (mode == "auto" or outside.mode == mode)
    assert float(value) == float(outside.value)
    for k in theta:
        np.testing.assert_array_equal(grad[k], outside.grad[k])
    starts = jnp.stack([p0, p0 + jnp.array([0.0, 0.5])])
    batch = jax.vmap(lambda p: diffsim.value_and_grad(ball_loss, theta, p, mode=mode).grad)(starts)
    for i in range(2):
        one = diffsim.value_and_grad(ball_loss, theta, starts[i], mode=mode).grad
        np.testing.assert_allclose(batch["v0"][i], one["v0"], rtol=1e-12)


def test_choose_mode_rule():
    from diffsim._grad import FORWARD_MIN_RESIDUAL_BYTES, choose_mode

    assert choose_mode(1, FORWARD_MIN_RESIDUAL_BYTES)[0] == "forward"
    assert choose_mode(1, FORWARD_MIN_RESIDUAL_BYTES - 1)[0] == "reverse"
    assert choose_mode(5, 10 * FORWARD_MIN_RESIDUAL_BYTES)[0] == "reverse"
    assert choose_mode(5, 0, "forward") == ("forward", "mode='forward' requested")


def test_batched_is_vmap_of_the_per_system_gradient():
    key = jax.random.PRNGKey(0)
    v0 = jax.random.uniform(key, (16, 2), minval=-2.0, maxval=2.0)
    g = jnp.full((16,), 9.81)
    p0 = jnp.tile(jnp.array([0.0, 1.0]), (16, 1))
    for mode in ("forward", "reverse"):
        res = diffsim.value_and_grad(ball_loss, {"v0": v0, "g": g}, p0, batched=True, mode=mode)
        assert res.mode == mode and res.value.shape == (16,)
        ref = jax.vmap(jax.value_and_grad(ball_loss))({"v0": v0, "g": g}, p0)
        np.testing.assert_allclose(res.value, ref[0], rtol=1e-12)
        np.testing.assert_allclose(res.grad["v0"], ref[1]["v0"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(res.grad["g"], ref[1]["g"], rtol=1e-9, atol=1e-12)
    res = diffsim.value_and_grad(ball_loss, {"v0": v0, "g": g}, p0, batched=True)
    assert res.mode == "reverse"  # 16 balls x 100 steps: a few kB of residuals
    ref = jax.vmap(jax.value_and_grad(ball_loss))({"v0": v0, "g": g}, p0)
    np.testing.assert_allclose(res.value, ref[0], rtol=1e-12)
    np.testing.assert_allclose(res.grad["v0"], ref[1]["v0"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.grad["g"], ref[1]["g"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "theta", "exc", "match"),
    [
        ({"mode": "sideways"}, jnp.ones(2), ValueError, "mode"),
        ({}, jnp.asarray([1.0, jnp.nan]), ValueError, "theta"),
        ({}, "abc", TypeError, "theta"),
        ({}, {}, ValueError, "at least one array"),
        ({"batched": True}, jnp.asarray(1.0), ValueError, "leading axis"),
        ({"batched": True}, {"a": jnp.ones(3), "b": jnp.ones(4)}, ValueError, "leading axis"),
    ],
)
def test_bad_input_is_named(kwargs, theta, exc, match):
    with pytest.raises(exc, match=match):
        diffsim.value_and_grad(lambda t: 0.0, theta, **kwargs)


def test_integer_theta_is_promoted_to_float():
    # issue 12: integer θ is promoted (as everywhere θ enters), not refused
    res = diffsim.value_and_grad(lambda t: jnp.sum((t - 3.0) ** 2), jnp.arange(3))
    assert jnp.issubdtype(res.grad.dtype, jnp.floating)
    np.testing.assert_allclose(res.grad, [-6.0, -4.0, -2.0])


def test_many_parameters_run_in_chunks_without_the_identity():
    """Beyond ``BASIS_CHUNK`` coordinate directions, forward mode and central differences
    take them in chunks (2,500 = 2 full chunks and a partial one): the same gradient as
    reverse mode and the closed form, rows past d dropped."""
    from diffsim._sharding import BASIS_CHUNK
    from diffsim.estimators import FiniteDifference

    d = 2500
    assert 2 * BASIS_CHUNK < d < 3 * BASIS_CHUNK
    c = jnp.linspace(0.5, 2.0, d)

    def loss(t):
        return jnp.sum(c * jnp.sin(t)) + 0.5 * jnp.sum(t) ** 2

    theta = jnp.linspace(-1.0, 1.0, d)
    want = c * jnp.cos(theta) + jnp.sum(theta)
    fwd = diffsim.value_and_grad(loss, theta, mode="forward")
    rev = diffsim.value_and_grad(loss, theta, mode="reverse")
    np.testing.assert_allclose(fwd.grad, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rev.grad, want, rtol=1e-12, atol=1e-12)
    assert float(fwd.value) == pytest.approx(float(loss(theta)), rel=1e-14)
    fd = FiniteDifference(step=1e-5)(loss, theta)
    np.testing.assert_allclose(fd.estimate, want, rtol=1e-7, atol=1e-7)
    assert int(fd.loss_evaluations) == 2 * d
    assert FiniteDifference().cost(d).batch == BASIS_CHUNK
