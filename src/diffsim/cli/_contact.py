"""``diffsim wall``, ``diffsim bounce`` and ``diffsim plot``: the contact demos."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path

import jax
import typer

from ._common import (
    CLIError,
    app,
    check_writable,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    used,
    warn_float32_steps,
)
from ._limits import (
    BOUNCE_S_PER_STEP,
    WALL_BYTES_PER_STEP,
    WALL_S_PER_STEP,
    check_cost,
    check_horizon,
)


def _check_h(h: float) -> float:
    h = used("h", h)
    if h <= 0:
        raise CLIError(f"h must be finite and > 0 (seconds), got {h}")
    return h


MIN_FLIGHT_STEPS = 10
"""``wall``: a time step that leaves fewer steps than this for the flight is rejected."""


def _wall_horizon(v0: float, h: float) -> tuple[float, int]:
    """The fastest launch the wall rollout covers (the library's default,
    :data:`~diffsim.systems.projectile_wall.V0_ROLLOUT_MAX`, or v0 if faster) and its
    length (:func:`~diffsim.systems.projectile_wall.num_steps_for`, which rejects a flight
    longer than a rollout takes), at least ``MIN_FLIGHT_STEPS``."""
    from ..systems import projectile_wall as pw

    v0_max = max(pw.V0_ROLLOUT_MAX, v0)
    steps = pw.num_steps_for(h, v0_max)
    if steps < MIN_FLIGHT_STEPS:
        raise CLIError(
            f"h = {h:g} s leaves {steps} steps for the flight (at least {MIN_FLIGHT_STEPS}): "
            f"the answer would be the discretisation's, not the flight's; use a smaller h"
        )
    return v0_max, steps


@app.command()
def wall(
    v0: float = typer.Option(8.0, "--v0", help="Launch speed v0 in m/s (>= 0)."),
    h: float = typer.Option(
        1 / 240, "--h", help="Time step h in seconds (> 0).", show_default="1/240 ≈ 0.004167"
    ),
    smoothing: float | None = typer.Option(
        None, "--smoothing", help="Temperature τ in metres (> 0) of the smoothed wall."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The article's projectile over the wall: landing x, loss (x − 10)², whether it clears
    the wall, and the exact gradient d loss/d v0 of the time-stepped simulator."""
    from ..systems import projectile_wall as pw

    v0 = used("v0", v0)
    if v0 < 0:
        raise CLIError(f"v0 must be finite and >= 0 (m/s), got {v0}")
    h = _check_h(h)
    if smoothing is not None:
        smoothing = used("smoothing", smoothing)
        if smoothing <= 0:
            raise CLIError(f"smoothing must be finite and > 0 (metres), got {smoothing}")
    v_max, n = _wall_horizon(v0, h)
    what = f"--v0 {v0:g} --h {h:g} ({n} steps)"
    seconds = check_cost(what, n * WALL_BYTES_PER_STEP, n * WALL_S_PER_STEP)
    warn_float32_steps("the flight", n)
    v = dtype()(v0)
    with progress_bar("wall", 4, seconds, json_out) as advance:
        x = float(pw.landing_x(v, h=h, smoothing=smoothing, v0_max=v_max))
        advance()
        loss = float(pw.loss(v, h=h, smoothing=smoothing, v0_max=v_max))
        advance()
        grad = float(jax.grad(lambda u: pw.loss(u, h=h, smoothing=smoothing, v0_max=v_max))(v))
        advance()
        clears = bool(pw.clears_wall(v, h=h, v0_max=v_max))
        advance()
    out = {
        "v0": v0,
        "landing_x": x,
        "loss": loss,
        "clears_wall": clears,
        "grad": grad,
        "closed_form_landing_x": float(pw.landing_x_closed_form(v)),
        "h": h,
        "smoothing": smoothing,
        "dtype": precision_name(),
    }
    require_finite_answer(
        out, ("landing_x", "loss", "grad", "closed_form_landing_x"), f"--v0 {v0:g} --h {h:g}"
    )
    note = _discretisation_note(v0, h, clears, bool(pw.clears_wall_closed_form(v)))
    if note:
        out["note"] = note
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
    if note:
        console.print(f"note: {note}", highlight=False)


def _discretisation_note(v0: float, h: float, clears: bool, clears_closed_form: bool) -> str:
    """Why the time-stepped flight and the closed form disagree about the wall, when they do:
    next to the threshold speed the O(h) error of the step decides which side of the wall's
    top the ball passes. Empty when they agree."""
    if clears == clears_closed_form:
        return ""
    from ..systems import projectile_wall as pw

    v_clear = pw.plateau_bounds()[1]
    stepped = "clears the wall" if clears else "is stopped by the wall"
    exact = "clears it" if clears_closed_form else "hits it"
    return (
        f"at h = {h:g} s the time-stepped flight {stepped}, while the closed form (continuous "
        f"time) {exact}: v0 = {v0:g} m/s is within the O(h) discretisation error of the "
        f"threshold {v_clear:.4g} m/s; a smaller --h (e.g. {h / 10:g}) resolves it"
    )


MIN_APPROACH_STEPS = 4
"""``bounce``: a time step longer than this fraction of the time to the first impact is
rejected (one step would jump over the approach the gradients are about)."""


def _check_bounce_h(h: float, y0: float, vy0: float, e: float, g: float) -> None:
    """Reject a step that does not resolve the flight to the first impact (the library's
    :func:`~diffsim.systems.bouncing_ball_bounce_window`)."""
    from .. import systems

    t_impact = float(systems.bouncing_ball_bounce_window(y0, vy0, e, g)[0])
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

    y0, vy0, g, e = (used(n, val) for n, val in (("y0", y0), ("vy0", vy0), ("g", g), ("e", e)))
    h = _check_h(h)
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
    ts, t2 = (float(a) for a in systems.bouncing_ball_bounce_window(*args[:2], *args[2:]))
    if vy0 < 0 or g > 0:
        if ts <= t < t2:  # one bounce: the analytic derivative is known
            D = systems.bouncing_ball_derivatives_closed_form(*args, t)
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


class _Figure(str, Enum):
    wall = "wall"
    bounce = "bounce"
    stiff = "stiff"
    smoothing = "smoothing"
    impact = "impact"


@app.command()
def plot(
    figure: _Figure = typer.Argument(
        ..., help="Which figure: wall, bounce, stiff, smoothing, impact."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="PNG path; its folder must exist (default: ./NAME.png)."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print one JSON object: the figure, its path and size."
    ),
) -> None:
    """Write one of the contact figures as a PNG (matplotlib, Agg backend)."""
    from .. import plots

    path = check_writable(out if out is not None else Path(f"{figure.value}.png"))
    written = plots.FIGURES[figure.value](path).resolve()
    if json_out:
        print_json({"figure": figure.value, "path": str(written), "bytes": written.stat().st_size})
        return
    console.print(f"wrote {written}", highlight=False, soft_wrap=True)
