"""``value_and_grad`` that picks forward or reverse mode from the shapes, and says which."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax.core import Tracer
from jax.flatten_util import ravel_pytree

from ._checks import as_arrays, check_int
from ._sharding import basis_map, device_count, device_mesh, sample_map
from ._types import Params

Mode = Literal["auto", "forward", "reverse"]

FORWARD_MAX_PARAMS = 4
"""``mode="auto"`` considers forward mode only when each system has at most this many
parameters: forward mode carries one tangent per parameter, reverse mode one backward pass
whatever their number."""

FORWARD_MIN_RESIDUAL_BYTES = 4 * 2**20
"""... and picks it when reverse mode would have to store at least this many bytes of
residuals (measured abstractly, ``jax.eval_shape`` of ``jax.vjp``: nothing is run). Below
that, the residuals stay in cache and one backward pass beats the tangents' extra work;
above it, reverse mode streams them through memory. Measured on the benchmark's bouncing
balls (``python -m benchmarks.scaling``, 2-core EPYC): reverse wins at 2.4 MiB (N = 256,
T = 10⁴; forward 1.2x slower) and 3.9 MiB (N = 4096, T = 10³; forward 2.9x slower),
forward wins from 7 MiB (N = 65,536, T = 100: 0.57x) to 1 GiB (0.28-0.44x)."""


class Gradient(NamedTuple):
    """A value, its gradient, and how it was computed.

    Attributes:
        value: the loss (shape ``(B,)`` for ``batched=True``, else a scalar).
        grad: the gradient, with the structure of θ (leading axis B when batched).
        mode: ``"forward"`` or ``"reverse"``: the mode that was used.
        reason: why that mode (parameters per system, residual bytes of reverse mode).

    Examples:
        >>> import jax.numpy as jnp
        >>> import diffsim
        >>> g = diffsim.value_and_grad(lambda th: jnp.sum(th**2), jnp.array([1.0, 2.0]))
        >>> float(g.value), g.grad.tolist(), g.mode
        (5.0, [2.0, 4.0], 'reverse')
    """

    value: Any
    grad: Any
    mode: str
    reason: str


def choose_mode(num_params: int, residual_bytes: float, mode: Mode = "auto") -> tuple[str, str]:
    """``(mode, reason)`` for ``num_params`` parameters per system and ``residual_bytes``
    that reverse mode would store (see :func:`value_and_grad`)."""
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"mode must be 'auto', 'forward' or 'reverse', got {mode!r}")
    if mode != "auto":
        return mode, f"mode={mode!r} requested"
    mib = residual_bytes / 2**20
    if num_params > FORWARD_MAX_PARAMS:
        return "reverse", (
            f"{num_params} parameters per system > {FORWARD_MAX_PARAMS}: one reverse pass "
            f"beats {num_params} tangents"
        )
    if residual_bytes >= FORWARD_MIN_RESIDUAL_BYTES:
        return "forward", (
            f"{num_params} parameter(s) per system and reverse mode would store {mib:.3g} MiB "
            f"of residuals (>= {FORWARD_MIN_RESIDUAL_BYTES / 2**20:.3g} MiB): forward mode "
            f"carries {num_params} tangent(s) and stores none"
        )
    return "reverse", (
        f"reverse mode stores only {mib:.3g} MiB of residuals "
        f"(< {FORWARD_MIN_RESIDUAL_BYTES / 2**20:.3g} MiB, cache-resident): one backward pass "
        f"beats {num_params} tangent(s)"
    )


def _forward(fun: Callable[..., Any], theta: Params, args: tuple) -> tuple[Any, Any]:
    flat, unravel = ravel_pytree(theta)

    def f(p):
        return fun(unravel(p), *args)

    values, tangents = basis_map(lambda t: jax.jvp(f, (flat,), (t,)), flat.size, 1, flat.dtype)
    return values[0], unravel(tangents)  # every tangent's primal is the same value


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
    devices: Any = None,
) -> Gradient:
    r"""The value and gradient of a scalar loss ``fun(theta, *args)``, in the cheaper mode.

    For a rollout, reverse mode (``jax.grad``) costs one backward pass that reads back every
    step's residuals, whatever the number of parameters; forward mode (``jax.jvp``) carries
    one tangent per parameter along the forward pass and stores nothing. With few
    parameters per independent system — a ball's initial velocity, a few physical
    constants — and residuals too large for the cache, forward mode is 2-3x faster and needs
    O(1) memory in T; with small residuals reverse mode wins. ``mode="auto"`` measures the
    residuals abstractly (``jax.eval_shape`` of ``jax.vjp``, while compiling) and decides.

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
            system when reverse mode would store at least
            :data:`FORWARD_MIN_RESIDUAL_BYTES` of residuals, else reverse), ``"forward"`` or
            ``"reverse"``.
        batched: ``theta`` and ``args`` carry a leading axis of independent systems.
        devices: with ``batched=True``, the devices the systems are split over: ``None``
            (every device JAX sees, when there are several), a count, devices or a
            ``jax.sharding.Mesh`` (:func:`diffsim.sharding.device_mesh`); each device computes its
            share of the systems (the residuals the mode rule weighs are per device), and
            the results (the one-device results to the last bit) stay split over the
            devices. Ignored for one system.

    Returns:
        :class:`Gradient` ``(value, grad, mode, reason)``.

    Integer or boolean leaves of ``theta`` are promoted to the default float dtype.

    Raises:
        ValueError: unknown ``mode``; ``batched`` with leaves of different leading axes or
            no leading axis; ``theta`` without leaves, or (when concrete) with a NaN,
            infinite or, in its dtype, overflowing leaf.
        TypeError: ``fun`` not callable; non-numeric or complex leaves in ``theta``.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import value_and_grad
        >>> g = value_and_grad(lambda t: jnp.sum(t**2), jnp.array([1.0, 2.0]))
        >>> g.mode, g.grad.tolist()  # tiny residuals: reverse mode
        ('reverse', [2.0, 4.0])
        >>> value_and_grad(lambda t: jnp.sum(t**2), jnp.array([1.0, 2.0]), mode="forward").mode
        'forward'
    """
    if not callable(fun):
        raise TypeError(f"fun must be a callable fun(theta, *args) -> scalar, got {fun!r}")
    # checked as the computation uses it (its JAX dtype; 1e300 is refused in float32), and
    # integer or boolean leaves promoted to floats (gradients need floats), as everywhere
    # θ enters the library
    theta = as_arrays("theta", theta, floating=True)
    leaves = jax.tree_util.tree_leaves(theta)
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"mode must be 'auto', 'forward' or 'reverse', got {mode!r}")
    if batched:
        sizes = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in leaves}
        if None in sizes or len(sizes) != 1:
            raise ValueError(
                "batched=True needs every leaf of theta to have the same leading axis B, got "
                f"shapes {[jnp.shape(leaf) for leaf in leaves]}"
            )
        check_int("batch size", sizes.pop(), minimum=1)
        per_system = sum(int(jnp.size(leaf)) // jnp.shape(leaf)[0] for leaf in leaves)
    else:
        per_system = sum(int(jnp.size(leaf)) for leaf in leaves)
    mesh = device_mesh(devices) if batched else None
    value, grad, forward, residual_bytes = _value_and_grad_jit(
        theta, args, loss_fn=fun, mode=mode, batched=bool(batched), num_params=per_system,
        mesh=mesh,
    )  # fmt: skip
    if isinstance(forward, Tracer):  # under the caller's jit, vmap or grad: the
        # mode is still chosen while tracing, so the same rule is applied here, abstractly
        residual_bytes = _residual_bytes(fun, theta, args, batched) // device_count(mesh)
        chosen, reason = choose_mode(per_system, residual_bytes, mode)
        return Gradient(value, grad, chosen, reason)
    chosen = "forward" if bool(forward) else "reverse"
    _, reason = choose_mode(per_system, float(residual_bytes), mode)
    return Gradient(value, grad, chosen, reason)


def _residual_bytes(fun, theta, args, batched) -> int:
    """Bytes of the residuals reverse mode would store (abstract: nothing runs)."""

    def pullback(t):
        if batched:
            return jax.vmap(lambda ti, ai: jax.vjp(lambda q: fun(q, *ai), ti)[1])(t, args)
        return jax.vjp(lambda q: fun(q, *args), t)[1]

    leaves = jax.tree_util.tree_leaves(jax.eval_shape(pullback, theta))
    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in leaves)


# (not ``fun``: older JAX's jit wrapper takes a parameter of that name)
@functools.partial(jax.jit, static_argnames=("loss_fn", "mode", "batched", "num_params", "mesh"))
def _value_and_grad_jit(theta, args, loss_fn, mode, batched, num_params, mesh=None):
    fun = loss_fn
    # the mode is chosen while tracing: once per compilation, from abstract shapes only
    # (the residuals one device stores: its share of the systems)
    residual_bytes = _residual_bytes(fun, theta, args, batched) // device_count(mesh)
    chosen, _ = choose_mode(num_params, residual_bytes, mode)
    if batched:
        value, grad = sample_map(lambda ta: _one(fun, ta[0], ta[1], chosen), (theta, args), mesh)
    else:
        value, grad = _one(fun, theta, args, chosen)
    return value, grad, jnp.asarray(chosen == "forward"), jnp.asarray(residual_bytes, float)
