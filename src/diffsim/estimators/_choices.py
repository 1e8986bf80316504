"""The auto estimator's and the doctor's choice codes: their names and their reasons.

Below :mod:`~diffsim.estimators.base` (a :class:`~diffsim.estimators.GradientEstimate` names
its ``choice``) and :mod:`~diffsim.estimators._evidence` (which decides it).
"""

from __future__ import annotations

CHOICES: tuple[str, ...] = ("exact", "mixed", "zeroth", "zeroth", "none", "zeroth", "zeroth")
"""The name of each choice code: what the doctor recommends and ``auto`` returns."""

REASONS: tuple[str, ...] = (
    "no flag and nothing undecided: the exact gradient agrees with every check",
    "a jump within σ (first- and zeroth-order samples disagree), a kink at θ (the exact "
    "gradient is one side's slope), or a statistic still undecided: first- and "
    "zeroth-order samples mixed, the first-order share capped so "
    "that its bias stays within the zeroth-order mean's standard error",
    "a plateau: the exact gradient is ~0 but the loss changes within σ (widened when "
    "nothing moved at the σ asked for): zeroth order, unbiased",
    "stiffness: rare, huge first-order samples with heavy tails: zeroth order, whose "
    "variance does not grow with the stiffness",
    "the loss, its gradient or its perturbed losses are NaN or inf: no estimate",
    "some first-order samples are NaN or inf (a gradient leaves the model's domain within "
    "σ): zeroth order from the finite loss samples",
    "chaos: the rollout Jacobian grows exponentially over the horizon: zeroth order, whose "
    "variance does not grow with the Jacobian",
)
"""Why each choice code was taken."""

EXACT, MIXED, ZEROTH_PLATEAU, ZEROTH_STIFF, NONE, ZEROTH_DOMAIN, ZEROTH_CHAOS = range(7)
