"""``diffsim bounce``: a ball bouncing on the ground, its final state and gradients."""

from __future__ import annotations

import math

import typer

from ._common import (
    CLIError,
    app,
    check_time_step,
    console,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    used,
    warn_float32_steps,
)
from ._limits import BOUNCE_S_PER_STEP, check_cost, check_horizon

MIN_APPROACH_STEPS = 4
"""``bounce``: a time step longer than this fraction of the time to the first impact is
rejected (one step would jump over the approach the gradients are about)."""


def _check_bounce_h(h: float, y0: float, vy0: float, e: float, g: float) -> None:
    """Reject a step that does not resolve the flight to the first impact (the library's
    ``SYSTEMS["bounce"].closed_forms["bounce_window"]``)."""
    from ..systems import SYSTEMS

    t_impact = float(SYSTEMS["bounce"].closed_forms["bounce_window"](y0, vy0, e, g)[0])
    if t_impact == math.inf:
        return  # never lands (g = 0, moving up): nothing to resolve
    if not h <= t_impact / MIN_APPROACH_STEPS:
        raise CLIError(
            f"h = {h:g} s does not resolve the flight to the first impact at t* = "
            f"{t_impact:.4g} s: h must be <= t*/{MIN_APPROACH_STEPS} = "
            f"{t_impact / MIN_APPROACH_STEPS:.4g} s, or the answer is the discretisation's"
        )


@app.command()
def bounce(
    y0: float = typer.Option(1.0, "--y0", help="Initial height in m (> 0)."),
    vy0: float = typer.Option(-1.0, "--vy0", help="Initial vertical velocity in m/s."),
    g: float = typer.Option(9.81, "--g", help="Gravity in m/s² (>= 0)."),
    e: float = typer.Option(0.8, "--e", help="Restitution coefficient in [0, 1]."),
    h: float = typer.Option(1e-3, "--h", help="Time step h in seconds (> 0)."),
    steps: int = typer.Option(600, "--steps", "-T", help="Number of steps T (1 to 2³¹ − 1)."),
    toi: bool = typer.Option(True, "--toi/--no-toi", help="Time-of-impact correction."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """A ball bouncing on the ground y = 0: final state after T steps and its gradients
    with respect to the initial height and velocity (compare --toi with --no-toi)."""
    from .. import systems

    closed_forms = systems.SYSTEMS["bounce"].closed_forms  # the analytic flight and bounce

    y0, vy0, g, e = (used(n, val) for n, val in (("y0", y0), ("vy0", vy0), ("g", g), ("e", e)))
    h = check_time_step(h)
    if not 0.0 <= e <= 1.0:
        raise CLIError(f"e must be finite and in [0, 1], got {e}")
    if g < 0:
        raise CLIError(f"g must be finite and >= 0 (m/s²), got {g}")
    if y0 <= 0:
        raise CLIError(f"y0 must be finite and > 0 (above the ground), got {y0}")
    if steps < 1:
        raise CLIError(f"steps must be an integer >= 1, got {steps}")
    _check_bounce_h(h, y0, vy0, e, g)
    steps = check_horizon(f"--steps {steps}", steps)
    seconds = check_cost(f"--steps {steps}", 0.0, steps * BOUNCE_S_PER_STEP)
    warn_float32_steps("the rollout", steps)
    args = (y0, vy0, e, g)  # Python floats: float64, or float32 under --float32 (x64 off)
    with progress_bar("bounce", 2, seconds, json_out) as advance:
        yT, vT = systems.bouncing_ball_final_state(*args, h=h, num_steps=steps, toi=toi)
        advance()
        J = systems.bouncing_ball_final_state_jacobian(*args, h=h, num_steps=steps, toi=toi)
        advance()
    out: dict[str, object] = {
        "y_final": float(yT),
        "vy_final": float(vT),
        "dy_final_dy0": float(J["dy_dy0"]),
        "dy_final_dvy0": float(J["dy_dvy0"]),
        "dy_final_de": float(J["dy_de"]),
        "toi": toi,
        "dtype": precision_name(),
    }
    t = steps * h
    ts, t2 = (float(a) for a in closed_forms["bounce_window"](*args[:2], *args[2:]))
    if vy0 < 0 or g > 0:
        if ts <= t < t2:  # one bounce: the analytic derivative is known
            D = closed_forms["derivatives"](*args, t)
            out["closed_form_dy_final_dy0"] = float(D["dy_dy0"])
            out["closed_form_dy_final_dvy0"] = float(D["dy_dvy0"])
    inputs = f"--y0 {y0:g} --vy0 {vy0:g} --g {g:g} --e {e:g} --h {h:g} --steps {steps}"
    require_finite_answer(out, [k for k in out if k not in ("toi", "dtype")], inputs)
    if json_out:
        print_json(out)
        return
    console.print(f"after T = {steps} steps of h = {h:g} s ({'TOI' if toi else 'naive'} contact)")
    console.print(f"y_T = {out['y_final']:.6g} m, vy_T = {out['vy_final']:.6g} m/s")
    for key in ("dy_final_dy0", "dy_final_dvy0"):
        extra = ""
        if f"closed_form_{key}" in out:
            extra = f"   (analytic {out[f'closed_form_{key}']:.6g})"
        console.print(f"{key:<14} {out[key]:.6g}{extra}")
