"""The interactive page of the article's projectile-over-a-wall demo (``diffsim demo``).

A Dash app whose callbacks only call the library: the time-stepped simulator in
:mod:`diffsim.systems.projectile_wall`, the estimators in :mod:`diffsim.estimators` and
:func:`diffsim.optimize`. See ``docs/demo.md``.
"""

from ._app import configure_jax as configure_jax
from ._app import create_app as create_app
from ._app import serve as serve
from ._callbacks import Callbacks as Callbacks
from ._layout import readouts as readouts
from ._model import DemoModel as DemoModel
from ._model import InputError as InputError

__all__ = [
    "Callbacks",
    "DemoModel",
    "InputError",
    "configure_jax",
    "create_app",
    "readouts",
    "serve",
]
