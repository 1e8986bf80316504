"""``diffsim optimize``: gradient descent on the wall demo with a chosen estimator."""

from __future__ import annotations

import math

import jax
import numpy as np
import typer

from ..estimators import ESTIMATORS
from ..systems import wall_study
from ._common import (
    DEVICES_HELP,
    CLIError,
    app,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    use_devices,
    used,
)
from ._estimator_options import (
    ESTIMATOR_HELP,
    SYSTEM_HELP,
    build_estimator,
    call_cost,
    check_common,
    registered_study,
    v0_range,
)
from ._limits import OPTIMIZE_BYTES_PER_STEP, OPTIMIZE_S_PER_STEP, check_cost, check_horizon


@app.command(name="optimize")
def optimize_cmd(
    system: str = typer.Option("wall", "--system", help=SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Starting launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("auto", "--estimator", "-e", help=ESTIMATOR_HELP),
    sigma: float | None = typer.Option(
        None,
        "--sigma",
        help="Initial σ in m/s (> 0), annealed to 0.02 (default 5 % of the starting v0, "
        "the rule every estimator shares).",
    ),
    samples: int = typer.Option(
        wall_study.RECIPE.samples, "--samples", "-n", help="Samples N (>= 2)."
    ),
    steps: int = typer.Option(wall_study.RECIPE.steps, "--steps", help="Iterations (>= 1)."),
    lr: float = typer.Option(wall_study.RECIPE.lr, "--lr", help="Adam learning rate (> 0)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    devices: int | None = typer.Option(None, "--devices", help=DEVICES_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Gradient descent on v0 with the chosen estimator (Adam; σ annealed), from v0."""
    devices, num_devices = use_devices(devices)  # first: before JAX starts its backend
    v0, sigma = check_common(system, estimator, v0, sigma, samples, seed)
    if steps < 1:
        raise CLIError(f"steps must be an integer >= 1, got {steps}")
    steps = check_horizon(f"--steps {steps}", steps)
    lr = used("lr", lr)
    lo, hi = v0_range(system)
    if not 0 < lr <= hi - lo:  # an Adam step moves v0 by up to about lr
        raise CLIError(f"lr must be finite and in (0, {hi - lo:g}] m/s per step, got {lr}")
    est = build_estimator(estimator, sigma, samples, devices)
    nbytes, secs, what = call_cost(est, estimator, samples)
    seconds = check_cost(
        f"--steps {steps} {what}",
        nbytes + steps * OPTIMIZE_BYTES_PER_STEP,
        steps * (secs + OPTIMIZE_S_PER_STEP),
    )
    study = registered_study(system)
    with progress_bar("optimize", steps, seconds, json_out) as advance:
        r = study.optimize(
            dtype()(v0),
            est,
            key=jax.random.PRNGKey(seed),
            steps=steps,
            lr=lr,
            callback=lambda k: advance(completed=int(k)),
        )
        jax.block_until_ready(r)
    landing = study.outcome
    v_final = float(r.theta)
    if not (math.isfinite(v_final) and lo < v_final <= hi):
        raise CLIError(
            f"the descent left the simulated range of v0 ({lo:g}, {hi:g}] m/s (ended at "
            f"{v_final:.4g}) with --lr {lr:g}: its losses there are not the wall's; lower --lr"
        )
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
        "dtype": precision_name(),
        "devices": num_devices if ESTIMATORS[estimator].sharded else 1,
        "evaluations": int(r.evaluations),
        "history": {
            "v0": np.asarray(hist.theta, float).tolist(),
            "loss": np.asarray(hist.loss, float).tolist(),
            "estimate": np.asarray(hist.estimate.estimate, float).tolist(),
            "sigma": np.asarray(hist.sigma, float).tolist(),
            "evaluations": np.asarray(hist.evaluations).tolist(),
        },
    }
    inputs = f"--v0 {v0:g} --estimator {estimator} --lr {lr:g} --steps {steps}"
    require_finite_answer(out, ("v0_final", "loss_final", "landing_x_final"), inputs)
    if json_out:
        print_json(out)
        return
    console.print(
        f"v0 {v0:.3f} → {v_final:.4f} m/s, landing x {x_final:.4f} m, "
        f"loss {out['loss_final']:.3g}, {steps} iterations, {out['evaluations']} evaluations"
        f" ({'within' if out['success'] else 'NOT within'} 5 cm of the target)"
    )
