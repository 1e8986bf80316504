r"""The ``auto`` estimator: the doctor's decision, made inside the compiled graph.

``Auto`` and :func:`diffsim.diagnose` answer "can the exact gradient be trusted?" from the
**same evidence** (:mod:`diffsim.estimators._evidence`): one batch of N first-order
samples, N/2 antithetic zeroth-order pairs with the exact gradient as control variate and
a ladder of directional central differences, reduced to one set of statistics and
compared with one set of thresholds. For the same key, σ and N (the doctor with
``num_samples = max_samples = N``), the doctor's ``choice`` and ``Auto``'s are the same
(``tests/test_one_verdict.py`` checks it over hundreds of random points):

====  ==========  ===============================================================
code  name        when (the doctor's verdict), and what is returned
====  ==========  ===============================================================
0     exact       trusted: no flag, nothing undecided — ∇L(θ) (zero variance)
1     mixed       untrusted: jump, or inconclusive (a statistic undecided) —
                  :math:`α ĝ^1 + (1 − α) ĝ^0` with AoBG's rule at a tolerated bias of
                  ‖SE(ĝ⁰)‖: a real jump (B ≫ SE) gets α ≈ 0, a false alarm the
                  minimum-variance mix
2     zeroth      plateau (σ widened ×4, up to ``max_widen`` times, while nothing
                  moved within it): ZoBG, unbiased
3     zeroth      stiffness (heavy first-order tails): ZoBG
4     none        non_finite loss, gradient or perturbed losses: NaN, never a number
5     zeroth      non_finite first-order samples only: ZoBG from the finite losses
6     zeroth      chaos (rollouts only, the doctor's; ``Auto`` never returns it)
====  ==========  ===============================================================

Cost per call and round: ``1 + 2·k·m + N`` loss and ``1 + N`` gradient evaluations (k ≤ 8
ladder directions, m = 7 steps), a widened round paying it again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._checks import INT32_MAX, check_int
from .._sharding import check_devices, device_mesh
from .._sigma import DEFAULT_SIGMA, check_sigma, may_widen, scale_sigma
from . import _evidence as ev
from ._common import as_count, call_args, samples_field
from ._evidence import CHOICES, REASONS, WIDEN
from ._noise import noise_for
from ._rounds import round_cost, sample_sizes
from .alpha_order import AlphaOrder
from .base import (
    SIGMA,
    Cost,
    Estimator,
    GradientEstimate,
    Loss,
    Option,
    SmoothingEstimator,
    with_stats,
)
from .exact import Exact
from .first_order import FirstOrder
from .zeroth_order import ZerothOrder

__all__ = ["CHOICES", "REASONS", "WIDEN", "Auto", "chosen_estimator", "describe_choice"]


def _thresholds(value: Any) -> ev.Thresholds:
    """``value`` if it is a :class:`~diffsim.doctor.Thresholds` (which checks its fields)."""
    if not isinstance(value, ev.Thresholds):
        raise TypeError(
            f"thresholds must be a diffsim.doctor.Thresholds (e.g. Thresholds(z_clear=1.5)), "
            f"got {value!r}"
        )
    return value


class Auto(SmoothingEstimator):
    r"""The estimator that needs no expertise: the doctor's decision for its samples, made
    in the compiled graph — exact where the doctor trusts the gradient, else what it
    recommends (see :mod:`diffsim.estimators.auto` for the choices).

    Args:
        sigma: the smoothing scale to test at and to smooth with, in any σ form (a number, a
            pytree like θ, :class:`~diffsim.estimators.Relative`); default ``Relative(0.05)``
            (:data:`diffsim.estimators.DEFAULT_SIGMA`, the rule every tool shares): 5 % of each
            component's magnitude, a component at 0 taking the smallest non-zero |θ_i|.
        num_samples: N per family (even, >= 4): N first-order samples and N/2 antithetic
            zeroth-order pairs in the first batch.
        max_samples: the budget (static, >= N; default 512): while a statistic is
            undecided, N doubles (fresh samples join the old) up to the largest N·2^k
            within it — the doctor's sequential test, in the graph (``lax.cond``: only the
            rounds needed are paid for, outside ``vmap``).
        max_widen: how many times σ may grow ×4 when nothing moves within it (>= 0,
            static); default ``None``: 2 (up to 16 × σ) with the default σ, 0 with a σ you
            give (a σ the user gives wins, in the doctor too).
        thresholds: the doctor's :class:`~diffsim.doctor.Thresholds` (static; the same
            object and defaults ``diagnose`` takes: z 4 and 2, η 0.1, ρ 20, kurtosis 10).
        devices: where the samples run (static): ``None`` (every device when there are
            several), a count, devices or a ``Mesh`` (:func:`diffsim.sharding.device_mesh`); the
            estimate is the one-device estimate to float rounding (same key).
        decide_every: in :func:`diffsim.optimize` (static; default ``None``: decide on
            every step): decide on one step in K = ``decide_every`` and reuse the decision
            on the K − 1 after it — the estimator it chose (:func:`chosen_estimator`: the
            exact gradient, AoBG or ZoBG at the decision's σ and N; in the policy setting
            FoBG for "exact" and auto's own mix of both families for "mixed") — deciding
            again at once after a non-finite estimate. The evidence costs ``1 + 2·k·m + N``
            losses and ``1 + N`` gradients per decision (in the policy setting
            ~``8·113 + 3N/2`` rollouts), so deciding on every step pays 10–60× the
            simulator steps of the estimator it picks; reusing the decision for K steps
            pays about the chosen estimator's. A call outside ``optimize`` always decides.

    The estimate reports ``choice`` (its code; ``estimate.choice_name``, :data:`CHOICES`,
    :data:`REASONS`, and :func:`describe_choice` in words), ``sigma_used``, ``widenings``,
    ``z_gap`` (the first-/zeroth-order gap beyond tolerance, in standard errors),
    ``alpha``, ``bias_gap`` and both per-sample variances.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import Auto, describe_choice
        >>> r = Auto()(lambda t: jnp.sum(t**2), jnp.array([1.0, -2.0]), jax.random.PRNGKey(1))
        >>> r.estimate.tolist(), r.choice_name
        ([2.0, -4.0], 'exact')
        >>> step = lambda t: jnp.where(t > 1.0, 1.0, 0.0)  # flat at 0.5, a jump at 1
        >>> r = Auto()(step, jnp.asarray(0.5), jax.random.PRNGKey(1))
        >>> int(r.widenings), r.choice_name, float(r.estimate) > 0
        (2, 'zeroth', True)
    """

    label = "auto (the doctor's choice)"
    short_label = "auto"
    sharded = True
    summary = (
        "the doctor's decision in the graph: exact gradient where it is trusted, else the "
        "zeroth-order or mixed estimate it recommends; σ relative to θ, widened when flat"
    )
    options = (
        SIGMA,
        Option("num_samples", "N, samples per family", int, "", 4, 2**31 - 2, multiple_of=2),
    )
    reports = (
        "choice",
        "sigma_used",
        "widenings",
        "z_gap",
        "alpha",
        "bias_gap",
        "zeroth_variance",
        "first_variance",
        "variance",
    )

    sigma: Any = eqx.field(
        converter=lambda v: check_sigma("sigma", v), default_factory=lambda: DEFAULT_SIGMA
    )
    num_samples: int = eqx.field(static=True, converter=as_count, default=32)
    max_samples: int = eqx.field(static=True, converter=as_count, default=512)
    max_widen: int | None = eqx.field(static=True, converter=as_count, default=None)
    thresholds: ev.Thresholds = eqx.field(
        static=True, converter=_thresholds, default_factory=ev.Thresholds
    )

    devices: Any = eqx.field(static=True, converter=check_devices, default=None)
    decide_every: int | None = eqx.field(static=True, converter=as_count, default=None)

    def __post_init__(self) -> None:
        # resolved now, from the σ given: ``with_sigma`` (annealing) replaces σ by a copy
        # that does not declare ``widen``, and keeps the widening resolved here
        if self.max_widen is None:
            self.max_widen = ev.MAX_WIDEN if may_widen(self.sigma) else 0

    def __check_init__(self) -> None:
        samples_field("num_samples", self.num_samples, minimum=4)
        if self.decide_every is not None:
            check_int("decide_every", self.decide_every, minimum=1, maximum=INT32_MAX)
        samples_field("max_samples", self.max_samples, minimum=4)
        if self.num_samples % 2:
            raise ValueError(
                f"num_samples must be even (N/2 antithetic pairs), got {self.num_samples}"
            )
        if self.max_widen is None:
            pass
        elif isinstance(self.max_widen, bool) or not isinstance(self.max_widen, int):
            raise TypeError(f"max_widen must be an integer in [0, 20], got {self.max_widen!r}")
        elif not 0 <= self.max_widen <= 20:
            raise ValueError(f"max_widen must be an integer in [0, 20], got {self.max_widen}")

    @property
    def widen_rounds(self) -> int:
        """How many times σ may widen: ``max_widen``, or by default 2 with the default σ
        and 0 with a σ the user gave."""
        if self.max_widen is not None:
            return int(self.max_widen)
        return ev.MAX_WIDEN if may_widen(self.sigma) else 0

    def with_sigma(self, sigma: Any) -> Auto:
        """This estimator at σ = ``sigma`` (inside ``jit`` too: ``optimize`` anneals it);
        the widening it had is kept, so an annealed default σ still widens."""
        return dataclasses.replace(self, sigma=sigma, max_widen=self.widen_rounds)

    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        theta = call_args(theta, key, randomized=True, num_samples=self.num_samples, copies=4)
        noise = noise_for(loss, theta, self.sigma)
        return noise.auto(theta, key, self, device_mesh(self.devices))

    def init(self, theta: Any) -> Any:
        """With ``decide_every``: the plan :func:`decide_or_reuse` carries (the last choice,
        its widenings, the steps left to reuse it); else ``()``, no state."""
        del theta
        return () if self.decide_every is None else initial_plan()

    def update(
        self, loss: Loss, theta: Any, key: Array, state: Any
    ) -> tuple[GradientEstimate, Any]:
        """One step of a loop (traceable): with ``decide_every``, decide on one step in K and
        reuse the decision in between (:func:`decide_or_reuse`); else decide every step."""
        if self.decide_every is None:
            return self(loss, theta, key), state
        return decide_or_reuse(self, loss, theta, key, state)

    def cost(self, dim: int) -> Cost:
        """The worst case: σ widened ``widen_rounds`` times (each round L(θ), ∇L(θ), the
        finite-difference ladder and N samples per family) and the last round doubled to
        the budget; the buffers hold the budget's samples while a chunk of N is drawn."""
        n = self.num_samples
        cap = sample_sizes(n, max(n, self.max_samples))[-1]
        fd_points = len(ev.DEFAULT_REL_STEPS) * min(dim, ev.NUM_DIRECTIONS)
        losses, gradients = round_cost(self.widen_rounds, n, cap, fd_points)
        return Cost(losses, gradients, cap + n + 1 + 2 * fd_points)


def chosen_estimator(
    code: int, sigma: Any, num_samples: int, policy: bool = False
) -> Estimator | None:
    """The configured estimator a :data:`CHOICES` code stands for — what the doctor
    recommends and what :class:`Auto` with ``decide_every`` reuses: ``Exact()`` (in the
    policy setting, where no gradient is noise-free, ``FirstOrder``), ``AlphaOrder`` for
    "mixed", ``ZerothOrder`` for "zeroth" (σ and an even N ≥ 4 given; in the policy setting
    N/2 antithetic pairs, as auto draws them), ``None`` for "none".

    Example:
        >>> from diffsim.estimators import chosen_estimator
        >>> chosen_estimator(0, 0.1, 32), chosen_estimator(2, 0.1, 32).num_samples
        (Exact(), 32)
        >>> type(chosen_estimator(0, 0.1, 32, policy=True)).__name__
        'FirstOrder'
    """
    name = CHOICES[int(code)]
    n = max(4, int(num_samples) // 2 * 2)
    if name == "exact":
        return FirstOrder(sigma=sigma, num_samples=n) if policy else Exact()
    if name == "none":
        return None
    if name == "mixed":
        return AlphaOrder(sigma=sigma, num_samples=n)
    return ZerothOrder(sigma=sigma, num_samples=n, antithetic=policy)


REUSED = (ev.EXACT, ev.MIXED, ev.ZEROTH_PLATEAU)
"""The choices a reused decision runs (every zeroth-order code runs ``ZerothOrder``)."""


def initial_plan() -> tuple[Array, Array, Array]:
    """The state :func:`decide_or_reuse` carries: (choice, widenings, steps left)."""
    zero = jnp.zeros((), jnp.int32)
    return zero, zero, zero


def decide_or_reuse(
    auto: Auto, loss: Loss, theta: Any, key: Array, plan: tuple[Array, Array, Array]
) -> tuple[GradientEstimate, tuple[Array, Array, Array]]:
    """One step of a loop with ``auto.decide_every = K`` (traceable; ``plan`` from
    :func:`initial_plan`): the full decision when no steps are left (or the last decision
    was "none"), else the chosen estimator at the decision's σ (widened as it was) and N —
    in the policy setting a "mixed" decision runs both families and auto's own mix (α at
    a tolerated bias of the ZoBG mean's SE), elsewhere :func:`chosen_estimator`'s.
    The estimate reports the choice it ran, ``z_gap`` NaN on a reused step."""
    code, widened, left = plan
    every = auto.decide_every or 1
    noise = noise_for(loss, theta, auto.sigma)
    policy = not noise.noise_free_gradient
    # every branch builds its estimate with make_result (θ's leaves, int32 counts, scalars in
    # θ's float dtype); the cast drops weak types so that lax.switch sees one type — no
    # extra trace of the decision to learn its output types
    dt = jnp.result_type(*jax.tree_util.tree_leaves(theta), float)

    def uniform(r: GradientEstimate, choice: Array, z_gap: Array, widenings: Array):
        r = with_stats(r, Auto.reports, choice=choice, z_gap=z_gap, widenings=widenings)
        return jax.tree_util.tree_map(lambda a: jnp.asarray(a, a.dtype), r)

    def decide():
        r = auto(loss, theta, key)
        return uniform(r, r.choice, r.z_gap, r.widenings)

    def reuse(c: int):
        def run():
            factor = jnp.asarray(WIDEN, dt) ** widened
            sigma = scale_sigma(auto.sigma, factor)
            if policy and c == ev.MIXED:  # auto's own mix, at the σ the decision used
                widened_noise = noise_for(loss, theta, sigma)
                r = widened_noise.auto(theta, key, auto, device_mesh(auto.devices), decided=c)
            else:
                est = chosen_estimator(c, sigma, auto.num_samples, policy)
                assert est is not None
                r = est(loss, theta, key)
            return uniform(r, code, jnp.asarray(jnp.nan, dt), widened)

        return run

    table = np.zeros(len(CHOICES), np.int32)
    for i, name in enumerate(CHOICES):
        table[i] = 1 + [CHOICES[c] for c in REUSED].index(name if name != "none" else "exact")
    branch = jnp.where((left <= 0) | (code == ev.NONE), 0, jnp.asarray(table)[code])
    r = jax.lax.switch(branch, [decide, *(reuse(c) for c in REUSED)])
    decided = branch == 0
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(v))
                                for v in jax.tree_util.tree_leaves(r.estimate)]))  # fmt: skip
    left = jnp.where(decided, every - 1, left - 1)
    left = jnp.where(finite, left, 0).astype(jnp.int32)
    widened = jnp.where(decided, r.widenings, widened).astype(jnp.int32)
    return r, (r.choice, widened, left)


