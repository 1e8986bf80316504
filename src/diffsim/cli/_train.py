"""``diffsim train``: a control task of the paper trained by the default method, L-BFGS, or
the paper's recipe with any estimator.

A thin shell over :data:`diffsim.TASKS` (:meth:`diffsim.Task.train`).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
import typer

from .. import TASKS, Task, robot_task
from ..estimators import Estimator
from ..optimization import status_name
from ._common import (
    CLIError,
    app,
    check_count,
    check_seed,
    console,
    precision_name,
    print_json,
    progress_bar,
    registry_choice,
    require_finite_answer,
    titled_table,
)

MAX_STEPS = 100_000
"""``--steps`` at most."""

_TASK_HELP = "; ".join(f"{t.name}: {t.title}" for t in TASKS.values())


METHOD_HELP = (
    "How to train: decide (the default: the doctor's evidence picks how to descend, L-BFGS "
    "on the exact gradient where it is trusted, sampling phases where it is not), lbfgs "
    "(the exact gradient with L-BFGS, trusted or not), or recipe (the paper's recipe with "
    "--estimator: the task's σ, N, optimiser; implied by --estimator)."
)
METHOD_CHOICES = (*Task.methods, "recipe")


@app.command(name="train")
def train_cmd(
    task: str = typer.Option(..., "--task", help=_TASK_HELP),
    method: str | None = typer.Option(None, "--method", "-m", help=METHOD_HELP),
    estimator: str | None = typer.Option(
        None,
        "--estimator",
        "-e",
        help=f"One of {', '.join(Task.estimators)} (σ, N: the task's); --method recipe only "
        "(the default there: auto).",
    ),
    steps: int = typer.Option(0, "--steps", help="Iterations at most (0: the experiment's)."),
    decide_every: int = typer.Option(
        0,
        "--decide-every",
        help="--estimator auto only: decide on one step in K, reuse the chosen "
        "estimator between (0: decide on every step).",
    ),
    budget: int = typer.Option(
        0,
        "--budget",
        help="Simulator evaluations at most (loss + gradient; the run stops within one "
        "step of it: to compare methods at equal cost). 0: no budget.",
    ),
    robot: str | None = typer.Option(
        None,
        "--robot",
        help="--task mass-spring-robot only: DiffTaichi's robot A, B, C or D (default A), or "
        'a robot file (JSON: "points" and "springs" [a, b, rest length, stiffness, actuation]).',
    ),
    toi: bool = typer.Option(
        True, "--toi/--no-toi", help="--task mass-spring-robot only: time of impact at the ground."
    ),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object (the same run twice prints the same object, but for its "
        "'seconds', the wall time).",
    ),
) -> None:
    """Train a control task (Suh et al.'s experiments; MuJoCo models through MJX): by
    default the method the doctor's evidence picks; --estimator NAME runs the paper's
    recipe with one estimator."""
    spec = _task(TASKS[registry_choice("--task", task, TASKS)], robot, toi)
    method = _check_method(method, estimator, decide_every)
    recipe = method == "recipe"
    estimator = (estimator or spec.recipe_estimator) if recipe else None
    steps = check_count("steps", steps, 0, MAX_STEPS, "a run that long is for the API")
    steps = steps or spec.steps
    decide_every = check_count("decide-every", decide_every, 0, MAX_STEPS, "as --steps")
    if decide_every and estimator != "auto":
        raise CLIError(f"--decide-every is an option of --estimator auto, not {estimator}")
    chosen: str | Estimator = method
    if estimator is not None:
        chosen = spec.estimator(estimator)
        if decide_every:
            chosen = dataclasses.replace(chosen, decide_every=decide_every)
    budget = check_count("budget", budget, 0, 2**31 - 1, "the evaluation counter's range")
    check_seed(seed)
    start = time.perf_counter()
    # a rough per-iteration cost, only to decide whether a progress bar is worth showing
    guess = steps * (0.5 if spec.score is not None else 0.01) * (4 if estimator == "auto" else 1)
    with progress_bar(f"train {spec.name}", steps, guess, json_out) as advance:
        try:
            r = spec.train(chosen, key=jax.random.PRNGKey(seed), steps=steps,
                           budget=budget or None,
                           callback=lambda k: advance(completed=int(k)))  # fmt: skip
        except ValueError as err:  # e.g. a budget too small for one decision
            raise CLIError(str(err)) from None
        jax.block_until_ready(r)
    seconds = time.perf_counter() - start
    ran = int(r.steps_run)
    losses = np.asarray(r.history.loss, float)[:ran]  # L(θ_k) for the steps that ran
    loss, theta0 = spec.problem()
    loss0 = float(loss(theta0))
    out = {
        "task": spec.name,
        "method": method,
        "estimator": estimator,
        "sigma": spec.sigma if recipe else None,
        "samples": spec.num_samples if recipe else None,
        "decide_every": decide_every or None,
        "budget": budget or None,
        "iterations": steps,
        "iterations_run": ran,
        "dtype": precision_name(),
        "loss_initial": loss0,
        "loss_final": float(r.loss),
        "evaluations": int(r.evaluations),
        "loss_evaluations": int(r.loss_evaluations),
        "grad_evaluations": int(r.grad_evaluations),
        "status": status_name(r.status),
        "decisions": [d._asdict() for d in r.decisions],
        "seconds": seconds,
        "history": {"loss": losses.tolist()},
    }
    keys = ["loss_initial", "loss_final"]
    if spec.score is not None:
        out[spec.score_name.replace(" ", "_")] = float(spec.score(loss, r.theta))
    inputs = f"--task {spec.name} --method {method} --steps {steps} --seed {seed}"
    if robot is not None or not toi:
        inputs += f" --robot {robot or 'A'} --{'' if toi else 'no-'}toi"
    if estimator is not None:
        inputs += f" --estimator {estimator}"
    if decide_every:
        inputs += f" --decide-every {decide_every}"
    if budget:
        inputs += f" --budget {budget}"
    require_finite_answer(out, keys, inputs)
    if json_out:
        print_json(out)
        return
    _print_run(spec, out, losses, r.decisions)


def _task(spec: Task, robot: str | None, toi: bool) -> Task:
    """The task to train: ``spec``, or the mass-spring robot ``--robot`` with or without
    time of impact."""
    if spec.name != "mass-spring-robot":
        if robot is not None or not toi:
            raise CLIError("--robot and --no-toi are options of --task mass-spring-robot")
        return spec
    try:
        return robot_task(robot or "A", toi=toi)
    except (ValueError, TypeError) as err:  # a bad robot file: its path, field and index
        raise CLIError(str(err)) from None


def _check_method(method: str | None, estimator: str | None, decide_every: int) -> str:
    """The method to run: ``--method`` if given (checked against the choices and the
    recipe's flags), else recipe when an estimator or --decide-every is given, else
    decide."""
    if method is None:
        method = "recipe" if estimator is not None or decide_every else "decide"
    if method not in METHOD_CHOICES:
        raise CLIError(f"method must be one of {', '.join(METHOD_CHOICES)}, got {method!r}")
    if estimator is not None and estimator not in Task.estimators:
        raise CLIError(f"estimator must be one of {', '.join(Task.estimators)}, got {estimator!r}")
    if method != "recipe":
        given = [f"--{k}" for k, v in (("estimator", estimator), ("decide-every", decide_every))
                 if v]  # fmt: skip
        if given:
            raise CLIError(
                f"{', '.join(given)} set the recipe; --method {method} chooses its gradient "
                "and steps itself"
            )
    return method


def _print_run(spec: Task, out: dict, losses: np.ndarray, decisions: tuple) -> None:
    """The run as a table of losses, its decisions and one summary line."""
    ran, steps = out["iterations_run"], out["iterations"]
    if out["method"] == "recipe":
        title = f"{spec.name} with {out['estimator']}: σ = {spec.sigma:g}, N = {spec.num_samples}"
        if out["decide_every"]:
            title += f", deciding on one step in {out['decide_every']}"
    else:
        title = f"{spec.name} with {out['method']}"
    table = titled_table(title)
    table.add_column("iterate k", justify="right")
    table.add_column("loss L(θ_k)", justify="right")
    for k in sorted({0, ran // 4, ran // 2, (3 * ran) // 4} - {ran}):
        table.add_row(str(k), f"{losses[k]:.6g}")
    table.add_row(str(ran), f"{out['loss_final']:.6g}")
    console.print(table)
    for d in decisions:
        console.print(
            f"step {d.step:4d}, {d.evaluations:6d} evaluations: {d.method:6s} ({d.reason})"
        )
    stopped = "" if ran == steps else f" ({ran} of {steps} run)"
    line = (
        f"loss {out['loss_initial']:.6g} → {out['loss_final']:.6g} in {ran} iterations"
        f"{stopped}, {out['evaluations']} simulator evaluations, {out['seconds']:.1f} s"
    )
    if spec.score is not None:
        line += f"; {spec.score_name}: {out[spec.score_name.replace(' ', '_')]:.0%}"
    console.print(line)
    console.print(f"expected: {spec.expect}")
