"""``diffsim train``: a control task of the paper trained with any estimator.

A thin shell over :data:`diffsim.TASKS` (:meth:`diffsim.Task.train`).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
import typer

from .. import TASKS, Task
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


@app.command(name="train")
def train_cmd(
    task: str = typer.Option(..., "--task", help=_TASK_HELP),
    estimator: str = typer.Option(
        "auto", "--estimator", "-e", help=f"One of {', '.join(Task.estimators)} (σ, N: the task's)."
    ),
    steps: int = typer.Option(0, "--steps", help="Iterations (0: the experiment's)."),
    decide_every: int = typer.Option(
        0,
        "--decide-every",
        help="auto only: decide on one step in K, reuse the chosen "
        "estimator between (0: decide on every step).",
    ),
    budget: int = typer.Option(
        0,
        "--budget",
        help="Simulator evaluations at most (loss + gradient; the run stops within one "
        "step of it: to compare estimators at equal cost). 0: no budget.",
    ),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Train a control task (Suh et al.'s experiments; MuJoCo models through MJX) with one
    estimator and the task's recipe."""
    spec = TASKS[registry_choice("--task", task, TASKS)]
    if estimator not in Task.estimators:
        raise CLIError(f"estimator must be one of {', '.join(Task.estimators)}, got {estimator!r}")
    steps = check_count("steps", steps, 0, MAX_STEPS, "a run that long is for the API")
    steps = steps or spec.steps
    decide_every = check_count("decide-every", decide_every, 0, MAX_STEPS, "as --steps")
    if decide_every and estimator != "auto":
        raise CLIError(f"--decide-every is an option of --estimator auto, not {estimator}")
    est = spec.estimator(estimator)
    if decide_every:
        est = dataclasses.replace(est, decide_every=decide_every)
    budget = check_count("budget", budget, 0, 2**31 - 1, "the evaluation counter's range")
    check_seed(seed)
    start = time.perf_counter()
    # a rough per-iteration cost, only to decide whether a progress bar is worth showing
    guess = steps * (0.5 if spec.score is not None else 0.01) * (4 if estimator == "auto" else 1)
    with progress_bar(f"train {spec.name}", steps, guess, json_out) as advance:
        r = spec.train(est, key=jax.random.PRNGKey(seed), steps=steps, budget=budget or None,
                       callback=lambda k: advance(completed=int(k)))  # fmt: skip
        jax.block_until_ready(r)
    seconds = time.perf_counter() - start
    losses = np.asarray(r.history.loss, float)  # L(θ_k) for k = 0 … K − 1
    loss, theta0 = spec.problem()
    loss0 = float(loss(theta0))
    out = {
        "task": spec.name,
        "estimator": estimator,
        "sigma": spec.sigma,
        "samples": spec.num_samples,
        "decide_every": decide_every or None,
        "budget": budget or None,
        "iterations": steps,
        "iterations_run": int(np.sum(np.diff(np.asarray(r.history.evaluations), prepend=0) > 0)),
        "dtype": precision_name(),
        "loss_initial": loss0,
        "loss_final": float(r.loss),
        "evaluations": int(r.evaluations),
        "seconds": seconds,
        "history": {"loss": losses.tolist()},
    }
    keys = ["loss_initial", "loss_final"]
    if spec.score is not None:
        out[spec.score_name.replace(" ", "_")] = float(spec.score(loss, r.theta))
    inputs = f"--task {spec.name} --estimator {estimator} --steps {steps} --seed {seed}"
    if decide_every:
        inputs += f" --decide-every {decide_every}"
    if budget:
        inputs += f" --budget {budget}"
    require_finite_answer(out, keys, inputs)
    if json_out:
        print_json(out)
        return
    title = f"{spec.name} with {estimator}: σ = {spec.sigma:g}, N = {spec.num_samples}"
    if decide_every:
        title += f", deciding on one step in {decide_every}"
    table = titled_table(title)
    table.add_column("iterate k", justify="right")
    table.add_column("loss L(θ_k)", justify="right")
    for k in sorted({0, steps // 4, steps // 2, (3 * steps) // 4} - {steps}):
        table.add_row(str(k), f"{losses[k]:.6g}")
    table.add_row(str(steps), f"{out['loss_final']:.6g}")
    console.print(table)
    ran = "" if out["iterations_run"] == steps else f" ({out['iterations_run']} run: --budget)"
    line = (
        f"loss {loss0:.6g} → {out['loss_final']:.6g} in {steps} iterations{ran}, "
        f"{out['evaluations']} simulator evaluations, {seconds:.1f} s"
    )
    if spec.score is not None:
        line += f"; {spec.score_name}: {out[spec.score_name.replace(' ', '_')]:.0%}"
    console.print(line)
    console.print(f"expected: {spec.expect}")
