"""Rollouts: a step composed ``num_steps`` times with ``lax.scan``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import (
    INT32_MAX,
    as_arrays,
    check_int,
    check_same_structure,
    is_concrete,
    warn_precision,
)
from ._coords import stack_last, unstack
from ._step import as_step
from ._types import Inputs, Params, State

Checkpoint = None | int | Sequence[int] | Literal["sqrt", "recursive"]


def call_step(step: Callable[..., State], state: State, theta: Params, u: Any) -> State:
    """Call ``step(state, theta)`` or ``step(state, theta, u)`` depending on ``u``."""
    return step(state, theta) if u is None else step(state, theta, u)


def checkpoint_segments(num_steps: int, checkpoint: Checkpoint) -> tuple[int, ...]:
    """Segment lengths (innermost first) for nested, rematerialised scans.

    ``None`` -> ``()`` (a plain scan, every step's residuals kept: memory O(T)).
    ``k`` (int) -> ``(k,)``: two levels, states stored every k steps (memory O(T/k + k)).
    ``"sqrt"`` -> ``(ceil(sqrt T),)`` (memory O(sqrt T), one extra forward pass).
    ``"recursive"`` -> about ``log2 T`` levels of 2-8 steps each (memory O(log T) segments,
    ~log T extra forward passes): the binomial-style schedule for very long horizons.
    A sequence ``(k1, k2, ...)`` gives the levels explicitly.

    Examples:
        >>> from diffsim import checkpoint_segments
        >>> checkpoint_segments(10_000, None), checkpoint_segments(10_000, "sqrt")
        ((), (100,))
        >>> checkpoint_segments(10_000, 50), checkpoint_segments(10_000, [10, 10])
        ((50,), (10, 10))
    """
    if checkpoint is None:
        return ()
    if isinstance(checkpoint, str):
        if checkpoint == "sqrt":
            return (max(1, math.ceil(math.sqrt(num_steps))),)
        if checkpoint == "recursive":
            levels = max(1, math.ceil(math.log(max(num_steps, 2), 8)))
            k = max(2, math.ceil(num_steps ** (1.0 / (levels + 1))))
            return (k,) * levels
        raise ValueError(
            f"checkpoint must be None, a positive int, a sequence of positive ints, "
            f"'sqrt' or 'recursive', got {checkpoint!r}"
        )
    if isinstance(checkpoint, int | np.integer) and not isinstance(checkpoint, bool):
        return (check_int("checkpoint", checkpoint, minimum=1),)
    if isinstance(checkpoint, Sequence):
        # no int(k): checkpoint=[2.7] is refused, not silently truncated to 2
        return tuple(check_int(f"checkpoint[{i}]", k, minimum=1) for i, k in enumerate(checkpoint))
    raise TypeError(
        f"checkpoint must be None, a positive int, a sequence of positive ints, "
        f"'sqrt' or 'recursive', got {checkpoint!r}"
    )


def _slice(xs: Any, start: int, stop: int) -> Any:
    return jax.tree_util.tree_map(lambda a: a[start:stop], xs)


def _scan(body, carry, xs, length: int, segments: tuple[int, ...], keep: bool, unroll: int = 1):
    """``lax.scan(body, carry, xs, length)`` with nested ``jax.checkpoint`` segments.

    The outermost level runs ``length // k`` segments of ``k = prod(segments)`` steps, each
    rematerialised on the backward pass; the remainder runs at the next level down. The
    innermost scans are unrolled ``unroll`` times.
    """
    if length == 0:
        return carry, None
    if not segments:
        return jax.lax.scan(body, carry, xs, length=length, unroll=min(unroll, length))
    k = math.prod(segments)
    inner = segments[:-1]
    q, r = divmod(length, k)
    if q == 0:
        return _scan(body, carry, xs, length, inner, keep, unroll)
    head = (
        None
        if xs is None
        else jax.tree_util.tree_map(lambda a: a[: q * k].reshape((q, k) + a.shape[1:]), xs)
    )

    @jax.checkpoint
    def segment(c, seg_xs):
        return _scan(body, c, seg_xs, k, inner, keep, unroll)

    carry, ys = jax.lax.scan(segment, carry, head, length=q)
    if keep:
        ys = jax.tree_util.tree_map(lambda a: a.reshape((q * k,) + a.shape[2:]), ys)
    if r:
        tail_xs = None if xs is None else _slice(xs, q * k, length)
        carry, ys_tail = _scan(body, carry, tail_xs, r, inner, keep, unroll)
        if keep:
            ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, ys_tail)
    return carry, ys


SPLIT_AXIS_MAX = 16
"""State leaves whose last axis has at most this many entries are carried through the scan
one array per entry (struct of arrays); see :func:`to_carry`."""


def _split_leaf(a: Any) -> Any:
    if jnp.ndim(a) >= 1 and 1 < jnp.shape(a)[-1] <= SPLIT_AXIS_MAX:
        return unstack(a)
    return a


def to_carry(state: State) -> Any:
    """The state as the scan carries it: small last axes split into one array per entry.

    A body's position ``(d,)``, batched by ``vmap`` to ``(N, d)``, would otherwise be carried
    as one ``(N, d)`` array: every step then re-assembles it from its coordinates, and the
    backward pass accumulates each coordinate's cotangent into it (a pad and an add per
    coordinate and step). Carried per coordinate, the loop is the struct-of-arrays loop a
    hand-written step compiles to; :func:`from_carry` restores the layout.
    """
    return jax.tree_util.tree_map(_split_leaf, state)


def from_carry(carry: Any, like: State) -> State:
    """Inverse of :func:`to_carry` (``like`` gives the layout)."""
    return jax.tree_util.tree_map(
        lambda a, c: stack_last(c) if isinstance(c, tuple) else c,
        like,
        carry,
    )


@eqx.filter_jit
def _rollout_jit(step, s0, theta, inputs, num_steps, segments, keep, include_initial, unroll):
    # checked at trace time: once per compilation, never on a cached call
    u0 = None if inputs is None else jax.tree_util.tree_map(lambda a: a[0], inputs)
    s0 = check_step_output(step, s0, theta, u0)

    def body(c, u):
        s_next = call_step(step, from_carry(c, s0), theta, u)
        return to_carry(s_next), (s_next if keep else None)

    cT, traj = _scan(body, to_carry(s0), inputs, num_steps, segments, keep, unroll)
    sT = from_carry(cT, s0)
    if not keep:
        return sT
    if include_initial:
        traj = jax.tree_util.tree_map(
            lambda a0, a: jnp.concatenate([jnp.asarray(a0, a.dtype)[None], a]), s0, traj
        )
    return traj


def rollout(
    step: Callable[..., State],
    s0: State,
    theta: Params,
    num_steps: int,
    *,
    inputs: Inputs | None = None,
    trajectory: bool = True,
    include_initial: bool = True,
    checkpoint: Checkpoint = None,
    unroll: int = 1,
) -> State:
    r"""Apply ``step`` ``num_steps`` times: :math:`s_{t+1} = f(s_t, θ[, u_t])`.

    The loop is a ``lax.scan`` compiled once per (step, shapes, options); later calls with
    new values reuse the compiled code. ``vmap`` over ``s0`` and ``theta`` works, and so
    does ``grad`` through the result.

    Args:
        step: pure function ``step(state, theta)`` — or ``step(state, theta, u)`` when
            ``inputs`` is given — returning a state with the structure of ``s0``.
        s0: initial state, any pytree of arrays.
        theta: parameters, any pytree of arrays.
        num_steps: number of steps T, an integer >= 1.
        inputs: optional per-step inputs (controls); every leaf has leading axis T and
            ``u_t`` (leaf ``[t]``) is passed to the step that produces ``s_{t+1}``.
        trajectory: return the whole trajectory (leading axis T+1, or T without the
            initial state); ``False`` returns only ``s_T``.
        include_initial: with ``trajectory=True``, prepend ``s0`` so that index t is s_t.
        checkpoint: rematerialisation schedule for reverse mode (see
            :func:`checkpoint_segments`): ``None``, ``k``, ``"sqrt"``, ``"recursive"`` or a
            sequence of segment lengths. Results are identical; only memory and time of
            the backward pass change.
        unroll: how many steps each iteration of the compiled loop runs (``lax.scan``'s
            ``unroll``), an integer >= 1. Results are identical; larger values cut the
            per-iteration loop overhead and let XLA fuse consecutive steps (on CPU, 4–8
            roughly halves the forward time of small elementwise steps) at the price of a
            longer compile. ``1`` (the default) keeps the compiled program smallest.

    Returns:
        The trajectory (pytree with leading axis T+1 or T) or the final state ``s_T``.

    Raises:
        ValueError / TypeError: ``num_steps < 1`` or ``unroll < 1``; non-finite ``s0`` or
            ``theta``; ``inputs`` whose leading axis is not ``num_steps``; a step whose
            output does not match ``s0``.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import rollout
        >>> step = lambda s, a: (s[0] + (s[1] + a / 60) / 60, s[1] + a / 60)
        >>> xT, vT = rollout(step, (0.0, 1.0), 0.0, 60, trajectory=False)
        >>> round(float(xT), 6), round(float(vT), 6)
        (1.0, 1.0)
    """
    s0, theta, num_steps, inputs, _ = prepare(step, s0, theta, num_steps, inputs, check=False)
    segments = checkpoint_segments(num_steps, checkpoint)
    unroll = check_int("unroll", unroll, minimum=1)
    return _rollout_jit(
        step,
        s0,
        theta,
        inputs,
        num_steps,
        segments,
        bool(trajectory),
        bool(include_initial),
        unroll,
    )


def prepare(step, s0, theta, num_steps, inputs, *, check: bool = True, floating: bool = False):
    """Validate and normalise the arguments every rollout-based entry point takes.

    Returns ``(s0, theta, num_steps, inputs, u0)`` with arrays for leaves, ``s0`` cast to the
    step's output dtypes (with ``check``; otherwise the caller checks the step's output at
    trace time, see :func:`check_step_output`) and ``u0`` the first step's input (``None``
    without inputs).
    """
    if not callable(step):
        raise TypeError(f"step must be callable, got {step!r}")
    num_steps = check_int("num_steps", num_steps, minimum=1, maximum=INT32_MAX)
    # checked as the computation uses them: converted to their JAX dtypes first (1e300 is
    # refused in float32); with ``floating`` (the Jacobian routes differentiate them),
    # integer leaves become floats
    s0 = as_arrays("s0", s0, floating=floating)
    theta = as_arrays("theta", theta, floating=floating)
    # a strong dtype for the state: weakly typed leaves (from Python numbers) would give the
    # compiled loop another cache key than the same values as arrays
    s0 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.result_type(a)), s0)
    warn_time_resolution(step, num_steps, s0)
    u0 = None
    if inputs is not None:
        inputs = as_arrays("inputs", inputs)
        for leaf in jax.tree_util.tree_leaves(inputs):
            if leaf.ndim == 0 or leaf.shape[0] != num_steps:
                raise ValueError(
                    f"inputs must have leading axis num_steps={num_steps} on every leaf, "
                    f"got a leaf of shape {leaf.shape}"
                )
        u0 = jax.tree_util.tree_map(lambda a: a[0], inputs)
    if check:
        s0 = check_step_output(step, s0, theta, u0)
    return s0, theta, num_steps, inputs, u0


TIME_RESOLUTION = 0.5
""":func:`warn_time_resolution` warns when one step ``h`` is below this fraction of the
float spacing at the rollout's end time ``T·h``: time stamps ``k·h`` no longer resolve
consecutive steps."""


def warn_time_resolution(step: Any, num_steps: int, s0: State) -> None:
    """Warn once when the rollout's dtype cannot resolve its own horizon.

    For a step with a concrete step size ``h`` (every diffsim integrator and contact step)
    and a floating state of dtype ``d``: when ``h < TIME_RESOLUTION · spacing_d(T·h)``,
    times ``t_k = k·h`` near the end of the rollout round to the same ``d`` number (in
    float32 from about 8 million steps), so anything that accumulates time or needs the
    horizon to step precision does not get what was asked for.
    """
    h = as_step(step).h
    if h is None or not is_concrete(h) or np.ndim(h) != 0:
        return
    leaves = [a for a in jax.tree_util.tree_leaves(s0) if jnp.issubdtype(a.dtype, jnp.floating)]
    if not leaves:
        return
    dtype = np.dtype(min((a.dtype for a in leaves), key=lambda d: np.dtype(d).itemsize))
    h = float(h)
    with np.errstate(over="ignore"):
        end = dtype.type(num_steps * h)
    if not np.isfinite(end):
        warn_precision(
            f"num_steps={num_steps} with h={h:g}: the end time T·h = {num_steps * h:g} "
            f"overflows {dtype} (largest {float(np.finfo(dtype).max):.4g}); anything that "
            f"accumulates time is inf. Use a smaller h or fewer steps.",
        )
    elif h < TIME_RESOLUTION * float(np.spacing(np.abs(end))):
        warn_precision(
            f"num_steps={num_steps} with h={h:g}: {dtype} cannot resolve one step at the end "
            f"time T·h = {num_steps * h:g} (spacing {float(np.spacing(np.abs(end))):.3g}); "
            f"times near the end of the rollout round together. Use float64 "
            f"(jax.config.update('jax_enable_x64', True)) or fewer, longer steps.",
        )


def check_step_output(step: Callable[..., State], s0: State, theta: Params, u0: Any) -> State:
    """Trace ``step`` abstractly, check its output matches ``s0``, return ``s0`` cast to the
    output's dtypes (so the scan carry keeps one type).

    Costs one abstract trace of the step: :func:`rollout` calls it while tracing its
    compiled loop (once per compilation); the Jacobian routes call it per call.
    """
    if not callable(step):
        raise TypeError(f"step must be callable, got {step!r}")
    args = "state, theta" + (", u" if u0 is not None else "")
    try:
        out = jax.eval_shape(lambda s, p, u: call_step(step, s, p, u), s0, theta, u0)
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as err:
        # what the step reads and what it was given do not match (a θ key it does not have,
        # a leaf of the wrong shape or type): say so with both structures, not only the
        # error from deep inside the step
        given = f"theta is {describe(theta)}, s0 is {describe(s0)}"
        if u0 is not None:
            given += f", u is {describe(u0)}"
        if isinstance(err, KeyError | IndexError):
            kind = "key" if isinstance(err, KeyError) else "index"
            what = f"the step reads {kind} {err}, which its arguments lack ({type(err).__name__})"
        else:
            what = f"{type(err).__name__}: {err}"
        cls = TypeError if isinstance(err, TypeError) else ValueError
        raise cls(
            f"step could not be called as step({args}) on the theta and s0 given ({given}): "
            f"{what}; pass the "
            f"theta and state the step reads (e.g. the system's own .theta and .s0)"
        ) from err
    check_same_structure("step(s0, theta) output", out, s0, "s0")
    return jax.tree_util.tree_map(lambda a, o: jnp.asarray(a, o.dtype), s0, out)


def describe(tree: Any, limit: int = 200) -> str:
    """A pytree's structure with each leaf's dtype and shape (``{'a': float64[2]}``), for
    messages; cut at ``limit`` characters."""
    text = repr(jax.tree_util.tree_map(_LeafText, tree))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _LeafText:
    def __init__(self, a: Any) -> None:
        dtype = getattr(a, "dtype", None)
        self.text = f"{dtype if dtype is not None else type(a).__name__}{list(jnp.shape(a))}"

    def __repr__(self) -> str:
        return self.text
