"""The estimator interface and the result every estimator returns.

An estimator is a strategy object (an ``eqx.Module``) with one method,
``estimator(loss, theta, key) -> GradientEstimate``: given a scalar JAX loss ``L(θ)`` over a
pytree θ and a PRNG key it returns an estimate of a gradient — of ``L`` itself for
:class:`Exact` and :class:`FiniteDifference`, of the Gaussian-smoothed loss
:math:`F(θ) = \\mathbb E_{w\\sim N(0, σ^2 I)} L(θ + w)` for the randomized estimators.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, PyTree

from .._checks import as_arrays, is_concrete
from .._options import Option
from ._choices import CHOICES

Loss = Callable[[Any], Any]
"""A scalar loss ``L(θ)``: a pure JAX function of a pytree θ returning a scalar."""


@dataclasses.dataclass(frozen=True)
class Quantity:
    """A quantity a :class:`GradientEstimate` can report: its field, label and unit.

    Example:
        >>> from diffsim.estimators import QUANTITIES, Quantity
        >>> q = QUANTITIES["epsilon"]
        >>> isinstance(q, Quantity), q.label, q.unit, q.description
        (True, 'ε', 'grad', 'Bernstein radius of the zeroth-order mean')
        >>> [name for name, q in QUANTITIES.items() if q.unit == "count"]
        ['evaluations', 'loss_evaluations', 'grad_evaluations', 'widenings']
        >>> from diffsim.estimators import STATS  # what a result's stats may hold
        >>> STATS[:4]
        ('choice', 'sigma_used', 'widenings', 'z_gap')
    """

    name: str
    """A field of :class:`GradientEstimate`'s core, ``evaluations``, or a ``stats`` key."""
    label: str
    unit: str
    """``"grad"`` (the units of ∂L/∂θ), ``"grad²"``, ``"count"`` or ``""`` (a pure number)."""
    description: str


QUANTITIES: dict[str, Quantity] = {
    q.name: q
    for q in (
        Quantity("estimate", "estimate", "grad", "the gradient estimate"),
        Quantity("std_error", "standard error", "grad", "per-component standard error"),
        Quantity("evaluations", "evaluations", "count", "loss + gradient evaluations"),
        Quantity("loss_evaluations", "loss evaluations", "count", "forward simulations"),
        Quantity("grad_evaluations", "gradient evaluations", "count", "forward + backward"),
        Quantity("choice", "choice", "choice", "what the auto estimator returned (a code)"),
        Quantity("sigma_used", "σ used", "θ", "the (largest component of) σ sampled at"),
        Quantity("widenings", "σ widenings", "count", "times σ grew ×4 on a plateau"),
        Quantity("z_gap", "z (FoBG − ZoBG)", "", "first-/zeroth-order gap in standard errors"),
        Quantity("alpha", "α", "", "weight on the first-order samples"),
        Quantity("epsilon", "ε", "grad", "Bernstein radius of the zeroth-order mean"),
        Quantity("bias_gap", "B", "grad", "‖first-order mean − zeroth-order mean‖"),
        Quantity("zeroth_variance", "σ̂₀²", "grad²", "zeroth-order per-sample variance"),
        Quantity("first_variance", "σ̂₁²", "grad²", "first-order per-sample variance"),
        Quantity("variance", "per-sample variance", "grad²", "trace of the sample covariance"),
    )
}
"""Every quantity an estimate can report, by name, in report order: the core's
(:data:`BASE_QUANTITIES`), then the ``stats`` an estimator computes."""

BASE_QUANTITIES: tuple[str, ...] = (
    "estimate",
    "std_error",
    "evaluations",
    "loss_evaluations",
    "grad_evaluations",
)
"""What every estimate reports (its core); an estimator's ``stats`` add to these."""

STATS: tuple[str, ...] = tuple(n for n in QUANTITIES if n not in BASE_QUANTITIES)
"""The names a :attr:`GradientEstimate.stats` mapping may hold, in report order."""

_INTEGER_STATS = frozenset({"choice", "widenings"})


class Reported(NamedTuple):
    """One entry of :meth:`GradientEstimate.report`: what was computed, and its value.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.estimators import BASE_QUANTITIES, FiniteDifference, Reported
        >>> report = FiniteDifference()(jnp.sin, jnp.asarray(0.0)).report()
        >>> tuple(report) == BASE_QUANTITIES  # finite differences report nothing more
        True
        >>> entry = report["loss_evaluations"]
        >>> isinstance(entry, Reported), entry.quantity.label, int(entry.value)
        (True, 'loss evaluations', 2)
    """

    quantity: Quantity
    value: Any


