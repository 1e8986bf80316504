r"""Smoothing scales σ: one number, one per component of θ (a pytree), or relative to |θ|.

Everything that takes a σ (the smoothing estimators, :class:`~diffsim.estimators.Auto`,
:func:`~diffsim.diagnose`) accepts three forms:

* a number: the same σ for every component of θ (θ's units);
* a pytree shaped like θ (each leaf a number or an array broadcastable to θ's leaf): one
  scale per component, e.g. ``{"g_over_l": 0.2, "damping": 0.01}``;
* :class:`Relative`: :math:`σ_i = s \cdot \max(|θ_i|, \text{floor})`, a fraction of each
  component's own magnitude, so that a damping of 0.2 beside a stiffness of 4 is perturbed
  by 0.01, not by its whole value.

:func:`sigma_vector` resolves any of them against θ into the flat vector of per-component
scales the samplers use (``x + σ ⊙ z``).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from ._checks import as_arrays, check_positive, is_concrete


def _check_positive_scalar(name: str, value: Any) -> Any:
    """The default float dtype, once ``value`` is checked to be one number > 0 in it."""
    if isinstance(value, bool) or np.ndim(value) != 0:
        raise TypeError(f"{name} must be a finite number > 0, got {value!r}")
    dtype = jnp.result_type(float)
    check_positive(name, value, dtype if is_concrete(value) else None)
    if is_concrete(value):
        check_normal(name, value, dtype)
    return dtype


def _positive_scalar(name: str, value: Any) -> Array:
    dtype = _check_positive_scalar(name, value)
    return jnp.asarray(value, dtype) if is_concrete(value) else value


def check_normal(name: str, value: Any, dtype: Any) -> None:
    """A σ below the smallest normal number of the dtype divides to inf: refused."""
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    arr = np.abs(np.asarray(value, np.float64))
    if arr.size and float(arr.min()) < tiny:
        raise ValueError(
            f"{name} must be >= {tiny:.3g} (the smallest normal {np.dtype(dtype).name}: "
            f"below it the estimate divides by a subnormal and is NaN), got {value!r}"
        )


def _field(name: str, value: Any) -> Any:
    """A :class:`Relative` field: checked; a Python or NumPy number stays a Python float,
    so that building one (``DEFAULT_SIGMA`` at import) never starts JAX's backend (the CLI
    creates host devices after import)."""
    if value is None and name == "floor":
        return None
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        _check_positive_scalar(name, value)
        return float(value)
    return _positive_scalar(name, value)


class Relative(eqx.Module):
    r"""σ relative to θ: :math:`σ_i = \text{scale} \cdot \max(|θ_i|, \text{floor})`.

    This is diffsim's one σ rule: every smoothing estimator, :class:`~diffsim.estimators.Auto`,
    the doctor, the CLI and the page default to ``Relative(0.05)`` (:data:`DEFAULT_SIGMA`);
    a σ the user gives wins everywhere.

    Args:
        scale: the fraction of each component's magnitude (> 0), e.g. 0.05.
        floor: the magnitude below which a component counts as "about zero" (> 0, θ's
            units): such a component is perturbed by ``scale · floor``. ``None`` (the
            default): the smallest non-zero :math:`|θ_i|` (1 when θ is all zero), so a
            component at 0 is never perturbed more than any non-zero one.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.estimators import Relative, sigma_vector
        >>> s = sigma_vector(Relative(0.05, floor=0.1), {"k": jnp.array(4.0), "c": jnp.array(0.2)})
        >>> [round(float(v), 6) for v in s]  # raveled in θ's key order: c, k
        [0.01, 0.2]
        >>> from diffsim.estimators import DEFAULT_SIGMA  # Relative(0.05)
        >>> [round(float(v), 6) for v in sigma_vector(DEFAULT_SIGMA, jnp.array([4.0, 0.0, 0.2]))]
        [0.2, 0.01, 0.01]
    """

    scale: Any = eqx.field(converter=lambda v: _field("scale", v), default=0.05)
    floor: Any = eqx.field(converter=lambda v: _field("floor", v), default=None)
    widen: bool = eqx.field(static=True, default=False)
    """Whether the tools may widen this σ ×4 while nothing moves within it (the doctor and
    :class:`~diffsim.estimators.Auto`): declared by :data:`DEFAULT_SIGMA` only — a σ the
    user gives wins (and ``widened`` / ``scale_sigma`` copies do not carry it)."""

    def resolve(self, x: Array) -> Array:
        """The per-component σ at raveled θ ``x``."""
        scale = jnp.asarray(self.scale, x.dtype)
        mags = jnp.abs(x)
        if self.floor is None:
            big = jnp.asarray(jnp.finfo(x.dtype).max, x.dtype)
            smallest = jnp.min(jnp.where(mags > 0, mags, big), initial=big)
            tiny = jnp.asarray(jnp.finfo(x.dtype).tiny, x.dtype) / scale
            floor = jnp.where(smallest < big, jnp.maximum(smallest, tiny), 1.0)
        else:
            floor = jnp.asarray(self.floor, x.dtype)
        return scale * jnp.maximum(mags, floor)


DEFAULT_SIGMA = Relative(0.05, widen=True)
"""The default σ of every smoothing estimator, ``auto``, the doctor, the CLI and the page:
5 % of each component's magnitude, a component at 0 taking the smallest non-zero |θ_i|; the
one σ the doctor and ``auto`` may widen (``widen``)."""


def may_widen(sigma: Any) -> bool:
    """Whether ``sigma`` declares that the tools may widen it (:attr:`Relative.widen`: the
    default σ); a number or a pytree, like any σ the user gives, may not.

    Example:
        >>> from diffsim.estimators import DEFAULT_SIGMA, Relative
        >>> from diffsim._sigma import may_widen
        >>> may_widen(DEFAULT_SIGMA), may_widen(Relative(0.05)), may_widen(0.1)
        (True, False, False)
    """
    return isinstance(sigma, Relative) and sigma.widen


def widened(sigma: Any, factor: float) -> Any:
    """σ in the same form, ``factor`` times larger (a number, a pytree, or Relative's
    scale)."""
    if isinstance(sigma, Relative):
        return Relative(float(sigma.scale) * factor, sigma.floor)
    return jax.tree_util.tree_map(lambda v: jnp.asarray(v) * factor, sigma)


def check_sigma(name: str, value: Any) -> Any:
    """Validate a σ in any of its forms (values skipped for tracers) and return it: a
    scalar as an array of the default float dtype, a :class:`Relative` as is, a pytree with
    every leaf finite and > 0 (checked in the dtype the computation uses)."""
    if isinstance(value, Relative):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a finite number > 0, a pytree like theta or "
                        f"Relative(scale), got {value!r}")  # fmt: skip
    if isinstance(value, (int, float, np.integer, np.floating)) or (
        hasattr(value, "shape") and np.ndim(value) == 0
    ):
        return _positive_scalar(name, value)
    leaves = jax.tree_util.tree_leaves(value)
    if not leaves:
        raise ValueError(f"{name} must be a number > 0, a pytree like theta or Relative(scale), "
                         f"got an empty {type(value).__name__}")  # fmt: skip
    tree = as_arrays(name, value, floating=True)
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        label = f"{name}{jax.tree_util.keystr(path)}"
        check_positive(label, leaf)
        if is_concrete(leaf):
            check_normal(label, leaf, np.asarray(leaf).dtype)
    return tree


def is_scalar_sigma(sigma: Any) -> bool:
    """Whether ``sigma`` is one number (the same scale for every component)."""
    return (
        not isinstance(sigma, Relative)
        and np.ndim(sigma) == 0
        and not isinstance(sigma, (dict, list, tuple))
    )


def sigma_vector(sigma: Any, theta: Any) -> Array:
    """The per-component σ, raveled like ``ravel_pytree(theta)``, in θ's dtype.

    Raises:
        ValueError: a pytree σ whose structure differs from θ's, or a leaf that does not
            broadcast to θ's leaf.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.estimators import Relative, sigma_vector
        >>> theta = {"k": jnp.array(4.0), "c": jnp.array(0.2)}
        >>> [round(float(s), 6) for s in sigma_vector(0.1, theta)]  # one number: every component
        [0.1, 0.1]
        >>> [round(float(s), 6) for s in sigma_vector({"k": 0.5, "c": 0.01}, theta)]  # c, k order
        [0.01, 0.5]
    """
    x, _ = ravel_pytree(theta)
    if isinstance(sigma, Relative):
        return sigma.resolve(x)
    if all(is_concrete(v) for v in jax.tree_util.tree_leaves(sigma)):
        check_sigma("sigma", sigma)  # NaN, inf, 0, negative or subnormal: refused, named
    if is_scalar_sigma(sigma):
        return jnp.full(x.shape, sigma, x.dtype)
    t1, t2 = jax.tree_util.tree_structure(sigma), jax.tree_util.tree_structure(theta)
    if t1 != t2:
        raise ValueError(
            f"sigma must be a number, Relative(scale) or a pytree with theta's structure: "
            f"got {t1}, expected {t2}"
        )

    def leaf(s: Any, t: Any) -> Array:
        t = jnp.asarray(t)
        try:
            return jnp.broadcast_to(jnp.asarray(s, x.dtype), t.shape)
        except ValueError:
            raise ValueError(
                f"sigma: a leaf of shape {np.shape(s)} does not broadcast to theta's leaf of "
                f"shape {t.shape}"
            ) from None

    vec, _ = ravel_pytree(jax.tree_util.tree_map(leaf, sigma, theta))
    return vec.astype(x.dtype)


def describe(sigma: Any) -> str:
    """A short text for messages and reports: ``0.1``, ``relative 0.05 (floor 0.1)`` or
    ``per component``."""
    if isinstance(sigma, Relative):
        floor = "the smallest non-zero |θ_i|" if sigma.floor is None else f"{float(sigma.floor):g}"
        return f"{float(sigma.scale):g}·|θ| (floor {floor})"
    if is_scalar_sigma(sigma):
        return f"{float(np.asarray(sigma)):g}" if is_concrete(sigma) else "traced"
    return "per component"


def scale_sigma(sigma: Any, factor: Array) -> Any:
    """σ in its own form, ``factor`` times (traceable): a :class:`Relative`'s scale, or
    every leaf of a number or pytree."""
    if isinstance(sigma, Relative):
        return Relative(sigma.scale * factor, sigma.floor)
    return jax.tree_util.tree_map(lambda v: v * factor, sigma)
