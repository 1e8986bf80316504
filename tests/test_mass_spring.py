"""Mass–spring chain: dynamics checks and system identification with Optax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import central_fd
from diffsim import systems


def test_single_mass_frequency():
    # one mass on one spring: x(t) = x0 cos(ω t), ω = sqrt(k/m)
    sys = systems.mass_spring(1, h=1e-3, masses=[2.0], stiffnesses=[50.0], x0=[0.1])
    x = systems.mass_spring_observe(sys, sys.theta, jnp.zeros(1000))
    t = 1e-3 * np.arange(1, 1001)
    np.testing.assert_allclose(x[:, 0], 0.1 * np.cos(5.0 * t), atol=5e-4)


def test_gradient_wrt_parameters_matches_fd():
    sys = systems.mass_spring(3)
    u = systems.mass_spring_drive(100, 0.01)

    def f(p):
        return systems.mass_spring_observe(sys, {"m": p[:3], "k": p[3:]}, u)[-1]

    p = jnp.concatenate([sys.theta["m"], sys.theta["k"]])
    np.testing.assert_allclose(jax.jacfwd(f)(p), central_fd(f, p, eps=1e-6), rtol=1e-6, atol=1e-9)


def test_system_identification_recovers_masses_and_stiffnesses():
    sys = systems.mass_spring(3)
    u = systems.mass_spring_drive(400, 0.01)
    observed = systems.mass_spring_observe(sys, sys.theta, u)
    init = {
        "m": sys.theta["m"] * jnp.array([1.2, 0.8, 1.15]),
        "k": sys.theta["k"] * jnp.array([0.8, 1.2, 0.85]),
    }
    theta, losses = systems.mass_spring_identify(sys, observed, u, init, num_iters=1500)
    for name in ("m", "k"):
        np.testing.assert_allclose(theta[name], sys.theta[name], rtol=1e-4)
    assert float(jnp.min(losses)) < 1e-8 * float(losses[0])


def test_bad_input():
    with pytest.raises(ValueError, match="masses"):
        systems.mass_spring(2, masses=[1.0, -1.0])
    with pytest.raises(ValueError, match="shape"):
        systems.mass_spring(2, stiffnesses=[1.0])
    with pytest.raises(ValueError, match="h"):
        systems.mass_spring(2, h=0.0)
    sys = systems.mass_spring(2)
    with pytest.raises(ValueError, match="learning_rate"):
        systems.mass_spring_identify(
            sys, jnp.zeros((3, 2)), jnp.zeros(3), sys.theta, learning_rate=-1.0
        )