class GradientEstimate(eqx.Module):
    """A gradient estimate: a small core (the estimate, its standard error, what it cost)
    and ``stats``, the quantities its estimator computed on the way. All values are arrays,
    so a stack of estimates (e.g. an optimisation history) is again a ``GradientEstimate``.

    Attributes:
        estimate: the gradient estimate, a pytree like θ.
        std_error: per-component standard error of ``estimate`` (like θ); 0 for the
            deterministic estimators (exact, finite differences).
        loss_evaluations: loss (forward simulation) evaluations used.
        grad_evaluations: gradient (forward + backward) evaluations used.
        stats: the estimator's own quantities, by name (each a :data:`QUANTITIES` entry;
            read one as ``stats["alpha"]`` or ``r.alpha``); only what was computed:

            * ``variance``: trace of the per-sample covariance of the samples averaged into
              ``estimate`` (σ̂² = 1/(N−1) Σ‖g_i − ḡ‖²); for AoBG and auto the variance of one
              α-mixed sample, α²σ̂₁² + (1−α)²σ̂₀² (ZoBG, FoBG, AoBG, auto);
            * ``sigma_used``: the σ the samples were drawn at (its largest component; auto
              may have widened it) (ZoBG, FoBG, AoBG, auto);
            * ``alpha``: the weight α on the first-order part; ``epsilon``: ε, the Bernstein
              confidence radius of the ZoBG mean (AoBG); ``bias_gap``: B = ‖ḡ¹ − ḡ⁰‖;
              ``zeroth_variance``, ``first_variance``: σ̂₀², σ̂₁² (AoBG, auto);
            * ``choice``: what auto returned (a code of :data:`diffsim.estimators.CHOICES`);
              ``z_gap``: the first-/zeroth-order gap in combined standard errors;
              ``widenings``: how many times σ was widened on a plateau (auto).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from diffsim.estimators import GradientEstimate, ZerothOrder
        >>> est = ZerothOrder(sigma=0.1, num_samples=16)
        >>> r = est(jnp.sin, jnp.asarray(0.0), jax.random.PRNGKey(0))
        >>> isinstance(r, GradientEstimate), sorted(r.stats)
        (True, ['sigma_used', 'variance'])
        >>> int(r.loss_evaluations), int(r.grad_evaluations), int(r.evaluations)  # N + 1
        (17, 0, 17)
        >>> keys = jax.random.split(jax.random.PRNGKey(0), 3)
        >>> stack = jax.vmap(lambda k: est(jnp.sin, jnp.asarray(0.0), k))(keys)
        >>> type(stack).__name__, stack.estimate.shape, stack.variance.shape  # one pytree
        ('GradientEstimate', (3,), (3,))
    """

    estimate: PyTree[Array]
    std_error: PyTree[Array]
    loss_evaluations: Array
    grad_evaluations: Array
    stats: dict[str, Array] = eqx.field(default_factory=dict)

    def __getattr__(self, name: str) -> Array:
        # only called when normal lookup fails: a stat by its name (``r.alpha``)
        if name in STATS:
            stats = self.__dict__.get("stats", {})
            if name in stats:
                return stats[name]
            raise AttributeError(
                f"this estimate has no {name!r}: its estimator computed "
                f"{', '.join(self.reports) or 'no stats'} (GradientEstimate.stats)"
            )
        raise AttributeError(f"'GradientEstimate' object has no attribute {name!r}")

    @property
    def evaluations(self) -> Array:
        """Simulator evaluations: loss evaluations plus gradient evaluations."""
        return self.loss_evaluations + self.grad_evaluations

    @property
    def reports(self) -> tuple[str, ...]:
        """The names in ``stats``, in report order (:data:`QUANTITIES`)."""
        return tuple(n for n in STATS if n in self.stats)

    @property
    def choice_name(self) -> str | None:
        """What :class:`~diffsim.estimators.Auto` returned, by name (``"exact"``,
        ``"mixed"``, ``"zeroth"``, ``"none"``); ``None`` for the other estimators (and for a
        stack of estimates, whose ``choice`` is an array)."""
        code = self.stats.get("choice")
        if code is None or not _holds_values(code):  # traced, or a shape (in JAX's errors)
            return None
        code = np.asarray(code)
        if code.ndim or not 0 <= int(code) < len(CHOICES):
            return None
        return CHOICES[int(code)]

    def __repr__(self) -> str:
        return self._text()

    def __str__(self) -> str:
        return self._text()

    def _text(self) -> str:
        """The estimate as numbers: ``GradientEstimate(estimate=…, std_error=…, …)``,
        with its stats (a traced or stacked estimate shows shapes)."""
        leaves = jax.tree_util.tree_leaves(self.estimate)
        if not all(_holds_values(v) for v in leaves):
            return f"GradientEstimate(traced, stats={self.reports})"

        def fmt(v: Any) -> str:
            a = np.asarray(v)
            if a.ndim == 0:
                return f"{float(a):.6g}" if a.dtype.kind == "f" else str(a.item())
            return np.array2string(a, precision=6, separator=", ", threshold=8)

        def tree(v: Any) -> str:
            if isinstance(v, dict):
                return "{" + ", ".join(f"{k!r}: {tree(x)}" for k, x in v.items()) + "}"
            return fmt(v)

        parts = [f"estimate={tree(self.estimate)}", f"std_error={tree(self.std_error)}",
                 f"loss_evaluations={fmt(self.loss_evaluations)}",
                 f"grad_evaluations={fmt(self.grad_evaluations)}"]  # fmt: skip
        name = self.choice_name
        for q in self.reports:
            if q == "choice" and name is not None:
                parts.append(f"choice={name!r}")
            else:
                parts.append(f"{q}={fmt(self.stats[q])}")
        return "GradientEstimate(" + ", ".join(parts) + ")"

    def report(self) -> dict[str, Reported]:
        """The quantities this estimate holds, in order: :data:`BASE_QUANTITIES` and then
        its ``stats``, each with its :class:`Quantity` (label, unit).

        A CLI or a page renders this without knowing which estimator made it.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> from diffsim.estimators import AlphaOrder
            >>> r = AlphaOrder(num_samples=4)(jnp.sin, jnp.asarray(0.3), jax.random.PRNGKey(0))
            >>> names = list(r.report())
            >>> names[:5]
            ['estimate', 'std_error', 'evaluations', 'loss_evaluations', 'grad_evaluations']
            >>> names[5:8]
            ['sigma_used', 'alpha', 'epsilon']
            >>> names[8:]
            ['bias_gap', 'zeroth_variance', 'first_variance', 'variance']
        """
        out = {}
        for name in (*BASE_QUANTITIES, *self.reports):
            value = self.stats[name] if name in self.stats else getattr(self, name)
            out[name] = Reported(QUANTITIES[name], value)
        return out


