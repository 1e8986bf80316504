"""Named ways to descend: the registry behind ``diffsim optimize --method`` and the page's
Optimize choice.

Each :class:`Method` turns into the keyword arguments of :func:`diffsim.optimize` that run
it, so a shell that offers a method runs exactly what a user writing the call gets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import optax

from .estimators import Estimator, Exact


class Method(NamedTuple):
    """One named method.

    Attributes:
        name: the registry key (the CLI's ``--method`` choice).
        title: what it does, in words.
        takes_estimator: whether an estimator is given (``--estimator``); the others choose
            their gradient themselves.
        options: ``options(estimator) -> dict``: the keyword arguments of
            :func:`diffsim.optimize` besides ``loss``, ``theta0``, ``key`` and ``steps``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim import optimize
        >>> from diffsim.optimization import METHODS
        >>> kwargs = METHODS["lbfgs"].options(None)
        >>> r = optimize(lambda t: (t - 2.0) ** 2, jnp.asarray(0.0), key=jax.random.PRNGKey(0),
        ...              **kwargs)
        >>> round(float(r.theta), 6), int(r.steps_run) < 5
        (2.0, True)
    """

    name: str
    title: str
    takes_estimator: bool
    options: Callable[[Estimator | None], dict[str, Any]]


def _decide(estimator: Estimator | None) -> dict[str, Any]:
    return {}  # optimize's default: Decide


def _lbfgs(estimator: Estimator | None) -> dict[str, Any]:
    return {"estimator": Exact(), "optimizer": optax.lbfgs()}


def _adam(estimator: Estimator | None) -> dict[str, Any]:
    if estimator is None:
        raise ValueError("method 'adam' needs an estimator (e.g. diffsim.estimators.Auto())")
    return {"estimator": estimator}  # optimize's default Adam, σ annealed


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "decide",
            "the default: the doctor's evidence picks how to descend (L-BFGS on the exact "
            "gradient where it is trusted, sampling phases where it is not), re-checked "
            "when a phase stalls",
            False,
            _decide,
        ),
        Method(
            "lbfgs",
            "the exact gradient with L-BFGS and a zoom line search, trusted or not",
            False,
            _lbfgs,
        ),
        Method(
            "adam",
            "the given estimator with Adam (cosine-decayed step, σ annealed): the paper's "
            "fixed-schedule recipe",
            True,
            _adam,
        ),
    )
}
"""The named methods, by name: ``"decide"`` (the default), ``"lbfgs"``, ``"adam"``."""
