"""The paper's trajectory optimisations (Suh et al. 2022, §5.2) as shipped tasks.

Checked: the library-built steps against an independent transcription of the paper's
update equations (a NumPy loop, to 1e-12), their gradients against central differences,
bad input, the CLI against the library, and (slow) the paper's qualitative results with
the paper's recipe over 3 seeds.
"""

from __future__ import annotations

import json
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import cli_runner
from diffsim import TASKS, rollout
from diffsim.cli import app
from diffsim.estimators import Auto
from diffsim.systems import box_trajopt as bt

runner = cli_runner()

Q = np.array(bt._Q_DIAG)


def _reference_cost(u, start, goal, force):
    """The paper's loop: forces from the positions and velocities at the start of the step,
    velocities updated first, positions with the new velocities; cost on s_0 … s_T."""
    s = np.array(start, float)
    cost = float(np.sum(Q * (s - goal) ** 2))
    for ut in u:
        x1, x2, v1, v2 = s
        f1, f2, c = force(x1, x2, v1, v2, ut)
        v1, v2 = c * v1 + bt._H / bt._MASS * f1, c * v2 + bt._H / bt._MASS * f2
        s = np.array([x1 + bt._H * v1, x2 + bt._H * v2, v1, v2])
        cost += float(np.sum(Q * (s - goal) ** 2)) + bt._R * ut**2
    return cost


def _spring(task):
    def force(x1, x2, v1, v2, u):
        p = max(1.0 - (x2 - x1), 0.0)
        return -task.k * p + u, task.k * p, task.damping

    return force


def _friction(x1, x2, v1, v2, u):
    cap = bt._FRICTION_MU * bt._FRICTION_SLIP
    f = -float(abs(x2 - x1) < bt._FRICTION_WIDTH) * np.clip(bt._FRICTION_MU * (v2 - v1), -cap, cap)
    return -f + u, f, 1.0


@pytest.mark.parametrize("task", [bt.SOFT, bt.STIFF], ids=["soft", "stiff"])
def test_spring_push_matches_the_papers_update(task):
    """Random forces around 1 N (the pusher reaches and pushes the box): the cost from the
    library's WithContact/PenaltySpring rollout equals the transcription to 1e-12."""
    u = 1.0 + 0.5 * np.random.default_rng(0).standard_normal(task.num_steps)
    ref = _reference_cost(u, bt._PUSH_START, np.array(bt._PUSH_GOAL), _spring(task))
    got = float(bt.spring_push_loss(jnp.asarray(u), task))
    assert got == pytest.approx(ref, rel=1e-12)


def test_friction_carry_matches_the_papers_update():
    """Forces that first carry the box, then jerk the pusher away (the box slides off):
    equal to the transcription to 1e-12, and the box is left behind (its final position
    differs from the pusher's by more than the width)."""
    u = np.concatenate([np.full(100, 0.05), np.full(20, 2.0), np.zeros(280)])
    ref = _reference_cost(u, bt._FRICTION_START, np.array(bt._FRICTION_GOAL), _friction)
    got = float(bt.friction_carry_loss(jnp.asarray(u)))
    assert got == pytest.approx(ref, rel=1e-12)
    x, _ = rollout(bt.friction_carry_step(), (jnp.zeros(2), jnp.zeros(2)), {"mu": 1.8}, 400,
                   inputs=jnp.asarray(u), trajectory=False)  # fmt: skip
    assert abs(float(x[1] - x[0])) > bt._FRICTION_WIDTH


@pytest.mark.parametrize("name", ["push-soft", "push-stiff", "friction"])
def test_gradients_match_central_differences(name):
    """Three random directions at the task's start, jittered: d/dε V(u + ε d) by central
    differences (ε = 1e-6) agrees with jax.grad to 1e-5 relative (float64)."""
    loss, u0 = TASKS[name].build()
    rng = np.random.default_rng(1)
    u = u0 + 0.3 * jnp.asarray(rng.standard_normal(u0.shape))
    g = jax.grad(loss)(u)
    for _ in range(3):
        d = jnp.asarray(rng.standard_normal(u0.shape))
        eps = 1e-6
        fd = (float(loss(u + eps * d)) - float(loss(u - eps * d))) / (2 * eps)
        assert float(g @ d) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="damping must be in"):
        bt.spring_push_step(1.5)
    with pytest.raises(ValueError, match="u must have shape"):
        bt.spring_push_loss(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="u"):
        bt.friction_carry_loss(jnp.array([1.0, jnp.nan]))
    with pytest.raises(ValueError, match="mu"):
        bt.friction_carry_loss(jnp.ones(4), mu=-1.0)
    with pytest.raises(ValueError, match="estimator must be one of"):
        TASKS["friction"].estimator("fd")


