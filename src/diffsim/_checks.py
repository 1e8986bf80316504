"""Input validation shared by every public entry point.

Checks run in Python *before* tracing, on concrete values only: inside a user's ``jit``
the values are tracers and only structural checks apply.

Every check looks at the value **the computation will use**: the argument converted to the
dtype JAX gives it (a Python float is float32 unless ``jax_enable_x64`` is on), so a number
that is finite in float64 but overflows float32 (``1e300``) or a step that underflows to 0
(``h=1e-50``) is refused, naming the argument, instead of turning into an ``inf`` or a
division by zero later. The limits come from the dtype (``np.finfo``/``np.iinfo``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds a value (not a tracer inside ``jit``/``grad``/``vmap``)."""
    return not isinstance(x, Tracer)


def default_float() -> np.dtype:
    """The floating dtype JAX computes in by default: float64 with ``jax_enable_x64``,
    else float32."""
    return np.dtype(jnp.result_type(float))


def jax_dtype(value: Any) -> np.dtype:
    """The dtype ``jnp.asarray(value)`` will have (canonicalised: float64 becomes float32
    without ``jax_enable_x64``), without converting anything."""
    if hasattr(value, "dtype") and not isinstance(value, np.ndarray | np.generic):
        return np.dtype(value.dtype)  # a jax array (or tracer): already canonical
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, int):
        return np.dtype(jnp.result_type(int))
    if isinstance(value, float):
        return default_float()
    if isinstance(value, complex):
        return np.dtype(jnp.result_type(complex))
    return np.dtype(jax.dtypes.canonicalize_dtype(np.asarray(value).dtype))


def warn_precision(message: str) -> None:
    """``warnings.warn(message, RuntimeWarning)`` attributed to the caller's caller (the
    user's line). Repetition is the user's warnings filter's to decide (Python's default:
    once per line of user code); the library keeps no record of what it has said."""
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _x64_hint(dtype: np.dtype) -> str:
    if dtype == np.float32 and default_float() == np.float32:
        return " (enable float64 with jax.config.update('jax_enable_x64', True), or rescale)"
    return ""


def _numeric(name: str, value: Any, what: str) -> np.ndarray:
    """``value`` as a numpy array, or ``TypeError`` when it is not real numbers."""
    if isinstance(value, str | bytes) or value is None:
        raise TypeError(f"{name} must be {what}, got {value!r}")
    try:
        arr = np.asarray(value)
    except Exception:
        raise TypeError(f"{name} must be {what}, got {value!r}") from None
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be {what} (real), got {value!r}")
    return arr


def as_used(name: str, value: Any, dtype: Any = None) -> np.ndarray:
    """``value`` converted, in numpy, to the dtype the computation uses (``dtype``, default
    the one JAX gives it); ``ValueError`` naming ``name`` when the conversion overflows
    (finite in, infinite out) or an integer does not fit."""
    arr = np.asarray(value)
    target = np.dtype(dtype) if dtype is not None else jax_dtype(value)
    if np.issubdtype(target, np.integer):
        if np.issubdtype(arr.dtype, np.integer) and arr.size:
            info = np.iinfo(target)
            if np.any(arr < info.min) or np.any(arr > info.max):
                raise ValueError(
                    f"{name} does not fit in {target} (the dtype the computation uses: "
                    f"{info.min}..{info.max}), got {value!r}"
                )
        return arr.astype(target)
    if not np.issubdtype(target, np.inexact):
        return arr.astype(target)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        out = arr.astype(target)
    if np.issubdtype(arr.dtype, np.inexact):
        finite_in = np.isfinite(arr)
    else:  # integers: always finite, but may exceed the float's range
        finite_in = np.ones(arr.shape, bool)
    overflow = finite_in & ~np.isfinite(out)
    if np.any(overflow):
        big = float(np.max(np.abs(arr[overflow].astype(np.float64))))
        raise ValueError(
            f"{name} must be finite in {target}, the dtype the computation uses (|x| <= "
            f"{float(np.finfo(target).max):.4g}), got {big:.6g}{_x64_hint(target)}"
        )
    return out


INT32_MAX = int(np.iinfo(np.int32).max)
"""The largest loop length XLA's ``scan``/``fori_loop`` counters hold (2³¹ − 1)."""


