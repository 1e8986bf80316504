r"""The sampling rounds: the one scheduler that :func:`diffsim.diagnose` and
:class:`~diffsim.estimators.Auto` (noise on θ) both run, compiled.

One program (:func:`gather`) draws the evidence of :mod:`~diffsim.estimators._evidence` in
rounds and stops when nothing is left to decide:

* the first batch: N first-order samples, N/2 antithetic zeroth-order pairs, L(θ), ∇L(θ)
  and the finite-difference ladder at σ;
* **widen**: when nothing moves within σ after the first batch (a dead-flat plateau) and σ
  may widen (the default σ; a σ the user gives is kept), σ grows ×:data:`WIDEN` and
  sampling starts again from a fresh key (``fold_in(key, r)``), at most ``max_widen``
  times;
* **double**: while a statistic is undecided (:func:`~diffsim.estimators._evidence.pending`)
  N doubles, fresh samples joining the old (:func:`sample_sizes`: N, 2N, 4N, ... up to the
  budget).

Only the rounds needed run (``lax.while_loop``; under ``vmap`` every lane runs to the last
lane's end, its own rounds masked). The sample buffers have the budget's fixed shape and
``draw`` is traced once, so every round, and every later θ of the same structure, reuses
the compiled program.

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
    """What :func:`gather` found: the evidence of the last round, and how many times σ was
    widened before it (its σ is ``sigma`` × :data:`WIDEN` ** ``widenings``)."""

    evidence: ev.Evidence
    widenings: Array


def round_cost(widenings: Any, num_samples: int, used: Any, fd_points: int) -> tuple[Any, Any]:
    """(losses, gradients) of the rounds: each widened round paid its first batch of
    ``num_samples``, the last ``used`` samples; ``fd_points`` = k·m ladder points."""
    fixed = 1 + 2 * fd_points
    return ((fixed + num_samples) * widenings + fixed + used,
            (1 + num_samples) * widenings + 1 + used)  # fmt: skip


def run_rounds(
    loss: Any, theta: Any, key: Array, scale: Array, sigma: Array, rel_steps: Array, *,
    num_samples: int, max_samples: int, max_widen: int, thresholds: Thresholds,
    num_directions: int = ev.NUM_DIRECTIONS, mesh: Any = None, stiffness_decided: bool = False,
) -> Rounds:  # fmt: skip
    """The rounds (traceable): σ = ``sigma`` · ``scale`` per component of raveled θ (σ̄ =
    ``sigma`` the largest), N = ``num_samples`` (even) first, doubled up to ``max_samples``
    while a statistic is undecided, σ widened up to ``max_widen`` times on a dead-flat
    first batch. ``stiffness_decided``: the stiffness flag is decided elsewhere (a
    rollout's horizon), so its undecided band asks for no more samples."""
    n = int(num_samples)
    sizes = sample_sizes(n, max(n, int(max_samples)))
    d = scale.shape[0]
    dt = scale.dtype
    empty = ev.empty_state(d, sizes[-1], rel_steps.shape[0], num_directions, dt)

    def sigma_of(r):
        return sigma * jnp.asarray(WIDEN, dt) ** r

    def fill(state, r, start, stop):  # chunks [start, stop) of round r at σ·WIDEN^r
        return ev.draw(loss, theta, ev.round_key(key, r), scale, sigma_of(r), rel_steps, state,
                       jnp.asarray(start), jnp.asarray(stop), n, num_directions, mesh)  # fmt: skip

    def evidence(state, r, size):  # the statistics of the first ``size`` samples
        return ev.statistics(state["fixed"], state["zeroth"][: size // 2], state["first"][:size],
                             state["loss_changes"][:size], sigma_of(r), scale,
                             state["plain"][: size // 2])  # fmt: skip

    def step(c):
        # fill round r's chunks [start, 2^i), reduce the first N·2^i samples, then widen σ
        # (first batch only) or double N, or stop
        r, i, state, _, _ = c
        stop = jnp.asarray(2, jnp.int32) ** i  # chunks: [0, 1), then [1, 2), [2, 4), ...
        state = fill(state, r, stop // 2, stop)
        e = jax.lax.switch(
            i, [functools.partial(evidence, r=r, size=size) for size in sizes], state
        )
        widen = (i == 0) & (r < max_widen) & ev.flat_within_sigma(e)
        more = ~widen & ev.pending(e, thresholds, not stiffness_decided) & (i + 1 < len(sizes))
        nxt = jnp.where(more, i + 1, 0).astype(jnp.int32)
        return (r + widen.astype(jnp.int32), nxt, state, e, widen | more)

    zero = jnp.asarray(0, jnp.int32)
    placeholder = jax.eval_shape(lambda: evidence(empty, zero, n))
    placeholder = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), placeholder)
    widenings, _, _, e, _ = jax.lax.while_loop(
        lambda c: c[-1], step, (zero, zero, empty, placeholder, jnp.asarray(True))
    )
    return Rounds(e, widenings)


gather = eqx.filter_jit(run_rounds)
""":func:`run_rounds` compiled once per loss, θ structure and static settings: what the
doctor runs (``Auto`` runs :func:`run_rounds` inside its own compiled estimate)."""
