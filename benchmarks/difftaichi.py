"""DiffTaichi itself against diffsim on DiffTaichi's two examples: billiards and the
mass-spring robots.

    python -m benchmarks.difftaichi [--robots A B C] [--seeds 5] [--iterations 100]
                                    [--billiards-iterations 200] [--no-decide] [--plot-only]

DiffTaichi's side is taichi from PyPI (the ``bench`` extra) running DiffTaichi's kernels,
ported to the current taichi API in :mod:`benchmarks._taichi_billiards` and
:mod:`benchmarks._taichi_mass_spring`, on the CPU backend in float32, each run in its own
process (taichi's fields are global to a process). diffsim's side is the public API a user
writes: :func:`diffsim.systems.billiards.train` and ``billiards_loss``;
``mass_spring_robot.problem`` with ``diffsim.optimize(loss, θ₀, Exact(), steps=100,
optimizer=normalised_descent(0.2))`` (DiffTaichi's recipe, what ``mass_spring_robot.train``
runs), float32.

Same constants and the same start on both sides: a robot's seed s gives θ₀ =
``mass_spring_robot.controller_init(robot, PRNGKey(s))`` (DiffTaichi's scales), handed to the
taichi port as arrays, so both descend from identical weights. Billiards has no random
element on either side (the cue starts at (0.1, 0.5) moving at (0.3, 0)): one run stands
for every seed. "With TOI" is each side's own time of impact: DiffTaichi's ground TOI for
the robots (the same formula on both sides), for billiards DiffTaichi's linearised impact
time (its ``x_inc``) against diffsim's exact one; "without" is the same step with no TOI
term on both sides (DiffTaichi's ``advance_no_toi``; its billiards step minus ``x_inc``).

Reported: the loss at the last iteration (iteration 100 for the robots, 200 for billiards:
the loss before that iteration's update, as DiffTaichi prints it), median and range over the
seeds; seconds per iteration — DiffTaichi: the median wall time of an iteration after the
first (clear, forward, backward through ``ti.ad.Tape``, update; the first compiles the
kernels), diffsim: the median of ``jax.jit(jax.value_and_grad(loss))`` after compiling,
on seed 0's θ₀ —
and their ratio; the whole run's wall time, compiling included, on both sides. With
``--no-decide`` left out, also diffsim's default method (``diffsim.optimize(loss, θ₀,
key=...)``, :class:`~diffsim.Decide`) from the same start with TOI: the iterations and
simulator evaluations it takes to reach DiffTaichi's final loss (DiffTaichi: one evaluation,
value and gradient, per iteration).

Writes ``docs/records/difftaichi.txt`` (the command and the table),
``docs/records/difftaichi.json`` (every curve) and the figures
``docs/figures/difftaichi-curves.png`` and ``docs/figures/robot-gait.png``;
``--plot-only`` redraws the figures from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "records" / "difftaichi.txt"
CURVES = ROOT / "docs" / "records" / "difftaichi.json"
FIGURES = ROOT / "docs" / "figures"
TIMING_REPEATS = 10
"""diffsim's value-and-gradient calls timed per configuration (after one that compiles)."""


# -- pure helpers (tests/test_difftaichi_bench.py) ---------------------------------------


def summarise(values: list[float]) -> tuple[float, float, float]:
    """``(median, min, max)`` of the values."""
    return float(statistics.median(values)), float(min(values)), float(max(values))


def first_reaching(curve: list[float] | np.ndarray, target: float) -> int | None:
    """The first iteration k whose loss is at or below ``target`` (None: never)."""
    hits = np.flatnonzero(np.asarray(curve, np.float64) <= target)
    return int(hits[0]) if hits.size else None


def fmt_range(values: list[float]) -> str:
    """``"median [min, max]"`` with four significant digits."""
    med, lo, hi = summarise(values)
    return f"{med:.4g} [{lo:.4g}, {hi:.4g}]"


def last_json_line(stdout: str) -> dict[str, Any]:
    """The JSON object a taichi port prints last (taichi prints its banner before it)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON result in the taichi port's output: {stdout[-500:]!r}")


# -- DiffTaichi's side: the taichi ports, each in its own process ---------------------------


def run_taichi(module: str, args: list[str]) -> dict[str, Any]:
    """Run ``python -m benchmarks.<module> args`` and return its JSON result."""
    cmd = [sys.executable, "-m", f"benchmarks.{module}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return last_json_line(r.stdout)


def robot_file(robot: Any, theta: dict[str, Any], path: Path) -> Path:
    """Write a robot and the controller's weights for :mod:`benchmarks._taichi_mass_spring`."""
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in theta.items()}
    arrays["points"] = np.asarray(robot.points)
    arrays["springs"] = np.asarray(robot.springs(), np.float64)
    np.savez(path, **arrays)
    return path


