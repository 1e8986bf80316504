"""``diffsim jacobian``: the article's chain rule through a rollout, four ways."""

from __future__ import annotations

import numpy as np
import typer

from .. import rollout_jacobian
from ..systems import SYSTEMS
from ._common import (
    CLIError,
    app,
    console,
    dtype,
    precision_name,
    print_json,
    progress_bar,
    require_finite_answer,
    titled_table,
    used,
    warn_float32_steps,
)
from ._limits import JACOBIAN_S_PER_STEP, SCAN_MAX, check_cost


def _fmt(x: float) -> str:
    return f"{x:.4f}" if abs(x) < 1e6 else f"{x:.6g}"


@app.command()
def jacobian(
    steps: int = typer.Option(2, "--steps", "-T", help="Number of steps T (1 to 2³¹ − 1)."),
    h: float = typer.Option(
        1 / 60, "--h", help="Time step h in seconds (> 0).", show_default="1/60 ≈ 0.01667"
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The free particle's rollout Jacobian ∂s_T/∂s_0 in (x, v) order: by autodiff, by the
    product of per-step Jacobians, by chaining the analytic per-step Jacobians (adjoint), and
    in closed form [[1, T h], [0, 1]]."""
    h = used("h", h)
    if h <= 0:
        raise CLIError(f"h must be finite and > 0, got {h}")
    if steps < 1:
        raise CLIError(f"steps must be an integer >= 1, got {steps}")
    if steps > SCAN_MAX:
        raise CLIError(
            f"steps must be an integer <= {SCAN_MAX} (a rollout's step counter is int32), "
            f"got {steps}"
        )
    seconds = check_cost(f"--steps {steps}", 0.0, steps * JACOBIAN_S_PER_STEP)
    with np.errstate(over="ignore"):
        elapsed = dtype()(steps) * dtype()(h)
    if not np.isfinite(elapsed):
        raise CLIError(f"T h = {steps} × {h:g} overflows {precision_name()}")
    warn_float32_steps("T h is a sum of T steps of h", steps)
    spec = SYSTEMS["free-particle"]
    system = spec.factory(h=h)
    out: dict[str, object] = {"steps": steps, "h": h, "dtype": precision_name()}
    methods = (  # (the output's key, rollout_jacobian's method)
        ("autodiff", "autodiff"),
        ("product", "product"),
        ("analytic", "adjoint"),
    )
    with progress_bar("jacobian", len(methods), seconds, json_out) as advance:
        for key, method in methods:
            J, _ = rollout_jacobian(
                system.step, system.s0, system.theta, steps,
                method=method,  # pyright: ignore[reportArgumentType]  (three of its literals)
            )  # fmt: skip
            out[key] = np.asarray(J, dtype=float).tolist()
            advance()
    out["closed_form"] = spec.closed_forms["rollout_jacobian"](steps, h).tolist()
    require_finite_answer(
        out, ("autodiff", "product", "analytic", "closed_form"), f"--steps {steps} --h {h:g}"
    )
    if json_out:
        print_json(out)
        return
    table = titled_table(f"∂s_T/∂s_0 for the free particle, T = {steps}, h = {h:.6g}")
    table.add_column("route")
    table.add_column("matrix (x, v)")
    for key in ("autodiff", "product", "analytic", "closed_form"):
        m = out[key]
        assert isinstance(m, list)
        a, b, c, d = (_fmt(m[i][j]) for i in (0, 1) for j in (0, 1))
        table.add_row(key, f"[[{a}, {b}], [{c}, {d}]]")
    console.print(table)
