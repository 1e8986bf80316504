"""``diffsim estimate`` and ``diffsim optimize``: gradient estimators on the wall demo."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..estimators import BASE_QUANTITIES, ESTIMATORS, Estimator, make_estimator
from ..systems import SYSTEMS as SYSTEM_REGISTRY
from ..systems import Study, wall_study
from ._common import app, console, handle_errors, print_json, require_finite

SYSTEMS = tuple(name for name, spec in SYSTEM_REGISTRY.items() if spec.study is not None)
"""The registered systems with a :class:`~diffsim.systems.Study` (for now: the wall)."""


def _study(system: str) -> Study:
    study = SYSTEM_REGISTRY[system].study
    assert study is not None  # system was checked against SYSTEMS
    return study


def _estimator_help() -> str:
    lines = [f"{name}: {cls.summary}" for name, cls in ESTIMATORS.items()]
    return "Estimator, one of: " + "; ".join(lines) + "."


_EST_HELP = _estimator_help()
_SYSTEM_HELP = f"System: {', '.join(SYSTEMS)}."

_CLI_OPTIONS = {"sigma": "sigma", "num_samples": "samples"}
"""Estimator option → the CLI flag's name in the output (what the user typed it as)."""


def _check_common(system: str, estimator: str, v0: float, sigma: float, samples: int) -> None:
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {', '.join(SYSTEMS)}, got {system!r}")
    if estimator not in ESTIMATORS:
        raise ValueError(
            f"estimator must be one of {', '.join(sorted(ESTIMATORS))}, got {estimator!r}"
        )
    require_finite("v0", v0)
    if not v0 > 0:
        raise ValueError(f"v0 must be a finite speed > 0 m/s, got {v0}")
    require_finite("sigma", sigma)
    if sigma <= 0:
        raise ValueError(f"sigma must be finite and > 0, got {sigma}")
    if samples < 2:
        raise ValueError(f"samples must be an integer >= 2, got {samples}")


def _settings(estimator: str, sigma: float, samples: int) -> dict[str, float | int]:
    """The CLI's options this estimator takes (declared in its ``options``), by option name."""
    given = {"sigma": sigma, "num_samples": samples}
    return {name: v for name, v in given.items() if ESTIMATORS[estimator].takes(name)}


def _build(estimator: str, sigma: float, samples: int) -> Estimator:
    return make_estimator(estimator, **_settings(estimator, sigma, samples))


def _scalar(value: Any) -> float | int:
    arr = np.asarray(value)
    return int(arr) if np.issubdtype(arr.dtype, np.integer) else float(arr)


@app.command()
@handle_errors
def estimate(
    system: str = typer.Option("wall", "--system", help=_SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("alpha", "--estimator", "-e", help=_EST_HELP),
    sigma: float = typer.Option(
        wall_study.SIGMA,
        "--sigma",
        help="Smoothing σ in m/s (> 0), for the estimators that smooth.",
    ),
    samples: int = typer.Option(64, "--samples", "-n", help="Samples N (>= 2)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """One gradient estimate of the wall loss (x − 10)² at v0, with its standard error,
    the simulator evaluations it used and whatever else the estimator reports (AoBG: α, ε
    and B); σ and N are used by the estimators that take them."""
    _check_common(system, estimator, v0, sigma, samples)
    est = _build(estimator, sigma, samples)
    r = est(_study(system).loss, np.float32(v0), jax.random.PRNGKey(seed))
    report = {name: _scalar(item.value) for name, item in r.report().items()}
    out: dict[str, Any] = {"system": system, "v0": v0, "estimator": estimator}
    out.update({name: report.pop(name) for name in BASE_QUANTITIES})
    out.update({_CLI_OPTIONS[n]: v for n, v in _settings(estimator, sigma, samples).items()})
    out.update(report)
    if json_out:
        print_json(out)
        return
    table = Table(title=f"d loss / d v0 at v0 = {v0:.3f} m/s ({estimator})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for k, v in out.items():
        if k not in ("system", "estimator"):
            table.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    console.print(table)


@app.command(name="optimize")
@handle_errors
def optimize_cmd(
    system: str = typer.Option("wall", "--system", help=_SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Starting launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("alpha", "--estimator", "-e", help=_EST_HELP),
    sigma: float = typer.Option(
        wall_study.SIGMA, "--sigma", help="Initial σ in m/s (> 0), annealed to 0.02."
    ),
    samples: int = typer.Option(wall_study.SAMPLES, "--samples", "-n", help="Samples N (>= 2)."),
    steps: int = typer.Option(wall_study.STEPS, "--steps", help="Iterations (>= 1)."),
    lr: float = typer.Option(wall_study.LR, "--lr", help="Adam learning rate (> 0)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Gradient descent on v0 with the chosen estimator (Adam; σ annealed), from v0."""
    _check_common(system, estimator, v0, sigma, samples)
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    require_finite("lr", lr)
    if lr <= 0:
        raise ValueError(f"lr must be finite and > 0, got {lr}")
    est = _build(estimator, sigma, samples)
    progress = Progress(
        TextColumn("optimize"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        disable=json_out,
        transient=True,
    )
    with progress:
        task = progress.add_task("optimize", total=steps)

        def advance(k):
            progress.update(task, completed=int(k))

        study = _study(system)
        r = study.optimize(
            v0, est, key=jax.random.PRNGKey(seed), steps=steps, lr=lr, callback=advance
        )
        jax.block_until_ready(r)
    landing = study.outcome
    v_final = float(r.theta)
    x_final = float(landing(v_final))
    hist = r.history
    out = {
        "system": system,
        "estimator": estimator,
        "v0_initial": v0,
        "v0_final": v_final,
        "loss_final": float(r.loss),
        "landing_x_final": x_final,
        "success": bool(abs(x_final - study.target) <= study.tolerance),
        "iterations": steps,
        "evaluations": int(r.evaluations),
        "history": {
            "v0": np.asarray(hist.theta, float).tolist(),
            "loss": np.asarray(hist.loss, float).tolist(),
            "estimate": np.asarray(hist.estimate.estimate, float).tolist(),
            "sigma": np.asarray(hist.sigma, float).tolist(),
            "evaluations": np.asarray(hist.evaluations).tolist(),
        },
    }
    if json_out:
        print_json(out)
        return
    console.print(
        f"v0 {v0:.3f} → {v_final:.4f} m/s, landing x {x_final:.4f} m, "
        f"loss {out['loss_final']:.3g}, {steps} iterations, {out['evaluations']} evaluations"
        f" ({'within' if out['success'] else 'NOT within'} 5 cm of the target)"
    )
