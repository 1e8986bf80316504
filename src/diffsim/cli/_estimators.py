"""``diffsim estimate`` and ``diffsim optimize``: gradient estimators on the wall demo."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import typer

from ..estimators import BASE_QUANTITIES, ESTIMATORS, Estimator, make_estimator
from ..systems import SYSTEMS as SYSTEM_REGISTRY
from ..systems import Study, wall_study
from ._common import (
    DEVICES_HELP,
    CLIError,
    app,
    check_seed,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    registry_choice,
    require_finite_answer,
    titled_table,
    use_devices,
    used,
)
from ._limits import (
    OPTIMIZE_BYTES_PER_STEP,
    OPTIMIZE_S_PER_STEP,
    check_cost,
    check_horizon,
    estimate_cost,
)


def _studies() -> dict[str, Study]:
    """The registered systems with a :class:`~diffsim.systems.Study` (for now: the wall),
    read when the command runs."""
    return {name: spec.study for name, spec in SYSTEM_REGISTRY.items() if spec.study is not None}


def _study(system: str) -> Study:
    return _studies()[registry_choice("--system", system, _studies())]


def _estimator_help() -> str:
    lines = [f"{name}: {cls.summary}" for name, cls in ESTIMATORS.items()]
    return "Estimator, one of: " + "; ".join(lines) + "."


_EST_HELP = _estimator_help()
_SYSTEM_HELP = "System: a registered system with a study (wall)."

_CLI_OPTIONS = {"sigma": "sigma", "num_samples": "samples"}
"""Estimator option → the CLI flag's name in the output (what the user typed it as)."""


def _v0_range(system: str) -> tuple[float, float]:
    """(0, the registry's maximum for v0]: faster balls outrun the rollout's horizon."""
    for setting in SYSTEM_REGISTRY[system].settings:
        if setting.name == "v0" and setting.maximum is not None:
            return 0.0, float(setting.maximum)
    return 0.0, float("inf")


def _check_common(
    system: str, estimator: str, v0: float, sigma: float | None, samples: int, seed: int
) -> tuple[float, float | None]:
    registry_choice("--system", system, _studies())
    if estimator not in ESTIMATORS:
        raise CLIError(
            f"estimator must be one of {', '.join(sorted(ESTIMATORS))}, got {estimator!r}"
        )
    v0 = used("v0", v0)
    lo, hi = _v0_range(system)
    if not lo < v0 <= hi:
        raise CLIError(f"v0 must be a finite speed in ({lo:g}, {hi:g}] m/s, got {v0}")
    if sigma is not None:  # None: the estimator's own, diffsim's one rule (5 % of v0)
        sigma = used("sigma", sigma)
        top = wall_study.SIGMA_MAX
        if not 0 < sigma <= top:
            raise CLIError(f"sigma must be finite and in (0, {top:g}] m/s, got {sigma}")
    if samples < 2:
        raise CLIError(f"samples must be an integer >= 2, got {samples}")
    check_seed(seed)
    return v0, sigma


def _call_cost(est: Estimator, estimator: str, samples: int) -> tuple[float, float, str]:
    """Bytes and seconds of one estimate of d loss / d v0 (θ has one component), from the
    estimator's declared cost, and the option they grow with (for the message)."""
    nbytes, seconds = estimate_cost(est, 1)
    grows = f"--samples {samples}" if type(est).takes("num_samples") else ""
    return nbytes, seconds, grows or f"--estimator {estimator}"


def _settings(estimator: str, sigma: float | None, samples: int) -> dict[str, float | int]:
    """The CLI's options this estimator takes (declared in its ``options``), by option name
    (σ left out when ``None``: the estimator's own, relative to θ)."""
    given = {"sigma": sigma, "num_samples": samples}
    return {
        name: v for name, v in given.items() if ESTIMATORS[estimator].takes(name) and v is not None
    }


