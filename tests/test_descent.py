"""Line-search and Optimistix methods through :func:`diffsim.optimize` (issue 45, part 1).

Checked against hand-written Optax/Optimistix loops (the same iterates to 1e-10) and
against a loss that counts its own evaluations (a host callback per value or
value-and-gradient: the counts :func:`optimize` reports must equal what ran).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

try:
    import optimistix as optx
except ImportError:  # Python 3.10 (scripts/test-minimum): Optimistix needs >= 3.11
    optx = None

import diffsim
from diffsim.estimators import Exact, FirstOrder, ZerothOrder
from diffsim.optimization import status_name

KEY = jax.random.PRNGKey(0)
W = jnp.array([1.0, 10.0, 100.0])


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def quartic(x):
    return jnp.sum(W * (x - jnp.arange(3.0)) ** 2) + jnp.sum(x**4)


class Counter:
    """A loss that counts how often it runs (under jit, through a host callback)."""

    def __init__(self, f):
        self.f, self.n = f, 0

    def _tick(self):
        self.n += 1

    def __call__(self, x):
        jax.debug.callback(self._tick)
        return self.f(x)


def _hand_lbfgs(loss, x, steps, opt):
    state = opt.init(x)
    vg = optax.value_and_grad_from_state(loss)

    @jax.jit
    def step(x, state):
        v, g = vg(x, state=state)
        u, state = opt.update(g, state, x, value=v, grad=g, value_fn=loss)
        return optax.apply_updates(x, u), state

    xs = []
    for _ in range(steps):
        xs.append(np.asarray(x))
        x, state = step(x, state)
    return np.array(xs)


@pytest.mark.parametrize(
    "make", [optax.lbfgs, lambda: optax.lbfgs(memory_size=3), lambda: optax.chain(
        optax.sgd(1e-3), optax.scale_by_zoom_linesearch(max_linesearch_steps=20))],
    ids=["lbfgs", "lbfgs-m3", "sgd-zoom"],
)  # fmt: skip
def test_line_search_iterates_match_hand_written_optax_loop(make):
    x0 = jnp.array([-1.2, 1.0, 0.5])
    r = diffsim.optimize(rosen, x0, Exact(), optimizer=make(), steps=40, key=KEY)
    n = int(r.steps_run)
    assert 1 <= n <= 40
    hand = _hand_lbfgs(rosen, x0, n, make())
    np.testing.assert_allclose(np.asarray(r.history.theta[:n]), hand, rtol=0, atol=1e-10)
    # after the run stops, θ is held and nothing more is spent
    np.testing.assert_array_equal(np.asarray(r.history.theta[n:]), np.asarray(r.theta)[None]
                                  .repeat(40 - n, 0))  # fmt: skip
    assert int(r.history.evaluations[-1]) == int(r.evaluations)


def test_lbfgs_reaches_the_minimiser_and_stops():
    r = diffsim.optimize(quartic, jnp.zeros(3), optimizer=optax.lbfgs(), steps=60, key=KEY)
    g = jax.grad(quartic)(r.theta)
    assert float(jnp.max(jnp.abs(g))) < 1e-6
    assert int(r.steps_run) < 60  # converged: the remaining steps spent nothing
    assert int(r.evaluations) == int(r.grad_evaluations) and int(r.loss_evaluations) == 0


@pytest.mark.parametrize("how", ["lbfgs", "default"])
def test_a_float32_loss_with_x64_on_descends(how):
    """With x64 on (as here), a float32 θ whose loss is float64: L-BFGS's state keeps the
    value in the loss's dtype, so its line search's branches agree (they raised a dtype
    error); the default method and L-BFGS reach the minimiser (1, 2, 3), θ in float32."""
    target = jnp.array([1.0, 2.0, 3.0], jnp.float32)

    def loss(t):  # a float64 loss of a float32 θ (a model with float64 constants)
        return jnp.sum(W * (t - target) ** 2)

    theta0 = jnp.zeros(3, jnp.float32)
    assert jax.config.jax_enable_x64 and loss(theta0).dtype == jnp.float64
    if how == "lbfgs":
        r = diffsim.optimize(loss, theta0, Exact(), optimizer=optax.lbfgs(), steps=40, key=KEY)
    else:
        r = diffsim.optimize(loss, theta0, key=KEY, steps=40)
    assert r.theta.dtype == jnp.float32
    np.testing.assert_allclose(r.theta, target, rtol=1e-5, atol=1e-5)
    assert float(r.loss) < 1e-8


@pytest.mark.parametrize(
    "make",
    [
        optax.lbfgs,
        lambda: optax.chain(optax.sgd(1.0),
                            optax.scale_by_backtracking_linesearch(15, store_grad=True)),
        lambda: optax.chain(optax.sgd(1.0), optax.scale_by_backtracking_linesearch(15)),
    ],
    ids=["zoom", "backtracking-store-grad", "backtracking"],
)  # fmt: skip
def test_evaluations_counted_against_a_counting_loss(make):
    loss = Counter(quartic)
    steps = 15
    r = diffsim.optimize(loss, jnp.zeros(3), Exact(), optimizer=make(), steps=steps, key=KEY)
    # the history reads the line search's own value at each θ_k, and evaluates the loss once
    # more (monitoring, documented as not counted): where θ stopped moving or at the end
    assert loss.n == int(r.evaluations) + 1
    assert int(r.evaluations) == int(r.loss_evaluations) + int(r.grad_evaluations)
    assert int(r.evaluations) > int(r.steps_run)  # the first step evaluates twice at least


NEEDS_OPTX = pytest.mark.skipif(optx is None, reason="Optimistix needs Python >= 3.11")


@NEEDS_OPTX
def test_optimistix_minimiser_matches_optx_minimise_and_counts():
    solver = optx.BFGS(rtol=1e-10, atol=1e-10)
    loss = Counter(quartic)
    steps = 80
    r = diffsim.optimize(loss, jnp.zeros(3), optimizer=solver, steps=steps, key=KEY)
    ref = optx.minimise(lambda y, _: quartic(y), solver, jnp.zeros(3), max_steps=steps)
    np.testing.assert_allclose(np.asarray(r.theta), np.asarray(ref.value), rtol=0, atol=1e-10)
    assert int(r.steps_run) == int(ref.stats["num_steps"])
    assert int(r.evaluations) == int(ref.stats["num_steps"])  # one value and gradient a step
    # the history reads the minimiser's own value and gradient at each θ_k (its state's
    # f_info: nothing evaluated again), and the loss once where θ stopped moving (monitoring)
    assert int(r.steps_run) < steps
    assert loss.n == int(r.evaluations) + 1
    g = np.asarray(r.history.estimate.estimate[: int(r.steps_run)])  # its ∇L(θ_k)
    want = np.asarray(jax.vmap(jax.grad(quartic))(r.history.theta[: int(r.steps_run)]))
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("est", [FirstOrder(), ZerothOrder()], ids=["fobg", "zobg"])
@pytest.mark.parametrize("opt", ["lbfgs", "optx-bfgs"])
def test_line_search_with_a_stochastic_estimator_is_refused(est, opt):
    if opt == "optx-bfgs" and optx is None:
        pytest.skip("Optimistix needs Python >= 3.11")
    opt = optax.lbfgs() if opt == "lbfgs" else optx.BFGS(rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=r"optimizer: .*needs the loss's value.*value_fn"):
        diffsim.optimize(quartic, jnp.zeros(3), est, optimizer=opt, steps=5, key=KEY)


def test_non_finite_loss_in_a_line_search_rejects_the_step():
    # log(1 - x) is NaN beyond x = 1; from x = 0.9 L-BFGS's first trial (unit step) is x = 1.9
    def loss(x):
        return -jnp.sum(x) - jnp.sum(jnp.log(1.0 - x))

    r = diffsim.optimize(loss, jnp.array([0.9]), optimizer=optax.lbfgs(), steps=20, key=KEY)
    assert np.isfinite(float(r.loss)) and np.all(np.isfinite(np.asarray(r.theta)))
    if int(r.rejected_at) >= 0:  # a rejected step holds θ and stops the run
        k = int(r.rejected_at)
        assert int(r.steps_run) == k + 1 and status_name(r.status) == "non_finite"
        np.testing.assert_array_equal(np.asarray(r.theta), np.asarray(r.history.theta[k]))
    # whether rejected or not, L never rose along the run
    hist = np.asarray(r.history.loss)
    assert np.all(np.diff(hist) <= 1e-12)


def test_budget_stops_a_line_search_within_one_step():
    r = diffsim.optimize(rosen, jnp.array([-1.2, 1.0]), optimizer=optax.lbfgs(), steps=50,
                         key=KEY, budget=7)  # fmt: skip
    full = diffsim.optimize(rosen, jnp.array([-1.2, 1.0]), optimizer=optax.lbfgs(),
                            steps=50, key=KEY)  # fmt: skip
    assert 7 <= int(r.evaluations) < 7 + 25  # at most one step's line search beyond
    assert status_name(r.status) == "budget"
    # the full run stops early only where L-BFGS converged (or could lower L no further)
    ended = "converged" if int(full.steps_run) < 50 else "completed"
    assert status_name(full.status) == ended
    n = int(r.steps_run)
    np.testing.assert_allclose(np.asarray(r.history.theta[:n]),
                               np.asarray(full.history.theta[:n]), atol=1e-12)  # fmt: skip
