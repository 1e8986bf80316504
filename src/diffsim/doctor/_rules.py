r"""The doctor's decision rules: one :class:`Rule` per flag.

A rule is the whole story of one flag in one place — its name, its test on the
:class:`~diffsim.doctor._measure.Measurements` (with the thresholds it compares against),
the evidence it reports, and the advice it gives when raised. :data:`RULES` lists them in
the order flags are reported; :func:`decide` and :func:`recommend` only iterate over it.

Adding a flag is one more section here and its entry in :data:`RULES` (plus, if it has a
user-tunable threshold, a field of :class:`Thresholds` and the keyword that sets it, and a
battery case that shows it raised when it should be).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np

from ..estimators import _evidence as ev
from ..estimators._evidence import Thresholds
from ._measure import Horizon, Measurements


@dataclasses.dataclass(frozen=True)
class Flag:
    """One reason not to trust the exact gradient, with the numbers that raised it.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.doctor import Flag, diagnose
        >>> step = lambda t: jnp.where(t > 0.0, 1.0, 0.0) + 0.1 * t
        >>> flag = diagnose(step, jnp.asarray(0.02), jax.random.PRNGKey(0), sigma=0.1).flags[0]
        >>> isinstance(flag, Flag), flag.name, flag.message.split(":")[0]
        (True, 'jump', 'a discontinuity within σ')
        >>> sorted(flag.evidence)
        ['bias_gap', 'epsilon', 'fd_slope', 'line_gap', 'z_beyond_tolerance', 'z_first_vs_zeroth']
    """

    name: str
    message: str
    evidence: dict[str, float]


Test = Callable[[Measurements, Thresholds], "Flag | None"]
Advice = Callable[[frozenset, "float | str"], str]
"""``advise(flags, sigma)``: σ as one number, or its description when it differs per
component."""


def _no_band(m: Measurements, t: Thresholds) -> Flag | None:
    return None


@dataclasses.dataclass(frozen=True)
class Rule:
    """A flag: ``test(measurements, thresholds)`` returns the :class:`Flag` (message and
    evidence) when raised, else ``None``; ``advise(flags, sigma)`` says what to do when it
    is raised, given all flags raised and σ; ``urgency`` orders the advice (lowest first:
    what must be fixed before anything else). ``undecided(measurements, thresholds)``
    returns a :class:`Flag` (why, and the evidence) when the flag is not raised but its
    statistic lies between "clearly no" and "clearly yes", so that more samples could
    raise it (the sequential test then draws them); rules whose statistics do not depend
    on the number of samples leave it at the default (never undecided).

    Example:
        >>> from diffsim.doctor import FLAGS, RULES, Rule
        >>> FLAGS  # the order flags are reported in
        ('non_finite', 'plateau', 'jump', 'kink', 'stiffness', 'chaos', 'discretization')
        >>> all(isinstance(r, Rule) for r in RULES), tuple(r.name for r in RULES) == FLAGS
        (True, True)
        >>> [r.name for r in sorted(RULES, key=lambda r: r.urgency)]  # the order of the advice
        ['non_finite', 'chaos', 'jump', 'plateau', 'kink', 'stiffness', 'discretization']
        >>> jump = RULES[FLAGS.index("jump")]
        >>> jump.advise(frozenset({"jump"}), 0.1).split(":")[0]
        'use the alpha-order estimator (or zeroth-order) with σ = 0.1'
    """

    name: str
    test: Test
    advise: Advice
    urgency: int
    undecided: Test = _no_band


def _sigma_text(sigma: float | str) -> str:
    return f"{sigma:.3g}" if isinstance(sigma, (int, float)) else str(sigma)


def samples_to_decide(z: float, n: int, t: Thresholds) -> int:
    """The samples at which a statistic now at ``z`` (with N = ``n``) would reach
    ``z_threshold`` if the effect it measures is real: z grows like √N, so
    N·(z_threshold / z)², rounded up to a doubling of N (the sequential test's rounds)."""
    if not (z > 0 and np.isfinite(z)):
        return n
    need = n * (t.z_threshold / z) ** 2
    doublings = max(0, int(np.ceil(np.log2(max(need / n, 1.0)))))
    return n * 2**doublings


# shared conditions ---------------------------------------------------------------------


def _heavy_tails(m: Measurements, t: Thresholds) -> bool:
    """Per-sample gradients far larger than the loss changes explain, with heavy tails."""
    return bool(ev.heavy_tails(m, t))


def _growth(m: Measurements, t: Thresholds) -> Literal["spread", "concentrated"] | None:
    return growth_of(m.horizon, t)


def growth_of(h: Horizon | None, t: Thresholds) -> Literal["spread", "concentrated"] | None:
    """How the rollout Jacobian grows: too much and spread over many steps (chaos), too
    much and concentrated in a few steps (stiffness), or not too much (``None``, also
    without a rollout). Either way the horizon decides stiffness, not the samples."""
    limit, share = t.chaos_growth, t.concentration_limit
    if h is None or limit is None or share is None:
        return None
    if np.isfinite(h.growth) and not h.growth > limit:
        return None
    return "spread" if h.concentration < share else "concentrated"


def _horizon_evidence(h: Horizon) -> dict[str, float]:
    return {
        "growth_T8_to_T": h.growth,
        "rate_per_step": h.rate,
        "max_step_amplification": h.max_step,
        "concentration": h.concentration,
        "jacobian_norm_T": h.jacobian_norms[-1],
    }


# non_finite: NaN or inf anywhere ---------------------------------------------------------


def _non_finite(m: Measurements, t: Thresholds) -> Flag | None:
    if m.all_finite:
        return None
    where = [
        name
        for name, ok in (
            ("loss", m.finite_loss),
            ("gradient", m.finite_gradient),
            ("perturbed losses", m.finite_perturbed_losses),
            ("perturbed gradients", m.finite_perturbed_gradients),
        )
        if not ok
    ]
    return Flag(
        "non_finite",
        f"NaN or inf in the {', '.join(where)}",
        {
            "finite_loss": m.finite_loss,
            "finite_gradient": m.finite_gradient,
            "nonfinite_sample_gradients": m.nonfinite_sample_gradients,
        },
    )


def _non_finite_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        "fix the non-finite values first: guard switch points with the double-where "
        "pattern and check the model's domain (if the loss is finite at theta, NaN or inf "
        f"within σ = {_sigma_text(sigma)} of it means the perturbations leave that domain: use a "
        "smaller σ); no estimator can average over NaN"
    )


