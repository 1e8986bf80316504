"""What the doctor's first-/zeroth-order gap test sees where FoBG turns back up on friction.

On the paper's friction task FoBG's loss falls to ~7,300 by iteration 20 and then climbs,
and ``auto`` follows it: it trusts the exact gradient on every step. This run asks why, at
FoBG's own iterates (seed 0, the task's recipe, through the public API):

* ``auto``'s verdict and its gap statistic z (the largest per-coordinate gap beyond
  η‖ḡ⁰‖, in standard errors) at the task's N = 10 and at N = 64 and 512;
* the smoothed gradient ḡ⁰ itself, from ZoBG with N = 4000 twice (two keys: how well it is
  known), and its cosine with the exact gradient ∇L;
* the gap in norm: ‖ḡ¹ − ḡ⁰‖² less its noise ΣSE² (an unbiased estimate of the squared
  gap), its standard deviation, and the tolerance (η‖ḡ⁰‖)² the doctor's definition names.

    python -m benchmarks.verdict_gap [--iterates 0 20 40] [--samples 4000]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from diffsim import TASKS  # noqa: E402
from diffsim.doctor import Thresholds  # noqa: E402
from diffsim.estimators import Auto, FirstOrder, ZerothOrder  # noqa: E402


def _cos(a: jax.Array, b: jax.Array) -> float:
    return float(a @ b / (jnp.linalg.norm(a) * jnp.linalg.norm(b)))


def _norm_gap(loss, theta, sigma, n, eta, antithetic):
    """ZoBG (returned) and FoBG with N samples each and the squared gap in norm: its unbiased
    estimate ‖ḡ¹ − ḡ⁰‖² − ΣSE², that estimate's standard deviation and the tolerance (η‖ḡ⁰‖)²."""
    z = ZerothOrder(sigma=sigma, num_samples=n, antithetic=antithetic)(
        loss, theta, jax.random.PRNGKey(3)
    )
    f = FirstOrder(sigma=sigma, num_samples=n)(loss, theta, jax.random.PRNGKey(5))
    d = f.estimate - z.estimate
    v = z.std_error**2 + f.std_error**2
    excess = float(d @ d - jnp.sum(v))
    sd = float(jnp.sqrt(2 * jnp.sum(v**2) + 4 * jnp.sum(d**2 * v)))
    return z, (excess, sd, float((eta * jnp.linalg.norm(z.estimate)) ** 2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=str(__doc__).splitlines()[0])
    p.add_argument("--iterates", type=int, nargs="+", default=[0, 20, 40])
    p.add_argument("--samples", type=int, default=4000, help="N of the reference ZoBG/FoBG")
    args = p.parse_args(argv)
    task = TASKS["friction"]
    loss, _ = task.problem()
    eta = Thresholds().gap_tolerance
    t0 = time.perf_counter()
    run = task.train("first", key=jax.random.PRNGKey(0))
    thetas, losses = run.history.theta, run.history.loss
    print(f"# python -m benchmarks.verdict_gap --iterates {' '.join(map(str, args.iterates))} "
          f"--samples {args.samples}   (friction, FoBG seed 0 with the task's recipe; "
          f"σ = {task.sigma:g}, η = {eta:g}, {thetas.shape[1]} parameters)")  # fmt: skip
    print("FoBG's loss every 5 iterations: "
          + " ".join(f"{float(v):.0f}" for v in losses[::5]))  # fmt: skip
    for k in args.iterates:
        th = thetas[k]
        g = jax.grad(loss)(th)
        verdicts = []
        for n in (task.num_samples, 64, 512):
            e = Auto(sigma=task.sigma, num_samples=n, max_samples=max(n, 512))(
                loss, th, jax.random.PRNGKey(1)
            )
            verdicts.append(f"N={n}: {e.choice_name} z={float(e.z_gap):.2f}")
        n = args.samples
        za, (excess, sd, tol2) = _norm_gap(loss, th, task.sigma, n, eta, antithetic=False)
        zb = ZerothOrder(sigma=task.sigma, num_samples=n)(loss, th, jax.random.PRNGKey(4))
        norm_z = []
        for m in (task.num_samples, 64, 512):  # the same families auto draws at its N
            _, (ex, s, t2) = _norm_gap(loss, th, task.sigma, m, eta, antithetic=True)
            norm_z.append(f"N={m}: z={(ex - t2) / s:.1f}")
        print(f"iterate {k}: L = {float(losses[k]):.1f}; auto {'; '.join(verdicts)}")
        print(f"  ZoBG N={n}: cos(two keys) = {_cos(za.estimate, zb.estimate):.2f}, "
              f"cos(∇L, ḡ⁰) = {_cos(g, za.estimate):.2f}, ‖∇L‖ = {float(jnp.linalg.norm(g)):.0f}, "
              f"‖ḡ⁰‖ = {float(jnp.linalg.norm(za.estimate)):.0f}")  # fmt: skip
        print(f"  gap in norm, N={n}: ‖ḡ¹−ḡ⁰‖² − ΣSE² = {excess:.3g} ± {sd:.2g}, "
              f"(η‖ḡ⁰‖)² = {tol2:.3g}, z = {(excess - tol2) / sd:.1f}; "
              f"at auto's sizes (antithetic ZoBG): {'; '.join(norm_z)}")  # fmt: skip
    print(f"# {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
