"""Hypothesis profiles for the fuzz suite (issue 12).

``ci`` (the default) runs a short profile in every test job; ``long`` runs many more cases
on demand: ``DIFFSIM_FUZZ=long bash scripts/test tests/fuzz``. Every fuzz test asserts one
of exactly two outcomes: a finite, correctly typed result, or a clean ``ValueError`` /
``TypeError`` (CLI: one line on stderr, exit code 2; HTTP: a 4xx, the server still up).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("DIFFSIM_FUZZ", "ci"))