def test_cli_train_is_the_library_run():
    """``diffsim train --json`` returns the losses of ``Task.train`` with the same seed."""
    out = runner.invoke(
        app, ["train", "--task", "push-soft", "-e", "first", "--steps", "5", "--seed", "3",
              "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    r = TASKS["push-soft"].train("first", key=jax.random.PRNGKey(3), steps=5)
    np.testing.assert_allclose(got["history"]["loss"], np.asarray(r.history.loss), rtol=1e-12)
    assert got["loss_final"] == pytest.approx(float(r.loss), rel=1e-12)
    assert got["evaluations"] == int(r.evaluations) == 5 * 10
    assert got["loss_final"] < got["loss_initial"]


@pytest.mark.slow  # ~15–50 s cold on 2 cores: the default suite stays under 10 min
def test_cli_train_deciding_every_k_steps_is_the_library_run():
    """``diffsim train -e auto --decide-every 3`` is ``Task.train`` with
    ``Auto(decide_every=3)`` (the task's σ and N): the same losses and evaluations."""
    out = runner.invoke(
        app, ["train", "--task", "push-soft", "--decide-every", "3", "--steps", "6", "--json"]
    )
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    task = TASKS["push-soft"]
    est = Auto(sigma=task.sigma, num_samples=task.num_samples, decide_every=3)
    r = task.train(est, key=jax.random.PRNGKey(0), steps=6)
    np.testing.assert_allclose(got["history"]["loss"], np.asarray(r.history.loss), rtol=1e-12)
    assert got["evaluations"] == int(r.evaluations) and got["decide_every"] == 3
    decided = np.isfinite(np.asarray(r.history.estimate.z_gap))
    np.testing.assert_array_equal(decided, [True, False, False, True, False, False])


def test_cli_train_with_a_budget_is_the_library_run():
    """``diffsim train -e first --budget 45`` on push-soft (N = 10 per step): 5 of 8 steps
    run (the 5th reaches 50 ≥ 45), the JSON says so, and its history equals
    ``Task.train(..., budget=45)``'s."""
    out = runner.invoke(
        app,
        [
            "train",
            "--task",
            "push-soft",
            "-e",
            "first",
            "--steps",
            "8",
            "--budget",
            "45",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    r = TASKS["push-soft"].train("first", key=jax.random.PRNGKey(0), steps=8, budget=45)
    assert got["evaluations"] == int(r.evaluations) == 50
    assert got["budget"] == 45 and got["iterations"] == 8 and got["iterations_run"] == 5
    # the JSON's history holds the steps that ran
    np.testing.assert_allclose(got["history"]["loss"], np.asarray(r.history.loss)[:5], rtol=1e-12)
    assert got["loss_final"] == pytest.approx(float(r.loss), rel=1e-12)


@pytest.mark.slow  # a check and L-BFGS on 400 forces: ~30 s cold on 2 cores
def test_cli_train_default_is_the_library_decide():
    """``diffsim train`` without --estimator is ``Task.train``'s default method: the same
    decisions, losses and evaluations (loss and gradient apart); the first decision on
    push-soft (a smooth spring) is L-BFGS."""
    out = runner.invoke(app, ["train", "--task", "push-soft", "--steps", "5", "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    r = TASKS["push-soft"].train(key=jax.random.PRNGKey(0), steps=5)
    assert got["method"] == "decide" and got["estimator"] is None
    assert [d["method"] for d in got["decisions"]] == [d.method for d in r.decisions]
    assert got["decisions"][0]["method"] == "lbfgs"
    np.testing.assert_allclose(
        got["history"]["loss"], np.asarray(r.history.loss)[: int(r.steps_run)], rtol=1e-12
    )
    assert got["iterations_run"] == int(r.steps_run) == 5
    assert got["loss_evaluations"] == int(r.loss_evaluations)
    assert got["grad_evaluations"] == int(r.grad_evaluations)
    assert got["evaluations"] == got["loss_evaluations"] + got["grad_evaluations"]
    assert got["loss_final"] < got["loss_initial"]


def test_task_train_refuses_an_unknown_method():
    with pytest.raises(ValueError, match="method must be one of decide, lbfgs, zeroth"):
        TASKS["friction"].train("adam", key=jax.random.PRNGKey(0))


def test_training_a_task_again_compiles_nothing(caplog):
    """A second ``Task.train`` with another key reuses the first's compiled run (the loss
    and optimiser are built once per task), and gives the same numbers as a first run."""
    task = TASKS["push-stiff"]
    first = task.train("first", key=jax.random.PRNGKey(0), steps=3)
    with caplog.at_level(logging.WARNING), jax.log_compiles(True):
        again = task.train("first", key=jax.random.PRNGKey(0), steps=3)
    compiles = [r.getMessage() for r in caplog.records if "ompil" in r.getMessage()]
    assert compiles == []
    np.testing.assert_array_equal(np.asarray(again.history.loss), np.asarray(first.history.loss))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "nope"], "--task"),
        (["--task", "friction", "-e", "fd"], "estimator must be one of"),
        (["--task", "friction", "--robot", "B"], "--robot and --no-toi are options of"),
        (["--task", "mass-spring-robot", "--robot", "E"], "robot must be one of"),
        (["--task", "mass-spring-robot", "--robot", "/nonexistent.json"], "/nonexistent.json"),
        (["--task", "friction", "--steps", "-1"], "--steps must be an integer >= 0"),
        (["--task", "friction", "--seed", "-1"], "--seed"),
        (["--task", "friction", "--decide-every", "-2"], "--decide-every must be an integer >= 0"),
        (["--task", "friction", "--budget", "-5"], "--budget must be an integer >= 0"),
        (
            ["--task", "friction", "-e", "first", "--decide-every", "5"],
            "--decide-every is an option of --estimator auto",
        ),
        (["--task", "friction", "--method", "adam"], "method must be one of decide, lbfgs"),
        (["--task", "friction", "-m", "lbfgs", "-e", "first"], "--estimator set the recipe"),
        (["--task", "friction", "-m", "decide", "--decide-every", "2"], "--decide-every set"),
        (["--task", "friction", "--budget", "3"], "budget must leave room for one decision"),
    ],
)
def test_cli_train_bad_input_one_line_exit_2(args, message):
    out = runner.invoke(app, ["train", *args])
    assert out.exit_code == 2, out.output
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def _finals(name, estimator, seeds=3):
    """The final losses and the whole loss curves of ``seeds`` runs (seeds vmapped)."""
    task = TASKS[name]
    run = jax.jit(jax.vmap(lambda key: task.train(estimator, key=key)))
    r = run(jax.random.split(jax.random.PRNGKey(1), seeds))
    return np.asarray(r.loss), np.asarray(r.history.loss)


@pytest.mark.slow
def test_pushing_first_order_wins_soft_zeroth_wins_stiff():
    """The paper's Fig. (pushing trajopt), its recipe (σ = 0.1, N = 10, 500 steps of 1e-3):
    with the soft spring the first-order gradient ends lower than the zeroth-order one in
    every seed (measured 1128 vs 1171…1173) and ``auto`` (which trusts the exact gradient
    there) ends within 1 % of the first-order one; with the stiff spring the zeroth-order
    one ends lower in median (818 vs 863; FoBG's seeds range 821…1071). ``auto`` on the
    stiff spring is not asserted: its seeds end 815…1736 (docs/guides/control.md)."""
    soft = {e: _finals("push-soft", e)[0] for e in ("first", "zeroth", "auto")}
    assert soft["first"].max() < soft["zeroth"].min()
    assert np.median(soft["auto"]) <= 1.01 * np.median(soft["first"])
    stiff = {e: _finals("push-stiff", e)[0] for e in ("first", "zeroth")}
    assert np.median(stiff["zeroth"]) < 0.99 * np.median(stiff["first"])


@pytest.mark.slow
def test_friction_first_order_degrades_zeroth_and_alpha_do_not():
    """The paper's friction task, its recipe (σ = 0.1, N = 10, 100 steps of 1e-4): the
    first-order run's loss rises by > 5 % from its lowest point once the box slides off
    (measured 8000…8300 → 8730…8880), the zeroth- and alpha-order ones end below the
    first-order one's lowest point in every seed (measured 7120…7190)."""
    first, curve = _finals("friction", "first")
    assert np.all(first > 1.05 * curve.min(axis=1))
    for e in ("zeroth", "alpha"):
        final, _ = _finals("friction", e)
        assert final.max() < curve.min(axis=1).min()


@pytest.mark.slow  # a 681-step robot compiled for its gradient: ~20 s on 2 cores
def test_cli_trains_a_robot_file_with_difftaichis_recipe(tmp_path):
    """``diffsim train --task mass-spring-robot --robot FILE --no-toi -m recipe`` is
    ``robot_task(FILE, toi=False).train("exact")``: DiffTaichi's recipe (the exact gradient,
    normalised steps of 0.2) on the robot in the file, the same losses to 1e-12."""
    from diffsim import robot_task
    from diffsim.systems import mass_spring_robot as msr

    path = tmp_path / "b.json"
    msr.Robot.builtin("B").to_json(path)
    args = ["train", "--task", "mass-spring-robot", "--robot", str(path), "--no-toi",
            "-m", "recipe", "--steps", "2", "--json"]  # fmt: skip
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["estimator"] == "exact" and got["method"] == "recipe"
    task = robot_task(str(path), toi=False)
    r = task.train("exact", key=jax.random.PRNGKey(0), steps=2)
    np.testing.assert_allclose(got["history"]["loss"], np.asarray(r.history.loss), rtol=1e-12)
    assert got["loss_final"] == pytest.approx(float(r.loss), rel=1e-12)
    # each step has length 0.2 in θ (the normalised gradient's norm is 1 up to 1e-6)
    flat = [np.concatenate([np.ravel(v) for v in jax.tree_util.tree_leaves(t)])
            for t in (task.problem()[1], r.theta)]  # fmt: skip
    assert np.linalg.norm(flat[1] - flat[0]) <= 0.4 + 1e-6
