"""``diffsim demo``: the interactive projectile-over-a-wall page."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys

import typer

from ._common import app, handle_errors


@app.command()
@handle_errors
def demo(
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Interface to bind (localhost). 0.0.0.0 serves every interface: a warning says so.",
    ),
    port: int = typer.Option(8050, "--port", help="TCP port of the page."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open a browser."),
) -> None:
    """The article's demo in your browser: drag the launch speed, watch the loss curve's
    plateau, cliff and basin, compare gradient estimators and run gradient descent."""
    if not 0 < port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {port}")
    # `kill -USR1 PID` prints every thread's stack to stderr (a hung server can be asked
    # where it is; the tests do so before giving up on one)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    # imports Dash and JAX: only when the command runs
    from ..app import BindError, serve

    try:
        serve(host, port, open_browser=not no_browser)
    except BindError as err:
        # one line, never wrapped: the port or host is unusable; nothing was compiled yet
        typer.echo(f"error: {err.option}: {err}", err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:  # Ctrl+C before the server loop, which stops on its own
        pass
    # Stopped: the warm-up thread may be inside an XLA compile, and JAX aborts the
    # interpreter's shutdown under it (SIGABRT, exit 134); nothing is left to clean up
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
