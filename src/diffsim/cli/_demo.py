"""``diffsim demo``: the interactive projectile-over-a-wall page."""

from __future__ import annotations

import typer

from ._common import app, handle_errors


@app.command()
@handle_errors
def demo(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (localhost)."),
    port: int = typer.Option(8050, "--port", help="TCP port of the page."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open a browser."),
) -> None:
    """The article's demo in your browser: drag the launch speed, watch the loss curve's
    plateau, cliff and basin, compare gradient estimators and run gradient descent."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be in 1..65535, got {port}")
    from ..app import serve  # imports Dash and compiles: only when the command runs

    serve(host, port, open_browser=not no_browser)
