"""The interactive page of the article's projectile-over-a-wall demo (``diffsim demo``).

A Dash app whose callbacks only call the library: the time-stepped simulator in
:mod:`diffsim.systems.projectile_wall`, the estimators in :mod:`diffsim.estimators` and
:func:`diffsim.optimize`. See ``docs/demo.md``. Needs the ``demo`` extra (Dash, Plotly):
without it importing this package raises :class:`~diffsim.MissingExtraError`
saying what to install.

Example:
    >>> from diffsim.app import CHROMIUM, CHROMIUM_ARGS  # the headless browser tests drive
    >>> isinstance(CHROMIUM, str), "--no-sandbox" in CHROMIUM_ARGS  # DIFFSIM_CHROMIUM: the binary
    (True, True)
"""

from .. import require_extra

try:
    from ._app import configure_jax as configure_jax
    from ._app import create_app as create_app
    from ._app import serve as serve
    from ._browser import CHROMIUM as CHROMIUM
    from ._browser import CHROMIUM_ARGS as CHROMIUM_ARGS
    from ._callbacks import Callbacks as Callbacks
    from ._guard import BindError as BindError
    from ._layout import readouts as readouts
    from ._model import DemoModel as DemoModel
    from ._model import InputError as InputError
except ImportError:
    require_extra("demo")  # Dash or Plotly missing: one line naming the extra
    raise

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "BindError",
    "Callbacks",
    "DemoModel",
    "InputError",
    "configure_jax",
    "create_app",
    "readouts",
    "serve",
]
