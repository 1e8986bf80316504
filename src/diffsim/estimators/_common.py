"""Shared constructor checks for the estimators."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._checks import check_int, check_positive, is_concrete


def positive_field(name: str, value: Any) -> Any:
    """Validate a finite, > 0 option (skipped for tracers) and return it as an array."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a finite number > 0, got {value!r}")
    check_positive(name, value)
    return jnp.asarray(value, dtype=jnp.result_type(float)) if is_concrete(value) else value


def samples_field(name: str, value: Any, minimum: int = 2) -> int:
    """Validate a sample count (an integer >= ``minimum``)."""
    return check_int(name, value, minimum=minimum)