NON_FINITE = Rule("non_finite", _non_finite, _non_finite_advice, urgency=0)


# plateau: exact gradient ~0, locally flat, but the loss changes within σ -----------------


def _plateau(m: Measurements, t: Thresholds) -> Flag | None:
    if not bool(ev.plateau(m, t)):
        return None
    return Flag(
        "plateau",
        "the exact gradient is ~0 and the loss is locally flat, but it changes within "
        "σ (the smoothed gradient sees what autodiff cannot)",
        {"grad_norm": m.grad_norm, "smoothed_grad_norm": m.smoothed_grad_norm,
         "z_smoothed": m.z_smoothed_nonzero, "local_change": m.local_change,
         "max_loss_change": m.max_loss_change},
    )  # fmt: skip


def _plateau_undecided(m: Measurements, t: Thresholds) -> Flag | None:
    z = m.z_smoothed_nonzero
    if not bool(ev.plateau_undecided(m, t)):
        return None
    return Flag(
        "plateau",
        f"flat here; the smoothed gradient's significance z = {z:.3g} lies between "
        f"{t.z_clear:g} and {t.z_threshold:g}",
        {"z_smoothed": z, "num_samples": m.num_samples,
         "samples_to_decide": samples_to_decide(z, m.num_samples, t)},
    )  # fmt: skip