def check_int(name: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming ``name`` and the range."""
    accepted = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer {accepted}, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer {accepted}, got {value}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a bool, or raise ``TypeError`` naming ``name``: only ``True`` and
    ``False`` (and numpy booleans) are flags; ``'yes'``, ``None`` or ``1`` are refused rather
    than read by their truthiness."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False), got {value!r}")


def check_instance(name: str, value: Any, cls: type, what: str) -> Any:
    """Return ``value``, or raise ``TypeError`` naming ``name`` unless it is a ``cls``."""
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    return value


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value``, or raise ``ValueError`` naming ``name`` and the accepted strings."""
    if not isinstance(value, str) or value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {accepted}, got {value!r}")
    return value


def check_positive(name: str, value: Any, dtype: Any = None) -> Any:
    """Raise ``ValueError`` unless ``value`` (when concrete) is finite and > 0 in the dtype
    the computation uses (``dtype``, default the one JAX gives it)."""
    if not is_concrete(value):
        return value
    arr = _numeric(name, value, "a finite number > 0")
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    used = as_used(name, arr if dtype is not None else value, dtype)
    if np.issubdtype(used.dtype, np.inexact) and not np.all(used > 0):
        raise ValueError(
            f"{name} must be > 0 in {used.dtype}, the dtype the computation uses (smallest "
            f"> 0: {float(np.finfo(used.dtype).smallest_subnormal):.4g}), got {value!r}, "
            f"which rounds to 0{_x64_hint(used.dtype)}"
        )
    return value


def check_in_range(name: str, value: Any, lo: float, hi: float, dtype: Any = None) -> Any:
    """Raise ``ValueError`` unless ``lo <= value <= hi`` (when concrete, and finite), in
    the dtype the computation uses."""
    if not is_concrete(value):
        return value
    arr = _numeric(name, value, f"a number in [{lo}, {hi}]")
    if not np.all(np.isfinite(arr)) or np.any(arr < lo) or np.any(arr > hi):
        raise ValueError(f"{name} must be finite and in [{lo}, {hi}], got {value!r}")
    as_used(name, arr if dtype is not None else value, dtype)
    return value


def _leaf_name(name: str, path: Any) -> str:
    return f"{name}{jax.tree_util.keystr(path)}"


def _check_leaf(label: str, leaf: Any, floating: bool, warn_underflow: bool = True) -> Any:
    """One concrete leaf, converted to the array the computation uses (see
    :func:`check_finite_tree`)."""
    if isinstance(leaf, str | bytes) or leaf is None:
        raise TypeError(f"{label} must be numeric, got {leaf!r}")
    try:
        arr = np.asarray(leaf)
    except Exception:
        raise TypeError(f"{label} must be numeric, got {leaf!r}") from None
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{label} must be numeric, got dtype {arr.dtype}")
    if floating and np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{label} must be real (gradients need real floats), got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{label} must be finite, got {arr!r}")
    target = jax_dtype(leaf)
    promote = floating and not np.issubdtype(target, np.inexact)
    if promote:
        target = default_float()
    used = as_used(label, arr, target)
    if warn_underflow and np.issubdtype(target, np.floating) and np.any((used == 0) & (arr != 0)):
        warn_precision(
            f"{label} has non-zero values that are 0 in {target}, the dtype the computation "
            f"uses (smallest > 0: {float(np.finfo(target).smallest_subnormal):.4g})"
            f"{_x64_hint(np.dtype(target))}",
        )
    if not promote:
        return jnp.asarray(leaf)
    if isinstance(leaf, bool | int):  # a Python number: stay weakly typed, like 3.0
        return jnp.asarray(float(leaf))
    return jnp.asarray(leaf, target)


def check_finite_tree(name: str, tree: Any) -> Any:
    """Raise unless every concrete leaf of ``tree`` is numeric and finite **as the
    computation will use it** (converted to its JAX dtype, limits of that dtype).

    ``TypeError`` for a non-numeric leaf, ``ValueError`` for NaN, infinity or a value that
    overflows its dtype (``1e300`` in float32); both name ``name`` and the leaf's path.
    Returns ``tree`` unchanged (see :func:`as_arrays` for the converted tree).
    """
    as_arrays(name, tree)
    return tree


def as_arrays(name: str, tree: Any, *, floating: bool = False) -> Any:
    """``tree`` with every leaf converted to the array the computation uses, checked as
    :func:`check_finite_tree` does; with ``floating``, integer and boolean leaves are
    promoted to the default float dtype (what gradients need). Tracers pass through (only
    promoted)."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    if not flat:
        raise ValueError(f"{name} must contain at least one array, got an empty pytree")
    out = []
    for path, leaf in flat:
        label = _leaf_name(name, path)
        if not is_concrete(leaf):
            if floating and not jnp.issubdtype(leaf.dtype, jnp.inexact):
                leaf = leaf.astype(default_float())
            out.append(leaf)
            continue
        out.append(_check_leaf(label, leaf, floating))
    return jax.tree_util.tree_unflatten(treedef, out)


def check_finite(name: str, value: Any) -> Any:
    """``value`` (a number or an array) as the array the computation uses, refused unless
    numeric and finite in its dtype (see :func:`check_finite_tree`); tracers pass."""
    if isinstance(value, list | tuple) and not value:
        raise ValueError(f"{name} must be a finite number or array, got {value!r}")
    if isinstance(value, list | tuple):
        value = _numeric(name, value, "finite numbers")
    return as_arrays(name, value)


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
    """Return ``value`` as a finite Python float or raise ``ValueError`` (finite also in the
    default float dtype the computation uses)."""
    if isinstance(value, bool | str | bytes):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{name} must be a finite number, got {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    as_used(name, out, default_float())
    return out


def check_key(name: str, key: Any) -> Any:
    """Raise ``TypeError`` unless ``key`` (when concrete) is a JAX PRNG key: a typed key
    array (``jax.random.key``) or a raw ``uint32`` key (``jax.random.PRNGKey``)."""
    if not is_concrete(key):
        return key
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise TypeError(f"{name} must be a single PRNG key, got {key.shape} keys")
        return key
    arr = np.asarray(key) if isinstance(key, jax.Array | np.ndarray) else None
    if arr is None or arr.dtype != np.uint32 or arr.ndim != 1 or arr.shape[0] < 2:
        raise TypeError(
            f"{name} must be a PRNG key (jax.random.PRNGKey(seed) or jax.random.key(seed)), "
            f"got {key!r}"
        )
    return key


class Domain(NamedTuple):
    """Where a physical parameter is meaningful: ``lower <= x <= upper``, or
    ``lower < x`` when ``open_lower``; ``what`` names it in messages ("a mass")."""

    lower: float = -math.inf
    upper: float = math.inf
    open_lower: bool = False
    what: str = ""

    def describe(self) -> str:
        """The interval as text: ``(0, inf)``, ``[0, 1]``."""
        return f"{'(' if self.open_lower else '['}{self.lower:g}, {self.upper:g}]".replace(
            "inf]", "inf)"
        )


def check_domains(name: str, theta: Any, domains: Mapping[str, Domain]) -> None:
    """Raise ``ValueError`` naming the first entry of ``theta`` (a dict) outside its
    :class:`Domain` in ``domains`` (names not in ``domains`` are not checked; values that
    are not concrete, inside ``jit``, are skipped).

    Example:
        >>> mass = Domain(0.0, open_lower=True, what="a mass")
        >>> check_domains("theta", {"m": [1.0, 0.0]}, {"m": mass})
        Traceback (most recent call last):
        ...
        ValueError: theta['m'][1] = 0 is outside (0, inf), the range of a mass
    """
    if not isinstance(theta, Mapping):
        return
    for key, value in theta.items():
        dom = domains.get(key)
        if dom is None or value is None or not is_concrete(value):
            continue
        arr = np.asarray(value, dtype=float)
        bad = (arr < dom.lower) | (arr > dom.upper) | ~np.isfinite(arr)
        if dom.open_lower:
            bad |= arr == dom.lower
        if np.any(bad):
            first = np.argwhere(bad)[0]
            index = "".join(f"[{int(i)}]" for i in first) if arr.ndim else ""
            where = f", the range of {dom.what}" if dom.what else ""
            raise ValueError(
                f"{name}[{key!r}]{index} = {float(arr[tuple(first)]):g} is outside "
                f"{dom.describe()}{where}"
            )
