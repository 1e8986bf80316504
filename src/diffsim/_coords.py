"""Coordinate-wise views of a state: how the library's steps compile to hand-written speed.

A body's position or velocity is, to the user, an array of shape ``(d,)`` (or any pytree).
Batched by ``vmap`` it becomes ``(N, d)``, and arithmetic that mixes per-body scalars (a gap,
an impact fraction, a per-body step length) with ``(N, d)`` arrays makes XLA emit a
broadcast, a minor-axis reduction or a slice per operation: several loops over memory per
step instead of one, ~10-40x slower on CPU than the same step written with one array per
coordinate (struct of arrays).

:class:`Coords` is that struct of arrays: the state split into one array per coordinate
(each a scalar per body, ``(N,)`` once batched), with the arithmetic a scheme needs. The
integrators and contact models compute on ``Coords`` and re-assemble the user's layout only
at the end of the step, where XLA folds the split/stack pairs away. States with more than
:data:`MAX_COORDS` entries are kept as one flat vector (one "coordinate" of shape ``(n,)``):
the arithmetic is the same and the trace stays small.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

_lax_split = getattr(jax.lax, "split", None)

MAX_COORDS = 16
"""States with at most this many entries are split into scalars; larger ones stay flat."""


def unstack(a: Any) -> tuple[Any, ...]:
    """The entries of ``a`` along its last axis, as arrays without that axis.

    Built on ``lax.split`` (whose transpose is a concatenation) rather than indexing (whose
    transpose pads with zeros and adds): in reverse mode, a split/stack pair then folds away
    in both directions, as it does in the forward pass.
    """
    n = jnp.shape(a)[-1]
    if _lax_split is None:  # older JAX: indexing (correct, a little slower in reverse mode)
        return tuple(a[..., i] for i in range(n))
    return tuple(
        jnp.reshape(p, jnp.shape(a)[:-1]) for p in _lax_split(a, (1,) * n, axis=jnp.ndim(a) - 1)
    )


def stack_last(parts: Sequence[Any]) -> Any:
    """Inverse of :func:`unstack`: a concatenation along a new last axis.

    Not ``jnp.stack``: under ``vmap`` that stacks on the leading axis and transposes, which
    XLA then cannot fold against the next step's split.
    """
    return jnp.concatenate([jnp.expand_dims(p, -1) for p in parts], axis=-1)


def _ravel(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``ravel_pytree`` without its dtype check on the way back (steps may promote)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    shapes = [jnp.shape(leaf) for leaf in leaves]
    if len(leaves) == 1:
        flat = jnp.ravel(leaves[0])
        shape = shapes[0]
        return flat, lambda f: jnp.reshape(f, shape)
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in leaves]) if leaves else jnp.zeros(0)
    sizes = [math.prod(s) for s in shapes]
    cuts = list(itertools.accumulate(sizes))[:-1]

    def unravel(f):
        pieces = jnp.split(f, cuts)
        return jax.tree_util.tree_unflatten(
            treedef, [jnp.reshape(p, s) for p, s in zip(pieces, shapes)]
        )

    return flat, unravel


@jax.tree_util.register_pytree_node_class
class Coords:
    """A state split into coordinates: ``parts[i]`` is coordinate i (or one flat vector).

    Supports ``+``, ``-``, unary ``-``, multiplication and division by scalars (Python
    numbers or arrays broadcastable against each part), and :meth:`stack` back to the
    user's pytree layout.

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords
        >>> c = Coords.split(jnp.array([1.0, 2.0]))  # a body in 2-D: x and y
        >>> len(c), [float(p) for p in c.parts]  # one array per coordinate
        (2, [1.0, 2.0])
        >>> (2 * c - c / 2).stack().tolist()  # back to the user's layout
        [1.5, 3.0]
    """

    __slots__ = ("flat", "parts", "unravel")

    def __init__(self, parts: Sequence[Any], unravel: Callable[[Any], Any], flat: bool):
        self.parts = tuple(parts)
        self.unravel = unravel
        self.flat = flat

    # --- pytree ---------------------------------------------------------------------------
    def tree_flatten(self):
        return self.parts, (self.unravel, self.flat)

    @classmethod
    def tree_unflatten(cls, aux, parts):
        return cls(parts, *aux)

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def split(cls, tree: Any) -> Coords:
        """Split a pytree of arrays into coordinates (scalars, or one flat vector)."""
        flat, unravel = _ravel(tree)
        if flat.size <= MAX_COORDS:
            return cls(unstack(flat), unravel, False)
        return cls((flat,), unravel, True)

    def like(self, parts: Sequence[Any]) -> Coords:
        """New coordinates with the same layout."""
        return Coords(parts, self.unravel, self.flat)

    def stack(self) -> Any:
        """The coordinates re-assembled into the user's layout."""
        flat = self.parts[0] if self.flat else stack_last(jnp.broadcast_arrays(*self.parts))
        return self.unravel(flat)

    def __len__(self) -> int:
        return len(self.parts)

    # --- arithmetic -----------------------------------------------------------------------
    def _map(self, f: Callable[..., Any], *others: Coords) -> Coords:
        return self.like(tuple(f(*p) for p in zip(self.parts, *(o.parts for o in others))))

    def __add__(self, other: Coords) -> Coords:
        return self._map(lambda a, b: a + b, other)

    def __sub__(self, other: Coords) -> Coords:
        return self._map(lambda a, b: a - b, other)

    def __neg__(self) -> Coords:
        return self._map(lambda a: -a)

    def __mul__(self, c: Any) -> Coords:
        if isinstance(c, Coords):
            return NotImplemented
        return self._map(lambda a: a * c)

    __rmul__ = __mul__

    def __truediv__(self, c: Any) -> Coords:
        return self._map(lambda a: a / c)

    def astype(self, dtype: Any) -> Coords:
        return self._map(lambda a: jnp.asarray(a, dtype))


def where(cond: Any, a: Coords, b: Coords) -> Coords:
    """Coordinate-wise ``jnp.where(cond, a, b)`` (``cond`` a per-body scalar).

    Examples:
        >>> import jax.numpy as jnp
        >>> from diffsim.contact import Coords, where
        >>> a, b = Coords.split(jnp.array([1.0, 2.0])), Coords.split(jnp.zeros(2))
        >>> where(jnp.array(False), a, b).stack().tolist()
        [0.0, 0.0]
    """
    return a._map(lambda p, q: jnp.where(cond, p, q), b)


def dot(weights: Sequence[float], c: Coords) -> Any:
    """``Σ wᵢ cᵢ`` for static weights (zero weights cost nothing); a per-body scalar."""
    if c.flat:
        return jnp.sum(jnp.asarray(weights, jnp.result_type(c.parts[0])) * c.parts[0])
    total = None
    for w, p in zip(weights, c.parts):
        if w == 0.0:
            continue
        term = p if w == 1.0 else (-p if w == -1.0 else w * p)
        total = term if total is None else total + term
    return jnp.zeros_like(c.parts[0]) if total is None else total


def along(weights: Sequence[float], s: Any, c: Coords) -> Coords:
    """``c + s w`` for static weights ``w`` and a per-body scalar ``s`` (zero weights skip)."""
    if c.flat:
        return c.like((c.parts[0] + s * jnp.asarray(weights, jnp.result_type(c.parts[0])),))
    return c.like(
        tuple(
            p if w == 0.0 else p + (s if w == 1.0 else (-s if w == -1.0 else w * s))
            for w, p in zip(weights, c.parts)
        )
    )