def _plateau_advice(flags: frozenset, sigma: float | str) -> str:
    if "jump" in flags:
        return "the exact gradient is 0 on this plateau: do not follow it"
    return (
        f"use zeroth-order or alpha-order with σ = {_sigma_text(sigma)} (or analytic smoothing): "
        "the exact gradient is 0 here but the smoothed loss slopes"
    )


PLATEAU = Rule("plateau", _plateau, _plateau_advice, urgency=3, undecided=_plateau_undecided)


# jump: FoBG and ZoBG disagree, central differences grow like 1/δ, or the line test fails -


def z_relevant_gap(m: Measurements, t: Thresholds) -> float:
    r"""The significance of the part of the first-/zeroth-order gap that matters:
    :math:`\max_i (|ḡ^1_i − ḡ^0_i| − η‖ḡ^0‖)/\mathrm{SE}_i` in the scaled coordinates
    (η = ``gap_tolerance``; the norm is ``smoothed_grad_norm``). With η = 0 it is
    ``z_first_vs_zeroth``. A cliff 3σ away leaves a gap of ~1 % of the gradient: real, and
    significant with enough samples, but no reason to distrust the exact gradient."""
    return float(ev.relevant_gap(m, t))


def _jump(m: Measurements, t: Thresholds) -> Flag | None:
    # heavy first-order tails explain a disagreement: that is stiffness, not a jump
    z_gap = z_relevant_gap(m, t)
    disagree = z_gap > t.z_threshold and not _heavy_tails(m, t)
    if not bool(ev.jump(m, t)):
        return None
    if disagree:
        why = "first- and zeroth-order estimates disagree beyond their standard errors"
    elif bool(ev.fd_jump(m)):
        why = "central differences grow like 1/δ as δ shrinks"
    else:
        why = (f"the loss does not follow its gradient along it: its slope along ∇L differs "
               f"from ‖∇L‖ by {100 * m.line_gap:.0f} % at the smallest steps that resolve "
               f"it (many small discontinuities, e.g. one-step contact events)")  # fmt: skip
    return Flag(
        "jump",
        "a discontinuity within σ: " + why,
        {"z_first_vs_zeroth": m.z_first_vs_zeroth, "z_beyond_tolerance": z_gap,
         "bias_gap": m.bias_gap, "epsilon": m.epsilon, "fd_slope": m.fd_slope_small_steps,
         "line_gap": m.line_gap},
    )  # fmt: skip


def _jump_undecided(m: Measurements, t: Thresholds) -> Flag | None:
    z = z_relevant_gap(m, t)
    if not bool(ev.jump_undecided(m, t)):
        return None
    return Flag(
        "jump",
        f"first- and zeroth-order estimates differ by z = {z:.3g} standard errors beyond "
        f"{100 * t.gap_tolerance:g} % of the smoothed gradient: between {t.z_clear:g} "
        f"(clearly no) and {t.z_threshold:g} (clearly a jump)",
        {"z_beyond_tolerance": z, "bias_gap": m.bias_gap, "num_samples": m.num_samples,
         "samples_to_decide": samples_to_decide(z, m.num_samples, t)},
    )  # fmt: skip


def _jump_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        f"use the alpha-order estimator (or zeroth-order) with σ = {_sigma_text(sigma)}: "
        "first-order samples miss the jump; or smooth the contact analytically with a "
        "temperature comparable to σ"
    )


JUMP = Rule("jump", _jump, _jump_advice, urgency=2, undecided=_jump_undecided)


# kink: the loss's slope changes at θ, so the exact gradient is one side's -----------------


def _kink(m: Measurements, t: Thresholds) -> Flag | None:
    if not bool(ev.kink(m, t)):
        return None
    return Flag(
        "kink",
        "a kink at θ: the one-sided slopes of the loss differ by "
        f"{m.fd_kink:.3g} along a direction, the same at the ladder's three smallest steps, so "
        "the exact gradient is the slope of one side only (a joint on its limit, a contact "
        "just touching, a max or an abs)",
        {"slope_change": m.fd_kink, "grad_norm": m.grad_norm},
    )


