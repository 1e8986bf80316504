"""``diffsim bench``: diffsim against Warp, Taichi, PyTorch, plain JAX, NumPy and compiled C.

A thin shell over the ``benchmarks`` package of the source tree (``python -m benchmarks``),
imported only when the command runs: the core install does not need it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from ._common import app, check_writable, err_console

_MISSING = (
    "diffsim bench needs the benchmarks/ folder of a diffsim source checkout (it is not part "
    "of the installed package): run it from the repository root, or set DIFFSIM_BENCHMARKS "
    "to the folder that contains benchmarks/. Install the peers with "
    "pip install -e '.[bench]'."
)


def _candidate_roots() -> list[str]:
    """Folders that may hold ``benchmarks/``: $DIFFSIM_BENCHMARKS, the cwd, the checkout."""
    roots = [os.environ.get("DIFFSIM_BENCHMARKS"), os.getcwd()]
    roots.append(str(Path(__file__).resolve().parents[3]))  # src/diffsim/cli -> repo root
    return [r for r in roots if r]


def benchmarks_root() -> str:
    """The folder holding ``benchmarks/``; ``RuntimeError`` with advice if there is none."""
    for root in _candidate_roots():
        if (Path(root) / "benchmarks" / "__main__.py").is_file():
            return root
    raise RuntimeError(_MISSING)


@app.command()
def bench(
    quick: bool = typer.Option(False, "--quick", help="Small N and T, 3 rounds (< ~2 min)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    frameworks: str = typer.Option(
        "",
        "--frameworks",
        help="Comma-separated frameworks to run (default: every row of python -m benchmarks).",
    ),
    figure: str = typer.Option("", "--figure", help="Write the throughput figure (PNG) here."),
    no_long_horizon: bool = typer.Option(False, "--no-long-horizon"),
) -> None:
    """Benchmark rollout and gradient throughput against the peers, in alternation: median
    time, ball-steps/s, first-call time, peak memory, gradient agreement and time ratios to
    diffsim; the machine floor; estimator cost; long-horizon memory."""
    if figure:
        check_writable(Path(figure), "--figure")  # before the minutes of work, not after
    try:
        root = benchmarks_root()
    except RuntimeError as err:
        err_console.print(f"[bold red]error:[/] {err}", highlight=False)
        raise typer.Exit(code=2) from None
    argv = ["--frameworks", frameworks] if frameworks else []
    if quick:
        argv.append("--quick")
    if json_out:
        argv.append("--json")
    if figure:
        argv += ["--figure", figure]
    if no_long_horizon:
        argv.append("--no-long-horizon")
    # its own process, run from the checkout: the package never edits sys.path
    done = subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=root, check=False)
    raise typer.Exit(code=done.returncode)
