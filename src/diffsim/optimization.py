"""The parts of :func:`diffsim.optimize` a user may name or replace.

:func:`diffsim.optimize` and its result live in the flat ``diffsim`` namespace; this one
holds what tunes it: the named methods behind ``diffsim optimize --method`` and the page's
Optimize choice (:data:`METHODS`, each a :class:`Method`), the default optimizer
(:func:`default_optimizer`: Adam with a cosine-decayed rate), schedules for a stochastic
estimator's σ or sample count (:func:`cosine_anneal`, any :data:`Schedule`), and the
recorded path of a run (:class:`OptimizeHistory`, ``OptimizeResult.history``), and the name
of how a run ended (:func:`status_name` of a :data:`diffsim.RESULTS` item).

Example:
    >>> import jax, jax.numpy as jnp
    >>> from diffsim import optimize
    >>> from diffsim.optimization import METHODS
    >>> sorted(METHODS)
    ['adam', 'decide', 'lbfgs']
    >>> r = optimize(lambda t: (t - 1.0) ** 2, jnp.asarray(0.0), key=jax.random.PRNGKey(0),
    ...              steps=20, **METHODS["lbfgs"].options(None))
    >>> round(float(r.theta), 6)
    1.0
"""

from ._methods import METHODS as METHODS
from ._methods import Method as Method
from ._optimize import OptimizeHistory as OptimizeHistory
from ._optimize import Schedule as Schedule
from ._optimize import cosine_anneal as cosine_anneal
from ._optimize import default_optimizer as default_optimizer
from ._results import status_name as status_name

__all__ = [
    "METHODS",
    "Method",
    "OptimizeHistory",
    "Schedule",
    "cosine_anneal",
    "default_optimizer",
    "status_name",
]
