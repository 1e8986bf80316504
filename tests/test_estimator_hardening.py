"""Issue 26, the estimators', doctor's and optimize's share: D7, D8, D9, D10, D13, D14.

Each reproducer of the issue gives a clear error naming the argument and the accepted
range (or a right answer), never a leaked XLA error or a silent NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import diffsim
from diffsim import estimators as E


def quad(t):
    return jnp.sum((t - 1) ** 2)


TH = jnp.array([1.0, 2.0])
KEY = jax.random.PRNGKey(0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: E.ZerothOrder(num_samples=10**9)(quad, TH, KEY),
        lambda: E.FirstOrder(num_samples=10**9)(quad, TH, KEY),
        lambda: E.AlphaOrder(num_samples=800_000_000)(quad, TH, KEY),  # 3N > 2³¹ − 1 too
        lambda: E.Auto(num_samples=10**9)(quad, TH, KEY),
        lambda: diffsim.diagnose(quad, TH, KEY, num_samples=10**9),
    ],
)
def test_d7_sample_counts_beyond_memory_are_refused_before_compiling(call):
    with pytest.raises(ValueError, match=r"^(num|max)_samples must be at most \d+ for theta"):
        call()


def test_d7_optimize_steps_are_bounded():
    with pytest.raises(ValueError, match=r"^steps must be an integer in \[1, 2147483647\]"):
        diffsim.optimize(quad, TH, E.ZerothOrder(), steps=3_000_000_000, key=KEY)
    with pytest.raises(ValueError, match=r"^steps must be at most \d+ for theta"):
        diffsim.optimize(quad, TH, E.ZerothOrder(), steps=2_000_000_000, key=KEY)


# a subnormal of the dtype the tests compute in (1e-45 in float32, 1e-320 in float64)
SUB = float(np.finfo(np.dtype(jnp.result_type(float))).tiny) / 16


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: E.ZerothOrder(sigma=SUB), "sigma"),
        (lambda: E.AlphaOrder(sigma=SUB), "sigma"),
        (lambda: E.Auto(sigma={"a": SUB}), r"sigma\['a'\]"),
        (lambda: E.FiniteDifference(step=SUB), "step"),
    ],
)
def test_d8_subnormal_scales_are_refused(make, name):
    tiny = float(np.finfo(np.dtype(jnp.result_type(float))).tiny)
    with pytest.raises(ValueError, match=rf"^{name} must be >= {tiny:.3g} \(the smallest normal"):
        make()


@pytest.mark.parametrize(
    "call",
    [
        lambda t: diffsim.diagnose(quad, t, KEY),
        lambda t: E.Auto()(quad, t, KEY),
        lambda t: E.Exact()(quad, t, KEY),
        lambda t: E.ZerothOrder()(quad, t, KEY),
        lambda t: diffsim.optimize(quad, t, key=KEY, steps=2),
    ],
)
def test_d9_empty_theta_is_one_error(call):
    with pytest.raises(ValueError, match=r"^theta has no entries"):
        call(jnp.zeros((0,)))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0])
def test_d10_sigma_vector_refuses_what_the_estimators_refuse(bad):
    with pytest.raises(ValueError, match=r"^sigma must be finite and > 0"):
        diffsim.estimators.sigma_vector(bad, 1.0)
    with pytest.raises(ValueError, match=r"^sigma must be finite and > 0"):
        E.ZerothOrder(sigma=bad)


@pytest.mark.parametrize("optimizer", [optax.sgd(1e200), optax.sgd(float("nan"))])
def test_d13_a_diverged_optimize_is_an_error_naming_the_step(optimizer):
    with pytest.raises(FloatingPointError, match=r"^optimize diverged: .* at step \d+ of 5"):
        diffsim.optimize(quad, TH, E.Exact(), optimizer=optimizer, steps=5, key=KEY)


@pytest.mark.parametrize("value", ["yes", None, 1])
def test_d14_antithetic_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^antithetic must be a bool \(True or False\)"):
        E.ZerothOrder(antithetic=value)
