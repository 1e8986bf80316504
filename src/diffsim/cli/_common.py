"""Shared pieces of the CLI: the Typer app, error handling, JSON output."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import typer
from rich.console import Console

app = typer.Typer(
    name="diffsim",
    help="Differentiable simulation that stays trustworthy through contact.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn the library's ``ValueError``/``TypeError`` into a one-line message, exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as err:
            err_console.print(f"[bold red]error:[/] {err}", highlight=False)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def require_finite(name: str, value: float) -> float:
    """CLI-side check (Typer parses 'nan' and 'inf' as floats)."""
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


def to_jsonable(obj: Any) -> Any:
    """Arrays -> nested lists of floats; everything else unchanged."""
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "shape"):
        arr = np.asarray(obj)
        if arr.dtype == np.bool_:
            return arr.tolist()
        return arr.astype(float).tolist()
    return obj


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj)) + "\n")
