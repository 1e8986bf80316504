"""The ``diffsim`` command's Typer app with every command registered (each lives in the
module named after it, ``_wall.py`` for ``diffsim wall``, and registers itself on the shared
app; ``diffsim record`` is ``identify``'s companion, in ``_identify.py``)."""

from __future__ import annotations

import typer

from .. import __version__
from ._common import CLIError, app

# isort: off
# the order of these imports is the order of the commands in `diffsim --help`
from . import _bench as _bench
from . import _wall as _wall
from . import _bounce as _bounce
from . import _plot as _plot
from . import _jacobian as _jacobian
from . import _demo as _demo
from . import _diagnose as _diagnose
from . import _docs as _docs
from . import _estimate as _estimate
from . import _optimize as _optimize
from . import _identify as _identify
from . import _train as _train
# isort: on


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    float32: bool = typer.Option(
        False,
        "--float32",
        help="Compute in float32 (default: float64; on a 2-core CPU float64 ran jacobian and "
        "optimize at the same speed, estimate 2x and wall's gradient at h = 1/24000 ~30x "
        "slower). Warns where float32 loses what you asked for.",
    ),
) -> None:
    """Differentiable simulation that stays trustworthy through contact."""
    # --version is a plain flag, not an eager one: an eager flag exits before Click looks
    # at the rest, so `diffsim --version true` printed the version and exited 0
    if version:
        if ctx.invoked_subcommand is not None:
            raise CLIError(f"--version takes no command, got {ctx.invoked_subcommand!r}")
        typer.echo(f"diffsim {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        raise CLIError("missing command (diffsim --help lists them)")
    import jax

    before = bool(jax.config.jax_enable_x64)  # pyright: ignore[reportAttributeAccessIssue]
    jax.config.update("jax_enable_x64", not float32)  # the CLI's precision (is_float32)

    # the persistent compilation cache: a second run of a command reads its compiled
    # programs from disk (DIFFSIM_JAX_CACHE=off turns it off, =DIR moves it)
    from .. import enable_compilation_cache

    enable_compilation_cache()

    def restore() -> None:  # in-process callers (tests) get their setting back
        jax.config.update("jax_enable_x64", before)

    ctx.call_on_close(restore)


__all__ = ["app"]