def _holds_values(v: Any) -> bool:
    """``v`` is numbers (an array or a scalar), not a tracer or an abstract shape."""
    return is_concrete(v) and isinstance(v, (jax.Array, np.ndarray, np.generic, int, float))


def make_result(
    unravel: Callable[[Array], Any],
    estimate: Array,
    std_error: Array,
    *,
    loss_evaluations: Any,
    grad_evaluations: Any,
    **stats: Any,
) -> GradientEstimate:
    """Build a :class:`GradientEstimate` from flat vectors and the named stats (internal
    helper; a stat's name must be one of :data:`STATS`)."""
    dt = estimate.dtype
    unknown = sorted(set(stats) - set(STATS))
    if unknown:
        raise ValueError(f"unknown stats {unknown}: a stat is one of {', '.join(STATS)}")
    return GradientEstimate(
        estimate=unravel(estimate),
        std_error=unravel(std_error),
        loss_evaluations=jnp.asarray(loss_evaluations, jnp.int32),
        grad_evaluations=jnp.asarray(grad_evaluations, jnp.int32),
        stats={
            n: jnp.asarray(v, jnp.int32 if n in _INTEGER_STATS else dt) for n, v in stats.items()
        },
    )


def with_stats(r: GradientEstimate, names: tuple[str, ...], **values: Any) -> GradientEstimate:
    """``r`` with exactly the stats ``names`` (internal helper: the branches of a
    ``lax.switch`` must return one structure): each from ``values``, else ``r``'s own, else
    NaN (−1 for ``choice``, 0 for ``widenings``), in ``r``'s float dtype. A filler takes
    the shape of ``r``'s counts, so a history's stacked estimates get one per step."""
    dt = jnp.result_type(*jax.tree_util.tree_leaves(r.estimate), float)
    filler = {"choice": -1, "widenings": 0}
    shape = jnp.shape(r.loss_evaluations)
    stats = {}
    for n in names:
        kind = jnp.int32 if n in _INTEGER_STATS else dt
        if n in values or n in r.stats:
            stats[n] = jnp.asarray(values[n] if n in values else r.stats[n], kind)
        else:
            stats[n] = jnp.full(shape, filler.get(n, jnp.nan), kind)
    return dataclasses.replace(r, stats=stats)


