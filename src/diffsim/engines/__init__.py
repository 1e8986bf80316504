"""Engine adapters: other simulators as diffsim steps ``step(state, theta[, u]) -> state``.

An adapter turns a model from another engine into a pure step function, so that every
diffsim tool — :func:`diffsim.rollout` (with ``checkpoint``), :func:`diffsim.rollout_jacobian`,
the estimators, :func:`diffsim.optimize`, :func:`diffsim.diagnose` and
:func:`diffsim.doctor.diagnose_rollout` — runs on it unchanged.

* :mod:`diffsim.engines.mjx` — MuJoCo models (MJCF file, XML string or ``mujoco.MjModel``)
  stepped by MuJoCo MJX; ``pip install 'diffsim-jax[mjx]'``.
* :mod:`diffsim.engines.brax` — stock ``brax.envs`` environments, with a policy parameter θ
  and per-step actions; ``pip install 'diffsim-jax[brax]'``.
* :mod:`diffsim.engines.scenes` — validated MJCF scenes with known answers (free flight,
  the article's wall in 3-D, Suh et al.'s pushing, a cart-pole).
* :mod:`diffsim.engines.control` — control tasks on gymnasium's MuJoCo models (the reacher's
  controls, a policy balancing the inverted pendulum), the losses of ``diffsim.TASKS``'
  ``reacher-open`` and ``pendulum``; ``pip install '.[mjx,zoo]'``.

The adapters import their engine only when imported themselves: ``import diffsim`` never
needs MuJoCo or Brax. :data:`ENGINES` names each adapter and the extra that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ENGINES: dict[str, tuple[str, str]] = {
    "mjx": ("diffsim.engines.mjx", "mjx"),
    "brax": ("diffsim.engines.brax", "brax"),
}
"""Adapter name → (module, pip extra that installs its engine)."""


def load_engine(name: str) -> ModuleType:
    """Import the adapter ``name`` (a key of :data:`ENGINES`).

    Raises:
        ValueError: unknown ``name`` (the message lists the adapters).
        ImportError: the engine is not installed; the message gives the pip command.

    Examples:
        >>> from diffsim.engines import ENGINES, load_engine
        >>> ENGINES["mjx"]  # adapter module, and the extra that installs its engine
        ('diffsim.engines.mjx', 'mjx')
        >>> load_engine("mjx").__name__
        'diffsim.engines.mjx'
    """
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {name!r}")
    module, extra = ENGINES[name]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"the {name} adapter needs its engine: pip install '.[{extra}]' in a clone of "
            f"diffsim (not yet on PyPI) ({err})"
        ) from err


__all__ = ["ENGINES", "load_engine"]
