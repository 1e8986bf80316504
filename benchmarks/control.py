"""Training a controller through contact: the paper's control tasks with every estimator.

    python -m benchmarks.control [--task tennis] [--seeds 3] [--steps S] [--samples N] [--sigma σ]
    python -m benchmarks.control --task push-soft push-stiff friction --seeds 5

Each task of :data:`diffsim.TASKS` trained by :meth:`diffsim.Task.train` — the paper's
recipe for it (σ, N, optimiser, iterations; ``--steps/--samples/--sigma`` override them) —
with FoBG, ZoBG, AoBG and ``auto`` from the task's start. Reported per estimator, medians over
the seeds with the range: the final noise-free loss, the task's score where it has one (tennis:
the fraction of 200 held-out balls returned), the simulator evaluations and the wall time.
Tennis (:mod:`diffsim.systems.tennis`): a linear policy Θ ∈ R^{3×7} from Θ = 0, noise on every
step's action, every sample its own initial state; the loss is the cost over 64 fixed initial
states. The trajectory optimisations (:mod:`diffsim.systems.box_trajopt`): the forces on each
step, plain gradient descent with the paper's constant step.
Not yet here (issue 21): Brax APG and an evolution strategy at equal simulator steps.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import numpy as np

from diffsim import TASKS
from diffsim.estimators import make_estimator

NAMES = {"first": "FoBG", "zeroth": "ZoBG", "alpha": "AoBG", "auto": "auto"}


def run(task: str, seeds: int, steps: int | None, samples: int | None,
        sigma: float | None) -> list[str]:  # fmt: skip
    spec = TASKS[task]
    sigma = spec.sigma if sigma is None else sigma
    samples = spec.num_samples if samples is None else samples
    steps = spec.steps if steps is None else steps
    loss, theta0 = spec.build()
    start = f"{task}: the start costs {float(loss(theta0)):.1f}"
    if spec.score is not None:
        start += f" and scores {float(spec.score(loss, theta0)):.0%} ({spec.score_name})"
    opt = "Adam (optimize's default)" if spec.learning_rate is None else (
        f"gradient descent, step {spec.learning_rate:g}")  # fmt: skip
    rows = [
        f"{start}; {steps} steps of {opt}, N = {samples}, σ = {sigma}, {seeds} seeds: "
        "median [min, max]",
        f"{'estimator':<10} {'loss':>28} {'score':>22} {'evaluations':>12} {'time s':>7}",
    ]
    for name, label in NAMES.items():
        est = make_estimator(name, sigma=sigma, num_samples=samples)
        costs, fracs, evals, times = [], [], [], []
        for seed in range(seeds):
            t = time.perf_counter()
            r = spec.train(est, key=jax.random.PRNGKey(seed), steps=steps)
            jax.block_until_ready(r.theta)
            times.append(time.perf_counter() - t)
            costs.append(float(r.loss))
            if spec.score is not None:
                fracs.append(float(spec.score(loss, r.theta)))
            evals.append(int(r.evaluations))

        def spread(v, fmt):
            return f"{fmt(np.median(v))} [{fmt(min(v))}, {fmt(max(v))}]" if v else "—"

        rows.append(
            f"{label:<10} {spread(costs, lambda c: f'{c:.1f}'):>28} "
            f"{spread(fracs, lambda f: f'{f:.0%}'):>22} {int(np.median(evals)):>12} "
            f"{np.median(times):>7.1f}"
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", nargs="+", default=["tennis"], choices=list(TASKS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--samples", type=int, default=None)
    p.add_argument("--sigma", type=float, default=None)
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    for task in a.task:
        rows = run(task, a.seeds, a.steps, a.samples, a.sigma)
        print("\n".join(rows), flush=True)  # the whole table, header first, for the record
    return 0


if __name__ == "__main__":
    sys.exit(main())