def taichi_robot(
    robot: Any, theta: dict[str, Any], toi: bool, iterations: int, f64: bool = False
) -> dict[str, Any]:
    """DiffTaichi's recipe on ``robot`` from ``theta`` in the taichi port."""
    with tempfile.TemporaryDirectory() as tmp:
        path = robot_file(robot, theta, Path(tmp) / "robot.npz")
        flags = ([] if toi else ["--no-toi"]) + (["--f64"] if f64 else [])
        return run_taichi(
            "_taichi_mass_spring", [str(path), "--iterations", str(iterations), *flags]
        )


def taichi_billiards(toi: bool, iterations: int, f64: bool = False) -> dict[str, Any]:
    """DiffTaichi's billiards recipe in the taichi port."""
    flags = ([] if toi else ["--no-toi"]) + (["--f64"] if f64 else [])
    return run_taichi("_taichi_billiards", ["--iterations", str(iterations), *flags])


# -- diffsim's side -----------------------------------------------------------------------


def _seconds_per_gradient(loss: Any, theta: Any) -> float:
    import jax

    f = jax.jit(jax.value_and_grad(loss))
    jax.block_until_ready(f(theta))
    times = []
    for _ in range(TIMING_REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(f(theta))
        times.append(time.perf_counter() - start)
    return float(statistics.median(times))


def diffsim_robot(
    name: str, seed: int, toi: bool, iterations: int, decide: bool, timed: bool = True
) -> dict:
    """diffsim's recipe (and optionally its default method) on robot ``name`` from seed;
    ``timed``: also time its value and gradient (``s_per_it``)."""
    import jax

    import diffsim
    from diffsim.estimators import Exact
    from diffsim.systems import mass_spring_robot as msr

    robot = msr.Robot.builtin(name)
    loss, theta0 = msr.problem(robot, jax.random.PRNGKey(seed), toi=toi)
    key = jax.random.PRNGKey(seed)
    start = time.perf_counter()
    r = diffsim.optimize(
        loss,
        theta0,
        Exact(),
        steps=iterations,
        key=key,
        optimizer=msr.normalised_descent(msr.RECIPE.step_size),
    )
    curve = np.asarray(r.history.loss).tolist()
    out = {"losses": curve, "wall": time.perf_counter() - start, "theta0": theta0, "theta": r.theta}
    if timed:
        out["s_per_it"] = _seconds_per_gradient(loss, theta0)
    if decide:
        d = diffsim.optimize(loss, theta0, steps=iterations, key=key)
        out["decide"] = {
            "losses": np.asarray(d.history.loss).tolist(),
            "evaluations": np.asarray(d.history.evaluations).tolist(),
            "methods": [x.method for x in d.decisions],
        }
    return out


def diffsim_billiards(toi: bool, iterations: int, decide: bool) -> dict:
    """diffsim's billiards recipe (and optionally its default method)."""
    import jax

    import diffsim
    from diffsim.systems import billiards

    start = time.perf_counter()
    r = billiards.train(toi, steps=iterations)
    out = {"losses": np.asarray(r.history.loss).tolist(), "wall": time.perf_counter() - start}
    theta0 = {k: np.asarray(v, np.float32) for k, v in billiards.THETA0.items()}
    out["s_per_it"] = _seconds_per_gradient(lambda t: billiards.billiards_loss(t, toi), theta0)
    if decide:
        d = diffsim.optimize(
            lambda t: billiards.billiards_loss(t, toi),
            theta0,
            steps=iterations,
            key=jax.random.PRNGKey(0),
        )
        out["decide"] = {
            "losses": np.asarray(d.history.loss).tolist(),
            "evaluations": np.asarray(d.history.evaluations).tolist(),
            "methods": [x.method for x in d.decisions],
        }
    return out


# -- the run ------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(
    robots: list[str],
    seeds: int,
    iterations: int,
    billiards_iterations: int,
    decide: bool,
    save: Any = None,
) -> dict:
    """Every configuration on both sides; the curves and timings as one JSON-able dict.

    Billiards first, then the robots seed by seed (seed 0 of every robot with and without
    TOI, then seed 1, ...), ``save(results, done)`` called after each configuration, so that
    a run cut short leaves a coherent record of the seeds it finished.
    """
    import jax

    from diffsim.systems import mass_spring_robot as msr

    results: dict[str, Any] = {"meta": {"jax": jax.__version__, "taichi": "?"}}
    for toi in (True, False):
        tag = f"billiards/{'toi' if toi else 'no-toi'}"
        _log(f"[difftaichi] {tag}")
        ti_run = taichi_billiards(toi, billiards_iterations)
        results["meta"]["taichi"] = ti_run.get("taichi", "?")
        ds = diffsim_billiards(toi, billiards_iterations, decide and toi)
        results[tag] = {"taichi": [ti_run], "diffsim": [ds]}
        if save is not None:
            save(results, False)
    for seed in range(seeds):
        for name in robots:
            robot = msr.Robot.builtin(name)
            for toi in (True, False):
                tag = f"robot {name}/{'toi' if toi else 'no-toi'}"
                _log(f"[difftaichi] {tag} seed {seed}")
                ds = diffsim_robot(name, seed, toi, iterations, decide and toi, seed == 0)
                theta0, theta = ds.pop("theta0"), ds.pop("theta")
                if "gait" not in results and toi:
                    x, _ = msr.rollout(robot, theta, toi=True)
                    results["gait"] = {
                        "robot": name,
                        "seed": seed,
                        "x": np.asarray(x)[::8].tolist(),
                        "springs": robot.springs(),
                    }
                entry = results.setdefault(tag, {"taichi": [], "diffsim": []})
                entry["taichi"].append(taichi_robot(robot, theta0, toi, iterations))
                entry["diffsim"].append(ds)
                if save is not None:
                    save(results, False)
    if save is not None:
        save(results, True)
    return results


