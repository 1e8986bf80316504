"""``diffsim wall``: the article's projectile over the wall, and its exact gradient."""

from __future__ import annotations

import jax
import typer

from ._common import (
    CLIError,
    app,
    check_time_step,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    used,
    warn_float32_steps,
)
from ._limits import WALL_BYTES_PER_STEP, WALL_S_PER_STEP, check_cost

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
    h = check_time_step(h)
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
