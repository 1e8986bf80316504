"""``diffsim wall``, ``diffsim bounce`` and ``diffsim plot``: the contact demos."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import jax
import typer

from ._common import app, console, handle_errors, print_json, require_finite


def _check_h(h: float) -> float:
    require_finite("h", h)
    if h <= 0:
        raise ValueError(f"h must be finite and > 0 (seconds), got {h}")
    return h


@app.command()
@handle_errors
def wall(
    v0: float = typer.Option(8.0, "--v0", help="Launch speed v0 in m/s (>= 0)."),
    h: float = typer.Option(1 / 240, "--h", help="Time step h in seconds (> 0)."),
    smoothing: float | None = typer.Option(
        None, "--smoothing", help="Temperature τ in metres (> 0) of the smoothed wall."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The article's projectile over the wall: landing x, loss (x − 10)², whether it clears
    the wall, and the exact gradient d loss/d v0 of the time-stepped simulator."""
    from ..systems import projectile_wall as pw

    require_finite("v0", v0)
    if v0 < 0:
        raise ValueError(f"v0 must be finite and >= 0 (m/s), got {v0}")
    _check_h(h)
    if smoothing is not None:
        require_finite("smoothing", smoothing)
        if smoothing <= 0:
            raise ValueError(f"smoothing must be finite and > 0 (metres), got {smoothing}")
    x = float(pw.landing_x(v0, h=h, smoothing=smoothing))
    loss = float(pw.loss(v0, h=h, smoothing=smoothing))
    grad = float(jax.grad(lambda v: pw.loss(v, h=h, smoothing=smoothing))(float(v0)))
    clears = bool(pw.clears_wall(v0, h=h))
    out = {
        "v0": v0,
        "landing_x": x,
        "loss": loss,
        "clears_wall": clears,
        "grad": grad,
        "closed_form_landing_x": float(pw.landing_x_closed_form(v0)),
        "h": h,
        "smoothing": smoothing,
    }
    if json_out:
        print_json(out)
        return
    console.print(f"v₀ = {v0:.2f} m/s")
    console.print(
        f"landing x        {x:.2f} m   (closed form {out['closed_form_landing_x']:.2f} m)"
    )
    console.print(f"loss (x − 10)²   {loss:.2f}")
    console.print(f"clears wall      {'yes' if clears else 'no'}")
    label = "d loss/d v₀" + (f" (smoothed, τ = {smoothing:g} m)" if smoothing else "")
    console.print(f"{label:<16} {grad:.4g}")


@app.command()
@handle_errors
def bounce(
    y0: float = typer.Option(1.0, "--y0", help="Initial height in m (> 0)."),
    vy0: float = typer.Option(-1.0, "--vy0", help="Initial vertical velocity in m/s."),
    g: float = typer.Option(9.81, "--g", help="Gravity in m/s² (>= 0)."),
    e: float = typer.Option(0.8, "--e", help="Restitution coefficient in [0, 1]."),
    h: float = typer.Option(1e-3, "--h", help="Time step h in seconds (> 0)."),
    steps: int = typer.Option(600, "--steps", "-T", help="Number of steps T (>= 1)."),
    toi: bool = typer.Option(True, "--toi/--no-toi", help="Time-of-impact correction."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """A ball bouncing on the ground y = 0: final state after T steps and its gradients
    with respect to the initial height and velocity (compare --toi with --no-toi)."""
    from .. import systems

    for name, val in (("y0", y0), ("vy0", vy0), ("g", g), ("e", e)):
        require_finite(name, val)
    _check_h(h)
    if not 0.0 <= e <= 1.0:
        raise ValueError(f"e must be finite and in [0, 1], got {e}")
    if g < 0:
        raise ValueError(f"g must be finite and >= 0 (m/s²), got {g}")
    if y0 <= 0:
        raise ValueError(f"y0 must be finite and > 0 (above the ground), got {y0}")
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    yT, vT = systems.bouncing_ball_final_state(y0, vy0, e, g, h=h, num_steps=steps, toi=toi)
    J = systems.bouncing_ball_final_state_jacobian(y0, vy0, e, g, h=h, num_steps=steps, toi=toi)
    out = {
        "y_final": float(yT),
        "vy_final": float(vT),
        "dy_final_dy0": float(J["dy_dy0"]),
        "dy_final_dvy0": float(J["dy_dvy0"]),
        "dy_final_de": float(J["dy_de"]),
        "toi": toi,
    }
    t = steps * h
    ts, t2 = (float(a) for a in systems.bouncing_ball_bounce_window(y0, vy0, e, g))
    if vy0 < 0 or g > 0:
        if ts <= t < t2:  # one bounce: the analytic derivative is known
            D = systems.bouncing_ball_derivatives_closed_form(y0, vy0, e, g, t)
            out["closed_form_dy_final_dy0"] = float(D["dy_dy0"])
            out["closed_form_dy_final_dvy0"] = float(D["dy_dvy0"])
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


class _Figure(str, Enum):
    wall = "wall"
    bounce = "bounce"
    stiff = "stiff"
    smoothing = "smoothing"


@app.command()
@handle_errors
def plot(
    figure: _Figure = typer.Argument(..., help="Which figure: wall, bounce, stiff, smoothing."),
    out: Path | None = typer.Option(None, "--out", help="PNG path (default docs/figures/)."),
) -> None:
    """Write one of the contact figures as a PNG (matplotlib, Agg backend)."""
    from .. import plots

    path = plots.FIGURES[figure.value](out)
    console.print(f"wrote {path}")
