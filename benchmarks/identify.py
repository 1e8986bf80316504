"""System identification, side by side: ``diffsim.identify`` (Levenberg–Marquardt with the
exact Jacobian through the rollout) against SciPy's ``least_squares`` with finite-difference
Jacobians on the same simulator, residuals, data and starting points — and CMA-ES (``cma``)
as the black-box search, when installed.

    python -m benchmarks.identify [--seeds 5]

Evaluations are counted in rollouts of all recordings: SciPy's 2-point Jacobian costs p
rollouts, diffsim's forward-mode Jacobian p tangents, counted as p rollout-equivalents
(:attr:`diffsim.IdentifyResult.rollout_equivalents`). Wall times are of a warm call (the
simulator compiled once before timing, for every method alike). Medians over the seeds,
with the range.
"""

from __future__ import annotations

import argparse
import math
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

import diffsim  # noqa: E402
from diffsim.systems import bouncing_ball, mass_spring, mass_spring_drive, nonlinear_spring  # noqa: E402


def _task_spring(seed: int):
    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=0.0, c=0.3, x0=1.0)
    rec = diffsim.simulate_recording(
        sys.step, sys.s0, sys.theta, 400, noise=0.01, key=jax.random.key(seed)
    )
    params = diffsim.parse_parameters(
        "k, c", sys.theta, bounds={"k": (0, 20), "c": (0, 5)}, start={"k": 3.0, "c": 0.5}
    )
    return "mass-spring-damper k, c (σ = 0.01)", sys, rec, params, {"k": 4.0, "c": 0.3}, None


def _task_ball(seed: int):
    sys = bouncing_ball(h=1e-3, y0=1.0, vy0=0.0, g=9.81, e=0.8)
    obs = lambda s: {"qpos": s[0]}  # noqa: E731
    rec = diffsim.simulate_recording(
        sys.step, sys.s0, sys.theta, 2000, observe=obs, noise=0.005, key=jax.random.key(seed)
    )
    params = diffsim.parse_parameters(
        "e, g", sys.theta, bounds={"e": (0, 1), "g": (0, math.inf)}, start={"e": 0.7, "g": 9.0}
    )
    return (
        "bouncing ball e, g (TOI contact, σ = 5 mm)",
        sys,
        rec,
        params,
        {"e": 0.8, "g": 9.81},
        obs,
    )


def _task_chain(seed: int):
    sys = mass_spring(3)
    u = mass_spring_drive(300, 0.01)
    rec = diffsim.simulate_recording(
        sys.step, sys.s0, sys.theta, 300, inputs=u, noise=1e-3, key=jax.random.key(seed)
    )
    start = {f"m[{i}]": 1.2 * float(sys.theta["m"][i]) for i in range(3)}
    start |= {f"k[{i}]": float(sys.theta["k"][i]) / 1.2 for i in range(3)}
    params = diffsim.parse_parameters(
        list(start), sys.theta, bounds=dict.fromkeys(start, (0.0, math.inf)), start=start
    )
    truth = {f"m[{i}]": float(sys.theta["m"][i]) for i in range(3)}
    truth |= {f"k[{i}]": float(sys.theta["k"][i]) for i in range(3)}
    return "driven 3-mass chain, 6 parameters (σ = 1 mm)", sys, rec, params, truth, None


def _residual_fn(sys, rec, params, observe):
    """The same weighted residuals as identify's, from the public API: one jitted rollout."""
    observe = observe or diffsim.default_observe
    keys = list(rec.signals)
    y = {k: jnp.asarray(np.nan_to_num(np.asarray(rec.signals[k])[1:])) for k in keys}
    T = rec.num_steps

    @jax.jit
    def residuals(x):
        theta = dict(sys.theta)
        for j, p in enumerate(params):
            theta[p.field] = jnp.asarray(theta[p.field]).at[p.index].set(x[j])
        traj = diffsim.rollout(sys.step, rec.s0, theta, T, inputs=rec.inputs, include_initial=False)
        pred = jax.vmap(observe)(traj)
        return jnp.concatenate([(jnp.reshape(pred[k], y[k].shape) - y[k]).ravel() for k in keys])

    return residuals


def _error(est: dict[str, float], truth: dict[str, float]) -> float:
    return max(abs(est[n] - v) / abs(v) for n, v in truth.items())


