"""Reproduce Suh et al.'s finding on diffsim's set-ups: which gradient estimator wins.

Run: ``python examples/estimator_comparison.py`` (prints markdown tables, writes
``docs/figures/estimator_comparison.png``). Every optimisation is one ``lax.scan``; the
starts (or seeds) are ``vmap``-ped.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import optax

from diffsim import optimize
from diffsim.estimators import ESTIMATORS, make_estimator
from diffsim.optimization import cosine_anneal
from diffsim.systems import SYSTEMS, pushing, wall_study

NAMES = tuple(name for name, cls in ESTIMATORS.items() if not cls.diagnostic)
"""Every registered estimator but the diagnostic ones (finite differences)."""
SAMPLES = 8  # per step: ZoBG and FoBG use N; AoBG uses N/2 of each (same budget)


def build(name: str, sigma: float):
    """The estimator with σ and N where it takes them; one that draws both sample families
    (it reports both families' variances: AoBG) gets N/2 of each, for the same budget."""
    cls = ESTIMATORS[name]
    families = 2 if {"zeroth_variance", "first_variance"} <= set(cls.reports) else 1
    given = {"sigma": sigma, "num_samples": SAMPLES // families}
    return make_estimator(name, **{k: v for k, v in given.items() if cls.takes(k)})


def wall(sigma: float, starts: np.ndarray) -> dict:
    """Success rate and evaluations from each start on the time-stepped wall."""
    study = SYSTEMS["wall"].study
    assert study is not None
    landing = study.outcome
    out = {}
    keys = jax.random.split(jax.random.PRNGKey(0), len(starts))
    for name in NAMES:
        est = build(name, sigma)
        run = jax.jit(jax.vmap(lambda v, k, est=est: wall_study.optimize_wall(v, est, key=k)))
        r = run(jnp.asarray(starts), keys)
        x = np.asarray(landing(r.theta))
        ok = np.abs(x - study.target) <= study.tolerance
        hist_x = np.asarray(landing(r.history.theta))  # (starts, steps)
        within = np.abs(hist_x - study.target) <= study.tolerance
        first = np.where(within.any(1), within.argmax(1), -1)
        evals = np.asarray(r.history.evaluations)
        to_hit = [evals[i, f] for i, f in enumerate(first) if f >= 0]
        out[name] = {
            "success": ok,
            "evals": int(np.asarray(r.evaluations)[0]),
            "evals_to_target": float(np.mean(to_hit)) if to_hit else float("nan"),
            "final_v0": np.asarray(r.theta),
        }
    return out


def push(ks, seeds: int = 8, steps: int = 200) -> dict:
    """Final loss of trajectory optimisation (50 pusher velocities) for each stiffness."""
    u0 = pushing.initial_controls(speed=0.5)
    out = {}
    for k in ks:
        row = {}
        for name in NAMES:
            est = build(name, 0.1)

            def run(key, est=est, k=k):
                return optimize(
                    lambda u: pushing.push_loss(u, k),
                    u0,
                    est,
                    steps=steps,
                    key=key,
                    optimizer=optax.adam(0.02),
                )

            r = jax.jit(jax.vmap(run))(jax.random.split(jax.random.PRNGKey(1), seeds))
            row[name] = (float(jnp.mean(r.loss)), float(jnp.std(r.loss)), int(r.evaluations[0]))
        out[k] = row
    return out


def heaviside_task(starts: np.ndarray, steps: int = 200) -> dict:
    """ "Drop a ball": L(θ) = 1 on θ < 0 (a flat region), 0.1 (θ − 1)² on θ >= 0."""

    def loss(t):
        return jnp.where(t < 0, 1.0, 0.1 * (t - 1.0) ** 2)

    out = {}
    keys = jax.random.split(jax.random.PRNGKey(2), len(starts))
    for name in NAMES:
        est = build(name, 0.5)

        def run(t0, key, est=est):
            return optimize(
                loss,
                t0,
                est,
                steps=steps,
                key=key,
                optimizer=optax.adam(optax.cosine_decay_schedule(0.1, steps, 0.05)),
                sigma_schedule=cosine_anneal(0.5, 0.02, steps, 0.6),
            )

        r = jax.jit(jax.vmap(run))(jnp.asarray(starts), keys)
        ok = np.abs(np.asarray(r.theta) - 1.0) <= 0.05
        out[name] = {"success": ok, "evals": int(np.asarray(r.evaluations)[0])}
    return out


def main() -> None:
    starts = np.linspace(4.0, 13.0, 24)
    plateau = (starts > 7.67) & (starts < 9.396)
    print(f"## Wall: {len(starts)} starts in [4, 13] m/s ({plateau.sum()} on the plateau)\n")
    wall_results = {}
    recipe = wall_study.RECIPE
    for sigma in (recipe.sigma, 0.2):
        res = wall(sigma, starts)
        wall_results[sigma] = res
        print(f"σ₀ = {sigma} (annealed to {recipe.sigma_end}), {recipe.steps} steps\n")
        print(
            "| estimator | success (all) | success (plateau) | evaluations | evals to first hit |"
        )
        print("|---|---|---|---|---|")
        for name, r in res.items():
            s = r["success"]
            print(
                f"| {name} | {s.mean():.0%} ({s.sum()}/{len(s)}) | "
                f"{s[plateau].mean():.0%} | {r['evals']} | {r['evals_to_target']:.0f} |"
            )
        print()
    ks = (10.0, 100.0, 1000.0, 10000.0)
    push_results = push(ks)
    print("## Stiff pushing: final loss (mean ± sd over 8 seeds), 200 Adam steps\n")
    print("| k | " + " | ".join(NAMES) + " | best randomized |")
    print("|---|" + "---|" * (len(NAMES) + 1))
    for k, row in push_results.items():
        best = min(("first", "zeroth", "alpha"), key=lambda n: row[n][0])
        cells = " | ".join(f"{row[n][0]:.2e} ± {row[n][1]:.1e}" for n in NAMES)
        print(f"| {k:g} | {cells} | {best} |")
    print("\nevaluations per run: " + ", ".join(f"{n} {push_results[ks[0]][n][2]}" for n in NAMES))
    h_starts = np.linspace(-2.0, 3.0, 21)
    heav = heaviside_task(h_starts)
    flat = h_starts < 0
    print("\n## Heaviside drop: 21 starts in [-2, 3], success = |θ − 1| <= 0.05\n")
    print("| estimator | success (all) | success (flat θ<0) | evaluations |")
    print("|---|---|---|---|")
    for name, r in heav.items():
        s = r["success"]
        print(f"| {name} | {s.mean():.0%} | {s[flat].mean():.0%} | {r['evals']} |")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for name in NAMES:
        ax.plot(
            starts, wall_results[wall_study.RECIPE.sigma][name]["final_v0"], "o-", ms=3, label=name
        )
    ax.axhline(9.905, color="k", lw=0.5)
    ax.axvspan(7.67, 9.396, color="0.9")
    ax.set(xlabel="start v0 (m/s)", ylabel="final v0 (m/s)", title="Wall: final speed (σ₀ = 0.7)")
    ax.legend()
    ax = axes[1]
    width = 0.2
    for i, name in enumerate(NAMES):
        rates = [wall_results[s][name]["success"].mean() for s in wall_results]
        ax.bar(np.arange(len(rates)) + i * width, rates, width, label=name)
    ax.set_xticks(np.arange(len(wall_results)) + 1.5 * width, [f"σ₀={s}" for s in wall_results])
    ax.set(ylabel="success rate", title="Wall: landing within 5 cm")
    ax = axes[2]
    for name in NAMES:
        ax.loglog(ks, [push_results[k][name][0] for k in ks], "o-", label=name)
    ax.set(xlabel="stiffness k (N/m)", ylabel="final loss", title="Stiff pushing")
    ax.legend()
    fig.tight_layout()
    fig.savefig("docs/figures/estimator_comparison.png", dpi=120)
    print("\nwrote docs/figures/estimator_comparison.png")


if __name__ == "__main__":
    main()
