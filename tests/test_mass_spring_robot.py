"""DiffTaichi's mass-spring robots: the rollout against a plain-Python loop written from
DiffTaichi's kernels, the controller's gradient against central differences, the robot
file's checks and round trip, the built-ins against the config's geometry, the recipe."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from diffsim.systems import mass_spring_robot as msr

# a small robot near the ground: point 0 lands within a few steps
TRIANGLE_POINTS = [[0.0, 0.1003], [0.1, 0.12], [0.05, 0.2]]
TRIANGLE_SPRINGS = [[0, 1, None, 3000.0, 0.2], [1, 2, 0.09, 2000.0, 0.1], [2, 0, None, 4000.0, 0.0]]


def reference_rollout(points, springs, theta, steps, toi):
    """DiffTaichi's forward pass as it is written there: loops over steps, hidden units,
    springs and points (unit masses, dt 0.004, damping 15, gravity −4.8, ground 0.1)."""
    h, ground = 0.004, 0.1
    w1, b1, w2, b2 = (np.asarray(theta[k]) for k in ("w1", "b1", "w2", "b2"))
    x = np.array(points, float)
    n = len(x)
    rows = []
    for a, b, length, k, alpha in springs:
        if length is None:
            length = math.dist(x[a], x[b])
        rows.append((a, b, length, k, alpha))
    v = np.zeros_like(x)
    xs = [x.copy()]
    for t in range(steps):
        c = x.mean(axis=0)
        obs = [math.sin(10 * t * h + 2 * math.pi / 10 * j) for j in range(10)]
        for j in range(n):
            obs += [0.05 * (x[j, 0] - c[0]), 0.05 * (x[j, 1] - c[1]), 0.05 * v[j, 0],
                    0.05 * v[j, 1]]  # fmt: skip
        obs += [0.9 - c[0], 0.2 - c[1]]
        hidden = [math.tanh(sum(w1[i, j] * obs[j] for j in range(len(obs))) + b1[i])
                  for i in range(len(b1))]  # fmt: skip
        act = [math.tanh(sum(w2[s, i] * hidden[i] for i in range(len(hidden))) + b2[s])
               for s in range(len(rows))]  # fmt: skip
        v_inc = np.zeros_like(x)
        for s, (a, b, length, k, alpha) in enumerate(rows):
            d = x[a] - x[b]
            dist = math.sqrt(d[0] ** 2 + d[1] ** 2) + 1e-4
            target = length * (1.0 + alpha * act[s])
            impulse = h * (dist - target) * k / dist * d
            v_inc[a] -= impulse
            v_inc[b] += impulse
        new_x, new_v = np.empty_like(x), np.empty_like(v)
        for i in range(n):
            old_v = math.exp(-h * 15) * v[i] + np.array([0.0, h * -4.8]) + v_inc[i]
            old_x = x[i]
            nv = old_v.copy()
            if toi:
                tau = 0.0
                if (old_x + h * old_v)[1] < ground and old_v[1] < -1e-4:
                    tau = -(old_x[1] - ground) / old_v[1]
                    nv = np.zeros(2)
                new_x[i] = old_x + tau * old_v + (h - tau) * nv
            else:
                if old_x[1] - ground < 0 and nv[1] < 0:
                    nv = np.zeros(2)
                new_x[i] = old_x + h * nv
            new_v[i] = nv
        x, v = new_x, new_v
        xs.append(x.copy())
    return np.array(xs)


def big_theta(robot, key=0):
    """A controller with large weights: actuations near ±1 that change every step."""
    theta = msr.controller_init(robot, jax.random.PRNGKey(key))
    return {k: 4.0 * w + 0.3 for k, w in theta.items()}


@pytest.mark.parametrize("toi", [False, True])
def test_rollout_matches_a_python_loop_reference(toi):
    robot = msr.Robot(TRIANGLE_POINTS, TRIANGLE_SPRINGS)
    theta = big_theta(robot)
    steps = 40
    expected = reference_rollout(TRIANGLE_POINTS, TRIANGLE_SPRINGS, theta, steps, toi)
    x, v = msr.rollout(robot, theta, toi=toi, num_steps=steps + 1)
    assert x.shape == (steps + 1, 3, 2) and v.shape == x.shape
    np.testing.assert_allclose(np.asarray(x), expected, rtol=0, atol=1e-12)
    # the window saw the ground: point 0 came to rest on it
    assert np.any(np.all(np.asarray(v)[1:, 0] == 0.0, axis=-1))
    assert float(np.min(expected[:, :, 1])) < 0.1 + 1e-9


def test_rollout_of_robot_a_matches_the_reference_through_contact():
    robot = msr.Robot.builtin("A")
    theta = msr.controller_init(robot, jax.random.PRNGKey(3))
    points, springs = [[0.2, 0.1], [0.3, 0.13], [0.4, 0.1], [0.2, 0.2], [0.3, 0.2],
                       [0.4, 0.2]], robot.springs()  # fmt: skip
    expected = reference_rollout(points, springs, theta, 30, toi=False)
    x, _ = msr.rollout(robot, theta, num_steps=31)
    np.testing.assert_allclose(np.asarray(x), expected, rtol=0, atol=1e-12)


def test_toi_stops_a_falling_point_on_the_ground():
    # one spring at rest, no actuation: both points fall freely until they meet the ground
    robot = msr.Robot([[0.0, 0.101], [0.1, 0.101]], [[0, 1, None, 100.0, 0.0]])
    theta = msr.controller_init(robot, jax.random.PRNGKey(0))
    x_toi, _ = msr.rollout(robot, theta, toi=True, num_steps=20)
    x_naive, _ = msr.rollout(robot, theta, toi=False, num_steps=20)
    # with TOI the points end exactly on the ground; without, a step below it
    np.testing.assert_allclose(np.asarray(x_toi[-1, :, 1]), 0.1, atol=1e-15)
    assert np.all(np.asarray(x_naive[-1, :, 1]) < 0.1 - 1e-5)


def test_gradient_matches_central_differences_away_from_contact():
    # robot A lifted 0.4 m: 24 steps fall 1.5 cm, no point reaches the ground
    a = msr.Robot.builtin("A")
    robot = msr.Robot(np.asarray(a.points) + [0.0, 0.4], a.springs())
    objective = msr.objective(robot, num_steps=25)
    loss = jax.jit(lambda th: objective(th))
    theta = msr.controller_init(robot, jax.random.PRNGKey(1))
    x, _ = msr.rollout(robot, theta, num_steps=25)
    assert float(jnp.min(x[:, :, 1])) > msr.GROUND_HEIGHT + 0.1
    # the objective is minus the head's x at the rollout's last state
    assert float(loss(theta)) == pytest.approx(-float(x[-1, 0, 0]), abs=1e-15)
    grad = jax.grad(loss)(theta)
    scale = max(float(jnp.max(jnp.abs(g))) for g in jax.tree_util.tree_leaves(grad))
    eps = 1e-6
    # each array's largest entry (the random weights differ between JAX versions)
    picks = [(name, np.unravel_index(int(jnp.argmax(jnp.abs(grad[name]))), grad[name].shape))
             for name in ("w1", "b1", "w2", "b2")]  # fmt: skip
    for name, idx in picks:
        plus = dict(theta, **{name: theta[name].at[idx].add(eps)})
        minus = dict(theta, **{name: theta[name].at[idx].add(-eps)})
        fd = float(loss(plus) - loss(minus)) / (2 * eps)
        g = float(grad[name][idx])
        assert abs(g) > 1e-3 * scale, (name, idx)  # a derivative that is really there
        # central differences in float64: truncation O(eps^2), rounding ~1e-16 / eps
        assert g == pytest.approx(fd, rel=1e-6, abs=1e-8 * scale), (name, idx)


@pytest.mark.parametrize("toi", [False, True])
def test_gradient_through_ground_contact_is_finite(toi):
    robot = msr.Robot.builtin("A")
    theta = msr.controller_init(robot, jax.random.PRNGKey(0))
    grad = jax.grad(msr.objective(robot, toi=toi, num_steps=60))(theta)
    leaves = jax.tree_util.tree_leaves(grad)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    assert sum(float(jnp.sum(g**2)) for g in leaves) > 0


def test_builtin_robots_have_difftaichis_geometry():
    a = msr.Robot.builtin("A")
    assert a.num_points == 6 and a.num_springs == 11
    np.testing.assert_allclose(a.stiffness, 14000.0)
    np.testing.assert_allclose(a.actuation, 0.1)
    # spring (0, 1): from (0.2, 0.1) to (0.3, 0.13)
    assert float(a.rest_length[0]) == pytest.approx(math.hypot(0.1, 0.03), abs=1e-15)
    # two muscles (vertical sides) per actuated cell, less those an earlier cell already
    # joined as passive (the config joins a pair once): D's cell (4, 1) shares (3, 1)'s side
    for name, n, s, muscles in (("B", 14, 30, 4), ("C", 20, 46, 8), ("D", 26, 61, 11)):
        r = msr.Robot.builtin(name)
        assert (r.num_points, r.num_springs) == (n, s)
        assert int(jnp.sum(r.actuation == 0.15)) == muscles
        np.testing.assert_allclose(r.stiffness, 3e4)
        # the mesh's grid: 0.05 m cells from (0.1, 0.1); B starts with a triangle's apex
        first = [0.225, 0.125] if name == "B" else [0.2, 0.1]
        np.testing.assert_allclose(np.asarray(r.points[0]), first, atol=1e-15)
    with pytest.raises(ValueError, match=r"robot must be one of \['A', 'B', 'C', 'D'\]"):
        msr.Robot.builtin("E")


POINTS = [[0.0, 0.1], [0.1, 0.1], [0.05, 0.2]]


@pytest.mark.parametrize(
    ("points", "springs", "message"),
    [
        (POINTS, [[0, 1, None, 1e4, 0.1], [1, 12, None, 1e4, 0.1]],
         r"^springs\[1\]: index 12 out of range \[0, 3\)$"),
        (POINTS, [[-1, 1, None, 1e4, 0.1]], r"^springs\[0\]: index -1 out of range \[0, 3\)$"),
        (POINTS, [[0, 1, None, 1e4, 0.1], [1, 2, 0.0, 1e4, 0.1]],
         r"^springs\[1\]: rest length 0.0 must be finite and > 0"),
        (POINTS, [[0, 1, -1, 1e4, 0.1]], r"^springs\[0\]: rest length -1.0 must be"),
        (POINTS, [[0, 1, None, 0.0, 0.1]], r"^springs\[0\]: stiffness 0.0 must be finite and > 0$"),
        (POINTS, [[0, 1, None, -5, 0.1]], r"^springs\[0\]: stiffness -5.0 must be"),
        (POINTS, [[0, 1, None, 1e4, float("nan")]], r"^springs\[0\]: actuation nan must be finite$"),
        ([[0.0, 0.1], [float("nan"), 0.1]], [[0, 1, 0.1, 1e4, 0.1]],
         r"^points\[1\]: coordinates must be finite, got \[nan, 0.1\]$"),
        (POINTS, [], r"^springs must not be empty"),
        ([], [[0, 1, 0.1, 1e4, 0.1]], r"^points must not be empty$"),
        (POINTS, [[1, 1, 0.1, 1e4, 0.1]], r"^springs\[0\]: joins point 1 to itself$"),
        (POINTS, [[0, 1, 0.1, 1e4]], r"^springs\[0\]: must be \[a, b, rest length, stiffness"),
        (POINTS, [[0, 1.5, 0.1, 1e4, 0.1]], r"^springs\[0\]: must be an integer point index"),
        ([[0.0, 0.1, 0.2]], [[0, 0, 0.1, 1e4, 0.1]], r"^points\[0\]: must be \[x, y\]"),
    ],
)  # fmt: skip
def test_bad_robot_gets_one_error_naming_the_field_and_index(points, springs, message):
    with pytest.raises(ValueError, match=message):
        msr.Robot(points, springs)


def test_bad_head_is_named():
    with pytest.raises(ValueError, match=r"^head: index 3 out of range \[0, 3\)$"):
        msr.Robot(POINTS, [[0, 1, None, 1e4, 0.1]], head=3)


def test_json_round_trip(tmp_path):
    robot = msr.Robot.builtin("B")
    path = tmp_path / "b.json"
    robot.to_json(path)
    back = msr.Robot.from_json(path)
    for field in ("points", "a", "b", "rest_length", "stiffness", "actuation"):
        np.testing.assert_array_equal(getattr(back, field), getattr(robot, field))
    assert back.head == robot.head
    # a hand-written file: null rest lengths are the distance between the points
    path.write_text(json.dumps({"points": POINTS, "springs": [[0, 1, None, 1e4, 0.1]]}))
    assert float(msr.Robot.from_json(path).rest_length[0]) == pytest.approx(0.1, abs=1e-15)


def test_bad_json_file_errors_start_with_the_path(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"points": POINTS, "springs": [[0, 7, None, 1e4, 0.1]]}))
    with pytest.raises(ValueError, match=r"bad.json: springs\[0\]: index 7 out of range \[0, 3\)$"):
        msr.Robot.from_json(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad.json: not JSON"):
        msr.Robot.from_json(path)
    path.write_text(json.dumps({"points": POINTS}))
    with pytest.raises(
        ValueError, match=r'bad.json: must be an object with "points" and "springs"'
    ):
        msr.Robot.from_json(path)
    path.write_text(json.dumps({"points": POINTS, "springs": [[0, 1, None, 1e4, 0.1]], "x": 1}))
    with pytest.raises(ValueError, match=r"bad.json: unknown fields \['x'\]"):
        msr.Robot.from_json(path)
    with pytest.raises(ValueError, match=r"missing.json: cannot read the robot file"):
        msr.Robot.from_json(tmp_path / "missing.json")


def test_controller_init_has_difftaichis_shapes_and_scales():
    robot = msr.Robot.builtin("C")
    theta = msr.controller_init(robot, jax.random.PRNGKey(0))
    n_in = 10 + 4 * 20 + 2
    assert theta["w1"].shape == (32, n_in) and theta["w2"].shape == (46, 32)
    assert (
        float(jnp.max(jnp.abs(theta["b1"]))) == 0.0 and float(jnp.max(jnp.abs(theta["b2"]))) == 0.0
    )
    # sample standard deviations within 10 % of sqrt(2 / (32 + fan)) · (2, 3)
    assert float(jnp.std(theta["w1"])) == pytest.approx(2 * math.sqrt(2 / (32 + n_in)), rel=0.1)
    assert float(jnp.std(theta["w2"])) == pytest.approx(3 * math.sqrt(2 / (32 + 46)), rel=0.1)


@pytest.mark.slow  # a robot compiled for its gradient: ~10 s on 2 cores
def test_recipe_takes_steps_of_the_given_length_and_decreases_the_loss():
    robot = msr.Robot.builtin("A")
    result = msr.train(robot, jax.random.PRNGKey(0), iterations=6, num_steps=80)
    losses = np.asarray(result.history.loss)
    assert losses.shape == (6,)
    assert float(result.loss) < losses[0]
    # every update moves θ by 0.2 |g| / (|g| + 1e-6) against the gradient g
    ravel = jax.vmap(lambda t: ravel_pytree(t)[0])
    flat = np.asarray(ravel(result.history.theta))
    grads = np.asarray(ravel(result.history.estimate.estimate))
    norms = np.linalg.norm(grads, axis=1)
    expected = -msr.RECIPE.step_size * grads / (norms[:, None] + 1e-6)
    np.testing.assert_allclose(np.diff(flat, axis=0), expected[:-1], rtol=0, atol=1e-12)
    # the loss history is the objective at each iterate
    loss = msr.objective(robot, num_steps=80)
    first = jax.tree_util.tree_map(lambda a: a[0], result.history.theta)
    assert float(loss(first)) == pytest.approx(losses[0], abs=1e-12)


def test_bad_arguments_are_named():
    robot = msr.Robot.builtin("A")
    with pytest.raises(ValueError, match="num_steps"):
        msr.objective(robot, num_steps=1)
    with pytest.raises(ValueError, match="step_size"):
        msr.normalised_descent(0.0)
    with pytest.raises(ValueError, match="iterations"):
        msr.train(robot, jax.random.PRNGKey(0), iterations=0)
