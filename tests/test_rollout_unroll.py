"""``rollout(..., unroll=k)``: same results and gradients as ``unroll=1``, validated."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffsim import rollout


def _step(s, theta):
    x, v = s
    v = v - theta["g"] / 60
    x = x + v / 60
    hit = (x < 0) & (v < 0)
    return jnp.where(hit, -x, x), jnp.where(hit, -theta["e"] * v, v)


S0 = (jnp.asarray([1.0, 0.3, 2.0]), jnp.asarray([0.0, -1.0, 0.5]))
THETA = {"g": jnp.asarray(9.81), "e": jnp.asarray(0.8)}


@pytest.mark.parametrize("unroll", [2, 5, 64])
@pytest.mark.parametrize("checkpoint", [None, 7])
def test_unroll_same_trajectory_and_gradient(unroll, checkpoint):
    def loss(v0, k):
        xT, vT = rollout(
            _step, (S0[0], v0), THETA, 50, trajectory=False, checkpoint=checkpoint, unroll=k
        )
        return jnp.sum(xT**2 + vT)

    traj1 = rollout(_step, S0, THETA, 50)
    trajk = rollout(_step, S0, THETA, 50, unroll=unroll, checkpoint=checkpoint)
    for a, b in zip(traj1, trajk):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    g1 = jax.grad(loss)(S0[1], 1)
    gk = jax.grad(loss)(S0[1], unroll)
    np.testing.assert_allclose(g1, gk, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("bad", [0, -3])
def test_unroll_must_be_positive(bad):
    with pytest.raises(ValueError, match="unroll"):
        rollout(_step, S0, THETA, 5, unroll=bad)


def test_unroll_must_be_int():
    with pytest.raises(TypeError, match="unroll"):
        rollout(_step, S0, THETA, 5, unroll=2.5)
