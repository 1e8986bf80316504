"""``diffsim estimate``: one gradient estimate of the wall loss, with its standard error."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import typer

from ..estimators import BASE_QUANTITIES, ESTIMATORS
from ._common import (
    DEVICES_HELP,
    app,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    titled_table,
    use_devices,
)
from ._estimator_options import (
    CLI_OPTIONS,
    ESTIMATOR_HELP,
    SYSTEM_HELP,
    build_estimator,
    call_cost,
    check_common,
    estimator_settings,
    registered_study,
)
from ._limits import check_cost


def _scalar(value: Any) -> float | int:
    arr = np.asarray(value)
    return int(arr) if np.issubdtype(arr.dtype, np.integer) else float(arr)


@app.command()
def estimate(
    system: str = typer.Option("wall", "--system", help=SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("auto", "--estimator", "-e", help=ESTIMATOR_HELP),
    sigma: float | None = typer.Option(
        None,
        "--sigma",
        help="Smoothing σ in m/s (> 0), for the estimators that smooth (default "
        "5 % of v0, the rule every estimator and the doctor share; auto widens it on a "
        "plateau).",
    ),
    samples: int = typer.Option(64, "--samples", "-n", help="Samples N (>= 2)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    devices: int | None = typer.Option(None, "--devices", help=DEVICES_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """One gradient estimate of the wall loss (x − 10)² at v0, with its standard error,
    the simulator evaluations it used and whatever else the estimator reports (AoBG: α, ε
    and B); σ and N are used by the estimators that take them."""
    devices, num_devices = use_devices(devices)  # first: before JAX starts its backend
    v0, sigma = check_common(system, estimator, v0, sigma, samples, seed)
    est = build_estimator(estimator, sigma, samples, devices)
    nbytes, secs, what = call_cost(est, estimator, samples)
    seconds = check_cost(what, nbytes, secs)
    with progress_bar(f"estimate ({estimator})", 1, seconds, json_out) as advance:
        r = est(registered_study(system).loss, dtype()(v0), jax.random.PRNGKey(seed))
        jax.block_until_ready(r)
        advance()
    report = {name: _scalar(item.value) for name, item in r.report().items()}
    out: dict[str, Any] = {"system": system, "v0": v0, "estimator": estimator}
    out.update({name: report.pop(name) for name in BASE_QUANTITIES})
    out.update(
        {CLI_OPTIONS[n]: v for n, v in estimator_settings(estimator, sigma, samples).items()}
    )
    out.update(report)
    if "choice" in out and r.choice_name is not None:
        out["choice"] = r.choice_name  # auto's choice by name: exact, mixed, zeroth, none
    out["dtype"] = precision_name()
    out["devices"] = num_devices if ESTIMATORS[estimator].sharded else 1
    given = f" --sigma {sigma:g}" if sigma is not None else ""
    inputs = f"--v0 {v0:g} --estimator {estimator}{given} --samples {samples}"
    require_finite_answer(out, ("estimate", "std_error"), inputs)
    if json_out:
        print_json(out)
        return
    table = titled_table(f"d loss / d v0 at v0 = {v0:.3f} m/s ({estimator})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for k, v in out.items():
        if k in ("system", "estimator", "dtype"):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            table.add_row(k, "— (not computed by this estimator here)")
        else:
            table.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    console.print(table)