def run_task(make, seeds: int) -> dict[str, list[tuple[float, float, float, float]]]:
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    name = ""
    for seed in range(seeds):
        name, sys, rec, params, truth, observe = make(seed)
        names = [p.label for p in params]
        # the fit alone (the doctor's finite-difference check of the final Jacobian, 10·p + 1
        # more rollouts, is off: SciPy does no such check)
        kw: dict = (
            {"check_jacobian": False}
            if observe is None
            else {"observe": observe, "check_jacobian": False}
        )
        diffsim.identify(sys.step, rec, sys.theta, params, **kw)  # compile
        res = diffsim.identify(sys.step, rec, sys.theta, params, **kw)
        rows.setdefault("diffsim.identify (exact Jacobian, LM)", []).append(
            (_error(res.theta, truth), res.residual, res.rollout_equivalents, res.seconds)
        )
        f = _residual_fn(sys, rec, params, observe)
        x0 = np.array([p.start for p in params])
        lo = np.array([p.lower for p in params])
        hi = np.array([p.upper for p in params])
        count = [0]

        def fun(x, f=f, count=count):
            count[0] += 1
            return np.asarray(f(jnp.asarray(x)))

        fun(x0)  # compile
        for method in ("trf", "lm"):
            count[0] = 0
            t = time.perf_counter()
            if method == "lm":  # MINPACK's LM: no bounds
                sol = least_squares(fun, x0, method="lm", xtol=1e-8, ftol=1e-8)
            else:
                sol = least_squares(fun, x0, bounds=(lo, hi), method="trf", xtol=1e-8, ftol=1e-8)
            dt = time.perf_counter() - t
            est = dict(zip(names, map(float, sol.x)))
            rms = float(np.sqrt(np.mean(sol.fun**2)))
            label = f"SciPy least_squares {method} (2-point FD)"
            rows.setdefault(label, []).append((_error(est, truth), rms, count[0], dt))
        try:
            import cma  # type: ignore[import-not-found]
        except ImportError:
            continue
        count[0] = 0
        t = time.perf_counter()
        es = cma.CMAEvolutionStrategy(
            x0,
            0.1 * float(np.max(np.abs(x0))),
            {"bounds": [lo, hi], "verbose": -9, "seed": seed + 1},
        )
        es.optimize(lambda x: float(np.sum(fun(x) ** 2)), iterations=2000)
        dt = time.perf_counter() - t
        xb = es.result.xbest
        est = dict(zip(names, map(float, xb)))
        rms = float(np.sqrt(np.mean(fun(xb) ** 2)))
        rows.setdefault("CMA-ES (cma)", []).append((_error(est, truth), rms, count[0], dt))
    print(f"\n## {name}\n")
    print("| method | max rel. parameter error | residual RMS | rollouts | wall s |")
    print("|---|---|---|---|---|")
    base = None
    for label, vals in rows.items():
        a = np.array(vals)
        med = np.median(a, axis=0)
        if base is None:
            base = med

        def cell(j, fmt, med=med, a=a):
            return (
                f"{format(med[j], fmt)} ({format(a[:, j].min(), fmt)}–{format(a[:, j].max(), fmt)})"
            )

        print(
            f"| {label} | {cell(0, '.2e')} | {cell(1, '.4g')} | {cell(2, '.0f')} "
            f"(×{med[2] / base[2]:.2f}) | {cell(3, '.3f')} (×{med[3] / base[3]:.2f}) |"
        )
    return rows


def figure(path: str) -> None:
    """The guide's figure: the bouncing ball's noisy heights, the simulation at the start
    and at the fit, and the cost and parameters over the iterations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, sys, rec, params, truth, obs = _task_ball(0)
    res = diffsim.identify(sys.step, rec, sys.theta, params, observe=obs)
    t = np.asarray(rec.time)
    start = dict(sys.theta, e=jnp.asarray(params[0].start), g=jnp.asarray(params[1].start))
    y0 = diffsim.rollout(sys.step, rec.s0, start, rec.num_steps)[0]
    y1 = diffsim.rollout(sys.step, rec.s0, res.theta_full, rec.num_steps)[0]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(
        t[::10],
        np.asarray(rec.signals["qpos"])[::10, 0],
        ".",
        ms=3,
        c="0.5",
        label="recorded (σ = 5 mm)",
    )
    ax[0].plot(t, y0, "--", c="tab:red", label="start: e = 0.7, g = 9.0")
    ax[0].plot(
        t, y1, c="tab:blue", label=f"fit: e = {res.theta['e']:.4f}, g = {res.theta['g']:.3f}"
    )
    ax[0].set(xlabel="t (s)", ylabel="height y (m)", title="observed vs simulated")
    ax[0].legend(fontsize=8)
    k = np.arange(len(res.history["cost"]))
    ax[1].semilogy(k, res.history["cost"], "o-")
    ax[1].set(xlabel="Levenberg–Marquardt step", ylabel="cost ½‖r‖²", title="cost")
    for j, (n, v) in enumerate(truth.items()):
        ax[2].plot(k, res.history["theta"][:, j] / v, "o-", label=f"{n} / true {n}")
    ax[2].axhline(1.0, c="k", lw=0.8)
    ax[2].set(xlabel="Levenberg–Marquardt step", ylabel="estimate / truth", title="parameters")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    print(res)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tasks", default="spring,ball,chain")
    parser.add_argument("--figure", help="write the guide's figure (a .png path) and stop")
    args = parser.parse_args()
    if args.figure:
        figure(args.figure)
        return
    tasks = {"spring": _task_spring, "ball": _task_ball, "chain": _task_chain}
    print(
        f"diffsim {diffsim.__version__}, jax {jax.__version__}, {args.seeds} seeds; medians (range)"
    )
    for name in args.tasks.split(","):
        run_task(tasks[name], args.seeds)


if __name__ == "__main__":
    main()