def describe_choice(estimate: GradientEstimate) -> str:
    """What an :class:`Auto` estimate chose and why, in words (concrete estimates only):
    ``"<name>: <reason> (z = …, σ = …, α = …)"``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import Auto, FiniteDifference, describe_choice
        >>> step = lambda t: jnp.where(t > 1.0, 1.0, 0.0)  # flat at 0.5, a jump at 1
        >>> text = describe_choice(Auto()(step, jnp.asarray(0.5), jax.random.PRNGKey(0)))
        >>> text.split(":")[0], "σ = 0.4 after 2 widening(s)" in text
        ('zeroth', True)
        >>> from diffsim.estimators import CHOICES  # an estimate's choice code, by name
        >>> CHOICES[0], CHOICES[1]
        ('exact', 'mixed')
        >>> describe_choice(FiniteDifference()(step, jnp.asarray(0.5)))
        Traceback (most recent call last):
        ...
        ValueError: describe_choice needs an estimate made by the auto estimator
    """
    code = int(np.asarray(estimate.stats.get("choice", -1)))
    if not 0 <= code < len(CHOICES):
        raise ValueError("describe_choice needs an estimate made by the auto estimator")
    z = float(np.asarray(estimate.z_gap))
    alpha = float(np.asarray(estimate.alpha))
    sigma = float(np.asarray(estimate.sigma_used))
    widen = int(np.asarray(estimate.widenings))
    extra = f"z = {z:.3g}, σ = {sigma:.3g}" + (f" after {widen} widening(s)" if widen else "")
    if np.isfinite(alpha):
        extra += f", α = {alpha:.3g}"
    return f"{CHOICES[code]}: {REASONS[code]} ({extra})"
