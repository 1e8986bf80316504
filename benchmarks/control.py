"""Training a controller through contact: the tennis task with every estimator.

    python -m benchmarks.control [--seeds 3] [--steps 300] [--samples 200] [--sigma 0.05]

The tennis task (:mod:`diffsim.systems.tennis`): a linear policy Θ ∈ R^{3×7} from Θ = 0,
trained by ``diffsim.optimize`` (its default Adam schedule, σ fixed) with FoBG, ZoBG, AoBG
and ``auto`` in the policy setting (noise on every step's action, N samples each, every
sample its own initial state). Reported per estimator, medians over the seeds with the
range: the noise-free cost over 64 fixed initial states, the fraction of 200 held-out balls
returned (ending within 0.5 m of the target), the simulator evaluations and the wall time.
Not yet here (issue 21): Brax APG and an evolution strategy at equal simulator steps.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import diffsim
from diffsim.estimators import AlphaOrder, Auto, FirstOrder, ZerothOrder
from diffsim.systems import tennis

HELD_OUT = jax.random.PRNGKey(123)


def run(seeds: int, steps: int, samples: int, sigma: float) -> list[str]:
    obj = tennis.objective(num_states=64)
    theta0 = jnp.zeros((3, 7))
    rows = [
        f"tennis: Θ = 0 costs {float(obj(theta0)):.1f} and returns "
        f"{float(tennis.returned(obj, theta0, HELD_OUT)):.0%}; {steps} steps, N = {samples}, "
        f"σ = {sigma} (action units), {seeds} seeds: median [min, max]",
        f"{'estimator':<10} {'cost':>28} {'returned':>22} {'evaluations':>12} {'time s':>7}",
    ]
    estimators = {
        "FoBG": FirstOrder(sigma=sigma, num_samples=samples),
        "ZoBG": ZerothOrder(sigma=sigma, num_samples=samples),
        "AoBG": AlphaOrder(sigma=sigma, num_samples=samples),
        "auto": Auto(sigma=sigma, num_samples=samples),
    }
    for name, est in estimators.items():
        costs, fracs, evals, times = [], [], [], []
        for seed in range(seeds):
            t = time.perf_counter()
            r = diffsim.optimize(obj, theta0, est, steps=steps, key=jax.random.PRNGKey(seed),
                                 sigma_anneal=None)  # fmt: skip
            jax.block_until_ready(r.theta)
            times.append(time.perf_counter() - t)
            costs.append(float(r.loss))
            fracs.append(float(tennis.returned(obj, r.theta, HELD_OUT)))
            evals.append(int(r.evaluations))

        def spread(v, fmt):
            return f"{fmt(np.median(v))} [{fmt(min(v))}, {fmt(max(v))}]"

        rows.append(
            f"{name:<10} {spread(costs, lambda c: f'{c:.1f}'):>28} "
            f"{spread(fracs, lambda f: f'{f:.0%}'):>22} {int(np.median(evals)):>12} "
            f"{np.median(times):>7.1f}"
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--sigma", type=float, default=0.05)
    a = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    rows = run(a.seeds, a.steps, a.samples, a.sigma)
    print("\n".join(rows[:2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