def flatten_loss(loss: Loss, theta: Any) -> tuple[Callable[[Array], Array], Array, Callable]:
    """``(f, x, unravel)`` with ``x = ravel(θ)`` and ``f(x) = L(unravel(x))`` a scalar.

    Raises:
        TypeError: ``loss`` is not callable or does not return a scalar.
        ValueError: θ has a non-finite leaf.
    """
    if not callable(loss):
        raise TypeError(f"loss must be a callable L(theta) -> scalar, got {loss!r}")
    # converted first, then checked in the dtype the computation uses (1e300 is refused in
    # float32, naming theta); integer and boolean leaves promoted to floats
    theta = as_arrays("theta", theta, floating=True)
    x, unravel = ravel_pytree(theta)

    def f(y: Array) -> Array:
        return jnp.asarray(loss(unravel(y))).astype(y.dtype)

    out = jax.eval_shape(f, x)
    if out.shape != ():
        raise TypeError(f"loss must return a scalar, got shape {out.shape}")
    return f, x, unravel


def mean_and_stats(samples: Array) -> tuple[Array, Array, Array]:
    """Sample mean, per-component standard error and per-sample variance (trace).

    For samples ``g_i`` (rows): ``ḡ``, ``sqrt(diag Ĉ / N)`` and ``σ̂² = tr Ĉ`` with
    ``Ĉ = 1/(N−1) Σ (g_i − ḡ)(g_i − ḡ)ᵀ``.
    """
    n = samples.shape[0]
    mean = jnp.mean(samples, axis=0)
    # squares of deviations scaled by their largest: the standard error stays finite for
    # any finite samples (a deviation of 1e200 squared would overflow to inf)
    dev = samples - mean
    scale = jnp.max(jnp.abs(dev), axis=0)
    safe = jnp.where(scale > 0, scale, 1.0)
    q = jnp.sum((dev / safe) ** 2, axis=0) / (n - 1)
    var_c = safe**2 * q
    return mean, safe * jnp.sqrt(q / n), jnp.sum(var_c)


SIGMA = Option("sigma", "σ, the smoothing standard deviation", float, "θ's units", 0.0, None, True)
NUM_SAMPLES = Option(
    "num_samples",
    "N, samples per estimate",
    int,
    "",
    2,
    2**31 - 1,  # XLA's array sizes: int32
)
ANTITHETIC = Option("antithetic", "antithetic ±z sample pairs (N even, >= 4)", bool)


class Cost(NamedTuple):
    """What one call of an estimator costs at most, for θ with ``dim`` components (declared
    by each estimator's :meth:`Estimator.cost`; the CLI's memory and time guards read it).

    Attributes:
        loss_evaluations: forward simulations, at most (the ``loss_evaluations`` a call
            reports is this or fewer: equal for a fixed estimator, fewer when an adaptive
            one stops early).
        grad_evaluations: gradient (forward + backward) evaluations, at most.
        batch: the most evaluations whose per-sample data are held at once (a ``vmap``
            over the samples, and the sample buffers an adaptive estimator keeps): memory
            grows with this.

    Example:
        >>> from diffsim.estimators import AlphaOrder
        >>> AlphaOrder(num_samples=64).cost(3)  # N + 1 losses and N gradients, vmapped
        Cost(loss_evaluations=65, grad_evaluations=64, batch=128)
    """

    loss_evaluations: int
    grad_evaluations: int
    batch: int

    @property
    def evaluations(self) -> int:
        """Loss plus gradient evaluations."""
        return self.loss_evaluations + self.grad_evaluations


