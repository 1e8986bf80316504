"""Input validation shared by every public entry point.

Checks run in Python *before* tracing, on concrete values only: inside a user's ``jit``
the values are tracers and only structural checks apply.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
from jax.core import Tracer


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds a value (not a tracer inside ``jit``/``grad``/``vmap``)."""
    return not isinstance(x, Tracer)


def check_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_positive(name: str, value: Any) -> Any:
    """Raise ``ValueError`` unless ``value`` (when concrete) is finite and > 0."""
    if not is_concrete(value):
        return value
    arr = np.asarray(value)
    if not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be a finite number > 0, got {value!r}")
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return value


def check_in_range(name: str, value: Any, lo: float, hi: float) -> Any:
    """Raise ``ValueError`` unless ``lo <= value <= hi`` (when concrete, and finite)."""
    if not is_concrete(value):
        return value
    arr = np.asarray(value)
    if not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be a number in [{lo}, {hi}], got {value!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr < lo) or np.any(arr > hi):
        raise ValueError(f"{name} must be finite and in [{lo}, {hi}], got {value!r}")
    return value


def check_finite_tree(name: str, tree: Any) -> Any:
    """Raise ``ValueError`` if any concrete leaf of ``tree`` is NaN or infinite."""
    leaves = jax.tree_util.tree_leaves(tree)
    if not leaves:
        raise ValueError(f"{name} must contain at least one array, got an empty pytree")
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not is_concrete(leaf):
            continue
        arr = np.asarray(leaf)
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(
                f"{name}{jax.tree_util.keystr(path)} must be numeric, got dtype {arr.dtype}"
            )
        if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}{jax.tree_util.keystr(path)} must be finite, got {arr!r}")
    return tree


def check_same_structure(name: str, tree: Any, reference: Any, reference_name: str) -> None:
    """Raise ``TypeError`` unless ``tree`` has the structure and leaf shapes of ``reference``."""
    t1 = jax.tree_util.tree_structure(tree)
    t2 = jax.tree_util.tree_structure(reference)
    if t1 != t2:
        raise TypeError(
            f"{name} must have the same pytree structure as {reference_name}: "
            f"got {t1}, expected {t2}"
        )
    for a, b in zip(jax.tree_util.tree_leaves(tree), jax.tree_util.tree_leaves(reference)):
        if np.shape(a) != np.shape(b):
            raise TypeError(
                f"{name} must have the leaf shapes of {reference_name}: "
                f"got {np.shape(a)}, expected {np.shape(b)}"
            )


def check_float(name: str, value: Any) -> float:
    """Return ``value`` as a finite Python float or raise ``ValueError``."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a finite number, got {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return out
