"""The one set of thresholds the doctor and ``auto`` decide with."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import check_in_range, check_positive


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """The one set of thresholds the doctor and ``auto`` decide with: the ``thresholds``
    options object of :func:`~diffsim.diagnose`, :func:`~diffsim.doctor.diagnose_rollout` and
    :class:`~diffsim.estimators.Auto` (``thresholds=``); the defaults are these.

    Attributes:
        z_threshold: significance, in standard errors, for "non-zero" and "disagree".
        stiffness_ratio: ρ above which per-sample gradients are "far larger than the loss
            changes they should explain".
        stiffness_kurtosis: excess kurtosis of the per-sample gradient norms above which
            their tails are "heavy".
        chaos_growth: growth G (> 1) of ‖∂s_t/∂s_0‖ from T/8 to T beyond which the horizon
            is too long for first-order gradients (read only with a rollout).
        concentration_limit: share of that growth, in (0, 1), one step may explain for it
            to count as chaos rather than stiffness (read only with a rollout).
        z_clear: significance below which a statistic is "clearly no"; between it and
            ``z_threshold`` it is undecided, and the sequential test draws more samples.
        gap_tolerance: η, the share of the smoothed gradient's norm a first-/zeroth-order
            gap must exceed to matter: a gap smaller than η·‖ḡ⁰‖ does not change what the
            user should do, however many samples make it significant.
        discretization_tolerance: the relative error of the gradient at h (estimated from
            h and h/2) beyond which it is the gradient of a different system (rollouts).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import RULES, Thresholds, measure
        >>> th = Thresholds()
        >>> th.z_threshold, th.z_clear, th.gap_tolerance, th.chaos_growth
        (4.0, 2.0, 0.1, 100.0)
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0) + 0.1 * t
        >>> m = measure(step, jnp.asarray(0.02), jax.random.PRNGKey(0), sigma=0.1)
        >>> [f.name for f in (rule.test(m, th) for rule in RULES) if f is not None]
        ['jump']
    """

    z_threshold: float = 4.0
    stiffness_ratio: float = 20.0
    stiffness_kurtosis: float = 10.0
    chaos_growth: float = 100.0
    concentration_limit: float = 0.5
    z_clear: float = 2.0
    gap_tolerance: float = 0.1
    discretization_tolerance: float = 0.1

    def __post_init__(self) -> None:
        """Each field in its range, named in the error (one check for the doctor and auto)."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise ValueError(f"{field.name} must be one real number, got {value!r}")
        for name in ("z_threshold", "z_clear", "stiffness_ratio", "stiffness_kurtosis"):
            check_positive(name, getattr(self, name))
        if not self.z_clear < self.z_threshold:
            raise ValueError(
                f"z_clear must be < z_threshold ({self.z_threshold}), got {self.z_clear}"
            )
        for name, lo, hi in (("gap_tolerance", 0.0, 1.0), ("discretization_tolerance", 0.0, 1.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
            check_in_range(name, value, lo, hi)
        if not self.discretization_tolerance > 0:
            raise ValueError(
                f"discretization_tolerance must be in (0, 1], got {self.discretization_tolerance!r}"
            )
        growth = self.chaos_growth
        if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not growth > 1:
            raise ValueError(f"chaos_growth must be a number > 1, got {growth!r}")
        share = self.concentration_limit
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise ValueError(f"concentration_limit must be in (0, 1), got {share!r}")
