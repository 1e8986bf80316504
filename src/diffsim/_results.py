"""How a run ended: :data:`RESULTS`, one enumeration for :func:`diffsim.optimize` and
:func:`diffsim.identify` (as Diffrax's and Optimistix's ``RESULTS``).

An item is an array-backed Equinox enumeration item, so a result that holds one still
stacks under ``vmap`` and passes through ``jit``; compare with ``==``
(``r.status == RESULTS.converged``), read its message as ``RESULTS[r.status]`` and its
name with :func:`status_name`.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx


class RESULTS(eqx.Enumeration):
    """How a run ended.

    Example:
        >>> import jax, jax.numpy as jnp, optax
        >>> from diffsim import RESULTS, optimize
        >>> r = optimize(lambda t: (t - 1.0) ** 2, jnp.asarray(0.0), key=jax.random.PRNGKey(0),
        ...              steps=50, optimizer=optax.lbfgs())
        >>> bool(r.status == RESULTS.converged), RESULTS[r.status]
        (True, 'the solver met its tolerance or could lower the loss no further')
    """

    completed = "every step ran"
    converged = "the solver met its tolerance or could lower the loss no further"
    stalled = (
        "no progress: a line search found no decrease along a trusted gradient, or sampling "
        "phases in a row found no lower loss (the last decision says which)"
    )
    budget = "the evaluation budget ran out"
    max_steps = "it did not converge within its limit of steps or phases"
    non_finite = "a NaN or inf loss (or simulation) stopped it"


_NAMES = ("completed", "converged", "stalled", "budget", "max_steps", "non_finite")
_NAME_OF_MESSAGE = {RESULTS[getattr(RESULTS, n)]: n for n in _NAMES}


def status_name(status: Any) -> str | None:
    """The name of a concrete :data:`RESULTS` item (``"converged"``, …); ``None`` for a
    traced or stacked one.

    Example:
        >>> from diffsim import RESULTS
        >>> from diffsim.optimization import status_name
        >>> status_name(RESULTS.budget)
        'budget'
    """
    try:
        message = RESULTS[status]
    except Exception:  # traced, or a stack of items (no single message)
        return None
    return _NAME_OF_MESSAGE.get(message) if isinstance(message, str) else None


def status_of(name: str) -> Any:
    """The :data:`RESULTS` item called ``name`` (internal)."""
    if name not in _NAMES:
        raise ValueError(f"status must be one of {', '.join(_NAMES)}, got {name!r}")
    return getattr(RESULTS, name)
