"""``diffsim plot``: write one of the contact figures as a PNG."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from ._common import app, check_writable, console, print_json


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
