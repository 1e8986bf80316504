"""The ``diffsim`` command: a thin shell over the library (the ``cli`` extra: Typer, Rich).

Each command group lives in its own module and registers itself on the shared Typer app,
``diffsim.cli.app``; importing this package imports neither Typer nor Rich until ``app`` or
:func:`main` is used, so that without the extra the command answers with one line saying
what to install.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .. import MissingExtraError, require_extra

if TYPE_CHECKING:
    from ._root import app as app


def main() -> None:
    """Entry point of the ``diffsim`` console script (and ``python -m diffsim``).

    Without the ``cli`` extra it prints one line naming the missing modules and the pip
    command, and exits with status 1.

    Example:
        >>> from diffsim.cli import main
        >>> main.__module__
        'diffsim.cli'
    """
    try:
        require_extra("cli")
    except MissingExtraError as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(1) from None
    from ._root import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the Typer app, built on first use (needs the cli extra)
        require_extra("cli")
        from ._root import app

        return app
    raise AttributeError(f"module 'diffsim.cli' has no attribute {name!r}")


__all__ = ["app", "main"]
