"""Every control task of ``diffsim.TASKS``: its gradients are finite and reproducible with
every estimator (the same key gives the same numbers, bit for bit), and their cost is
reported. Slow (5 min on 2 cores for the paper's tasks: auto's evidence on each compiles and
runs a while; each MuJoCo task's estimators compile for 30-90 s more).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from diffsim import TASKS
from diffsim._tasks import SMOOTHING
from diffsim.estimators._evidence import EXACT
from diffsim.policies import PolicyObjective

pytestmark = pytest.mark.slow


# The MuJoCo tasks (their estimators compile MJX's solver: 1-5 min each on 2 cores) run the
# two estimators every other one is made of: zeroth- and first-order samples (alpha-order
# mixes them; auto chooses between them from the same samples). Every estimator, auto and
# alpha included, runs on every other task, policies (tennis, the robot) among them.
MUJOCO_TASKS = ("reacher-open", "pendulum")
CASES = [
    (name, estimator)
    for name in TASKS
    for estimator in SMOOTHING
    if name not in MUJOCO_TASKS or estimator in ("zeroth", "first")
]


@pytest.mark.parametrize(("name", "estimator"), CASES)
def test_gradients_are_finite_and_reproducible(name, estimator):
    task = TASKS[name]
    loss, theta0 = task.build()
    est = jax.jit(lambda key: task.estimator(estimator)(loss, theta0, key))
    a, b = est(jax.random.PRNGKey(5)), est(jax.random.PRNGKey(5))
    shapes = lambda t: jax.tree_util.tree_map(np.shape, t)  # noqa: E731
    assert shapes(a.estimate) == shapes(theta0)  # θ may be a pytree (the robot's weights)
    g = np.asarray(ravel_pytree(a.estimate)[0])
    assert np.all(np.isfinite(g)) and np.any(g != 0.0)
    np.testing.assert_array_equal(g, np.asarray(ravel_pytree(b.estimate)[0]))
    assert np.all(np.isfinite(np.asarray(ravel_pytree(a.std_error)[0])))
    assert int(a.evaluations) >= task.num_samples
    # another key draws other samples; only auto's trusted exact gradient of an open-loop
    # task (no random initial states) is the same whatever the key — when both keys' evidence
    # trusts it (on push-stiff, key 5's does and key 6's does not: a stiff verdict)
    c = est(jax.random.PRNGKey(6))
    # only auto decides: a sampling estimator's stats hold no choice
    trusted = estimator == "auto" and int(a.choice) == int(c.choice) == EXACT
    exact = trusted and not isinstance(loss, PolicyObjective)
    assert np.array_equal(g, np.asarray(ravel_pytree(c.estimate)[0])) == exact
