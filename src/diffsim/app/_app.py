"""Build the Dash app and serve it: ``diffsim demo``."""

from __future__ import annotations

import logging
import os
import sys
import threading
import webbrowser
from pathlib import Path

import dash
from werkzeug.serving import make_server

from .. import enable_compilation_cache
from . import _guard
from ._callbacks import register_callbacks
from ._layout import build_layout
from ._model import DemoModel

TITLE = "diffsim — a loss landscape with a contact cliff"


def configure_jax(*, cache_dir: str | os.PathLike | None = None) -> None:
    """Float64 and a persistent compilation cache, for the demo process.

    The cache (:func:`diffsim.enable_compilation_cache`: default ``~/.cache/diffsim/jax``;
    ``DIFFSIM_JAX_CACHE`` overrides it, and ``DIFFSIM_JAX_CACHE=off`` disables it) makes
    every start after the first one skip XLA compilation; every program is kept, however
    fast it compiled. A cache directory the user already configured for JAX is kept.
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    if cache_dir is not None and str(cache_dir).lower() in ("off", "0", "none"):
        return
    enable_compilation_cache(cache_dir, min_compile_seconds=0.0)


def create_app(model: DemoModel | None = None, *, host: str = "127.0.0.1") -> dash.Dash:
    """The demo page as a :class:`dash.Dash` app over ``model`` (a new one by default).

    The app serves its JavaScript from the installed packages, so it works offline. It
    does not compile anything: call ``model.warm_up()`` for that. Its server is guarded
    (:mod:`._guard`): it answers requests for ``localhost``, ``127.0.0.1``, ``::1`` and
    ``host`` (the interface it is served on) only, reads no body over 1 MiB, and answers a
    malformed callback request with a 4xx.
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
    app.layout = build_layout(model)
    register_callbacks(app, model)
    _guard.install(app.server, app.callback_map, _guard.HostCheck.for_bind(host))
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
    """Start the demo: bind, compile in the background, print the URL, open a browser, serve.

    The port is bound before anything is compiled, so a taken port or a bad host fails at
    once with :class:`~._guard.BindError`. Binding beyond localhost (``0.0.0.0``, ``::`` or
    an address other machines reach) prints a warning and the URLs it is reachable at.
    Blocks until interrupted (Ctrl+C), then returns; the warm-up thread may still be
    compiling, so a caller that exits the process should do it with ``os._exit`` (JAX
    aborts the interpreter's shutdown under a compile in flight). ``quiet`` silences the
    per-request log of the web server.

    Raises:
        BindError: the host does not resolve, is not this machine's, or the port is taken.
    """
    sock = _guard.bind_socket(host, port)
    try:
        configure_jax()
        model = DemoModel()
        app = create_app(model, host=host)
        if quiet:
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        # the server adopts the bound socket (a duplicate of it)
        httpd = make_server(host, port, app.server, threaded=True, fd=sock.fileno())
    finally:
        sock.close()
    model.warm_up(background=True)
    url = _announce(host, port)
    if open_browser:
        threading.Timer(0.3, _open_browser, (url,)).start()
    httpd.serve_forever()  # returns on Ctrl+C


def _announce(host: str, port: int) -> str:
    """Print where the page is served (and a warning beyond localhost); the URL for this
    machine's browser."""
    if host in _guard.WILDCARD_HOSTS:
        local = f"http://{_guard.url_host('::1' if host == '::' else '127.0.0.1')}:{port}/"
        where = ", ".join([local, *_guard.interface_urls(host, port)])
        shown = f"http://{_guard.url_host(host or '0.0.0.0')}:{port}/ (every interface: {where})"
    else:
        local = shown = f"http://{_guard.url_host(host)}:{port}/"
    print(f"diffsim demo: serving on {shown}  (Ctrl+C to stop)", flush=True)
    if not _guard.is_local(host):
        shown_host = host or "''"
        print(
            f"WARNING: --host {shown_host} serves the page beyond this machine: anyone who\n"
            f"  can reach port {port} here can use it, without a password, and make this\n"
            "  process compute. Use --host 127.0.0.1 (the default) to keep it local.",
            file=sys.stderr,
            flush=True,
        )
    return local
