"""Shared constructor and call checks for the estimators."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import (
    INT32_MAX,
    as_arrays,
    check_int,
    check_key,
    check_positive,
    is_concrete,
    warn_precision,
)
from .._sigma import check_normal, sigma_vector


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
    if is_concrete(value):
        check_normal(name, value, dtype)  # the one subnormal check (diffsim._sigma)
    return jnp.asarray(value, dtype=dtype) if is_concrete(value) else value


MEMORY_FRACTION = 0.5
"""At most this share of the machine's memory for one call's sample buffers."""


def _memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 16e9


def check_sample_memory(name: str, num_samples: int, theta: Any, copies: int) -> None:
    """Refuse a sample count whose buffers (``copies`` arrays of N × dim θ in θ's dtype,
    and N·copies within int32) would not fit: a ValueError naming ``name``, the bytes it
    would need and the largest N that fits, before anything is compiled."""
    x = ravel_pytree(theta)[0]
    d = max(int(x.size), 1)
    itemsize = np.dtype(x.dtype).itemsize
    budget = MEMORY_FRACTION * _memory_bytes()
    need = float(num_samples) * d * itemsize * copies
    most = int(min(budget / (d * itemsize * copies), INT32_MAX // max(copies, 1)))
    if need > budget or num_samples * copies > INT32_MAX:
        raise ValueError(
            f"{name} must be at most {most} for theta of {d} entries here (N = "
            f"{num_samples} needs about {need / 1e9:.3g} GB of sample buffers, over half of "
            f"this machine's {_memory_bytes() / 1e9:.3g} GB, or more than 2^31 - 1 "
            "evaluations); use fewer samples"
        )


def samples_field(name: str, value: Any, minimum: int = 2) -> int:
    """Validate a sample count (an integer in [``minimum``, 2³¹ − 1]: XLA's array sizes)."""
    return check_int(name, value, minimum=minimum, maximum=INT32_MAX)


def call_args(
    theta: Any, key: Any, *, randomized: bool, num_samples: int | None = None, copies: int = 2
) -> Any:
    """θ as the estimator computes with it (checked in its dtype, integers promoted to
    floats, not empty) after checking the key of a randomized estimator, and its sample
    buffers against the memory (:func:`check_sample_memory`)."""
    if randomized:
        check_key("key", key)
    theta = as_arrays("theta", theta, floating=True)
    check_not_empty(theta)
    if num_samples is not None:
        check_sample_memory("num_samples", num_samples, theta, copies)
    return theta


def check_not_empty(theta: Any) -> None:
    """One clear error for a θ without entries (``jnp.zeros((0,))``, ``{}``)."""
    leaves = jax.tree_util.tree_leaves(theta)
    if sum(int(np.size(v)) for v in leaves) == 0:
        raise ValueError("theta has no entries: there is nothing to differentiate")


def warn_resolution(name: str, scale: Any, theta: Any) -> None:
    """Warn once when a perturbation of size ``scale`` (σ, the finite-difference step) is
    below what θ's dtype resolves at θ's magnitude: ``θ ± scale`` rounds back to θ there,
    so the estimate sees no change and returns 0 (or noise)."""
    if not all(is_concrete(a) for a in jax.tree_util.tree_leaves((scale, theta))):
        return
    x = np.asarray(ravel_pytree(theta)[0])
    if x.size == 0 or not np.issubdtype(x.dtype, np.floating):
        return
    s = np.asarray(sigma_vector(scale, theta)) if name == "sigma" else np.asarray(scale)
    spacing = np.spacing(np.abs(x))
    low = np.nonzero(s < spacing)[0]
    if low.size:
        i = int(low[0])
        warn_precision(
            f"{name}={float(np.broadcast_to(s, x.shape)[i]):g} is below the resolution of "
            f"theta in {x.dtype} at |theta| = {abs(float(x[i])):g} (spacing "
            f"{float(spacing[i]):.3g}): theta ± {name} rounds back to theta and the estimate "
            f"loses what was asked for. Use a larger {name}, or float64 "
            f"(jax.config.update('jax_enable_x64', True)).",
        )


def as_count(value: Any) -> Any:
    """A static count as a Python ``int`` (a NumPy integer would otherwise be traced as an
    array leaf and fail deep inside ``jit``); anything else is left for the checks to
    refuse, naming the option."""
    if isinstance(value, np.integer) and not isinstance(value, bool):
        return int(value)
    return value
