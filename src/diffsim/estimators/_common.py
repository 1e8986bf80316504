"""Shared constructor and call checks for the estimators."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import as_arrays, check_int, check_key, check_positive, is_concrete, warn_once


def positive_field(name: str, value: Any) -> Any:
    """Validate a finite, > 0 scalar option (values skipped for tracers) and return it as
    an array of the default float dtype, checked in that dtype (``1e-50`` is 0 in float32).

    One number for every component of θ: a σ (or δ, γ, R) array would broadcast against
    the samples deep inside the estimator, or silently scale the wrong axis."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a finite number > 0, got {value!r}")
    if np.ndim(value) != 0:
        raise ValueError(
            f"{name} must be a scalar (one value for every component of theta), got an "
            f"array of shape {np.shape(value)}"
        )
    dtype = jnp.result_type(float)
    check_positive(name, value, dtype if is_concrete(value) else None)
    return jnp.asarray(value, dtype=dtype) if is_concrete(value) else value


def samples_field(name: str, value: Any, minimum: int = 2) -> int:
    """Validate a sample count (an integer >= ``minimum``)."""
    return check_int(name, value, minimum=minimum)


def call_args(theta: Any, key: Any, *, randomized: bool) -> Any:
    """θ as the estimator computes with it (checked in its dtype, integers promoted to
    floats) after checking the key of a randomized estimator."""
    if randomized:
        check_key("key", key)
    return as_arrays("theta", theta, floating=True)


def warn_resolution(name: str, scale: Any, theta: Any) -> None:
    """Warn once when a perturbation of size ``scale`` (σ, the finite-difference step) is
    below what θ's dtype resolves at θ's magnitude: ``θ ± scale`` rounds back to θ there,
    so the estimate sees no change and returns 0 (or noise)."""
    if not is_concrete(scale):
        return
    leaves = [a for a in jax.tree_util.tree_leaves(theta) if is_concrete(a)]
    if not leaves:
        return
    s = float(np.asarray(scale))
    for a in leaves:
        arr = np.asarray(a)
        if arr.size == 0 or not np.issubdtype(arr.dtype, np.floating):
            continue
        big = float(np.max(np.abs(arr)))
        spacing = float(np.spacing(arr.dtype.type(big)))
        if s < spacing:
            warn_once(
                f"resolution:{name}:{arr.dtype}",
                f"{name}={s:g} is below the resolution of theta in {arr.dtype} at |theta| = "
                f"{big:g} (spacing {spacing:.3g}): theta ± {name} rounds back to theta and "
                f"the estimate loses what was asked for. Use a larger {name}, or float64 "
                f"(jax.config.update('jax_enable_x64', True)).",
            )
            return
