"""Gradient estimators through contact: exact, finite differences, ZoBG, FoBG, AoBG.

Every estimator is a strategy object with one method,
``estimator(loss, theta, key) -> GradientEstimate``, for any scalar JAX loss over a pytree θ,
and declares what it is and what it takes (``label``, ``options``, ``smoothing``, ``reports``,
...: see :class:`Estimator`). :data:`ESTIMATORS` is the one registry: the CLI's
``--estimator`` choices, the page's gradient panel and the parametrized tests read it.
Adding an estimator is one file and one line here (``CONTRIBUTING.md``).
See ``docs/estimators.md`` and Suh et al., ICML 2022.
"""

from __future__ import annotations

from typing import Any

from .._sigma import DEFAULT_SIGMA as DEFAULT_SIGMA
from .._sigma import Relative as Relative
from .._sigma import sigma_vector as sigma_vector
from ._evidence import CHOICES as CHOICES
from .alpha_order import AlphaOrder as AlphaOrder
from .alpha_order import bernstein_radius as bernstein_radius
from .alpha_order import choose_alpha as choose_alpha
from .auto import Auto as Auto
from .auto import chosen_estimator as chosen_estimator
from .auto import describe_choice as describe_choice
from .base import BASE_QUANTITIES as BASE_QUANTITIES
from .base import QUANTITIES as QUANTITIES
from .base import STATS as STATS
from .base import Cost as Cost
from .base import Estimator as Estimator
from .base import GradientEstimate as GradientEstimate
from .base import Option as Option
from .base import Quantity as Quantity
from .base import Reported as Reported
from .base import SmoothingEstimator as SmoothingEstimator
from .exact import Exact as Exact
from .finite_difference import FiniteDifference as FiniteDifference
from .first_order import FirstOrder as FirstOrder
from .rollout_inputs import rollout_input_loss as rollout_input_loss
from .zeroth_order import ZerothOrder as ZerothOrder

ESTIMATORS: dict[str, type[Estimator]] = {
    "exact": Exact,
    "fd": FiniteDifference,
    "zeroth": ZerothOrder,
    "first": FirstOrder,
    "alpha": AlphaOrder,
    "auto": Auto,
}
"""Name → estimator class: :func:`make_estimator`, the CLI's ``--estimator`` choices, the
page and the parametrized tests read it (in this order)."""


def make_estimator(name: str, **options: Any) -> Estimator:
    """Build the estimator registered as ``name`` with keyword ``options``.

    Example:
        >>> make_estimator("zeroth", sigma=0.5, num_samples=8).num_samples
        8

    Raises:
        ValueError: unknown ``name`` (the message lists the valid ones) or a bad option.
        TypeError: an option the estimator does not take.
    """
    if name not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(sorted(ESTIMATORS))}, got {name!r}")
    return ESTIMATORS[name](**options)


__all__ = [
    "BASE_QUANTITIES",
    "CHOICES",
    "DEFAULT_SIGMA",
    "ESTIMATORS",
    "QUANTITIES",
    "STATS",
    "AlphaOrder",
    "Auto",
    "Cost",
    "Estimator",
    "Exact",
    "FiniteDifference",
    "FirstOrder",
    "GradientEstimate",
    "Option",
    "Quantity",
    "Relative",
    "Reported",
    "SmoothingEstimator",
    "ZerothOrder",
    "bernstein_radius",
    "choose_alpha",
    "chosen_estimator",
    "describe_choice",
    "make_estimator",
    "rollout_input_loss",
    "sigma_vector",
]
