"""``diffsim optimize``: descent on the wall demo, by default the method the doctor's
evidence picks (:data:`diffsim.optimization.METHODS`)."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import typer

from .. import Decide, optimize
from ..estimators import ESTIMATORS
from ..optimization import METHODS, status_name
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

METHOD_HELP = (
    "How to descend: "
    + "; ".join(f"{m.name}: {m.title}" for m in METHODS.values())
    + " (default: decide; adam when --estimator is given)."
)


def _advice(method: str, lr: float) -> str:
    """What to change when the descent left the wall's range: only the estimator recipe
    takes --lr; a line search picks its own steps."""
    if METHODS[method].takes_estimator:
        return f"with --lr {lr:g}: its losses there are not the wall's; lower --lr"
    return (
        f"by --method {method}: its losses there are not the wall's; start nearer the "
        "target or use --method decide"
    )


@app.command(name="optimize")
def optimize_cmd(
    system: str = typer.Option("wall", "--system", help=SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Starting launch speed v0 in m/s (> 0)."),
    method: str | None = typer.Option(None, "--method", "-m", help=METHOD_HELP),
    estimator: str | None = typer.Option(
        None,
        "--estimator",
        "-e",
        help=ESTIMATOR_HELP + " Only with --method adam (the default there: auto).",
    ),
    sigma: float | None = typer.Option(
        None,
        "--sigma",
        help="Initial σ in m/s (> 0), annealed to 0.02 (default 5 % of the starting v0, "
        "the rule every estimator shares).",
    ),
    samples: int | None = typer.Option(
        None,
        "--samples",
        "-n",
        help=f"Samples N per estimate (>= 2; --method adam, default {wall_study.RECIPE.samples}).",
    ),
    steps: int = typer.Option(wall_study.RECIPE.steps, "--steps", help="Iterations (>= 1)."),
    lr: float | None = typer.Option(
        None,
        "--lr",
        help=f"Adam learning rate (> 0; --method adam, default {wall_study.RECIPE.lr}).",
    ),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    devices: int | None = typer.Option(None, "--devices", help=DEVICES_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Descend on v0 from v0: by default the method the doctor's evidence picks (L-BFGS on
    the exact gradient where it is trusted, sampling phases where it is not); --method adam
    --estimator NAME runs the paper's recipe (Adam, σ annealed) with one estimator."""
    devices, num_devices = use_devices(devices)  # first: before JAX starts its backend
    method = _check_method(method, estimator, sigma=sigma, samples=samples, lr=lr)
    estimator = estimator or "auto"
    if samples is None:  # the sampling estimators' recipe, or the default method's check
        samples = wall_study.RECIPE.samples if method == "adam" else Decide().check.num_samples
    lr = wall_study.RECIPE.lr if lr is None else lr
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
    key = jax.random.PRNGKey(seed)
    with progress_bar("optimize", steps, seconds, json_out) as advance:
        progress = lambda k: advance(completed=int(k))  # noqa: E731
        if METHODS[method].takes_estimator:  # the wall's own recipe: its lr, σ annealed
            r = study.optimize(dtype()(v0), est, key=key, steps=steps, lr=lr, callback=progress)
        else:
            r = optimize(study.loss, dtype()(v0), key=key, steps=steps, callback=progress,
                         **METHODS[method].options(None))  # fmt: skip
        jax.block_until_ready(r)
    landing = study.outcome
    v_final = float(r.theta)
    if not (math.isfinite(v_final) and lo < v_final <= hi):
        raise CLIError(
            f"the descent left the simulated range of v0 ({lo:g}, {hi:g}] m/s (ended at "
            f"{v_final:.4g}) {_advice(method, lr)}"
        )
    x_final = float(landing(v_final))
    hist = r.history
    out = {
        "system": system,
        "method": method,
        "estimator": estimator if METHODS[method].takes_estimator else None,
        "v0_initial": v0,
        "v0_final": v_final,
        "loss_final": float(r.loss),
        "landing_x_final": x_final,
        "success": bool(abs(x_final - study.target) <= study.tolerance),
        "iterations": int(r.steps_run),
        "dtype": precision_name(),
        "devices": num_devices if ESTIMATORS[estimator].sharded else 1,
        "evaluations": int(r.evaluations),
        "loss_evaluations": int(r.loss_evaluations),
        "grad_evaluations": int(r.grad_evaluations),
        "status": status_name(r.status),
        "decisions": [d._asdict() for d in r.decisions],
        "history": {  # the steps that ran (a converged line search stops early)
            name: np.asarray(values)[: int(r.steps_run)].tolist()
            for name, values in (
                ("v0", hist.theta),
                ("loss", hist.loss),
                ("estimate", hist.estimate.estimate),
                ("sigma", hist.sigma),
                ("evaluations", hist.evaluations),
            )
        },
    }
    inputs = f"--v0 {v0:g} --method {method} --steps {steps}"
    if METHODS[method].takes_estimator:
        inputs += f" --estimator {estimator} --lr {lr:g}"
    require_finite_answer(out, ("v0_final", "loss_final", "landing_x_final"), inputs)
    if json_out:
        print_json(out)
        return
    for d in r.decisions:
        console.print(
            f"step {d.step:4d}, {d.evaluations:6d} evaluations: {d.method:6s} ({d.reason})"
        )
    console.print(
        f"v0 {v0:.3f} → {v_final:.4f} m/s, landing x {x_final:.4f} m, "
        f"loss {out['loss_final']:.3g}, {out['iterations']} iterations, "
        f"{out['evaluations']} evaluations"
        f" ({'within' if out['success'] else 'NOT within'} 5 cm of the target)"
    )


def _check_method(method: str | None, estimator: str | None, **recipe: Any) -> str:
    """The method to run: ``--method`` if given (checked against the registry and the
    recipe's flags), else adam when an estimator is named, else decide."""
    if method is None:
        method = "decide" if estimator is None else "adam"
    if method not in METHODS:
        raise CLIError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not METHODS[method].takes_estimator:
        given = [f"--{k}" for k, v in {"estimator": estimator, **recipe}.items() if v is not None]
        if given:
            raise CLIError(
                f"{', '.join(given)} set the adam recipe; --method {method} chooses its "
                "gradient and steps itself"
            )
    return method
