"""optimize(): convergence with every estimator; the wall from the plateau."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffsim import optimize
from diffsim.estimators import ESTIMATORS, Exact, ZerothOrder, make_estimator
from diffsim.optimization import cosine_anneal, status_name
from diffsim.systems import projectile_wall as pw
from diffsim.systems import wall_study


def _quad(t):
    return jnp.sum((t["a"] - jnp.array([1.0, -2.0])) ** 2) + 3 * (t["b"] - 0.5) ** 2


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_all_estimators_converge_on_quadratic(name):
    given = {"sigma": 0.1, "num_samples": 16}
    est = make_estimator(name, **{k: v for k, v in given.items() if ESTIMATORS[name].takes(k)})
    theta0 = {"a": jnp.zeros(2), "b": jnp.asarray(3.0)}
    steps = 300
    r = optimize(
        _quad,
        theta0,
        est,
        steps=steps,
        key=jax.random.PRNGKey(0),
        optimizer=optax.adam(optax.cosine_decay_schedule(0.1, steps, 0.01)),
    )
    np.testing.assert_allclose(r.theta["a"], [1.0, -2.0], atol=5e-2)
    np.testing.assert_allclose(r.theta["b"], 0.5, atol=5e-2)
    assert float(r.loss) < 1e-2
    # history: θ_k stacked, losses fall, evaluations cumulative and match the estimator
    assert r.history.theta["a"].shape == (steps, 2)
    assert r.history.loss.shape == (steps,)
    assert float(r.history.loss[0]) == pytest.approx(float(_quad(theta0)))
    # cumulative, step by step (auto's cost varies with what it decides at each step)
    per_step = np.asarray(r.history.estimate.evaluations)
    np.testing.assert_array_equal(np.asarray(r.history.evaluations), np.cumsum(per_step))
    assert int(r.evaluations) == int(per_step.sum())
    if name != "auto":
        assert np.all(per_step == per_step[0])


def test_deterministic_and_vmappable():
    est = ZerothOrder(sigma=0.3, num_samples=4)

    def run(v, key):
        return optimize(pw.loss_closed_form, v, est, steps=20, key=key).theta

    a = run(jnp.asarray(8.0), jax.random.PRNGKey(3))
    b = run(jnp.asarray(8.0), jax.random.PRNGKey(3))
    assert float(a) == float(b)
    vs = jnp.array([8.0, 9.0])
    out = jax.vmap(run, in_axes=(0, None))(vs, jax.random.PRNGKey(3))
    assert out.shape == (2,) and float(out[0]) == pytest.approx(float(a), rel=1e-12)


def test_a_new_anneal_start_reuses_the_compiled_run(caplog):
    """``cosine_anneal``'s start and end are data of the schedule, not constants of the
    compiled code: a second run from another σ₀ compiles nothing, and its σ history is the
    closed form e + (s − e)(1 + cos(π k / (f K)))/2."""
    est, steps = ZerothOrder(sigma=0.5, num_samples=4), 10

    def run(start):
        return optimize(
            pw.loss_closed_form, jnp.asarray(9.0), est, steps=steps,
            key=jax.random.PRNGKey(0), sigma_schedule=cosine_anneal(start, 0.1, steps, 0.5),
        )  # fmt: skip

    run(1.0)
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        r = run(0.7)
    assert [m for m in (r.getMessage() for r in caplog.records) if "ompil" in m] == []
    k = np.arange(steps)
    expected = 0.1 + 0.5 * (0.7 - 0.1) * (1 + np.cos(np.pi * np.minimum(k / 5.0, 1.0)))
    np.testing.assert_allclose(np.asarray(r.history.sigma), expected, rtol=1e-12)


def test_sigma_schedule_is_applied_and_ignored_without_sigma():
    sched = cosine_anneal(1.0, 0.1, 10)
    r = optimize(
        pw.loss_closed_form,
        jnp.asarray(9.0),
        ZerothOrder(sigma=0.5, num_samples=4),
        steps=10,
        key=jax.random.PRNGKey(0),
        sigma_schedule=sched,
    )
    np.testing.assert_allclose(r.history.sigma, [float(sched(k)) for k in range(10)])
    assert float(r.history.sigma[0]) == 1.0
    r = optimize(
        pw.loss_closed_form,
        jnp.asarray(9.0),
        Exact(),
        steps=3,
        key=jax.random.PRNGKey(0),
        sigma_schedule=sched,
    )
    assert np.all(np.isnan(np.asarray(r.history.sigma)))


def test_temperature_schedule_anneals_smoothed_model():
    # the time-stepped wall with a sigmoid wall of temperature τ: exact gradients of the
    # smoothed model cross the plateau while τ is large
    steps = 200
    r = optimize(
        lambda v, tau: pw.loss(v, smoothing=tau),
        jnp.asarray(8.5),
        Exact(),
        steps=steps,
        key=jax.random.PRNGKey(0),
        optimizer=optax.adam(optax.cosine_decay_schedule(0.2, steps, 0.05)),
        temperature_schedule=cosine_anneal(0.5, 1e-3, steps, 0.6),
    )
    assert float(r.theta) > 9.4  # over the cliff
    assert float(r.history.temperature[-1]) == pytest.approx(1e-3)


@pytest.mark.parametrize("name", ["alpha", "zeroth"])
def test_wall_from_plateau_reaches_target(name):
    est = make_estimator(name, sigma=wall_study.RECIPE.sigma, num_samples=wall_study.RECIPE.samples)
    r = wall_study.optimize_wall(8.0, est, key=jax.random.PRNGKey(0))
    x = float(pw.landing_x(r.theta))
    assert abs(x - 10.0) < 0.05


def test_wall_exact_stuck_on_plateau():
    r = wall_study.optimize_wall(8.0, Exact(), key=jax.random.PRNGKey(0))
    assert float(r.theta) == 8.0
    assert np.all(np.asarray(r.history.estimate.estimate) == 0.0)


def test_bad_input():
    with pytest.raises(ValueError, match="steps"):
        optimize(pw.loss_closed_form, 8.0, Exact(), steps=0, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="theta0"):
        optimize(pw.loss_closed_form, jnp.nan, Exact(), steps=1, key=jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match="Estimator"):
        optimize(pw.loss_closed_form, 8.0, "alpha", steps=1, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="fraction"):
        cosine_anneal(1.0, 0.1, 10, 0.0)


def test_nan_losses_on_the_way_warn_naming_the_steps():
    """A loss that is NaN on (1.2, 1.8) while its gradient stays finite (the NaN is a
    constant branch): SGD with step 0.1 on (θ − 3)² from 0 visits 0, 0.6, 1.08, 1.464,
    1.7712, … and ends near 3. The result is returned (finite) with a warning naming the
    two steps whose loss was NaN, and the history keeps them."""

    def loss(t):
        return (t - 3.0) ** 2 + jnp.where(jnp.abs(t - 1.5) < 0.3, jnp.nan, 0.0)

    with pytest.warns(RuntimeWarning, match=r"NaN or inf at 2 of 40 steps \(steps 3, 4\)"):
        r = optimize(loss, jnp.asarray(0.0), Exact(), optimizer=optax.sgd(0.1), steps=40,
                     key=jax.random.PRNGKey(0))  # fmt: skip
    assert float(r.theta) == pytest.approx(3.0 - 3.0 * 0.8**40, rel=1e-12)
    assert np.flatnonzero(~np.isfinite(np.asarray(r.history.loss))).tolist() == [3, 4]


def test_wall_descent_with_another_learning_rate_compiles_nothing(caplog):
    # the wall's optimizer is a pytree whose learning rate is a leaf (no cache of optimizer
    # objects): a second run with another lr reuses the compiled descent, and each run is
    # optax.adam on optax's cosine schedule, run through diffsim.optimize (within rounding)
    est = Exact()
    wall_study.optimize_wall(10.0, est, key=jax.random.PRNGKey(0), steps=20, lr=0.2)
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        again = wall_study.optimize_wall(10.5, est, key=jax.random.PRNGKey(0), steps=20, lr=0.1)
    assert [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()] == []
    reference = optimize(
        pw.loss, jnp.asarray(10.5), est, key=jax.random.PRNGKey(0), steps=20,
        optimizer=optax.adam(optax.cosine_decay_schedule(0.1, 20, wall_study.RECIPE.lr_end_fraction)),
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(again.history.theta), np.asarray(reference.history.theta),
                               rtol=1e-12)  # fmt: skip
    assert float(again.theta) != 10.5  # it moved: the comparison is not of two idle runs


def test_budget_stops_spending_at_the_simulator_budget():
    """FoBG with N = 8 on a quadratic, budget 100: 13 steps run (the 13th reaches 104 ≥ 100)
    and the 37 after are skipped — θ equals the unbudgeted run's θ after 13 steps (same
    keys) to 1e-12, the skipped rows hold θ with 0 evaluations, a NaN estimate and no
    choice; a budget the run never reaches changes nothing."""
    from diffsim.estimators import FirstOrder

    kw = dict(steps=50, key=jax.random.PRNGKey(0), optimizer=optax.sgd(0.05))
    est = FirstOrder(sigma=0.1, num_samples=8)
    theta0 = {"a": jnp.zeros(2), "b": jnp.asarray(0.0)}
    full = optimize(_quad, theta0, est, **kw)
    cut = optimize(_quad, theta0, est, budget=100, **kw)
    assert int(cut.evaluations) == 104
    np.testing.assert_array_equal(np.asarray(cut.history.evaluations[12:]), 104)
    for k in ("a", "b"):
        np.testing.assert_allclose(cut.theta[k], full.history.theta[k][13], rtol=0, atol=1e-12)
        np.testing.assert_allclose(cut.history.theta[k][13:], np.broadcast_to(
            cut.theta[k], cut.history.theta[k][13:].shape), rtol=0, atol=0)  # fmt: skip
    skipped = cut.history.estimate
    assert np.all(np.asarray(skipped.grad_evaluations[13:]) == 0)
    assert np.all(np.isnan(np.asarray(skipped.estimate["a"][13:])))
    assert "choice" not in skipped.stats  # FoBG computes no choice: none to blank
    assert (status_name(cut.status), status_name(full.status)) == ("budget", "completed")
    same = optimize(_quad, theta0, est, budget=400, **kw)
    for k in ("a", "b"):
        np.testing.assert_allclose(same.theta[k], full.theta[k], rtol=0, atol=1e-12)


def test_budget_with_auto_deciding_every_k_steps():
    """Auto(decide_every=5) with a budget: the run stops within one step of it — the
    evaluations reach the budget, and without the last step that ran they were below it."""
    from diffsim.estimators import Auto

    r = optimize(_quad, {"a": jnp.zeros(2), "b": jnp.asarray(0.0)}, Auto(decide_every=5),
                 steps=60, key=jax.random.PRNGKey(1), budget=300)  # fmt: skip
    ev = np.asarray(r.history.evaluations)
    ran = np.flatnonzero(np.diff(np.concatenate([[0], ev])) > 0)
    assert 0 < ran[-1] < 59 and ev[-1] == int(r.evaluations) >= 300
    assert (ev[ran[-2]] if len(ran) > 1 else 0) < 300


@pytest.mark.parametrize("bad", [0, -3, 1.5, "10"])
def test_budget_bad_input_names_it(bad):
    with pytest.raises((ValueError, TypeError), match="budget"):
        optimize(pw.loss_closed_form, 8.0, Exact(), steps=3, key=jax.random.PRNGKey(0),
                 budget=bad)  # fmt: skip


def test_result_says_its_wall_time_and_none_inside_a_transformation():
    """``seconds``: a finite positive wall time for a call that ran (bounded by the time
    measured around it), ``None`` inside ``jit`` or ``vmap`` (nothing ran to time); results
    of two runs still stack leaf by leaf (the time is a leaf, not static)."""
    import time

    def run(t0):
        return optimize(lambda t: (t - 3.0) ** 2, t0, Exact(), steps=5,
                        key=jax.random.PRNGKey(0), optimizer=optax.sgd(0.1))  # fmt: skip

    t = time.perf_counter()
    a = run(jnp.asarray(0.0))
    around = time.perf_counter() - t
    assert isinstance(a.seconds, float) and 0 < a.seconds <= around
    b = run(jnp.asarray(1.0))
    both = jax.tree_util.tree_map(lambda *v: np.stack([np.asarray(x) for x in v]), a, b)
    assert both.seconds.shape == (2,)
    assert jax.jit(run)(jnp.asarray(0.0)).seconds is None
    assert jax.vmap(run)(jnp.zeros(2)).seconds is None
