"""``value_and_grad`` that picks forward or reverse mode from the shapes, and says which."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ._checks import check_int
from ._types import Params

Mode = Literal["auto", "forward", "reverse"]

FORWARD_MAX_PARAMS = 4
"""``mode="auto"`` differentiates in forward mode when each system has at most this many
parameters. Forward mode carries one tangent per parameter alongside the rollout and stores
nothing; reverse mode stores (or recomputes) every step's residuals and reads them back. For
a contact rollout of T = 1000 steps the forward pass with 1 tangent costs ~1.5-2x the primal
and reverse mode ~5-10x (``python -m benchmarks``); the crossover on CPU lies near 4-6
tangents, so 4 keeps forward mode where it clearly wins."""


class Gradient(NamedTuple):
    """A value, its gradient, and how it was computed.

    Attributes:
        value: the loss (shape ``(B,)`` for ``batched=True``, else a scalar).
        grad: the gradient, with the structure of θ (leading axis B when batched).
        mode: ``"forward"`` or ``"reverse"``: the mode that was used.
        reason: why that mode (parameters per system against the forward-mode limit).
    """

    value: Any
    grad: Any
    mode: str
    reason: str


def choose_mode(num_params: int, mode: Mode = "auto") -> tuple[str, str]:
    """``(mode, reason)`` for ``num_params`` parameters per system (see :func:`value_and_grad`)."""
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"mode must be 'auto', 'forward' or 'reverse', got {mode!r}")
    if mode != "auto":
        return mode, f"mode={mode!r} requested"
    if num_params <= FORWARD_MAX_PARAMS:
        return "forward", (
            f"{num_params} parameter(s) per system <= {FORWARD_MAX_PARAMS}: forward mode "
            f"carries {num_params} tangent(s) and stores no residuals"
        )
    return "reverse", (
        f"{num_params} parameters per system > {FORWARD_MAX_PARAMS}: one reverse pass beats "
        f"{num_params} tangents"
    )


def _forward(fun: Callable[..., Any], theta: Params, args: tuple) -> tuple[Any, Any]:
    flat, unravel = ravel_pytree(theta)

    def f(p):
        return fun(unravel(p), *args)

    basis = jnp.eye(flat.size, dtype=flat.dtype)
    value, tangents = jax.vmap(lambda t: jax.jvp(f, (flat,), (t,)), out_axes=(None, 0))(basis)
    return value, unravel(tangents)


def _one(fun: Callable[..., Any], theta: Params, args: tuple, mode: str) -> tuple[Any, Any]:
    if mode == "forward":
        return _forward(fun, theta, args)
    return jax.value_and_grad(fun)(theta, *args)


def value_and_grad(
    fun: Callable[..., Any],
    theta: Params,
    *args: Any,
    mode: Mode = "auto",
    batched: bool = False,
) -> Gradient:
    r"""The value and gradient of a scalar loss ``fun(theta, *args)``, in the cheaper mode.

    For a rollout, reverse mode (``jax.grad``) costs one backward pass that reads back every
    step's residuals, whatever the number of parameters; forward mode (``jax.jvp``) carries
    one tangent per parameter along the forward pass and stores nothing. With few
    parameters per independent system — a ball's initial velocity, a few physical
    constants — forward mode is several times faster and needs O(1) memory in T.

    With ``batched=True``, every leaf of ``theta`` (and of each of ``args``) has a leading
    axis B of independent systems and ``fun`` is the loss of *one* system; the result holds
    B values and B gradients (``jax.vmap`` of the per-system gradient). The mode is chosen
    from the parameters per system. The computation is compiled once per (``fun``, shapes,
    mode) and reused; call it inside ``jax.jit`` too.

    Args:
        fun: scalar loss ``fun(theta, *args)``, a pure JAX function.
        theta: parameters, a pytree of arrays (floating point).
        *args: further arguments passed through (not differentiated).
        mode: ``"auto"`` (forward for at most :data:`FORWARD_MAX_PARAMS` parameters per
            system, else reverse), ``"forward"`` or ``"reverse"``.
        batched: ``theta`` and ``args`` carry a leading axis of independent systems.

    Returns:
        :class:`Gradient` ``(value, grad, mode, reason)``.

    Raises:
        ValueError: unknown ``mode``; ``batched`` with leaves of different leading axes or
            no leading axis; ``theta`` without leaves.
        TypeError: integer or boolean leaves in ``theta`` (gradients need floats).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import value_and_grad
        >>> g = value_and_grad(lambda t: jnp.sum(t**2), jnp.array([1.0, 2.0]))
        >>> g.mode, g.grad.tolist()
        ('forward', [2.0, 4.0])
    """
    leaves = jax.tree_util.tree_leaves(theta)
    if not leaves:
        raise ValueError("theta must contain at least one array, got an empty pytree")
    for leaf in leaves:
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
            raise TypeError(
                f"theta must have floating-point leaves (gradients need floats), got a leaf "
                f"of dtype {jnp.result_type(leaf)}; pass e.g. jnp.asarray(theta, float)"
            )
    if batched:
        sizes = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in leaves}
        if None in sizes or len(sizes) != 1:
            raise ValueError(
                "batched=True needs every leaf of theta to have the same leading axis B, got "
                f"shapes {[jnp.shape(leaf) for leaf in leaves]}"
            )
        check_int("batch size", sizes.pop(), minimum=1)
        per_system = sum(int(jnp.size(leaf)) // jnp.shape(leaf)[0] for leaf in leaves)
        chosen, reason = choose_mode(per_system, mode)
    else:
        chosen, reason = choose_mode(sum(int(jnp.size(leaf)) for leaf in leaves), mode)
    value, grad = _value_and_grad_jit(theta, args, fun=fun, mode=chosen, batched=bool(batched))
    return Gradient(value, grad, chosen, reason)


@functools.partial(jax.jit, static_argnames=("fun", "mode", "batched"))
def _value_and_grad_jit(theta, args, fun, mode, batched):
    if batched:
        return jax.vmap(lambda t, a: _one(fun, t, a, mode))(theta, args)
    return _one(fun, theta, args, mode)