def _kink_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        "move θ off the kink, or use a smoothed estimate (first- or alpha-order) with "
        f"σ = {_sigma_text(sigma)}, which averages both sides"
    )


KINK = Rule("kink", _kink, _kink_advice, urgency=4)


# stiffness: an enormous, short-lived derivative ------------------------------------------


def _stiffness(m: Measurements, t: Thresholds) -> Flag | None:
    growth, h = _growth(m, t), m.horizon
    if growth == "spread":
        return None  # chaos: it also explains heavy first-order tails
    if growth == "concentrated" and h is not None:
        # the horizon evidence explains heavy first-order tails: one flag, from the horizon
        return Flag(
            "stiffness",
            f"∂s_T/∂s_0 grows {h.growth:.3g}-fold and a single step amplifies by "
            f"{h.max_step:.3g} ({100 * h.concentration:.0f}% of the growth): a fast contact "
            "the step barely resolves",
            _horizon_evidence(h),
        )
    if not bool(ev.stiffness(m, t)):
        return None
    return Flag(
        "stiffness",
        "rare, huge first-order samples: per-sample gradients far exceed what the "
        "loss changes within σ allow, with heavy tails (FoBG's empirical bias)",
        {"stiffness_ratio": m.stiffness_ratio, "first_kurtosis": m.first_kurtosis,
         "max_sample_grad": m.max_sample_grad},
    )  # fmt: skip


def _stiffness_undecided(m: Measurements, t: Thresholds) -> Flag | None:
    if _growth(m, t) is not None or _heavy_tails(m, t):
        return None  # the horizon decides, or the flag is raised
    rho, kurt = m.stiffness_ratio, m.first_kurtosis
    # one tail statistic past its threshold, the other within a factor 2 of it: the rare
    # huge samples are rare, so more samples may show them (ρ and kurtosis grow with N)
    if not bool(ev.stiffness_undecided(m, t)):
        return None
    return Flag(
        "stiffness",
        f"per-sample gradient tails near the thresholds (ρ = {rho:.3g} against "
        f"{t.stiffness_ratio:g}, excess kurtosis {kurt:.3g} against {t.stiffness_kurtosis:g})",
        {
            "stiffness_ratio": rho,
            "first_kurtosis": kurt,
            "num_samples": m.num_samples,
            "samples_to_decide": 2 * m.num_samples,
        },
    )


def _stiffness_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        f"use zeroth-order (or alpha-order) with σ = {_sigma_text(sigma)}: its variance does not "
        "grow with stiffness; or soften the contact (a softer or smoothed contact model) or "
        "shrink h"
    )


STIFFNESS = Rule(
    "stiffness", _stiffness, _stiffness_advice, urgency=4, undecided=_stiffness_undecided
)


# chaos: the rollout Jacobian grows exponentially, spread over the horizon ----------------


def _chaos(m: Measurements, t: Thresholds) -> Flag | None:
    h = m.horizon
    if _growth(m, t) != "spread" or h is None:
        return None
    return Flag(
        "chaos",
        f"∂s_T/∂s_0 grows {h.growth:.3g}-fold from T/8 to T, spread over many steps (the "
        f"largest single step explains {100 * h.concentration:.0f}% of it): exponential "
        f"sensitivity, λ ≈ {h.rate:.3g} per step",
        _horizon_evidence(h),
    )


def _chaos_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        "shorten the horizon (or optimise over shorter windows, e.g. multiple shooting): "
        f"sensitivities grow exponentially; else zeroth-order with σ = {_sigma_text(sigma)}, whose "
        "variance does not grow with the Jacobian"
    )


CHAOS = Rule("chaos", _chaos, _chaos_advice, urgency=1)


# ---------------------------------------------------------------------------------------

# discretization: a smooth gradient of a different system (the step too coarse for it) --


