r"""The sampling rounds: the one scheduler that :func:`diffsim.diagnose` and
:class:`~diffsim.estimators.Auto` (noise on θ or on the actions) follow.

The evidence of :mod:`~diffsim.estimators._evidence` is drawn in rounds, and one rule
(:func:`next_round`) says after each what comes next:

* the first batch: N first-order samples, N/2 antithetic zeroth-order pairs, L(θ), ∇L(θ)
  and the finite-difference ladder at σ;
* **widen**: when nothing moves within σ after the first batch (a dead-flat plateau) and σ
  may widen (the default σ; a σ the user gives is kept), σ grows ×:data:`WIDEN` and
  sampling starts again from a fresh key (``fold_in(key, r)``), at most ``max_widen``
  times;
* **double**: while a statistic is undecided (:func:`~diffsim.estimators._evidence.pending`)
  N doubles, fresh samples joining the old (:func:`sample_sizes`: N, 2N, 4N, ... up to the
  budget);
* else stop.

Two drivers follow the rule over the same buffers and keys, so they draw the same numbers:
:func:`run_rounds`, traceable (``lax.while_loop``: ``Auto``'s graph, where only the rounds
needed run; under ``vmap`` every lane runs to the last lane's end, its own rounds masked),
and :func:`host_rounds`, the doctor's (one compiled ``draw`` per loss, reused by every
round and every later θ of the same structure; the statistics and the rule compiled once
per shape and shared by every loss, so diagnosing a new loss compiles only its draw).

Cost (:func:`round_cost`): each widened round paid ``1 + 2·k·m + N`` losses and ``1 + N``
gradients (k ladder directions, m steps), and the last round ``1 + 2·k·m + N_used`` and
``1 + N_used``.
"""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from . import _evidence as ev
from ._evidence import WIDEN
from ._thresholds import Thresholds


def sample_sizes(num_samples: int, max_samples: int) -> tuple[int, ...]:
    """The rounds' sample counts: N, 2N, 4N, ... up to the budget ``max_samples`` (at least
    N).

    Example:
        >>> from diffsim.estimators._rounds import sample_sizes
        >>> sample_sizes(128, 2048), sample_sizes(32, 100), sample_sizes(64, 16)
        ((128, 256, 512, 1024, 2048), (32, 64), (64,))
    """
    sizes = [int(num_samples)]
    while 2 * sizes[-1] <= max_samples:
        sizes.append(2 * sizes[-1])
    return tuple(sizes)


class Rounds(eqx.Module):
    """What the rounds found: the evidence of the last round, and how many times σ was
    widened before it (its σ is ``sigma`` × :data:`WIDEN` ** ``widenings``)."""

    evidence: ev.Evidence
    widenings: Array


def round_cost(widenings: Any, num_samples: int, used: Any, fd_points: int) -> tuple[Any, Any]:
    """(losses, gradients) of the rounds: each widened round paid its first batch of
    ``num_samples``, the last ``used`` samples; ``fd_points`` = k·m ladder points."""
    fixed = 1 + 2 * fd_points
    return ((fixed + num_samples) * widenings + fixed + used,
            (1 + num_samples) * widenings + 1 + used)  # fmt: skip


def next_round(
    e: Any, r: Any, i: Any, num_sizes: int, max_widen: int, thresholds: Thresholds,
    stiffness_decided: bool = False,
) -> tuple[Array, Array]:  # fmt: skip
    """The scheduler's rule after round r's batch i (of ``num_sizes``) with evidence
    ``e``: ``(widen, more)`` — widen σ (first batch only, r < ``max_widen``, nothing moved
    within σ), else draw more (a statistic undecided and room left in the budget), else
    stop. ``stiffness_decided``: a rollout's horizon decides the stiffness flag, so its
    undecided band asks for no more samples."""
    i, r = jnp.asarray(i), jnp.asarray(r)
    widen = (i == 0) & (r < max_widen) & ev.flat_within_sigma(e)
    more = ~widen & ev.pending(e, thresholds, not stiffness_decided) & (i + 1 < num_sizes)
    return widen, more


def _sizes_and_buffers(sampler, theta, dtype, rel_steps, num_samples, max_samples,
                       num_directions):  # fmt: skip
    n = int(num_samples)
    sizes = sample_sizes(n, max(n, int(max_samples)))
    d, ladder_dim = sampler.dims(theta)
    empty = ev.empty_state(d, sizes[-1], rel_steps.shape[0], num_directions, dtype, ladder_dim)
    return n, sizes, empty


