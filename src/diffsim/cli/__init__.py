"""The ``diffsim`` command: a thin shell over the library.

Each command group lives in its own module and registers itself on the shared Typer app.
"""

from __future__ import annotations

import typer

from .. import __version__
from . import _bench as _bench
from . import _contact as _contact
from . import _core as _core
from . import _demo as _demo
from . import _diagnose as _diagnose
from . import _estimators as _estimators
from ._common import app


def _version(value: bool) -> None:
    if value:
        typer.echo(f"diffsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Differentiable simulation that stays trustworthy through contact."""


def main() -> None:
    """Entry point of the ``diffsim`` console script."""
    app()


__all__ = ["app", "main"]
