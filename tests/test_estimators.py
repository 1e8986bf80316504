"""Gradient estimators against closed forms (x64 on; fixed keys; tolerances from SEs)."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffsim.estimators import (
    ESTIMATORS,
    AlphaOrder,
    Exact,
    FiniteDifference,
    FirstOrder,
    ZerothOrder,
    bernstein_radius,
    choose_alpha,
    make_estimator,
    rollout_input_loss,
)
from diffsim.systems import projectile_wall as pw

SIGMA = 0.5


def phi(x):
    return np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)


def heaviside(t):
    return jnp.where(t >= 0, 1.0, 0.0)


# --------------------------------------------------------------------------------------
# Closed forms of the smoothed wall loss F(v) = E L(v + σw), computed by quadrature here,
# independently of the estimators.
# --------------------------------------------------------------------------------------
_GL_X, _GL_W = np.polynomial.legendre.leggauss(400)


def _integrate(fn, a, b):
    """Gauss–Legendre on [a, b] (fn vectorised, smooth on the interval)."""
    if b <= a:
        return 0.0
    x = 0.5 * (b - a) * _GL_X + 0.5 * (b + a)
    return 0.5 * (b - a) * float(np.sum(_GL_W * fn(x)))


_dL = jax.jit(jax.vmap(jax.grad(pw.loss_closed_form)))
_L = jax.jit(jax.vmap(pw.loss_closed_form))


def _pieces(v, sigma):
    v_short, v_clear = pw.plateau_bounds()
    lo, hi = v - 12 * sigma, v + 12 * sigma
    cuts = sorted({lo, hi, *[c for c in (v_short, v_clear) if lo < c < hi]})
    return list(itertools.pairwise(cuts))


def wall_jump():
    """ΔL at the cliff: L(v_clear⁺) − L(v_clear⁻) = (v_clear²/g − 10)² − 16 ≈ −15."""
    _, v_clear = pw.plateau_bounds()
    return (v_clear**2 / pw.G - pw.TARGET) ** 2 - (pw.WALL_X - pw.TARGET) ** 2


def wall_smoothed_grad(v, sigma):
    """(smooth part, jump part) of F'(v): ∫ L'(u) φ_σ(u − v) du + ΔL φ_σ(v_clear − v)."""
    _, v_clear = pw.plateau_bounds()
    dens = lambda u: phi((u - v) / sigma) / sigma  # noqa: E731
    smooth = sum(
        _integrate(lambda u: np.asarray(_dL(jnp.asarray(u))) * dens(u), a, b)
        for a, b in _pieces(v, sigma)
    )
    return smooth, wall_jump() * phi((v_clear - v) / sigma) / sigma


def wall_smoothed_loss(v, sigma):
    dens = lambda u: phi((u - v) / sigma) / sigma  # noqa: E731
    return sum(
        _integrate(lambda u: np.asarray(_L(jnp.asarray(u))) * dens(u), a, b)
        for a, b in _pieces(v, sigma)
    )


def test_wall_closed_form_gradient_is_derivative_of_smoothed_loss():
    # the jump-term derivation checked against d/dv of the quadrature of F itself
    assert wall_jump() == pytest.approx(-15.0, abs=0.2)
    for v in (8.0, 9.0, 9.6, 10.5):
        smooth, jump = wall_smoothed_grad(v, SIGMA)
        h = 1e-4
        fd = (wall_smoothed_loss(v + h, SIGMA) - wall_smoothed_loss(v - h, SIGMA)) / (2 * h)
        assert smooth + jump == pytest.approx(fd, rel=1e-6, abs=1e-6)


# --------------------------------------------------------------------------------------
# Heaviside: F(θ) = Φ(θ/σ), ∇F = φ_σ(θ); FoBG is identically 0.
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("theta", [-0.4, 0.0, 0.3])
def test_heaviside_zeroth_and_alpha_unbiased_first_blind(theta):
    key = jax.random.PRNGKey(1)
    truth = phi(theta / SIGMA) / SIGMA
    zo = ZerothOrder(sigma=SIGMA, num_samples=4000)(heaviside, jnp.asarray(theta), key)
    assert abs(float(zo.estimate) - truth) < 4 * float(zo.std_error)
    ao = AlphaOrder(sigma=SIGMA, num_samples=4000, gamma=0.1)(heaviside, jnp.asarray(theta), key)
    # est = ḡ⁰ + α(ḡ¹ − ḡ⁰): the ZoBG error plus at most the bias budget αB
    budget = 4 * float(ao.std_error) + float(ao.alpha * ao.bias_gap)
    assert abs(float(ao.estimate) - truth) < budget
    fo = FirstOrder(sigma=SIGMA, num_samples=4000)(heaviside, jnp.asarray(theta), key)
    # FoBG: exactly zero with zero variance — its bias is the whole gradient φ_σ(θ)
    assert float(fo.estimate) == 0.0 and float(fo.variance) == 0.0
    assert truth - float(fo.estimate) > 0.5


def test_heaviside_zeroth_variance_closed_form_and_inverse_sigma_squared():
    # at θ = 0: g = −1{z<0} z/σ, Var = (1/2 − 1/(2π))/σ²
    key = jax.random.PRNGKey(2)
    n = 20000
    for sigma in (0.1, 0.3, 1.0):
        r = ZerothOrder(sigma=sigma, num_samples=n)(heaviside, jnp.asarray(0.0), key)
        exact = (0.5 - 1 / (2 * math.pi)) / sigma**2
        # sample variance of n iid draws: relative SE ≈ sqrt((kurtosis − 1)/n) < 0.05 here
        assert float(r.variance) == pytest.approx(exact, rel=0.05)


# --------------------------------------------------------------------------------------
# The wall: ZoBG / AoBG match F'(v) with the jump term; FoBG misses the jump term.
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", [8.0, 9.0, 9.6, 10.5])
def test_wall_estimators_against_closed_form(v):
    key = jax.random.PRNGKey(3)
    smooth, jump = wall_smoothed_grad(v, SIGMA)
    truth = smooth + jump
    n = 4000
    zo = ZerothOrder(sigma=SIGMA, num_samples=n)(pw.loss_closed_form, jnp.asarray(v), key)
    assert abs(float(zo.estimate) - truth) < 4 * float(zo.std_error)
    za = ZerothOrder(sigma=SIGMA, num_samples=n, antithetic=True)(
        pw.loss_closed_form, jnp.asarray(v), key
    )
    assert abs(float(za.estimate) - truth) < 4 * float(za.std_error)
    alpha_est = AlphaOrder(sigma=SIGMA, num_samples=n)
    ao = alpha_est(pw.loss_closed_form, jnp.asarray(v), key)
    budget = 4 * float(ao.std_error) + float(ao.alpha * ao.bias_gap)
    assert abs(float(ao.estimate) - truth) < budget
    # the constraint ε + αB ≤ γ holds whenever α > 0
    if float(ao.alpha) > 0:
        assert float(ao.epsilon + ao.alpha * ao.bias_gap) <= float(alpha_est.gamma) + 1e-9
    fo = FirstOrder(sigma=SIGMA, num_samples=n)(pw.loss_closed_form, jnp.asarray(v), key)
    # FoBG estimates the smooth part only: its bias is exactly the jump term
    assert abs(float(fo.estimate) - smooth) < 4 * float(fo.std_error)
    bias = float(fo.estimate) - truth
    assert abs(bias - (-jump)) < 4 * float(fo.std_error)


def test_wall_first_order_bias_size():
    # measured bias of FoBG across the plateau and basin (σ = 0.5): the jump term
    # ΔL φ_σ(v_clear − v), largest (≈ |ΔL|/(σ√(2π)) ≈ 12) right at the cliff.
    _, v_clear = pw.plateau_bounds()
    key = jax.random.PRNGKey(4)
    fo = FirstOrder(sigma=SIGMA, num_samples=4000)
    biases = []
    for v in (8.5, v_clear, 10.5):
        smooth, jump = wall_smoothed_grad(v, SIGMA)
        r = fo(pw.loss_closed_form, jnp.asarray(v), key)
        biases.append(float(r.estimate) - (smooth + jump))
    assert biases[1] == pytest.approx(-wall_jump() / (SIGMA * math.sqrt(2 * math.pi)), rel=0.05)
    # it decays like the Gaussian density with the distance to the cliff (0.9 vs 1.1 here)
    assert abs(biases[1]) > abs(biases[0]) > abs(biases[2]) > 0.5


# --------------------------------------------------------------------------------------
# Smooth losses: all estimators agree with the (smoothed) exact gradient.
# --------------------------------------------------------------------------------------
def _quad(t):
    A = jnp.array([[3.0, 1.0], [1.0, 2.0]])
    return t["x"] @ A @ t["x"] + 0.5 * t["y"] ** 2 - t["y"]


def _sin(t):
    return jnp.sum(jnp.sin(t["x"])) + jnp.sin(t["y"])


THETA = {"x": jnp.array([0.3, -0.7]), "y": jnp.asarray(1.2)}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("loss", [_quad, _sin], ids=["quadratic", "sin"])
def test_smooth_losses_all_estimators_agree(name, loss):
    key = jax.random.PRNGKey(5)
    sigma = 0.2
    exact = jax.grad(loss)(THETA)
    if loss is _sin:  # ∇F = cos θ e^{−σ²/2} for the smoothed estimators
        smoothed = jax.tree_util.tree_map(lambda g: g * math.exp(-(sigma**2) / 2), exact)
    else:  # a quadratic's Gaussian smoothing only shifts it by a constant
        smoothed = exact
    cls = ESTIMATORS[name]
    given = {"sigma": sigma, "num_samples": 4000, "step": 1e-5}
    opts = {k: v for k, v in given.items() if cls.takes(k)}
    r = make_estimator(name, **opts)(loss, THETA, key)
    if not cls.randomized:
        for a, b in zip(jax.tree_util.tree_leaves(r.estimate), jax.tree_util.tree_leaves(exact)):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8)
        return
    # auto returns ∇L itself where it trusts it (choice 0), else an estimate of ∇F
    target = smoothed if cls.smoothing and int(r.stats.get("choice", -1)) != 0 else exact
    for est, se, truth in zip(
        jax.tree_util.tree_leaves(r.estimate),
        jax.tree_util.tree_leaves(r.std_error),
        jax.tree_util.tree_leaves(target),
    ):
        assert np.all(np.abs(np.asarray(est) - np.asarray(truth)) < 4 * np.asarray(se) + 1e-12)


# --------------------------------------------------------------------------------------
# Variance laws
# --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_zeroth_variance_scales_as_inverse_sigma_squared_on_smooth_loss():
    # smooth but oscillating: once σ exceeds its length scale 1/ω the increments
    # L(θ + σz) − L(θ) stop shrinking with σ and Var ∝ 1/σ²
    omega = 20.0
    loss = lambda t: jnp.sin(omega * t)  # noqa: E731
    sigmas = np.array([0.5, 1.0, 2.0, 4.0])
    key = jax.random.PRNGKey(6)
    variances = [
        float(ZerothOrder(sigma=s, num_samples=20000)(loss, jnp.asarray(0.1), key).variance)
        for s in sigmas
    ]
    slope = np.polyfit(np.log(sigmas), np.log(variances), 1)[0]
    assert slope == pytest.approx(-2.0, abs=0.1)


@pytest.mark.slow
def test_zeroth_variance_grows_with_dimension():
    # L(θ) = θ₁: g = (z·e₁) z, tr Cov = E‖z₁ z‖² − 1 = d + 1
    key = jax.random.PRNGKey(7)
    n = 20000
    previous = 0.0
    for d in (1, 4, 16, 64):
        r = ZerothOrder(sigma=0.3, num_samples=n)(lambda t: t[0], jnp.zeros(d), key)
        var = float(r.variance)
        assert var == pytest.approx(d + 1, rel=0.08)
        assert var > previous
        previous = var


def stiff_contact_loss(k):
    """A ball pressed into a penalty spring of stiffness k (softplus contact): the loss
    is the normalised contact impulse σ(k θ), a continuous ramp of width ~1/k."""
    return lambda t: jax.nn.sigmoid(k * t)


@pytest.mark.slow
def test_first_order_variance_grows_with_stiffness_zeroth_does_not():
    # FoBG samples k σ'(k(θ + σz)): Var ≈ k φ_σ(θ) ∫σ'(s)² ds = k φ_σ(θ)/6 for large k,
    # while the ZoBG samples stay bounded by |z|/σ.
    key = jax.random.PRNGKey(8)
    theta, sigma, n = 0.2, 0.5, 20000
    ks = np.array([10.0, 100.0, 1000.0, 10000.0])
    v1, v0 = [], []
    for k in ks:
        loss = stiff_contact_loss(k)
        v1.append(
            float(FirstOrder(sigma=sigma, num_samples=n)(loss, jnp.asarray(theta), key).variance)
        )
        v0.append(
            float(ZerothOrder(sigma=sigma, num_samples=n)(loss, jnp.asarray(theta), key).variance)
        )
    slope = np.polyfit(np.log(ks[1:]), np.log(v1[1:]), 1)[0]
    assert slope == pytest.approx(1.0, abs=0.1)
    assert v1[-1] == pytest.approx(ks[-1] * phi(theta / sigma) / sigma / 6, rel=0.15)
    assert max(v0) / min(v0) < 1.5
    assert v1[-1] > 100 * v0[-1]


# --------------------------------------------------------------------------------------
# Alpha: the closed-form choice of α
# --------------------------------------------------------------------------------------
def test_choose_alpha_cases():
    f = lambda *a: float(choose_alpha(*map(jnp.asarray, a)))  # noqa: E731
    # unconstrained: α∞ = σ0²/(σ0² + σ1²)
    assert f(3.0, 1.0, 0.1, 0.0, 1.0) == pytest.approx(0.75)
    # ε > γ: pure ZoBG
    assert f(3.0, 1.0, 2.0, 0.0, 1.0) == 0.0
    # α∞ B > γ − ε: capped at (γ − ε)/B
    assert f(3.0, 1.0, 0.2, 4.0, 1.0) == pytest.approx(0.2)
    # both variances zero: FoBG
    assert f(0.0, 0.0, 0.0, 0.0, 1.0) == 1.0
    eps = float(bernstein_radius(jnp.asarray(4.0), 100, 1, jnp.asarray(0.05), jnp.asarray(1.0)))
    log_term = math.log(2 / 0.05)
    assert eps == pytest.approx(math.sqrt(8 * log_term / 100) + 2 / 300 * log_term)


# --------------------------------------------------------------------------------------
# Per-step noise on a rollout's inputs
# --------------------------------------------------------------------------------------
def test_noise_on_rollout_inputs():
    h, T = 0.1, 10

    def step(s, theta, u):  # semi-implicit Euler, force u_t on mass theta
        x, v = s
        v = v + h * u / theta
        return (x + h * v, v)

    def cost(traj, u):
        x, v = traj
        return (x[-1] - 1.0) ** 2 + v[-1] ** 2 + 0.01 * jnp.sum(u**2)

    loss = rollout_input_loss(step, (0.0, 0.0), 2.0, T, cost)
    u = jnp.linspace(1.0, -1.0, T)
    exact = Exact()(loss, u, jax.random.PRNGKey(0)).estimate
    assert exact.shape == (T,)
    # quadratic in u, so the smoothed gradient is the exact one
    for est in (ZerothOrder(sigma=0.1, num_samples=4000), FirstOrder(sigma=0.1, num_samples=64)):
        r = est(loss, u, jax.random.PRNGKey(9))
        assert r.estimate.shape == (T,)
        assert np.all(np.abs(r.estimate - exact) < 4 * r.std_error + 1e-10)
    # every step's input is perturbed independently: FoBG's per-sample spread is nonzero
    # in each coordinate
    r = FirstOrder(sigma=0.1, num_samples=64)(loss, u, jax.random.PRNGKey(9))
    assert np.all(np.asarray(r.std_error) > 0)


# --------------------------------------------------------------------------------------
# Determinism, jit, counts, bad input
# --------------------------------------------------------------------------------------
def test_deterministic_given_key_and_jittable():
    est = AlphaOrder(sigma=0.3, num_samples=16)
    a = est(pw.loss_closed_form, jnp.asarray(9.0), jax.random.PRNGKey(0))
    b = est(pw.loss_closed_form, jnp.asarray(9.0), jax.random.PRNGKey(0))
    c = est(pw.loss_closed_form, jnp.asarray(9.0), jax.random.PRNGKey(1))
    assert float(a.estimate) == float(b.estimate) and float(a.alpha) == float(b.alpha)
    assert float(a.estimate) != float(c.estimate)
    jitted = jax.jit(lambda v, k: est(pw.loss_closed_form, v, k).estimate)
    assert float(jitted(jnp.asarray(9.0), jax.random.PRNGKey(0))) == pytest.approx(
        float(a.estimate), rel=1e-12
    )
    # vmap over θ
    vs = jnp.array([8.0, 9.0, 10.0])
    out = jax.vmap(lambda v: est(pw.loss_closed_form, v, jax.random.PRNGKey(0)).estimate)(vs)
    assert out.shape == (3,)


def test_evaluation_counts():
    key = jax.random.PRNGKey(0)
    theta = jnp.zeros(3)
    loss = lambda t: jnp.sum(t**2)  # noqa: E731
    counts = {
        "exact": (Exact(), 0, 1),
        "fd": (FiniteDifference(), 6, 0),
        "zeroth": (ZerothOrder(num_samples=10), 11, 0),
        "zeroth_anti": (ZerothOrder(num_samples=10, antithetic=True), 10, 0),
        "first": (FirstOrder(num_samples=10), 0, 10),
        "alpha": (AlphaOrder(num_samples=10), 11, 10),
    }
    for est, nl, ng in counts.values():
        r = est(loss, theta, key)
        assert (int(r.loss_evaluations), int(r.grad_evaluations)) == (nl, ng)
        assert int(r.evaluations) == nl + ng


@pytest.mark.parametrize(
    "name, opts, match",
    [
        ("zeroth", {"sigma": 0.0}, "sigma"),
        ("zeroth", {"sigma": -1.0}, "sigma"),
        ("first", {"sigma": float("nan")}, "sigma"),
        ("alpha", {"sigma": float("inf")}, "sigma"),
        ("zeroth", {"num_samples": 1}, "num_samples"),
        ("first", {"num_samples": 0}, "num_samples"),
        ("alpha", {"num_samples": 1}, "num_samples"),
        ("zeroth", {"num_samples": 5, "antithetic": True}, "even"),
        ("alpha", {"gamma": 0.0}, "gamma"),
        ("alpha", {"delta": 1.5}, "delta"),
        ("alpha", {"R": -1.0}, "R"),
        ("fd", {"step": 0.0}, "step"),
        ("nope", {}, "alpha, auto, exact, fd, first, zeroth"),
    ],
)
def test_bad_options(name, opts, match):
    with pytest.raises(ValueError, match=match):
        make_estimator(name, **opts)


def test_num_samples_must_be_int():
    with pytest.raises(TypeError, match="num_samples"):
        ZerothOrder(num_samples=2.5)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_non_finite_theta(name):
    with pytest.raises(ValueError, match="theta"):
        make_estimator(name)(lambda t: jnp.sum(t), jnp.array([1.0, jnp.nan]), jax.random.PRNGKey(0))


def test_non_scalar_loss():
    with pytest.raises(TypeError, match="scalar"):
        Exact()(lambda t: t, jnp.ones(2), jax.random.PRNGKey(0))


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_stats_hold_what_the_estimator_computed_and_nothing_else(name):
    """Issue 48 item 5: an estimate's stats are exactly its estimator's declared ``reports``
    (no NaN / −1 fillers); a stat it did not compute is an AttributeError naming the ones
    it has; the core's counts add up to ``evaluations``."""
    from diffsim.estimators import STATS

    loss = lambda t: jnp.sum(jnp.sin(t))  # noqa: E731
    opts = {"num_samples": 8} if make_estimator(name).takes("num_samples") else {}
    r = make_estimator(name, **opts)(loss, jnp.array([0.3, -0.2]), jax.random.PRNGKey(0))
    cls = ESTIMATORS[name]
    assert r.reports == cls.reports and set(r.stats) == set(cls.reports)
    assert int(r.evaluations) == int(r.loss_evaluations) + int(r.grad_evaluations) > 0
    for stat in cls.reports:
        assert getattr(r, stat) is r.stats[stat] and np.all(np.isfinite(np.asarray(r.stats[stat])))
    missing = [s for s in STATS if s not in cls.reports]
    for stat in missing:
        with pytest.raises(AttributeError, match=rf"no '{stat}': its estimator computed"):
            getattr(r, stat)
    with pytest.raises(AttributeError, match="no attribute 'num_evals'"):
        r.num_evals  # noqa: B018 - renamed: evaluations
