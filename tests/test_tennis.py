"""The tennis task's step against closed forms: the time of impact within a step, the
restitution relative to a moving and to a tilted paddle, the paddle's edge; its derivative
against central differences; the task's objective and its returned-ball count."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffsim.estimators import FirstOrder, ZerothOrder
from diffsim.systems import tennis

H, E, D = tennis._H, tennis._RESTITUTION, tennis._DAMPING
CONTACT = tennis._HALF_HEIGHT + tennis._RADIUS  # the ball's centre height at contact, level paddle


def state(bx=0.0, by=1.0, vx=0.0, vy=-1.0, px=0.0, py=0.0, phi=0.0):
    return jnp.array([bx, by, vx, vy, px, py, phi])


def test_ball_bounces_at_the_time_of_impact_within_the_step():
    v = 2.0
    x = state(by=CONTACT + 0.5 * H * v, vy=-v)  # reaches the face half-way through the step
    out = tennis.tennis_step(x, None, jnp.zeros(3))
    assert float(out[1]) == pytest.approx(CONTACT + 0.5 * H * E * v, abs=1e-12)
    assert float(out[3]) == pytest.approx(D * E * v, abs=1e-12)
    assert float(out[0]) == 0.0 and float(out[2]) == 0.0


def test_free_flight_is_damped_and_a_ball_past_the_edge_is_missed():
    x = state(by=CONTACT + 0.5 * H, vy=-1.0, bx=tennis._HALF_WIDTH + 0.01)
    out = tennis.tennis_step(x, None, jnp.zeros(3))
    assert float(out[1]) == pytest.approx(CONTACT + 0.5 * H - H, abs=1e-12)  # flew through
    assert float(out[3]) == pytest.approx(-D, abs=1e-12)
    inside = tennis.tennis_step(x.at[0].set(tennis._HALF_WIDTH - 0.01), None, jnp.zeros(3))
    assert float(inside[3]) > 0  # bounced


def test_a_moving_paddle_adds_its_velocity_to_the_bounce():
    # relative to a paddle rising at w the ball arrives at −(v + w) and leaves at e(v + w):
    # v_out = w + e(v + w)
    v, w = 1.0, 0.5
    g0 = 0.4 * H * (v + w)  # the gap closes at v + w: impact 40 % into the step
    x = state(by=CONTACT + g0, vy=-v)
    out = tennis.tennis_step(x, None, jnp.array([0.0, w, 0.0]))
    assert float(out[3]) == pytest.approx(D * (w + E * (v + w)), abs=1e-12)
    assert float(out[5]) == pytest.approx(H * w, abs=1e-12)


def test_a_tilted_paddle_reflects_about_its_normal():
    phi = 0.3
    n = np.array([-np.sin(phi), np.cos(phi)])
    t = np.array([np.cos(phi), np.sin(phi)])
    v_in = np.array([0.2, -1.5])
    centre = CONTACT * n + 0.01 * n  # just above the face, over the paddle's centre
    x = state(bx=centre[0], by=centre[1], vx=v_in[0], vy=v_in[1], phi=phi)
    out = np.asarray(tennis.tennis_step(x, None, jnp.zeros(3)))
    v_out = out[2:4] / D
    assert v_out @ t == pytest.approx(v_in @ t, abs=1e-12)  # tangential part kept
    assert v_out @ n == pytest.approx(-E * (v_in @ n), abs=1e-12)  # normal part × (−e)


def test_bounce_derivative_matches_central_differences():
    x = state(bx=0.1, by=CONTACT + 0.02, vx=0.3, vy=-1.0)
    u = jnp.array([0.1, 0.2, 0.05])

    def after(u):
        return tennis.tennis_step(x, None, u)[:4]

    jac = jax.jacfwd(after)(u)
    eps = 1e-6
    fd = np.stack(
        [(after(u + eps * e) - after(u - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1
    )
    np.testing.assert_allclose(jac, fd, atol=1e-7)
    assert float(jnp.abs(jac[3, 1])) > 0.1  # the paddle's velocity does reach the ball


def test_the_task_objective_and_returned_balls():
    obj = tennis.objective(num_states=16, horizon=60)
    theta = jnp.zeros((3, 7))
    assert obj.check(theta) == (3,)
    # an independent count: the noise-free rollouts, ended within the radius of the target
    states = obj.sample_states(jax.random.PRNGKey(5), 50)
    ends = np.asarray(jax.jit(jax.vmap(lambda s: obj.trajectory(theta, s)[1][-1, :2]))(states))
    want = np.mean(np.linalg.norm(ends - np.array(tennis._TARGET), axis=1) <= 0.5)
    assert float(tennis.returned(obj, theta, jax.random.PRNGKey(5), num=50)) == want
    for est in (FirstOrder(sigma=tennis._SIGMA, num_samples=8),
                ZerothOrder(sigma=tennis._SIGMA, num_samples=8)):  # fmt: skip
        r = est(obj, theta, jax.random.PRNGKey(0))
        assert r.estimate.shape == (3, 7) and bool(jnp.all(jnp.isfinite(r.estimate)))


@pytest.mark.slow
def test_training_with_the_tasks_recipe_returns_the_balls():
    """The task trained by its recipe (``TASKS['tennis'].train``: σ = 0.05, N = 200, 300 Adam
    steps from Θ = 0; seed 1), scored on 200 held-out balls by :func:`tennis.returned`:
    FoBG and ``auto`` deciding once in 25 steps return at least 90 % (measured 97.5 % both),
    ZoBG at most 50 % (measured 14.5 %). This is diffsim's measured ordering, not the
    paper's (there ZoBG and AoBG learn the task and FoBG misses many balls); the control
    guide's 5-seed table: FoBG 94–98 % on every seed, ZoBG 0–85 %, auto 68–97 %."""
    from diffsim import TASKS
    from diffsim.estimators import Auto

    spec = TASKS["tennis"]
    loss, theta0 = spec.problem()
    assert float(spec.score(loss, theta0)) == 0.0  # Θ = 0 returns no ball
    key = jax.random.PRNGKey(1)
    kw = {"sigma": spec.sigma, "num_samples": spec.num_samples}
    scores = {}
    for name, est in (
        ("first", FirstOrder(**kw)),
        ("zeroth", ZerothOrder(**kw)),
        ("auto", Auto(**kw, decide_every=25)),
    ):
        r = spec.train(est, key=key)
        assert bool(jnp.isfinite(r.loss)), name
        scores[name] = float(spec.score(loss, r.theta))
    assert scores["first"] >= 0.9 and scores["auto"] >= 0.9, scores
    assert scores["zeroth"] <= 0.5, scores