def _reduce(state: dict, size: int, sigma: Array, scale: Array, own_norms: bool) -> ev.Evidence:
    """The statistics of the first ``size`` samples in the buffers (``scale``: the
    sampler's statistics scale; ``own_norms``: the sampler gives the first-order norms)."""
    norms = state["first_norms"][:size] if own_norms else None
    return ev.statistics(state["fixed"], state["zeroth"][: size // 2], state["first"][:size],
                         state["loss_changes"][:size], sigma, scale,
                         state["plain"][: size // 2], first_norms=norms)  # fmt: skip


def run_rounds(
    sampler: Any, theta: Any, key: Array, sigma: Array, rel_steps: Array, *,
    num_samples: int, max_samples: int, max_widen: int, thresholds: Thresholds,
    num_directions: int = ev.NUM_DIRECTIONS, mesh: Any = None, stiffness_decided: bool = False,
) -> Rounds:  # fmt: skip
    """The rounds (traceable) of ``sampler`` (:mod:`~diffsim.estimators._samplers`: where
    the noise goes, at what relative scale) at σ̄ = ``sigma``: N = ``num_samples`` (even)
    first, doubled up to ``max_samples`` while a statistic is undecided, σ widened up to
    ``max_widen`` times on a dead-flat first batch. ``stiffness_decided``: the stiffness
    flag is decided elsewhere (a rollout's horizon), so its undecided band asks for no more
    samples."""
    dt = sigma.dtype
    n, sizes, empty = _sizes_and_buffers(sampler, theta, dt, rel_steps, num_samples,
                                         max_samples, num_directions)  # fmt: skip

    def sigma_of(r):
        return sigma * jnp.asarray(WIDEN, dt) ** r

    def fill(state, r, start, stop):  # chunks [start, stop) of round r at σ·WIDEN^r
        return ev.draw(sampler, theta, ev.round_key(key, r), sigma_of(r), rel_steps, state,
                       jnp.asarray(start), jnp.asarray(stop), n, num_directions, mesh)  # fmt: skip

    scale = sampler.statistics_scale(theta)

    def evidence(state, r, size):
        return _reduce(state, size, sigma_of(r), scale, sampler.own_norms)

    def step(c):
        # fill round r's chunks [start, 2^i), reduce the first N·2^i samples, then widen σ
        # (first batch only) or double N, or stop
        r, i, state, _, _ = c
        stop = jnp.asarray(2, jnp.int32) ** i  # chunks: [0, 1), then [1, 2), [2, 4), ...
        state = fill(state, r, stop // 2, stop)
        e = jax.lax.switch(
            i, [functools.partial(evidence, r=r, size=size) for size in sizes], state
        )
        widen, more = next_round(e, r, i, len(sizes), max_widen, thresholds, stiffness_decided)
        nxt = jnp.where(more, i + 1, 0).astype(jnp.int32)
        return (r + widen.astype(jnp.int32), nxt, state, e, widen | more)

    zero = jnp.asarray(0, jnp.int32)
    placeholder = jax.eval_shape(lambda: evidence(empty, zero, n))
    placeholder = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), placeholder)
    widenings, _, _, e, _ = jax.lax.while_loop(
        lambda c: c[-1], step, (zero, zero, empty, placeholder, jnp.asarray(True))
    )
    return Rounds(e, widenings)


_draw = eqx.filter_jit(ev.draw)
"""The doctor's batch, compiled once per loss and θ structure: every round, every σ and
every later θ reuse it."""


_statistics = jax.jit(_reduce, static_argnums=(1, 4))
"""The statistics of a batch cut to its samples (one program per batch size, whatever the
loss)."""


@functools.partial(jax.jit, static_argnums=(3, 4, 5, 6))
def _next(e, r, i, num_sizes, max_widen, thresholds, stiffness_decided):
    return next_round(e, r, i, num_sizes, max_widen, thresholds, stiffness_decided)


def host_rounds(
    sampler: Any, theta: Any, key: Array, sigma: Array, rel_steps: Array, *,
    num_samples: int, max_samples: int, max_widen: int, thresholds: Thresholds,
    num_directions: int = ev.NUM_DIRECTIONS, mesh: Any = None, stiffness_decided: bool = False,
) -> Rounds:  # fmt: skip
    """:func:`run_rounds`, driven from the host (the doctor's): the same rule, buffers and
    keys, with only the loss's batch compiled per loss (the statistics and the rule, which
    do not depend on the loss, compiled once per shape for every loss)."""
    n, sizes, empty = _sizes_and_buffers(sampler, theta, sigma.dtype, rel_steps, num_samples,
                                         max_samples, num_directions)  # fmt: skip
    r, i, state = 0, 0, empty
    scale = sampler.statistics_scale(theta)
    while True:
        s = sigma * jnp.asarray(WIDEN, sigma.dtype) ** r
        stop = 2**i  # chunks: [0, 1), then [1, 2), [2, 4), ...
        start = jnp.asarray(stop // 2)
        state = _draw(sampler, theta, ev.round_key(key, r), s, rel_steps, state, start,
                      jnp.asarray(stop), n, num_directions, mesh)  # fmt: skip
        e = _statistics(state, sizes[i], s, scale, sampler.own_norms)
        widen, more = _next(e, r, i, len(sizes), max_widen, thresholds, stiffness_decided)
        if bool(widen):
            r, i, state = r + 1, 0, empty
        elif bool(more):
            i += 1
        else:
            return Rounds(e, jnp.asarray(r, jnp.int32))