DISCRETIZATION_EXPLAINED_BY = ("non_finite", "plateau", "jump", "stiffness", "chaos")
"""Flags that explain a gradient changing with h themselves (a switch, a stiff contact, an
exploding Jacobian): the discretization flag is raised only when none of them is."""


def _discretization(m: Measurements, t: Thresholds) -> Flag | None:
    dz = m.discretization
    if dz is None or not np.isfinite(dz.relative_error):
        return None
    if dz.relative_error <= t.discretization_tolerance:
        return None
    others = (RULES_BY_NAME[n].test(m, t) for n in DISCRETIZATION_EXPLAINED_BY)
    if any(f is not None for f in others):
        return None
    return Flag(
        "discretization",
        f"the gradient at h = {dz.h:.3g} and at h/2 differ by {dz.difference:.3g} "
        f"(‖∇‖ {dz.coarse_norm:.3g} against {dz.fine_norm:.3g}): with the integrator's order "
        f"{dz.order} that puts ∇ at h {100 * dz.relative_error:.3g} % from the limit h → 0, "
        f"beyond the {100 * t.discretization_tolerance:g} % allowed — smooth and "
        "reproducible, but the gradient of the discretised model, not of the system written "
        "down",
        {"time_step": dz.h, "order": float(dz.order), "relative_error": dz.relative_error,
         "grad_norm_h": dz.coarse_norm, "grad_norm_half_h": dz.fine_norm},
    )  # fmt: skip


def _discretization_advice(flags: frozenset, sigma: float | str) -> str:
    return (
        "refine the time step (halve h until ∇ stops changing) or use a higher-order "
        "integrator; for contact, time-of-impact events instead of stepped ones"
    )


DISCRETIZATION = Rule("discretization", _discretization, _discretization_advice, urgency=5)

RULES: tuple[Rule, ...] = (NON_FINITE, PLATEAU, JUMP, KINK, STIFFNESS, CHAOS, DISCRETIZATION)
"""Every flag the doctor knows, in the order flags are reported."""

FLAGS: tuple[str, ...] = tuple(r.name for r in RULES)
RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


def _finite_evidence(flag: Flag) -> bool:
    return all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in flag.evidence.values())


def decide(m: Measurements, thresholds: Thresholds) -> tuple[Flag, ...]:
    """The flags the measurements raise, in :data:`FLAGS` order.

    No flag rests on a non-finite statistic: a flag (other than ``non_finite``, whose
    evidence is the finiteness itself) whose evidence holds a NaN or an inf is not raised.
    NaN ≠ NaN would otherwise read as "first- and zeroth-order disagree" (``jump``) and send
    the user to estimators that average the same NaN.
    """
    flags = (rule.test(m, thresholds) for rule in RULES)
    return tuple(
        f for f in flags if f is not None and (f.name == "non_finite" or _finite_evidence(f))
    )


def undecided(m: Measurements, thresholds: Thresholds) -> tuple[Flag, ...]:
    """The flags not raised whose statistic is undecided (between "clearly no" and
    "clearly yes"), in :data:`FLAGS` order; none rests on a non-finite statistic."""
    raised = {f.name for f in decide(m, thresholds)}
    out = (rule.undecided(m, thresholds) for rule in RULES if rule.name not in raised)
    return tuple(f for f in out if f is not None and _finite_evidence(f))


def recommend(flags: Iterable[str], sigma: float | str) -> str:
    """What to use, given the names of the flags raised (at smoothing scale σ).

    Example:
        >>> from diffsim.doctor import recommend
        >>> recommend((), 0.1)
        'use the exact gradient (autodiff): it is trustworthy here'
    """
    raised = frozenset(flags)
    if not raised:
        return "use the exact gradient (autodiff): it is trustworthy here"
    rules = sorted((r for r in RULES if r.name in raised), key=lambda r: r.urgency)
    return "; ".join(r.advise(raised, sigma) for r in rules)
