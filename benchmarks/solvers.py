"""Every solver at its best reasonable configuration, counted in evaluations (issue 45).

    python -m benchmarks.solvers [--tasks push-soft,push-stiff,...] [--seeds 5] [--budget 10000]
                                 [--quick] [--no-es] [--figure docs/figures/solvers-curves.png]

Per task and seed, every method from the task's start (the wall and the bouncing ball:
seed i starts at the i-th of ``seeds`` evenly spread starts, 24 on the wall by default), each
capped at ``--budget`` evaluations (10,000):

* ``default (decide)``: ``diffsim.optimize(loss, θ0, key=...)``, no estimator, no
  optimizer (:class:`diffsim.Decide`);
* ``exact + L-BFGS``: ``optimize(loss, θ0, Exact(), optimizer=optax.lbfgs())``;
* ``FoBG/ZoBG/AoBG + Adam``: the task's σ and N, σ annealed by ``optimize``'s default (to
  5 % over 60 % of the steps), Adam at each learning rate of :data:`LR_SWEEP` times the
  task's base rate; the best rate is reported;
* ``paper recipe``: the task's own recipe (:meth:`diffsim.Task.train` with the estimator:
  its fixed σ, N, optimiser and step; the wall and the ball: the wall study's Adam with a
  cosine-decayed rate and σ annealed), with FoBG, ZoBG and AoBG; the best is reported;
* ``OpenAI-ES`` and ``sep-CMA-ES`` (evosax, :func:`benchmarks.control.evolution`: one jit,
  populations by ``vmap``), the step σ swept over :data:`SIGMA_SWEEP` times the task's σ
  (OpenAI-ES's Adam rate is 0.3 σ); the best is reported.

"Best" in a sweep: most seeds within 0.5 % of the best loss, then the lowest median loss at
the cap, then the fewest median evaluations to it. Brax APG is measured in
:mod:`benchmarks.control` (``--task pendulum tennis``), not here.

Counting, the same for every method: one rollout is one evaluation; a gradient (forward and
backward pass) is one evaluation, as the library counts it. Every ``optimize`` run's
``history.evaluations`` gives its count after each step (line-search trials and the
doctor's checks included); an ES generation costs its population. A policy objective
(tennis, the pendulum) averages ``num_states`` rollouts: a call of it costs ``num_states``
(L-BFGS's values and gradients, an ES candidate, the default's line searches and its reads
of a sampling phase's lowest iterate, as the library counts them:
:func:`diffsim.policies.rollouts_per_call`) and a sampled estimator's sample one. The
learning curve is the best-so-far loss (the task's noise-free loss, at each iterate or ES
mean, evaluated for the record and not counted) against the evaluations spent before that
iterate. "Within 0.5 %" is ``L <= L* + 0.005 |L*|`` for the lowest loss L* of any run on
the task, but at least the task's own tolerance where its loss is a squared miss (the
wall: 5 cm, the ball: 1 cm). Wall time: the median over the seeds after the first (which compiles).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax

import diffsim
from diffsim import TASKS
from diffsim.estimators import Exact, make_estimator
from diffsim.policies import PolicyObjective

from . import control, success

BUDGETS = (100, 1_000, 10_000)
NEAR = 0.005
"""Within 0.5 % of the best loss any method reached."""
LR_SWEEP = (0.3, 1.0, 3.0)
"""Adam's learning rates, times the task's base rate."""
BASE_LR = 0.1
"""Adam's base rate where a task's recipe has none (the trajectory optimisations, tennis)."""
SIGMA_SWEEP = (0.3, 1.0, 3.0)
"""The evolution strategies' initial step σ, times the task's σ."""
ESTIMATORS = {"first": "FoBG", "zeroth": "ZoBG", "alpha": "AoBG"}
DEFAULT_TASKS = ("push-soft", "push-stiff", "friction", "tennis", "pendulum", "reacher-open",
                 "bounce", "wall")  # fmt: skip
STEPS_CAP = 2_000
"""The most iterations of one ``optimize`` run (its history is kept per iteration)."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One task as the benchmark runs it.

    Attributes:
        name: the task's name.
        loss: L(θ), noise-free.
        start: ``start(seed, seeds) -> θ0``.
        per_call: rollouts in one call of ``loss`` (a policy objective's ``num_states``).
        sigma, samples: the task's σ and N.
        lr: Adam's base learning rate (swept by :data:`LR_SWEEP`).
        floor: the least gap to the best loss that counts as reaching it (a tolerance).
        recipe: ``recipe(estimator_name, θ0, key, budget) -> OptimizeResult``.
        seeds: the default number of seeds.
    """

    name: str
    loss: Callable[[Any], Any]
    start: Callable[[int, int], Any]
    per_call: int
    sigma: float
    samples: int
    lr: float
    floor: float
    recipe: Callable[..., Any]
    seeds: int = 5


def _task_problem(name: str) -> Problem:
    spec = TASKS[name]
    loss, theta0 = spec.problem()
    per_call = loss.num_states if isinstance(loss, PolicyObjective) else 1
    # the base rate: the task's Adam, else 0.1 (the forces' and tennis' Θ's: optimize's
    # default 0.025 was the sweep's best only at 1,000 evaluations, 3x at its edge)
    base = spec.adam_rate or BASE_LR

    def recipe(est, theta, key, budget):
        return spec.train(est, key=key, budget=budget)

    return Problem(name, loss, lambda seed, n: theta0, per_call, spec.sigma, spec.num_samples,
                   base, 0.0, recipe)  # fmt: skip


def _study_problem(task: success.Task, seeds: int) -> Problem:
    study = task.study

    def recipe(est, theta, key, budget):
        e = make_estimator(est, sigma=task.sigma, num_samples=task.samples)
        return study.optimize(theta, e, key=key, steps=task.steps, lr=task.lr)

    def start(seed, n):
        return jnp.asarray(task.starts(n)[seed])

    return Problem(task.name, study.loss, start, 1, task.sigma, task.samples, task.lr,
                   study.tolerance**2, recipe, seeds)  # fmt: skip


def problems(names: list[str]) -> list[Problem]:
    """The benchmark's problems by name: :data:`diffsim.TASKS`' and ``bounce``, ``wall``
    (:mod:`benchmarks.success`)."""
    out = []
    for n in names:
        if n == "wall":
            out.append(_study_problem(success.TASKS["wall"](), 24))
        elif n == "bounce":
            out.append(_study_problem(success.TASKS["bounce"](), 5))
        else:
            out.append(_task_problem(n))
    return out


# ---- the curves: evaluations and best-so-far losses ------------------------------------


def best_so_far(spent: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The curve sorted by evaluations with the running minimum of the loss (NaN and inf
    never count as reached)."""
    order = np.argsort(spent, kind="stable")
    y = np.where(np.isfinite(loss), loss, np.inf)[order]
    return np.asarray(spent, float)[order], np.minimum.accumulate(y)


def evaluations_to(spent: np.ndarray, loss: np.ndarray, threshold: float) -> float:
    """The fewest evaluations after which the best loss so far is ``<= threshold`` (``inf``
    if never).

    >>> evaluations_to(np.array([0, 10, 20, 30]), np.array([5.0, 3.0, 4.0, 1.0]), 3.0)
    10.0
    >>> evaluations_to(np.array([0, 10]), np.array([5.0, 4.0]), 1.0)
    inf
    """
    x, y = best_so_far(spent, loss)
    hit = np.nonzero(y <= threshold)[0]
    return float(x[hit[0]]) if hit.size else math.inf


def loss_at(spent: np.ndarray, loss: np.ndarray, budget: float) -> float:
    """The best loss so far once ``budget`` evaluations are spent (``inf`` before the
    first point).

    >>> loss_at(np.array([0, 10, 20]), np.array([5.0, 3.0, 1.0]), 15)
    3.0
    """
    x, y = best_so_far(spent, loss)
    k = np.searchsorted(x, budget, side="right") - 1
    return float(y[k]) if k >= 0 else math.inf


def threshold(best: float, floor: float) -> float:
    """Within :data:`NEAR` of the best loss, at least ``floor`` above it.

    >>> threshold(1000.0, 0.0), threshold(0.0, 0.0025)
    (1005.0, 0.0025)
    """
    return best + max(NEAR * abs(best), floor)


_NO_CHECK = ("L-BFGS converged", "no progress: two sampling phases in a row found no lower loss")
"""The reasons of :class:`diffsim.Decision` s taken without a check (and a stop for want of
budget, :func:`checked`)."""


_NO_ROOM = "the budget left"  # a stop where the budget had no room for a check


def checked(d: diffsim.Decision) -> bool:
    """Whether a check preceded the decision ``d`` (and so, on a policy, a fresh batch)."""
    return d.reason not in _NO_CHECK and not d.reason.startswith(_NO_ROOM)


@dataclasses.dataclass
class Run:
    """One run: its curve (evaluations before each iterate, loss there; the final point
    last), its evaluations in all, its wall time and ``optimize``'s result (``None`` for
    an ES)."""

    spent: np.ndarray
    loss: np.ndarray
    total: int
    seconds: float
    result: Any = None


def _optimize_run(p: Problem, r, decide: bool, seconds: float) -> Run:
    x, y = control._curve(r)  # the library counts in rollouts, a policy's batch call too
    if decide and isinstance(p.loss, PolicyObjective):
        # the default's later phases see a redrawn batch: the curve is the task's own loss
        spent = np.asarray(r.history.evaluations)
        ran = np.r_[True, np.diff(spent) > 0]
        losses = np.asarray(jax.lax.map(p.loss, r.history.theta))[ran]
        y = np.r_[losses, float(r.loss)]
    return Run(x, y, int(r.evaluations), seconds, r)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t


def _steps(p: Problem, budget: int, per_step: int) -> int:
    return max(1, min(STEPS_CAP, -(-budget // per_step) + 1))


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of a method: ``run(seed, seeds) -> Run``."""

    family: str
    setting: str
    run: Callable[[int, int], Run]


def _decide(p: Problem, budget: int) -> Config:
    def run(seed, n):
        key = jax.random.PRNGKey(seed)
        r, s = _timed(lambda: diffsim.optimize(p.loss, p.start(seed, n), steps=STEPS_CAP,
                                               key=key, budget=budget))  # fmt: skip
        return _optimize_run(p, r, True, s)

    return Config("default (decide)", "optimize(loss, θ0, key=...)", run)


_LBFGS = optax.lbfgs()  # one object: optimize compiles once per loss for it


def _lbfgs(p: Problem, budget: int) -> Config:
    calls = max(budget // p.per_call, 1)  # its values and gradients: whole calls of L

    def run(seed, n):
        r, s = _timed(lambda: diffsim.optimize(
            p.loss, p.start(seed, n), Exact(), optimizer=_LBFGS, steps=min(calls, STEPS_CAP),
            key=jax.random.PRNGKey(seed), budget=budget))  # fmt: skip
        return _optimize_run(p, r, False, s)

    return Config("exact + L-BFGS", "optax.lbfgs(), zoom line search", run)


def _adam(p: Problem, name: str, scale: float, budget: int) -> Config:
    est = make_estimator(name, sigma=p.sigma, num_samples=p.samples)
    lr = p.lr * scale
    opt = optax.adam(lr)
    dim = int(jax.flatten_util.ravel_pytree(p.start(0, 1))[0].size)
    cost = est.cost(dim)
    steps = _steps(p, budget, max(cost.loss_evaluations + cost.grad_evaluations, 1))

    def run(seed, n):
        r, s = _timed(lambda: diffsim.optimize(p.loss, p.start(seed, n), est, steps=steps,
                                               key=jax.random.PRNGKey(seed), optimizer=opt,
                                               budget=budget))  # fmt: skip
        return _optimize_run(p, r, False, s)

    return Config(f"{ESTIMATORS[name]} + Adam", f"lr {lr:.3g}, σ {p.sigma:g} annealed", run)


def _recipe(p: Problem, name: str, budget: int) -> Config:
    def run(seed, n):
        r, s = _timed(lambda: p.recipe(name, p.start(seed, n), jax.random.PRNGKey(seed), budget))
        return _optimize_run(p, r, False, s)

    return Config("paper recipe", ESTIMATORS[name], run)


def _es(p: Problem, name: str, scale: float, budget: int, seeds: int) -> Config:
    template = p.start(0, seeds)
    scalar = jnp.ndim(template) == 0  # evosax searches vectors: a scalar θ as θ[0]
    loss = (lambda t: p.loss(t[0])) if scalar else p.loss
    sigma = p.sigma * scale
    go, population, generations = control.evolution(
        name, loss, jnp.reshape(template, (1,)) if scalar else template, sigma, budget,
        p.per_call)  # fmt: skip

    def run(seed, n):
        start = p.start(seed, n)
        start = jnp.reshape(start, (1,)) if scalar else start
        (_, curve), s = _timed(lambda: go(jax.random.PRNGKey(seed), start))
        spent = population * p.per_call * np.arange(generations + 1)
        losses = np.r_[float(loss(start)), np.asarray(curve)]
        return Run(spent, losses, int(spent[-1]), s)

    setting = f"σ {sigma:.3g}, population {population}"
    return Config(name, setting, run)


def configs(p: Problem, budget: int, es: bool, seeds: int) -> list[Config]:
    """Every configuration run on ``p``: the default, L-BFGS, each estimator with Adam at
    each rate, the recipe with each estimator, each ES at each σ."""
    out = [_decide(p, budget), _lbfgs(p, budget)]
    out += [_adam(p, n, s, budget) for n in ESTIMATORS for s in LR_SWEEP]
    out += [_recipe(p, n, budget) for n in ESTIMATORS]
    if es:
        out += [_es(p, n, s, budget, seeds) for n in control.ES for s in SIGMA_SWEEP]
    return out


def run_problem(p: Problem, seeds: int, budget: int, es: bool,
                log: Callable[[str], None] = print) -> dict[Config, list[Run]]:  # fmt: skip
    """Every configuration on every seed, each curve cut at ``budget``."""
    out: dict[Config, list[Run]] = {}
    for c in configs(p, budget, es, seeds):
        t = time.perf_counter()
        runs = []
        for seed in range(seeds):
            r = c.run(seed, seeds)
            keep = r.spent <= budget
            runs.append(Run(r.spent[keep], r.loss[keep], r.total, r.seconds, r.result))
        out[c] = runs
        best = np.median([np.min(np.where(np.isfinite(r.loss), r.loss, np.inf), initial=np.inf)
                          for r in runs])  # NaN and inf never count as reached  # fmt: skip
        log(
            f"  {p.name:<12} {c.family:<18} {c.setting:<34} median best {best:.6g}  "
            f"{time.perf_counter() - t:.0f} s"
        )
    return out


# ---- the table ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """A method's chosen configuration on one task, summarised over the seeds."""

    family: str
    setting: str
    reach: list[float]  # evaluations to the threshold per seed (inf: not reached)
    at: dict[int, list[float]]  # budget -> best loss so far per seed (inf: not run that far)
    total: list[int]
    seconds: list[float]


def _summary(c: Config, runs: list[Run], thr: float, budget: int) -> Row:
    reach = [evaluations_to(r.spent, r.loss, thr) for r in runs]
    at = {b: [loss_at(r.spent, r.loss, b) if b <= budget else math.inf for r in runs]
          for b in BUDGETS}  # fmt: skip
    return Row(c.family, c.setting, reach, at, [r.total for r in runs],
               [r.seconds for r in runs])  # fmt: skip


def _rank(row: Row, budget: int) -> tuple[float, float, float]:
    reached = sum(math.isfinite(x) for x in row.reach)
    final = [loss_at_cap for loss_at_cap in row.at[max(b for b in BUDGETS if b <= budget)]]
    return (-reached, float(np.median(final)), float(np.median(row.reach)))


def rows(results: dict[Config, list[Run]], floor: float, budget: int) -> tuple[list[Row], float]:
    """Each method's best configuration (most seeds reaching the threshold, then the lowest
    median loss at the cap, then the fewest evaluations to the threshold), and the best loss
    any run reached."""
    best = min(float(np.min(r.loss, initial=np.inf)) for runs in results.values() for r in runs)
    thr = threshold(best, floor)
    chosen: dict[str, Row] = {}
    for c, runs in results.items():
        row = _summary(c, runs, thr, budget)
        if c.family not in chosen or _rank(row, budget) < _rank(chosen[c.family], budget):
            chosen[c.family] = row
    return list(chosen.values()), best


def _spread(v: list[float], fmt: Callable[[float], str]) -> str:
    if not all(math.isfinite(x) for x in v) and not math.isfinite(float(np.median(v))):
        return "not reached" if v else "—"
    lo, hi = min(v), max(v)
    top = fmt(hi) if math.isfinite(hi) else "∞"
    return f"{fmt(float(np.median(v)))} [{fmt(lo)}, {top}]"


def _loss(x: float) -> str:
    return f"{x:.5g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def table(task: str, rows_: list[Row], best: float, thr: float, budget: int) -> list[str]:
    """The Markdown table of one task."""
    out = [
        f"**{task}**: best loss of any run {_loss(best)}; within 0.5 %: L <= {_loss(thr)}",
        "",
        "| method | best setting | seeds reaching | evaluations to within 0.5 % | "
        + " | ".join(f"loss @ {b:,}" for b in BUDGETS)
        + " | evaluations used | run s |",
        "|---|---|---|---|" + "---|" * len(BUDGETS) + "---|---|",
    ]
    for r in rows_:
        reached = sum(math.isfinite(x) for x in r.reach)
        cells = [_spread(r.at[b], _loss) if b <= budget else "—" for b in BUDGETS]
        _, run_s = control._compile_and_run(r.seconds)
        out.append(
            f"| {r.family} | {r.setting} | {reached}/{len(r.reach)} "
            f"| {_spread(r.reach, lambda x: f'{x:,.0f}')} | "
            + " | ".join(cells)
            + f" | {int(np.median(r.total)):,} | {run_s:.2f} |"
        )
    return out


def _count(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "not reached"


def goals(task: str, rows_: list[Row]) -> str:
    """The issue's goals on one task: the default within 0.5 % with at most 1/10 of the best
    black-box method's evaluations, and at most 2x exact + L-BFGS's."""
    by = {r.family: r for r in rows_}
    d = by["default (decide)"]
    med = float(np.median(d.reach))
    parts = [f"default reaches on {sum(map(math.isfinite, d.reach))}/{len(d.reach)} seeds, "
             f"median {med:,.0f} evaluations" if math.isfinite(med)
             else "default: not reached (median)"]  # fmt: skip
    es = [float(np.median(by[n].reach)) for n in control.ES if n in by]
    if es:
        b = min(es)
        ok = math.isfinite(med) and (not math.isfinite(b) or med <= b / 10)
        parts.append(f"best ES {_count(b)}: {'meets' if ok else 'misses'} <= 1/10")
    lb = float(np.median(by["exact + L-BFGS"].reach))
    ok = math.isfinite(med) and (not math.isfinite(lb) or med <= 2 * lb)
    parts.append(f"exact + L-BFGS {_count(lb)}: {'meets' if ok else 'misses'} <= 2x")
    return f"- {task}: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.solvers",
                                description=(__doc__ or "").split("\n")[0])  # fmt: skip
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                   help=f"comma-separated, of {','.join(DEFAULT_TASKS)}")  # fmt: skip
    p.add_argument("--seeds", type=int, default=None,
                   help="seeds per task (default 5; the wall: 24 starts)")  # fmt: skip
    p.add_argument("--budget", type=int, default=BUDGETS[-1], help="evaluations per run")
    p.add_argument("--quick", action="store_true", help="2 seeds, 1,000 evaluations a run")
    p.add_argument("--no-es", dest="es", action="store_false", help="skip the ES (evosax)")
    p.add_argument("--figure", help="draw the learning curves (a .png path)")
    p.add_argument("--save", help="also write the reported curves to this .json")
    p.add_argument("--figure-from", nargs="+", metavar="JSON",
                   help="draw --figure from earlier runs' --save files; run nothing")  # fmt: skip
    a = p.parse_args(argv)
    if a.figure_from:
        if not a.figure:
            p.error("--figure-from needs --figure")
        draw(a.figure, load_curves(a.figure_from))
        return 0
    names = [n.strip() for n in a.tasks.split(",") if n.strip()]
    unknown = sorted(set(names) - set(DEFAULT_TASKS))
    if unknown:
        p.error(f"--tasks: unknown {unknown}; choose from {', '.join(DEFAULT_TASKS)}")
    if a.seeds is not None and a.seeds < 1:
        p.error(f"--seeds must be >= 1, got {a.seeds}")
    if a.budget < 1:
        p.error(f"--budget must be >= 1, got {a.budget}")
    budget = min(a.budget, 1_000) if a.quick else a.budget
    if a.es:
        control._evosax()  # at once: how to install it
    jax.config.update("jax_enable_x64", True)
    curves: dict[str, dict[str, list]] = {}
    verdicts = []
    for prob in problems(names):
        seeds = 2 if a.quick else (a.seeds or prob.seeds)
        results = run_problem(prob, seeds, budget, a.es, lambda s: print(s, file=sys.stderr,
                                                                           flush=True))  # fmt: skip
        chosen, best = rows(results, prob.floor, budget)
        thr = threshold(best, prob.floor)
        print("\n".join(table(f"{prob.name} ({seeds} seeds)", chosen, best, thr, budget)) + "\n",
              flush=True)  # fmt: skip
        verdicts.append(goals(prob.name, chosen))
        picked = {(r.family, r.setting) for r in chosen}
        curves[prob.name] = {
            c.family: [best_so_far(r.spent, r.loss) for r in runs]
            for c, runs in results.items()
            if (c.family, c.setting) in picked
        }
    print("Goals (issue 45):")
    print("\n".join(verdicts))
    if a.save:
        with open(a.save, "w") as f:
            json.dump({t: {k: [(x.tolist(), y.tolist()) for x, y in v] for k, v in c.items()}
                       for t, c in curves.items()}, f)  # fmt: skip
    if a.figure:
        draw(a.figure, curves)
    return 0


def load_curves(paths: list[str]) -> dict[str, dict[str, list]]:
    """The curves of several ``--save`` files, one task's from each file it is in."""
    out: dict[str, dict[str, list]] = {}
    for path in paths:
        with open(path) as f:
            for task, rows_ in json.load(f).items():
                out[task] = {k: [(np.asarray(x), np.asarray(y, float)) for x, y in v]
                             for k, v in rows_.items()}  # fmt: skip
    return out


def draw(path: str, curves: dict[str, dict[str, list]]) -> None:
    """:func:`benchmarks.control.figure` of the best-so-far curves; a loss of exactly 0
    (the wall's, the ball's) drawn at 1e-12 on the log axis."""

    def floor(y):
        return np.maximum(np.where(np.isfinite(y), y, np.nan), 1e-12)

    floored = {t: {k: [(x, floor(y)) for x, y in v] for k, v in c.items()}
               for t, c in curves.items()}  # fmt: skip
    control.figure(path, floored)


if __name__ == "__main__":
    raise SystemExit(main())
