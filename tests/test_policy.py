"""Policies through a closed loop, and the estimators in the policy setting (noise on every
step's action), against closed forms: a linear–quadratic loop, whose smoothed cost is exact
in σ², and a threshold crossed by a noisy walk, whose smoothed cost is a normal CDF."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import diffsim
from diffsim.estimators import AlphaOrder, Auto, Exact, FirstOrder, ZerothOrder
from diffsim.estimators.auto import decide_or_reuse
from diffsim.policies import PolicyObjective, linear_policy, mlp_policy

KEY = jax.random.PRNGKey(3)
H = 0.1


def integrator(x, p, u):
    """A double integrator: position and velocity, the action an acceleration."""
    return jnp.array([x[0] + H * x[1], x[1] + H * u[0]])


def lq(horizon=20, sampler=None, **kw):
    start = jnp.array([1.0, 0.0])
    return PolicyObjective(
        integrator,
        linear_policy,
        sampler or (lambda key: start),
        cost=lambda x, u: x[0] ** 2 + 0.1 * x[1] ** 2 + 0.01 * u[0] ** 2,
        horizon=horizon,
        terminal_cost=lambda x: 10.0 * x[0] ** 2,
        **kw,
    )


THETA = jnp.array([[-1.0, -1.0]])
SIGMA = 0.3


def smoothed_lq_gradient(obj, theta, sigma):
    """∇F for F(θ) = E_w V(x₁, w, θ): V is quadratic in the action noise w (linear loop,
    quadratic costs), so F = V(0) + (σ²/2)·tr ∇²_w V(0) exactly; differentiated by autodiff."""
    s0 = obj.initial_state(KEY)
    shape = (obj.horizon, 1)

    def F(th):
        flat = lambda w: obj.value(th, s0, w.reshape(shape))  # noqa: E731
        hess = jax.hessian(flat)(jnp.zeros(obj.horizon))
        return flat(jnp.zeros(obj.horizon)) + 0.5 * sigma**2 * jnp.trace(hess)

    return jax.grad(F)(theta)


@pytest.mark.parametrize(
    "est",
    [
        FirstOrder(sigma=SIGMA, num_samples=400),
        ZerothOrder(sigma=SIGMA, num_samples=4000),
        ZerothOrder(sigma=SIGMA, num_samples=4000, antithetic=True),
        AlphaOrder(sigma=SIGMA, num_samples=400, gamma=100.0, R=100.0),
    ],
    ids=["first", "zeroth", "zeroth-antithetic", "alpha"],
)
def test_estimators_match_the_smoothed_linear_quadratic_gradient(est):
    obj = lq()
    truth = smoothed_lq_gradient(obj, THETA, SIGMA)
    # the smoothing moves the gradient by a visible amount: σ matters in this check
    exact = jax.grad(lambda th: obj.value(th, obj.initial_state(KEY)))(THETA)
    assert float(jnp.max(jnp.abs(truth - exact))) > 0.05
    r = est(obj, THETA, KEY)
    err = np.abs(np.asarray(r.estimate - truth))
    se = np.asarray(r.std_error)
    assert np.all(se < 0.25 * np.abs(np.asarray(truth))), se  # a check with teeth
    assert np.all(err < 4 * se), (r.estimate, truth, se)
    assert r.estimate.shape == THETA.shape


def test_costs_are_counted_as_the_paper_counts_them():
    obj = lq()
    assert int(ZerothOrder(sigma=SIGMA, num_samples=8)(obj, THETA, KEY).loss_evaluations) == 16
    anti = ZerothOrder(sigma=SIGMA, num_samples=8, antithetic=True)(obj, THETA, KEY)
    assert int(anti.loss_evaluations) == 12  # 4 pairs: V(w), V(−w) and the baseline V(0)
    r = FirstOrder(sigma=SIGMA, num_samples=8)(obj, THETA, KEY)
    assert (int(r.loss_evaluations), int(r.grad_evaluations)) == (0, 8)


@pytest.mark.slow
def test_auto_trusts_a_smooth_loop_and_returns_its_first_order_estimate():
    obj = lq(sampler=lambda key: jnp.array([1.0, 0.0]) + 0.1 * jax.random.normal(key, (2,)))
    # N = 256: at 64 one key in eight leaves the gap in its undecided band (z = 3.4: mixed)
    r = Auto(sigma=SIGMA, num_samples=256)(obj, THETA, KEY)
    assert r.choice_name == "exact" and float(r.alpha) == 1.0
    # the first-order family is drawn from the key's second split, as FirstOrder draws
    _, k1, _ = jax.random.split(KEY, 3)
    want = FirstOrder(sigma=SIGMA, num_samples=256)(obj, THETA, k1)
    np.testing.assert_allclose(r.estimate, want.estimate, rtol=1e-12)
    np.testing.assert_allclose(r.std_error, want.std_error, rtol=1e-12)
    truth = smoothed_lq_gradient(lq(), THETA, SIGMA)  # one state: the sampler's mean
    assert float(jnp.max(jnp.abs(r.estimate - truth))) < 0.5 * float(jnp.max(jnp.abs(truth)))


# a walk x_{h+1} = x_h + h·(θ + w_h) from −1 must end past 0: V = 1{x_H <= 0}
STEPS, DT = 20, 0.1


def walk(theta_value=0.45):
    obj = PolicyObjective(
        lambda x, p, u: x + DT * u,
        lambda obs, th: th,  # a constant action: D_θπ = I
        lambda key: jnp.array([-1.0]),
        cost=lambda x, u: jnp.zeros(()),
        horizon=STEPS,
        terminal_cost=lambda x: jnp.where(x[0] > 0, 0.0, 1.0),
    )
    return obj, jnp.array([theta_value])


def walk_gradient(theta, sigma):
    """x_H ~ N(−1 + hHθ, h²Hσ²): F = Φ((1 − hHθ)/(h√H σ)), ∇F = −hH φ(c)/(h√H σ)."""
    sd = DT * math.sqrt(STEPS) * sigma
    c = (1 - DT * STEPS * theta) / sd
    return -DT * STEPS * math.exp(-(c**2) / 2) / math.sqrt(2 * math.pi) / sd


def test_first_order_is_blind_to_the_threshold_and_zeroth_order_sees_it():
    obj, theta = walk()
    truth = walk_gradient(0.45, 0.5)
    assert truth < -3.0
    first = FirstOrder(sigma=0.5, num_samples=64)(obj, theta, KEY)
    assert float(first.estimate[0]) == 0.0 and float(first.std_error[0]) == 0.0
    r = ZerothOrder(sigma=0.5, num_samples=4000)(obj, theta, KEY)
    assert abs(float(r.estimate[0]) - truth) < 4 * float(r.std_error[0]) < 0.25 * -truth
    # AoBG keeps the first-order share whose bias α·B stays within γ − ε (the paper's rule)
    mix = AlphaOrder(sigma=0.5, num_samples=2000, gamma=0.5)(obj, theta, KEY)
    alpha, B, eps = float(mix.alpha), float(mix.bias_gap), float(mix.epsilon)
    assert alpha < 0.15 and alpha * B <= 0.5 - eps + 1e-12  # the blind samples: mostly dropped
    assert abs(float(mix.estimate[0]) - truth) < alpha * B + 4 * float(mix.std_error[0])


def test_auto_sees_the_threshold_and_leaves_first_order_out():
    obj, theta = walk()
    truth = walk_gradient(0.45, 0.5)
    r = Auto(sigma=0.5, num_samples=512)(obj, theta, KEY)
    assert r.choice_name in ("mixed", "zeroth"), r
    assert float(r.alpha) < 0.1
    assert abs(float(r.estimate[0]) - truth) < 4 * float(r.std_error[0])


@pytest.mark.slow
def test_same_key_same_numbers_and_a_new_key_new_samples():
    obj = lq()
    for est in (FirstOrder(sigma=SIGMA, num_samples=16), ZerothOrder(sigma=SIGMA),
                AlphaOrder(sigma=SIGMA), Auto(sigma=SIGMA, num_samples=16)):  # fmt: skip
        a, b = est(obj, THETA, KEY), est(obj, THETA, KEY)
        np.testing.assert_array_equal(a.estimate, b.estimate)
        assert bool(jnp.all(jnp.isfinite(a.estimate)))
    z = ZerothOrder(sigma=SIGMA)
    assert not np.array_equal(z(obj, THETA, KEY).estimate, z(obj, THETA, KEY + 1).estimate)


def test_sigma_forms_in_the_actions_units():
    obj = lq(action_scale=2.0)
    from diffsim.estimators._rows import action_sigma

    assert float(action_sigma(diffsim.estimators.Relative(0.1), obj, (1,))[0]) == pytest.approx(0.2)
    assert float(action_sigma(0.3, obj, (1,))[0]) == pytest.approx(0.3)
    r = FirstOrder(sigma=diffsim.estimators.Relative(0.15), num_samples=8)(obj, THETA, KEY)
    assert float(r.sigma_used) == pytest.approx(0.3)


def test_truncated_horizon_cuts_the_state_derivative():
    # x' = x + h·u, u = θx, cost x² + u²: cut every step, only the action's own term is left,
    # dV/dθ = Σ_h 2 u_h x_h (x_h held fixed), while the values do not change
    obj = PolicyObjective(
        lambda x, p, u: x + DT * u, linear_policy, lambda key: jnp.array([1.0]),
        cost=lambda x, u: x[0] ** 2 + u[0] ** 2, horizon=10, truncate=1,
    )  # fmt: skip
    full = PolicyObjective(obj.step, obj.policy, obj.initial_state, obj.cost, obj.horizon)
    theta = jnp.array([[-0.5]])
    assert float(obj(theta)) == float(full(theta))
    xs = 1.0 * (1 - 0.05) ** np.arange(10)
    want = np.sum(2 * (-0.5) * xs**2)
    got = float(Exact()(obj, theta, KEY).estimate[0, 0])
    assert got == pytest.approx(want, rel=1e-12)
    assert abs(float(Exact()(full, theta, KEY).estimate[0, 0]) - want) > 0.1


def dare_gain(A, B, Q, R, iterations=5000):
    """The infinite-horizon LQR gain by the Riccati recursion (NumPy, independent of JAX)."""
    P = Q.copy()
    for _ in range(iterations):
        K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        P = Q + A.T @ P @ (A - B @ K)
    return -K


@pytest.mark.slow
def test_training_a_linear_policy_reaches_the_lqr_gain_cost():
    obj = PolicyObjective(
        integrator, linear_policy, lambda key: jnp.array([1.0, 0.0]),
        cost=lambda x, u: x[0] ** 2 + 0.1 * x[1] ** 2 + 0.1 * u[0] ** 2, horizon=60,
    )  # fmt: skip
    A = np.array([[1.0, H], [0.0, 1.0]])
    B = np.array([[0.0], [H]])
    K = dare_gain(A, B, np.diag([1.0, 0.1]), np.array([[0.1]]))
    best_static = float(obj(jnp.asarray(K)))  # the optimal static gain costs at most this
    theta0 = jnp.zeros((1, 2))
    r = diffsim.optimize(obj, theta0, FirstOrder(sigma=0.05, num_samples=8), steps=300,
                         key=KEY, optimizer=optax.adam(0.3))  # fmt: skip
    assert float(obj(theta0)) > 3 * best_static
    assert float(r.loss) <= 1.01 * best_static, (float(r.loss), best_static)


@pytest.mark.slow
def test_an_mlp_policy_trains_with_auto():
    policy, theta0 = mlp_policy(jax.random.PRNGKey(1), 2, 1, width=8, depth=1, scale=5.0)
    obj = PolicyObjective(
        integrator, policy,
        lambda key: jnp.array([1.0, 0.0]) + 0.2 * jax.random.normal(key, (2,)),
        cost=lambda x, u: x[0] ** 2 + 0.1 * x[1] ** 2 + 0.01 * u[0] ** 2, horizon=30,
    )  # fmt: skip
    r = diffsim.optimize(obj, theta0, Auto(sigma=0.1, num_samples=8), steps=60, key=KEY,
                         optimizer=optax.adam(0.05))  # fmt: skip
    assert float(r.loss) < 0.5 * float(obj(theta0))
    assert bool(jnp.all(jnp.isfinite(r.history.sigma)))
    choices = np.asarray(r.history.estimate.choice)
    assert set(choices.tolist()) <= {0, 1, 2, 3}


def test_bad_structures_are_named():
    obj = lq()
    with pytest.raises(TypeError, match=r"^policy must return one array of floats"):
        PolicyObjective(integrator, lambda o, t: (t, t), obj.initial_state, obj.cost,
                        horizon=3).check(THETA)  # fmt: skip
    with pytest.raises(TypeError, match=r"^step must return a state like initial_state"):
        PolicyObjective(lambda x, p, u: (x, x), linear_policy, obj.initial_state, obj.cost,
                        horizon=3).check(THETA)  # fmt: skip
    with pytest.raises(TypeError, match=r"^step\(state, params, u\) failed with u of shape"):
        PolicyObjective(integrator, linear_policy, lambda key: {"x": jnp.ones(2)}, obj.cost,
                        horizon=3).check(THETA)  # fmt: skip
    with pytest.raises(TypeError, match=r"^cost\(state, u\) must return a scalar"):
        PolicyObjective(integrator, linear_policy, obj.initial_state,
                        lambda x, u: x, horizon=3).check(THETA)  # fmt: skip
    with pytest.raises(TypeError, match=r"^policy\(obs, theta\) failed"):
        PolicyObjective(integrator, linear_policy, obj.initial_state, obj.cost,
                        horizon=3).check(jnp.ones((1, 5)))  # fmt: skip
    with pytest.raises(ValueError, match=r"horizon"):
        lq(horizon=0)
    with pytest.raises(ValueError, match=r"truncate"):
        lq(truncate=0)
    with pytest.raises(ValueError, match=r"^action_scale must be finite and > 0"):
        lq(action_scale=-1.0)
    with pytest.raises(TypeError, match=r"^cost must be callable"):
        PolicyObjective(integrator, linear_policy, obj.initial_state, None, horizon=3)
    with pytest.raises(TypeError, match=r"^policy must return one array of floats"):
        FirstOrder(sigma=0.1)(
            PolicyObjective(integrator, lambda o, t: (t, t), obj.initial_state, obj.cost,
                            horizon=3), THETA, KEY)  # fmt: skip


@pytest.mark.slow
def test_a_diverged_training_keeps_the_last_good_theta():
    obj = lq()
    with pytest.raises(diffsim.DivergedError, match=r"last good theta") as info:
        diffsim.optimize(obj, THETA, FirstOrder(sigma=SIGMA, num_samples=4),
                         optimizer=optax.sgd(1e3), steps=20, key=KEY)  # fmt: skip
    good = info.value.theta
    assert good is not None and bool(jnp.all(jnp.isfinite(good)))


@pytest.mark.slow  # ~15–50 s cold on 2 cores: the default suite stays under 10 min
def test_auto_deciding_every_k_steps_reuses_first_order_on_a_smooth_loop():
    """The linear–quadratic loop with ``decide_every=4``: decisions on steps 0 and 4 (the
    first trusts first order; N = 16 leaves the second undecided: "mixed"), and the steps
    reusing a trusted decision are FoBG at σ and N — the same numbers as calling it with
    that step's key at that step's θ, N gradient evaluations each."""
    obj, key = lq(), jax.random.PRNGKey(5)
    r = diffsim.optimize(obj, THETA, Auto(sigma=SIGMA, num_samples=16, decide_every=4),
                         steps=8, key=key, optimizer=optax.sgd(1e-3), sigma_anneal=None)  # fmt: skip
    h = r.history.estimate
    decided = np.isfinite(np.asarray(h.z_gap))
    np.testing.assert_array_equal(decided, np.arange(8) % 4 == 0)
    choice = np.asarray(h.choice)
    np.testing.assert_array_equal(choice[:4], 0)
    assert np.all(choice[5:] == choice[4])  # the decision of step 4, reused
    keys = jax.random.split(key, 8)
    for k in np.flatnonzero(~decided & (choice == 0)):
        want = FirstOrder(sigma=SIGMA, num_samples=16)(obj, r.history.theta[k], keys[k])
        np.testing.assert_allclose(h.estimate[k], want.estimate, rtol=1e-12)
        assert int(h.grad_evaluations[k]) == 16 and int(h.loss_evaluations[k]) == 0
    assert int(r.evaluations) == int(np.sum(h.grad_evaluations) + np.sum(h.loss_evaluations))


def test_auto_reusing_a_mixed_decision_mixes_as_auto_does():
    """The noisy walk to a threshold (first order blind to it): a reused "mixed" decision
    runs both families and auto's own mix — α near 0, within 4 standard errors of the
    closed-form smoothed gradient, at 3N/2 losses and N gradients (no ladder)."""
    obj, theta = walk()
    truth = walk_gradient(0.45, 0.5)
    auto = Auto(sigma=0.5, num_samples=512, decide_every=3)
    est, plan = jax.jit(lambda: decide_or_reuse(auto, obj, theta, KEY, (
        jnp.asarray(1, jnp.int32), jnp.asarray(0, jnp.int32), jnp.asarray(2, jnp.int32))))()  # fmt: skip
    assert est.choice_name == "mixed" and np.isnan(float(est.z_gap))
    assert float(est.alpha) < 0.1
    assert abs(float(est.estimate[0]) - truth) < 4 * float(est.std_error[0])
    assert int(est.loss_evaluations) == 3 * 256 and int(est.grad_evaluations) == 512
    assert [int(v) for v in plan] == [1, 0, 1]  # the same choice, one reused step left