def _build(estimator: str, sigma: float | None, samples: int, devices: Any) -> Estimator:
    """The estimator with the CLI's options, each checked against what the estimator
    declares (the message names the flag), before anything is traced."""
    options: dict[str, Any] = dict(_settings(estimator, sigma, samples))
    for option in ESTIMATORS[estimator].options:
        if option.name not in options:
            continue
        try:
            option.check(options[option.name])
        except ValueError:
            raise CLIError(
                f"--{_CLI_OPTIONS.get(option.name, option.name)} must be {option.accepts()} "
                f"for --estimator {estimator}, got {options[option.name]}"
            ) from None
    if ESTIMATORS[estimator].sharded:
        options["devices"] = devices
    return make_estimator(estimator, **options)


def _scalar(value: Any) -> float | int:
    arr = np.asarray(value)
    return int(arr) if np.issubdtype(arr.dtype, np.integer) else float(arr)


@app.command()
def estimate(
    system: str = typer.Option("wall", "--system", help=_SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("auto", "--estimator", "-e", help=_EST_HELP),
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
    v0, sigma = _check_common(system, estimator, v0, sigma, samples, seed)
    est = _build(estimator, sigma, samples, devices)
    nbytes, secs, what = _call_cost(est, estimator, samples)
    seconds = check_cost(what, nbytes, secs)
    with progress_bar(f"estimate ({estimator})", 1, seconds, json_out) as advance:
        r = est(_study(system).loss, dtype()(v0), jax.random.PRNGKey(seed))
        jax.block_until_ready(r)
        advance()
    report = {name: _scalar(item.value) for name, item in r.report().items()}
    out: dict[str, Any] = {"system": system, "v0": v0, "estimator": estimator}
    out.update({name: report.pop(name) for name in BASE_QUANTITIES})
    out.update({_CLI_OPTIONS[n]: v for n, v in _settings(estimator, sigma, samples).items()})
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


@app.command(name="optimize")
def optimize_cmd(
    system: str = typer.Option("wall", "--system", help=_SYSTEM_HELP),
    v0: float = typer.Option(8.0, "--v0", help="Starting launch speed v0 in m/s (> 0)."),
    estimator: str = typer.Option("auto", "--estimator", "-e", help=_EST_HELP),
    sigma: float | None = typer.Option(
        None,
        "--sigma",
        help="Initial σ in m/s (> 0), annealed to 0.02 (default 5 % of the starting v0, "
        "the rule every estimator shares).",
    ),
    samples: int = typer.Option(wall_study.SAMPLES, "--samples", "-n", help="Samples N (>= 2)."),
    steps: int = typer.Option(wall_study.STEPS, "--steps", help="Iterations (>= 1)."),
    lr: float = typer.Option(wall_study.LR, "--lr", help="Adam learning rate (> 0)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    devices: int | None = typer.Option(None, "--devices", help=DEVICES_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Gradient descent on v0 with the chosen estimator (Adam; σ annealed), from v0."""
    devices, num_devices = use_devices(devices)  # first: before JAX starts its backend
    v0, sigma = _check_common(system, estimator, v0, sigma, samples, seed)
    if steps < 1:
        raise CLIError(f"steps must be an integer >= 1, got {steps}")
    steps = check_horizon(f"--steps {steps}", steps)
    lr = used("lr", lr)
    lo, hi = _v0_range(system)
    if not 0 < lr <= hi - lo:  # an Adam step moves v0 by up to about lr
        raise CLIError(f"lr must be finite and in (0, {hi - lo:g}] m/s per step, got {lr}")
    est = _build(estimator, sigma, samples, devices)
    nbytes, secs, what = _call_cost(est, estimator, samples)
    seconds = check_cost(
        f"--steps {steps} {what}",
        nbytes + steps * OPTIMIZE_BYTES_PER_STEP,
        steps * (secs + OPTIMIZE_S_PER_STEP),
    )
    study = _study(system)
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
