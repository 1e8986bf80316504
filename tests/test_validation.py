"""Bad input: clear errors naming the argument and the accepted range, before tracing."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from diffsim import adjoint_vjp, rollout, rollout_jacobian, step_jacobian
from diffsim.integrators import INTEGRATORS, SemiImplicitEuler
from diffsim.systems import free_particle, pendulum

sys = free_particle()


@pytest.mark.parametrize("T", [0, -3])
def test_num_steps_must_be_positive(T):
    with pytest.raises(
        ValueError, match=r"num_steps must be an integer in \[1, 2147483647\], got -?\d"
    ):
        rollout(sys.step, sys.s0, sys.theta, T)
    with pytest.raises(ValueError, match="num_steps"):
        rollout_jacobian(sys.step, sys.s0, sys.theta, T)


@pytest.mark.parametrize("T", [2.5, "10", True])
def test_num_steps_must_be_an_integer(T):
    with pytest.raises(TypeError, match="num_steps must be an integer"):
        rollout(sys.step, sys.s0, sys.theta, T)


@pytest.mark.parametrize("h", [0.0, -0.1, float("nan"), float("inf")])
@pytest.mark.parametrize("name", sorted(INTEGRATORS))
def test_time_step_must_be_finite_and_positive(h, name):
    with pytest.raises(ValueError, match="h must be finite and > 0"):
        INTEGRATORS[name](lambda x, v, th: -x, h=h)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_state_and_params(bad):
    with pytest.raises(ValueError, match=r"s0\[0\] must be finite"):
        rollout(sys.step, (bad, 0.0), sys.theta, 3)
    with pytest.raises(ValueError, match=r"theta\['a'\] must be finite"):
        rollout(sys.step, sys.s0, {"a": bad}, 3)
    with pytest.raises(ValueError, match="state"):
        step_jacobian(sys.step, (0.0, bad), sys.theta)


def test_mismatched_pytrees_and_shapes():
    p = pendulum()
    with pytest.raises(TypeError, match="pytree structure"):
        rollout(lambda s, th: (s, s), jnp.zeros(2), 0.0, 3)
    with pytest.raises(TypeError, match="leaf shapes"):
        rollout(lambda s, th: jnp.zeros(3), jnp.zeros(2), 0.0, 3)
    with pytest.raises(ValueError, match="leading axis num_steps=5"):
        rollout(lambda s, th, u: s + u, 0.0, 0.0, 5, inputs=jnp.ones(4))
    with pytest.raises(ValueError, match="equal shapes"):
        SemiImplicitEuler(lambda x, v, th: -x, h=0.1)((jnp.zeros(2), jnp.zeros(3)), 0.0)
    with pytest.raises(TypeError, match=r"pair \(x, v\)"):
        SemiImplicitEuler(lambda x, v, th: -x, h=0.1)(jnp.zeros(2), 0.0)
    with pytest.raises(ValueError, match="cotangent must have the shape"):
        adjoint_vjp(p.step, p.s0, p.theta, 3, (1.0, 2.0, 3.0))


def test_step_not_callable_or_wrong_arity():
    with pytest.raises(TypeError, match="step must be callable"):
        rollout(3.0, 0.0, 0.0, 2)
    with pytest.raises(TypeError, match=r"step could not be called as step\(state, theta, u\)"):
        rollout(lambda s, th: s, 0.0, 0.0, 2, inputs=jnp.ones(2))
