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

from ._common import DEVICES_MAX, CLIError, app, check_count, check_writable, err_console

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
    devices: int | None = typer.Option(
        None,
        "--devices",
        help="Instead: scaling over devices — an estimator's samples and a batched rollout "
        "on 1 and N devices (python -m benchmarks.sharding; on a CPU-only machine, N host "
        "devices sharing its cores).",
    ),
    gpu: bool = typer.Option(
        False,
        "--gpu",
        help="Instead: forward + gradient throughput of 1e5-1e7 balls on the default device "
        "and the share of its memory bandwidth it reaches (python -m benchmarks.gpu).",
    ),
) -> None:
    """Benchmark rollout and gradient throughput against the peers, in alternation: median
    time, ball-steps/s, first-call time, peak memory, gradient agreement and time ratios to
    diffsim; the machine floor; estimator cost; long-horizon memory. ``--devices N``: the
    scaling benchmark over devices instead; ``--gpu``: the accelerator benchmark."""
    if devices is not None or gpu:
        _scaling_or_gpu(devices, gpu, quick, json_out)
        return
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
    _run_module("benchmarks", argv, root)


def _run_module(module: str, argv: list[str], root: str) -> None:
    # its own process, run from the checkout: the package never edits sys.path
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=root, check=False)
    raise typer.Exit(code=done.returncode)


def _scaling_or_gpu(devices: int | None, gpu: bool, quick: bool, json_out: bool) -> None:
    """``bench --devices N`` (1 and N devices) or ``bench --gpu``: checks, then the module."""
    if devices is not None and gpu:
        raise CLIError("--devices and --gpu are separate benchmarks: give one of them")
    if devices is not None:
        check_count("devices", devices, 1, DEVICES_MAX, "a device count")
    try:
        root = benchmarks_root()
    except RuntimeError as err:
        raise CLIError(str(err)) from None
    argv = ["--json"] if json_out else []
    if gpu:
        if quick:
            argv += ["--sizes", "1e4,1e5", "--steps", "100", "--rounds", "3"]
        _run_module("benchmarks.gpu", argv, root)
    counts = "1" if devices == 1 else f"1,{devices}"
    argv += ["--devices", counts]
    if quick:
        argv += ["--total", "1024", "--per-device", "256", "--steps", "100", "--rounds", "3"]
    _run_module("benchmarks.sharding", argv, root)
