"""The ``auto`` estimator with noise on θ: the doctor's procedure inside one compiled graph.

See :mod:`diffsim.estimators.auto` for the choices and the cost.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._sigma import sigma_vector
from . import _evidence as ev
from ._evidence import WIDEN
from .base import GradientEstimate, flatten_loss, make_result


def sample_sizes(num_samples: int, max_samples: int) -> tuple[int, ...]:
    """The doctor's rounds: N, 2N, 4N, ... up to the budget (at least N)."""
    sizes = [num_samples]
    while 2 * sizes[-1] <= max_samples:
        sizes.append(2 * sizes[-1])
    return tuple(sizes)


@eqx.filter_jit
def parameter_auto(
    loss, theta, key, sigma, num_samples, max_samples, max_widen, thresholds, mesh, reports
) -> GradientEstimate:
    """Auto with noise on θ: the doctor's evidence in rounds (σ widened ×4 on a dead-flat
    plateau, N doubled while a statistic is undecided), its choice and that estimate."""
    _, x, unravel = flatten_loss(loss, theta)
    dt = x.dtype
    n, d = num_samples, x.shape[0]
    sizes = sample_sizes(n, max_samples)
    cap = sizes[-1]
    sig = sigma_vector(sigma, theta)
    sbar = jnp.max(sig) if d else jnp.ones((), dt)
    scale = sig / sbar
    steps = jnp.asarray(np.asarray(ev.DEFAULT_REL_STEPS, float), dt)
    empty = ev.empty_state(d, cap, steps.shape[0], ev.NUM_DIRECTIONS, dt)

    def fill(state, r, start, stop):  # chunks [start, stop) of round r at σ·WIDEN^r
        s = sbar * jnp.asarray(WIDEN, dt) ** r
        k = ev.round_key(key, r)
        return ev.draw(loss, theta, k, scale, s, steps, state, jnp.asarray(start),
                       jnp.asarray(stop), n, ev.NUM_DIRECTIONS, mesh)  # fmt: skip

    def evidence(state, r, size):  # the statistics of the first ``size`` samples
        s = sbar * jnp.asarray(WIDEN, dt) ** r
        return ev.statistics(state["fixed"], state["zeroth"][: size // 2], state["first"][:size],
                             state["loss_changes"][:size], s, scale,
                             state["plain"][: size // 2])  # fmt: skip

    def step(c):
        # one program for the whole procedure (``fill`` is traced once: compiling the loss's
        # batch once, not once per round): fill round r's chunks [start, 2^i), reduce the
        # first n·2^i samples, then widen σ while nothing moves within it (on the first
        # batch, the doctor's rule) or double N while a statistic is undecided (the doctor's
        # sequential test)
        r, i, state, _, _ = c
        stop = jnp.asarray(2, jnp.int32) ** i  # chunks: [0, 1), then [1, 2), [2, 4), ...
        state = fill(state, r, stop // 2, stop)
        e = jax.lax.switch(
            i, [functools.partial(evidence, r=r, size=size) for size in sizes], state
        )
        widen = (i == 0) & (r < max_widen) & ev.flat_within_sigma(e)
        more = ~widen & ev.pending(e, thresholds) & (i + 1 < len(sizes))
        nxt = jnp.where(more, i + 1, 0).astype(jnp.int32)
        return (r + widen.astype(jnp.int32), nxt, state, e, widen | more)

    zero = jnp.asarray(0, jnp.int32)
    placeholder = jax.eval_shape(lambda: evidence(empty, zero, n))
    placeholder = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), placeholder)
    rounds, _, _, e, _ = jax.lax.while_loop(
        lambda c: c[-1], step, (zero, zero, empty, placeholder, jnp.asarray(True))
    )
    choice = ev.assess(e, thresholds)

    finite1 = e.finite_perturbed_gradients
    var1 = e.first_variance
    mix = ev.mix_by_choice(
        choice, e.zeroth_mean, e.zeroth_se, e.zeroth_variance,
        jnp.where(finite1, e.first_mean, 0.0), jnp.where(finite1, e.first_se, 0.0), var1,
        finite1, dt,
    )  # fmt: skip
    exact = choice == ev.EXACT
    estimate = jnp.where(exact, e.grad, mix.mean)
    se = jnp.where(exact, jnp.zeros_like(mix.se), mix.se)
    fixed = 1 + 2 * e.fd_excess.size  # L(θ) and the ladder, per round
    used = e.num_samples
    return make_result(
        unravel,
        estimate.astype(dt),
        se.astype(dt),
        num_loss_evals=(fixed + n) * rounds + fixed + used,
        num_grad_evals=(1 + n) * rounds + 1 + used,
        variance=jnp.where(exact, 0.0, mix.variance),
        zeroth_variance=e.zeroth_variance,
        first_variance=var1,
        alpha=mix.alpha,
        bias_gap=mix.bias_gap,
        sigma_used=e.sigma,
        choice=choice,
        z_gap=ev.relevant_gap(e, thresholds),
        widenings=rounds,
        reports=reports,
    )