class Estimator(eqx.Module):
    """Abstract gradient estimator: ``estimator(loss, theta, key) -> GradientEstimate``.

    Subclasses are final ``eqx.Module`` s whose physical options (σ, step δ, γ) are array
    fields — so ``eqx.tree_at`` can anneal them inside ``jit`` — and whose counts are static.

    Each declares what it is and what it takes as class-level data, read by the registry
    (:data:`diffsim.estimators.ESTIMATORS`), the CLI, the page and the tests — never by
    ``hasattr`` or by comparing names:

    * ``label`` / ``short_label`` / ``summary``: how it is shown;
    * ``options``: the :class:`Option` s its constructor takes (σ, N, ...);
    * ``randomized``: it uses the PRNG key; ``smoothing``: it estimates the gradient of the
      Gaussian-smoothed loss and has a σ (:class:`SmoothingEstimator`);
    * ``diagnostic``: a check to compare with, not a gradient to descend with;
    * ``sharded``: it takes ``devices=`` and splits its samples over them
      (:func:`diffsim.sharding.device_mesh`);
    * ``reports``: the quantities beyond :data:`BASE_QUANTITIES` its result reports;

    and what a call costs, :meth:`cost` (a :class:`Cost`: evaluations and the batch held at
    once, at most), which the CLI's guards read before anything is compiled.

    Example:
        >>> from diffsim.estimators import ESTIMATORS, Estimator
        >>> all(issubclass(cls, Estimator) for cls in ESTIMATORS.values())
        True
        >>> [cls.short_label for cls in ESTIMATORS.values()]  # the registry's order
        ['exact', 'FD', 'ZoBG', 'FoBG', 'AoBG', 'auto']
        >>> [name for name, cls in ESTIMATORS.items() if cls.smoothing]
        ['zeroth', 'first', 'alpha', 'auto']
        >>> ESTIMATORS["zeroth"].takes("antithetic"), ESTIMATORS["first"].takes("antithetic")
        (True, False)
    """

    label: ClassVar[str] = ""
    short_label: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    randomized: ClassVar[bool] = False
    smoothing: ClassVar[bool] = False
    diagnostic: ClassVar[bool] = False
    sharded: ClassVar[bool] = False
    reports: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def __call__(self, loss: Loss, theta: Any, key: Array) -> GradientEstimate:
        """Estimate the gradient of ``loss`` at ``theta`` using randomness from ``key``."""
        raise NotImplementedError

    @abc.abstractmethod
    def cost(self, dim: int) -> Cost:
        """What one call costs at most for θ with ``dim`` components (a plain loss of θ; a
        policy objective reports its own counts in its result)."""
        raise NotImplementedError

    def init(self, theta: Any) -> Any:
        """The state a loop carries from one call to the next (Optax style: ``state =
        estimator.init(θ₀)``, then ``estimate, state = estimator.update(loss, θ, key,
        state)`` each step); ``()`` for an estimator without state (the default)."""
        del theta
        return ()

    def update(
        self, loss: Loss, theta: Any, key: Array, state: Any
    ) -> tuple[GradientEstimate, Any]:
        """One step of a loop that carries state (traceable): the estimate and the next
        state. Without state (the default): ``estimator(loss, theta, key)``, and ``state``
        as it was.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> from diffsim.estimators import FiniteDifference
            >>> est = FiniteDifference()
            >>> state = est.init(jnp.asarray(1.0))
            >>> r, state = est.update(jnp.sin, jnp.asarray(1.0), jax.random.PRNGKey(0), state)
            >>> state, round(float(r.estimate), 4)
            ((), 0.5403)
        """
        return self(loss, theta, key), state

    @classmethod
    def takes(cls, option: str) -> bool:
        """Whether the constructor takes ``option`` (one of :attr:`options`)."""
        return any(o.name == option for o in cls.options)

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        """Each option's default, as the constructor would use it."""
        fields = {f.name: f for f in dataclasses.fields(cls)}

        def default(f: dataclasses.Field) -> Any:
            if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            return f.default

        return {o.name: default(fields[o.name]) for o in cls.options}

    def smoothing_scale(self) -> Array | None:
        """σ for a smoothing estimator, ``None`` for the others."""
        return None

    def with_sigma(self, sigma: Any) -> Estimator:
        """This estimator with smoothing scale ``sigma`` (inside ``jit`` too: σ is an array
        field); an estimator without σ returns itself, so annealing applies to any."""
        return self


class SmoothingEstimator(Estimator):
    """An estimator of the gradient of the Gaussian-smoothed loss
    :math:`F(θ) = \\mathbb E_{w\\sim N(0, σ^2 I)} L(θ + w)`; it has a σ to anneal.

    Example:
        >>> from diffsim.estimators import FiniteDifference, SmoothingEstimator, ZerothOrder
        >>> est = ZerothOrder(sigma=0.5)
        >>> isinstance(est, SmoothingEstimator), float(est.smoothing_scale())
        (True, 0.5)
        >>> float(est.with_sigma(0.25).smoothing_scale())  # a copy with σ annealed
        0.25
        >>> isinstance(FiniteDifference(), SmoothingEstimator)  # no σ: nothing to anneal
        False
    """

    smoothing: ClassVar[bool] = True
    randomized: ClassVar[bool] = True
    sigma: eqx.AbstractVar[Array]

    def smoothing_scale(self) -> Array:
        return self.sigma

    def with_sigma(self, sigma: Any) -> SmoothingEstimator:
        return eqx.tree_at(lambda e: e.sigma, self, sigma)
