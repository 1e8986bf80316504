"""Build the Dash app and serve it: ``diffsim demo``."""

from __future__ import annotations

import logging
import os
import threading
import webbrowser
from pathlib import Path

import dash

from ._callbacks import register_callbacks
from ._layout import build_layout
from ._model import DemoModel

TITLE = "diffsim — a loss landscape with a contact cliff"


def configure_jax(*, cache_dir: str | os.PathLike | None = None) -> None:
    """Float64 and a persistent compilation cache, for the demo process.

    The cache (default ``~/.cache/diffsim/jax``; ``DIFFSIM_JAX_CACHE`` overrides it, and
    ``DIFFSIM_JAX_CACHE=off`` disables it) makes every start after the first one skip
    XLA compilation. A cache directory the user already configured for JAX is kept.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    if cache_dir is None:
        cache_dir = os.environ.get("DIFFSIM_JAX_CACHE") or Path.home() / ".cache/diffsim/jax"
    # JAX sets its flags as attributes at run time; its Config class does not declare them
    configured = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    if str(cache_dir).lower() in ("off", "0", "none") or configured:
        return
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", str(cache_dir))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def create_app(model: DemoModel | None = None) -> dash.Dash:
    """The demo page as a :class:`dash.Dash` app over ``model`` (a new one by default).

    The app serves its JavaScript from the installed packages, so it works offline. It
    does not compile anything: call ``model.warm_up()`` for that.
    """
    model = DemoModel() if model is None else model
    app = dash.Dash(
        __name__,
        title=TITLE,
        # Dash documents None as "no 'Updating...' title"; its signature says str
        update_title=None,  # pyright: ignore[reportArgumentType]
        serve_locally=True,
        assets_folder=str(Path(__file__).parent / "assets"),
    )
    app.layout = build_layout()
    register_callbacks(app, model)
    # Dash finishes its set-up on the first request, unguarded against concurrent ones:
    # make that first request here, before the server accepts any.
    app.server.test_client().get("/")
    return app


def _open_browser(url: str) -> None:
    try:
        webbrowser.open(url, new=2)
    except Exception:  # no display, no browser: the URL is printed anyway
        pass


def serve(
    host: str = "127.0.0.1", port: int = 8050, *, open_browser: bool = True, quiet: bool = True
) -> None:
    """Start the demo: compile in the background, print the URL, open a browser, serve.

    Blocks until interrupted. ``quiet`` silences the per-request log of the web server.
    """
    configure_jax()
    model = DemoModel()
    model.warm_up(background=True)
    app = create_app(model)
    if quiet:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/"
    print(f"diffsim demo: serving on {url}  (Ctrl+C to stop)", flush=True)
    if open_browser:
        threading.Timer(0.3, _open_browser, (url,)).start()
    app.run(host=host, port=port, debug=False)
