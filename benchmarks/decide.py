"""The default ``optimize`` (``diffsim.Decide``) on the article's wall, from many starts.

    python -m benchmarks.decide [--starts 24] [--no-baseline]

Each start v0 in [4.5, 13.5] m/s (the wall study's range; seed = start index) runs
``diffsim.optimize(pw.loss, v0, key=...)`` as a user writes it: the evidence picks the
method. A run succeeds when it lands within 5 cm of the target. Printed per start: the
final v0, the landing point, the evaluations (loss + gradient, the checks included) and
the decisions; then the summary against the previous default measured in the same run,
``optimize(pw.loss, v0, Auto(), key=...)`` (Auto on every step, Adam at 2.5 % of |v0|
cosine-decayed over 300 steps, σ annealed to 5 %), its evaluations counted the same way.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import diffsim
from diffsim.estimators import Auto
from diffsim.systems import projectile_wall as pw

TOLERANCE = 0.05  # m: the wall study's success


def _run(v0: float, seed: int, baseline: bool) -> tuple[float, float, int, str]:
    key = jax.random.PRNGKey(seed)
    if baseline:
        r = diffsim.optimize(pw.loss, jnp.asarray(v0), Auto(), key=key)
    else:
        r = diffsim.optimize(pw.loss, jnp.asarray(v0), key=key)
    v = float(r.theta)
    x = float(pw.landing_x(v)) if 0.0 <= v <= 24.0 else float("nan")
    path = " → ".join(d.method for d in r.decisions)
    return v, x, int(r.evaluations), path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--starts", type=int, default=24, help="starts in [4.5, 13.5] m/s (>= 1)")
    p.add_argument("--no-baseline", action="store_true", help="skip the previous default")
    args = p.parse_args(argv)
    if args.starts < 1:
        p.error("--starts must be >= 1")
    jax.config.update("jax_enable_x64", True)
    starts = np.linspace(4.5, 13.5, args.starts)
    rows = {}
    for name, baseline in (("default (Decide)", False), ("previous default (Auto+Adam)", True)):
        if baseline and args.no_baseline:
            continue
        t0 = time.perf_counter()
        runs = [_run(float(v), i, baseline) for i, v in enumerate(starts)]
        rows[name] = (runs, time.perf_counter() - t0)
        print(f"## {name}")
        for v0, (v, x, n, path) in zip(starts, runs):
            ok = abs(x - pw.TARGET) <= TOLERANCE
            print(f"v0 {v0:6.3f} -> {v:7.4f}  x {x:8.4f}  {'ok  ' if ok else 'MISS'}  "
                  f"evaluations {n:6d}  {path}")  # fmt: skip
        print()
    print("| method | landed (±5 cm) | evaluations: median | max | basin starts (v0 > 9.9): max"
          " | wall time |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, (runs, seconds) in rows.items():
        evals = np.array([n for _, _, n, _ in runs])
        landed = sum(abs(x - pw.TARGET) <= TOLERANCE for _, x, _, _ in runs)
        basin = evals[starts > 9.9]
        print(f"| {name} | {landed}/{len(runs)} | {int(np.median(evals))} | {int(evals.max())} |"
              f" {int(basin.max()) if basin.size else '—'} | {seconds:.0f} s |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