def _decide_cell(sides: dict) -> str:
    """Iterations and evaluations diffsim's default method takes to DiffTaichi's final loss."""
    hits, evals, taichi_hits = [], [], []
    for ti_run, ds in zip(sides["taichi"], sides["diffsim"]):
        target = ti_run["losses"][-1]
        taichi_hits.append(first_reaching(ti_run["losses"], target))
        k = first_reaching(ds["decide"]["losses"], target)
        if k is not None:
            hits.append(k)
            evals.append(ds["decide"]["evaluations"][k - 1] if k > 0 else 0)
    n = len(sides["taichi"])
    if not hits:
        return f"not reached (0/{n})"
    med_it, med_ev = statistics.median(hits), statistics.median(evals)
    return (
        f"{med_it:g} iterations, {med_ev:g} evaluations ({len(hits)}/{n} reached); "
        f"DiffTaichi: {statistics.median(taichi_hits):g}"
    )


def table(results: dict) -> str:
    """The markdown tables of the record."""
    head = (
        "| example | TOI | iteration | DiffTaichi loss | diffsim loss | start loss "
        "(DiffTaichi / diffsim) | DiffTaichi s/it | diffsim s/it | ratio (DiffTaichi / "
        "diffsim) | whole run s (DiffTaichi / diffsim) |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    rows, decide_rows = [head], []
    for tag, sides in results.items():
        if "/" not in tag:
            continue
        example, toi = tag.split("/")
        ti_runs, ds_runs = sides["taichi"], sides["diffsim"]
        it = len(ti_runs[0]["losses"])
        ti_last = [r["losses"][-1] for r in ti_runs]
        ds_last = [r["losses"][-1] for r in ds_runs]
        starts = f"{ti_runs[0]['losses'][0]:.6g} / {ds_runs[0]['losses'][0]:.6g}"
        ti_s = statistics.median(statistics.median(r["seconds"][1:]) for r in ti_runs)
        ds_s = statistics.median(r["s_per_it"] for r in ds_runs if "s_per_it" in r)
        wall = (
            f"{statistics.median(sum(r['seconds']) for r in ti_runs):.3g} / "
            f"{statistics.median(r['wall'] for r in ds_runs):.3g}"
        )
        seeds = " (deterministic)" if example == "billiards" else f" ({len(ti_runs)} seeds)"
        rows.append(
            f"| {example}{seeds} | {'with' if toi == 'toi' else 'without'} | {it} | "
            f"{fmt_range(ti_last)} | {fmt_range(ds_last)} | {starts} | {ti_s:.3g} | "
            f"{ds_s:.3g} | {ti_s / ds_s:.3g}× | {wall} |"
        )
        if "decide" in ds_runs[0]:
            decide_rows.append(f"| {example} | {fmt_range(ti_last)} | {_decide_cell(sides)} |")
    out = "\n".join(rows)
    if decide_rows:
        out += (
            "\n\ndiffsim's default method (`diffsim.optimize(loss, θ₀, key=...)`, with TOI) to "
            "DiffTaichi's final loss, from the same start:\n\n| example | DiffTaichi's final "
            "loss | default method: to reach it (median over seeds) |\n|---|---|---|\n"
        )
        out += "\n".join(decide_rows)
    return out


# -- figures --------------------------------------------------------------------------------


def plot_curves(results: dict, out: Path) -> None:
    """Loss curves, DiffTaichi and diffsim side by side, with and without TOI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    examples = sorted(
        {t.split("/")[0] for t in results if "/" in t}, key=lambda e: (e != "billiards", e)
    )
    fig, axes = plt.subplots(2, len(examples), figsize=(3.6 * len(examples), 6.2), squeeze=False)
    for col, example in enumerate(examples):
        for row, side in enumerate(("taichi", "diffsim")):
            ax = axes[row, col]
            for toi, color in (("toi", "tab:green"), ("no-toi", "tab:red")):
                sides = results.get(f"{example}/{toi}")
                if sides is None:
                    continue
                for k, run_ in enumerate(sides[side]):
                    label = ("with TOI" if toi == "toi" else "without TOI") if k == 0 else None
                    ax.plot(run_["losses"], color=color, lw=0.9, alpha=0.8, label=label)
            if example == "billiards":
                ax.set_yscale("log")
            who = "DiffTaichi (taichi 1.7)" if side == "taichi" else "diffsim"
            ax.set_title(f"{example}: {who}", fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
            ax.tick_params(labelsize=7)
        # the same y range above and below (DiffTaichi's and diffsim's curves compared)
        lows, highs = zip(*(axes[r, col].get_ylim() for r in (0, 1)))
        for r in (0, 1):
            axes[r, col].set_ylim(min(lows), max(highs))
    axes[0, 0].set_ylabel("loss", fontsize=8)
    axes[1, 0].set_ylabel("loss", fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_gait(gait: dict, out: Path, frames: int = 8) -> None:
    """A strip of frames of the trained robot walking (diffsim's rollout, with TOI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.asarray(gait["x"])  # every 8th state
    picks = np.linspace(0, len(x) - 1, frames).round().astype(int)
    lo, hi = float(x[..., 0].min()) - 0.05, float(x[..., 0].max()) + 0.05
    top = float(x[..., 1].max()) + 0.05
    fig, axes = plt.subplots(1, frames, figsize=(1.9 * frames, 2.4), sharey=True)
    for ax, k in zip(axes, picks):
        pts = x[k]
        for a, b, _, _, act in gait["springs"]:
            ax.plot(
                pts[[a, b], 0],
                pts[[a, b], 1],
                color="tab:orange" if act else "0.4",
                lw=2.0 if act else 0.8,
            )
        ax.plot(pts[:, 0], pts[:, 1], "o", ms=2.5, color="tab:blue")
        ax.plot(pts[0, 0], pts[0, 1], "o", ms=4, color="tab:red")  # the head
        ax.axhline(0.1, color="k", lw=1)
        ax.set(xlim=(lo, hi), ylim=(0.05, top), aspect="equal")
        ax.set_title(f"t = {k * 8 * 0.004:.2f} s", fontsize=8)
        ax.tick_params(labelsize=6)
    fig.suptitle(
        f"robot {gait['robot']} after DiffTaichi's recipe on diffsim (seed "
        f"{gait['seed']}, with TOI); orange: muscles, red: the head",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def doctor_landscape(
    out: Path, verdicts: int = 13, angles: int = 300, zoom: float = 0.1, sigma: float = 0.01
) -> list[tuple[bool, float, str, tuple]]:
    """The billiards loss over the cue's angle (DiffTaichi's ``scan``, ±90·zoom°) with and
    without TOI, and ``diffsim.diagnose``'s verdict on the gradient at ``verdicts`` angles
    (σ = ``sigma`` rad): the figure ``out``; returns (toi, angle, verdict, flags)."""
    import jax
    import jax.numpy as jnp
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import diffsim
    from diffsim.systems import billiards

    def of_angle(toi: bool) -> Any:
        def loss(angle: Any) -> Any:
            v = billiards.CUE_SPEED * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
            x = jnp.asarray(billiards.CUE_X0, v.dtype)
            return billiards.billiards_loss({"x": x, "v": v}, toi)

        return loss

    grid = billiards.scan_angles(angles, zoom)
    picks = billiards.scan_angles(verdicts, zoom)
    marks = {
        "trusted": ("o", "tab:green"),
        "untrusted": ("x", "tab:red"),
        "inconclusive": ("s", "0.5"),
    }
    found = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    for ax, toi in zip(axes, (True, False)):
        loss = of_angle(toi)
        ax.plot(
            np.degrees(np.asarray(grid)),
            np.asarray(billiards.landscape(grid, toi)),
            lw=0.9,
            color="tab:blue",
        )
        for angle in np.asarray(picks):
            _log(f"[difftaichi] doctor at {np.degrees(angle):.2f}°, toi={toi}")
            report = diffsim.diagnose(loss, jnp.asarray(angle), jax.random.PRNGKey(0), sigma=sigma)
            found.append((toi, float(angle), report.verdict, tuple(report.flag_names)))
            marker, color = marks[report.verdict]
            ax.plot(
                np.degrees(angle),
                float(loss(jnp.asarray(angle))),
                marker,
                color=color,
                ms=7,
                mew=2,
                ls="none",
            )
        ax.set(
            xlabel="angle of the cue's velocity (°)",
            title=f"billiards {'with' if toi else 'without'} TOI: the doctor's verdicts",
        )
    for verdict, (marker, color) in marks.items():
        axes[0].plot([], [], marker, color=color, mew=2, ls="none", label=verdict)
    axes[0].set_ylabel("loss")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return found


def _jsonable(results: dict) -> dict:
    def clean(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [clean(v) for v in o]
        if isinstance(o, float):
            return float(f"{o:.7g}")
        return o

    return clean(results)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="DiffTaichi itself against diffsim")
    parser.add_argument(
        "--robots", nargs="+", default=["A", "B", "C"], choices=["A", "B", "C", "D"]
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds per robot (0 … n − 1)")
    parser.add_argument("--iterations", type=int, default=100, help="robots' iterations")
    parser.add_argument("--billiards-iterations", type=int, default=200)
    parser.add_argument("--no-decide", action="store_true", help="skip the default method's row")
    parser.add_argument("--plot-only", action="store_true", help="redraw from the JSON record")
    parser.add_argument("--record", type=Path, default=RECORD)
    parser.add_argument(
        "--doctor",
        type=int,
        default=0,
        metavar="N",
        help="only the billiards landscape with the doctor's verdicts at N angles",
    )
    args = parser.parse_args(argv)
    if args.doctor:
        for toi, angle, verdict, flags in doctor_landscape(
            FIGURES / "billiards-doctor.png", args.doctor
        ):
            print(f"toi={toi!s:5} angle {np.degrees(angle):+7.3f}°: {verdict} {list(flags)}")
        return
    if args.plot_only:
        results = json.loads(CURVES.read_text())
    else:
        start = time.perf_counter()
        command = "python -m benchmarks.difftaichi " + " ".join(argv or sys.argv[1:])
        cpu = platform.processor() or platform.machine()

        def save(results: dict, done: bool) -> None:
            results = _jsonable(results)
            status = "" if done else " (PARTIAL: still running or cut short)"
            header = (
                f"# {command.strip()}{status}\n# {os.cpu_count()}-core CPU ({cpu}), shared with "
                "other agents' jobs while it ran: seconds indicative; float32 on both sides; "
                f"jax {results['meta']['jax']}, taichi {results['meta']['taichi']} (ti.cpu); "
                f"{time.perf_counter() - start:.0f} s so far\n\n"
            )
            args.record.write_text(header + table(results) + "\n")
            CURVES.write_text(json.dumps(results))

        results = _jsonable(
            run(
                args.robots,
                args.seeds,
                args.iterations,
                args.billiards_iterations,
                not args.no_decide,
                save,
            )
        )
        print(table(results))
    plot_curves(results, FIGURES / "difftaichi-curves.png")
    if "gait" in results:
        plot_gait(results["gait"], FIGURES / "robot-gait.png")


if __name__ == "__main__":
    main()
