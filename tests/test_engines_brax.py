"""diffsim.engines.brax: a stock Brax environment (inverted_pendulum, generalized backend)
rolled out, differentiated, diagnosed and optimized with diffsim's tools, in the
analytic-policy-gradient setting (a linear policy θ) and open loop (an action sequence).

Brax is a test requirement (scripts/_setup.sh installs the ``brax`` extra): if it is
missing this module fails to import, loudly. Only the minimum-versions job (Python 3.10,
which brax 0.14 does not support) leaves it out (scripts/test-minimum).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import diffsim
from conftest import central_fd
from diffsim.engines import brax
from diffsim.estimators import AlphaOrder, Exact, ZerothOrder, rollout_input_loss

KEY = jax.random.PRNGKey(0)
T = 30

diffsim.enable_compilation_cache()  # MJX compiles for 10-30 s: keep it between runs

pytestmark = [
    pytest.mark.filterwarnings("ignore:Brax System:UserWarning"),
    pytest.mark.xdist_group("brax"),  # one worker compiles the module's pendulum
]


def angle_cost(traj):
    """Σ_t (pole angle² + 0.1 cart position²): dense, smooth (the stock reward is a constant
    1 per step, whose gradient is identically zero)."""
    obs = traj.obs[1:]
    return jnp.sum(obs[:, 1] ** 2 + 0.1 * obs[:, 0] ** 2)


@pytest.fixture(scope="module")
def pendulum():
    step = brax.wrap("inverted_pendulum")
    theta0 = {"W": jnp.array([[0.0, 0.5, 0.0, 0.0]]), "b": jnp.zeros(1)}
    return step, step.loss(T, KEY, cost=angle_cost), theta0


def test_wrap_refuses_unknown_names_the_mjx_backend_and_bad_policies():
    with pytest.raises(ValueError, match=r"unknown Brax environment 'pendulum'.*inverted_pendulum"):
        brax.wrap("pendulum")
    with pytest.raises(ValueError, match="while_loop"):
        brax.wrap("inverted_pendulum", backend="mjx")
    with pytest.raises(TypeError, match="policy must be callable"):
        brax.wrap("inverted_pendulum", policy=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"brax\.envs\.Env"):
        brax.wrap(42)


@pytest.mark.slow
def test_policy_gradient_matches_float64_central_differences(pendulum):
    _, loss, theta0 = pendulum
    g = jax.grad(loss)(theta0)
    flat = jnp.concatenate([theta0["W"][0], theta0["b"]])

    def f(p):
        return loss({"W": p[None, :4], "b": p[4:]})

    fd = central_fd(f, flat, eps=1e-6)[0]
    ad = jnp.concatenate([g["W"][0], g["b"]])
    assert np.all(np.abs(ad) > 0)
    np.testing.assert_allclose(ad, fd, rtol=1e-5, atol=1e-8)
    fwd = diffsim.value_and_grad(loss, theta0, mode="forward")
    np.testing.assert_allclose(fwd.grad["W"], g["W"], rtol=1e-10)


@pytest.mark.slow
def test_rollout_checkpoint_diagnose_and_optimize_the_policy(pendulum):
    step, loss, theta0 = pendulum
    s0 = step.reset(KEY)
    plain = diffsim.rollout(step, s0, theta0, T)
    ck = diffsim.rollout(step, s0, theta0, T, checkpoint="sqrt")
    np.testing.assert_allclose(ck.obs, plain.obs, rtol=0, atol=1e-12)
    assert plain.obs.shape == (T + 1, 4)
    # the stock environment's reset perturbs the pole: the rollout reproduces Brax's own loop
    s = s0
    for _ in range(3):
        s = step.env.step(s, step.action(s, theta0))
    np.testing.assert_allclose(plain.obs[3], s.obs, rtol=1e-12, atol=1e-12)
    d = diffsim.diagnose(loss, theta0, KEY, num_samples=32)
    assert d.verdict == "trusted", str(d)
    # from no control at all (θ = 0): gradient descent on the policy balances the pole
    zero = step.init_policy()
    start = float(loss(zero))
    for est in (Exact(), AlphaOrder(sigma=0.05, num_samples=16)):
        r = diffsim.optimize(loss, zero, est, steps=80, key=KEY, optimizer=optax.adam(0.02))
        # measured: 7.6 -> 0.002 (exact), 0.006 (AoBG)
        assert float(r.loss) < 0.01 * start, (type(est).__name__, float(r.loss), start)


@pytest.mark.slow
def test_open_loop_actions_zeroth_order_agrees_with_the_exact_gradient():
    """An action sequence (T, 1) perturbed at every step (Suh et al.'s noise model): the exact
    gradient matches central differences, and the ZoBG estimate agrees with it (small σ: the
    loss is smooth, so ∇F ≈ ∇L): Σ_k (error_k / SE_k)² below the 99.9 % point of χ²₁₀
    (29.59)."""
    step = brax.wrap("inverted_pendulum", policy=None)
    s0 = step.reset(KEY)
    loss = rollout_input_loss(step, s0, step.no_params, 10, lambda traj, u: angle_cost(traj))
    u = jnp.full((10, 1), 0.2)
    exact = Exact()(loss, u, KEY).estimate
    fd = central_fd(lambda a: loss(a.reshape(10, 1)), u.ravel(), eps=1e-6)[0]
    np.testing.assert_allclose(np.ravel(exact), fd, rtol=1e-5, atol=1e-8)
    z = ZerothOrder(sigma=1e-3, num_samples=512, antithetic=True)(loss, u, KEY)
    chi2 = float(np.sum((np.asarray(z.estimate - exact) / np.asarray(z.std_error)) ** 2))
    assert chi2 < 29.59, chi2


@pytest.mark.slow
def test_the_policy_setting_runs_on_a_brax_step():
    """A :class:`diffsim.policies.PolicyObjective` on an open-loop BraxStep (the per-step action, policy
    plus noise, is the step's input). Its noise-free cost equals the closed loop that Brax runs
    itself (``wrap(policy=...)``: the action ``policy(θ, obs)`` inside the step) to 1e-12; its
    exact gradient equals central differences of that closed loop; FoBG at a tiny σ is that
    gradient; ZoBG, the paper's score over the 20 steps' action noise with the zero-noise
    baseline, agrees with it within 4 of its standard errors in every component (σ = 10⁻⁴
    in the action's units, where the smoothing bias is negligible: measured, the FoBG mean
    moves by 3e-4 relative per 10⁻⁶ of σ — this loop is strongly curved in its actions)."""
    horizon = 20
    open_loop = brax.wrap("inverted_pendulum", policy=None)
    s0 = open_loop.reset(KEY)

    def cost(state, u):
        return state.obs[1] ** 2 + 0.1 * state.obs[0] ** 2

    objective = diffsim.policies.PolicyObjective(
        open_loop, diffsim.policies.linear_policy, lambda key: s0, cost=cost, horizon=horizon,
        params=open_loop.no_params, observe=lambda s: s.obs, num_states=1,
    )  # fmt: skip
    closed = brax.wrap(
        "inverted_pendulum", policy=lambda th, obs: diffsim.policies.linear_policy(obs, th)
    )

    def brax_loss(th):
        obs = diffsim.rollout(closed, s0, th, horizon).obs[:horizon]  # x_1 .. x_H
        return jnp.sum(obs[:, 1] ** 2 + 0.1 * obs[:, 0] ** 2)

    theta = jnp.array([[0.1, 0.5, 0.0, 0.05]])
    assert objective.check(theta) == (1,)
    np.testing.assert_allclose(float(objective(theta)), float(brax_loss(theta)), rtol=1e-12)
    exact = np.ravel(Exact()(objective, theta, KEY).estimate)
    fd = central_fd(lambda p: brax_loss(p.reshape(1, 4)), theta.ravel(), eps=1e-6)[0]
    assert np.all(np.abs(fd) > 1e-4)  # every gain moves the cost
    np.testing.assert_allclose(exact, fd, rtol=1e-5, atol=1e-9)
    first = diffsim.estimators.FirstOrder(sigma=1e-9, num_samples=4)(objective, theta, KEY)
    np.testing.assert_allclose(np.ravel(first.estimate), exact, rtol=1e-6)
    z = ZerothOrder(sigma=1e-4, num_samples=1024, antithetic=True)(objective, theta, KEY)
    err, se = np.abs(np.ravel(z.estimate) - exact), np.ravel(z.std_error)
    assert np.all(err < 4 * se), (z.estimate, exact, se)
    assert np.all(se < 0.3 * np.abs(exact)), se  # a check with teeth (measured: 0.05–0.15)
