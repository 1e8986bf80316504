r"""One batch of evidence and one decision: what the doctor and ``auto`` both read.

"Can the exact gradient at θ be trusted?" is answered once, here, for both tools:

* :func:`draw` evaluates one batch around θ (one traced program) from a sampler
  (:mod:`~diffsim.estimators._samplers`; with noise on θ: L(θ) and ∇L(θ), directional
  central differences over a ladder of step sizes, N/2 antithetic zeroth-order pairs with
  the exact gradient as control variate, and N independent first-order samples
  ∇L(θ + σ ⊙ z) of the Gaussian-smoothed gradient at scale σ);
* :func:`statistics` reduces the batch to :class:`Evidence` (means and standard errors per
  family, the first-/zeroth-order gap, tails, flatness, finiteness), traceable: it runs
  inside the rounds' compiled loop;
* the predicates (:func:`plateau`, :func:`jump`, :func:`heavy_tails`, their *undecided*
  bands, :func:`flat_within_sigma`) compare the evidence with **one** set of
  :class:`Thresholds`;
* :func:`choose` turns the flags raised and undecided into a :data:`CHOICES` code — what
  the doctor recommends and what ``Auto`` returns for the same samples.

Both tools draw it through one scheduler, :mod:`~diffsim.estimators._rounds` (σ widened on
a dead-flat plateau, N doubled while a statistic is undecided); :func:`diffsim.diagnose`
writes the report, :class:`~diffsim.estimators.Auto` returns the estimate the choice names.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._choices import CHOICES as CHOICES
from ._choices import EXACT as EXACT
from ._choices import MIXED as MIXED
from ._choices import NONE as NONE
from ._choices import REASONS as REASONS
from ._choices import ZEROTH_CHAOS as ZEROTH_CHAOS
from ._choices import ZEROTH_DOMAIN as ZEROTH_DOMAIN
from ._choices import ZEROTH_PLATEAU as ZEROTH_PLATEAU
from ._choices import ZEROTH_STIFF as ZEROTH_STIFF
from ._mixing import bernstein_radius, choose_alpha
from ._thresholds import Thresholds as Thresholds

# ---------------------------------------------------------------------------------------
# the widening and the ladder
# ---------------------------------------------------------------------------------------


WIDEN = 4.0
"""σ grows by this factor per widening round when nothing moves within σ."""

MAX_WIDEN = 2
"""How many times σ may widen (up to 16 × the σ asked for)."""

DEFAULT_REL_STEPS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)
"""The finite-difference ladder, as multiples of σ."""

EXACT_TOLERANCE = 10.0
"""∇L(θ) counts as far from the smoothed gradient when they differ by more than this many
times the smoothed gradient's norm (and by ``z_threshold`` standard errors): an order of
magnitude, not the σ-scale wiggle of a resolved bounce (its ∇L is 3× the smoothed one at
k = 1e4, which the battery calls trusted)."""

KINK_TOLERANCE = 0.1
"""A kink at θ: the one-sided slopes L(θ ± δu) differ, at the three smallest steps of the
ladder and by the same amount at each (a change of slope, not a curvature, which shrinks
like δ, nor a jump, which grows like 1/δ), by more than this share of their size."""

NUM_DIRECTIONS = 8
"""Directions of the finite-difference ladder (coordinate axes when dim θ is at most this;
else random, the last replaced by the gradient's own: the line test)."""

LINE_TOLERANCE = 0.5
"""The line test (:func:`line_gap`): the loss's slope along ∇L(θ), by central differences
at two consecutive steps that resolve it, differs from ‖∇L(θ)‖ by more than this share."""


# ---------------------------------------------------------------------------------------
# the batch
# ---------------------------------------------------------------------------------------


def _directions(d: int, k: int, key, dtype):
    """Coordinate axes when d <= k, else k random unit directions."""
    if d <= k:
        return jnp.eye(d, dtype=dtype)
    u = jax.random.normal(key, (k, d), dtype)
    return u / jnp.linalg.norm(u, axis=1, keepdims=True)


def round_key(key: Array, r: Any) -> Array:
    """The key of sampling round r (σ widened r times): ``key`` itself for r = 0, else
    ``fold_in(key, r)`` — the doctor and ``auto`` draw the same numbers in every round."""
    return jax.lax.cond(
        jnp.asarray(r) == 0, lambda: key, lambda: jax.random.fold_in(key, jnp.asarray(r))
    )


def empty_state(d: int, capacity: int, num_steps: int, num_dir: int, dtype,
                ladder_dim: int | None = None) -> dict:  # fmt: skip
    """Sample buffers of fixed shape for :func:`draw` (capacity samples per family; rows of
    ``d`` columns, the ladder in a space of ``ladder_dim``, default ``d``)."""
    ladder_dim = d if ladder_dim is None else ladder_dim
    k = ladder_dim if ladder_dim <= num_dir else num_dir
    z = jnp.zeros
    return {
        "zeroth": z((capacity // 2, d), dtype),
        "plain": z((capacity // 2, d), dtype),
        "first": z((capacity, d), dtype),
        "first_norms": z((capacity,), dtype),
        "loss_changes": z((capacity,), dtype),
        "fixed": {"loss": z((), dtype), "grad": z((d,), dtype), "deltas": z((num_steps,), dtype),
                  "fd_plus": z((num_steps, k), dtype), "fd_minus": z((num_steps, k), dtype),
                  "grad_along_directions": z((k,), dtype), "line": z((), dtype)},
    }  # fmt: skip


SAMPLE_BUFFERS = ("zeroth", "plain", "first", "first_norms", "loss_changes")
"""The buffers a sampler's ``samples`` fills, in the order it returns them (``zeroth`` and
``plain`` hold N/2 rows a chunk, the others N)."""


def draw(sampler, theta, key, sigma, rel_steps, state, start, stop, chunk, num_dir, mesh):
    r"""Fill the sample buffers of ``state`` from chunk ``start`` to ``stop`` (traceable:
    every round reuses one compiled program), computing the sample-free part (L(θ), the
    noise-free gradient, the finite-difference ladder) when ``start`` is 0.

    ``sampler`` (:mod:`~diffsim.estimators._samplers`: noise on θ or on the actions) says
    what a chunk holds; the samples (and the ladder's points) are evaluated over ``mesh``
    when one is given.
    """

    def fixed(_):
        return sampler.fixed(theta, key, sigma, rel_steps, num_dir, chunk, mesh)

    fx = jax.lax.cond(start == 0, fixed, lambda _: state["fixed"], None)
    pairs = chunk // 2

    def body(i, bufs):
        rows = sampler.samples(theta, key, i, sigma, fx, chunk, mesh)
        out = {}
        for name, row in zip(SAMPLE_BUFFERS, rows, strict=True):
            at = i * (pairs if name in ("zeroth", "plain") else chunk)
            index = (at,) + (i * 0,) * (row.ndim - 1)
            out[name] = jax.lax.dynamic_update_slice(bufs[name], row.astype(bufs[name].dtype),
                                                     index)  # fmt: skip
        return out

    samples = jax.lax.fori_loop(start, stop, body, {k: state[k] for k in SAMPLE_BUFFERS})
    return dict(samples, fixed=fx)


# ---------------------------------------------------------------------------------------
# the statistics
# ---------------------------------------------------------------------------------------


class Evidence(eqx.Module):
    """Every statistic of one batch (arrays; the doctor's
    :class:`~diffsim.doctor.Measurements` holds the same names as numbers). Norms, ρ, the
    gap and the ladder live in the σ-scaled coordinates; per-component vectors in θ's
    units. See :class:`~diffsim.doctor.Measurements` for each field."""

    sigma: Array
    eps: Array
    loss: Array
    grad: Array
    grad_norm: Array
    all_finite: Array
    finite_loss: Array
    finite_gradient: Array
    finite_perturbed_losses: Array
    finite_perturbed_gradients: Array
    nonfinite_sample_gradients: Array
    zeroth_mean: Array
    zeroth_se: Array
    zeroth_variance: Array
    first_mean: Array
    first_se: Array
    first_variance: Array
    smoothed_grad_norm: Array
    z_smoothed_nonzero: Array
    z_first_vs_zeroth: Array
    z_exact_vs_smoothed: Array
    bias_gap: Array
    epsilon: Array
    stiffness_ratio: Array
    first_kurtosis: Array
    max_loss_change: Array
    max_sample_grad: Array
    grad_along_directions: Array
    fd_noise: Array
    fd_excess: Array
    fd_slopes: Array
    fd_slope_small_steps: Array
    fd_over_grad: Array
    fd_kink: Array
    line_gap: Array
    local_change: Array
    typical_change: Array
    scale: Array
    num_samples: Array


def _stats(g: Array) -> tuple[Array, Array, Array]:
    n = g.shape[0]
    mean = jnp.mean(g, axis=0)
    var_c = jnp.sum((g - mean) ** 2, axis=0) / max(n - 1, 1)
    return mean, jnp.sqrt(var_c / n), jnp.sum(var_c)


def _ratio(num: Array, den: Array) -> Array:
    """num/den, with x/0 = inf for x > 0 and 0/0 = 0 (a statistic that is exactly nothing)."""
    safe = jnp.where(den > 0, den, 1.0)
    return jnp.where(den > 0, num / safe, jnp.where(num > 0, jnp.inf, 0.0))


def excess_kurtosis(a: Array) -> Array:
    """Excess kurtosis of a sample (standardised first: no overflow); 0 for a constant
    sample, NaN for a sample with a non-finite value."""
    if a.size == 0:
        return jnp.zeros((), a.dtype)
    finite = jnp.all(jnp.isfinite(a))
    a = jnp.where(finite, a, 0.0)
    c = a - jnp.mean(a)
    sd = jnp.sqrt(jnp.mean(c**2))
    k = jnp.mean((c / jnp.where(sd > 0, sd, 1.0)) ** 4) - 3.0
    return jnp.where(finite, jnp.where(sd > 0, k, 0.0), jnp.nan)


def statistics(
    fx: dict, g0: Array, g1: Array, dL: Array, sigma: Any, scale: Array, plain: Array,
    first_norms: Array | None = None,
) -> Evidence:  # fmt: skip
    """Reduce one batch (:func:`draw`'s buffers, cut to the samples drawn) to
    :class:`Evidence`; traceable.

    ``first_norms``: the first-order samples' norms in the space the perturbation lives in,
    when that is not θ's (the policy setting: the per-step action offsets, where a norm
    times σ is the change the sample predicts); default ``‖g1_i‖``."""
    g = fx["grad"]
    dt = g.dtype
    eps = jnp.asarray(jnp.finfo(dt).eps, dt)
    sigma = jnp.asarray(sigma, dt)
    L0 = fx["loss"]
    n, d = g1.shape
    pairs = g0.shape[0]
    gy = scale * g
    gnorm = jnp.linalg.norm(gy)

    m0, se0, var0 = _stats(g0)
    m1, se1, var1 = _stats(g1)
    z_smooth = _ratio(jnp.abs(m0), se0)
    z_gap = _ratio(jnp.abs(m1 - m0), jnp.sqrt(se0**2 + se1**2))
    # ∇L(θ) against the smoothed gradient estimated without it, beyond ten times the
    # smoothed gradient's norm (EXACT_TOLERANCE): a derivative that is not what the loss does
    # within σ (a stiff contact's), not a smooth loss's O(σ²) bias or the heavy-ish tails
    # of these samples at small N
    mp, sep, _ = _stats(plain)
    excess = jnp.abs(gy - mp) - EXACT_TOLERANCE * jnp.linalg.norm(mp)
    z_exact = jnp.max(_ratio(excess, sep)) if d else jnp.zeros((), dt)
    dev = jnp.linalg.norm(g0 - m0, axis=1)
    R = jnp.max(dev) if pairs else jnp.zeros((), dt)
    epsilon = bernstein_radius(var0, pairs, d, 0.05, R)

    max_dL = jnp.max(jnp.abs(dL)) if dL.size else jnp.zeros((), dt)
    norms = jnp.linalg.norm(g1, axis=1) if first_norms is None else first_norms
    finite_norms = jnp.isfinite(norms)
    max_norm = jnp.where(jnp.all(finite_norms), jnp.max(norms), jnp.inf)
    rho = max_norm * sigma / jnp.maximum(max_dL, eps * (1 + jnp.abs(L0)) * 16)

    fp, fm, deltas = fx["fd_plus"], fx["fd_minus"], fx["deltas"]
    fd = (fp - fm) / (2 * deltas[:, None])  # (m, k)
    ad = fx["grad_along_directions"]
    noise = 16 * eps * (jnp.abs(L0) + 1) / deltas
    err = jnp.abs(fd - ad[None, :])
    excess = err - noise[:, None]
    logf = jnp.log(jnp.maximum(err, jnp.finfo(dt).tiny))
    slopes = jnp.diff(logf, axis=0) / jnp.diff(jnp.log(deltas))[:, None]  # (m-1, k)
    tail = jnp.mean(slopes[-2:], axis=0)
    ok = jnp.isfinite(tail)
    fd_slope = jnp.where(jnp.any(ok), jnp.min(jnp.where(ok, tail, jnp.inf)), 0.0)
    kink = fd_kink(fp, fm, L0, deltas, eps)
    line = line_gap(err[:, -1], noise, ad[-1], fx["line"], deltas / sigma)

    # flatness at δ ≈ σ/10 against the typical change at σ
    jj = jnp.argmin(jnp.abs(deltas / sigma - 0.1))
    local = jnp.max(jnp.abs(jnp.concatenate([fp[jj], fm[jj]]) - L0))
    typical = jnp.median(jnp.abs(dL)) if dL.size else jnp.zeros((), dt)

    to_theta = jnp.where(scale > 0, scale, 1.0)
    finite_perturbed = (
        jnp.all(jnp.isfinite(fp)) & jnp.all(jnp.isfinite(fm)) & jnp.all(jnp.isfinite(dL))
    )
    finite_loss = jnp.isfinite(L0)
    finite_grad = jnp.all(jnp.isfinite(g))
    finite_first = jnp.all(finite_norms)

    def nanmax(v):
        return jnp.nanmax(v) if d else jnp.zeros((), dt)

    return Evidence(
        sigma=sigma,
        eps=eps,
        loss=L0,
        grad=g,
        grad_norm=gnorm,
        all_finite=finite_loss & finite_grad & finite_perturbed & jnp.all(jnp.isfinite(g1)),
        finite_loss=finite_loss,
        finite_gradient=finite_grad,
        finite_perturbed_losses=finite_perturbed,
        finite_perturbed_gradients=finite_first,
        nonfinite_sample_gradients=jnp.sum(~finite_norms),
        zeroth_mean=m0 / to_theta,
        zeroth_se=se0 / to_theta,
        zeroth_variance=var0,
        first_mean=m1 / to_theta,
        first_se=se1 / to_theta,
        first_variance=var1,
        smoothed_grad_norm=jnp.linalg.norm(m0),
        z_smoothed_nonzero=nanmax(z_smooth),
        z_first_vs_zeroth=nanmax(z_gap),
        z_exact_vs_smoothed=z_exact,
        bias_gap=jnp.linalg.norm(m1 - m0),
        epsilon=epsilon,
        stiffness_ratio=rho,
        first_kurtosis=excess_kurtosis(norms),
        max_loss_change=max_dL,
        max_sample_grad=max_norm,
        grad_along_directions=ad,
        fd_noise=noise,
        fd_excess=excess,
        fd_slopes=slopes,
        fd_slope_small_steps=fd_slope,
        fd_over_grad=jnp.max(excess[-1]),
        fd_kink=kink,
        line_gap=line,
        local_change=local,
        typical_change=typical,
        scale=scale,
        num_samples=jnp.asarray(n, jnp.int32),
    )


# ---------------------------------------------------------------------------------------
# the predicates (on Evidence, or the doctor's Measurements: the same names)
# ---------------------------------------------------------------------------------------


def _rounding(e: Any) -> Array:
    return 16 * e.eps * (jnp.abs(e.loss) + 1)


def _finite(*values: Any) -> Array:
    """Every statistic a flag reports is finite (no flag rests on a NaN or an inf)."""
    out = jnp.ones((), bool)
    for v in values:
        out = out & jnp.all(jnp.isfinite(jnp.asarray(v)))
    return out


def heavy_tails(e: Any, t: Thresholds) -> Array:
    """Per-sample gradients far larger than the loss changes explain, with heavy tails."""
    return (jnp.asarray(e.stiffness_ratio) > t.stiffness_ratio) & (
        jnp.asarray(e.first_kurtosis) > t.stiffness_kurtosis
    )


def exact_far(e: Any, t: Thresholds) -> Array:
    """∇L(θ) differs from the smoothed gradient (estimated without it) by more than ten
    times the smoothed gradient's norm, significantly: a derivative far larger than what
    the loss does within σ — a stiff contact's, even without heavy tails."""
    z = jnp.asarray(e.z_exact_vs_smoothed)
    return (z > t.z_threshold) & _finite(z)


def stiffness(e: Any, t: Thresholds) -> Array:
    """Heavy tails, with finite evidence. (:func:`exact_far` is reported as evidence but
    does not raise the flag: on the held-out battery it raised a false alarm on the Duffing
    spring at T = 2000, so it is not used to decide.)"""
    return heavy_tails(e, t) & _finite(e.stiffness_ratio, e.first_kurtosis, e.max_sample_grad)


def stiffness_undecided(e: Any, t: Thresholds) -> Array:
    """One tail statistic past its threshold, the other within a factor 2 of it."""
    rho, kurt = jnp.asarray(e.stiffness_ratio), jnp.asarray(e.first_kurtosis)
    near = ((rho > t.stiffness_ratio) & (kurt > t.stiffness_kurtosis / 2)) | (
        (kurt > t.stiffness_kurtosis) & (rho > t.stiffness_ratio / 2)
    )
    return near & ~heavy_tails(e, t) & _finite(rho, kurt)


def _plateau_parts(e: Any) -> tuple[Array, Array, Array]:
    tiny_grad = jnp.asarray(e.grad_norm) <= 0.05 * jnp.asarray(e.smoothed_grad_norm)
    # a smooth minimum changes by (δ/σ)² ≈ 1e-2 of the typical change; a plateau by rounding
    flat = jnp.asarray(e.local_change) <= 1e-4 * jnp.asarray(e.typical_change) + _rounding(e)
    changes = jnp.asarray(e.max_loss_change) > 1e-6 * (jnp.abs(e.loss) + 1)
    return tiny_grad, flat, changes


def plateau(e: Any, t: Thresholds) -> Array:
    """The exact gradient is ~0 and the loss locally flat, yet it changes within σ."""
    tiny_grad, flat, changes = _plateau_parts(e)
    raised = tiny_grad & flat & ((jnp.asarray(e.z_smoothed_nonzero) > t.z_threshold) | changes)
    return raised & _finite(e.grad_norm, e.smoothed_grad_norm, e.z_smoothed_nonzero,
                            e.local_change, e.max_loss_change)  # fmt: skip


def plateau_undecided(e: Any, t: Thresholds) -> Array:
    """Flat here, and the smoothed gradient's significance between z_clear and z_threshold."""
    tiny_grad, flat, changes = _plateau_parts(e)
    z = jnp.asarray(e.z_smoothed_nonzero)
    return tiny_grad & flat & ~changes & (t.z_clear <= z) & (z <= t.z_threshold) & _finite(z)


def flat_within_sigma(e: Any) -> Array:
    """Nothing moves within σ: the exact gradient predicts no change over σ, no perturbed
    loss differs from L(θ) beyond the plateau rule's resolution, and everything is finite.
    σ is then too small to say anything, and both tools widen it (×:data:`WIDEN`)."""
    _, _, changes = _plateau_parts(e)
    exact_flat = jnp.asarray(e.grad_norm) * jnp.asarray(e.sigma) <= _rounding(e)
    return exact_flat & ~changes & jnp.asarray(e.all_finite)


def relevant_gap(e: Any, t: Thresholds) -> Array:
    r"""The significance of the part of the first-/zeroth-order gap that matters:
    :math:`\max_i (|ḡ^1_i − ḡ^0_i| − η‖ḡ^0‖)/\mathrm{SE}_i` in the scaled coordinates
    (η = ``gap_tolerance``)."""
    m0 = jnp.asarray(e.zeroth_mean)
    if m0.size == 0:
        return jnp.zeros(())
    s = jnp.asarray(e.scale) if jnp.size(e.scale) == m0.size else jnp.ones_like(m0)
    gap = jnp.abs(jnp.asarray(e.first_mean) - m0) * s
    se = jnp.sqrt(jnp.asarray(e.zeroth_se) ** 2 + jnp.asarray(e.first_se) ** 2) * s
    excess = gap - t.gap_tolerance * jnp.asarray(e.smoothed_grad_norm)
    return jnp.max(_ratio(excess, se))


def fd_jump(e: Any) -> Array:
    """Central differences grow like 1/δ down to the smallest steps, far above rounding."""
    ad = jnp.abs(jnp.asarray(e.grad_along_directions))
    slopes, excess = jnp.asarray(e.fd_slopes), jnp.asarray(e.fd_excess)
    noise = jnp.asarray(e.fd_noise)
    grows = jnp.all(slopes[-2:] < -0.8, axis=0)
    big = excess[-1] > 10 * (ad + jnp.asarray(e.grad_norm) * 1e-3 + noise[-1])
    return jnp.any(grows & big)


def jump(e: Any, t: Thresholds) -> Array:
    """A discontinuity within σ: the gap beyond tolerance (tails not explaining it),
    central differences growing like 1/δ, or the loss not following its gradient along it
    (:func:`line_fails`)."""
    z = relevant_gap(e, t)
    disagree = (z > t.z_threshold) & ~heavy_tails(e, t)
    evidence = _finite(e.z_first_vs_zeroth, z, e.bias_gap, e.epsilon, e.fd_slope_small_steps)
    return (disagree | fd_jump(e) | line_fails(e)) & evidence


def jump_undecided(e: Any, t: Thresholds) -> Array:
    z = relevant_gap(e, t)
    band = (t.z_clear <= z) & (z <= t.z_threshold)
    return ~heavy_tails(e, t) & band & _finite(z, e.bias_gap)


def fd_kink(fp: Array, fm: Array, L0: Array, deltas: Array, eps: Array) -> Array:
    r"""The largest change of slope at θ along the ladder's directions, 0 when there is
    none: with the one-sided slopes :math:`s_\pm = \pm(L(θ ± δu) − L(θ))/δ` at the three
    smallest steps, a kink has :math:`|s_+ − s_-|` the same at all three (log–log slopes
    within ±0.3), above 10× its rounding noise and above ``KINK_TOLERANCE`` of
    :math:`(|s_+| + |s_-|)/2`; a smooth loss's difference is δ·|L''| (slope 1), a jump's and
    rounding noise's grow like 1/δ (slope −1)."""
    if fp.shape[0] < 3:
        return jnp.zeros((), fp.dtype)
    d = deltas[-3:, None]
    sp = (fp[-3:] - L0) / d
    sm = (L0 - fm[-3:]) / d
    gap = jnp.abs(sp - sm)  # (3, k), the smallest step last
    noise = 16 * eps * (jnp.abs(L0) + 1) / d
    tiny = jnp.finfo(fp.dtype).tiny
    logs = jnp.log(jnp.maximum(gap, tiny))
    slopes = jnp.diff(logs, axis=0) / jnp.diff(jnp.log(d), axis=0)  # (2, k)
    size = (jnp.abs(sp[-1]) + jnp.abs(sm[-1])) / 2
    is_kink = (
        jnp.all(jnp.abs(slopes) < 0.3, axis=0)
        & jnp.all(gap > 10 * noise, axis=0)
        & (gap[-1] > KINK_TOLERANCE * size)
        & jnp.all(jnp.isfinite(gap), axis=0)
    )
    return jnp.max(jnp.where(is_kink, gap[-1], 0.0))


def line_gap(err: Array, noise: Array, slope: Array, is_line: Array, rel_steps: Array) -> Array:
    r"""How far the loss's slope along the gradient's own direction is from the gradient's
    norm, as a share of it (0 where it follows it or nothing can be said). Central
    differences along ĝ = ∇L/‖∇L‖ at the ladder's steps have the error
    :math:`e_j = |(L(θ + δ_jĝ) − L(θ − δ_jĝ))/2δ_j − ‖∇L‖|`; over each two consecutive
    steps of at most 0.3σ that resolve the slope (‖∇L‖ above 10× the rounding noise
    :math:`16ε(|L|+1)/δ_j`) and where the error does not shrink ×3 from the larger to the
    smaller (a smooth loss's shrinks like δ², ×11 between steps 0.3 apart), the share
    :math:`\min(e_{j-1}, e_j)/‖∇L‖`; the largest of them. Many small discontinuities
    along ∇L (one-step contact events of many bodies) keep the error at a constant share
    as δ shrinks, a jump makes it grow like 1/δ: both mean that a descent step of that size
    does not get the decrease the gradient promises. ``is_line``: the ladder's last
    direction is ĝ (dim > :data:`NUM_DIRECTIONS` and ∇L ≠ 0), else 0."""
    resolved = (slope > 10 * noise) & (rel_steps <= 0.3 + 1e-9) & jnp.isfinite(err)
    pair = resolved[:-1] & resolved[1:] & (err[1:] * 3 > err[:-1])
    share = jnp.minimum(err[:-1], err[1:]) / jnp.where(slope > 0, slope, 1)
    gap = jnp.max(jnp.where(pair, share, 0.0), initial=0.0)
    return jnp.where(is_line > 0, gap, 0.0).astype(err.dtype)


def line_fails(e: Any) -> Array:
    """The line test fails (:func:`line_gap` above :data:`LINE_TOLERANCE`): the loss does
    not follow its gradient along it at two consecutive steps of at most 0.3σ."""
    return jnp.asarray(e.line_gap) > LINE_TOLERANCE


def kink(e: Any, t: Thresholds) -> Array:
    """A kink at θ (:func:`fd_kink`): the exact gradient is the slope of one side."""
    return jnp.asarray(e.fd_kink) > 0


def non_finite(e: Any) -> Array:
    return ~jnp.asarray(e.all_finite)


def choose(
    e: Any, non_finite_: Any, plateau_: Any, jump_: Any, stiffness_: Any, chaos_: Any,
    pending: Any,
) -> Array:  # fmt: skip
    """The :data:`CHOICES` code for the flags raised (booleans) and anything undecided:
    non-finite first, then the zeroth-order answers (chaos, stiffness, plateau), then the
    mix (a jump, or a statistic undecided), else the exact gradient."""
    nowhere = ~(jnp.asarray(e.finite_loss) & jnp.asarray(e.finite_gradient)) | ~jnp.asarray(
        e.finite_perturbed_losses
    )
    return jnp.select(
        [non_finite_ & nowhere, non_finite_, chaos_, stiffness_, plateau_, jump_ | pending],
        [NONE, ZEROTH_DOMAIN, ZEROTH_CHAOS, ZEROTH_STIFF, ZEROTH_PLATEAU, MIXED],
        EXACT,
    ).astype(jnp.int32)


def _raised(e: Any, t: Thresholds) -> tuple[Array, Array, Array, Array]:
    nf = non_finite(e)
    return nf, plateau(e, t) & ~nf, jump(e, t) & ~nf, stiffness(e, t)


def pending(e: Any, t: Thresholds, stiffness_band: bool = True) -> Array:
    """A flag not raised whose statistic is undecided: the rounds
    (:mod:`~diffsim.estimators._rounds`) then draw more samples. ``stiffness_band=False``:
    stiffness is decided elsewhere (a rollout's horizon), its band asks for nothing."""
    nf, _, _, stiff = _raised(e, t)
    out = (plateau_undecided(e, t) & ~plateau(e, t)) | (jump_undecided(e, t) & ~jump(e, t))
    if stiffness_band:
        out = out | (stiffness_undecided(e, t) & ~stiff)
    return out & ~nf


def assess(e: Any, t: Thresholds) -> Array:
    """The choice for measurements without a rollout (what ``auto`` computes in its graph
    and the doctor's :func:`~diffsim.diagnose` reports for the same samples)."""
    nf, pl, ju, stiff = _raised(e, t)
    ju = ju | (kink(e, t) & ~nf)  # a kink is answered as a jump is: the mixed estimate
    return choose(e, nf, pl, ju, stiff & ~nf, jnp.zeros((), bool), pending(e, t))


class Mix(NamedTuple):
    """What a choice makes of the two families (:func:`mix_by_choice`)."""

    alpha: Array  # 1 (exact), AoBG's α (mixed), 0 (zeroth order), NaN (none)
    bias_gap: Array  # ‖mean₁ − mean₀‖
    mean: Array  # α mean₁ + (1 − α) mean₀; NaN where the choice is none
    se: Array  # its standard error, per coordinate; NaN where none
    variance: Array  # α² var₁ + (1 − α)² var₀


def mix_by_choice(choice: Array, m0: Array, se0: Array, var0: Array, m1: Array, se1: Array,
                  var1: Array, finite1: Array, dt: Any) -> Mix:  # fmt: skip
    """The estimate a choice returns from the first-order (m1, se1, var1; ``finite1``: its
    samples were finite) and zeroth-order (m0, se0, var0) families — ``auto``'s rule in both
    settings: α = 1 when trusted, AoBG's α at a tolerated bias of the ZoBG mean's standard
    error when mixed, 0 for zeroth order, NaN when no estimate is trusted. The callers
    zero ``m1`` and ``se1`` where ``finite1`` is false (no 0·NaN in the mix)."""
    B = jnp.sqrt(jnp.sum((m1 - m0) ** 2))
    se0_norm = jnp.sqrt(jnp.sum(se0**2))
    var1_ok = jnp.where(finite1, var1, jnp.inf)
    alpha_mix = choose_alpha(var0, var1_ok, jnp.zeros((), dt), B, se0_norm)
    alpha = jnp.select(
        [choice == EXACT, choice == MIXED, choice == NONE],
        [jnp.ones((), dt), alpha_mix, jnp.asarray(jnp.nan, dt)],
        jnp.zeros((), dt),
    ).astype(dt)
    a = jnp.where(jnp.isfinite(alpha), alpha, 0.0)
    none = choice == NONE
    mean = jnp.where(none, jnp.nan, a * m1 + (1 - a) * m0)
    se = jnp.where(none, jnp.nan, jnp.sqrt(a**2 * se1**2 + (1 - a) ** 2 * se0**2))
    return Mix(alpha, B, mean, se, a**2 * var1 + (1 - a) ** 2 * var0)
