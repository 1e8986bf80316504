"""``diffsim jacobian``: the article's chain rule through a rollout, four ways."""

from __future__ import annotations

import numpy as np
import typer
from rich.table import Table

from .. import rollout_jacobian
from .._jacobians import Method
from ..systems import SYSTEMS
from ._common import app, console, handle_errors, print_json, require_finite


@app.command()
@handle_errors
def jacobian(
    steps: int = typer.Option(2, "--steps", "-T", help="Number of steps T (>= 1)."),
    h: float = typer.Option(1 / 60, "--h", help="Time step h in seconds (> 0)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The free particle's rollout Jacobian ∂s_T/∂s_0 in (x, v) order: by autodiff, by the
    product of per-step Jacobians, by chaining the analytic per-step Jacobians (adjoint), and
    in closed form [[1, T h], [0, 1]]."""
    require_finite("h", h)
    if h <= 0:
        raise ValueError(f"h must be finite and > 0, got {h}")
    if steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps}")
    spec = SYSTEMS["free-particle"]
    system = spec.factory(h=h)
    out = {"steps": steps, "h": h}
    methods: tuple[tuple[str, Method], ...] = (
        ("autodiff", "autodiff"),
        ("product", "product"),
        ("analytic", "adjoint"),
    )
    for key, method in methods:
        J, _ = rollout_jacobian(system.step, system.s0, system.theta, steps, method=method)
        out[key] = np.asarray(J, dtype=float).tolist()
    out["closed_form"] = spec.closed_forms["rollout_jacobian"](steps, h).tolist()
    if json_out:
        print_json(out)
        return
    table = Table(title=f"∂s_T/∂s_0 for the free particle, T = {steps}, h = {h:.6g}")
    table.add_column("route")
    table.add_column("matrix (x, v)")
    for key in ("autodiff", "product", "analytic", "closed_form"):
        m = out[key]
        table.add_row(key, f"[[{m[0][0]:.4f}, {m[0][1]:.4f}], [{m[1][0]:.4f}, {m[1][1]:.4f}]]")
    console.print(table)
